"""The Markdown text of a ``compressor-report`` bandwidth report, from what ``report.json``
holds: a header, the summary table, a section per workload (its figures against the oracle
and no compression, the seed comparison where there is one, its plots), the run-time modes'
tables, and the checks."""

from gradient_compressor.model import CAUSES

from gradient_compressor.console import table
from .mode_comparison import mode_table
from gradient_compressor.provenance import describe

__all__ = ["fmt", "render_markdown", "render_body", "describe_run"]


def fmt(value, kind="int"):
    """A figure as the report prints it: ``kind`` is ``int`` (digits grouped by a space),
    ``ratio`` (``2.33x``), ``pct`` (``41.2 %``) or ``float``; ``n/a`` for None."""
    if value is None:
        return "n/a"
    if kind == "ratio":
        return f"{value:.2f}x"
    if kind == "pct":
        return f"{100 * value:.1f} %"
    if kind == "float":
        return f"{value:.3f}"
    return f"{value:,}".replace(",", " ")


def render_markdown(report, *, images=True):
    """The Markdown text of a report (``report`` is what ``report.json`` holds): its header,
    then :func:`render_body`."""
    return "\n".join(_header(report)) + "\n" + render_body(report, images=images)


def render_body(report, *, images=True):
    """The report's tables and notes without its header: the summary, the runs on lines, a
    section per workload, the run-time modes and the checks (``compressor-report --results``
    puts them under :func:`provenance.write_results`' header). ``images``: link the plots
    (``summary.png`` and each workload's, which ``write_report`` writes beside ``report.md``)."""
    lines = _summary(report["workloads"], images) + _lines_summary(report)
    for m in report["workloads"]:
        lines += _workload(m, report["record_format"], images) + _lines_section(m)
    return "\n".join(lines + _modes(report["workloads"]) + _checks(report["workloads"]))


def describe_run(report):
    """The simulator, the configuration and the conventions of a report, in two sentences
    (the header of ``report.md`` and of ``--results`` both say them)."""
    cfg = report["configuration"]
    return (f"RTL simulator: {report['backend']}; configuration: {cfg['sets']} sets x "
            f"{cfg['ways']} ways, max_updates {cfg['max_updates']}, L2 depth "
            f"{cfg['fifo_depth']}, burst at {cfg['burst_size']}; "
            f"{'the whole-line rule' if cfg['whole_line'] else 'the seed policy'}; "
            f"DRAM ready: {cfg['dram']}"
            + (f"; lines of {cfg['lanes']} lanes" if "lanes" in cfg else "")
            + (f"; threshold overridden to {cfg['threshold']}" if cfg["threshold"] is not None
               else "")
            + (f"; first {cfg['limit']} gradients of each workload" if cfg.get("limit")
               else "")
            + ". All figures are after the final flush (a flush ends every training step). "
            f"Record format: {report['record_format']['description']}. "
            f"Compression ratio = gradients / DRAM writes; "
            f"bandwidth reduction = 1 - bytes out / bytes in")


def _header(report):
    return ["# Gradient compressor bandwidth report", "",
            f"Command: `{report['command']}`  ",
            describe(report), "", describe_run(report) + ".", ""]


def _summary(workloads, images=True):
    ok = [m for m in workloads if m["conservation"]["ok"]]
    if not ok:
        return []
    rows = [[m["workload"], fmt(m["gradients"]), m["trace"]["steps"],
             fmt(m["dram_writes"]), fmt(m["compression_ratio"], "ratio"),
             fmt(m["bandwidth_reduction"], "pct"),
             fmt(m["reference_points"]["oracle"]["compression_ratio"], "ratio"),
             fmt(m["l1_hit_rate"], "pct"), fmt(m["cycles_per_gradient"], "float"),
             f"{m['bursts']['count']} ({fmt(m['bursts']['mean_length'], 'float')})"]
            for m in ok]
    return ["## Summary", "",
            table(rows, ["workload", "gradients", "steps", "DRAM writes", "ratio",
                         "bandwidth reduction", "oracle ratio", "L1 hit rate",
                         "cycles/gradient", "bursts (mean length)"]),
            ""] + (["![compression ratio per workload](summary.png)", ""] if images else [])


def _workload(m, record_format, images=True):
    """A workload's section: its figures, the seed comparison, its plots (if ``images``)."""
    lines = [f"## {m['workload']}", "", m["description"], ""]
    if not m["conservation"]["ok"]:
        return lines + [f"**{m['conservation']['message']}**", "",
                        "No ratio is reported for this workload.", ""]
    lines += _figures(m) + _notes(m)
    if "seed_comparison" in m:
        lines += _seed_comparison(m["seed_comparison"], record_format)
    if images and m.get("plots"):
        lines += [f"![writes by cause]({m['plots']['causes']})",
                  f"![burst lengths]({m['plots']['bursts']})", ""]
    return lines


