"""The L2 write-back buffer's contract: an order-preserving FIFO, proven with one tracked
write (the ZipCPU / ``amaranth.lib.fifo`` approach: its cost does not grow with the depth).

The harness follows one write into L2, chosen freely (``fifo_pick``, an ``AnySeq``): the first
write pushed in a cycle with ``fifo_pick`` high. It records the write, the slot it went to and
``ahead``, the number of writes L2 held before it (counted from the handshakes). Asserted:

* ``fifo``: while the tracked write is in storage, its slot holds it and lies between the read
  pointer and the write pointer, ``ahead`` writes after the head; once loaded, the output
  register holds it, with nothing ahead; it leaves ``dram_out`` exactly when ``ahead`` writes
  have left before it, unchanged. As the write is arbitrary, this holds for every write:
  every write leaves, unchanged, in the order it came (docs/proofs.md composes this with L1's
  conservation).
"""

from amaranth import *
from amaranth.lib import enum

__all__ = ["add", "Tracked"]


class Tracked(enum.Enum, shape=2):
    NONE   = 0   # not chosen yet
    STORED = 1   # in L2's storage
    OUTPUT = 2   # in L2's output register
    GONE   = 3   # written to DRAM


def add(h, m, P):
    d, wb = h.dut, h.dut.writeback
    D = d.fifo_depth
    state = Signal(Tracked, name="fifo_tracked_state")
    slot  = Signal(range(D), name="fifo_tracked_slot")
    entry = Signal.like(wb.push.payload, name="fifo_tracked_write")
    # The write as L1 pushed it: the contract runs from L1's push to dram_out.
    pushed = Signal.like(wb.push.payload, name="l1_push_write")
    m.d.comb += [pushed.addr.eq(d.l1.push.p.addr), pushed.value.eq(d.l1.push.p.value)]
    ahead = Signal(range(D + 1), name="fifo_tracked_ahead")
    h.fifo_state, h.fifo_ahead = state, ahead

    push = h.push_fire
    load = Signal(name="l2_load")
    m.d.comb += load.eq(wb.bursting & (wb.count != 0) & (~wb.out_valid | d.dram_out.ready))

    with m.Switch(state):
        with m.Case(Tracked.NONE):
            with m.If(push & h.fifo_pick):
                m.d.sync += [state.eq(Tracked.STORED), slot.eq(wb.w_ptr),
                             entry.eq(pushed), ahead.eq(wb.level - h.pop)]
        with m.Case(Tracked.STORED):
            with m.If(h.pop):
                m.d.sync += ahead.eq(ahead - 1)
            with m.If(load & (wb.r_ptr == slot)):
                m.d.sync += state.eq(Tracked.OUTPUT)
        with m.Case(Tracked.OUTPUT):
            with m.If(h.pop):
                m.d.sync += state.eq(Tracked.GONE)

    stored, output = state == Tracked.STORED, state == Tracked.OUTPUT
    m.d.comb += h.l2_track_port.addr.eq(slot)
    offset = Signal(range(2 * D), name="fifo_tracked_offset")   # slot - r_ptr, mod D
    m.d.comb += offset.eq(Mux(slot >= wb.r_ptr, slot - wb.r_ptr, slot + D - wb.r_ptr))

    P.check("fifo", "tracked_write_held_in_its_slot",
            ~stored | (h.l2_track_port.data.as_value() == entry.as_value()))
    P.check("fifo", "tracked_slot_between_read_and_write_pointers",
            ~stored | ((slot < D) & (offset < wb.count)))
    P.check("fifo", "tracked_write_has_ahead_writes_before_it",
            ~stored | (ahead == offset + wb.out_valid))
    P.check("fifo", "tracked_write_in_output_register_with_nothing_ahead",
            ~output | (wb.out_valid & (ahead == 0) &
                       (d.dram_out.payload.as_value() == entry.as_value())))
    P.check("fifo", "write_leaves_after_exactly_the_writes_ahead_of_it",
            ~(stored & h.pop) | (ahead != 0))
