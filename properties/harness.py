"""The formal harness: a :class:`design.GradientCompressor` with free inputs, shadow state and
read ports, bound to the properties of :mod:`.assumptions`, :mod:`.outputs`,
:mod:`.invariants` and :mod:`.covers`.

Every input of the design is driven by an ``AnySeq`` (named ``in_*`` here, so that traces and
witness files show them), and the tracked address is an ``AnyConst``. The clock domain's reset
is a free input too (``rst``): unless ``reset="initial"``, the design may be reset at any cycle
and every property must still hold. Assertions are not checked in a cycle in which ``rst`` is
high, and the "previous cycle" registers of the stream rules are cleared by reset.
"""

from amaranth import *
from amaranth.asserts import AnyConst, AnySeq, Initial
from amaranth.hdl import Assume

from design import GradientCompressor, L1State
from design.layouts import value_width
from design.params import DEFAULTS

from .base import PropertySet
from . import assumptions, outputs, invariants, covers

__all__ = ["FormalHarness", "CONFIGS", "flush_bound"]


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
}


def flush_bound(sets, ways, fifo_depth, K):
    """The flush termination bound B (cycles from ``flush`` rising to ``idle``).

    With ``flush`` held high and DRAM ready at least once in every ``K`` cycles, ``idle`` is
    high at the latest ``B`` cycles after the first cycle with ``flush`` high, where::

        B = K * (fifo_depth + sets * ways + 1) + sets * ways + 2 * sets + 4

    Every write still inside (at most ``fifo_depth`` in L2, one in ``s1``, ``sets * ways`` in
    L1) leaves through ``dram_out``, at least one per ``K`` cycles while L2's output register is
    full; the output register is empty at most once per L1 push (``sets * ways + 1``), once
    per scanned set, ``sets`` cycles of a pending INIT, and a few cycles of pipeline latency.
    """
    return K * (fifo_depth + sets * ways + 1) + sets * ways + 2 * sets + 4


class FormalHarness(Elaboratable):
    """Parameters
    ----------
    config : dict
        GradientCompressor keyword arguments.
    focus : set of str or None
        Property groups (or single ``"group/name"`` properties) asserted, ``"-group/name"``
        excepted (others assumed for the past cycles); ``None``: all.
    fairness : int or None
        K: assume DRAM ``ready`` at least once in every K cycles, and assert flush termination
        within :func:`flush_bound`. ``None``: DRAM ready is free; no termination property.
    full_l1, full_l2 : bool
        Add comb read ports on every L1 set / every L2 entry (needed for valid_count and for
        k-induction; heavy for large configurations).
    reset : "any" or "initial"
        Free reset, or reset only in the first cycle.
    covers : bool
        Emit the cover statements.
    assume_others : bool
        Assertions outside ``focus`` are assumed for the past cycles (``True``) or dropped.
    design : module or None
        A module providing ``GradientCompressor`` (the mutation check passes a mutant copy).
    """

    def __init__(self, config, *, focus=None, fairness=None, full_l1=True, full_l2=True,
                 reset="any", covers=False, design=None, assume_others=True):
        self.config = dict(config)
        cls = GradientCompressor if design is None else design.GradientCompressor
        self.dut = cls(**self.config)
        self.focus, self.fairness = focus, fairness
        self.full_l1, self.full_l2 = full_l1, full_l2
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
        self.bound = None if fairness is None else flush_bound(d.sets, d.ways, d.fifo_depth,
                                                               fairness)

        # Read ports: added here, before the design is elaborated.
        l1, wb = d.l1, d.writeback
        self.l1_track_port = l1.storage.read_port(domain="comb")
        self.l1_s1_port    = l1.storage.read_port(domain="comb")
        self.l1_ports = ([l1.storage.read_port(domain="comb") for _ in range(d.sets)]
                         if full_l1 else [])
        self.l2_ports = ([wb.storage.read_port(domain="comb") for _ in range(d.fifo_depth)]
                         if full_l2 else [])

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
        m.d.comb += [
            self.in_valid.eq(AnySeq(1)),
            self.in_addr.eq(AnySeq(self.aw)),
            self.in_grad.eq(AnySeq(signed(self.gw))),
            self.in_thresh.eq(AnySeq(self.gw)),
            self.in_flush.eq(AnySeq(1)),
            self.in_ready.eq(AnySeq(1)),
            self.track.eq(AnyConst(self.aw)),
            d.grad_in.valid.eq(self.in_valid),
            d.grad_in.p.addr.eq(self.in_addr),
            d.grad_in.p.grad.eq(self.in_grad),
            d.threshold.eq(self.in_thresh),
            d.flush.eq(self.in_flush),
            d.dram_out.ready.eq(self.in_ready),
        ]
        # A register that is high in the cycle after a reset cycle (clears "previous" state).
        self.after_rst = Signal(init=1)
        m.d.sync += self.after_rst.eq(0)

        # -- handy views -------------------------------------------------------------------
        self.accept = Signal()
        self.push_fire = Signal()
        self.pop = Signal()
        m.d.comb += [
            self.accept.eq(d.grad_in.valid & d.grad_in.ready),
            self.push_fire.eq(l1.push.valid & l1.push.ready),
            self.pop.eq(d.dram_out.valid & d.dram_out.ready),
        ]
        self.track_set = self.track[:self.set_bits] if self.set_bits else C(0, 1)
        self.track_tag = self.track[self.set_bits:]
        self.s1_set = l1.s1.addr[:self.set_bits] if self.set_bits else C(0, 1)

        # L1 rows
        m.d.comb += self.l1_track_port.addr.eq(self.track_set)
        m.d.comb += self.l1_s1_port.addr.eq(Mux(l1.state == L1State.SCAN, l1.scan_set,
                                                self.s1_set))
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
        self.track_matches = matches
        self.init = Signal()
        m.d.comb += self.init.eq(l1.state == L1State.INIT)

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
        # Balance: accepted minus written to DRAM, for the tracked address.
        self.balance = Signal(signed(self.bw))
        acc_t = self.accept & (d.grad_in.p.addr == self.track)
        m.d.sync += self.balance.eq(self.balance + Mux(acc_t, d.grad_in.p.grad, 0)
                                    - Mux(out_t, d.dram_out.p.value, 0))
        self.out_t = out_t

        # L2 contents, from the storage itself (full_l2).
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

        # Number of valid L1 entries, from the storage itself (full_l1).
        if self.l1_ports:
            self.l1_total = Signal(range(d.sets * d.ways + 1))
            m.d.comb += self.l1_total.eq(sum(way.valid for p in self.l1_ports
                                             for way in p.data.ways))

        # Flush bookkeeping: cycles flush has been high before this one (saturating).
        self.flush_cycles = Signal(range((self.bound or 1) + 2))
        with m.If(d.flush):
            with m.If(self.flush_cycles <= (self.bound or 0)):
                m.d.sync += self.flush_cycles.eq(self.flush_cycles + 1)
        with m.Else():
            m.d.sync += self.flush_cycles.eq(0)

        assumptions.add(self, m, P)
        outputs.add(self, m, P)
        invariants.add(self, m, P)
        if self.covers:
            covers.add(self, m, P)
        # No assertion is checked in a reset cycle.
        P.emit(m, focus=self.focus, covers=self.covers, guard=self.rst,
               assume_others=self.assume_others)
        return m

    # Signals shown in trace tables and replayed from witnesses.
    INPUTS = ["rst", "in_valid", "in_addr", "in_grad", "in_thresh", "in_flush", "in_ready"]
