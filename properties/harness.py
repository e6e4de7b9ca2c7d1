"""The formal harness: a :class:`design.GradientCompressor` with free inputs, shadow state and
read ports, bound to the properties of :mod:`.assumptions`, :mod:`.outputs`,
:mod:`.invariants` and :mod:`.covers`.

Every input of the design, the run-time modes' included, is driven by an ``AnySeq`` (named
``in_*`` here, so that traces and witness files show them), the stochastic mode's random bits
too (``in_random``, in place of the LFSR: :class:`FreeRandom`), and the tracked address is an
``AnyConst``. The clock domain's reset
is a free input too (``rst``): unless ``reset="initial"``, the design may be reset at any cycle
and every property must still hold. Assertions are not checked in a cycle in which ``rst`` is
high, and the "previous cycle" registers of the stream rules are cleared by reset.

Built with ``lanes=N`` it holds the compressor on lines (``GradientCompressor(lanes=N)``; with
``alone``, the line L1 alone), the tracked address a lane of a line.

Built with ``alone=True`` the same harness holds L1 alone (:class:`L1Alone`), for L1's own
contract (:data:`L1_GROUPS`): every input of L1 free, no L2, streamer or mode input. Each
property module adds L1's groups in both and the system's only in the system
(``h.system``), where L1's are assumed like every component's.
"""

from amaranth import *
from amaranth.asserts import AnyConst, AnySeq, Initial
from amaranth.hdl import Assume

from gradient_compressor.design import GradientCompressor, L1Accumulator, L1State, LineAccumulator
from gradient_compressor.design.compressor import connect_random
from gradient_compressor.design.compare import at_most
from gradient_compressor.design.layouts import value_width
from gradient_compressor.design.params import (DEFAULTS, LFSR_WIDTH, MODE_INPUTS, Config,
                                               ema_fraction_bits, mode_inputs, port)

from .base import PropertySet, balance_width
from . import (assumptions, bound, outputs, invariants, covers, discards, writeback, policy,
               liveness, modes, pipeline, streamer, throughput)
from .queue import contract as queue_contract, line_weight
from .covers import check_stimulus
from .liveness import flush_bound, measure_max, progress_bound

__all__ = ["FormalHarness", "CONFIGS", "FreeRandom", "L1Alone", "L1_GROUPS", "mode_widths",
           "flush_bound", "progress_bound", "measure_max"]


def mode_widths(dut):
    """``{port name: width}`` of the design's run-time mode inputs
    (:func:`design.params.mode_inputs`)."""
    return {name: len(port(dut, name)) for name in mode_inputs(dut.bypass_windows)}


class FreeRandom(Elaboratable):
    """Stands in for :class:`design.modes.Lfsr` in the proofs: the same members, but the state
    it takes after a ``step`` (or a ``load``) is arbitrary: ``source``, a free input of the
    harness, shown as ``next_state`` (what a step would give) and taken on a step, as the LFSR
    takes its next state. Its state at power-up and after reset is arbitrary too. So the random
    bits of every stochastic decision are any bits at all, and change only on a step, as the
    LFSR's."""

    def __init__(self):
        self.seed   = Signal(LFSR_WIDTH, name="lfsr_seed_unused")
        self.load   = Signal(name="lfsr_load")
        self.step   = Signal(name="lfsr_step")
        self.state  = Signal(LFSR_WIDTH, name="random_bits", reset_less=True)
        self.next_state = Signal(LFSR_WIDTH, name="random_next_bits")
        self.source = Signal(LFSR_WIDTH, name="random_source")

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.next_state.eq(self.source)
        with m.If(self.step | self.load):
            m.d.sync += self.state.eq(self.next_state)
        return m


#: The property groups of L1's own contract: proven on L1 alone (:class:`L1Alone`), assumed in
#: the system's jobs (for the past cycles, as every property outside a job's focus).
L1_GROUPS = ["conservation", "valid_count", "overflow", "unique_tag", "pipeline", "forwarding",
             "policy", "dual_threshold"]


class L1Alone(Elaboratable):
    """L1 alone, for the proof of its own contract (:data:`L1_GROUPS`): an
    :class:`~design.l1.L1Accumulator` whose every input is free (the harness drives them: the
    whole classified payload, ``flush``, ``push.ready``), with the system's names for what L1's
    properties read (``grad_in`` is L1's, ``idle`` L1's, ``l1_hit`` its ``hit``, ...) and its
    random bits fed as the compressor feeds them (:func:`design.compressor.connect_random`),
    from a :class:`FreeRandom` that loads only while L1 is idle (what L1 requires of its
    random source; the system's ``idle`` group proves the compressor does so)."""

    @classmethod
    def of(cls, config, *, l1_class=L1Accumulator, whole_line=None):
        """L1 alone of ``config`` (a :class:`~design.params.Config` or a mapping of its
        parameters, ``lanes`` among them, else one lane); ``whole_line``: the line L1 deciding
        by the whole-line rule (None: as ``config`` says, else not)."""
        if whole_line is None:
            whole_line = config.get("whole_line", False)
        return cls(l1_class=l1_class, lanes=config.get("lanes", 1), whole_line=whole_line,
                   **geometry(config))

    def __init__(self, *, addr_width, grad_width, sets, ways, max_updates, fifo_depth,
                 burst_size, l1_class=L1Accumulator, lanes=1, whole_line=False):
        self.addr_width, self.grad_width = addr_width, grad_width
        self.sets, self.ways, self.max_updates = sets, ways, max_updates
        self.fifo_depth, self.burst_size = fifo_depth, burst_size
        # lanes > 1: the line L1 (l1_class is then a LineAccumulator), beats of lanes gradients
        extra = {} if lanes == 1 else {"lanes": lanes}
        extra["whole_line"] = whole_line
        self.l1 = l1_class(addr_width=addr_width, grad_width=grad_width, sets=sets,
                           ways=ways, max_updates=max_updates, **extra)
        self.lfsr = FreeRandom()
        l1 = self.l1
        self.grad_in, self.flush, self.idle = l1.grad_in, l1.flush, l1.idle
        self.l1_hit, self.l1_miss = l1.hit, l1.miss
        self.discard, self.discard_addr, self.discard_error = (
            l1.discard, l1.discard_addr, l1.discard_error)

    def elaborate(self, platform):
        m = Module()
        m.submodules.l1 = self.l1
        m.submodules.lfsr = self.lfsr
        connect_random(m, self.lfsr, self.l1)
        return m


