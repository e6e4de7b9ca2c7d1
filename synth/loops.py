"""The accumulate loop of L1 alone on the ECP5-85F: how fast can its formulations run?

    python -m gradient_compressor.synth.loops [LOOP ...] [--seeds 1 2 3] [--lanes 8 16]
        [--out build/synth/loops] [--results docs/results/loops.md]

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

On lines (``line``, ``line_ahead``, ``line_ahead2``; ``--lanes N``, 8 by default) the loop is
a line's entry under the whole-line rule: a beat to the line the beat before it updated must
see that update. Those are made with :mod:`design.compare` alone (the design's form); the
``line_ahead`` loops are models of the loop's logic on back-to-back beats to one line (a lane's
crossing and fit, the written bit, each lane's class after it), not of a whole decision.
"""

import argparse
import pathlib
import statistics
import sys

from amaranth import Array, Cat, Const, Module, Mux, Signal, signed

from gradient_compressor.console import (ArgumentParser, UsageError, check_writable, file_name,
                                         positive_integer, require_extra)
from gradient_compressor.provenance import write_results
from gradient_compressor.design import compare
from gradient_compressor.design.line_decision import LineDecision
from gradient_compressor.design.params import DEFAULTS, check_lanes

from .flow import TOP, critical_path, place_and_route, synthesize
from .netlist import Netlist

GRAD = 16               # gradient width
SUM = GRAD + 1          # a held sum's width (design.layouts.value_width)
BOUND = SUM + 1         # t - g, -t - g
CHAIN = 1024            # the most flip-flops in one piece of the input chain

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
    "line": "a line's entry as the line L1 forms it under the whole-line rule: the entry -> "
            "LineDecision (each lane's crossing and fit compares, their OR with the direct "
            "lanes and the count test: the written bit) -> the entry after, or the next "
            "line's entry from a register -> the entry",
    "line_ahead": "the line decided a beat ahead: with S the sums before beat n-1 and each "
                  "lane's class after it (added to, kept as its gradient, kept as its sum, "
                  "freed: the written bit and the lane's fit), beat n's crossing and fit bits "
                  "are compares of S with bounds of gradients only (t - g_{n-1} - g_n, t - "
                  "g_n), picked by the class; the written bit is their OR with the direct "
                  "lanes and the count test; S_n = S + g_{n-1}, g_{n-1}, S or 0 by the class",
    "line_ahead2": "the line decided two beats ahead: the compares of S (the sums before beat "
                   "n-3, updated by beat n-3's class) with bounds of gradients only, one per "
                   "sum beat n may find (S plus the gradients of beats n-3 to n-1 its lanes "
                   "kept), picked by the class of beat n-2 and registered; beat n's crossing "
                   "and fit bits are those registers picked by beat n-1's class: the loop "
                   "left is that 4:1 pick, the OR over the lanes and the class, no carry chain",
}
FORMS = ("operators", "difference")
#: The loops on lines, made in the design's form only.
LINE_LOOPS = ("line", "line_ahead", "line_ahead2")


def _compares(form):
    """(at_least, at_most) in the given form."""
    if form == "operators":
        return (lambda a, b: a >= b), (lambda a, b: a <= b)
    return compare.at_least, compare.at_most


def forms(name):
    """The forms ``name`` is measured in."""
    return ("difference",) if name in LINE_LOOPS else FORMS


def loop(name, form, lanes=8):
    """The loop ``name`` (of :data:`LOOPS`) with its compares in ``form`` (on ``lanes`` lanes
    for the line loops): ``(module, ports)``."""
    at_least, at_most = _compares(form)
    m = Module()
    pin_in, pin_out = Signal(name="pin_in"), Signal(name="pin_out")

    def registers(*widths):
        # One shift chain from the pin, in pieces of at most CHAIN bits, each fed from the
        # pin and the piece before it (one chain of thousands of flip-flops exhausts Yosys'
        # stack; pieces fed from the pin alone would be merged).
        chain = Signal(sum(widths), name="inputs")
        feed = pin_in
        for at in range(0, len(chain), CHAIN):
            piece = chain[at:at + CHAIN]
            m.d.sync += piece.eq(Cat(feed, piece[:-1]))
            feed = pin_in ^ piece[-1]
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
    elif name == "line":
        state = _line(m, registers, lanes)
    elif name == "line_ahead":
        state = _line_ahead(m, registers, lanes)
    elif name == "line_ahead2":
        state = _line_ahead2(m, registers, lanes)
    else:
        raise ValueError(f"unknown loop {name!r}: use one of {', '.join(LOOPS)}")
    m.d.sync += pin_out.eq(Cat(*state).xor())
    return m, [pin_in, pin_out]


