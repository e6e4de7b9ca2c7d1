"""The run-time modes' contracts (design/modes.py), with every mode input free (``AnySeq``) and
the stochastic mode's random bits free (:class:`~properties.harness.FreeRandom`):

* ``dual_threshold`` (L1's contract, proven on L1 alone): a tiny miss (a small gradient,
  ``|g| < small_threshold``, whose tag is in no valid way of its set as L1 reads it) is what
  ``discard`` strobes for, and nothing else is; it allocates nothing; in mode drop it writes
  nothing, in mode stochastic it writes ``sign(g) * small_threshold`` (``Cause.STOCHASTIC``)
  exactly when ``u * small_threshold < |g| * 2**R`` for the random bits ``u`` of ``s1``'s first
  cycle (:func:`stochastic_writes`; the LFSR only steps when a decision commits, so they are its
  bits throughout), and no other write has that cause; ``discard_addr`` / ``discard_error`` are
  its address and ``g - written``. (Accepted = written + accounted is the ``conservation``
  group's; the tracked set's tiny misses are in the ``policy`` model.)
* ``ema``: the EMA equals an exact shadow kept here in wider arithmetic (so it never wraps),
  lies in ``[0, 2**(grad_width-1) << 8]``, and so does its value latched at the last flush;
  outside a bypass window the judged threshold is
  ``clamp((EMA * scale) >> 12, ema_min, ema_max)`` (:func:`ema_threshold`) with ``ema_enable``,
  else ``threshold``, and with ``ema_min <= ema_max`` it lies between them;
  ``current_threshold`` is the threshold in force the cycle before.
* ``bypass``: inside an enabled window the judged threshold is 0; such a gradient, in ``s1``,
  is offered to L2 unchanged as ``Cause.DIRECT``, with L1 untouched, and leaves with its
  commit (so exactly once: L2 is an order-preserving FIFO, ``fifo``); ``bypassed`` strobes
  the cycle after its acceptance.
"""

from amaranth import *

from gradient_compressor.design.layouts import Cause
from gradient_compressor.design.params import (EMA_FRACTION_BITS, EMA_SCALE_FRACTION_BITS,
                                               LFSR_WIDTH, ema_fraction_bits, log2)

__all__ = ["add", "stochastic_writes", "ema_threshold"]


def stochastic_writes(h, random, grad, small):
    """The stochastic mode's rule (design/modes.py): with ``R = min(grad_width, 32)`` and ``u``
    the low ``R`` random bits, a tiny gradient is written iff ``u * small < |grad| * 2**R``."""
    R = min(h.gw, LFSR_WIDTH)
    return random[:R] * small < (abs(grad) << R)


def ema_threshold(h, average, scale, minimum, maximum, fraction_bits=EMA_FRACTION_BITS):
    """The EMA's threshold for ``average``: the candidate ``(average * scale) >> 12``,
    ``maximum`` if above it, else ``minimum`` if below that, else the candidate (so with
    crossed bounds, ``minimum > maximum``, a candidate above ``maximum`` gives ``maximum`` and
    any other ``minimum``: what design/modes.py and model/reference.py compute)."""
    candidate = (average * scale) >> (fraction_bits + EMA_SCALE_FRACTION_BITS)
    return ema_clamp(candidate, minimum, maximum)


def ema_clamp(candidate, minimum, maximum):
    """The clamp of :func:`ema_threshold`."""
    return Mux(candidate > maximum, maximum, Mux(candidate < minimum, minimum, candidate))


