"""``compressor-report``: bandwidth reports from cycle-accurate simulation of the RTL.

Each workload (a trace) runs through :class:`design.GradientCompressor` with a flush at every
step boundary; the report counts every DRAM write the steps cost, after the final flush. It
writes ``report.md``, ``report.json`` (every figure) and PNG plots into the output folder.

Checks, each of which makes the command exit non-zero (status 1) instead of printing a ratio:

* conservation: per address, the values written to DRAM add up to the gradients accepted, and
  every gradient offered was accepted;
* the RTL's writes (and their causes) equal :class:`model.ReferenceModel`'s with the same
  geometry, write for write.

With ``--lanes N`` (N > 1) each workload also runs packed into beats of N lanes through the
RTL on lines, with its own checks and the DRAM cost of three ways of writing
(:mod:`reports.line_report`).

With ``--results FILE.md`` the report's tables (no plots) are also written to ``FILE.md``,
headed by the command, the package version, the commit and the date
(:func:`provenance.write_results`): ``make report`` writes docs/results/report*.md so.

A bad argument or trace file exits with status 2 and a one-line message.
"""

import json
import os
import shlex
import sys
import time
from collections import Counter

from gradient_compressor.design.params import (DEFAULTS, L1_ENTRIES_MAX, WHOLE_LINE, Config,
                                               check_threshold)
from gradient_compressor.model import CAUSES

from .backend import BACKENDS, parse_dram, resolve_backend, run_rtl
from .line_costs import FORMAT as LINE_FORMAT
from .line_report import run_lines
from .metrics import (BYTES_PER_GRADIENT, bytes_per_write, record_format, check_conservation,
                      compute_metrics)
from gradient_compressor.console import (DEFAULT_OUT, ArgumentParser, UsageError, add_policy_option,
                                         check_results_file, check_writable,
                                         file_name, integer, parse_params, positive_integer,
                                         prepare_out, replacing, run_command)
from gradient_compressor.console import progress as console_progress
from .markdown import describe_run, fmt, render_body, render_markdown
from gradient_compressor.provenance import provenance, write_results

__all__ = ["main", "run_workload", "write_report", "write_results_file", "render_markdown",
           "seed_comparison"]



def check_params(params, threshold=None, *, threshold_option="--threshold"):
    """Check a compressor configuration (``params``: some of :data:`design.params.DEFAULTS`'
    keys) and a threshold with the design's own checks; raise :class:`UsageError` naming the
    command-line option."""
    try:
        Config(**params)
    except (TypeError, ValueError) as error:
        # "sets must be ..." -> "--sets must be ...": the user typed the option, not the name.
        name, _, rest = str(error).partition(" ")
        raise UsageError(f"--{name.replace('_', '-')} {rest}") from None
    if threshold is not None:
        try:
            check_threshold(threshold, DEFAULTS["grad_width"])
        except ValueError as error:
            raise UsageError(f"{threshold_option} {str(error).partition(' ')[2]}") from None


def build_parser():
    from gradient_compressor.workloads import DEFAULT_WORKLOADS
    parser = ArgumentParser(
        prog="compressor-report",
        description="Run gradient workloads through the compressor's RTL (a flush at every "
                    "training-step boundary) and write a Markdown report, a JSON file with "
                    "every figure and PNG plots. Every figure is counted after the final flush.",
        epilog="Workloads: seed, synthetic-one-pass, synthetic-microbatch, synthetic-embedding, "
               "synthetic-tiled, the recorded traces in workloads/traces/ (tiny-embed, "
               "tiny-mlp), the live ones recorded by training (train-recsys, train-lm, "
               "train-digits; need PyTorch: docs/training.md), or a path to a .npz trace "
               "(format: docs/reports.md). "
               "Exit status: 0 all checks passed, 1 a conservation or model cross-check failed, "
               "2 bad argument or trace file.")
    parser.add_argument("workloads", nargs="*", metavar="WORKLOAD",
                        help=f"workload names or .npz trace paths "
                             f"(default: {' '.join(DEFAULT_WORKLOADS)})")
    parser.add_argument("--list", action="store_true", help="list the workload names and exit")
    parser.add_argument("--out", type=file_name, default=DEFAULT_OUT,
                        help=f"output folder (default: {DEFAULT_OUT})")
    parser.add_argument("--results", type=file_name, metavar="FILE.md",
                        help="also write the report's tables to FILE.md (no plots), headed by "
                             "the command, the package version, the commit and the date "
                             "(make report: docs/results/report*.md)")
    _add_geometry_options(parser)
    _add_run_options(parser)
    return parser


