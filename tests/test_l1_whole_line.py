"""The one-lane L1 deciding by the whole-line rule (``L1Accumulator(whole_line=True)``)
against ``ReferenceModel(whole_line=True)``, write for write, discards included, on random
runs in every run-time mode, with L2 (``push.ready``) taking writes irregularly."""

import random

import pytest
from amaranth.sim import Simulator

from gradient_compressor.design import L1Accumulator
from gradient_compressor.design.params import LFSR_RESET, LFSR_WIDTH
from gradient_compressor.model import ReferenceModel, CAUSES
from gradient_compressor.model.reference import lfsr_step

from .line_helpers import flush_until_idle
from .test_whole_line_one_lane import MODE_NAMES, gradients, modes_for

#: Geometries of L1 alone: 2 x 2 (sums leave 8 bits often), direct-mapped, and one entry with
#: max_updates 1 (nothing is ever held).
GEOMETRIES = {
    "small": dict(sets=2, ways=2, max_updates=3, grad_width=8, addr_width=8),
    "direct-mapped": dict(sets=4, ways=1, max_updates=2, grad_width=8, addr_width=8),
    "max_updates 1": dict(sets=1, ways=1, max_updates=1, grad_width=8, addr_width=8),
}


def payload_of(model, addr, threshold):
    """The classified payload the streamer gives L1 for a gradient at ``addr`` offered with
    ``threshold``, from the model's state before it takes it: the threshold (0 in a bypass
    window), the EMA's value and settings (the EMA mode, outside a window) and the dual
    threshold's settings."""
    modes = model.modes
    bypass = model.in_bypass_window(addr)
    return dict(threshold=0 if bypass else threshold,
                small_threshold=modes["small_threshold"], stochastic=modes["stochastic"],
                ema=modes["ema_enable"] and not bypass,
                ema_source=model.ema_latched if modes["ema_per_step"] else model.ema,
                ema_scale=modes["ema_scale"], ema_min=modes["ema_min"],
                ema_max=modes["ema_max"])


def run(geometry, ops, *, ready, limit=2000):
    """Run ``ops`` (gradients, flushes, modes, seeds: :mod:`model.ops`) through
    ``L1Accumulator(whole_line=True)`` and the model; return ``(got, expected)``, each the
    writes pushed (``(addr, value, cause)``) and the discards (``(addr, error)``), and what
    the run met (``rides``: direct gradients that hit a held entry; ``unfit``: gradients
    that hit an entry whose sum plus the gradient leaves ``grad_width`` bits)."""
    dut = L1Accumulator(whole_line=True, **geometry)
    model = ReferenceModel(whole_line=True, **geometry)
    gw = geometry["grad_width"]
    bits = min(gw, LFSR_WIDTH)
    writes, discards, met = [], [], {"rides": 0, "unfit": 0}
    expected_writes = []

    async def testbench(ctx):
        lfsr, cycle = LFSR_RESET, 0

        async def tick():
            nonlocal lfsr, cycle
            # (the random bits as the compressor feeds them: connect_random)
            ctx.set(dut.random, (lfsr & (2 ** bits - 1)) << (gw - bits))
            ctx.set(dut.random_next, (lfsr_step(lfsr) & (2 ** bits - 1)) << (gw - bits))
            ctx.set(dut.push.ready, ready(cycle))
            if ctx.get(dut.push.valid) and ctx.get(dut.push.ready):
                writes.append((ctx.get(dut.push.p.addr), ctx.get(dut.push.p.value),
                               CAUSES[ctx.get(dut.push.p.cause).value]))
            if ctx.get(dut.discard):
                discards.append((ctx.get(dut.discard_addr), ctx.get(dut.discard_error)))
            step = ctx.get(dut.random_step)
            await ctx.tick()
            if step:
                lfsr = lfsr_step(lfsr)
            cycle += 1

        for op in ops:
            if op[0] == "modes":
                expected_writes.extend(model.run([op]))
            elif op[0] == "seed":
                # (L1 is idle: every seed follows a flush)
                expected_writes.extend(model.run([op]))
                lfsr = op[1] or LFSR_RESET
            elif op[0] == "flush":
                expected_writes.extend(model.run([op]))
                await flush_until_idle(ctx, dut, tick, limit)
                assert ctx.get(dut.valid_count) == 0
                ctx.set(dut.flush, 0)
                await tick()
            else:
                _, addr, grad, threshold = op
                fields = payload_of(model, addr, threshold)
                judged = model.ema_threshold if fields["ema"] else fields["threshold"]
                entry, _ = model._held_entry(addr)
                if entry is not None:
                    met["rides"] += abs(grad) >= judged
                    met["unfit"] += not model._fits(entry[-2] + grad)
                ctx.set(dut.grad_in.p.addr, addr)
                ctx.set(dut.grad_in.p.grad, grad)
                for name, value in fields.items():
                    ctx.set(getattr(dut.grad_in.p, name), value)
                expected_writes.extend(model.run([op]))
                ctx.set(dut.grad_in.valid, 1)
                for _ in range(limit):
                    taken = ctx.get(dut.grad_in.ready)
                    await tick()
                    if taken:
                        break
                else:
                    raise AssertionError(f"grad_in.ready stayed low for {limit} cycles")
                ctx.set(dut.grad_in.valid, 0)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    expected = ([tuple(w) for w in expected_writes],
                [(d.addr, d.error) for d in model.discards])
    return (writes, discards), expected, met


@pytest.mark.parametrize("mode", MODE_NAMES)
@pytest.mark.parametrize("geometry", list(GEOMETRIES))
def test_whole_line_writes_are_the_models(geometry, mode):
    """Every write (address, value, cause) and every accounted discard of the L1 is the
    model's, in order, with push ready 2 cycles in 3 (and in runs of 5 low cycles now and
    then); the exact run on the small geometry meets direct gradients that carry a held sum
    and sums that would leave grad_width bits."""
    params = GEOMETRIES[geometry]
    ops = gradients(len(geometry) * 7 + len(mode), params, 250,
                    modes_for(params["grad_width"])[mode])
    got, expected, met = run(params, ops,
                             ready=lambda cycle: cycle % 3 != 1 and cycle % 50 >= 5)
    assert got == expected
    assert expected[0], "no write: the run says nothing"
    if geometry == "small" and mode == "exact":
        assert met["rides"] and met["unfit"], met


def test_a_bad_whole_line_is_refused():
    """``whole_line`` is True or False, on one lane and on lines alike."""
    from gradient_compressor.design import LineAccumulator
    from gradient_compressor.design.params import unused
    for make in (L1Accumulator, lambda **kw: LineAccumulator(lanes=2, **kw)):
        for bad in ("yes", 1):
            with pytest.raises(TypeError, match=f"^whole_line must be True or False, not {bad!r}$"):
                make(whole_line=bad)
        made = [make(whole_line=False), make()]
        assert [l1.whole_line for l1 in made] == [False, True]     # the rule by default
        for l1 in made:
            unused(l1)      # (made to be looked at, not elaborated)
