from amaranth import *
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .layouts import gradient_layout, classified_layout, line_layout, classified_line_layout
from .params import (DEFAULTS, EMA_SCALE_WIDTH, checked, check_int, check_lanes,
                     ema_fraction_bits, log2)

__all__ = ["Streamer"]


class Streamer(wiring.Component):
    """Gives each gradient the threshold it is judged against: a gradient is *direct* if
    ``|grad| >= threshold``, else *small*.

    Purely combinational: a gradient passes through with its threshold, so that everything
    downstream uses the threshold in force when the gradient was accepted, even if
    ``threshold`` changes while the gradient waits in the pipeline. The verdict itself is made
    by L1 in its pipeline (``s2``, :class:`~design.l1.L1Accumulator`): a compare at acceptance,
    behind the bypass windows' address compares, was one of the design's longest paths. A
    threshold of 0 sends every gradient straight on, and so does ``bypass`` (the gradient lies
    in an enabled bypass window: it is judged against threshold 0). The dual-threshold settings
    travel with the gradient too (see :mod:`design.modes`).

    In the EMA mode (``ema``, outside a bypass window) the EMA's value and settings travel
    with the gradient instead: the EMA threshold takes a multiply and a clamp, so L1 computes
    it in its pipeline as well (``ema`` set in the payload; its ``threshold`` is then not yet
    the one).

    On lines (``lanes > 1``) a beat passes through with the lanes' ``bypass`` bits, the
    threshold and the EMA's settings as they are: L1 judges a lane in a bypass window against
    0 (:class:`~design.line_accumulator.LineAccumulator`).

    Parameters
    ----------
    addr_width : int
        Width of a gradient's address.
    grad_width : int
        Width of a gradient (signed) and of the threshold (unsigned).
    lanes : int
        Gradients per beat (:func:`~design.layouts.line_layout` and
        :func:`~design.layouts.classified_line_layout` on lines; ``bypass`` is ``In(lanes)``,
        ``ema_source`` has ``log2(lanes)`` more fraction bits).

    Members
    -------
    grad_in : ``In(stream.Signature(gradient_layout))``
        Gradients from the compute core.
    threshold : ``In(grad_width)``
        The threshold in force.
    bypass : ``In(1)``
        The gradient on ``grad_in`` lies in an enabled bypass window.
    small_threshold : ``In(grad_width)``
        Dual threshold (0: off).
    stochastic : ``In(1)``
        Dual threshold mode: 0 drop, 1 stochastic.
    ema : ``In(1)``
        The EMA threshold is in force (``threshold`` is not).
    ema_source : ``In(grad_width + 8)``, ema_scale : ``In(EMA_SCALE_WIDTH)``, \
    ema_min, ema_max : ``In(grad_width)``
        The EMA's value that the threshold follows, and the threshold's scale and clamp bounds.
    grad_out : ``Out(stream.Signature(classified_layout))``
        The same gradients with the threshold they are judged against and the dual-threshold
        and EMA settings.
    """

    def __init__(self, *, addr_width=DEFAULTS["addr_width"], grad_width=DEFAULTS["grad_width"],
                 lanes=1):
        with checked(self):
            self.addr_width = check_int("addr_width", addr_width, minimum=1)
            self.grad_width = check_int("grad_width", grad_width, minimum=2)
            self.lanes      = check_lanes(lanes)
        if lanes == 1:
            beat, classified = (gradient_layout(addr_width, grad_width),
                                classified_layout(addr_width, grad_width))
        else:
            beat, classified = (line_layout(addr_width, grad_width, lanes),
                                classified_line_layout(addr_width, grad_width, lanes))
        super().__init__({
            "grad_in":   In(stream.Signature(beat)),
            "threshold":       In(grad_width),
            "bypass":          In(lanes),
            "small_threshold": In(grad_width),
            "stochastic":      In(1),
            "ema":             In(1),
            "ema_source":      In(grad_width + ema_fraction_bits(lanes)),
            "ema_scale":       In(EMA_SCALE_WIDTH),
            "ema_min":         In(grad_width),
            "ema_max":         In(grad_width),
            "grad_out":  Out(stream.Signature(classified)),
        })

    def elaborate(self, platform):
        m = Module()
        judged, ema = self._judged_against()
        m.d.comb += [
            self.grad_out.valid.eq(self.grad_in.valid),
            self.grad_in.ready.eq(self.grad_out.ready),
            self.grad_out.p.addr.eq(self._line()),
            *judged,
            self.grad_out.p.small_threshold.eq(self.small_threshold),
            self.grad_out.p.stochastic.eq(self.stochastic),
            *ema,
            self.grad_out.p.ema_source.eq(self.ema_source),
            self.grad_out.p.ema_scale.eq(self.ema_scale),
            self.grad_out.p.ema_min.eq(self.ema_min),
            self.grad_out.p.ema_max.eq(self.ema_max),
        ]
        return m

    def _judged_against(self):
        """The gradients and the threshold they are judged against, and the EMA mode's bit:
        one gradient in a bypass window gets threshold 0 and no EMA; a line's lanes carry
        their bypass bits instead."""
        i, o = self.grad_in.p, self.grad_out.p
        if self.lanes == 1:
            return ([o.grad.eq(i.grad), o.threshold.eq(Mux(self.bypass, 0, self.threshold))],
                    [o.ema.eq(self.ema & ~self.bypass)])
        return ([o.grads.eq(i.grads), o.mask.eq(i.mask), o.bypass.eq(self.bypass),
                 o.threshold.eq(self.threshold)], [o.ema.eq(self.ema)])

    def _line(self):
        """The address passed on: on lines, the line's (the low ``log2(lanes)`` bits of
        ``addr`` are ignored: lane ``i`` is at ``line + i``)."""
        addr = self.grad_in.p.addr
        return addr if self.lanes == 1 else Cat(Const(0, log2(self.lanes)),
                                                 addr[log2(self.lanes):])
