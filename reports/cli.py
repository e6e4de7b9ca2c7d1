"""``compressor-report``: bandwidth reports from cycle-accurate simulation of the RTL.

Each workload (a trace) runs through :class:`design.GradientCompressor` with a flush at every
step boundary; the report counts every DRAM write the steps cost, after the final flush. It
writes ``report.md``, ``report.json`` (every figure) and PNG plots into the output folder.

Checks, each of which makes the command exit non-zero (status 1) instead of printing a ratio:

* conservation: per address, the values written to DRAM add up to the gradients accepted, and
  every gradient offered was accepted;
* the RTL's writes (and their causes) equal :class:`model.ReferenceModel`'s with the same
  geometry, write for write.

A bad argument or trace file exits with status 2 and a one-line message.
"""

import json
import os
import shlex
import sys
import time
from collections import Counter

from design.params import DEFAULTS, check_config, check_threshold
from model import CAUSES

from .backend import BACKENDS, parse_dram, resolve_backend, run_rtl
from .metrics import (BYTES_PER_GRADIENT, BYTES_PER_WRITE, RECORD_FORMAT, check_conservation,
                      compute_metrics)
from .console import (DEFAULT_OUT, ArgumentParser, UsageError, check_writable, integer,
                      interrupted, positive_integer, prepare_out, table, usage_error)
from .console import progress as console_progress
from .mode_comparison import mode_table
from .provenance import describe, provenance

__all__ = ["main", "run_workload", "write_report", "render_markdown", "seed_comparison"]



def check_params(params, threshold=None, *, threshold_option="--threshold"):
    """Check a compressor configuration (``params``: some of :data:`design.params.DEFAULTS`'
    keys) and a threshold with the design's own checks; raise :class:`UsageError` naming the
    command-line option."""
    try:
        check_config(**dict(DEFAULTS, **params))
    except (TypeError, ValueError) as error:
        # "sets must be ..." -> "--sets must be ...": the user typed the option, not the name.
        name, _, rest = str(error).partition(" ")
        raise UsageError(f"--{name.replace('_', '-')} {rest}") from None
    if threshold is not None:
        try:
            check_threshold(threshold, DEFAULTS["grad_width"])
        except ValueError as error:
            raise UsageError(f"{threshold_option} {str(error).partition(' ')[2]}") from None


def parse_params(items):
    """``["steps=50", "widths=64,32,10"]`` -> ``{"steps": 50, "widths": (64, 32, 10)}``."""
    def number(text):
        try:
            return int(text)
        except ValueError:
            return float(text)
    params = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise ValueError(f"bad --param {item!r}: use KEY=VALUE")
        try:
            params[key] = tuple(number(v) for v in value.split(",")) if "," in value \
                else number(value)
        except ValueError:
            raise ValueError(f"bad --param {item!r}: the value must be a number or a "
                             f"comma-separated list of numbers") from None
    return params


