"""The compressor on lines built with the whole-line rule (``GradientCompressor(lanes=N,
whole_line=True)``) against the line model's rule (``LineModel(whole_line=True)``): L1's line
writes write for write, DRAM per address after each flush, in every run-time mode under DRAM
backpressure; ``idle`` only when every address has what was accepted for it; never more line
transfers to DRAM than beats accepted; and that the line writes are ``grad_width`` bits a
value from L1 to DRAM, L2's write combining included."""

import random
from collections import Counter

import pytest
from amaranth.sim import Simulator

from gradient_compressor.design import GradientCompressor
from gradient_compressor.design.params import DEFAULTS

from .line_helpers import (GEOMETRY, MODES, check_with_the_model, drive_line_steps, line_write,
                           per_address, random_steps)

#: The geometries run: the small one of the line tests (2 x 2 lines, an L2 of 4, max_updates
#: 3: evictions, max_updates writes and L2 backpressure are frequent) and the default one.
GEOMETRIES = {"small": GEOMETRY, "default": dict(DEFAULTS)}


def beat_lines(geometry):
    """Line numbers for random beats on ``geometry``: 8 lines on the small one; on the default
    one 10 lines in each of 2 sets (a set holds 4), so that beats hit, miss and evict."""
    if geometry is GEOMETRY:
        return range(8)
    sets = geometry["sets"]
    return [s + k * sets for s in (0, 5) for k in range(10)]


def simulate(lanes, steps, modes, *, geometry=GEOMETRY, ready=lambda cycle: True, limit=3000):
    """Run ``steps`` (lists of beats ``(line, grads, mask, threshold)``, each ended by a flush
    barrier) through the compressor of ``lanes`` on ``geometry`` built with the whole-line
    rule, checking in every cycle that

    * while ``idle`` is high, every address has received in DRAM writes and discards exactly
      the gradients accepted for it (the events of the cycles before);
    * the line writes DRAM has taken never outnumber the beats accepted (with a lane masked),
      and L1's line writes pushed into L2 plus the lines it holds never do either (the rule's
      bound).

    Returns L1's line writes (as pushed to L2), the DRAM writes ``(addr, value)`` per lane,
    the discards ``(addr, error)``, and the counts of beats accepted and of DRAM line
    transfers."""
    dut = GradientCompressor(lanes=lanes, whole_line=True, **geometry)
    # The line writes have the input's format, a gradient's width a value, from L1 to DRAM:
    # every DRAM value fits grad_width bits by the port's width.
    gw = geometry["grad_width"]
    assert [len(write.values[0]) for write in (dut.l1.push.p, dut.dram_out.p)] == [gw, gw]
    l1_writes, dram, discards = [], [], []
    balance = Counter()        # per address: accepted - written to DRAM - discarded
    counts = Counter()         # beats accepted, DRAM line transfers

    async def testbench(ctx):
        cycle = 0

        async def tick():
            nonlocal cycle
            ctx.set(dut.dram_out.ready, ready(cycle))
            # The events of the cycles before: idle says nothing accepted is inside.
            if ctx.get(dut.idle):
                assert not +balance and not -balance, (cycle, dict(balance))
            beat = dut.grad_in
            if ctx.get(beat.valid) and ctx.get(beat.ready):
                mask, line = ctx.get(beat.p.mask), ctx.get(beat.p.addr)
                counts["beats"] += mask != 0
                for i in range(lanes):
                    if mask >> i & 1:
                        balance[line + i] += ctx.get(beat.p.grads[i])
            push = dut.l1.push
            if ctx.get(push.valid) and ctx.get(push.ready):
                l1_writes.append(line_write(ctx, push.p, lanes))
            if ctx.get(dut.dram_out.valid) and ctx.get(dut.dram_out.ready):
                counts["transfers"] += 1
                p, mask = dut.dram_out.p, ctx.get(dut.dram_out.p.mask)
                for i in range(lanes):
                    if mask >> i & 1:
                        dram.append((ctx.get(p.addr) + i, ctx.get(p.values[i])))
                        balance[dram[-1][0]] -= dram[-1][1]
            for i in range(lanes):
                if ctx.get(dut.discard) >> i & 1:
                    discards.append((ctx.get(dut.discard_addr) + i,
                                     ctx.get(dut.discard_error[i])))
                    balance[discards[-1][0]] -= discards[-1][1]
            # The bound: a beat writes its line or allocates it (lines held: l1_valid_count).
            assert counts["transfers"] <= counts["beats"], cycle
            assert len(l1_writes) + ctx.get(dut.l1_valid_count) <= counts["beats"], cycle
            await ctx.tick()
            cycle += 1

        await drive_line_steps(ctx, dut, steps, modes, tick, limit)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    return l1_writes, dram, discards, counts


