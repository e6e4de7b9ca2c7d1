"""Each component proven alone, as ZipCPU and ``amaranth.lib.fifo`` do it: the component with
every input port free (``AnySeq``) and a free reset, its own contract (the properties beside its
logic: :mod:`.writeback`, :mod:`.queue`, :mod:`.lfsr`, :mod:`.ema`, :mod:`.streamer`,
:mod:`.discards`) asserted and what it requires of its inputs
(:meth:`.base.PropertySet.require`) assumed. The system harness (:mod:`.harness`) instantiates
the same contracts on its submodules, where they are assumed and the requirements asserted
(:data:`.base.COMPONENT_GROUPS`).

L1's contract is proven alone too, by the system harness built around L1 alone
(:class:`.harness.L1Alone`): its properties read the harness's views (the gradients as
accepted, the policy model), which this small harness does not make.

A component is proven with the parameters it has in each configuration of
:data:`.harness.CONFIGS` (once per distinct set of parameters: :func:`instances`).
"""

from dataclasses import dataclass
from typing import Callable

from amaranth import *
from amaranth.asserts import AnyConst, AnySeq, Initial
from amaranth.hdl import Assume
from amaranth.lib.wiring import In

from gradient_compressor.design.l1 import L1Accumulator
from gradient_compressor.design.line_decision import LineDecision
from gradient_compressor.design.layouts import (line_pair_layout, line_value_width, value_width,
                                                write_layout)
from gradient_compressor.design.params import WHOLE_LINE
from gradient_compressor.design.compressor import signature as compressor_signature
from gradient_compressor.design.modes import DiscardTotals, EmaThreshold, Lfsr
from gradient_compressor.design.registers import (CompressorWithRegisters, RegisterFile,
                                                  member_shapes, register_map)
from gradient_compressor.design.queue import WriteQueue
from gradient_compressor.design.streamer import Streamer
from gradient_compressor.design.writeback import WritebackBuffer

from . import discards, ema, lfsr, line_decision, queue, registers, streamer, writeback
from .base import PropertySet, balance_width

__all__ = ["COMPONENTS", "ComponentHarness", "instances"]


@dataclass(frozen=True)
class Component:
    """How to build a component from a configuration and bind its contract."""
    params: Callable      # configuration -> the component's parameters (a dict)
    build: Callable       # **params -> the component
    probes: Callable      # component -> keyword arguments of its contract made before
                          # elaboration (read ports), or {}
    contract: Callable    # (m, P, component, **probes)
    covers: Callable      # (m, P, component), or None: no covers
    depth: int            # k-induction depth of its proof
    bmc_depth: Callable   # params -> depth of a BMC from reset that reaches its covers (its
                          # cover job, and the mutation check's bounded check)
    pins_outputs: bool = False  # the contract states every output as a function of the
                                # inputs so far: a mutant that keeps it (by induction) has
                                # the component's outputs in every reachable state
    shares: tuple = ()    # groups of another component's contract that its contract
                          # asserts too (beside its own, COMPONENT_GROUPS)
    only_on: tuple = None  # the configurations it is proven on (None: each distinct one)
    settings: Callable = None  # params -> keyword arguments of its contract that are not
                               # signals (a width), or None
    constants: tuple = ()  # probes that are free constants (AnyConst: a tracked address);
                           # the others are free in every cycle (AnySeq)
    solver: str = None     # the solver of its proof, where the default one is slow


#: Lanes of the line components proven alone (the contract does not depend on the number).
LINE_LANES = 4


def _free_pick():
    return {"pick": Signal(name="pick")}


def _policy_width(c):
    """The width of the values L1 writes under the configuration's policy (``whole_line``)."""
    return line_value_width(c["grad_width"], c.get("whole_line", WHOLE_LINE))


#: The components whose values' width follows the configuration's policy: proven at the
#: default policy's width (make prove) and at the seed policy's (make prove-seed).
POLICY_WIDTH = ("l2", "queue", "queue_lines")

