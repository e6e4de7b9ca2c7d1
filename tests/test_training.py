"""The training write path without PyTorch: quantisation, the stream, beats, DRAM's sums,
the modes, the summary and the command's bad input; with PyTorch (skipped without): the
recorder reproduces the committed traces and the loop trains on DRAM's sums."""

import sys

import numpy as np
import pytest

from gradient_compressor.model import LineModel
from gradient_compressor.model.native import compiler_available
from gradient_compressor.reports.line_costs import line_costs, pack_beats, pack_lines
from gradient_compressor.reports.training import (main, parse_modes, summarise, verdict,
                                                  best_modes, sizing_answer)
from gradient_compressor.reports.write_path import (MODES, CompressedWritePath, SizingPaths,
                                                    dram_sums, mode_operations)
from gradient_compressor.workloads import get_workload
from gradient_compressor.workloads.record import (SCALE_DIV, GradientStream, Quantiser,
                                                  TensorLayout, TraceSink, step_threshold)

needs_compiler = pytest.mark.skipif(not compiler_available(), reason="no C++ compiler")


def _stream(seed, n, span, lanes=1):
    rng = np.random.default_rng(seed)
    addr = rng.integers(0, span, n).astype(np.uint32)
    grad = (rng.standard_t(3, n) * 300).clip(-32768, 32767).astype(np.int16)
    return addr, grad


# -- quantisation and the stream ------------------------------------------------------------

def test_quantiser_fixes_the_scale_at_first_use_and_counts_saturation():
    q = Quantiser()
    first = q.quantise("w", np.array([0.5, -1.0, 0.25]))
    assert first.tolist() == [4096, -8192, 2048]
    assert q.scales["w"] == 1.0 / SCALE_DIV
    later = q.quantise("w", np.array([8.0, -0.001]))       # 8x the first peak: saturates
    assert later.tolist() == [32767, -8]
    assert q.saturated == 1
    assert q.dequantise("w", np.array([8192])) == pytest.approx([1.0])
    assert q.quantise("zero", np.zeros(3)).tolist() == [0, 0, 0]   # no peak: scale 1


def test_layout_aligns_bases_and_merges_neighbouring_ranges():
    layout = TensorLayout([("emb.weight", 100), ("fc.weight", 10), ("fc.bias", 3),
                           ("head.weight", 5)], exact=("emb.", "head."))
    assert [layout.base[n] for n in layout.names] == [0, 128, 192, 256]
    assert layout.total == 320
    assert layout.ranges(("emb.", "head.")) == [(0, 99), (256, 260)]
    assert layout.ranges(("fc.",)) == [(128, 194)]
    assert layout.addresses("fc.bias").tolist() == [192, 193, 194]


class _Recorder:
    """A sink that logs its calls."""

    def __init__(self, sums=None):
        self.calls, self.sums = [], sums

    def start(self, layout, threshold):
        self.calls.append(("start", threshold))

    def micro_batch(self, addr, grad):
        self.calls.append(("micro_batch", addr.tolist(), grad.tolist()))

    def end_step(self):
        self.calls.append(("end_step",))
        return self.sums


def test_stream_holds_the_first_step_back_until_its_threshold_is_known():
    layout = TensorLayout([("a", 4), ("b", 2)])
    sink = _Recorder()
    stream = GradientStream(layout, sink)
    values = np.array([1.0, -2.0, 0.5, 4.0])
    stream.micro_batch([("a", None, values), ("b", np.array([1]), np.array([3.0]))])
    assert sink.calls == []                                  # held: no threshold yet
    stream.micro_batch([("a", np.array([2, 3]), np.array([0.5, 0.5]))])
    assert stream.end_step() is None
    first_step = np.array([2048, -4096, 1024, 8192, 8192, 1024, 1024])
    assert sink.calls[0] == ("start", step_threshold(first_step))
    assert sink.calls[1] == ("micro_batch", [0, 1, 2, 3, 65], [2048, -4096, 1024, 8192, 8192])
    assert sink.calls[2] == ("micro_batch", [2, 3], [1024, 1024])
    assert sink.calls[3] == ("end_step",)
    stream.micro_batch([("b", None, np.array([1.5, 0.0]))])  # later steps go straight on
    assert sink.calls[4] == ("micro_batch", [64, 65], [4096, 0])
    assert stream.gradients == 9


