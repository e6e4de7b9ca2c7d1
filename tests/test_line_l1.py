"""The line L1 (design.line_accumulator.LineAccumulator) against the line model, write for
write."""

import random

import pytest
from amaranth.sim import Simulator

from gradient_compressor.design import LineAccumulator
from gradient_compressor.design.params import LFSR_RESET
from gradient_compressor.model import LineModel
from gradient_compressor.model.reference import lfsr_step

from .line_helpers import flush_until_idle, line_write, offer, set_line


def run_beats(lanes, beats, *, sets=2, ways=2, max_updates=3, grad_width=8, addr_width=9,
              small_threshold=0, stochastic=0, ready=lambda cycle: True, limit=2000,
              whole_line=False):
    """Send ``beats`` (``(line, grads, mask, threshold)``) through a LineAccumulator, then a
    flush; return the line writes it pushed (unmasked lanes' values 0, causes None) and the
    accounted discards ``(addr, error)``."""
    dut = LineAccumulator(lanes=lanes, sets=sets, ways=ways, max_updates=max_updates,
                          grad_width=grad_width, addr_width=addr_width, whole_line=whole_line)
    writes, discards = [], []
    bits = grad_width

    async def testbench(ctx):
        lfsr, cycle = LFSR_RESET, 0

        async def tick():
            nonlocal lfsr, cycle
            ctx.set(dut.random, lfsr & (2 ** bits - 1))
            ctx.set(dut.random_next, lfsr_step(lfsr) & (2 ** bits - 1))
            ctx.set(dut.push.ready, ready(cycle))
            if ctx.get(dut.push.valid) and ctx.get(dut.push.ready):
                writes.append(line_write(ctx, dut.push.p, lanes))
            discard = ctx.get(dut.discard)
            for i in range(lanes):
                if discard >> i & 1:
                    discards.append((ctx.get(dut.discard_addr) + i,
                                     ctx.get(dut.discard_error[i])))
            step = ctx.get(dut.random_step)
            await ctx.tick()
            if step:
                lfsr = lfsr_step(lfsr)
            cycle += 1

        ctx.set(dut.grad_in.p.small_threshold, small_threshold)
        ctx.set(dut.grad_in.p.stochastic, stochastic)
        for line, grads, mask, threshold in beats:
            set_line(ctx, dut.grad_in.p, line, grads, mask)
            ctx.set(dut.grad_in.p.threshold, threshold)
            await offer(ctx, dut.grad_in, tick, limit)
        await flush_until_idle(ctx, dut, tick, limit)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    return writes, discards


def model_writes(lanes, beats, *, sets=2, ways=2, max_updates=3, grad_width=8, addr_width=9,
                 small_threshold=0, stochastic=0, whole_line=False):
    model = LineModel(lanes=lanes, sets=sets, ways=ways, max_updates=max_updates,
                      grad_width=grad_width, addr_width=addr_width, whole_line=whole_line)
    model.set_modes(small_threshold=small_threshold, stochastic=stochastic)
    writes = model.run([("line", *beat) for beat in beats] + [("flush",)])
    return writes, [(d.addr, d.error) for d in model.discards]


def random_beats(rng, lanes, count, *, lines=6, grad_width=8, thresholds=(20, 40, 90)):
    """Beats over a few lines (so that they hit, evict and fill), random masks and sizes."""
    top = 2 ** (grad_width - 1)
    beats = []
    for _ in range(count):
        line = rng.randrange(lines) * lanes
        grads = [rng.choice([rng.randint(-8, 8), rng.randint(-40, 40), rng.randint(-top, top - 1)])
                 for _ in range(lanes)]
        mask = rng.randrange(2 ** lanes)
        beats.append((line, grads, mask, rng.choice(thresholds)))
    return beats


@pytest.mark.parametrize("lanes", [2, 4, 8])
@pytest.mark.parametrize("seed", range(3))
def test_line_writes_are_the_models(lanes, seed):
    rng = random.Random(seed * 10 + lanes)
    beats = random_beats(rng, lanes, 60)
    got = run_beats(lanes, beats, ready=lambda cycle: cycle % 3 != 1)
    assert got == model_writes(lanes, beats)


@pytest.mark.parametrize("stochastic", [0, 1])
def test_dual_threshold_lanes_are_the_models(stochastic):
    rng = random.Random(5 + stochastic)
    beats = random_beats(rng, 4, 80)
    options = dict(small_threshold=12, stochastic=stochastic)
    got = run_beats(4, beats, **options)
    assert got == model_writes(4, beats, **options)
    assert got[1], "no tiny lane was accounted: the test says nothing"


@pytest.mark.parametrize("max_updates", [1, 2])
def test_max_updates_is_the_models(max_updates):
    rng = random.Random(max_updates)
    beats = random_beats(rng, 4, 60)
    got = run_beats(4, beats, max_updates=max_updates)
    assert got == model_writes(4, beats, max_updates=max_updates)


def test_one_beat_per_cycle_when_l2_takes_every_write():
    """Small beats to one set, back to back: grad_in.ready never falls after INIT."""
    lanes, count = 4, 40
    beats = [((i % 3) * 2 * lanes, [1, -1, 2, 0], 0b1011, 100) for i in range(count)]
    dut = LineAccumulator(lanes=lanes, sets=2, ways=2, max_updates=200, grad_width=8,
                          addr_width=9)
    low = []

    async def testbench(ctx):
        ctx.set(dut.push.ready, 1)
        await ctx.tick().repeat(2)      # INIT: a cycle per set
        for line, grads, mask, threshold in beats:
            set_line(ctx, dut.grad_in.p, line, grads, mask)
            ctx.set(dut.grad_in.p.threshold, threshold)
            ctx.set(dut.grad_in.valid, 1)
            if not ctx.get(dut.grad_in.ready):
                low.append(line)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    assert low == []


def test_one_lane_is_refused():
    with pytest.raises(ValueError, match="lanes must be at least 2"):
        LineAccumulator(lanes=1)
    with pytest.raises(ValueError, match="lanes must be one of"):
        LineAccumulator(lanes=64)


@pytest.mark.parametrize("lanes, max_updates, options", [
    (2, 3, {}), (4, 3, {}), (8, 3, {}), (4, 1, {}), (4, 2, {}),
    (4, 3, dict(small_threshold=12)), (4, 3, dict(small_threshold=12, stochastic=1)),
    (4, 3, dict(small_threshold=200, stochastic=1))])    # a level above the gradients' range
def test_whole_line_writes_are_the_models(lanes, max_updates, options):
    """The line L1 deciding by the whole-line rule (LineDecision) against the line model's
    whole-line rule, write for write, discards included, DRAM taking 2 writes in 3."""
    rng = random.Random(lanes * 100 + max_updates)
    beats = random_beats(rng, lanes, 80, thresholds=(20, 40, 90, 200))
    params = dict(max_updates=max_updates, whole_line=True, **options)
    got = run_beats(lanes, beats, ready=lambda cycle: cycle % 3 != 1, **params)
    expected = model_writes(lanes, beats, **params)
    assert got == expected
    causes = {cause for write in got[0] for cause in write.causes if cause}
    assert "LINE" in causes or max_updates == 1, causes
