"""Generate a job's RTLIL, property map and .sby file (run in a subprocess, so that a mutant
copy of ``design/`` can stand in for the real one: ``proofs.run.module_command``).

    python -m gradient_compressor.proofs.gen JOB.json OUTDIR

A job of the system or of L1 alone (:func:`shares_netlist`) is generated in two parts: its
harness's netlist (:func:`generate_harness`, ``design.il``: the tests of the assertions it
keeps, :func:`properties.base.forms`) and its own choice of them (:func:`generate_job`,
``job_properties.il``: which it asserts, which it assumes for the past cycles). The jobs that
differ only in that choice and drop the same assertions (e.g. ``l1-default-policy-0`` ...
``-6``) share the first, which ``proofs.run`` makes once.
"""

import json
import os
import shutil
import sys

from amaranth.back import rtlil
from amaranth.hdl import Fragment

from gradient_compressor.properties.base import JobProperties, PropertySet, forms
from gradient_compressor.properties.component import ComponentHarness
from gradient_compressor.properties.harness import CONFIGS, FormalHarness
from gradient_compressor.properties.line_harness import LineHarness


def solver(job=None):
    """``PROOF_SOLVER`` if set; else the job's own choice (``Job.solver``); else yices if its
    binary is installed (3-4x faster here on these proofs), else z3."""
    if os.environ.get("PROOF_SOLVER"):
        return os.environ["PROOF_SOLVER"]
    if job and job.get("solver"):
        return job["solver"]
    import shutil
    here = os.path.dirname(sys.executable)
    if os.path.exists(os.path.join(here, "yices-smt2")) or shutil.which("yices-smt2"):
        return "yices"
    return "z3"


#: Yosys' ``prep -top top`` without its ``check`` and ``stat`` passes, which only report: the
#: same netlist, byte for byte, in about a fifth less of the job's Yosys front end
#: (SymbiYosys's own preparation runs ``check`` on the final netlist).
PREP = ["hierarchy -check -top top", "proc", "future", "opt_expr -keepdc", "opt_clean",
        "opt -noff -keepdc", "wreduce -keepdc", "opt_clean", "memory_collect",
        "opt -noff -keepdc -fast", "sort"]


def sby_text(job):
    mode = job["mode"]
    lines = ["[options]", f"mode {mode}", f"depth {job['depth']}"]
    if mode == "cover":
        lines.append("append 0")
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
    lines += ["", "[engines]", engine, "", "[script]", "read_rtlil design.il"]
    own = []
    if shares_netlist(job):
        # The job's choice of assertions (generate_job) goes into the harness before prep, so
        # that prep optimises what the job checks and nothing else, as in a netlist of its own.
        own = ["job_properties.il"]
        lines += ["read_rtlil job_properties.il", f"flatten top/t:{JobProperties.NAME}"]
    # Power-up: the memories start with arbitrary contents (no initial values), in the
    # bounded checks and in the induction's base case alike.
    lines += ["delete t:$meminit_v2"] + PREP
    # Merge the cells that compute the same thing across the hierarchy (prep's opt ran before
    # flatten): e.g. the stochastic rule's multiplier, restated by the harness on the design's
    # own operands, becomes one cell, not a miter the solver would have to prove bit by bit.
    lines += ["flatten", "opt_expr", "opt_merge", "opt_clean"]
    if job.get("memories", "arrays") == "flops":
        # Memories as flip-flops: quicker for the solver on the smallest configurations.
        lines += ["memory_map", "opt -fast"]
    lines += ["", "[files]", "design.il"] + own + [""]
    return "\n".join(lines)


def shares_netlist(job):
    """Whether the job's netlist is its harness's, shared with the jobs of the same harness,
    and its choice of assertions a module of its own (``job_properties.il``): the jobs of
    :class:`FormalHarness` on one lane (the system, L1 alone). A component's or the
    compressor on lines' harness asserts everything, in its own netlist; the line L1 alone's
    jobs keep a netlist of their own too, made for their focus: on
    ``l1-lines2-small-conservation`` the shared netlist came out of ``prep`` with two of the
    harness's muxes a bit wider (3 bits for 2), where every one-lane job's was the same."""
    return not job.get("component") and job.get("lanes", 1) == 1


def manifest(job):
    """The properties of the job's harness, without their tests
    (:meth:`PropertySet.manifest`), where :func:`shares_netlist`; else ``None``. From an
    elaboration of the harness, a tenth of the time of its netlist."""
    kind, arguments = harness_arguments(job)
    if kind != "system":
        return None
    harness = FormalHarness(**arguments)
    Fragment.get(harness, None)
    return harness.props.manifest()