def add(h, m, P):
    """The dual threshold (L1's contract); in the system (``h.system``) the EMA and the bypass
    windows too."""
    d, probe = h.dut, h.dut.l1.probe
    if h.lanes > 1:
        _line_dual_threshold(h, m, P)
        if h.system:
            _line_system(h, m, P)
        return
    g3, g4 = h.stage[3], h.stage[4]       # the gradients in s3 and s4, as accepted
    w4 = probe.write                     # s4's write into the queue

    # -- dual threshold --------------------------------------------------------------------
    # A tiny miss decides in s3: not direct, its tag in no valid way of its set as the set is
    # now (that s3 decides on exactly that row is the pipeline group's), |g| < small. Its
    # write, if any, is s4's a cycle later, and so are the discard outputs (L1 registers them).
    # Checked for the gradients of the tracked set (an AnyConst: so for every set), whose
    # rows the policy group keeps well formed.
    # Whether its address is held in its set now: s3's corrected view, which the pipeline
    # group proves to be the set as it is now (for the tracked set).
    tiny = Signal(name="s3_tiny_miss")
    m.d.comb += tiny.eq(h.stage_valid[3] & (h.set_of(g3.addr) == h.track_set) &
                        ~(abs(g3.grad) >= h.judged[3]) & ~probe.s3_now_hit &
                        (abs(g3.grad) < g3.small_threshold))
    h.s3_tiny_miss = tiny
    tiny4 = Signal(name="s4_tiny_miss")   # the gradient in s4 was a tiny miss
    rule4 = Signal(name="stochastic_rule_s4")
    m.d.sync += [tiny4.eq(tiny), rule4.eq(h.s3_rule)]
    tracked4 = h.stage_valid[4] & (h.set_of(g4.addr) == h.track_set)
    level4 = h.rounding_level(g4.small_threshold)     # (small_threshold, or the rule's)
    rounded = Mux(g4.grad < 0, -level4, level4)
    writes = g4.stochastic & rule4
    P.check("dual_threshold", "discard_iff_a_tiny_miss_decided_the_cycle_before",
            ~tracked4 | (d.discard == tiny4))
    # (The tracked set is arbitrary, so the above speaks of every gradient in s4; this of the
    # cycles with none.)
    P.check("dual_threshold", "no_discard_without_a_decision",
            h.stage_valid[4] | ~d.discard)
    P.check("dual_threshold", "tiny_miss_writes_sign_times_small_threshold_or_nothing",
            ~tiny4 | ((probe.pushes == writes) &
                      (~writes | ((w4.cause == Cause.STOCHASTIC) & (w4.addr == g4.addr) &
                                  (w4.value == rounded)))))
    P.check("dual_threshold", "stochastic_write_only_for_a_tiny_miss",
            ~(tracked4 & probe.pushes & (w4.cause == Cause.STOCHASTIC)) |
            (tiny4 & g4.stochastic))
    P.check("dual_threshold", "tiny_miss_allocates_nothing", ~tiny4 | ~probe.writes_row)
    P.check("dual_threshold", "discard_reports_address_and_grad_minus_written",
            ~(tracked4 & d.discard) |
            ((d.discard_addr == g4.addr) &
             (d.discard_error == g4.grad - Mux(probe.pushes, w4.value, 0))))
    if h.system:
        _system(h, m, P)


def _system(h, m, P):
    """The EMA and the bypass windows (the streamer and the EMA unit with L1), and what L1
    requires of its random source."""
    d = h.dut
    # The LFSR's seed is loaded only while idle (so never under a pending decision: what L1's
    # contract is proven under); the LFSR itself is proven alone (properties/lfsr.py).
    P.check("idle", "lfsr_loads_only_while_idle", ~d.lfsr.load | d.idle)
    _ema_is_exact(h, m, P)
    _ema_threshold(h, m, P)
    _bypass_windows(h, m, P)


def _ema_is_exact(h, m, P):
    """The EMA and its value latched at flush equal an exact shadow, and stay in range."""
    mo = h.in_modes
    # The exact EMA, in arithmetic wide enough never to wrap: a gradient accepted outside the
    # bypass windows updates it, flush latches it.
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
    ema = h.dut.ema
    P.check("ema", "ema_is_the_exact_ema", ema.average == shadow)
    P.check("ema", "ema_latched_at_flush_is_the_exact_ema", ema.latched_average == latched)
    P.check("ema", "ema_within_0..2**(grad_width-1+8)",
            (shadow >= 0) & (shadow <= top) & (latched >= 0) & (latched <= top))


