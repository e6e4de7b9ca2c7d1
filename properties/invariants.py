"""Internal invariants: the ones the design's docstrings state, plus the strengthening ones
k-induction needs (a proof by induction only goes through if the asserted facts are
inductive: each one, holding for k cycles, implies itself in the next).

* ``valid_count``: ``<= sets * ways``; 0 while INIT; ``empty`` iff 0; each cycle it moves
  by what the row written gains or loses; with ``whole_storage`` it equals the number of
  valid entries in L1's storage (every set read by comb ports). Without it, two consequences
  of that equality are *assumed* (group ``lemma``), proven on paper from the per-cycle
  property.
* ``overflow``: a valid entry has ``|sum| < 2**grad_width - 1`` and ``1 <= count <=
  max_updates - 1`` (so ``sum + grad`` and ``count + 1`` never wrap); L2 pointers below
  ``depth``, counts bounded.
* ``unique_tag``: no two valid ways of a set hold the same tag.
* ``l2``: ``level == count + out_valid <= depth``, ``w_ptr == (r_ptr + count) % depth``,
  full / empty flags right, burst rule (starts at ``burst_size`` or on flush, lasts until empty,
  data is only loaded during a burst).
* ``pipeline``: s1 only in RUN and judged right; the row L1 works on (``probe.row``) is the
  one in storage (forwarding right), or during a scan the one in storage minus the ways
  already written out; sets already initialised / scanned hold no valid entry (the tracked set;
  every set with ``whole_storage``); DONE and INIT hold nothing.
"""

from amaranth import *

from gradient_compressor.design.layouts import grad_range


__all__ = ["add"]


def _row_checks(h, P, row, where, active):
    """Per-row invariants (overflow, unique tags) on ``row``, checked when ``active``."""
    gw, mu = h.gw, h.dut.max_updates
    for i, way in enumerate(row.ways):
        if h.lanes > 1:
            # On lines, every lane's sum; a lane not held has a sum of 0, and a valid line
            # holds at least one lane.
            N = h.lanes
            P.check("overflow", f"{where}_sum_below_2**grad_width-1",
                    ~active | ~way.valid | Cat(abs(way.sums[j]) < 2**gw - 1
                                               for j in range(N)).all())
            P.check("overflow", f"{where}_lane_not_held_sums_0",
                    ~active | ~way.valid | Cat(way.held[j] | (way.sums[j] == 0)
                                               for j in range(N)).all())
            P.check("overflow", f"{where}_line_holds_a_lane",
                    ~active | ~way.valid | way.held.any())
            if h.whole_line:
                # The whole-line rule holds no sum a write of grad_width bits could not carry.
                lo, hi = grad_range(gw)
                P.check("overflow", f"{where}_sum_fits_grad_width",
                        ~active | ~way.valid | Cat((way.sums[j] >= lo) & (way.sums[j] <= hi)
                                                   for j in range(N)).all())
        else:
            P.check("overflow", f"{where}_sum_below_2**grad_width-1",
                    ~active | ~way.valid | (abs(way.sum) < 2**gw - 1))
            if h.whole_line:
                # The whole-line rule holds no sum a write of grad_width bits could not carry.
                lo, hi = grad_range(gw)
                P.check("overflow", f"{where}_sum_fits_grad_width",
                        ~active | ~way.valid | ((way.sum >= lo) & (way.sum <= hi)))
        P.check("overflow", f"{where}_count_in_1..max_updates-1",
                ~active | ~way.valid | ((way.count >= 1) & (way.count <= mu - 1)))
        for j in range(i + 1, len(row.ways)):
            other = row.ways[j]
            P.check("unique_tag", f"{where}_at_most_one_way_per_tag",
                    ~active | ~(way.valid & other.valid & (way.tag == other.tag)))


def add(h, m, P):
    """The ``valid_count``, ``lemma``, ``overflow`` and ``unique_tag`` groups (and in the
    system, L2's tracked writes and level port)."""
    s3_now = _valid_count_moves(h, m, P)
    _valid_count_covers_the_sets(h, m, P, s3_now)
    _rows_well_formed(h, P)
    if h.system:
        # L2's own contract is properties/writeback.py's.
        d, wb = h.dut, h.dut.writeback
        if h.l2_ports and h.lanes == 1:
            P.check("storage", "l2_tracked_writes_at_most_depth", h.l2_n <= d.fifo_depth)
        P.check("counters", "l2_level_port_is_level", d.l2_level == wb.level)


