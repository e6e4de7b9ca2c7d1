"""The run-time modes (design/modes.py): the reference model by hand, then the RTL against the
model write for write, discard for discard, on hypothesis streams and on the scenarios of the
seed's variant testbenches (dual threshold and dynamic threshold)."""

import random
from collections import Counter, defaultdict

import pytest
from amaranth import Module, Signal
from hypothesis import HealthCheck, given, settings, strategies as st

from gradient_compressor.design import GradientCompressor
from gradient_compressor.design.compressor import signature
from gradient_compressor.design.modes import ema_update
from gradient_compressor.design.params import (MODES_OFF, LFSR_TAPS, LFSR_RESET, EMA_FRACTION_BITS,
                                               EMA_SHIFT_WIDTH, check_modes)
from gradient_compressor.model import ReferenceModel, Write, Discard, lfsr_step
from gradient_compressor.simulation import always, every_other, simulate
from gradient_compressor.simulation.driver import random_ready

from .sat import assert_always_one


# -- the reference model by hand -------------------------------------------------------------

def test_modes_off_by_default():
    model = ReferenceModel(sets=2, ways=1)
    assert model.modes == MODES_OFF and all(v == 0 for v in MODES_OFF.values())
    assert model.write(3, 1, 50) == []        # a tiny gradient is allocated as before
    assert model.held() == {3: 1}
    assert model.discards == []


def test_drop_on_miss_only():
    model = ReferenceModel(sets=1, ways=1)
    model.set_modes(small_threshold=10)
    assert model.write(0, 20, 50) == []                      # not tiny: allocated
    assert model.write(0, 5, 50) == []                       # tiny, but a hit: accumulates
    assert model.held() == {0: 25}
    assert model.write(1, -9, 50) == []                      # tiny miss: dropped, no eviction
    assert model.held() == {0: 25}
    assert model.write(1, 10, 50) == [Write(0, 25, "EVICTION")]   # |g| = small: allocated
    assert model.write(2, 60, 50) == [Write(2, 60, "DIRECT")]     # direct is never dropped
    assert model.discards == [Discard(1, -9)]
    assert (model.discard_count, model.discard_sum) == (1, -9)
    assert model.flush() == [Write(1, 10, "FLUSH")]
    assert (model.discard_count, model.discard_sum) == (1, -9)    # readable after the barrier
    assert model.step_discards == [(1, -9)]
    model.write(1, 30, 50)                                        # the next step clears them
    assert (model.discard_count, model.discard_sum) == (0, 0)


def test_lfsr_definition():
    assert lfsr_step(LFSR_RESET) == LFSR_TAPS == 0x80200003
    assert lfsr_step(2) == 1 and lfsr_step(0x80200003) == 0x40100001 ^ LFSR_TAPS == 0xC0300002
    state, seen = 0xACE1, set()
    for _ in range(1000):                     # no short cycle from an arbitrary seed
        assert state not in seen and state != 0
        seen.add(state)
        state = lfsr_step(state)


def test_stochastic_rounding_is_unbiased_on_average():
    """Over many decisions the written mass is close to the gradients' mass, and each write is
    +-small_threshold; the rounding error is accounted exactly."""
    model = ReferenceModel(sets=1, ways=1, max_updates=2)
    model.set_modes(small_threshold=256, stochastic=1)
    model.seed(0x1234567)
    written, grads = 0, 0
    rng = random.Random(3)
    for _ in range(20000):
        g = rng.randint(-255, 255)
        grads += g
        for w in model.write(1, g, 1000):
            assert w.cause == "STOCHASTIC" and abs(w.value) == 256 and (w.value > 0) == (g > 0)
            written += w.value
    assert grads == written + model.discard_sum
    assert model.discard_count == 20000
    assert abs(model.discard_sum) < 0.02 * sum(abs(d.error) for d in model.discards)


def test_stochastic_probability_follows_magnitude():
    model = ReferenceModel(sets=1, ways=1)
    model.set_modes(small_threshold=64, stochastic=1)
    model.write(0, 1, 1000)
    for g, expected in [(0, 0.0), (16, 0.25), (48, 0.75)]:
        writes = sum(len(model.write(1, g, 1000)) for _ in range(4000))
        assert abs(writes / 4000 - expected) < 0.03


def test_seed_only_when_empty():
    model = ReferenceModel(sets=1, ways=1)
    model.seed(0)
    assert model.lfsr == LFSR_RESET                # 0 loads the reset state
    model.write(0, 1, 50)
    with pytest.raises(ValueError, match="seeded only while the compressor is idle"):
        model.seed(5)


