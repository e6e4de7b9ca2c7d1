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


def test_workflow_runs_make_test_caches_and_uploads_failures():
    flow = YAML(typ="safe").load(WORKFLOW.read_text())
    assert {"push", "pull_request"} <= set(flow["on"])
    steps = flow["jobs"]["test"]["steps"]
    runs = [s.get("run", "") for s in steps]
    assert any(r.strip() == "make test" for r in runs)
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
    geometry = flow["jobs"]["geometry"]
    assert geometry["strategy"]["matrix"] == {"sets": SETS, "ways": WAYS}
    runs = " ".join(s.get("run", "") for s in geometry["steps"])
    assert "proofs sweep --sets ${{ matrix.sets }} --ways ${{ matrix.ways }}" in runs
    for job in flow["jobs"].values():
        upload = next(s for s in job["steps"] if s.get("uses", "").startswith(
            "actions/upload-artifact"))
        assert upload["if"] == "failure()" and "*.yw" in upload["with"]["path"]
