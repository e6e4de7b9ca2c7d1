"""Simulation speed: gradients per second in the Amaranth simulator and in the compiled (Yosys
CXXRTL) simulator, on the default configuration, with DRAM always ready, ready every other
cycle, and ready at random half of the time.

Run as ``python -m gradient_compressor.simulation.bench`` (``--help`` for the sizes). The
compiled simulator runs a one-million-gradient trace; the run fails (exit status 1) if it takes
a minute or more, or if the two simulators disagree on the small trace they both run.

Then the same on lines (``GradientCompressor(lanes=N)``, ``--lanes``, by default 8, on the
default geometry of lines): a small trace of beats in both simulators (which must agree) and a
long one in the compiled simulator; gradients count the beats' masked lanes.
"""

import random
import sys
import time
import warnings

from gradient_compressor.design import GradientCompressor
from gradient_compressor.console import ArgumentParser, positive_integer, run_command, table

from .cxxrtl import build, compiler_available
from .driver import always, every_other, random_ready, simulate

__all__ = ["make_trace", "make_line_trace", "main"]

#: The compiled simulation of a million gradients must take less than this (seconds).
LIMIT = 60.0


def make_trace(n, *, seed=1, span=4096, sigma=300, threshold=1000):
    """``n`` gradients then a flush: addresses uniform over ``span`` words (more than L1 holds,
    so hits, misses and evictions mix), gradients normal around 0 (a few pass ``threshold``
    and go straight on)."""
    rng = random.Random(seed)
    lo, hi = -(1 << 15), (1 << 15) - 1
    ops = [("grad", rng.randrange(span), max(lo, min(hi, int(rng.gauss(0, sigma)))), threshold)
           for _ in range(n)]
    ops.append(("flush",))
    return ops