def test_ema_arithmetic():
    model = ReferenceModel(sets=1, ways=1)
    model.set_modes(ema_enable=1, ema_shift=1, ema_scale=16, ema_min=3, ema_max=60)
    assert model.ema_threshold == 3                          # EMA 0, clamped to ema_min
    assert model.write(0, 100, 0) == [Write(0, 100, "DIRECT")]   # judged against 3
    assert model.ema == (100 << 8) >> 1 == 12800
    assert model.ema_threshold == 50                         # 12800 * 16 >> 12
    assert model.write(0, 49, 65535) == []                   # 49 < 50: the input is ignored
    assert model.ema == 12800 + ((49 * 256 - 12800) >> 1) == 12672
    model.write(1, -32768, 0)
    assert model.ema_threshold == 60                         # clamped to ema_max
    model.set_modes(ema_per_step=1)
    assert model.ema_threshold == 3                          # latched EMA: 0 until a flush
    model.flush()
    assert model.ema_latched == model.ema and model.ema_threshold == 60


def test_ema_ignores_bypassed_gradients():
    model = ReferenceModel(sets=1, ways=1)
    model.set_modes(bypass__1__base=8, bypass__1__limit=9, bypass__1__enable=1, ema_shift=0)
    assert model.write(9, 1, 50) == [Write(9, 1, "DIRECT")]   # in the window (limit included)
    assert model.ema == 0
    assert model.write(10, 1, 50) == []
    assert model.ema == 256


@pytest.mark.parametrize("modes, error, message", [
    ({"small_treshold": 1}, ValueError, "unknown mode setting 'small_treshold'"),
    ({"small_threshold": 65536}, ValueError, "small_threshold must be at most 65535, not 65536"),
    ({"ema_shift": 8}, ValueError, "ema_shift must be at most 7, not 8"),
    ({"stochastic": True}, TypeError, "stochastic must be an integer, not True"),
    ({"bypass__0__limit": -1}, ValueError, "bypass__0__limit must be at least 0, not -1"),
])
def test_bad_modes(modes, error, message):
    with pytest.raises(error) as info:
        check_modes(modes)
    assert str(info.value).startswith(message)


# -- the RTL against the model ---------------------------------------------------------------

def per_address(pairs):
    sums = defaultdict(int)
    for addr, value in pairs:
        sums[addr] += value
    return {addr: value for addr, value in sums.items() if value != 0}


def run_and_compare(config, ops, *, dram_ready=always, gap=None, max_cycles=200_000):
    """Run ``ops`` through the RTL and the model and check that they agree on every write and
    cause, every accounted discard, each step's discard totals and the threshold in force for
    each gradient; and that, per address, accepted = written + accounted (the ops end with a
    flush). Return the result and the model."""
    dut = GradientCompressor(**config)
    result = simulate(dut, ops, dram_ready=dram_ready, gap=gap, max_cycles=max_cycles)
    model = ReferenceModel(sets=dut.sets, ways=dut.ways, max_updates=dut.max_updates,
                           grad_width=dut.grad_width, addr_width=dut.addr_width,
                           bypass_windows=dut.bypass_windows)
    expected, thresholds = [], []
    for op in ops:
        if op[0] == "grad":
            thresholds.append(model.ema_threshold if model.modes["ema_enable"] else op[3])
        expected += model.run([op])
    grads = [op[1:] for op in ops if op[0] == "grad"]
    assert result.accepted == grads
    assert result.accept_thresholds == thresholds
    assert result.writes == [(w.addr, w.value) for w in expected]
    assert result.causes == [w.cause for w in expected]
    assert result.discards == list(model.discards)
    assert result.step_discards == model.step_discards
    assert ops[-1] == ("flush",)
    assert per_address(result.writes + result.discards) == \
        per_address((addr, grad) for addr, grad, _ in grads)
    return result, model


SMALL = dict(addr_width=8, sets=4, ways=2, max_updates=5, fifo_depth=4, burst_size=2)


def window_settings(draw, addr_max):
    settings_ = {}
    for i in range(2):
        base = draw(st.integers(0, addr_max))
        settings_.update({f"bypass__{i}__base": base,
                          f"bypass__{i}__limit": draw(st.integers(0, addr_max)),
                          f"bypass__{i}__enable": draw(st.integers(0, 1))})
    return settings_


