"""The compiled (Yosys CXXRTL) simulation gives the same SimResult as the Amaranth simulation,
cycle for cycle: same accepted gradients and accept cycles, same DRAM writes and write cycles,
same causes, stall counts, hits, misses, flush durations and total cycles; with the run-time
modes, the same thresholds in force, discards, step totals and bypassed gradients."""

import random
import zlib

import pytest

from design import GradientCompressor
from simulation.driver import (SplitMix64, always, every_other, periodic_ready, random_ready,
                               simulate)
from simulation.cxxrtl import build, compiler_available, simulate_compiled

needs_compiler = pytest.mark.skipif(
    not compiler_available(), reason="no C++ compiler (g++) on the path: the compiled "
                                     "CXXRTL simulator cannot be built")


def random_ops(seed, params, n, *, flush_rate=0.03, addr_span=None):
    """A random trace: addresses in a small span (hits, misses and evictions), gradients
    around the thresholds, a few thresholds, flushes here and there and one at the end."""
    rng = random.Random(seed)
    grad_width = params.get("grad_width", 16)
    addr_width = params.get("addr_width", 32)
    sets = params.get("sets", 32)
    span = addr_span or min(1 << addr_width, 4 * sets * params.get("ways", 4))
    gmin, gmax = -(1 << (grad_width - 1)), (1 << (grad_width - 1)) - 1
    tmax = (1 << grad_width) - 1
    thresholds = [1, tmax // 64 + 1, tmax // 8 + 1, tmax]
    base = rng.randrange(0, (1 << addr_width) - span + 1)
    ops = []
    for _ in range(n):
        if rng.random() < flush_rate:
            ops.append(("flush",))
            continue
        threshold = rng.choice(thresholds)
        if rng.random() < 0.8:
            grad = rng.randint(-(threshold // 2 + 1), threshold // 2 + 1)
        else:
            grad = rng.randint(gmin, gmax)
        ops.append(("grad", base + rng.randrange(span), max(gmin, min(gmax, grad)), threshold))
    ops.append(("flush",))
    return ops


def random_mode_ops(seed, params, n):
    """:func:`random_ops` with run-time mode settings and LFSR seeds mixed in: dual threshold
    (stochastic and drop), EMA (per gradient and per step) and bypass windows, set in turn at
    random points."""
    rng = random.Random(seed)
    ops = random_ops(seed, params, n)
    addrs = [op[1] for op in ops if op[0] == "grad"]
    low, high = min(addrs), max(addrs)
    tmax = (1 << params.get("grad_width", 16)) - 1
    choices = [
        lambda: {"small_threshold": rng.randint(0, tmax // 64), "stochastic": 1},
        lambda: {"ema_enable": rng.randint(0, 1), "ema_per_step": rng.randint(0, 1),
                 "ema_shift": rng.randint(0, 7), "ema_scale": rng.randint(0, 255),
                 "ema_min": rng.randint(0, tmax // 8), "ema_max": rng.randint(tmax // 8, tmax)},
        lambda: dict(zip(("bypass0_base", "bypass0_limit"),
                         sorted(rng.randint(low, high) for _ in range(2))),
                     bypass0_enable=1, bypass1_enable=rng.randint(0, 1)),
        lambda: {"small_threshold": rng.randint(0, tmax // 64), "stochastic": 0},
    ]
    mixed = []
    for op in ops:
        if rng.random() < 0.04:   # each kind of setting in turn
            mixed.append(("modes", choices[sum(op[0] == "modes" for op in mixed) % 4]()))
        mixed.append(op)
        if op[0] == "flush" and rng.random() < 0.5:
            # The LFSR loads only while idle: after a flush.
            mixed.append(("seed", rng.randrange(1 << 32)))
    return mixed


def amaranth_result(params, ops, **kwargs):
    return simulate(GradientCompressor(**params), ops, **kwargs)


def assert_same(expected, got):
    for name in ("accepted", "accept_cycles", "writes", "write_cycles", "causes",
                 "input_stall_cycles", "dram_stall_cycles", "hits", "misses", "flush_cycles",
                 "cycles", "accept_thresholds", "discards", "step_discards", "bypassed"):
        assert getattr(got, name) == getattr(expected, name), f"{name} differs"
    assert got == expected


def stalls_and_gaps(index):
    return (index * 7) % 5 if index % 3 == 0 else 0


#: Most tests share this configuration, so that the test builds few simulators.
SMALL = dict(sets=4, ways=2, fifo_depth=4, burst_size=2, max_updates=3)
TINY = dict(sets=2, ways=1, fifo_depth=2, burst_size=1, max_updates=1, addr_width=4, grad_width=4)

CONFIGS = {
    # name: (parameters, trace length, gap, dram_ready factory)
    "default_random_dram": ({}, 500, None,
                            lambda: random_ready(11, probability=0.6, max_stall=5)),
    "tiny_max_updates_1": (TINY, 300, stalls_and_gaps,
                           lambda: every_other),
    "small_bursty": (SMALL, 400, stalls_and_gaps, lambda: random_ready(5, probability=0.3)),
    "narrow_periodic": (dict(sets=8, ways=4, fifo_depth=8, burst_size=8, max_updates=5,
                             addr_width=8, grad_width=6), 400, lambda i: 1,
                        lambda: periodic_ready("1101000")),
    # Payloads wider than 64 bits (40 + 30 and 40 + 32) exercise the multi-chunk ports.
    "wide": (dict(addr_width=40, grad_width=30, sets=4, ways=2, fifo_depth=8, burst_size=4),
             300, None, lambda: always),
}


@needs_compiler
@pytest.mark.parametrize("name", list(CONFIGS))
def test_matches_amaranth(name):
    params, n, gap, dram = CONFIGS[name]
    ops = random_ops(zlib.crc32(name.encode()), params, n)
    expected = amaranth_result(params, ops, gap=gap, dram_ready=dram())
    got = simulate_compiled(params, ops, gap=gap, dram_ready=dram())
    assert expected.writes, "the trace should write something"
    assert_same(expected, got)


@needs_compiler
@pytest.mark.parametrize("name", ["default_random_dram", "small_bursty"])
def test_modes_match_amaranth(name):
    """Every run-time mode, switched at random points, with gaps indexed like the operations."""
    params, n, gap, dram = CONFIGS[name]
    ops = random_mode_ops(zlib.crc32(name.encode()) + 1, params, n)
    expected = amaranth_result(params, ops, gap=gap, dram_ready=dram())
    got = simulate_compiled(params, ops, gap=gap, dram_ready=dram())
    assert expected.discards and expected.bypassed, "the trace should discard and bypass"
    assert "STOCHASTIC" in expected.causes, "the trace should write stochastically"
    assert len(set(expected.accept_thresholds)) > 4, "the threshold in force should move"
    assert_same(expected, got)


@needs_compiler
def test_starts_like_amaranth():
    """Reset: both take the first gradient right after L1's `sets` clearing cycles, and a
    flush at once waits for the same cycles."""
    params = SMALL
    for ops in ([("grad", 3, 1, 100)], [("flush",)], [("grad", 3, 500, 100), ("flush",)]):
        expected = amaranth_result(params, ops)
        got = simulate_compiled(params, ops)
        assert_same(expected, got)
    assert got.accept_cycles == [4]


@needs_compiler
def test_dut_instance_and_reuse():
    """A GradientCompressor instance works as well as its parameters, and one build runs
    several traces."""
    dut = GradientCompressor(**SMALL)
    sim = build(dut)
    ops = random_ops(3, SMALL, 200)
    expected = simulate(dut, ops, dram_ready=every_other)
    assert_same(expected, sim.run(ops, dram_ready=every_other))
    assert_same(expected, simulate_compiled(dut, ops, dram_ready=every_other))
    assert sim.run(ops[:10] + [("flush",)]).accepted == [op[1:] for op in ops[:10]
                                                        if op[0] == "grad"]


@needs_compiler
def test_failures_match():
    """A run that takes too long fails the same way in both."""
    params = SMALL
    ops = random_ops(4, params, 100)
    with pytest.raises(AssertionError, match="more than 50 cycles"):
        amaranth_result(params, ops, max_cycles=50)
    with pytest.raises(AssertionError, match="more than 50 cycles"):
        simulate_compiled(params, ops, max_cycles=50)
    with pytest.raises(AssertionError, match="did not reach idle within 2 cycles"):
        amaranth_result(params, [("grad", 1, 1, 100), ("flush",)], flush_timeout=2)
    with pytest.raises(AssertionError, match="did not reach idle within 2 cycles"):
        simulate_compiled(params, [("grad", 1, 1, 100), ("flush",)], flush_timeout=2)


@needs_compiler
def test_dram_patterns_checked():
    params = SMALL
    used = random_ready(1)
    used(0)
    with pytest.raises(ValueError, match="used already"):
        simulate_compiled(params, [("flush",)], dram_ready=used)
    with pytest.raises(TypeError, match="cannot follow"):
        simulate_compiled(params, [("flush",)], dram_ready=lambda cycle: True)


def test_splitmix64_reference():
    """The DRAM ready generator is SplitMix64 (reference outputs), which the C++ driver
    implements too."""
    rng = SplitMix64(1234567)
    assert [rng.next() for _ in range(3)] == [6457827717110365317, 3203168211198807973,
                                               9817491932198370423]
    ready = random_ready(9, probability=0.25, max_stall=2)
    pattern = [ready(c) for c in range(1000)]
    assert 0.3 < sum(pattern) / len(pattern) < 0.6   # 0.25 plus the forced ones
    assert "000" not in "".join("1" if r else "0" for r in pattern)


@needs_compiler
def test_out_of_range_values_truncate_alike():
    """Values wider than the ports are truncated the same way by both simulators."""
    params = TINY
    ops = [("grad", 1000, 100, 40), ("grad", -3, -100, 3), ("grad", 17, 9, 1 << 20), ("flush",)]
    expected = amaranth_result(params, ops)
    assert_same(expected, simulate_compiled(params, ops))
    assert expected.accepted[0] == (1000 % 16, 100 % 16 - 16 if 100 % 16 >= 8 else 100 % 16,
                                    40 % 16)


@needs_compiler
def test_numpy_trace():
    """A NumPy (n, 3) array of gradients runs like the same list of operations (no flush)."""
    np = pytest.importorskip("numpy")
    params = SMALL
    ops = [op for op in random_ops(8, params, 200) if op[0] == "grad"]
    array = np.array([op[1:] for op in ops], dtype=np.int64)
    expected = simulate_compiled(params, ops, gap=lambda i: i % 2, dram_ready=every_other)
    assert_same(expected, simulate_compiled(params, array, gap=lambda i: i % 2,
                                            dram_ready=every_other))


@needs_compiler
def test_first_build_says_so_before_it_starts(tmp_path, capsys):
    # A build takes seconds to minutes: it is announced, once, with where it is cached.
    import simulation.cxxrtl as cxxrtl
    cxxrtl._built.clear()          # not the build another test of this process made
    build(dict(SMALL), cache_dir=tmp_path)
    err = capsys.readouterr().err
    assert f"building the compiled simulator of {SMALL['sets']} x {SMALL['ways']}" in err
    assert str(tmp_path) in err
    cxxrtl._built.clear()
    build(dict(SMALL), cache_dir=tmp_path)          # from the cache: nothing to say
    assert "building" not in capsys.readouterr().err


def test_lines_are_refused_with_a_message():
    from simulation.cxxrtl import build
    with pytest.raises(ValueError, match="the compiled simulator takes one lane so far"):
        build({"lanes": 8})
