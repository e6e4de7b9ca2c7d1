"""Liveness under a fair DRAM (``dram_out.ready`` high at least once in every ``K`` cycles),
stated as bounded safety properties so that k-induction proves them:

* ``progress``: with ``flush`` low and no reset, a gradient offered on ``grad_in`` is accepted
  at the latest in its ``N``-th cycle of being offered, ``N = progress_bound(...)``
  (so also again after ``flush`` drops);
* ``termination``: under ``flush``, the *measure* of work left (``flush_measure`` below) never
  grows and falls at least once in every ``K + 1`` cycles until ``idle``; hence (also
  asserted) ``idle`` is high at the latest ``B = flush_bound(...)`` cycles after ``flush``
  rose. This is a ranking-function proof: the induction window does not grow with ``B``.

On lines (the compressor built with ``lanes > 1``) both are stated the same way, with the
measure and the bounds of lines (``lanes`` of the functions below): a place of L1's output
queue holds a pair of line writes (a beat's own and a victim's), and L1's output register a
write of its own, so the measure weighs a place as two writes and counts the register and
whether the head pair's own write has already left the queue for it (``LINE_WEIGHTS``); and a
place is freed only when its pair's last write has entered L2, which with L2 full takes up to
two of DRAM's pops where one lane's takes one (``progress_bound``).

The counters here (``progress_wait``, ``flush_stuck``, ``flush_cycles``) count cycles, so
their assertions are invariants a short induction can carry.
"""

from amaranth import *

from gradient_compressor.design import L1State
from gradient_compressor.design.l1 import L1Accumulator

__all__ = ["add", "flush_bound", "l2_place_period", "line_progress_bound", "measure_max",
           "progress_bound"]


def flush_bound(sets, ways, fifo_depth, K, queue_depth=None, lanes=1):
    """The flush termination bound B (cycles from ``flush`` rising to ``idle``).

    With ``flush`` held high and DRAM ready at least once in every ``K`` cycles, ``idle`` is
    high at the latest ``B`` cycles after the first cycle with ``flush`` high, where::

        B = (K + 1) * (measure_max(sets, ways, fifo_depth, queue_depth, lanes) + 1)

    It follows from the ranking function (the measure of work left, see :func:`add`): under
    ``flush`` it never grows and falls at least once in every ``K + 1`` cycles until ``idle``.
    Both facts, and the bound itself, are proven (``termination`` group).
    """
    return (K + 1) * (measure_max(sets, ways, fifo_depth, queue_depth, lanes) + 1)


def measure_max(sets, ways, fifo_depth, queue_depth=None, lanes=1):
    """The largest value of the flush ranking function (see :func:`flush_bound`); the queue's
    depth is L1's (``L1Accumulator.QUEUE_DEPTH``) unless given. On lines (``lanes > 1``) with
    :data:`LINE_WEIGHTS`."""
    if queue_depth is None:
        queue_depth = L1Accumulator.QUEUE_DEPTH
    if lanes > 1:
        w = LINE_WEIGHTS
        return (fifo_depth + w["place"] * queue_depth + w["out"] + w["own_not_taken"] +
                w["entry"] * sets * ways + sum(w[s] for s in STAGES) + 3 * sets + 2)
    return fifo_depth + 2 * queue_depth + 3 * sets * ways + STAGE_WEIGHT + 3 * sets + 2


#: The measure's weight for the gradient ready to be taken (grad_in.ready) and for one in
#: each stage s1 ... s4: a stage's gradient becomes the next stage's, s3's may also allocate
#: an entry (3), s4's becomes a write in the queue (2) or nothing.
WEIGHTS = {"ready": 10, "s1": 9, "s2": 8, "s3": 7, "s4": 3}
STAGE_WEIGHT = sum(WEIGHTS.values())
STAGES = ("ready", "s1", "s2", "s3", "s4")
#: On lines: a write in L2 weighs 1 and one in L1's output register 2 (it enters L2: -1); a
#: place of the queue 6, as two writes of 3 (a pair: the beat's own write and a victim's), and
#: the head pair's own write, once loaded into the output register (``own_taken``), no longer
#: counts in its place: the measure holds 3 while it has not (``own_not_taken``). So loading
#: the empty register falls (a pair's own write: -3 + 2; a place's only write: -6 + 2), and so
#: does the register taken by L2 (-2 + 1; with the next write loaded at once: -3 + 1, the
#: victim after its pair's own -6 + 3 + 1, a place's only write -6 + 1). A valid line weighs
#: 7 (the scan writes it into a place of 6), ``s4`` 7 (its pair takes a place, or nothing),
#: ``s3`` 15 (``s4``'s 7 plus a line it may allocate), the stages before one more each.
LINE_WEIGHTS = {"ready": 18, "s1": 17, "s2": 16, "s3": 15, "s4": 7, "place": 6, "out": 2,
                "own_not_taken": 3, "entry": 7}


