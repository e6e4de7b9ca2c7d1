"""The output queue's contract (:class:`design.queue.WriteQueue`, L1's output queue), stated on
the queue alone: proven in its own harness (:mod:`.component`) and assumed by the system
harness.

``queue``: the pointers and the level agree (``level <= depth``, ``w_ptr == (r_ptr + level)
% depth``), and it is an order-preserving FIFO, proven with one tracked write chosen freely
(``pick``), as L2 is (:mod:`.writeback`): the tracked write stays in its slot, ``ahead``
writes after the head, and leaves unchanged once they have left.

``queue_sum`` (on lines, where a place holds a pair of line writes): given a weight of a
write (what it holds at a tracked address, a constant chosen freely: ``weigh``), a shadow of
the queue's tracked sum (the weights written in less the weights read out) equals the sum of
the weights its occupied slots hold. Proven alone on the queue of the line L1's pair shape
(component ``queue_lines``); assumed by the compressor on lines, where L1's output register
and the head's own write taken into it are added to it (``properties/outputs.py``).
"""

from dataclasses import dataclass

from amaranth import *

from .writeback import Tracked

__all__ = ["contract", "covers", "line_weight", "TrackedSum"]


def line_weight(track, lane_bits):
    """The weight of a place of the line L1's output queue at the tracked address ``track``
    (lane ``track[:lane_bits]`` of the line ``track`` with its lane bits cleared): what its own
    write and its victim's add there (the harness's ``write_at_track``)."""
    lane = track[:lane_bits]
    line = Cat(Const(0, lane_bits), track[lane_bits:])

    def at_track(write):
        return Mux(write.mask.bit_select(lane, 1) & (write.addr == line),
                   write.values[lane], 0)
    return lambda pair: at_track(pair.own) + at_track(pair.victim)


def contract(m, P, queue, *, pick, ports, weigh=None, width=None, only_for=None):
    """Add the contract of :class:`~design.queue.WriteQueue` ``queue`` to ``P``. ``pick``: a free
    one-bit signal; ``ports``: a combinational read port of each storage word, made before
    ``queue`` is elaborated (the queue is small: every entry is read). With ``weigh`` (a
    function of a write, a signed value) and ``width``, also the tracked sum (``queue_sum``),
    outside its focus assumed only in jobs focused on ``only_for``; returns it
    (:class:`TrackedSum`; else ``None``)."""
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
    if weigh is None:
        return None

    # The tracked sum: written in less read out, against what the occupied slots hold (each
    # slot's offset from the read pointer below the level), modulo 2**width. As one step of
    # the induction (the sum over the slots before and after a cycle) it did not finish in 5
    # minutes; so it is composed of per-cycle steps, each a few terms (same-cycle lemmas, as
    # the conservation's): each slot moves by what is written into it less what is read out
    # of it; the slots below i + 1 by those below i and slot i's move; over all the slots
    # that is what is written in less what is read out; and the shadow is their sum.
    width_of = signed(width)
    w_in = Signal(width_of, name="queue_tracked_in")
    r_out = Signal(width_of, name="queue_tracked_out")
    m.d.comb += [w_in.eq(Mux(w_fire, weigh(queue.w.payload), 0)),
                 r_out.eq(Mux(r_fire, weigh(queue.r.payload), 0))]
    net = Signal(width_of, name="queue_tracked_in_less_out")
    m.d.comb += net.eq(w_in - r_out)
    total = Signal(width_of, name="queue_tracked_sum")
    m.d.sync += total.eq(total + net)
    below, moved = Const(0, width_of), Const(0, width_of)
    below_fact = None
    belows = [below]
    for i, port in enumerate(ports):
        slot = Signal(width_of, name=f"queue_tracked_slot{i}")
        change = Signal(width_of, name=f"queue_tracked_slot{i}_change")
        slot_to_be = Signal(width_of, name=f"queue_tracked_slot{i}_to_be")
        off = Mux(i >= queue.r_ptr, i - queue.r_ptr, i + Q - queue.r_ptr)
        m.d.comb += [slot.eq(Mux(off < queue.level, weigh(port.data), 0)),
                     change.eq(Mux(queue.w_ptr == i, w_in, 0) - Mux(queue.r_ptr == i, r_out, 0))]
        m.d.sync += slot_to_be.eq(slot + change)
        slot_fact = f"slot{i}_moves_by_what_is_written_and_read"
        P.check("queue_sum", slot_fact, slot == slot_to_be, only_for=only_for)
        below_next = Signal(width_of, name=f"queue_tracked_slots_below{i + 1}")
        moved_next = Signal(width_of, name=f"queue_tracked_slots_below{i + 1}_change")
        below_to_be = Signal(width_of, name=f"queue_tracked_slots_below{i + 1}_to_be")
        m.d.comb += [below_next.eq(below + slot), moved_next.eq(moved + change)]
        m.d.sync += below_to_be.eq(below_next + moved_next)
        P.check("queue_sum", f"slots_below{i + 1}_move_by_what_is_written_and_read",
                below_next == below_to_be,
                now=[f"queue_sum/{slot_fact}"] + ([below_fact] if below_fact else []),
                only_for=only_for)
        below_fact = f"queue_sum/slots_below{i + 1}_move_by_what_is_written_and_read"
        below, moved = below_next, moved_next
        belows.append(below)
    P.check("queue_sum", "the_slots_move_by_what_is_written_less_what_is_read",
            moved == net, now=["queue/w_ptr_below_depth", "queue/r_ptr_below_depth"],
            only_for=only_for)
    P.check("queue_sum", "tracked_sum_is_what_its_slots_hold", total == below,
            now=[below_fact], only_for=only_for)
    return TrackedSum(total, belows)


@dataclass
class TrackedSum:
    """The queue's tracked sum (its shadow, ``total``) and what its slots below ``i`` hold,
    ``slots_below[i]`` (``i`` from 0 to the depth)."""
    total: Value
    slots_below: list


def covers(m, P, queue):
    P.cover("queue_full", queue.level == queue.depth)
    P.cover("queue_full_and_giving_a_write", (queue.level == queue.depth) & queue.r.ready)