def _add_geometry_options(parser):
    geometry = parser.add_argument_group("compressor configuration (the design's defaults)")
    geometry.add_argument("--sets", type=integer, default=DEFAULTS["sets"],
                          help=f"L1 sets, a power of two; sets x ways is at most "
                               f"{L1_ENTRIES_MAX} entries (default: %(default)s)")
    geometry.add_argument("--ways", type=integer, default=DEFAULTS["ways"],
                          help="L1 ways, a power of two (default: %(default)s)")
    geometry.add_argument("--max-updates", type=integer, default=DEFAULTS["max_updates"],
                          help="default: %(default)s")
    geometry.add_argument("--fifo-depth", type=integer, default=DEFAULTS["fifo_depth"],
                          help="L2 buffer depth (default: %(default)s)")
    geometry.add_argument("--burst-size", type=integer, default=DEFAULTS["burst_size"],
                          help="L2 level that starts a DRAM burst (default: %(default)s)")
    geometry.add_argument("--lanes", type=integer, default=1,
                          help="gradients per beat (a line): with N > 1, each workload also "
                               "runs packed into beats of N lanes through the RTL on lines "
                               "(sets x ways lines), checked against the line model, with "
                               "the DRAM cost of dense write-through, per-gradient records "
                               "and masked line writes; with --train, the lanes of the "
                               "compressor in the loop (default: %(default)s)")
    add_policy_option(geometry, "L1's policy")


def _add_run_options(parser):
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
    run.add_argument("--vcd", type=file_name, default=None, metavar="FILE",
                     help="write the first --vcd-cycles cycles of the workload (one workload "
                          "only) as a waveform, with a GTKWave save file (.gtkw) beside it; "
                          "with --lanes N, of its run on lines")
    run.add_argument("--vcd-cycles", type=positive_integer, default=2000, metavar="N",
                     help="cycles to write with --vcd (default: %(default)s)")
    run.add_argument("--modes", action="store_true",
                     help="add the run-time modes compared on every workload (exact, drop, "
                          "stochastic, EMA, bypass: "
                          "python -m gradient_compressor.reports.mode_comparison), each setting "
                          "run on the RTL and checked against the reference model; with "
                          "--lanes N, on lines against the line model")
    run.add_argument("--train", action="store_true",
                     help="instead of the RTL report: train the named live workloads' models "
                          "(train-recsys, train-lm, train-digits; default all three) with the "
                          "compressor in their gradient write path, in every mode and "
                          "--seeds seeds, at --sets x --ways "
                          "(python -m gradient_compressor.reports.training; needs PyTorch): "
                          "training.md and a plot per model in --out")
    run.add_argument("--seeds", type=positive_integer, default=3,
                     help="seeds per model and mode with --train (default: %(default)s)")
    run.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


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
                              max_updates=params["max_updates"],
                              whole_line=params.get("whole_line", WHOLE_LINE),
                              conservation=conservation)
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
    from gradient_compressor.model import ReferenceModel
    model = ReferenceModel.of(params)
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
    from gradient_compressor.workloads import SEED_REPORTED
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


def write_report(report, out, plots=True):
    """Write ``report.json``, ``report.md`` and the plots into ``out`` (each file renamed into
    place once all are written: a failure leaves the last report as it was)."""
    os.makedirs(out, exist_ok=True)
    geometry = f"{report['configuration']['sets']}x{report['configuration']['ways']}"
    names = ["report.json", "report.md"]
    if plots:
        for m in report["workloads"]:
            if m["conservation"]["ok"]:
                m["plots"] = {"causes": f"{m['workload']}-causes.png",
                              "bursts": f"{m['workload']}-bursts.png"}
                names += m["plots"].values()
        names.append("summary.png")
    with replacing(*(os.path.join(out, name) for name in names)) as parts:
        part = dict(zip(names, parts))
        with open(part["report.json"], "w") as f:
            json.dump(report, f, indent=1)
        with open(part["report.md"], "w") as f:
            f.write(render_markdown(report, images=plots))
        if plots:
            from . import plots as p
            for m in report["workloads"]:
                if "plots" in m:
                    p.plot_causes(m, part[m["plots"]["causes"]], geometry)
                    p.plot_bursts(m, part[m["plots"]["bursts"]])
            p.plot_summary(report["workloads"], part["summary.png"], geometry)


def main(argv=None, *, result_filter=None):
    """Entry point; returns the exit status (``result_filter`` is a test hook)."""
    return run_command(build_parser(), lambda args: _report(args, argv, result_filter), argv)