def _line(m, registers, lanes):
    """``line``: the entry -> :class:`LineDecision` -> the entry after (or the next line's,
    from a register) -> the entry. Returns the state."""
    N, mu = lanes, DEFAULTS["max_updates"]
    decision = LineDecision(lanes=N, grad_width=GRAD, max_updates=mu)
    m.submodules.decision = decision
    (grads, mask, direct, tiny, rounded, level, high, low, fit_high, fit_low, same,
     row_entry, row_hit) = registers(N * GRAD, N, N, N, N, GRAD - 1, N * (GRAD + 2),
                                     N * (GRAD + 2), N * (GRAD + 1), N * (GRAD + 1), 1,
                                     len(decision.entry.as_value()), 1)
    entry = Signal(decision.entry.shape(), name="entry")
    hit = Signal(name="hit")
    after = decision.after
    m.d.comb += [decision.grads.eq(grads), decision.mask.eq(mask),
                 decision.direct.eq(direct), decision.tiny.eq(tiny),
                 decision.rounded.eq(rounded), decision.level.eq(level),
                 decision.high.eq(high), decision.low.eq(low),
                 decision.fit_high.eq(fit_high), decision.fit_low.eq(fit_low),
                 decision.hit.eq(hit), decision.entry.eq(entry)]
    # The next beat on the same line takes the entry this one leaves; another line's entry
    # comes from a register (s2's pick). (The line L1 picks the two in front of the decision,
    # s3_hit_entry, where this forwards the entry left into the register: the same loop, the
    # decision and a 2:1 pick.)
    with m.If(same):
        m.d.sync += [entry.sums.eq(after.sums), entry.count.eq(after.count),
                     entry.held.eq(Mux(decision.keeps, after.held, 0)),
                     hit.eq(decision.keeps)]
    with m.Else():
        m.d.sync += [entry.eq(row_entry), hit.eq(row_hit)]
    return [entry.as_value(), hit]


def _line_ahead(m, registers, lanes):
    """``line_ahead``: the line decided a beat ahead, on back-to-back beats to one line.
    Returns the state."""
    N, mu = lanes, DEFAULTS["max_updates"]
    # (the bounds of two gradients, t - g_{n-1} - g_n and the fit bounds, GRAD + 3 bits)
    (g1, high2, low2, fit_high2, fit_low2, high1, low1, fit_high1, fit_low1, pair_crosses,
     pair_fits, small, direct) = registers(
        N * GRAD, N * (GRAD + 3), N * (GRAD + 3), N * (GRAD + 3), N * (GRAD + 3),
        N * (GRAD + 2), N * (GRAD + 2), N * (GRAD + 1), N * (GRAD + 1), N, N, N, N)

    def lane(bits, width, i):
        return bits[i * width:(i + 1) * width].as_signed()
    # Each lane's class after beat n-1: 0 added to (not written), 1 kept as its gradient,
    # 2 kept as its sum (written, it did not fit), 3 freed (written).
    sums = [Signal(signed(GRAD), name=f"sum{i}") for i in range(N)]
    classes = [Signal(2, name=f"class{i}") for i in range(N)]
    count = Signal(range(mu + 1), name="count")   # the updates beat n finds
    crosses, fits = [], []
    for i, S in enumerate(sums):
        # beat n's lane on each sum its class may leave: S + g_{n-1}, g_{n-1}, S, nothing
        crosses.append(Array([
            compare.at_least(S, lane(high2, GRAD + 3, i)) |
            compare.at_most(S, lane(low2, GRAD + 3, i)),
            pair_crosses[i],
            compare.at_least(S, lane(high1, GRAD + 2, i)) |
            compare.at_most(S, lane(low1, GRAD + 2, i)),
            Const(0)])[classes[i]])
        fits.append(Array([
            compare.at_least(S, lane(fit_low2, GRAD + 3, i)) &
            compare.at_most(S, lane(fit_high2, GRAD + 3, i)),
            pair_fits[i],
            compare.at_least(S, lane(fit_low1, GRAD + 1, i)) &
            compare.at_most(S, lane(fit_high1, GRAD + 1, i)),
            Const(1)])[classes[i]])
    crossed, fit = Cat(crosses), Cat(fits)
    fills = count >= mu - 1
    written = direct.any() | (small & (crossed | ~fit)).any() | fills
    for i, S in enumerate(sums):
        g = lane(g1, GRAD, i)
        m.d.sync += [
            S.eq(Array([S + g, g, S, 0])[classes[i]]),
            classes[i].eq(Mux(written, Mux(fit[i], 3, Mux(small[i], 1, 2)), 0)),
        ]
    m.d.sync += count.eq(Mux(written, 1, count + 1))
    return [*sums, *classes, count]


