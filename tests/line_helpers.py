"""Helpers shared by the tests of lines: put a line on a payload, offer it until taken, read a
line write back; random beats on a small geometry, and the comparison of a run of them with the
line model (the Amaranth simulation's and the exported Verilog's under Verilator)."""

from collections import Counter

from gradient_compressor.design.layouts import Cause
from gradient_compressor.design.params import port
from gradient_compressor.model import LineModel, LineWrite

#: A small geometry (2 sets x 2 ways of lines, an L2 of 4), where evictions and L2 backpressure
#: are frequent.
GEOMETRY = dict(addr_width=9, grad_width=8, sets=2, ways=2, max_updates=3, fifo_depth=4,
                burst_size=2)
#: Run-time mode settings by port name, one set per mode.
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


def set_line(ctx, payload, addr, lanes, mask, field="grads"):
    """Put a line on ``payload``: its address, one value per lane in ``field``, the mask."""
    ctx.set(payload.addr, addr)
    for i, value in enumerate(lanes):
        ctx.set(getattr(payload, field)[i], value)
    ctx.set(payload.mask, mask)


async def offer(ctx, stream, tick, limit):
    """Hold ``stream.valid`` high until the other side takes the payload (``tick()`` a cycle at
    a time, at most ``limit`` cycles waiting), then drop it; return the cycles waited."""
    ctx.set(stream.valid, 1)
    for waited in range(limit):
        if ctx.get(stream.ready):
            break
        await tick()
    else:
        raise AssertionError(f"ready stayed low for {limit} cycles")
    await tick()
    ctx.set(stream.valid, 0)
    return waited


async def flush_until_idle(ctx, dut, tick, limit):
    """Raise ``dut.flush`` and wait (``tick()`` a cycle at a time, at most ``limit`` cycles) for
    ``dut.idle``; ``flush`` is left high."""
    ctx.set(dut.flush, 1)
    for _ in range(limit):
        if ctx.get(dut.idle):
            return
        await tick()
    raise AssertionError(f"idle stayed low for {limit} cycles under flush")


async def drive_line_steps(ctx, dut, steps, modes, tick, limit):
    """Drive the compressor on lines: set ``modes`` (mode input -> value), then each step's
    beats ``(line, grads, mask, threshold)``, each offered until taken, and after each step a
    flush barrier until ``idle``."""
    for name, value in modes.items():
        ctx.set(port(dut, name), value)
    for beats in steps:
        for line, grads, mask, threshold in beats:
            set_line(ctx, dut.grad_in.p, line, grads, mask)
            ctx.set(dut.threshold, threshold)
            await offer(ctx, dut.grad_in, tick, limit)
        await flush_until_idle(ctx, dut, tick, limit)
        await tick()
        ctx.set(dut.flush, 0)
    await tick()


def line_write(ctx, payload, lanes):
    """The line write on ``payload`` (a :func:`~design.layouts.line_write_layout`) as a
    :class:`~model.LineWrite`: the lanes outside the mask as value 0, cause None."""
    mask = ctx.get(payload.mask)
    masked = [mask >> i & 1 for i in range(lanes)]
    return LineWrite(ctx.get(payload.addr),
                     tuple(ctx.get(payload.values[i]) if masked[i] else 0 for i in range(lanes)),
                     mask,
                     tuple(Cause(ctx.get(payload.causes[i])).name if masked[i] else None
                           for i in range(lanes)))


def random_steps(rng, lanes, steps=3, beats=25, *, geometry=GEOMETRY, lines=range(8)):
    """``steps`` lists of ``beats`` random beats ``(line, grads, mask, threshold)`` on
    ``geometry`` (:data:`GEOMETRY` by default: its ``grad_width`` bounds the gradients) to the
    line numbers ``lines`` (by default 8, so that they conflict on :data:`GEOMETRY`; small,
    medium and full-range gradients; random masks and thresholds), each list to be ended by a
    flush barrier."""
    top = 2 ** (geometry["grad_width"] - 1)
    lines = list(lines)
    out = []
    for _ in range(steps):
        out.append([(rng.choice(lines) * lanes,
                     [rng.choice([rng.randint(-12, 12), rng.randint(-50, 50),
                                  rng.randint(-top, top - 1)]) for _ in range(lanes)],
                     rng.randrange(2 ** lanes), rng.choice([15, 40, 90]))
                    for _ in range(beats)])
    return out


def model_run(lanes, steps, modes, *, whole_line=False, geometry=GEOMETRY):
    """The line model on ``geometry`` (a compressor's parameters, :data:`GEOMETRY` by default;
    the model reads L1's) run through ``steps`` (:func:`random_steps`) in ``modes``, by the
    whole-line rule if ``whole_line``: its line writes, and its discards ``(addr, error)``."""
    model = LineModel(lanes=lanes, whole_line=whole_line,
                      **{k: geometry[k] for k in ("addr_width", "grad_width", "sets", "ways",
                                                  "max_updates") if k in geometry})
    ops = [("modes", modes)] if modes else []
    for beats in steps:
        ops += [("line", *beat) for beat in beats] + [("flush",)]
    return model.run(ops), [(d.addr, d.error) for d in model.discards]


def per_address(pairs):
    """``{addr: sum}`` of ``(addr, value)`` pairs, the addresses whose sum is 0 left out."""
    total = Counter()
    for addr, value in pairs:
        total[addr] += value
    return {addr: value for addr, value in total.items() if value}


def check_with_the_model(lanes, steps, modes, dram, discards, *, whole_line=False,
                         geometry=GEOMETRY):
    """Assert that a compressor of ``lanes`` on ``geometry`` (:data:`GEOMETRY` by default),
    run through ``steps`` in ``modes``, did what the line model does (by the whole-line rule
    if ``whole_line``, as the compressor was built).

    Parameters
    ----------
    lanes : int
        Gradients per line.
    steps, modes
        As for :func:`model_run`.
    dram : list of (int, int)
        The DRAM writes taken, lane by lane: ``(addr, value)`` for each lane in a write's mask.
    discards : list of (int, int)
        The discards ``(addr, error)``, in order (within a cycle, by lane).
    whole_line : bool
        The compressor was built with ``whole_line=True``: the model follows the same rule.
    geometry : dict
        The compressor's parameters (those of L1 are the model's).

    Returns
    -------
    list of LineWrite
        The model's line writes, for a caller that can see L1's.
    """
    expected, expected_discards = model_run(lanes, steps, modes, whole_line=whole_line,
                                            geometry=geometry)
    assert discards == expected_discards
    # DRAM holds the line writes' values per address (L2 combines writes, never changes a sum)
    assert per_address(dram) == per_address(w for lw in expected for w in
                                            ((x.addr, x.value) for x in lw.writes()))
    # ... and, with what was accounted, everything accepted.
    accepted = [(line + i, grads[i]) for beats in steps for line, grads, mask, _ in beats
                for i in range(lanes) if mask >> i & 1]
    assert per_address(dram + discards) == per_address(accepted)
    return expected
