"""Assertions on the outputs (the design's contract); ``conservation`` is L1's own (proven on L1
alone, :data:`.harness.L1_GROUPS`), the rest the system's.

* ``stream``: the internal L1 -> L2 ``push`` obeys the stream rules: once ``valid`` is high
  and not taken it stays high with the same payload, and ``push.ready`` depends on L2's level
  only (``dram_out``'s rules are L2's own contract, :mod:`.writeback`).
* ``conservation``: for the tracked address ``a`` (an ``AnyConst``), in every cycle
  ``accepted(a) - queued(a) - accounted(a)`` (written into L1's output queue; ``accounted``
  adds up the ``discard_error`` of each ``discard`` for ``a``: dual threshold) equals what
  L1 holds for ``a`` (as the policy model holds it), what ``s1`` ... ``s3`` hold and what
  ``s4``'s decision passes on, composed of per-cycle steps (docs/proofs.md); at ``idle``
  everything accepted for ``a`` has been queued or accounted.
* ``storage`` (only with ``whole_storage``): the queue's and L2's shadows for ``a`` match
  their storage, and neither writes ``a`` out unless it holds a write for ``a``.
* ``idle``: ``idle`` only when no L1 entry is valid (counted in storage), ``valid_count == 0``,
  L2 empty, nothing in s1 or on either stream, and after INIT whenever nothing accepted is
  inside; under ``flush`` it stays high once high.
* ``counters``: each cause strobe is high exactly when a write of that cause enters L2;
  ``l1_hit``/``l1_miss`` only when a small gradient commits; ``accepted_count`` and
  ``dram_write_count`` count the ``grad_in`` and ``dram_out`` handshakes (mod 2**32);
  ``discard_count`` / ``discard_sum`` count and add up the step's discards (cleared by the
  first gradient accepted after a completed flush barrier); ``discard`` never with a hit or
  miss strobe.
"""

from amaranth import *

from gradient_compressor.design import L1State
from gradient_compressor.design.layouts import Cause

__all__ = ["add"]


def _stream(m, P, name, stream, fields):
    last_wait = Signal(name=f"{name}_waiting_last_cycle")
    last = [Signal.like(f, name=f"{name}_last_{i}") for i, f in enumerate(fields)]
    m.d.sync += last_wait.eq(stream.valid & ~stream.ready)
    m.d.sync += [l.eq(f) for l, f in zip(last, fields)]
    same = Cat(*[l == f for l, f in zip(last, fields)]).all()
    P.check("stream", f"{name}_valid_held_until_ready", ~last_wait | stream.valid)
    P.check("stream", f"{name}_payload_stable_until_ready", ~last_wait | same)


def add(h, m, P):
    """L1's contract (conservation), and in the system (``h.system``) the system's groups."""
    _conservation(h, m, P)
    if h.system:
        _system(h, m, P)
    elif h.lanes > 1:
        # The line L1's push comes from its output register: the stream rules on it (on one
        # lane push is the output queue's head, whose contract is the queue's).
        l1 = h.dut.l1
        _stream(m, P, "l1_push", l1.push, [l1.push.p.as_value()])


