"""Formal proofs of the gradient compressor.

    # every k-induction proof and the covers
    python -m gradient_compressor.proofs prove [-j 2]
    # bounded checks (a few minutes; part of make test)
    python -m gradient_compressor.proofs bmc   [-j 2]
    # the line L1 at 8 lanes on the default geometry, the compressor on 2 lanes (make prove-lines)
    python -m gradient_compressor.proofs prove-lines [-j 2]
    # the one-lane compressor under the seed's policy (whole_line=False; make prove-seed)
    python -m gradient_compressor.proofs prove-seed [-j 2]
    # the jobs
    python -m gradient_compressor.proofs list
    # geometry sweep
    python -m gradient_compressor.proofs sweep [--sets N..] [--ways N..] [--depths N..] [--list]
    # some jobs, by name
    python -m gradient_compressor.proofs run JOB [JOB...] [--design DIR]
    # a trace as a cycle-by-cycle table
    python -m gradient_compressor.proofs trace FILE.vcd
    python -m gradient_compressor.proofs replay FILE.yw|FILE.vcd
        [--pytest tests/test_properties_cex.py] [--vcd F.vcd]

(From a fresh shell, in a checkout: ``.venv/bin/python -m gradient_compressor.proofs ...``.)
"""

import argparse
import os
import resource
import sys
import time

from .jobs import (PROVE_JOBS, SEED_JOBS, BMC_JOBS, LINE8_L1_JOBS, PROVE_LINES_JOBS, all_jobs, job_by_name,
                   slowest_first)
from .geometry_sweep import DEPTHS, SETS, WAYS, sweep_jobs
from gradient_compressor.provenance import write_results
from .run import run_jobs, print_summary, report_failures, progress, work_dir
from .replay import WitnessError
from .trace_table import COLUMNS, TraceError, read_vcd, print_table
from gradient_compressor.console import (ArgumentParser, UsageError, file_name, positive_integer,
                                         require_extra, table, usage_error)


def power_of_two(text):
    """An argument that must be a power of two (1, 2, 4, ...)."""
    value = positive_integer(text)
    if value & (value - 1):
        raise argparse.ArgumentTypeError(f"must be a power of two, not {value}")
    return value


def _run(command, jobs, parallel, title, out=None):
    """Run the proof jobs ``jobs`` of ``command`` (its name, for a message), once the solvers
    are known to be there; return the exit status."""
    require_extra("prove", command)
    start = time.time()
    print(f"{title}: {len(jobs)} jobs, {parallel} in parallel "
          f"(work dir {os.path.relpath(work_dir())}/)", flush=True)
    results = run_jobs(jobs, parallel=parallel, on_done=progress)
    bad = report_failures(results)
    print()
    print_summary(results)
    wall = time.time() - start
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    summary = (f"{len(results) - len(bad)}/{len(results)} jobs passed; wall time {wall:.0f} s "
               f"({cpu.ru_utime + cpu.ru_stime:.0f} s of CPU)")
    print("\n" + summary)
    if out:
        _write_results(out, title, results, summary)
    return 1 if bad else 0


def _write_results(path, title, results, summary):
    import io
    text = io.StringIO()
    print_summary(results, file=text)
    write_results(path, title, summary, text.getvalue())


