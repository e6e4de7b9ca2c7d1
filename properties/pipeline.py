"""L1's pipeline and output queue: the strengthening invariants that k-induction needs.

Every gradient accepted in cycle *t* is in ``s<i>`` in cycle *t + i* (the pipeline never
stalls); the harness keeps its own copy of each (``h.stage``). The set as it is in cycle *t*
is the row ``s4`` writes in *t* if it writes that set, else the row in storage
(``h.current``). Asserted (``pipeline``):

* ``s1`` ... ``s4`` are valid exactly when the harness's copies are, only in RUN, and hold
  the gradient as accepted; ``s3`` is judged by the harness's judged threshold (its bounds
  ``t - g``, ``-t - g`` are that threshold's) and holds the
  stochastic rule on the random bits in force when it decides (``h.s3_rule``, both choices);
  on one lane ``s2`` and ``s3`` hold the rounding level of their small threshold (the
  rule's multiplies in the harness take ``s2``'s); ``s4_stepped`` says whether the random bits stepped;
* ``s3``'s correction flags say what ``s4`` did to its set, and ``s2`` never uses a read that
  collided with a write;
* ``reserved`` counts the gradients in ``s1`` ... ``s4`` and the writes in the queue, and is
  at most its depth, so no write finds the queue full;
* the flush scan: ``read_row`` is the scanned set as stored, the ways in ``scan_done`` were
  valid there, and while the scan waits for the read, the read port is delivering it; sets
  already initialised or scanned are empty (the tracked set; every set with
  ``whole_storage``); INIT holds nothing.

``forwarding`` (a group of its own: on the scaled configurations it is the costly part of
the induction, proven in a job of its own): ``s2``'s row (``probe.row``) is its set as it is now;
``s3``'s row is its set as it is now, unless ``s4`` writes that set (whose row ``s3`` then
takes); ``s3``'s registered hit and hit way are its row's; what ``s3`` decides on, after its
correction for ``s4``, is its set as it is now and, for the tracked set, the entry holding its
address; ``s4``'s row is the decided row changed in ``s4``'s way, and its kept entry
(``s4_holds``, ``s4_way``, ``s4_sum``, ``s4_count``) is the one its row holds for its address.

The output queue's own contract is :mod:`.queue`'s.
"""

from amaranth import *

from gradient_compressor.design import L1State
from gradient_compressor.design.bits import lowest_index
from gradient_compressor.design.layouts import grad_range


__all__ = ["add"]


def _match(tag, row):
    return Cat(w.valid & (w.tag == tag) for w in row.ways)


def _decision_entry(h, way):
    """One lane: ``way`` (an entry holding its address) as the whole-line rule's decision
    takes it (a value of ``LineDecision``'s ``entry``): its sum on ``grad_width`` bits, its
    one lane held, its count."""
    return Cat(way.sum[:h.gw], C(1, 1), way.count[:h.dut.l1.probe.decision.count_width])


def add(h, m, P):
    probe = h.dut.l1.probe
    run = probe.state == L1State.RUN
    valid = [None, *probe.in_stage]

    # -- the stages hold the gradients as accepted ----------------------------------------
    for i in (1, 2, 3, 4):
        P.check("pipeline", f"s{i}_valid_iff_accepted_{i}_cycles_before",
                valid[i] == h.stage_valid[i])
        P.check("pipeline", f"s{i}_only_in_run", ~valid[i] | run)
    s1, s2 = probe.s1, probe.s2
    P.check("pipeline", "s1_holds_the_gradient_as_accepted",
            ~valid[1] | (s1.as_value() == h.stage[1].as_value()))
    P.check("pipeline", "s2_holds_the_gradient_as_accepted",
            ~valid[2] | (s2.as_value() == h.stage[2].as_value()))
    if h.lanes == 1:
        # One lane: the rounding level, registered in s1 for s2's stochastic test and carried
        # to s3 for its rounded write: stated here, so that an induction step need not reach
        # back for it.
        s3 = probe.deciding
        P.check("pipeline", "s2_level_is_its_rounding_level",
                ~valid[2] | (probe.s2_level == h.rounding_level(s2.small_threshold)))
        P.check("pipeline", "s3_level_is_its_rounding_level",
                ~valid[3] | (probe.s3_level == h.rounding_level(s3.small_threshold)))
    if h.lanes > 1:
        _line_stages(h, m, P)
    else:
        _stages(h, m, P)
    _rows(h, m, P)