def _figures(m):
    refs = m["reference_points"]
    figures = [("gradients in", "gradients", "int"), ("DRAM writes", "dram_writes", "int"),
               ("bytes in", "bytes_in", "int"), ("bytes out", "bytes_out", "int"),
               ("compression ratio", "compression_ratio", "ratio"),
               ("bandwidth reduction", "bandwidth_reduction", "pct")]
    rows = [[label, fmt(m[key], kind), fmt(refs["oracle"][key], kind),
             fmt(refs["no_compression"][key], kind)] for label, key, kind in figures]
    rows += [[f"writes: {cause}", fmt(m["writes_by_cause"][cause]),
              fmt(refs["oracle"]["writes_by_cause"][cause]), ""] for cause in CAUSES]
    return [table(rows, ["", "RTL", "oracle (unbounded L1)", "no compression"])]


def _notes(m):
    b = m["bursts"]
    return ["",
            f"- L1: {fmt(m['l1_hits'])} hits, {fmt(m['l1_misses'])} misses "
            f"(hit rate {fmt(m['l1_hit_rate'], 'pct')} of the small gradients)",
            f"- cycles: {fmt(m['cycles'])} ({fmt(m['cycles_per_gradient'], 'float')} "
            f"per gradient), of which {fmt(m['flush_cycles_total'])} in "
            f"{m['flushes']} flushes (longest {fmt(m['flush_cycles_max'])}); "
            f"DRAM stalled the pipeline {fmt(m['dram_stall_cycles'])} cycles; input "
            f"not ready {fmt(m['input_stall_cycles'])} cycles",
            f"- DRAM bursts (runs of consecutive-cycle writes): {b['count']}, mean length "
            f"{fmt(b['mean_length'], 'float')}, longest {b['max_length']}",
            f"- {m['conservation']['message']}",
            "- cross-check: the RTL's writes and causes "
            + ("match the reference model (same geometry) write for write"
               if m["cross_check"]["match"] else
               f"**DIFFER from the reference model**: {m['cross_check']}"),
            f"- trace: {m['trace']['distinct_addresses']} addresses, "
            f"{fmt(m['trace']['zero_fraction'], 'pct')} zeros, "
            f"{fmt(m['trace']['direct_fraction'], 'pct')} at or above the threshold",
            f"- simulated with {m['simulation']['backend']} in "
            f"{m['simulation']['seconds']} s", ""]


def _seed_comparison(comparison, record_format):
    s, o = comparison["seed"], comparison["ours"]
    rows = [
        ["gradients in", s["gradients"], o["gradients"]],
        ["writes pushed into L2 before the flush", s["pushes_into_l2"],
         o["writes_before_flush_cause"]],
        ["DRAM writes counted", s["dram_writes"], o["dram_writes"]],
        ["flush writes", "0 (never flushed)", o["flush_writes"]],
        ["compression ratio", f"{s['compression_ratio']:.2f}x",
         f"{o['compression_ratio']:.2f}x"],
        ["bandwidth reduction, 4 bytes per record (the seed's convention)",
         f"{100 * s['bandwidth_reduction']:.2f} %",
         f"{100 * o['bandwidth_reduction_seed_convention']:.2f} %"],
        [f"bandwidth reduction, {record_format['bytes_per_gradient']}-byte gradients / "
         f"{record_format['bytes_per_write']}-byte writes", "n/a",
         f"{100 * o['bandwidth_reduction']:.2f} %"]]
    lines = ["### Seed comparison", "",
             table(rows, ["", "seed's report (no flush)", "ours (after the flush)"]), ""]
    phases = comparison.get("phases")
    if phases:
        rows = [[row["name"], row["gradients"], row["writes"],
                 *(row["writes_by_cause"][c] for c in CAUSES)] for row in phases]
        lines += ["Writes triggered by each phase's gradients (reference model, same "
                  "geometry; equal to the RTL's):", "",
                  table(rows, ["phase", "gradients", "writes", *CAUSES]), ""]
    return lines


def _modes(workloads):
    moded = [m for m in workloads if m.get("modes")]
    if not moded:
        return []
    lines = ["## Run-time modes", "",
             "Each setting (`python -m gradient_compressor.reports.mode_comparison`, "
             "docs/reports.md) run on the RTL and on the reference model; figures from the "
             "model, which the RTL matched write for write, cause for cause and discard for "
             "discard. Error = DRAM content minus exact, per address after each step.", ""]
    for m in moded:
        w = m["modes"]
        on_lines = (f", on {w['lanes']} lanes ({w['beats']} beats, line model)"
                    if w.get("lanes") else "")
        lines += [f"### {m['workload']}: threshold {w['threshold']}, small_threshold "
                  f"{w['small_threshold']}{on_lines}", "",
                  mode_table(w["rows"], w.get("lanes", 1)), ""]
        bad = [r["mode"] for r in w["rows"] if not r["rtl_check"]]
        if bad:
            lines += [f"**RTL check FAILED for {', '.join(bad)}**", ""]
    return lines