def _train(args):
    """``--train``: the in-the-loop runs of :mod:`reports.training` for the named live
    workloads, into ``--out``."""
    import argparse
    from gradient_compressor.workloads import LIVE_WORKLOADS
    from .training import RUN_MODES, check_arguments, run_in_the_loop
    names = args.workloads or list(LIVE_WORKLOADS)
    other = [name for name in names if name not in LIVE_WORKLOADS]
    if other:
        raise UsageError(f"--train trains the live workloads ({', '.join(LIVE_WORKLOADS)}), "
                         f"not {', '.join(other)}")
    out = os.path.join(args.out, "training.md")
    training = argparse.Namespace(
        models=[LIVE_WORKLOADS[name][0] for name in names], modes=list(RUN_MODES),
        seeds=args.seeds, steps=None, lanes=args.lanes, sets=args.sets, ways=args.ways,
        whole_line=args.whole_line, sizing=False, out=None, plots=None, quiet=args.quiet)
    check_arguments(training)
    prepare_out(args.out)
    training.out, training.plots = out, None if args.no_plots else args.out
    status = run_in_the_loop(training, training.models)
    print(f"wrote {out}" + ("" if args.no_plots else " and plots"), file=sys.stderr)
    return status


def _report(args, argv, result_filter):
    """The command, once parsed; its exit status."""
    if args.list:
        from gradient_compressor.workloads import workload_names
        print("\n".join(workload_names()))
        return 0
    params = {"sets": args.sets, "ways": args.ways, "max_updates": args.max_updates,
              "fifo_depth": args.fifo_depth, "burst_size": args.burst_size,
              "whole_line": args.whole_line}
    check_params(dict(params, lanes=args.lanes), args.threshold)
    if args.results:
        _check_results(args)
    if args.train:
        return _train(args)
    traces = _checked_traces(args)
    prepare_out(args.out)
    backend = resolve_backend(args.sim)
    report = _report_header(args, argv, params, backend)
    for trace in traces:
        metrics = _workload_metrics(trace, args, params, backend, result_filter)
        if metrics is None:
            return 1
        report["workloads"].append(metrics)
        _print_workload_summary(trace.name, metrics)
    _write_and_announce(report, args)
    bad = [m for m in report["workloads"]
           if not m["conservation"]["ok"] or not m["cross_check"]["match"]
           or not all(r["rtl_check"] for r in m.get("modes", {}).get("rows", []))
           or not _lines_ok(m)]
    return 1 if bad else 0


def _check_results(args):
    """Refuse, before any work, a ``--results`` file that is not a Markdown file's name, that
    cannot be written, or that comes with ``--train`` (which writes its own training.md)."""
    if args.train:
        raise UsageError("--results writes the bandwidth report's tables; --train writes "
                         "training.md into --out")
    check_results_file("--results", args.results)


def write_results_file(report, path):
    """The report's tables (:func:`render_body`, without plots) as ``path``, under the header
    of :func:`provenance.write_results`: a title naming the geometry and the workloads, the
    command, the code's version and commit, the date."""
    cfg = report["configuration"]
    title = (f"Bandwidth report at {cfg['sets']} x {cfg['ways']}"
             + (f", on lines of {cfg['lanes']} lanes" if "lanes" in cfg else "") + ": "
             + ", ".join(m["workload"] for m in report["workloads"]))
    write_results(path, title, describe_run(report), render_body(report, images=False),
                  command=report["command"])


def _lines_ok(metrics):
    """Whether a workload's run on lines (if there was one) passed its checks."""
    lines = metrics.get("lines")
    return lines is None or (lines["conservation"]["ok"] and lines["cross_check"]["match"])


def _checked_traces(args):
    """The named workloads' traces (cut to ``--limit``), every option that names them checked
    first; a bad one raises :class:`UsageError`."""
    from gradient_compressor.workloads import DEFAULT_WORKLOADS, TraceError, get_workload
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
    return traces


def _report_header(args, argv, params, backend):
    """The report before any workload has run: the command, its provenance and the
    configuration."""
    return {"command": "compressor-report " + " ".join(map(shlex.quote, argv if argv is not None
                                                           else sys.argv[1:])),
            **provenance(),
            "backend": backend,
            "configuration": dict(params, dram=args.dram, threshold=args.threshold,
                                  limit=args.limit, **_lanes_key(args.lanes)),
            "record_format": {"bytes_per_gradient": BYTES_PER_GRADIENT,
                              "bytes_per_write": bytes_per_write(params["whole_line"]),
                              "description": record_format(params["whole_line"])},
            **({"line_format": LINE_FORMAT} if args.lanes > 1 else {}),
            "workloads": []}


def _lanes_key(lanes):
    """``{"lanes": lanes}`` on lines; nothing for one lane, whose report is as it always was."""
    return {"lanes": lanes} if lanes > 1 else {}