def _stages(h, m, P):
    """One lane: what s2 and s3 registered of their gradient."""
    probe = h.dut.l1.probe
    _, s2_valid, s3_valid, s4_valid = probe.in_stage
    s2, s3, g3 = probe.s2, probe.deciding, h.stage[3]
    # |g|, registered in s1 for s2's compares: stated here, so that an induction step need
    # not reach back to s1 for it.
    P.check("pipeline", "s2_magnitude_is_its_gradients",
            ~s2_valid | (probe.s2_magnitude == abs(s2.grad)))
    P.check("pipeline", "s3_holds_the_gradient_as_accepted_judged_by_its_threshold",
            ~s3_valid |
            ((s3.addr == g3.addr) & (s3.grad == g3.grad) &
             (s3.small_threshold == g3.small_threshold) & (s3.stochastic == g3.stochastic) &
             (s3.threshold == h.judged[3]) &
             (probe.deciding_direct == (abs(g3.grad) >= h.judged[3]))))
    # The bounds are computed for each possible threshold in s2 and one is picked: that they
    # are those of the threshold s3 holds is stated here (else each job using them would have
    # to find it again through the pick).
    P.check("pipeline", "s3_bounds_are_its_threshold_less_its_gradient",
            ~s3_valid | ((probe.s3_high == s3.threshold - s3.grad) &
                         (probe.s3_low == -s3.threshold - s3.grad)))
    if h.whole_line:
        bottom, top = grad_range(h.gw)
        P.check("pipeline", "s3_fit_bounds_are_the_range_less_its_gradient",
                ~s3_valid | ((probe.s3_fit_high == top - s3.grad) &
                             (probe.s3_fit_low == bottom - s3.grad)))
    P.check("pipeline", "s3_tiny_is_its_gradients",
            ~s3_valid | (probe.s3_tiny == (abs(g3.grad) < g3.small_threshold)))
    P.check("pipeline", "s3_holds_the_stochastic_rule_on_both_random_choices",
            ~s3_valid | (probe.s3_chance == h.s3_chance))
    P.check("pipeline", "s4_stepped_iff_the_random_bits_stepped",
            ~s3_valid | ((s4_valid & probe.s4_stepped) == h.stepped_last))


def _line_stages(h, m, P):
    """On lines: the same facts of s2 and s3, lane by lane (each lane judged against the
    beat's threshold, or 0 in a bypass window)."""
    probe, N = h.dut.l1.probe, h.lanes
    _, s2_valid, s3_valid, s4_valid = probe.in_stage
    s2, s3, g3 = probe.s2, probe.deciding, h.stage[3]
    # A beat's address is its line's (L1 compares whole addresses: s3_same_addr).
    for i in (1, 2, 3, 4):
        P.check("pipeline", f"s{i}_holds_a_line_address",
                ~h.stage_valid[i] | (h.stage[i].addr[:h.lane_bits] == 0))
    P.check("pipeline", "s2_magnitude_is_its_gradients",
            ~s2_valid | Cat(probe.s2_magnitude[i] == abs(s2.grads[i]) for i in range(N)).all())
    thr = [h.lane_threshold(h.judged[3], g3.bypass[i]) for i in range(N)]
    P.check("pipeline", "s3_holds_the_gradient_as_accepted_judged_by_its_threshold",
            ~s3_valid |
            ((s3.addr == g3.addr) & (s3.grads.as_value() == g3.grads.as_value()) &
             (s3.mask == g3.mask) & (s3.bypass == g3.bypass) &
             (s3.small_threshold == g3.small_threshold) & (s3.stochastic == g3.stochastic) &
             (s3.threshold == h.judged[3]) &
             (probe.deciding_direct == Cat(g3.mask[i] & (abs(g3.grads[i]) >= thr[i])
                                           for i in range(N)))))
    s3_thr = [h.lane_threshold(s3.threshold, s3.bypass[i]) for i in range(N)]
    if h.whole_line:
        bottom, top = grad_range(h.gw)
        P.check("pipeline", "s3_fit_bounds_are_the_range_less_its_gradient",
                ~s3_valid | Cat((probe.s3_fit_high[i] == top - s3.grads[i]) &
                                (probe.s3_fit_low[i] == bottom - s3.grads[i])
                                for i in range(N)).all())
    P.check("pipeline", "s3_bounds_are_its_threshold_less_its_gradient",
            ~s3_valid | Cat((probe.s3_high[i] == s3_thr[i] - s3.grads[i]) &
                            (probe.s3_low[i] == -s3_thr[i] - s3.grads[i])
                            for i in range(N)).all())
    P.check("pipeline", "s3_tiny_is_its_gradients",
            ~s3_valid | (probe.s3_tiny == Cat(abs(g3.grads[i]) < g3.small_threshold
                                              for i in range(N))))
    P.check("pipeline", "s3_holds_the_stochastic_rule_on_both_random_choices",
            ~s3_valid | (probe.s3_chance.as_value() == h.s3_chance))
    P.check("pipeline", "s4_stepped_iff_the_random_bits_stepped",
            ~s3_valid | ((s4_valid & probe.s4_stepped) == h.stepped_last))


