"""Synthesise, place and route GradientCompressor for a Lattice ECP5-85F and report the result.

    python -m gradient_compressor.synth [CONFIG ...] [--seeds 1 2 3] [--freq 200]
        [--out build/synth] [--synth-only] [--jobs 2] [--results docs/results/synth.md]
        [--ooc | --l1-only]

For each configuration: Yosys synth_ecp5, then nextpnr-ecp5 (--85k --package CABGA381, default
speed grade) once per placement seed. Prints and writes (OUT/synth.md, OUT/synth.json): the
cell counts, Fmax per seed and their median, gradients per second at that Fmax (a beat of
``lanes`` gradients per clock), the critical path named by the Amaranth signals on it, the
flip-flops per Amaranth signal and the outputs that an input reaches through combinational
logic only. ``--results`` also writes the summary table, each critical path with the deepest
paths estimated on its netlist and their loops, headed by the command, the commit and the date,
where the docs link it.

--ooc puts the design out of context: its inputs from a register chain on one pin, its outputs
registered and XOR-folded into one pin (four pins in all, clock and reset included), so that
every port is a register-to-register path and no I/O pin pulls the placement apart; --l1-only
does the same with the configuration's L1 alone. A quicker loop for timing work, not the
figures of docs/results/synth.md (see docs/synth.md, "Out of context").
"""

import argparse
import gc
import shlex
import sys
import warnings

from amaranth.hdl import UnusedElaboratable

from gradient_compressor.console import (ArgumentParser, UsageError, check_writable, file_name,
                                         positive_integer, prepare_out, require_extra,
                                         run_command)
from gradient_compressor.provenance import write_results
from .flow import (DEVICE, PARAMETERS, ROUTER2_LANES, ROUTER_CHOICES, ROUTERS,
                   parse_configuration, run)
from .report import render_markdown, render_summary, tool_versions, write_report

DEFAULT_OUT = "build/synth"


def build_parser():
    parser = ArgumentParser(
        prog="python -m gradient_compressor.synth", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="CONFIG: a comma-separated list of default (the design's defaults, "
               "32 x 4), SETSxWAYS (e.g. 128x4, 1024x4), KEY=VALUE overrides, "
               f"KEY one of {', '.join(PARAMETERS)}, and modes=off (the run-time modes' "
               "settings tied off, so the logic they control is left out); e.g. 1024x4, "
               "128x4,fifo_depth=64, default,lanes=8 or default,modes=off. "
               "Exit status: 0 done, 1 a tool failed (a seed whose place and route failed is "
               "reported as such, the others kept), 2 bad argument.")
    parser.add_argument("configs", nargs="*", metavar="CONFIG", default=["default"],
                        help="configurations to run (default: default)")
    parser.add_argument("--seeds", nargs="+", type=positive_integer, default=[1], metavar="SEED",
                        help="nextpnr placement seeds, one run each (default: 1)")
    parser.add_argument("--freq", type=float, default=200, metavar="MHZ",
                        help="clock constraint for nextpnr in MHz (default: %(default)s)")
    parser.add_argument("--out", type=file_name, default=DEFAULT_OUT,
                        help="folder for the report and the build files (default: %(default)s)")
    parser.add_argument("--synth-only", action="store_true",
                        help="run Yosys only: cell counts and paths, no place and route or Fmax")
    parser.add_argument("--jobs", "-j", type=positive_integer, default=1, metavar="N",
                        help="place-and-route runs at once, one core each (default: 1)")
    parser.add_argument("--router", choices=ROUTER_CHOICES, default=ROUTERS[0],
                        help="nextpnr's router; auto: router1 below "
                             f"{ROUTER2_LANES} lanes, router2 from {ROUTER2_LANES} "
                             "(default: %(default)s, nextpnr's own)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--ooc", dest="top", action="store_const", const="ooc", default="pins",
                       help="out of context: every input from a register chain on one pin, "
                            "every output registered and folded into one pin")
    where.add_argument("--l1-only", dest="top", action="store_const", const="l1-ooc",
                       help="the configuration's L1 alone, out of context as --ooc")
    parser.add_argument("--results", type=file_name, metavar="FILE.md",
                        help="also write the summary table there, with the command, commit "
                             "and date (make synth: docs/results/synth.md)")
    return parser


def _drop(configs):
    """Let go of the configurations built but not elaborated (after a bad argument or a tool's
    failure), without Amaranth's warning that they were never used."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        configs.clear()
        gc.collect()


def main(argv=None):
    return run_command(build_parser(), lambda args: _synth(args, argv), argv)


def _synth(args, argv):
    """The command, once parsed (``argv``: as given, for the report); its exit status."""
    if not args.freq > 0:
        raise UsageError(f"--freq must be a positive number of MHz, not {args.freq:g}")
    configs = []
    try:
        for text in args.configs:
            configs.append(parse_configuration(text))
        if not args.synth_only:
            require_extra("synth", "place and route")
        if args.results:
            check_writable("--results", args.results, make_folder=True)
        prepare_out(args.out)      # now, before minutes of synthesis
    except UsageError:
        _drop(configs)
        raise
    command = shlex.join(["python", "-m", "gradient_compressor.synth", *(sys.argv[1:] if argv is None else argv)])
    try:
        results = run(configs, args.out, seeds=args.seeds, freq=args.freq,
                      place=not args.synth_only, jobs=args.jobs, top=args.top,
                      router=args.router,
                      log=lambda line: print(line, file=sys.stderr, flush=True))
    except RuntimeError as error:   # a tool failed: its message and where its log is
        _drop(configs)
        print(f"python -m gradient_compressor.synth: error: {error}", file=sys.stderr)
        return 1
    report = {"command": command, "device": "LFE5U-85F CABGA381 (nextpnr-ecp5 "
              + " ".join(DEVICE) + ", default speed grade)", "freq_constraint_mhz": args.freq,
              "top": args.top, "router": args.router,
              "tools": tool_versions(), "results": results}
    path = write_report(report, args.out)
    print(render_markdown(report))
    print(f"wrote {path} and {path.with_suffix('.json')}", file=sys.stderr)
    if args.results:
        seeds = len(args.seeds) if not args.synth_only else 0
        write_results(args.results, "ECP5-85F synthesis",
                      f"{len(results)} configuration{'' if len(results) == 1 else 's'}, "
                      f"{seeds} placement seed{'' if seeds == 1 else 's'} each",
                      render_summary(report), command=command)
        print(f"wrote {args.results}", file=sys.stderr)
    failed = [f"{r['name']} seed {s['seed']}" for r in results for s in r["seeds"]
              if "failed" in s]
    if failed:      # the report keeps the other seeds; the run still did not finish
        print(f"python -m gradient_compressor.synth: error: place and route failed on "
              f"{', '.join(failed)} (the report names the logs)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