def _line_ahead2(m, registers, lanes):
    """``line_ahead2``: the line decided two beats ahead, on back-to-back beats to one line.
    Returns the state."""
    N, mu, B = lanes, DEFAULTS["max_updates"], GRAD + 4
    # Per lane: the gradient of beat n-3 (S's update); for each of the four sums beat n may
    # find that hold S, the bounds (crossing high and low, fit high) with and without beat
    # n-3's gradient (S's two candidates that hold S); the crossing and fit bits of the four
    # sums of gradients only; the beat's small and direct lanes.
    g3, bounds, grad_bits, small, direct = registers(N * GRAD, N * 4 * 2 * 3 * B, N * 8, N, N)
    crossed, fit = [], []
    classes = [[Signal(2, name=f"class{i}_{age}") for age in (1, 2, 3)] for i in range(N)]
    count = Signal(range(mu + 1), name="count")
    for i in range(N):
        c1, c2, c3 = classes[i]                 # the classes of beats n-1, n-2, n-3
        S = Signal(signed(GRAD), name=f"sum{i}")    # the sums before beat n-3
        g = g3[i * GRAD:(i + 1) * GRAD].as_signed()
        m.d.sync += S.eq(Array([S + g, g, S, 0])[c3])

        def bound(k, with_g, which):
            at = ((((i * 4 + k) * 2 + with_g) * 3) + which) * B
            return bounds[at:at + B].as_signed()
        # For each of the four sums that hold S, whether it crosses and fits, on S as beat
        # n-3 leaves it (c3 picks between S + g and S; g and 0 are sums of gradients) ...
        bits = grad_bits[i * 8:(i + 1) * 8]
        ahead_cross, ahead_fit = [], []
        for k in range(4):
            cross = [compare.at_least(S, bound(k, w, 0)) | compare.at_most(S, bound(k, w, 1))
                     for w in (1, 0)]
            fits = [compare.at_most(S, bound(k, w, 2)) for w in (1, 0)]
            ahead_cross.append(Array([cross[0], bits[k], cross[1], 0])[c3])
            ahead_fit.append(Array([fits[0], bits[4 + k], fits[1], 1])[c3])
        # ... picked by beat n-2's class and registered (0 added to, 1 kept as its gradient,
        # 2 kept as its sum, 3 freed): beat n's sum by beat n-1's class, c1 (0: the sum beat
        # n-1 found plus its gradient, 1: its gradient, 2: the sum it found, 3: none).
        picked_cross = Signal(4, name=f"picked_cross{i}")
        picked_fit = Signal(4, name=f"picked_fit{i}")
        for pick, ahead, of_gradients in ((picked_cross, ahead_cross, bits[0:4]),
                                          (picked_fit, ahead_fit, bits[4:8])):
            m.d.sync += [pick[0].eq(Array([ahead[0], of_gradients[0], ahead[1],
                                           of_gradients[1]])[c2]),
                         pick[1].eq(of_gradients[1]),
                         pick[2].eq(Array([ahead[2], of_gradients[2], ahead[3],
                                           of_gradients[3]])[c2]),
                         pick[3].eq(of_gradients[3])]
        crossed.append(picked_cross.bit_select(c1, 1))
        fit.append(picked_fit.bit_select(c1, 1))
    crossed, fit = Cat(crossed), Cat(fit)
    written = direct.any() | (small & (crossed | ~fit)).any() | (count >= mu - 1)
    for i in range(N):
        c1, c2, c3 = classes[i]
        m.d.sync += [c1.eq(Mux(written, Mux(fit[i], 3, Mux(small[i], 1, 2)), 0)),
                     c2.eq(c1), c3.eq(c2)]
    m.d.sync += count.eq(Mux(written, 1, count + 1))
    return [*(c for lane in classes for c in lane), count]