def _workload_metrics(trace, args, params, backend, result_filter):
    """One workload's metrics (with ``--modes``, its mode comparison too); None, the error
    printed, if the RTL broke the DRAM stream's rules or the simulator failed."""
    try:
        metrics = run_workload(trace, params, backend=backend, dram=args.dram,
                               threshold=args.threshold, progress=not args.quiet,
                               result_filter=result_filter,
                               # with --lanes, the waveform is of the run on lines
                               vcd=args.vcd if args.lanes == 1 else None,
                               vcd_cycles=args.vcd_cycles)
    except ValueError as error:     # e.g. gradients outside the configured widths
        raise UsageError(f"{trace.name}: {error}") from None
    except AssertionError as error:  # the driver saw the DRAM stream's rules broken
        print(f"compressor-report: {trace.name}: the RTL broke the DRAM stream protocol: "
              f"{error}", file=sys.stderr)
        return None
    except RuntimeError as error:    # e.g. the compiled simulator failed to build or run
        print(f"compressor-report: error: {trace.name}: {error}", file=sys.stderr)
        return None
    if args.lanes > 1:
        lines = _line_metrics(trace, args, params, backend, metrics.get("dram_writes"))
        if lines is None:
            return None
        metrics["lines"] = lines
    if args.modes:
        from .mode_comparison import compare_modes
        try:
            metrics["modes"] = compare_modes(trace, threshold=args.threshold, params=params,
                                             backend=backend, lanes=args.lanes)
        except ValueError as error:
            raise UsageError(f"--modes: {error}") from None
    return metrics


def _line_metrics(trace, args, params, backend, records):
    """The workload's run on lines of ``--lanes`` (:func:`reports.line_report.run_lines`);
    None, the error printed, as for :func:`_workload_metrics`."""
    try:
        return run_lines(trace, params, args.lanes, backend=backend, dram=args.dram,
                         threshold=args.threshold, progress=not args.quiet, records=records,
                         vcd=args.vcd, vcd_cycles=args.vcd_cycles)
    except ValueError as error:
        raise UsageError(f"{trace.name}: {error}") from None
    except AssertionError as error:
        print(f"compressor-report: {trace.name}: the RTL on lines broke the DRAM stream "
              f"protocol: {error}", file=sys.stderr)
    except RuntimeError as error:
        print(f"compressor-report: error: {trace.name}: lines: {error}", file=sys.stderr)
    return None


def _print_workload_summary(name, metrics):
    if metrics["conservation"]["ok"]:
        oracle = metrics["reference_points"]["oracle"]["compression_ratio"]
        print(f"{name}: {metrics['gradients']} gradients -> {metrics['dram_writes']} "
              f"DRAM writes after flush ({fmt(metrics['compression_ratio'], 'ratio')}, "
              f"oracle {fmt(oracle, 'ratio')}), "
              f"cross-check {'ok' if metrics['cross_check']['match'] else 'MISMATCH'}",
              file=sys.stderr)
    else:
        print(f"{name}: {metrics['conservation']['message']}", file=sys.stderr)
    lines = metrics.get("lines")
    if lines is None:
        return
    if not lines["conservation"]["ok"]:
        print(f"{name} on {lines['lanes']} lanes: {lines['conservation']['message']}",
              file=sys.stderr)
        return
    dense, masked = lines["costs"]["dense"], lines["costs"]["lines"]
    print(f"{name} on {lines['lanes']} lanes: {lines['beats']} beats -> "
          f"{masked['transfers']} DRAM line writes ({fmt(masked['bytes'])} bytes, dense "
          f"{fmt(dense['bytes'])}), line-model check "
          f"{'ok' if lines['cross_check']['match'] else 'MISMATCH'}", file=sys.stderr)


def _write_and_announce(report, args):
    """Write the report (and name what was written: the report, the plots, the waveform)."""
    try:
        write_report(report, args.out, plots=not args.no_plots)
    except OSError as error:
        raise UsageError(f"--out {args.out}: cannot write the report ({error})") from None
    print(f"wrote {os.path.join(args.out, 'report.md')}, report.json"
          + ("" if args.no_plots else " and plots"), file=sys.stderr)
    if args.results:
        try:
            write_results_file(report, args.results)
        except OSError as error:
            raise UsageError(f"--results {args.results}: cannot write it ({error})") from None
        print(f"wrote {args.results}", file=sys.stderr)
    if args.vcd:
        from gradient_compressor.simulation.waves import gtkw_path_for
        print(f"wrote the first {args.vcd_cycles} cycles to {args.vcd}: gtkwave {args.vcd} "
              f"{gtkw_path_for(args.vcd)}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