def make_line_trace(n, lanes, *, seed=1, span=4096, sigma=300, threshold=1000):
    """``n`` beats of ``lanes`` then a flush: lines uniform over ``span`` words, gradients as
    :func:`make_trace`'s, every lane in half of the beats and a random set of lanes in the
    others."""
    rng = random.Random(seed)
    lo, hi = -(1 << 15), (1 << 15) - 1
    full = (1 << lanes) - 1
    ops = [("line", rng.randrange(span // lanes) * lanes,
            tuple(max(lo, min(hi, int(rng.gauss(0, sigma)))) for _ in range(lanes)),
            full if rng.random() < 0.5 else rng.randrange(1, full + 1), threshold)
           for _ in range(n)]
    ops.append(("flush",))
    return ops


def _fresh(ready):
    """``always`` and ``every_other`` as they are; a new generator from a factory."""
    return ready if ready in (always, every_other) else ready()


HEADERS = ["simulator", "DRAM ready", "gradients", "cycles", "seconds", "gradients/s",
           "cycles/s", "note"]


def _row(name, ready_name, grads, cycles, seconds, note=""):
    return [name, ready_name, grads, cycles, f"{seconds:.2f}", f"{grads / seconds:,.0f}",
            f"{cycles / seconds:,.0f}", note]


def main(argv=None):
    parser = ArgumentParser(prog="python -m gradient_compressor.simulation.bench",
                            description=__doc__.split("\n\n")[0])
    parser.add_argument("--amaranth", type=positive_integer, default=5000, metavar="N",
                        help="gradients for the Amaranth simulator (default 5000)")
    parser.add_argument("--compiled", type=positive_integer, default=1_000_000, metavar="N",
                        help="gradients for the compiled simulator (default 1000000)")
    parser.add_argument("--lanes", type=int, default=8, metavar="N",
                        help="lanes of the runs on lines (default 8; 1: none)")
    parser.add_argument("--line-amaranth", type=positive_integer, default=1000, metavar="N",
                        help="beats for the Amaranth simulator on lines (default 1000)")
    parser.add_argument("--line-compiled", type=positive_integer, default=125_000, metavar="N",
                        help="beats for the compiled simulator on lines (default 125000)")
    # (A bad $GC_CXXRTL_OPT, which build() refuses, ends in one line and status 2.)
    return run_command(parser, lambda args: _bench(parser, args), argv)


def _bench(parser, args):
    if args.lanes != 1:
        from gradient_compressor.design.params import check_lanes
        try:
            check_lanes(args.lanes)
        except (TypeError, ValueError) as error:
            parser.error(str(error))

    if not compiler_available():
        print("no C++ compiler (g++): cannot build the compiled simulator", file=sys.stderr)
        return 1
    patterns = [("always", always), ("every_other", every_other),
                ("random 50%", lambda: random_ready(1, probability=0.5))]

    t0 = time.perf_counter()
    sim = build({})
    build_s = time.perf_counter() - t0
    print(f"compiled simulator: {sim.binary} (ready in {build_s:.1f} s)")

    rows = []
    ok = _agree(sim, GradientCompressor, make_trace(args.amaranth), patterns, rows, "")
    t0 = time.perf_counter()
    big = make_trace(args.compiled)
    print(f"(made a {args.compiled}-gradient trace in {time.perf_counter() - t0:.1f} s)")
    for result in _long_runs(sim, big, patterns, rows, "", "", "gradients/s"):
        if len(result.accepted) != args.compiled:
            print(f"  only {len(result.accepted)} gradients were accepted")
            ok = False
        if args.compiled >= 1_000_000 and sim.last_total_seconds >= LIMIT:
            print(f"  took {sim.last_total_seconds:.1f} s, not under {LIMIT:.0f} s")
            ok = False
    if args.lanes > 1:
        ok &= _lines(args, patterns, rows)
    print(table(rows, HEADERS, align=["left", "left"] + ["right"] * 5 + ["left"]))
    return 0 if ok else 1


def _lines(args, patterns, rows):
    """The rows on lines (appended to ``rows``); whether the simulators agreed and every beat
    of the long trace was accepted."""
    lanes = args.lanes
    t0 = time.perf_counter()
    sim = build({"lanes": lanes})
    print(f"compiled simulator, {lanes} lanes: {sim.binary} "
          f"(ready in {time.perf_counter() - t0:.1f} s)")
    label = f", {lanes} lanes"
    ok = _agree(sim, lambda: GradientCompressor(lanes=lanes),
                make_line_trace(args.line_amaranth, lanes), patterns, rows, label,
                f"{args.line_amaranth} beats")
    big = make_line_trace(args.line_compiled, lanes)
    for result in _long_runs(sim, big, patterns, rows, label, f"{args.line_compiled} beats; ",
                             "cycles/s"):
        if len(result.accepted) != args.line_compiled:
            print(f"  only {len(result.accepted)} beats were accepted")
            ok = False
    return ok


def _agree(sim, make_dut, trace, patterns, rows, label, note=""):
    """``trace`` in the Amaranth simulator and in the compiled one ``sim`` under each DRAM
    pattern, a row each (appended to ``rows``); whether they gave the same results."""
    ok = True
    for ready_name, ready in patterns:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reference = simulate(make_dut(), trace, dram_ready=_fresh(ready))
        seconds = time.perf_counter() - t0
        rows.append(_row(f"amaranth{label}", ready_name, reference.gradients, reference.cycles,
                         seconds, note))
        same = sim.run(trace, dram_ready=_fresh(ready)) == reference
        ok &= same
        rows.append(_row(f"compiled{label}", ready_name, reference.gradients, reference.cycles,
                         sim.last_total_seconds,
                         "identical" if same else "DIFFERENT FROM AMARANTH"))
    return ok


def _long_runs(sim, trace, patterns, rows, label, note, rate):
    """``trace`` in the compiled simulator under each DRAM pattern, a row each (appended to
    ``rows``, with the simulation's own rate in gradients or cycles per second); yields each
    result."""
    for ready_name, ready in patterns:
        result = sim.run(trace, dram_ready=_fresh(ready))
        alone = sim.last_sim_seconds
        speed = (f"{result.gradients / alone:,.0f} gradients/s" if rate == "gradients/s"
                 else f"{result.cycles / alone:,.0f} cycles/s")
        rows.append(_row(f"compiled{label}", ready_name, result.gradients, result.cycles,
                         sim.last_total_seconds,
                         f"{note}simulation alone {alone:.2f} s, {speed}"))
        yield result


if __name__ == "__main__":
    sys.exit(main())
