"""The compressor on lines (GradientCompressor(lanes=N)) against the line model: L1's line
writes write for write, DRAM per address after the flush, in every run-time mode."""

import random
from collections import Counter

import pytest
from amaranth.sim import Simulator

from gradient_compressor.design import GradientCompressor
from gradient_compressor.design.params import port
from gradient_compressor.model import LineModel

from .line_helpers import line_write, offer, set_line

GEOMETRY = dict(addr_width=9, grad_width=8, sets=2, ways=2, max_updates=3, fifo_depth=4,
                burst_size=2)
MODES = {
    "off": {},
    "drop": dict(small_threshold=10),
    "stochastic": dict(small_threshold=10, stochastic=1),
    "ema": dict(ema_enable=1, ema_shift=2, ema_scale=24, ema_min=4, ema_max=100),
    "ema_per_step": dict(ema_enable=1, ema_per_step=1, ema_shift=1, ema_scale=16, ema_min=2,
                         ema_max=120),
    "bypass": dict(bypass__0__base=5, bypass__0__limit=11, bypass__0__enable=1, bypass__1__base=30,
                   bypass__1__limit=30, bypass__1__enable=1, small_threshold=6),
}


def simulate(lanes, steps, modes, *, ready=lambda cycle: True, limit=3000):
    """Run ``steps`` (lists of beats ``(line, grads, mask, threshold)``, each ended by a flush
    barrier) through the compressor; return L1's line writes (as pushed to L2), the DRAM
    writes ``(addr, value)`` per lane, and the discards ``(addr, error)``."""
    dut = GradientCompressor(lanes=lanes, **GEOMETRY)
    l1_writes, dram, discards = [], [], []

    async def testbench(ctx):
        cycle = 0

        async def tick():
            nonlocal cycle
            ctx.set(dut.dram_out.ready, ready(cycle))
            push = dut.l1.push
            if ctx.get(push.valid) and ctx.get(push.ready):
                l1_writes.append(line_write(ctx, push.p, lanes))
            if ctx.get(dut.dram_out.valid) and ctx.get(dut.dram_out.ready):
                p, mask = dut.dram_out.p, ctx.get(dut.dram_out.p.mask)
                dram.extend((ctx.get(p.addr) + i, ctx.get(p.values[i]))
                            for i in range(lanes) if mask >> i & 1)
            for i in range(lanes):
                if ctx.get(dut.discard) >> i & 1:
                    discards.append((ctx.get(dut.discard_addr) + i,
                                     ctx.get(dut.discard_error[i])))
            await ctx.tick()
            cycle += 1

        for name, value in modes.items():
            ctx.set(port(dut, name), value)
        for beats in steps:
            for line, grads, mask, threshold in beats:
                set_line(ctx, dut.grad_in.p, line, grads, mask)
                ctx.set(dut.threshold, threshold)
                await offer(ctx, dut.grad_in, tick, limit)
            ctx.set(dut.flush, 1)
            for _ in range(limit):
                if ctx.get(dut.idle):
                    break
                await tick()
            else:
                raise AssertionError(f"idle stayed low for {limit} cycles under flush")
            await tick()
            ctx.set(dut.flush, 0)
        await tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    return l1_writes, dram, discards


def model_run(lanes, steps, modes):
    model = LineModel(lanes=lanes, **{k: GEOMETRY[k] for k in
                                      ("addr_width", "grad_width", "sets", "ways",
                                       "max_updates")})
    ops = [("modes", modes)] if modes else []
    for beats in steps:
        ops += [("line", *beat) for beat in beats] + [("flush",)]
    return model.run(ops), [(d.addr, d.error) for d in model.discards]


def random_steps(rng, lanes, steps=3, beats=25):
    top = 2 ** 7
    out = []
    for _ in range(steps):
        out.append([(rng.randrange(8) * lanes,
                     [rng.choice([rng.randint(-12, 12), rng.randint(-50, 50),
                                  rng.randint(-top, top - 1)]) for _ in range(lanes)],
                     rng.randrange(2 ** lanes), rng.choice([15, 40, 90]))
                    for _ in range(beats)])
    return out


