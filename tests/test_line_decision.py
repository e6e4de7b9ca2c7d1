"""The whole-line rule's decision as a component (design/line_decision.py) against the line
model's step (``LineModel(whole_line=True)``): on random beats and entries, every output is
the model's, lane by lane."""

import random

import pytest
from amaranth.sim import Simulator

from gradient_compressor.design.layouts import Cause
from gradient_compressor.design.line_decision import LineDecision
from gradient_compressor.design.params import LFSR_WIDTH
from gradient_compressor.model import LineModel

GRAD_WIDTH = 8
GRAD_MIN, GRAD_MAX = -2 ** (GRAD_WIDTH - 1), 2 ** (GRAD_WIDTH - 1) - 1


def random_case(rng, lanes, max_updates):
    """A beat, the entry its line holds (or None) and the mode settings, drawn to reach every
    branch: gradients near the threshold and the range's ends, sums near overflow."""
    threshold = rng.choice([0, 1, 5, 20, 60, 127, 128, 200, 255])
    small_threshold = rng.choice([0, 0, 3, 10, 40, 200])

    def value():
        return rng.choice([rng.randint(-8, 8), rng.randint(GRAD_MIN, GRAD_MAX),
                           rng.choice([GRAD_MIN, GRAD_MAX, threshold - 1, 1 - threshold])])
    grads = [max(GRAD_MIN, min(GRAD_MAX, value())) for _ in range(lanes)]
    mask = rng.randrange(2 ** lanes)
    entry = None
    if max_updates > 1 and rng.random() < 0.6:
        held = rng.randrange(1, 2 ** lanes)
        sums = [max(GRAD_MIN, min(GRAD_MAX, value())) if held >> i & 1 else 0
                for i in range(lanes)]
        entry = (sums, held, rng.randint(1, max_updates - 1))
    return dict(threshold=threshold, small_threshold=small_threshold,
                stochastic=rng.random() < 0.5, lfsr=rng.randrange(1, 2 ** LFSR_WIDTH),
                grads=grads, mask=mask, entry=entry)


def model_step(case, lanes, max_updates):
    """The line model's decision on ``case``: (line writes, the entry after or None,
    the accounted lanes)."""
    model = LineModel(lanes=lanes, sets=1, ways=1, max_updates=max_updates,
                      grad_width=GRAD_WIDTH, addr_width=8, whole_line=True)
    model.set_modes(small_threshold=case["small_threshold"], stochastic=int(case["stochastic"]))
    model.lfsr = case["lfsr"]
    if case["entry"]:
        sums, held, count = case["entry"]
        model._rows[0][0] = [0, list(sums), {i for i in range(lanes) if held >> i & 1}, count]
    writes = model.write_line(0, case["grads"], case["mask"], case["threshold"])
    entry = model._rows[0][0]
    after = None if entry is None else (entry[1], sum(1 << i for i in entry[2]), entry[3])
    return writes, after, {d.addr for d in model.discards}


def rounded_lanes(case, lanes):
    """The tiny lanes the stochastic mode's draw rounds up (the input the pipeline gives)."""
    if not case["stochastic"]:
        return 0
    bits = min(GRAD_WIDTH, LFSR_WIDTH)
    random_bits = case["lfsr"] & ((1 << bits) - 1)
    level = min(case["small_threshold"], GRAD_MAX)
    return sum(1 << i for i, g in enumerate(case["grads"])
               if abs(g) < case["small_threshold"] and random_bits * level < abs(g) << bits)


@pytest.mark.parametrize("lanes, max_updates", [(1, 3), (2, 1), (4, 2), (4, 5), (8, 255)])
def test_the_decision_is_the_models(lanes, max_updates):
    dut = LineDecision(lanes=lanes, grad_width=GRAD_WIDTH, max_updates=max_updates)
    rng = random.Random(lanes * 1000 + max_updates)
    seen = set()

    async def bench(ctx):
        for _ in range(1500):
            case = random_case(rng, lanes, max_updates)
            writes, after, accounted = model_step(case, lanes, max_updates)
            grads, t = case["grads"], case["threshold"]
            ctx.set(dut.grads, grads)
            ctx.set(dut.mask, case["mask"])
            ctx.set(dut.direct, sum(1 << i for i, g in enumerate(grads) if abs(g) >= t))
            ctx.set(dut.tiny, sum(1 << i for i, g in enumerate(grads)
                                  if abs(g) < case["small_threshold"]))
            ctx.set(dut.rounded, rounded_lanes(case, lanes))
            ctx.set(dut.high, [t - g for g in grads])
            ctx.set(dut.low, [-t - g for g in grads])
            ctx.set(dut.fit_high, [GRAD_MAX - g for g in grads])
            ctx.set(dut.fit_low, [GRAD_MIN - g for g in grads])
            ctx.set(dut.level, min(case["small_threshold"], GRAD_MAX))
            ctx.set(dut.hit, case["entry"] is not None)
            sums, held, count = case["entry"] or ([0] * lanes, 0, 0)
            ctx.set(dut.entry, {"sums": sums, "held": held, "count": count})
            assert ctx.get(dut.written) == len(writes), (case, writes)
            if writes:
                [write] = writes
                assert ctx.get(dut.write_mask) == write.mask, (case, write)
                for i in range(lanes):
                    if write.mask >> i & 1:
                        assert ctx.get(dut.values[i]) == write.values[i], (case, write, i)
                        assert ctx.get(dut.causes[i]) == Cause[write.causes[i]], (case, i)
                        seen.add(write.causes[i])
            assert ctx.get(dut.keeps) == (after is not None), (case, after)
            assert ctx.get(dut.allocates) == (after is not None and case["entry"] is None)
            if after is not None:
                assert ctx.get(dut.after.held) == after[1], (case, after)
                assert ctx.get(dut.after.count) == after[2], (case, after)
                for i in range(lanes):
                    if after[1] >> i & 1:
                        assert ctx.get(dut.after.sums[i]) == after[0][i], (case, after, i)
            assert ctx.get(dut.accounted) == sum(1 << a for a in accounted), case

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    # every cause the rule writes on a beat was reached (one lane carries no other lane)
    expected = {"DIRECT", "STOCHASTIC"} | ({"LINE"} if lanes > 1 else set()) | (
        {"MAX_UPDATES"} if max_updates == 1 else {"ACCUM_THRESHOLD", "MAX_UPDATES"})
    assert expected <= seen, seen