def test_stream_dequantises_dram_sums_per_tensor():
    layout = TensorLayout([("a", 3), ("b", 2)])
    sums = np.zeros(layout.total, np.int64)
    sums[[0, 2, 64, 65]] = [8192, -4096, 81920, 1]
    stream = GradientStream(layout, _Recorder(sums))
    stream.micro_batch([("a", None, np.array([2.0, 0.0, 0.0])),
                        ("b", None, np.array([0.0, 10.0]))])
    dram = stream.end_step()
    assert dram["a"].tolist() == pytest.approx([2.0, 0.0, -1.0])     # scale 2 / 8192
    assert dram["b"].tolist() == pytest.approx([100.0, 10.0 / 8192])


def test_trace_sink_keeps_steps_and_threshold():
    layout = TensorLayout([("a", 4)])
    sink = TraceSink()
    stream = GradientStream(layout, sink)
    for step in range(3):
        stream.micro_batch([("a", None, np.array([1.0, -0.5, 0.25, step + 0.0]))])
        stream.end_step()
    trace = sink.trace(name="t")
    assert trace.step_end.tolist() == [4, 8, 12]
    assert set(trace.threshold.tolist()) == {stream.threshold}
    assert trace.grad[:4].tolist() == [8192, -4096, 2048, 0]


# -- beats, DRAM's sums, the modes ----------------------------------------------------------

@pytest.mark.parametrize("lanes", [1, 2, 8, 32])
def test_pack_beats_equals_pack_lines(lanes):
    rng = np.random.default_rng(lanes)
    for trial in range(60):
        n = int(rng.integers(0, 120))
        addr = rng.integers(0, int(rng.choice([3, 40, 3000])), n).astype(np.uint32)
        if trial % 3 == 0:
            addr = np.sort(addr)
        grad = rng.integers(-9, 9, n).astype(np.int16)
        expected = pack_lines([("grad", int(a), int(g), 5) for a, g in zip(addr, grad)], lanes)
        line, grads, mask = pack_beats(addr, grad, 5, lanes)
        got = [("line", int(l), list(map(int, g)), int(m), 5)
               for l, g, m in zip(line, grads, mask)]
        assert got == expected


@needs_compiler
@pytest.mark.parametrize("lanes", [1, 8])
@pytest.mark.parametrize("whole_line", [True, False], ids=["whole_line", "seed"])
def test_write_path_costs_equal_line_costs(lanes, whole_line):
    trace = get_workload("tiny-embed")
    path = CompressedWritePath(lanes=lanes, whole_line=whole_line)
    path.start(TensorLayout([("all", int(trace.addr.max()) + 1)]), int(trace.threshold[0]))
    for start, end in trace.step_bounds():
        path.micro_batch(trace.addr[start:end], trace.grad[start:end])
        path.end_step()
    costs = line_costs(trace.ops(), lanes=lanes, sets=32, ways=4)
    assert (path.beats, path.dense_bytes) == costs["dense"]
    way = costs["whole_line" if whole_line else "lines"]
    assert (path.line_writes, path.line_bytes) == way
    assert path.saving == pytest.approx(1 - way[1] / costs["dense"][1])


@needs_compiler
@pytest.mark.parametrize("lanes", [1, 8])
def test_exact_mode_dram_holds_the_accepted_sums(lanes):
    layout = TensorLayout([("w", 5000)])
    path = CompressedWritePath("exact", lanes=lanes, sets=16, ways=2, keep_dram=True)
    path.start(layout, 400)
    for step in range(3):
        accepted = np.zeros(layout.total, np.int64)
        for micro_batch in range(4):
            addr, grad = _stream(10 * step + micro_batch, 3000, 5000)
            np.add.at(accepted, addr, grad)
            path.micro_batch(addr, grad)
        assert np.array_equal(path.end_step(), accepted)
    assert path.discards == 0 and path.steps == 3


