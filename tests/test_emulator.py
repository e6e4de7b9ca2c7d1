"""The emulator (model/emulator.py) against the reference models: write for write, cause for
cause, discard for discard, and the state they expose, on every workload in every mode at 1,
2, 8 and 32 lanes, on the directed scenarios, on random operation streams (small geometries,
max_updates 1 and 2, extreme gradients and thresholds, flushes, mode changes and seeds
mid-stream, an unbounded L1), and through both its interfaces (the models' operations and
NumPy arrays). Also: the same errors as the models, the kernel's build, the command line."""

import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gradient_compressor.design.params import MODES_OFF
from gradient_compressor.model import LANES, LineModel, ReferenceModel, Write
from gradient_compressor.model import emulator as emulator_module
from gradient_compressor.model.emulator import NO_CAUSE, Emulator, LineEmulator, WriteArrays
from gradient_compressor.reports.emulator_check import MODE_NAMES, main, settings as mode_settings
from gradient_compressor.reports.line_costs import pack_lines
from gradient_compressor.workloads import LIVE_WORKLOADS, get_workload, workload_names

from .directed import DIRECTED

SLICE = 1500                 # gradients of each workload
TEST_LANES = (1, 2, 8, 32)


def same_state(model, emulator):
    """Everything else a model exposes equals the emulator's."""
    assert emulator.discards == model.discards
    assert emulator.step_discards == model.step_discards
    assert (emulator.discard_count, emulator.discard_sum) == (model.discard_count,
                                                              model.discard_sum)
    assert (emulator.ema, emulator.ema_latched, emulator.ema_threshold) == \
        (model.ema, model.ema_latched, model.ema_threshold)
    assert emulator.lfsr == model.lfsr
    assert emulator.valid_count == model.valid_count
    assert emulator.held() == model.held()
    assert emulator.modes == model.modes


def pair(lanes, **geometry):
    if lanes == 1:
        return ReferenceModel(**geometry), Emulator(**geometry)
    return LineModel(lanes=lanes, **geometry), LineEmulator(lanes=lanes, **geometry)


def as_arrays(ops, lanes):
    """Beats ``("line", ...)`` and other operations as :meth:`run_beats`' arguments."""
    line, grads, mask, threshold, events = [], [], [], [], []
    for op in ops:
        if op[0] == "line":
            line.append(op[1])
            grads.append(op[2])
            mask.append(op[3])
            threshold.append(op[4])
        else:
            events.append((len(line), op))
    return (np.array(line, np.uint64), np.array(grads, np.int16).reshape(-1, lanes),
            np.array(threshold, np.uint16), np.array(mask, np.uint32), events)


#: The workloads that need no training (the live ones are PyTorch runs: tests/test_training.py).
STORED = [name for name in workload_names() if name not in LIVE_WORKLOADS]


@pytest.fixture(scope="module")
def traces():
    return {name: get_workload(name).head(SLICE) for name in STORED}


# -- every workload, every mode, lanes 1 to 32 ----------------------------------------------

@pytest.mark.parametrize("lanes", TEST_LANES)
@pytest.mark.parametrize("name", STORED)
def test_workloads_in_every_mode(traces, name, lanes):
    trace = traces[name]
    threshold = int(trace.threshold.max())
    all_settings = mode_settings(threshold, int(trace.addr.min()), int(trace.addr.max()))
    assert list(all_settings) == list(MODE_NAMES)
    for mode, prefix in all_settings.items():
        ops = prefix + trace.ops()
        if lanes > 1:
            ops = pack_lines(ops, lanes)
        model, emulator = pair(lanes)
        expected = model.run(ops)
        assert emulator.run(ops) == expected, mode
        same_state(model, emulator)
        # The array path, on a fresh emulator.
        fast = Emulator() if lanes == 1 else LineEmulator(lanes=lanes)
        if lanes == 1:
            arrays = fast.run_trace(trace, prefix=prefix)
            assert arrays.to_writes() == expected, mode
        else:
            line, grads, threshold_, mask, events = as_arrays(ops, lanes)
            arrays = fast.run_beats(line, grads, threshold_, mask=mask, events=events)
            assert arrays.to_line_writes() == expected, mode
            assert arrays.to_writes() == [w for lw in expected for w in lw.writes()]
        same_state(model, fast)


