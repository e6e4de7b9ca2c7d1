"""Bandwidth reports: figures, checks, outputs and the command lines (Amaranth simulator,
small traces)."""

import json
import subprocess
import sys

import numpy as np
import pytest

from gradient_compressor.reports import cli, sweep
from gradient_compressor.reports.metrics import bursts, check_conservation
from gradient_compressor.workloads import Trace, save


@pytest.fixture
def tiny(tmp_path):
    rng = np.random.default_rng(0)
    n = 240
    addr = rng.integers(0, 48, size=n).astype(np.uint32)
    grad = np.clip(rng.standard_t(3, size=n) * 12, -300, 300).astype(np.int16)
    trace = Trace(addr, grad, [100, 180, 240], [40, 40, 30], name="tiny",
                  description="a tiny random trace")
    path = tmp_path / "tiny.npz"
    save(trace, path)
    return path


def run_cli(args, **kw):
    return cli.main(list(map(str, args)), **kw)


def test_report_outputs_and_checks(tiny, tmp_path):
    out = tmp_path / "out"
    status = run_cli([tiny, "--sim", "amaranth", "--sets", 4, "--ways", 2, "--burst-size", 4,
                      "--out", out, "-q"])
    assert status == 0
    for name in ("report.md", "report.json", "summary.png", "tiny-causes.png",
                 "tiny-bursts.png"):
        assert (out / name).stat().st_size > 0
    assert (out / "summary.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = json.loads((out / "report.json").read_text())
    m = report["workloads"][0]
    assert m["conservation"]["ok"] and m["cross_check"]["match"]
    assert m["gradients"] == 240
    assert sum(m["writes_by_cause"].values()) == m["dram_writes"]
    assert m["compression_ratio"] == pytest.approx(240 / m["dram_writes"])
    # Under the default policy, the whole-line rule, a write is an address and a value in the
    # gradients' format: 6 bytes, as a gradient (the seed's policy: 8, a padded 18-bit sum).
    assert m["bytes_in"] == 240 * 6 and m["bytes_out"] == m["dram_writes"] * 6
    assert report["record_format"]["bytes_per_write"] == 6
    assert m["bandwidth_reduction"] == pytest.approx(m["write_reduction"])
    assert m["bandwidth_reduction"] >= 0       # never more bytes than writing through
    assert m["flushes"] == 3 and sum(map(sum, (s.values() for s in m["writes_per_step"]))) \
        == m["dram_writes"]
    assert sum(int(k) * v for k, v in m["bursts"]["histogram"].items()) == m["dram_writes"]
    refs = m["reference_points"]
    assert refs["no_compression"]["dram_writes"] == 240
    assert refs["oracle"]["dram_writes"] <= m["dram_writes"]
    text = (out / "report.md").read_text()
    assert "conservation holds" in text and "after the final flush" in text


def test_tampered_writes_fail_conservation(tiny, tmp_path):
    def tamper(result):
        addr, value = result.writes[0]
        result.writes[0] = (addr, value + 1)
        return result
    out = tmp_path / "bad"
    status = run_cli([tiny, "--sim", "amaranth", "--sets", 4, "--ways", 2, "--out", out, "-q"],
                     result_filter=tamper)
    assert status == 1
    report = json.loads((out / "report.json").read_text())
    m = report["workloads"][0]
    assert not m["conservation"]["ok"] and m["conservation"]["mismatch_count"] == 1
    assert "compression_ratio" not in m
    text = (out / "report.md").read_text()
    assert "CONSERVATION CHECK FAILED" in text and "No ratio is reported" in text


def test_dropped_write_fails_conservation(tiny, tmp_path):
    def drop(result):
        del result.writes[-1]
        return result
    assert run_cli([tiny, "--sim", "amaranth", "--out", tmp_path / "d", "-q", "--no-plots"],
                   result_filter=drop) == 1


def test_check_conservation_function():
    accepted = [(1, 5, 50), (2, -3, 50), (1, 7, 50)]
    assert check_conservation(accepted, [(1, 12), (2, -3)]).ok
    assert check_conservation(accepted, [(1, 5), (2, -3), (1, 7)]).ok
    bad = check_conservation(accepted, [(1, 12), (2, -2)])
    assert not bad.ok and bad.mismatches == [(2, -3, -2)]
    assert "CONSERVATION CHECK FAILED" in bad.message()
    lost = check_conservation(accepted[:2], [(1, 5), (2, -3)],
                              offered=[(1, 5), (2, -3), (1, 7)])
    assert not lost.ok and "3 gradients were offered but 2 were accepted" in lost.message()


def test_bursts():
    assert bursts([]) == []
    assert bursts([3, 4, 5, 9, 11, 12]) == [3, 1, 2]


def test_seed_report_matches_model(tmp_path):
    status = run_cli(["seed", "--sim", "amaranth", "--out", tmp_path, "-q", "--no-plots"])
    assert status == 0
    m = json.loads((tmp_path / "report.json").read_text())["workloads"][0]
    assert m["gradients"] == 1448 and m["cross_check"]["match"]
    assert m["seed_comparison"]["ours"]["writes_before_flush_cause"] == 494
    assert m["dram_writes"] == 494 + m["writes_by_cause"]["FLUSH"]
    phases = m["seed_comparison"]["phases"]
    assert len(phases) == 12 and phases[-1]["name"] == "final flush"
    assert sum(p["gradients"] for p in phases) == 1448
    assert sum(p["writes"] for p in phases) == m["dram_writes"]
    for cause, count in m["writes_by_cause"].items():
        assert sum(p["writes_by_cause"][cause] for p in phases) == count


@pytest.mark.parametrize("policy, words, write_bytes", [
    ("--whole-line", "the whole-line rule", 6), ("--no-whole-line", "the seed policy", 8)])
def test_report_results_file(policy, words, write_bytes, tmp_path):
    """``--results FILE.md``: the report's tables under provenance's header (the command, the
    version, the commit, the date), the figures of report.json, no plots to link."""
    import datetime
    from gradient_compressor.provenance import provenance
    results = tmp_path / "results.md"
    argv = ["seed", "--limit", 400, "--sim", "amaranth", policy, "--out", tmp_path / "out",
            "-q", "--no-plots", "--results", results]
    assert run_cli(argv) == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    m = report["workloads"][0]
    text = results.read_text()
    title, blank, made = text.splitlines()[:3]
    assert title == "# Bandwidth report at 32 x 4: seed" and blank == ""
    assert made.startswith(f"Made by `compressor-report {' '.join(map(str, argv))}` with "
                           f"gradient-compressor {provenance()['version']}")
    if provenance()["commit"]:
        assert f"commit {provenance()['commit'][:12]}" in made
    assert f" on {datetime.date.today().isoformat()}, " in made
    assert words in made and "first 400 gradients" in made
    summary = [line for line in text.splitlines() if line.startswith("| seed ")][0]
    assert [cell.strip() for cell in summary.split("|")[1:5]] == \
        ["seed", "400", "1", str(m["dram_writes"])]
    assert f"6-byte gradients / {write_bytes}-byte writes" in text
    assert "## Checks" in text and "![" not in text
    # without plots, report.md links none either
    assert "![" not in (tmp_path / "out" / "report.md").read_text()


def test_committed_trace_head_rtl_equals_model(tmp_path):
    status = run_cli(["tiny-embed", "--limit", 600, "--sim", "amaranth", "--out", tmp_path,
                      "-q", "--no-plots"])
    assert status == 0
    m = json.loads((tmp_path / "report.json").read_text())["workloads"][0]
    assert m["gradients"] == 600 and m["cross_check"]["match"]


def test_bad_trace_file(tmp_path, capsys):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    assert cli.main([str(bad), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not a .npz trace file" in err and "Traceback" not in err
    assert cli.main(["nonexistent-workload", "--out", str(tmp_path)]) == 2
    assert "unknown workload" in capsys.readouterr().err


def test_console_scripts_help_and_exit_codes(tmp_path):
    for module in ("reports.cli", "reports.sweep"):
        done = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True,
                              text=True)
        assert done.returncode == 0 and "usage:" in done.stdout
    done = subprocess.run([sys.executable, "-m", "gradient_compressor.reports.cli",
                           str(tmp_path / "nope.npz")], capture_output=True, text=True)
    assert done.returncode == 2 and "no such trace file" in done.stderr
    assert "Traceback" not in done.stderr
    done = subprocess.run([sys.executable, "-m", "gradient_compressor.reports.sweep", "seed",
                           "--ways", "3"], capture_output=True, text=True)
    assert done.returncode == 2 and "power of two" in done.stderr


def test_sweep_model_and_rtl_agree(tiny, tmp_path):
    assert sweep.main([str(tiny), "--sets", "2,8", "--ways", "1,2", "--thresholds", "30,40",
                       "--out", str(tmp_path / "m"), "-q"]) == 0
    assert sweep.main([str(tiny), "--sets", "2,8", "--ways", "1,2", "--thresholds", "30,40",
                       "--engine", "rtl", "--sim", "amaranth", "--out", str(tmp_path / "r"),
                       "-q"]) == 0
    model = json.loads((tmp_path / "m" / "sweep.json").read_text())
    rtl = json.loads((tmp_path / "r" / "sweep.json").read_text())
    assert len(model["points"]) == 8
    assert [p["dram_writes"] for p in model["points"]] == [p["dram_writes"] for p in rtl["points"]]
    assert all(p["conservation_ok"] and p["cross_check"] for p in rtl["points"])
    assert (tmp_path / "m" / "sweep.png").stat().st_size > 0
    assert set(model["oracle"]) == {"30", "40"}


def test_falls_back_to_amaranth_with_a_note(monkeypatch, capsys):
    from gradient_compressor.reports import backend
    monkeypatch.setattr(backend, "_compiled", lambda: (None, "not built here"))
    assert backend.resolve_backend(None) == "amaranth"
    assert backend.resolve_backend("compiled") == "amaranth"
    assert "note: using the Amaranth simulator" in capsys.readouterr().err
    assert backend.resolve_backend("amaranth", note=True) == "amaranth"


def test_param_needs_a_synthetic_workload(tmp_path, capsys):
    assert cli.main(["seed", "--param", "steps=2", "--out", str(tmp_path)]) == 2
    assert "--param applies" in capsys.readouterr().err
    assert cli.main(["synthetic-tiled", "--param", "colour=3", "--out", str(tmp_path)]) == 2
    assert "takes no parameter colour" in capsys.readouterr().err


def test_synthetic_params(tmp_path):
    status = cli.main(["synthetic-tiled", "--param", "m=8", "--param", "n=8",
                       "--param", "tile=4,4", "--param", "steps=1", "--sim", "amaranth",
                       "--out", str(tmp_path), "-q", "--no-plots"])
    assert status == 0
    m = json.loads((tmp_path / "report.json").read_text())["workloads"][0]
    assert m["gradients"] == 8 * 8 * 4 and m["cross_check"]["match"]


def test_empty_step_and_empty_trace(tmp_path, capsys):
    gap = tmp_path / "gap.npz"
    save(Trace([1, 2, 3, 1, 2], [5, 6, 70, -5, 3], [3, 3, 5], [50, 50, 50], name="gap"), gap)
    assert cli.main([str(gap), "--sim", "amaranth", "--out", str(tmp_path), "-q"]) == 0
    m = json.loads((tmp_path / "report.json").read_text())["workloads"][0]
    assert m["flushes"] == 3 and [sum(s.values()) for s in m["writes_per_step"]] == [3, 0, 2]
    empty = tmp_path / "empty.npz"
    save(Trace(np.zeros(0, np.uint32), np.zeros(0, np.int16), [0], [50], name="empty"), empty)
    assert cli.main([str(empty), "--out", str(tmp_path)]) == 2
    assert "has no gradients" in capsys.readouterr().err


def test_mode_comparison(tmp_path):
    """``python -m gradient_compressor.reports.mode_comparison``: lossless modes keep DRAM exact
    after every step; the dual threshold's error is what it discarded, and stochastic rounding
    is less biased than drop."""
    from gradient_compressor.reports.mode_comparison import main as modes_main
    assert modes_main(["seed", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "modes.json").read_text())
    rows = {r["mode"]: r for r in data["workloads"][0]["rows"]}
    assert all(r["rtl_check"] for r in rows.values()), "every setting checked on the RTL"
    assert list(rows) == ["exact", "drop", "stochastic", "ema", "ema per step", "bypass"]
    for name in ("exact", "ema", "ema per step", "bypass"):
        assert rows[name]["discards"] == 0 and rows[name]["error_max"] == 0
    assert rows["drop"]["dram_writes"] < rows["exact"]["dram_writes"]
    assert rows["drop"]["discarded_mass"] > 0
    assert abs(rows["stochastic"]["bias"]) < abs(rows["drop"]["bias"])
    assert "| stochastic" in (tmp_path / "modes.md").read_text()


def test_sweep_results_file(tmp_path):
    """``compressor-sweep --results FILE.md``: the sweep's tables under provenance's header,
    the ratios of sweep.json, the default policy named, no plot to link."""
    results = tmp_path / "sweep-seed.md"
    argv = ["seed", "--sets", "8,32", "--ways", "1,2", "--thresholds", "50", "--out",
            str(tmp_path / "out"), "-q", "--results", str(results)]
    assert sweep.main(argv) == 0
    data = json.loads((tmp_path / "out" / "sweep.json").read_text())
    text = results.read_text()
    assert text.startswith("# L1 design-space sweep: seed\n\nMade by `compressor-sweep "
                           + " ".join(argv) + "` with gradient-compressor ")
    assert "the whole-line rule" in text.splitlines()[2] and "![" not in text
    ratio = {(p["sets"], p["ways"]): p["compression_ratio"] for p in data["points"]}
    row = [line for line in text.splitlines() if line.startswith("|") and
           line.split("|")[1].strip() == "32"][0]
    assert [cell.strip() for cell in row.split("|")[2:4]] == \
        [f"{ratio[32, 1]:.2f}x", f"{ratio[32, 2]:.2f}x"]


def test_sweep_small_threshold(tmp_path, capsys):
    """``--small-thresholds``: 0 is the exact sweep; on the seed stimulus a larger dual
    threshold (mode drop) discards more and writes less; the RTL engine gives the same points,
    cross-checked."""
    assert sweep.main(["seed", "--sets", "8,32", "--ways", "2", "--thresholds", "50",
                       "--small-thresholds", "0,10,25", "--out", str(tmp_path), "-q"]) == 0
    data = json.loads((tmp_path / "sweep.json").read_text())
    by = {(p["sets"], p["small_threshold"]): p for p in data["points"]}
    assert len(by) == 6
    for sets in (8, 32):
        assert by[sets, 0]["discards"] == 0
        assert by[sets, 0]["dram_writes"] >= by[sets, 10]["dram_writes"] \
            >= by[sets, 25]["dram_writes"]
        assert by[sets, 25]["discards"] > by[sets, 10]["discards"] > 0
    assert "small_threshold 25 (drop)" in (tmp_path / "sweep.md").read_text()
    model_points = data["points"]
    assert sweep.main(["seed", "--sets", "8,32", "--ways", "2", "--thresholds", "50",
                       "--small-thresholds", "0,10,25", "--engine", "rtl",
                       "--out", str(tmp_path), "-q"]) == 0
    rtl_points = json.loads((tmp_path / "sweep.json").read_text())["points"]
    assert all(p["conservation_ok"] and p["cross_check"] for p in rtl_points)
    for m, r in zip(model_points, rtl_points):
        assert {k: m[k] for k in m} == {k: r[k] for k in m}


def lose_the_first_write(monkeypatch, module):
    """Make ``module.run_rtl`` lose the first DRAM write of every RTL run."""
    real = module.run_rtl

    def losing(*args, **kwargs):
        result = real(*args, **kwargs)
        result.writes = result.writes[1:]
        return result
    monkeypatch.setattr(module, "run_rtl", losing)


def test_mode_comparison_fails_on_rtl_mismatch(tmp_path, monkeypatch, capsys):
    """An RTL run that loses a write makes
    ``python -m gradient_compressor.reports.mode_comparison`` exit 1, naming it."""
    from gradient_compressor.reports import mode_comparison as modes
    lose_the_first_write(monkeypatch, modes)
    assert modes.main(["seed", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "RTL check failed" in err and "seed/exact" in err


def test_report_with_modes(tmp_path):
    """``compressor-report --modes``: the mode comparison in the report, at the report's own
    geometry, every setting checked on the RTL."""
    assert cli.main(["seed", "--modes", "--sets", "8", "--out", str(tmp_path), "-q",
                     "--no-plots"]) == 0
    data = json.loads((tmp_path / "report.json").read_text())
    rows = {r["mode"]: r for r in data["workloads"][0]["modes"]["rows"]}
    assert all(r["rtl_check"] for r in rows.values())
    assert rows["exact"]["dram_writes"] == data["workloads"][0]["dram_writes"]
    assert rows["drop"]["discards"] > 0
    assert "## Run-time modes" in (tmp_path / "report.md").read_text()


def test_markdown_table_escapes_a_bar_in_a_cell():
    # A planted bug's text such as "|g| == small_threshold" must stay one cell of the
    # Markdown table (make mutants prints one), not end it.
    from gradient_compressor.console import table
    text = table([["tiny_bound_inclusive", "a miss with |g| == t"]], ["mutant", "bug"])
    row = text.splitlines()[2]
    assert row.count("|") - row.count("\\|") == 3
    assert "\\|g\\|" in row
    assert "|g|" in table([["x", "|g|"]], ["a", "b"], fmt="plain")