def check_run(lanes, geometry, mode, seed, *, steps=3, beats=25):
    """Random beats in ``mode`` through the compressor of ``lanes`` on ``geometry`` (a name of
    :data:`GEOMETRIES`) with DRAM stalling about 4 cycles in 10; compare with the model."""
    params = GEOMETRIES[geometry]
    rng = random.Random(f"whole-{lanes}-{geometry}-{mode}-{seed}")
    run = random_steps(rng, lanes, steps, beats, geometry=params, lines=beat_lines(params))
    # ... and a step of beats of small lanes alone to 3 x ways lines of set 0, which allocate
    # their lines and evict (random beats of 8 lanes nearly always hold a direct lane, and a
    # beat that writes its line allocates nothing).
    run.append([(k * params["sets"] * lanes,
                 [rng.choice([-1, 1]) * rng.randint(10, 14) for _ in range(lanes)],
                 2 ** lanes - 1, 90) for k in range(3 * params["ways"])])
    stall = [rng.random() < 0.4 for _ in range(11)]
    l1_writes, dram, discards, counts = simulate(
        lanes, run, MODES[mode], geometry=params, ready=lambda cycle: not stall[cycle % 11])
    # L1's line writes are the model's, write for write; DRAM per address and the discards
    # are the model's, and with the discards every address has what was accepted for it.
    assert l1_writes == check_with_the_model(lanes, run, MODES[mode], dram, discards,
                                             whole_line=True, geometry=params)
    # Every value L1 writes and DRAM takes fits grad_width bits (as the ports' widths say).
    top = 2 ** (params["grad_width"] - 1)
    assert all(-top <= value < top for write in l1_writes for value in write.values)
    assert all(-top <= value < top for _, value in dram)
    assert counts["transfers"] <= counts["beats"]
    return l1_writes


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("lanes", [2, 8])
def test_whole_line_compressor_is_the_model_on_the_small_geometry(lanes, mode):
    writes = check_run(lanes, "small", mode, 0)
    assert any("LINE" in write.causes for write in writes)     # lanes carried along


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("lanes", [2, 8])
def test_whole_line_compressor_is_the_model_on_the_default_geometry(lanes, mode):
    check_run(lanes, "default", mode, 0, steps=2, beats=80)


def test_the_compressor_passes_the_rule_to_its_line_l1_and_its_model():
    # (One lane takes it too: tests/test_compressor.py.)
    from gradient_compressor.design.params import Config
    from gradient_compressor.model import LineModel
    assert GradientCompressor(lanes=4).l1.whole_line      # the default
    assert not GradientCompressor(lanes=4, whole_line=False).l1.whole_line
    assert LineModel.of(Config(lanes=4)).whole_line
    assert not LineModel.of(Config(lanes=4, whole_line=False)).whole_line


def test_write_combining_merges_whole_line_writes():
    """Direct beats to one line back to back while DRAM waits: L2 merges the whole-line
    writes as it merges the line policy's (the flush barrier starts the drain, so the first
    write leaves for the output register and the rest merge into the next): values of 10 at
    grad_width 8, whose sums (at most 50) keep fitting a bit less than a value."""
    lanes = 4
    steps = [[(8, [10, -10, 0, 0], 0b0011, 10)] * 6]
    l1_writes, dram, _, counts = simulate(lanes, steps, {}, ready=lambda cycle: cycle > 30)
    assert len(l1_writes) == 6 and counts["beats"] == 6
    assert per_address(dram) == {8: 60, 9: -60}
    assert counts["transfers"] == 2          # two line writes of two lanes, not six