def _ema_threshold(h, m, P):
    """The threshold a gradient carries and is judged by, and ``current_threshold``."""
    d, mo, ema = h.dut, h.in_modes, h.dut.ema
    acc = h.dut.l1.grad_in.p
    g3 = h.stage[3]
    # A gradient accepted outside a window carries the threshold in force: ``threshold``, or
    # in the EMA mode the EMA (the one that it follows: now, or latched at the last flush)
    # and the settings, from which L1 computes the EMA threshold (the harness's judged
    # threshold, which the pipeline group proves s3 is judged by).
    source = Mux(mo["ema_per_step"], ema.latched_average, ema.average)
    P.check("ema", "accepted_outside_windows_carries_the_threshold_in_force",
            ~h.accept | h.in_window |
            ((acc.ema == mo["ema_enable"]) & (acc.threshold == h.in_thresh) &
             (~acc.ema | ((acc.ema_source == source) & (acc.ema_scale == mo["ema_scale"]) &
                          (acc.ema_min == mo["ema_min"]) & (acc.ema_max == mo["ema_max"])))))
    P.check("ema", "ema_threshold_within_ema_min..ema_max",
            ~(h.stage_valid[3] & g3.ema & (g3.ema_min <= g3.ema_max)) |
            ((g3.ema_min <= h.judged[3]) & (h.judged[3] <= g3.ema_max)))
    # current_threshold: the threshold in force three cycles before, computed in the design's
    # steps (register, multiply, clamp), so that the solver meets its multiply.
    shown = {}
    for name, value in [("source", source), ("scale", mo["ema_scale"]),
                        ("enable", mo["ema_enable"]), ("min", mo["ema_min"]),
                        ("max", mo["ema_max"]), ("threshold", h.in_thresh)]:
        first = Signal(Value.cast(value).shape(), name=f"shown_{name}_1")
        second = Signal(Value.cast(value).shape(), name=f"shown_{name}_2")
        m.d.sync += [first.eq(value), second.eq(first)]
        shown[name] = (first, second)
    candidate = Signal(h.gw + 4, name="shown_candidate_2")
    m.d.sync += candidate.eq((shown["source"][0] * shown["scale"][0]) >>
                             (EMA_FRACTION_BITS + EMA_SCALE_FRACTION_BITS))
    expected = Signal(h.gw, name="current_threshold_expected")
    m.d.sync += expected.eq(Mux(shown["enable"][1],
                                ema_clamp(candidate, shown["min"][1], shown["max"][1]),
                                shown["threshold"][1]))
    P.check("ema", "current_threshold_is_the_threshold_in_force_3_cycles_before",
            d.current_threshold == expected)
    P.check("ema", "ema_average_port_is_the_ema", d.ema_average == ema.average)


def _bypass_windows(h, m, P):
    """A gradient accepted in a window is judged against 0 and leaves once, unchanged, as
    ``Cause.DIRECT``, L1 untouched (under the whole-line rule: with its address's held sum,
    if any); ``bypassed`` strobes the cycle after."""
    d, probe = h.dut, h.dut.l1.probe
    acc = h.dut.l1.grad_in.p
    s3, w4, g4 = probe.deciding, probe.write, h.stage[4]
    P.check("bypass", "accepted_in_a_window_judged_against_zero",
            ~(h.accept & h.in_window) | ((acc.threshold == 0) & ~acc.ema))
    P.check("bypass", "s3_from_a_window_judged_against_zero",
            ~h.stage_window[3] | (probe.in_stage[2] & (s3.threshold == 0)))
    unchanged = (w4.value == g4.grad) & ~probe.writes_row
    if h.whole_line:
        # Under the whole-line rule a direct gradient whose address holds a sum carries it (or,
        # where the two would not fit, leaves alone and the sum stays): L1's row is then
        # rewritten, and the value is the policy model's (group policy).
        unchanged = unchanged | probe.writes_row
    P.check("bypass", "window_gradient_offered_once_unchanged_as_direct_l1_untouched",
            ~h.stage_window[4] |
            (probe.pushes & (w4.addr == g4.addr) & (w4.cause == Cause.DIRECT) & unchanged))
    last_bypass = Signal(name="accepted_in_a_window_last_cycle")
    m.d.sync += last_bypass.eq(h.accept & h.in_window)
    P.check("bypass", "bypassed_strobe_the_cycle_after_a_window_gradient_is_accepted",
            d.bypassed == last_bypass)


