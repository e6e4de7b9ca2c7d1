"""Covers: situations the proofs must be able to reach (else they may pass vacuously)."""

from amaranth import *
from amaranth.asserts import Initial

__all__ = ["add", "constrain", "check_stimulus", "STIMULI", "MODES", "PROGRESS_COVER"]

#: The liveness cover (DRAM fair): some gradient accepted in exactly the N-th cycle of being
#: offered, N the progress bound.
PROGRESS_COVER = "progress_bound_met_with_equality"


def add(h, m, P, only=None):
    """Add the covers; ``only``: the names to add (``None``: every one that applies)."""
    d, l1, wb = h.dut, h.dut.l1, h.dut.writeback
    probe = l1.probe

    props = P

    class Chosen:   # the property set, adding only the chosen covers
        def cover(self, name, test):
            if only is not None and name not in only:
                return
            if h.stimulus is not None:
                # Under a directed stimulus the job checks only its last step (SymbiYosys
                # ``skip``: one solver call instead of one per step), so each cover there
                # reads "reached in this step or an earlier one"; the trace shows the step.
                seen = Signal(name=f"reached_{name}")
                m.d.sync += seen.eq(seen | test)
                test = seen | test
            props.cover(name, test)
    P = Chosen()
    if h.fairness is not None:
        # Liveness covers (DRAM fair): the progress bound N is met with equality, i.e. some
        # gradient is accepted in exactly its N-th cycle of being offered.
        P.cover(PROGRESS_COVER,
                h.accept & ~d.flush & (h.progress_wait == h.progress - 1))
        return
    for strobe in ("direct_write", "accum_write", "max_updates_write", "evict_write",
                   "flush_write"):
        if strobe == "evict_write" and d.max_updates == 1:
            continue
        if strobe in ("accum_write", "flush_write") and d.max_updates == 1:
            continue   # with max_updates == 1 no entry is ever held
        P.cover(f"cause_{strobe}", getattr(d, strobe))
    # The run-time modes: each does something (else their properties could pass vacuously).
    P.cover("cause_stochastic_write", d.stochastic_write)
    P.cover("tiny_miss_dropped", d.discard & ~l1.push.valid)
    P.cover("bypassed_gradient_written_direct",
            h.stage_window[4] & probe.pushes)
    # The threshold an EMA-judged gradient is judged by is the harness's ``judged`` (L1
    # computes it in s1 from the EMA value and settings the gradient took along; the
    # payload's ``threshold`` is not it).
    g2 = h.stage[2]
    P.cover("ema_threshold_judged_between_its_bounds",
            h.stage_valid[2] & g2.ema & (h.judged[2] > g2.ema_min) & (h.judged[2] < g2.ema_max))
    P.cover("l2_full_with_dram_stalled",
            (wb.level == d.fifo_depth) & d.dram_out.valid & ~d.dram_out.ready)
    if d.max_updates > 1:
        full_at_flush = Signal(name="flush_with_every_way_valid")
        with m.If(~d.flush):
            m.d.sync += full_at_flush.eq(0)
        with m.Elif(l1.valid_count == d.sets * d.ways):
            m.d.sync += full_at_flush.eq(1)
        P.cover("flush_completes_with_every_way_valid", full_at_flush & d.flush & d.idle)
        # A hit on the entry the gradient before decided on (s3's correction), and a row
        # forwarded to s2 from each later stage (the read could not see them).
        P.cover("hit_on_entry_written_the_cycle_before",
                l1.hit & probe.s3_same_addr & h.s4_writes)
        for i, (name, valid) in enumerate([("s4", h.s4_writes), ("h1", probe.h1_valid),
                                           ("h2", probe.h2_valid)]):
            P.cover(f"s2_row_forwarded_from_{name}", probe.in_stage[1] & probe.s2_fwd[i] & valid)