def measure(name, form, build, seeds, freq=200, log=print, lanes=8):
    """Synthesise, place and route one loop; returns its figures."""
    line = name in LINE_LOOPS
    build = pathlib.Path(build) / (f"{name}-{lanes}" if line else f"{name}-{form}")
    synth = synthesize(*loop(name, form, lanes), build)
    netlist = Netlist(synth["netlist"], top=TOP, prefix="")
    result = {"loop": name, "form": form, "lanes": lanes if line else 1,
              "cells": netlist.cell_counts(), "seeds": []}
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
    parser.add_argument("--lanes", nargs="+", type=positive_integer, default=[8], metavar="N",
                        help="lanes of the line loops (default: 8)")
    parser.add_argument("--out", type=file_name, default="build/synth/loops",
                        help="folder for the build files (default: %(default)s)")
    parser.add_argument("--results", type=file_name, metavar="FILE.md",
                        help="also write the table there, headed by the command, commit and "
                             "date (docs/results/loops.md)")
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    for name in args.loops:
        if name not in LOOPS:
            parser.error(f"unknown loop {name!r}: use one of {', '.join(LOOPS)}")
    try:
        require_extra("synth", "place and route")
        if args.results:
            check_writable("--results", args.results, make_folder=True)
    except UsageError as error:
        parser.error(str(error))
    for lanes in args.lanes:
        try:
            check_lanes(lanes)
        except ValueError as error:
            parser.error(f"argument --lanes: {error}")
        if lanes == 1:
            parser.error("argument --lanes: the line loops take 2 lanes or more, not 1")
    rows = []
    for name in args.loops:
        for form in forms(name):
            for lanes in (args.lanes if name in LINE_LOOPS else [1]):
                r = measure(name, form, args.out, args.seeds, lanes=lanes)
                fmax = ", ".join(f"{s['fmax_mhz']:.1f}" for s in r["seeds"])
                rows.append(f"| {name} | {lanes} | {form} | {r['cells']['LUT4']} "
                            f"| {r['cells']['CCU2C']} | {fmax} "
                            f"| **{r['fmax_median_mhz']:.1f}** |")
    table = "\n".join(["| loop | lanes | compares | LUT4 | CCU2C | Fmax per seed (MHz) | median |",
                       "|---|---|---|---|---|---|---|", *rows])
    print("\n" + table)
    if args.results:
        loops = "\n".join(f"- `{name}`: {LOOPS[name]}." for name in args.loops)
        write_results(args.results, "L1's loops alone on the ECP5-85F",
                      f"{len(rows)} loop{'s' if len(rows) > 1 else ''}, "
                      f"{len(args.seeds)} placement seed{'s' if len(args.seeds) > 1 else ''} each "
                      f"(nextpnr-ecp5 --85k --package CABGA381, 200 MHz constraint; "
                      f"gradient {GRAD} bits)", f"{table}\n\n{loops}")
        print(f"wrote {args.results}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