def build_parser():
    from workloads import DEFAULT_WORKLOADS
    parser = ArgumentParser(
        prog="compressor-report",
        description="Run gradient workloads through the compressor's RTL (a flush at every "
                    "training-step boundary) and write a Markdown report, a JSON file with "
                    "every figure and PNG plots. Every figure is counted after the final flush.",
        epilog="Workloads: seed, synthetic-one-pass, synthetic-microbatch, synthetic-embedding, "
               "synthetic-tiled, the recorded traces in workloads/traces/ (tiny-embed, "
               "tiny-mlp), or a path to a .npz trace (format: docs/reports.md). "
               "Exit status: 0 all checks passed, 1 a conservation or model cross-check failed, "
               "2 bad argument or trace file.")
    parser.add_argument("workloads", nargs="*", metavar="WORKLOAD",
                        help=f"workload names or .npz trace paths "
                             f"(default: {' '.join(DEFAULT_WORKLOADS)})")
    parser.add_argument("--list", action="store_true", help="list the workload names and exit")
    parser.add_argument("--out", default=DEFAULT_OUT,
                        help=f"output folder (default: {DEFAULT_OUT})")
    geometry = parser.add_argument_group("compressor configuration (the design's defaults)")
    geometry.add_argument("--sets", type=integer, default=DEFAULTS["sets"],
                          help="L1 sets, a power of two (default: %(default)s)")
    geometry.add_argument("--ways", type=integer, default=DEFAULTS["ways"],
                          help="L1 ways, a power of two (default: %(default)s)")
    geometry.add_argument("--max-updates", type=integer, default=DEFAULTS["max_updates"],
                          help="default: %(default)s")
    geometry.add_argument("--fifo-depth", type=integer, default=DEFAULTS["fifo_depth"],
                          help="L2 buffer depth (default: %(default)s)")
    geometry.add_argument("--burst-size", type=integer, default=DEFAULTS["burst_size"],
                          help="L2 level that starts a DRAM burst (default: %(default)s)")
    run = parser.add_argument_group("run")
    run.add_argument("--threshold", type=integer, default=None,
                     help="override the traces' thresholds with this one")
    run.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                     help="parameter of the synthetic generators (repeatable), e.g. "
                          "--param steps=50 --param k=8 (integers, floats or comma lists)")
    run.add_argument("--limit", type=positive_integer, default=None,
                     help="keep only the first N gradients of each workload")
    run.add_argument("--dram", default="always",
                     help="DRAM ready pattern: always (default), every-other, random:P[:SEED]")
    run.add_argument("--sim", choices=BACKENDS, default=None,
                     help="RTL simulator: compiled (CXXRTL, default when available) or "
                          "amaranth (slow, ~2000 cycles/s)")
    run.add_argument("--vcd", default=None, metavar="FILE",
                     help="write the first --vcd-cycles cycles of the workload (one workload "
                          "only) as a waveform, with a GTKWave save file (.gtkw) beside it")
    run.add_argument("--vcd-cycles", type=positive_integer, default=2000, metavar="N",
                     help="cycles to write with --vcd (default: %(default)s)")
    run.add_argument("--modes", action="store_true",
                     help="add the run-time modes compared on every workload (exact, drop, "
                          "stochastic, EMA, bypass: python -m reports.mode_comparison), each setting run "
                          "on the RTL and checked against the reference model")
    run.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    return parser


def run_workload(trace, params, *, backend, dram="always", threshold=None, progress=True,
                 result_filter=None, vcd=None, vcd_cycles=None):
    """Simulate one trace and compute its metrics (writing its first ``vcd_cycles`` cycles to
    the waveform ``vcd`` if given); ``result_filter`` (for tests) may alter the simulation
    result before the checks."""
    ops = trace.ops(threshold=threshold)
    if threshold is not None:
        trace = trace.__class__(trace.addr, trace.grad, trace.step_end,
                                [threshold] * trace.steps, name=trace.name,
                                description=trace.description + f" (threshold set to "
                                                                 f"{threshold})",
                                meta=dict(trace.meta, threshold_per="step"))
    bar = console_progress(len(ops), f"{trace.name} ({len(trace)} gradients, {backend})",
                           enabled=progress)
    start = time.monotonic()
    result = run_rtl(backend, params, ops, dram_ready=parse_dram(dram), progress=bar, vcd=vcd,
                     vcd_cycles=vcd_cycles)
    seconds = time.monotonic() - start
    if result_filter is not None:
        result = result_filter(result)
    conservation = check_conservation(result.accepted, result.writes,
                                      offered=zip(trace.addr.tolist(), trace.grad.tolist()))
    metrics = compute_metrics(trace, result, ops, sets=params["sets"], ways=params["ways"],
                              max_updates=params["max_updates"], conservation=conservation)
    metrics["simulation"] = {"backend": backend, "seconds": round(seconds, 3),
                             "cycles_per_second": round(result.cycles / seconds)
                             if seconds > 0 else None}
    if trace.name == "seed" and conservation.ok and "phases" in trace.meta:
        metrics["seed_comparison"] = seed_comparison(metrics, result)
        metrics["seed_comparison"]["phases"] = phase_writes(trace, params, threshold)
    return metrics