@pytest.mark.parametrize("lanes", TEST_LANES)
@pytest.mark.parametrize("scenario", sorted(DIRECTED))
def test_directed_scenarios_in_every_mode(scenario, lanes):
    base = DIRECTED[scenario]() + [("flush",)]
    for mode, prefix in mode_settings(50, 0, 0x4000).items():
        ops = prefix + base
        if lanes > 1:
            ops = pack_lines(ops, lanes)
        model, emulator = pair(lanes)
        assert emulator.run(ops) == model.run(ops), mode
        same_state(model, emulator)


def test_one_lane_line_emulator_is_the_line_model(traces):
    ops = mode_settings(8192, 0, 4096)["combined"] + traces["tiny-embed"].ops()
    model, emulator = LineModel(lanes=1), LineEmulator(lanes=1)
    assert emulator.run(ops) == model.run(ops)
    same_state(model, emulator)


def test_the_unbounded_oracle(traces):
    for name in ("tiny-embed", "synthetic-embedding"):
        trace = traces[name]
        model, emulator = ReferenceModel(sets=None), Emulator(sets=None)
        assert emulator.run_trace(trace).to_writes() == model.run(trace.ops())
        same_state(model, emulator)


@pytest.mark.parametrize("limit", [-5, 0, 1, 100, 10 ** 9])
def test_run_trace_limit_as_the_traces_ops(traces, limit):
    """``run_trace(limit=)`` runs what ``trace.ops(limit=)`` holds: a negative limit none
    (it ran all but the last gradients, unflushed)."""
    trace = traces["seed"]
    model, emulator = ReferenceModel(), Emulator()
    assert emulator.run_trace(trace, limit=limit).to_writes() == model.run(trace.ops(limit=limit))
    same_state(model, emulator)


# -- random operation streams ---------------------------------------------------------------

def random_modes(rng, grad_width, lines_span):
    """A random subset of the mode settings, values from the ends of their ranges too."""
    top = 2 ** grad_width - 1
    choices = {
        "small_threshold": lambda: rng.choice([0, 1, 2, rng.randint(0, top), top]),
        "stochastic": lambda: rng.randint(0, 1),
        "ema_enable": lambda: rng.randint(0, 1),
        "ema_per_step": lambda: rng.randint(0, 1),
        "ema_shift": lambda: rng.randint(0, 7),
        "ema_scale": lambda: rng.choice([0, 1, 16, rng.randint(0, 255), 255]),
        "ema_min": lambda: rng.choice([0, 1, rng.randint(0, top)]),
        "ema_max": lambda: rng.choice([1, rng.randint(0, top), top]),
    }
    for i in range(2):
        choices[f"bypass__{i}__enable"] = lambda: rng.randint(0, 1)
        choices[f"bypass__{i}__base"] = lambda: rng.randrange(lines_span)
        choices[f"bypass__{i}__limit"] = lambda: rng.randrange(lines_span)
    names = rng.sample(sorted(MODES_OFF), rng.randint(1, 5))
    return {name: choices[name]() for name in names}


def random_ops(rng, lanes, grad_width, n, *, lines=10):
    """A random stream over ``lines`` lines: beats (lines only) and single gradients, extreme
    and tiny gradients and thresholds, flushes, mode changes, seeds after flushes."""
    low, high, top = -2 ** (grad_width - 1), 2 ** (grad_width - 1) - 1, 2 ** grad_width - 1

    def grad():
        return rng.choice([low, high, 0, 1, -1, max(low, min(high, rng.randint(-3, 3))),
                           rng.randint(low, high)])

    def threshold():
        return min(top, rng.choice([0, 1, 2, 4, top, rng.randint(0, top), rng.randint(0, 8)]))

    ops = []
    for _ in range(n):
        r = rng.random()
        if r < 0.05:
            ops.append(("flush",))
            if rng.random() < 0.5:
                ops.append(("seed", rng.choice([0, 1, rng.randrange(2 ** 32), 2 ** 32 - 1])))
        elif r < 0.12:
            ops.append(("modes", random_modes(rng, grad_width, lines * lanes)))
        elif r < 0.5 or lanes == 1:
            ops.append(("grad", rng.randrange(lines * lanes), grad(), threshold()))
        else:
            ops.append(("line", rng.randrange(lines) * lanes, [grad() for _ in range(lanes)],
                        rng.choice([2 ** lanes - 1, rng.randrange(2 ** lanes), 0]),
                        threshold()))
    return ops + [("flush",)]


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), lanes=st.sampled_from(LANES),
       geometry=st.sampled_from([(1, 1), (2, 2), (1, 4), (4, 1), (2, 4), (None, None)]),
       max_updates=st.sampled_from([1, 2, 3, 255]),
       grad_width=st.sampled_from([2, 4, 8, 16, 31]), addr_width=st.sampled_from([12, 40]))
