"""Mutation check: planted bugs in copies of the RTL; each must make some property fail.

    python -m proofs.mutants [-j 2] [-k NAME]

Each mutant is a textual patch applied to a copy of ``design/`` in a temporary directory (the
patch fails loudly if its target text is not found exactly once, so the check cannot rot
silently when the RTL changes). The copy shadows ``design`` on ``PYTHONPATH`` while the
harness is generated. Every mutant is checked by bounded model checking from reset on the
``small`` configuration: first every safety property, then (if those pass) flush
termination under DRAM fairness. The check fails if some mutant survives both.
"""

import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from properties.harness import CONFIGS, flush_bound
from reports.console import ArgumentParser, positive_integer, table, usage_error
from .jobs import Job
from .run import ROOT, replay_command, run_job, work_dir

__all__ = ["MUTANTS", "apply_mutant"]

#: name -> (description, file, old text, new text)
MUTANTS = {
    "ready_ignores_l2_full": (
        "grad_in.ready ignores backpressure (input taken while s1 waits for a full L2)",
        "l1.py",
        "self.grad_in.ready.eq(~self.flush & (~self.s1_valid | s1_done))",
        "self.grad_in.ready.eq(~self.flush)"),
    "no_forwarding": (
        "read-after-write forward removed (row read from storage only)",
        "l1.py",
        "m.d.comb += row.eq(Mux(self.fwd_valid, self.fwd_row, read.data))",
        "m.d.comb += row.eq(read.data)"),
    "scan_counter_too_narrow": (
        "flush/INIT scan counter one bit too narrow (never reaches the last set)",
        "l1.py",
        "self.scan_set  = Signal(range(sets))",
        "self.scan_set  = Signal(range(max(1, sets // 2)))"),
    "valid_count_not_decremented": (
        "valid_count never decremented",
        "l1.py",
        "self.valid_count.eq(self.valid_count + count_inc - count_dec)",
        "self.valid_count.eq(self.valid_count + count_inc)"),
    "value_truncated_to_l2": (
        "value truncated by one bit on its way to DRAM (L1 -> L2)",
        "compressor.py",
        "writeback.push.p.value.eq(l1.push.p.value),",
        "writeback.push.p.value.eq(l1.push.p.value[:-1]),"),
    "victim_not_replaced": (
        "evicted victim written out but its way neither freed nor replaced",
        "l1.py",
        "                new_entry(row.victim)\n",
        "                pass\n"),
    "idle_ignores_l2": (
        "idle ignores the L2 buffer's level",
        "compressor.py",
        "self.idle.eq(l1.idle & (writeback.level == 0))",
        "self.idle.eq(l1.idle)"),
    "l2_push_ready_when_full": (
        "L2 takes a push even when full",
        "writeback.py",
        "self.push.ready.eq(self.level < self.depth)",
        "self.push.ready.eq(1)"),
    "no_drain_on_flush": (
        "flush does not start an L2 burst (writes below burst_size stay forever)",
        "writeback.py",
        "(self.bursting | (level_next >= self.burst_size) | self.flush)",
        "(self.bursting | (level_next >= self.burst_size))"),
}

CONFIG = "small"
K = 2
SAFETY_DEPTH = 10


def apply_mutant(name, dest):
    """Copy design/ into ``dest/design`` with mutant ``name`` applied."""
    desc, fname, old, new = MUTANTS[name]
    src = os.path.join(ROOT, "design")
    target = os.path.join(dest, "design")
    shutil.copytree(src, target, ignore=shutil.ignore_patterns("__pycache__"))
    path = os.path.join(target, fname)
    with open(path) as f:
        text = f.read()
    n = text.count(old)
    if n != 1:
        raise RuntimeError(f"mutant {name}: target text found {n} times in design/{fname} "
                           f"(expected exactly once): {old!r}")
    with open(path, "w") as f:
        f.write(text.replace(old, new))
    return dest


