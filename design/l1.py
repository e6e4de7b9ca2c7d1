import functools
import operator
from dataclasses import dataclass, fields
from typing import ClassVar

from amaranth.lib import enum

from amaranth import *
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .layouts import (Cause, grad_range, classified_layout, write_layout, value_width, line_value_width,
                      discard_error_width)
from .bits import lowest_index, lowest_one_hot
from .compare import less, at_least, at_most
from .modes import ema_candidate, ema_clamp, signed_level
from .line_decision import LineDecision
from .queue import WriteQueue
from .params import DEFAULTS, WHOLE_LINE, checked, check_bool, check_int, check_power_of_two, log2

__all__ = ["L1Accumulator", "L1State", "L1Probe"]


class L1State(enum.Enum, shape=2):
    #: After reset: writes every set empty, one set per cycle (SRAM has no reset).
    INIT = 0
    #: Normal work: one gradient per cycle.
    RUN  = 1
    #: Flush barrier: writing every valid entry out, set by set.
    SCAN = 2
    #: Flush barrier: every entry written out; waits for ``flush`` to drop.
    DONE = 3


@dataclass(frozen=True, kw_only=True)
class L1Probe:
    """What is observed of L1 beyond its ports, declared: the proofs and the trace tables read
    L1 through its ports and these, and nothing else of its inside (tests/test_properties.py
    checks ``properties/``), so the inside may change freely while each of these keeps the
    meaning given here. Existing signals, named; no logic. A field is ``None`` where the
    variant (one lane or lines, the seed's policy or the whole-line rule) has no such signal.

    The first group is the system's view (the groups of ``properties/`` other than L1's own
    contract, and the traces); the rest is what L1's own contract states its invariants on
    (``properties/pipeline.py``, ``policy.py``, ``invariants.py``, ``outputs.py``), as
    ``amaranth.lib.fifo``'s invariants are stated on the FIFO's pointers.
    """
    #: The fields of the system's view.
    SYSTEM_VIEW: ClassVar[tuple] = ("state", "reserved", "in_stage", "deciding",
                                    "deciding_direct", "pushes", "write", "writes_row",
                                    "scan_set", "scan_wait", "queue", "out_valid", "own_taken")

    # -- the system's view ------------------------------------------------------------------
    #: :class:`L1State`.
    state: Signal
    #: Places of the output queue taken: the gradients in ``s1`` ... ``s4`` and the writes
    #: queued.
    reserved: Signal
    #: Whether ``s1``, ``s2``, ``s3``, ``s4`` hold a gradient (one gradient per stage, the one
    #: accepted 1, 2, 3, 4 cycles before: the pipeline never stalls).
    in_stage: tuple
    #: The gradient deciding in ``s3`` (its classified payload, with the threshold it is
    #: judged against) ...
    deciding: Signal
    #: ... and whether it is direct (``|g| >= threshold``; per lane on lines).
    deciding_direct: Signal
    #: The decision leaving ``s4`` (made in ``s3`` the cycle before): it pushes ``write``
    #: into the output queue if ``pushes``, and writes its set's row if ``writes_row``.
    pushes: Signal
    write: Signal
    writes_row: Signal
    #: The set INIT clears or the flush scan reads, and whether the scan waits for its row.
    scan_set: Signal
    scan_wait: Signal
    #: The output queue (a :class:`~design.queue.WriteQueue`, with a contract of its own).
    queue: object
    #: On lines, whether L1's output register holds a write (push's valid comes from it);
    #: None with one lane, whose push is the queue's head.
    out_valid: object = None
    #: On lines, whether the output register holds the head pair's own write, its victim's
    #: still to follow (the place is released with the victim's); None with one lane.
    own_taken: object = None

    # -- storage --------------------------------------------------------------------------
    #: The RAM of rows (a :class:`~amaranth.lib.memory.Memory` of ``row_layout``, one row a
    #: set; the proofs read it through ports of their own), its read port (``s1``'s and the
    #: scan's) and its write port (``s4``'s, INIT's and the scan's).
    storage: object
    storage_read: object
    storage_write: object
    #: L1 holds no entry (``valid_count == 0``, from registers).
    empty: Signal

    # -- s1 (read), s2 (compare) ----------------------------------------------------------
    #: The gradients in ``s1`` and ``s2``, as accepted.
    s1: Signal
    s2: Signal
    #: ``|g|`` of ``s2``'s gradient (per lane on lines), made in ``s1``.
    s2_magnitude: Signal
    #: One lane: the stochastic mode's rounding level of ``s2``'s and ``s3``'s gradient
    #: (``small_threshold``; under the whole-line rule at most ``2**(grad_width-1) - 1``).
    #: The line L1 makes its level where it uses it.
    s2_level: Signal
    s3_level: Signal
    #: The RAM's read data, registered: the row ``s1`` read, or the row the scan reads.
    read_row: Signal
    #: Whether ``s2``'s set is the one ``s4``, ``h1``, ``h2`` writes (bits 0, 1, 2): its row
    #: is then taken from there, not from ``read_row``.
    s2_fwd: Signal
    #: The set's row as ``s2`` takes it (all but what the gradient in ``s3`` does to it), or
    #: the scanned set's row.
    row: Signal
    #: Whether the rows written one and two cycles ago (``h1``, ``h2``: a read issued then
    #: did not see them) are valid.
    h1_valid: Signal
    h2_valid: Signal

    # -- s3 (decide) ----------------------------------------------------------------------
    #: ``s3``'s row, registered from ``s2``'s: on lines by the line policy its set as it is
    #: now.
    s3_row: Signal
    #: Whether ``s3_row`` holds ``s3``'s address, in which way, and that way one-hot (0 on a
    #: miss).
    s3_hit: Signal
    s3_hit_way: Signal
    s3_hit_ways: Signal
    #: Whether the gradient now in ``s4`` rewrote ``s3``'s address, ``s3``'s set, and the way
    #: it allocated (one-hot, or none).
    s3_same_addr: Signal
    s3_same_set: Signal
    s3_taken: Signal
    #: The crossing bounds ``t - g`` and ``-t - g`` (per lane on lines): ``|s + g| >= t`` iff
    #: ``s >= t - g`` or ``s <= -t - g``.
    s3_high: Signal
    s3_low: Signal
    #: ``|g| < small_threshold`` (per lane on lines).
    s3_tiny: Signal
    #: The stochastic test, on ``random`` (0) and on ``random_next`` (1) (per lane on lines).
    s3_chance: Signal
    #: What ``s3`` decides on, after its correction for ``s4``: its set as it is now; whether
    #: it holds ``s3``'s address, and in which way.
    s3_row_now: Signal
    s3_now_hit: Signal
    s3_now_way: Signal
    #: Under the whole-line rule: the fit bounds ``2**(grad_width-1) - 1 - g`` and
    #: ``-2**(grad_width-1) - g`` (per lane on lines); the hit entry picked in ``s2`` (on one
    #: lane as the decision takes it, on lines a way of the row); the entry the decision
    #: takes (``s3_entry``, or on ``s3_same_addr`` the one the decision ahead left); the
    #: decision (a :class:`~design.line_decision.LineDecision`, with a contract of its own).
    s3_fit_high: object = None
    s3_fit_low: object = None
    s3_entry: object = None
    s3_hit_entry: object = None
    decision: object = None
    #: By the seed's policy, one lane: the hit way's sum and count after the decision.
    s3_new_sum: object = None
    s3_new_count: object = None

    # -- s4 (write) -----------------------------------------------------------------------
    #: The set ``s4`` writes, its row, the way the gradient hit or allocated (and one-hot),
    #: whether that way holds its address after it and whether it took a new tag.
    s4_set: Signal
    s4_row: Signal
    s4_way: Signal
    s4_ways: Signal
    s4_holds: Signal
    s4_alloc: Signal
    #: Whether the decision stepped the random bits, allocated a free way.
    s4_stepped: Signal
    s4_inc: Signal
    #: By the seed's policy, one lane: the kept entry's sum and count.
    s4_sum: object = None
    s4_count: object = None
    #: On lines: the victim line's write beside the beat's own, and whether it is made.
    s4_victim: object = None
    s4_victim_p: object = None

    # -- the flush scan, the output register ----------------------------------------------
    #: The set after ``scan_set`` (mod ``sets``), and the ways of the scanned set already
    #: written out.
    scan_next: Signal
    scan_done: Signal
    #: On lines: the output register's write, and whether it is its pair's last.
    out: object = None
    out_last: object = None


class _Shared:
    """What the methods of one :meth:`L1Accumulator.elaborate` share: each signal is made by one
    method and driven or read by others. Made afresh by each ``elaborate``; not part of the
    component (the proofs and traces read the component's ports and ``probe``). A signal made as
    ``shared.accept = Signal()`` is named ``accept``, as a local variable would be."""
    __slots__ = (
        "accept",         # elaborate: a gradient is accepted (grad_in.valid & grad_in.ready)
        "count_inc",      # _valid_count (driven by s3): valid_count rises next cycle ...
        "count_dec",      # ... or falls
        "scan_push",      # _output_queue (driven by the control): the flush scan pushes ...
        "scan_push_p",    # ... this write (made by the flush scan)
        "reserved_next",  # _output_queue: reserved in the next cycle
        "pending",        # _flush_scan: the ways of the scanned set still to write out ...
        "scan_ways",      # ... the one written out now (one-hot)
        "room",           # ... the queue has a place for it
        "cleared_row",    # ... the scanned set's row, emptied
        "state_next",     # _control: the state in the next cycle
    )