def phase_writes(trace, params, threshold=None):
    """Writes triggered by the gradients of each phase of a trace (``meta["phases"]``), by
    cause, from the reference model of the same geometry (equal to the RTL's writes, as the
    cross-check shows); the final flush's writes are listed as their own phase."""
    from model import ReferenceModel
    model = ReferenceModel(sets=params["sets"], ways=params["ways"],
                           max_updates=params["max_updates"])
    thresholds = trace.thresholds().tolist() if threshold is None else [threshold] * len(trace)
    addr, grad = trace.addr.tolist(), trace.grad.tolist()
    rows = []
    for phase in trace.meta["phases"]:
        causes = Counter()
        for i in range(phase["start"], phase["end"]):
            causes.update(w.cause for w in model.write(addr[i], grad[i], thresholds[i]))
        rows.append({"name": phase["name"], "gradients": phase["end"] - phase["start"],
                     "writes": sum(causes.values()),
                     "writes_by_cause": {c: causes.get(c, 0) for c in CAUSES}})
    flushed = Counter(w.cause for w in model.flush())
    rows.append({"name": "final flush", "gradients": 0, "writes": sum(flushed.values()),
                 "writes_by_cause": {c: flushed.get(c, 0) for c in CAUSES}})
    return rows


def seed_comparison(metrics, result):
    """The seed's reported figures (no flush) next to ours (after the flush)."""
    from workloads import SEED_REPORTED
    pushed_before_flush = sum(1 for c in result.causes if c != "FLUSH")
    n, w = metrics["gradients"], metrics["dram_writes"]
    return {
        "seed": SEED_REPORTED,
        "ours": {
            "gradients": n, "dram_writes": w,
            "writes_before_flush_cause": pushed_before_flush,
            "flush_writes": metrics["writes_by_cause"]["FLUSH"],
            "compression_ratio": n / w,
            "bandwidth_reduction_seed_convention": 1 - w / n,
            "bytes_in_seed_convention": 4 * n, "bytes_out_seed_convention": 4 * w,
            "bandwidth_reduction": metrics["bandwidth_reduction"],
        },
    }


def _fmt(value, kind="int"):
    if value is None:
        return "n/a"
    if kind == "ratio":
        return f"{value:.2f}x"
    if kind == "pct":
        return f"{100 * value:.1f} %"
    if kind == "float":
        return f"{value:.3f}"
    return f"{value:,}".replace(",", " ")


