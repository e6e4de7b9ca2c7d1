"""Little stream helpers for simulation tests (after Glasgow's and Amaranth's docs)."""

__all__ = ["stream_put", "stream_get"]


async def stream_put(ctx, stream, payload):
    """Offer ``payload`` on ``stream`` and wait until it is taken."""
    ctx.set(stream.valid, 1)
    ctx.set(stream.payload, payload)
    await ctx.tick().until(stream.ready)
    ctx.set(stream.valid, 0)


async def stream_get(ctx, stream):
    """Wait for a payload on ``stream`` and take it."""
    ctx.set(stream.ready, 1)
    payload, = await ctx.tick().sample(stream.payload).until(stream.valid)
    ctx.set(stream.ready, 0)
    return payload
