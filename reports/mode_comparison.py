"""The run-time modes side by side on a workload: exact, drop, stochastic, EMA, bypass.

    python -m gradient_compressor.reports.mode_comparison [WORKLOAD ...] [--small-threshold N]
        [--engine rtl|model] [--sim compiled|amaranth] [--lanes N] [--out reports/out]

For each workload (a flush after every step) and each mode setting, the figures come from
:class:`model.ReferenceModel` with the design's default geometry. With ``--engine rtl`` (the
default) every setting also runs through the RTL (the compiled simulator when available), and
the run must match the model write for write, cause for cause and discard for discard, and
conserve every address (accepted = written + discarded); the command exits 1 otherwise. The
figures are:

* DRAM writes, compression ratio (gradients / writes), DRAM bytes (8 per write) and the
  bandwidth reduction, ``1 - DRAM bytes / input bytes`` (6 bytes per gradient in, as in
  ``compressor-report``);
* for the lossy modes (the dual threshold), the discarded mass ``sum |grad - written|`` over
  the accounted discards, and the per-address error against exact mode after each step: the
  difference between what DRAM holds for an address and what it would hold in exact mode
  (= the accepted sum), over the addresses the trace touched so far. Reported: the mean of
  ``|error|`` and its maximum over all steps, and the bias (mean signed error) averaged over
  steps.

The settings, derived from the workload's threshold ``T`` (one per trace, else ``--threshold``):

* ``exact``: every mode off;
* ``drop`` / ``stochastic``: ``small_threshold = --small-threshold`` (default ``T // 4``),
  the LFSR seeded with 1;
* ``ema`` / ``ema per step``: ``clamp(2.0 * EMA(|g|), T // 4, 4 * T)``, alpha = 1/16;
* ``bypass``: one window over the lowest eighth of the trace's address range.

Writes ``modes.md`` and ``modes.json`` in ``--out``.
"""

import json
import os
import shlex
import sys
import time
from collections import defaultdict

from gradient_compressor.console import (DEFAULT_OUT, ArgumentParser, UsageError, file_name,
                                         integer, prepare_out, replacing, run_command, table)
from gradient_compressor.design.params import DEFAULTS, WHOLE_LINE, check_lanes
from gradient_compressor.model import LineModel, ReferenceModel
from gradient_compressor.provenance import describe, provenance

from .backend import BACKENDS, resolve_backend, run_rtl
from .line_costs import dense_bytes, pack_lines, write_bytes
from .line_report import expand, line_cross_check
from .metrics import BYTES_PER_GRADIENT, check_conservation, cross_check

__all__ = ["mode_settings", "compare_modes", "mode_table", "render_markdown", "main"]