def render_markdown(report):
    """The Markdown text of a report (``report`` is what ``report.json`` holds)."""
    cfg = report["configuration"]
    lines = ["# Gradient compressor bandwidth report", "",
             f"Command: `{report['command']}`  ",
             describe(report) + "  ",
             f"RTL simulator: {report['backend']}; configuration: {cfg['sets']} sets x "
             f"{cfg['ways']} ways, max_updates {cfg['max_updates']}, L2 depth "
             f"{cfg['fifo_depth']}, burst at {cfg['burst_size']}; DRAM ready: {cfg['dram']}"
             + (f"; threshold overridden to {cfg['threshold']}" if cfg["threshold"] is not None
                else ""), "",
             f"All figures are after the final flush (a flush ends every training step). "
             f"Record format: {RECORD_FORMAT}. Compression ratio = gradients / DRAM writes; "
             f"bandwidth reduction = 1 - bytes out / bytes in.", ""]
    ok = [m for m in report["workloads"] if m["conservation"]["ok"]]
    if ok:
        summary = [[m["workload"], _fmt(m["gradients"]), m["trace"]["steps"],
                    _fmt(m["dram_writes"]), _fmt(m["compression_ratio"], "ratio"),
                    _fmt(m["bandwidth_reduction"], "pct"),
                    _fmt(m["reference_points"]["oracle"]["compression_ratio"], "ratio"),
                    _fmt(m["l1_hit_rate"], "pct"), _fmt(m["cycles_per_gradient"], "float"),
                    f"{m['bursts']['count']} ({_fmt(m['bursts']['mean_length'], 'float')})"]
                   for m in ok]
        lines += ["## Summary", "",
                  table(summary, ["workload", "gradients", "steps", "DRAM writes", "ratio",
                                  "bandwidth reduction", "oracle ratio", "L1 hit rate",
                                  "cycles/gradient", "bursts (mean length)"]),
                  "", "![compression ratio per workload](summary.png)", ""]
    for m in report["workloads"]:
        lines += [f"## {m['workload']}", "", m["description"], ""]
        if not m["conservation"]["ok"]:
            lines += [f"**{m['conservation']['message']}**", "",
                      "No ratio is reported for this workload.", ""]
            continue
        refs = m["reference_points"]
        figures = [("gradients in", "gradients", "int"), ("DRAM writes", "dram_writes", "int"),
                   ("bytes in", "bytes_in", "int"), ("bytes out", "bytes_out", "int"),
                   ("compression ratio", "compression_ratio", "ratio"),
                   ("bandwidth reduction", "bandwidth_reduction", "pct")]
        rows = [[label, _fmt(m[key], kind), _fmt(refs["oracle"][key], kind),
                 _fmt(refs["no_compression"][key], kind)] for label, key, kind in figures]
        rows += [[f"writes: {cause}", _fmt(m["writes_by_cause"][cause]),
                  _fmt(refs["oracle"]["writes_by_cause"][cause]), ""] for cause in CAUSES]
        lines.append(table(rows, ["", "RTL", "oracle (unbounded L1)", "no compression"]))
        b = m["bursts"]
        lines += ["",
                  f"- L1: {_fmt(m['l1_hits'])} hits, {_fmt(m['l1_misses'])} misses "
                  f"(hit rate {_fmt(m['l1_hit_rate'], 'pct')} of the small gradients)",
                  f"- cycles: {_fmt(m['cycles'])} ({_fmt(m['cycles_per_gradient'], 'float')} "
                  f"per gradient), of which {_fmt(m['flush_cycles_total'])} in "
                  f"{m['flushes']} flushes (longest {_fmt(m['flush_cycles_max'])}); "
                  f"DRAM stalled the pipeline {_fmt(m['dram_stall_cycles'])} cycles; input "
                  f"not ready {_fmt(m['input_stall_cycles'])} cycles",
                  f"- DRAM bursts (runs of consecutive-cycle writes): {b['count']}, mean length "
                  f"{_fmt(b['mean_length'], 'float')}, longest {b['max_length']}",
                  f"- {m['conservation']['message']}",
                  "- cross-check: the RTL's writes and causes "
                  + ("match the reference model (same geometry) write for write"
                     if m["cross_check"]["match"] else
                     f"**DIFFER from the reference model**: {m['cross_check']}"),
                  f"- trace: {m['trace']['distinct_addresses']} addresses, "
                  f"{_fmt(m['trace']['zero_fraction'], 'pct')} zeros, "
                  f"{_fmt(m['trace']['direct_fraction'], 'pct')} at or above the threshold",
                  f"- simulated with {m['simulation']['backend']} in "
                  f"{m['simulation']['seconds']} s", ""]
        if "seed_comparison" in m:
            s, o = m["seed_comparison"]["seed"], m["seed_comparison"]["ours"]
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
                ["bandwidth reduction, 6-byte gradients / 8-byte writes", "n/a",
                 f"{100 * o['bandwidth_reduction']:.2f} %"]]
            lines += ["### Seed comparison", "",
                      table(rows, ["", "seed's report (no flush)", "ours (after the flush)"]),
                      ""]
            phases = m["seed_comparison"].get("phases")
            if phases:
                rows = [[row["name"], row["gradients"], row["writes"],
                         *(row["writes_by_cause"][c] for c in CAUSES)] for row in phases]
                lines += ["Writes triggered by each phase's gradients (reference model, same "
                          "geometry; equal to the RTL's):", "",
                          table(rows, ["phase", "gradients", "writes", *CAUSES]), ""]
        if m.get("plots"):
            lines += [f"![writes by cause]({m['plots']['causes']})",
                      f"![burst lengths]({m['plots']['bursts']})", ""]
    moded = [m for m in report["workloads"] if m.get("modes")]
    if moded:
        lines += ["## Run-time modes", "",
                  "Each setting (`python -m reports.mode_comparison`, docs/reports.md) run on the RTL and "
                  "on the reference model; figures from the model, which the RTL matched write "
                  "for write, cause for cause and discard for discard. Error = DRAM content "
                  "minus exact, per address after each step.", ""]
        for m in moded:
            w = m["modes"]
            lines += [f"### {m['workload']}: threshold {w['threshold']}, small_threshold "
                      f"{w['small_threshold']}", "", mode_table(w["rows"]), ""]
            bad = [r["mode"] for r in w["rows"] if not r["rtl_check"]]
            if bad:
                lines += [f"**RTL check FAILED for {', '.join(bad)}**", ""]
    failed = [m["workload"] for m in report["workloads"] if not m["conservation"]["ok"]]
    mismatch = [m["workload"] for m in report["workloads"]
                if m["conservation"]["ok"] and not m["cross_check"]["match"]]
    conservation = ("FAILED for " + ", ".join(failed)) if failed else "holds for every workload"
    model = ("MISMATCH for " + ", ".join(mismatch)) if mismatch \
        else "identical for every workload"
    lines += ["## Checks", "", f"- conservation: {conservation}",
              f"- RTL vs reference model: {model}", ""]
    return "\n".join(lines)


