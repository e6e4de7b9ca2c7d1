"""A bad operation is refused alike by the reference models and both simulators: the same
ValueError (model.ops.OpCheck's message), the simulators' before their first cycle, where a
port would have wrapped or truncated the value."""

import pytest

from gradient_compressor.design import GradientCompressor
from gradient_compressor.design.params import Config
from gradient_compressor.model import LineModel, ReferenceModel
from gradient_compressor.simulation.cxxrtl import compiler_available, simulate_compiled
from gradient_compressor.simulation.driver import simulate

needs_compiler = pytest.mark.skipif(
    not compiler_available(), reason="no C++ compiler (g++) on the path: the compiled "
                                     "CXXRTL simulator cannot be built")

#: One lane, 32-bit addresses and 16-bit gradients on a small L1 (test_cxxrtl's SMALL: its
#: compiled simulator is built once for both files).
ONE_LANE = dict(sets=4, ways=2, fifo_depth=4, burst_size=2, max_updates=3)
#: Lines of 2 lanes, 9-bit addresses and 8-bit gradients (test_cxxrtl's lanes2).
LINES = dict(lanes=2, addr_width=9, grad_width=8, sets=2, ways=2, max_updates=3, fifo_depth=4,
             burst_size=2)

#: Operations that run, before the bad one.
GOOD = {1: [("grad", 1, 1, 50), ("flush",)], 2: [("line", 0, (1, 1), 0b11, 50), ("flush",)]}

BAD_GRADIENTS = [
    (("grad", 1, 40000, 50), "gradient 40000 is outside [-32768, 32767]"),
    (("grad", 2 ** 32 + 5, 1, 50), "address 4294967301 is outside [0, 4294967295]"),
    (("grad", -1, 1, 50), "address -1 is outside [0, 4294967295]"),
    (("grad", 1, 1, -3), "threshold -3 is outside [0, 65535]"),
    (("grad", 1, 1), "a 'grad' operation is ('grad', addr, grad, threshold), not ('grad', 1, 1)"),
    (("line", 0, (1,), 1, 50), "unknown operation ('line', 0, (1,), 1, 50)"),
    (("flsh",), "unknown operation ('flsh',)"),
    (("seed", 2 ** 32), "lfsr_seed must be at most 4294967295, not 4294967296"),
    (("modes", {"ema_shift": 8}), "ema_shift must be at most 7, not 8"),
    (("modes", {"turbo": 1}), "unknown mode setting 'turbo'"),
]

BAD_BEATS = [
    (("line", 3, (1, 1), 0b11, 50), "line address 3 is not a multiple of lanes (2)"),
    (("line", 512, (1, 1), 0b11, 50), "line must be at most 511, not 512"),
    (("line", 0, (1, 1), 0b111, 50), "mask must be at most 3, not 7"),
    (("line", 0, (1,), 0b1, 50), "a beat has 2 gradients, not 1"),
    (("line", 0, (1, 2, 3), 0b11, 50), "a beat has 2 gradients, not 3"),
    (("line", 0, (1, 200), 0b11, 50), "gradient 200 (lane 1) is outside [-128, 127]"),
    (("line", 0, (1, 1), 0b11, 256), "threshold 256 is outside [0, 255]"),
    (("line", 0, (1, 1), 0b11), "a 'line' operation is ('line', line, grads, mask, "
                                "threshold), not ('line', 0, (1, 1), 3)"),
]


def model_error(model, ops):
    with pytest.raises(ValueError) as info:
        model.run(ops)
    return str(info.value)


def simulate_error(params, ops):
    """simulate's error, checked to come before the first cycle (DRAM's ready is asked for
    every cycle)."""
    cycles = []
    with pytest.raises(ValueError) as info:
        simulate(GradientCompressor(**params), ops, dram_ready=cycles.append)
    assert cycles == [], "the bad operation was found after the run started"
    return str(info.value)


@pytest.mark.parametrize("op, message", BAD_GRADIENTS)
def test_a_bad_gradient_operation_is_refused_alike(op, message):
    ops = GOOD[1] + [op]
    assert message in model_error(ReferenceModel.of(ONE_LANE), ops)
    assert simulate_error(ONE_LANE, ops) == model_error(ReferenceModel.of(ONE_LANE), ops)


@pytest.mark.parametrize("op, message", BAD_BEATS)
def test_a_bad_beat_is_refused_alike(op, message):
    ops = GOOD[2] + [op]
    assert message in model_error(LineModel.of(LINES), ops)
    assert simulate_error(LINES, ops) == model_error(LineModel.of(LINES), ops)


def test_the_models_check_what_they_take_one_at_a_time():
    # A run does the operations before a bad one, as the emulator does.
    model = ReferenceModel.of(ONE_LANE)
    with pytest.raises(ValueError, match=r"^gradient 40000 is outside"):
        model.run([("grad", 1, 1, 50), ("grad", 1, 40000, 50)])
    assert model.held() == {1: 1}
    with pytest.raises(ValueError, match=r"^address 4294967301 is outside \[0, 4294967295\]$"):
        model.write(2 ** 32 + 5, 1, 50)
    with pytest.raises(ValueError, match=r"^lfsr_seed must be at most 4294967295"):
        model.seed(2 ** 32)
    lines = LineModel.of(LINES)
    with pytest.raises(ValueError, match=r"^a beat has 2 gradients, not 3$"):
        lines.write_line(0, (1, 2, 3), 0b11, 50)
    with pytest.raises(ValueError, match=r"^line must be at most 511, not 512$"):
        lines.write(513, 1, 50)                            # a gradient is taken as its beat
    assert model.held() == {1: 1} and lines.flush() == []  # nothing more taken


def test_good_operations_still_run_everywhere():
    # The checks refuse nothing at the ends of the ranges.
    config = Config(**ONE_LANE)
    ops = [("seed", 2 ** 32 - 1), ("grad", 2 ** 32 - 1, -32768, 65535),
           ("grad", 0, 32767, 0), ("modes", {"ema_shift": 7}), ("flush",)]
    result = simulate(GradientCompressor(config), ops)
    assert result.accepted == [op[1:] for op in ops if op[0] == "grad"]
    assert result.writes == [(w.addr, w.value) for w in ReferenceModel.of(config).run(ops)]


@needs_compiler
@pytest.mark.parametrize("config, bad, good, model", [
    (ONE_LANE, BAD_GRADIENTS, GOOD[1], ReferenceModel), (LINES, BAD_BEATS, GOOD[2], LineModel)])
def test_the_compiled_simulator_refuses_alike(config, bad, good, model):
    for op, _ in bad:
        ops = good + [op]
        with pytest.raises(ValueError) as info:
            simulate_compiled(config, ops)
        assert str(info.value) == model_error(model.of(config), ops), op


@needs_compiler
def test_the_compiled_simulator_refuses_a_trace_at_its_first_bad_row():
    import numpy as np
    trace = np.array([[1, 1, 50], [2, 40000, 50], [2 ** 32 + 5, 1, 50]], dtype=np.int64)
    with pytest.raises(ValueError, match=r"^gradient 40000 is outside \[-32768, 32767\]$"):
        simulate_compiled(ONE_LANE, trace)