def _rows(h, m, P):
    """Each stage works on its set as it is now; the queue, the scan, INIT."""
    l1 = h.dut.l1
    probe = l1.probe
    last_row = Signal(l1.row_layout, name="s3_row_now_last_cycle")  # the row s4 decided on
    m.d.sync += last_row.eq(probe.s3_row_now)
    now3 = _s2_and_s3_rows(h, m, P, last_row)
    _s3_decides_on_its_set_now(h, m, P, now3)
    _s4_row(h, m, P, last_row)
    _reserved_places(h, P)
    _scan_and_init(h, m, P)


def _takes_s4s_row(h):
    """Whether ``s3`` takes ``s4``'s row on ``s3_same_set`` (one lane; lines under the
    whole-line rule), rather than ``s4``'s new row forwarded into ``s3_row`` (the line
    policy)."""
    return h.lanes == 1 or h.whole_line


def _s2_and_s3_rows(h, m, P, last_row):
    """s2's and s3's rows are their sets as they are now (s3's unless s4 writes its set: by
    the line policy, always), and s3's flags say what s4 does to its set. ``last_row`` is the
    row s4's beat decided on. Returns s3's set as it is now."""
    l1, W = h.dut.l1, h.dut.ways
    probe = l1.probe
    _, s2_valid, s3_valid, _ = probe.in_stage
    s2, s3 = probe.s2, probe.deciding
    set2, set3 = h.set_of(s2.addr), h.set_of(s3.addr)
    tag3 = h.tag_of(s3.addr)
    now2 = h.current(h.l1_s2_port, set2, "s2_set_now")
    now3 = h.current(h.l1_s3_port, set3, "s3_set_now", shared=h.shared_read)
    P.check("forwarding", "s2_row_is_its_set_now",
            ~s2_valid | (probe.row.as_value() == now2.as_value()))
    # The RAM's read data is used only when no write collided with its read: L1's storage is
    # marked no_rw_check (design/l1.py), so on an FPGA a read of the set being written gives
    # an undefined result (the proofs' memory gives the old row). The read for s2 was issued
    # two cycles ago; a write then is h2's now, and a forward is taken instead.
    read, write = probe.storage_read, probe.storage_write
    collided = [Signal(name=f"read_collided_{i}_cycles_ago") for i in (1, 2)]
    m.d.sync += [collided[0].eq(read.en & write.en & (read.addr == write.addr)),
                 collided[1].eq(collided[0])]
    forwarded = ((probe.s2_fwd[0] & h.s4_writes) | (probe.s2_fwd[1] & probe.h1_valid) |
                 (probe.s2_fwd[2] & probe.h2_valid))
    P.check("pipeline", "s2_never_uses_a_read_that_collided_with_a_write",
            ~(s2_valid & collided[1]) | forwarded)
    s4_on_set3 = h.s4_writes & (probe.s4_set == set3)
    if _takes_s4s_row(h):
        P.check("pipeline", "s3_same_set_iff_s4_writes_its_set",
                ~s3_valid | (probe.s3_same_set == s4_on_set3))
    P.check("pipeline", "s3_same_addr_iff_s4_writes_its_address",
            ~s3_valid | (probe.s3_same_addr == (h.s4_writes & (h.stage[4].addr == s3.addr))))
    P.check("pipeline", "s3_taken_is_the_way_s4_allocated_on_its_set",
            ~s3_valid | (probe.s3_taken == Mux(s4_on_set3 & probe.s4_alloc,
                                               Const(1, W) << probe.s4_way, 0)))
    P.check("pipeline", "s3_hit_ways_is_its_hit_way_one_hot",
            ~s3_valid | (probe.s3_hit_ways ==
                         Mux(probe.s3_hit, Const(1, W) << probe.s3_hit_way, 0)))
    P.check("pipeline", "s4_ways_is_its_way_one_hot",
            ~h.s4_writes | (probe.s4_ways == Const(1, W) << probe.s4_way))
    P.check("forwarding", "s3_row_is_its_set_now_unless_s4_writes_it",
            ~s3_valid | s4_on_set3 | (probe.s3_row.as_value() == now3.as_value()))
    # s3's hit was found in s2, on its set as it was then: by the line policy, where s4's new
    # row is forwarded into s3_row, that is the row s4's beat decided on (s3_row_now a cycle
    # ago) when s4 writes s3's set.
    seen3 = probe.s3_row
    if not _takes_s4s_row(h):
        seen3 = Signal(l1.row_layout, name="s3_row_seen_in_s2")
        m.d.comb += seen3.eq(Mux(s4_on_set3, last_row, probe.s3_row))
    match3 = _match(tag3, seen3)
    way3 = lowest_index(m, match3, "s3_row_hit_way")
    P.check("forwarding", "s3_hit_is_its_rows",
            ~s3_valid | ((probe.s3_hit == match3.any()) &
                         (~probe.s3_hit | (probe.s3_hit_way == way3))))
    return now3


