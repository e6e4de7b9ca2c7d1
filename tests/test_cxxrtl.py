"""The compiled (Yosys CXXRTL) simulation gives the same SimResult as the Amaranth simulation,
cycle for cycle: same accepted gradients and accept cycles, same DRAM writes and write cycles,
same causes, stall counts, hits, misses, flush durations and total cycles; with the run-time
modes, the same thresholds in force, discards, step totals and bypassed gradients; on lines
(GradientCompressor(lanes=N)), the same beats, per-lane writes and discards, every field."""

import dataclasses
import random
import zlib

import pytest

from gradient_compressor.design import GradientCompressor
from gradient_compressor.simulation.driver import (SplitMix64, always, every_other, periodic_ready,
                                                   random_ready, simulate)
from gradient_compressor.simulation.cxxrtl import build, compiler_available, simulate_compiled

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
        lambda: dict(zip(("bypass__0__base", "bypass__0__limit"),
                         sorted(rng.randint(low, high) for _ in range(2))),
                     bypass__0__enable=1, bypass__1__enable=rng.randint(0, 1)),
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
    for f in dataclasses.fields(expected):     # every SimResult field, named when it differs
        assert getattr(got, f.name) == getattr(expected, f.name), f"{f.name} differs"
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
def test_one_lane_whole_line_matches_amaranth():
    """One lane built with the whole-line rule: a record's value is grad_width bits on
    ``dram_out`` (the driver reads it at that width, GC_VALUE_WIDTH), and every mode gives
    the same SimResult as the Amaranth simulator, with values up to the port's ends."""
    params = dict(SMALL, addr_width=8, grad_width=8, whole_line=True)
    assert len(GradientCompressor(**params).dram_out.p.value) == 8
    ops = random_mode_ops(zlib.crc32(b"whole one lane"), params, 400)
    dram = lambda: random_ready(7, probability=0.5, max_stall=4)
    expected = amaranth_result(params, ops, gap=stalls_and_gaps, dram_ready=dram())
    got = simulate_compiled(params, ops, gap=stalls_and_gaps, dram_ready=dram())
    values = [value for _, value in expected.writes]
    assert min(values) < -64 and max(values) > 63, "values should use the top bit"
    assert "STOCHASTIC" in expected.causes, "the trace should write stochastically"
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
def test_values_at_the_ends_of_the_ports_run_alike():
    """The widest values the ports take run the same in both simulators, as given (wider ones
    are refused by both: tests/test_operations.py)."""
    params = TINY
    ops = [("grad", 15, 7, 15), ("grad", 0, -8, 0), ("grad", 15, -1, 3), ("flush",)]
    expected = amaranth_result(params, ops)
    assert_same(expected, simulate_compiled(params, ops))
    assert expected.accepted == [op[1:] for op in ops if op[0] == "grad"]


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
    from gradient_compressor.simulation import cxxrtl
    cxxrtl._built.clear()          # not the build another test of this process made
    build(dict(SMALL), cache_dir=tmp_path)
    err = capsys.readouterr().err
    assert f"building the compiled simulator of {SMALL['sets']} x {SMALL['ways']}" in err
    assert str(tmp_path) in err
    cxxrtl._built.clear()
    build(dict(SMALL), cache_dir=tmp_path)          # from the cache: nothing to say
    assert "building" not in capsys.readouterr().err


def test_the_optimisation_level_is_checked(monkeypatch, capsys):
    from gradient_compressor.simulation import cxxrtl
    # (The tests build at -O1: conftest.py.)
    assert cxxrtl.optimisation() == "-O1" and "-O1" in cxxrtl._cxxflags()
    monkeypatch.setenv("GC_CXXRTL_OPT", "-O9")
    with pytest.raises(ValueError, match=r"^GC_CXXRTL_OPT='-O9': expected one of -O0, -O1"):
        build(dict(SMALL))
    # A command that builds a compiled simulator says so in one line, exit status 2.
    from gradient_compressor.simulation.bench import main as bench_main
    assert bench_main([]) == 2
    assert capsys.readouterr().err == ("python -m gradient_compressor.simulation.bench: error: "
                                       "GC_CXXRTL_OPT='-O9': expected one of -O0, -O1, -O2, "
                                       "-O3\n")
    monkeypatch.delenv("GC_CXXRTL_OPT")
    assert cxxrtl.optimisation() == "-O3" and "-O1" not in cxxrtl._cxxflags()


def test_bad_lanes_are_refused():
    with pytest.raises(ValueError, match="lanes must be a power of two"):
        build({"lanes": 3})
    with pytest.raises(ValueError, match="lanes must be one of"):
        build({"lanes": 64})


# -- lines ---------------------------------------------------------------------------------------