@needs_compiler
@pytest.mark.parametrize("mode", ["drop", "stochastic"])
def test_lossy_dram_sums_plus_discards_are_the_accepted(mode):
    layout = TensorLayout([("w", 2000)])
    path = CompressedWritePath(mode, lanes=8, sets=16, ways=1, keep_dram=True)
    path.start(layout, 800)
    # The path counts the step's discards and lets the emulator forget them: seen here.
    taken, take = [], path.emulator.take_discard_arrays
    path.emulator.take_discard_arrays = lambda: taken.append(take()) or taken[-1]
    addr, grad = _stream(3, 20000, 2000)
    path.micro_batch(addr, grad)
    dram = path.end_step()
    accepted = np.zeros(layout.total, np.int64)
    np.add.at(accepted, addr, grad)
    (d_addr, d_error), = taken
    assert path.discards == len(d_addr) and len(path.emulator.discard_arrays()[0]) == 0
    lost = np.zeros(layout.total, np.int64)
    np.add.at(lost, d_addr.astype(np.int64), d_error)
    assert len(d_addr) > 100                      # the mode did discard
    assert not np.array_equal(dram, accepted)
    assert np.array_equal(dram + lost, accepted)


def test_dram_sums_adds_each_lane_of_line_writes():
    from gradient_compressor.model.emulator import WriteArrays
    writes = WriteArrays(np.array([0, 4, 0], np.uint32),
                         np.array([[1, 0, 3, 0], [5, 6, 0, 0], [10, 0, 0, 7]], np.int32),
                         np.array([5, 3, 9], np.uint32), np.zeros((3, 4), np.uint8))
    assert dram_sums(writes, 6).tolist() == [11, 0, 3, 7, 5, 6]


@needs_compiler
def test_bypass_keeps_the_exact_tensors_exact_and_drops_elsewhere():
    layout = TensorLayout([("emb", 700), ("mid", 700), ("head", 300)], exact=("emb", "head"))
    ops = mode_operations("drop+bypass", 400, layout)
    windows = ops[-1][1]
    assert (windows["bypass__0__base"], windows["bypass__0__limit"]) == (0, 699)
    assert (windows["bypass__1__base"], windows["bypass__1__limit"]) == (1408, 1707)
    path = CompressedWritePath("drop+bypass", lanes=1, sets=16, ways=1, keep_dram=True)
    path.start(layout, 400)
    addr, grad = _stream(5, 20000, layout.total)
    keep = (addr < 700) | ((addr >= 704) & (addr < 1404)) | ((addr >= 1408) & (addr < 1708))
    addr, grad = addr[keep], grad[keep]
    path.micro_batch(addr, grad)
    dram = path.end_step()
    accepted = np.zeros(layout.total, np.int64)
    np.add.at(accepted, addr, grad)
    exact = np.r_[0:700, 1408:1708]
    assert np.array_equal(dram[exact], accepted[exact])
    assert not np.array_equal(dram[704:1404], accepted[704:1404])


def test_mode_operations_reject_what_the_compressor_cannot_do():
    layout = TensorLayout([("a", 10), ("b", 10), ("c", 10), ("d", 10), ("e", 10)],
                          exact=("a", "c", "e"))
    with pytest.raises(ValueError, match="3 address ranges"):
        mode_operations("drop+bypass", 100, layout)
    with pytest.raises(ValueError, match="no tensor named x"):
        mode_operations("drop+bypass", 100, TensorLayout([("a", 1)], exact=("x",)))
    with pytest.raises(ValueError, match="unknown mode 'fast'"):
        mode_operations("fast", 100, layout)
    assert mode_operations("exact", 100, layout) == []
    assert mode_operations("drop", 100, layout) == [("modes", {"small_threshold": 25,
                                                               "stochastic": 0})]
    assert set(MODES) == {"exact", "drop", "stochastic", "ema", "drop+bypass"}


@needs_compiler
def test_sizing_paths_equal_single_paths():
    from gradient_compressor.reports.sizing import geometries
    grid = geometries(32, 2)
    layout = TensorLayout([("w", 3000)])
    sizing = SizingPaths([1, 8], grid)
    single = CompressedWritePath(lanes=8, sets=32, ways=2)
    for sink in (sizing, single):
        sink.start(layout, 300)
        for step in range(2):
            addr, grad = _stream(step, 5000, 3000)
            sink.micro_batch(np.sort(addr), grad)
            sink.end_step()
    assert sizing.paths[(8, 32, 2)].line_writes == single.line_writes
    assert len(sizing.paths) == 2 * len(grid)


# -- the summary ----------------------------------------------------------------------------

def _runs(model, mode, accuracies, loss=1.0, saving=0.3):
    return [{"model": model, "mode": mode, "seed": i, "accuracy": a, "loss": loss + 0.01 * i,
             "saving": None if mode == "fp32" else saving} for i, a in enumerate(accuracies)]


