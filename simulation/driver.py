"""Run a stream of gradients and flushes through :class:`design.GradientCompressor` in the
Amaranth simulator, and record every handshake.

Operations are the reference model's: ``("grad", addr, grad, threshold)`` (on lines, the line
model's ``("line", line, grads, mask, threshold)``: a compressor with ``lanes > 1``),
``("flush",)``, ``("modes", {input: value})`` (run-time mode inputs,
:data:`design.params.MODES_OFF`, set before the next gradient is offered) and
``("seed", value)`` (``lfsr_seed`` and ``lfsr_load`` held until the compressor is idle, then one
cycle more). A gradient is offered (after an optional gap with ``valid`` low) and held, with a
stable payload, until the compressor takes it. A flush stops offering gradients, raises
``flush``, waits for ``idle``, checks that ``idle`` stays high for a few cycles, and drops
``flush``. Every operation is checked before the first cycle (:func:`model.ops.check_ops`, the
reference model's checks): a value that does not fit its port is refused, not wrapped.

The driver also checks the DRAM stream's rules on every cycle (``valid`` holds with a stable
payload until taken) and raises :class:`AssertionError` on the first cycle that breaks them.
"""

from dataclasses import dataclass, field

from amaranth.sim import Simulator

from gradient_compressor.design.params import port, unused
from gradient_compressor.model import CAUSES
from gradient_compressor.model.ops import check_ops, operations

__all__ = ["SimResult", "simulate", "run_testbench", "always", "every_other", "random_ready",
           "periodic_ready", "SplitMix64"]


def always(cycle):
    """DRAM is always ready."""
    return True


def every_other(cycle):
    """DRAM is ready half of the time."""
    return cycle % 2 == 0


_MASK64 = (1 << 64) - 1


class SplitMix64:
    """A small 64-bit generator (SplitMix64) that the compiled simulator
    (``simulation/cxxrtl_driver.cc``) implements identically, so that a seeded DRAM ready
    pattern is the same cycle for cycle in both simulators."""

    def __init__(self, seed):
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"seed must be an integer, not {seed!r}")
        self.state = seed & _MASK64

    def next(self):
        """The next 64-bit output."""
        self.state = (self.state + 0x9E3779B97F4A7C15) & _MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        return z ^ (z >> 31)

    def random(self):
        """A float in ``[0, 1)``: the top 53 bits of :meth:`next` over ``2**53`` (exact)."""
        return (self.next() >> 11) * (1.0 / 9007199254740992.0)


class random_ready:
    """DRAM ready with the given probability; ``max_stall`` bounds a run of not-ready cycles.

    ``random_ready(seed, probability=0.5, max_stall=None)`` is a callable ``ready(cycle)``
    (called once per cycle, in order). The sequence comes from :class:`SplitMix64` seeded with
    the integer ``seed``, so the compiled simulator can reproduce it from the parameters.
    """

    def __init__(self, seed, probability=0.5, max_stall=None):
        if max_stall is not None and (isinstance(max_stall, bool) or not isinstance(max_stall, int)
                                      or max_stall < 0):
            raise ValueError("max_stall must be None or a non-negative integer, "
                             f"not {max_stall!r}")
        self.seed, self.probability, self.max_stall = seed, float(probability), max_stall
        self._rng = SplitMix64(seed)
        self._stalled = 0
        #: Calls made so far.
        self.calls = 0

    def __call__(self, cycle):
        self.calls += 1
        if (self.max_stall is not None and self._stalled >= self.max_stall) \
                or self._rng.random() < self.probability:
            self._stalled = 0
            return True
        self._stalled += 1
        return False

    def __repr__(self):
        return (f"random_ready({self.seed!r}, probability={self.probability!r}, "
                f"max_stall={self.max_stall!r})")


class periodic_ready:
    """DRAM ready following ``pattern`` (a string of ``0``/``1`` or a sequence of booleans),
    repeated: ``ready(cycle) = pattern[cycle % len(pattern)]``."""

    def __init__(self, pattern):
        if isinstance(pattern, str):
            if not pattern or set(pattern) - {"0", "1"}:
                raise ValueError(f"pattern must be a non-empty string of 0 and 1, not {pattern!r}")
            bits = tuple(c == "1" for c in pattern)
        else:
            bits = tuple(bool(b) for b in pattern)
            if not bits:
                raise ValueError("pattern must not be empty")
        self.pattern = bits

    def __call__(self, cycle):
        return self.pattern[cycle % len(self.pattern)]

    def __repr__(self):
        return f"periodic_ready({''.join('1' if b else '0' for b in self.pattern)!r})"


