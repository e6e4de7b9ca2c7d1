"""Waveforms from every simulation path: the report's ``--vcd`` (Amaranth and compiled CXXRTL
simulators), each with a GTKWave save file of the trace table's groups beside it. (The proof
runner's and ``proofs replay --vcd``'s are checked in test_properties.py.)"""

import pytest

from gradient_compressor.reports import cli
from gradient_compressor.simulation.cxxrtl import compiler_available, simulate_compiled
from gradient_compressor.simulation.driver import random_ready, simulate
from gradient_compressor.simulation.waves import main as waves_main, vcd_summary, write_gtkw
from gradient_compressor.design import GradientCompressor
from tests.test_cxxrtl import random_ops
from tests.test_properties import assert_readable_waves
from tests.test_reports import tiny  # noqa: F401  (fixture)

SIMULATORS = ["amaranth", pytest.param("compiled", marks=pytest.mark.skipif(
    not compiler_available(), reason="no C++ compiler (g++): no compiled simulator"))]
PARAMS = {"sets": 4, "ways": 2, "fifo_depth": 4, "burst_size": 2}
#: Signals every simulation VCD holds (by the end of their dotted names).
SIGNALS = ["grad_in__valid", "grad_in__payload.grad", "l1.state", "l1.valid_count",
           "writeback.level", "dram_out__payload.value", "idle"]
#: ... and every simulation VCD of the compressor on lines.
LINE_SIGNALS = ["grad_in__valid", "grad_in__payload.grads", "grad_in__payload.mask", "l1.state",
                "writeback.level", "dram_out__payload.values", "dram_out__payload.mask", "idle"]


@pytest.mark.parametrize("sim", SIMULATORS)
def test_report_writes_the_first_cycles_as_a_waveform(tiny, tmp_path, sim):  # noqa: F811
    vcd = tmp_path / "tiny.vcd"
    status = cli.main([str(tiny), "--sim", sim, "--sets", "4", "--ways", "2", "--burst-size",
                       "4", "--out", str(tmp_path / "out"), "--no-plots", "-q",
                       "--vcd", str(vcd), "--vcd-cycles", "60"])
    assert status == 0
    _, last_ns = assert_readable_waves(str(vcd), SIGNALS, min_signals=25)
    # 60 cycles of 10 ns, not the whole run (several hundred cycles).
    assert 590 <= last_ns <= 610, last_ns


@pytest.mark.parametrize("sim", SIMULATORS)
def test_report_on_lines_writes_the_run_on_lines_as_a_waveform(tiny, tmp_path, sim):  # noqa: F811
    vcd = tmp_path / "lines.vcd"
    status = cli.main([str(tiny), "--sim", sim, "--sets", "4", "--ways", "2", "--burst-size",
                       "4", "--out", str(tmp_path / "out"), "--no-plots", "-q", "--lanes", "2",
                       "--vcd", str(vcd), "--vcd-cycles", "40"])
    assert status == 0
    # The beats' lanes and the masked line writes: the compressor of 2 lanes, not of one.
    _, last_ns = assert_readable_waves(str(vcd), LINE_SIGNALS, min_signals=25)
    assert 390 <= last_ns <= 410, last_ns


@pytest.mark.parametrize("sim", SIMULATORS)
def test_writing_a_waveform_changes_no_result(tmp_path, sim):
    ops = random_ops(5, PARAMS, 200)
    if sim == "compiled":
        def run(**kw):
            return simulate_compiled(PARAMS, ops, dram_ready=random_ready(7, 0.4), **kw)
    else:
        def run(**kw):
            return simulate(GradientCompressor(**PARAMS), ops, dram_ready=random_ready(7, 0.4),
                            **kw)
    vcd = tmp_path / "all.vcd"
    plain, waved = run(), run(vcd=str(vcd))
    assert waved == plain
    _, last_ns = assert_readable_waves(str(vcd), SIGNALS, min_signals=25)
    assert last_ns >= 10 * (plain.cycles - 1)     # the whole run without vcd_cycles


def test_report_vcd_needs_one_workload(tmp_path, capsys):
    assert cli.main(["seed", "synthetic-one-pass", "--vcd", str(tmp_path / "w.vcd")]) == 2
    assert "--vcd writes one workload's waveform" in capsys.readouterr().err
    assert cli.main(["seed", "--vcd", str(tmp_path / "no" / "w.vcd")]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_gtkw_for_a_vcd_without_the_signals(tmp_path, capsys):
    vcd = tmp_path / "other.vcd"
    vcd.write_text("$timescale 1 ns $end\n$scope module x $end\n$var wire 1 ! a $end\n"
                   "$upscope $end\n$enddefinitions $end\n#0\n0!\n#10\n1!\n")
    path, count = write_gtkw(vcd)
    assert count == 0 and path.exists()
    assert vcd_summary(vcd) == ({"x.a": ("x.a", 1)}, 10)
    not_a_vcd = tmp_path / "text.vcd"
    not_a_vcd.write_text("hello\n")
    assert waves_main([str(not_a_vcd)]) == 2
    assert "text.vcd" in capsys.readouterr().err
