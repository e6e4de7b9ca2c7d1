"""The GitHub Actions workflow cannot run here: validate it against GitHub's workflow schema
(vendored in check-jsonschema, so this works offline) and check that it does what it must."""

import subprocess
import sys
from pathlib import Path

from ruamel.yaml import YAML   # check-jsonschema's own YAML reader

WORKFLOW = Path(__file__).resolve().parents[1] / ".github" / "workflows" / "test.yml"
CHECK = [str(Path(sys.executable).parent / "check-jsonschema"),
         "--builtin-schema", "vendor.github-workflows"]


SWEEP = WORKFLOW.parent / "sweep.yml"


def test_workflow_matches_githubs_schema():
    done = subprocess.run(CHECK + [str(WORKFLOW), str(SWEEP)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_schema_check_rejects_a_broken_workflow(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  test:\n    runs-on: ubuntu-24.04\n    steps: 3\n")
    done = subprocess.run(CHECK + [str(broken)], capture_output=True, text=True)
    assert done.returncode != 0


def test_workflow_runs_make_test_and_prove_caches_and_uploads_failures():
    flow = YAML(typ="safe").load(WORKFLOW.read_text())
    assert {"push", "pull_request"} <= set(flow["on"])
    matrix = flow["jobs"]["test"]["strategy"]["matrix"]
    # make test on the lowest Python pyproject.toml claims, and on a newer one; make prove
    # beside it, a job of its own
    assert "3.10" in matrix["python"] and len(matrix["python"]) >= 2
    assert matrix["target"] == ["test"]
    assert {"python": "3.11", "target": "prove"} in matrix["include"]
    assert 'requires-python = ">=3.10"' in (WORKFLOW.parents[2] / "pyproject.toml").read_text()
    steps = flow["jobs"]["test"]["steps"]
    runs = [s.get("run", "") for s in steps]
    assert any(r.strip() == "make ${{ matrix.target }}" for r in runs)
    assert any("g++" in r and "perl" in r for r in runs), "installs the prerequisites"
    cached = {s["with"]["path"] for s in steps if s.get("uses", "").startswith("actions/cache")}
    assert cached == {".venv", "~/.cache/YoWASP", "~/.cache/gradient-compressor"}
    for s in steps:
        if s.get("uses", "").startswith("actions/cache"):
            assert "constraints.txt" in s["with"]["key"], s["with"]["path"]
    venv = next(s for s in steps if s.get("with", {}).get("path") == ".venv")
    assert "hashFiles('pyproject.toml', 'constraints.txt')" in venv["with"]["key"]
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["if"] == "failure()"
    for pattern in ("*.vcd", "*.yw", "*.log", "failure.txt", "*.gtkw"):
        assert pattern in upload["with"]["path"], pattern


def test_sweep_workflow_runs_prove_and_the_geometry_matrix():
    from gradient_compressor.proofs.geometry_sweep import SETS, WAYS
    flow = YAML(typ="safe").load(SWEEP.read_text())
    assert "schedule" in flow["on"] and "workflow_dispatch" in flow["on"]
    prove = [s.get("run", "") for s in flow["jobs"]["prove"]["steps"]]
    assert "make prove" in prove
    assert "make prove-lines" in [s.get("run", "") for s in flow["jobs"]["prove-lines"]["steps"]]
    for name in ("prove", "prove-lines", "geometry"):   # each restores the environment
        cached = {s["with"]["path"] for s in flow["jobs"][name]["steps"]
                  if s.get("uses", "").startswith("actions/cache")}
        assert cached == {".venv", "~/.cache/YoWASP"}, name
    geometry = flow["jobs"]["geometry"]
    assert geometry["strategy"]["matrix"] == {"sets": SETS, "ways": WAYS}
    runs = " ".join(s.get("run", "") for s in geometry["steps"])
    assert "proofs sweep --sets ${{ matrix.sets }} --ways ${{ matrix.ways }}" in runs
    for job in flow["jobs"].values():
        upload = next(s for s in job["steps"] if s.get("uses", "").startswith(
            "actions/upload-artifact"))
        assert upload["if"] == "failure()" and "*.yw" in upload["with"]["path"]


def test_ci_runs_make_test_then_make_prove():
    lines = [line.strip() for line in (WORKFLOW.parents[2] / ".ci" / "run").read_text()
             .splitlines() if line.strip() and not line.startswith("#")]
    assert "set -euo pipefail" in lines
    assert lines.index("make test") < lines.index("make prove")