def _valid_count_moves(h, m, P):
    """``valid_count`` is bounded, 0 while INIT, and moves with the decided row and the scan.
    Returns s3's set as it is now."""
    l1, S, W = h.dut.l1, h.dut.sets, h.dut.ways
    probe = l1.probe
    scan, init = h.scan, h.init
    P.check("valid_count", "valid_count_at_most_sets*ways", l1.valid_count <= S * W)
    P.check("valid_count", "valid_count_zero_while_init", ~init | (l1.valid_count == 0))
    # L1's "holds nothing" comes from flags registered beside valid_base, not from the count.
    P.check("valid_count", "empty_iff_valid_count_zero", probe.empty == (l1.valid_count == 0))
    # Per cycle: valid_count moves by what the decision in s3 gains or loses in its set (its
    # new row is s4's in the next cycle, the set as it is then), and by one for each way the
    # flush scan writes out. With every row empty after INIT, it follows by induction over
    # time that valid_count is the number of valid entries of the sets as they are, less the
    # ways the scan has written out of the set it scans (docs/proofs.md); whole_storage
    # proves it directly.
    s3_now = h.current(h.l1_s3_port, h.set_of(probe.deciding.addr), "valid_count_s3_set_now")
    before = Signal(range(W + 1), name="valid_count_s3_set_before")
    last   = Signal.like(l1.valid_count, name="valid_count_last_cycle")
    scan_out = Signal(name="scan_wrote_a_way_last_cycle")
    checked = Signal(name="valid_count_last_known")   # low after a reset cycle
    m.d.sync += [before.eq(h.popcount(s3_now)), last.eq(l1.valid_count),
                 scan_out.eq(scan & h.queue_in), checked.eq(1)]
    delta = Mux(h.s4_writes, h.popcount(probe.s4_row) - before, 0) - scan_out
    P.check("valid_count", "valid_count_moves_with_the_decided_row_and_the_scan",
            ~checked | (l1.valid_count == last + delta))
    last_init = Signal(name="l1_init_last_cycle")
    m.d.sync += last_init.eq(init)
    P.check("valid_count", "init_only_after_reset", ~checked | last_init | ~init)
    return s3_now


def _valid_count_covers_the_sets(h, m, P, s3_now):
    """The lemmas that ``valid_count`` covers each set's valid ways: proven with the whole
    storage, else assumed for the past cycles (group ``lemma``)."""
    l1, S, W = h.dut.l1, h.dut.sets, h.dut.ways
    probe = l1.probe
    scan, init = h.scan, h.init
    # Each set's valid ways are counted in valid_count, and the other sets hold the rest.
    def covers(n):
        return init | ((n <= l1.valid_count) & (l1.valid_count <= n + (S - 1) * W))
    covers_tracked = covers(h.popcount(h.track_held))
    covers_s3 = ~probe.in_stage[2] | covers(h.popcount(s3_now))
    scanned = h.l1_s2_port.data
    left = h.popcount(scanned) - sum(probe.scan_done[i] for i in range(W))
    covers_scanned = ~scan | covers(left)
    # During a scan, the sets already scanned are empty: what is left is in this set and after.
    scan_rest = ~scan | (l1.valid_count <= left + (S - 1 - probe.scan_set) * W)
    lemmas = [("valid_count_covers_tracked_set", covers_tracked),
              ("valid_count_covers_s3_set", covers_s3),
              ("valid_count_covers_scanned_set", covers_scanned),
              ("valid_count_only_in_sets_not_yet_scanned", scan_rest)]
    if h.l1_ports:
        P.check("valid_count", "valid_count_eq_valid_entries_in_storage",
                init | (l1.valid_count == h.l1_total))
        for name, test in lemmas:
            P.check("valid_count", name, test)
    else:
        # Consequences of valid_count == valid entries, proven on paper from the per-cycle
        # property above (docs/proofs.md), and directly with whole_storage. Like the
        # properties outside a job's focus, they are assumed for the past cycles only: the
        # paper proof of the lemma in cycle t uses the per-cycle property in cycle t, which
        # its own job proves assuming the lemma before t only.
        for name, test in lemmas:
            held = Signal(init=1, name=f"lemma_{name}_last_cycle")
            m.d.sync += held.eq(test)
            P.assume("lemma", name, held)


def _rows_well_formed(h, P):
    """No entry overflows and no tag is held twice, in the tracked set (and every set read)."""
    init = h.init
    _row_checks(h, P, h.track_row, "tracked_set", ~init)
    P.check("unique_tag", "tracked_address_in_at_most_one_way", init | (h.l1_n <= 1))
    for i, port in enumerate(h.l1_ports):
        _row_checks(h, P, h.current(port, i, f"every_set{i}_now"), "every_set", ~init)
