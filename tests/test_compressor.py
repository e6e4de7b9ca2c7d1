"""End-to-end simulation of GradientCompressor against the reference model."""

from collections import Counter, defaultdict

import pytest
from amaranth.sim import Simulator
from hypothesis import HealthCheck, given, settings, strategies as st

from gradient_compressor.design import GradientCompressor
from gradient_compressor.model import ReferenceModel
from gradient_compressor.simulation import always, every_other, simulate

from gradient_compressor.workloads.seed import seed_phases

from .directed import DIRECTED


def per_address(pairs):
    sums = defaultdict(int)
    for addr, value in pairs:
        sums[addr] += value
    return {addr: value for addr, value in sums.items() if value != 0}


def check_against_model(dut, ops, result):
    """The RTL accepted every gradient in order and wrote exactly what the model writes."""
    grads = [op[1:] for op in ops if op[0] == "grad"]
    assert result.accepted == grads
    model = ReferenceModel(sets=dut.sets, ways=dut.ways, max_updates=dut.max_updates,
                           grad_width=dut.grad_width)
    expected = model.run(ops)
    assert result.writes == [(w.addr, w.value) for w in expected]
    assert result.causes == [w.cause for w in expected]
    accepted = per_address((addr, grad) for addr, grad, _ in grads)
    assert per_address(result.writes) == accepted
    assert {addr for addr, _ in result.writes} <= {addr for addr, _, _ in grads}
    return Counter(result.causes)


SEED_PHASES = dict(seed_phases())
SEED_CAUSES = {   # worked out by hand from the phase descriptions, threshold 50
    "S1": {"FLUSH": 32},                         # 10 x 4 = 40 < 50: all held until the flush
    "S2": {"DIRECT": 320},
    "S3": {"FLUSH": 32},                         # one address per set: no conflict at all
    "S4": {"ACCUM_THRESHOLD": 32},               # 15 + 40 = 55 >= 50
    "S5": {"EVICTION": 32, "FLUSH": 128},        # a fifth tag in each of the 32 full sets
    "S6": {"ACCUM_THRESHOLD": 10, "FLUSH": 1},   # 2 x 25 = 50 crosses before max_updates
}


@pytest.mark.parametrize("phase", SEED_CAUSES)
@pytest.mark.parametrize("dram_ready", [always, every_other], ids=["dram_always", "dram_half"])
def test_seed_scenario(phase, dram_ready):
    """The seed's six stress scenarios, each alone and flushed, write by write."""
    [name] = [name for name in SEED_PHASES if name.startswith(phase + " ")]
    dut = GradientCompressor()
    ops = [("grad", addr, grad, 50) for addr, grad in SEED_PHASES[name]] + [("flush",)]
    causes = check_against_model(dut, ops, simulate(dut, ops, dram_ready=dram_ready))
    assert causes == SEED_CAUSES[phase]


def test_whole_seed_stimulus():
    """All eleven phases in one run, flushed once at the end (the seed's 1448 gradients)."""
    dut = GradientCompressor()
    ops = [("grad", a, g, 50) for _, pairs in seed_phases() for a, g in pairs] + [("flush",)]
    assert len(ops) == 1449
    check_against_model(dut, ops, simulate(dut, ops))


@pytest.mark.parametrize("name", DIRECTED)
@pytest.mark.parametrize("dram_ready", [always, every_other], ids=["dram_always", "dram_half"])
def test_directed_scenario(name, dram_ready):
    dut = GradientCompressor()
    ops = DIRECTED[name]() + [("flush",)]
    causes = check_against_model(dut, ops, simulate(dut, ops, dram_ready=dram_ready))
    expected = {
        "pure_accumulation":      {"ACCUM_THRESHOLD": 32, "FLUSH": 32},
        "outlier_bypass":         {"DIRECT": 19},
        "address_conflict":       {"EVICTION": 14, "FLUSH": 4},
        "accumulation_overflow":  {"ACCUM_THRESHOLD": 3},
        "full_capacity_eviction": {"EVICTION": 32, "FLUSH": 128},
        "max_updates_flush":      {"MAX_UPDATES": 1, "FLUSH": 1},
    }[name]
    assert causes == expected


# -- random streams ----------------------------------------------------------------------------

configs = st.fixed_dictionaries({
    "sets":        st.sampled_from([1, 2, 4]),
    "ways":        st.sampled_from([1, 2, 4]),
    "max_updates": st.sampled_from([1, 2, 3, 255]),
    "fifo_depth":  st.sampled_from([1, 2, 4, 8]),
    "burst_frac":  st.sampled_from([0.0, 0.5, 1.0]),
})