def test_verdict_says_where_a_mode_hurts():
    fp32 = _runs("m", "fp32", [0.90, 0.93, 0.96])
    # the seeds spread by 0.03, but every seed loses 0.01: measurable, seed by seed
    assert verdict(_runs("m", "drop", [0.89, 0.92, 0.95]), fp32) == "hurts: accuracy -0.010"
    assert verdict(_runs("m", "drop", [0.91, 0.92, 0.96]), fp32) == "no measurable loss"
    # consistent but below the table's resolution
    assert verdict(_runs("m", "drop", [0.8999, 0.9299, 0.9599]), fp32) == "no measurable loss"
    assert "held-out loss +0.500" in verdict(_runs("m", "drop", [0.9, 0.93, 0.96], loss=1.5),
                                             fp32)
    # only the seeds both have are compared
    assert verdict(_runs("m", "drop", [0.89])[:1], fp32) == "one seed: not judged"


def test_summary_compares_with_exact_and_fp32_and_picks_the_best_mode():
    results = (_runs("m", "fp32", [0.90, 0.91, 0.92]) + _runs("m", "exact", [0.9, 0.91, 0.93],
                                                              saving=0.2)
               + _runs("m", "drop", [0.5, 0.55, 0.52], saving=0.8)
               + _runs("m", "stochastic", [0.9, 0.91, 0.92], saving=0.4))
    rows = {r["mode"]: r for r in summarise(results)}
    assert list(rows) == ["fp32", "exact", "drop", "stochastic"]
    assert rows["fp32"]["verdict"] == "reference" and rows["fp32"]["saving"] is None
    assert rows["drop"]["vs_fp32"][0] == pytest.approx((-0.4 - 0.36 - 0.4) / 3)
    assert rows["drop"]["vs_exact"][0] == pytest.approx((-0.4 - 0.36 - 0.41) / 3)
    assert rows["drop"]["per_seed"] == [0.5, 0.55, 0.52]
    assert rows["drop"]["verdict"].startswith("hurts")
    assert best_modes(list(rows.values()))["m"]["mode"] == "stochastic"


def test_sizing_answer_is_the_smallest_that_saves_half():
    grid = [(16, 1), (16, 2), (32, 1), (32, 2)]
    assert sizing_answer({(16, 1): 0.1, (16, 2): 0.6, (32, 1): 0.5, (32, 2): 0.6}, grid) == \
        ((16, 2), 0.6, (16, 2), 0.6)
    assert sizing_answer({g: -0.2 for g in grid}, grid)[:2] == (None, None)


# -- the command's bad input ----------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["nope"], "unknown model nope"),
    (["--modes", "exact,fast"], "unknown mode fast"),
    (["--seeds", "0"], "--seeds: must be at least 1"),
    (["--lanes", "3"], "--lanes"),
    (["--sets", "3"], "--sets"),
    (["--out", "/no/such/folder/x.md"], "--out /no/such/folder/x.md: no such folder"),
    (["--plots", "/no/such/folder"], "--plots /no/such/folder: no such folder"),
    (["--whole-line=yes"], "--whole-line"),
    (["--no-whole-line=1"], "--no-whole-line"),
])
def test_bad_arguments_exit_2_in_one_line(argv, message, capsys):
    try:
        status = main(argv)
    except SystemExit as exit:             # argparse's own checks
        status = exit.code
    assert status == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


# -- the whole-line rule (the default) and the seed's policy --------------------------------

def test_the_whole_line_rule_is_the_default_and_can_be_turned_off():
    from gradient_compressor.reports.training import WHOLE_LINE, build_parser
    parser = build_parser()
    assert WHOLE_LINE is True
    assert parser.parse_args([]).whole_line is True
    assert parser.parse_args(["--whole-line"]).whole_line is True
    assert parser.parse_args(["--no-whole-line"]).whole_line is False
    assert parser.parse_args(["--sizing", "--no-whole-line"]).whole_line is False


