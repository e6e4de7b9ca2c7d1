"""The whole-line rule with one lane (``ReferenceModel(whole_line=True)``): it is the line
model's one-lane case and the emulator follows it, write for write; every value written fits
``grad_width`` bits, a gradient causes at most one write, writes sent plus entries held never
exceed the gradients taken, and every address gets what was accepted, in every mode; on the
seed's mix of workloads it writes no more than the seed's policy."""

import random
from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st

from gradient_compressor.model import LineModel, ReferenceModel, Write
from gradient_compressor.model.native import compiler_available

from .directed import DIRECTED

#: A small geometry (2 sets x 2 ways, 8-bit gradients: sums leave grad_width bits often), its
#: corner cases, the unbounded L1, and the default geometry (32 x 4, 16-bit gradients).
SMALL = dict(sets=2, ways=2, max_updates=3, grad_width=8, addr_width=8)
GEOMETRIES = {
    "small": SMALL,
    "one entry, max_updates 1": dict(SMALL, sets=1, ways=1, max_updates=1),
    "direct-mapped": dict(SMALL, sets=4, ways=1, max_updates=2),
    "unbounded": dict(SMALL, sets=None, max_updates=4),
    "default": dict(sets=32, ways=4),
}


def modes_for(grad_width):
    """One setting of each run-time mode, ``{name: settings}``, for ``grad_width``-bit
    gradients (the stochastic level once beyond ``grad_width`` bits, where the rule clamps
    it)."""
    top = 2 ** (grad_width - 1)
    return {
        "exact": {},
        "drop": dict(small_threshold=3),
        "stochastic": dict(small_threshold=4, stochastic=1),
        "stochastic, level clamped": dict(small_threshold=top + 9, stochastic=1),
        "ema": dict(ema_enable=1, ema_shift=2, ema_scale=24, ema_min=2, ema_max=top - 1),
        "ema per step": dict(ema_enable=1, ema_per_step=1, ema_shift=1, ema_scale=16,
                             ema_min=2, ema_max=top // 2),
        "bypass": dict(bypass__0__enable=1, bypass__0__base=8, bypass__0__limit=13,
                       small_threshold=2),
    }


MODE_NAMES = list(modes_for(8))


def gradients(seed, geometry, n, modes):
    """A random run of ``n`` operations on ``geometry``: gradients (small, medium, near the
    ends of the range, any) to three times as many addresses as L1 holds, half of them to as
    many as it holds (so that they hit), thresholds from 5 to the largest (above every
    gradient: sums grow until they would leave ``grad_width`` bits), a flush about every
    ``addresses / 2`` gradients (at most 33), now and then followed by a new LFSR seed;
    ``modes`` set first."""
    rng = random.Random(seed)
    width = geometry.get("grad_width", 16)
    top = 2 ** (width - 1)
    entries = 4 if geometry.get("sets") is None else geometry["sets"] * geometry["ways"]
    addresses = min(3 * entries + 6, 2 ** geometry.get("addr_width", 32))
    thresholds = [5, 20, 60, top // 2, top + top // 2, 2 * top - 1]
    ops = [("modes", modes)] if modes else []
    for _ in range(n):
        if rng.random() < min(0.03, 2 / addresses):
            ops.append(("flush",))
            if rng.random() < 0.3:
                ops.append(("seed", rng.randrange(2 ** 32)))
            continue
        grad = rng.choice([rng.randint(-6, 6), rng.randint(-top // 4, top // 4),
                           rng.choice([-1, 1]) * (top - 1 - rng.randrange(8)),
                           rng.randint(-top, top - 1)])
        addr = rng.randrange(entries if rng.random() < 0.5 else addresses)
        ops.append(("grad", addr, grad, rng.choice(thresholds)))
    return ops + [("flush",)]


def model(geometry, whole_line=True):
    return ReferenceModel(whole_line=whole_line, **geometry)


def assert_same_state(a, b):
    """Two runs of the policy left the same state: discards, step totals, EMA, LFSR, L1."""
    assert a.discards == b.discards and a.step_discards == b.step_discards
    assert (a.discard_count, a.discard_sum) == (b.discard_count, b.discard_sum)
    assert (a.ema, a.ema_latched, a.lfsr) == (b.ema, b.ema_latched, b.lfsr)
    assert a.held() == b.held() and a.valid_count == b.valid_count


def assert_is_the_line_models_one_lane_case(geometry, ops):
    """``ReferenceModel(whole_line=True)`` and ``LineModel(lanes=1, whole_line=True)`` make
    the same writes, operation by operation, and end in the same state."""
    one, line = model(geometry), LineModel(lanes=1, whole_line=True, **geometry)
    for op in ops:
        assert one.run([op]) == [w for lw in line.run([op]) for w in lw.writes()], op
        assert one.held() == line.held(), op
    assert_same_state(one, line)


@pytest.mark.parametrize("mode", MODE_NAMES)
@pytest.mark.parametrize("geometry", list(GEOMETRIES))
def test_it_is_the_line_models_one_lane_case(geometry, mode):
    params = GEOMETRIES[geometry]
    ops = gradients(1, params, 700, modes_for(params.get("grad_width", 16))[mode])
    assert_is_the_line_models_one_lane_case(params, ops)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), geometry=st.sampled_from(list(GEOMETRIES)),
       mode=st.sampled_from(MODE_NAMES), max_updates=st.sampled_from([1, 2, 5, 255]))
def test_it_is_the_line_models_one_lane_case_on_any_run(seed, geometry, mode, max_updates):
    params = dict(GEOMETRIES[geometry], max_updates=max_updates)
    ops = gradients(seed, params, 150, modes_for(params.get("grad_width", 16))[mode])
    assert_is_the_line_models_one_lane_case(params, ops)


def run_checked(reference, ops):
    """Run ``ops`` on ``reference`` checking, operation by operation, that a gradient causes
    at most one write, that every value written fits ``grad_width`` bits, and that writes sent
    plus entries held never exceed the gradients taken; returns the writes."""
    out, taken = [], 0
    for op in ops:
        writes = reference.run([op])
        if op[0] == "grad":
            taken += 1
            assert len(writes) <= 1, (op, writes)
        for write in writes:
            assert reference.grad_min <= write.value <= reference.grad_max, (op, write)
        out += writes
        assert len(out) + reference.valid_count <= taken, op
    return out


def assert_every_address_gets_what_was_accepted(reference, writes, ops):
    """Per address, the values written plus the discards' errors are the gradients accepted,
    and nothing is held (``ops`` end in a flush)."""
    balance = Counter()
    for op in ops:
        if op[0] == "grad":
            balance[op[1]] += op[2]
    for write in writes:
        balance[write.addr] -= write.value
    for discard in reference.discards:
        balance[discard.addr] -= discard.error
    assert not +balance and not -balance
    assert reference.valid_count == 0


@pytest.mark.parametrize("mode", MODE_NAMES)
@pytest.mark.parametrize("geometry", list(GEOMETRIES))
def test_the_bound_the_width_and_conservation_in_every_mode(geometry, mode):
    params = GEOMETRIES[geometry]
    ops = gradients(2, params, 700, modes_for(params.get("grad_width", 16))[mode])
    reference = model(params)
    assert_every_address_gets_what_was_accepted(reference, run_checked(reference, ops), ops)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), geometry=st.sampled_from(list(GEOMETRIES)),
       mode=st.sampled_from(MODE_NAMES), max_updates=st.sampled_from([1, 2, 5]))