def l2_place_period(K, fifo_depth):
    """The longest wait, under DRAM fairness ``K`` with L2 full, from one place in L2 freed to
    the next: ``K``, or ``K + 2`` for an L2 of depth 1, whose one place is free again at the
    earliest three cycles after a write took it (taken, stored, loaded into the output
    register, taken by DRAM), so that a DRAM ready in between is wasted."""
    return K + 2 if fifo_depth == 1 else K


def progress_bound(sets, ways, K, fifo_depth, burst_size, lanes=1):
    """The progress bound N: with ``flush`` low, no reset and DRAM ready at least once in every
    ``K`` cycles, a gradient offered on ``grad_in`` is accepted at the latest in its ``N``-th
    cycle of being offered::

        N = max(sets + 1, ways + 3, (ways + 1) * P - (1 if sets > 1 else 4))

    where ``P = l2_place_period(K, fifo_depth)`` (``K``; ``K + 2`` for an L2 of depth 1). Each
    term is a worst case (the wait counts the cycles with ``flush`` low; ``c`` is the first of
    them):

    * ``sets + 1``: L1's INIT after a reset (one cycle per set; ``grad_in.ready``, a register,
      rises in the cycle after the last).
    * ``ways + 3``: ``flush`` drops in the first cycle of a set's scan (``scan_wait``, its row
      being read) and every way of that set is valid: L1 finishes the set (one cycle per way,
      then the write back) before it goes back to RUN; accepted in cycle ``c + ways + 2``.
    * ``(ways + 1) * K - 1`` (``sets > 1``): as above, but the scan of the set before, under
      ``flush``, took the queue's last place, and L2 is full: each way of the set, and then the
      gradient, waits for a place that only a DRAM pop frees (L2 takes a queue write in the
      cycle after a pop, the place is free a cycle later), and DRAM is ready only every ``K``
      cycles; the ``ways + 1`` places come ``K`` apart, the first in ``c + K - 2``.
    * ``(ways + 1) * K - 4`` (one set): there is no set before; the scan starts from RUN, and
      draining the pipeline (at least five cycles without an acceptance) frees places unless
      DRAM's ready falls in a cycle in which L2's output register is empty (wasted): the
      ``ways + 1`` places come ``K`` apart from ``c + K - 5``.
    * An L2 of depth 1: as the two above, with ``P = K + 2`` in place of ``K``.

    Exact (proven, and met with equality by the cover ``progress_bound_met_with_equality``
    from reset) on small (5: ``ways + 3``), dm and mid (5: INIT), assoc (11: the one-set
    scan term) and default (33: INIT); large (1025, INIT) is proven, its cover out of BMC's
    reach. The scan terms assume entries are held (``max_updates > 1``); with
    ``max_updates == 1`` (dm) there is no scan and they are only an upper bound. For an L2 of
    depth 1 the scan terms were read off the covers at ``K = 2`` (met with equality at 2 x 2
    and 1 x 2).
    (``burst_size`` does not enter it.) For parameters outside the proven configurations the
    formula is not proven: a new configuration's progress job (or the geometry sweep) checks
    it.
    """
    if lanes > 1:
        return line_progress_bound(sets, ways, K, fifo_depth)
    P = l2_place_period(K, fifo_depth)
    return max(sets + 1, ways + 3, (ways + 1) * P - (1 if sets > 1 else 4))


def line_progress_bound(sets, ways, K, fifo_depth):
    """The progress bound N on lines (``lanes > 1``): as one lane's, but a place of L1's output
    queue is freed only when the last write of its pair (a beat's own line write and a victim
    line's) has left L1's output register for L2: with L2 full, up to two of DRAM's pops per
    place instead of one::

        N = max(sets + 1, ways + 3, 2 * (ways + 1) * K - 1)

    Proven for 2 lanes on ``LINE_SMALL`` (2 x 2 lines, L2 of 4, ``K = 2``) only; for L2 depths
    of 1 and one set the scan term is not derived."""
    P = l2_place_period(K, fifo_depth)
    return max(sets + 1, ways + 3, 2 * (ways + 1) * P - 1)


def add(h, m, P):
    """The ``progress`` and ``termination`` groups."""
    _progress(h, m, P)
    measure = _flush_measure(h, m)
    window, stuck = _measure_falls_under_flush(h, m, P, measure)
    _flush_ends_within_bound(h, m, P, measure, window, stuck)


def _progress(h, m, P):
    """A gradient offered is accepted within ``N`` cycles."""
    d, probe = h.dut, h.dut.l1.probe
    N = h.progress
    wait = Signal(range(N + 1), name="progress_wait")   # cycles offered and not yet taken
    h.progress_wait = wait
    offered = d.grad_in.valid & ~d.flush
    with m.If(offered & ~d.grad_in.ready):
        m.d.sync += wait.eq(Mux(wait < N, wait + 1, wait))
    with m.Else():
        m.d.sync += wait.eq(0)
    P.check("progress", f"offered_gradient_accepted_within_N_{N}",
            ~(offered & ~d.grad_in.ready) | (wait < N - 1))
    # INIT is the one long wait (a cycle per set): the induction carries it with this
    # invariant; every other wait is shorter than the induction window.
    P.check("progress", "init_wait_at_most_sets_cleared", ~h.init | (wait <= probe.scan_set))


