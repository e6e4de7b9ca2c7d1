"""The accumulate loop of L1 alone on the ECP5-85F: how fast can its formulations run?

    python -m gradient_compressor.synth.loops [LOOP ...] [--seeds 1 2 3] [--out build/synth/loops]

A gradient to the address the gradient before it updated must see that update, so L1 holds
one loop that no pipeline stage can cut: the kept sum ``s`` -> is ``|s + g| >= t`` (with the
bounds ``t - g``, ``-t - g`` registered a stage earlier: ``s >= t - g`` or ``s <= -t - g``)
-> keep ``s + g`` or free the entry (0) -> ``s``. Each LOOP below is one formulation of it, with
every other input a register (loaded one bit per cycle from a pin, as ``synth.flow``'s
``fpga_top`` loads the settings) and its state folded into one registered pin; each is
synthesised (Yosys ``synth_ecp5``) and placed and routed (nextpnr-ecp5, the flow of
``python -m gradient_compressor.synth``) once per seed, and its compares are made both ways:
with Amaranth's operators (``>=``) and as the sign of a difference (:mod:`design.compare`). The
figures bound what the whole design can reach at the default widths (gradient 16 bits, a held
sum 17).
"""

import argparse
import pathlib
import statistics
import sys

from amaranth import Array, Cat, Module, Mux, Signal, signed

from gradient_compressor.console import (ArgumentParser, UsageError, file_name, positive_integer,
                                         require_extra)
from gradient_compressor.design import compare

from .flow import TOP, critical_path, place_and_route, synthesize
from .netlist import Netlist

GRAD = 16               # gradient width
SUM = GRAD + 1          # a held sum's width (design.layouts.value_width)
BOUND = SUM + 1         # t - g, -t - g

#: Each loop: what it is (the help text says it).
LOOPS = {
    "accumulate": "the loop as L1 has it: s -> (s >= t - g) | (s <= -t - g) and s + g side "
                  "by side -> keep or free -> s",
    "accumulate_ways": "the same, with the entry either s (the same address again) or the hit "
                       "way's sum of a registered 4-way row, tested way by way and picked "
                       "after the tests, as l1.py's s3 does",
    "lookahead": "the decision one gradient ahead: with S the sum before gradient n-1 and d "
                 "its decision, d_n = d ? |g_n| >= t : S crosses t - g_{n-1} - g_n (bounds "
                 "from gradients only); S_n = d ? 0 : S + g_{n-1}",
    "lookahead2": "two gradients ahead: d_n = d_{n-1} ? |g_n| >= t : d_{n-2} ? |g_{n-1} + g_n| "
                  ">= t : S_{n-2} crosses bounds of three gradients, compared the cycle before; "
                  "the loops are a mux of 1-bit registers and an add",
}
FORMS = ("operators", "difference")


def _compares(form):
    """(at_least, at_most) in the given form."""
    if form == "operators":
        return (lambda a, b: a >= b), (lambda a, b: a <= b)
    return compare.at_least, compare.at_most