def test_write_format_states_the_costs_of_the_rule_run():
    from gradient_compressor.design.params import DEFAULTS
    from gradient_compressor.reports.line_costs import (
        ADDRESS_BYTES, FORMAT, GRADIENT_BYTES, VALUE_BYTES, line_write_bytes, write_bytes,
        write_format, whole_line_bytes)
    whole, seed = write_format(True), write_format(False)
    assert GRADIENT_BYTES * 8 == DEFAULTS["grad_width"]       # a written value: 2 bytes
    assert "whole-line rule" in whole and "seed's policy" not in whole
    assert f"a line write {GRADIENT_BYTES} bytes per lane" in whole
    assert f"{DEFAULTS['grad_width']}-bit" in whole and f"{VALUE_BYTES}-byte value" not in whole
    assert "seed's policy" in seed and f"a masked line write {VALUE_BYTES} bytes" in seed
    for text in (whole, seed):
        assert text.startswith(f"a transfer carries a {ADDRESS_BYTES}-byte address; dense "
                               f"write-through {GRADIENT_BYTES} bytes per lane")
        assert text.endswith("strobes (the mask) are not counted")
        assert text != FORMAT
    assert write_bytes(True) is whole_line_bytes and write_bytes(False) is line_write_bytes
    assert whole_line_bytes(3, 8) == 3 * (ADDRESS_BYTES + GRADIENT_BYTES * 8)


def _fake_train(steps=3, span=3000, per_step=5000):
    """A stand-in for :func:`workloads.record.train` (no PyTorch): a fixed stream of sorted
    random gradients into the sink, step by step."""
    def train(kind, *, steps=steps, micro_batches=1, batch_size=1, seed=0, sink=None,
              on_step=None):
        layout = TensorLayout([("w", span)])
        sink.start(layout, 300)
        for step in range(steps):
            addr, grad = _stream(100 * seed + step, per_step, span)
            sink.micro_batch(np.sort(addr), grad)
            sink.end_step()
            if on_step:
                on_step(step, 1.0)
        return {"losses": [1.0], "evaluation": {"accuracy": 0.5, "loss": 1.0},
                "stream": GradientStream(layout, None)}
    return train


@needs_compiler
def test_run_once_and_run_sizing_count_the_rule_they_run(monkeypatch):
    from gradient_compressor.reports import training
    from gradient_compressor.reports.line_costs import dense_bytes, whole_line_bytes
    from gradient_compressor.reports.sizing import geometries
    from gradient_compressor.workloads import record
    monkeypatch.setattr(record, "train", _fake_train())
    savings = {}
    for whole_line in (True, False):
        expected = CompressedWritePath(lanes=8, sets=16, ways=1, whole_line=whole_line)
        _fake_train()("digits", sink=expected)
        run = training.run_once("digits", "exact", 0, lanes=8, sets=16, ways=1, steps=3,
                                whole_line=whole_line)
        assert run["saving"] == expected.saving
        savings[whole_line] = run["saving"]
    assert training.run_once("digits", "exact", 0, lanes=8, sets=16, ways=1,
                             steps=3)["saving"] == \
        savings[True]                                       # the rule by default
    # the rule's line writes in the gradients' format, the seed's in wider values
    path = CompressedWritePath(lanes=8, sets=16, ways=1, whole_line=True)
    _fake_train()("digits", sink=path)
    assert path.line_bytes == whole_line_bytes(path.line_writes, 8)
    assert path.dense_bytes == dense_bytes(path.beats, 8)
    assert 0 <= savings[True] and savings[False] < savings[True]
    grid = geometries(32, 2)
    for whole_line in (True, False):
        result = training.run_sizing("digits", grid, [1, 8], steps=3, whole_line=whole_line)
        assert (result["lowest"][0] >= 0) is whole_line     # the seed's policy costs more
    assert result["lowest"][1:] in {(n, s, w) for n in (1, 8) for s, w in grid}


@needs_compiler
@pytest.mark.parametrize("sizing", [False, True])
@pytest.mark.parametrize("flag, whole_line", [(None, True), ("--whole-line", True),
                                               ("--no-whole-line", False)])
def test_the_table_states_the_rule_it_ran(monkeypatch, tmp_path, capsys, sizing, flag,
                                          whole_line):
    import types
    from gradient_compressor.reports import training
    from gradient_compressor.reports.line_costs import write_format
    from gradient_compressor.workloads import record
    monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))   # not needed
    monkeypatch.setattr(record, "train", _fake_train(steps=2, per_step=2000))
    if sizing:
        monkeypatch.setattr("gradient_compressor.reports.sizing.geometries",
                            lambda sets, ways: [(16, 1), (32, 1)])
    out = tmp_path / "t.md"
    argv = ["digits", "-q", "--steps", "2", "--out", str(out)] + (["--sizing"] if sizing else
                                                  ["--seeds", "1", "--modes", "exact"])
    assert training.main(argv + ([flag] if flag else [])) == 0
    text = out.read_text()
    assert write_format(whole_line) in text and write_format(not whole_line) not in text
    assert ("least saving of the grid" in text) is sizing


