"""The transfer bound of the whole-line rule, on the line L1 (``bound``): the guarantee that a
compressor deciding by it never moves more line transfers toward DRAM than dense
write-through of the same beats would.

In every cycle, from any reset point, for every input and every ``push.ready``:

    line writes sent (taken from ``push``) + line writes waiting inside L1
        + lines L1 holds (``valid_count``) + beats still in ``s1`` ... ``s3``
    <= beats accepted

(the beats in the pipeline are counted there because each is accepted before it decides: the
sum on the left only reaches a beat's effect when it decides). It holds because a beat either
writes its line or allocates it, never both, evicting at most one victim: the sum rises by at
most one per beat; a flush or an eviction only turns a held line into a waiting write, and a
write sent turns waiting into sent.

The harness keeps the beats accepted less the writes sent (a register, saturating high: a
register that has stopped counting up only understates the slack, so a bound shown with it
holds), and counts the waiting writes in L1's output queue (its level: under the rule a place holds
one write at most, its own or its victim's, never both), the output register and the decision
in ``s4`` (whose writes enter the queue at the end of the cycle, while its
change to ``valid_count`` shows in the cycle itself).

In the compressor (``system_bound``) the same with line transfers taken by DRAM in place of
the writes sent, and L2's writes (its level) among those waiting: the compressor never sends
DRAM more line transfers than dense write-through of the same beats would.

Also: every value L1 pushes toward DRAM fits ``grad_width`` bits (the held sums do, group
``overflow``; a value written is a sum the rule has kept in range).
"""

from amaranth import *

__all__ = ["add"]


def add(h, m, P):
    """The ``bound`` group, on the line L1 deciding by the whole-line rule (L1's contract); in
    the system, ``system_bound``."""
    waiting, deciding = _line_l1(h, m, P)
    if h.system:
        _system(h, m, P, waiting, deciding)


def _slack(h, m, top, sent, name):
    """Beats accepted less ``sent``, in a register saturating at ``top`` (see the module's
    text)."""
    not_sent = Signal(range(top + 1), name=name)
    grown = not_sent + h.accept
    m.d.sync += not_sent.eq(Mux(grown > top, top, grown) - sent)
    return not_sent


def _line_l1(h, m, P):
    """L1's bound; returns its writes waiting and its beats deciding."""
    l1, probe, queue = h.dut.l1, h.dut.l1.probe, h.dut.l1.queue
    places = queue.depth
    # The most the left side's terms other than valid_count reach: a write a place, the
    # output register, s4's write and three beats in s1..s3.
    most_waiting = places + 1 + 1 + 3
    entries = h.dut.sets * h.dut.ways
    top = entries + most_waiting + 2     # the register saturates here (see the module's text)
    not_sent = _slack(h, m, top, h.push_fire, "bound_beats_accepted_less_writes_sent")

    def occupied(i):     # place i of the queue holds a pair
        return Mux(i >= queue.r_ptr, i - queue.r_ptr, i + places - queue.r_ptr) < queue.level

    # A beat writes its line or allocates it (evicting at most a victim), never both: each
    # place of the queue holds one write of its pair at most (the flush scan's is its own), so
    # a place is one transfer, as the output register is.
    P.check("bound", "s4_pushes_its_line_or_a_victim_never_both",
            ~l1.s4_valid | ~(probe.pushes & l1.s4_victim))
    for i, port in enumerate(h.queue_ports):
        P.check("bound", "a_place_holds_one_write_at_most",
                ~occupied(i) | ~(port.data.own.mask.any() & port.data.victim.mask.any()))

    s4_writes = Mux(l1.s4_valid, probe.pushes | l1.s4_victim, 0)
    waiting = Signal(range(most_waiting + 1), name="bound_line_writes_waiting")
    m.d.comb += waiting.eq(probe.out_valid + queue.level + s4_writes)
    deciding = Signal(range(4), name="bound_beats_before_their_decision")
    s1, s2, s3, _ = probe.in_stage
    m.d.comb += deciding.eq(s1 + s2 + s3)
    P.check("bound", "writes_sent_waiting_lines_held_and_beats_deciding_at_most_beats_accepted",
            waiting + l1.valid_count + deciding <= not_sent)

    # Every value on its way toward DRAM fits grad_width bits: as it enters the output queue
    # (from s4's writes or the flush scan), in each occupied place, in the output register.
    lo, hi = -2 ** (h.gw - 1), 2 ** (h.gw - 1) - 1

    def fits(write):
        return Cat(~write.mask[i] | ((write.values[i] >= lo) & (write.values[i] <= hi))
                   for i in range(h.lanes)).all()
    entering = queue.w.payload
    P.check("bound", "every_value_entering_the_queue_fits_grad_width",
            ~queue.w.valid | (fits(entering.own) & fits(entering.victim)))
    for i, port in enumerate(h.queue_ports):
        P.check("bound", "every_value_in_the_queue_fits_grad_width",
                ~occupied(i) | (fits(port.data.own) & fits(port.data.victim)))
    P.check("bound", "every_value_pushed_fits_grad_width", ~l1.push.valid | fits(l1.push.p))
    return waiting, deciding


def _system(h, m, P, l1_waiting, deciding):
    """The compressor's bound: line transfers sent to DRAM + line writes waiting in L1 and in
    L2 (its level: storage and output register) + lines held + beats deciding <= beats
    accepted. (The streamer is combinational: a beat accepted is L1's. A merge in L2 takes a
    write out of the count.)"""
    d = h.dut
    wb = d.writeback
    most = d.sets * d.ways + d.l1.queue.depth + 2 + 3 + d.fifo_depth
    not_sent = _slack(h, m, most + 2, h.pop, "system_bound_beats_accepted_less_transfers_sent")
    P.check("system_bound",
            "transfers_sent_writes_waiting_lines_held_and_beats_deciding_at_most_beats_accepted",
            l1_waiting + wb.level + d.l1.valid_count + deciding <= not_sent)