def _conservation(h, m, P):
    d = h.dut

    # -- conservation for the tracked address --------------------------------------------
    # On the policy model (the tracked set as it is: the policy group's), so that this is
    # arithmetic on the harness's state.
    # Proven in steps, each relating one cycle to the one before (registers of the previous
    # cycle's values; arithmetic modulo 2**bw, as the balance's), so that the solver meets one
    # step of arithmetic at a time (as one job this did not finish on default in 200 s):
    # * model_step_conserves_the_tracked_address (policy.py): model + s4's part now ==
    #   model + the gradient deciding in s3 - the flush scan's write, the cycle before;
    # * stages_step: the stages' sum now == theirs + the gradient accepted - the one leaving
    #   s3, the cycle before;
    # * queue_step: what entered the queue for the address and what was discarded for it, the
    #   cycle before, is what s4's part and the flush scan's write were then (on the model);
    # * held_step: model + stages + s4's part move as the balance does (l1_delta), from the
    #   three above in the same cycle; and the balance itself from held_step in the same cycle
    #   (same-cycle lemmas: properties/base.py, docs/proofs.md).
    stages_now = Signal(signed(h.bw), name="stages_tracked_sum_to_be")
    queued_before = Signal(signed(h.bw), name="queued_or_discarded_tracked_last_cycle")
    passed_before = Signal(signed(h.bw), name="model_passed_on_tracked_last_cycle")
    m.d.sync += [
        stages_now.eq(h.stages_sum + h.l1_accepted - h.stage3_sum),
        queued_before.eq(h.l1_passed),
        passed_before.eq(h.model_s4_sum + h.model_flush_out),
    ]
    # The steps are assumed (for the past) only in the conservation jobs: no other needs them.
    P.check("conservation", "stages_step", h.stages_sum == stages_now,
            only_for=["conservation"])
    P.check("conservation", "queue_step", queued_before == passed_before,
            only_for=["conservation"])
    held = Signal(signed(h.bw), name="l1_held_tracked")
    held_to_be = Signal(signed(h.bw), name="l1_held_tracked_to_be")
    m.d.comb += held.eq(h.model_sum + h.stages_sum + h.model_s4_sum)
    m.d.sync += held_to_be.eq(held + h.l1_delta)
    P.check("conservation", "held_step", held == held_to_be,
            now=["conservation/model_step_conserves_the_tracked_address",
                 "conservation/stages_step", "conservation/queue_step"],
            only_for=["conservation"])
    P.check("conservation", "accepted_eq_l1_plus_pipeline_plus_queued",
            h.l1_balance == h.model_sum + h.stages_sum + h.model_s4_sum,
            now=["conservation/held_step"])
    # L1 and its pipeline hold nothing at idle, so all that was accepted has been written into
    # the queue or accounted as discarded ...
    P.check("conservation", "idle_implies_accepted_eq_queued", ~d.idle | (h.l1_balance == 0))
    # ... and the queue and L2, empty at idle, have written all of it: by their FIFO
    # contracts (properties/pipeline.py, properties/writeback.py: every write leaves,
    # unchanged, in order), composed in docs/proofs.md. (The queue's shadow sum against its
    # contents, as whole_storage checks L2's below, did not finish its induction on small in
    # 2 minutes; its count does, and it is asserted here.)


def _system(h, m, P):
    """The system's groups: the components joined as their contracts assume, and the outputs'
    rules."""
    if h.lanes > 1:
        return _line_system(h, m, P)
    _stream_rules(h, m, P)
    if h.l2_ports:
        _storage(h, P)
    _idle(h, m, P)
    _counters(h, m, P)


def _stream_rules(h, m, P):
    """L1's push obeys the stream rules, and the components are joined as their contracts
    assume."""
    d, l1, wb = h.dut, h.dut.l1, h.dut.writeback
    probe = l1.probe
    # (dram_out's are L2's own contract: properties/writeback.py.)
    _stream(m, P, "l1_push", l1.push, [l1.push.p.addr, l1.push.p.value, l1.push.p.cause])
    # The components are joined as their contracts assume: the queue's head is L1's push,
    # L2 takes it as it is, and L2's output is dram_out.
    queue = probe.queue
    # (The payloads where valid: only then do they carry a write.)
    P.check("stream", "l1_push_is_the_queues_head",
            (l1.push.valid == queue.r.valid) & (queue.r.ready == l1.push.ready) &
            (~l1.push.valid | (l1.push.payload.as_value() == queue.r.payload.as_value())))
    P.check("stream", "l2_takes_l1_push_as_it_is",
            (wb.push.valid == l1.push.valid) & (l1.push.ready == wb.push.ready) &
            (~l1.push.valid | ((wb.push.p.addr == l1.push.p.addr) &
                               (wb.push.p.value == l1.push.p.value))))
    P.check("stream", "dram_out_is_l2s_output",
            (d.dram_out.valid == wb.dram_out.valid) & (wb.dram_out.ready == d.dram_out.ready) &
            (~d.dram_out.valid |
             (d.dram_out.payload.as_value() == wb.dram_out.payload.as_value())))
    P.check("stream", "push_ready_is_level_below_depth",
            l1.push.ready == (wb.level < d.fifo_depth))


