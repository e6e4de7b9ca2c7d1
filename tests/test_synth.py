"""The ECP5 flow of ``python -m gradient_compressor.synth``: a synthesis-only smoke run and the
argument errors.

Place and route (minutes per configuration) is a benchmark, not a test: ``make synth``.
"""

import json
import random
import re

import pytest
from amaranth import Cat, Value
from amaranth.back import rtlil
from amaranth.lib.wiring import In
from amaranth.sim import Simulator

from gradient_compressor.design import GradientCompressor
from gradient_compressor.synth.__main__ import main
from gradient_compressor.synth.depth import (CLOCK_TO_Q, ROUTE, cell_graph, loop_components,
                                             deepest_path, loop_registers, main as depth_main,
                                             path_estimates)
from gradient_compressor.synth import flow
from gradient_compressor.synth.flow import ROUTERS, fpga_top, ooc_top
from gradient_compressor.synth.netlist import Netlist
from gradient_compressor.synth.report import SUMMARY_DEPTH_ROWS, render_summary

# Small enough for Yosys to take a few seconds; every component is still there.
SMALL = "sets=2,ways=2,addr_width=8,grad_width=8,fifo_depth=4,burst_size=2"


def test_synth_only_counts_cells_and_finds_the_combinational_path(tmp_path, capsys):
    assert main(["--synth-only", SMALL, "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "synth.json").read_text())
    (result,) = report["results"]
    assert result["configuration"]["sets"] == 2 and result["configuration"]["max_updates"] == 255
    assert result["cells"]["LUT4"] > 0 and result["cells"]["TRELLIS_FF"] > 0
    assert result["seeds"] == []
    # Registered ports (issue 8): no input reaches an output through logic alone (before the
    # pipeline, grad_in.ready was combinational from flush).
    assert result["combinational_io_paths"] == {}
    # The pipeline's forwarding registers each hold one L1 row.
    for name in ["l1.read_row", "l1.s3_row", "l1.s4_row", "l1.h1_row", "l1.h2_row"]:
        assert result["flip_flops_by_signal"][name] == result["l1_row_bits"]
    markdown = (tmp_path / "synth.md").read_text()
    assert f"| {SMALL} |" in markdown and "| none |" in markdown
    # The placement-free estimate is part of the report.
    depth = result["depth"]
    assert depth["flip_flops"] == result["cells"]["TRELLIS_FF"]
    assert len(depth["deepest"]) == 10
    assert depth["deepest"][0]["ns"] >= depth["deepest"][-1]["ns"]
    assert sum(depth["beyond_5_by_loop"].values()) == depth["beyond"]["5"]
    assert "| estimated ns | loop | register |" in markdown
    assert "beyond 5 ns, by loop:" in markdown
    assert "# ECP5 synthesis report" in capsys.readouterr().out

    # The placement-free estimate of the deepest paths, on the netlist that run left.
    (netlist_file,) = tmp_path.glob("*/top.json")
    netlist = Netlist(netlist_file)
    ends = path_estimates(netlist)
    assert len(ends) == result["cells"]["TRELLIS_FF"]
    assert all(delay >= ends[-1][0] for delay, *_ in ends)   # deepest first
    # L1's decision (s3 -> s4) is deeper than a plain copy from one register to the next.
    depth = {register: delay for delay, register, _, _ in reversed(ends)}
    assert depth["l1.s4_push"] > depth["l1.s2_valid"] >= CLOCK_TO_Q + ROUTE
    # Loops: the accumulate loop's sum (the entry a decision leaves) feeds itself (one
    # register); a path from an input port is on none.
    graph = cell_graph(netlist)
    component = loop_components(graph)
    sum_bit = next(end for _, register, _, end in ends if register == "l1.s4_entry")
    assert loop_registers(graph, component, sum_bit, sum_bit) == 1
    port_bit = next(port["bits"][0] for port in netlist.module["ports"].values()
                    if port["direction"] == "input")
    assert loop_registers(graph, component, port_bit, sum_bit) is None
    assert depth_main([str(netlist_file), "--count", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 7 and lines[-3].endswith("beyond 8 ns")
    assert lines[-2].startswith("beyond 5 ns, by loop: ")
    assert lines[0].startswith("estimated ns  loop  register")
    # The deepest path into one register, net by net: from a register's output (or a port),
    # each arrival later than the one before, its last plus the net into the flip-flop being
    # that register's estimate.
    path = deepest_path(netlist, "l1.s4_push")
    assert path[0][0] in (CLOCK_TO_Q, 0.0) and path[0][1] in ("TRELLIS_FF", "input")
    assert all(a[0] < b[0] for a, b in zip(path, path[1:]))
    assert round(path[-1][0] + ROUTE, 2) == round(depth["l1.s4_push"], 2)
    assert deepest_path(netlist, "no.such_register") is None
    assert depth_main([str(netlist_file), "--path", "l1.s4_push"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(path) + 1
    assert depth_main([str(netlist_file), "--path", "no.such_register"]) == 2
    assert "no flip-flop holds 'no.such_register'" in capsys.readouterr().err


def test_fpga_top_puts_a_line_on_one_pin_each_way():
    # One lane: the data streams on pins, as ever. Lines: the beat's gradients and mask from
    # a chain on line_in, the DRAM write's values and mask folded into line_out; valid, ready
    # and the addresses stay on pins.
    small = dict(sets=2, ways=2, addr_width=8, grad_width=8, fifo_depth=4, burst_size=2)
    module, one = fpga_top(GradientCompressor(**small))
    rtlil.convert(module, name="top", ports=one)     # as synthesis would (and it is used)
    names = {port.name for port in one}
    assert {"in_grad", "dram_value", "settings_in", "mode_out"} <= names
    assert not names & {"line_in", "line_out"}
    dut = GradientCompressor(lanes=2, **small)
    m, ports = fpga_top(dut)
    pins = {port.name: port for port in ports}
    assert set(pins) == (names - {"in_grad", "dram_value"}) | {"line_in", "line_out"}
    assert {"in_valid", "in_ready", "in_addr",
            "dram_valid", "dram_ready", "dram_addr"} <= set(pins)
    assert len(pins["line_in"]) == len(pins["line_out"]) == 1
    beat = Cat(dut.grad_in.payload.grads, dut.grad_in.payload.mask)
    write = Cat(dut.dram_out.payload.values, dut.dram_out.payload.mask)
    rng = random.Random(7)

    async def testbench(ctx):
        # Every beat the pin shifts in reaches the compressor: a gradient per lane, the mask.
        for _ in range(3):
            bits = rng.getrandbits(len(beat))
            for i in reversed(range(len(beat))):       # the first bit ends at the top
                ctx.set(pins["line_in"], (bits >> i) & 1)
                await ctx.tick()
            assert ctx.get(beat) == bits
        # Beats to changing lines, over a threshold of 1, go to DRAM: line_out is the XOR of
        # the write's values and mask a cycle earlier.
        ctx.set(pins["threshold"], 1)
        ctx.set(pins["in_valid"], 1)
        ctx.set(pins["dram_ready"], 1)
        ones = 0
        for cycle in range(60):
            ctx.set(pins["line_in"], rng.getrandbits(1))
            if cycle % 7 == 0:
                ctx.set(pins["in_addr"], rng.getrandbits(len(pins["in_addr"])) & ~1)
            folded = bin(ctx.get(write)).count("1") & 1
            await ctx.tick()
            assert ctx.get(pins["line_out"]) == folded
            ones += folded
        assert ones > 0

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()


@pytest.mark.parametrize("lanes, l1_only", [(1, False), (2, False), (2, True)])
def test_ooc_top_puts_every_port_behind_a_register(lanes, l1_only):
    # Out of context: four pins; every input of the design (or of L1 alone) is a bit of one
    # chain loaded through ooc_in, and ooc_out is the XOR of every output a fixed number of
    # cycles later (the outputs registered, then folded four to one per registered level).
    small = dict(sets=2, ways=2, addr_width=8, grad_width=8, fifo_depth=4, burst_size=2)
    dut = GradientCompressor(lanes=lanes, **small)
    m, ports = ooc_top(dut, l1_only=l1_only)
    assert [port.name for port in ports] == ["clk", "rst", "ooc_in", "ooc_out"]
    part = dut.l1 if l1_only else dut
    members = [(member.flow, Value.cast(value))
               for _, member, value in part.signature.flatten(part)]
    inputs = Cat(*[value for flow, value in members if flow == In])
    outputs = Cat(*[value for flow, value in members if flow != In])
    pin_in, pin_out = ports[2], ports[3]
    rng = random.Random(lanes)

    async def testbench(ctx):
        # A single one shifted the chain's length: one input bit set; then every one set.
        ctx.set(pin_in, 1)
        await ctx.tick()
        ctx.set(pin_in, 0)
        await ctx.tick().repeat(len(inputs) - 1)
        assert bin(ctx.get(inputs)).count("1") == 1
        ctx.set(pin_in, 1)
        await ctx.tick().repeat(len(inputs))
        assert ctx.get(inputs) == (1 << len(inputs)) - 1
        # Random inputs: ooc_out follows the outputs' parity at one delay.
        parities, seen = [], []
        for _ in range(120):
            ctx.set(pin_in, rng.getrandbits(1))
            parities.append(bin(ctx.get(outputs)).count("1") & 1)
            seen.append(ctx.get(pin_out))
            await ctx.tick()
        delays = [d for d in range(1, 8) if seen[d:] == parities[:len(parities) - d]]
        assert delays == [2 + (len(outputs) > 4) + (len(outputs) > 16) + (len(outputs) > 64)
                          + (len(outputs) > 256) + (len(outputs) > 1024)]
        assert 0 < sum(parities) < len(parities)

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()


def test_ooc_and_l1_only_synthesise_on_four_pins(tmp_path, capsys):
    for flag, out in [("--ooc", tmp_path / "ooc"), ("--l1-only", tmp_path / "l1")]:
        assert main(["--synth-only", flag, SMALL + ",lanes=2", "--out", str(out)]) == 0
        (result,) = json.loads((out / "synth.json").read_text())["results"]
        assert result["top"] == flag.removeprefix("--").replace("l1-only", "l1-ooc")
        (netlist_file,) = out.glob("*-ooc/top.json")
        assert set(Netlist(netlist_file).module["ports"]) == {"clk", "rst", "ooc_in", "ooc_out"}
        assert "ut of context (`" + flag in (out / "synth.md").read_text()
        signals = result["flip_flops_by_signal"]
        assert signals["l1.s3_row"] == result["l1_row_bits"]     # L1's names, as in the flow
        assert ("writeback.bursting" in signals) == (flag == "--ooc")
        capsys.readouterr()

def test_depth_rejects_a_file_that_is_not_a_netlist(tmp_path, capsys):
    (tmp_path / "top.json").write_text("not json")
    assert depth_main([str(tmp_path / "top.json")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_modes_off_leaves_the_modes_logic_out(tmp_path, capsys):
    assert main(["--synth-only", SMALL, SMALL + ",modes=off", "--out", str(tmp_path)]) == 0
    on, off = json.loads((tmp_path / "synth.json").read_text())["results"]
    assert (on["modes"], off["modes"]) == (True, False)
    assert off["configuration"] == on["configuration"]
    # The logic the settings control goes (the EMA threshold's multiply and clamp, the dual
    # threshold's tests, the windows' compares, ...): fewer cells of every kind that holds it.
    for cell in ("LUT4", "CCU2C", "TRELLIS_FF"):
        assert off["cells"][cell] < on["cells"][cell], cell
    assert f"| {SMALL},modes=off |" in (tmp_path / "synth.md").read_text()


def test_lines_synthesise_with_a_pin_each_way(tmp_path):
    # A beat of 2 lanes: Yosys keeps the line's pins and nothing else of its data streams.
    results = tmp_path / "results" / "synth.md"
    assert main(["--synth-only", SMALL + ",lanes=2", "--out", str(tmp_path),
                 "--results", str(results)]) == 0
    (result,) = json.loads((tmp_path / "synth.json").read_text())["results"]
    assert result["configuration"]["lanes"] == 2
    # The results table: the command that made it, and the area per lane.
    text = results.read_text()
    assert "Made by `python -m gradient_compressor.synth --synth-only" in text
    assert "1 configuration, 0 placement seeds each" in text
    cells = result["cells"]
    assert (f"| {SMALL},lanes=2 | 2 |  | {cells['LUT4']} | {cells['CCU2C']} | "
            f"{cells['TRELLIS_FF']} | {cells['TRELLIS_DPR16X4']} | {cells['DP16KD']} | "
            f"{round(cells['LUT4'] / 2)} | {round(cells['TRELLIS_FF'] / 2)} | (not placed) |"
            in text)
    assert result["combinational_io_paths"] == {}
    (netlist_file,) = tmp_path.glob("*/top.json")
    netlist = Netlist(netlist_file)
    ports = netlist.module["ports"]
    assert {"line_in", "line_out", "in_addr", "dram_addr"} <= set(ports)
    # The element wires of arrays reach Yosys without brackets in their names (abc9's
    # reintegration can take such a wire for a bit of the same name and fail), and the report
    # shows them as the design names them.
    text = (netlist_file.parent / "top.il").read_text()
    assert "\\magnitudes<0>" in text and not re.search(r"\\[^\s]*\[", text)
    name = next(name for name in netlist.netnames if name.endswith("beat_magnitudes<0>"))
    shown = name.removeprefix("compressor.").replace("<0>", "[0]") + "[1]"
    assert shown in netlist.signal_names(netlist.netnames[name]["bits"][1])
    assert not set(ports) & {"in_grad", "in_grads", "in_mask", "dram_values", "dram_mask"}


@pytest.mark.parametrize("config, message", [
    ("fast", "unknown configuration 'fast': use default, SETSxWAYS (e.g. 1024x4), KEY=VALUE "
             "or modes=off"),
    ("default,modes=maybe", "modes must be on or off, not 'maybe'"),
    ("3x4", "configuration '3x4': sets must be a power of two (1, 2, 4, ...), not 3"),
    ("ways=x", "ways must be an integer, not 'x'"),
    ("128x4,depth=8", "unknown parameter 'depth' in '128x4,depth=8': use one of addr_width, "
                      "grad_width, sets, ways, max_updates, fifo_depth, burst_size, lanes, "
                      "bypass_windows, whole_line"),
    ("lanes=8,whole_line=1", "whole_line must be on or off, not '1'"),
    ("burst_size=64", "configuration 'burst_size=64': burst_size must be at most fifo_depth "
                      "(32), not 64"),
])
def test_bad_configuration_is_a_one_line_usage_error(config, message, capsys, tmp_path):
    assert main(["default", config, "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == \
        f"python -m gradient_compressor.synth: error: {message}"
    assert not (tmp_path / "synth.json").exists()


def test_frequency_must_be_positive(capsys):
    assert main(["--freq", "0"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "python -m gradient_compressor.synth: error: --freq must be a positive number of MHz, "
        "not 0")


def _fake_nextpnr(tmp_path, monkeypatch):
    """nextpnr replaced by a stand-in that writes a report of 50 MHz in ``tmp_path``; returns
    the list its commands are appended to."""
    commands = []

    def fake_nextpnr(command, cwd, what):
        commands.append(command)
        report = command[command.index("--report") + 1]
        (tmp_path / report).write_text(json.dumps({"fmax": {"clk": {"achieved": 50.0}}}))
    monkeypatch.setattr(flow, "_run", fake_nextpnr)
    return commands


def _fake_place_and_route(monkeypatch, place):
    """``flow.run``'s place and route replaced by ``place`` (``place_and_route``'s arguments),
    with a fixed critical path."""
    monkeypatch.setattr(flow, "place_and_route", place)
    monkeypatch.setattr(flow, "critical_path", lambda netlist, report: {
        "delay_ns": 20.0, "steps": [], "summary": "a -> b"})


@pytest.mark.parametrize("router", ROUTERS)
def test_place_and_route_runs_the_router_asked(router, tmp_path, monkeypatch):
    commands = _fake_nextpnr(tmp_path, monkeypatch)
    routed = flow.place_and_route(tmp_path, seed=3, freq=100, router=router)
    [command] = commands
    assert command[command.index("--router") + 1] == router
    assert command[command.index("--seed") + 1] == "3"
    assert routed["fmax_mhz"] == 50.0


def test_auto_routes_lines_of_8_or_more_with_router2(tmp_path, monkeypatch):
    routers = []

    def fake_place(build, seed, freq, router):
        routers.append(router)
        return {"seed": seed, "fmax_mhz": 50.0, "seconds": 1.0, "report": {}}
    _fake_place_and_route(monkeypatch, fake_place)
    results = flow.run([flow.parse_configuration(SMALL), flow.parse_configuration(
        SMALL + ",lanes=8")], tmp_path, router="auto")
    assert [r["router"] for r in results] == routers == ["router1", "router2"]
    summary = render_summary({"results": results, "device": "d", "freq_constraint_mhz": 200,
                              "tools": {}, "router": "auto"})
    assert f"| {SMALL},lanes=8 | 8 | router2 |" in summary
    assert "router1 below 8 lanes, router2 from 8" in summary


def test_summary_states_each_critical_paths_deepest_estimated_paths_and_their_loops():
    def result(name, loops):
        deepest = [{"register": f"{name}.r{k}", "start": f"{name}.s{k}", "ns": 9.0 - k,
                    "loop": loop} for k, loop in enumerate(loops)]
        return {"name": name, "configuration": {"lanes": 1}, "router": "router1",
                "cells": dict.fromkeys(("LUT4", "CCU2C", "TRELLIS_FF", "TRELLIS_DPR16X4",
                                        "DP16KD"), 1),
                "seeds": [{"seed": 1, "fmax_mhz": 50.0, "critical_path": {
                    "delay_ns": 20.0, "summary": f"{name}.a -> {name}.b"}}],
                "median_seed": 1, "fmax_median_mhz": 50.0, "gradients_per_second": 5e7,
                "combinational_io_paths": {}, "depth": {"deepest": deepest}}
    rows = SUMMARY_DEPTH_ROWS
    summary = render_summary({"results": [result("x", [3, None] + [2] * rows),
                                          result("y", [None, 1])],
                              "device": "d", "freq_constraint_mhz": 200, "tools": {}})
    lines = summary.splitlines()
    under = {name: lines[lines.index(f"- {name} (seed 1, 50.00 MHz, 20.00 ns): {name}.a -> "
                                     f"{name}.b") + 1] for name in ("x", "y")}
    assert under["x"].startswith("  - deepest estimated: `x.r0` <- `x.s0` 9.00 ns, on a loop "
                                 "of 3 registers; `x.r1` <- `x.s1` 8.00 ns, on no loop; ")
    assert under["x"].count("` <- `") == rows and f"`x.r{rows}`" not in under["x"]
    assert under["y"] == ("  - deepest estimated: `y.r0` <- `y.s0` 9.00 ns, on no loop; "
                          "`y.r1` <- `y.s1` 8.00 ns, on a loop of 1 register")


def test_place_and_route_puts_the_clock_on_a_clock_pin(tmp_path, monkeypatch):
    commands = _fake_nextpnr(tmp_path, monkeypatch)
    flow.place_and_route(tmp_path, seed=1, freq=100)
    [command] = commands
    lpf = (tmp_path / command[command.index("--lpf") + 1]).read_text()
    assert f'LOCATE COMP "clk" SITE "{flow.CLOCK_SITE}";' in lpf


def test_a_seed_that_fails_is_reported_and_the_others_kept(tmp_path, monkeypatch):
    # nextpnr failing on one seed (router2 once could not route the clock) keeps the seeds
    # that placed: the median is theirs, and the table names the seed that failed.
    def fake_place(build, seed, freq, router):
        if seed == 2:
            raise RuntimeError(f"nextpnr-ecp5 (seed 2) failed (exit 1); see its log in {build}:"
                               "\nERROR: Failed to route arc 0.0 of net 'clk'")
        return {"seed": seed, "fmax_mhz": 40.0 + seed, "seconds": 1.0, "report": {}}
    _fake_place_and_route(monkeypatch, fake_place)
    lines = []
    [result] = flow.run([flow.parse_configuration(SMALL)], tmp_path, seeds=(1, 2, 3),
                        log=lines.append)
    assert [s["seed"] for s in flow.placed_seeds(result)] == [1, 3]
    assert result["seeds"][1]["failed"].startswith("nextpnr-ecp5 (seed 2) failed (exit 1)")
    assert result["fmax_median_mhz"] == 42.0
    assert any("seed 2: nextpnr-ecp5 (seed 2) failed" in line for line in lines)
    summary = render_summary({"results": [result], "device": "d", "freq_constraint_mhz": 200,
                              "tools": {}})
    assert "| 41.00, seed 2 failed, 43.00 | 42.00 |" in summary
    assert f"- {SMALL}, seed 2: nextpnr-ecp5 (seed 2) failed" in summary


def _netlist(tmp_path, cells, ports):
    path = tmp_path / "net.json"
    path.write_text(json.dumps({"modules": {"top": {
        "ports": ports, "cells": cells, "netnames": {}}}}))
    return Netlist(path)


def test_combinational_walk_stops_at_registers_and_crosses_lut_ram_reads(tmp_path):
    def cell(kind, **connections):
        directions = {port: "output" if port in ("Z", "Q", "DO") else "input"
                      for port in connections}
        return {"type": kind, "port_directions": directions, "connections": connections,
                "attributes": {}}
    ports = {"a": {"direction": "input", "bits": [2]}, "b": {"direction": "input", "bits": [3]},
             "c": {"direction": "input", "bits": [4]},
             "y": {"direction": "output", "bits": [10]},
             "q": {"direction": "output", "bits": [11]},
             "r": {"direction": "output", "bits": [12]}}
    cells = {
        "lut": cell("LUT4", A=[2], B=["0"], C=["0"], D=["0"], Z=[10]),           # a -> y
        "ff": cell("TRELLIS_FF", DI=[3], CLK=[1], Q=[11]),                       # b -/-> q
        "ram": cell("TRELLIS_DPR16X4", RAD=[4], DI=[3], WAD=[2], WRE=[2], DO=[12]),  # c -> r
    }
    assert _netlist(tmp_path, cells, ports).combinational_io_paths() == {"y": ["a"], "r": ["c"]}


def test_loops_convert_in_both_forms_and_a_bad_loop_is_a_usage_error(capsys):
    # python -m gradient_compressor.synth.loops: every loop elaborates with either form of
    # compare (place and route is the benchmark); an unknown loop is a one-line usage error
    # before any run.
    from gradient_compressor.synth.loops import LINE_LOOPS, LOOPS, forms, loop, main
    for name in LOOPS:
        for form in forms(name):
            module, ports = loop(name, form, lanes=2)
            assert "pin_out" in rtlil.convert(module, name="top", ports=ports)
    assert set(LINE_LOOPS) < set(LOOPS) and forms("line") == ("difference",)
    for argv, message in [
            (["accumulate", "fast"], "unknown loop 'fast': use one of accumulate, "
             "accumulate_ways, lookahead, lookahead2, line, line_ahead, line_ahead2 "
             "(see --help)"),
            (["line", "--lanes", "6"], "argument --lanes: lanes must be a power of two "
             "(1, 2, 4, ...), not 6 (see --help)"),
            (["line", "--lanes", "1"], "argument --lanes: the line loops take 2 lanes or more, "
             "not 1 (see --help)")]:
        with pytest.raises(SystemExit) as exit:
            main(argv)
        assert exit.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1] == (
            "python -m gradient_compressor.synth.loops: error: " + message)


def test_loops_of_a_small_graph():
    # Flip-flops A (data 1 -> out 2), B (3 -> 4), C (5 -> 6) and D (7, its output its own
    # input); logic 2 -> 1 (A feeds itself), 2 -> 3 and 4 -> 1 (A -> B -> A), 6 -> 3 (C into
    # the loop from outside), 8 -> 5 (an input).
    graph = {1: [(2, 1)], 2: [(1, 0), (3, 0)], 3: [(4, 1)], 4: [(1, 0)], 5: [(6, 1)],
             6: [(3, 0)], 7: [(7, 1)], 8: [(5, 0)]}
    component = loop_components(graph)
    assert set(component) == {1, 2, 3, 4, 7} and component[1] == component[4] != component[7]
    assert loop_registers(graph, component, 2, 2) == 1    # A -> A
    assert loop_registers(graph, component, 2, 4) == 2    # A -> B, B back to A through A
    assert loop_registers(graph, component, 4, 2) == 2
    assert loop_registers(graph, component, 7, 7) == 1
    assert loop_registers(graph, component, 6, 4) is None  # C is on no loop
    assert loop_registers(graph, component, 8, 6) is None
