"""Generate a job's RTLIL, property map and .sby file (run in a subprocess, so that a mutant
copy of ``design/`` can stand in for the real one: ``proofs.run.module_command``).

    python -m gradient_compressor.proofs.gen JOB.json OUTDIR
"""

import json
import os
import sys

from amaranth.back import rtlil

from gradient_compressor.properties.component import ComponentHarness
from gradient_compressor.properties.harness import CONFIGS, FormalHarness
from gradient_compressor.properties.line_harness import LineHarness


#: Yosys' ``prep -top top`` without its ``check`` and ``stat`` passes, which only report: the
#: same netlist, byte for byte, in about a quarter less of the job's Yosys front end
#: (SymbiYosys runs ``check`` on the final netlist itself).
PREP = ["hierarchy -check -top top", "proc", "future", "opt_expr -keepdc", "opt_clean",
        "opt -noff -keepdc", "wreduce -keepdc", "opt_clean", "memory_collect",
        "opt -noff -keepdc -fast", "sort"]


def solver(job=None):
    """``PROOF_SOLVER`` if set; else the job's own choice (``Job.solver``); else yices if its
    binary is installed (3-4x faster here on these proofs), else z3."""
    if os.environ.get("PROOF_SOLVER"):
        return os.environ["PROOF_SOLVER"]
    if job and job.get("solver"):
        return job["solver"]
    from gradient_compressor.console import find_tool
    if find_tool("yices-smt2"):
        return "yices"
    return "z3"


def sby_text(job):
    mode = job["mode"]
    lines = ["[options]", f"mode {mode}", f"depth {job['depth']}"]
    if mode == "cover":
        lines.append("append 0")
    if not job.get("vcd", True) and solver(job) == "yices":
        # No VCD of the solver's trace (seconds to write on the default configuration): a
        # counterexample of yices is replayed with z3 (proofs.run), whose VCD is the one read;
        # the witness (.yw) the replay starts from is still written.
        lines.append("vcd off")
    if job.get("skip"):
        # Steps in which no cover can be reached (e.g. L1's INIT) are not checked: a shorter
        # run of the solver, and the same traces (a cover reached there would go unreported,
        # and the job fail, never pass wrongly).
        lines.append(f"skip {job['skip']}")
    # --nounroll: smtbmc's --unroll (the default with yices) rewrites every step's terms in
    # Python, at a cost that grows with the step: on the deep covers (hundreds of steps)
    # that, not the solver, took most of the time.
    engine = ("smtbmc " + ("" if job.get("unroll", True) else "--nounroll ")
              + ("--stbv " if job.get("stbv") else "") + solver(job))
    lines += ["", "[engines]", engine, "", "[script]", "read_rtlil design.il",
              # Power-up: the memories start with arbitrary contents (no initial values), in
              # the bounded checks and in the induction's base case alike.
              "delete t:$meminit_v2",
              *PREP, "flatten",
              # Merge the cells that compute the same thing across the hierarchy (prep's opt
              # ran before flatten): e.g. the stochastic rule's multiplier, restated by the
              # harness on the design's own operands, becomes one cell, not a miter the solver
              # would have to prove bit by bit.
              "opt_expr", "opt_merge", "opt_clean"]
    if job.get("memories", "arrays") == "flops":
        # Memories as flip-flops: quicker for the solver on the smallest configurations.
        lines += ["memory_map", "opt -fast"]
    lines += ["", "[files]", "design.il", ""]
    return "\n".join(lines)


def generate(job, outdir):
    os.makedirs(outdir, exist_ok=True)
    if job.get("component"):
        harness = ComponentHarness(job["component"], _parameters(job),
                                   covers=job["covers"], reset=job["reset"],
                                   focus=job.get("focus"))
    elif job.get("lanes", 1) > 1 and job["config"] == "lines":
        harness = LineHarness(_parameters(job), job["lanes"], covers=bool(job["covers"]),
                              whole_line=job.get("whole_line", False))
    else:
        harness = _system_harness(job)
    text = rtlil.convert(harness, ports=[])
    with open(os.path.join(outdir, "design.il"), "w") as f:
        f.write(text)
    props = {f"{k[0]}:{k[1]}": v for k, v in harness.props.by_src().items()}
    meta = {"props": props, "bound": harness.bound, "config": dict(harness.config),
            "design": os.path.dirname(sys.modules["gradient_compressor.design"].__file__),
            "solver": solver(job)}
    with open(os.path.join(outdir, "props.json"), "w") as f:
        json.dump(meta, f, indent=1)
    with open(os.path.join(outdir, "job.sby"), "w") as f:
        f.write(sby_text(job))


def _parameters(job):
    return job.get("geometry") or CONFIGS[job["config"]]


def _system_harness(job):
    return FormalHarness(_parameters(job), focus=job["focus"],
                         fairness=job["fairness"], whole_storage=job["whole_storage"],
                         reset=job["reset"], covers=job["covers"],
                         assume_others=job.get("assume_others", True),
                         stimulus=job.get("stimulus"),
                         shared_read=job.get("shared_read", False),
                         alone=job.get("alone", False), lanes=job.get("lanes", 1),
                         whole_line=job.get("whole_line", False))


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        job = json.load(f)
    generate(job, sys.argv[2])