def _storage(h, P):
    """The queue's and L2's shadows for the tracked address match their storage, and neither
    writes it out unless it holds a write for it."""
    d, l1 = h.dut, h.dut.l1
    # Only with the whole storage read (group storage): on default the queue's count
    # against its contents did not finish its induction in 2.5 minutes (the FIFO contract
    # covers it there).
    P.check("storage", "queue_shadow_count_matches_its_contents",
            h.queue_n == h.queue_real_n)
    P.check("storage", "no_push_for_address_not_in_the_queue",
            ~(l1.push.valid & (l1.push.p.addr == h.track)) | (h.queue_n != 0))
    P.check("storage", "no_dram_write_for_address_not_in_l2",
            ~(d.dram_out.valid & (d.dram_out.p.addr == h.track)) | (h.l2_n != 0))
    P.check("storage", "l2_shadow_sum_matches_storage", h.l2_sum == h.l2_real_sum)
    P.check("storage", "l2_shadow_count_matches_storage", h.l2_n == h.l2_real_n)


def _idle(h, m, P):
    """``idle`` only when everything is empty and, after INIT, whenever nothing accepted is
    inside; under ``flush`` no gradient is taken from its second cycle, and ``idle`` holds.
    On lines L1's output register is inside too."""
    d, l1, wb = h.dut, h.dut.l1, h.dut.writeback
    probe, lines = l1.probe, h.lanes > 1
    P.check("idle", "idle_implies_everything_empty",
            ~d.idle | ((l1.valid_count == 0) & (wb.level == 0) & (probe.reserved == 0) &
                       ~l1.push.valid & ~d.dram_out.valid &
                       ((probe.state == L1State.RUN) | (probe.state == L1State.DONE))))
    if lines:
        P.check("idle", "idle_implies_queue_and_l2_storage_empty",
                ~d.idle | ((probe.queue.level == 0) & ~probe.out_valid & (wb.count == 0) &
                           ~wb.out_valid))
    P.check("idle", "idle_implies_tracked_set_holds_nothing_for_address",
            ~d.idle | (h.l1_n == 0))
    if h.l1_ports:
        P.check("idle", "idle_implies_no_valid_entry_in_storage", ~d.idle | (h.l1_total == 0))
    # ... and the converse: once INIT is over, idle whenever nothing accepted is inside (no
    # gradient in s1 ... s4, as the harness follows them, no valid L1 entry, no write in the
    # queue or in L2), under flush or not.
    nothing_inside = Signal(name="nothing_accepted_inside")
    empty = ~Cat(*h.stage_valid[1:]).any() & (l1.valid_count == 0) & (probe.queue.level == 0)
    if lines:
        empty = empty & ~probe.out_valid
    m.d.comb += nothing_inside.eq(empty & (wb.level == 0))
    P.check("idle", "idle_whenever_nothing_accepted_is_inside_after_init",
            h.init | ~nothing_inside | d.idle)
    # grad_in.ready is a register: a gradient offered in the first cycle of flush may still be
    # taken (it comes before the barrier); from the second cycle on, none is.
    last_flush = Signal(name="flush_high_last_cycle")
    idle_under_flush = Signal(name="idle_under_flush_for_two_cycles")
    m.d.sync += [last_flush.eq(d.flush), idle_under_flush.eq(last_flush & d.flush & d.idle)]
    P.check("idle", "no_gradient_taken_from_the_second_cycle_of_flush",
            ~(last_flush & d.flush) | ~d.grad_in.ready)
    P.check("idle", "idle_stays_high_while_flush_high", ~(idle_under_flush & d.flush) | d.idle)


def _cause_strobes(d):
    """The compressor's cause strobes with their causes. The table is restated here on
    purpose, not imported from the design: a wrong table in design/compressor.py must fail
    the checks (mutant evict_strobe_...)."""
    return [(d.direct_write,      Cause.DIRECT),
            (d.accum_write,       Cause.ACCUM_THRESHOLD),
            (d.max_updates_write, Cause.MAX_UPDATES),
            (d.evict_write,       Cause.EVICTION),
            (d.flush_write,       Cause.FLUSH),
            (d.stochastic_write,  Cause.STOCHASTIC)]


