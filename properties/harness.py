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
"""

from amaranth import *
from amaranth.asserts import AnyConst, AnySeq, Initial
from amaranth.hdl import Assume

from design import GradientCompressor, L1State
from design.layouts import value_width
from design.params import BYPASS_WINDOWS, DEFAULTS, LFSR_WIDTH, MODES_OFF

from .base import PropertySet
from . import assumptions, outputs, invariants, covers, writeback, policy, liveness, modes
from .covers import check_stimulus
from .liveness import flush_bound, measure_max, progress_bound

__all__ = ["FormalHarness", "CONFIGS", "FreeRandom", "mode_inputs", "flush_bound",
           "progress_bound", "measure_max"]


def mode_inputs(dut):
    """``{name: width}`` of the design's run-time mode inputs: every key of
    :data:`design.params.MODES_OFF`, and the LFSR's seed and load."""
    names = list(MODES_OFF) + ["lfsr_seed", "lfsr_load"]
    return {name: len(getattr(dut, name)) for name in names}


class FreeRandom(Elaboratable):
    """Stands in for :class:`design.modes.Lfsr` in the proofs: the same members, but the state
    it takes after a ``step`` (or a ``load``, or reset) is arbitrary: ``source``, a free input
    of the harness, in the first cycle after one, held from then on. So the random bits of
    every stochastic decision are any bits at all, held while the decision waits for L2, as
    the LFSR holds its state between steps (a write being offered must not change)."""

    def __init__(self):
        self.seed   = Signal(LFSR_WIDTH, name="lfsr_seed_unused")
        self.load   = Signal(name="lfsr_load")
        self.step   = Signal(name="lfsr_step")
        self.state  = Signal(LFSR_WIDTH, name="random_bits")
        self.source = Signal(LFSR_WIDTH, name="random_source")

    def elaborate(self, platform):
        m = Module()
        fresh = Signal(init=1, name="random_fresh")     # stepped, loaded or reset last cycle
        held  = Signal(LFSR_WIDTH, name="random_held")
        m.d.sync += [fresh.eq(self.step | self.load), held.eq(self.state)]
        m.d.comb += self.state.eq(Mux(fresh, self.source, held))
        return m


#: Named configurations (keyword arguments of GradientCompressor).
CONFIGS = {
    # 2 sets x 2 ways: hits, misses, free ways, eviction with round-robin victim, threshold and
    # max_updates writes, L2 full / bursts, flush scan over several sets.
    "small":   dict(addr_width=3, grad_width=4, sets=2, ways=2, max_updates=3,
                    fifo_depth=4, burst_size=2),
    # direct-mapped, max_updates == 1 (every small gradient written at once), L2 depth that
    # is not a power of two (pointer wrap), burst of 1.
    "dm":      dict(addr_width=3, grad_width=3, sets=4, ways=1, max_updates=1,
                    fifo_depth=3, burst_size=1),
    # 1 set x 4 ways, max_updates 2, L2 depth 2 (fills at once), burst = depth.
    "assoc":   dict(addr_width=3, grad_width=3, sets=1, ways=4, max_updates=2,
                    fifo_depth=2, burst_size=2),
    # 4 sets x 2 ways, wider tags, L2 of 8 with bursts of 4, max_updates 4.
    "mid":     dict(addr_width=4, grad_width=4, sets=4, ways=2, max_updates=4,
                    fifo_depth=8, burst_size=4),
    # The default configuration of the product.
    "default": dict(DEFAULTS),
    # A large one: L1 in block RAM (1024 x 4), L2 of 64 with bursts of 32.
    "large":   dict(DEFAULTS, sets=1024, fifo_depth=64, burst_size=32),
}