def _checks(workloads):
    failed = [m["workload"] for m in workloads if not m["conservation"]["ok"]]
    mismatch = [m["workload"] for m in workloads
                if m["conservation"]["ok"] and not m["cross_check"]["match"]]
    conservation = ("FAILED for " + ", ".join(failed)) if failed else "holds for every workload"
    model = ("MISMATCH for " + ", ".join(mismatch)) if mismatch \
        else "identical for every workload"
    return ["## Checks", "", f"- conservation: {conservation}",
            f"- RTL vs reference model: {model}", *_lines_checks(workloads), ""]


# -- the runs on lines (``--lanes N``) ------------------------------------------------------------

_WAYS = (("dense", "dense write-through"), ("records", "per-gradient records"),
         ("lines", "masked line writes"))


def _lines_summary(report):
    """The DRAM cost of the three ways of writing, per workload, on lines."""
    ok = [m for m in report["workloads"]
          if m.get("lines") and m["lines"]["conservation"]["ok"]]
    if not ok:
        return []
    lanes = report["configuration"]["lanes"]
    rows = []
    for m in ok:
        costs = m["lines"]["costs"]
        rows.append([m["workload"], fmt(m["lines"]["gradients"]), fmt(m["lines"]["beats"]),
                     *(fmt(costs[way][key]) for way, _ in _WAYS
                       for key in ("transfers", "bytes")),
                     _versus(costs["lines"]["bytes"], costs["dense"]["bytes"])])
    headers = ["workload", "gradients", "beats"] + [f"{name}: {key}" for _, name in _WAYS
                                                    for key in ("transfers", "bytes")]
    return [f"## On lines of {lanes} lanes", "",
            f"Each workload packed into beats of {lanes} lanes (a run of gradients to one "
            f"line, each lane at most once, one threshold; a flush ends a beat) and run "
            f"through the RTL on lines ({report['configuration']['sets']} x "
            f"{report['configuration']['ways']} lines). DRAM transfers and bytes three ways: "
            f"dense write-through of the beats, per-gradient records (the one-lane RTL "
            f"above, its DRAM writes), masked line writes (the RTL on lines, its DRAM "
            f"writes). Bytes: {report['line_format']}.", "",
            table(rows, headers + ["line bytes saved vs dense"]), ""]


def _versus(cost, dense):
    return f"{100 * (1 - cost / dense):+.1f} %" if dense else "n/a"


def _lines_section(m):
    """A workload's run on lines: its costs, its lane writes by cause, its checks."""
    lines = m.get("lines")
    if lines is None:
        return []
    head = [f"### {m['workload']} on lines of {lines['lanes']} lanes", ""]
    if not lines["conservation"]["ok"]:
        return head + [f"**{lines['conservation']['message']}**", "",
                       "No figure is reported for this workload on lines.", ""]
    rows = [[name, fmt(lines["costs"][way]["transfers"]), fmt(lines["costs"][way]["bytes"])]
            for way, name in _WAYS]
    causes = [[cause, fmt(lines["lane_writes_by_cause"][cause]),
               fmt(lines["line_writes_by_cause"][cause])] for cause in CAUSES]
    check = lines["cross_check"]
    return head + [
        table(rows, ["way of writing", "DRAM transfers", "bytes"]), "",
        table(causes, ["cause", "lanes written (line model)",
                       "line writes into L2 with a lane of it (RTL)"]), "",
        f"- {fmt(lines['beats'])} beats of {fmt(lines['gradients'])} gradients; the line "
        f"model's {fmt(lines['model_line_writes'])} line writes left L2 as "
        f"{fmt(lines['costs']['lines']['transfers'])} DRAM line writes (L2 combines a "
        f"write into the newest it holds for the same line), {fmt(lines['lane_writes'])} "
        f"lanes written",
        f"- cycles: {fmt(lines['cycles'])} ({fmt(lines['cycles_per_beat'], 'float')} per "
        f"beat), {fmt(lines['flush_cycles_total'])} in flushes; DRAM stalled "
        f"{fmt(lines['dram_stall_cycles'])} cycles",
        f"- {lines['conservation']['message']}",
        "- line model check: " + ("the causes of the line writes into L2 match write for "
                                  "write; DRAM's writes match in order, run by run of "
                                  "writes to one line, up to L2's combining"
                                  if check["match"] else
                                  f"**DIFFERS from the line model**: {check}"),
        f"- simulated with {lines['simulation']['backend']} in "
        f"{lines['simulation']['seconds']} s", ""]


def _lines_checks(workloads):
    """The checks' lines for the runs on lines (none without ``--lanes``)."""
    runs = [m for m in workloads if m.get("lines")]
    if not runs:
        return []
    failed = [m["workload"] for m in runs if not m["lines"]["conservation"]["ok"]]
    mismatch = [m["workload"] for m in runs if m["lines"]["conservation"]["ok"]
                and not m["lines"]["cross_check"]["match"]]
    return [f"- on lines, conservation per address: "
            + (("FAILED for " + ", ".join(failed)) if failed else "holds for every workload"),
            f"- on lines, RTL vs line model: "
            + (("MISMATCH for " + ", ".join(mismatch)) if mismatch
               else "equal for every workload (causes write for write, DRAM run by run)")]