COMPONENTS = {
    "l2": Component(
        params=lambda c: dict(addr_width=c["addr_width"], grad_width=c["grad_width"],
                              depth=c["fifo_depth"], burst_size=c["burst_size"],
                              value_width=_policy_width(c)),
        build=lambda **p: WritebackBuffer(**p),
        probes=lambda wb: dict(_free_pick(),
                               track_port=wb.storage.read_port(domain="comb")),
        contract=writeback.contract, covers=writeback.covers, depth=3,
        # fill it (depth cycles), then send a write in each of depth cycles
        bmc_depth=lambda p: 2 * p["depth"] + 4),
    # L2 on lines of LINE_LANES (write combining): the same contract, with the merges.
    "l2_lines": Component(
        params=lambda c: dict(addr_width=c["addr_width"], grad_width=c["grad_width"],
                              depth=c["fifo_depth"], burst_size=c["burst_size"],
                              # (a configuration of lines: its lanes; of one lane: LINE_LANES)
                              lanes=c.get("lanes", 1) if c.get("lanes", 1) > 1 else LINE_LANES,
                              # the line policy's width (the rule's: l2_lines_whole)
                              value_width=value_width(c["grad_width"])),
        build=lambda **p: WritebackBuffer(**p),
        probes=lambda wb: dict(_free_pick(),
                               track_port=wb.storage.read_port(domain="comb")),
        contract=writeback.contract, covers=writeback.covers, depth=3,
        bmc_depth=lambda p: 2 * p["depth"] + 4, shares=("l2", "fifo"),
        # the smallest, a depth that is not a power of two (the pointers wrap), the product's
        only_on=("small", "dm", "default")),
    # ... and at the whole-line rule's value width (grad_width bits, the L2 of
    # GradientCompressor(whole_line=True)): the same contract, its merges stated not to
    # overflow that narrower value (the combine group's test is on the values' own width).
    "l2_lines_whole": Component(
        params=lambda c: dict(addr_width=c["addr_width"], grad_width=c["grad_width"],
                              depth=c["fifo_depth"], burst_size=c["burst_size"],
                              lanes=c.get("lanes", 1) if c.get("lanes", 1) > 1 else LINE_LANES,
                              value_width=c["grad_width"]),
        build=lambda **p: WritebackBuffer(**p),
        probes=lambda wb: dict(_free_pick(),
                               track_port=wb.storage.read_port(domain="comb")),
        contract=writeback.contract, covers=writeback.covers, depth=3,
        bmc_depth=lambda p: 2 * p["depth"] + 4, shares=("l2", "fifo", "combine"),
        only_on=("small", "default")),
    "queue": Component(
        params=lambda c: dict(addr_width=c["addr_width"], grad_width=c["grad_width"],
                              value_width=_policy_width(c)),
        build=lambda addr_width, grad_width, value_width: WriteQueue(
            write_layout(addr_width, grad_width, value_width), depth=L1Accumulator.QUEUE_DEPTH),
        probes=lambda q: dict(_free_pick(), ports=[q.storage.read_port(domain="comb")
                                                   for _ in range(q.depth)]),
        contract=queue.contract, covers=queue.covers, depth=3,
        bmc_depth=lambda p: L1Accumulator.QUEUE_DEPTH + 4),
    # The queue of the line L1's pair shape, with its tracked sum at a freely chosen tracked
    # address (lane of a line) at the width of the system's balances: the contract the
    # compressor on lines assumes (proven on its parameters: proofs.jobs.LINE_SYSTEM_QUEUE).
    "queue_lines": Component(
        params=lambda c: dict(addr_width=c["addr_width"], grad_width=c["grad_width"],
                              lanes=c.get("lanes", 1) if c.get("lanes", 1) > 1 else LINE_LANES,
                              # the values' width of the configuration's policy
                              value_width=_policy_width(c),
                              width=balance_width(value_width(c["grad_width"]),
                                                  c["fifo_depth"], L1Accumulator.QUEUE_DEPTH)),
        build=lambda addr_width, grad_width, lanes, value_width, width: WriteQueue(
            line_pair_layout(addr_width, grad_width, lanes, value_width),
            depth=L1Accumulator.QUEUE_DEPTH),
        probes=lambda q: dict(_free_pick(), ports=[q.storage.read_port(domain="comb")
                                                   for _ in range(q.depth)],
                              track=Signal(len(q.w.payload.own.addr), name="track")),
        contract=lambda m, P, q, *, pick, ports, track, width: queue.contract(
            m, P, q, pick=pick, ports=ports, width=width,
            weigh=queue.line_weight(track, (len(q.w.payload.own.mask) - 1).bit_length())),
        covers=queue.covers, depth=3, bmc_depth=lambda p: L1Accumulator.QUEUE_DEPTH + 4,
        shares=("queue",), only_on=(), settings=lambda p: dict(width=p["width"]),
        constants=("track",)),
    "lfsr": Component(
        params=lambda c: {}, build=lambda: Lfsr(), probes=lambda _: {},
        contract=lfsr.contract, covers=lfsr.covers, depth=2, bmc_depth=lambda p: 4,
        pins_outputs=True),     # state and next_state
    "ema": Component(
        params=lambda c: dict(grad_width=c["grad_width"]),
        build=lambda grad_width: EmaThreshold(grad_width=grad_width), probes=lambda _: {},
        contract=ema.contract, covers=ema.covers, depth=2, bmc_depth=lambda p: 12,
        pins_outputs=True),     # average, latched_average, source, threshold
    "streamer": Component(
        params=lambda c: dict(addr_width=c["addr_width"], grad_width=c["grad_width"]),
        build=lambda **p: Streamer(**p), probes=lambda _: {},
        contract=streamer.contract, covers=None, depth=1, bmc_depth=lambda p: 2,
        pins_outputs=True),     # grad_in.ready, grad_out's valid and every payload field
    "discards": Component(
        params=lambda c: dict(grad_width=c["grad_width"]),
        build=lambda grad_width: DiscardTotals(grad_width=grad_width), probes=lambda _: {},
        # a discard, a barrier, then the first gradient with a discard of its own; and deep
        # enough for the count's bit 2 (four discards)
        contract=discards.contract, covers=discards.covers, depth=2, bmc_depth=lambda p: 8,
        pins_outputs=True),     # count, sum, barrier_done
    # The whole-line rule's decision (combinational: one step), at LINE_LANES on the smallest
    # and the product's widths, and at 8 lanes on the product's.
    "line_decision": Component(
        params=lambda c: dict(lanes=LINE_LANES, grad_width=c["grad_width"],
                              max_updates=c["max_updates"]),
        build=lambda **p: LineDecision(**p), probes=lambda _: {},
        contract=line_decision.contract, covers=line_decision.covers, depth=1,
        bmc_depth=lambda p: 2, only_on=("small", "default"),
        # (on default's widths: z3 2 s, yices 228 s)
        solver="z3"),
    "line_decision_8": Component(
        params=lambda c: dict(lanes=8, grad_width=c["grad_width"],
                              max_updates=c["max_updates"]),
        build=lambda **p: LineDecision(**p), probes=lambda _: {},
        contract=line_decision.contract, covers=None, depth=1,
        bmc_depth=lambda p: 2, shares=("line_decision",), only_on=("default",), solver="z3"),
    "registers": Component(
        # the widths of the counters and the status follow the whole geometry
        params=lambda c: dict(c),
        build=lambda **p: _register_file(p), probes=lambda _: {},
        # a write, its response, a read of it, its data taken
        contract=registers.contract, covers=registers.covers, depth=2,
        bmc_depth=lambda p: 6),
    # The register file joined to the compressor (one lane, small's geometry: the join is the
    # same wiring on every geometry), every input of the top free.
    "registers_joined": Component(
        params=lambda c: dict(c),
        build=lambda **p: CompressorWithRegisters(**p), probes=lambda _: {},
        contract=registers.joined, covers=None, depth=2, bmc_depth=lambda p: 4,
        only_on=("small",)),
}


