"""Throughput as a property: with DRAM ready in every cycle and ``flush`` never high since
reset, ``grad_in.ready`` is high in every cycle after INIT: one gradient per clock, proven
unbounded (not only measured by ``make bench``), for an L2 of three writes or more (a write
spends two cycles in L2, in storage and in the output register, so a 2-deep L2 is full or
bubbles: it cannot take a write in every cycle). L2's half of
it, one DRAM write per cycle in a burst, is L2's own contract (:mod:`.writeback`).

``throughput``: the property, and the invariants its induction needs under that condition:
L1 never leaves RUN, L2 holds at most ``burst_size + 1`` writes (and ``burst_size + 1`` only
with its output register full, which DRAM then takes), and the queue at most two writes. They
are assumed (for the past cycles) only by the throughput jobs.
"""

from amaranth import *

from gradient_compressor.design import L1State

__all__ = ["add"]


def add(h, m, P):
    d, l1, wb = h.dut, h.dut.l1, h.dut.writeback
    # Since reset (these registers are cleared by it): DRAM ready in every cycle, flush low.
    stalled = Signal(name="dram_stalled_since_reset")
    flushed = Signal(name="flush_high_since_reset")
    with m.If(~d.dram_out.ready):
        m.d.sync += stalled.eq(1)
    with m.If(d.flush):
        m.d.sync += flushed.eq(1)
    steady = Signal(name="dram_always_ready_flush_never_high")
    m.d.comb += steady.eq(~stalled & ~flushed)
    h.steady = steady

    if wb.depth < 3:
        # A write spends two cycles in L2 (storage, then the output register), so a 2-deep
        # L2 (assoc) is full or bubbles: one write every second cycle at best.
        return

    def check(name, test):
        P.check("throughput", name, ~steady | test, only_for=["throughput"])

    check("grad_in_ready_in_every_cycle_after_init", h.init | d.grad_in.ready)
    # The induction's strengthening, under the same condition.
    check("l1_only_in_init_or_run", h.init | (l1.probe.state == L1State.RUN))
    B = wb.burst_size
    check("l2_holds_at_most_burst_size_plus_1", wb.level <= B + 1)
    check("l2_above_burst_size_only_sending", (wb.level <= B) | wb.out_valid)
    check("queue_holds_at_most_two_writes", l1.probe.queue.level <= 2)