def test_random_streams(seed, lanes, geometry, max_updates, grad_width, addr_width):
    # grad_width 31 and addr_width 40: the outputs' wide types (WriteArrays)
    rng = random.Random(seed)
    sets, ways = geometry
    params = dict(sets=sets, ways=ways, max_updates=max_updates, grad_width=grad_width,
                  addr_width=addr_width)
    model, emulator = pair(lanes, **params)
    ops = random_ops(rng, lanes, grad_width, 120)
    # In pieces, the middle one operation at a time (the emulator's path for one beat or
    # flush), so that the state carries over from call to call as it does in the model.
    first, second = sorted(rng.randrange(len(ops) + 1) for _ in range(2))
    assert emulator.run(ops[:first]) == model.run(ops[:first])
    for op in ops[first:second]:
        assert emulator.run([op]) == model.run([op]), op
    assert emulator.run(ops[second:]) == model.run(ops[second:])
    same_state(model, emulator)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), lanes=st.sampled_from([1, 8]))
def test_random_streams_through_the_arrays(seed, lanes):
    rng = random.Random(seed)
    ops = [op for op in random_ops(rng, lanes, 8, 200) if op[0] != "grad" or lanes == 1]
    model, emulator = pair(lanes, sets=2, ways=2, max_updates=2, grad_width=8)
    expected = model.run(ops)
    if lanes == 1:
        beats = [op for op in ops if op[0] == "grad"]
        events, k = [], 0
        for op in ops:
            if op[0] == "grad":
                k += 1
            else:
                events.append((k, op))
        arrays = emulator.run_gradients([op[1] for op in beats], [op[2] for op in beats],
                                        [op[3] for op in beats], events=events)
        assert arrays.to_writes() == expected
    else:
        line, grads, threshold, mask, events = as_arrays(ops, lanes)
        arrays = emulator.run_beats(line, grads, threshold, mask=mask, events=events)
        assert arrays.to_line_writes() == expected
    same_state(model, emulator)


def test_output_arrays_grow_when_full(monkeypatch):
    """Beats that each write two lines (a direct lane, a victim) and discard six lanes of
    eight overflow the first arrays (a write per beat, a discard per two lanes): the kernel
    stops, they grow, it resumes where it stopped."""
    monkeypatch.setattr(emulator_module, "_SLACK", 1)
    lanes, n = 8, 300
    ops = [("modes", {"small_threshold": 4})]
    for i in range(n):
        ops.append(("line", (i % 6) * lanes, [200, 9] + [1] * 6, 0xff, 100))
        if i % 50 == 49:
            ops.append(("flush",))
    model, emulator = pair(lanes, sets=1, ways=2, whole_line=False)   # the line policy
    expected = model.run(ops)
    assert len(expected) > n and len(model.discards) > n * lanes // 2
    assert emulator.run(ops) == expected
    same_state(model, emulator)


def test_max_updates_one_and_two_at_the_extremes():
    for max_updates in (1, 2):
        for lanes in (1, 4):
            ops = [("grad", a, g, t) for a in range(8) for g in (-128, 127, -1, 1, 0)
                   for t in (0, 1, 128, 255)]
            ops += [("flush",), ("modes", {"small_threshold": 255, "stochastic": 1}),
                    ("seed", 2 ** 32 - 1)]
            ops += [("grad", a, g, 255) for a in range(8) for g in (-128, 127, -1, 0)]
            ops += [("flush",)]
            model, emulator = pair(lanes, sets=2, ways=1, max_updates=max_updates,
                                   grad_width=8)
            assert emulator.run(ops) == model.run(ops)
            same_state(model, emulator)