def write_report(report, out, plots=True):
    """Write ``report.json``, ``report.md`` and the plots into ``out``."""
    os.makedirs(out, exist_ok=True)
    geometry = f"{report['configuration']['sets']}x{report['configuration']['ways']}"
    if plots:
        from . import plots as p
        for m in report["workloads"]:
            if m["conservation"]["ok"]:
                m["plots"] = {"causes": f"{m['workload']}-causes.png",
                              "bursts": f"{m['workload']}-bursts.png"}
                p.plot_causes(m, os.path.join(out, m["plots"]["causes"]), geometry)
                p.plot_bursts(m, os.path.join(out, m["plots"]["bursts"]))
        p.plot_summary(report["workloads"], os.path.join(out, "summary.png"), geometry)
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(render_markdown(report))


def main(argv=None, *, result_filter=None):
    """Entry point; returns the exit status (``result_filter`` is a test hook)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from workloads import workload_names
    if args.list:
        print("\n".join(workload_names()))
        return 0
    new_out = not os.path.exists(args.out)
    try:
        return _report(args, argv, result_filter)
    except UsageError as error:
        return usage_error(parser.prog, error)
    except KeyboardInterrupt:
        from simulation.waves import gtkw_path_for
        vcd = [args.vcd, gtkw_path_for(args.vcd)] if args.vcd else []
        return interrupted(parser.prog, files=vcd, folder=args.out if new_out else None)


def _report(args, argv, result_filter):
    from workloads import DEFAULT_WORKLOADS, TraceError, get_workload
    params = {"sets": args.sets, "ways": args.ways, "max_updates": args.max_updates,
              "fifo_depth": args.fifo_depth, "burst_size": args.burst_size}
    check_params(params, args.threshold)
    try:
        parse_dram(args.dram)
    except ValueError as error:
        raise UsageError(error) from None
    names = args.workloads or DEFAULT_WORKLOADS
    if args.param and not any(name.startswith("synthetic-") for name in names):
        raise UsageError("--param applies to the synthetic workloads, and none is named")
    if args.vcd and len(names) != 1:
        raise UsageError(f"--vcd writes one workload's waveform: name one workload, not "
                         f"{len(names)}")
    if args.vcd:
        check_writable("--vcd", args.vcd)
    try:
        synthetic_params = parse_params(args.param)
        traces = [get_workload(name, **synthetic_params) for name in names]
    except (ValueError, TraceError) as error:
        raise UsageError(error) from None
    empty = [t.name for t in traces if len(t) == 0]
    if empty:
        raise UsageError(f"{', '.join(empty)}: the trace has no gradients")
    if args.limit:
        traces = [t.head(args.limit) for t in traces]
    prepare_out(args.out)
    backend = resolve_backend(args.sim)
    report = {"command": "compressor-report " + " ".join(map(shlex.quote, argv if argv is not None
                                                              else sys.argv[1:])),
              **provenance(),
              "backend": backend,
              "configuration": dict(params, dram=args.dram, threshold=args.threshold,
                                    limit=args.limit),
              "record_format": {"bytes_per_gradient": BYTES_PER_GRADIENT,
                                "bytes_per_write": BYTES_PER_WRITE,
                                "description": RECORD_FORMAT},
              "workloads": []}
    for trace in traces:
        try:
            metrics = run_workload(trace, params, backend=backend, dram=args.dram,
                                   threshold=args.threshold, progress=not args.quiet,
                                   result_filter=result_filter, vcd=args.vcd,
                                   vcd_cycles=args.vcd_cycles)
        except ValueError as error:     # e.g. gradients outside the configured widths
            raise UsageError(f"{trace.name}: {error}") from None
        except AssertionError as error:  # the driver saw the DRAM stream's rules broken
            print(f"compressor-report: {trace.name}: the RTL broke the DRAM stream protocol: "
                  f"{error}", file=sys.stderr)
            return 1
        except RuntimeError as error:    # e.g. the compiled simulator failed to build or run
            print(f"compressor-report: error: {trace.name}: {error}", file=sys.stderr)
            return 1
        if args.modes:
            from .mode_comparison import compare_modes
            try:
                metrics["modes"] = compare_modes(trace, threshold=args.threshold, params=params,
                                                 backend=backend)
            except ValueError as error:
                raise UsageError(f"--modes: {error}") from None
        report["workloads"].append(metrics)
        if metrics["conservation"]["ok"]:
            oracle = metrics["reference_points"]["oracle"]["compression_ratio"]
            print(f"{trace.name}: {metrics['gradients']} gradients -> {metrics['dram_writes']} "
                  f"DRAM writes after flush ({_fmt(metrics['compression_ratio'], 'ratio')}, "
                  f"oracle {_fmt(oracle, 'ratio')}), "
                  f"cross-check {'ok' if metrics['cross_check']['match'] else 'MISMATCH'}",
                  file=sys.stderr)
        else:
            print(f"{trace.name}: {metrics['conservation']['message']}", file=sys.stderr)
    try:
        write_report(report, args.out, plots=not args.no_plots)
    except OSError as error:
        raise UsageError(f"--out {args.out}: cannot write the report ({error})") from None
    print(f"wrote {os.path.join(args.out, 'report.md')}, report.json"
          + ("" if args.no_plots else " and plots"), file=sys.stderr)
    if args.vcd:
        from simulation.waves import gtkw_path_for
        print(f"wrote the first {args.vcd_cycles} cycles to {args.vcd}: gtkwave {args.vcd} "
              f"{gtkw_path_for(args.vcd)}", file=sys.stderr)
    bad = [m for m in report["workloads"]
           if not m["conservation"]["ok"] or not m["cross_check"]["match"]
           or not all(r["rtl_check"] for r in m.get("modes", {}).get("rows", []))]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