def _s3_decides_on_its_set_now(h, m, P, now3):
    """s3 decides on its set as it is now (``now3``) and, for the tracked set, on the entry
    holding its address."""
    probe, W = h.dut.l1.probe, h.dut.ways
    _, _, s3_valid, _ = probe.in_stage
    s3 = probe.deciding
    set3, tag3 = h.set_of(s3.addr), h.tag_of(s3.addr)
    # What s3 decides on, after its correction for s4: its set as it is now, and, for the
    # tracked set (whose rows the policy group keeps well formed, one way per tag), the
    # way holding its address, with that entry's sum and count after its gradient. The entry
    # is stated on this cycle's facts about s3's row and flags and s4's row (same-cycle
    # lemmas): from the past cycles alone its induction took 103 s on default, with them 9 s.
    P.check("forwarding", "s3_decides_on_its_set_now",
            ~s3_valid | (probe.s3_row_now.as_value() == now3.as_value()))
    if h.whole_line:
        # The hit entry the decision takes (picked a stage ahead, or left by the decision
        # ahead on the same address) is its row's hit way as it is now (on one lane as
        # LineDecision takes it).
        hit_way = probe.s3_row_now.ways[probe.s3_now_way]
        expected = hit_way.as_value() if h.lanes > 1 else _decision_entry(h, hit_way)
        P.check("forwarding", "s3_hit_entry_is_its_hit_way_now",
                ~(s3_valid & probe.s3_now_hit) | (probe.s3_hit_entry.as_value() == expected))
    match_now = _match(tag3, now3)
    way_now = lowest_index(m, match_now, "s3_now_hit_way_expected")
    entry_now = now3.ways[way_now]
    # (Under the whole-line rule and on lines s3 decides on the hit entry of its row now,
    # s3_row_now, at its hit way: no new sum and count are made beside it.)
    if h.lanes > 1 or h.whole_line:
        entry_ok = probe.s3_now_way == way_now
    else:
        entry_ok = ((probe.s3_now_way == way_now) &
                    (probe.s3_new_sum == entry_now.sum + s3.grad) &
                    (probe.s3_new_count == entry_now.count + 1))
    P.check("forwarding", "s3_decides_on_the_entry_of_its_address_now",
            ~(s3_valid & (set3 == h.track_set)) |
            ((probe.s3_now_hit == match_now.any()) &
             (~probe.s3_now_hit | entry_ok)),
            now=["forwarding/s3_hit_is_its_rows",
                 "forwarding/s3_row_is_its_set_now_unless_s4_writes_it",
                 "pipeline/s3_same_addr_iff_s4_writes_its_address",
                 "pipeline/s3_taken_is_the_way_s4_allocated_on_its_set",
                 "forwarding/s4_kept_entry_is_its_rows",
                 "forwarding/s4_row_is_the_decided_row_changed_in_s4s_way"] +
            (["pipeline/s3_same_set_iff_s4_writes_its_set"] if _takes_s4s_row(h) else []) +
            (["unique_tag/tracked_set_at_most_one_way_per_tag"] if W > 1 else []))


def _s4_row(h, m, P, last_row):
    """The row s4 writes is the row s3 decided on, changed in s4's way (and the victim); its
    kept entry is the one that row holds for its address."""
    probe, W = h.dut.l1.probe, h.dut.ways
    same = [(probe.s4_row.ways[i].as_value() == last_row.ways[i].as_value()) |
            (probe.s4_way == i) for i in range(W)]
    P.check("forwarding", "s4_row_is_the_decided_row_changed_in_s4s_way",
            ~probe.in_stage[3] | Cat(*same).all())
    addr4 = h.stage[4].addr
    match4 = _match(h.tag_of(addr4), probe.s4_row)
    kept = probe.s4_row.ways[probe.s4_way]
    # (On lines and under the whole-line rule the kept entry is read from s4's row itself:
    # no sum and count beside it.)
    if h.lanes > 1 or h.whole_line:
        kept_ok = ((probe.s4_set == h.set_of(addr4)) &
                   (probe.s4_holds == match4.bit_select(probe.s4_way, 1)))
    else:
        kept_ok = ((probe.s4_set == h.set_of(addr4)) &
                   (probe.s4_holds == match4.bit_select(probe.s4_way, 1)) &
                   (~probe.s4_holds | ((kept.sum == probe.s4_sum) &
                                       (kept.count == probe.s4_count))))
    P.check("forwarding", "s4_kept_entry_is_its_rows", ~h.s4_writes | kept_ok)