def loop(name, form):
    """The loop ``name`` (of :data:`LOOPS`) with its compares in ``form``: ``(module, ports)``."""
    at_least, at_most = _compares(form)
    m = Module()
    pin_in, pin_out = Signal(name="pin_in"), Signal(name="pin_out")

    def registers(*widths):
        chain = Signal(sum(widths), name="inputs")
        m.d.sync += chain.eq(Cat(pin_in, chain[:-1]))
        values, at = [], 0
        for width in widths:
            values.append(chain[at:at + width])
            at += width
        return values

    def crosses(s, high, low):
        return at_least(s, high.as_signed()) | at_most(s, low.as_signed())

    s = Signal(signed(SUM), name="sum")
    state = [s]
    if name == "accumulate":
        g, high, low = registers(GRAD, BOUND, BOUND)
        m.d.sync += s.eq(Mux(crosses(s, high, low), 0, s + g.as_signed()))
    elif name == "accumulate_ways":
        g, high, low, row, way, same = registers(GRAD, BOUND, BOUND, 4 * SUM, 2, 1)
        sums = [row[i * SUM:(i + 1) * SUM].as_signed() for i in range(4)] + [s]
        pick = Mux(same, 4, way)
        crossed = Array(crosses(x, high, low) for x in sums)[pick]
        m.d.sync += s.eq(Mux(crossed, 0, Array(x + g.as_signed() for x in sums)[pick]))
    elif name == "lookahead":
        g_before, high, low, direct = registers(GRAD, BOUND + 1, BOUND + 1, 1)
        d = Signal(name="decision")
        m.d.sync += [d.eq(Mux(d, direct, crosses(s, high, low))),
                     s.eq(Mux(d, 0, s + g_before.as_signed()))]
        state.append(d)
    elif name == "lookahead2":
        g_before, high, low, direct, direct2 = registers(GRAD, BOUND + 1, BOUND + 1, 1, 1)
        d1, d2, above, below = (Signal(name=n) for n in ("d1", "d2", "above", "below"))
        m.d.sync += [d1.eq(Mux(d1, direct, Mux(d2, direct2, above | below))), d2.eq(d1),
                     s.eq(Mux(d1, 0, s + g_before.as_signed())),
                     above.eq(at_least(s, high.as_signed())),
                     below.eq(at_most(s, low.as_signed()))]
        state.append(d1)
    else:
        raise ValueError(f"unknown loop {name!r}: use one of {', '.join(LOOPS)}")
    m.d.sync += pin_out.eq(Cat(*state).xor())
    return m, [pin_in, pin_out]


def measure(name, form, build, seeds, freq=200, log=print):
    """Synthesise, place and route one loop; returns its figures."""
    build = pathlib.Path(build) / f"{name}-{form}"
    synth = synthesize(*loop(name, form), build)
    netlist = Netlist(synth["netlist"], top=TOP, prefix="")
    result = {"loop": name, "form": form, "cells": netlist.cell_counts(), "seeds": []}
    for seed in seeds:
        routed = place_and_route(build, seed, freq)
        path = critical_path(netlist, routed["report"])
        result["seeds"].append({"seed": seed, "fmax_mhz": round(routed["fmax_mhz"], 1),
                                "critical_path": path})
        log(f"{name} ({form}): seed {seed}: {routed['fmax_mhz']:.1f} MHz, "
            f"{path['delay_ns']:.2f} ns: {path['summary']}")
    result["fmax_median_mhz"] = statistics.median(s["fmax_mhz"] for s in result["seeds"])
    return result


def build_parser():
    parser = ArgumentParser(
        prog="python -m gradient_compressor.synth.loops", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="LOOP: " + "; ".join(f"{k}: {v}" for k, v in LOOPS.items()) +
               ". Exit status: 0 done, 1 a tool failed, 2 bad argument.")
    parser.add_argument("loops", nargs="*", metavar="LOOP", default=list(LOOPS),
                        help="loops to measure (default: all)")
    parser.add_argument("--seeds", nargs="+", type=positive_integer, default=[1, 2, 3],
                        metavar="SEED",
                        help="nextpnr placement seeds (default: 1 2 3)")
    parser.add_argument("--out", type=file_name, default="build/synth/loops",
                        help="folder for the build files (default: %(default)s)")
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    for name in args.loops:
        if name not in LOOPS:
            parser.error(f"unknown loop {name!r}: use one of {', '.join(LOOPS)}")
    try:
        require_extra("synth", "place and route")
    except UsageError as error:
        parser.error(str(error))
    rows = []
    for name in args.loops:
        for form in FORMS:
            r = measure(name, form, args.out, args.seeds)
            fmax = ", ".join(f"{s['fmax_mhz']:.1f}" for s in r["seeds"])
            rows.append(f"| {name} | {form} | {r['cells']['LUT4']} | {r['cells']['CCU2C']} "
                        f"| {fmax} | **{r['fmax_median_mhz']:.1f}** |")
    print("\n| loop | compares | LUT4 | CCU2C | Fmax per seed (MHz) | median |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