def test_the_bound_holds_for_any_run(seed, geometry, mode, max_updates):
    params = dict(GEOMETRIES[geometry], max_updates=max_updates)
    ops = gradients(seed, params, 150, modes_for(params.get("grad_width", 16))[mode])
    reference = model(params)
    assert_every_address_gets_what_was_accepted(reference, run_checked(reference, ops), ops)


@pytest.mark.skipif(not compiler_available(), reason="no C++ compiler for the emulator")
@pytest.mark.parametrize("mode", MODE_NAMES)
@pytest.mark.parametrize("geometry", list(GEOMETRIES))
def test_the_emulator_follows_the_rule(geometry, mode):
    """The emulator with ``whole_line=True`` makes the model's writes, discards, step totals
    and state: on the operations at once (the array path) and one at a time."""
    from gradient_compressor.model.emulator import Emulator
    params = GEOMETRIES[geometry]
    ops = gradients(3, params, 900, modes_for(params.get("grad_width", 16))[mode])
    reference, emulator = model(params), Emulator(whole_line=True, **params)
    assert emulator.run(ops) == reference.run(ops)
    assert_same_state(emulator, reference)
    reference, emulator = model(params), Emulator(whole_line=True, **params)
    for op in ops[:300]:
        assert emulator.run([op]) == reference.run([op]), op
    assert_same_state(emulator, reference)


