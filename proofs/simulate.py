"""Covers reached by simulation: the proof harness, built for the Amaranth simulator
(``FormalHarness(simulate=True)``), run from power-up under a directed stimulus
(``properties/covers.py`` ``STIMULI``), with every assertion and assumption of the harness
checked in every cycle.

    python -m gradient_compressor.proofs.simulate JOB.json OUTDIR     # writes OUTDIR/result.json

Where a solver cannot reach a cover from reset (the large configuration's INIT alone takes
1024 cycles), this shows that the design reaches it: the run is a trace from power-up
(registers at their initial values, memories 0, reset low; the solver's covers start from the
same registers, with any memory contents) on which every input assumption holds, so it lies
within what the proofs speak of, and every assertion holds along it. What it does not show is
that the *free* inputs reach the cover, as the solver's covers from free inputs do.

A job passes when each cover it names is reached within ``depth`` cycles, and no assertion or
assumption fails on the way (the run stops at the first that fails, and writes its trace,
``trace.vcd``).

A job may instead replay a *recorded run* (``witness``: a Yosys witness in
``proofs/witnesses/``, a solver's cover trace from reset): its inputs of step ``k + 1`` drive
the harness in cycle ``k`` (step 0 is the reset cycle, whose end state is power-up's). Where no
directed stimulus has been written for a cover, this keeps the solver's run as a regression
witness: if a change to the design no longer reaches the cover on it, the job fails, and the
solver's cover job (``python -m gradient_compressor.proofs run NAME``, outside ``make prove``)
finds a new run.
"""

import json
import os
import sys
import time

__all__ = ["simulate_job"]


def _harness(job):
    from gradient_compressor.properties.harness import CONFIGS, FormalHarness
    return FormalHarness(CONFIGS[job["config"]], fairness=job["fairness"], covers=True,
                         stimulus=job["stimulus"], simulate=True,
                         driven=bool(job.get("witness")))


def recorded_inputs(harness, path):
    """The harness's free inputs in each cycle of the recorded run ``path`` (a witness, relative
    to the project's root), once the harness is elaborated: ``[[(signal, value)]]``, one list
    per cycle from power-up. A run reset again after its first step is refused (the
    simulation has no reset)."""
    from .replay import read_witness
    from .run import ROOT
    steps = read_witness(os.path.join(ROOT, path))
    if any(step.get("rst") for step in steps[1:]):
        raise ValueError(f"{path}: reset after the first step; not a run from power-up")
    signals = {f"in_{name}": sig for name, sig in harness.in_modes.items()}
    signals.update((name, getattr(harness, name)) for name in harness.INPUTS
                   if name != "rst" and name not in signals)
    return [[(signals[name], value) for name, value in step.items() if name in signals]
            for step in steps[1:]]


def _run(job, vcd=None, stop=None):
    """Simulate ``job``; returns ``(reached, failure, steps)``: ``{cover: first cycle}``, the
    first property that failed as ``(kind, "group/name", cycle)`` or None, cycles run."""
    from amaranth.sim import Simulator
    harness = _harness(job)
    wanted = set(job["covers"])
    reached, failure, steps = {}, None, 0

    async def bench(ctx):
        nonlocal failure, steps
        # The harness makes its property signals as it is elaborated, by now.
        checks = [(p, s) for p, s in harness.sim_props if p.kind != "cover"]
        covers = [(p.name, s) for p, s in harness.sim_props if p.kind == "cover"]
        assert checks and covers, "the harness made no property signals"
        # (Its free inputs too: a recorded run is read now.)
        recorded = recorded_inputs(harness, job["witness"]) if job.get("witness") else None
        last = job["depth"] if recorded is None else min(job["depth"], len(recorded))
        for cycle in range(last if stop is None else stop + 1):
            steps = cycle + 1
            if recorded is not None:
                for signal, value in recorded[cycle]:
                    ctx.set(signal, value)
            for name, sig in covers:
                if name not in reached and ctx.get(sig):
                    reached[name] = cycle
            bad = [p for p, sig in checks if not ctx.get(sig)]
            if bad:
                failure = (bad[0].kind, bad[0].full_name, cycle)
                return
            if wanted <= set(reached) and stop is None:
                return
            await ctx.tick()

    sim = Simulator(harness)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    if vcd:
        with sim.write_vcd(vcd):
            sim.run()
    else:
        sim.run()
    return reached, failure, steps


def simulate_job(job, outdir):
    """Run ``job`` (a :class:`proofs.jobs.Job` as a dict) and write ``result.json`` in
    ``outdir``: ``{"status", "failed", "covers", "steps", "trace"}``."""
    reached, failure, steps = _run(job)
    result = {"status": "PASS", "failed": [], "steps": steps, "trace": None,
              "covers": [["reached", name, cycle] for name, cycle in
                         sorted(reached.items(), key=lambda item: item[1])]}
    missing = [name for name in job["covers"] if name not in reached]
    result["covers"] += [["unreached", name, None] for name in missing]
    if failure or missing:
        result["status"] = "FAIL"
    path = os.path.join(outdir, "result.json")

    def write():
        with open(path, "w") as f:
            json.dump(result, f, indent=1)
    if failure:
        kind, name, cycle = failure
        result["failed"] = [name if kind == "assert" else f"{name} (assumption)"]
        result["detail"] = f"    {kind} {name} failed in cycle {cycle}"
        write()    # first: the waveform's run below may take long, or time out
        # The same run again, as a waveform, up to the failing cycle.
        _run(job, vcd=os.path.join(outdir, "trace.vcd"), stop=cycle)
        result["trace"] = "trace.vcd"
    write()
    return result


def main(argv=None):
    from gradient_compressor.console import ArgumentParser, usage_error
    p = ArgumentParser(prog="python -m gradient_compressor.proofs.simulate",
                       description="Run a proof job of mode sim (proofs/jobs.py) and write "
                                   "OUTDIR/result.json. `python -m gradient_compressor.proofs "
                                   "run JOB` runs it for you.",
                       epilog="Exit status: 0 the job passed, 1 it failed, 2 bad argument.")
    p.add_argument("job", help="the job as JSON (proofs/work/JOB/job.json)")
    p.add_argument("outdir", help="where result.json (and trace.vcd) go")
    args = p.parse_args(argv)
    if not os.path.isdir(args.outdir):
        return usage_error(p.prog, f"{args.outdir}: no such folder")
    try:
        with open(args.job) as f:
            job = json.load(f)
        if job.get("mode") != "sim":
            raise ValueError("not a job of mode sim")
    except (OSError, ValueError, AttributeError) as error:
        return usage_error(p.prog, f"{args.job}: {getattr(error, 'strerror', None) or error}")
    start = time.time()
    result = simulate_job(job, args.outdir)
    print(f"{job['name']}: {result['status']} after {result['steps']} cycles "
          f"({time.time() - start:.1f} s)")
    for kind, name, cycle in result["covers"]:
        print(f"  {kind:9s} {name}" + ("" if cycle is None else f" (cycle {cycle})"))
    for name in result["failed"]:
        print(f"  failed   {name}")
    return 0 if result["status"] == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
