"""The dual threshold's step totals' contract (:class:`design.modes.DiscardTotals`), stated on
the component alone and proven in its own harness (:mod:`.component`), every input free; the
system harness assumes it and states how it is joined (``counters`` group, :mod:`.outputs`).

``discard_totals``: ``barrier_done`` rises the cycle after a completed barrier and falls the
cycle after the first gradient accepted then; ``count`` and ``sum`` add up the ``discard``
strobes and their ``error`` since that gradient (it clears them, the discard of its own cycle
still counted).
"""

from amaranth import *

__all__ = ["contract", "covers"]


def contract(m, P, t):
    barrier = Signal(name="barrier_completed")
    with m.If(t.barrier):
        m.d.sync += barrier.eq(1)
    with m.Elif(t.accept):
        m.d.sync += barrier.eq(0)
    clear = barrier & t.accept
    count = Signal.like(t.count, name="discards_counted")
    total = Signal.like(t.sum, name="discards_summed")
    m.d.sync += [count.eq(Mux(clear, 0, count) + t.discard),
                 total.eq(Mux(clear, 0, total) + Mux(t.discard, t.error, 0))]
    P.check("discard_totals", "barrier_done_until_the_next_accepted_gradient",
            t.barrier_done == barrier)
    P.check("discard_totals", "count_counts_the_steps_discard_strobes", t.count == count)
    P.check("discard_totals", "sum_adds_the_steps_discard_errors", t.sum == total)


def covers(m, P, t):
    # A step's totals cleared by the first gradient after a barrier, a discard in that cycle.
    P.cover("totals_cleared_with_a_discard_in_the_same_cycle",
            t.barrier_done & t.accept & t.discard & (t.count != 0))