def test_the_widest_addresses_and_gradients():
    """addr_width 64 and grad_width 32: addresses and bypass windows above 2**63, gradients,
    thresholds and small_threshold at the ends of their ranges (the kernel's 64-bit and
    unsigned arithmetic, the outputs' wide types)."""
    top, low, high = 2 ** 64, -2 ** 31, 2 ** 31 - 1
    for lanes in (1, 4):
        rng = random.Random(lanes)
        ops = [("modes", {"bypass__0__enable": 1, "bypass__0__base": top - 64,
                          "bypass__0__limit": top - 33, "ema_scale": 255, "ema_shift": 0,
                          "ema_max": 2 ** 32 - 1})]
        for step in range(6):
            if step == 2:
                ops.append(("modes", {"small_threshold": 2 ** 31, "stochastic": 1}))
            if step == 4:
                ops.append(("modes", {"ema_enable": 1, "ema_per_step": 1}))
            for _ in range(60):
                addr = rng.choice([top - 1 - rng.randrange(128), 2 ** 63 + rng.randrange(64),
                                   rng.randrange(64)])
                ops.append(("grad", addr, rng.choice([low, high, 0, rng.randint(low, high)]),
                            rng.choice([2 ** 32 - 1, 2 ** 31, 1, 0])))
            ops += [("flush",), ("seed", rng.randrange(2 ** 32))]
        model, emulator = pair(lanes, sets=2, ways=1, grad_width=32, addr_width=64)
        assert emulator.run(ops) == model.run(ops)
        same_state(model, emulator)
    # The array path on the same Python integers (NumPy would make them float64).
    model, emulator = ReferenceModel(addr_width=64), Emulator(addr_width=64)
    addr = [5, 2 ** 63 + 1, top - 1]
    expected = model.run([("grad", a, 7, 5) for a in addr] + [("flush",)])
    assert emulator.run_gradients(addr, [7] * 3, 5, events=[(3, ("flush",))]).to_writes() \
        == expected


# -- the interface ---------------------------------------------------------------------------

def test_write_flush_and_settings_one_at_a_time():
    model, emulator = ReferenceModel(sets=1, ways=1), Emulator(sets=1, ways=1)
    for m in (model, emulator):
        m.set_modes(small_threshold=2)
        m.seed(5)
    assert emulator.write(0, 1, 10) == model.write(0, 1, 10) == []
    assert emulator.write(1, 5, 10) == model.write(1, 5, 10) == []
    assert emulator.write(2, 7, 10) == model.write(2, 7, 10) == [Write(1, 5, "EVICTION")]
    assert emulator.write(3, 70, 10) == model.write(3, 70, 10) == [Write(3, 70, "DIRECT")]
    assert emulator.flush() == model.flush() == [Write(2, 7, "FLUSH")]
    assert emulator.in_bypass_window(0) is model.in_bypass_window(0) is False
    same_state(model, emulator)
    line_model, line_emulator = LineModel(lanes=4, sets=1, ways=1), \
        LineEmulator(lanes=4, sets=1, ways=1)
    for args in [(0, [1, 2, 3, 90], 0b1111, 10), (4, [1, 0, 0, 0], 0b1, 10)]:
        assert line_emulator.write_line(*args) == line_model.write_line(*args)
    assert line_emulator.flush() == line_model.flush()


def test_write_arrays():
    emulator = LineEmulator(lanes=2, sets=1, ways=1, whole_line=False)   # the line policy
    arrays = emulator.run_beats([0, 2], [[1, 9], [3, 0]], 5, mask=[0b11, 0b01])
    assert len(arrays) == 2 and arrays.lanes == 2
    assert arrays.causes[0].tolist() == [NO_CAUSE, 0]          # lane 1 direct
    assert arrays.to_writes() == [Write(1, 9, "DIRECT"), Write(0, 1, "EVICTION")]
    assert len(WriteArrays.empty(2)) == 0
    one = Emulator().run_gradients(np.array([5], np.uint32), np.array([-9], np.int16), 4)
    assert one.value.tolist() == [-9] and one.cause.tolist() == [0]


def same_error(call_model, call_emulator):
    with pytest.raises((ValueError, TypeError)) as expected:
        call_model()
    with pytest.raises(type(expected.value)) as got:
        call_emulator()
    assert str(got.value) == str(expected.value)


@pytest.mark.parametrize("make", [
    lambda cls: cls(sets=3), lambda cls: cls(ways=0), lambda cls: cls(max_updates=0),
    lambda cls: cls(grad_width=1), lambda cls: cls(sets=2, ways=6),
])
def test_bad_parameters_as_the_model(make):
    same_error(lambda: make(ReferenceModel), lambda: make(Emulator))
    same_error(lambda: make(LineModel), lambda: make(LineEmulator))


@pytest.mark.parametrize("lanes", [0, 3, 64])
def test_bad_lanes_as_the_model(lanes):
    same_error(lambda: LineModel(lanes=lanes), lambda: LineEmulator(lanes=lanes))


def test_a_max_updates_beyond_64_bits_is_never_reached_as_in_the_model():
    ops = [("grad", 0, 1, 5), ("grad", 0, 1, 5), ("flush",)]    # it wrapped to 0: MAX_UPDATES
    assert Emulator(max_updates=2 ** 70).run(ops) == ReferenceModel(max_updates=2 ** 70).run(ops)


