"""``python -m gradient_compressor.reports.emulator_check``: check the emulator
(:mod:`model.emulator`) against the reference models on whole workloads, and measure its speed.

    python -m gradient_compressor.reports.emulator_check --check [WORKLOAD ...]
        [--lanes 1,8,32] [--modes exact,drop,...] [--limit N] [--param KEY=VALUE]
        [--whole-line]
    python -m gradient_compressor.reports.emulator_check --bench [--lanes 1,8] [--modes ...]
        [--gradients N] [--repeat R] [--whole-line] [--out docs/results/emulator.md]

``--check`` runs every named workload (default: :data:`workloads.DEFAULT_WORKLOADS`), a flush
after every step, in every mode setting of :func:`reports.mode_comparison.mode_settings`
(exact, drop, stochastic, ema, ema per step, bypass) and ``combined`` (stochastic rounding,
the EMA threshold and the bypass window at once), through the reference model
(:class:`model.ReferenceModel`, or :class:`model.LineModel` on the workload packed into beats
by :func:`reports.line_costs.pack_lines`) and through the emulator, and compares them write
for write (address, value, cause, in order), discard for discard, the step totals, and the
EMA, LFSR and L1 contents at the end. It prints one row per run and exits 1 if any differs.

``--bench`` generates a stream of at least ``--gradients`` gradients (default 10**7; addresses
half from a Zipf-distributed hot set, half a sweep over 2**20 addresses, so that L1 hits,
misses, evicts and crosses thresholds; Student-t gradients; threshold 1000; a flush every
65536 gradients) and times the emulator's array path on it, one lane and lines of 8 (the
sweep's lines, one lane in eight left out of the mask at random), in each mode, at the
default geometry: the best of ``--repeat`` runs, each on a fresh emulator, by this process's
CPU time (one thread: one core's time, which the machine's other load does not inflate) and
by the wall clock. It also times the reference model on the stream's first
``--model-gradients`` gradients.

With ``--whole-line`` both run the whole-line rule (the models' and the emulator's
``whole_line=True``) instead of the seed's policy.

Exit status: 0 all equal, 1 a check found a difference, 2 a bad argument (one line).
"""

import sys
import time

import numpy as np

from gradient_compressor.design.params import WHOLE_LINE, check_lanes

__all__ = ["main", "bench_stream", "check_workload", "MODE_NAMES"]

#: The mode settings of --check and --bench, in order.
MODE_NAMES = ("exact", "drop", "stochastic", "ema", "ema per step", "bypass", "combined")

#: The bench stream's threshold and flush period.
BENCH_THRESHOLD = 1000
BENCH_STEP = 1 << 16