#: Directed stimuli for the deep covers (``FormalHarness(stimulus=NAME)``): the free inputs are
#: constrained by assumptions to one input sequence (reset in the first cycle only), so the
#: cover BMC has one run to follow, hundreds of cycles deep, instead of a search over every
#: input. A cover reached under a stimulus is still a real run of the design from reset (the
#: solver's trace, on which SymbiYosys checks every assertion too); what it does not show is
#: that the *free* inputs reach it, which the free-input covers (no stimulus) still do where
#: they can. The harness's own choices (tracked address 0, the FIFO contract following the
#: first write) are pinned as well. ``n`` counts the gradients accepted since reset:
#:
#: * ``one_address``: address 0, gradient +1, threshold the largest: a miss, then hits on the
#:   entry written the cycle before, until its ``max_updates``-th update writes it out; DRAM
#:   always ready, no flush.
#: * ``l2_full``: address 0, gradient +1, threshold 0 (every gradient is written directly);
#:   DRAM never ready, so L2 fills up.
#: * ``direct_zeros``: address 0, gradient 0, threshold 0: ``|0| >= 0``, so every gradient is
#:   written directly, with the value 0 (which no sum can show missing); DRAM always ready.
#: * ``fill_then_flush``: gradient ``n`` goes to address ``n`` (set ``n % sets``, tag
#:   ``n // sets``) with the largest threshold, for ``n < sets * ways``, which fills every way
#:   of every set; then ``flush`` is raised and held; DRAM always ready.
#: * ``hit_while_l2_full``: gradient 0 goes to address 0 with the largest threshold (a miss
#:   that allocates an entry, no write); gradients 1 to ``fifo_depth`` to address 1 with
#:   threshold 0 (direct writes that fill L2); then address 0 with threshold 2 (not direct,
#:   since ``|g| < 2``: a hit whose sum 2 reaches the threshold, so an accumulated write that
#:   waits in s1 for the full L2); gradient +1, DRAM never ready.
#: * ``burst_then_drain``: ``burst_size`` direct writes (address 0, gradient +1, threshold 0)
#:   with DRAM stalled, which starts a burst; then no input and DRAM always ready, so the
#:   burst must empty L2.
#: * ``write_then_flush``: one direct write (address 0, gradient -1: negative, so that a
#:   sign lost on the way shows; threshold 0), then ``flush`` held until the cycle after
#:   ``idle`` answers it, then dropped, with a gradient offered all along (the same, after the
#:   flush); DRAM always ready.
#: * ``flush_dropped_in_scan``: two gradients (+1, the largest threshold: misses that
#:   allocate) to address 0 and address 1 (sets 0 and 1), then ``flush`` raised and dropped in
#:   the first cycle of the flush scan, with gradients to address 1 offered all along; DRAM
#:   always ready. L1 must finish the set it scans (set 0, whose entry it writes out) and go
#:   back to work, although set 1 holds an entry.
#: * ``evict_in_one_set``: gradient ``n`` goes to address ``n * sets`` (set 0, tag ``n``) with
#:   the largest threshold: ``ways`` misses fill set 0, and every later one evicts its victim;
#:   DRAM always ready.
#: * ``discard_then_flush``: the dual threshold on, mode drop (``small_threshold`` 2,
#:   ``stochastic`` 0; :data:`MODES`), the largest threshold, address 0: gradient +1 (a tiny
#:   miss, discarded and accounted: the step's ``discard_count`` becomes 1), then ``flush``
#:   held until the cycle after ``idle`` answers it, then dropped, with gradient +2 offered all
#:   along (not tiny: after the barrier it is accepted, a miss that allocates, and its
#:   acceptance clears the step's totals); DRAM always ready.
#:
#: * ``cross_threshold``: address 0, gradient +1, threshold 2: a miss that allocates, then a hit
#:   whose sum 2 reaches the threshold (an accumulated write), again and again, each gradient
#:   on the row its predecessors wrote in the cycles before (forwarded to ``s2`` from ``s4``,
#:   ``h1``, ``h2``); DRAM always ready.
#: * ``stochastic_rounding``: the dual threshold on, mode stochastic (``small_threshold`` 2,
#:   ``stochastic`` 1), address 0, gradient -1 (negative, so that a sign lost on the way
#:   shows), the largest threshold: every gradient is a tiny miss; with the random bits 0 (the
#:   simulation's; the solver may pick any) each is written as ``-small_threshold`` (cause
#:   ``STOCHASTIC``); DRAM always ready.
#: * ``bypass_window``: window 0 on and holding address 0 only, address 0, gradient +1, the
#:   largest threshold: each gradient is judged against 0 and written directly; DRAM always
#:   ready.
#: * ``ema_threshold``: the EMA threshold on (``ema_shift`` 0, so the EMA is the last accepted
#:   ``|g|``; scale 1.0; bounds 0 and 3), address 0, gradient +1: from the second gradient on,
#:   each is judged against 1, strictly between the bounds; DRAM always ready.
#:
#: Every run-time mode is off under a stimulus, but those :data:`MODES` sets for it.
#:
#: Besides the deep covers, the mutation check (``proofs.mutants``) uses them for bounded
#: checks from reset (of every safety assertion, or of progress and termination) on the
#: mutants that only a long run shows on the default configuration.
STIMULI = {
    "one_address": ["cause_max_updates_write", "hit_on_entry_written_the_cycle_before"],
    "l2_full": ["cause_direct_write", "l2_full_with_dram_stalled"],
    "direct_zeros": ["cause_direct_write"],
    "fill_then_flush": ["cause_flush_write", "flush_completes_with_every_way_valid"],
    "hit_while_l2_full": ["cause_accum_write", "l2_full_with_dram_stalled"],
    "burst_then_drain": ["cause_direct_write"],
    "write_then_flush": ["cause_direct_write"],
    "flush_dropped_in_scan": ["cause_flush_write"],
    "evict_in_one_set": ["cause_evict_write"],
    "discard_then_flush": ["tiny_miss_dropped"],
    "cross_threshold": ["cause_accum_write", "s2_row_forwarded_from_s4",
                        "s2_row_forwarded_from_h1", "s2_row_forwarded_from_h2"],
    "stochastic_rounding": ["cause_stochastic_write"],
    "bypass_window": ["bypassed_gradient_written_direct"],
    "ema_threshold": ["ema_threshold_judged_between_its_bounds"],
}