@st.composite
def streams(draw):
    config = draw(configs)
    threshold = draw(st.sampled_from([0, 1, 50, 1000, 32768, 65535]))
    near = st.integers(-threshold - 2, threshold + 2).filter(lambda v: -32768 <= v <= 32767)
    values = st.one_of(near, st.sampled_from([-32768, 32767, 0, 1, -1]),
                       st.integers(-32768, 32767))
    # Few tags in few sets, so that hits, conflicts and evictions all happen.
    addrs = st.builds(lambda tag, index: tag * config["sets"] + index,
                      st.integers(0, 5), st.integers(0, config["sets"] - 1))
    ops = []
    for _ in range(draw(st.integers(1, 4))):          # steps, each ended by a flush
        for _ in range(draw(st.integers(0, 40))):
            ops.append(("grad", draw(addrs), draw(values), threshold))
            if draw(st.integers(0, 9)) == 0:          # a threshold change mid-step
                threshold = draw(st.integers(0, 65535))
        ops.append(("flush",))
        threshold = draw(st.sampled_from([0, 3, 50, 40000, draw(st.integers(0, 65535))]))
    gaps = draw(st.lists(st.integers(0, 3), min_size=1, max_size=8))
    # DRAM ready pattern: runs of ready and of stalls (long ones included).
    runs = draw(st.lists(st.tuples(st.integers(1, 6), st.integers(0, 40)), min_size=1, max_size=6))
    pattern = [r for ready, stall in runs for r in [True] * ready + [False] * stall]
    return config, ops, gaps, pattern


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams())
def test_random_stream(stream):
    config, ops, gaps, pattern = stream
    depth = config.pop("fifo_depth")
    burst = max(1, round(depth * config.pop("burst_frac")))
    dut = GradientCompressor(addr_width=8, fifo_depth=depth, burst_size=burst, **config)
    result = simulate(dut, ops, gap=lambda i: gaps[i % len(gaps)],
                      dram_ready=lambda cycle: pattern[cycle % len(pattern)])
    check_against_model(dut, ops, result)


# -- throughput ------------------------------------------------------------------------------

THROUGHPUT_STREAMS = {
    "one_address":   [("grad", 7, 1, 50)] * 100,
    "one_address_crossing": [("grad", 7, 13, 50)] * 100,
    "one_set":       [("grad", 5 + 32 * (i % 9), 3, 50) for i in range(100)],
    "direct":        [("grad", i, 1000, 50) for i in range(100)],
    "mixed":         [("grad", (i * 37) % 300, (i * 7919) % 131 - 65, 50) for i in range(300)],
}


@pytest.mark.parametrize("name", THROUGHPUT_STREAMS)
def test_one_gradient_per_cycle(name):
    ops = THROUGHPUT_STREAMS[name] + [("flush",)]
    dut = GradientCompressor()
    result = simulate(dut, ops, dram_ready=always)
    n = len(ops) - 1
    # After the L1 clears its SRAM (``sets`` cycles), every offered gradient is taken at once.
    assert result.accept_cycles == list(range(dut.sets, dut.sets + n))
    assert result.input_stall_cycles == dut.sets     # only while the SRAM is cleared
    check_against_model(dut, ops, result)


# -- a flush dropped before the barrier completes ----------------------------------------------

@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_flush_dropped_early_loses_nothing(data):
    """``flush`` pulses shorter than a barrier (the L1 scan stops after its current set and
    normal work resumes): a final, complete flush still writes out exactly what was accepted."""
    steps = data.draw(st.lists(st.tuples(
        st.lists(st.tuples(st.integers(0, 23), st.integers(-60, 60)), max_size=12),
        st.integers(1, 12)), min_size=1, max_size=6))
    stall = data.draw(st.lists(st.booleans(), max_size=7)) + [False]   # DRAM ready sometimes
    dut = GradientCompressor(addr_width=8, sets=4, ways=2, max_updates=5, fifo_depth=4,
                             burst_size=2)
    accepted, written = [], []

    async def testbench(ctx):
        cycle = 0

        async def tick():
            nonlocal cycle
            ctx.set(dut.dram_out.ready, not stall[cycle % len(stall)])
            if ctx.get(dut.grad_in.valid) and ctx.get(dut.grad_in.ready):
                accepted.append((ctx.get(dut.grad_in.p.addr), ctx.get(dut.grad_in.p.grad)))
            if ctx.get(dut.dram_out.valid) and ctx.get(dut.dram_out.ready):
                written.append((ctx.get(dut.dram_out.p.addr), ctx.get(dut.dram_out.p.value)))
            await ctx.tick()
            cycle += 1

        ctx.set(dut.threshold, 50)
        for grads, pulse in steps:
            for addr, grad in grads:
                ctx.set(dut.grad_in.p.addr, addr)
                ctx.set(dut.grad_in.p.grad, grad)
                ctx.set(dut.grad_in.valid, 1)
                for _ in range(1000):
                    if ctx.get(dut.grad_in.ready):
                        break
                    await tick()
                else:
                    raise AssertionError("grad_in.ready stayed low for 1000 cycles")
                await tick()
                ctx.set(dut.grad_in.valid, 0)
            ctx.set(dut.flush, 1)                 # a pulse, usually too short for idle
            for cycle in range(pulse):
                # grad_in.ready is a register: it sees flush from the pulse's second cycle on.
                assert cycle == 0 or not ctx.get(dut.grad_in.ready)
                await tick()
            ctx.set(dut.flush, 0)
        ctx.set(dut.flush, 1)
        for _ in range(500):
            if ctx.get(dut.idle):
                break
            await tick()
        assert ctx.get(dut.idle)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    assert len(accepted) == sum(len(grads) for grads, _ in steps)
    assert per_address(written) == per_address(accepted)


