"""``compressor-report --lanes N``: the RTL on lines of N lanes, its checks and its figures
against the line model's (reports.line_costs), computed here independently (Amaranth
simulator, a small geometry and a short trace)."""

import json
from collections import Counter

import numpy as np
import pytest

from gradient_compressor.model import CAUSES, LineModel
from gradient_compressor.reports import cli, line_report
from gradient_compressor.reports.line_costs import (line_costs, pack_lines,
                                                    whole_line_bytes)
from gradient_compressor.workloads import Trace, load, save

GEOMETRY = dict(sets=4, ways=2, max_updates=255)


@pytest.fixture(scope="module")
def trace_path(tmp_path_factory):
    """Two steps of gradients to 48 addresses (a few direct, most small, some repeated)."""
    rng = np.random.default_rng(1)
    n = 160
    addr = rng.integers(0, 48, size=n).astype(np.uint32)
    grad = np.clip(rng.standard_t(3, size=n) * 12, -300, 300).astype(np.int16)
    path = tmp_path_factory.mktemp("lines") / "small.npz"
    save(Trace(addr, grad, [90, 160], [40, 30], name="small", description="a small trace"),
         path)
    return path


def report(trace_path, out, *options, **hooks):
    args = [trace_path, "--sim", "amaranth", "--sets", GEOMETRY["sets"], "--ways",
            GEOMETRY["ways"], "--out", out, "-q", "--no-plots", *options]
    status = cli.main(list(map(str, args)), **hooks)
    data = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() \
        else None
    return status, data


@pytest.mark.parametrize("lanes, burst_size", [(2, 1), (8, 1), (8, 4)])
def test_lines_report_is_the_line_models(trace_path, tmp_path, lanes, burst_size):
    """The checks pass, and the figures are the line model's: dense and records exactly; the
    masked line writes exactly where L2 cannot combine (a burst at every write, DRAM always
    ready), in fewer DRAM writes where it does (burst at 4), each of their bytes."""
    status, data = report(trace_path, tmp_path, "--lanes", lanes, "--burst-size", burst_size)
    assert status == 0
    lines = data["workloads"][0]["lines"]
    assert lines["conservation"]["ok"] and lines["cross_check"]["match"]
    ops = load(trace_path).ops()
    expected = line_costs(ops, lanes=lanes, **GEOMETRY)
    costs = lines["costs"]
    assert (costs["dense"]["transfers"], costs["dense"]["bytes"]) == expected["dense"]
    # (The default policy, the whole-line rule: records and line writes of grad_width values.)
    assert (costs["records"]["transfers"], costs["records"]["bytes"]) == \
        expected["whole_line_records"]
    assert lines["beats"] == expected["beats"] and lines["gradients"] == len(load(trace_path))
    assert lines["model_line_writes"] == expected["whole_line"][0]
    transfers = costs["lines"]["transfers"]
    assert costs["lines"]["bytes"] == whole_line_bytes(transfers, lanes)
    if burst_size == 1:
        assert (transfers, costs["lines"]["bytes"]) == expected["whole_line"]
    else:
        assert transfers < expected["whole_line"][0]
    model = LineModel(lanes=lanes, **GEOMETRY).run(pack_lines(ops, lanes))
    causes = Counter(cause for write in model for cause in write.causes if cause)
    assert lines["lane_writes_by_cause"] == {cause: causes.get(cause, 0) for cause in CAUSES}
    assert data["configuration"]["lanes"] == lanes
    text = (tmp_path / "report.md").read_text()
    assert f"## On lines of {lanes} lanes" in text and "masked line writes" in text


def test_run_lines_checks_the_rtl_against_the_rule_it_was_built_with(trace_path):
    """With ``whole_line`` among the parameters, the RTL on lines is built with the whole-line
    rule and checked against the line model's whole-line rule; its DRAM writes cost the
    bytes of values in the gradients' own format (the RTL's width under the rule)."""
    lanes, params = 4, dict(GEOMETRY, fifo_depth=32, burst_size=1, whole_line=True)
    lines = line_report.run_lines(load(trace_path), params, lanes, backend="amaranth",
                                  progress=False)
    assert lines["conservation"]["ok"] and lines["cross_check"]["match"]
    transfers = lines["costs"]["lines"]["transfers"]
    assert lines["costs"]["lines"]["bytes"] == whole_line_bytes(transfers, lanes)
    assert lines["lane_writes_by_cause"]["LINE"] > 0
    beats = pack_lines(load(trace_path).ops(), lanes)
    assert lines["model_line_writes"] == len(
        LineModel(lanes=lanes, whole_line=True, **GEOMETRY).run(beats))


def _tampering(monkeypatch, change):
    """Make the report's RTL runs on lines return ``change(result)``."""
    real = line_report.run_rtl

    def tampered(*args, **kwargs):
        return change(real(*args, **kwargs))
    monkeypatch.setattr(line_report, "run_rtl", tampered)