def seed_mix():
    """The seed's mix of workloads, ``{name: operations}``: the seed's testbench stream
    (``seed``), the directed scenarios that reach every mechanism, and the default
    workloads, each ending in a flush."""
    from gradient_compressor.workloads import DEFAULT_WORKLOADS, get_workload
    mix = {name: get_workload(name).ops() for name in DEFAULT_WORKLOADS}
    mix.update({f"directed {name}": scenario() + [("flush",)]
                for name, scenario in DIRECTED.items()})
    return mix


@pytest.mark.parametrize("name, ops", list(seed_mix().items()))
def test_no_more_writes_than_the_seeds_policy_and_nothing_lost(name, ops):
    """In exact mode at the default geometry, the rule writes no more records than the seed's
    policy, and every address receives the same total."""
    seed, rule = model({}, whole_line=False).run(ops), model({}).run(ops)
    assert len(rule) <= len(seed)
    total = Counter()
    for write in seed:
        total[write.addr] += write.value
    for write in rule:
        total[write.addr] -= write.value
    assert not +total and not -total


def test_a_direct_gradient_carries_the_held_sum():
    reference = ReferenceModel(sets=2, ways=1, whole_line=True)
    assert reference.write(4, 30, 50) == []
    assert reference.write(4, 70, 50) == [Write(4, 100, "DIRECT")]   # the sum rides along
    assert reference.valid_count == 0
    seed = ReferenceModel(sets=2, ways=1, whole_line=False)
    seed.write(4, 30, 50)
    assert seed.write(4, 70, 50) == [Write(4, 70, "DIRECT")]         # the sum waits
    assert seed.held() == {4: 30}


def test_a_value_that_would_leave_grad_width_bits_is_not_written():
    # grad_width 8: values in [-128, 127]; threshold 200 is above every gradient
    reference = ReferenceModel(sets=1, ways=1, max_updates=9, grad_width=8, addr_width=8,
                               whole_line=True)
    assert reference.write(3, 100, 200) == [] and reference.write(3, 20, 200) == []
    # 120 + 30 would not fit: the held sum is written, the gradient held, as updated once
    assert reference.write(3, 30, 200) == [Write(3, 120, "ACCUM_THRESHOLD")]
    assert reference.held() == {3: 30}
    reference.write(3, 90, 200)                                        # holds 120
    # a direct gradient whose held sum would not fit beside it goes alone; the sum stays
    assert reference.write(3, 100, 100) == [Write(3, 100, "DIRECT")]
    assert reference.held() == {3: 120}
    assert reference.flush() == [Write(3, 120, "FLUSH")]


def test_the_stochastic_level_fits_grad_width_bits():
    reference = ReferenceModel(sets=1, ways=1, grad_width=8, addr_width=8, whole_line=True)
    reference.set_modes(small_threshold=200, stochastic=1)
    writes = [w for _ in range(40) for w in reference.write(5, -100, 255)]
    assert writes and {w.value for w in writes} == {-127}              # not -200
    assert {w.cause for w in writes} == {"STOCHASTIC"}
    assert sum(d.error for d in reference.discards) == -100 * 40 + 127 * len(writes)


