"""Trace format, generators, the seed stimulus and the committed traces."""

import json
import zipfile

import numpy as np
import pytest

from gradient_compressor.model import ReferenceModel
from gradient_compressor.workloads import (DEFAULT_WORKLOADS, GENERATORS, SEED_REPORTED, Trace,
                                           TraceError, get_workload, load, save, seed_trace,
                                           workload_names)
from gradient_compressor.workloads.seed import seed_phases


def small_trace(**kw):
    args = dict(addr=[1, 2, 1, 3, 1], grad=[5, -7, 60, 0, -3], step_end=[3, 5],
                threshold=[50, 40], name="small", description="a small trace",
                meta={"tensors": [{"name": "t", "base": 0, "size": 4, "scale": 0.5}]})
    args.update(kw)
    return Trace(**args)


def test_round_trip(tmp_path):
    trace = small_trace()
    path = tmp_path / "t.npz"
    save(trace, path)
    back = load(path)
    for name in ("addr", "grad", "step_end", "threshold"):
        assert np.array_equal(getattr(back, name), getattr(trace, name))
        assert getattr(back, name).dtype == getattr(trace, name).dtype
    assert back.name == "small" and back.description == "a small trace"
    assert back.meta["tensors"][0]["scale"] == 0.5
    assert back.meta["version"] == 1 and back.meta["threshold_per"] == "step"
    assert back.ops() == trace.ops() == [
        ("grad", 1, 5, 50), ("grad", 2, -7, 50), ("grad", 1, 60, 50), ("flush",),
        ("grad", 3, 0, 40), ("grad", 1, -3, 40), ("flush",)]


def test_per_gradient_threshold_round_trip(tmp_path):
    trace = small_trace(threshold=[1, 2, 3, 4, 5], meta={"threshold_per": "gradient"})
    save(trace, tmp_path / "g.npz")
    back = load(tmp_path / "g.npz")
    assert back.threshold_per == "gradient"
    assert [op[3] for op in back.ops() if op[0] == "grad"] == [1, 2, 3, 4, 5]


def test_ops_threshold_override_and_limit():
    trace = small_trace()
    assert [op[3] for op in trace.ops(threshold=9) if op[0] == "grad"] == [9] * 5
    assert trace.ops(limit=2) == [("grad", 1, 5, 50), ("grad", 2, -7, 50), ("flush",)]
    head = trace.head(4)
    assert len(head) == 4 and head.step_end.tolist() == [3, 4] and head.steps == 2


def _write(path, **arrays):
    with open(path, "wb") as f:
        np.savez_compressed(f, **arrays)


def _arrays(**changes):
    arrays = dict(addr=np.array([1, 2], np.uint32), grad=np.array([3, 4], np.int16),
                  step_end=np.array([2], np.int64), threshold=np.array([50], np.uint16),
                  meta=np.array(json.dumps({"format": "gradient-trace", "version": 1,
                                            "name": "x", "threshold_per": "step"})))
    arrays.update(changes)
    return {k: v for k, v in arrays.items() if v is not None}


@pytest.mark.parametrize("changes, message", [
    (dict(grad=None), "missing array(s) grad"),
    (dict(grad=np.array([3, 4], np.int32)), "'grad' must be int16"),
    (dict(addr=np.array([1], np.uint32)), "'addr' has 1 entries but 'grad' has 2"),
    (dict(step_end=np.array([1], np.int64)), "last 'step_end' (1) must equal"),
    (dict(step_end=np.array([2, 1, 2], np.int64), threshold=np.array([1, 1, 1], np.uint16)),
     "non-decreasing"),
    (dict(threshold=np.array([1, 2, 3], np.uint16)), "'threshold' has 3 entries"),
    (dict(meta=np.array("{not json")), "'meta' is not valid JSON"),
    (dict(meta=np.array(json.dumps({"format": "other", "version": 1}))), "meta 'format'"),
    (dict(meta=np.array(json.dumps({"format": "gradient-trace", "version": 7}))),
     "version 7 is not supported"),
])
def test_bad_files_name_the_problem(tmp_path, changes, message):
    path = tmp_path / "bad.npz"
    _write(path, **_arrays(**changes))
    with pytest.raises(TraceError) as info:
        load(path)
    assert message in str(info.value) and str(path) in str(info.value)


def test_not_a_trace_file(tmp_path):
    text = tmp_path / "notes.npz"
    text.write_text("hello")
    with pytest.raises(TraceError, match="not a .npz trace file"):
        load(text)
    with pytest.raises(TraceError, match="no such trace file"):
        load(tmp_path / "missing.npz")
    with zipfile.ZipFile(tmp_path / "empty.npz", "w"):
        pass
    with pytest.raises(TraceError, match="missing array"):
        load(tmp_path / "empty.npz")


