"""The L2 write-back buffer's contract (:class:`design.WritebackBuffer`), stated on the buffer
alone: proven in its own harness (:mod:`.component`, every input free) and assumed by the
system harness, where the buffer is a submodule.

* ``l2``: the stream rules on ``dram_out`` (``valid`` is a register, held with the same payload
  until DRAM takes it); ``level == count + out_valid <= depth``, the pointers and the registered
  flags (``room``, ``holding``, ``stored``) agree with the counts; the burst rule (a burst
  starts at ``burst_size`` writes or on ``flush``, and ``flush`` starts one whenever L2 holds a
  write; it lasts until empty, and writes move to the output only in a burst); **throughput**:
  in a burst the output register is refilled in the cycle DRAM takes it whenever storage holds a
  write, so a burst sends one write per cycle while DRAM is ready.
* ``fifo``: an order-preserving FIFO, proven with one tracked write (the ZipCPU /
  ``amaranth.lib.fifo`` approach: its cost does not grow with the depth). The harness follows
  one write, chosen freely (``pick``, a free input): the first write pushed in a cycle with
  ``pick`` high. It records the write, the slot it went to and ``ahead``, the number of
  writes L2 held before it. While the tracked write is in storage, its slot holds it and lies
  between the read pointer and the write pointer, ``ahead`` writes after the head; once
  loaded, the output register holds it, with nothing ahead; it leaves ``dram_out`` exactly
  when ``ahead`` writes have left before it, unchanged. As the write is arbitrary, this holds
  for every write (docs/proofs.md composes this with L1's conservation).
* On lines (``lanes > 1``, write combining), ``fifo`` follows the tracked write with the
  writes merged into it: its slot holds what was pushed into it plus, lane by lane, what each
  later merge into it added (sums made here, not read from the buffer), and that leaves for
  DRAM; ``combine``: a push merges only into the newest write in storage (not the one being
  loaded), for its line, and no lane's sum overflows; the newest write's copy is its slot's.
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

    _stream_rules(P, wb, last)
    enters = _counts(m, P, wb, push, pop)
    _bursts(P, wb, last)
    _fifo_order(m, P, wb, pick, track_port, enters=enters, pop=pop, push=push, load=load)


def _stream_rules(P, wb, last):
    """The stream rules on dram_out: ``valid``, a register, holds with a stable payload until
    DRAM takes it."""
    out = wb.dram_out
    P.check("l2", "dram_out_valid_held_until_ready", ~last["waiting"] | out.valid)
    P.check("l2", "dram_out_payload_stable_until_ready",
            ~last["waiting"] | (out.payload.as_value() == last["payload"]))
    P.check("l2", "dram_out_valid_is_a_register", out.valid == wb.out_valid)


def _counts(m, P, wb, push, pop):
    """Counts, pointers and flags agree; returns the one-bit signal of a push that enters a
    new write (on lines a merge adds none)."""
    D, out = wb.depth, wb.dram_out
    # L2 holds exactly the writes pushed (a handshake) and not yet taken by DRAM. (A count
    # of its own: the system's jobs do not assume it, only_for, so that their solvers do not
    # carry it.)
    held = Signal(range(D + 1), name="l2_pushed_less_taken")
    # (On lines a push that merges adds no write.)
    enters = push if wb.lanes == 1 else push & ~wb.merge
    m.d.sync += held.eq(held + enters - pop)
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
    return enters


def _bursts(P, wb, last):
    """A burst starts at ``burst_size`` writes or on ``flush`` and lasts until empty; it offers
    a write every cycle."""
    out = wb.dram_out
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


def _fifo_order(m, P, wb, pick, track_port, *, enters, pop, push, load):
    """FIFO order, on one tracked write: the first write entering with ``pick`` high."""
    D, out = wb.depth, wb.dram_out
    state = Signal(Tracked, name="l2_tracked_state")
    slot  = Signal(range(D), name="l2_tracked_slot")
    entry = Signal.like(wb.push.payload, name="l2_tracked_write")
    ahead = Signal(range(D + 1), name="l2_tracked_ahead")
    with m.Switch(state):
        with m.Case(Tracked.NONE):
            with m.If(enters & pick):
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
    if wb.lanes > 1:
        entry = _combined(m, P, wb, entry, state, slot, push, load)
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


def _combined(m, P, wb, pushed, state, slot, push, load):
    """On lines: the tracked write as it is now, ``pushed`` (the write as pushed, recorded by
    :func:`contract`) plus what each merge into it added, lane by lane (returned); and the
    ``combine`` group."""
    D, newest = wb.depth, wb.newest
    p = wb.push.payload
    # The sums the merges into the tracked write made, kept here (a lane the tracked write
    # holds plus the pushed lane), and whether any of them overflowed a value.
    added = Signal.like(pushed, name="l2_tracked_merged")
    merged_now = Signal(name="l2_merge_into_tracked")
    m.d.comb += merged_now.eq(wb.merge & (state == Tracked.STORED) & (wb.newest_ptr == slot))
    current = Signal.like(pushed, name="l2_tracked_current")
    m.d.comb += current.eq(Mux(state == Tracked.NONE, pushed, added))
    with m.If((state == Tracked.NONE) & push & ~wb.merge):
        m.d.sync += added.eq(p)
    with m.Elif(merged_now):
        m.d.sync += added.mask.eq(added.mask | p.mask)
        for i in range(wb.lanes):
            m.d.sync += added.values[i].eq(Mux(added.mask[i], added.values[i], 0) +
                                           Mux(p.mask[i], p.values[i], 0))
    # No overflow, stated on the values' own width (the buffer's value_width: grad_width + 2,
    # or grad_width under the whole-line rule), not on a fixed one.
    assert len(p.values[0]) == wb.value_width
    value_max = 2 ** (wb.value_width - 1)
    for i in range(wb.lanes):
        total = (Mux(added.mask[i], added.values[i], 0).as_signed() +
                 Mux(p.mask[i], p.values[i], 0).as_signed())
        P.check("combine", f"a_merge_into_the_tracked_write_fits_lane_{i}",
                ~merged_now | ((total >= -value_max) & (total < value_max)))
    P.check("combine", "a_merge_into_the_tracked_write_is_for_its_line",
            ~merged_now | (p.addr == added.addr))
    # Where a merge goes: the newest write, in storage, not being loaded.
    newest_slot = Signal(range(D), name="l2_write_slot_before_w_ptr")
    m.d.comb += newest_slot.eq(Mux(wb.w_ptr == 0, D - 1, wb.w_ptr - 1))
    P.check("combine", "newest_waiting_iff_storage_holds_a_write",
            wb.newest_waiting == (wb.count != 0))
    P.check("combine", "newest_is_the_slot_before_w_ptr",
            ~wb.newest_waiting | (wb.newest_ptr == newest_slot))
    P.check("combine", "a_merge_goes_into_the_newest_write_in_storage",
            ~wb.merge | (wb.newest_waiting & ~(load & (wb.r_ptr == wb.newest_ptr))))
    P.check("combine", "a_merge_is_a_push", ~wb.merge | push)
    # ... and the merge is taken when it may be: a push to the line of the newest write still
    # waiting in storage (not being loaded), whose lanes held by both fit a bit less than a
    # value each (so that their sum fits one), merges. (Without it an L2 that never merges
    # passed every safety property: merging is an optimisation.)
    half = 2 ** (len(p.values[0]) - 2)
    fit = Cat(~(newest.mask[i] & p.mask[i]) |
              ((newest.values[i] >= -half) & (newest.values[i] < half) &
               (p.values[i] >= -half) & (p.values[i] < half))
              for i in range(wb.lanes))
    P.check("combine", "a_push_to_the_newest_writes_line_whose_values_fit_merges",
            ~(push & wb.newest_waiting & ~(load & (wb.r_ptr == wb.newest_ptr)) &
              (p.addr == newest.addr) & fit.all()) | wb.merge)
    # The copy the merges are made from is the newest write's (checked on the tracked one).
    P.check("combine", "newest_copy_is_the_tracked_write_when_it_is_the_newest",
            ~((state == Tracked.STORED) & wb.newest_waiting & (wb.newest_ptr == slot)) |
            (newest.as_value() == current.as_value()))
    return current


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
    if wb.lanes > 1:
        P.cover("l2_merges_a_write_into_the_newest", wb.merge)
        P.cover("l2_merges_into_a_write_that_holds_another_lane",
                wb.merge & (wb.newest.mask & ~wb.push.payload.mask).any())