def mode_settings(threshold, small_threshold, addr_low, addr_high):
    """The compared settings: ``{name: [operations before the first gradient]}``."""
    dual = {"small_threshold": small_threshold}
    ema = {"ema_enable": 1, "ema_shift": 4, "ema_scale": 32, "ema_min": max(1, threshold // 4),
           "ema_max": min(2 ** DEFAULTS["grad_width"] - 1, 4 * threshold)}
    window_top = addr_low + (addr_high - addr_low) // 8
    return {
        "exact":         [],
        "drop":          [("modes", dict(dual, stochastic=0))],
        "stochastic":    [("seed", 1), ("modes", dict(dual, stochastic=1))],
        "ema":           [("modes", ema)],
        "ema per step":  [("modes", dict(ema, ema_per_step=1))],
        "bypass":        [("modes", {"bypass__0__base": addr_low, "bypass__0__limit": window_top,
                                     "bypass__0__enable": 1})],
    }


def _gradients(op):
    """The ``(addr, grad)`` an operation offers: a gradient's, or a beat's masked-in lanes."""
    if op[0] == "grad":
        return [(op[1], op[2])]
    return expand([op[1:]]) if op[0] == "line" else []


def _run(ops, prefix, params, lanes=1):
    """Writes (records, or line writes on lines), the model and the per-step per-address DRAM
    contents of one setting."""
    model = LineModel.of(dict(params, lanes=lanes)) if lanes > 1 else ReferenceModel.of(params)
    model.run(prefix)
    dram, accepted = defaultdict(int), defaultdict(int)
    writes, steps = [], []
    for op in ops:
        out = model.run([op])
        writes += out
        for w in (lane for write in out for lane in write.writes()) if lanes > 1 else out:
            dram[w.addr] += w.value
        for addr, grad in _gradients(op):
            accepted[addr] += grad
        if op[0] == "flush":   # the step's end
            steps.append({a: dram[a] - accepted[a] for a in accepted})
    return writes, model, steps


def _rtl_check(backend, params, ops, lanes=1, model=None, writes=None):
    """Run ``ops`` through the RTL; whether it matches the model and conserves every address
    (on lines: the line model's ``writes`` as :func:`reports.line_report.line_cross_check`
    compares them, and its discards, lane by lane)."""
    if lanes == 1:
        result = run_rtl(backend, params, ops)
        conservation = check_conservation(result.accepted, result.writes,
                                          discards=result.discards)
        check = cross_check(ops, result, params["sets"], params["ways"], params["max_updates"],
                            whole_line=params.get("whole_line", WHOLE_LINE))
        return conservation.ok and check["match"]
    result = run_rtl(backend, dict(params, lanes=lanes), ops)
    conservation = check_conservation(expand(result.accepted), result.writes,
                                      discards=result.discards)
    return (conservation.ok and line_cross_check(writes, result, lanes)["match"]
            and result.discards == [(d.addr, d.error) for d in model.discards])


def compare_modes(trace, *, threshold=None, small_threshold=None, params=None, backend=None,
                  lanes=1):
    """The figures of every setting on ``trace`` (see the module documentation), with the
    geometry ``params`` (some of :data:`design.params.DEFAULTS`' keys; default: the design's
    defaults); with a ``backend`` (:data:`reports.backend.BACKENDS`), each row's
    ``rtl_check`` says whether the RTL run of the setting matched the model and conserved
    every address. With ``lanes`` above 1 the trace runs packed into beats
    (:func:`reports.line_costs.pack_lines`) through the line model (and the RTL on lines):
    its writes are line writes, its bytes those of masked line writes and its reduction the
    bytes saved against dense write-through of the beats."""
    params = dict(DEFAULTS, **(params or {}))
    if threshold is None:
        thresholds = sorted(set(trace.threshold.tolist()))
        if len(thresholds) != 1:
            raise UsageError(f"{trace.name} has several thresholds: give --threshold")
        threshold = thresholds[0]
    if small_threshold is None:
        small_threshold = threshold // 4
    ops = trace.ops(threshold=threshold)
    if lanes > 1:
        ops = pack_lines(ops, lanes)
    beats = sum(op[0] == "line" for op in ops)
    settings = mode_settings(threshold, small_threshold, int(trace.addr.min()),
                             int(trace.addr.max()))
    n = len(trace)
    rows = []
    for name, prefix in settings.items():
        writes, model, steps = _run(ops, prefix, params, lanes)
        errors = [e for step in steps for e in step.values()]
        bias = [sum(step.values()) / len(step) for step in steps if step]
        dram_bytes = write_bytes(params.get("whole_line", WHOLE_LINE))(len(writes), lanes)
        baseline = dense_bytes(beats, lanes) if lanes > 1 else n * BYTES_PER_GRADIENT
        rows.append({
            "mode": name, "settings": [list(op) for op in prefix],
            "dram_writes": len(writes),
            "compression_ratio": n / len(writes) if writes else None,
            "dram_bytes": dram_bytes,
            "bandwidth_reduction": 1 - dram_bytes / baseline if n else None,
            "discards": len(model.discards),
            "discarded_mass": sum(abs(d.error) for d in model.discards),
            "error_mean": sum(map(abs, errors)) / len(errors) if errors else 0.0,
            "error_max": max(map(abs, errors), default=0),
            "bias": sum(bias) / len(bias) if bias else 0.0,
            "rtl_check": None if backend is None else _rtl_check(
                backend, params, prefix + ops, lanes, model=model, writes=writes),
        })
    return {"workload": trace.name, "gradients": n, "steps": trace.steps,
            "threshold": threshold, "small_threshold": small_threshold, "rows": rows,
            **({"lanes": lanes, "beats": beats} if lanes > 1 else {})}


def mode_table(rows, lanes=1):
    """The Markdown table of one workload's rows (on ``lanes`` above 1: DRAM writes are line
    writes, and the reduction is against dense write-through)."""
    return table([[r["mode"], r["dram_writes"],
                   f"{r['compression_ratio']:.2f}x" if r["compression_ratio"] else "-",
                   r["dram_bytes"],
                   f"{100 * r['bandwidth_reduction']:.1f} %" if r["bandwidth_reduction"]
                   is not None else "-",
                   r["discards"], r["discarded_mass"],
                   f"{r['error_mean']:.3f}", r["error_max"], f"{r['bias']:+.3f}"]
                  for r in rows],
                 ["mode", "DRAM writes" if lanes == 1 else "DRAM line writes", "ratio",
                  "DRAM bytes", "bandwidth reduction" if lanes == 1 else "saved against dense",
                  "discards", "discarded mass", "mean abs error", "max abs error", "bias"],
                 align=["left"] + ["right"] * 9)


def render_markdown(data):
    checked = (f"each setting also run on the RTL ({data['backend']} simulator): its writes, "
               f"causes and discards equal the model's and every address is conserved"
               if data.get("backend") else "not run on the RTL here (--engine model)")
    lines = ["# Run-time modes compared", "", f"Command: `{data['command']}`  ",
             describe(data) + "  ",
             f"Figures from the reference model, default geometry; {checked}. "
             f"Error = DRAM content minus exact, per address after each step.",
             ""]
    for w in data["workloads"]:
        on_lines = (f", on {w['lanes']} lanes ({w['beats']} beats; figures from the line "
                    f"model, bytes saved against dense write-through)" if w.get("lanes") else "")
        lines += [f"## {w['workload']}: {w['gradients']} gradients, {w['steps']} steps, "
                  f"threshold {w['threshold']}, small_threshold {w['small_threshold']}"
                  f"{on_lines}", "", mode_table(w["rows"], w.get("lanes", 1)), ""]
    return "\n".join(lines)


def build_parser():
    parser = ArgumentParser(prog="python -m gradient_compressor.reports.mode_comparison",
                            description="Compare the run-time modes on workloads (reference "
                                        "model, default geometry, a flush per step).")
    parser.add_argument("workloads", nargs="*", metavar="WORKLOAD", default=["seed", "tiny-embed"],
                        help="workload names or .npz paths (default: seed tiny-embed)")
    parser.add_argument("--threshold", type=integer, default=None,
                        help="threshold (default: the trace's own)")
    parser.add_argument("--small-threshold", type=integer, default=None,
                        help="dual threshold of drop and stochastic (default: threshold // 4)")
    parser.add_argument("--engine", choices=("rtl", "model"), default="rtl",
                        help="rtl (default): also run every setting on the RTL and check it "
                             "against the model; model: the model only (faster)")
    parser.add_argument("--sim", choices=BACKENDS, default=None,
                        help="RTL simulator (default: compiled if available)")
    parser.add_argument("--lanes", type=integer, default=1,
                        help="gradients per beat: with N > 1 every workload runs packed into "
                             "beats of N lanes, through the line model and the RTL on lines "
                             "(default: %(default)s)")
    parser.add_argument("--out", type=file_name, default=DEFAULT_OUT,
                        help=f"output folder (default: {DEFAULT_OUT})")
    return parser


def main(argv=None):
    return run_command(build_parser(), lambda args: _compare(args, argv), argv)


def _compare(args, argv):
    """The command, once parsed (``argv``: as given, for the report); its exit status."""
    from gradient_compressor.workloads import TraceError, get_workload
    try:
        check_lanes(args.lanes)
    except ValueError as error:
        raise UsageError(f"--{error}") from None    # "--lanes must be ..."
    try:
        traces = [get_workload(name) for name in args.workloads]
    except TraceError as error:
        raise UsageError(error) from None
    prepare_out(args.out)
    backend = resolve_backend(args.sim) if args.engine == "rtl" else None
    start = time.monotonic()
    results = []
    for trace in traces:
        try:
            results.append(compare_modes(trace, threshold=args.threshold,
                                         small_threshold=args.small_threshold,
                                         backend=backend, lanes=args.lanes))
        except ValueError as error:
            raise UsageError(error) from None
    data = {"command": "python -m gradient_compressor.reports.mode_comparison " +
            " ".join(map(shlex.quote, argv if argv is not None else sys.argv[1:])),
            **provenance(), "seconds": round(time.monotonic() - start, 2),
            "backend": backend, "workloads": results}
    paths = [os.path.join(args.out, name) for name in ("modes.json", "modes.md")]
    with replacing(*paths) as (json_part, markdown_part):
        with open(json_part, "w") as f:
            json.dump(data, f, indent=1)
        with open(markdown_part, "w") as f:
            f.write(render_markdown(data))
    print(f"wrote {args.out}/modes.md and modes.json ({data['seconds']:.1f} s)", file=sys.stderr)
    failed = [f"{w['workload']}/{r['mode']}" for w in results for r in w["rows"]
              if r["rtl_check"] is False]
    if failed:
        print(f"RTL check failed (writes, causes, discards or conservation): "
              f"{', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