#: Named configurations (:class:`~design.params.Config`, one lane; a harness takes its lanes).
CONFIGS = {
    # 2 sets x 2 ways: hits, misses, free ways, eviction with round-robin victim, threshold and
    # max_updates writes, L2 full / bursts, flush scan over several sets.
    "small":   Config(addr_width=3, grad_width=4, sets=2, ways=2, max_updates=3,
                      fifo_depth=4, burst_size=2),
    # direct-mapped, max_updates == 1 (every small gradient written at once), L2 depth that
    # is not a power of two (pointer wrap), burst of 1.
    "dm":      Config(addr_width=3, grad_width=3, sets=4, ways=1, max_updates=1,
                      fifo_depth=3, burst_size=1),
    # 1 set x 4 ways, max_updates 2, L2 depth 2 (fills at once), burst = depth.
    "assoc":   Config(addr_width=3, grad_width=3, sets=1, ways=4, max_updates=2,
                      fifo_depth=2, burst_size=2),
    # 4 sets x 2 ways, wider tags, L2 of 8 with bursts of 4, max_updates 4.
    "mid":     Config(addr_width=4, grad_width=4, sets=4, ways=2, max_updates=4,
                      fifo_depth=8, burst_size=4),
    # The default configuration of the product.
    "default": Config(),
    # A large one: L1 in block RAM (1024 x 4), L2 of 64 with bursts of 32.
    "large":   Config(sets=1024, fifo_depth=64, burst_size=32),
}


def geometry(config):
    """The parameters of ``config`` that every component of the compressor reads (no lanes,
    no bypass windows): :data:`design.params.DEFAULTS`' keys."""
    return {name: config[name] for name in DEFAULTS}


