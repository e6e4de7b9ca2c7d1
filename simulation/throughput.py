"""Cycles per accepted gradient, from cycle-accurate simulation (``make bench``).

For each stream: the seed's six scenarios and a random stream, with DRAM always ready and with
DRAM ready every other cycle. Two figures:

* *accept*: cycles from the first to the last accepted gradient, per gradient (1.00 is the
  design's peak: one gradient per clock);
* *end to end*: cycles from the first accepted gradient until the flush barrier reports idle,
  per gradient (includes the final L1 scan and L2 drain).
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
    return result


def measure(ops, dram_ready):
    """``(accept, end_to_end)`` cycles per gradient for ``ops`` on the default configuration."""
    dut = GradientCompressor()
    result = simulate(dut, ops + [("flush",)], dram_ready=dram_ready)
    n = len(result.accepted)
    first, last = result.accept_cycles[0], result.accept_cycles[-1]
    return (last - first + 1) / n, (result.cycles - first) / n


def main(argv=None):
    from reports.console import ArgumentParser
    from reports.provenance import write_results
    parser = ArgumentParser(prog="python -m simulation.throughput",
                            description=__doc__.strip().splitlines()[0])
    parser.add_argument("--out", default=None, metavar="FILE.md",
                        help="also write the table here, with the command, commit and date")
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
    if args.out:
        write_results(args.out, "Cycles per accepted gradient",
                      f"{configuration}, Amaranth simulator, every stream ended by a flush",
                      text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
