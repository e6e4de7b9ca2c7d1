"""L1 on lines: beats of ``lanes`` gradients, one tag per line (the policy: docs/lanes.md,
``model.LineModel``)."""

import functools
import operator

from amaranth import *
from amaranth.lib import data

from .compare import less, at_least, at_most
from .bits import lowest_one_hot
from .l1 import L1Accumulator, L1State, _Decision
from .layouts import (Cause, classified_line_layout, line_pair_layout,
                      line_write_layout, value_width)
from .modes import ema_candidate, ema_clamp, signed_level
from .params import check_lanes, checked, ema_fraction_bits, log2

__all__ = ["LineAccumulator"]


class _LineDecision(_Decision):
    """What the steps of a line's decision in ``s3`` pass on (beside :class:`_Decision`'s)."""
    __slots__ = (
        "direct", "small", "hit_add", "crossed", "way_outcomes", "leaves", "flushed",
        "tiny", "kept", "rounded", "c_evict", "leaves_hit", "own", "victim_write", "level",
        "decision",
    )


class LineAccumulator(L1Accumulator):
    """The set-associative L1 on lines of ``lanes`` gradients (``lanes >= 2``; one lane is
    :class:`~design.l1.L1Accumulator` itself).

    The pipeline, the forwarding of rows, the output queue, INIT and the flush scan are
    :class:`~design.l1.L1Accumulator`'s; an entry holds one tag, a sum per lane, which lanes hold
    a sum (``held``) and the beats that updated the line (``count``), and the decision in ``s3``
    is made per lane (docs/lanes.md):

    * a masked lane with ``|g| >= threshold`` (0 for a lane in a bypass window) is *direct*, the
      others are *small*; a beat with no small lane does not touch L1;
    * hit: each small lane adds into its sum; a lane whose sum crosses the threshold is written
      (``ACCUM_THRESHOLD``) and cleared; at ``max_updates`` beats every lane still held is
      written (``MAX_UPDATES``); a line left with no lane held is freed;
    * miss: a small lane with ``|g| < small_threshold`` is tiny (dropped, or in the stochastic
      mode rounded to ``+-small_threshold`` on the beat's one draw of random bits); the other
      small lanes allocate the line (with ``max_updates == 1`` they are written instead); a
      full set's victim line is written (``EVICTION``), its held lanes.

    A beat's own lanes leave as one masked line write and a victim line as a second, so the
    output queue holds a pair of line writes per place (either may be empty, its mask 0) and
    ``push`` offers the beat's own write first. A lane written twice in one beat (a direct
    gradient and its held sum at ``max_updates``) is one value, their sum, ``DIRECT``.

    By the line policy, unlike one lane's, ``s3_row`` is the set as it is now: a decision that
    rewrites the set of the beat behind it forwards its new row into that beat's ``s3_row`` as
    it registers ``s4``'s, so the tests start from ``s3_row``'s ways with no pick of ``s4``'s
    entry in front of them (``s3_same_set`` is not made). Under the whole-line rule the
    decision reads one entry, not the row's ways, and it leaves one entry, as on one lane: it
    takes the hit entry picked a stage ahead (``s3_entry``) or, on the line of the beat ahead,
    the entry that one left (``s4_entry``); ``s4`` registers the entry left beside the row
    decided on (``s4_decided``), and the row it writes (``s4_row``) is made from them, so that
    the decision reaches one register of an entry's width, not the row's. ``s3`` then takes
    its set as it is now as one lane does (``s3_same_set``).

    Invariants, beside L1's: a lane not held has a sum of 0; a valid line holds at least one
    lane.

    With ``whole_line``, ``s3`` decides by the whole-line rule instead
    (:class:`~design.line_decision.LineDecision`, ``model.LineModel(whole_line=True)``): a beat
    writes its line, carrying every pending value, or allocates it; every value fits
    ``grad_width`` bits. Proven alone on 2 lanes (jobs ``l1-whole-lines2-small-*``) and
    checked against the line model in simulation. Its held sums and the values it writes
    are then ``grad_width`` bits (:func:`~design.layouts.line_value_width`: the rule keeps
    every one in range), the output queue's pairs and ``push`` too.

    Parameters
    ----------
    lanes : int
        Gradients per beat: 2, 4, 8, 16 or 32.
    addr_width, grad_width, sets, ways, max_updates
        As for :class:`~design.l1.L1Accumulator`; ``sets`` and ``ways`` count lines and
        ``max_updates`` beats.
    whole_line : bool
        Decide by the whole-line rule.

    Members
    -------
    grad_in : ``In(stream.Signature(classified_line_layout))``
        Beats from the streamer: the line address, the lanes' gradients, mask and bypass bits,
        the threshold and the modes' settings.
    push : ``Out(stream.Signature(line_write_layout))``
        Line writes toward L2, each lane with its cause.
    small_miss, discard : ``Out(lanes)``
        Per lane: a tiny lane missed (decided in ``s3``), and a cycle later its discard is
        accounted ...
    discard_addr : ``Out(addr_width)``, discard_error : ``Out(ArrayLayout(signed(grad_width + 1), lanes))``
        ... at ``discard_addr + i``, with this ``grad - written``.
    hit, miss : ``Out(1)``
        Strobes per beat: a beat with small lanes hit its line; missed it and allocated it (or,
        with ``max_updates == 1``, wrote its small lanes).
    flush, idle, valid_count, random, random_next, random_step
        As for :class:`~design.l1.L1Accumulator` (``valid_count`` counts lines; ``random_step``
        is one step per beat that used the random bits).
    """

    #: Places of the output queue (a pair of line writes each): as many as the one-lane L1
    #: has writes, enough for a beat per cycle with DRAM always ready (throughput, proven
    #: under the whole-line rule).
    QUEUE_DEPTH = L1Accumulator.QUEUE_DEPTH  # mutation site: line-queue-depth

    def __init__(self, *, lanes, **parameters):
        with checked(self):
            if lanes == 1:
                raise ValueError("lanes must be at least 2 for LineAccumulator (one lane is "
                                 "L1Accumulator)")
            self.lanes = check_lanes(lanes)
        self.lane_bits = log2(lanes)
        super().__init__(**parameters)
        vw = value_width(self.grad_width)
        # The signals of one gradient, one per lane.
        self.s2_magnitude = Signal(self._per_lane(unsigned(self.grad_width)))
        self.s3_high   = Signal(self._per_lane(signed(vw + 1)))   # t - g, per lane
        self.s3_low    = Signal(self._per_lane(signed(vw + 1)))   # -t - g
        self.s3_direct = Signal(lanes)                           # masked and |g| >= t
        self.s3_tiny   = Signal(lanes)                           # |g| < small_threshold
        # The stochastic test of each lane, on random (0) and on random_next (1).
        self.s3_chance = Signal(data.ArrayLayout(lanes, 2))
        # s4: the victim line's write, beside the beat's own (s4_push, s4_push_p).
        self.s4_victim   = Signal()
        self.s4_victim_p = Signal(self._write_layout())
        # The output register: the line write offered on push.
        self.out       = Signal(self._write_layout(), name="out")
        self.out_valid = Signal(name="out_valid")
        # ... whether it is its pair's last write, and whether the head's own write has been
        # loaded into it (the victim's is next).
        self.out_last  = Signal(name="out_last")
        self.own_taken = Signal(name="own_taken")
        # Under the whole-line rule, the row s4's beat decided on (s3_row_now, registered): the
        # row s4 writes, s4_row, is this row with s4's way taking the entry left, s4_entry.
        self.s4_decided = (Signal(self.row_layout, name="s4_decided") if self.whole_line
                           else None)

    # -- what depends on the number of lanes ----------------------------------------------------

    def _fit_bound_shapes(self):
        bounds = self._per_lane(signed(self.grad_width + 1))
        return bounds, bounds

    def _decided_entry_layout(self):
        # A way of the row, whole (its valid bit and tag too): s4_entry is what s4_row's way
        # takes.
        return self.entry_layout

    def _row_now(self):
        # By the line policy s3_row is the set as it is now: a decision that rewrites the set
        # of the beat behind it forwards its new row into that beat's s3_row (_s3_to_s4).
        return super()._row_now() if self.whole_line else self.s3_row

    def _entry_sums(self):
        return {"sums": self._per_lane(signed(self.value_width)), "held": self.lanes}

    def _beat_layout(self):
        return classified_line_layout(self.addr_width, self.grad_width, self.lanes)

    def _write_layout(self):
        return line_write_layout(self.addr_width, self.grad_width, self.lanes,
                                 self.value_width)

    def _queue_layout(self):
        return line_pair_layout(self.addr_width, self.grad_width, self.lanes, self.value_width)

    def _per_lane(self, shape):
        return data.ArrayLayout(shape, self.lanes)

    def _magnitude(self, beat):
        return Cat(abs(grad) for grad in beat.grads)

    def _ema_candidate(self, beat):
        return ema_candidate(beat.ema_source, beat.ema_scale, ema_fraction_bits(self.lanes))

    def _set(self, addr):
        return addr[self.lane_bits:self.lane_bits + self.set_bits]

    def _tag(self, addr):
        return addr[self.lane_bits + self.set_bits:]

    def _line(self, index, tag):
        """The line address of set ``index``'s line with ``tag``."""
        return Cat(Const(0, self.lane_bits), index, tag)

    def _scan_write(self, write, entry):
        return [write.addr.eq(self._line(self.scan_set, entry.tag)),
                write.values.eq(entry.sums),
                write.mask.eq(entry.held),
                *[cause.eq(Cause.FLUSH) for cause in write.causes]]

    # -- the output queue: a pair of line writes per place --------------------------------------

    def _output_queue(self, m, shared):
        queue, accept, Q = self.queue, shared.accept, self.QUEUE_DEPTH
        scan_push   = Signal()
        scan_push_p = Signal(self._write_layout())
        scanning = self.state == L1State.SCAN
        # The head's own write has been loaded into the output register, its victim's is next.
        own_taken = self.own_taken
        head = queue.r.payload
        show_own = Signal()
        last = Signal()   # the write offered by the head is its last
        # The output register: push's payload and valid come from it, so that L2's merge test
        # starts from registers (not from the queue's RAM and the pick of a pair's write).
        out, out_valid, out_last = self.out, self.out_valid, self.out_last
        load, released = Signal(name="load"), Signal(name="released")
        m.d.comb += [
            queue.w.valid.eq(scan_push | (self.s4_valid & (self.s4_push | self.s4_victim))),
            queue.w.payload.own.eq(Mux(scanning, scan_push_p, self.s4_push_p)),
            queue.w.payload.victim.eq(Mux(scanning | ~self.s4_victim, 0, self.s4_victim_p)),
            show_own.eq(head.own.mask.any() & ~own_taken),
            last.eq(~show_own | ~head.victim.mask.any()),
            self.push.valid.eq(out_valid),
            self.push.payload.eq(out),
            load.eq(queue.r.valid & (~out_valid | self.push.ready)),
            queue.r.ready.eq(load & last),
            # the pair's last write leaves L1
            released.eq(out_valid & self.push.ready & out_last),
        ]
        with m.If(load):
            m.d.sync += [own_taken.eq(~last), out.eq(Mux(show_own, head.own, head.victim)),
                         out_last.eq(last)]
        m.d.sync += out_valid.eq(load | (out_valid & ~self.push.ready))
        # A place is reserved from acceptance until the beat leaves s4 without a write, or its
        # writes leave the output register (the queue then holds at most the places reserved).
        reserved_next = Signal(range(Q + 2))
        m.d.comb += reserved_next.eq(self.reserved + accept + scan_push -
                                     (self.s4_valid & ~self.s4_push & ~self.s4_victim) -
                                     released)
        m.d.sync += self.reserved.eq(reserved_next)
        shared.scan_push, shared.scan_push_p = scan_push, scan_push_p
        shared.reserved_next = reserved_next

    # -- stage s2: compare ----------------------------------------------------------------------

    def _decision_ahead(self, sources):
        """Under the whole-line rule, ``s3_entry``: the hit way of ``s2``'s row (on the line
        of the beat ahead the decision takes ``s4_entry`` instead, :meth:`_take_hit_entry`);
        and the fit bounds of ``s2``'s gradients."""
        if not self.whole_line:
            return []

        def hit_entry(row, match):
            ways = lowest_one_hot(match)
            return functools.reduce(operator.or_, (
                Mux(ways[k], way.as_value(), 0) for k, way in enumerate(row.ways)))
        # The hit entry of each row s2 may take, each picked by its own match, and the row's
        # pick last (as for the hit: _s2_hit), so that no row meets a select before its pick.
        entry = hit_entry(self.read_row, self._match(self._tag(self.s2.addr), self.read_row))
        for taken, row, match in reversed(sources):
            entry = Mux(taken, hit_entry(row, match), entry)
        return [self.s3_entry.eq(entry), *self._fit_bounds()]

    def _fit_bound_lanes(self):
        return [(self.s3_fit_high[i], self.s3_fit_low[i], grad)
                for i, grad in enumerate(self.s2.grads)]

    def _dual_threshold_tests(self):
        """Per lane: tiny, and the stochastic test on the beat's one draw of random bits
        (``random * small_threshold < |g| << grad_width``, on the product's high half), on
        the bits now and after one more step."""
        s2, gw = self.s2, self.grad_width
        magnitudes = [self.s2_magnitude[i] for i in range(self.lanes)]
        level = self._rounding_level(s2.small_threshold)
        draws = [(random * level)[gw:] for random in (self.random, self.random_next)]
        return [
            self.s3_tiny.eq(Cat(less(mag, s2.small_threshold) for mag in magnitudes)),
            self.s3_chance.eq(Cat(Cat(less(draw, mag) for mag in magnitudes) for draw in draws)),
        ]

    def _judge(self, m):
        """The beat's threshold (the EMA's clamped, or ``threshold``), and per lane its bounds
        (``high``, ``low``) and verdict (``direct``: masked and ``|g| >= t``, with ``t = 0`` in
        a bypass window)."""
        s2, N, gw = self.s2, self.lanes, self.grad_width
        vw = value_width(gw)
        ema_threshold = ema_clamp(m, self.s2_candidate, s2.ema_min, s2.ema_max,
                                  "s2_ema_threshold")
        judged = Signal(data.StructLayout({
            "threshold": gw, "high": self._per_lane(signed(vw + 1)),
            "low": self._per_lane(signed(vw + 1)), "direct": N}), name="s2_judged")
        m.d.comb += judged.threshold.eq(Mux(s2.ema, ema_threshold, s2.threshold))
        for i in range(N):
            lane_threshold = Mux(s2.bypass[i], 0, judged.threshold)
            grad = Signal(signed(vw + 1), name=f"s2_grad{i}")
            m.d.comb += [
                grad.eq(s2.grads[i]),
                judged.high[i].eq(lane_threshold - grad),
                judged.low[i].eq(-lane_threshold - grad),
                judged.direct[i].eq(s2.mask[i] & at_least(self.s2_magnitude[i], lane_threshold)),
            ]
        return judged

    # -- stage s3: decide -----------------------------------------------------------------------

    def _decide_stage(self, m, shared):
        d = _LineDecision()
        self._s3_entry(m, d)            # the row and the hit, as they are now (L1's)
        self._s3_ways(m, d)             # the way a miss would take (L1's)
        if self.whole_line:
            self._s3_whole_line(m, d, shared)   # the decision, its row, writes and strobes
        else:
            self._s3_hit_lanes(m, d)        # on a hit: the lanes' new sums, crossings, what leaves
            self._s3_miss_lanes(m, d)       # on a miss: tiny lanes, allocation, eviction
            self._s3_row(m, d)              # the set's new row
            self._s3_writes(m, d, shared)   # the beat's line write and the victim's, the strobes
        self._s3_to_s4(m, d, shared)    # s4's registers

    def _s3_whole_line(self, m, d, shared):
        """The whole-line rule's decision (:class:`~design.line_decision.LineDecision`) on the
        hit entry, and from it the beat's line write, the victim's, the strobes and the change
        to ``valid_count`` (the entry it leaves: :meth:`_s3_to_s4`)."""
        s3, N = self.s3, self.lanes
        m.submodules.decision = decision = self.decision
        hit, entry = self.s3_now_hit, self.s3_hit_entry
        m.d.comb += self._take_hit_entry()
        mask = Mux(self.s3_valid, s3.mask, 0)
        small = mask & ~self.s3_direct
        level = self._rounding_level(s3.small_threshold)
        chance = Mux(self.s4_valid & self.s4_stepped, self.s3_chance[1], self.s3_chance[0])
        # The lanes the stochastic test rounds, if the decision accounts for them.
        rounded = Signal(N, name="s3_rounding_lanes")
        m.d.comb += [
            rounded.eq(Mux(s3.stochastic, self.s3_tiny & chance, 0)),
            decision.grads.eq(s3.grads), decision.mask.eq(mask),
            decision.direct.eq(self.s3_direct), decision.tiny.eq(self.s3_tiny),
            decision.rounded.eq(rounded),
            decision.level.eq(level),
            # (the bounds fit: |t - g| and |-t - g| are below 2**(grad_width+1))
            *[decision.high[i].eq(self.s3_high[i]) for i in range(N)],
            *[decision.low[i].eq(self.s3_low[i]) for i in range(N)],
            decision.fit_high.eq(self.s3_fit_high), decision.fit_low.eq(self.s3_fit_low),
            decision.hit.eq(hit), decision.entry.held.eq(entry.held),
            decision.entry.count.eq(entry.count),
            *[decision.entry.sums[i].eq(entry.sums[i]) for i in range(N)],
        ]
        active = mask.any()
        allocates = decision.allocates
        # mutation site: whole-line-evicts
        d.c_hit, d.c_evict, d.allocates = hit & active, allocates & d.full, allocates
        d.leaves = ~decision.keeps
        # A tiny lane the decision accounts for (a miss not written as it came) is written,
        # rounded, exactly where the stochastic test rounds it: its discard's error is made
        # from registers, not from the decision (as on one lane; a lane not accounted has no
        # discard).
        d.level, d.rounded = level, rounded
        # The beat's line write and the victim's.
        own = Signal(self._write_layout(), name="s3_own_write")
        m.d.comb += [own.addr.eq(s3.addr),
                     own.mask.eq(Mux(decision.written, decision.write_mask, 0)),
                     *[own.values[i].eq(decision.values[i]) for i in range(N)],
                     *[own.causes[i].eq(decision.causes[i]) for i in range(N)]]
        victim_write = Signal(self._write_layout(), name="s3_victim_write")
        m.d.comb += [
            victim_write.addr.eq(self._line(d.s3_set, d.victim.tag)),
            victim_write.values.eq(d.victim.sums),
            victim_write.mask.eq(Mux(d.c_evict, d.victim.held, 0)),
            *[cause.eq(Cause.EVICTION) for cause in victim_write.causes],
        ]
        m.d.comb += [
            self.hit.eq(hit & small.any()),
            self.miss.eq(~hit & (small & ~self.s3_tiny).any()),
            self.small_miss.eq(decision.accounted),
            # the random bits step for a miss with tiny lanes, whether or not they were used
            self.random_step.eq(~hit & (small & self.s3_tiny).any() & s3.stochastic),
            shared.count_inc.eq(allocates & ~d.full),
            shared.count_dec.eq(d.c_hit & ~decision.keeps),
        ]
        d.own, d.victim_write = own, victim_write
        d.d_write = d.c_hit | allocates
        d.decision = decision

    def _entry_left(self, entry, decision, tag):
        """Statements giving ``entry`` the entry ``decision`` leaves for ``tag``, the beat's:
        the hit way's entry after, or the allocated way's new one."""
        after = decision.after
        return [entry.valid.eq(decision.keeps), entry.tag.eq(tag), entry.held.eq(after.held),
                entry.count.eq(after.count),
                *[entry.sums[i].eq(after.sums[i]) for i in range(self.lanes)]]

    def _s4_row_written(self):
        """Under the whole-line rule, statements making the row ``s4`` writes (``s4_row``)
        from its registers: the row decided on, its way taking the entry left, its victim
        pointer moved on if it evicted. (The design reads it only where ``s4_write``: a
        decision that does not write leaves no entry in its way.)"""
        decided, written = self.s4_decided, self.s4_row
        return [
            *[written.ways[k].eq(Mux(self.s4_ways[k], self.s4_entry, way))
              for k, way in enumerate(decided.ways)],
            # mutation site: line-victim-advance
            written.victim.eq(Mux(self.s4_victim, decided.victim + 1, decided.victim)),
        ]

    def _s3_hit_lanes(self, m, d):
        """The lanes judged here (``small``), and what a hit does, made on every entry the hit
        may take before the pick (docs/synth.md, "Adders and tests before picks"): each way of
        ``s3_row``, the set as it is now (the beat ahead, now in ``s4``, forwarded its new row
        into it). Per entry: the lanes' sums plus
        their gradients (``add``: a small lane's new sum, a direct lane's value with its held
        sum), which cross the threshold (``crossed``), which stay held (``held_after``),
        whether the line leaves (``leaves``), the lanes written at ``max_updates``
        (``flushed``) and the sums the entry keeps (``kept_sums``). The row's ways take their
        own way's outcome (``way_outcomes``); the write takes the hit's, picked one-hot by
        ``picks`` (``hit_add``, ``crossed``, ``flushed``, ``leaves``)."""
        s3, N, vw = self.s3, self.lanes, value_width(self.grad_width)
        direct, small = Signal(N, name="s3_direct_lanes"), Signal(N, name="s3_small_lanes")
        m.d.comb += [direct.eq(Mux(self.s3_valid, s3.mask & self.s3_direct, 0)),
                     small.eq(Mux(self.s3_valid, s3.mask & ~self.s3_direct, 0))]
        # The hit, one-hot over the row's ways (all 0 on a miss): s3_now_hit is their OR.
        picks = Signal(self.ways, name="s3_hit_picks")
        m.d.comb += picks.eq(d.hit_ways)
        outcomes = []
        for k, entry in enumerate(self.s3_row.ways):
            add = Signal(self._per_lane(signed(vw)), name=f"s3_add{k}")
            kept_sums = Signal(self._per_lane(signed(vw)), name=f"s3_kept_sums{k}")
            crossed, held_after, flushed = (Signal(N, name=f"s3_{what}{k}")
                                            for what in ("crossed", "held_after", "flushed"))
            leaves = Signal(name=f"s3_leaves{k}")
            for i in range(N):
                held_sum = entry.sums[i]
                m.d.comb += [
                    add[i].eq(held_sum + Mux(s3.mask[i], s3.grads[i], 0)),
                    # |sum + g| >= t, on the bounds made in s2
                    crossed[i].eq(small[i] & (at_least(held_sum, self.s3_high[i]) |
                                              at_most(held_sum, self.s3_low[i]))),
                ]
            for j in range(N):
                # (A lane that crossed is cleared; a direct lane keeps its sum.)
                # mutation site: lane-sum-cleared
                m.d.comb += kept_sums[j].eq(Mux(crossed[j], 0,
                                                Mux(direct[j], entry.sums[j], add[j])))
            fills = entry.count >= self.max_updates - 1
            m.d.comb += [
                held_after.eq((entry.held | small) & ~crossed),
                leaves.eq(fills | ~held_after.any()),
                flushed.eq(Mux(fills, held_after, 0)),
            ]
            outcomes.append({"add": add, "kept_sums": kept_sums, "crossed": crossed,
                             "held_after": held_after, "flushed": flushed, "leaves": leaves,
                             "count": entry.count})

        def pick(field):
            return functools.reduce(operator.or_, (
                Mux(picks[k], outcome[field].as_value() if field in ("add", "kept_sums")
                    else outcome[field], 0)
                for k, outcome in enumerate(outcomes)))

        hit_add = Signal(self._per_lane(signed(vw)), name="s3_hit_add")
        crossed, flushed = Signal(N, name="s3_crossed"), Signal(N, name="s3_flushed")
        leaves = Signal(name="s3_leaves")
        m.d.comb += [hit_add.eq(pick("add")), crossed.eq(pick("crossed")),
                     flushed.eq(pick("flushed")), leaves.eq(pick("leaves"))]
        d.way_outcomes = outcomes   # way w's outcome if it is the hit way
        d.direct, d.small, d.hit_add, d.crossed = direct, small, hit_add, crossed
        d.leaves, d.flushed = leaves, flushed

    def _s3_miss_lanes(self, m, d):
        """The case flags (``c_hit``, ``c_miss``: a beat with small lanes that hits or misses),
        the tiny lanes of a miss (``tiny``, and ``rounded``: written by the stochastic mode),
        the lanes that allocate (``kept``), whether the beat allocates and evicts."""
        s3, N = self.s3, self.lanes
        judged_here = d.small.any()
        c_hit  = judged_here & self.s3_now_hit
        c_miss = judged_here & ~self.s3_now_hit
        tiny, kept, rounded = (Signal(N, name=f"s3_{name}") for name in
                              ("tiny_lanes", "kept_lanes", "rounded_lanes"))
        # The beat's draw: the random bits in force when it decides (stepped if the beat ahead
        # of it, now in s4, used them).
        chance = Mux(self.s4_valid & self.s4_stepped, self.s3_chance[1], self.s3_chance[0])
        m.d.comb += [
            tiny.eq(Mux(c_miss, d.small & self.s3_tiny, 0)),
            kept.eq(Mux(c_miss, d.small & ~self.s3_tiny, 0)),
            rounded.eq(Mux(s3.stochastic, tiny & chance, 0)),
        ]
        allocates = kept.any() if self.max_updates > 1 else Const(0)
        d.c_hit, d.c_miss, d.tiny, d.kept, d.rounded = c_hit, c_miss, tiny, kept, rounded
        d.allocates, d.c_evict = allocates, allocates & d.full
        d.leaves_hit = c_hit & d.leaves

    def _s3_row(self, m, d):
        """The set's new row: the hit way takes its lanes' new sums (0 where a lane crossed),
        held lanes and count, and stays valid unless the line leaves; an allocated way takes
        the beat's kept lanes; a full set's victim pointer moves on."""
        s3 = self.s3
        new_row = Signal(self.row_layout)
        alloc_here = Mux(d.allocates, d.alloc_ways, 0)
        hit_here = Mux(d.c_hit, d.hit_ways, 0)
        m.d.comb += new_row.eq(self.s3_row_now)
        for i, way in enumerate(new_row.ways):
            with m.If(alloc_here[i]):
                m.d.comb += [way.valid.eq(1), way.tag.eq(d.s3_tag), way.held.eq(d.kept),
                             way.count.eq(1)]
                m.d.comb += [way.sums[j].eq(Mux(d.kept[j], s3.grads[j], 0))
                             for j in range(self.lanes)]
            with m.Elif(hit_here[i]):
                outcome = d.way_outcomes[i]
                # (count: the beats that updated the line, one per beat whatever its lanes)
                m.d.comb += [way.valid.eq(~outcome["leaves"]),
                             way.held.eq(outcome["held_after"]),
                             way.count.eq(outcome["count"] + 1),  # mutation site: line-count
                             way.sums.eq(outcome["kept_sums"])]
        with m.If(d.c_evict):
            m.d.comb += new_row.victim.eq(d.victim_way + 1)
        d.new_row = new_row

    def _s3_writes(self, m, d, shared):
        """The beat's own line write (``own``) and the victim's (``victim_write``), the strobes
        and the change to ``valid_count``."""
        s3, N = self.s3, self.lanes
        mu1 = Const(self.max_updates == 1)
        own = Signal(self._write_layout(), name="s3_own_write")
        m.d.comb += [
            own.addr.eq(s3.addr),
            # mutation site: lane-mask
            own.mask.eq(d.direct | Mux(d.c_hit, d.crossed | d.flushed,
                                       d.rounded | Mux(mu1, d.kept, 0))),
        ]
        small = s3.small_threshold
        for i in range(N):
            grad, value, cause = s3.grads[i], own.values[i], own.causes[i]
            with m.If(d.direct[i]):
                # (grad plus its held sum beside the decision, picked last)
                m.d.comb += [value.eq(Mux(d.c_hit & d.flushed[i], d.hit_add[i], grad)),
                             cause.eq(Cause.DIRECT)]
            with m.Elif(d.c_hit):
                m.d.comb += [value.eq(d.hit_add[i]),
                             cause.eq(Mux(d.crossed[i], Cause.ACCUM_THRESHOLD,
                                          Cause.MAX_UPDATES))]
            with m.Elif(d.tiny[i]):
                m.d.comb += [value.eq(signed_level(grad, small)),
                             cause.eq(Cause.STOCHASTIC)]
            with m.Else():
                m.d.comb += [value.eq(grad), cause.eq(Cause.MAX_UPDATES)]
        victim_write = Signal(self._write_layout(), name="s3_victim_write")
        m.d.comb += [
            victim_write.addr.eq(self._line(d.s3_set, d.victim.tag)),
            victim_write.values.eq(d.victim.sums),  # mutation site: lane-order
            victim_write.mask.eq(Mux(d.c_evict, d.victim.held, 0)),
            *[cause.eq(Cause.EVICTION) for cause in victim_write.causes],
        ]
        m.d.comb += [
            self.hit.eq(d.c_hit),
            self.miss.eq(d.c_miss & d.kept.any()),
            self.small_miss.eq(d.tiny),
            # mutation site: line-random-step
            self.random_step.eq(d.tiny.any() & s3.stochastic),
            shared.count_inc.eq(d.allocates & ~d.full),
            shared.count_dec.eq(d.leaves_hit),
        ]
        d.own, d.victim_write = own, victim_write
        d.d_write = d.c_hit | d.allocates

    def _s3_to_s4(self, m, d, shared):
        """``s4``'s registers, and for the beat in ``s2`` (deciding next) whether this one
        rewrote its set; the discard registers."""
        s2, s3, hit, full = self.s2, self.s3, self.s3_now_hit, d.full
        next_same_set = self._set(s2.addr) == d.s3_set
        small = s3.small_threshold
        m.d.sync += [
            self.s4_valid.eq(self.s3_valid),
            self.s4_write.eq(d.d_write),
            self.s4_set.eq(d.s3_set),
            self.s4_way.eq(Mux(hit, self.s3_now_way, Mux(full, d.victim_way, d.free_way))),
            self.s4_ways.eq(Mux(hit, d.hit_ways, d.alloc_ways)),
            self.s4_holds.eq((d.c_hit & ~d.leaves) | d.allocates),
            self.s4_alloc.eq(d.allocates),
            self.s4_stepped.eq(self.random_step),
            self.s4_inc.eq(shared.count_inc),
            self.s4_dec.eq(shared.count_dec),
            self.s4_push.eq(d.own.mask.any()),
            self.s4_push_p.eq(d.own),
            self.s4_victim.eq(d.c_evict),
            self.s4_victim_p.eq(d.victim_write),
            self.s3_same_addr.eq(d.d_write & (s2.addr == s3.addr)),
            self.s3_taken.eq(Mux(d.allocates & next_same_set, d.alloc_ways, 0)),
            self.discard.eq(self.small_miss),
            self.discard_addr.eq(s3.addr),
        ]
        if self.whole_line:
            # The row decided on and the entry left, of which s4_row is made; for the beat in
            # s2, deciding next, whether this one rewrote its set (s3_row_now then takes
            # s4_row, as one lane's does).
            m.d.sync += [
                self.s4_decided.eq(self.s3_row_now),
                *self._entry_left(self.s4_entry, d.decision, d.s3_tag),
                self.s3_same_set.eq(d.d_write & next_same_set),
            ]
            m.d.comb += self._s4_row_written()
        else:
            m.d.sync += self.s4_row.eq(d.new_row)
            # The beat in s2 decides next on its set as this decision leaves it: the new row
            # is forwarded into s3_row (over the row s2 registers, _compare_stage), so that
            # s3's tests start from s3_row's ways themselves, with no pick of s4's entry in
            # front. The select is made from registers alone: a decision that does not write
            # leaves new_row equal to s3_row, the set as it is now, so it forwards that.
            with m.If(self.s3_valid & next_same_set):  # mutation site: line-forward
                m.d.sync += self.s3_row.eq(d.new_row)
        level = d.level if self.whole_line else small
        for i in range(self.lanes):
            grad = s3.grads[i]
            written = Mux(d.rounded[i], signed_level(grad, level), 0)
            m.d.sync += self.discard_error[i].eq(grad - written)
