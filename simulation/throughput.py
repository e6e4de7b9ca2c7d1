"""Cycles per accepted gradient, from cycle-accurate simulation (``make bench``).

For each stream: the seed's six scenarios, a random stream and a dense one, with DRAM always
ready and with DRAM ready every other cycle. Two figures:

* *accept*: cycles from the first to the last accepted gradient, per gradient (1.00 is the
  design's peak: one gradient per clock);
* *end to end*: cycles from the first accepted gradient until the flush barrier reports idle,
  per gradient (includes the final L1 scan and L2 drain).

Then the same streams on lines (``--lanes``, by default 1 and 8): each stream packed into
beats (a run of gradients to one line, :func:`reports.line_costs.pack_lines`) through
``GradientCompressor(lanes=N)``: cycles per beat and gradients per clock while accepting.
"""

import random
import sys

from design import GradientCompressor
from design.params import DEFAULTS
from reports.console import table
from simulation import always, every_other, simulate

__all__ = ["streams", "measure", "main"]


def streams():
    """The streams measured, as ``{name: ops}`` (each without the final flush): the seed's six
    stress scenarios (threshold 50) and a random stream (Gaussian gradients, sigma 25, over 4096
    addresses, threshold 50)."""
    from workloads.seed import seed_phases
    result = {name.split(" (")[0]: [("grad", a, g, 50) for a, g in pairs]
              for name, pairs in seed_phases() if name.startswith("S")}   # the six scenarios
    rng = random.Random(2026)
    result["random_2000"] = [
        ("grad", rng.randrange(4096), int(rng.gauss(0, 25)), 50) for _ in range(2000)]
    # A dense tensor written in address order (a layer's gradient as a backward pass emits it).
    result["dense_2048"] = [("grad", addr, int(rng.gauss(0, 25)), 50) for addr in range(2048)]
    return result


def measure(ops, dram_ready):
    """``(accept, end_to_end)`` cycles per gradient for ``ops`` on the default configuration."""
    dut = GradientCompressor()
    result = simulate(dut, ops + [("flush",)], dram_ready=dram_ready)
    n = len(result.accepted)
    first, last = result.accept_cycles[0], result.accept_cycles[-1]
    return (last - first + 1) / n, (result.cycles - first) / n


def measure_lines(ops, lanes, dram_ready):
    """``(beats, gradients, cycles per beat, gradients per clock)`` while accepting ``ops``
    packed into beats of ``lanes``, on the default geometry (of lines)."""
    from reports.line_costs import pack_lines
    beats = [op for op in pack_lines(ops, lanes)] if lanes > 1 else ops
    result = simulate(GradientCompressor(lanes=lanes), beats + [("flush",)],
                      dram_ready=dram_ready)
    n = len(result.accepted)
    span = result.accept_cycles[-1] - result.accept_cycles[0] + 1
    return n, result.gradients, span / n, result.gradients / span


def main(argv=None):
    from reports.console import ArgumentParser
    from reports.provenance import write_results
    parser = ArgumentParser(prog="python -m simulation.throughput",
                            description=__doc__.strip().splitlines()[0])
    parser.add_argument("--out", default=None, metavar="FILE.md",
                        help="also write the tables here, with the command, commit and date")
    parser.add_argument("--lanes", type=lanes_list, default=[1, 8], metavar="N[,N...]",
                        help="lanes of the line table (default: 1,8)")
    args = parser.parse_args(argv)
    print(__doc__.strip().splitlines()[0])
    configuration = ("GradientCompressor() defaults ("
                     + ", ".join(f"{k} {v}" for k, v in DEFAULTS.items()) + ")")
    print(f"configuration: {configuration}\n")
    rows = [[name, len(ops), *(f"{x:.2f}" for ready in (always, every_other)
                               for x in measure(ops, ready))]
            for name, ops in streams().items()]
    text = table(rows, ["stream", "gradients", "accept (DRAM always ready)", "end-to-end",
                        "accept (DRAM ready 1/2)", "end-to-end"])
    print(text)
    line_rows = []
    for name, ops in streams().items():
        for lanes in args.lanes:
            figures = [measure_lines(ops, lanes, ready) for ready in (always, every_other)]
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
                      f"{configuration}, Amaranth simulator, every stream ended by a flush",
                      text + "\n\nOn lines (GradientCompressor(lanes=N), the same geometry "
                      "of lines), every stream packed into beats:\n\n" + lines_text)
    return 0


def lanes_list(text):
    """An argparse ``type``: a comma-separated list of lanes (each one of design.params.LANES)."""
    import argparse
    from design.params import check_lanes
    try:
        return [check_lanes(int(x)) for x in text.split(",")]
    except (TypeError, ValueError) as error:
        raise argparse.ArgumentTypeError(str(error)) from None


if __name__ == "__main__":
    sys.exit(main())