@pytest.mark.parametrize("sets, ways", [(2 ** 40, 1), (2 ** 64, 1), (1, 2 ** 32)])
def test_an_l1_too_large_for_memory_is_a_memory_error(sets, ways):
    """Not an abort of the process (the kernel's bad_alloc: 2**40 lines), nor a size wrapped
    to the kernel's integers (2**64 sets, 2**32 ways)."""
    with pytest.raises(MemoryError, match="does not fit in memory"):
        LineEmulator(lanes=8, sets=sets, ways=ways)


def test_the_kernels_integer_widths_are_checked():
    with pytest.raises(ValueError, match="grad_width must be at most 32"):
        Emulator(grad_width=33)
    with pytest.raises(ValueError, match="addr_width must be at most 64"):
        LineEmulator(addr_width=65)


@pytest.mark.parametrize("ops", [
    [("grad", 0, 2 ** 15, 5)], [("grad", 0, -2 ** 15 - 1, 5)], [("grad", 0, 1, -1)],
    [("grad", 0, 1, 2 ** 16)], [("grad", 0, 1, 5), ("seed", 3)], [("seed", 2 ** 32)],
    [("modes", {"small_threshold": 2 ** 16})], [("modes", {"nope": 1})], [("bogus",)],
    [("line", 0, [1], 1, 5)],
])
def test_bad_operations_as_the_model(ops):
    same_error(lambda: ReferenceModel().run(ops), lambda: Emulator().run(ops))


def test_a_gradient_that_is_no_integer_is_a_type_error():
    with pytest.raises(TypeError):     # the model's is an accident of its arithmetic
        ReferenceModel().run([("grad", 0, 1.5, 5)])
    with pytest.raises(TypeError, match="gradients must be integers"):
        Emulator().run([("grad", 0, 1.5, 5)])


@pytest.mark.parametrize("op", [
    ("line", 2, [0] * 4, 1, 5), ("line", 0, [0] * 3, 1, 5), ("line", 0, [0, 0, 0, 2 ** 15], 8, 5),
    ("line", 0, [0] * 4, 16, 5), ("line", 0, [0] * 4, 1, 2 ** 16), ("line", -4, [0] * 4, 1, 5),
    ("grad", 2 ** 32, 1, 5), ("grad", 1, 2 ** 15, 5),
])
def test_bad_beats_as_the_line_model(op):
    same_error(lambda: LineModel(lanes=4).run([op]), lambda: LineEmulator(lanes=4).run([op]))


def test_a_gradient_outside_an_unmasked_lane_is_ignored_as_by_the_model():
    op = ("line", 0, [1, 2 ** 40], 0b01, 5)
    assert LineEmulator(lanes=2).run([op]) == LineModel(lanes=2).run([op])


def test_bad_arrays():
    emulator = Emulator(addr_width=8)
    with pytest.raises(ValueError, match="address 256 is outside"):
        emulator.run_gradients(np.array([256]), [1], 5)
    with pytest.raises(ValueError, match="address 256 is outside"):
        emulator.run_gradients(np.array([256], np.uint64), [1], 5)
    with pytest.raises(ValueError, match="gradients of shape"):
        emulator.run_gradients([1, 2], [1], 5)
    with pytest.raises(ValueError, match="gradient 40000 is outside"):
        emulator.run_gradients([1], np.array([40000]), 5)
    with pytest.raises(ValueError, match="event positions"):
        emulator.run_gradients([1], [1], 5, events=[(2, ("flush",))])
    with pytest.raises(ValueError, match="must be of shape"):
        LineEmulator(lanes=2).run_beats([0], [[1, 2, 3]], 5)


@pytest.mark.parametrize("lanes, bad", [
    (1, ("grad", 3, 1, 2 ** 16)), (1, ("grad", 3, 2 ** 15, 5)), (1, ("grad", 3, -2 ** 40, 5)),
    (1, ("seed", 7)),
    (4, ("line", 4, [1, 2, 3, 2 ** 15], 0b1000, 5)), (4, ("line", 2, [0] * 4, 1, 5)),
    (4, ("line", 4, [0] * 4, 16, 5)), (4, ("line", 2 ** 32, [0] * 4, 1, 5)),
    (4, ("grad", 2 ** 32 + 1, 1, 5)), (4, ("line", 4, [0] * 4, 1, 2 ** 16)),
])
def test_an_error_leaves_the_operations_before_it_done(lanes, bad):
    """As in the models, the operations before a bad one are done and it raises there."""
    model, emulator = pair(lanes, sets=1, ways=1)
    ops = [("grad", 0, 1, 5), ("grad", 1, 2, 5), ("flush",), ("grad", 2, 3, 5), bad,
           ("grad", 0, 7, 5)]
    same_error(lambda: model.run(ops), lambda: emulator.run(ops))
    same_state(model, emulator)
    assert emulator.flush() == model.flush()


