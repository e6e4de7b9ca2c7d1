"""Run a stream of gradients and flushes through :class:`design.GradientCompressor` in the
Amaranth simulator, and record every handshake.

Operations are the reference model's: ``("grad", addr, grad, threshold)`` and ``("flush",)``.
A gradient is offered (after an optional gap with ``valid`` low) and held, with a stable
payload, until the compressor takes it. A flush stops offering gradients, raises ``flush``,
waits for ``idle``, checks that ``idle`` stays high for a few cycles, and drops ``flush``.

The driver also checks the DRAM stream's rules on every cycle (``valid`` holds with a stable
payload until taken) and raises :class:`AssertionError` on the first cycle that breaks them.
"""

import random
from dataclasses import dataclass, field

from amaranth.sim import Simulator

from model import CAUSES

__all__ = ["SimResult", "simulate", "always", "every_other", "random_ready"]


def always(cycle):
    """DRAM is always ready."""
    return True


def every_other(cycle):
    """DRAM is ready half of the time."""
    return cycle % 2 == 0


def random_ready(seed, probability=0.5, max_stall=None):
    """DRAM ready with the given probability; ``max_stall`` bounds a run of not-ready cycles."""
    rng = random.Random(seed)
    stalled = 0

    def ready(cycle):
        nonlocal stalled
        if (max_stall is not None and stalled >= max_stall) or rng.random() < probability:
            stalled = 0
            return True
        stalled += 1
        return False
    return ready


@dataclass
class SimResult:
    """What a simulation run saw."""
    #: Gradients accepted, as ``(addr, grad, threshold)``, in order.
    accepted: list = field(default_factory=list)
    #: Cycle of each acceptance.
    accept_cycles: list = field(default_factory=list)
    #: DRAM writes as ``(addr, value)``, in order.
    writes: list = field(default_factory=list)
    #: Cycle of each DRAM write.
    write_cycles: list = field(default_factory=list)
    #: Cause of each write entering L2 (names of :data:`model.CAUSES`), in order.
    causes: list = field(default_factory=list)
    #: Cycles with a gradient offered but not taken, outside flushes.
    input_stall_cycles: int = 0
    #: Cycles with DRAM valid and not ready.
    dram_stall_cycles: int = 0
    hits: int = 0
    misses: int = 0
    #: Cycles from raising flush to idle, one per flush.
    flush_cycles: list = field(default_factory=list)
    #: Total cycles simulated.
    cycles: int = 0


_STROBES = ("direct_write", "accum_write", "max_updates_write", "evict_write", "flush_write")


def simulate(dut, ops, *, gap=None, dram_ready=always, idle_hold=3, flush_timeout=None,
             max_cycles=None, vcd=None):
    """Run ``ops`` through ``dut`` and return a :class:`SimResult`.

    Parameters
    ----------
    dut : design.GradientCompressor
    ops : iterable
        ``("grad", addr, grad, threshold)`` and ``("flush",)`` operations.
    gap : callable or None
        ``gap(index)`` gives the idle cycles to leave before offering gradient ``index``.
    dram_ready : callable
        ``dram_ready(cycle)`` gives DRAM's ready for that cycle.
    idle_hold : int
        Cycles to keep ``flush`` high after ``idle`` rises (checking it stays high).
    flush_timeout : int or None
        Cycles a flush may take before the run fails; by default a generous bound from the
        configuration.
    max_cycles : int or None
        Cycles the whole run may take before it fails.
    vcd : str or None
        Write a waveform to this path.
    """
    ops = list(ops)
    result = SimResult()
    if flush_timeout is None:
        flush_timeout = 4 * (dut.sets * (dut.ways + 1) + dut.fifo_depth) + 1000
    strobes = [getattr(dut, name) for name in _STROBES]

    async def testbench(ctx):
        cycle = 0
        last_dram = None   # (addr, value) offered and not taken in the last cycle

        async def tick(offering):
            nonlocal cycle, last_dram
            ctx.set(dut.dram_out.ready, dram_ready(cycle))
            in_fire = offering and ctx.get(dut.grad_in.ready)
            if offering and not in_fire and not ctx.get(dut.flush):
                result.input_stall_cycles += 1
            if in_fire:
                result.accepted.append((ctx.get(dut.grad_in.p.addr), ctx.get(dut.grad_in.p.grad),
                                        ctx.get(dut.threshold)))
                result.accept_cycles.append(cycle)
            dram_valid = ctx.get(dut.dram_out.valid)
            if last_dram is not None:
                assert dram_valid, f"cycle {cycle}: dram_out.valid fell before it was taken"
                payload = (ctx.get(dut.dram_out.p.addr), ctx.get(dut.dram_out.p.value))
                assert payload == last_dram, \
                    f"cycle {cycle}: dram_out payload changed from {last_dram} to {payload}"
            last_dram = None
            if dram_valid:
                payload = (ctx.get(dut.dram_out.p.addr), ctx.get(dut.dram_out.p.value))
                if ctx.get(dut.dram_out.ready):
                    result.writes.append(payload)
                    result.write_cycles.append(cycle)
                else:
                    result.dram_stall_cycles += 1
                    last_dram = payload
            for name, strobe in zip(CAUSES, strobes):
                if ctx.get(strobe):
                    result.causes.append(name)
            result.hits += ctx.get(dut.l1_hit)
            result.misses += ctx.get(dut.l1_miss)
            await ctx.tick()
            cycle += 1
            if max_cycles is not None and cycle > max_cycles:
                raise AssertionError(f"the run took more than {max_cycles} cycles")
            return in_fire

        for index, op in enumerate(ops):
            if op[0] == "grad":
                _, addr, grad, threshold = op
                for _ in range(gap(index) if gap else 0):
                    await tick(False)
                ctx.set(dut.threshold, threshold)
                ctx.set(dut.grad_in.p.addr, addr)
                ctx.set(dut.grad_in.p.grad, grad)
                ctx.set(dut.grad_in.valid, 1)
                while not await tick(True):
                    pass
                ctx.set(dut.grad_in.valid, 0)
            elif op[0] == "flush":
                ctx.set(dut.flush, 1)
                start = cycle
                while not ctx.get(dut.idle):
                    if cycle - start > flush_timeout:
                        raise AssertionError(f"flush raised at cycle {start} did not reach idle "
                                             f"within {flush_timeout} cycles")
                    await tick(False)
                result.flush_cycles.append(cycle - start)
                for _ in range(idle_hold):
                    await tick(False)
                    assert ctx.get(dut.idle), f"cycle {cycle}: idle fell while flush was high"
                ctx.set(dut.flush, 0)
            else:
                raise ValueError(f"unknown operation {op!r}")
        result.cycles = cycle

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    if vcd:
        with sim.write_vcd(vcd):
            sim.run()
    else:
        sim.run()
    return result
