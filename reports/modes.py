"""The run-time modes side by side on a workload: exact, drop, stochastic, EMA, bypass.

    python -m reports.modes [WORKLOAD ...] [--small-threshold N] [--out reports/out]

For each workload (a flush after every step) and each mode setting, the figures come from
:class:`model.ReferenceModel`, which matches the RTL write for write and discard for discard
in every mode (``tests/test_modes.py``), with the design's default geometry:

* DRAM writes, compression ratio (gradients / writes) and DRAM bytes (8 per write);
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

from design.params import DEFAULTS
from model import ReferenceModel

from .cli import prepare_out
from .console import ArgumentParser, UsageError, integer, table, usage_error
from .metrics import BYTES_PER_WRITE
from .provenance import describe, provenance

__all__ = ["mode_settings", "compare_modes", "render_markdown", "main"]

DEFAULT_OUT = os.path.join("reports", "out")


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
        "bypass":        [("modes", {"bypass0_base": addr_low, "bypass0_limit": window_top,
                                     "bypass0_enable": 1})],
    }


def _run(ops, prefix):
    """Writes, discards and the per-step per-address DRAM contents of one setting."""
    model = ReferenceModel(sets=DEFAULTS["sets"], ways=DEFAULTS["ways"],
                           max_updates=DEFAULTS["max_updates"])
    model.run(prefix)
    dram, accepted = defaultdict(int), defaultdict(int)
    writes, steps = 0, []
    for op in ops:
        out = model.run([op])
        writes += len(out)
        for w in out:
            dram[w.addr] += w.value
        if op[0] == "grad":
            accepted[op[1]] += op[2]
        else:   # a flush: the step's end
            steps.append({a: dram[a] - accepted[a] for a in accepted})
    return writes, model, steps


def compare_modes(trace, *, threshold=None, small_threshold=None):
    """The figures of every setting on ``trace`` (see the module documentation)."""
    if threshold is None:
        thresholds = sorted(set(trace.threshold.tolist()))
        if len(thresholds) != 1:
            raise UsageError(f"{trace.name} has several thresholds: give --threshold")
        threshold = thresholds[0]
    if small_threshold is None:
        small_threshold = threshold // 4
    ops = trace.ops(threshold=threshold)
    settings = mode_settings(threshold, small_threshold, int(trace.addr.min()),
                             int(trace.addr.max()))
    n = len(trace)
    rows = []
    for name, prefix in settings.items():
        writes, model, steps = _run(ops, prefix)
        errors = [e for step in steps for e in step.values()]
        bias = [sum(step.values()) / len(step) for step in steps if step]
        rows.append({
            "mode": name, "settings": [list(op) for op in prefix],
            "dram_writes": writes, "compression_ratio": n / writes if writes else None,
            "dram_bytes": writes * BYTES_PER_WRITE,
            "discards": len(model.discards),
            "discarded_mass": sum(abs(d.error) for d in model.discards),
            "error_mean": sum(map(abs, errors)) / len(errors) if errors else 0.0,
            "error_max": max(map(abs, errors), default=0),
            "bias": sum(bias) / len(bias) if bias else 0.0,
        })
    return {"workload": trace.name, "gradients": n, "steps": trace.steps,
            "threshold": threshold, "small_threshold": small_threshold, "rows": rows}


def render_markdown(data):
    lines = ["# Run-time modes compared", "", f"Command: `{data['command']}`  ",
             describe(data) + "  ",
             "Figures from the reference model (write for write the RTL's, tests/test_modes.py), "
             f"default geometry; error = DRAM content minus exact, per address after each step.",
             ""]
    for w in data["workloads"]:
        lines += [f"## {w['workload']}: {w['gradients']} gradients, {w['steps']} steps, "
                  f"threshold {w['threshold']}, small_threshold {w['small_threshold']}", "",
                  table([[r["mode"], r["dram_writes"],
                          f"{r['compression_ratio']:.2f}x" if r["compression_ratio"] else "-",
                          r["dram_bytes"], r["discards"], r["discarded_mass"],
                          f"{r['error_mean']:.3f}", r["error_max"], f"{r['bias']:+.3f}"]
                         for r in w["rows"]],
                        ["mode", "DRAM writes", "ratio", "DRAM bytes", "discards",
                         "discarded mass", "mean abs error", "max abs error", "bias"],
                        align=["left"] + ["right"] * 8), ""]
    return "\n".join(lines)


def build_parser():
    parser = ArgumentParser(prog="python -m reports.modes",
                            description="Compare the run-time modes on workloads (reference "
                                        "model, default geometry, a flush per step).")
    parser.add_argument("workloads", nargs="*", metavar="WORKLOAD", default=["seed", "tiny-embed"],
                        help="workload names or .npz paths (default: seed tiny-embed)")
    parser.add_argument("--threshold", type=integer, default=None,
                        help="threshold (default: the trace's own)")
    parser.add_argument("--small-threshold", type=integer, default=None,
                        help="dual threshold of drop and stochastic (default: threshold // 4)")
    parser.add_argument("--out", default=DEFAULT_OUT,
                        help=f"output folder (default: {DEFAULT_OUT})")
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        from workloads import TraceError, get_workload
        prepare_out(args.out)
        start = time.monotonic()
        results = []
        for name in args.workloads:
            try:
                trace = get_workload(name)
            except TraceError as error:
                raise UsageError(error) from None
            try:
                results.append(compare_modes(trace, threshold=args.threshold,
                                             small_threshold=args.small_threshold))
            except ValueError as error:
                raise UsageError(error) from None
    except UsageError as error:
        return usage_error(parser.prog, error)
    data = {"command": "python -m reports.modes " +
            " ".join(map(shlex.quote, argv if argv is not None else sys.argv[1:])),
            **provenance(), "seconds": round(time.monotonic() - start, 2),
            "workloads": results}
    with open(os.path.join(args.out, "modes.json"), "w") as f:
        json.dump(data, f, indent=1)
    with open(os.path.join(args.out, "modes.md"), "w") as f:
        f.write(render_markdown(data))
    print(f"wrote {args.out}/modes.md and modes.json ({data['seconds']:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
