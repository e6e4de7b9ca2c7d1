"""Liveness under a fair DRAM (``dram_out.ready`` high at least once in every ``K`` cycles),
stated as bounded safety properties so that k-induction proves them:

* ``progress``: with ``flush`` low and no reset, a gradient offered on ``grad_in`` is accepted
  at the latest in its ``N``-th cycle of being offered, ``N = progress_bound(...)``
  (so also again after ``flush`` drops);
* ``termination``: under ``flush``, the *measure* of work left (``flush_measure`` below) never
  grows and falls at least once in every ``K + 1`` cycles until ``idle``; hence (also
  asserted) ``idle`` is high at the latest ``B = flush_bound(...)`` cycles after ``flush``
  rose. This is a ranking-function proof: the induction window does not grow with ``B``.

The counters here (``progress_wait``, ``flush_stuck``, ``flush_cycles``) count cycles, so
their assertions are invariants a short induction can carry.
"""

from amaranth import *

from design import L1State

__all__ = ["add", "flush_bound", "measure_max", "progress_bound"]


def flush_bound(sets, ways, fifo_depth, K):
    """The flush termination bound B (cycles from ``flush`` rising to ``idle``).

    With ``flush`` held high and DRAM ready at least once in every ``K`` cycles, ``idle`` is
    high at the latest ``B`` cycles after the first cycle with ``flush`` high, where::

        B = (K + 1) * (measure_max(sets, ways, fifo_depth) + 1)

    It follows from the ranking function (the measure of work left, see :func:`add`): under
    ``flush`` it never grows and falls at least once in every ``K + 1`` cycles until ``idle``.
    Both facts, and the bound itself, are proven (``termination`` group).
    """
    return (K + 1) * (measure_max(sets, ways, fifo_depth) + 1)


def measure_max(sets, ways, fifo_depth):
    """The largest value of the flush ranking function (see :func:`flush_bound`)."""
    return fifo_depth + 2 * sets * ways + 3 + 2 * sets + 1


def progress_bound(sets, ways, K, fifo_depth, burst_size):
    """The progress bound N: with ``flush`` low, no reset and DRAM ready at least once in every
    ``K`` cycles, a gradient offered on ``grad_in`` is accepted at the latest in its ``N``-th
    cycle of being offered::

        N = max(sets + 1, ways * K + 3 - e),   e = 0 if burst_size == fifo_depth else min(K, 2)

    ``sets + 1``: L1's INIT after a reset (one cycle per set). ``ways * K + 3 - e``: ``flush``
    drops just as L1 starts scanning a set whose ``ways`` entries are all valid; L1 takes input
    again only after writing them out (then one cycle to see the set empty, one to go back to
    RUN), and each write into a full L2 waits for a DRAM write, which comes at the latest
    ``K`` cycles after the one before: so the writes are ``K`` cycles apart, the last one
    ``(ways - 1) * K`` cycles after the first. The first write waits ``K`` cycles when
    ``burst_size == fifo_depth`` (``e = 0``: the write that filled L2 may find it not yet in a
    burst, its output register empty, so DRAM-ready cycles take nothing until the burst has
    loaded it); otherwise a full L2 has its output register loaded and has gone without a
    DRAM-ready cycle for two cycles already when the scan starts (the cycle of the write that
    filled it and the cycle L1 starts the scan, which writes nothing), so its first write waits
    ``K - 2`` cycles, and for ``K <= 2`` L2 cannot be full then: the first write goes at once
    and the second waits ``K``. A gradient waiting behind ``s1`` (``s1`` waiting for a full
    L2) waits less (at most ``K``, ``K + 2`` when ``burst_size == fifo_depth``).

    Proven (``progress`` group) and met with equality (cover
    ``progress_bound_met_with_equality``) on every configuration that has a progress cover
    job (``proofs.jobs.PROGRESS_COVERS``).
    """
    e = 0 if burst_size == fifo_depth else min(K, 2)
    return max(sets + 1, ways * K + 3 - e)


def add(h, m, P):
    d, l1, wb = h.dut, h.dut.l1, h.dut.writeback
    S, K = d.sets, h.fairness
    state = l1.state
    run, scan, done, init = (state == L1State.RUN), (state == L1State.SCAN), \
        (state == L1State.DONE), h.init

    # -- progress -----------------------------------------------------------------------------
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
    P.check("progress", "init_wait_at_most_sets_cleared", ~init | (wait <= l1.scan_set))

    # -- termination: the measure of work left --------------------------------------------
    M_bits = (S * d.ways * 2 + d.fifo_depth + 2 * S + 8).bit_length()
    measure = Signal(M_bits, name="flush_measure")
    scan_left = Signal(M_bits, name="flush_scan_left")
    with m.Switch(state):
        with m.Case(L1State.INIT):
            m.d.comb += scan_left.eq((S - l1.scan_set) + (S + 1))
        with m.Case(L1State.RUN):
            m.d.comb += scan_left.eq(S + 1)
        with m.Case(L1State.SCAN):
            m.d.comb += scan_left.eq(S - l1.scan_set)
    m.d.comb += measure.eq(wb.level + 2 * l1.valid_count + 3 * l1.s1_valid + scan_left)
    h.flush_measure = measure

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

    B = h.bound
    flush_cycles = Signal(range(B + 2), name="flush_cycles")   # cycles flush was high before
    with m.If(d.flush):
        with m.If(flush_cycles <= B):
            m.d.sync += flush_cycles.eq(flush_cycles + 1)
    with m.Else():
        m.d.sync += flush_cycles.eq(0)
    h.flush_cycles = flush_cycles
    M_max = measure_max(S, d.ways, d.fifo_depth)
    P.check("termination", "measure_at_most_its_maximum", measure <= M_max)
    # The ranking argument as an invariant: time spent under flush is paid for by the measure.
    P.check("termination", "flush_time_bounded_by_measure_fallen",
            ~(d.flush & ~d.idle) |
            (flush_cycles + window * measure <= window * M_max + stuck))
    P.check("termination", f"flush_idle_within_B_{B}",
            ~(d.flush & (flush_cycles >= B)) | d.idle)