def build_parser():
    p = ArgumentParser(prog="python -m gradient_compressor.proofs", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="Exit status: 0 every job passed, 1 a job failed, 2 bad argument "
                              "or input file.")
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("prove", "bmc", "prove-lines", "prove-seed"):
        s = sub.add_parser(name)
        s.add_argument("-j", "--jobs", type=positive_integer, default=2)
        s.add_argument("-k", "--filter", default=None, help="only jobs whose name contains this")
        s.add_argument("--out", type=file_name, default=None, metavar="FILE.md",
                       help="also write the table here, with the command, commit and date")
    s = sub.add_parser("run")
    s.add_argument("names", nargs="+")
    s.add_argument("-j", "--jobs", type=positive_integer, default=2)
    s.add_argument("--design", default=None,
                   help="run against a copy of design/ in this directory (e.g. a mutant)")
    sub.add_parser("list")
    s = sub.add_parser("sweep", help="the geometry sweep, or a slice of it "
                                     "(proofs/geometry_sweep.py)")
    s.add_argument("--sets", type=power_of_two, nargs="+", default=SETS, metavar="N")
    s.add_argument("--ways", type=power_of_two, nargs="+", default=WAYS, metavar="N")
    s.add_argument("--depths", type=positive_integer, nargs="+", default=DEPTHS, metavar="N",
                   help="L2 depths")
    s.add_argument("-j", "--jobs", type=positive_integer, default=2)
    s.add_argument("--list", action="store_true", help="list the jobs, run none")
    s.add_argument("--out", type=file_name, default=None, metavar="FILE.md",
                   help="also write the table here, with the command, commit and date")
    s = sub.add_parser("trace")
    s.add_argument("vcd")
    s = sub.add_parser("replay")
    s.add_argument("witness")
    s.add_argument("--pytest", type=file_name, default=None, metavar="FILE.py",
                   help="write a pytest regression test here (only if the replay shows a "
                        "violation; a test that passes now could never fail)")
    s.add_argument("--force", action="store_true", help="let --pytest replace an existing file")
    s.add_argument("--design", default=None, help="a directory holding a copy of design/")
    s.add_argument("--vcd", type=file_name, default=None, metavar="FILE",
                   help="write the replay as a waveform here (and a .gtkw beside it)")
    return p


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return _command(args)
    except (UsageError, TraceError, WitnessError) as error:
        return usage_error(parser.prog, error)


def _check_design(path):
    if path is not None and not os.path.isdir(os.path.join(path, "design")):
        raise UsageError(f"--design {path}: no design/ folder in it")


def _command(args):
    if args.cmd in ("prove", "bmc", "prove-lines", "prove-seed"):
        jobs = {"prove": PROVE_JOBS, "bmc": BMC_JOBS, "prove-lines": PROVE_LINES_JOBS,
                "prove-seed": SEED_JOBS}[args.cmd]
        jobs = slowest_first(jobs)   # so that both cores stay busy to the end
        if args.filter:
            jobs = [j for j in jobs if args.filter in j.name]
            if not jobs:
                raise UsageError(f"-k {args.filter}: no {args.cmd} job's name contains it")
        return _run(args.cmd, jobs, args.jobs, f"make {args.cmd}", out=args.out)
    if args.cmd == "run":
        import dataclasses
        try:
            jobs = [job_by_name(n) for n in args.names]
        except KeyError as error:
            raise UsageError(error.args[0]) from None
        _check_design(args.design)
        if args.design:
            path = os.path.abspath(args.design)
            jobs = [dataclasses.replace(j, design_path=path, name=j.name + "-on-" +
                                        os.path.basename(path)) for j in jobs]
        return _run("run", jobs, args.jobs, "run")
    if args.cmd == "sweep":
        jobs = sweep_jobs(args.sets, args.ways, args.depths)
        if args.list:
            print("\n".join(f"{j.name}  {j.properties}" for j in jobs))
            return 0
        return _run("sweep", jobs, args.jobs, "geometry sweep", out=args.out)
    if args.cmd == "list":
        rows = [[j.name, j.config, j.mode, j.depth, j.properties] for j in all_jobs()]
        print(table(rows, ["job", "config", "mode", "depth", "properties"],
                    align=["left", "left", "left", "right", "left"]))
        return 0
    if args.cmd == "trace":
        trace = read_vcd(args.vcd)
        if not any(trace.find(key) for _, key, _ in COLUMNS):
            raise TraceError(f"{args.vcd}: none of the trace table's signals is in it "
                             f"(is it a counterexample of a proof job?)")
        print_table(trace)
        return 0
    if args.cmd == "replay":
        from .replay import replay_main
        _check_design(args.design)
        return replay_main(args.witness, pytest_path=args.pytest, design_path=args.design,
                           vcd=args.vcd, force=args.force)


if __name__ == "__main__":
    sys.exit(main())