@st.composite
def mode_streams(draw, mode):
    """A stream of steps for ``mode`` (drop, stochastic, ema, ema_per_step, bypass, all), with
    settings that change between and within steps."""
    config = dict(draw(st.sampled_from([
        dict(sets=1, ways=1, max_updates=3, fifo_depth=1, burst_size=1),
        dict(sets=2, ways=2, max_updates=255, fifo_depth=2, burst_size=1),
        dict(sets=4, ways=2, max_updates=5, fifo_depth=4, burst_size=2),
        dict(sets=2, ways=4, max_updates=2, fifo_depth=8, burst_size=8)])), addr_width=8)
    addrs = st.builds(lambda tag, index: tag * config["sets"] + index,
                      st.integers(0, 5), st.integers(0, config["sets"] - 1))
    values = st.one_of(st.integers(-12, 12), st.integers(-80, 80),
                       st.sampled_from([-32768, 32767, 0, 1, -1]))

    def settings_for():
        s = {}
        if mode in ("drop", "stochastic", "all"):
            s["small_threshold"] = draw(st.sampled_from([0, 1, 8, 30, 64, 65535]))
            s["stochastic"] = int(mode == "stochastic" or
                                  (mode == "all" and draw(st.booleans())))
        if mode in ("ema", "ema_per_step", "all"):
            s.update(ema_enable=1, ema_per_step=int(mode == "ema_per_step" or
                                                    (mode == "all" and draw(st.booleans()))),
                     ema_shift=draw(st.integers(0, 7)), ema_scale=draw(st.integers(0, 255)),
                     ema_min=draw(st.sampled_from([0, 5, 20])),
                     ema_max=draw(st.sampled_from([0, 40, 100, 65535])))
        if mode in ("bypass", "all"):
            s.update(window_settings(draw, 5 * config["sets"] + config["sets"] - 1))
        return s

    ops = [("seed", draw(st.integers(0, 2 ** 32 - 1)))] if mode in ("stochastic", "all") else []
    ops.append(("modes", settings_for()))
    for _ in range(draw(st.integers(1, 3))):
        for _ in range(draw(st.integers(0, 30))):
            ops.append(("grad", draw(addrs), draw(values),
                        draw(st.sampled_from([0, 20, 50, 200]))))
            if draw(st.integers(0, 9)) == 0:
                ops.append(("modes", settings_for()))
        ops.append(("flush",))
        if draw(st.booleans()):
            ops.append(("modes", settings_for()))
        if mode in ("stochastic", "all") and draw(st.booleans()):
            ops.append(("seed", draw(st.integers(0, 2 ** 32 - 1))))
    ops.append(("flush",))
    gaps = draw(st.lists(st.integers(0, 2), min_size=1, max_size=4))
    runs = draw(st.lists(st.tuples(st.integers(1, 4), st.integers(0, 12)), min_size=1,
                         max_size=4))
    pattern = [r for ready, stall in runs for r in [True] * ready + [False] * stall]
    return config, ops, gaps, pattern


