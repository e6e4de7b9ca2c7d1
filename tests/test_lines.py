"""The line model (lanes): one lane is the per-gradient model exactly; the policy per lane, one
masked line write per line and beat, conservation per address in every mode."""

import random
import re
from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st

from gradient_compressor.model import LANES, LineModel, LineWrite, ReferenceModel, Write
from gradient_compressor.model.reference import lfsr_step

GRAD = 2 ** 7                    # grad_width 8


def beats(seed, lanes, n, *, lines=12, modes=None):
    """A random run: beats over ``lines`` lines (a few sets' worth), some flushes, random
    masks, small and large gradients; ``modes`` (a dict) set at the start."""
    rng = random.Random(seed)
    ops = [("modes", modes)] if modes else []
    for _ in range(n):
        if rng.random() < 0.03:
            ops.append(("flush",))
            continue
        grads = [rng.choice([rng.randint(-6, 6), rng.randint(-GRAD, GRAD - 1)])
                 for _ in range(lanes)]
        mask = rng.randrange(2 ** lanes)
        ops.append(("line", rng.randrange(lines) * lanes, grads, mask, rng.choice([5, 20, 60])))
    return ops + [("flush",)]


MODES = [None,
         dict(small_threshold=3),                           # drop
         dict(small_threshold=4, stochastic=1),             # stochastic rounding
         dict(ema_enable=1, ema_shift=2, ema_scale=24, ema_min=2, ema_max=50),
         dict(bypass__0__enable=1, bypass__0__base=8, bypass__0__limit=13)]


@pytest.mark.parametrize("modes", MODES)
@pytest.mark.parametrize("geometry", [dict(sets=2, ways=2), dict(sets=1, ways=4, max_updates=2),
                                      dict(sets=4, ways=1, max_updates=1), dict(sets=None)])
def test_one_lane_is_the_per_gradient_model(geometry, modes):
    params = dict(max_updates=3, grad_width=8, addr_width=8) | geometry
    ops = beats(1, 1, 400, modes=modes)
    lines = LineModel(lanes=1, **params)
    grads = ReferenceModel(**params)
    for op in ops:
        if op[0] == "line":
            _, line, values, mask, threshold = op
            expected = grads.write(line, values[0], threshold) if mask else []
            got = [w for lw in lines.write_line(line, values, mask, threshold)
                   for w in lw.writes()]
        else:
            expected, got = grads.run([op]), [w for lw in lines.run([op]) for w in lw.writes()]
        assert got == expected, op
    assert lines.discards == grads.discards and lines.step_discards == grads.step_discards


def accepted(ops, lanes):
    total = Counter()
    for op in ops:
        if op[0] == "line":
            _, line, grads, mask, _ = op
            for i in range(lanes):
                if mask >> i & 1:
                    total[line + i] += grads[i]
    return total


def assert_every_address_gets_what_was_accepted(model, writes, ops):
    """``writes`` (``model``'s line writes for ``ops``, ending in a flush) and its accounted
    discards add up, per address, to the gradients ``ops`` gave it."""
    written = Counter()
    for write in writes:
        assert isinstance(write, LineWrite) and write.mask
        for w in write.writes():
            written[w.addr] += w.value
    for discard in model.discards:
        written[discard.addr] += discard.error
    assert model.valid_count == 0
    total = accepted(ops, model.lanes)
    assert +written == +total and -written == -total


@pytest.mark.parametrize("modes", MODES)
@pytest.mark.parametrize("lanes", [2, 4, 8])
def test_every_address_gets_what_was_accepted(lanes, modes):
    model = LineModel(lanes=lanes, sets=2, ways=2, max_updates=3, grad_width=8, addr_width=8)
    ops = beats(lanes, lanes, 500, modes=modes)
    assert_every_address_gets_what_was_accepted(model, model.run(ops), ops)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), lanes=st.sampled_from(LANES[1:4]))
