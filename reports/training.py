"""Training in the loop: each run-time mode's cost in accuracy next to the DRAM bytes it saves.

    python -m gradient_compressor.reports.training [MODEL ...] [--modes exact,drop,...] [--seeds 3]
        [--lanes 1] [--sets 1024] [--ways 8] [--steps N] [--whole-line | --no-whole-line]
        [--out docs/results/training.md] [--plots docs/img] [-q]
    python -m gradient_compressor.reports.training --sizing [MODEL ...]
        [--whole-line | --no-whole-line] [--out docs/results/training-sizing.md]

Each model (:data:`PRESETS`: ``recsys``, ``lm``, ``digits``; :mod:`workloads.models`) is
trained with PyTorch on the CPU (:func:`workloads.record.train`) once per mode and seed. In
``fp32`` the optimiser sees autograd's gradients (no compressor); in every other mode the
gradient write path is the compressor: each micro-batch's gradients, quantised
(:class:`workloads.record.Quantiser`), go through the policy emulator in that mode
(:class:`reports.write_path.CompressedWritePath`), and the optimiser sees what DRAM holds
after each step's flush, de-quantised. The table gives, per model and mode, the held-out
accuracy and loss over the seeds (mean and standard deviation), their difference from the
exact run and from FP32 seed by seed, and the DRAM bytes saved against dense write-through
(:mod:`reports.line_costs`' costs), with a verdict: a mode *hurts* where, seed by seed, its
accuracy is lower than FP32's or its held-out loss higher, on average by more than twice
the differences' standard deviation and at least 0.001 (:func:`verdict`).

The compressor follows the whole-line rule by default (``--whole-line``: every line write
carries every pending value of its line, its values in the gradients' own format, so that
it never moves more bytes than dense write-through; :class:`model.LineModel`'s
``whole_line``); ``--no-whole-line`` runs the seed's policy instead (masked line writes of
wider sums). The byte counts of either are :func:`reports.line_costs.write_format`'s, stated
in the table's header.

``--sizing`` instead streams one exact run per model (seed 0) through every L1 geometry of
:func:`reports.sizing.geometries` at 1, 8 and 32 lanes, and gives the smallest that saves at
least half of the DRAM bytes. Exit status: 0 done, 2 bad argument (before any training),
130 interrupted.
"""

import argparse
import sys
import time

import numpy as np

from gradient_compressor.design.params import DEFAULTS, L1_ENTRIES_MAX, WHOLE_LINE, check_lanes

from gradient_compressor.console import (ArgumentParser, UsageError, add_policy_option,
                                         check_writable, file_name,
                                         int_list, positive_integer, progress, run_command, table)
from .line_costs import GRADIENT_BYTES, VALUE_BYTES, write_format
from gradient_compressor.provenance import write_results
from .write_path import MODES, CompressedWritePath, SizingPaths

__all__ = ["PRESETS", "RUN_MODES", "parse_modes", "run_once", "summarise", "verdict",
           "sizing_answer", "main"]

#: The models trained in the loop and their run sizes (steps of ``micro_batches`` backward
#: passes of ``batch_size``): minutes for every mode and seed on a 2-core machine; the
#: ``lm`` run writes about 10**8 gradients.
PRESETS = {
    "recsys": {"steps": 100, "micro_batches": 4, "batch_size": 256},
    "lm": {"steps": 55, "micro_batches": 4, "batch_size": 16},
    "digits": {"steps": 150, "micro_batches": 4, "batch_size": 16},
}
#: Seconds per step of each preset here (one core), for the time estimates: in the loop,
#: and through the whole sizing grid at 1, 8 and 32 lanes.
SECONDS_PER_STEP = {"recsys": 0.04, "lm": 0.4, "digits": 0.03}
SIZING_SECONDS_PER_STEP = {"recsys": 0.11, "lm": 2.9, "digits": 0.06}
#: ``fp32`` (no compressor) and the compressor's modes.
RUN_MODES = ("fp32",) + MODES
#: The share of DRAM bytes the sizing answer asks to save.
SIZING_TARGET = 0.5