def _counters(h, m, P):
    """The cause strobes and the running counters."""
    d, l1, wb = h.dut, h.dut.l1, h.dut.writeback
    probe = l1.probe
    for strobe, cause in _cause_strobes(d):
        P.check("counters", f"{cause.name.lower()}_strobe_iff_such_a_write_enters_l2",
                strobe == (h.push_fire & (l1.push.p.cause == cause)))
    P.check("counters", "hit_or_miss_strobe_only_when_a_small_gradient_decides",
            ~(d.l1_hit | d.l1_miss) |
            (probe.in_stage[2] & ~probe.deciding_direct & ~(d.l1_hit & d.l1_miss)))
    accepted = Signal(32, name="accepted_counted")
    written  = Signal(32, name="dram_writes_counted")
    m.d.sync += [accepted.eq(accepted + h.accept), written.eq(written + h.pop)]
    P.check("counters", "accepted_count_counts_grad_in_handshakes",
            d.accepted_count == accepted)
    P.check("counters", "dram_write_count_counts_dram_out_handshakes",
            d.dram_write_count == written)
    # The step's discard totals (a component: properties/discards.py), joined to the design:
    # the accounted discards, the accepted gradients and the completed barrier in, the totals
    # out.
    t = d.discards
    P.check("counters", "discard_totals_joined",
            (t.discard == d.discard) & (t.error == d.discard_error) & (t.accept == h.accept) &
            (t.barrier == (d.flush & d.idle)) & (d.discard_count == t.count) &
            (d.discard_sum == t.sum))
    P.check("counters", "hit_miss_and_tiny_miss_strobes_exclusive",
            ~(l1.small_miss & (d.l1_hit | d.l1_miss)))
    P.check("counters", "l1_valid_count_and_l2_level_ports",
            (d.l1_valid_count == l1.valid_count) & (d.l2_level == wb.level) &
            (d.burst_active == wb.bursting))


# -- the compressor on lines -------------------------------------------------------------------

def _line_system(h, m, P):
    """The system's groups on lines (``GradientCompressor(lanes=N)``, the line L1's contract
    and L2's on lines assumed): the components joined, ``idle``, the counters, and the
    tracked address conserved from the ports to DRAM."""
    d, l1, wb = h.dut, h.dut.l1, h.dut.writeback
    # -- stream: L1's push (its output register) keeps the stream rules; the beat reaches L1
    # as the core gave it (the streamer, not proven alone on lines, clears the lane bits);
    # L2 takes L1's push as it is, and L2's output is dram_out.
    _stream(m, P, "l1_push", l1.push, [l1.push.p.as_value()])
    i, o = d.grad_in, l1.grad_in
    P.check("stream", "l1_takes_the_beat_as_the_core_gave_it",
            (o.valid == i.valid) & (i.ready == o.ready) &
            (o.p.addr == Cat(Const(0, h.lane_bits), i.p.addr[h.lane_bits:])) &
            (o.p.grads.as_value() == i.p.grads.as_value()) & (o.p.mask == i.p.mask) &
            (o.p.threshold == d.threshold) & (o.p.small_threshold == d.small_threshold) &
            (o.p.stochastic == d.stochastic))
    P.check("stream", "l2_takes_l1_push_as_it_is",
            (wb.push.valid == l1.push.valid) & (l1.push.ready == wb.push.ready) &
            (~l1.push.valid | ((wb.push.p.addr == l1.push.p.addr) &
                               (wb.push.p.mask == l1.push.p.mask) &
                               (wb.push.p.values.as_value() == l1.push.p.values.as_value()))))
    P.check("stream", "dram_out_is_l2s_output",
            (d.dram_out.valid == wb.dram_out.valid) & (wb.dram_out.ready == d.dram_out.ready) &
            (~d.dram_out.valid |
             (d.dram_out.payload.as_value() == wb.dram_out.payload.as_value())))
    P.check("stream", "push_ready_is_level_below_depth",
            l1.push.ready == (wb.level < d.fifo_depth))
    _idle(h, m, P)
    _line_counters(h, m, P)
    _line_conservation(h, m, P)