def test_the_best_mode_line_says_when_no_mode_saves():
    from gradient_compressor.reports.training import _best_line
    assert _best_line(None) == "none"
    assert _best_line({"mode": "drop", "saving": 0.765}) == "drop (76.5 % of the bytes saved)"
    # the whole-line rule's floor: as many bytes as dense write-through, not "-0.0 % more"
    assert _best_line({"mode": "exact", "saving": 0.0}) == \
        "none saves bytes (the best, exact, writes as many bytes as dense write-through)"
    assert _best_line({"mode": "exact", "saving": -0.333}) == \
        "none saves bytes (the best, exact, costs 33.3 % more than dense write-through)"


def test_parse_modes_keeps_table_order():
    assert parse_modes("drop,fp32,exact") == ["fp32", "exact", "drop"]


# -- with PyTorch ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["embed", "mlp"])
def test_recorder_reproduces_the_committed_traces(kind):
    pytest.importorskip("torch")
    from gradient_compressor.workloads.record import record
    trace, committed = record(kind=kind), get_workload(f"tiny-{kind}")
    assert np.array_equal(trace.addr, committed.addr)
    assert np.array_equal(trace.grad, committed.grad)
    assert np.array_equal(trace.threshold, committed.threshold)


@needs_compiler
def test_training_in_the_loop_steps_on_dram_sums():
    pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    from gradient_compressor.reports.training import run_once
    fp32 = run_once("digits", "fp32", 0, steps=3)
    exact = run_once("digits", "exact", 0, steps=3)
    drop = run_once("digits", "drop", 0, steps=3, lanes=8, sets=16, ways=1)
    assert exact["gradients"] == 3 * 4 * (64 * 64 + 64 + 64 * 64 + 64 + 64 * 10 + 10)
    # the quantised sums are close to FP32's gradients, not equal
    assert exact["loss"] != fp32["loss"]
    assert abs(exact["loss"] - fp32["loss"]) < 1e-4
    assert abs(drop["loss"] - fp32["loss"]) > abs(exact["loss"] - fp32["loss"])
    assert drop["discards"] > 0 and exact["discards"] == 0


def test_one_seed_is_not_judged():
    assert verdict(_runs("m", "drop", [0.5]), _runs("m", "fp32", [0.9])) == \
        "one seed: not judged"
    assert summarise(_runs("m", "fp32", [0.9]) + _runs("m", "drop", [0.5]))[1]["verdict"] == \
        "one seed: not judged"


def test_without_pytorch_the_command_says_so_in_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)          # import torch fails
    assert main(["digits", "-q"]) == 2
    err = capsys.readouterr().err
    assert "training needs PyTorch" in err and "download.pytorch.org/whl/cpu" in err
    assert err.count("\n") == 1


@needs_compiler
def test_compressor_report_train_writes_the_table_and_plots(monkeypatch, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    from gradient_compressor.reports import cli, training
    monkeypatch.setitem(training.PRESETS, "digits",
                        dict(training.PRESETS["digits"], steps=2))
    assert cli.main(["--train", "train-digits", "--seeds", "2", "--out", str(tmp_path),
                     "-q"]) == 0
    text = (tmp_path / "training.md").read_text()
    assert text.startswith("# Training in the loop") and "2 times per mode" in text
    assert [m for m in training.RUN_MODES if f"| digits  | {m} " in text] == \
        list(training.RUN_MODES)
    assert (tmp_path / "training-digits.png").stat().st_size > 1000


def test_pytorch_is_an_extra_not_a_dependency():
    # tomllib from Python 3.11 on; on 3.10 the same parser as tomli (pytest's dependency there)
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    from pathlib import Path
    project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())
    project = project["project"]
    assert not any(d.startswith(("torch", "scikit-learn")) for d in project["dependencies"])
    assert {d.split(">")[0] for d in project["optional-dependencies"]["record"]} == \
        {"torch", "scikit-learn"}
