"""The whole-line rule in the line model (``LineModel(whole_line=True)``): a beat causes at
most one line write, line writes plus lines held never exceed the beats taken, every value
fits ``grad_width`` bits, and every address still gets what was accepted, in every mode."""

from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st

from gradient_compressor.model import LANES, LineModel, LineWrite, ReferenceModel

from .test_lines import MODES, assert_every_address_gets_what_was_accepted, beats

PARAMS = dict(sets=2, ways=2, max_updates=3, grad_width=8, addr_width=8, whole_line=True)


def held_lines(model):
    return len({addr - addr % model.lanes for addr in model.held()}) if model.held() else 0


def run_checked(model, ops):
    """Run ``ops`` on ``model`` checking, op by op, the transfer bound and the values' width;
    returns the line writes."""
    out, taken = [], 0
    for op in ops:
        writes = model.run([op])
        if op[0] == "line" and op[3]:
            taken += 1
            assert len(writes) <= 1, (op, writes)
        for write in writes:
            assert write.mask
            for value, cause in zip(write.values, write.causes):
                if cause is not None:
                    assert model.grad_min <= value <= model.grad_max, (op, write)
        out += writes
        assert len(out) + model.valid_count <= taken, op
    return out


@pytest.mark.parametrize("modes", MODES)
@pytest.mark.parametrize("lanes", [1, 2, 4, 8])
def test_the_bound_and_conservation_in_every_mode(lanes, modes):
    model = LineModel(lanes=lanes, **PARAMS)
    ops = beats(lanes, lanes, 600, modes=modes)
    assert_every_address_gets_what_was_accepted(model, run_checked(model, ops), ops)


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), lanes=st.sampled_from(LANES[:4]),
       modes=st.sampled_from(MODES), ways=st.sampled_from([1, 2]),
       max_updates=st.sampled_from([1, 2, 5]))
def test_the_bound_holds_for_any_run(seed, lanes, modes, ways, max_updates):
    model = LineModel(lanes=lanes, **dict(PARAMS, ways=ways, max_updates=max_updates))
    run_checked(model, beats(seed, lanes, 120, modes=modes))


def test_a_written_line_carries_every_pending_value():
    model = LineModel(lanes=4, sets=1, ways=1, max_updates=9, grad_width=8, addr_width=8,
                      whole_line=True)
    assert model.write_line(8, [3, -4, 0, 0], 0b0011, 50) == []    # allocates lanes 0, 1
    # a direct lane 2: the held lanes and the beat's small lane 3 ride along; the line is free
    [w] = model.write_line(8, [1, 0, 70, 2], 0b1101, 50)
    assert w == LineWrite(8, (4, -4, 70, 2), 0b1111, ("LINE", "LINE", "DIRECT", "LINE"))
    assert model.valid_count == 0
    # a miss with a direct lane writes its small lanes too, and allocates nothing
    [w] = model.write_line(8, [1, 0, 70, 0], 0b0101, 50)
    assert w == LineWrite(8, (1, 0, 70, 0), 0b0101, ("LINE", None, "DIRECT", None))
    assert model.valid_count == 0


def test_a_sum_that_would_not_fit_is_written_and_the_gradient_held():
    # grad_width 8: values in [-128, 127]; threshold 200 is above every gradient
    model = LineModel(lanes=2, sets=1, ways=1, max_updates=9, grad_width=8, addr_width=8,
                      whole_line=True)
    model.write_line(0, [100, 0], 0b01, 200)
    model.write_line(0, [20, 5], 0b11, 200)               # lane 0 holds 120, lane 1 holds 5
    [w] = model.write_line(0, [30, 1], 0b11, 200)          # 150 would not fit
    assert w == LineWrite(0, (120, 6), 0b11, ("ACCUM_THRESHOLD", "LINE"))
    assert model.held() == {0: 30}
    # a direct gradient whose held sum would not fit beside it goes alone
    model.write_line(0, [90, 0], 0b01, 200)                # lane 0 holds 120
    [w] = model.write_line(0, [100, 0], 0b01, 100)
    assert w == LineWrite(0, (100, 0), 0b01, ("DIRECT", None))
    assert model.held() == {0: 120}


def test_tiny_lanes_ride_in_a_line_write_and_are_dropped_otherwise():
    model = LineModel(lanes=2, sets=1, ways=1, grad_width=8, addr_width=8, whole_line=True)
    model.set_modes(small_threshold=4)
    [w] = model.write_line(0, [2, 90], 0b11, 50)            # lane 0 tiny, lane 1 direct
    assert w == LineWrite(0, (2, 90), 0b11, ("LINE", "DIRECT"))
    assert model.discards == []
    assert model.write_line(0, [2, 9], 0b11, 50) == []       # lane 0 dropped, lane 1 kept
    assert [d.error for d in model.discards] == [2] and model.held() == {1: 9}


@pytest.mark.parametrize("workload", ["seed", "tiny-embed"])
def test_one_lane_writes_no_more_than_the_seeds_policy(workload):
    from gradient_compressor.workloads import get_workload
    ops = get_workload(workload).ops()
    seed = ReferenceModel(sets=32, ways=4).run(ops)
    rule = LineModel(lanes=1, sets=32, ways=4, whole_line=True).run(ops)
    assert len(rule) <= len(seed)
    total = Counter()
    for write in seed:
        total[write.addr] += write.value
    for write in (w for lw in rule for w in lw.writes()):
        total[write.addr] -= write.value
    assert not +total and not -total


@pytest.mark.parametrize("modes", MODES)
@pytest.mark.parametrize("lanes", [1, 2, 8])
@pytest.mark.parametrize("geometry", [dict(sets=2, ways=2, max_updates=3),
                                      dict(sets=1, ways=1, max_updates=1),
                                      dict(sets=None, max_updates=4)])
def test_the_emulator_follows_the_rule(lanes, modes, geometry):
    """The emulator's kernel under the whole-line rule makes the model's writes, discards and
    step totals, write for write."""
    from gradient_compressor.model.emulator import LineEmulator
    from gradient_compressor.model.native import compiler_available
    if not compiler_available():
        pytest.skip("no C++ compiler for the emulator's kernel")
    params = dict(lanes=lanes, grad_width=8, addr_width=8, whole_line=True, **geometry)
    ops = beats(lanes * 7 + 1, lanes, 800, modes=modes)
    model, emulator = LineModel(**params), LineEmulator(**params)
    assert emulator.run(ops) == model.run(ops)
    assert emulator.discards == model.discards
    assert emulator.step_discards == model.step_discards and emulator.lfsr == model.lfsr
