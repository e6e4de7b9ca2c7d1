"""The streamer's contract (:class:`design.streamer.Streamer`), stated on the streamer alone
and proven in its own harness (:mod:`.component`), every input free.

``streamer``: the stream passes through (``valid`` forward, ``ready`` back, address and
gradient unchanged); the gradient carries the threshold it is judged against, 0 in a bypass
window, else ``threshold``; it carries the EMA flag only outside a window, and the dual
threshold's and the EMA's settings as they are.
"""

__all__ = ["contract"]


def contract(m, P, s):
    i, o = s.grad_in, s.grad_out
    P.check("streamer", "stream_passes_through",
            (o.valid == i.valid) & (i.ready == o.ready) & (o.p.addr == i.p.addr) &
            (o.p.grad == i.p.grad))
    P.check("streamer", "judged_against_0_in_a_window_else_threshold",
            (s.bypass & (o.p.threshold == 0)) | (~s.bypass & (o.p.threshold == s.threshold)))
    P.check("streamer", "ema_only_outside_a_window", o.p.ema == (s.ema & ~s.bypass))
    P.check("streamer", "settings_carried_as_they_are",
            (o.p.small_threshold == s.small_threshold) & (o.p.stochastic == s.stochastic) &
            (o.p.ema_source == s.ema_source) & (o.p.ema_scale == s.ema_scale) &
            (o.p.ema_min == s.ema_min) & (o.p.ema_max == s.ema_max))