class FormalHarness(Elaboratable):
    """Parameters
    ----------
    config : Config or dict
        The configuration (:class:`~design.params.Config`, or its keyword arguments), of one
        lane: ``lanes`` is given apart.
    focus : set of str or None
        Property groups (or single ``"group/name"`` properties) asserted, ``"-group/name"``
        excepted (others assumed for the past cycles); ``None``: all.
    fairness : int or None
        K: assume DRAM ``ready`` at least once in every K cycles, and assert progress and flush
        termination. ``None``: DRAM ready is free; no liveness property.
    whole_storage : bool
        Read every L1 set and every L2 entry (comb read ports), to prove the global facts
        (``valid_count`` equals the valid entries of every set, L2's shadow sum equals its
        contents) directly. Only for small configurations: without it those facts are
        proven per cycle and per tracked set, and composed on paper (docs/proofs.md).
    reset : "any" or "initial"
        Free reset, or reset only in the first cycle.
    covers : bool or list of str
        Emit the cover statements (``True``: every one that applies; a list: those named).
    assume_others : bool
        Assertions outside ``focus`` are assumed for the past cycles (``True``) or dropped.
    design : module or None
        A module providing ``GradientCompressor`` (the mutation check passes a mutant copy).
    stimulus : str or None
        Deep covers only: assume the directed input sequence of that name
        (:data:`.covers.STIMULI`, reset in the first cycle only) instead of free inputs.
    shared_read : bool
        Read the set ``s3`` decides on through the tracked set's port when the two are equal
        (the same memory word; a solver aid for some jobs, ``proofs/jobs.py`` ``TUNING``).
    alone : bool
        L1 alone (:class:`L1Alone`, for its own contract, :data:`L1_GROUPS`) instead of the
        whole compressor: every input of L1 free; no L2, streamer, EMA unit or mode inputs.
    simulate : bool
        Build the harness for the Amaranth simulator (``proofs/simulate.py``) instead of a
        solver: the free inputs (``AnySeq``, ``AnyConst``) are left undriven (the stimulus
        drives them, or they stay 0), there is no ``Initial`` (the simulation starts from
        power-up), and each property is a signal (``sim_props``) that the simulation reads
        in every cycle.
    driven : bool
        Simulation without a stimulus: the testbench drives the free inputs (``in_*``: a
        recorded run, ``proofs/simulate.py``).
    lanes : int
        Gradients per beat (> 1: the compressor, or L1, on lines).
    whole_line : bool
        With ``alone`` only: L1 (one lane or lines) built deciding by the whole-line rule,
        and the properties stated for it (the policy model follows the rule, held sums fit
        ``grad_width`` bits, the transfer bound of :mod:`.bound`).
    """

    def __init__(self, config, *, focus=None, fairness=None, whole_storage=False,
                 reset="any", covers=False, design=None, assume_others=True,
                 stimulus=None, shared_read=False, simulate=False, driven=False, alone=False,
                 lanes=1, whole_line=False):
        self._check_arguments(simulate=simulate, stimulus=stimulus, driven=driven,
                              alone=alone, fairness=fairness, covers=covers, lanes=lanes)
        self.stimulus = stimulus
        self.simulate = simulate
        self.sim_props = []   # simulate: (Prop, Signal) per property
        self.shared_read = shared_read
        self.config = Config.of(config, lanes=lanes, whole_line=whole_line)
        self.system = not alone
        # Lanes of a beat (> 1: the line L1, design.LineAccumulator); the tracked address is
        # then a line's lane: its low lane_bits are the tracked lane, chosen freely and held.
        self.lanes = lanes
        self.lane_bits = (lanes - 1).bit_length()
        self.whole_line = whole_line
        self.dut = self._design_under_test(design)
        self.focus, self.fairness = focus, fairness
        self.whole_storage = whole_storage
        self.reset, self.covers = reset, covers
        self.assume_others = assume_others
        self.props = PropertySet()

        d = self.dut
        self.aw, self.gw = d.addr_width, d.grad_width
        self.vw = value_width(self.gw)
        self.set_bits = (d.sets - 1).bit_length()
        # Width of the tracked balances (base.balance_width).
        self.bw = balance_width(self.vw, d.fifo_depth, d.l1.QUEUE_DEPTH)
        if fairness is None:
            self.bound = self.progress = None
        else:
            # (On lines, the measure and bounds of lines: properties/liveness.py.)
            self.bound = flush_bound(d.sets, d.ways, d.fifo_depth, fairness, lanes=lanes)
            self.progress = progress_bound(d.sets, d.ways, fairness, d.fifo_depth,
                                           d.burst_size, lanes=lanes)
        self._add_read_ports()

    def _check_arguments(self, *, simulate, stimulus, driven, alone, fairness, covers, lanes):
        """The combinations of arguments a harness refuses (before any part of it is built)."""
        check_stimulus(stimulus)
        if simulate and stimulus is None and not driven:
            raise ValueError("simulate: needs a stimulus to drive the inputs, or a testbench "
                             "that drives them (driven=True; else every input stays 0)")
        if alone and (fairness is not None or stimulus is not None or
                      (covers and lanes == 1)):
            self._MustUse__silence = True       # never elaborated
            raise ValueError("alone: L1's contract has no liveness, stimulus or cover here")
        if lanes > 1 and not alone and (stimulus is not None or simulate):
            self._MustUse__silence = True       # never elaborated
            raise ValueError("lanes: the compressor on lines takes no stimulus and is not "
                             "simulated here")

    def _design_under_test(self, design):
        """The compressor, or L1 alone (one lane or lines), of ``design`` (a mutant copy of the
        design package, or ``None``: the project's own). The system's LFSR is replaced by
        free random bits (elaborate() drives them) before the design is elaborated (L1Alone
        has a FreeRandom already)."""
        if not self.system:
            l1_class = ((L1Accumulator, LineAccumulator) if design is None else
                        (design.L1Accumulator, design.LineAccumulator))[self.lanes > 1]
            return L1Alone.of(self.config, l1_class=l1_class, whole_line=self.whole_line)
        dut = (GradientCompressor if design is None else design.GradientCompressor)(**self.config)
        dut.lfsr._MustUse__silence = True     # not elaborated, on purpose
        dut.lfsr = FreeRandom()
        return dut

    def _add_read_ports(self):
        """The storage's read ports the properties read: added here, before the design is
        elaborated."""
        d = self.dut
        probe = d.l1.probe
        self.l1_track_port = probe.storage.read_port(domain="comb")   # the tracked set
        self.l1_s2_port    = probe.storage.read_port(domain="comb")   # the set s2 or the scan has
        self.l1_s3_port    = probe.storage.read_port(domain="comb")   # the set s3 decides on
        self.l1_write_port = probe.storage.read_port(domain="comb")   # the set being written
        self.l1_ports = ([probe.storage.read_port(domain="comb") for _ in range(d.sets)]
                         if self.whole_storage else [])
        self.l2_ports = []
        if self.system:
            wb = d.writeback
            self.l2_track_port = wb.storage.read_port(domain="comb")   # the tracked L2 entry
            self.l2_ports = ([wb.storage.read_port(domain="comb") for _ in range(d.fifo_depth)]
                             if self.whole_storage else [])
        # L1's output queue is small (QUEUE_DEPTH writes): every entry is read in every job.
        self.queue_ports = [probe.queue.storage.read_port(domain="comb")
                            for _ in range(probe.queue.depth)]

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = self.dut
        self._free_inputs(m)
        self._views(m)
        self._accepted_stages(m)
        self._rows(m)
        q_in_t, in_t, disc_t = self._pipeline_and_queue_shadows(m)
        self._balances(m, q_in_t, in_t, disc_t)
        self._storage_views(m)
        self._mode_rules(m)
        return self._properties(m)

    def _free_inputs(self, m):
        """Every input of the design (or of L1 alone), the run-time modes and the random bits
        free, each named ``in_*``; the reset free unless ``reset="initial"``."""
        d = self.dut
        self.rst = ResetSignal()
        if self.reset == "initial" and not self.simulate:
            m.d.comb += Assume(self.rst == Initial())
        self.in_valid   = Signal()
        self.in_addr    = Signal(self.aw)
        self.in_grad    = Signal(signed(self.gw))
        self.in_thresh  = Signal(self.gw)
        self.in_flush   = Signal()
        self.in_ready   = Signal()
        self.track      = Signal(self.aw)   # the tracked address
        self.fifo_pick  = Signal()          # which write into L2 the FIFO contract follows
        for sig in (self.in_valid, self.in_addr, self.in_grad, self.in_thresh, self.in_flush,
                    self.in_ready, self.fifo_pick):
            self.free(m, sig)
        self.free(m, self.track, AnyConst)
        if self.lanes == 1:
            m.d.comb += [
                d.grad_in.valid.eq(self.in_valid),
                d.grad_in.p.addr.eq(self.in_addr),
                d.grad_in.p.grad.eq(self.in_grad),
                d.flush.eq(self.in_flush),
            ]
        elif self.system:
            # The compressor on lines: a beat's address as the core gives it (the streamer
            # clears its low lane_bits: lane i is at line + i), its gradients and mask free
            # (in_grads, in_mask).
            m.d.comb += [
                d.grad_in.valid.eq(self.in_valid),
                d.grad_in.p.addr.eq(self.in_addr),
                d.flush.eq(self.in_flush),
            ]
            self.in_payload = {}
            for name in ("grads", "mask"):
                field = getattr(d.grad_in.p, name)
                sig = Signal(len(Value.cast(field)), name=f"in_{name}")
                self.in_payload[name] = sig
                self.free(m, sig)
                m.d.comb += field.eq(sig)
        else:
            # A beat's address is its line's (the streamer clears the low lane_bits: lane i is
            # at line + i); its gradients, mask and bypass bits are payload fields (in_grads,
            # in_mask, in_bypass: _free_l1_inputs).
            m.d.comb += [
                d.grad_in.valid.eq(self.in_valid),
                d.grad_in.p.addr.eq(Cat(Const(0, self.lane_bits),
                                        self.in_addr[self.lane_bits:])),
                d.flush.eq(self.in_flush),
            ]
        if self.system:
            m.d.comb += [d.threshold.eq(self.in_thresh), d.dram_out.ready.eq(self.in_ready)]
        else:
            self._free_l1_inputs(m)
        # The run-time modes (design/modes.py) are free too, every one of them an AnySeq, so
        # they may change in any cycle: any threshold trajectory (``threshold`` or the EMA's),
        # any small_threshold and dual-threshold mode, any EMA settings, any bypass windows.
        # Each is named in_<input> (traces, witnesses). rtlil.convert ties an undriven input
        # to 0, and a proof would then pass for nothing: tests/test_properties.py checks that
        # every input of the design is driven from here.
        self.in_modes = {}
        for name, width in (mode_widths(d) if self.system else {}).items():
            sig = Signal(width, name=f"in_{name}")
            self.in_modes[name] = sig
            self.free(m, sig)
            m.d.comb += port(d, name).eq(sig)
        # The stochastic mode's random bits: a free input in place of the LFSR's next state,
        # which __init__ swapped for FreeRandom. What is proven for any bits holds for the
        # LFSR's; the LFSR itself is checked against the reference model in tests.
        self.in_random = Signal(LFSR_WIDTH)
        self.free(m, self.in_random)
        m.d.comb += d.lfsr.source.eq(self.in_random)

    def _views(self, m):
        """Handy views of the design's handshakes and of the tracked address."""
        d = self.dut
        l1 = d.l1
        probe = l1.probe
        self.accept = Signal()
        self.push_fire = Signal()
        self.pop = Signal()
        m.d.comb += [
            self.accept.eq(d.grad_in.valid & d.grad_in.ready),
            self.push_fire.eq(l1.push.valid & l1.push.ready),
            self.pop.eq(d.dram_out.valid & d.dram_out.ready if self.system else 0),
        ]
        self.track_set = self.set_of(self.track)
        self.track_tag = self.tag_of(self.track)
        if self.lanes > 1:
            # The tracked address is lane track_lane of line track_line.
            self.track_lane = self.track[:self.lane_bits]
            self.track_line = Cat(Const(0, self.lane_bits), self.track[self.lane_bits:])
        self.init = Signal()
        self.scan = Signal()
        m.d.comb += [self.init.eq(probe.state == L1State.INIT),
                     self.scan.eq(probe.state == L1State.SCAN)]
        # A write enters L1's output queue (from s4 or from the flush scan).
        queue = probe.queue
        self.queue_in = Signal()
        m.d.comb += self.queue_in.eq(queue.w.valid & queue.w.ready)
        # s4 writes its row to storage this cycle.
        self.s4_writes = Signal()
        m.d.comb += self.s4_writes.eq(probe.in_stage[3] & probe.writes_row)

    def _accepted_stages(self, m):
        """The harness's own copy of each gradient in the pipeline, as accepted."""
        d = self.dut
        l1 = d.l1
        # The pipeline never stalls: the gradient accepted in cycle t is in stage s<i> in
        # cycle t+i. The harness keeps its own copy of each one, as accepted (the payload the
        # streamer gave, and whether it lay in a bypass window), so that the properties can
        # compare each stage with it (pipeline group) and the model can take it in s3.
        # Whether the gradient on grad_in lies in an enabled bypass window (restated from
        # design/modes.py: base <= addr <= limit) travels along with it. The compares are
        # design.compare's, as the design makes them: with the operators here the solver had
        # to find the two forms equal in every induction step and default's mode job stalled
        # (over 6 minutes against 8 s). That they equal the operators at these widths is
        # proven once, by tests/test_compare.py (Yosys' SAT solver).
        if self.system and self.lanes > 1:
            # On lines: per lane, whether its address (the line's + i) lies in an enabled
            # window.
            self.in_window = Signal(self.lanes)
            line = self.in_addr[self.lane_bits:]
            lane_addr = [Cat(Const(k, self.lane_bits), line) for k in range(self.lanes)]
            m.d.comb += self.in_window.eq(Cat(
                Cat(self.in_modes[f"bypass__{i}__enable"] &
                    at_most(self.in_modes[f"bypass__{i}__base"], addr) &
                    at_most(addr, self.in_modes[f"bypass__{i}__limit"])
                    for i in range(d.bypass_windows)).any()
                for addr in lane_addr))
        else:
            self.in_window = Signal()
        if self.system and self.lanes == 1:
            m.d.comb += self.in_window.eq(Cat(
                self.in_modes[f"bypass__{i}__enable"] &
                at_most(self.in_modes[f"bypass__{i}__base"], self.in_addr) &
                at_most(self.in_addr, self.in_modes[f"bypass__{i}__limit"])
                for i in range(d.bypass_windows)).any())

        layout = l1.grad_in.payload.shape()
        self.stage_valid = [None]
        self.stage = [None]
        self.stage_window = [None]
        valid, payload, window = self.accept, l1.grad_in.payload, self.in_window
        for i in range(1, 5):
            v = Signal(name=f"accepted_in_s{i}")
            p = Signal(layout, name=f"accepted_s{i}")
            w = Signal(len(window), name=f"accepted_s{i}_in_window")
            m.d.sync += [v.eq(valid), p.eq(payload),
                         w.eq(valid & window if len(window) == 1 else Mux(valid, window, 0))]
            self.stage_valid.append(v)
            self.stage.append(p)
            self.stage_window.append(w)
            valid, payload, window = v, p, w

    def _rows(self, m):
        """L1's rows as they are now (the tracked set, the sets the stages work on) and what L1
        holds for the tracked address."""
        d = self.dut
        l1 = d.l1
        probe = l1.probe
        # L1 rows. The set as it is in cycle t: the row s4 writes in t if it writes that set,
        # else the row in storage (which holds every write before t).
        write = probe.storage_write
        m.d.comb += [
            self.l1_track_port.addr.eq(self.track_set),
            self.l1_s2_port.addr.eq(Mux(self.scan, probe.scan_set, self.set_of(probe.s2.addr))),
            self.l1_s3_port.addr.eq(self.set_of(probe.deciding.addr)),
            self.l1_write_port.addr.eq(write.addr),
        ]
        for i, port in enumerate(self.l1_ports):
            m.d.comb += port.addr.eq(i)
        for i, port in enumerate(self.l2_ports):
            m.d.comb += port.addr.eq(i)

        def current(port, set_, name, shared=False):
            # shared: the tracked set is read through its own port whichever port asks (the
            # same memory word, one SMT array read), so that the solver need not carry the
            # equality of two read addresses into the equality of their data. Used for s3's
            # set in the jobs that ask for it (``shared_read``, proofs/jobs.py TUNING).
            stored = port.data
            if shared:
                stored = Mux(set_ == self.track_set, self.l1_track_port.data, port.data)
            row = Signal(l1.row_layout, name=name)
            m.d.comb += row.eq(Mux(self.s4_writes & (probe.s4_set == set_), probe.s4_row, stored))
            return row
        self.current = current
        # The tracked set as it is now (0 while INIT: the SRAM is not cleared yet), with the
        # ways the flush scan has already written out of it (scan_done) taken as free: the
        # scan writes the set back only after its last valid way.
        self.track_row = current(self.l1_track_port, self.track_set, "tracked_set_row")
        self.track_held = Signal(l1.row_layout, name="tracked_set_held")
        m.d.comb += self.track_held.eq(self.track_row)
        with m.If(self.scan & (probe.scan_set == self.track_set)):
            for i, way in enumerate(self.track_held.ways):
                m.d.comb += way.valid.eq(self.track_row.ways[i].valid & ~probe.scan_done[i])

        # What L1 holds for the tracked address.
        row = self.track_held
        self.l1_sum = Signal(signed(self.bw))
        self.l1_n   = Signal(range(d.ways + 1))
        matches = [Signal(name=f"track_match{i}") for i in range(d.ways)]
        for i, way in enumerate(row.ways):
            m.d.comb += matches[i].eq(way.valid & (way.tag == self.track_tag))
        # (On lines: the tracked lane's sum of the way holding the tracked line.)
        way_sum = ((lambda way: way.sum) if self.lanes == 1 else
                   (lambda way: way.sums[self.track_lane]))
        m.d.comb += [
            self.l1_sum.eq(Mux(self.init, 0, sum(Mux(matches[i], way_sum(row.ways[i]), 0)
                                                 for i in range(d.ways)))),
            self.l1_n.eq(Mux(self.init, 0, sum(matches[i] for i in range(d.ways)))),
        ]

    def _pipeline_and_queue_shadows(self, m):
        """What the pipeline and L1's output queue hold for the tracked address: shadows and the
        queue's contents. Returns the tracked address's queue write, L2 push and discard."""
        d = self.dut
        l1 = d.l1
        probe = l1.probe
        queue = probe.queue
        if self.lanes > 1:
            return self._line_shadows(m)
        # What the pipeline holds for the tracked address: the gradients in s1 ... s3, as
        # accepted (s4's part is the policy model's: policy.py).
        self.stages_sum = Signal(signed(self.bw))
        stage_t = [self.stage_valid[i] & (self.stage[i].addr == self.track) for i in (1, 2, 3)]
        m.d.comb += self.stages_sum.eq(sum(Mux(v, self.stage[i].grad, 0)
                                           for v, i in zip(stage_t, (1, 2, 3))))
        disc_t = d.discard & (d.discard_addr == self.track)

        # Shadow of L1's output queue for the tracked address: written minus taken by L2.
        self.queue_sum = Signal(signed(self.bw))
        self.queue_n   = Signal(range(queue.depth + 1))
        q_in_t = self.queue_in & (queue.w.payload.addr == self.track)
        in_t   = self.push_fire & (l1.push.p.addr == self.track)
        m.d.sync += [
            self.queue_sum.eq(self.queue_sum + Mux(q_in_t, queue.w.payload.value, 0)
                              - Mux(in_t, l1.push.p.value, 0)),
            self.queue_n.eq(self.queue_n + q_in_t - in_t),
        ]
        # ... and the queue's contents (every entry is read).
        q_offset = [Mux(i >= queue.r_ptr, i - queue.r_ptr, i + queue.depth - queue.r_ptr)
                    for i in range(queue.depth)]
        self.queue_occupied = [Signal(name=f"queue_occupied{i}") for i in range(queue.depth)]
        for occ, off in zip(self.queue_occupied, q_offset):
            m.d.comb += occ.eq(off < queue.level)
        q_match = [occ & (p.data.addr == self.track)
                   for occ, p in zip(self.queue_occupied, self.queue_ports)]
        self.queue_real_sum = Signal(signed(self.bw))
        self.queue_real_n   = Signal(range(queue.depth + 1))
        m.d.comb += [
            self.queue_real_sum.eq(sum(Mux(e, p.data.value, 0)
                                       for e, p in zip(q_match, self.queue_ports))),
            self.queue_real_n.eq(sum(q_match)),
        ]
        return q_in_t, in_t, disc_t

    def _line_shadows(self, m):
        """On lines: what the pipeline holds for the tracked address (its lane of the beats in
        ``s1`` ... ``s3`` of its line), what enters L1's output queue for it (a pair per
        place: the beat's own line write and a victim's), what ``push`` offers for it, and
        what a discard accounts for it. Returns them as ``_balances`` takes them: values."""
        d = self.dut
        l1 = d.l1
        probe = l1.probe
        queue = probe.queue
        self.stages_sum = Signal(signed(self.bw))
        m.d.comb += self.stages_sum.eq(sum(
            Mux(self.stage_valid[i], self.at_track(self.stage[i].addr, self.stage[i].mask,
                                                   self.stage[i].grads), 0)
            for i in (1, 2, 3)))
        pair = queue.w.payload
        q_in = Signal(signed(self.bw), name="queued_at_tracked")
        out = Signal(signed(self.bw), name="pushed_at_tracked")
        disc = Signal(signed(self.bw), name="discarded_at_tracked")
        m.d.comb += [
            q_in.eq(Mux(self.queue_in, self.write_at_track(pair.own) +
                        self.write_at_track(pair.victim), 0)),
            out.eq(Mux(self.push_fire, self.write_at_track(l1.push.p), 0)),
            disc.eq(self.at_track(d.discard_addr, d.discard, d.discard_error)),
        ]
        self.queue_sum = Signal(signed(self.bw))
        m.d.sync += self.queue_sum.eq(self.queue_sum + q_in - out)
        return q_in, out, disc

    def _balances(self, m, q_in_t, in_t, disc_t):
        """The tracked address's shadow of L2 and its balances: accepted less written (to
        DRAM, or into the queue) less accounted discards."""
        d = self.dut
        l1 = d.l1
        probe = l1.probe
        queue = probe.queue
        if self.lanes > 1:
            # (On lines _line_shadows passes the values themselves.)
            q_in, out, disc = q_in_t, in_t, disc_t
            beat = l1.grad_in.p
            self.l1_balance = Signal(signed(self.bw))
            self.l1_accepted = Signal(signed(self.bw), name="l1_accepted_tracked")
            self.l1_passed = Signal(signed(self.bw), name="l1_queued_or_discarded_tracked")
            self.l1_delta = Signal(signed(self.bw), name="l1_balance_delta")
            m.d.comb += [
                self.l1_accepted.eq(Mux(self.accept, self.at_track(beat.addr, beat.mask,
                                                                   beat.grads), 0)),
                self.l1_passed.eq(q_in + disc),
                self.l1_delta.eq(self.l1_accepted - self.l1_passed),
            ]
            m.d.sync += self.l1_balance.eq(self.l1_balance + self.l1_delta)
            # (For a cover: something was queued, and something discarded, for it since reset.)
            self.tracked_written = Signal(name="tracked_queued_since_reset")
            self.tracked_discarded = Signal(name="tracked_discarded_since_reset")
            with m.If(q_in != 0):
                m.d.sync += self.tracked_written.eq(1)
            with m.If(disc != 0):
                m.d.sync += self.tracked_discarded.eq(1)
            if self.system:
                self._line_system_balances(m, out, disc)
            return
        acc_t = self.accept & (d.grad_in.p.addr == self.track)
        if self.system:
            # Shadow of L2 for the tracked address: pushed by L1 minus written to DRAM.
            self.l2_sum = Signal(signed(self.bw))
            self.l2_n   = Signal(range(d.fifo_depth + 1))
            out_t = self.pop & (d.dram_out.p.addr == self.track)
            m.d.sync += [
                self.l2_sum.eq(self.l2_sum + Mux(in_t, l1.push.p.value, 0)
                               - Mux(out_t, d.dram_out.p.value, 0)),
                self.l2_n.eq(self.l2_n + in_t - out_t),
            ]
            # Balance: accepted minus written to DRAM minus accounted discards (dual
            # threshold: a tiny miss dropped, or the rounding error of its stochastic write),
            # as the design reports them, for the tracked address.
            self.balance = Signal(signed(self.bw))
            m.d.sync += self.balance.eq(self.balance + Mux(acc_t, d.grad_in.p.grad, 0)
                                        - Mux(out_t, d.dram_out.p.value, 0)
                                        - Mux(disc_t, d.discard_error, 0))
        # Accepted minus written into the queue minus accounted, for the tracked address: what
        # L1 and its pipeline must hold.
        # (Its change per cycle is named, l1_delta: the conservation proofs restate it.)
        self.l1_balance = Signal(signed(self.bw))
        self.l1_accepted = Signal(signed(self.bw), name="l1_accepted_tracked")
        self.l1_passed = Signal(signed(self.bw), name="l1_queued_or_discarded_tracked")
        self.l1_delta = Signal(signed(self.bw), name="l1_balance_delta")
        m.d.comb += [
            self.l1_accepted.eq(Mux(acc_t, d.grad_in.p.grad, 0)),
            self.l1_passed.eq(Mux(q_in_t, queue.w.payload.value, 0) +
                              Mux(disc_t, d.discard_error, 0)),
            self.l1_delta.eq(self.l1_accepted - self.l1_passed),
        ]
        m.d.sync += self.l1_balance.eq(self.l1_balance + self.l1_delta)


    def _line_system_balances(self, m, pushed, disc):
        """The compressor on lines: for the tracked address, what was accepted at the port
        (lane ``track_lane`` of a beat whose address, low bits cleared, is ``track_line``),
        what DRAM received (lane ``track_lane`` of a line write to ``track_line``), the
        shadow of L2 (pushed less written to DRAM) and the balance (accepted less written to
        DRAM less accounted discards)."""
        d = self.dut
        beat = d.grad_in.p
        line = Cat(Const(0, self.lane_bits), beat.addr[self.lane_bits:])
        self.accepted_at_port = Signal(signed(self.bw), name="accepted_at_port_tracked")
        self.dram_written = Signal(signed(self.bw), name="dram_written_tracked")
        m.d.comb += [
            self.accepted_at_port.eq(Mux(self.accept, self.at_track(line, beat.mask,
                                                                    beat.grads), 0)),
            self.dram_written.eq(Mux(self.pop, self.write_at_track(d.dram_out.p), 0)),
        ]
        self.l2_sum = Signal(signed(self.bw))
        m.d.sync += self.l2_sum.eq(self.l2_sum + pushed - self.dram_written)
        # The balance: the three shadows' sum, which moves in each cycle by L1's accepted
        # gradient (the port's: stream/l1_takes_the_beat_as_the_core_gave_it) less DRAM's
        # write less the discard (what enters the queue and what L1 pushes into L2 cancel).
        # (As a register of its own, updated at the ports, its equality with this sum did not
        # finish its induction in 90 s, even at depth 1.)
        self.balance = Signal(signed(self.bw), name="balance_tracked")
        m.d.comb += self.balance.eq(self.l1_balance + self.queue_sum + self.l2_sum)
        # (For a cover: DRAM received something for it since reset.)
        self.tracked_dram_written = Signal(name="tracked_written_to_dram_since_reset")
        with m.If(self.dram_written != 0):
            m.d.sync += self.tracked_dram_written.eq(1)

    def _storage_views(self, m):
        """With the whole storage read: L2's contents and the number of valid L1 entries."""
        d = self.dut
        probe = d.l1.probe
        wb = d.writeback if self.system else None
        current = self.current
        # L2 contents, from the storage itself (whole_storage).
        if self.l2_ports and self.lanes > 1:
            self._line_storage_views(m)
        elif self.l2_ports:
            self._l2_occupancy(m)
            out_match = wb.out_valid & (d.dram_out.p.addr == self.track)
            ent_match = [self.l2_occupied[i] & (p.data.addr == self.track)
                         for i, p in enumerate(self.l2_ports)]
            self.l2_real_sum = Signal(signed(self.bw))
            self.l2_real_n   = Signal(range(d.fifo_depth + 2))
            m.d.comb += [
                self.l2_real_sum.eq(Mux(out_match, d.dram_out.p.value, 0) +
                                    sum(Mux(e, p.data.value, 0)
                                        for e, p in zip(ent_match, self.l2_ports))),
                self.l2_real_n.eq(out_match + sum(ent_match)),
            ]

        # Number of valid L1 entries, from the storage itself (whole_storage): each set as it
        # is now, less the ways the scan has written out of the set it scans.
        if self.l1_ports:
            self.l1_total = Signal(range(d.sets * d.ways + 1))
            m.d.comb += self.l1_total.eq(
                sum(self.popcount(current(p, i, f"l1_set{i}_row")) for i, p in
                    enumerate(self.l1_ports)) -
                Mux(self.scan, sum(probe.scan_done[i] for i in range(d.ways)), 0))

    def _l2_occupancy(self, m):
        """``l2_occupied[i]``: L2's storage slot ``i`` holds a write (between its read and
        write pointers), with the whole storage read."""
        wb, depth = self.dut.writeback, self.dut.fifo_depth
        self.l2_occupied = []
        for i in range(len(self.l2_ports)):
            occ = Signal(name=f"l2_occupied{i}")
            off = Mux(i >= wb.r_ptr, i - wb.r_ptr, i + depth - wb.r_ptr)
            m.d.comb += occ.eq(off < wb.count)
            self.l2_occupied.append(occ)

    def _line_storage_views(self, m):
        """The compressor on lines, with the whole storage read: what L2 (its storage and its
        output register) and L1's output queue (each place's pair, less the head's own write
        once the output register has taken it, and the output register) hold for the tracked
        address."""
        d = self.dut
        probe, wb, queue = d.l1.probe, d.writeback, d.l1.probe.queue
        self._l2_occupancy(m)
        self.l2_real_sum = Signal(signed(self.bw))
        m.d.comb += self.l2_real_sum.eq(
            Mux(wb.out_valid, self.write_at_track(d.dram_out.p), 0) +
            sum(Mux(occ, self.write_at_track(p.data), 0)
                for occ, p in zip(self.l2_occupied, self.l2_ports)))
        self.queue_occupied = []
        terms = []
        for i, port in enumerate(self.queue_ports):
            occ = Signal(name=f"queue_occupied{i}")
            off = Mux(i >= queue.r_ptr, i - queue.r_ptr, i + queue.depth - queue.r_ptr)
            m.d.comb += occ.eq(off < queue.level)
            self.queue_occupied.append(occ)
            own_gone = probe.own_taken & (queue.r_ptr == i)
            terms.append(Mux(occ, Mux(own_gone, 0, self.write_at_track(port.data.own)) +
                         self.write_at_track(port.data.victim), 0))
        self.queue_real_sum = Signal(signed(self.bw))
        m.d.comb += self.queue_real_sum.eq(
            Mux(probe.out_valid, self.write_at_track(probe.out), 0) + sum(terms))
        self.queue_real_terms = terms

    def _mode_rules(self, m):
        """The threshold each gradient is judged against and the stochastic rule in force, restated
        as the design computes them."""
        d = self.dut
        probe = d.l1.probe
        # The threshold each gradient is judged against: its payload's, or in the EMA mode the
        # EMA threshold of the payload's EMA value and settings (modes.ema_threshold, restated
        # here on s1's copy, as the design computes it: the solver meets one multiply).
        s1 = self.stage[1]
        self.judged = [None, None]
        judged2 = Signal(self.gw, name="judged_threshold_s2")
        # (On lines the EMA has log2(lanes) more fraction bits; a lane in a bypass window is
        # judged against 0 instead: lane_threshold.)
        fraction = {} if self.lanes == 1 else {"fraction_bits": ema_fraction_bits(self.lanes)}
        l1_s1 = probe.s1
        m.d.sync += judged2.eq(Mux(s1.ema, modes.ema_threshold(
            self, l1_s1.ema_source, l1_s1.ema_scale, l1_s1.ema_min, l1_s1.ema_max, **fraction),
            s1.threshold))
        judged3 = Signal(self.gw, name="judged_threshold_s3")
        m.d.sync += judged3.eq(judged2)
        self.judged += [judged2, judged3]

        # The stochastic rule (modes.stochastic_writes) for the gradient in s3, on the random
        # bits in force when it decides: the LFSR's state now, which is its state of the
        # cycle before, or the next state of then if it stepped then. The rule is applied a
        # cycle ahead, in s2, on both, as the design does (the solver meets its multiplies).
        s2 = probe.s2
        if self.lanes > 1:
            # On lines: the rule per lane, every lane of a beat on the same bits (one draw).
            N = self.lanes
            chance = Signal(2 * N, name="stochastic_rule_s3")
            level = self.rounding_level(s2.small_threshold)
            m.d.sync += chance.eq(Cat(
                Cat(modes.stochastic_writes(self, bits, s2.grads[i], level)
                    for i in range(N))
                for bits in (d.lfsr.state, d.lfsr.next_state)))
            self.stepped_last = Signal(name="random_stepped_last_cycle")
            m.d.sync += self.stepped_last.eq(d.lfsr.step)
            self.s3_rule = Signal(N, name="stochastic_rule_in_force_s3")
            m.d.comb += self.s3_rule.eq(chance.word_select(self.stepped_last, N))
            self.s3_chance = chance
            return
        chance = Signal(2, name="stochastic_rule_s3")
        # One lane: with the rounding level s2 holds, which pipeline/s2_level_is_its_rounding_level
        # states is the rounding level of its small threshold, so that the rule's multiplies
        # and the design's take the same operands.
        level = probe.s2_level
        m.d.sync += chance.eq(Cat(
            modes.stochastic_writes(self, d.lfsr.state, s2.grad, level),
            modes.stochastic_writes(self, d.lfsr.next_state, s2.grad, level)))
        self.stepped_last = Signal(name="random_stepped_last_cycle")
        m.d.sync += self.stepped_last.eq(d.lfsr.step)
        self.s3_rule = Signal(name="stochastic_rule_in_force_s3")
        m.d.comb += self.s3_rule.eq(chance.bit_select(self.stepped_last, 1))
        self.s3_chance = chance

    def rounding_level(self, small_threshold):
        """The value a tiny gradient is rounded to: ``small_threshold``, under the whole-line
        rule at most ``2**(grad_width-1) - 1`` (model/lines.py)."""
        if not self.whole_line:
            return small_threshold
        top = 2 ** (self.gw - 1) - 1
        return Mux(small_threshold > top, top, small_threshold)

    def _properties(self, m):
        """The components' contracts (assumed) and every property module's properties; then the
        statements (or, in simulation, a signal per property)."""
        d = self.dut
        probe = d.l1.probe
        wb = d.writeback if self.system else None
        P = self.props
        # The components' own contracts (proven alone, properties/component.py): assumed.
        self.queue_pick = Signal(name="queue_pick")
        self.free(m, self.queue_pick)
        # (On lines, with the whole storage read, with its tracked sum: the queue's slots'
        # part of storage/queue_shadow_sum_matches_its_contents, assumed only by storage's
        # jobs.)
        line_sum = self.system and self.lanes > 1 and bool(self.l2_ports)
        self.queue_tracked = queue_contract(
            m, P, probe.queue, pick=self.queue_pick, ports=self.queue_ports,
            **(dict(weigh=line_weight(self.track, self.lane_bits), width=self.bw,
                    only_for=["storage"]) if line_sum else {}))
        if self.system:
            writeback.contract(m, P, wb, pick=self.fifo_pick, track_port=self.l2_track_port)
        if self.system and self.lanes == 1:
            # (On lines the streamer and the step totals are not proven alone: the system's
            # jobs meet their logic itself.)
            streamer.contract(m, P, d.streamer)
            discards.contract(m, P, d.discards)
            # (The EMA unit's contract is not assumed here: the ema group proves the EMA exact
            # itself, and the unit's threshold, a multiply the design leaves unused, would
            # only give the solver more to carry.)

        # Each module adds L1's contract (L1_GROUPS) and, in the system (self.system), the
        # system's groups; L1's are assumed there.
        assumptions.add(self, m, P)
        policy.add(self, m, P)       # first: the conservation properties use its model
        outputs.add(self, m, P)
        invariants.add(self, m, P)
        pipeline.add(self, m, P)
        modes.add(self, m, P)
        if self.whole_line:
            bound.add(self, m, P)    # the transfer bound of the whole-line rule
        if self.system and (self.lanes == 1 or self.whole_line):
            # (On lines under the line policy a beat that writes two lines takes two of L2's
            # cycles: no beat per cycle to prove. Under the whole-line rule a beat causes at
            # most one line write.)
            throughput.add(self, m, P)
        if self.fairness is not None:
            liveness.add(self, m, P)
        if self.stimulus is not None:
            covers.constrain(self, m, P, self.stimulus)
        if self.covers and self.lanes == 1:
            covers.add(self, m, P, only=None if self.covers is True else set(self.covers))
        if self.simulate:
            # Each property a signal, read by the simulation once the cycle has settled (the
            # simulator would check an Assert on every evaluation, glitches included).
            self.sim_props = []
            for prop in P.props:
                sig = Signal(name=f"{prop.kind}_{prop.full_name}")
                m.d.comb += sig.eq(prop.test)
                self.sim_props.append((prop, sig))
            return m
        # No assertion is checked in a reset cycle.
        P.emit(m, focus=self.focus, covers=bool(self.covers), guard=self.rst,
               assume_others=self.assume_others)
        return m

    def _free_l1_inputs(self, m):
        """L1 alone: the payload's other fields (named ``in_<field>``), ``push.ready``
        (``in_ready``) and the random source's load (``in_lfsr_load``, taken only while L1 is
        idle) are free."""
        d = self.dut
        payload = d.grad_in.p
        m.d.comb += [payload.threshold.eq(self.in_thresh), d.l1.push.ready.eq(self.in_ready)]
        self.in_payload = {}
        for name, _ in payload.shape():
            if name in ("addr", "grad", "threshold"):     # in_addr, in_grad, in_thresh
                continue
            field = getattr(payload, name)
            # (Value.cast: the width of a field in bits, also of one per lane, a View of an
            # ArrayLayout, whose len() counts its lanes.)
            sig = Signal(len(Value.cast(field)), name=f"in_{name}")
            self.in_payload[name] = sig
            self.free(m, sig)
            m.d.comb += field.eq(sig)
        load = Signal(name="in_lfsr_load")
        self.free(m, load)
        m.d.comb += d.lfsr.load.eq(load & d.l1.idle)

    def free(self, m, signal, kind=AnySeq):
        """Drive ``signal`` from a free value (``kind``: ``AnySeq``, or ``AnyConst``), except
        in simulation, where the stimulus drives it (or it stays 0)."""
        if not self.simulate:
            m.d.comb += signal.eq(kind(signal.shape()))

    def set_of(self, addr):
        """The L1 set index of an address (on lines, of its line: past the lane bits)."""
        return addr[self.lane_bits:self.lane_bits + self.set_bits]   # 0 bits wide with one set

    @staticmethod
    def lane_threshold(threshold, bypass):
        """On lines: the threshold a lane is judged against (0 for a lane in a bypass
        window)."""
        return Mux(bypass, 0, threshold)

    def tag_of(self, addr):
        """The L1 tag of an address (on lines, of its line)."""
        return addr[self.lane_bits + self.set_bits:]

    def at_track(self, addr, mask, values):
        """On lines: the value a line-shaped thing (a beat, a line write, an entry: a line
        address ``addr``, a lane ``mask``, ``values`` per lane) has at the tracked address
        (lane ``track_lane`` of ``track_line``), else 0."""
        return Mux(mask.bit_select(self.track_lane, 1) & (addr == self.track_line),
                   values[self.track_lane], 0)

    def line_of(self, index, tag):
        """On lines: the line address of set ``index``'s line with ``tag``."""
        return Cat(Const(0, self.lane_bits), index, tag)

    def write_at_track(self, write):
        """On lines: what a line write (``line_write_layout``) adds at the tracked address."""
        return self.at_track(write.addr, write.mask, write.values)

    @staticmethod
    def popcount(row):
        """Number of valid ways in an L1 row."""
        return sum(way.valid for way in row.ways)

    # Signals shown in trace tables and replayed from witnesses.
    INPUTS = (["rst", "in_valid", "in_addr", "in_grad", "in_thresh", "in_flush", "in_ready",
               "in_random"] + [f"in_{name}" for name in MODE_INPUTS])
