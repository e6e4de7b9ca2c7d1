"""The output queue's contract (:class:`design.queue.WriteQueue`, L1's output queue), stated on
the queue alone: proven in its own harness (:mod:`.component`) and assumed by the system
harness.

``queue``: the pointers and the level agree (``level <= depth``, ``w_ptr == (r_ptr + level)
% depth``), and it is an order-preserving FIFO, proven with one tracked write chosen freely
(``pick``), as L2 is (:mod:`.writeback`): the tracked write stays in its slot, ``ahead``
writes after the head, and leaves unchanged once they have left.
"""

from amaranth import *

from .writeback import Tracked

__all__ = ["contract", "covers"]


def contract(m, P, queue, *, pick, ports):
    """Add the contract of :class:`~design.queue.WriteQueue` ``queue`` to ``P``. ``pick``: a free
    one-bit signal; ``ports``: a combinational read port of each storage word, made before
    ``queue`` is elaborated (the queue is small: every entry is read)."""
    Q = queue.depth
    P.check("queue", "level_at_most_depth", queue.level <= Q)
    P.check("queue", "w_ptr_below_depth", queue.w_ptr < Q)
    P.check("queue", "r_ptr_below_depth", queue.r_ptr < Q)
    ptr_sum = Signal(range(2 * Q + 1), name="queue_r_ptr_plus_level")
    m.d.comb += ptr_sum.eq(queue.r_ptr + queue.level)
    P.check("queue", "w_ptr_eq_r_ptr_plus_level_mod_depth",
            queue.w_ptr == Mux(ptr_sum >= Q, ptr_sum - Q, ptr_sum))
    w_fire = queue.w.valid & queue.w.ready
    r_fire = queue.r.valid & queue.r.ready
    held = Signal(range(Q + 1), name="queue_written_less_read")
    m.d.sync += held.eq(held + w_fire - r_fire)
    P.check("queue", "level_counts_writes_in_less_out", queue.level == held,
            only_for=["queue"])     # not carried by the system's jobs (see writeback.py)
    P.check("queue", "ready_iff_not_full", queue.w.ready == (queue.level != Q))
    P.check("queue", "valid_iff_not_empty", queue.r.valid == (queue.level != 0))

    for i, port in enumerate(ports):
        m.d.comb += port.addr.eq(i)
    state = Signal(Tracked, name="queue_tracked_state")
    slot = Signal(range(Q), name="queue_tracked_slot")
    entry = Signal.like(queue.w.payload, name="queue_tracked_write")
    ahead = Signal(range(Q + 1), name="queue_tracked_ahead")
    with m.Switch(state):
        with m.Case(Tracked.NONE):
            with m.If(w_fire & pick):
                m.d.sync += [state.eq(Tracked.STORED), slot.eq(queue.w_ptr),
                             entry.eq(queue.w.payload), ahead.eq(queue.level - r_fire)]
        with m.Case(Tracked.STORED):
            with m.If(r_fire):
                with m.If(ahead == 0):
                    m.d.sync += state.eq(Tracked.GONE)
                with m.Else():
                    m.d.sync += ahead.eq(ahead - 1)
    stored = state == Tracked.STORED
    offset = Signal(range(2 * Q), name="queue_tracked_offset")
    m.d.comb += offset.eq(Mux(slot >= queue.r_ptr, slot - queue.r_ptr, slot + Q - queue.r_ptr))
    held = Array(p.data.as_value() for p in ports)[slot]
    P.check("queue", "tracked_write_held_in_its_slot",
            ~stored | (held == entry.as_value()))
    P.check("queue", "tracked_write_has_ahead_writes_before_it",
            ~stored | ((offset < queue.level) & (ahead == offset)))
    P.check("queue", "tracked_write_leaves_unchanged_after_the_writes_ahead",
            ~(stored & r_fire & (ahead == 0)) |
            (queue.r.payload.as_value() == entry.as_value()))


def covers(m, P, queue):
    P.cover("queue_full", queue.level == queue.depth)
    P.cover("queue_full_and_giving_a_write", (queue.level == queue.depth) & queue.r.ready)
