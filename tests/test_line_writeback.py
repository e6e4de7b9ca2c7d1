"""L2 on line writes: write combining with the newest waiting write, nothing lost."""

import random
from collections import Counter

import pytest
from amaranth import signed
from amaranth.sim import Simulator

from gradient_compressor.design import WritebackBuffer

from .line_helpers import offer, set_line

VALUE_MAX = 2 ** 9 - 1          # grad_width 8: values of 10 bits


def run_pushes(pushes, *, lanes=4, depth=8, burst_size=4, ready=lambda cycle: True,
               limit=2000, value_width=10):
    """Push ``(line, values, mask)`` writes (one per cycle when taken), then drain with
    ``flush``; return the DRAM writes ``(line, values, mask)`` (unmasked values 0) and the
    cycles a push waited. ``value_width``: L2's (by default 10 bits, the line policy's
    grad_width + 2; None: L2's default, the whole-line rule's grad_width)."""
    dut = WritebackBuffer(addr_width=8, grad_width=8, depth=depth, burst_size=burst_size,
                          lanes=lanes, value_width=value_width)
    out, waited = [], []

    async def testbench(ctx):
        cycle = 0

        async def tick():
            nonlocal cycle
            ctx.set(dut.dram_out.ready, ready(cycle))
            if ctx.get(dut.dram_out.valid) and ctx.get(dut.dram_out.ready):
                p, mask = dut.dram_out.p, ctx.get(dut.dram_out.p.mask)
                out.append((ctx.get(p.addr),
                            tuple(ctx.get(p.values[i]) if mask >> i & 1 else 0
                                  for i in range(lanes)), mask))
            await ctx.tick()
            cycle += 1

        for line, values, mask in pushes:
            set_line(ctx, dut.push.p, line, values, mask, field="values")
            waited.append(await offer(ctx, dut.push, tick, limit))
        ctx.set(dut.flush, 1)
        for _ in range(limit):
            if not ctx.get(dut.level):
                break
            await tick()
        else:
            raise AssertionError(f"L2 did not drain in {limit} cycles")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    return out, waited


def per_address(writes):
    total = Counter()
    for line, values, mask in writes:
        for i, value in enumerate(values):
            if mask >> i & 1:
                total[line + i] += value
    return {addr: value for addr, value in total.items()}


def test_a_run_to_one_line_is_one_dram_write():
    """The seed's write-combining example: +60, +70, +80 to one address are one write of 210;
    another lane of the same line joins it, another line does not."""
    pushes = [(8, (60, 0, 0, 0), 0b0001), (8, (70, 0, 0, 0), 0b0001),
              (8, (80, 0, 5, 0), 0b0101), (12, (1, 0, 0, 0), 0b0001)]
    out, _ = run_pushes(pushes)
    assert out == [(8, (210, 0, 5, 0), 0b0101), (12, (1, 0, 0, 0), 0b0001)]


def test_a_merge_that_would_overflow_is_a_write_of_its_own():
    pushes = [(0, (VALUE_MAX, 0), 0b01), (0, (1, 3), 0b11), (0, (-4, 0), 0b01)]
    out, _ = run_pushes(pushes, lanes=2)
    assert out == [(0, (VALUE_MAX, 0), 0b01), (0, (-3, 3), 0b11)]


def test_a_merge_is_refused_on_a_lane_both_hold_with_a_value_a_bit_too_wide():
    """The test is on the values, not on the sum: a value beyond ``grad_width + 1`` bits in a
    lane both hold stores the write as one of its own, even where the sum would fit; a wide
    value in a lane only one of them holds merges."""
    wide = (VALUE_MAX + 1) // 2
    pushes = [(0, (wide, 0), 0b01), (0, (-1, 0), 0b01), (0, (0, wide), 0b10),
              (0, (1, 0), 0b01)]
    out, _ = run_pushes(pushes, lanes=2)
    assert out == [(0, (wide, 0), 0b01), (0, (0, wide), 0b11)]


def test_a_write_in_the_output_register_takes_no_merge():
    """DRAM stalls while the first write waits in the output register: the next ones to its
    line merge with each other, not with it."""
    pushes = [(4, (1, 0), 0b01)] * 4 + [(6, (1, 0), 0b01)] * 3
    out, _ = run_pushes(pushes, lanes=2, burst_size=1, ready=lambda cycle: cycle > 12)
    assert out == [(4, (1, 0), 0b01), (4, (3, 0), 0b01), (6, (3, 0), 0b01)]


@pytest.mark.parametrize("seed", range(4))
def test_nothing_is_lost_or_invented(seed):
    rng = random.Random(seed)
    lanes = rng.choice([2, 4, 8])
    pushes = [(rng.randrange(4) * lanes,
               tuple(rng.choice([rng.randint(-20, 20), rng.randint(-VALUE_MAX - 1, VALUE_MAX)])
                     for _ in range(lanes)),
               rng.randrange(1, 2 ** lanes)) for _ in range(120)]
    stall = [rng.random() < 0.6 for _ in range(13)]
    for depth in (1, 2, 8):
        out, _ = run_pushes(pushes, lanes=lanes, depth=depth, burst_size=1,
                            ready=lambda cycle: not stall[cycle % 13])
        assert per_address(out) == per_address(pushes)
        # With room for writes behind the output register, runs to one line merge (at depth
        # 2 the one place behind it is taken when L2 is full, and a full L2 takes no push).
        assert len(out) < len(pushes) or depth < 8
    for _, values, _ in out:
        assert all(-VALUE_MAX - 1 <= v <= VALUE_MAX for v in values)


@pytest.mark.parametrize("seed", range(2))
def test_at_the_gradients_width_every_merge_fits(seed):
    """L2 at the whole-line rule's value width (grad_width 8: values of 8 bits): nothing is
    lost, runs to one line still merge, and every DRAM value fits 8 bits (the merge test is
    on the values' own width: both fit 7 bits, so their sum fits 8)."""
    rng = random.Random(f"narrow-{seed}")
    lanes, top = 4, 2 ** 7
    pushes = [(rng.randrange(3) * lanes,
               tuple(rng.choice([rng.randint(-20, 20), rng.randint(-top, top - 1)])
                     for _ in range(lanes)),
               rng.randrange(1, 2 ** lanes)) for _ in range(100)]
    out, _ = run_pushes(pushes, lanes=lanes, burst_size=1, value_width=8,
                        ready=lambda cycle: cycle % 3 == 0)
    assert per_address(out) == per_address(pushes)
    assert len(out) < len(pushes)
    assert all(-top <= v < top for _, values, _ in out for v in values)


def test_value_width_is_checked():
    assert WritebackBuffer(grad_width=8, lanes=2, value_width=8).dram_out.p.values[0].shape() \
        == signed(8)
    with pytest.raises(ValueError, match="value_width must be at least 8, not 7"):
        WritebackBuffer(grad_width=8, lanes=2, value_width=7)


def test_one_lane_never_merges():
    dut = WritebackBuffer(addr_width=8, grad_width=8, depth=4, burst_size=4)
    out = []

    async def testbench(ctx):
        ctx.set(dut.push.valid, 1)
        ctx.set(dut.push.p.addr, 3)
        ctx.set(dut.push.p.value, 1)
        await ctx.tick().repeat(4)
        ctx.set(dut.push.valid, 0)
        ctx.set(dut.dram_out.ready, 1)
        for _ in range(10):
            if ctx.get(dut.dram_out.valid):
                out.append(ctx.get(dut.dram_out.p.value))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    assert out == [1, 1, 1, 1]