def test_write_combining_stops_where_a_sum_could_leave_grad_width():
    """Direct beats of 40 at grad_width 8 (values -128 .. 127): L2 merges two (40 + 40 = 80
    fits), not a third into their 80 (80 does not fit 7 bits, so 120 might not fit 8: the
    test is on the values, no adder in front of it)."""
    lanes = 4
    steps = [[(8, [40, -40, 0, 0], 0b0011, 10)] * 6]
    l1_writes, dram, _, counts = simulate(lanes, steps, {}, ready=lambda cycle: cycle > 30)
    assert len(l1_writes) == 6
    assert per_address(dram) == {8: 240, 9: -240}
    assert [value for addr, value in dram if addr == 8] == [40, 80, 80, 40]
    assert counts["transfers"] == 4


def test_l2_merges_keep_values_within_grad_width():
    """Three direct beats of 100 to one line while DRAM waits (grad_width 8: values in -128 ..
    127): each of L1's writes fits, and L2 does not merge them into a write of 200 (it merges
    a lane only where both values fit grad_width - 1 bits, so that the sum fits grad_width):
    three DRAM writes of 100."""
    lanes = 2
    top = 2 ** (GEOMETRY["grad_width"] - 1)
    steps = [[(0, [100, 0], 0b01, 10)] * 3]
    l1_writes, dram, _, counts = simulate(lanes, steps, {}, ready=lambda cycle: cycle > 30)
    assert [write.values[0] for write in l1_writes] == [100, 100, 100]
    assert per_address(dram) == {0: 300}
    assert all(-top <= value < top for _, value in dram), dram
    assert dram == [(0, 100)] * 3 and counts["transfers"] == 3


def test_the_compiled_simulator_builds_the_rule():
    """The compiled simulator of a configuration with ``whole_line`` runs the whole-line rule:
    the same SimResult as the Amaranth simulator's, and per address the model's writes."""
    import dataclasses
    from gradient_compressor.model import LineModel
    from gradient_compressor.simulation.cxxrtl import compiler_available, simulate_compiled
    from gradient_compressor.simulation.driver import random_ready, simulate as drive
    if not compiler_available():
        pytest.skip("no C++ compiler (g++) on the path: the compiled simulator cannot be built")
    lanes = 2
    params = dict(GEOMETRY, lanes=lanes, whole_line=True)
    rng = random.Random("compiled")
    ops = [("modes", MODES["stochastic"])]
    for beats in random_steps(rng, lanes, steps=2, beats=40):
        ops += [("line", *beat) for beat in beats] + [("flush",)]
    expected = drive(GradientCompressor(**params), ops, dram_ready=random_ready(3, 0.4))
    got = simulate_compiled(params, ops, dram_ready=random_ready(3, 0.4))
    for field in dataclasses.fields(expected):
        assert getattr(got, field.name) == getattr(expected, field.name), field.name
    model = LineModel.of(params).run(ops)
    assert per_address(got.writes) == per_address(
        (w.addr, w.value) for write in model for w in write.writes())
    assert "LINE" in {cause for write in model for cause in write.causes}


def test_a_counterexample_of_the_whole_line_check_replays_with_the_rule(tmp_path):
    """The check of the compressor with the rule from reset (``whole-lines2-bmc``) catches a
    whole-line mutant (a written line that leaves its held lanes behind: their sums are lost),
    and its counterexample replays on the compressor built with the rule (the job's
    configuration holds ``whole_line``): the mutant breaks conservation there, the design does
    not."""
    import dataclasses
    import json
    from gradient_compressor.proofs.jobs import job_by_name
    from gradient_compressor.proofs.line_replay import (check_line_steps, input_port_names,
                                                        read_port_steps)
    from gradient_compressor.proofs.mutants import apply_mutant
    from gradient_compressor.proofs.replay import _factory
    from gradient_compressor.proofs.run import run_job
    dest = apply_mutant("line_write_leaves_a_held_lane", str(tmp_path / "mutant"))
    job = dataclasses.replace(job_by_name("whole-lines2-bmc"), design_path=dest,
                              name="test-whole-lines2-bmc-mutant")
    result = run_job(job, work=str(tmp_path / "work"))
    assert result["status"] == "FAIL", result
    # The replay's configuration is the job's, as its folder records it.
    with open(tmp_path / "work" / job.name / "props.json") as f:
        config = json.load(f)["config"]
    assert config["whole_line"] is True and config["lanes"] == 2
    steps = read_port_steps(result["witness"], input_port_names(config))
    errors, _ = check_line_steps(_factory(config, dest), steps)
    assert any("address" in e and "accepted" in e for e in errors), errors
    assert check_line_steps(_factory(config), steps)[0] == []