def test_a_beat_writes_its_line_once_and_at_most_one_victim(seed, lanes):
    model = LineModel(lanes=lanes, sets=2, ways=1, max_updates=3, grad_width=8, addr_width=8)
    for op in beats(seed, lanes, 60):
        writes = model.run([op])
        if op[0] != "line":
            continue
        assert len(writes) <= 2
        if len(writes) == 2:
            assert writes[0].line == op[1] and writes[1].line != op[1]
            assert {w.cause for w in writes[1].writes()} == {"EVICTION"}
        for write in writes:
            assert all((cause is None) == (not write.mask >> i & 1)
                       for i, cause in enumerate(write.causes))


def test_policy_per_lane():
    model = LineModel(lanes=4, sets=1, ways=1, max_updates=3, grad_width=8, addr_width=8,
                      whole_line=False)   # the line policy
    # lane 0 direct, lanes 1 and 2 small (allocate), lane 3 not in the mask
    [w] = model.write_line(8, [70, 3, -4, 99], 0b0111, 50)
    assert w == LineWrite(8, (70, 0, 0, 0), 0b0001, ("DIRECT", None, None, None))
    assert model.held() == {9: 3, 10: -4}
    # lane 2 crosses (-4 - 47), lane 1 adds, lane 3 starts a sum: one line write
    [w] = model.write_line(8, [0, 5, -47, 1], 0b1110, 50)
    assert w == LineWrite(8, (0, 0, -51, 0), 0b0100, (None, None, "ACCUM_THRESHOLD", None))
    assert model.held() == {9: 8, 11: 1}
    # the third beat to update the line writes every held lane, with a direct lane 0 beside
    [w] = model.write_line(8, [-60, 0, 0, 2], 0b1001, 50)
    assert w == LineWrite(8, (-60, 8, 0, 3), 0b1011,
                          ("DIRECT", "MAX_UPDATES", None, "MAX_UPDATES"))
    assert model.valid_count == 0


def test_direct_lane_and_its_held_sum_are_one_value():
    model = LineModel(lanes=2, sets=1, ways=1, max_updates=2, grad_width=8, addr_width=8)
    model.write_line(0, [4, 0], 0b01, 50)                 # lane 0 holds 4
    [w] = model.write_line(0, [60, 1], 0b11, 50)          # lane 0 direct, lane 1: 2nd update
    assert w == LineWrite(0, (64, 1), 0b11, ("DIRECT", "MAX_UPDATES"))


def test_a_miss_evicts_the_victim_line_after_the_beats_own_writes():
    model = LineModel(lanes=2, sets=1, ways=1, max_updates=4, grad_width=8, addr_width=8,
                      whole_line=False)   # the line policy
    model.write_line(0, [1, 2], 0b11, 50)
    assert model.write_line(2, [90, 3], 0b11, 50) == [
        LineWrite(2, (90, 0), 0b01, ("DIRECT", None)),
        LineWrite(0, (1, 2), 0b11, ("EVICTION", "EVICTION"))]
    assert model.held() == {3: 3}
    assert model.flush() == [LineWrite(2, (0, 3), 0b10, (None, "FLUSH"))]


def test_the_tiny_lanes_of_a_beat_share_one_draw():
    """Stochastic mode: every tiny lane of a beat is tested on the same random bits, and the
    LFSR steps once for the beat; a lane with a larger |g| is rounded up whenever a smaller one
    is."""
    model = LineModel(lanes=4, sets=1, ways=1, grad_width=8, addr_width=8)
    model.set_modes(small_threshold=64, stochastic=1)
    model.seed(0x1280)
    start = model.lfsr
    grads = [-5, 63, -40, 1]        # random * 64 < |g| << 8: |g| > 32 (random = 0x80)
    [w] = model.write_line(0, grads, 0b1111, 100)
    assert model.lfsr == lfsr_step(start)
    assert w == LineWrite(0, (0, 64, -64, 0), 0b0110, (None, "STOCHASTIC", "STOCHASTIC", None))
    assert len(model.discards) == 4
    model.write_line(0, [1, 0, 0, 0], 0b0001, 100)     # one more tiny beat: one more step
    assert model.lfsr == lfsr_step(lfsr_step(start))


def test_a_line_whose_lanes_all_crossed_is_freed():
    model = LineModel(lanes=2, sets=1, ways=1, max_updates=9, grad_width=8, addr_width=8)
    model.write_line(0, [10, -10], 0b11, 20)
    model.write_line(0, [15, -15], 0b11, 20)
    assert model.valid_count == 0


