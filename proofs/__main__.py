"""Formal proofs of the gradient compressor.

    python -m proofs prove [-j 2]        # every k-induction proof, the covers, default BMC
    python -m proofs bmc   [-j 2]        # bounded checks (a few minutes; part of make test)
    python -m proofs list                # the jobs
    python -m proofs run JOB [JOB...] [--design DIR]   # some jobs, by name
    python -m proofs trace FILE.vcd      # a trace as a cycle-by-cycle table
    python -m proofs replay FILE.yw|FILE.vcd [--pytest tests/test_properties_cex.py] [--vcd F.vcd]
"""

import argparse
import sys
import time

from .jobs import PROVE_JOBS, BMC_JOBS, all_jobs, job_by_name
from .run import run_jobs, print_summary, report_failures, progress
from .trace import read_vcd, print_table


def _run(jobs, parallel, title):
    start = time.time()
    print(f"{title}: {len(jobs)} jobs, {parallel} in parallel (work dir proofs/work/)",
          flush=True)
    results = run_jobs(jobs, parallel=parallel, on_done=progress)
    bad = report_failures(results)
    print()
    print_summary(results)
    print(f"\n{len(results) - len(bad)}/{len(results)} jobs passed; "
          f"wall time {time.time() - start:.0f} s")
    return 1 if bad else 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m proofs", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("prove", "bmc"):
        s = sub.add_parser(name)
        s.add_argument("-j", "--jobs", type=int, default=2)
        s.add_argument("-k", "--filter", default=None, help="only jobs whose name contains this")
    s = sub.add_parser("run")
    s.add_argument("names", nargs="+")
    s.add_argument("-j", "--jobs", type=int, default=2)
    s.add_argument("--design", default=None,
                   help="run against a copy of design/ in this directory (e.g. a mutant)")
    sub.add_parser("list")
    s = sub.add_parser("trace")
    s.add_argument("vcd")
    s = sub.add_parser("replay")
    s.add_argument("witness")
    s.add_argument("--pytest", default=None, help="write a pytest regression test here")
    s.add_argument("--design", default=None, help="a directory holding a copy of design/")
    s.add_argument("--vcd", default=None, metavar="FILE",
                   help="write the replay as a waveform here (and a .gtkw beside it)")
    args = p.parse_args(argv)

    if args.cmd in ("prove", "bmc"):
        jobs = PROVE_JOBS if args.cmd == "prove" else BMC_JOBS
        if args.cmd == "prove":   # the slowest first, so that two cores stay busy
            slow = ("mid-conservation-bmc", "small-conservation", "default-control-bmc",
                    "mid-conservation-except-l2-sum")
            jobs = sorted(jobs, key=lambda j: j.name not in slow)
        if args.filter:
            jobs = [j for j in jobs if args.filter in j.name]
        return _run(jobs, args.jobs, f"make {args.cmd}")
    if args.cmd == "run":
        import dataclasses
        import os
        jobs = [job_by_name(n) for n in args.names]
        if args.design:
            path = os.path.abspath(args.design)
            jobs = [dataclasses.replace(j, design_path=path, name=j.name + "-on-" +
                                        os.path.basename(path)) for j in jobs]
        return _run(jobs, args.jobs, "run")
    if args.cmd == "list":
        for j in all_jobs():
            print(f"{j.name:36s} {j.config:8s} {j.mode:6s} depth {j.depth:3d}  {j.properties}")
        return 0
    if args.cmd == "trace":
        print_table(read_vcd(args.vcd))
        return 0
    if args.cmd == "replay":
        from .replay import replay_main
        return replay_main(args.witness, pytest_path=args.pytest, design_path=args.design,
                           vcd=args.vcd)


if __name__ == "__main__":
    sys.exit(main())
