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

With one lane (:func:`_add_one_lane`) the same, of records and gradients: records sent
(taken from ``push``) + records waiting in L1 (the output queue's level, and the record ``s4``
is about to queue) + entries held (``valid_count``) + gradients in ``s1`` ... ``s3`` <=
gradients accepted; a gradient pushes a record or allocates a free way, never both (an
eviction pushes the victim's record into the way it takes: the entries held do not change).
"""

from amaranth import *

__all__ = ["add"]


def _not_sent(h, m, most_waiting, name, sent=None):
    """The register of what was accepted less what was sent (``sent``: L1's push taken, unless
    given), named ``name``, saturating at the most the bound's left side can reach
    (``most_waiting`` beside the entries) and 2 more (see the module's text)."""
    entries = h.dut.sets * h.dut.ways
    top = entries + most_waiting + 2
    not_sent = Signal(range(top + 1), name=name)
    grown = not_sent + h.accept
    m.d.sync += not_sent.eq(Mux(grown > top, top, grown) -
                            (h.push_fire if sent is None else sent))
    return not_sent


def _occupied(queue, i):
    """Place ``i`` of the output queue holds a write (on lines, a pair)."""
    return Mux(i >= queue.r_ptr, i - queue.r_ptr, i + queue.depth - queue.r_ptr) < queue.level


def add(h, m, P):
    """The ``bound`` group, on the L1 deciding by the whole-line rule (lines, or one lane); in
    the compressor, ``system_bound``."""
    add_l1 = _add_one_lane if h.lanes == 1 else _add_lines
    waiting, deciding = add_l1(h, m, P)
    if h.system:
        _add_system(h, m, P, waiting, deciding)


def _add_lines(h, m, P):
    """The ``bound`` group on the line L1; returns its writes waiting and beats deciding."""
    l1, probe = h.dut.l1, h.dut.l1.probe
    queue, (s1, s2, s3, s4) = probe.queue, probe.in_stage
    places = queue.depth
    # The most the left side's terms other than valid_count reach: a write a place, the
    # output register, s4's write and three beats in s1..s3.
    most_waiting = places + 1 + 1 + 3
    not_sent = _not_sent(h, m, most_waiting, "bound_beats_accepted_less_writes_sent")

    def occupied(i):     # place i of the queue holds a pair
        return _occupied(queue, i)

    # A beat writes its line or allocates it (evicting at most a victim), never both: each
    # place of the queue holds one write of its pair at most (the flush scan's is its own), so
    # a place is one transfer, as the output register is.
    P.check("bound", "s4_pushes_its_line_or_a_victim_never_both",
            ~s4 | ~(probe.pushes & probe.s4_victim))
    for i, port in enumerate(h.queue_ports):
        P.check("bound", "a_place_holds_one_write_at_most",
                ~occupied(i) | ~(port.data.own.mask.any() & port.data.victim.mask.any()))

    s4_writes = Mux(s4, probe.pushes | probe.s4_victim, 0)
    waiting = Signal(range(most_waiting + 1), name="bound_line_writes_waiting")
    m.d.comb += waiting.eq(probe.out_valid + queue.level + s4_writes)
    deciding = Signal(range(4), name="bound_beats_before_their_decision")
    m.d.comb += deciding.eq(s1 + s2 + s3)
    P.check("bound", "writes_sent_waiting_lines_held_and_beats_deciding_at_most_beats_accepted",
            waiting + l1.valid_count + deciding <= not_sent)

    # Every value on its way toward DRAM fits grad_width bits: as it enters the output queue
    # (from s4's writes or the flush scan), in each occupied place, in the output register.
    # Stated for the writes of the tracked set, as with one lane (below).
    lo, hi = -2 ** (h.gw - 1), 2 ** (h.gw - 1) - 1

    def fits(write):
        return (h.set_of(write.addr) != h.track_set) | Cat(
            ~write.mask[i] | ((write.values[i] >= lo) & (write.values[i] <= hi))
            for i in range(h.lanes)).all()
    entering = queue.w.payload
    P.check("bound", "every_value_entering_the_queue_fits_grad_width",
            ~queue.w.valid | (fits(entering.own) & fits(entering.victim)))
    for i, port in enumerate(h.queue_ports):
        P.check("bound", "every_value_in_the_queue_fits_grad_width",
                ~occupied(i) | (fits(port.data.own) & fits(port.data.victim)))
    P.check("bound", "every_value_pushed_fits_grad_width", ~l1.push.valid | fits(l1.push.p))
    return waiting, deciding


def _add_system(h, m, P, l1_waiting, deciding):
    """The compressor's bound: line transfers (records, with one lane) sent to DRAM + writes
    waiting in L1 and in L2 (its level: storage and output register) + lines (entries) held
    + beats (gradients) deciding <= beats accepted. (The streamer is combinational: a beat
    accepted is L1's. A merge in L2 takes a write out of the count.)"""
    d = h.dut
    most_waiting = d.l1.probe.queue.depth + 2 + 3 + d.fifo_depth  # (lines: the output register)
    not_sent = _not_sent(h, m, most_waiting, "system_bound_beats_accepted_less_transfers_sent",
                         sent=h.pop)
    P.check("system_bound",
            "transfers_sent_writes_waiting_lines_held_and_beats_deciding_at_most_beats_accepted",
            l1_waiting + d.writeback.level + d.l1.valid_count + deciding <= not_sent)


def _add_one_lane(h, m, P):
    """The ``bound`` group on the one-lane L1 deciding by the whole-line rule: records and
    gradients (see the module's text); returns its records waiting and gradients deciding."""
    l1, probe = h.dut.l1, h.dut.l1.probe
    queue, (s1, s2, s3, s4) = probe.queue, probe.in_stage
    # The most the left side's terms other than valid_count reach: a record a place, s4's
    # and three gradients in s1..s3.
    most_waiting = queue.depth + 1 + 3
    not_sent = _not_sent(h, m, most_waiting, "bound_gradients_accepted_less_records_sent")
    # A gradient pushes a record or takes a free way, never both (valid_count shows s4's
    # change in s4's own cycle, its record enters the queue at the cycle's end).
    P.check("bound", "s4_pushes_or_takes_a_free_way_never_both",
            ~s4 | ~(probe.pushes & probe.s4_inc))
    waiting = Signal(range(most_waiting + 1), name="bound_records_waiting")
    m.d.comb += waiting.eq(queue.level + (s4 & probe.pushes))
    deciding = Signal(range(4), name="bound_gradients_before_their_decision")
    m.d.comb += deciding.eq(s1 + s2 + s3)
    P.check("bound", "records_sent_waiting_entries_held_and_gradients_deciding_at_most_"
                     "gradients_accepted",
            waiting + l1.valid_count + deciding <= not_sent)

    # Every value on its way toward DRAM fits grad_width bits: as it enters the output queue
    # (from s4 or the flush scan), in each occupied place, on push (the queue's head). Stated
    # for the writes of the tracked set (an arbitrary set: so for every write), whose rows
    # the overflow group keeps within grad_width bits also where the sets are not read whole
    # (stated for every write, mid's induction found a state whose other sets hold wider sums).
    # The queue and push carry grad_width-bit values under the rule (L1's value_width), so
    # these hold by width too; that the narrowing loses nothing is the policy group's (each
    # write equals the model's, computed wider) and conservation's.
    lo, hi = -2 ** (h.gw - 1), 2 ** (h.gw - 1) - 1

    def fits(write):
        return (h.set_of(write.addr) != h.track_set) | ((write.value >= lo) & (write.value <= hi))
    P.check("bound", "every_value_entering_the_queue_fits_grad_width",
            ~queue.w.valid | fits(queue.w.payload))
    for i, port in enumerate(h.queue_ports):
        P.check("bound", "every_value_in_the_queue_fits_grad_width",
                ~_occupied(queue, i) | fits(port.data))
    P.check("bound", "every_value_pushed_fits_grad_width", ~l1.push.valid | fits(l1.push.p))
    return waiting, deciding