def test_sets_count_lines():
    model = LineModel(lanes=4, sets=2, ways=1, max_updates=9, grad_width=8, addr_width=8)
    model.write(1, 1, 50)        # line 0 -> set 0
    model.write(6, 1, 50)        # line 4 -> set 1
    assert model.write(9, 1, 50) == [LineWrite(0, (0, 1, 0, 0), 0b10, (None, "EVICTION",
                                                                       None, None))]


@pytest.mark.parametrize("call, message", [
    (lambda: LineModel(lanes=3), "lanes must be a power of two"),
    (lambda: LineModel(lanes=64), "lanes must be one of 1, 2, 4, 8, 16, 32, not 64"),
    (lambda: LineModel(lanes=4).write_line(2, [0] * 4, 1, 5),
     "line address 2 is not a multiple of lanes (4)"),
    (lambda: LineModel(lanes=4).write_line(0, [0] * 3, 1, 5), "a beat has 4 gradients, not 3"),
    (lambda: LineModel(lanes=2).write_line(0, [0, 2 ** 15], 0b10, 5),
     "gradient 32768 (lane 1) is outside [-32768, 32767]"),
    (lambda: LineModel(lanes=2).write_line(0, [0, 0], 4, 5), "mask must be"),
])
def test_bad_input(call, message):
    with pytest.raises((ValueError, TypeError), match=re.escape(message)):
        call()


def test_gradients_pack_into_beats_by_line_lane_and_threshold():
    from gradient_compressor.reports.line_costs import pack_lines
    ops = [("grad", 8, 1, 5), ("grad", 9, 2, 5), ("grad", 9, 3, 5),    # lane 1 again
           ("grad", 10, 4, 6),                                          # another threshold
           ("grad", 12, 5, 6), ("flush",), ("grad", 13, 6, 6)]
    assert pack_lines(ops, 4) == [
        ("line", 8, [1, 2, 0, 0], 0b0011, 5), ("line", 8, [0, 3, 0, 0], 0b0010, 5),
        ("line", 8, [0, 0, 4, 0], 0b0100, 6), ("line", 12, [5, 0, 0, 0], 0b0001, 6),
        ("flush",), ("line", 12, [0, 6, 0, 0], 0b0010, 6)]


def test_line_costs_of_one_lane_are_the_records():
    from gradient_compressor.reports.line_costs import line_costs
    from gradient_compressor.workloads import get_workload
    ops = get_workload("seed").ops()
    one = line_costs(ops, lanes=1, sets=32, ways=4)
    assert one["lines"] == one["records"] and one["beats"] == one["gradients"] == 1448
    eight = line_costs(ops, lanes=8, sets=32, ways=4)
    assert eight["beats"] < one["beats"] and eight["dense"][0] == eight["beats"]
    assert eight["records"] == one["records"]        # the one-lane compressor's writes


def test_line_report_refuses_a_bad_geometry_or_output(capsys, tmp_path):
    from gradient_compressor.reports.line_costs import main
    assert main(["seed", "--lanes", "3"]) == 2
    assert "lanes must be a power of two" in capsys.readouterr().err
    assert main(["seed", "--out", str(tmp_path)]) == 2
    assert "a folder, not a file" in capsys.readouterr().err


def test_the_ema_moves_once_per_beat_toward_its_mean():
    model = LineModel(lanes=4, sets=1, ways=1, grad_width=8, addr_width=8)
    model.set_modes(ema_shift=1)
    F = model.ema_fraction_bits
    assert F == 8 + 2
    model.write_line(0, [8, -8, 4, 4], 0b1111, 200)        # mean |g| 6: half the way from 0
    assert model.ema == (6 << F) // 2
    model.write_line(0, [40, 0, 0, 0], 0b0001, 200)        # one lane of four: an eighth
    assert model.ema == (6 << F) // 2 + ((40 << F) - (6 << F) // 2) // 8