@dataclass
class SimResult:
    """What a simulation run saw."""
    #: Gradients accepted, as ``(addr, grad, threshold)``, in order (on lines, beats as
    #: ``(line, grads, mask, threshold)``).
    accepted: list = field(default_factory=list)
    #: Cycle of each acceptance.
    accept_cycles: list = field(default_factory=list)
    #: DRAM writes as ``(addr, value)``, in order (on lines, one per lane written).
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
    #: The threshold in force at each acceptance (``current_threshold``,
    #: ``dut.CURRENT_THRESHOLD_DELAY`` cycles later).
    accept_thresholds: list = field(default_factory=list)
    #: Accounted discards (dual threshold) as ``(addr, error)``, in order.
    discards: list = field(default_factory=list)
    #: ``(discard_count, discard_sum)`` once each flush barrier is complete.
    step_discards: list = field(default_factory=list)
    #: Gradients accepted in an enabled bypass window.
    bypassed: int = 0
    #: Gradients accepted (on lines, the beats' masked lanes).
    gradients: int = 0


#: The cause strobes, in the order of :data:`model.CAUSES`.
_STROBES = ("direct_write", "accum_write", "max_updates_write", "evict_write", "flush_write",
            "stochastic_write")


def simulate(dut, ops, *, gap=None, dram_ready=always, idle_hold=3, flush_timeout=None,
             ready_timeout=None, max_cycles=None, vcd=None, vcd_cycles=None):
    """Run ``ops`` through ``dut`` and return a :class:`SimResult`.

    Parameters
    ----------
    dut : design.GradientCompressor
    ops : iterable
        The operations (see the module's description; :mod:`model.ops`), checked before the
        first cycle: a bad one raises :class:`ValueError` (or :class:`TypeError`).
    gap : callable or None
        ``gap(index)`` gives the idle cycles to leave before offering gradient ``index``.
    dram_ready : callable
        ``dram_ready(cycle)`` gives DRAM's ready for that cycle.
    idle_hold : int
        Cycles to keep ``flush`` high after ``idle`` rises (checking it stays high).
    flush_timeout : int or None
        Cycles a flush may take before the run fails; by default a generous bound from the
        configuration.
    ready_timeout : int or None
        Cycles a gradient may wait for ``grad_in.ready`` before the run fails (a deadlock
        fails instead of hanging); by default a generous bound from the configuration.
    max_cycles : int or None
        Cycles the whole run may take before it fails.
    vcd : str or None
        Write a waveform to this path (and a GTKWave save file beside it).
    vcd_cycles : int or None
        Write only the first this many cycles to ``vcd``.
    """
    lanes = getattr(dut, "lanes", 1)
    try:
        ops = check_ops(ops, kinds=operations(lanes), lanes=lanes, addr_width=dut.addr_width,
                        grad_width=dut.grad_width, bypass_windows=dut.bypass_windows)
    except (TypeError, ValueError):
        unused(dut)     # never elaborated: the error alone
        raise
    # Generous bounds from the configuration (a flush, or a wait for L2 after L1's INIT).
    generous = 4 * (dut.sets * (dut.ways + 1) + dut.fifo_depth) + 1000
    bench = _Testbench(dut, dram_ready=dram_ready, max_cycles=max_cycles,
                       flush_timeout=generous if flush_timeout is None else flush_timeout,
                       ready_timeout=generous if ready_timeout is None else ready_timeout)

    async def testbench(ctx):
        bench.ctx = ctx
        for index, op in enumerate(ops):
            if op[0] == "flush":
                await bench.flush(idle_hold)
            elif op[0] == "modes":
                bench.set_modes(op[1])
            elif op[0] == "seed":
                await bench.seed(op[1])
            else:    # a gradient, or on lines a beat
                for _ in range(gap(index) if gap else 0):
                    await bench.tick(False)
                await bench.offer(index, op)
        await bench.finish()

    run_testbench(dut, testbench, vcd=vcd, vcd_cycles=vcd_cycles)
    return bench.result