def _reserved_places(h, P):
    """``reserved`` counts the gradients in the stages and the writes in the queue, and no
    write finds the queue full."""
    probe = h.dut.l1.probe
    s1_valid, s2_valid, s3_valid, s4_valid = probe.in_stage
    queue = probe.queue
    Q = queue.depth
    if h.lanes > 1:
        # On lines a place stays reserved until the last write of its pair has left L1's
        # output register (out_last); the head's own write is in that register exactly when
        # its victim's is still to follow (own_taken).
        P.check("pipeline", "reserved_counts_stages_and_queue",
                probe.reserved == s1_valid + s2_valid + s3_valid + s4_valid +
                queue.level + (probe.out_valid & probe.out_last))
        head = queue.r.payload
        P.check("pipeline", "own_taken_iff_a_victim_write_is_to_follow",
                probe.own_taken == (probe.out_valid & ~probe.out_last))
        P.check("pipeline", "own_taken_only_with_a_pair_at_the_head",
                ~probe.own_taken | (queue.r.valid & head.own.mask.any() & head.victim.mask.any()))
    else:
        P.check("pipeline", "reserved_counts_stages_and_queue",
                probe.reserved == s1_valid + s2_valid + s3_valid + s4_valid +
                queue.level)
    P.check("pipeline", "reserved_at_most_queue_depth", probe.reserved <= Q)
    P.check("pipeline", "no_write_finds_the_queue_full", ~queue.w.valid | queue.w.ready)


def _scan_and_init(h, m, P):
    """The flush scan reads its set as stored and writes only ways that were valid; INIT and
    the sets it and the scan have passed hold nothing."""
    d, l1, W = h.dut, h.dut.l1, h.dut.ways
    probe = l1.probe
    read, write = probe.storage_read, probe.storage_write
    scan, init, done = h.scan, h.init, probe.state == L1State.DONE
    scanned = h.l1_s2_port.data          # the scanned set, as stored (SCAN: pipeline empty)
    P.check("pipeline", "scan_never_reads_the_set_it_writes",
            ~(scan & read.en & write.en & (read.addr == write.addr)))
    P.check("pipeline", "scan_waits_for_the_read_of_the_scanned_set",
            ~(scan & probe.scan_wait) |
            ((probe.storage_read.data.as_value() == scanned.as_value()) & (probe.scan_done == 0)))
    P.check("pipeline", "scan_read_row_is_the_scanned_set",
            ~scan | probe.scan_wait | (probe.read_row.as_value() == scanned.as_value()))
    for i in range(W):
        P.check("pipeline", "scan_written_ways_were_valid",
                ~scan | ~probe.scan_done[i] | scanned.ways[i].valid)
    P.check("pipeline", "scan_next_is_the_set_after_scan_set",
            probe.scan_next == (probe.scan_set + 1)[:len(probe.scan_next)])
    P.check("pipeline", "done_holds_nothing", ~done | (l1.valid_count == 0))
    P.check("pipeline", "init_holds_nothing",
            ~init | ((probe.reserved == 0) & (h.l1_balance == 0)))
    if h.system:
        P.check("idle", "init_holds_nothing_in_l2",
                ~init | ((d.writeback.level == 0) & (h.balance == 0)))
    track = h.l1_track_port.data
    P.check("pipeline", "init_passed_tracked_set_cleared",
            ~init | (h.track_set >= probe.scan_set) | (track.as_value() == 0))
    P.check("pipeline", "init_or_scan_passed_tracked_set_empty",
            ~(init | scan) | (h.track_set >= probe.scan_set) | (h.popcount(track) == 0))
    for i, port in enumerate(h.l1_ports):
        no_valid = ~Cat(*[w.valid for w in port.data.ways]).any()
        P.check("pipeline", "init_or_scan_passed_sets_empty",
                ~(init | scan) | (probe.scan_set <= i) | no_valid)