def jobs_for(name, design_path):
    c = CONFIGS[CONFIG]
    bound = flush_bound(c["sets"], c["ways"], c["fifo_depth"], K)
    return [
        # The contract first (what a user of the compressor would see), ...
        Job(f"mutant-{name}-contract", CONFIG, "bmc", SAFETY_DEPTH, design_path=design_path,
            focus=["stream", "conservation", "idle"], reset="initial", timeout=900),
        # ... then every internal invariant too, ...
        Job(f"mutant-{name}-safety", CONFIG, "bmc", SAFETY_DEPTH, design_path=design_path,
            reset="initial", timeout=900),
        # ... then flush termination under DRAM fairness.
        # Deep enough for INIT (sets cycles), a few cycles to fill L1/L2, then B + 1 cycles.
        Job(f"mutant-{name}-termination", CONFIG, "bmc", bound + c["sets"] + 8, focus=["termination"],
            fairness=K, design_path=design_path, reset="initial", timeout=1200),
    ]


def check_mutant(name, tmp):
    dest = apply_mutant(name, os.path.join(tmp, name))
    start = time.time()
    last = None
    for job in jobs_for(name, dest):
        r = run_job(job)
        last = r
        if r["status"] == "FAIL":
            return {"mutant": name, "caught": True, "job": job.name, "result": r,
                    "property": ", ".join(r["failed"]) or "?", "seconds": time.time() - start}
        if r["status"] not in ("PASS",):
            return {"mutant": name, "caught": False, "job": job.name, "result": r,
                    "property": f"({r['status']})", "seconds": time.time() - start}
    return {"mutant": name, "caught": False, "job": last["job"], "result": last,
            "property": "-", "seconds": time.time() - start}


def main(argv=None):
    p = ArgumentParser(prog="python -m proofs.mutants",
                       epilog="Exit status: 0 every mutant caught, 1 one survived, 2 bad "
                              "argument.")
    p.add_argument("-j", "--jobs", type=positive_integer, default=2)
    p.add_argument("-k", "--filter", default=None, help="only mutants whose name contains this")
    args = p.parse_args(argv)
    names = [n for n in MUTANTS if not args.filter or args.filter in n]
    if not names:
        return usage_error(p.prog, f"-k {args.filter}: no mutant's name contains it")
    start = time.time()
    # Mutant copies are kept (gitignored) so that `python -m proofs replay` can rerun a
    # counterexample on the mutant it came from.
    tmp = os.path.join(work_dir(), "mutant-designs")
    shutil.rmtree(tmp, ignore_errors=True)
    # Patch every copy first, so that a rotten patch fails before any proof runs.
    for n in names:
        apply_mutant(n, os.path.join(tmp, "check", n))
    print(f"mutation check: {len(names)} mutants, config {CONFIG}, BMC depth {SAFETY_DEPTH} "
          f"(contract, then every safety property), then termination (K={K})", flush=True)

    def one(n):
        r = check_mutant(n, tmp)
        print(f"  {'caught  ' if r['caught'] else 'SURVIVED'} {n:30s} {r['seconds']:6.1f}s  "
              f"{r['property']}", flush=True)
        return r

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(one, names))
    print()
    rows = [[r["mutant"], MUTANTS[r["mutant"]][0],
             f"{r['job']}: {r['property']}" if r["caught"] else f"SURVIVED {r['property']}",
             f"{r['seconds']:.0f}"] for r in results]
    print(table(rows, ["mutant", "planted bug", "caught by (job: property)", "seconds"],
                align=["left", "left", "left", "right"]))
    survivors = [r["mutant"] for r in results if not r["caught"]]
    print(f"\n{len(results) - len(survivors)}/{len(results)} mutants caught; "
          f"wall time {time.time() - start:.0f} s")
    for r in results:
        if r["caught"] and r["result"].get("vcd"):
            print(f"  {r['mutant']}: {replay_command(r['result']['vcd'][:-4] + '.yw')}")
    if survivors:
        print("surviving mutants: " + ", ".join(survivors))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