def random_line_ops(seed, params, n, *, flush_rate=0.03):
    """A random trace of beats: lines from a small span (hits, misses and evictions), random
    masks (all lanes, none, some, a few of one lane), gradients around the thresholds and some
    of any size, flushes here and there and one at the end."""
    rng = random.Random(seed)
    lanes, grad_width = params["lanes"], params.get("grad_width", 16)
    lines = 4 * params.get("sets", 32) * params.get("ways", 4)
    base = rng.randrange((1 << params.get("addr_width", 32)) // lanes - lines + 1) * lanes
    gmin, gmax = -(1 << (grad_width - 1)), (1 << (grad_width - 1)) - 1
    tmax = (1 << grad_width) - 1
    thresholds = [tmax // 16 + 1, tmax // 6 + 1, tmax // 3 + 1]
    ops = []
    for _ in range(n):
        if rng.random() < flush_rate:
            ops.append(("flush",))
            continue
        threshold = rng.choice(thresholds)
        grads = tuple(rng.choice([rng.randint(-(threshold // 8), threshold // 8),
                                  rng.randint(-threshold, threshold),
                                  rng.randint(gmin, gmax)]) for _ in range(lanes))
        mask = rng.choice([(1 << lanes) - 1, 0, rng.randrange(1 << lanes),
                           rng.randrange(1 << lanes)])
        line = base + rng.randrange(lines) * lanes
        if rng.random() < 0.1:
            mask = 1 << rng.randrange(lanes)
        ops.append(("line", line, grads, mask, threshold))
    ops.append(("flush",))
    return ops


def random_line_mode_ops(seed, params, n):
    """:func:`random_line_ops` with run-time mode settings and LFSR seeds mixed in, each kind
    in turn at random points: dual threshold (stochastic and drop), EMA (per beat and per
    step) and bypass windows over the trace's addresses."""
    rng = random.Random(seed)
    ops = random_line_ops(seed, params, n)
    addrs = [op[1] for op in ops if op[0] == "line"]
    low, high = min(addrs), max(addrs) + params["lanes"] - 1
    tmax = (1 << params.get("grad_width", 16)) - 1
    choices = [
        lambda: {"small_threshold": rng.randint(0, tmax // 16), "stochastic": 1},
        lambda: {"ema_enable": rng.randint(0, 1), "ema_per_step": rng.randint(0, 1),
                 "ema_shift": rng.randint(0, 7), "ema_scale": rng.randint(0, 255),
                 "ema_min": rng.randint(0, tmax // 8), "ema_max": rng.randint(tmax // 8, tmax)},
        lambda: {**dict(zip(("bypass__0__base", "bypass__0__limit"),
                            sorted(rng.randint(low, high) for _ in range(2)))),
                 **dict(zip(("bypass__1__base", "bypass__1__limit"),
                            sorted(rng.randint(low, high) for _ in range(2)))),
                 "bypass__0__enable": 1, "bypass__1__enable": rng.randint(0, 1)},
        lambda: {"small_threshold": rng.randint(0, tmax // 16), "stochastic": 0,
                 "ema_enable": 0, "bypass__0__enable": rng.randint(0, 1)},
    ]
    mixed = []
    for op in ops:
        if rng.random() < 0.05:
            mixed.append(("modes", choices[sum(op[0] == "modes" for op in mixed) % 4]()))
        mixed.append(op)
        if op[0] == "flush" and rng.random() < 0.5:
            mixed.append(("seed", rng.randrange(1 << 32)))   # the LFSR loads only while idle
    return mixed


#: The two configurations on lines (each build takes seconds to a minute): 2 lanes of narrow
#: ports on 2 x 2 lines, and 8 lanes of 16-bit gradients on 4 x 2 lines, whose payloads (168
#: bits in, 184 out) put lanes in every 32-bit chunk and across chunk boundaries.
LINES = {
    "lanes2": dict(lanes=2, addr_width=9, grad_width=8, sets=2, ways=2, max_updates=3,
                   fifo_depth=4, burst_size=2),
    "lanes8": dict(lanes=8, addr_width=32, grad_width=16, sets=4, ways=2, max_updates=3,
                   fifo_depth=4, burst_size=2),
}


def line_amaranth_result(params, ops, **kwargs):
    return simulate(GradientCompressor(**params), ops, **kwargs)


@needs_compiler
@pytest.mark.parametrize("name", list(LINES))
def test_lines_match_amaranth(name):
    """Random beats with masks, flushes, every run-time mode switched at random points, LFSR
    seeds, gaps in valid and DRAM backpressure: every SimResult field is the same."""
    params = LINES[name]
    ops = random_line_mode_ops(zlib.crc32(name.encode()), params, 400)
    dram = lambda: random_ready(zlib.crc32(name.encode()) + 1, probability=0.4, max_stall=6)
    expected = line_amaranth_result(params, ops, gap=stalls_and_gaps, dram_ready=dram())
    got = simulate_compiled(params, ops, gap=stalls_and_gaps, dram_ready=dram())
    # The trace reaches what it is meant to compare.
    causes = set(expected.causes)
    assert {"DIRECT", "ACCUM_THRESHOLD", "EVICTION", "FLUSH", "STOCHASTIC"} <= causes, causes
    assert expected.discards and expected.bypassed and expected.hits and expected.misses
    assert expected.dram_stall_cycles and expected.input_stall_cycles
    assert len(set(expected.accept_thresholds)) > 4, "the threshold in force should move"
    assert len(expected.writes) > len(expected.write_cycles), "line writes of several lanes"
    assert_same(expected, got)


@needs_compiler
@pytest.mark.parametrize("name", list(LINES))
def test_lines_without_modes_match_amaranth(name):
    """Modes off, DRAM on a fixed pattern, a gap before every beat; then the same build runs a
    second trace (DRAM always ready, no gaps), and a GradientCompressor instance builds the
    same simulator as its parameters."""
    params = LINES[name]
    ops = random_line_ops(zlib.crc32(name.encode()) + 2, params, 300)
    expected = line_amaranth_result(params, ops, gap=lambda i: i % 2,
                                    dram_ready=periodic_ready("1101000"))
    dut = GradientCompressor(**params)
    sim = build(dut)
    assert sim.lanes == params["lanes"]
    assert_same(expected, sim.run(ops, gap=lambda i: i % 2, dram_ready=periodic_ready("1101000")))
    assert_same(simulate(dut, ops[:60] + [("flush",)], dram_ready=every_other),
                sim.run(ops[:60] + [("flush",)], dram_ready=every_other))
    assert "MAX_UPDATES" in expected.causes
    assert_same(line_amaranth_result(params, ops[:120] + [("flush",)]),
                build(params).run(ops[:120] + [("flush",)]))


@needs_compiler
@pytest.mark.parametrize("name", list(LINES))
def test_lines_settle_in_one_delta_cycle(name):
    """The line designs are built so that CXXRTL evaluates a cycle in one delta cycle (no
    feedback through the payloads' aliases), which makes them several times faster."""
    design = (build(LINES[name]).binary.parent / "design.cc").read_text()
    assert "converged = false" not in design


@needs_compiler
def test_lines_start_and_fail_like_amaranth():
    """Reset (the first beat right after L1's clearing cycles), the widest values the ports
    take, as given, and the same failures."""
    params = LINES["lanes2"]
    ops = [("line", 510, (127, -128), 0b11, 255), ("line", 6, (-3, 3), 0b10, 2),
           ("flush",)]
    expected = line_amaranth_result(params, ops)
    assert_same(expected, simulate_compiled(params, ops))
    assert expected.accept_cycles[0] == params["sets"]
    assert expected.accepted[0] == ops[0][1:]
    ops = random_line_ops(9, params, 100)
    with pytest.raises(AssertionError, match="more than 50 cycles"):
        line_amaranth_result(params, ops, max_cycles=50)
    with pytest.raises(AssertionError, match="more than 50 cycles"):
        simulate_compiled(params, ops, max_cycles=50)
    with pytest.raises(AssertionError, match="did not reach idle within 2 cycles"):
        simulate_compiled(params, [("line", 2, (1, 1), 3, 100), ("flush",)], flush_timeout=2)


@needs_compiler
def test_line_operations_checked():
    """On lines the operations are beats of exactly `lanes` gradients; a gradient operation is
    unknown there (as in simulate), a beat is unknown on one lane, and a NumPy trace is for one
    lane."""
    params = LINES["lanes2"]
    with pytest.raises(ValueError, match="unknown operation"):
        line_amaranth_result(params, [("grad", 1, 1, 100)])
    with pytest.raises(ValueError, match="unknown operation"):
        simulate_compiled(params, [("grad", 1, 1, 100)])
    with pytest.raises(ValueError, match=r"^a beat has 2 gradients, not 3$"):
        simulate_compiled(params, [("line", 0, (1, 2, 3), 3, 100)])
    with pytest.raises(ValueError, match="unknown operation"):
        simulate_compiled(SMALL, [("line", 0, (1, 2), 3, 100)])
    np = pytest.importorskip("numpy")
    with pytest.raises(ValueError, match="one lane"):
        simulate_compiled(params, np.zeros((4, 3), dtype=np.int64))


def test_throughput_refuses_an_unwritable_out_before_simulating(capsys, tmp_path):
    from gradient_compressor.reports.cycles import main
    assert main(["--out", str(tmp_path / "no" / "such.md")]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "no such folder" in err and len(err.splitlines()) == 1
    assert main(["--out", str(tmp_path)]) == 2
    assert "a folder, not a file" in capsys.readouterr().err
