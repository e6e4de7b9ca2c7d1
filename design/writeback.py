from amaranth import *
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .layouts import dram_layout, line_dram_layout, line_value_width
from .params import DEFAULTS, checked, check_int, check_lanes

__all__ = ["WritebackBuffer"]


def _step(counter, up, down):
    """``counter + up - down``, with ``counter + 1`` and ``counter - 1`` made from the register
    and ``up``, ``down`` only picking one, so that they do not reach an adder."""
    return Mux(up == down, counter, Mux(up, counter + 1, counter - 1))


def _narrow(value):
    """Whether a signed ``value`` fits one bit less than its width (its two top bits equal)."""
    return value[-1] == value[-2]


class WritebackBuffer(wiring.Component):
    """The L2 write-back buffer: a FIFO that sends its writes to DRAM in bursts.

    Writes are kept in a :class:`~amaranth.lib.memory.Memory` (``storage``) and move, one per
    cycle, into the output register, which is the storage's synchronous read port. A burst
    starts when the buffer holds ``burst_size`` writes (so also when it is full) or when
    ``flush`` asks for a drain, and goes on until the buffer is empty.

    The output obeys the stream rules under any backpressure: the read port is enabled only when
    the output register is empty or being taken, so ``dram_out.valid`` stays high with the same
    payload until DRAM takes it, and ``dram_out.valid`` never depends on ``dram_out.ready``.
    ``push.ready`` is ``level < depth``, kept in a register (``room``): it does not depend on
    ``dram_out.ready``, so no combinational path runs from DRAM back to the compute core.

    Invariants (proven in ``properties/``)
    --------------------------------------
    * ``level == count + out_valid <= depth``, where ``count`` is the number of writes in
      ``storage``, and ``w_ptr == (r_ptr + count) % depth``.
    * ``room == (level < depth)``, ``holding == (level != 0)``, ``stored == (count != 0)``.
    * ``bursting`` implies ``level > 0``; ``level >= burst_size`` implies ``bursting``.

    Line writes (``lanes > 1``) are combined: a line write that finds the newest write in
    ``storage`` (not yet in the output register) for the same line merges into it: the masks
    OR-ed, the values of a lane in both added, unless a lane in both holds a value that does not
    fit a bit less than a value (``value_width - 1`` bits, so that every sum merged fits a
    value), when it is stored as a write of its own. So a run of writes to
    one line that L2 holds costs one DRAM write. A push is taken when ``level < depth``,
    merged or not. Every value L2 sends fits ``value_width`` bits: at ``grad_width`` (the
    whole-line rule's writes) a DRAM write has the gradients' own format.

    Parameters
    ----------
    addr_width, grad_width : int
        Widths of the address and of the gradient.
    depth : int
        Number of writes the buffer holds, the output register included.
    burst_size : int
        Number of held writes that starts a burst; ``1 <= burst_size <= depth``.
    lanes : int
        Values per write: 1 (a write is an address and a value), or a line of 2 to 32
        (:func:`~design.layouts.line_dram_layout`), combined as above.
    value_width : int or None
        Width of a value (signed), at least ``grad_width``: on lines
        :func:`~design.layouts.line_value_width` (``grad_width`` under the whole-line rule);
        None: ``grad_width + 2`` (:func:`~design.layouts.value_width`, which holds any sum).

    Members
    -------
    push : ``In(stream.Signature(dram_layout))``
        Writes from L1 (direct writes included).
    dram_out : ``Out(stream.Signature(dram_layout))``
        Writes toward DRAM.
    flush : ``In(1)``
        Drain request: while high, a burst starts whenever the buffer is not empty.
    level : ``Out(range(depth + 1))``
        Number of writes held, the output register included (a register).
    burst_active : ``Out(1)``
        High during a burst.
    """

    def __init__(self, *, addr_width=DEFAULTS["addr_width"], grad_width=DEFAULTS["grad_width"],
                 depth=DEFAULTS["fifo_depth"], burst_size=DEFAULTS["burst_size"], lanes=1,
                 value_width=None):
        with checked(self):
            self.addr_width = check_int("addr_width", addr_width, minimum=1)
            self.grad_width = check_int("grad_width", grad_width, minimum=2)
            self.depth      = check_int("fifo_depth", depth, minimum=1)
            self.burst_size = check_int("burst_size", burst_size, minimum=1, maximum=depth)
            self.lanes      = check_lanes(lanes)
            # (a direct gradient is written as it came: a value holds at least a gradient)
            self.value_width = (line_value_width(grad_width) if value_width is None else
                                check_int("value_width", value_width, minimum=grad_width))
        layout = (dram_layout(addr_width, grad_width, self.value_width) if lanes == 1 else
                  line_dram_layout(addr_width, grad_width, lanes, self.value_width))
        self.storage = Memory(shape=layout, depth=depth, init=[])
        super().__init__({
            "push":         In(stream.Signature(layout)),
            "dram_out":     Out(stream.Signature(layout)),
            "flush":        In(1),
            "level":        Out(range(depth + 1)),
            "burst_active": Out(1),
        })
        # State, named here so that properties and traces can refer to it.
        self.w_ptr     = Signal(range(depth))
        self.r_ptr     = Signal(range(depth))
        self.count     = Signal(range(depth + 1))
        self.out_valid = Signal()
        self.bursting  = Signal()
        # level < depth, level != 0 and count != 0, kept as registers of their own (see
        # elaborate()), so that no test of a counter stands in front of what they drive.
        self.room      = Signal(init=1)
        self.holding   = Signal()
        self.stored    = Signal()
        if lanes > 1:
            # The newest write in storage (a copy), where it is, and whether it is still there
            # (not yet loaded into the output register): a push to its line merges into it.
            self.newest         = Signal(layout)
            self.newest_ptr     = Signal(range(depth))
            self.newest_waiting = Signal()
            self.merge          = Signal()    # the write pushed merges into the newest

    def _next_ptr(self, ptr):
        return Mux(ptr == self.depth - 1, 0, ptr + 1)

    def elaborate(self, platform):
        m = Module()
        m.submodules.storage = self.storage
        write = self.storage.write_port()
        read  = self.storage.read_port()

        push_fire = Signal()
        load      = Signal()   # storage -> output register
        pop       = Signal()   # output register -> DRAM
        level_next = Signal(range(self.depth + 1))
        # A write pushed enters storage as a write of its own (enters), or merges into the
        # newest one there (lines only).
        enters = push_fire
        if self.lanes > 1:
            enters = self._combine(m, write, push_fire, load)

        m.d.comb += [
            self.push.ready.eq(self.room),  # mutation site: l2-push-ready
            push_fire.eq(self.push.valid & self.push.ready),
            self.dram_out.valid.eq(self.out_valid),
            self.dram_out.payload.eq(read.data),
            pop.eq(self.dram_out.valid & self.dram_out.ready),
            # mutation site: l2-output-load
            load.eq(self.bursting & self.stored & (~self.out_valid | self.dram_out.ready)),
            level_next.eq(_step(self.level, enters, pop)),
            self.burst_active.eq(self.bursting),

            write.en.eq(push_fire),
            # (with lines, the write port's address and data are _combine's)
            *([write.addr.eq(self.w_ptr), write.data.eq(self.push.payload)]
              if self.lanes == 1 else []),
            read.en.eq(load),   # the output register holds its write until DRAM takes it
            read.addr.eq(self.r_ptr),
        ]
        with m.If(enters):
            m.d.sync += self.w_ptr.eq(self._next_ptr(self.w_ptr))  # mutation site: l2-write-pointer
        with m.If(load):
            m.d.sync += self.r_ptr.eq(self._next_ptr(self.r_ptr))  # mutation site: l2-read-pointer
        self._levels(m, enters, pop, load, level_next)
        return m

    def _becomes_at_least(self, counter, n, up, down):
        """``counter + up - down >= n`` (``n`` a constant), tested on the register for each way
        it can move, ``up`` and ``down`` only picking one, so that they do not reach the test
        through an adder."""
        def at_least(n):
            return Const(1) if n <= 0 else Const(0) if n > self.depth else counter >= n
        return Mux(up == down, at_least(n), Mux(up, at_least(n - 1), at_least(n + 1)))

    def _levels(self, m, enters, pop, load, level_next):
        """The level, the count of stored writes, and the flags made from their next values
        (!= 0, >= burst_size, < depth), all registers; the burst."""
        becomes_at_least = self._becomes_at_least
        nonzero_next = becomes_at_least(self.level, 1, enters, pop)
        burst_next   = becomes_at_least(self.level, self.burst_size, enters, pop)
        m.d.sync += [
            self.level.eq(level_next),   # count + out_valid, kept as a register of its own
            self.room.eq(~becomes_at_least(self.level, self.depth, enters, pop)),
            self.holding.eq(nonzero_next),
            self.count.eq(_step(self.count, enters, load)),
            self.stored.eq(becomes_at_least(self.count, 1, enters, load)),
            self.out_valid.eq(load | (self.out_valid & ~self.dram_out.ready)),
            # A burst starts at burst_size writes (or on a drain request) and ends when empty.
            self.bursting.eq(nonzero_next &  # mutation site: l2-burst-end
                             # mutation site: l2-burst-start
                             (self.bursting | burst_next | self.flush)),
        ]

    def _combine(self, m, write, push_fire, load):
        """Write combining (lines): drives the storage's write port, keeps the newest write's
        copy, and returns ``enters``: the write pushed is stored as a write of its own (else it
        merged into the newest)."""
        push, newest = self.push.payload, self.newest
        merged = Signal.like(newest)
        fits = Signal(self.lanes)
        for i in range(self.lanes):
            total = Signal(signed(len(push.values[i]) + 1), name=f"merged_total{i}")
            both = newest.mask[i] & push.mask[i]
            m.d.comb += [
                total.eq(Mux(newest.mask[i], newest.values[i], 0) +
                         Mux(push.mask[i], push.values[i], 0)),
                merged.values[i].eq(total),
                # The sum fits a value: a lane one of them holds is that value; two values of a
                # bit less add up to one that fits. (Tested on the values, not on the sum, so
                # that no adder stands in front of the merge and L2's counts.)
                fits[i].eq(~both | (_narrow(newest.values[i]) &  # mutation site: l2-merge-fits
                                    _narrow(push.values[i]))),
            ]
        m.d.comb += [merged.addr.eq(newest.addr), merged.mask.eq(newest.mask | push.mask)]
        # The newest write leaves storage when it is loaded (it is the one at r_ptr).
        leaving = load & (self.r_ptr == self.newest_ptr)
        merge, enters = self.merge, Signal()
        m.d.comb += [
            merge.eq(push_fire & self.newest_waiting & ~leaving &
                     (push.addr == newest.addr) & fits.all()),
            enters.eq(push_fire & ~merge),
            write.addr.eq(Mux(merge, self.newest_ptr, self.w_ptr)),
            write.data.eq(Mux(merge, merged, push)),
        ]
        with m.If(merge):
            m.d.sync += newest.eq(merged)
        with m.Elif(enters):
            m.d.sync += [newest.eq(push), self.newest_ptr.eq(self.w_ptr),
                         self.newest_waiting.eq(1)]
        with m.Elif(leaving):
            m.d.sync += self.newest_waiting.eq(0)
        return enters