@pytest.mark.parametrize("mode", ["drop", "stochastic", "ema", "ema_per_step", "bypass", "all"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_mode_stream(mode, data):
    config, ops, gaps, pattern = data.draw(mode_streams(mode))
    run_and_compare(config, ops, gap=lambda i: gaps[i % len(gaps)],
                    dram_ready=lambda cycle: pattern[cycle % len(pattern)])


def test_modes_off_change_nothing():
    """Every mode input written with its "off" value, mid-stream: same writes as without."""
    rng = random.Random(7)
    grads = [("grad", rng.randrange(48), rng.randint(-70, 70), 50) for _ in range(300)]
    plain = grads[:150] + [("flush",)] + grads[150:] + [("flush",)]
    with_off = [("modes", MODES_OFF)] + grads[:150] + [("flush",), ("modes", MODES_OFF)] + \
        grads[150:] + [("flush",)]
    a, _ = run_and_compare(SMALL, plain, dram_ready=every_other)
    b, _ = run_and_compare(SMALL, with_off, dram_ready=every_other)
    assert a.writes == b.writes and a.causes == b.causes and b.discards == []


def test_seed_reproducible():
    rng = random.Random(11)
    grads = [("grad", rng.randrange(64), rng.randint(-20, 20), 50) for _ in range(200)]
    mode = ("modes", {"small_threshold": 32, "stochastic": 1})
    runs = [run_and_compare(SMALL, [("seed", seed), mode] + grads + [("flush",)])[0]
            for seed in (99, 99, 100)]
    assert runs[0].writes == runs[1].writes
    assert runs[0].writes != runs[2].writes
    assert Counter(runs[0].causes)["STOCHASTIC"] > 10


# -- the dual-threshold variant's scenarios (seed, "Dual Threshold Gradient Compressor") ------

DEFAULT = dict()      # the default configuration: 32 sets x 4 ways, max_updates 255
DUAL = {"small_threshold": 8}


def test_tiny_miss_drop_storm():
    """Tiny gradients to 512 distinct addresses: none allocates, none evicts; all accounted."""
    ops = [("modes", DUAL)]
    ops += [("grad", 0x100 + 32 * tag + index, (tag + index) % 15 - 7, 50)
            for tag in range(4) for index in range(32)]
    ops += [("grad", 0x1000 + i, (-1) ** i * (i % 8), 50) for i in range(512)]
    ops += [("flush",)]
    result, model = run_and_compare(DEFAULT, ops, dram_ready=every_other)
    assert result.writes == [] and result.misses == 0
    assert len(result.discards) == 128 + 512
    assert result.step_discards == [(640, sum(op[2] for op in ops if op[0] == "grad"))]


def test_conflict_eviction_with_dual_threshold():
    """Full sets, then a fifth tag per set: a tiny one is dropped (no eviction), a larger one
    evicts the round-robin victim, losslessly."""
    ops = [("modes", DUAL)]
    ops += [("grad", tag * 32 + index, 10 + tag, 50) for tag in range(4) for index in range(32)]
    ops += [("grad", 4 * 32 + index, 3, 50) for index in range(32)]       # tiny: dropped
    ops += [("grad", 5 * 32 + index, 9, 50) for index in range(32)]       # evicts way 0
    ops += [("grad", 6 * 32 + index, -20, 50) for index in range(32)]     # evicts way 1
    ops += [("flush",)]
    result, _ = run_and_compare(DEFAULT, ops, dram_ready=random_ready(5, 0.6, max_stall=6))
    causes = Counter(result.causes)
    assert causes == {"EVICTION": 64, "FLUSH": 128}
    assert [v for a, v in result.writes[:32]] == [10] * 32          # the first victims: tag 0
    assert len(result.discards) == 32


def test_direct_trigger_flood_under_backpressure():
    """Large gradients flood past L1 while DRAM is ready one cycle in eight, tiny ones mixed
    in: nothing is lost, every direct write arrives in order."""
    ops = [("modes", DUAL)]
    for i in range(400):
        ops.append(("grad", i % 97, 1000 + i if i % 3 else -(1000 + i), 50))
        if i % 5 == 0:
            ops.append(("grad", 500 + i, 2, 50))                 # tiny miss: dropped
    ops += [("flush",)]
    result, _ = run_and_compare(DEFAULT, ops, dram_ready=lambda c: c % 8 == 0)
    assert Counter(result.causes) == {"DIRECT": 400}
    assert result.dram_stall_cycles > 1000
    assert len(result.discards) == 80


def test_max_updates_hammer_with_dual_threshold():
    """Tiny +-1 to one address: the first (a miss) is dropped, but once the entry exists
    (allocated by a 9) every tiny one hits, and it is forced out at max_updates (nothing is
    held forever); after that the tiny ones miss again and are dropped."""
    ops = [("modes", DUAL), ("grad", 0x40, 1, 50), ("grad", 0x40, 9, 50)]
    ops += [("grad", 0x40, (1, -1)[i % 2], 50) for i in range(300)]
    ops += [("flush",)]
    result, _ = run_and_compare(DEFAULT, ops)
    assert result.causes == ["MAX_UPDATES"]
    assert result.writes == [(0x40, 9)]           # 9 + 127 x (+1) + 127 x (-1), at 255 updates
    assert len(result.discards) == 1 + 300 - 254
    assert sum(e for _, e in result.discards) == 1


def test_training_like_steps():
    """Five steps, each ended by a flush barrier, stochastic then drop: the discard totals are
    per step (cleared at each barrier) and conservation holds step by step."""
    rng = random.Random(21)
    ops = [("seed", 2024)]
    for step in range(5):
        ops.append(("modes", {"small_threshold": 16, "stochastic": step % 2}))
        ops += [("grad", rng.randrange(200), int(rng.gauss(0, 12)), 40) for _ in range(150)]
        ops.append(("flush",))
    result, model = run_and_compare(DEFAULT, ops, dram_ready=random_ready(1, 0.7, max_stall=5))
    assert len(result.step_discards) == 5
    assert sum(count for count, _ in result.step_discards) == len(result.discards)
    assert Counter(result.causes)["STOCHASTIC"] > 0


# -- the dynamic-threshold variant's scenarios (seed, "Dynamic Adaptive Gradient Compressor") --

EMA = {"ema_enable": 1, "ema_shift": 3, "ema_scale": 32, "ema_min": 8, "ema_max": 400}


def test_ema_pure_accumulation():
    """Small, steady gradients: the EMA settles at 4, the threshold at 2 * 4 = 8, and the
    entries accumulate until they reach it."""
    ops = [("modes", EMA)] + [("grad", 0x10 + i % 16, 4, 50) for i in range(640)] + [("flush",)]
    result, model = run_and_compare(DEFAULT, ops)
    assert model.ema_threshold == 8
    assert set(result.accept_thresholds[-100:]) == {8}
    assert Counter(result.causes)["ACCUM_THRESHOLD"] > 250


def test_ema_high_magnitude_bypass():
    """Spikes far above the EMA's threshold go straight on; the threshold rises only as far as
    ema_max allows."""
    ops = [("modes", EMA)]
    for i in range(200):
        ops.append(("grad", 0x200 + i % 8, 3, 50))
        if i % 20 == 19:
            ops.append(("grad", 0x300 + i, 20000, 50))
    ops += [("flush",)]
    result, _ = run_and_compare(DEFAULT, ops, dram_ready=every_other)
    assert Counter(result.causes)["DIRECT"] == 10
    assert max(result.accept_thresholds) <= 400


def test_ema_rotating_tags_on_one_index():
    """Tags rotate on set 5 (force miss and evict) under a moving threshold: lossless."""
    ops = [("modes", dict(EMA, ema_shift=1))]
    ops += [("grad", 5 + 32 * (i % 7), (i * 13) % 31 - 15, 50) for i in range(300)]
    ops += [("flush",)]
    result, _ = run_and_compare(DEFAULT, ops, dram_ready=random_ready(9, 0.5, max_stall=4))
    assert Counter(result.causes)["EVICTION"] > 50


def test_ema_threshold_breakthrough():
    """Minor fluctuations keep the threshold low; a run of larger ones pushes sums past it: a
    write at the critical point, with per-step thresholds (ema_per_step)."""
    ops = [("modes", dict(EMA, ema_per_step=1))]
    ops += [("grad", 0x50, (1, -1)[i % 2], 0) for i in range(40)] + [("flush",)]
    ops += [("grad", 0x50, 3, 0) for _ in range(10)] + [("flush",)]
    result, model = run_and_compare(DEFAULT, ops)
    # Step 1 runs at ema_min (nothing latched yet); step 2 at the latched EMA of |+-1|, 1,
    # times 2, clamped to ema_min: 8 again. Step 1's sum (0) is held until its barrier.
    assert set(result.accept_thresholds) == {8}
    assert result.causes == ["FLUSH"] + ["ACCUM_THRESHOLD"] * 3 + ["FLUSH"]
    assert result.writes == [(0x50, 0), (0x50, 9), (0x50, 9), (0x50, 9), (0x50, 3)]


def test_ema_stability_under_random_gradients():
    """Massive random +- gradients (normal, sigma 200): the threshold stays in [ema_min,
    ema_max] and, once warm, within 35% of scale * E|g| (= 2 * 160)."""
    rng = random.Random(42)
    ops = [("modes", dict(EMA, ema_shift=5, ema_max=2000))]
    ops += [("grad", rng.randrange(4096), int(rng.gauss(0, 200)), 50) for _ in range(3000)]
    ops += [("flush",)]
    result, _ = run_and_compare(DEFAULT, ops, dram_ready=every_other, max_cycles=400_000)
    warm = result.accept_thresholds[500:]
    assert min(result.accept_thresholds) >= 8 and max(result.accept_thresholds) <= 2000
    assert 0.65 * 320 < min(warm) and max(warm) < 1.35 * 320


# -- bypass windows ----------------------------------------------------------------------------

def test_bypass_windows_write_through_once():
    """Gradients in an enabled window leave as they are, once each, even tiny ones under the
    drop mode; outside it they accumulate or drop as usual; a disabled window does nothing."""
    windows = {"bypass__0__base": 0x100, "bypass__0__limit": 0x10f, "bypass__0__enable": 1,
               "bypass__1__base": 0x200, "bypass__1__limit": 0x2ff, "bypass__1__enable": 0,
               "small_threshold": 4}
    ops = [("modes", windows)]
    ops += [("grad", 0x0f8 + i % 32, (i % 7) - 3, 50) for i in range(200)]
    ops += [("grad", 0x200 + i, 5, 50) for i in range(20)]
    ops += [("flush",)]
    result, _ = run_and_compare(DEFAULT, ops, dram_ready=every_other)
    in_window = [op for op in ops if op[0] == "grad" and 0x100 <= op[1] <= 0x10f]
    assert result.bypassed == len(in_window)
    direct = [w for w, c in zip(result.writes, result.causes) if c == "DIRECT"]
    # (every write enters L2 and leaves in order, so writes and causes line up)
    assert direct == [(a, g) for _, a, g, _ in in_window]
    assert all(not 0x100 <= a <= 0x10f for a, _ in result.discards)


@pytest.mark.parametrize("windows", [0, 4])
def test_the_number_of_bypass_windows_is_a_parameter(windows):
    """With 4 windows the last one works as the first does; with none there is no window
    input and nothing is bypassed. The RTL and the model agree write for write."""
    members = signature(bypass_windows=windows).members
    assert (members["bypass"].dimensions == (windows,) if windows else "bypass" not in members)
    settings = {}
    if windows:
        settings = {f"bypass__{windows - 1}__base": 0x40, f"bypass__{windows - 1}__limit": 0x47,
                    f"bypass__{windows - 1}__enable": 1}
    with pytest.raises(ValueError, match=f"unknown mode setting 'bypass__{windows}__base'"):
        check_modes({f"bypass__{windows}__base": 1}, bypass_windows=windows)
    ops = [("modes", settings)] + [("grad", 0x3c + i % 16, 2, 50) for i in range(64)]
    ops += [("flush",)]
    result, _ = run_and_compare(dict(DEFAULT, bypass_windows=windows), ops)
    assert result.bypassed == (32 if windows else 0)


def test_seed_waits_for_idle():
    """The LFSR loads only while idle: with an entry held, a seed never takes (and the driver's
    wait for it is bounded); the model refuses it the same way."""
    dut = GradientCompressor(**SMALL)
    with pytest.raises(AssertionError, match="lfsr_load raised at cycle .* within 40 cycles"):
        simulate(dut, [("grad", 1, 1, 50), ("seed", 3)], flush_timeout=40, max_cycles=1000)
    with pytest.raises(ValueError, match="seeded only while"):
        ReferenceModel().run([("grad", 1, 1, 50), ("seed", 3)])


@pytest.mark.parametrize("grad_width", [4, 16])
def test_ema_update_is_the_ema_step_formally(tmp_path, grad_width):
    # design.modes.ema_update's carry-save form against the definition, for every EMA value,
    # magnitude and shift: the formal harness states the definition.
    average = Signal(grad_width + EMA_FRACTION_BITS, name="average")
    magnitude = Signal(grad_width, name="magnitude")
    shift = Signal(EMA_SHIFT_WIDTH, name="shift")
    equal = Signal(name="equal")
    m = Module()
    defined = average + (((magnitude << EMA_FRACTION_BITS) - average) >> shift)
    m.d.comb += equal.eq(ema_update(average, magnitude, shift) == defined[:len(average)])
    assert_always_one(tmp_path, m, [average, magnitude, shift], equal)


def test_lfsr_polynomial_is_primitive():
    # x^32 + x^22 + x^2 + x + 1 is primitive over GF(2): x has order 2**32 - 1 modulo it (so
    # the LFSR runs through every non-zero state), checked by x^(2**32-1) = 1 and x^((2**32-1)/q)
    # != 1 for each prime q dividing 2**32 - 1 = 3 * 5 * 17 * 257 * 65537.
    from gradient_compressor.design.params import LFSR_POLYNOMIAL, LFSR_WIDTH
    poly = sum(1 << e for e in LFSR_POLYNOMIAL)

    def mulmod(a, b):
        product = 0
        while b:
            if b & 1:
                product ^= a
            b >>= 1
            a <<= 1
            if a >> LFSR_WIDTH & 1:
                a ^= poly
        return product

    def power(exponent):
        result, base = 1, 2
        while exponent:
            if exponent & 1:
                result = mulmod(result, base)
            base = mulmod(base, base)
            exponent >>= 1
        return result

    order = 2 ** LFSR_WIDTH - 1
    assert power(order) == 1
    for q in (3, 5, 17, 257, 65537):
        assert order % q == 0 and power(order // q) != 1
    assert LFSR_TAPS == sum(1 << (e - 1) for e in LFSR_POLYNOMIAL if e)