def per_address(pairs):
    total = Counter()
    for addr, value in pairs:
        total[addr] += value
    return {addr: value for addr, value in total.items() if value}


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("lanes", [2, 4])
def test_line_compressor_is_the_line_model(lanes, mode):
    rng = random.Random(f"{lanes}-{mode}")
    steps = random_steps(rng, lanes)
    stall = [rng.random() < 0.4 for _ in range(11)]
    l1_writes, dram, discards = simulate(lanes, steps, MODES[mode],
                                         ready=lambda cycle: not stall[cycle % 11])
    expected, expected_discards = model_run(lanes, steps, MODES[mode])
    assert l1_writes == expected
    assert discards == expected_discards
    # DRAM holds the line writes' values per address (L2 combines writes, never changes a sum)
    assert per_address(dram) == per_address(w for lw in expected for w in
                                            ((x.addr, x.value) for x in lw.writes()))
    # ... and, with what was accounted, everything accepted.
    accepted = [(line + i, grads[i]) for beats in steps for line, grads, mask, _ in beats
                for i in range(lanes) if mask >> i & 1]
    assert per_address(dram + discards) == per_address(accepted)


def test_write_combining_saves_dram_writes():
    """Direct beats to one line back to back while DRAM waits: L2 merges them into the newest
    write it holds (the flush barrier starts the drain, so the first merged write leaves for
    the output register and the rest merge into the next)."""
    lanes = 4
    # (Sums that stay within grad_width + 1 bits: a merge with a wider value is refused.)
    steps = [[(8, [40, -40, 0, 0], 0b0011, 10)] * 6]
    l1_writes, dram, _ = simulate(lanes, steps, {}, ready=lambda cycle: cycle > 30)
    assert len(l1_writes) == 6
    assert per_address(dram) == {8: 240, 9: -240}
    assert len(dram) == 4          # two line writes of two lanes, not six


def test_one_beat_per_cycle():
    """Small beats to one set back to back with DRAM always ready: grad_in.ready stays high."""
    lanes = 4
    dut = GradientCompressor(lanes=lanes, **GEOMETRY)
    low = []

    async def testbench(ctx):
        ctx.set(dut.dram_out.ready, 1)
        ctx.set(dut.threshold, 100)
        await ctx.tick().repeat(GEOMETRY["sets"])
        for i in range(60):
            set_line(ctx, dut.grad_in.p, (i % 3) * 2 * lanes, [1, 2, 3, 4], 0b1111)
            ctx.set(dut.grad_in.valid, 1)
            low.append(not ctx.get(dut.grad_in.ready))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    assert not any(low)


def test_the_simulation_driver_takes_lines():
    """simulation.driver.simulate runs line operations (the line model's) on a compressor with
    lanes, checking the DRAM stream's rules, and records beats, per-lane writes, discards."""
    from gradient_compressor.simulation.driver import simulate as drive, every_other
    lanes = 4
    rng = random.Random("driver")
    steps = random_steps(rng, lanes, steps=2, beats=20)
    ops = [("modes", MODES["stochastic"])]
    for beats in steps:
        ops += [("line", *beat) for beat in beats] + [("flush",)]
    result = drive(GradientCompressor(lanes=lanes, **GEOMETRY), ops, dram_ready=every_other)
    expected, expected_discards = model_run(lanes, steps, MODES["stochastic"])
    assert [beat[:3] for beat in result.accepted] == [
        (line, tuple(grads), mask) for beats in steps for line, grads, mask, _ in beats]
    assert result.gradients == sum(bin(mask).count("1") for beats in steps
                                   for _, _, mask, _ in beats)
    assert result.discards == expected_discards
    assert per_address(result.writes) == per_address(
        (w.addr, w.value) for lw in expected for w in lw.writes())


def test_the_low_bits_of_a_line_address_are_ignored():
    """A beat's address names its line: its low log2(lanes) bits are ignored (lane i is at the
    line's address + i), in L1, in the bypass windows and in the writes. (The simulation
    drivers refuse such a beat, as the line model does; the RTL's ports take it.)"""
    lanes = 4
    rng = random.Random("misaligned")
    steps = random_steps(rng, lanes, steps=1, beats=30)
    modes = MODES["bypass"]
    misaligned = [[(line + rng.randrange(lanes), grads, mask, threshold)
                   for line, grads, mask, threshold in steps[0]]]
    assert any(line % lanes for line, _, _, _ in misaligned[0])
    _, dram, discards = simulate(lanes, misaligned, modes)
    expected, expected_discards = model_run(lanes, steps, modes)
    assert discards == expected_discards
    assert per_address(dram) == per_address(
        (w.addr, w.value) for lw in expected for w in lw.writes())