def test_deadlock_fails_instead_of_hanging():
    # With DRAM never ready, L2 (2 writes) and L1's output queue (8) fill with direct writes
    # and the eleventh gradient is never taken: the driver gives up with a message that says
    # what it waited for.
    dut = GradientCompressor(sets=2, ways=1, fifo_depth=2, burst_size=1, addr_width=4,
                             grad_width=4, max_updates=3)
    assert dut.l1.QUEUE_DEPTH == 8
    with pytest.raises(AssertionError, match="gradient #10 waited more than 20 cycles for "
                                             "grad_in.ready"):
        simulate(dut, [("grad", 1, 1, 0)] * 11, dram_ready=lambda cycle: 0, ready_timeout=20)


@pytest.mark.parametrize("addrs, cycles", [([0], 10), ([31], 72), (list(range(128)), 199)])
def test_flush_latency_formula(addrs, cycles):
    # docs/synth.md: flush raised in cycle f, last gradient accepted in a, idle rises after
    # max(f + 1, a + 5) - f + 1 + sum(2 + v_s for s in 0 .. s_last) + 2 cycles; the driver
    # raises flush in a + 1 (so the first term is 4). Default configuration, entries held
    # (threshold the largest): one in set 0, one in set 31, one in every way of every set.
    dut = GradientCompressor()
    top = (1 << (dut.grad_width - 1)) - 1
    result = simulate(dut, [("grad", a, 1, top) for a in addrs] + [("flush",)])
    valid = Counter(a % dut.sets for a in addrs)
    s_last = max(valid)
    assert cycles == 4 + 1 + sum(2 + valid[s] for s in range(s_last + 1)) + 2
    assert result.flush_cycles == [cycles]


# -- the whole-line rule ---------------------------------------------------------------------

@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams())
def test_random_stream_under_the_whole_line_rule(stream):
    """``GradientCompressor(whole_line=True)`` writes what ``ReferenceModel(whole_line=True)``
    writes, record for record and cause for cause, under DRAM backpressure; a record's value
    is ``grad_width`` bits, from L1's push to ``dram_out`` (so every value written fits them);
    and DRAM never receives more records than gradients were accepted."""
    config, ops, gaps, pattern = stream
    depth = config.pop("fifo_depth")
    burst = max(1, round(depth * config.pop("burst_frac")))
    dut = GradientCompressor(addr_width=8, fifo_depth=depth, burst_size=burst, whole_line=True,
                             **config)
    assert (len(dut.l1.push.p.value) == dut.writeback.value_width == len(dut.dram_out.p.value)
            == dut.grad_width)
    result = simulate(dut, ops, gap=lambda i: gaps[i % len(gaps)],
                      dram_ready=lambda cycle: pattern[cycle % len(pattern)])
    expected = ReferenceModel.of(dut.config).run(ops)
    assert result.writes == [(w.addr, w.value) for w in expected]
    assert result.causes == [w.cause for w in expected]
    grads = [op[1:] for op in ops if op[0] == "grad"]
    assert per_address(result.writes) == per_address((a, g) for a, g, _ in grads)
    assert len(result.writes) <= len(grads)


def test_the_whole_line_rule_is_not_the_seeds_on_one_lane():
    """A direct gradient that hits a held entry carries its sum under the rule (one record),
    where the seed's policy writes it alone and the sum waits for the flush (two)."""
    ops = [("grad", 3, 10, 50), ("grad", 3, 100, 50), ("flush",)]
    for whole_line, records in ((False, [(3, 100), (3, 10)]), (True, [(3, 110)])):
        dut = GradientCompressor(sets=4, ways=2, addr_width=8, whole_line=whole_line)
        assert simulate(dut, ops).writes == records