class _Testbench:
    """:func:`simulate`'s testbench: drives the operations, one method each, and records and
    checks every cycle (:meth:`tick`) into ``result``. ``ctx`` is the simulation's context."""

    def __init__(self, dut, *, dram_ready, max_cycles, flush_timeout, ready_timeout):
        self.dut, self.dram_ready, self.max_cycles = dut, dram_ready, max_cycles
        self.flush_timeout, self.ready_timeout = flush_timeout, ready_timeout
        self.lanes = getattr(dut, "lanes", 1)
        self.beat, self.write = _beat_fields(dut, self.lanes), _write_fields(dut, self.lanes)
        self.strobes = [getattr(dut, name) for name in _STROBES]
        self.delay = getattr(dut, "CURRENT_THRESHOLD_DELAY", 1)
        self.result = SimResult()
        self.ctx = None
        self.cycle = 0
        self.last_dram = None   # (addr, value) offered and not taken in the last cycle
        self.shown = []         # cycles at which current_threshold shows an acceptance's

    # -- every cycle ------------------------------------------------------------------------------

    async def tick(self, offering):
        """One clock cycle, with a gradient offered or not; returns whether it was taken."""
        ctx, dut = self.ctx, self.dut
        ctx.set(dut.dram_out.ready, self.dram_ready(self.cycle))
        in_fire = offering and ctx.get(dut.grad_in.ready)
        if offering and not in_fire and not ctx.get(dut.flush):
            self.result.input_stall_cycles += 1
        if in_fire:
            self._record_accepted()
        self._check_and_record_dram()
        self._record_events()
        await ctx.tick()
        self.cycle += 1
        if in_fire:   # current_threshold shows, `delay` cycles later, the one it was judged by
            self.shown.append(self.cycle - 1 + self.delay)
        self._record_shown_thresholds()
        if self.max_cycles is not None and self.cycle > self.max_cycles:
            raise AssertionError(f"the run took more than {self.max_cycles} cycles")
        return in_fire

    def _record_accepted(self):
        accepted, result = self.beat(self.ctx), self.result
        result.accepted.append(accepted)
        result.accept_cycles.append(self.cycle)
        result.gradients += 1 if self.lanes == 1 else bin(accepted[2]).count("1")

    def _check_and_record_dram(self):
        """DRAM's stream rules (``valid`` holds, with a stable payload, until taken) and the
        writes taken."""
        ctx, dut, result = self.ctx, self.dut, self.result
        dram_valid = ctx.get(dut.dram_out.valid)
        if self.last_dram is not None:
            assert dram_valid, f"cycle {self.cycle}: dram_out.valid fell before it was taken"
            payload = self.write(ctx)
            assert payload == self.last_dram, \
                f"cycle {self.cycle}: dram_out payload changed from {self.last_dram} to {payload}"
        self.last_dram = None
        if dram_valid:
            payload = self.write(ctx)
            if ctx.get(dut.dram_out.ready):
                result.writes.extend(_per_address(payload, self.lanes))
                result.write_cycles.append(self.cycle)
            else:
                result.dram_stall_cycles += 1
                self.last_dram = payload

    def _record_events(self):
        """The cause strobes, hits and misses, bypassed gradients and accounted discards."""
        ctx, dut, result = self.ctx, self.dut, self.result
        for name, strobe in zip(CAUSES, self.strobes):
            if ctx.get(strobe):
                result.causes.append(name)
        result.hits += ctx.get(dut.l1_hit)
        result.misses += ctx.get(dut.l1_miss)
        result.bypassed += bin(ctx.get(dut.bypassed)).count("1")
        discard = ctx.get(dut.discard)
        if discard and self.lanes == 1:
            result.discards.append((ctx.get(dut.discard_addr), ctx.get(dut.discard_error)))
        elif discard:
            result.discards += [(ctx.get(dut.discard_addr) + i, ctx.get(dut.discard_error[i]))
                                for i in range(self.lanes) if discard >> i & 1]

    def _record_shown_thresholds(self):
        while self.shown and self.shown[0] == self.cycle:
            self.result.accept_thresholds.append(self.ctx.get(self.dut.current_threshold))
            self.shown.pop(0)

    async def until_idle(self, raised):
        """Tick until ``idle``, within ``flush_timeout`` cycles; return the cycles taken."""
        start = self.cycle
        while not self.ctx.get(self.dut.idle):
            if self.cycle - start > self.flush_timeout:
                raise AssertionError(f"{raised} raised at cycle {start} did not reach idle "
                                     f"within {self.flush_timeout} cycles")
            await self.tick(False)
        return self.cycle - start

    # -- the operations ---------------------------------------------------------------------------

    async def offer(self, index, op):
        """Offer gradient (or beat) ``index`` and hold it until it is taken, within
        ``ready_timeout`` cycles."""
        ctx, dut = self.ctx, self.dut
        ctx.set(dut.threshold, op[-1])
        ctx.set(dut.grad_in.p.addr, op[1])
        if self.lanes == 1:
            ctx.set(dut.grad_in.p.grad, op[2])
        else:
            for i, grad in enumerate(op[2]):
                ctx.set(dut.grad_in.p.grads[i], grad)
            ctx.set(dut.grad_in.p.mask, op[3])
        ctx.set(dut.grad_in.valid, 1)
        waited = 0
        while not await self.tick(True):
            waited += 1
            if waited > self.ready_timeout:
                raise AssertionError(f"cycle {self.cycle}: gradient #{index} waited more "
                                     f"than {self.ready_timeout} cycles for grad_in.ready")
        ctx.set(dut.grad_in.valid, 0)

    async def flush(self, idle_hold):
        """Raise ``flush`` until ``idle``, check that ``idle`` holds ``idle_hold`` cycles, drop
        it."""
        ctx, dut, result = self.ctx, self.dut, self.result
        ctx.set(dut.flush, 1)
        result.flush_cycles.append(await self.until_idle("flush"))
        result.step_discards.append((ctx.get(dut.discard_count), ctx.get(dut.discard_sum)))
        for _ in range(idle_hold):
            await self.tick(False)
            assert ctx.get(dut.idle), f"cycle {self.cycle}: idle fell while flush was high"
        ctx.set(dut.flush, 0)

    def set_modes(self, settings):
        for name, value in settings.items():
            self.ctx.set(port(self.dut, name), value)

    async def seed(self, value):
        """``lfsr_seed`` and ``lfsr_load`` held until idle, then for the cycle the LFSR loads."""
        ctx, dut = self.ctx, self.dut
        ctx.set(dut.lfsr_seed, value)
        ctx.set(dut.lfsr_load, 1)
        await self.until_idle("lfsr_load")
        await self.tick(False)
        ctx.set(dut.lfsr_load, 0)

    async def finish(self):
        """The run's cycle count, then the last thresholds shown (nothing else recorded)."""
        self.result.cycles = self.cycle
        while self.shown:
            await self.ctx.tick()
            self.cycle += 1
            self._record_shown_thresholds()