def harness_key(job, manifest):
    """What the job's netlist is made of (a string), given its harness's ``manifest``
    (:func:`manifest`): the jobs with the same key share :func:`generate_harness`'s files."""
    return json.dumps([harness_arguments(job), _forms(job, manifest)], sort_keys=True)


def generate(job, outdir):
    """Write the job's files into ``outdir``: its harness's (:func:`generate_harness`) and its
    own (:func:`generate_job`)."""
    generate_harness(job, outdir, manifest(job))
    generate_job(job, outdir, outdir)


def generate_harness(job, folder, manifest):
    """Write the netlist of the job's harness (``design.il``) and what the jobs made from it
    need (``harness.json``: the property map and, for :func:`shares_netlist`, the properties
    without their tests) into ``folder``; ``manifest``: :func:`manifest`'s."""
    os.makedirs(folder, exist_ok=True)
    kind, arguments = harness_arguments(job)
    if kind == "component":
        harness = ComponentHarness(**arguments)
    elif kind == "lines":
        harness = LineHarness(**arguments)
    elif kind == "own":
        harness = FormalHarness(**arguments)
    else:
        harness = FormalHarness(**arguments, shared=_forms(job, manifest))
    text = rtlil.convert(harness, ports=[])
    with open(os.path.join(folder, "design.il"), "w") as f:
        f.write(text)
    props = {f"{k[0]}:{k[1]}": v for k, v in harness.props.by_src().items()}
    meta = {"props": props, "bound": harness.bound, "config": dict(harness.config),
            "design": os.path.dirname(sys.modules["gradient_compressor.design"].__file__),
            "manifest": harness.props.manifest() if kind == "system" else None}
    with open(os.path.join(folder, "harness.json"), "w") as f:
        json.dump(meta, f)


def _roles(job, manifest):
    """The job's :class:`PropertySet` of ``manifest`` and its assertions' roles."""
    props = PropertySet.from_manifest(manifest)
    return props, props.roles(job["focus"], job.get("assume_others", True))


def _forms(job, manifest):
    """The tests the job's shared netlist holds (:func:`properties.base.forms`); ``None``
    where the job does not share one."""
    if manifest is None:
        return None
    props, roles = _roles(job, manifest)
    return forms(props.assertions(), roles)


def generate_job(job, outdir, folder):
    """Write the job's own files into ``outdir`` from its harness's in ``folder``
    (:func:`generate_harness`): ``design.il`` (a copy, where the two differ),
    ``job_properties.il`` (its choice of assertions, :class:`JobProperties`, where
    :func:`shares_netlist`), ``props.json`` (the property map, configuration, bound, solver)
    and ``job.sby``."""
    os.makedirs(outdir, exist_ok=True)
    if os.path.abspath(folder) != os.path.abspath(outdir):
        shutil.copyfile(os.path.join(folder, "design.il"), os.path.join(outdir, "design.il"))
    with open(os.path.join(folder, "harness.json")) as f:
        meta = json.load(f)
    manifest = meta.pop("manifest")
    if shares_netlist(job):
        props, roles = _roles(job, manifest)
        with open(os.path.join(outdir, "job_properties.il"), "w") as f:
            f.write(JobProperties(props.assertions(), roles).rtlil())
    meta["solver"] = solver(job)
    with open(os.path.join(outdir, "props.json"), "w") as f:
        json.dump(meta, f, indent=1)
    with open(os.path.join(outdir, "job.sby"), "w") as f:
        f.write(sby_text(job))


def _parameters(job):
    """The job's configuration as a dict of its parameters (a harness's key is its JSON)."""
    return dict(job.get("geometry") or CONFIGS[job["config"]])


def harness_arguments(job):
    """The kind of the job's harness ("component", "lines", "system": :class:`FormalHarness`
    shared by jobs, also of L1 alone, or "own": one for the job's focus alone) and its
    constructor's arguments."""
    if job.get("component"):
        return "component", dict(name=job["component"], config=_parameters(job),
                                 covers=job["covers"], reset=job["reset"])
    if job.get("lanes", 1) > 1 and not job.get("alone"):
        return "lines", dict(config=_parameters(job), lanes=job["lanes"],
                             covers=bool(job["covers"]))
    arguments = dict(config=_parameters(job), fairness=job["fairness"],
                     whole_storage=job["whole_storage"], reset=job["reset"],
                     covers=job["covers"], stimulus=job.get("stimulus"),
                     shared_read=job.get("shared_read", False), alone=job.get("alone", False),
                     lanes=job.get("lanes", 1))
    if shares_netlist(job):
        return "system", arguments
    return "own", dict(arguments, focus=job["focus"],
                       assume_others=job.get("assume_others", True))


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        job = json.load(f)
    generate(job, sys.argv[2])