def parse_modes(text):
    """``"exact,drop"`` -> ``["exact", "drop"]`` (in :data:`RUN_MODES` order); an argparse
    ``type``: raise :class:`argparse.ArgumentTypeError` naming an unknown mode."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in RUN_MODES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown mode {', '.join(unknown) or '(none)'} in "
                                         f"{text!r}; choose from {','.join(RUN_MODES)}")
    return [mode for mode in RUN_MODES if mode in names]


def run_once(model, mode, seed, *, lanes=1, sets=1024, ways=8, steps=None, on_step=None,
             whole_line=WHOLE_LINE):
    """Train ``model`` once with the write path in ``mode`` (``fp32``: none), under the
    whole-line rule if ``whole_line`` (else the seed's policy).

    Returns
    -------
    dict
        ``model``, ``mode``, ``seed``, ``accuracy`` and ``loss`` (held out), ``train_loss``
        (the last step's), ``gradients``, ``saving`` (None in fp32), ``discards``,
        ``seconds``.
    """
    from gradient_compressor.workloads.record import train
    size = dict(PRESETS[model], **({"steps": steps} if steps else {}))
    path = None if mode == "fp32" else CompressedWritePath(mode, lanes=lanes, sets=sets,
                                                           ways=ways, keep_dram=True,
                                                           whole_line=whole_line)
    start = time.monotonic()
    run = train(model, seed=seed, sink=path, on_step=on_step, **size)
    return {"model": model, "mode": mode, "seed": seed, **run["evaluation"],
            "train_loss": run["losses"][-1],
            "gradients": run["stream"].gradients if run["stream"] else None,
            "saving": path.saving if path else None,
            "discards": path.discards if path else None,
            "seconds": time.monotonic() - start}


def _spread(values):
    return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


#: Differences smaller than this (the table's last decimal) are not counted as a loss.
RESOLUTION = 0.001


def paired_differences(mode, reference, key):
    """Per seed, ``mode``'s ``key`` minus ``reference``'s, over the seeds both have (a seed
    fixes the initial weights and the batches, so runs of one seed differ by the mode
    alone)."""
    by_seed = {r["seed"]: r[key] for r in reference}
    return [r[key] - by_seed[r["seed"]] for r in mode if r["seed"] in by_seed]


def verdict(mode, reference):
    """Whether the runs ``mode`` lose against ``reference`` (lists of ``{"seed",
    "accuracy", "loss"}``), seed by seed.

    A mode *hurts* where the mean of its per-seed differences (:func:`paired_differences`)
    is worse, lower in accuracy or higher in held-out loss, by more than twice their
    standard deviation and by at least :data:`RESOLUTION`; returns ``"hurts: accuracy
    -0.012, ..."``, else ``"no measurable loss"``; with fewer than two seeds in common there
    is no spread to judge by: ``"one seed: not judged"``.
    """
    words = []
    for key, sign, unit in (("accuracy", -1, "accuracy"), ("loss", 1, "held-out loss")):
        differences = paired_differences(mode, reference, key)
        if len(differences) < 2:
            return "one seed: not judged"
        mean = float(np.mean(differences))
        if sign * mean > max(2 * _spread(differences), RESOLUTION):
            words.append(f"{unit} {mean:+.3f}")
    return "hurts: " + ", ".join(words) if words else "no measurable loss"


def summarise(results):
    """Per model and mode (in :data:`RUN_MODES` order): ``{"model", "mode", "runs",
    "accuracy", "accuracy_sd", "per_seed", "loss", "loss_sd", "vs_exact", "vs_fp32",
    "saving", "verdict"}``; ``vs_*`` are ``(mean, sd)`` of the per-seed accuracy differences
    from that reference (None without it); ``verdict`` is against FP32, or against exact
    without FP32."""
    rows = []
    for model in dict.fromkeys(r["model"] for r in results):
        runs = {mode: [r for r in results if r["model"] == model and r["mode"] == mode]
                for mode in RUN_MODES}
        reference = runs["fp32"] or runs["exact"]
        for mode, group in runs.items():
            if not group:
                continue
            accuracy = [r["accuracy"] for r in group]
            savings = [r["saving"] for r in group if r["saving"] is not None]

            def versus(other):
                differences = paired_differences(group, runs[other], "accuracy")
                return (float(np.mean(differences)), _spread(differences)) \
                    if differences else None
            rows.append({"model": model, "mode": mode, "runs": len(group),
                         "accuracy": float(np.mean(accuracy)), "accuracy_sd": _spread(accuracy),
                         "per_seed": accuracy,
                         "loss": float(np.mean([r["loss"] for r in group])),
                         "loss_sd": _spread([r["loss"] for r in group]),
                         "vs_exact": versus("exact"), "vs_fp32": versus("fp32"),
                         "saving": float(np.mean(savings)) if savings else None,
                         "verdict": "reference" if group is reference
                         else verdict(group, reference)})
    return rows


def best_modes(rows):
    """Per model, the compressor mode that saves most bytes with no measurable loss (None if
    none): ``{model: row}``."""
    best = {}
    for row in rows:
        if row["saving"] is None or row["verdict"].startswith("hurts"):
            continue
        if row["model"] not in best or row["saving"] > best[row["model"]]["saving"]:
            best[row["model"]] = row
    return best


def _difference(pair):
    return "-" if pair is None else f"{pair[0]:+.3f} ± {pair[1]:.3f}"


def render(rows):
    """The table of :func:`summarise`'s rows (Markdown)."""
    headers = ["model", "mode", "held-out accuracy (mean ± sd)", "per seed",
               "vs exact (per seed)", "vs FP32 (per seed)", "held-out loss (mean ± sd)",
               "DRAM bytes saved vs dense", "verdict"]
    body = [[r["model"], r["mode"], f"{r['accuracy']:.3f} ± {r['accuracy_sd']:.3f}",
             " ".join(f"{a:.3f}" for a in r["per_seed"]),
             _difference(r["vs_exact"]), _difference(r["vs_fp32"]),
             f"{r['loss']:.3f} ± {r['loss_sd']:.3f}",
             "- (no compressor)" if r["saving"] is None else f"{100 * r['saving']:.1f} %",
             r["verdict"]] for r in rows]
    return table(body, headers, align=["left", "left", "right", "right", "right", "right",
                                       "right", "right", "left"])


def plot(model, results, path):
    """Held-out accuracy per mode (each seed a dot, the mean a bar) beside the DRAM bytes
    saved, for one model, as a PNG at ``path``."""
    from . import plots  # noqa: F401  (the Agg backend)
    import matplotlib.pyplot as plt
    modes = [m for m in RUN_MODES if any(r["model"] == model and r["mode"] == m
                                         for r in results)]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    for i, mode in enumerate(modes):
        runs = [r for r in results if r["model"] == model and r["mode"] == mode]
        accuracy = [r["accuracy"] for r in runs]
        left.bar(i, np.mean(accuracy), color="#c6dbef", yerr=_spread(accuracy), capsize=4)
        left.plot([i] * len(accuracy), accuracy, "o", color="#08519c", markersize=4)
        savings = [r["saving"] for r in runs if r["saving"] is not None]
        if savings:
            right.bar(i, 100 * np.mean(savings), color="#74c476")
    low = min(r["accuracy"] for r in results if r["model"] == model)
    for axis in (left, right):
        axis.set_xticks(range(len(modes)), modes, rotation=20, fontsize=8)
    left.set_ylim(max(0.0, low - 0.05), None)
    left.set_ylabel("held-out accuracy")
    left.set_title(f"{model}: accuracy per mode (dots: seeds)")
    right.axhline(0, color="black", linewidth=0.8)
    right.set_ylabel("DRAM bytes saved vs dense (%)")
    right.set_title("bytes saved (fp32: no compressor)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def sizing_answer(savings, grid, target=SIZING_TARGET):
    """From ``{(sets, ways): saving}`` over ``grid`` (smallest first): ``(smallest geometry
    saving at least ``target`` or None, its saving or None, best geometry, best saving)``."""
    smallest = next((g for g in grid if savings[g] >= target), None)
    best = max(grid, key=lambda g: (savings[g], -grid.index(g)))
    return smallest, savings.get(smallest), best, savings[best]


def run_sizing(model, grid, lanes, *, steps=None, on_step=None, whole_line=WHOLE_LINE):
    """One exact run of ``model`` (seed 0) streamed through every ``(lanes, sets, ways)``
    (under the whole-line rule if ``whole_line``); ``{"gradients", "rows": [(lanes, smallest,
    its saving, best, best saving, saving at the default)], "lowest": (saving, lanes, sets,
    ways)}`` (``lowest``: the grid's least saving, negative where a compressor costs more
    than dense write-through)."""
    from gradient_compressor.workloads.record import train
    size = dict(PRESETS[model], **({"steps": steps} if steps else {}))
    sink = SizingPaths(lanes, grid, on_step=on_step, whole_line=whole_line)
    run = train(model, seed=0, sink=sink, **size)
    rows = []
    for n in sorted(set(lanes)):
        savings = {(s, w): sink.paths[(n, s, w)].saving for s, w in grid}
        default = savings.get((DEFAULTS["sets"], DEFAULTS["ways"]))
        rows.append((n, *sizing_answer(savings, grid), default))
    lowest = min((path.saving, *key) for key, path in sink.paths.items())
    return {"gradients": run["stream"].gradients, "rows": rows, "lowest": lowest}


def _geometry(g):
    return f"{g[0]} x {g[1]}"


def render_sizing(results, grid):
    """The sizing table: per model and lanes, the smallest L1 saving half the bytes."""
    body = []
    for model, result in results.items():
        for n, smallest, there, best, best_saving, default in result["rows"]:
            body.append([model, result["gradients"], n,
                         _geometry(smallest) if smallest else
                         f"none within {_geometry(grid[-1])}",
                         "-" if there is None else f"{100 * there:.0f} %",
                         "-" if default is None else f"{100 * default:.0f} %",
                         f"{100 * best_saving:.0f} % at {_geometry(best)}"])
    return table(body, ["model", "gradients", "N", f"smallest L1 saving "
                        f"{100 * SIZING_TARGET:.0f} %", "saving there", "saving at 32 x 4",
                        "best saving, smallest L1 with it"],
                 align=["left", "right", "right", "left", "right", "right", "left"])


def build_parser():
    parser = ArgumentParser(
        prog="python -m gradient_compressor.reports.training",
        description="Train models with the compressor in their gradient write path, in each "
                    "mode and seed, and compare held-out accuracy and loss with FP32 and the "
                    "exact mode next to the DRAM bytes saved against dense write-through, "
                    "under the whole-line rule unless --no-whole-line (needs PyTorch: "
                    "docs/training.md).",
        epilog="Exit status: 0 done, 2 bad argument, 130 interrupted.")
    parser.add_argument("models", nargs="*", metavar="MODEL",
                        help=f"models (default: {' '.join(PRESETS)})")
    parser.add_argument("--modes", type=parse_modes, default=list(RUN_MODES),
                        help=f"comma-separated modes (default: {','.join(RUN_MODES)})")
    parser.add_argument("--seeds", type=positive_integer, default=3,
                        help="seeds per model and mode, 0 to N-1 (default: %(default)s)")
    parser.add_argument("--steps", type=positive_integer, default=None,
                        help="optimiser steps per run (default: each model's preset)")
    parser.add_argument("--lanes", type=positive_integer, default=1,
                        help="lanes per line of the compressor (default: %(default)s)")
    parser.add_argument("--sets", type=positive_integer, default=1024,
                        help=f"L1 sets, a power of two; sets x ways is at most {L1_ENTRIES_MAX} "
                             f"entries (default: %(default)s)")
    parser.add_argument("--ways", type=positive_integer, default=8,
                        help="L1 ways (default: %(default)s)")
    add_policy_option(parser, f"the compressor's policy in the loop (a value written costs "
                              f"{GRADIENT_BYTES} bytes under the rule, {VALUE_BYTES} under the "
                              f"seed's)")
    parser.add_argument("--sizing", action="store_true",
                        help="instead: one exact run per model through every L1 geometry up "
                             "to 1024 x 8 at 1, 8 and 32 lanes")
    parser.add_argument("--out", type=file_name, metavar="FILE.md", help="also write the table here, with the "
                        "command, commit and date")
    parser.add_argument("--plots", type=file_name, metavar="FOLDER", help="write a plot per model here "
                        "(training-MODEL.png)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    return parser


def check_arguments(args):
    """Every argument checked before any work; :class:`UsageError` names the bad one."""
    import os
    from gradient_compressor.model import LineModel
    unknown = [m for m in args.models if m not in PRESETS]
    if unknown:
        raise UsageError(f"unknown model {', '.join(unknown)}: choose from "
                         f"{', '.join(PRESETS)}")
    try:
        check_lanes(args.lanes)
        LineModel(lanes=args.lanes, sets=args.sets, ways=args.ways,
                  whole_line=args.whole_line)
    except (ValueError, TypeError) as error:
        raise UsageError(f"--{str(error).replace('_', '-')}") from None
    if args.out:
        check_writable("--out", args.out)
    if args.plots and not os.path.isdir(args.plots):
        raise UsageError(f"--plots {args.plots}: no such folder")
    if args.sizing and args.plots:
        raise UsageError("--plots draws the in-the-loop runs, not --sizing")
    try:
        import torch  # noqa: F401
    except ImportError:
        raise UsageError("training needs PyTorch: pip install torch --index-url "
                         "https://download.pytorch.org/whl/cpu, then pip install -e "
                         "'.[record]' (docs/training.md)") from None


def main(argv=None):
    return run_command(build_parser(), _training, argv)


def _training(args):
    check_arguments(args)
    models = args.models or list(PRESETS)
    return _sizing(args, models) if args.sizing else run_in_the_loop(args, models)


#: The progress bars count estimated seconds: they show the share done and the time left.
_BAR = "{desc}: {percentage:3.0f} %|{bar}| [{elapsed} < {remaining}{postfix}]"


def run_in_the_loop(args, models):
    """Every run of ``models`` x ``args.modes`` x ``args.seeds``, the table printed and
    written to ``args.out`` and the plots to ``args.plots`` if given; returns 0."""
    # The bar counts estimated seconds (each model's steps weigh what they take here), so
    # that its remaining time is an estimate of the whole run's.
    per_step = {m: SECONDS_PER_STEP[m] for m in models}
    total = sum((args.steps or PRESETS[m]["steps"]) * per_step[m] * len(args.modes) * args.seeds
                for m in models)
    print(f"{len(models) * len(args.modes) * args.seeds} training runs, about "
          f"{total / 60:.0f} min here (one core)", file=sys.stderr)
    bar = progress(total, "training in the loop", enabled=not args.quiet, bar_format=_BAR)
    results = []
    for model in models:
        for mode in args.modes:
            for seed in range(args.seeds):
                bar.set_postfix_str(f"{model} {mode} seed {seed}")
                results.append(run_once(model, mode, seed, lanes=args.lanes, sets=args.sets,
                                        ways=args.ways, steps=args.steps,
                                        whole_line=args.whole_line,
                                        on_step=lambda *_: bar.update(per_step[model])))
    bar.close()
    rows = summarise(results)
    text = render(rows)
    print(text)
    if args.out:              # before the plots: the header's commit is the code's, unchanged
        best = best_modes(rows)
        lines = [f"- {m}: {_best_line(best.get(m))}" for m in models]
        write_results(args.out, "Training in the loop: accuracy and DRAM bytes per mode",
                      f"each model trained {args.seeds} times per mode (seeds 0 to "
                      f"{args.seeds - 1}), the compressor at {args.lanes} lane(s), "
                      f"{args.sets} x {args.ways} L1 lines, max_updates "
                      f"{DEFAULTS['max_updates']}; {write_format(args.whole_line)}",
                      text + "\n\nThe mode that saves most bytes with no measurable loss "
                      "against FP32:\n\n" + "\n".join(lines) + "\n\n"
                      + _sizes(models, args, results) + "\n")
    if args.plots:
        import os
        for model in models:
            plot(model, results, os.path.join(args.plots, f"training-{model}.png"))
    return 0


def _best_line(row):
    if row is None:
        return "none"
    if row["saving"] == 0:
        return (f"none saves bytes (the best, {row['mode']}, writes as many bytes as dense "
                f"write-through)")
    if row["saving"] < 0:
        return (f"none saves bytes (the best, {row['mode']}, costs "
                f"{-100 * row['saving']:.1f} % more than dense write-through)")
    return f"{row['mode']} ({100 * row['saving']:.1f} % of the bytes saved)"


def _sizes(models, args, results):
    """A line per model: the run's size, its gradients and how fast a run went (training,
    quantisation and the emulator together, wall clock)."""
    parts = []
    for m in models:
        size = dict(PRESETS[m], **({"steps": args.steps} if args.steps else {}))
        runs = [r for r in results if r["model"] == m and r["gradients"]]
        text = (f"- `{m}`: {size['steps']} steps x {size['micro_batches']} micro-batches of "
                f"{size['batch_size']}")
        if runs:
            seconds = np.mean([r["seconds"] for r in runs])
            text += (f", {runs[0]['gradients']} gradients per run through the compressor, "
                     f"{seconds:.2f} s per run ({runs[0]['gradients'] / seconds / 1e6:.1f} M "
                     f"gradients/s, training included)")
        parts.append(text)
    return "Runs (wall clock on this shared machine):\n\n" + "\n".join(parts)


def _lowest(results):
    """A line: the least saving of any model, lane count and geometry of the sizing runs."""
    model = min(results, key=lambda m: results[m]["lowest"])
    saving, lanes, sets, ways = results[model]["lowest"]
    return (f"The least saving of the grid, any model, N and geometry: {100 * saving:+.2f} % "
            f"({model}, N = {lanes}, {_geometry((sets, ways))})"
            + (": below 0, more bytes than dense write-through." if saving < 0 else "."))


def _sizing(args, models):
    from .sizing import geometries
    grid = geometries(1024, 8)
    lanes = [1, 8, 32]
    per_step = SIZING_SECONDS_PER_STEP
    total = sum((args.steps or PRESETS[m]["steps"]) * per_step[m] for m in models)
    print(f"{len(models)} runs through {len(grid) * len(lanes)} compressors each, about "
          f"{total / 60:.0f} min here (one core)", file=sys.stderr)
    bar = progress(total, "sizing", enabled=not args.quiet, bar_format=_BAR)
    results = {}
    for model in models:
        bar.set_postfix_str(model)
        results[model] = run_sizing(model, grid, lanes, steps=args.steps,
                                    whole_line=args.whole_line,
                                    on_step=lambda _: bar.update(per_step[model]))
    bar.close()
    text = render_sizing(results, grid) + "\n\n" + _lowest(results)
    print(text)
    if args.out:
        write_results(args.out, "Which L1 saves half the DRAM bytes of real training",
                      f"one exact run per model (seed 0), streamed live through every "
                      f"geometry {_geometry(grid[0])} to {_geometry(grid[-1])} (lines of N "
                      f"lanes), max_updates {DEFAULTS['max_updates']}; "
                      f"{write_format(args.whole_line)}", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