def _beat_fields(dut, lanes):
    """A function of the simulation context: the beat on ``grad_in`` as recorded."""
    p = dut.grad_in.p
    if lanes == 1:
        return lambda ctx: (ctx.get(p.addr), ctx.get(p.grad), ctx.get(dut.threshold))
    return lambda ctx: (ctx.get(p.addr), tuple(ctx.get(p.grads[i]) for i in range(lanes)),
                        ctx.get(p.mask), ctx.get(dut.threshold))


def _write_fields(dut, lanes):
    """A function of the simulation context: the write on ``dram_out`` (on lines, the line,
    its values and mask)."""
    p = dut.dram_out.p
    if lanes == 1:
        return lambda ctx: (ctx.get(p.addr), ctx.get(p.value))
    return lambda ctx: (ctx.get(p.addr), tuple(ctx.get(p.values[i]) for i in range(lanes)),
                        ctx.get(p.mask))


def _per_address(write, lanes):
    """A DRAM write as ``(addr, value)`` pairs, one per lane written."""
    if lanes == 1:
        return [write]
    line, values, mask = write
    return [(line + i, value) for i, value in enumerate(values) if mask >> i & 1]


def run_testbench(dut, testbench, *, vcd=None, vcd_cycles=None):
    """Simulate ``dut`` with a clock and ``testbench`` until the testbench returns, writing a
    waveform to ``vcd`` if given (only its first ``vcd_cycles`` cycles if that is given), with
    a GTKWave save file of the trace table's signal groups beside it."""
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    if not vcd:
        sim.run()
        return
    cycles = 0

    async def count_cycles(ctx):
        nonlocal cycles
        async for _ in ctx.tick():
            cycles += 1

    sim.add_testbench(count_cycles, background=True)
    from gradient_compressor.console import replacing
    from .waves import gtkw_path_for, write_gtkw
    failure = None
    with replacing(vcd, gtkw_path_for(vcd)) as (vcd_part, gtkw_part):
        try:
            with sim.write_vcd(vcd_part):
                while (vcd_cycles is None or cycles < vcd_cycles) and sim.advance():
                    pass
            sim.run()
        except AssertionError as error:     # a check failed: its waveform is the evidence
            failure = error
        write_gtkw(vcd_part, gtkw_part, dumpfile=vcd)
    if failure:
        raise failure
