"""Stream helpers shared by the tests of lines: put a line on a payload, offer it until taken,
read a line write back."""

from gradient_compressor.design.layouts import Cause
from gradient_compressor.model import LineWrite


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
