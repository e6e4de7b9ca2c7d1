"""The L2 write-back buffer's contract (:class:`design.WritebackBuffer`), stated on the buffer
alone: proven in its own harness (:mod:`.component`, every input free) and assumed by the
system harness, where the buffer is a submodule.

* ``l2``: the stream rules on ``dram_out`` (``valid`` is a register, held with the same
  payload until DRAM takes it); ``level == count + out_valid <= depth``, the pointers and the
  registered flags (``room``, ``holding``, ``stored``) agree with the counts; the burst rule (a
  burst starts at ``burst_size`` writes or on ``flush``, and ``flush`` starts one whenever L2
  holds a write; it lasts until empty, and writes move to the output only in a burst); **throughput**: in a burst the output register is refilled
  in the cycle DRAM takes it whenever storage holds a write, so a burst sends one write per
  cycle while DRAM is ready.
* ``fifo``: an order-preserving FIFO, proven with one tracked write (the ZipCPU /
  ``amaranth.lib.fifo`` approach: its cost does not grow with the depth). The harness follows
  one write, chosen freely (``pick``, a free input): the first write pushed in a cycle with
  ``pick`` high. It records the write, the slot it went to and ``ahead``, the number of
  writes L2 held before it. While the tracked write is in storage, its slot holds it and lies
  between the read pointer and the write pointer, ``ahead`` writes after the head; once
  loaded, the output register holds it, with nothing ahead; it leaves ``dram_out`` exactly
  when ``ahead`` writes have left before it, unchanged. As the write is arbitrary, this holds
  for every write (docs/proofs.md composes this with L1's conservation).
"""

from amaranth import *
from amaranth.lib import enum

from .base import past

__all__ = ["contract", "covers", "Tracked"]


class Tracked(enum.Enum, shape=2):
    NONE   = 0   # not chosen yet
    STORED = 1   # in storage
    OUTPUT = 2   # in the output register
    GONE   = 3   # taken by DRAM