def test_a_small_step_per_beat_does_not_round_away():
    # One lane in 32 per beat moves the EMA by 1/32 of a gradient's step: with log2(32) more
    # fraction bits it still reaches the gradients' magnitude.
    model = LineModel(lanes=32, sets=None)
    model.set_modes(ema_shift=7)
    for k in range(10000):
        model.write(k * 32 % 4096, 15, 65535)
    assert 13 < model.ema / 2 ** model.ema_fraction_bits <= 15


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(-GRAD, GRAD - 1), min_size=8, max_size=8),
                          st.integers(0, 255)), max_size=40),
       st.integers(0, 6))
def test_the_ema_stays_within_the_gradients_range(beats_in, shift):
    model = LineModel(lanes=8, sets=1, ways=1, grad_width=8, addr_width=8)
    model.set_modes(ema_shift=shift)
    for grads, mask in beats_in:
        model.write_line(0, grads, mask, 255)
        assert 0 <= model.ema <= GRAD << model.ema_fraction_bits


def test_sizing_grid_is_smallest_first_and_finds_the_first_saving_geometry():
    from gradient_compressor.reports.sizing import geometries, sizing
    grid = geometries(64, 2)
    assert grid == [(16, 1), (32, 1), (16, 2), (64, 1), (32, 2), (64, 2)]
    # Eight lanes of one line, written again and again in small steps: any L1 holds the line
    # and writes it once per flush, where dense write-through writes every beat.
    ops = [("grad", lane, 1, 100) for _ in range(10) for lane in range(8)] + [("flush",)]
    result = sizing(ops, 8, grid, whole_line=False)   # the line policy's writes
    assert result["dense"] == 10 * (4 + 2 * 8)
    assert set(result["bytes"].values()) == {4 + 4 * 8}


def test_sizing_report_names_none_where_no_geometry_saves(capsys):
    from gradient_compressor.reports.sizing import main

    def smallest_that_saves(out):   # that column of the first row (the best-saving column
        return out.splitlines()[2].split("|")[4].strip()    # names a geometry in every row)

    assert main(["seed", "--lanes", "8", "--max-sets", "16", "--max-ways", "1"]) == 0
    assert smallest_that_saves(capsys.readouterr().out) == "16 x 1"
    assert main(["synthetic-one-pass", "--lanes", "8", "--max-sets", "16",
                 "--max-ways", "1"]) == 0
    assert smallest_that_saves(capsys.readouterr().out) == "none"


def test_sizing_grid_bounds_need_not_be_powers_of_two(capsys, tmp_path):
    """--max-sets and --max-ways bound a grid of powers of two, both alike, and the results
    file names the grid's largest geometry, not the bounds."""
    from gradient_compressor.reports.sizing import main
    out = tmp_path / "sizing.md"
    assert main(["seed", "--lanes", "8", "--max-sets", "20", "--max-ways", "3",
                 "--out", str(out)]) == 0
    assert "geometries 16 x 1 to 16 x 2 " in out.read_text()


def test_sizing_report_refuses_a_bad_grid_or_lanes(capsys):
    from gradient_compressor.reports.sizing import main
    assert main(["seed", "--max-sets", "8"]) == 2
    assert "the grid starts at 16 sets" in capsys.readouterr().err
    assert main(["seed", "--lanes", "3"]) == 2
    assert "lanes must be a power of two" in capsys.readouterr().err


def test_line_reports_fall_back_to_the_line_model_when_the_kernel_does_not_build(
        monkeypatch, capsys):
    """A compiler that fails (not a missing one) ended the line-cost report in a traceback."""
    from gradient_compressor.model import emulator
    from gradient_compressor.reports import line_costs

    calls = []

    def fail(**kwargs):
        calls.append(1)
        raise RuntimeError("compiling the emulator's kernel failed (false ...):\nno")
    monkeypatch.setattr(emulator, "load_kernel", fail)
    monkeypatch.setattr(line_costs, "_kernel_failed", False)
    assert line_costs.main(["seed", "--lanes", "8"]) == 0
    out, err = capsys.readouterr()
    assert "| seed" in out and err.count("kernel did not build") == 1
    assert type(line_costs.line_policy(lanes=8)).__name__ == "LineModel"
    assert len(calls) == 1      # one failed build, not one per run