def test_trace_rejects_out_of_range_values():
    with pytest.raises(TraceError, match="outside int16"):
        small_trace(grad=[1, 2, 3, 4, 40000])
    with pytest.raises(TraceError, match="integers"):
        small_trace(grad=[1.5, 2, 3, 4, 5])


def test_seed_stimulus():
    trace = seed_trace()
    assert len(trace) == SEED_REPORTED["gradients"] == 1448
    assert trace.steps == 1 and trace.threshold.tolist() == [50]
    assert len(seed_phases()) == 11          # five directed tests, six-phase stress mix
    writes = ReferenceModel(sets=32, ways=4, max_updates=255).run(trace.ops())
    before_flush = [w for w in writes if w.cause != "FLUSH"]
    # The seed's own run pushed 494 writes into its L2 (339 direct, 48 accumulated,
    # 107 evictions) and left 10 of them, and everything in L1, unwritten.
    assert len(before_flush) == SEED_REPORTED["pushes_into_l2"]
    for cause in ("DIRECT", "ACCUM_THRESHOLD", "EVICTION", "MAX_UPDATES"):
        assert sum(w.cause == cause for w in writes) == SEED_REPORTED["writes_by_cause"][cause]


@pytest.mark.parametrize("name", list(GENERATORS))
def test_generators_are_deterministic_and_shaped(name):
    small = {"synthetic-one-pass": dict(widths=(8, 6, 4), steps=2),
             "synthetic-microbatch": dict(widths=(8, 6, 4), steps=2, k=3),
             "synthetic-embedding": dict(vocab=32, dim=4, tokens=20, dense=(4, 5), steps=2),
             "synthetic-tiled": dict(m=8, n=8, tile=(4, 4), k_chunks=3, steps=2)}[name]
    a, b = GENERATORS[name](seed=1, **small), GENERATORS[name](seed=1, **small)
    c = GENERATORS[name](seed=2, **small)
    assert np.array_equal(a.addr, b.addr) and np.array_equal(a.grad, b.grad)
    assert not np.array_equal(a.grad, c.grad)
    assert a.steps == 2 and a.step_end[-1] == len(a)
    assert a.addr.dtype == np.uint32 and a.grad.dtype == np.int16
    # Heavy tails: most values small, a few large.
    mag = np.abs(a.grad.astype(int))
    assert np.median(mag) < np.percentile(mag, 99) / 3


def test_address_orders():
    k = 3
    t = GENERATORS["synthetic-microbatch"](widths=(8, 6, 4), steps=2, k=k, seed=0)
    first = t.addr[:t.step_end[0]]
    values, counts = np.unique(first, return_counts=True)
    assert set(counts.tolist()) == {k}          # each parameter updated k times per step
    one = GENERATORS["synthetic-one-pass"](widths=(8, 6, 4), steps=2, seed=0)
    assert len(np.unique(one.addr[:one.step_end[0]])) == one.step_end[0]
    tiled = GENERATORS["synthetic-tiled"](m=8, n=8, tile=(4, 4), k_chunks=3, steps=1, seed=0)
    assert np.array_equal(tiled.addr[:16], tiled.addr[16:32])   # partial sums of one tile
    emb = GENERATORS["synthetic-embedding"](vocab=32, dim=4, tokens=40, dense=(4, 5), steps=1,
                                            seed=0)
    rows = emb.addr[emb.addr < 32 * 4] // 4
    assert len(rows) / 4 > len(np.unique(rows))                  # rows reused in a step


@pytest.mark.parametrize("name", ["tiny-embed", "tiny-mlp"])
def test_committed_traces_load(name):
    trace = get_workload(name)
    assert len(trace) > 10000 and trace.steps >= 2
    assert trace.meta["source"] == "workloads.record"
    assert all(t["scale"] > 0 for t in trace.meta["tensors"])


def test_workload_names():
    names = workload_names()
    assert set(DEFAULT_WORKLOADS) <= set(names)
    with pytest.raises(TraceError, match="unknown workload"):
        get_workload("no-such-workload")


def test_live_workloads_need_pytorch(monkeypatch):
    import sys
    from gradient_compressor.workloads import LIVE_WORKLOADS
    monkeypatch.setitem(sys.modules, "torch", None)          # import torch fails
    assert set(LIVE_WORKLOADS) <= set(workload_names())
    with pytest.raises(TraceError, match="train-lm is recorded live by training and needs "
                                         "torch"):
        get_workload("train-lm")
