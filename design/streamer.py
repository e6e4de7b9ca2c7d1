from amaranth import *
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .layouts import gradient_layout, classified_layout
from .params import DEFAULTS, checked, check_int

__all__ = ["Streamer"]


class Streamer(wiring.Component):
    """Classifies each gradient as *direct* (``|grad| >= threshold``) or *small*.

    Purely combinational: a gradient passes through with the threshold it is judged against, so
    that everything downstream uses the threshold in force when the gradient was accepted, even
    if ``threshold`` changes while the gradient waits in the pipeline. ``|grad|`` is computed
    unsigned, so ``|-2**(grad_width-1)|`` does not overflow. A threshold of 0 sends every
    gradient straight on.

    Parameters
    ----------
    addr_width : int
        Width of a gradient's address.
    grad_width : int
        Width of a gradient (signed) and of the threshold (unsigned).

    Members
    -------
    grad_in : ``In(stream.Signature(gradient_layout))``
        Gradients from the compute core.
    threshold : ``In(grad_width)``
        The run-time threshold.
    grad_out : ``Out(stream.Signature(classified_layout))``
        The same gradients with ``threshold`` and the verdict ``direct``.
    """

    def __init__(self, *, addr_width=DEFAULTS["addr_width"], grad_width=DEFAULTS["grad_width"]):
        with checked(self):
            self.addr_width = check_int("addr_width", addr_width, minimum=1)
            self.grad_width = check_int("grad_width", grad_width, minimum=2)
        super().__init__({
            "grad_in":   In(stream.Signature(gradient_layout(addr_width, grad_width))),
            "threshold": In(grad_width),
            "grad_out":  Out(stream.Signature(classified_layout(addr_width, grad_width))),
        })

    def elaborate(self, platform):
        m = Module()
        m.d.comb += [
            self.grad_out.valid.eq(self.grad_in.valid),
            self.grad_in.ready.eq(self.grad_out.ready),
            self.grad_out.p.addr.eq(self.grad_in.p.addr),
            self.grad_out.p.grad.eq(self.grad_in.p.grad),
            self.grad_out.p.threshold.eq(self.threshold),
            self.grad_out.p.direct.eq(abs(self.grad_in.p.grad) >= self.threshold),
        ]
        return m
