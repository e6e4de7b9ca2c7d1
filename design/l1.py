from amaranth.lib import enum

from amaranth import *
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .layouts import Cause, classified_layout, write_layout, value_width
from .params import DEFAULTS, checked, check_int, check_power_of_two, log2

__all__ = ["L1Accumulator", "L1State"]


class L1State(enum.Enum, shape=2):
    #: After reset: writes every set empty, one set per cycle (SRAM has no reset).
    INIT = 0
    #: Normal work: one gradient per cycle.
    RUN  = 1
    #: Flush barrier: writing every valid entry out, set by set.
    SCAN = 2
    #: Flush barrier: every entry written out; waits for ``flush`` to drop.
    DONE = 3


class L1Accumulator(wiring.Component):
    """The set-associative L1 accumulator, with its pipeline stage and the flush scan.

    Storage is one :class:`~amaranth.lib.memory.Memory` row per set (``storage``), holding
    every way's entry (``valid``, ``tag``, ``sum``, ``count``) and the set's round-robin victim
    pointer, so that one synchronous read gives the whole set, as an SRAM would.

    Pipeline: a gradient is accepted in cycle *t* while its set is read; in cycle *t+1* (stage
    ``s1``) it is decided, the set is written back and at most one write is pushed toward L2.
    The row written in cycle *t* is forwarded to the gradient read in cycle *t* (the read port
    is not transparent), so back-to-back gradients to one set or one address go at one per
    cycle. ``s1`` commits atomically: its row write, its push and the ``valid_count`` update
    happen in the same cycle, the one in which L2 takes the push (or at once, if there is
    nothing to push). The input is stalled only while ``s1`` waits for L2.

    Policy, for a gradient ``g`` at address ``(tag, set)`` with threshold ``t``:

    * ``direct`` (``|g| >= t``): pushed as it is (``Cause.DIRECT``); L1 is not touched.
    * hit: ``sum += g``, ``count += 1``; if ``|sum| >= t`` the entry is pushed and freed
      (``ACCUM_THRESHOLD``), else if ``count == max_updates`` likewise (``MAX_UPDATES``).
    * miss with ``|g| < small_threshold`` (dual threshold, :mod:`design.modes`): not allocated;
      ``small_miss`` strobes, and in the stochastic mode ``sign(g) * small_threshold`` is pushed
      (``Cause.STOCHASTIC``) if ``random * small_threshold < |g| * 2**grad_width``, with
      ``random`` as it is in ``s1``'s first cycle (the decision is held while ``s1`` waits).
    * miss, free way: the lowest free way gets ``sum = g, count = 1`` (with ``max_updates == 1``
      it is pushed at once instead, as ``MAX_UPDATES``).
    * miss, set full: the victim way is pushed (``EVICTION``) and takes the new entry; the
      set's victim pointer moves on (round robin).

    Flush: while ``flush`` is high no gradient is accepted; once ``s1`` is empty, the scan reads
    set 0, 1, ... and pushes each valid way (lowest way first, ``Cause.FLUSH``), freeing it in
    the cycle L2 takes it. A set costs one cycle plus one per valid way. The scan ends after the
    last set (``DONE``), or at once if ``valid_count`` is 0. If ``flush`` drops during the scan,
    the current set is finished and normal work resumes.

    Invariants (proven in ``properties/``)
    --------------------------------------
    * ``valid_count`` equals the number of valid entries, at most ``sets * ways``.
    * A held sum has ``|sum| < 2**grad_width - 1`` (see :func:`~design.layouts.value_width`),
      so ``sum + g`` never overflows; a held count is in ``[1, max_updates - 1]``.
    * No two valid ways of a set hold the same tag.

    Parameters
    ----------
    addr_width, grad_width : int
        Widths of the address and of the gradient.
    sets, ways : int
        Geometry, both powers of two.
    max_updates : int
        Updates after which an entry is written out (``>= 1``).

    Members
    -------
    grad_in : ``In(stream.Signature(classified_layout))``
        Classified gradients from the streamer.
    push : ``Out(stream.Signature(write_layout))``
        Writes toward L2, with their cause. Valid and payload hold until taken.
    flush : ``In(1)``
        The flush barrier request (a level).
    idle : ``Out(1)``
        Nothing is held: ``s1`` empty, no valid entry, not initialising or scanning.
    valid_count : ``Out(range(sets * ways + 1))``
        Number of valid entries (a register).
    hit, miss : ``Out(1)``
        Strobes: a small gradient committed on an L1 hit or miss.
    small_miss : ``Out(1)``
        Strobe: a tiny gradient (dual threshold) missed and was not allocated (not counted in
        ``miss``); its stochastic decision, if any, committed.
    random : ``In(grad_width)``
        Random bits for the stochastic decision of the gradient in ``s1``.
    """

    def __init__(self, *, addr_width=DEFAULTS["addr_width"], grad_width=DEFAULTS["grad_width"],
                 sets=DEFAULTS["sets"], ways=DEFAULTS["ways"],
                 max_updates=DEFAULTS["max_updates"]):
        with checked(self):
            self.grad_width  = check_int("grad_width", grad_width, minimum=2)
            self.sets        = check_power_of_two("sets", sets)
            self.ways        = check_power_of_two("ways", ways)
            self.max_updates = check_int("max_updates", max_updates, minimum=1)
            self.set_bits    = log2(sets)
            self.addr_width  = check_int("addr_width", addr_width, minimum=self.set_bits + 1)
        self.tag_width   = addr_width - self.set_bits

        self.entry_layout = data.StructLayout({
            "valid": 1,
            "tag":   self.tag_width,
            "sum":   signed(value_width(grad_width)),
            "count": range(max_updates + 1),
        })
        self.row_layout = data.StructLayout({
            "ways":   data.ArrayLayout(self.entry_layout, ways),
            "victim": range(ways),
        })
        self.storage = Memory(shape=self.row_layout, depth=sets, init=[])
        # The ports are made here rather than in elaborate() so that the formal harness can
        # name the write port (the valid_count proof follows the row it writes).
        self.storage_read  = self.storage.read_port()
        self.storage_write = self.storage.write_port()

        super().__init__({
            "grad_in":     In(stream.Signature(classified_layout(addr_width, grad_width))),
            "push":        Out(stream.Signature(write_layout(addr_width, grad_width))),
            "flush":       In(1),
            "idle":        Out(1),
            "valid_count": Out(range(sets * ways + 1)),
            "hit":         Out(1),
            "miss":        Out(1),
            "small_miss":  Out(1),
            "random":      In(grad_width),
        })

        # State, named here so that properties and traces can refer to it.
        self.state    = Signal(L1State, init=L1State.INIT)
        self.s1_valid = Signal()
        self.s1       = Signal(classified_layout(addr_width, grad_width))
        self.fwd_valid = Signal()                 # the row read last was written as it was read
        self.fwd_row   = Signal(self.row_layout)  # ... and this is what was written
        self.scan_set  = Signal(range(sets))      # set being initialised or scanned
        # The stochastic decision of the gradient in s1 is made in s1's first cycle and held
        # while s1 waits for L2: the write being offered cannot change, and a proof need not
        # show that a multiplier recomputed on the same operands gives the same result.
        self.s1_fresh       = Signal()   # s1 was loaded in the cycle before
        self.s1_rounds_held = Signal()   # the decision, as made in s1's first cycle
        self.scan_done = Signal(ways)             # ways of the scanned set already written out
        # The set row as it is now in storage, for the gradient in s1 or the set being scanned.
        self.row = Signal(self.row_layout)

    def _lowest(self, m, bits, name):
        """Index of the lowest set bit of ``bits`` (0 if none)."""
        index = Signal(range(self.ways), name=name)
        for i in reversed(range(self.ways)):
            with m.If(bits[i]):
                m.d.comb += index.eq(i)
        return index

    def elaborate(self, platform):
        m = Module()
        m.submodules.storage = self.storage
        read, write = self.storage_read, self.storage_write
        # A read port is enabled by default; here it reads only when told to, so that its data
        # holds the row of the gradient waiting in s1 (or of the set being scanned).
        m.d.comb += read.en.eq(0)

        row, s1 = self.row, self.s1
        m.d.comb += row.eq(Mux(self.fwd_valid, self.fwd_row, read.data))
        with m.If(read.en):
            # Forward a write to the row being read in the same cycle (write-first behaviour).
            m.d.sync += [
                self.fwd_valid.eq(write.en & (write.addr == read.addr)),
                self.fwd_row.eq(write.data),
            ]

        new_row = Signal(self.row_layout)
        m.d.comb += [new_row.eq(row), write.data.eq(new_row)]

        count_inc = Signal()
        count_dec = Signal()
        m.d.sync += self.valid_count.eq(self.valid_count + count_inc - count_dec)

        accept = Signal()
        m.d.comb += accept.eq(self.grad_in.valid & self.grad_in.ready)

        # -- stage s1: decide the gradient read in the cycle before -----------------------------
        s1_set = s1.addr[:self.set_bits]
        s1_tag = s1.addr[self.set_bits:]
        match  = Cat(way.valid & (way.tag == s1_tag) for way in row.ways)
        free   = Cat(~way.valid for way in row.ways)
        hit_way    = self._lowest(m, match, "hit_way")
        free_way   = self._lowest(m, free, "free_way")
        hit_entry  = row.ways[hit_way]
        victim     = row.ways[row.victim]
        hit_sum    = Signal(signed(value_width(self.grad_width) + 1))
        hit_count  = Signal(range(self.max_updates + 2))
        m.d.comb += [
            hit_sum.eq(hit_entry.sum + s1.grad),
            hit_count.eq(hit_entry.count + 1),
        ]

        # The stochastic rule (design/modes.py), on the random bits of s1's first cycle (the
        # LFSR steps only when a decision commits, so they are the bits of every later cycle
        # of s1 too: holding the decision changes nothing).
        rounds = Signal()
        m.d.comb += rounds.eq(Mux(self.s1_fresh,
                                  self.random * s1.small_threshold <
                                  (abs(s1.grad) << self.grad_width),
                                  self.s1_rounds_held))
        m.d.sync += [self.s1_fresh.eq(accept), self.s1_rounds_held.eq(rounds)]

        s1_write = Signal()   # s1 writes its set back when it commits
        s1_done  = Signal()   # s1 commits this cycle
        m.d.comb += s1_done.eq(self.s1_valid & (~self.push.valid | self.push.ready))

        def push(addr, value, cause):
            m.d.comb += [
                self.push.valid.eq(1),
                self.push.p.addr.eq(addr),
                self.push.p.value.eq(value),
                self.push.p.cause.eq(cause),
            ]

        def new_entry(way):
            m.d.comb += [
                new_row.ways[way].valid.eq(1),
                new_row.ways[way].tag.eq(s1_tag),
                new_row.ways[way].sum.eq(s1.grad),
                new_row.ways[way].count.eq(1),
            ]

        with m.If((self.state == L1State.RUN) & self.s1_valid):
            with m.If(s1.direct):
                push(s1.addr, s1.grad, Cause.DIRECT)
            with m.Elif(match.any()):
                m.d.comb += [self.hit.eq(s1_done), s1_write.eq(1)]
                with m.If(abs(hit_sum) >= s1.threshold):
                    push(s1.addr, hit_sum, Cause.ACCUM_THRESHOLD)
                    m.d.comb += [new_row.ways[hit_way].valid.eq(0), count_dec.eq(s1_done)]
                with m.Elif(hit_count >= self.max_updates):
                    push(s1.addr, hit_sum, Cause.MAX_UPDATES)
                    m.d.comb += [new_row.ways[hit_way].valid.eq(0), count_dec.eq(s1_done)]
                with m.Else():
                    m.d.comb += [
                        new_row.ways[hit_way].sum.eq(hit_sum),
                        new_row.ways[hit_way].count.eq(hit_count),
                    ]
            with m.Elif(abs(s1.grad) < s1.small_threshold):
                # Dual threshold: a tiny miss never allocates, so it cannot evict.
                m.d.comb += self.small_miss.eq(s1_done)
                with m.If(s1.stochastic & rounds):
                    push(s1.addr, Mux(s1.grad[-1], -s1.small_threshold, s1.small_threshold),
                         Cause.STOCHASTIC)
            with m.Elif(free.any()):
                m.d.comb += self.miss.eq(s1_done)
                if self.max_updates == 1:
                    push(s1.addr, s1.grad, Cause.MAX_UPDATES)
                else:
                    new_entry(free_way)
                    m.d.comb += [s1_write.eq(1), count_inc.eq(s1_done)]
            with m.Else():
                m.d.comb += [self.miss.eq(s1_done), s1_write.eq(1)]
                push(Cat(s1_set, victim.tag), victim.sum, Cause.EVICTION)
                new_entry(row.victim)
                m.d.comb += new_row.victim.eq(row.victim + 1)

        with m.If(s1_done):
            m.d.sync += self.s1_valid.eq(0)
        with m.If(accept):
            m.d.sync += [self.s1_valid.eq(1), s1.eq(self.grad_in.payload)]

        # -- the flush scan -------------------------------------------------------------------
        pending   = Cat(way.valid & ~done for way, done in zip(row.ways, self.scan_done))
        scan_way  = self._lowest(m, pending, "scan_way")
        scan_mask = Signal(self.ways)   # ways of the scanned set that are free after this cycle
        m.d.comb += scan_mask.eq(self.scan_done | (1 << scan_way))

        # -- control --------------------------------------------------------------------------
        with m.Switch(self.state):
            with m.Case(L1State.INIT):
                # Storage has no reset: clear every set before the first gradient.
                m.d.comb += [
                    write.en.eq(1),
                    write.addr.eq(self.scan_set),
                    new_row.eq(0),
                ]
                with m.If(self.scan_set == self.sets - 1):
                    m.d.sync += [self.state.eq(L1State.RUN), self.scan_set.eq(0)]
                with m.Else():
                    m.d.sync += self.scan_set.eq(self.scan_set + 1)

            with m.Case(L1State.RUN):
                m.d.comb += [
                    self.grad_in.ready.eq(~self.flush & (~self.s1_valid | s1_done)),
                    read.en.eq(self.grad_in.ready),
                    read.addr.eq(self.grad_in.p.addr[:self.set_bits]),
                    write.en.eq(s1_done & s1_write),
                    write.addr.eq(s1_set),
                ]
                with m.If(self.flush & ~self.s1_valid):
                    with m.If(self.valid_count == 0):
                        m.d.sync += self.state.eq(L1State.DONE)
                    with m.Else():
                        # Start the scan: read set 0 now, scan it in the next cycle.
                        m.d.comb += [read.en.eq(1), read.addr.eq(0)]
                        m.d.sync += [
                            self.state.eq(L1State.SCAN),
                            self.scan_set.eq(0),
                            self.scan_done.eq(0),
                        ]

            with m.Case(L1State.SCAN):
                with m.If(pending.any()):
                    push(Cat(self.scan_set, row.ways[scan_way].tag), row.ways[scan_way].sum,
                         Cause.FLUSH)
                    with m.If(self.push.ready):
                        m.d.comb += [
                            write.en.eq(1),
                            write.addr.eq(self.scan_set),
                            count_dec.eq(1),
                        ]
                        for i, way in enumerate(new_row.ways):
                            with m.If(scan_mask[i]):
                                m.d.comb += way.valid.eq(0)
                        m.d.sync += self.scan_done.eq(scan_mask)
                with m.Elif(~self.flush):
                    m.d.sync += self.state.eq(L1State.RUN)
                with m.Elif(self.scan_set == self.sets - 1):
                    m.d.sync += self.state.eq(L1State.DONE)
                with m.Else():
                    m.d.comb += [read.en.eq(1), read.addr.eq(self.scan_set + 1)]
                    m.d.sync += [self.scan_set.eq(self.scan_set + 1), self.scan_done.eq(0)]

            with m.Case(L1State.DONE):
                with m.If(~self.flush):
                    m.d.sync += self.state.eq(L1State.RUN)

        m.d.comb += self.idle.eq(
            ((self.state == L1State.RUN) | (self.state == L1State.DONE)) &
            ~self.s1_valid & (self.valid_count == 0))
        return m