def _line_dual_threshold(h, m, P):
    """On lines (the line L1 alone): the dual threshold's accounting, lane by lane. Which lanes
    are tiny, and what a tiny lane writes, is the line policy model's (``policy`` group:
    ``hit_miss_strobes_are_the_models``, ``discard_strobe_is_the_models``, the line writes);
    here what the discard outputs report: no discard without a beat in ``s4``, at the beat's
    line, each discarded lane's ``grad - written``."""
    d, l1, N = h.dut, h.dut.l1, h.lanes
    probe = l1.probe
    g4, w4 = h.stage[4], probe.write
    P.check("dual_threshold", "no_discard_without_a_decision",
            h.stage_valid[4] | ~d.discard.any())
    # When the random bits step (model/lines.py: one draw per beat, the LFSR stepping once
    # after it): for a beat in s3 that misses its line with tiny lanes (as accepted: the
    # harness's copy, judged by its threshold), in mode stochastic, whether or not a lane was
    # rounded or written (under either rule); never for another beat, nor without a beat. The
    # miss is L1's hit strobe, which the policy group proves the model's
    # (hit_miss_strobes_are_the_models): stated on the model's match itself, the 8-lane
    # invariants job did not finish its induction in minutes.
    x = h.line_beat
    draws = ~l1.hit & x.tiny.any() & x.g.stochastic
    P.check("dual_threshold", "random_bits_step_once_for_a_beat_missing_with_tiny_lanes",
            Mux(h.stage_valid[3], l1.random_step == draws, ~l1.random_step))
    written = [Mux(probe.pushes & w4.mask[i], w4.values[i], 0) for i in range(N)]
    P.check("dual_threshold", "discard_reports_address_and_grad_minus_written",
            ~d.discard.any() |
            ((d.discard_addr == g4.addr) &
             Cat(~d.discard[i] | (d.discard_error[i] == g4.grads[i] - written[i])
                 for i in range(N)).all()))


def _line_system(h, m, P):
    """On lines, in the system: what L1 requires of its random source, the EMA (a beat's one
    update, its lag) and the bypass windows (each lane's own address against them)."""
    d, l1 = h.dut, h.dut.l1
    P.check("idle", "lfsr_loads_only_while_idle", ~d.lfsr.load | d.idle)
    _line_ema(h, m, P)
    P.check("bypass", "each_lane_carries_whether_its_address_is_in_a_window",
            ~d.grad_in.valid | (l1.grad_in.p.bypass == h.in_window))
    last_bypass = Signal(h.lanes, name="window_lanes_accepted_last_cycle")
    m.d.sync += last_bypass.eq(Mux(h.accept, h.in_window & d.grad_in.p.mask, 0))
    P.check("bypass", "bypassed_strobe_the_cycle_after_a_window_lane_is_accepted",
            d.bypassed == last_bypass)


