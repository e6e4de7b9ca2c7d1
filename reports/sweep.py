"""``compressor-sweep``: sweep L1 sets x ways x threshold over a trace and plot the compression
ratio (after the flush at every step) against the L1 size, with the unbounded-L1 oracle.

By default the points come from :class:`model.ReferenceModel`, which makes the RTL's decisions
write for write (the report cross-checks that on every run, and the tests check it), so a sweep
takes seconds; ``--engine rtl`` simulates every point with the RTL instead (and cross-checks
each against the model).

``--small-thresholds`` adds the dual threshold's ``small_threshold`` (0: off) as a dimension,
in mode drop or (``--stochastic``) stochastic (``design/modes.py``), with either engine (the
RTL engine also checks accepted = written + discarded per address, and the discards against
the model's); the oracle stays the exact policy.

The points follow the default policy (:data:`design.params.WHOLE_LINE`). With
``--results FILE.md`` the tables (no plot) are also written to ``FILE.md``, headed by the
command, the package version, the commit and the date (:func:`provenance.write_results`).
"""

import json
import os
import shlex
import sys
import itertools
import time
from collections import Counter

from gradient_compressor import console
from gradient_compressor.console import (ArgumentParser, UsageError, check_results_file,
                                         file_name, int_list, integer,
                                         positive_integer, prepare_out, replacing, run_command,
                                         table)
from gradient_compressor.console import progress as console_progress
from gradient_compressor.design.params import DEFAULTS, L1_ENTRIES_MAX, WHOLE_LINE
from gradient_compressor.model import CAUSES, ReferenceModel
from gradient_compressor.provenance import describe, provenance, write_results

from .backend import BACKENDS, resolve_backend, run_rtl
from .cli import check_params
from .metrics import check_conservation, cross_check

__all__ = ["main", "sweep"]

DEFAULT_OUT = os.path.join(console.DEFAULT_OUT, "sweep")


