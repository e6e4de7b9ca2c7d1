"""The compressor on lines under the line policy (GradientCompressor(lanes=N, whole_line=False))
against the line model: L1's line writes write for write, DRAM per address after the flush, in
every run-time mode. (The default policy, the whole-line rule: tests/test_whole_line_compressor.py.)"""

import random

import pytest
from amaranth.sim import Simulator

from gradient_compressor.design import GradientCompressor

from .line_helpers import (GEOMETRY, MODES, check_with_the_model, drive_line_steps, line_write,
                           model_run, per_address, random_steps, set_line)


def simulate(lanes, steps, modes, *, ready=lambda cycle: True, limit=3000):
    """Run ``steps`` (lists of beats ``(line, grads, mask, threshold)``, each ended by a flush
    barrier) through the compressor; return L1's line writes (as pushed to L2), the DRAM
    writes ``(addr, value)`` per lane, and the discards ``(addr, error)``."""
    dut = GradientCompressor(lanes=lanes, whole_line=False, **GEOMETRY)
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

        await drive_line_steps(ctx, dut, steps, modes, tick, limit)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    return l1_writes, dram, discards


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("lanes", [2, 4])
def test_line_compressor_is_the_line_model(lanes, mode):
    rng = random.Random(f"{lanes}-{mode}")
    steps = random_steps(rng, lanes)
    stall = [rng.random() < 0.4 for _ in range(11)]
    l1_writes, dram, discards = simulate(lanes, steps, MODES[mode],
                                         ready=lambda cycle: not stall[cycle % 11])
    assert l1_writes == check_with_the_model(lanes, steps, MODES[mode], dram, discards)


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
    dut = GradientCompressor(lanes=lanes, whole_line=False, **GEOMETRY)
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
    result = drive(GradientCompressor(lanes=lanes, whole_line=False, **GEOMETRY), ops, dram_ready=every_other)
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