def _line_counters(h, m, P):
    """The cause strobes (a lane of the line write entering L2 has that cause), the hit and
    miss strobes, the running counts (gradients: a beat's masked lanes; DRAM line writes) and
    the step's discard totals (restated here: the totals on lines are not proven alone)."""
    d, l1, wb = h.dut, h.dut.l1, h.dut.writeback
    probe, N = l1.probe, h.lanes
    push = l1.push.p
    for strobe, cause in _cause_strobes(d):
        P.check("counters", f"{cause.name.lower()}_strobe_iff_such_a_write_enters_l2",
                strobe == (h.push_fire &
                           Cat(push.mask[i] & (push.causes[i] == cause) for i in range(N)).any()))
    small = probe.deciding.mask & ~probe.deciding_direct
    P.check("counters", "hit_or_miss_strobe_only_when_a_small_gradient_decides",
            ~(d.l1_hit | d.l1_miss) | (probe.in_stage[2] & small.any() & ~(d.l1_hit & d.l1_miss)))
    accepted = Signal(32, name="accepted_counted")
    written  = Signal(32, name="dram_writes_counted")
    beat = d.grad_in.p
    m.d.sync += [accepted.eq(accepted + Mux(h.accept, sum(beat.mask[i] for i in range(N)), 0)),
                 written.eq(written + h.pop)]
    P.check("counters", "accepted_count_counts_grad_in_handshakes",
            d.accepted_count == accepted)
    P.check("counters", "dram_write_count_counts_dram_out_handshakes",
            d.dram_write_count == written)
    # The step's totals: since the first gradient accepted after a completed barrier, the
    # discards counted (a lane each) and their errors added up.
    barrier = Signal(name="barrier_completed")
    with m.If(d.flush & d.idle):
        m.d.sync += barrier.eq(1)
    with m.Elif(h.accept):
        m.d.sync += barrier.eq(0)
    clear = barrier & h.accept
    count = Signal.like(d.discard_count, name="discards_counted")
    total = Signal.like(d.discard_sum, name="discards_summed")
    m.d.sync += [
        count.eq(Mux(clear, 0, count) + sum(d.discard[i] for i in range(N))),
        total.eq(Mux(clear, 0, total) +
                 sum(Mux(d.discard[i], d.discard_error[i], 0) for i in range(N))),
    ]
    P.check("counters", "barrier_done_until_the_next_accepted_gradient",
            d.discards.barrier_done == barrier)
    P.check("counters", "discard_count_counts_the_steps_discards", d.discard_count == count)
    P.check("counters", "discard_sum_adds_the_steps_discard_errors", d.discard_sum == total)
    P.check("counters", "l1_valid_count_and_l2_level_ports",
            (d.l1_valid_count == l1.valid_count) & (d.l2_level == wb.level) &
            (d.burst_active == wb.bursting))