def build_parser():
    parser = ArgumentParser(
        prog="compressor-sweep",
        description="Sweep L1 sets x ways x threshold over one workload and plot the compression "
                    "ratio (after the flush at every step) against L1 size, with the oracle "
                    "(unbounded L1, same policy) as a line. Writes sweep.json, sweep.md and "
                    "sweep.png.",
        epilog="Exit status: 0 done, 1 a check failed (RTL engine), 2 bad argument or trace.")
    parser.add_argument("workload", nargs="?", default="tiny-embed",
                        help="workload name or .npz trace path (default: tiny-embed)")
    parser.add_argument("--sets", type=int_list, default=[8, 16, 32, 64, 128, 256, 512],
                        help=f"comma-separated powers of two; sets x ways is at most "
                             f"{L1_ENTRIES_MAX} entries (default: 8,...,512)")
    parser.add_argument("--ways", type=int_list, default=[1, 2, 4, 8],
                        help="comma-separated powers of two (default: 1,2,4,8)")
    parser.add_argument("--thresholds", type=int_list, default=None,
                        help="comma-separated thresholds (default: the trace's own threshold, "
                             "and half and twice it)")
    parser.add_argument("--max-updates", type=integer, default=DEFAULTS["max_updates"],
                        help="default: %(default)s")
    parser.add_argument("--small-thresholds", type=int_list, default=[0],
                        help="comma-separated dual thresholds, 0 = off (default: 0)")
    parser.add_argument("--stochastic", action="store_true",
                        help="dual threshold mode stochastic (LFSR seed 1) instead of drop")
    parser.add_argument("--limit", type=positive_integer, default=None,
                        help="keep only the first N gradients")
    parser.add_argument("--engine", choices=("model", "rtl"), default="model",
                        help="model: the reference model (exact, fast; default); rtl: simulate "
                             "every point")
    parser.add_argument("--sim", choices=BACKENDS, default=None,
                        help="RTL simulator for --engine rtl (default: compiled if available)")
    parser.add_argument("--out", type=file_name, default=DEFAULT_OUT,
                        help=f"output folder (default: {DEFAULT_OUT})")
    parser.add_argument("--results", type=file_name, metavar="FILE.md",
                        help="also write the tables to FILE.md (no plot), headed by the "
                             "command, the package version, the commit and the date "
                             "(make sweep: docs/results/sweep-tiny-embed.md)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    return parser


def _default_thresholds(trace):
    thr = sorted(set(trace.threshold.tolist()))
    if len(thr) != 1:
        return None
    t = thr[0]
    return sorted({max(1, t // 2), t, min(2 ** DEFAULTS["grad_width"] - 1, 2 * t)})


def _mode_ops(small_threshold, stochastic):
    """The operations that set the dual threshold before a run (none when it is off)."""
    if not small_threshold:
        return []
    return [("seed", 1)] * bool(stochastic) + [
        ("modes", {"small_threshold": small_threshold, "stochastic": int(bool(stochastic))})]


def sweep(trace, *, sets_list, ways_list, thresholds, max_updates=255, engine="model",
          backend=None, progress=True, small_thresholds=(0,), stochastic=False):
    """Every point as ``{"sets", "ways", "entries", "threshold", "small_threshold",
    "dram_writes", "compression_ratio", "writes_by_cause", "discards"}`` and the oracle ratio
    per threshold."""
    n = len(trace)
    configs = [(s, w, t, small) for t in thresholds for small in small_thresholds
               for w in ways_list for s in sets_list]
    bar = console_progress(len(configs) + len(thresholds), f"sweep {trace.name} ({engine})",
                           enabled=progress, unit="point")
    points, oracle, checks_ok = [], {}, True
    for threshold in thresholds:
        ops = trace.ops(threshold=threshold)
        writes = ReferenceModel(sets=None, max_updates=max_updates).run(ops)
        oracle[threshold] = n / len(writes) if writes else None
        bar.update(1)
        for sets, ways, t, small in configs:
            if t != threshold:
                continue
            point = {"sets": sets, "ways": ways, "entries": sets * ways, "threshold": t,
                     "small_threshold": small}
            if engine == "model":
                model = ReferenceModel(sets=sets, ways=ways, max_updates=max_updates)
                writes = model.run(_mode_ops(small, stochastic) + ops)
                causes = Counter(w.cause for w in writes)
                count = len(writes)
                point["discards"] = len(model.discards)
            else:
                params = {"sets": sets, "ways": ways, "max_updates": max_updates}
                point_ops = _mode_ops(small, stochastic) + ops
                result = run_rtl(backend, params, point_ops)
                conservation = check_conservation(result.accepted, result.writes,
                                                  discards=result.discards)
                check = cross_check(point_ops, result, sets, ways, max_updates)
                point["discards"] = len(result.discards)
                point["conservation_ok"] = conservation.ok
                point["cross_check"] = check["match"]
                checks_ok &= conservation.ok and check["match"]
                causes, count = Counter(result.causes), len(result.writes)
                point["cycles"] = result.cycles
            point["dram_writes"] = count
            point["compression_ratio"] = n / count if count else None
            point["writes_by_cause"] = {c: causes.get(c, 0) for c in CAUSES}
            points.append(point)
            bar.update(1)
    bar.close()
    return points, oracle, checks_ok


def render_markdown(data, *, images=True):
    """``sweep.md``: its header (the command, the code), then :func:`render_body`."""
    return "\n".join(["# L1 design-space sweep", "", f"Command: `{data['command']}`  ",
                      describe(data), "", describe_sweep(data) + ".", "",
                      render_body(data, images=images)])


def describe_sweep(data):
    """The workload, the policy, the engine and what a ratio is, in a few sentences (the header
    of ``sweep.md`` and of ``--results`` both say them)."""
    policy = ("the whole-line rule" if data.get("whole_line", WHOLE_LINE)
              else "the seed policy")
    return (f"Workload: {data['workload']} ({data['gradients']} gradients, {data['steps']} "
            f"steps, a flush after each); max_updates {data['max_updates']}; {policy}. "
            f"Engine: {data['engine_note']}. "
            f"Compression ratio = gradients / DRAM writes after the final flush")


def render_body(data, *, images=True):
    """The sweep's tables, one per threshold (and dual threshold), after the plot's link if
    ``images``."""
    lines = ["![compression ratio against L1 size](sweep.png)", ""] if images else []
    smalls = data.get("small_thresholds", [0])
    for threshold, small in [(t, small) for t in data["thresholds"] for small in smalls]:
        pts = [p for p in data["points"] if p["threshold"] == threshold and
               p.get("small_threshold", 0) == small]
        ways = sorted({p["ways"] for p in pts})
        sets = sorted({p["sets"] for p in pts})
        ratio = {(p["sets"], p["ways"]): p["compression_ratio"] for p in pts}
        dual = "" if smalls == [0] else ", small_threshold off" if small == 0 else \
            f", small_threshold {small} ({data.get('small_mode', 'drop')})"
        lines += [f"## Threshold {threshold}{dual} (oracle: "
                  f"{data['oracle'][str(threshold)]:.2f}x)", "",
                  table([[s, *(f"{ratio[s, w]:.2f}x" for w in ways)] for s in sets],
                        ["sets \\ ways", *ways], align=["right"] * (len(ways) + 1)), ""]
    return "\n".join(lines)


def main(argv=None):
    return run_command(build_parser(), lambda args: _sweep(args, argv), argv)


def _sweep(args, argv):
    _check_grid(args)
    if args.results:
        check_results_file("--results", args.results)
    trace = _checked_trace(args)
    thresholds = args.thresholds or _default_thresholds(trace)
    if not thresholds:
        raise UsageError("the trace has several thresholds: give --thresholds")
    prepare_out(args.out)
    backend = resolve_backend(args.sim) if args.engine == "rtl" else None
    start = time.monotonic()
    try:
        points, oracle, ok = sweep(trace, sets_list=args.sets, ways_list=args.ways,
                                   thresholds=thresholds, max_updates=args.max_updates,
                                   engine=args.engine, backend=backend,
                                   progress=not args.quiet,
                                   small_thresholds=args.small_thresholds,
                                   stochastic=args.stochastic)
    except ValueError as error:
        raise UsageError(error) from None
    seconds = time.monotonic() - start
    if args.engine == "model":
        note = ("points from the reference model, which matches the RTL write for write "
                "(checked by every report and by the tests)")
    else:
        note = f"every point simulated with the RTL ({backend}) and cross-checked with the model"
    data = {"command": "compressor-sweep " + " ".join(map(shlex.quote, argv if argv is not None
                                                           else sys.argv[1:])),
            **provenance(),
            "workload": trace.name, "gradients": len(trace), "steps": trace.steps,
            "max_updates": args.max_updates, "engine": args.engine, "backend": backend,
            "whole_line": WHOLE_LINE, "engine_note": note, "seconds": round(seconds, 2),
            "thresholds": thresholds,
            "small_thresholds": args.small_thresholds,
            "small_mode": "stochastic" if args.stochastic else "drop",
            "oracle": {str(t): r for t, r in oracle.items()}, "points": points,
            "checks_ok": ok}
    _write_sweep(data, points, oracle, trace, note, args.out)
    print(f"wrote {args.out}/sweep.md, sweep.json and sweep.png ({len(points)} points, "
          f"{seconds:.1f} s)", file=sys.stderr)
    if args.results:
        try:
            write_results(args.results, f"L1 design-space sweep: {trace.name}",
                          describe_sweep(data), render_body(data, images=False),
                          command=data["command"])
        except OSError as error:
            raise UsageError(f"--results {args.results}: cannot write it ({error})") from None
        print(f"wrote {args.results}", file=sys.stderr)
    if not ok:
        print("compressor-sweep: a conservation or model cross-check FAILED (see sweep.json)",
              file=sys.stderr)
        return 1
    return 0


def _check_grid(args):
    """Check every geometry and threshold of the grid with the design's own checks."""
    check_params({"max_updates": args.max_updates})
    for sets, ways in itertools.product(args.sets, args.ways):
        check_params({"sets": sets, "ways": ways})
    for threshold in args.thresholds or []:
        check_params({}, threshold, threshold_option="--thresholds")
    for small in args.small_thresholds:
        check_params({}, small, threshold_option="--small-thresholds")


def _checked_trace(args):
    """The workload's trace, cut to ``--limit``; raises :class:`UsageError` if there is none or
    it is empty."""
    from gradient_compressor.workloads import TraceError, get_workload
    try:
        trace = get_workload(args.workload)
    except TraceError as error:
        raise UsageError(error) from None
    if len(trace) == 0:
        raise UsageError(f"{trace.name}: the trace has no gradients")
    if args.limit:
        trace = trace.head(args.limit)
    return trace


def _write_sweep(data, points, oracle, trace, note, out):
    """Write ``sweep.png``, ``sweep.json`` and ``sweep.md`` into ``out``."""
    from .plots import plot_sweep
    names = ("sweep.png", "sweep.json", "sweep.md")
    try:
        with replacing(*(os.path.join(out, name) for name in names)) as (png, json_part, md):
            plot_sweep(points, oracle, png, f"{trace.name}: {len(trace)} gradients, "
                       f"{trace.steps} steps, flush per step", note)
            with open(json_part, "w") as f:
                json.dump(data, f, indent=1)
            with open(md, "w") as f:
                f.write(render_markdown(data))
    except OSError as error:
        raise UsageError(f"--out {out}: cannot write the sweep ({error})") from None


if __name__ == "__main__":
    sys.exit(main())