def _line_ema(h, m, P):
    """The EMA on lines (design/modes.py, ``EmaThreshold._beat_pipeline``; model/lines.py): a
    beat accepted updates it once, by its masked lanes outside the bypass windows (``k`` of
    them), ``ema += ((sum |g| << F) - k * ema) >> (shift + log2(lanes))``; the unit's
    ``average`` shows the beats accepted up to three cycles before (two cycles of the update's
    pipeline); a beat carries the EMA before the last two updates (``EMA_LINE_LAG``), or the
    one latched at the last flush. Stated against an exact EMA kept here from the ports, in
    arithmetic wide enough never to wrap."""
    d, mo, ema, N = h.dut, h.in_modes, h.dut.ema, h.lanes

    def check(name, test):
        # (Assumed only by the ema jobs: no other group needs the EMA's value, and its exact
        # shadow would only give the other jobs' solvers more to carry.)
        P.check("ema", name, test, only_for=["ema"])
    acc = d.l1.grad_in.p
    F, L = ema_fraction_bits(N), log2(N)
    width = h.gw + F + 3
    top = 2 ** (h.gw - 1) << F            # the largest |g| << F: the EMA never exceeds it
    beat = d.grad_in.p
    # The lanes of the beat accepted now that update the EMA, and their |g|.
    sampled = Signal(N, name="ema_lanes_sampled")
    m.d.comb += sampled.eq(Mux(h.accept, beat.mask & ~h.in_window, 0))
    k = sum(sampled[i] for i in range(N))
    magnitude = sum(Mux(sampled[i], abs(beat.grads[i]), 0) for i in range(N))
    # history[0] the exact EMA of every beat accepted before this cycle, history[j] the EMA
    # before its last j updates (a beat whose lanes are all bypassed or masked updates
    # nothing, as in the line model).
    history = [Signal(signed(width), name=f"ema_exact_before_{j}_updates") for j in range(5)]
    step = Signal(signed(width), name="ema_exact_line_step")
    m.d.comb += step.eq(((magnitude << F) - k * history[0]) >> (mo["ema_shift"] + L))
    with m.If(sampled.any()):
        m.d.sync += [history[0].eq(history[0] + step),
                     *[history[j].eq(history[j - 1]) for j in range(1, 5)]]
    # Whether the beats accepted one and two cycles ago updated it (still in the unit's
    # pipeline), and the exact EMA two cycles ago (of the beats up to three cycles before).
    flight = [Signal(name=f"ema_update_in_flight_{j}") for j in range(2)]
    late = [Signal(signed(width), name=f"ema_exact_{j + 1}_cycles_ago") for j in range(2)]
    latched = Signal(signed(width), name="ema_exact_line_latched")
    m.d.sync += [flight[0].eq(sampled.any()), flight[1].eq(flight[0]),
                 late[0].eq(history[0]), late[1].eq(late[0])]
    with m.If(h.in_flush):
        m.d.sync += latched.eq(late[1])
    check("line_ema_is_the_exact_ema_of_the_beats_up_to_3_cycles_before",
            ema.average == late[1])
    check("line_ema_latched_at_flush_is_the_ema_then", ema.latched_average == latched)
    check("line_ema_within_0..2**(grad_width-1+F)",
            Cat(((x >= 0) & (x <= top)) for x in history + late + [latched]).all())
    # The unit's own record of the updates before its pipeline (needed by the induction): with
    # n updates in flight the EMA is the one before the last n, recent_averages[i] the one
    # before the last n + 1 + i.
    in_flight = flight[0] + flight[1]
    before = Array(history)
    check("line_ema_recent_averages_are_the_exact_ema_before_earlier_updates",
            (ema.average == before[in_flight]) &
            (ema.recent_averages[0] == before[in_flight + 1]) &
            (ema.recent_averages[1] == before[in_flight + 2]))
    # The lag: a beat is judged by the EMA before the last two updates (EMA_LINE_LAG), or with
    # ema_per_step by the one latched at the last flush, with the settings in force.
    source = Mux(mo["ema_per_step"], latched, history[2])
    check("line_ema_source_is_the_ema_before_the_last_two_updates",
            ema.source == source)
    check("line_beat_carries_the_threshold_in_force",
            ~h.accept |
            ((acc.ema == mo["ema_enable"]) & (acc.threshold == h.in_thresh) &
             (~acc.ema | ((acc.ema_source == source) & (acc.ema_scale == mo["ema_scale"]) &
                          (acc.ema_min == mo["ema_min"]) & (acc.ema_max == mo["ema_max"])))))