def contract(m, P, wb, *, pick, track_port):
    """Add the contract of :class:`~design.WritebackBuffer` ``wb`` to ``P``. ``pick``: a free
    one-bit signal (which pushed write the ``fifo`` group follows); ``track_port``: a
    combinational read port of ``wb.storage``, made before ``wb`` is elaborated."""
    D = wb.depth
    out = wb.dram_out
    push = Signal(name="l2_push_fire")
    pop = Signal(name="l2_pop")
    load = Signal(name="l2_load")
    m.d.comb += [
        push.eq(wb.push.valid & wb.push.ready),
        pop.eq(out.valid & out.ready),
        load.eq(wb.bursting & (wb.count != 0) & (~wb.out_valid | out.ready)),
    ]
    last = {name: past(m, value, f"l2_{name}") for name, value in [
        ("waiting", out.valid & ~out.ready), ("payload", out.payload.as_value()),
        ("bursting", wb.bursting), ("flush", wb.flush), ("out_valid", wb.out_valid),
        ("popped", pop),
        # storage holds a write (level - dram_out.valid of them) and the output is free
        ("could_load", wb.bursting & (wb.level > out.valid) & (~out.valid | out.ready))]}

    # -- the stream rules on dram_out --------------------------------------------------------
    P.check("l2", "dram_out_valid_held_until_ready", ~last["waiting"] | out.valid)
    P.check("l2", "dram_out_payload_stable_until_ready",
            ~last["waiting"] | (out.payload.as_value() == last["payload"]))
    P.check("l2", "dram_out_valid_is_a_register", out.valid == wb.out_valid)

    # -- counts, pointers, flags -------------------------------------------------------------
    # L2 holds exactly the writes pushed (a handshake) and not yet taken by DRAM. (A count
    # of its own: the system's jobs do not assume it, only_for, so that their solvers do not
    # carry it.)
    held = Signal(range(D + 1), name="l2_pushed_less_taken")
    m.d.sync += held.eq(held + push - pop)
    P.check("l2", "level_counts_writes_pushed_less_taken", wb.level == held, only_for=["l2"])
    P.check("l2", "level_eq_count_plus_out_valid", wb.level == wb.count + wb.out_valid)
    P.check("l2", "level_at_most_depth", wb.level <= D)
    P.check("l2", "w_ptr_below_depth", wb.w_ptr < D)
    P.check("l2", "r_ptr_below_depth", wb.r_ptr < D)
    P.check("l2", "count_at_most_depth", wb.count <= D)
    ptr_sum = Signal(range(2 * D + 1), name="l2_r_ptr_plus_count")
    m.d.comb += ptr_sum.eq(wb.r_ptr + wb.count)
    P.check("l2", "w_ptr_eq_r_ptr_plus_count_mod_depth",
            wb.w_ptr == Mux(ptr_sum >= D, ptr_sum - D, ptr_sum))
    P.check("l2", "full_iff_level_eq_depth", wb.push.ready == (wb.level != D))
    P.check("l2", "holding_iff_level_nonzero", wb.holding == (wb.level != 0))
    P.check("l2", "stored_iff_count_nonzero", wb.stored == (wb.count != 0))
    P.check("l2", "empty_means_no_output", (wb.level != 0) | ~out.valid)

    # -- bursts ------------------------------------------------------------------------------
    P.check("l2", "burst_active_port_is_bursting", wb.burst_active == wb.bursting)
    P.check("l2", "bursting_implies_not_empty", ~wb.bursting | (wb.level != 0))
    P.check("l2", "level_at_burst_size_implies_bursting",
            (wb.level < wb.burst_size) | wb.bursting)
    P.check("l2", "burst_lasts_until_empty",
            ~last["bursting"] | (wb.level == 0) | wb.bursting)
    P.check("l2", "burst_starts_at_burst_size_or_flush",
            last["bursting"] | ~wb.bursting | (wb.level >= wb.burst_size) | last["flush"])
    P.check("l2", "flush_starts_a_burst_when_l2_holds_a_write",
            ~last["flush"] | (wb.level == 0) | wb.bursting)
    P.check("l2", "writes_loaded_only_during_burst",
            ~wb.out_valid | (last["out_valid"] & ~last["popped"]) | last["bursting"])
    # Throughput: a burst whose storage held a write, with the output register empty or
    # taken, offers a write in the next cycle (no bubble: one write per cycle while DRAM is
    # ready), in terms of the ports alone.
    P.check("l2", "burst_offers_a_write_every_cycle_while_it_holds_one",
            ~last["could_load"] | out.valid)

    # -- FIFO order, on one tracked write -----------------------------------------------------
    state = Signal(Tracked, name="l2_tracked_state")
    slot  = Signal(range(D), name="l2_tracked_slot")
    entry = Signal.like(wb.push.payload, name="l2_tracked_write")
    ahead = Signal(range(D + 1), name="l2_tracked_ahead")
    with m.Switch(state):
        with m.Case(Tracked.NONE):
            with m.If(push & pick):
                m.d.sync += [state.eq(Tracked.STORED), slot.eq(wb.w_ptr),
                             entry.eq(wb.push.payload), ahead.eq(wb.level - pop)]
        with m.Case(Tracked.STORED):
            with m.If(pop):
                m.d.sync += ahead.eq(ahead - 1)
            with m.If(load & (wb.r_ptr == slot)):
                m.d.sync += state.eq(Tracked.OUTPUT)
        with m.Case(Tracked.OUTPUT):
            with m.If(pop):
                m.d.sync += state.eq(Tracked.GONE)

    stored, output = state == Tracked.STORED, state == Tracked.OUTPUT
    m.d.comb += track_port.addr.eq(slot)
    offset = Signal(range(2 * D), name="l2_tracked_offset")   # slot - r_ptr, mod D
    m.d.comb += offset.eq(Mux(slot >= wb.r_ptr, slot - wb.r_ptr, slot + D - wb.r_ptr))

    P.check("fifo", "tracked_write_held_in_its_slot",
            ~stored | (track_port.data.as_value() == entry.as_value()))
    P.check("fifo", "tracked_slot_between_read_and_write_pointers",
            ~stored | ((slot < D) & (offset < wb.count)))
    P.check("fifo", "tracked_write_has_ahead_writes_before_it",
            ~stored | (ahead == offset + wb.out_valid))
    P.check("fifo", "tracked_write_in_output_register_with_nothing_ahead",
            ~output | (wb.out_valid & (ahead == 0) &
                       (out.payload.as_value() == entry.as_value())))
    P.check("fifo", "write_leaves_after_exactly_the_writes_ahead_of_it",
            ~(stored & pop) | (ahead != 0))


def covers(m, P, wb):
    """What the buffer alone must be able to do (reached from reset by its cover job)."""
    out = wb.dram_out
    P.cover("l2_full", wb.level == wb.depth)
    if wb.burst_size > 1:
        P.cover("l2_burst_started_below_burst_size_by_flush",
                wb.bursting & (wb.level < wb.burst_size) & wb.flush)
    P.cover("l2_full_and_taking_a_write_while_sending_one",
            (wb.level == wb.depth) & out.valid & out.ready)
    taken = Signal(range(wb.depth + 1), name="l2_writes_sent_in_a_row")
    m.d.sync += taken.eq(Mux(out.valid & out.ready, Mux(taken == wb.depth, taken, taken + 1), 0))
    P.cover("l2_sends_depth_writes_in_consecutive_cycles", taken == wb.depth)
