"""The run-time modes' contracts (design/modes.py), with every mode input free (``AnySeq``) and
the stochastic mode's random bits free (:class:`~properties.harness.FreeRandom`):

* ``dual_threshold``: a tiny miss (a small gradient, ``|g| < small_threshold``, whose tag is in
  no valid way of its set as L1 reads it) is what ``discard`` strobes for, and nothing else is; it allocates
  nothing; in mode drop it writes nothing, in mode stochastic it writes ``sign(g) *
  small_threshold`` (``Cause.STOCHASTIC``) exactly when ``u * small_threshold < |g| * 2**R``
  for the random bits ``u`` of ``s1``'s first cycle (:func:`stochastic_writes`; the LFSR only
  steps when a decision commits, so they are its bits throughout), and no other write has
  that cause;
  ``discard_addr`` / ``discard_error`` are its address and ``g - written``. (Accepted = written
  + accounted is the ``conservation`` group's; the tracked set's tiny misses are in the
  ``policy`` model.)
* ``ema``: the EMA equals an exact shadow kept here in wider arithmetic (so it never wraps),
  lies in ``[0, 2**(grad_width-1) << 8]``, and so does its value latched at the last flush;
  outside a bypass window the judged threshold is ``clamp((EMA * scale) >> 12, ema_min,
  ema_max)`` (:func:`ema_threshold`) with ``ema_enable``, else ``threshold``, and with
  ``ema_min <= ema_max`` it lies between them; ``current_threshold`` is the threshold in force the cycle before.
* ``bypass``: inside an enabled window the judged threshold is 0; such a gradient, in ``s1``,
  is offered to L2 unchanged as ``Cause.DIRECT``, with L1 untouched, and leaves with its
  commit (so exactly once: L2 is an order-preserving FIFO, ``fifo``); ``bypassed`` strobes
  the cycle after its acceptance.
"""

from amaranth import *

from design import L1State
from design.layouts import Cause
from design.params import EMA_FRACTION_BITS, EMA_SCALE_FRACTION_BITS, LFSR_WIDTH

__all__ = ["add", "stochastic_writes", "ema_threshold"]


def stochastic_writes(h, random, grad, small):
    """The stochastic mode's rule (design/modes.py): with ``R = min(grad_width, 32)`` and ``u``
    the low ``R`` random bits, a tiny gradient is written iff ``u * small < |grad| * 2**R``."""
    R = min(h.gw, LFSR_WIDTH)
    return random[:R] * small < (abs(grad) << R)


def ema_threshold(h, average):
    """The EMA's threshold for ``average``: the candidate ``(average * ema_scale) >> 12``,
    ``ema_max`` if above it, else ``ema_min`` if below that, else the candidate (so with
    crossed bounds, ``ema_min > ema_max``, a candidate above ``ema_max`` gives ``ema_max`` and
    any other ``ema_min``: what design/modes.py and model/reference.py compute)."""
    mo = h.in_modes
    candidate = (average * mo["ema_scale"]) >> (EMA_FRACTION_BITS + EMA_SCALE_FRACTION_BITS)
    return Mux(candidate > mo["ema_max"], mo["ema_max"],
               Mux(candidate < mo["ema_min"], mo["ema_min"], candidate))