def test_a_wrong_value_on_lines_fails_conservation(trace_path, tmp_path, monkeypatch):
    def wrong_value(result):
        addr, value = result.writes[3]
        result.writes[3] = (addr, value + 1)
        return result
    _tampering(monkeypatch, wrong_value)
    status, data = report(trace_path, tmp_path, "--lanes", 2)
    assert status == 1
    lines = data["workloads"][0]["lines"]
    assert not lines["conservation"]["ok"] and "costs" not in lines
    assert "on lines, conservation per address: FAILED for small" in \
        (tmp_path / "report.md").read_text()


def test_a_wrong_cause_on_lines_fails_the_line_model_check(trace_path, tmp_path, monkeypatch):
    def wrong_cause(result):
        result.causes[0] = "EVICTION" if result.causes[0] != "EVICTION" else "FLUSH"
        return result
    _tampering(monkeypatch, wrong_cause)
    status, data = report(trace_path, tmp_path, "--lanes", 2)
    assert status == 1
    check = data["workloads"][0]["lines"]["cross_check"]
    assert not check["match"] and not check["causes_match"] and check["runs_match"]
    assert check["first_mismatch"]["what"] == "causes"


def test_writes_moved_to_another_run_fail_the_line_model_check(trace_path, tmp_path,
                                                               monkeypatch):
    """Two lanes' writes swapped between two runs of writes to different lines: every sum per
    address is kept (conservation holds), the order is not."""
    def swapped(result):
        lanes = 2
        first = next(i for i in range(1, len(result.writes)) if
                     result.writes[i][0] // lanes != result.writes[0][0] // lanes)
        writes = result.writes
        writes[0], writes[first] = writes[first], writes[0]
        return result
    _tampering(monkeypatch, swapped)
    status, data = report(trace_path, tmp_path, "--lanes", 2)
    assert status == 1
    lines = data["workloads"][0]["lines"]
    assert lines["conservation"]["ok"] and not lines["cross_check"]["runs_match"]


def test_one_lane_report_is_unchanged(trace_path, tmp_path):
    """``--lanes 1`` is the report without the option: the same figures and keys."""
    status, plain = report(trace_path, tmp_path / "plain")
    assert status == 0
    status, one = report(trace_path, tmp_path / "one", "--lanes", 1)
    assert status == 0

    def comparable(data):
        for m in data["workloads"]:
            m.pop("simulation")
        return {k: v for k, v in data.items() if k != "command"}
    assert comparable(one) == comparable(plain)
    assert "lines" not in one["workloads"][0] and "lanes" not in one["configuration"]


def test_bad_lanes_exit_2_before_any_work(tmp_path, capsys):
    out = tmp_path / "out"
    assert cli.main(["seed", "--lanes", "3", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--lanes must be a power of two" in err
    assert not out.exists()


def test_modes_on_lines_are_checked_against_the_line_model(trace_path, tmp_path):
    """``--lanes 2 --modes``: every mode setting runs packed into beats through the RTL on
    lines and matches the line model (line writes, causes, discards per lane, conservation);
    the dual threshold drops and accounts for lanes; bytes are those of the whole-line rule's
    line writes (values in the gradients' format), never more than dense write-through's."""
    status, data = report(trace_path, tmp_path, "--lanes", "2", "--modes", "--threshold", "40")
    assert status == 0
    modes = data["workloads"][0]["modes"]
    assert (modes["lanes"], modes["beats"]) == (2, data["workloads"][0]["lines"]["beats"])
    rows = {r["mode"]: r for r in modes["rows"]}
    assert all(r["rtl_check"] for r in rows.values()), rows
    exact = rows["exact"]
    assert exact["dram_writes"] == data["workloads"][0]["lines"]["model_line_writes"]
    assert exact["dram_bytes"] == whole_line_bytes(exact["dram_writes"], 2)
    assert all(r["bandwidth_reduction"] >= 0 for r in rows.values())
    assert exact["discards"] == 0 and exact["error_max"] == 0
    assert rows["drop"]["discards"] > 0 and rows["drop"]["dram_writes"] < exact["dram_writes"]
    assert "on 2 lanes" in (tmp_path / "report.md").read_text()


def test_modes_on_lines_fail_when_the_rtl_loses_a_lane(trace_path, tmp_path, monkeypatch):
    """An RTL run on lines that loses a write fails the mode check (exit 1)."""
    from gradient_compressor.reports import mode_comparison as modes
    from tests.test_reports import lose_the_first_write
    lose_the_first_write(monkeypatch, modes)
    status, data = report(trace_path, tmp_path, "--lanes", "2", "--modes", "--threshold", "40")
    assert status == 1
    assert not any(r["rtl_check"] for r in data["workloads"][0]["modes"]["rows"])