def _line_conservation(h, m, P):
    """The tracked address (a lane of a line) from the ports to DRAM: its balance at the
    ports (accepted less DRAM's writes less the accounted discards) is ``h.balance``, the sum
    of L1's balance (L1's contract), the queue's shadow (its pairs and L1's output register)
    and L2's, which moves by the port's gradient once L1 accepts what the port accepts; with
    the whole storage read, the shadows of the queue and of L2 are their contents (group
    ``storage``), and at ``idle`` the balance is 0."""
    d = h.dut
    if h.covers:
        # From reset: the tracked address written to DRAM, a lane of it discarded, and the
        # compressor idle again (so the property below is not vacuous).
        name = "lines_idle_after_a_dram_write_and_a_discard_at_tracked"
        if h.covers is True or name in h.covers:
            P.cover(name, d.idle & h.tracked_dram_written & h.tracked_discarded)
    # The port's beat is L1's, so that L1's balance counts what the port accepted.
    P.check("system_conservation", "l1_accepts_what_the_port_accepts",
            h.accepted_at_port == h.l1_accepted)
    if not h.l2_ports:
        return
    # The queue's shadow against its contents (as one induction it did not finish in 150 s),
    # composed: the queue's own tracked sum (its contract, proven alone on the pair shape:
    # queue_sum) less the head's own write once the output register has taken it, plus the
    # output register, moves as the shadow does (the handshakes at L1's output register, no
    # slot summed) ...
    probe, queue = d.l1.probe, d.l1.probe.queue
    tracked = h.queue_tracked
    head_own = Signal(signed(h.bw), name="queue_head_own_taken_at_tracked")
    m.d.comb += head_own.eq(Mux(probe.own_taken, h.write_at_track(queue.r.payload.own), 0))
    with_register = Signal(signed(h.bw), name="queue_tracked_sum_with_the_output_register")
    m.d.comb += with_register.eq(tracked.total - head_own +
                                 Mux(probe.out_valid, h.write_at_track(probe.out), 0))
    P.check("storage", "queue_shadow_is_its_tracked_sum_with_the_output_register",
            h.queue_sum == with_register, only_for=["storage"])
    # ... the slots below i, as the harness counts them (the head's own write left out once
    # taken), are what the queue's contract counts less that write if the head is below i,
    # slot by slot in the same cycle (as one step over every slot this did not finish in
    # 15 minutes) ...
    real_below = Const(0, signed(h.bw))
    below_fact = None
    for i, term in enumerate(h.queue_real_terms):
        real_next = Signal(signed(h.bw), name=f"queue_real_slots_below{i + 1}")
        counted = Signal(signed(h.bw), name=f"queue_counted_slots_below{i + 1}")
        m.d.comb += [real_next.eq(real_below + term),
                     counted.eq(tracked.slots_below[i + 1] -
                                Mux(queue.r_ptr <= i, head_own, 0))]
        name = f"queue_slots_below{i + 1}_hold_the_counted_less_the_head_own_write_taken"
        P.check("storage", name, real_next == counted,
                now=([below_fact] if below_fact else []) +
                    ["queue/valid_iff_not_empty",
                     "pipeline/own_taken_only_with_a_pair_at_the_head"],
                only_for=["storage"])
        below_fact, real_below = f"storage/{name}", real_next
    # ... and so the shadow is what the slots and the output register hold, in the same cycle
    # (with the queue's tracked sum over its slots, proven alone).
    P.check("storage", "queue_shadow_sum_matches_its_contents",
            h.queue_sum == h.queue_real_sum,
            now=["queue/r_ptr_below_depth", "queue_sum/tracked_sum_is_what_its_slots_hold",
                 "storage/queue_shadow_is_its_tracked_sum_with_the_output_register",
                 below_fact])
    # (L2's contract states the newest write's copy for the tracked write; every write's
    # slot is read here, so that merges into any write add up.)
    wb = d.writeback
    slots = Array(p.data.as_value() for p in h.l2_ports)
    P.check("storage", "l2_newest_copy_is_its_slot",
            ~wb.newest_waiting | (wb.newest.as_value() == slots[wb.newest_ptr]))
    # (With L2's pointer facts of the same cycle: L2's contract, proven alone.)
    P.check("storage", "l2_shadow_sum_matches_storage", h.l2_sum == h.l2_real_sum,
            now=[f"l2/{name}" for name in (
                "w_ptr_below_depth", "r_ptr_below_depth", "count_at_most_depth",
                "w_ptr_eq_r_ptr_plus_count_mod_depth", "level_eq_count_plus_out_valid")] +
                ["combine/newest_waiting_iff_storage_holds_a_write",
                 "combine/newest_is_the_slot_before_w_ptr", "storage/l2_newest_copy_is_its_slot"])
    P.check("system_conservation", "tracked_address_conserved_at_idle",
            ~d.idle | (h.balance == 0),
            now=["storage/queue_shadow_sum_matches_its_contents",
                 "storage/l2_shadow_sum_matches_storage",
                 "idle/idle_implies_queue_and_l2_storage_empty",
                 "conservation/idle_implies_accepted_eq_queued"])