def add(h, m, P):
    d, l1 = h.dut, h.dut.l1
    mo = h.in_modes
    s1, push, pushed = l1.s1, l1.push, l1.push.p
    run = l1.state == L1State.RUN
    judged = l1.grad_in.p.threshold       # the streamer's: the threshold a gradient is judged by

    # -- dual threshold --------------------------------------------------------------------
    tag = s1.addr[h.set_bits:]
    # s1's set as L1 works on it (that it is the row in storage, forwarding included, is the
    # pipeline group's s1_row_is_row_in_storage)
    in_row = Cat(w.valid & (w.tag == tag) for w in l1.row.ways).any()
    tiny = Signal(name="s1_tiny_miss")    # s1 holds a tiny miss (committing or waiting)
    m.d.comb += tiny.eq(run & l1.s1_valid & ~s1.direct & ~in_row &
                        (abs(s1.grad) < s1.small_threshold))
    h.s1_tiny_miss = tiny
    rounded = Mux(s1.grad < 0, -s1.small_threshold, s1.small_threshold)
    writes = Signal(name="s1_stochastic_writes")
    m.d.comb += writes.eq(s1.stochastic & h.s1_decision)   # rule on s1's first cycle's bits
    P.check("dual_threshold", "discard_iff_a_tiny_miss_commits",
            d.discard == (tiny & h.s1_commits))
    P.check("dual_threshold", "tiny_miss_writes_sign_times_small_threshold_or_nothing",
            ~tiny | ((push.valid == writes) &
                     (~push.valid | ((pushed.cause == Cause.STOCHASTIC) &
                                     (pushed.addr == s1.addr) & (pushed.value == rounded)))))
    P.check("dual_threshold", "stochastic_write_only_for_a_tiny_miss",
            ~(push.valid & (pushed.cause == Cause.STOCHASTIC)) | (tiny & s1.stochastic))
    P.check("dual_threshold", "tiny_miss_allocates_nothing",
            ~tiny | ~l1.storage_write.en)
    P.check("dual_threshold", "discard_reports_address_and_grad_minus_written",
            ~d.discard | ((d.discard_addr == s1.addr) &
                          (d.discard_error == s1.grad - Mux(push.valid, pushed.value, 0))))

    # -- EMA ---------------------------------------------------------------------------------
    # The exact EMA, in arithmetic wide enough never to wrap: a gradient accepted outside the
    # bypass windows updates it, flush latches it (no gradient is accepted under flush).
    F = EMA_FRACTION_BITS
    top = 2 ** (h.gw - 1) << F            # the largest |grad| << F
    shadow  = Signal(signed(h.gw + F + 3), name="ema_exact")
    latched = Signal(signed(h.gw + F + 3), name="ema_exact_latched")
    step = Signal(signed(h.gw + F + 3), name="ema_exact_step")
    m.d.comb += step.eq(((abs(h.in_grad) << F) - shadow) >> mo["ema_shift"])
    with m.If(h.accept & ~h.in_window):
        m.d.sync += shadow.eq(shadow + step)
    with m.If(h.in_flush):
        m.d.sync += latched.eq(shadow)
    ema = d.ema
    P.check("ema", "ema_is_the_exact_ema", ema.average == shadow)
    P.check("ema", "ema_latched_at_flush_is_the_exact_ema", ema.latched_average == latched)
    P.check("ema", "ema_within_0..2**(grad_width-1+8)",
            (shadow >= 0) & (shadow <= top) & (latched >= 0) & (latched <= top))
    source = Mux(mo["ema_per_step"], ema.latched_average, ema.average)
    in_force = Signal(h.gw, name="threshold_in_force_expected")   # outside a window
    m.d.comb += in_force.eq(Mux(mo["ema_enable"], ema_threshold(h, source), h.in_thresh))
    P.check("ema", "judged_threshold_outside_windows_is_the_one_in_force",
            h.in_window | (judged == in_force))
    P.check("ema", "ema_threshold_within_ema_min..ema_max",
            ~(mo["ema_enable"] & ~h.in_window & (mo["ema_min"] <= mo["ema_max"])) |
            ((mo["ema_min"] <= judged) & (judged <= mo["ema_max"])))
    last_in_force = Signal(h.gw, name="threshold_in_force_last_cycle")
    m.d.sync += last_in_force.eq(in_force)
    P.check("ema", "current_threshold_is_last_cycles_threshold_in_force",
            d.current_threshold == last_in_force)
    P.check("ema", "ema_average_port_is_the_ema", d.ema_average == ema.average)

    # -- bypass windows --------------------------------------------------------------------
    P.check("bypass", "judged_threshold_zero_in_a_window", ~h.in_window | (judged == 0))
    P.check("bypass", "s1_from_a_window_judged_against_zero",
            ~h.s1_in_window | (l1.s1_valid & (s1.threshold == 0) & s1.direct))
    P.check("bypass", "window_gradient_offered_once_unchanged_as_direct_l1_untouched",
            ~(h.s1_in_window & run) |
            (push.valid & (pushed.addr == s1.addr) & (pushed.value == s1.grad) &
             (pushed.cause == Cause.DIRECT) & ~l1.storage_write.en))
    last_bypass = Signal(name="accepted_in_a_window_last_cycle")
    m.d.sync += last_bypass.eq(h.accept & h.in_window)
    P.check("bypass", "bypassed_strobe_the_cycle_after_a_window_gradient_is_accepted",
            d.bypassed == last_bypass)