def settings(threshold, addr_low, addr_high):
    """``{name: [operations before the first gradient]}`` for :data:`MODE_NAMES`: those of
    :func:`reports.mode_comparison.mode_settings` at ``small_threshold = threshold // 4``, and
    ``combined``."""
    from gradient_compressor.reports.mode_comparison import mode_settings
    out = mode_settings(threshold, threshold // 4, addr_low, addr_high)
    out["combined"] = out["stochastic"] + out["ema"] + out["bypass"]
    return out


def _compare(model, emulator, model_writes, emulator_writes):
    """Whether a model and an emulator agree on everything they expose."""
    return (model_writes == emulator_writes and model.discards == emulator.discards and
            model.step_discards == emulator.step_discards and model.ema == emulator.ema and
            model.ema_latched == emulator.ema_latched and model.lfsr == emulator.lfsr and
            model.discard_count == emulator.discard_count and
            model.discard_sum == emulator.discard_sum and
            model.valid_count == emulator.valid_count and model.held() == emulator.held())


def check_workload(trace, lanes, prefix, *, limit=None, params=None):
    """Run ``prefix`` then ``trace`` (a flush after every step) through the reference model and
    the emulator; returns a dict: ``gradients``, ``writes``, ``discards``, ``equal``,
    ``model_seconds``, ``emulator_seconds``."""
    from gradient_compressor.model import LineModel, ReferenceModel
    from gradient_compressor.reports.line_costs import pack_lines
    from gradient_compressor.model.emulator import Emulator, LineEmulator
    geometry = dict(params or {})
    ops = list(prefix) + trace.ops(limit=limit)
    if lanes > 1:
        ops = pack_lines(ops, lanes)
    model = ReferenceModel(**geometry) if lanes == 1 else LineModel(lanes=lanes, **geometry)
    start = time.perf_counter()
    model_writes = model.run(ops)
    model_seconds = time.perf_counter() - start
    if lanes == 1:
        emulator = Emulator(**geometry)
        start = time.perf_counter()
        arrays = emulator.run_trace(trace, limit=limit, prefix=prefix)
        emulator_seconds = time.perf_counter() - start
        emulator_writes = arrays.to_writes()
    else:
        emulator = LineEmulator(lanes=lanes, **geometry)
        start = time.perf_counter()
        arrays = emulator.run_ops(ops)
        emulator_seconds = time.perf_counter() - start
        emulator_writes = arrays.to_line_writes()
    gradients = len(trace) if limit is None else min(limit, len(trace))
    return {"gradients": gradients, "writes": len(model_writes),
            "discards": len(model.discards),
            "equal": _compare(model, emulator, model_writes, emulator_writes),
            "model_seconds": model_seconds, "emulator_seconds": emulator_seconds}


def bench_stream(gradients, lanes, seed=1):
    """The bench's stream: ``(line, grads, mask, events, count)`` for :meth:`run_beats` (one
    lane: ``grads`` of shape (n,), ``mask`` None), ``count`` the gradients in it (at least
    ``gradients``)."""
    rng = np.random.default_rng(seed)
    if lanes == 1:
        n = gradients
        count = n
    else:
        n = -(-gradients * 8 // (7 * lanes)) + 64   # a lane in eight left out, on average
    hot = rng.zipf(1.3, n) % 65536
    sweep = np.arange(n, dtype=np.int64) % (1 << 20)
    addr = np.where(rng.random(n) < 0.5, hot, sweep)
    values = np.rint(rng.standard_t(3, (n, lanes)) * 200)
    grads = np.clip(values, -2 ** 15, 2 ** 15 - 1).astype(np.int16)
    if lanes == 1:
        mask = None
        grads = grads[:, 0]
        line = addr.astype(np.uint32)
        period = BENCH_STEP
    else:
        line = (addr * lanes).astype(np.uint32)
        present = rng.random((n, lanes)) >= 1 / 8    # each lane left out one time in eight
        mask = (present << np.arange(lanes, dtype=np.uint32)).sum(axis=1).astype(np.uint32)
        count = int(np.bitwise_count(mask).sum())
        if count < gradients:
            raise AssertionError("the bench stream is short of gradients")
        period = max(1, BENCH_STEP // lanes)
    events = [(i, ("flush",)) for i in range(period, n + 1, period)]
    if not events or events[-1][0] != n:
        events.append((n, ("flush",)))
    return line, grads, mask, events, count


def bench(gradients, lanes_list, modes, repeat, model_gradients, whole_line=WHOLE_LINE):
    """Rows of the bench table (see the module's description), under the whole-line rule if
    ``whole_line``."""
    from gradient_compressor.model import LineModel, ReferenceModel
    from gradient_compressor.model.emulator import Emulator, LineEmulator
    rows, model_rows = [], []
    for lanes in lanes_list:
        line, grads, mask, events, count = bench_stream(gradients, lanes)
        addr_high = int(line.max()) + lanes - 1
        all_settings = settings(BENCH_THRESHOLD, 0, addr_high)
        for mode in modes:
            prefix = [(0, op) for op in all_settings[mode]]
            best = best_cpu = None
            for _ in range(repeat):
                emulator = (Emulator(whole_line=whole_line) if lanes == 1 else
                            LineEmulator(lanes=lanes, whole_line=whole_line))
                start, start_cpu = time.perf_counter(), time.process_time()
                if lanes == 1:
                    writes = emulator.run_gradients(line, grads, BENCH_THRESHOLD,
                                                    events=prefix + events)
                else:
                    writes = emulator.run_beats(line, grads, BENCH_THRESHOLD, mask=mask,
                                                events=prefix + events)
                seconds = time.perf_counter() - start
                cpu = time.process_time() - start_cpu
                best = seconds if best is None else min(best, seconds)
                best_cpu = cpu if best_cpu is None else min(best_cpu, cpu)
            rows.append([lanes, mode, count, len(line), len(writes),
                         len(emulator.discard_arrays()[0]), f"{best_cpu:.3f}",
                         f"{count / best_cpu / 1e6:.1f}", f"{best:.3f}",
                         f"{count / best / 1e6:.1f}"])
        # The reference model on the stream's first gradients, exact mode.
        k = max(1, model_gradients // lanes)
        if lanes == 1:
            ops = [("grad", a, g, BENCH_THRESHOLD) for a, g in zip(line[:k].tolist(),
                                                                    grads[:k].tolist())]
            model = ReferenceModel(whole_line=whole_line)
            done = k
        else:
            ops = [("line", a, g, m, BENCH_THRESHOLD) for a, g, m in
                   zip(line[:k].tolist(), grads[:k].tolist(), mask[:k].tolist())]
            model = LineModel(lanes=lanes, whole_line=whole_line)
            done = int(np.bitwise_count(mask[:k]).sum())
        start_cpu = time.process_time()
        model.run(ops)
        cpu = time.process_time() - start_cpu
        model_rows.append([lanes, "exact", done, f"{cpu:.3f}", f"{done / cpu / 1e6:.2f}"])
    return rows, model_rows


def build_parser():
    from gradient_compressor.console import ArgumentParser, add_policy_option, file_name, int_list, positive_integer
    parser = ArgumentParser(prog="python -m gradient_compressor.reports.emulator_check",
                            description="Check the emulator against the reference models on "
                                        "whole workloads (--check) and measure its speed "
                                        "(--bench).")
    parser.add_argument("workloads", nargs="*", metavar="WORKLOAD",
                        help="with --check: workload names or .npz paths (default: the "
                             "default workloads)")
    parser.add_argument("--check", action="store_true",
                        help="compare with the reference model, write for write")
    parser.add_argument("--bench", action="store_true",
                        help="measure M gradients/s at the default geometry")
    parser.add_argument("--lanes", type=int_list, default=None,
                        help="lanes, e.g. 1,8,32 (default: 1 for --check, 1,8 for --bench)")
    parser.add_argument("--modes", default=",".join(MODE_NAMES),
                        help=f"mode settings, comma-separated (default: all: "
                             f"{','.join(MODE_NAMES)})")
    parser.add_argument("--limit", type=positive_integer, default=None,
                        help="--check: the first N gradients of each workload")
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="--check: a parameter of the synthetic generators")
    parser.add_argument("--gradients", type=positive_integer, default=10 ** 7,
                        help="--bench: gradients in the stream (default 10000000)")
    parser.add_argument("--repeat", type=positive_integer, default=3,
                        help="--bench: runs per row, the best one counts (default 3)")
    parser.add_argument("--model-gradients", type=positive_integer, default=100_000,
                        help="--bench: gradients the reference model is timed on "
                             "(default 100000)")
    add_policy_option(parser, "the models' and the emulator's policy")
    parser.add_argument("--out", type=file_name, default=None, metavar="FILE.md",
                        help="also write the tables to this Markdown file (docs/results/)")
    return parser


def _params(items):
    """The ``--param`` items as the generators' keyword arguments (as ``compressor-report``
    reads them: :func:`gradient_compressor.console.parse_params`)."""
    from gradient_compressor.console import UsageError, parse_params
    try:
        return parse_params(items)
    except ValueError as error:
        raise UsageError(str(error)) from None


def main(argv=None):
    """The command; returns its exit status (0 equal, 1 a difference, 2 a bad argument)."""
    from gradient_compressor.console import run_command
    return run_command(build_parser(), _run, argv)


def _run(args):
    from gradient_compressor.console import UsageError, check_writable, table
    if not (args.check or args.bench):
        raise UsageError("give --check, --bench or both")
    if args.workloads and not args.check:
        raise UsageError("workloads are for --check")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODE_NAMES]
    if unknown or not modes:
        raise UsageError(f"unknown mode {unknown[0] if unknown else args.modes!r}: choose "
                         f"from {', '.join(MODE_NAMES)}")
    for lanes in args.lanes or ():
        try:
            check_lanes(lanes)
        except (TypeError, ValueError) as error:
            raise UsageError(str(error)) from None
    if args.out:
        check_writable("--out", args.out)
    from gradient_compressor.model.native import CompilerMissing
    from gradient_compressor.model.emulator import load_kernel
    try:
        load_kernel()
    except CompilerMissing as error:
        raise UsageError(str(error)) from None
    sections, status = [], 0
    if args.check:
        text, ok = _check(args, modes, table)
        print(text)
        sections.append(("Checked against the reference models", text))
        status = 0 if ok else 1
    if args.bench:
        text = _bench(args, modes, table)
        print(text)
        sections.append(("Speed", text))
    if args.out:
        from gradient_compressor.provenance import write_results
        summary = ("default geometry (32 sets x 4 ways, max_updates 255), the emulator on one "
                   "core" + ("; the whole-line rule" if args.whole_line else "") +
                   ("" if status == 0 else "; A CHECK FOUND A DIFFERENCE"))
        body = "\n\n".join(f"## {title}\n\n{text}" for title, text in sections)
        write_results(args.out, "The policy emulator", summary, body)
    return status


def _check(args, modes, table):
    from gradient_compressor.console import UsageError
    from gradient_compressor.workloads import (DEFAULT_WORKLOADS, GENERATORS, TraceError,
                                               get_workload)
    names = args.workloads or DEFAULT_WORKLOADS
    params = _params(args.param)
    if params and not any(name in GENERATORS for name in names):
        raise UsageError(f"--param is for the synthetic generators "
                         f"({', '.join(GENERATORS)}), and no workload named is one")
    rows, ok = [], True
    for name in names:
        try:
            trace = get_workload(name, **(params if name in GENERATORS else {}))
        except TraceError as error:
            raise UsageError(str(error)) from None
        threshold = int(trace.threshold.max()) if len(trace.threshold) else 0
        low = int(trace.addr.min()) if len(trace) else 0
        high = int(trace.addr.max()) if len(trace) else 0
        all_settings = settings(threshold, low, high)
        for lanes in args.lanes or [1]:
            for mode in modes:
                result = check_workload(trace, lanes, all_settings[mode], limit=args.limit,
                                        params={"whole_line": args.whole_line})
                ok &= result["equal"]
                rows.append([trace.name, lanes, mode, result["gradients"], result["writes"],
                             result["discards"], f"{result['model_seconds']:.3f}",
                             f"{result['emulator_seconds']:.3f}",
                             "equal" if result["equal"] else "DIFFERENT"])
    text = table(rows, ["workload", "lanes", "mode", "gradients", "writes", "discards",
                        "model s", "emulator s", "writes, discards, state"],
                 align=["left", "right", "left"] + ["right"] * 5 + ["left"])
    verdict = ("every run equal to the reference model" if ok else
               "SOME RUN DIFFERS FROM THE REFERENCE MODEL")
    return f"{text}\n\n{verdict}", ok


def _bench(args, modes, table):
    rows, model_rows = bench(args.gradients, args.lanes or [1, 8], modes, args.repeat,
                             args.model_gradients, whole_line=args.whole_line)
    import os
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    text = table(rows, ["lanes", "mode", "gradients", "beats", "writes", "discards",
                        "CPU s", "M gradients/s (CPU)", "wall s", "M gradients/s (wall)"],
                 align=["right", "left"] + ["right"] * 8)
    model_text = table(model_rows, ["lanes", "mode", "gradients", "CPU s",
                                    "M gradients/s (CPU)"],
                       align=["right", "left"] + ["right"] * 3)
    return (f"{text}\n\nCPU: this process's user + system time (one thread: one core's); "
            f"wall: elapsed, which on a shared machine includes time waiting for a core "
            f"(load average {load:.2f} when the table was made); each the best of "
            f"{args.repeat} runs, including the Python side (events, output arrays).\n\n"
            f"The reference model on the stream's first gradients:\n\n{model_text}")


if __name__ == "__main__":
    sys.exit(main())