#: The run-time mode inputs a stimulus sets (``{stimulus: {input: value}}``, the inputs of
#: :data:`design.params.MODES_OFF`); every other mode input is 0 (off) under every stimulus.
MODES = {
    "discard_then_flush": {"small_threshold": 2, "stochastic": 0},
    "stochastic_rounding": {"small_threshold": 2, "stochastic": 1},
    "bypass_window": {"bypass__0__enable": 1, "bypass__0__base": 0, "bypass__0__limit": 0},
    "ema_threshold": {"ema_enable": 1, "ema_shift": 0, "ema_scale": 16, "ema_min": 0,
                      "ema_max": 3},
}


def check_stimulus(name):
    """``name`` if it names a stimulus of :data:`STIMULI` (or is ``None``), else ValueError."""
    if name is not None and name not in STIMULI:
        raise ValueError(f"stimulus {name!r}: expected one of {', '.join(STIMULI)}")
    return name


def constrain(h, m, P, name):
    """Assume the directed stimulus ``name`` (one of :data:`STIMULI`) on the free inputs."""
    check_stimulus(name)
    n = _accepted_so_far(h, m)
    valid, addr, grad, thresh, flush, ready = _stimulus_inputs(h, m, name, n)
    # The harness's own free choices are pinned too (they do not drive the design): the
    # tracked address is the stimulus's first one, and the FIFO contract follows the first
    # write into L2. Every run-time mode is off, but those the stimulus sets (MODES).
    modes = MODES.get(name, {})
    unknown = set(modes) - set(h.in_modes)
    if unknown:
        raise ValueError(f"stimulus {name!r} sets {', '.join(sorted(unknown))}: not a "
                         f"mode input ({', '.join(h.in_modes)})")
    inputs = [(h.track, 0), (h.fifo_pick, 1), (h.in_valid, valid), (h.in_addr, addr),
              (h.in_grad, grad), (h.in_thresh, thresh), (h.in_flush, flush),
              (h.in_ready, ready)]
    inputs += [(sig, modes.get(mode, 0)) for mode, sig in h.in_modes.items()]
    if h.simulate:
        # The simulation starts from power-up, as the solver's run does from its reset cycle.
        # The queue's contract follows its first write too (the solver may pick any).
        m.d.comb += [sig.eq(value) for sig, value in inputs + [(h.queue_pick, 1)]]
        return
    P.assume("input", f"stimulus_{name}",
             (h.rst == Initial()) & Cat(sig == value for sig, value in inputs).all())


def _accepted_so_far(h, m):
    """The gradients accepted so far, saturating above every count a stimulus uses."""
    d = h.dut
    entries = d.sets * d.ways
    limit = max(entries, d.fifo_depth + 1)     # n saturates above every count used below
    n = Signal(range(limit + 2), name="stimulus_accepted")
    with m.If(h.accept & (n <= limit)):
        m.d.sync += n.eq(n + 1)
    return n


def _stimulus_inputs(h, m, name, n):
    """The stimulus ``name``'s ``valid``, ``addr``, ``grad``, ``thresh``, ``flush`` and DRAM
    ``ready``, from the count ``n`` of gradients accepted so far."""
    d = h.dut
    top = (1 << h.gw) - 1
    entries = d.sets * d.ways

    def flushed():
        """Whether idle has answered flush yet (a register)."""
        seen = Signal(name="stimulus_flushed")
        with m.If(h.in_flush & d.idle):
            m.d.sync += seen.eq(1)
        return seen

    valid, addr, grad, thresh, flush, ready = 1, 0, 1, top, 0, 1
    if name == "l2_full":
        thresh, ready = 0, 0
    elif name == "direct_zeros":
        grad, thresh = 0, 0
    elif name == "fill_then_flush":
        valid, addr, flush = n < entries, n, n >= entries
    elif name == "hit_while_l2_full":
        first, filling = n == 0, (n >= 1) & (n <= d.fifo_depth)
        addr, thresh, ready = Mux(filling, 1, 0), Mux(first, top, Mux(filling, 0, 2)), 0
    elif name == "write_then_flush":
        grad, thresh, flush = -1, 0, (n >= 1) & ~flushed()
    elif name == "flush_dropped_in_scan":
        scanned = Signal(name="stimulus_scanned")
        with m.If(h.scan):
            m.d.sync += scanned.eq(1)
        addr, flush = Mux(n == 0, 0, 1), (n >= 2) & ~scanned
    elif name == "evict_in_one_set":
        addr = n * d.sets
    elif name == "discard_then_flush":
        grad, flush = Mux(n == 0, 1, 2), (n >= 1) & ~flushed()
    elif name == "cross_threshold":
        thresh = 2
    elif name == "stochastic_rounding":
        grad = -1
    elif name == "burst_then_drain":
        stalled = n < d.burst_size
        valid, thresh, ready = stalled, 0, ~stalled
    return valid, addr, grad, thresh, flush, ready