@pytest.mark.parametrize("make", [
    lambda value: ReferenceModel(whole_line=value),
    lambda value: LineModel(lanes=2, whole_line=value),
    pytest.param(lambda value: __import__("gradient_compressor.model.emulator", fromlist=["x"])
                 .Emulator(whole_line=value),
                 marks=pytest.mark.skipif(not compiler_available(), reason="no C++ compiler")),
    pytest.param(lambda value: __import__("gradient_compressor.model.emulator", fromlist=["x"])
                 .LineEmulator(lanes=2, whole_line=value),
                 marks=pytest.mark.skipif(not compiler_available(), reason="no C++ compiler")),
], ids=["ReferenceModel", "LineModel", "Emulator", "LineEmulator"])
@pytest.mark.parametrize("value, message", [
    ("yes", "whole_line must be True or False, not 'yes'"),
    (2, "whole_line must be True or False, not 2"),
    (None, "whole_line must be True or False, not None"),
    (1, "whole_line must be True or False, not 1"),
])
def test_a_bad_whole_line_is_refused(make, value, message):
    with pytest.raises(TypeError) as info:
        make(value)
    assert str(info.value) == message


def test_the_rule_is_on_by_default():
    from gradient_compressor.design import GradientCompressor
    from gradient_compressor.design.params import Config
    assert ReferenceModel().whole_line is True and LineModel().whole_line is True
    assert Config().whole_line is True and GradientCompressor().whole_line is True
    assert ReferenceModel.of(None).whole_line is True
    # The seed's policy, asked for
    assert ReferenceModel(whole_line=False).whole_line is False
    assert ReferenceModel.of(dict(sets=16), whole_line=False).whole_line is False
    assert LineModel.of(dict(lanes=8), whole_line=False).whole_line is False
    assert GradientCompressor(whole_line=False).whole_line is False


def test_the_line_costs_report_counts_whole_line_records_at_grad_width():
    """reports.line_costs' whole-line records: the one-lane rule's writes, each a 4-byte
    address and a 2-byte value (16-bit gradients); with one lane, its whole-line writes."""
    from gradient_compressor.reports.line_costs import line_costs, main
    from gradient_compressor.workloads import get_workload
    ops = get_workload("tiny-embed").ops()
    writes = len(model(dict(sets=32, ways=4)).run(ops))
    one = line_costs(ops, lanes=1, sets=32, ways=4)
    assert one["whole_line_records"] == one["whole_line"] == (writes, writes * (4 + 2))
    assert line_costs(ops, lanes=8, sets=32, ways=4)["whole_line_records"] == (writes,
                                                                               writes * 6)
    assert main(["seed", "--lanes", "1"]) == 0


@pytest.mark.skipif(not compiler_available(), reason="no C++ compiler for the emulator")
def test_the_emulator_commands_take_the_rule(capsys):
    from gradient_compressor.reports.emulator_check import main
    assert main(["--check", "seed", "tiny-mlp", "--limit", "400", "--lanes", "1,8",
                 "--modes", "exact,combined", "--whole-line"]) == 0
    assert capsys.readouterr().out.count("| equal") == 8
    assert main(["--bench", "--gradients", "20000", "--repeat", "1", "--modes", "exact",
                 "--lanes", "1", "--model-gradients", "1000", "--whole-line"]) == 0
    assert "|       1 | exact" in capsys.readouterr().out


@pytest.mark.skipif(not compiler_available(), reason="no C++ compiler for the emulator")
@pytest.mark.parametrize("lanes", [1, 8])
def test_the_write_path_takes_the_rule(lanes):
    """reports.write_path under the whole-line rule: line_costs' figures, and DRAM holds what
    was accepted."""
    import numpy as np
    from gradient_compressor.reports.line_costs import line_costs
    from gradient_compressor.reports.write_path import CompressedWritePath
    from gradient_compressor.workloads import get_workload
    from gradient_compressor.workloads.record import TensorLayout
    trace = get_workload("tiny-embed")
    size = int(trace.addr.max()) + 1
    path = CompressedWritePath(lanes=lanes, whole_line=True, keep_dram=True)
    path.start(TensorLayout([("all", size)]), int(trace.threshold[0]))
    for start, end in trace.step_bounds():
        path.micro_batch(trace.addr[start:end], trace.grad[start:end])
        dram = path.end_step()
        accepted = np.zeros(len(dram), np.int64)     # the layout rounds its size up
        np.add.at(accepted, trace.addr[start:end], trace.grad[start:end])
        assert (dram == accepted).all()
    costs = line_costs(trace.ops(), lanes=lanes, sets=32, ways=4)
    assert (path.line_writes, path.line_bytes) == costs["whole_line"]
    assert path.saving >= 0