def _flush_measure(h, m):
    """The measure of work left (``h.flush_measure``)."""
    d, l1, wb = h.dut, h.dut.l1, h.dut.writeback
    probe = l1.probe
    S, state = d.sets, probe.state
    M_bits = (measure_max(S, d.ways, d.fifo_depth, probe.queue.depth, h.lanes) + 1).bit_length()
    measure = Signal(M_bits, name="flush_measure")
    scan_left = Signal(M_bits, name="flush_scan_left")
    with m.Switch(state):
        with m.Case(L1State.INIT):
            m.d.comb += scan_left.eq((S - probe.scan_set) + (2 * S + 2))
        with m.Case(L1State.RUN):
            m.d.comb += scan_left.eq(2 * S + 2)
        with m.Case(L1State.SCAN):
            # Two cycles a set: its read, and its write back (moving on).
            m.d.comb += scan_left.eq(2 * (S - 1 - probe.scan_set) + 1 + probe.scan_wait)
    if h.lanes > 1:
        # On lines: a place holds a pair of writes, and L1's output register one (LINE_WEIGHTS).
        w = LINE_WEIGHTS
        m.d.comb += measure.eq(
            wb.level + w["place"] * probe.queue.level + w["out"] * probe.out_valid +
            w["own_not_taken"] * ~probe.own_taken + w["entry"] * l1.valid_count +
            w["ready"] * d.grad_in.ready + w["s1"] * probe.in_stage[0] +
            w["s2"] * probe.in_stage[1] + w["s3"] * probe.in_stage[2] +
            w["s4"] * probe.in_stage[3] + scan_left)
        h.flush_measure = measure
        return measure
    w = WEIGHTS
    m.d.comb += measure.eq(wb.level + 2 * probe.queue.level + 3 * l1.valid_count +
                           w["ready"] * d.grad_in.ready + w["s1"] * probe.in_stage[0] +
                           w["s2"] * probe.in_stage[1] + w["s3"] * probe.in_stage[2] +
                           w["s4"] * probe.in_stage[3] + scan_left)
    h.flush_measure = measure
    return measure


def _measure_falls_under_flush(h, m, P, measure):
    """Under ``flush`` the measure never grows and falls once in every ``K + 1`` cycles.
    Returns that window and the cycles since the measure last fell."""
    d, K = h.dut, h.fairness
    last_measure = Signal.like(measure, name="flush_measure_last_cycle")
    was_flushing = Signal(name="flushing_last_cycle")   # flush high, not idle, no reset
    m.d.sync += [last_measure.eq(measure), was_flushing.eq(d.flush & ~d.idle)]
    fell = Signal(name="flush_measure_fell")
    m.d.comb += fell.eq(measure < last_measure)
    window = K + 1    # the measure falls at least once in every `window` cycles
    stuck = Signal(range(window + 1), name="flush_stuck")   # cycles since it last fell
    with m.If(d.flush & ~d.idle & was_flushing & ~fell):
        m.d.sync += stuck.eq(Mux(stuck < window, stuck + 1, stuck))
    with m.Else():
        m.d.sync += stuck.eq(0)
    P.check("termination", "measure_never_grows_under_flush",
            ~(was_flushing & d.flush) | (measure <= last_measure))
    P.check("termination", "measure_falls_once_in_every_K+1_cycles",
            ~(d.flush & ~d.idle) | (stuck < window))
    return window, stuck


def _flush_ends_within_bound(h, m, P, measure, window, stuck):
    """Time under ``flush`` is paid for by the measure, so ``idle`` rises within ``B``."""
    d, probe = h.dut, h.dut.l1.probe
    S = d.sets
    B = h.bound
    flush_cycles = Signal(range(B + 2), name="flush_cycles")   # cycles flush was high before
    with m.If(d.flush):
        with m.If(flush_cycles <= B):
            m.d.sync += flush_cycles.eq(flush_cycles + 1)
    with m.Else():
        m.d.sync += flush_cycles.eq(0)
    h.flush_cycles = flush_cycles
    M_max = measure_max(S, d.ways, d.fifo_depth, probe.queue.depth, h.lanes)
    P.check("termination", "measure_at_most_its_maximum", measure <= M_max)
    # The ranking argument as an invariant: time spent under flush is paid for by the measure.
    # Stated on the three facts above in the same cycle, its step is arithmetic: from the past
    # cycles alone the induction took 268 s on large, with them 28 s.
    P.check("termination", "flush_time_bounded_by_measure_fallen",
            ~(d.flush & ~d.idle) |
            (flush_cycles + window * measure <= window * M_max + stuck),
            now=["termination/measure_never_grows_under_flush",
                 "termination/measure_falls_once_in_every_K+1_cycles",
                 "termination/measure_at_most_its_maximum"])
    P.check("termination", f"flush_idle_within_B_{B}",
            ~(d.flush & (flush_cycles >= B)) | d.idle)