def _register_file(params):
    members = compressor_signature(**params)
    return RegisterFile(register_map(members), member_shapes(members))


def instances(name, configs):
    """The configurations (names, in the order of ``configs``) on which component ``name`` is
    proven: the first one of each distinct set of its parameters."""
    seen, chosen = set(), []
    only_on = COMPONENTS[name].only_on
    for config_name, config in configs.items():
        if only_on is not None and config_name not in only_on:
            continue
        key = tuple(sorted(COMPONENTS[name].params(config).items()))
        if key not in seen:
            seen.add(key)
            chosen.append(config_name)
    return chosen


class ComponentHarness(Elaboratable):
    """One component alone, with the parameters it has in ``config`` (a
    :data:`.harness.CONFIGS` entry): every input port free, reset free (or only in the first
    cycle: ``reset="initial"``, for covers), its contract asserted (or, with ``focus``, the
    part of it a job proves, the rest assumed for the past cycles: properties/base.py), its
    covers emitted if ``covers``."""

    def __init__(self, name, config, *, covers=False, reset="any", focus=None):
        if name not in COMPONENTS:
            raise ValueError(f"unknown component {name!r}; known: {', '.join(COMPONENTS)}")
        self.name, self.spec = name, COMPONENTS[name]
        self.params = self.spec.params(config)
        self.dut = self.spec.build(**self.params)
        self.probes = self.spec.probes(self.dut)     # read ports: before elaboration
        self.covers, self.reset = covers and self.spec.covers is not None, reset
        self.focus = focus
        self.props = PropertySet(alone=True)
        self.config, self.bound = dict(config), None

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        self.rst = ResetSignal()
        if self.reset == "initial":
            m.d.comb += Assume(self.rst == Initial())
        for path, member, value in dut.signature.flatten(dut):
            if member.flow == In:
                value = Value.cast(value)
                m.d.comb += value.eq(AnySeq(value.shape()))
        for name, probe in self.probes.items():
            if isinstance(probe, Signal):
                kind = AnyConst if name in self.spec.constants else AnySeq
                m.d.comb += probe.eq(kind(probe.shape()))
        P = self.props
        settings = self.spec.settings(self.params) if self.spec.settings else {}
        self.spec.contract(m, P, dut, **self.probes, **settings)
        if self.covers:
            self.spec.covers(m, P, dut)
        P.emit(m, covers=bool(self.covers), guard=self.rst, focus=self.focus)
        return m