# -- the kernel's build and the command line -------------------------------------------------

def test_a_missing_compiler_is_one_line(monkeypatch, tmp_path, capsys):
    from gradient_compressor.model import native
    monkeypatch.setattr(native, "CXX", "no-such-compiler-here")
    monkeypatch.setattr(emulator_module, "_kernel", None)
    monkeypatch.setenv("GC_CXXRTL_CACHE", str(tmp_path))
    with pytest.raises(native.CompilerMissing,
                       match=r"no C\+\+ compiler \(no-such-compiler-here\)"):
        Emulator()
    assert main(["--check", "seed"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no C++ compiler" in err


def test_the_kernel_is_built_once_into_the_cache(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(emulator_module, "_kernel", None)
    monkeypatch.setenv("GC_CXXRTL_CACHE", str(tmp_path))
    emulator_module.load_kernel()
    assert "building the emulator's kernel" in capsys.readouterr().err
    assert list(tmp_path.glob("emulator-*/libemulator.so"))
    monkeypatch.setattr(emulator_module, "_kernel", None)
    emulator_module.load_kernel()
    assert capsys.readouterr().err == ""


def test_check_command(capsys):
    assert main(["--check", "seed", "tiny-mlp", "--limit", "400", "--lanes", "1,8",
                 "--modes", "exact,combined"]) == 0
    out = capsys.readouterr().out
    assert out.count("| equal") == 8 and "every run equal" in out


def test_check_command_takes_the_reports_params(capsys):
    """--param as compressor-report reads it: a list of floats too (it was a traceback)."""
    assert main(["--check", "synthetic-one-pass", "--param", "scale_range=0.5,2", "--param",
                 "steps=2", "--limit", "200", "--modes", "exact"]) == 0
    assert "| equal" in capsys.readouterr().out


def test_check_command_fails_on_a_difference(monkeypatch, capsys):
    monkeypatch.setattr(WriteArrays, "to_writes", lambda self: [])
    assert main(["--check", "seed", "--modes", "exact"]) == 1
    assert "DIFFERENT" in capsys.readouterr().out


def test_bench_command(tmp_path, capsys):
    out = tmp_path / "emulator.md"
    assert main(["--bench", "--gradients", "20000", "--repeat", "1", "--modes", "exact,drop",
                 "--model-gradients", "1000", "--out", str(out)]) == 0
    text = out.read_text()
    assert "M gradients/s (CPU)" in text and "Made by `" in text
    assert "|       8 | drop" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    ([], "give --check, --bench or both"),
    (["--bench", "seed"], "workloads are for --check"),
    (["--check", "no-such-workload"], "unknown workload"),
    (["--check", "--lanes", "3"], "lanes must be a power of two"),
    (["--check", "--modes", "fast"], "unknown mode 'fast'"),
    (["--bench", "--gradients", "0"], "must be at least 1"),
    (["--check", "--param", "nokey"], "KEY=VALUE"),
    (["--check", "seed", "--param", "steps=2"], "--param is for the synthetic generators"),
    (["--check", "synthetic-one-pass", "--param", "steps=x"], "must be a number"),
    (["--bench", "--out", "/no/such/folder/e.md"], "--out /no/such/folder/e.md: no such folder"),
])
def test_bad_arguments(argv, message, capsys):
    try:
        status = main(argv)
    except SystemExit as exit:     # argparse's own checks
        status = exit.code
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and message in err


def test_repr_is_the_constructor_call():
    """An emulator's repr is the call that makes it: Emulator takes no lanes, and the policy is
    named only where it is not the default (the whole-line rule)."""
    for emulator in (Emulator(), Emulator(sets=16, whole_line=False), LineEmulator(lanes=8),
                     LineEmulator(lanes=4, ways=2, whole_line=False)):
        text = repr(emulator)
        assert repr(eval(text)) == text
    assert "lanes" not in repr(Emulator()) and "whole_line" not in repr(LineEmulator(lanes=2))
    assert repr(Emulator(whole_line=False)).endswith(", whole_line=False)")