class FormalHarness(Elaboratable):
    """Parameters
    ----------
    config : dict
        GradientCompressor keyword arguments.
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
    """

    def __init__(self, config, *, focus=None, fairness=None, whole_storage=False,
                 reset="any", covers=False, design=None, assume_others=True,
                 stimulus=None):
        self.stimulus = check_stimulus(stimulus)
        self.config = dict(config)
        cls = GradientCompressor if design is None else design.GradientCompressor
        self.dut = cls(**self.config)
        # The random bits are free in the proofs (elaborate() drives them): the LFSR is replaced
        # before the design is elaborated.
        self.dut.lfsr._MustUse__silence = True     # not elaborated, on purpose
        self.dut.lfsr = FreeRandom()
        self.focus, self.fairness = focus, fairness
        self.whole_storage = whole_storage
        self.reset, self.covers = reset, covers
        self.assume_others = assume_others
        self.props = PropertySet()

        d = self.dut
        self.aw, self.gw = d.addr_width, d.grad_width
        self.vw = value_width(self.gw)
        self.set_bits = (d.sets - 1).bit_length()
        # Width of the tracked balances: at most one L1 entry, s1 and every L2 entry for one
        # address, each |v| < 2**(vw-1).
        self.bw = self.vw + (d.fifo_depth + 2).bit_length() + 2
        if fairness is None:
            self.bound = self.progress = None
        else:
            self.bound = flush_bound(d.sets, d.ways, d.fifo_depth, fairness)
            self.progress = progress_bound(d.sets, d.ways, fairness, d.fifo_depth,
                                           d.burst_size)

        # Read ports: added here, before the design is elaborated.
        l1, wb = d.l1, d.writeback
        self.l1_track_port = l1.storage.read_port(domain="comb")   # the tracked set
        self.l1_s1_port    = l1.storage.read_port(domain="comb")   # the set s1 or the scan has
        self.l1_write_port = l1.storage.read_port(domain="comb")   # the set being written
        self.l2_track_port = wb.storage.read_port(domain="comb")   # the tracked L2 entry
        self.l1_ports = ([l1.storage.read_port(domain="comb") for _ in range(d.sets)]
                         if whole_storage else [])
        self.l2_ports = ([wb.storage.read_port(domain="comb") for _ in range(d.fifo_depth)]
                         if whole_storage else [])

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = d = self.dut
        P = self.props
        l1, wb = d.l1, d.writeback

        # -- free inputs -------------------------------------------------------------------
        self.rst = ResetSignal()
        if self.reset == "initial":
            m.d.comb += Assume(self.rst == Initial())
        self.in_valid   = Signal()
        self.in_addr    = Signal(self.aw)
        self.in_grad    = Signal(signed(self.gw))
        self.in_thresh  = Signal(self.gw)
        self.in_flush   = Signal()
        self.in_ready   = Signal()
        self.track      = Signal(self.aw)   # the tracked address
        self.fifo_pick  = Signal()          # which write into L2 the FIFO contract follows
        m.d.comb += [
            self.in_valid.eq(AnySeq(1)),
            self.in_addr.eq(AnySeq(self.aw)),
            self.in_grad.eq(AnySeq(signed(self.gw))),
            self.in_thresh.eq(AnySeq(self.gw)),
            self.in_flush.eq(AnySeq(1)),
            self.in_ready.eq(AnySeq(1)),
            self.track.eq(AnyConst(self.aw)),
            self.fifo_pick.eq(AnySeq(1)),
            d.grad_in.valid.eq(self.in_valid),
            d.grad_in.p.addr.eq(self.in_addr),
            d.grad_in.p.grad.eq(self.in_grad),
            d.threshold.eq(self.in_thresh),
            d.flush.eq(self.in_flush),
            d.dram_out.ready.eq(self.in_ready),
        ]
        # The run-time modes (design/modes.py) are free too, every one of them an AnySeq, so
        # they may change in any cycle: any threshold trajectory (``threshold`` or the EMA's),
        # any small_threshold and dual-threshold mode, any EMA settings, any bypass windows.
        # Each is named in_<input> (traces, witnesses). rtlil.convert ties an undriven input
        # to 0, and a proof would then pass for nothing: tests/test_properties.py checks that
        # every input of the design is driven from here.
        self.in_modes = {}
        for name, width in mode_inputs(d).items():
            sig = Signal(width, name=f"in_{name}")
            self.in_modes[name] = sig
            m.d.comb += [sig.eq(AnySeq(width)), getattr(d, name).eq(sig)]
        # The stochastic mode's random bits: a free input in place of the LFSR's next state,
        # which __init__ swapped for FreeRandom. What is proven for any bits holds for the
        # LFSR's; the LFSR itself is checked against the reference model in tests.
        self.in_random = Signal(LFSR_WIDTH)
        m.d.comb += [self.in_random.eq(AnySeq(LFSR_WIDTH)), d.lfsr.source.eq(self.in_random)]

        # -- handy views -------------------------------------------------------------------
        self.accept = Signal()
        self.push_fire = Signal()
        self.pop = Signal()
        m.d.comb += [
            self.accept.eq(d.grad_in.valid & d.grad_in.ready),
            self.push_fire.eq(l1.push.valid & l1.push.ready),
            self.pop.eq(d.dram_out.valid & d.dram_out.ready),
        ]
        self.track_set = self.set_of(self.track)
        self.track_tag = self.track[self.set_bits:]
        self.s1_set = self.set_of(l1.s1.addr)
        self.init = Signal()
        m.d.comb += self.init.eq(l1.state == L1State.INIT)
        # s1 commits its gradient this cycle (its push, if any, is taken).
        self.s1_commits = Signal()
        m.d.comb += self.s1_commits.eq((l1.state == L1State.RUN) & l1.s1_valid &
                                       (~l1.push.valid | l1.push.ready))

        # L1 rows
        write = l1.storage_write
        m.d.comb += [
            self.l1_track_port.addr.eq(self.track_set),
            self.l1_s1_port.addr.eq(Mux(l1.state == L1State.SCAN, l1.scan_set, self.s1_set)),
            self.l1_write_port.addr.eq(write.addr),
        ]
        for i, port in enumerate(self.l1_ports):
            m.d.comb += port.addr.eq(i)
        for i, port in enumerate(self.l2_ports):
            m.d.comb += port.addr.eq(i)

        # What L1 holds for the tracked address (0 while INIT: the SRAM is not cleared yet).
        row = self.l1_track_port.data
        self.l1_sum = Signal(signed(self.bw))
        self.l1_n   = Signal(range(d.ways + 1))
        matches = [Signal(name=f"track_match{i}") for i in range(d.ways)]
        for i, way in enumerate(row.ways):
            m.d.comb += matches[i].eq(way.valid & (way.tag == self.track_tag))
        m.d.comb += [
            self.l1_sum.eq(sum(Mux(matches[i], row.ways[i].sum, 0) for i in range(d.ways))),
            self.l1_n.eq(sum(matches[i] for i in range(d.ways))),
        ]

        # What s1 holds for the tracked address.
        self.s1_sum = Signal(signed(self.bw))
        self.s1_n   = Signal()
        m.d.comb += [
            self.s1_n.eq(l1.s1_valid & (l1.s1.addr == self.track)),
            self.s1_sum.eq(Mux(self.s1_n, l1.s1.grad, 0)),
        ]

        # Shadow of L2 for the tracked address: pushed by L1 minus written to DRAM.
        self.l2_sum = Signal(signed(self.bw))
        self.l2_n   = Signal(range(d.fifo_depth + 1))
        in_t  = self.push_fire & (l1.push.p.addr == self.track)
        out_t = self.pop & (d.dram_out.p.addr == self.track)
        m.d.sync += [
            self.l2_sum.eq(self.l2_sum + Mux(in_t, l1.push.p.value, 0)
                           - Mux(out_t, d.dram_out.p.value, 0)),
            self.l2_n.eq(self.l2_n + in_t - out_t),
        ]
        # Accounted discards for the tracked address (dual threshold: a tiny miss dropped, or
        # the rounding error of its stochastic write), as the design reports them.
        disc_t = d.discard & (d.discard_addr == self.track)
        # Balance: accepted minus written to DRAM minus accounted, for the tracked address.
        self.balance = Signal(signed(self.bw))
        acc_t = self.accept & (d.grad_in.p.addr == self.track)
        m.d.sync += self.balance.eq(self.balance + Mux(acc_t, d.grad_in.p.grad, 0)
                                    - Mux(out_t, d.dram_out.p.value, 0)
                                    - Mux(disc_t, d.discard_error, 0))
        # Accepted minus pushed to L2 minus accounted, for the tracked address: what L1 and s1
        # must hold.
        self.l1_balance = Signal(signed(self.bw))
        m.d.sync += self.l1_balance.eq(self.l1_balance + Mux(acc_t, d.grad_in.p.grad, 0)
                                       - Mux(in_t, l1.push.p.value, 0)
                                       - Mux(disc_t, d.discard_error, 0))

        # L2 contents, from the storage itself (whole_storage).
        if self.l2_ports:
            depth = d.fifo_depth
            self.l2_occupied = []
            for i, port in enumerate(self.l2_ports):
                occ = Signal(name=f"l2_occupied{i}")
                off = Mux(i >= wb.r_ptr, i - wb.r_ptr, i + depth - wb.r_ptr)
                m.d.comb += occ.eq(off < wb.count)
                self.l2_occupied.append(occ)
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

        # Number of valid L1 entries, from the storage itself (whole_storage).
        if self.l1_ports:
            self.l1_total = Signal(range(d.sets * d.ways + 1))
            m.d.comb += self.l1_total.eq(sum(way.valid for p in self.l1_ports
                                             for way in p.data.ways))

        # Whether the gradient on grad_in lies in an enabled bypass window (restated from
        # design/modes.py: base <= addr <= limit), and the same for the gradient in s1.
        self.in_window = Signal()
        m.d.comb += self.in_window.eq(Cat(
            self.in_modes[f"bypass{i}_enable"] &
            (self.in_modes[f"bypass{i}_base"] <= self.in_addr) &
            (self.in_addr <= self.in_modes[f"bypass{i}_limit"])
            for i in range(BYPASS_WINDOWS)).any())
        self.s1_in_window = Signal()
        with m.If(self.s1_commits):
            m.d.sync += self.s1_in_window.eq(0)
        with m.If(self.accept):
            m.d.sync += self.s1_in_window.eq(self.in_window)

        # s1 was loaded in the cycle before (its first cycle), and the stochastic rule
        # (modes.stochastic_writes) applied to the random bits of that cycle: the decision
        # the design must make, and hold while s1 waits. In s1's first cycle it is the same
        # expression on the same signals as the design's (so the solver meets one multiplier),
        # later a register (proven equal to the design's held decision: pipeline group).
        self.s1_new = Signal()
        m.d.sync += self.s1_new.eq(self.accept)
        self.s1_decision = Signal()
        decision_held = Signal(name="s1_decision_held")
        m.d.comb += self.s1_decision.eq(Mux(
            self.s1_new,
            modes.stochastic_writes(self, d.lfsr.state, l1.s1.grad, l1.s1.small_threshold),
            decision_held))
        m.d.sync += decision_held.eq(self.s1_decision)
        self.s1_decision_held = decision_held

        assumptions.add(self, m, P)
        outputs.add(self, m, P)
        invariants.add(self, m, P)
        writeback.add(self, m, P)
        policy.add(self, m, P)
        modes.add(self, m, P)
        if self.fairness is not None:
            liveness.add(self, m, P)
        if self.stimulus is not None:
            covers.constrain(self, m, P, self.stimulus)
        if self.covers:
            covers.add(self, m, P, only=None if self.covers is True else set(self.covers))
        # No assertion is checked in a reset cycle.
        P.emit(m, focus=self.focus, covers=bool(self.covers), guard=self.rst,
               assume_others=self.assume_others)
        return m

    def set_of(self, addr):
        """The L1 set index of an address."""
        return addr[:self.set_bits]     # 0 bits wide with one set

    @staticmethod
    def popcount(row):
        """Number of valid ways in an L1 row."""
        return sum(way.valid for way in row.ways)

    # Signals shown in trace tables and replayed from witnesses.
    INPUTS = (["rst", "in_valid", "in_addr", "in_grad", "in_thresh", "in_flush", "in_ready",
               "in_random"] + [f"in_{name}" for name in list(MODES_OFF) +
                               ["lfsr_seed", "lfsr_load"]])
