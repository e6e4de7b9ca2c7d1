"""Assumptions on the inputs (the environment's contract).

* ``grad_in``: once ``valid`` is high and not taken, the source keeps ``valid`` high and
  ``addr``/``grad`` stable until ``ready`` (stream rules). ``threshold`` and ``flush`` are free.
* DRAM fairness (termination jobs only): ``dram_out.ready`` is high at least once in every
  ``K`` consecutive cycles.
"""

from amaranth import *

from .base import past

__all__ = ["add"]


def add(h, m, P):
    d = h.dut
    # grad_in: hold until taken.
    stalled = Signal(name="in_stalled_last_cycle")
    last_addr = Signal.like(h.in_addr, name="in_addr_last")
    last_grad = Signal.like(h.in_grad, name="in_grad_last")
    m.d.sync += [
        stalled.eq(d.grad_in.valid & ~d.grad_in.ready),
        last_addr.eq(h.in_addr),
        last_grad.eq(h.in_grad),
    ]
    P.assume("input", "grad_in_valid_held_until_ready",
             ~stalled | (h.in_valid & (h.in_addr == last_addr) & (h.in_grad == last_grad)))
    if h.system and h.lanes > 1:
        # The compressor on lines: the beat's gradients and mask too.
        last_beat = {name: past(m, sig, f"in_{name}") for name, sig in h.in_payload.items()}
        P.assume("input", "beat_held_until_ready",
                 ~stalled | Cat(sig == last_beat[name]
                                for name, sig in h.in_payload.items()).all())

    # DRAM fairness.
    if h.fairness is not None:
        K = h.fairness
        waited = Signal(range(K + 1), name="dram_not_ready_run")
        m.d.sync += waited.eq(Mux(h.in_ready, 0, Mux(waited < K, waited + 1, waited)))
        P.assume("input", "dram_ready_once_in_every_K_cycles",
                 h.in_ready | (waited < K - 1))
