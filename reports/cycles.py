"""Cycles per accepted gradient, from cycle-accurate simulation (``make bench``).

For each stream: the seed's six scenarios, a random stream and two dense ones (a short one,
and a long one that L1 holds a small part of, for the steady state), with DRAM always ready
and with DRAM ready every other cycle. Two figures:

* *accept*: cycles from the first to the last accepted gradient, per gradient (1.00 is the
  design's peak: one gradient per clock);
* *end to end*: cycles from the first accepted gradient until the flush barrier reports idle,
  per gradient (includes the final L1 scan and L2 drain).

Then the same streams on lines (``--lanes``, by default 1 and 8): each stream packed into
beats (a run of gradients to one line, :func:`reports.line_costs.pack_lines`) through
``GradientCompressor(lanes=N)``: cycles per beat and gradients per clock while accepting.

Both tables run on the compiled (CXXRTL) simulator when there is a C++ compiler (``--sim``;
its results are the Amaranth simulator's, cycle for cycle: ``tests/test_cxxrtl.py``), else on
the Amaranth simulator (minutes, for the long stream).
"""

import random
import sys

from gradient_compressor.design.params import DEFAULTS
from gradient_compressor.console import table
from gradient_compressor.simulation import always, every_other

__all__ = ["streams", "measure", "main"]


def streams():
    """The streams measured, as ``{name: ops}`` (each without the final flush): the seed's six
    stress scenarios (threshold 50), a random stream (Gaussian gradients, sigma 25, over 4096
    addresses, threshold 50) and dense tensors in address order of 2048 and 65536 gradients
    (the same distribution)."""
    from gradient_compressor.workloads.seed import seed_phases
    result = {name.split(" (")[0]: [("grad", a, g, 50) for a, g in pairs]
              for name, pairs in seed_phases() if name.startswith("S")}   # the six scenarios
    rng = random.Random(2026)
    result["random_2000"] = [
        ("grad", rng.randrange(4096), int(rng.gauss(0, 25)), 50) for _ in range(2000)]
    # A dense tensor written in address order (a layer's gradient as a backward pass emits it).
    result["dense_2048"] = [("grad", addr, int(rng.gauss(0, 25)), 50) for addr in range(2048)]
    # The same, 32 times longer: L1 (32 x 4 entries, or lines) holds a small part of it, so
    # that most of it runs in the steady state of a full L1 (a miss evicts).
    result["dense_65536"] = [("grad", addr, int(rng.gauss(0, 25)), 50)
                             for addr in range(65536)]
    return result


def measure(ops, dram_ready, backend="amaranth"):
    """``(accept, end_to_end)`` cycles per gradient for ``ops`` on the default configuration,
    on the simulator ``backend`` (``"compiled"`` or ``"amaranth"``)."""
    from gradient_compressor.reports.backend import run_rtl
    result = run_rtl(backend, {}, ops + [("flush",)], dram_ready=dram_ready)
    n = len(result.accepted)
    first, last = result.accept_cycles[0], result.accept_cycles[-1]
    return (last - first + 1) / n, (result.cycles - first) / n


def measure_lines(ops, lanes, dram_ready, backend="amaranth"):
    """``(beats, gradients, cycles per beat, gradients per clock)`` while accepting ``ops``
    packed into beats of ``lanes``, on the default geometry (of lines), on the simulator
    ``backend``."""
    from gradient_compressor.reports.backend import run_rtl
    from gradient_compressor.reports.line_costs import pack_lines
    beats = [op for op in pack_lines(ops, lanes)] if lanes > 1 else ops
    result = run_rtl(backend, {"lanes": lanes}, beats + [("flush",)], dram_ready=dram_ready)
    n = len(result.accepted)
    span = result.accept_cycles[-1] - result.accept_cycles[0] + 1
    return n, result.gradients, span / n, result.gradients / span


def main(argv=None):
    """The command; its exit status (0 done, 2 a bad argument, 130 interrupted)."""
    from gradient_compressor.console import ArgumentParser, file_name, run_command
    parser = ArgumentParser(prog="python -m gradient_compressor.reports.cycles",
                            description=__doc__.strip().splitlines()[0])
    parser.add_argument("--out", type=file_name, default=None, metavar="FILE.md",
                        help="also write the tables here, with the command, commit and date")
    parser.add_argument("--lanes", type=lanes_list, default=[1, 8], metavar="N[,N...]",
                        help="lanes of the line table (default: 1,8)")
    parser.add_argument("--sim", choices=("compiled", "amaranth"), default=None,
                        help="RTL simulator: compiled (CXXRTL, default when available) or "
                             "amaranth")
    return run_command(parser, _throughput, argv)


def _throughput(args):
    from gradient_compressor.reports.backend import resolve_backend
    from gradient_compressor.console import check_writable
    from gradient_compressor.provenance import write_results
    if args.out:        # before minutes of simulation
        check_writable("--out", args.out)
    backend = resolve_backend(args.sim)
    simulator = {"compiled": "compiled (CXXRTL) simulator",
                 "amaranth": "Amaranth simulator"}[backend]
    print(__doc__.strip().splitlines()[0])
    configuration = ("GradientCompressor() defaults ("
                     + ", ".join(f"{k} {v}" for k, v in DEFAULTS.items()) + ")")
    print(f"configuration: {configuration}, {simulator}\n")
    rows = [[name, len(ops), *(f"{x:.2f}" for ready in (always, every_other)
                               for x in measure(ops, ready, backend))]
            for name, ops in streams().items()]
    text = table(rows, ["stream", "gradients", "accept (DRAM always ready)", "end-to-end",
                        "accept (DRAM ready 1/2)", "end-to-end"])
    print(text)
    line_rows = []
    for name, ops in streams().items():
        for lanes in args.lanes:
            figures = [measure_lines(ops, lanes, ready, backend)
                       for ready in (always, every_other)]
            beats, gradients = figures[0][:2]
            line_rows.append([name, lanes, beats, gradients,
                              *(f"{f[i]:.2f}" for f in figures for i in (2, 3))])
    lines_text = table(line_rows, ["stream", "lanes", "beats", "gradients",
                                   "cycles/beat (DRAM always ready)", "gradients/clock",
                                   "cycles/beat (DRAM ready 1/2)", "gradients/clock"])
    print(f"\nOn lines (the same geometry of lines): every stream packed into beats\n")
    print(lines_text)
    if args.out:
        write_results(args.out, "Cycles per accepted gradient",
                      f"{configuration}, {simulator}, every stream ended by a flush",
                      text + "\n\nOn lines (GradientCompressor(lanes=N), the same geometry "
                      "of lines), every stream packed into beats:\n\n" + lines_text)
    return 0


def lanes_list(text):
    """An argparse ``type``: a comma-separated list of lanes (each one of design.params.LANES)."""
    import argparse
    from gradient_compressor.design.params import check_lanes
    try:
        return [check_lanes(int(x)) for x in text.split(",")]
    except (TypeError, ValueError) as error:
        raise argparse.ArgumentTypeError(str(error)) from None


if __name__ == "__main__":
    sys.exit(main())