class _Decision:
    """What the steps of the decision in ``s3`` (:meth:`L1Accumulator._decide_stage`) pass on to
    later steps, under the names the steps give them (the signals the decision makes that are
    members of the component, ``s3_row_now``, ``s3_now_hit``, ..., are read from it)."""
    __slots__ = (
        "hit_ways", "row_hit_ways",                         # _s3_entry
        "crossed", "leaves_way", "way_sum", "way_count",    # _s3_tests (_s3_by_the_rule)
        "full", "free_way", "victim_way", "victim", "alloc_ways", "s3_set", "s3_tag",  # _s3_ways
        "c_direct", "c_hit", "c_tiny", "c_miss", "c_evict", "hit_here", "allocates",  # _s3_cases
        "chance", "level", "written", "touches",
        "writes", "value", "cause",                         # _s3_by_the_rule
        "new_row",                                          # _s3_new_row
        "d_write", "d_push", "d_push_p",                    # _s3_write
    )


class L1Accumulator(wiring.Component):
    """The set-associative L1 accumulator: a four-stage pipeline, its output queue and the
    flush scan.

    Storage is one :class:`~amaranth.lib.memory.Memory` row per set (``storage``), holding
    every way's entry (``valid``, ``tag``, ``sum``, ``count``) and the set's round-robin victim
    pointer, so that one synchronous read gives the whole set, as an SRAM would.

    Pipeline
    --------
    A gradient accepted in cycle *t* (its set's read is issued in the same cycle) goes through
    four stages, one cycle each, and never waits in any of them:

    * ``s1`` (*t+1*), read: the RAM's read data arrives and is registered as it is
      (``read_row``), with nothing in front of the register, so that the block RAM's slow
      clock-to-output has a cycle to itself. The set is compared with the sets of the rows the
      later stages will be writing (registered as ``s2_fwd``). In the EMA mode the EMA
      threshold's multiply is registered (``s2_candidate``); ``s2`` clamps it. So are ``|g|``
      (``s2_magnitude``), which ``s2``'s compares take, and the rounding level
      (``s2_level``), which the stochastic test's product takes.
    * ``s2`` (*t+2*), compare: the row is the newest of ``s4_row``, ``h1_row``, ``h2_row``
      (rows written in this cycle and in the two before, which the read could not see) and
      ``read_row``; the tags are compared, and the row, the hit way, the verdict
      (``direct``: ``|g| >= t``) and the threshold bounds ``t - g`` and ``-t - g`` are
      registered.
    * ``s3`` (*t+3*), decide: the one gradient whose effect ``s2`` could not see is the one
      deciding in ``s3`` at the same time, one cycle ahead; its outcome is in ``s4``'s
      registers (which way it touched, whether that way still holds its address, the new sum
      and count; and, registered with them, whether it rewrote ``s3``'s set, address or hit
      way), so ``s3`` corrects its hit by a few gates instead of comparing tags again, and
      the accumulate loop (sum, threshold test on the precomputed bounds, free-or-keep) closes
      in one cycle through ``s4_sum``. The threshold and count tests are made on every way's
      entry at once, so no select stands in front of them; the decision is one flag per case
      (``c_hit``, ``c_miss``, ...), the hit way and the allocated way are one-hot, and every
      output is a flat function of them with the tests entering last (Yosys' ABC maps every
      path to the depth of the deepest, docs/synth.md, design rules for timing). The new row, at most one
      write and the change to ``valid_count`` are registered.
    * ``s4`` (*t+4*), write: the new row is written to the RAM, the write goes into the output
      queue.

    The output queue (``QUEUE_DEPTH`` writes) feeds ``push``. ``grad_in.ready`` is a register:
    a gradient is accepted only if the queue will have room for a write from every gradient
    in the pipeline and from it (``reserved``), so no stage ever stalls and nothing on the
    input side depends on ``push.ready`` within a cycle.

    Latency: a gradient accepted in cycle *t* pushes its write (if any) into the queue at the
    end of *t+4*; it is offered on ``push`` from cycle *t+5*, and L2 takes it then if it has
    room. Its row is in the RAM from *t+5*.

    Policy, for a gradient ``g`` at address ``(tag, set)`` with threshold ``t``:

    * ``direct`` (``|g| >= t``): pushed as it is (``Cause.DIRECT``); L1 is not touched.
    * hit: ``sum += g``, ``count += 1``; if ``|sum| >= t`` the entry is pushed and freed
      (``ACCUM_THRESHOLD``), else if ``count == max_updates`` likewise (``MAX_UPDATES``).
    * miss with ``|g| < small_threshold`` (dual threshold, :mod:`design.modes`): not allocated;
      ``small_miss`` strobes, and in the stochastic mode ``sign(g) * small_threshold`` is pushed
      (``Cause.STOCHASTIC``) if ``random * small_threshold < |g| * 2**grad_width``, with
      ``random`` as it is when the gradient decides in ``s3`` (after every earlier decision's
      step). The test is made once: ``s2`` registers it on both candidate bit patterns
      (``s3_chance``) and ``s3`` picks one; no stage waits, so the decision of the write
      offered to the queue never changes and nothing is recomputed (the pipeline's form of
      main's held decision, ``s1_fresh``/``s1_rounds_held``, which this design does not need).
    * miss, free way: the lowest free way gets ``sum = g, count = 1`` (with ``max_updates == 1``
      it is pushed at once instead, as ``MAX_UPDATES``).
    * miss, set full: the victim way is pushed (``EVICTION``) and takes the new entry; the
      set's victim pointer moves on (round robin).

    With ``whole_line`` the policy is the whole-line rule's one-lane case (docs/lanes.md,
    "The whole-line rule"), which differs only where a gradient hits and where a value would
    leave ``grad_width`` bits: every value held and written fits ``grad_width`` bits, so a
    gradient causes at most one write and never allocates beside it:

    * direct, hit: the held sum rides along, ``sum + g`` pushed as ``DIRECT``, entry freed; if
      ``sum + g`` does not fit, ``g`` is pushed alone and the entry keeps ``sum``, count 1;
    * small, hit, ``sum + g`` does not fit: the held ``sum`` is pushed (``ACCUM_THRESHOLD``)
      and the entry holds ``g``, count 1;
    * a tiny miss in the stochastic mode is rounded to ``min(small_threshold,
      2**(grad_width-1) - 1)`` (the stochastic test on that level too).

    ``s3`` then decides with :class:`~design.line_decision.LineDecision` (``lanes=1``), the
    rule's one statement in the RTL, as the line L1 does (:meth:`_s3_by_the_rule`): on the
    hit entry ``s2`` picks from its row (``s3_entry``; the entry a decision leaves is
    forwarded into it for the gradient behind on the same address), with the fit bounds it
    compares a held sum with (``s3_fit_high``, ``s3_fit_low``) made in ``s2`` too.

    Flush: ``flush`` is a level, held until ``idle``. It is sampled into ``grad_in.ready`` a
    cycle late (the port is a register), so a gradient offered in the very cycle ``flush``
    rises may still be accepted; it comes before the barrier. Once the pipeline is empty and
    ``grad_in.ready`` has fallen (so that the read of set 0 does not wait for
    ``grad_in.valid``), the scan reads set 0, 1, ... and pushes each valid way (lowest way
    first, ``Cause.FLUSH``) as the queue has room, then writes the set back empty (keeping its
    victim pointer). A set costs two cycles plus one per valid way.
    The scan ends after the last set or after the set whose writes empty L1 (``DONE``), or at
    once if ``valid_count`` is 0. If ``flush`` drops during the scan, the current set is
    finished and normal work resumes.

    Invariants
    ----------
    * ``valid_count`` equals the number of valid entries (once the scan has written the
      current set back), at most ``sets * ways``.
    * A held sum has ``|sum| < 2**grad_width - 1`` (see :func:`~design.layouts.value_width`),
      so ``sum + g`` never overflows; a held count is in ``[1, max_updates - 1]``.
    * No two valid ways of a set hold the same tag.
    * ``reserved`` (gradients in ``s1`` ... ``s4`` plus writes in the queue) is at most
      ``QUEUE_DEPTH``, so a write from ``s4`` always finds room.

    Parameters
    ----------
    addr_width, grad_width : int
        Widths of the address and of the gradient.
    sets, ways : int
        Geometry, both powers of two.
    max_updates : int
        Updates after which an entry is written out (``>= 1``).
    whole_line : bool
        Decide by the whole-line rule (``model.ReferenceModel(whole_line=True)``, below)
        instead of the policy above.

    Members
    -------
    grad_in : ``In(stream.Signature(classified_layout))``
        Gradients from the streamer, with their threshold. ``ready`` is a register.
    push : ``Out(stream.Signature(write_layout))``
        Writes toward L2, with their cause; a value is ``grad_width + 2`` bits, under the
        whole-line rule ``grad_width`` (``value_width``). Valid and payload hold until taken.
    flush : ``In(1)``
        The flush barrier request (a level).
    idle : ``Out(1)``
        Nothing is held: the pipeline and the queue empty, no valid entry, not initialising or
        scanning.
    valid_count : ``Out(range(sets * ways + 1))``
        Number of valid entries (``valid_base``, the count as of the rows written, plus the
        change the decision in ``s4`` makes: registers and an adder).
    hit, miss : ``Out(1)``
        Strobes: a small gradient decided (in ``s3``) on an L1 hit or miss.
    small_miss : ``Out(1)``
        Strobe: a tiny gradient (dual threshold) missed and was not allocated (not counted in
        ``miss``); decided in ``s3``.
    random, random_next : ``In(grad_width)``
        Random bits now, and after one more step of their source. The gradient in ``s2`` makes
        its stochastic test on both (a multiply each, a stage ahead of the decision); ``s3``
        takes the one that is in force when it decides (the source has stepped if the
        gradient ahead of it, now in ``s4``, took a stochastic decision).
    random_step : ``Out(1)``
        A stochastic decision used ``random`` this cycle (step the random source).
    discard : ``Out(1)``
        Strobe (a register, a cycle after ``small_miss``): a tiny miss was accounted ...
    discard_addr : ``Out(addr_width)``, discard_error : ``Out(signed(grad_width + 1))``
        ... at this address, with this ``grad - written``.

    Attributes
    ----------
    probe : :class:`L1Probe`
        What the proofs and the traces observe of L1 beyond its ports.
    """

    #: Writes the output queue holds. A gradient is reserved a place from its acceptance
    #: until it leaves ``s4`` without a write or its write leaves the queue: five cycles when
    #: L2 takes every write at once, so six places keep one gradient per cycle; eight make
    #: it a power of two (LUT RAM).
    QUEUE_DEPTH = 8

    def __init__(self, *, addr_width=DEFAULTS["addr_width"], grad_width=DEFAULTS["grad_width"],
                 sets=DEFAULTS["sets"], ways=DEFAULTS["ways"],
                 max_updates=DEFAULTS["max_updates"], whole_line=WHOLE_LINE):
        with checked(self):
            # (The one default of whole_line: LineAccumulator passes it on to here.)
            self.whole_line  = check_bool("whole_line", whole_line)
            self.grad_width  = check_int("grad_width", grad_width, minimum=2)
            self.sets        = check_power_of_two("sets", sets)
            self.ways        = check_power_of_two("ways", ways)
            self.max_updates = check_int("max_updates", max_updates, minimum=1)
            self.set_bits    = log2(sets)
            self.addr_width  = check_int("addr_width", addr_width,
                                         minimum=self.lane_bits + self.set_bits + 1)
        self.tag_width   = addr_width - self.lane_bits - self.set_bits

        self._make_storage()
        layout = self._beat_layout()
        super().__init__(self._signature(layout))
        self._make_state()
        self._make_read_and_compare(layout)
        self._make_decide(layout)
        self._make_write()
        self._make_queue_and_scan()

    @property
    def probe(self):
        """:class:`L1Probe`: what the proofs and the traces observe of L1 beyond its ports."""
        return L1Probe(**self._probed())

    def _probed(self):
        """:class:`L1Probe`'s fields, by name: each field is the signal of its name, but those
        of the system's view that name a signal by its meaning."""
        by_meaning = dict(
            in_stage=(self.s1_valid, self.s2_valid, self.s3_valid, self.s4_valid),
            deciding=self.s3, deciding_direct=self.s3_direct,
            pushes=self.s4_push, write=self.s4_push_p, writes_row=self.s4_write)
        return {field.name: by_meaning[field.name] if field.name in by_meaning
                else getattr(self, field.name) for field in fields(L1Probe)}

    #: Signals of the line L1 only (:class:`~design.line_accumulator.LineAccumulator`): its
    #: output register and the victim's write.
    out = out_valid = out_last = own_taken = s4_victim = s4_victim_p = None

    # -- what __init__ makes: the RAM, the ports, the stages' signals -------------------------

    def _make_storage(self):
        """The entry and row layouts, and the RAM of rows with its ports."""
        sets, ways, max_updates = self.sets, self.ways, self.max_updates
        self.entry_layout = data.StructLayout({
            "valid": 1,
            "tag":   self.tag_width,
            **self._entry_sums(),
            "count": range(max_updates + 1),
        })
        self.row_layout = data.StructLayout({
            "ways":   data.ArrayLayout(self.entry_layout, ways),
            "victim": range(ways),
        })
        # The design never uses the read data of a set written in the same cycle (the row
        # written then is forwarded from h2_row instead), so the read-during-write result is
        # a don't-care: no_rw_check tells Yosys not to add registers and a bypass copy of the
        # row to emulate it on a block RAM that cannot.
        self.storage = Memory(shape=self.row_layout, depth=sets, init=[],
                              attrs={"no_rw_check": 1})
        # The ports are made here rather than in elaborate() so that the formal harness can
        # name the write port (the valid_count proof follows the row it writes).
        self.storage_read  = self.storage.read_port()
        self.storage_write = self.storage.write_port()

    def _signature(self, layout):
        """The ports: beats of ``layout`` in, writes out, and the status and random bits."""
        addr_width, grad_width, sets, ways = self.addr_width, self.grad_width, self.sets, self.ways
        return wiring.Signature({
            "grad_in":     In(stream.Signature(layout)),
            "push":        Out(stream.Signature(self._write_layout())),
            "flush":       In(1),
            "idle":        Out(1),
            "valid_count": Out(range(sets * ways + 1)),
            "hit":         Out(1),
            "miss":        Out(1),
            "small_miss":  Out(self.lanes),
            "random":      In(grad_width),
            "random_next": In(grad_width),
            "random_step": Out(1),
            "discard":     Out(self.lanes),
            "discard_addr": Out(addr_width),
            "discard_error": Out(self._per_lane(signed(discard_error_width(grad_width)))),
        })

    def _make_state(self):
        """The state and the valid-entry count, named here so that properties and traces can
        refer to them."""
        sets, ways = self.sets, self.ways
        self.state     = Signal(L1State, init=L1State.INIT)
        self.reserved  = Signal(range(self.QUEUE_DEPTH + 1))
        self.valid_base = Signal(range(sets * ways + 1))
        # valid_base == 0 and valid_base == 1, registered with it, so that "L1 holds nothing"
        # (``empty``) is a few gates from registers rather than an adder and a test for zero.
        self.valid_base_zero = Signal(init=1)
        self.valid_base_one  = Signal()
        self.empty     = Signal()                 # valid_count == 0

    def _make_read_and_compare(self, layout):
        """s1 (read) and s2 (compare): the gradient, the row read and what s1 compares."""
        grad_width, ways = self.grad_width, self.ways
        # s1: read
        self.s1_valid  = Signal()
        self.s1        = Signal(layout)
        # s2: compare
        self.s2_valid  = Signal()
        self.s2        = Signal(layout)
        # The RAM's read data, registered. Without a reset (its value matters only when s2 or
        # the scan uses it), so that Yosys can make it the block RAM's own output register.
        self.read_row  = Signal(self.row_layout, reset_less=True)
        self.s2_fwd    = Signal(3)                 # set equal to s4's, h1's, h2's next cycle
        # Tag compares made in s1 against the rows s2 may take from the later stages: the row
        # s3 decides on now (s4's next cycle, but for the one way s3 changes), s4's and h1's.
        self.s2_match_s4 = Signal(ways)
        self.s2_same_tag = Signal()                # same tag as the gradient in s3
        self.s2_match_h1 = Signal(ways)
        self.s2_match_h2 = Signal(ways)
        self.s2_candidate = Signal(grad_width + 4)  # the EMA threshold before its clamp
        # |g|, made in s1 so that s2's compares against it start from a register.
        self.s2_magnitude = Signal(grad_width)
        # The stochastic mode's rounding level, made in s1 so that s2's product starts from a
        # register (a clamp under the whole-line rule: _rounding_level).
        self.s2_level     = Signal(self._level_width())
        # The set row as it is for the gradient in s2 (all but the gradient in s3), or as read
        # for the set being scanned.
        self.row       = Signal(self.row_layout)

    def _make_decide(self, layout):
        """s3 (decide): the row, the hit, the sum bounds and the decision's corrections."""
        grad_width, ways, max_updates = self.grad_width, self.ways, self.max_updates
        vw = value_width(grad_width)
        # s3: decide
        self.s3_valid  = Signal()
        self.s3        = Signal(layout)
        self.s3_row    = Signal(self.row_layout)
        self.s3_hit    = Signal()
        self.s3_hit_way = Signal(range(ways))
        self.s3_hit_ways = Signal(ways)            # ... one-hot (0 on a miss)
        # The gradient now in s4 rewrote s3's set (its address): registered with s4, so that
        # the wide selects of s3's row and entry start from a register.
        self.s3_same_addr = Signal()
        self.s3_same_set  = Signal()
        self.s3_taken     = Signal(ways)           # ... allocated this way (one-hot, or none)
        # One bit wider than a held sum: with the bounds a held sum's width (they fit it),
        # place and route gave 2-10 % less Fmax (docs/synth.md).
        self.s3_high   = Signal(signed(vw + 1))    # t - g: |s + g| >= t iff s >= t - g ...
        self.s3_low    = Signal(signed(vw + 1))    # ... or s <= -t - g
        self.s3_direct = Signal()                  # |g| >= threshold: written as it is
        self.s3_tiny   = Signal()                  # |g| < small_threshold
        self.s3_chance = Signal(2)                 # the stochastic write, on random, random_next
        self.s3_level  = Signal(self._level_width())  # the rounding level (s2_level)
        # What s3 decides on, after its correction for the gradient in s4.
        self.s3_row_now   = Signal(self.row_layout)         # its set as it is now
        self.s3_now_hit   = Signal()                        # its address is held ...
        self.s3_now_way   = Signal(range(ways))             # ... in this way
        # ... whose sum and count become these on a hit (the seed's policy; under the
        # whole-line rule the decision makes the entry after from s3_entry).
        seed = not self.whole_line
        self.s3_new_sum   = Signal(signed(vw + 1)) if seed else None
        self.s3_new_count = Signal(range(max_updates + 2)) if seed else None
        self._make_decision_ahead()

    def _make_decision_ahead(self):
        """Under the whole-line rule, ``s3``'s decision (``decision``, a component of its
        own) and what ``s2`` makes for it: the held sums that fit beside the gradient (per
        lane on lines; ``s3_fit_high``, ``s3_fit_low``: LineDecision's fit bounds), so that
        whether the gradient writes waits for compares of the held sum alone; and the hit
        entry the decision takes, picked a stage ahead from its way of the row ``s2`` takes
        (``s3_entry``), or the entry the gradient ahead left on the same address
        (``s4_entry``, picked on ``s3_same_addr``: ``s3_hit_entry``), so that the decision's
        adds and compares start from a register and a 2:1 pick. ``None`` each by the seed's
        policy."""
        whole, gw = self.whole_line, self.grad_width
        self.decision = (LineDecision(lanes=self.lanes, grad_width=gw,
                                      max_updates=self.max_updates) if whole else None)
        high, low = self._fit_bound_shapes()
        self.s3_fit_high = Signal(high, name="s3_fit_high") if whole else None
        self.s3_fit_low  = Signal(low, name="s3_fit_low") if whole else None
        entry = self._decided_entry_layout() if whole else None
        self.s3_entry = Signal(entry, name="s3_entry") if whole else None
        self.s4_entry = Signal(entry, name="s4_entry") if whole else None
        self.s3_hit_entry = Signal(entry, name="s3_hit_entry") if whole else None

    def _make_write(self):
        """s4 (write): the row and the write it makes; the rows written one and two cycles ago."""
        grad_width, sets, ways = self.grad_width, self.sets, self.ways
        max_updates = self.max_updates
        vw = value_width(grad_width)
        # s4: write
        self.s4_valid  = Signal()
        self.s4_write  = Signal()                  # s4_row goes to the RAM
        self.s4_set    = Signal(range(sets))
        self.s4_row    = Signal(self.row_layout)
        self.s4_way    = Signal(range(ways))       # the way the gradient hit or allocated
        self.s4_ways   = Signal(ways)              # ... one-hot
        self.s4_holds  = Signal()                  # ... holds its address after it
        self.s4_alloc  = Signal()                  # ... took a new tag
        seed = not self.whole_line                 # (under the whole-line rule: s3_entry)
        self.s4_sum    = Signal(signed(vw)) if seed else None     # ... with this sum
        self.s4_count  = Signal(range(max_updates + 1)) if seed else None   # ... and count
        self.s4_stepped = Signal()                 # took a stochastic decision
        self.s4_inc    = Signal()                  # allocated a free way
        self.s4_dec    = Signal()                  # freed its way (wrote it out)
        self.s4_push   = Signal()
        self.s4_push_p = Signal(self._write_layout())
        # Rows written one and two cycles ago (a read issued then did not see them).
        self.h1_valid, self.h1_set, self.h1_row = (
            Signal(name="h1_valid"), Signal(range(sets), name="h1_set"),
            Signal(self.row_layout, name="h1_row"))
        self.h2_valid, self.h2_set, self.h2_row = (
            Signal(name="h2_valid"), Signal(range(sets), name="h2_set"),
            Signal(self.row_layout, name="h2_row"))

    def _make_queue_and_scan(self):
        """The output queue (made here so that the proofs can read its storage) and the flush
        scan."""
        sets, ways = self.sets, self.ways
        # The output queue (made here so that the proofs can read its storage).
        self.queue = WriteQueue(self._queue_layout(), depth=self.QUEUE_DEPTH)
        # The flush scan.
        # mutation site: scan-counter
        self.scan_set  = Signal(range(sets))      # set being initialised or scanned
        # The set after it (mod sets), kept in a register so that no adder stands before the
        # read port's address.
        self.scan_next = Signal(range(sets), init=1 % sets)
        self.scan_done = Signal(ways)             # ways of the scanned set already written out
        self.scan_wait = Signal()                 # the scanned set's row is still being read

    # -- what depends on the number of lanes (LineAccumulator: a line of them) ---------------

    #: Gradients per beat (a line): one here.
    lanes = 1
    lane_bits = 0

    def _entry_sums(self):
        """An entry's fields between its tag and its count: the sum."""
        # mutation site: sum-width
        return {"sum": signed(value_width(self.grad_width))}

    def _fit_bound_shapes(self):
        """The shapes of ``s3_fit_high`` and ``s3_fit_low`` (``2**(grad_width-1) - 1 - g`` is
        never negative: no sign bit held for it)."""
        return unsigned(self.grad_width), signed(self.grad_width + 1)

    def _decided_entry_layout(self):
        """The layout of the hit entry the decision takes (``s3_entry``, ``s4_entry``,
        ``s3_hit_entry``): ``LineDecision``'s entry, one lane's sum, held, and its count."""
        return self.decision.entry.shape()

    def _beat_layout(self):
        """What ``grad_in`` carries: a gradient with its threshold and settings."""
        return classified_layout(self.addr_width, self.grad_width)

    @property
    def value_width(self):
        """Width of a value written (signed), on ``push`` and in the output queue: under the
        whole-line rule ``grad_width``, the input's format (every value the rule writes fits
        it; :func:`~design.layouts.line_value_width`, the one choice), else ``grad_width +
        2``. The line L1's held sums have this width too; the one-lane L1's keep
        ``grad_width + 2`` bits (:meth:`_entry_sums`)."""
        return line_value_width(self.grad_width, self.whole_line)

    def _write_layout(self):
        """What ``push`` carries: a write with its cause, its value ``value_width`` bits."""
        return write_layout(self.addr_width, self.grad_width, self.value_width)

    def _queue_layout(self):
        """What a place of the output queue holds: a write."""
        return self._write_layout()

    def _per_lane(self, shape):
        """The shape of a port with one ``shape`` per lane: ``shape`` itself here."""
        return shape

    def _magnitude(self, beat):
        """``|g|``, made in ``s1`` for ``s2``."""
        return abs(beat.grad)

    def _ema_candidate(self, beat):
        """The EMA threshold before its clamp, made in ``s1`` for ``s2``."""
        return ema_candidate(beat.ema_source, beat.ema_scale)

    def _set(self, addr):
        return addr[:self.set_bits]

    def _tag(self, addr):
        return addr[self.set_bits:]

    def _match(self, tag, row):
        return Cat(way.valid & (way.tag == tag) for way in row.ways)

    def elaborate(self, platform):
        m = Module()
        m.submodules.storage = self.storage
        m.submodules.queue = self.queue
        shared = _Shared()
        shared.accept = Signal()
        m.d.comb += shared.accept.eq(self.grad_in.valid & self.grad_in.ready)

        # One method per stage or concern, each adding its signals and statements in turn: the
        # order is the netlist's (signals are named and statements emitted in it), keep it.
        self._valid_count(m, shared)     # valid_count: valid_base plus s4's change
        self._output_queue(m, shared)    # the queue, and the places reserved in it
        self._valid_base(m, shared)      # valid_base: the count as of the rows written
        self._read_stage(m, shared)      # s1: read
        self._row_history(m)             # h1, h2: the rows written a cycle and two ago
        self._compare_stage(m)           # s2: compare
        self._decide_stage(m, shared)    # s3: decide (and s4's registers: write)
        self._flush_scan(m, shared)      # what the flush scan writes out
        self._control(m, shared)         # the state, the RAM's ports, grad_in.ready, idle
        return m

    # -- counts and the output queue ------------------------------------------------------------

    def _valid_count(self, m, shared):
        """``valid_count`` and ``empty``; makes ``count_inc`` and ``count_dec`` (driven by
        ``s3``)."""
        # valid_count is the count as of the rows written (valid_base) plus the change made by
        # the decision now in s4, so that a decision reaches only s4's registers, not an adder.
        shared.count_inc = Signal()   # the decision in s3 allocates a free way ...
        shared.count_dec = Signal()   # ... or frees its hit way
        m.d.comb += [
            # mutation site: valid-count
            self.valid_count.eq(self.valid_base + self.s4_inc - self.s4_dec),
            self.empty.eq(Mux(self.s4_inc == self.s4_dec, self.valid_base_zero,
                              self.valid_base_one & self.s4_dec)),
        ]
        # (The flush scan's writes, scan_push, come off valid_base itself: _valid_base.)

    def _output_queue(self, m, shared):
        """The output queue, between ``s4`` (or the flush scan) and ``push``, and the places
        reserved in it (``reserved``); makes ``scan_push`` (driven by the control),
        ``scan_push_p`` (by the flush scan) and ``reserved_next``."""
        queue, accept, Q = self.queue, shared.accept, self.QUEUE_DEPTH
        scan_push   = Signal()
        scan_push_p = Signal(self._write_layout())
        queue_read  = Signal()
        m.d.comb += [
            # (The pipeline is empty while the scan runs: the payload is picked by the state,
            # a register, not by whether the scan pushes.)
            queue.w.valid.eq(scan_push | (self.s4_valid & self.s4_push)),
            queue.w.payload.eq(Mux(self.state == L1State.SCAN, scan_push_p, self.s4_push_p)),
            self.push.valid.eq(queue.r.valid),
            self.push.payload.eq(queue.r.payload),
            queue.r.ready.eq(self.push.ready),
            queue_read.eq(queue.r.valid & self.push.ready),
        ]
        # A place is reserved from acceptance until the gradient leaves s4 without a write, or
        # its write leaves the queue.
        reserved_next = Signal(range(Q + 2))
        m.d.comb += reserved_next.eq(self.reserved + accept + scan_push -
                                     (self.s4_valid & ~self.s4_push) - queue_read)
        m.d.sync += self.reserved.eq(reserved_next)
        shared.scan_push, shared.scan_push_p = scan_push, scan_push_p
        shared.reserved_next = reserved_next

    def _valid_base(self, m, shared):
        """``valid_base``, the count as of the rows written, and its flags ``valid_base_zero``
        and ``valid_base_one``."""
        scan_push = shared.scan_push
        valid_base_next = Signal.like(self.valid_base)
        # mutation site: valid-count-in-scan
        m.d.comb += valid_base_next.eq(self.valid_count - scan_push)
        # Whether the next valid_base is 0 or 1 is a test of valid_base against a constant,
        # picked by how far it falls (-1 ... 2: s4's +1 / -1 and the scan's -1), so that no
        # subtraction stands in front of the flags (as for L2's level).
        fall_plus_one = Signal(range(4))
        m.d.comb += fall_plus_one.eq(self.s4_dec + scan_push + ~self.s4_inc)

        def becomes(n):   # valid_base_next == n, for a constant n
            return Cat(self.valid_base == n + f if n + f >= 0 else Const(0)
                       for f in range(-1, 3)).bit_select(fall_plus_one, 1)

        m.d.sync += [
            self.valid_base.eq(valid_base_next),
            self.valid_base_zero.eq(becomes(0)),  # mutation site: empty-flag
            self.valid_base_one.eq(becomes(1)),
        ]

    # -- stage s1: read -------------------------------------------------------------------------

    def _read_stage(self, m, shared):
        """Stage ``s1``: registers the gradient accepted, the RAM's read data (``read_row``),
        which later rows ``s2`` will need (``s2_fwd``), the EMA multiply and ``|g|``."""
        accept, read = shared.accept, self.storage_read
        s1, s2, s3 = self.s1, self.s2, self.s3
        m.d.sync += self.s1_valid.eq(accept)
        with m.If(accept):
            m.d.sync += s1.eq(self.grad_in.payload)
        m.d.sync += [
            self.read_row.eq(read.data),
            # Which later row s2 will need: the one s3 decides now (in s4 next cycle), the one
            # s4 writes now (h1 next cycle) or the one h1 holds (h2 next cycle).
            # mutation site: forward-match
            self.s2_fwd.eq(Cat(self._set(s1.addr) == self._set(s3.addr),
                               self._set(s1.addr) == self.s4_set,
                               self._set(s1.addr) == self.h1_set)),
            self.s2_valid.eq(self.s1_valid),
            s2.eq(s1),
            self.s2_candidate.eq(self._ema_candidate(s1)),
            self.s2_magnitude.eq(self._magnitude(s1)),
            self.s2_level.eq(self._rounding_level(s1.small_threshold)),
        ]

    # -- history of written rows ----------------------------------------------------------------

    def _row_history(self, m):
        """The rows written one and two cycles ago (``h1_*``, ``h2_*``), which a read issued
        then did not see."""
        m.d.sync += [
            self.h1_valid.eq(self.s4_valid & self.s4_write),
            self.h1_set.eq(self.s4_set),
            self.h1_row.eq(self.s4_row),
            self.h2_valid.eq(self.h1_valid),
            self.h2_set.eq(self.h1_set),
            self.h2_row.eq(self.h1_row),
        ]

    # -- stage s2: compare ----------------------------------------------------------------------

    def _compare_stage(self, m):
        """Stage ``s2``: the row (:meth:`_forward_row`), the hit and the hit way, and the
        verdict and bounds (:meth:`_judge`), registered for ``s3``."""
        s2, s3 = self.s2, self.s3
        forwarded, use_forwarded, sources = self._forward_row(m)
        judged = self._judge(m)
        s2_hit, s2_hit_way, s2_hit_ways = self._s2_hit(m, forwarded, use_forwarded)
        m.d.sync += [
            self.s3_valid.eq(self.s2_valid),
            s3.eq(s2),
            s3.threshold.eq(judged.threshold),
            self.s3_direct.eq(judged.direct),
            self.s3_row.eq(self.row),
            self.s3_hit.eq(s2_hit),
            self.s3_hit_way.eq(s2_hit_way),
            self.s3_hit_ways.eq(s2_hit_ways),
            self.s3_high.eq(judged.high),
            self.s3_low.eq(judged.low),
            self.s3_level.eq(self.s2_level),
            *self._dual_threshold_tests(),
            *self._decision_ahead(sources),
        ]

    def _decision_ahead(self, sources):
        """Registers ``s2`` makes for ``s3``'s decision beside the bounds (``sources``: the rows
        :meth:`_forward_row` may forward), under the whole-line rule: ``s3_entry``, the hit way
        of ``s2``'s row (but for the entry the decision now in ``s3`` leaves: ``s4_entry``),
        and the fit bounds of ``s2``'s gradients."""
        if not self.whole_line:
            return []

        def hit_entry(row, match):
            ways = lowest_one_hot(match)
            return functools.reduce(operator.or_, (
                Mux(ways[k], self._decision_entry(way), 0) for k, way in enumerate(row.ways)))
        # The hit entry of each row s2 may take, each picked by its own match, and the row's
        # pick last (as for the hit: _s2_hit), so that no row meets a select before its pick:
        # the forwarded rows' (from registers) first, the RAM's row's beside them.
        read = hit_entry(self.read_row, self._match(self._tag(self.s2.addr), self.read_row))
        forwarded = 0
        for taken, row, match in reversed(sources):    # the newest last: it wins
            forwarded = Mux(taken, hit_entry(row, match), forwarded)
        use_forwarded = Cat(taken for taken, _, _ in sources).any()
        return [self.s3_entry.eq(Mux(use_forwarded, forwarded, read)), *self._fit_bounds()]

    def _fit_bounds(self):
        """``s3_fit_high`` and ``s3_fit_low`` of ``s2``'s gradient (per lane on lines:
        :meth:`_fit_bound_lanes`): ``2**(grad_width-1) - 1 - g`` and ``-2**(grad_width-1) -
        g`` (a held sum between them plus ``g`` fits ``grad_width`` bits)."""
        bottom, top = grad_range(self.grad_width)
        lanes = self._fit_bound_lanes()
        return [*(high.eq(top - grad) for high, _, grad in lanes),
                *(low.eq(bottom - grad) for _, low, grad in lanes)]

    def _fit_bound_lanes(self):
        """``(s3_fit_high, s3_fit_low, gradient)`` of each of ``s2``'s lanes."""
        return [(self.s3_fit_high, self.s3_fit_low, self.s2.grad)]

    def _dual_threshold_tests(self):
        """``s3``'s registers of the dual threshold's tests on ``s2``'s gradient: whether it is
        tiny, and its stochastic test on ``random`` and on ``random_next``."""
        s2, magnitude, level = self.s2, self.s2_magnitude, self.s2_level
        return [
            self.s3_tiny.eq(less(magnitude, s2.small_threshold)),  # mutation site: tiny-rule
            # random * level < |g| << grad_width, on the product's high half: the same test
            # (the right side's low half is 0), with a compare half as long.
            self.s3_chance.eq(Cat(
                # mutation site: stochastic-rule
                less((self.random * level)[self.grad_width:], magnitude),
                less((self.random_next * level)[self.grad_width:], magnitude))),
        ]

    def _level_width(self):
        """The rounding level's width: ``grad_width - 1`` under the whole-line rule (where it
        is at most ``2**(grad_width-1) - 1``, as :class:`~design.line_decision.LineDecision`
        takes it), else ``grad_width``."""
        return self.grad_width - 1 if self.whole_line else self.grad_width

    def _rounding_level(self, small_threshold):
        """The value a tiny gradient is rounded to: ``small_threshold``; under the whole-line
        rule at most ``2**(grad_width-1) - 1``, so that it fits a gradient's width."""
        if not self.whole_line:
            return small_threshold
        _, top = grad_range(self.grad_width)
        return Mux(small_threshold > top, top, small_threshold)

    def _s2_hit(self, m, forwarded, use_forwarded):
        """Whether ``s2``'s address hits in its row, in which way, and that way one-hot."""
        # The hit and the hit way are found on the forwarded match (from registers) and on the
        # RAM row's side by side, and picked last, so that the RAM's row meets no select before
        # its compares.
        s2_tag = self._tag(self.s2.addr)
        read_match = self._match(s2_tag, self.read_row)
        s2_hit = Mux(use_forwarded, forwarded.any(), read_match.any())
        s2_hit_way = Mux(use_forwarded, lowest_index(m, forwarded, "s2_forwarded_way"),
                         lowest_index(m, read_match, "s2_read_way"))
        s2_hit_ways = Mux(use_forwarded, lowest_one_hot(forwarded),
                          lowest_one_hot(read_match))
        return s2_hit, s2_hit_way, s2_hit_ways

    def _forward_row(self, m):
        """``s2``'s row (``row``): the newest of ``s4``'s, ``h1``'s, ``h2``'s and the RAM's.
        Returns ``(forwarded, use_forwarded, sources)``: a forwarded row's match vector,
        whether the row is forwarded, and the rows it may be forwarded from, the newest first,
        each as ``(taken, row, match vector)``."""
        # The row, and its match vector: s4's from s1's compare with the row s3 decided on,
        # corrected for the one way s3 changed (which holds s3's address or nothing); h1's and
        # h2's from s1's compares; only the RAM's row is compared here (_compare_stage).
        row = self.row
        match_s4 = Cat(Mux(self.s4_way == i, self.s4_holds & self.s2_same_tag,
                           self.s2_match_s4[i]) for i in range(self.ways))
        from_s4, from_h1, from_h2 = (Signal(name=f"s2_row_from_{stage}")
                                     for stage in ("s4", "h1", "h2"))
        m.d.comb += [
            from_s4.eq(self.s2_fwd[0] & self.s4_valid & self.s4_write),
            from_h1.eq(self.s2_fwd[1] & self.h1_valid),
            from_h2.eq(self.s2_fwd[2] & self.h2_valid),  # mutation site: forward-from-h2
        ]
        sources = [(from_s4, self.s4_row, match_s4), (from_h1, self.h1_row, self.s2_match_h1),
                   (from_h2, self.h2_row, self.s2_match_h2)]
        forwarded = Signal(self.ways)
        use_forwarded = Signal()
        m.d.comb += row.eq(self.read_row)
        for taken, source_row, match in reversed(sources):   # the newest last: it wins
            with m.If(taken):
                m.d.comb += [row.eq(source_row), forwarded.eq(match), use_forwarded.eq(1)]
        return forwarded, use_forwarded, sources

    def _judge(self, m):
        """Returns ``judged``: the threshold ``s2``'s gradient is judged against, the bounds
        (``high``, ``low``) and the verdict (``direct``)."""
        s2 = self.s2
        vw = value_width(self.grad_width)
        # The threshold the gradient is judged against, the bounds and the verdict. They are
        # made for each threshold it may be (the fixed one, or the EMA's candidate, ema_min or
        # ema_max, as the clamp picks) side by side, so that the clamp's compares only pick.
        magnitude = self.s2_magnitude
        grad_wide = Signal(signed(vw + 1))
        m.d.comb += grad_wide.eq(s2.grad)
        judgement = data.StructLayout({"threshold": self.grad_width, "high": signed(vw + 1),
                                       "low": signed(vw + 1), "direct": 1})

        def judge(threshold, name):
            judged = Signal(judgement, name=name)
            m.d.comb += [
                judged.threshold.eq(threshold),
                judged.high.eq(threshold - grad_wide),  # mutation site: threshold-bound-width
                judged.low.eq(-threshold - grad_wide),
                judged.direct.eq(at_least(magnitude, threshold)),
            ]
            return judged

        # (The candidate fits grad_width bits when it is picked: it is at most ema_max then.)
        ema_judged = ema_clamp(m, self.s2_candidate, s2.ema_min, s2.ema_max, "s2_ema_judged",
                               values=(judge(s2.ema_max, "s2_judged_max"),
                                       judge(s2.ema_min, "s2_judged_min"),
                                       judge(self.s2_candidate[:self.grad_width],
                                             "s2_judged_candidate")))
        judged = Signal(judgement)
        m.d.comb += judged.eq(Mux(s2.ema, ema_judged, judge(s2.threshold, "s2_judged_fixed")))
        return judged

    # -- stage s3: decide -----------------------------------------------------------------------

    def _decide_stage(self, m, shared):
        """Stage ``s3``: the decision, step by step (each step passes what later ones read in a
        :class:`_Decision`), and ``s4``'s registers."""
        d = _Decision()
        self._s3_entry(m, d)            # the row and the hit, as they are now
        if not self.whole_line:
            self._s3_tests(m, d)        # the threshold and count tests, the new sum and count
        self._s3_ways(m, d)             # the way a miss would take
        self._s3_cases(m, d)            # the case (by the seed's policy: what a miss does)
        if self.whole_line:
            self._s3_by_the_rule(m, d)  # the whole-line rule's decision on the hit entry
        self._s3_new_row(m, d)          # the set's new row
        self._s3_write(m, d, shared)    # the write toward L2, the strobes
        self._s3_to_s4(m, d, shared)    # s4's registers

    def _s3_entry(self, m, d):
        """The row ``s3`` decides on (``s3_row_now``), ``s1``'s tag compares on it for ``s2``,
        and the hit (``s3_now_hit``, ``s3_now_way``, ``hit_ways``)."""
        s1, s3 = self.s1, self.s3
        # The gradient in s4 decided a cycle ago, after s2 had read this gradient's row: if it
        # rewrote this gradient's set (address), its effect is in s4's registers.
        same_addr = self.s3_same_addr
        row_now = self.s3_row_now
        m.d.comb += row_now.eq(self._row_now())
        # s1's tag compares for s2 (see there): with the row s3 decides on, s4's and h1's.
        s1_tag = self._tag(s1.addr)
        m.d.sync += [
            self.s2_match_s4.eq(self._match(s1_tag, row_now)),
            self.s2_same_tag.eq(s1_tag == self._tag(s3.addr)),
            self.s2_match_h1.eq(self._match(s1_tag, self.s4_row)),
            self.s2_match_h2.eq(self._match(s1_tag, self.h1_row)),
        ]
        # Its hit, per way (one-hot) and as a whole: the entry is exactly what the gradient
        # before left (held in s4's way, or freed) if that one had its address; else another
        # address of the same set can only have taken the hit way (eviction). Per way, from
        # registers through a gate or two, so that the row's bits need not wait for an index.
        hit, hit_way = self.s3_now_hit, self.s3_now_way
        hit_ways = Signal(self.ways)
        row_hit_ways = self.s3_hit_ways & ~self.s3_taken    # the row's hit, if not evicted
        m.d.comb += [
            hit_ways.eq(Mux(same_addr, Mux(self.s4_holds, self.s4_ways, 0), row_hit_ways)),
            hit.eq(Mux(same_addr, self.s4_holds, row_hit_ways.any())),
            hit_way.eq(Mux(same_addr, self.s4_way, self.s3_hit_way)),
        ]
        d.hit_ways, d.row_hit_ways = hit_ways, row_hit_ways

    def _row_now(self):
        """``s3``'s set as it is now: ``s4``'s row if the gradient there rewrote it, else
        ``s3_row``."""
        return Mux(self.s3_same_set, self.s4_row, self.s3_row)

    def _s3_tests(self, m, d):
        """The threshold and count tests (``crossed``, ``leaves_way``) and the hit entry's new
        sum and count (``way_sum``, ``way_count``; ``s3_new_sum``, ``s3_new_count``)."""
        s3, same_addr = self.s3, self.s3_same_addr
        # |sum + g| >= t, on the bounds computed in s2; count + 1 >= max_updates. Each test
        # is made on s4's kept entry and on every way's, and the outcome is picked as the entry
        # is (same_addr, the hit way), so that no mux stands in front of the compares. Whether
        # the entry leaves is kept per way (leaves_way: if that way is the hit way), for the
        # row's valid bits: each takes its own way's outcome, not the hit way's pick.
        def crosses(total):
            # mutation site: threshold-rule
            return at_least(total, self.s3_high) | at_most(total, self.s3_low)

        def fills(count):
            return count >= self.max_updates - 1  # mutation site: max-updates-rule

        crossed = Signal()
        crossed_way = Cat(crosses(way.sum) for way in self.s3_row.ways)
        full_way    = Cat(fills(way.count) for way in self.s3_row.ways)
        leaves_way  = Signal(self.ways)
        m.d.comb += [
            crossed.eq(Mux(same_addr, crosses(self.s4_sum),
                           crossed_way.bit_select(self.s3_hit_way, 1))),
            leaves_way.eq(Mux(same_addr,
                              (crosses(self.s4_sum) | fills(self.s4_count)).replicate(self.ways),
                              crossed_way | full_way)),
        ]
        # The hit entry's new sum and count likewise: made on s4's kept entry and on every
        # way's entry at once, straight from the registers, and picked after the adders (in
        # the row each way takes its own; the write and s4's kept entry take the hit way's).
        kept_sum, kept_count = self.s4_sum + s3.grad, self.s4_count + 1
        way_sum   = [Mux(same_addr, kept_sum, way.sum + s3.grad) for way in self.s3_row.ways]
        way_count = [Mux(same_addr, kept_count, way.count + 1) for way in self.s3_row.ways]
        new_sum, new_count = self.s3_new_sum, self.s3_new_count
        m.d.comb += [
            new_sum.eq(Array(way_sum)[self.s3_hit_way]),
            new_count.eq(Array(way_count)[self.s3_hit_way]),
        ]
        d.crossed, d.leaves_way, d.way_sum, d.way_count = crossed, leaves_way, way_sum, way_count

    def _s3_ways(self, m, d):
        """The way a miss would take: whether the set is ``full``, its lowest free way
        (``free_way``), its victim (``victim_way``, ``victim``), and the way allocated, one-hot
        (``alloc_ways``); and ``s3``'s set and tag (``s3_set``, ``s3_tag``)."""
        s3, row_now = self.s3, self.s3_row_now
        free     = Cat(~way.valid for way in row_now.ways)
        full     = ~free.any()
        lowest_free = lowest_one_hot(free)  # mutation site: free-way-choice
        free_way = lowest_index(m, lowest_free, "s3_free_way")
        victim_way = row_now.victim
        victim     = row_now.ways[victim_way]
        # The way a miss allocates, one-hot, made from the row alone: the case flags below
        # only gate it, so that the loop through s3_taken is a few gates long.
        alloc_ways = Signal(self.ways)
        m.d.comb += alloc_ways.eq(Mux(full, Const(1, self.ways) << victim_way, lowest_free))
        s3_set = self._set(s3.addr)
        s3_tag = self._tag(s3.addr)
        d.full, d.free_way, d.victim_way, d.victim = full, free_way, victim_way, victim
        d.alloc_ways, d.s3_set, d.s3_tag = alloc_ways, s3_set, s3_tag

    def _s3_cases(self, m, d):
        """What the gradient does: one flag per case (``c_direct``, ``c_hit``, ``c_tiny``,
        ``c_miss``), the ways it touches (``hit_here``, ``touches``), the random
        bits in force (``chance``), the rounding level (``level``) and what a tiny miss writes
        (``written``); by the seed's policy, what a miss allocates (``allocates``,
        ``c_evict``)."""
        s3, hit, hit_ways = self.s3, self.s3_now_hit, d.hit_ways
        full = d.full
        vw = value_width(self.grad_width)
        # What the gradient does: one flag per case, each a few gates from registers, so that
        # every output below is a flat function of them (the tests enter last, in a mux).
        judged_here = self.s3_valid & ~self.s3_direct      # decided by L1 (not direct)
        c_direct = self.s3_valid & self.s3_direct  # mutation site: direct-decision
        c_hit    = judged_here & hit  # mutation site: hit-decision
        hit_here = Mux(judged_here, hit_ways, 0)
        touches  = c_hit                                    # the gradient updates its entry
        if self.whole_line:
            # A direct gradient that hits updates its entry too (frees it, or resets it).
            touches  = self.s3_valid & hit
            hit_here = Mux(self.s3_valid, hit_ways, 0)
        c_tiny   = judged_here & ~hit & self.s3_tiny        # (dual threshold: never allocates)
        c_miss   = judged_here & ~hit & ~self.s3_tiny
        # The random bits in force: made from the registers, not from the decision.
        # mutation site: random-bits-in-use
        chance  = self.s3_chance.bit_select(self.s4_valid & self.s4_stepped, 1)
        level   = self.s3_level
        # What a tiny miss writes (stochastic mode: its rounded value, or nothing), from the
        # registers too, under either policy, so that the discard's error (counted only for a
        # tiny miss; under the rule its only reader) waits for no decision.
        written = Signal(signed(vw))
        m.d.comb += written.eq(Mux(s3.stochastic & chance,
                                   # mutation site: stochastic-write-value
                                   signed_level(s3.grad, level), 0))
        d.c_direct, d.c_hit, d.c_tiny, d.c_miss = c_direct, c_hit, c_tiny, c_miss
        d.hit_here, d.touches, d.chance, d.level = hit_here, touches, chance, level
        d.written = written
        if self.whole_line:
            return      # the rule's decision says what a miss does (_s3_by_the_rule)
        # A miss takes a way (a free one, or the victim's); with max_updates 1 a miss to a
        # free way is written out at once instead.
        c_evict  = c_miss & full
        allocates = c_miss if self.max_updates > 1 else c_evict  # mutation site: allocation
        d.allocates, d.c_evict = allocates, c_evict

    def _s3_by_the_rule(self, m, d):
        """The whole-line rule's decision (:class:`~design.line_decision.LineDecision`, one
        lane) on ``s3``'s gradient and its hit entry (``s3_hit_entry``): the hit way takes the
        entry it leaves (``leaves_way``, ``way_sum``, ``way_count``); the write (``writes``,
        ``value``, ``cause``); whether a miss allocates (``allocates``, ``c_evict``)."""
        m.submodules.decision = decision = self.decision
        m.d.comb += self._rule_inputs(decision, d)
        after = decision.after
        d.leaves_way = (~decision.keeps).replicate(self.ways)
        d.way_sum, d.way_count = [after.sums[0]] * self.ways, [after.count] * self.ways
        d.writes, d.value, d.cause = decision.written, decision.values[0], decision.causes[0]
        allocates = decision.allocates  # mutation site: whole-line-allocation
        d.allocates, d.c_evict = allocates, allocates & d.full

    def _rule_inputs(self, decision, d):
        """The statements giving ``decision`` ``s3``'s gradient, its verdicts, its bounds and
        its hit entry (``s3_hit_entry``: ``s3_entry``, or on ``s3_same_addr`` the entry the
        gradient ahead left, ``s4_entry``)."""
        s3 = self.s3
        # (The bounds fit the ports: |t - g| and |-t - g| are below 2**(grad_width+1); so do
        # the held sums: every sum the rule holds fits grad_width bits.)
        return [
            decision.grads[0].eq(s3.grad), decision.mask.eq(self.s3_valid),
            decision.direct.eq(d.c_direct), decision.tiny.eq(self.s3_tiny),
            decision.rounded.eq(Mux(s3.stochastic, self.s3_tiny & d.chance, 0)),
            decision.level.eq(d.level),
            decision.high[0].eq(self.s3_high), decision.low[0].eq(self.s3_low),
            decision.fit_high[0].eq(self.s3_fit_high), decision.fit_low[0].eq(self.s3_fit_low),
            decision.hit.eq(self.s3_now_hit),
            self._take_hit_entry(),
            decision.entry.eq(self.s3_hit_entry),
        ]

    def _take_hit_entry(self):
        """Under the whole-line rule, the statement giving ``s3_hit_entry``, the hit entry the
        decision takes: ``s3_entry``, or on ``s3_same_addr`` the entry the decision ahead
        left (``s4_entry``; if it freed it, the gradient misses)."""
        # mutation site: entry-ahead
        return self.s3_hit_entry.eq(Mux(self.s3_same_addr, self.s4_entry, self.s3_entry))

    def _decision_entry(self, entry):
        """``entry``, an entry of the row that holds its address, as
        :class:`~design.line_decision.LineDecision` takes it (a value of its ``entry``
        layout): its one lane's sum (every sum the rule holds fits ``grad_width`` bits), held,
        and its count."""
        return Cat(entry.sum[:self.grad_width], C(1, 1), entry.count[:self.decision.count_width])

    def _forward_entry(self, m, d):
        """Under the whole-line rule, the entry the decision leaves, ``s4_entry``: the one the
        gradient behind it decides on if it has its address (``s3_same_addr``; if the entry
        is freed, that one misses). A register of its own, with no pick in front of it, so
        that the accumulate loop is the decision and a 2:1 pick."""
        m.d.sync += self.s4_entry.eq(self.decision.after)

    def _s3_new_row(self, m, d):
        """The set's new row (``new_row``): the hit way takes its new sum and count (whether
        the entry stays or leaves: a freed way's are never read) and keeps its valid bit
        unless it leaves; an allocated way takes the new entry; a full set's victim pointer
        moves on."""
        s3, c_miss, c_evict, victim_way = self.s3, d.c_miss, d.c_evict, d.victim_way
        alloc_here = Mux(d.allocates, d.alloc_ways, 0)
        new_row = Signal(self.row_layout)
        m.d.comb += new_row.eq(self.s3_row_now)
        for i, way in enumerate(new_row.ways):
            with m.If(alloc_here[i]):
                m.d.comb += [way.valid.eq(1), way.tag.eq(d.s3_tag), way.sum.eq(s3.grad),
                             way.count.eq(1)]
            with m.Elif(d.hit_here[i]):
                m.d.comb += [way.valid.eq(~d.leaves_way[i]), way.sum.eq(d.way_sum[i]),
                             way.count.eq(d.way_count[i])]
        with m.If(c_evict):  # mutation site: victim-advance
            m.d.comb += new_row.victim.eq(victim_way + 1)
        d.new_row = new_row

    def _s3_write(self, m, d, shared):
        """The write toward L2 (``d_write``, ``d_push``, ``d_push_p``), the strobes and the
        change to ``valid_count`` (``count_inc``, ``count_dec``)."""
        s3, full = self.s3, d.full
        c_direct, c_hit, c_tiny, c_miss = d.c_direct, d.c_hit, d.c_tiny, d.c_miss
        count_inc, count_dec = shared.count_inc, shared.count_dec
        hit_leaves = (d.hit_here & d.leaves_way).any()
        d_write = d.touches | d.allocates
        d_push_p = Signal(self._write_layout())
        if self.whole_line:
            d_push = self._write_by_the_rule(m, d, d_push_p)
        else:
            d_push = self._write_by_the_seed(m, d, d_push_p, hit_leaves)
        m.d.comb += [
            self.hit.eq(c_hit),  # mutation site: hit-strobe
            self.miss.eq(c_miss),
            self.small_miss.eq(c_tiny),
            self.random_step.eq(c_tiny & s3.stochastic),
            count_inc.eq(d.allocates & ~full),
            count_dec.eq(hit_leaves),
        ]
        d.d_write, d.d_push, d.d_push_p = d_write, d_push, d_push_p

    def _write_by_the_seed(self, m, d, d_push_p, hit_leaves):
        """The seed's policy: whether ``s3`` pushes a write, and ``d_push_p``, the write."""
        s3, hit, full = self.s3, self.s3_now_hit, d.full
        # Whether there is a write waits for the tests (on a hit) last, taken in the one way
        # the gradient hit, so that no index stands between the tests and the write's valid
        # bit; its address, value and cause are made from the registers and the case, not the
        # tests (but for the cause of a hit's write).
        d_push  = (hit_leaves | d.c_direct | (d.c_tiny & s3.stochastic & d.chance) |
                   (d.c_miss & (full | (self.max_updates == 1))))
        m.d.comb += d_push_p.addr.eq(s3.addr)
        with m.If(self.s3_direct):
            m.d.comb += [d_push_p.value.eq(s3.grad), d_push_p.cause.eq(Cause.DIRECT)]
        with m.Elif(hit):
            m.d.comb += [d_push_p.value.eq(self.s3_new_sum),
                         d_push_p.cause.eq(Mux(d.crossed, Cause.ACCUM_THRESHOLD,
                                               Cause.MAX_UPDATES))]
        with m.Elif(self.s3_tiny):
            m.d.comb += [d_push_p.value.eq(d.written), d_push_p.cause.eq(Cause.STOCHASTIC)]
        with m.Elif(full):
            m.d.comb += [d_push_p.addr.eq(Cat(d.s3_set, d.victim.tag)),
                         d_push_p.value.eq(d.victim.sum), d_push_p.cause.eq(Cause.EVICTION)]
        with m.Else():
            m.d.comb += [d_push_p.value.eq(s3.grad), d_push_p.cause.eq(Cause.MAX_UPDATES)]
        return d_push

    def _write_by_the_rule(self, m, d, d_push_p):
        """The whole-line rule: whether ``s3`` pushes a write, and ``d_push_p``, the write: the
        decision's own, or the victim's of a miss that allocates a full set (never both; the
        victim's held sum fits ``grad_width`` bits, as every sum the rule holds)."""
        with m.If(d.writes):
            m.d.comb += [d_push_p.addr.eq(self.s3.addr), d_push_p.value.eq(d.value),
                         d_push_p.cause.eq(d.cause)]
        with m.Else():
            m.d.comb += [d_push_p.addr.eq(Cat(d.s3_set, d.victim.tag)),
                         d_push_p.value.eq(d.victim.sum), d_push_p.cause.eq(Cause.EVICTION)]
        return d.writes | d.c_evict

    def _s3_to_s4(self, m, d, shared):
        """``s4``'s registers: the decision, the entry it leaves, and for the gradient in
        ``s2`` (deciding next) whether it rewrote that one's set; the discard registers."""
        s2, s3, hit, full = self.s2, self.s3, self.s3_now_hit, d.full
        d_write, allocates, alloc_ways, written = d.d_write, d.allocates, d.alloc_ways, d.written
        next_same_set = self._set(s2.addr) == d.s3_set   # the gradient in s2, deciding next
        m.d.sync += [
            self.s4_valid.eq(self.s3_valid),
            self.s4_write.eq(d_write),
            self.s4_set.eq(d.s3_set),
            self.s4_row.eq(d.new_row),
            self.s4_way.eq(Mux(hit, self.s3_now_way, Mux(full, d.victim_way, d.free_way))),
            self.s4_ways.eq(Mux(hit, d.hit_ways, alloc_ways)),
            self.s4_holds.eq((d.hit_here & ~d.leaves_way).any() | allocates),
            self.s4_alloc.eq(allocates),
            self.s4_stepped.eq(self.random_step),
            self.s4_inc.eq(shared.count_inc),
            self.s4_dec.eq(shared.count_dec),
            self.s4_push.eq(d.d_push),
            self.s4_push_p.eq(d.d_push_p),
            # For the gradient in s2, deciding next cycle: did this decision rewrite its set?
            self.s3_same_set.eq(d_write & next_same_set),  # mutation site: forward-to-s3
            self.s3_same_addr.eq(d_write & (s2.addr == s3.addr)),
            self.s3_taken.eq(Mux(allocates & next_same_set, alloc_ways, 0)),
            # The dual threshold's accounting, registered.
            self.discard.eq(self.small_miss),  # mutation site: discard-strobe
            self.discard_addr.eq(s3.addr),
            self.discard_error.eq(s3.grad - written),  # mutation site: discard-error
        ]
        if self.whole_line:
            self._forward_entry(m, d)
        else:
            # The entry the gradient leaves in its way (if it holds it): kept apart from the
            # row so that the next gradient to the same address reads it from a register of
            # its own (under the rule: s3_entry).
            m.d.sync += [self.s4_sum.eq(Mux(hit, self.s3_new_sum, s3.grad)),
                         self.s4_count.eq(Mux(hit, self.s3_new_count, 1))]

    # -- the flush scan -------------------------------------------------------------------------

    def _flush_scan(self, m, shared):
        """What the flush scan writes out of the set read (``read_row``): the ways still to
        write out (``pending``), the lowest of them (``scan_ways``) as ``scan_push_p``, whether
        the queue has ``room`` for it, and the row emptied (``cleared_row``)."""
        Q = self.QUEUE_DEPTH
        scan_push_p = shared.scan_push_p
        pending   = Cat(way.valid & ~done for way, done in zip(self.read_row.ways, self.scan_done))
        scan_ways = lowest_one_hot(pending)
        # The entry written out, picked one-hot (an AND-OR rather than an index's mux tree).
        scan_entry = Signal(self.entry_layout)
        m.d.comb += scan_entry.eq(functools.reduce(operator.or_, (
            Mux(scan_ways[i], way.as_value(), 0) for i, way in enumerate(self.read_row.ways))))
        room      = Signal()
        m.d.comb += [
            room.eq(self.reserved < Q),
            *self._scan_write(scan_push_p, scan_entry),
        ]
        cleared_row = Signal(self.row_layout)
        m.d.comb += cleared_row.eq(self.read_row)
        for way in cleared_row.ways:
            m.d.comb += way.valid.eq(0)
        shared.pending, shared.scan_ways = pending, scan_ways
        shared.room, shared.cleared_row = room, cleared_row

    def _scan_write(self, write, entry):
        """The statements that make ``write`` the flush scan's write of ``entry``."""
        return [write.addr.eq(Cat(self.scan_set, entry.tag)),
                write.value.eq(entry.sum),
                write.cause.eq(Cause.FLUSH)]

    # -- control --------------------------------------------------------------------------------

    def _control(self, m, shared):
        """The state (:class:`L1State`) and the RAM's ports, state by state; ``grad_in.ready``
        and ``idle``. Makes ``state_next``."""
        read = self.storage_read
        reserved_next, Q = shared.reserved_next, self.QUEUE_DEPTH
        state_next = Signal(L1State)
        m.d.comb += state_next.eq(self.state)
        m.d.sync += self.state.eq(state_next)
        shared.state_next = state_next

        m.d.comb += read.en.eq(0)
        with m.Switch(self.state):
            with m.Case(L1State.INIT):
                self._init_state(m, shared)
            with m.Case(L1State.RUN):
                self._run_state(m, shared)
            with m.Case(L1State.SCAN):
                self._scan_state(m, shared)
            with m.Case(L1State.DONE):  # mutation site: done-resumes
                with m.If(~self.flush):
                    m.d.comb += state_next.eq(L1State.RUN)

        # grad_in.ready is a register: the next cycle is a RUN cycle without flush, and the
        # queue has a place for this gradient once every gradient before it has one.
        # mutation site: grad-in-ready
        m.d.sync += self.grad_in.ready.eq((state_next == L1State.RUN) & ~self.flush &
                                          (reserved_next < Q))

        m.d.comb += self.idle.eq(
            ((self.state == L1State.RUN) | (self.state == L1State.DONE)) &
            (self.reserved == 0) & self.empty)

    def _scan_from(self, m, first):
        """The scan (or INIT) goes on at set ``first``."""
        m.d.sync += [self.scan_set.eq(first), self.scan_next.eq(first + 1)]

    def _init_state(self, m, shared):
        """``INIT``: clears a set per cycle, then ``RUN``."""
        write, state_next = self.storage_write, shared.state_next
        # Storage has no reset: clear every set before the first gradient.
        m.d.comb += [
            write.en.eq(1),  # mutation site: init-clear
            write.addr.eq(self.scan_set),
            write.data.eq(0),
        ]
        with m.If(self.scan_set == self.sets - 1):  # mutation site: init-end
            m.d.comb += state_next.eq(L1State.RUN)
            self._scan_from(m, 0)
        with m.Else():
            self._scan_from(m, self.scan_next)

    def _run_state(self, m, shared):
        """``RUN``: the pipeline's read and write; the flush barrier starts the scan (or goes
        to ``DONE`` if L1 is empty)."""
        read, write, state_next = self.storage_read, self.storage_write, shared.state_next
        pipe_empty = ~(self.s1_valid | self.s2_valid | self.s3_valid | self.s4_valid)
        # While grad_in.ready is low (no gradient can be accepted) the RAM reads set 0,
        # which a flush scan starts with: so its address hangs on no decision.
        m.d.comb += [
            read.en.eq(1),
            read.addr.eq(Mux(self.grad_in.ready, self._set(self.grad_in.p.addr), 0)),
            write.en.eq(self.s4_valid & self.s4_write),
            write.addr.eq(self.s4_set),
            write.data.eq(self.s4_row),
        ]
        # A gradient is accepted under flush only in flush's first cycle (ready is a
        # register); the barrier waits for ready to fall, so that whether the RAM reads
        # set 0 does not hang on grad_in.valid, nor on the decision below.
        start = self.flush & pipe_empty & ~self.grad_in.ready
        with m.If(start):
            with m.If(self.empty):
                m.d.comb += state_next.eq(L1State.DONE)
            with m.Else():
                # Start the scan: set 0 is read now; its row is in read_row in two cycles.
                m.d.comb += state_next.eq(L1State.SCAN)
                self._scan_from(m, 0)
                m.d.sync += [
                    self.scan_done.eq(0),
                    self.scan_wait.eq(1),
                ]

    def _scan_state(self, m, shared):
        """``SCAN``: writes the scanned set's valid ways out, one per cycle as the queue has
        room, then the set back empty; then the next set, ``DONE`` or (``flush`` dropped)
        ``RUN``."""
        read, write, state_next = self.storage_read, self.storage_write, shared.state_next
        # The next set's address is on the read port throughout, and the scanned set's
        # address and its row emptied on the write port: the scan's decision (below)
        # reaches only the ports' enables, not their addresses or the row's many bits.
        m.d.comb += [
            read.addr.eq(self.scan_next),
            write.addr.eq(self.scan_set),
            write.data.eq(shared.cleared_row),
        ]
        with m.If(self.scan_wait):
            m.d.sync += self.scan_wait.eq(0)
        with m.Elif(shared.pending.any()):
            with m.If(shared.room):
                m.d.comb += shared.scan_push.eq(1)
                m.d.sync += self.scan_done.eq(self.scan_done | shared.scan_ways)
        with m.Else():
            # Every valid way of the set is out: write it back empty. The next set is
            # read whether or not the scan goes on (its row is unused if not), so that
            # the read's enable does not wait for the tests below; after the last set
            # there is none (and with one set it would be the set being written).
            m.d.comb += [
                write.en.eq(1),
                read.en.eq(self.scan_set != self.sets - 1),
            ]
            m.d.sync += self.scan_done.eq(0)
            with m.If(~self.flush):  # mutation site: scan-ends-when-flush-drops
                m.d.comb += state_next.eq(L1State.RUN)
            with m.Elif((self.scan_set == self.sets - 1) | self.empty):
                m.d.comb += state_next.eq(L1State.DONE)
            with m.Else():
                self._scan_from(m, self.scan_next)
                m.d.sync += self.scan_wait.eq(1)
