"""The proof jobs: which harness, configuration, mode and depth each one runs."""

import os
from dataclasses import dataclass, asdict, replace

from gradient_compressor.properties.base import COMPONENT_GROUPS
from gradient_compressor.properties.component import COMPONENTS, POLICY_WIDTH, instances
from gradient_compressor.properties.harness import CONFIGS, L1_GROUPS
from gradient_compressor.properties.liveness import l2_place_period

__all__ = ["Job", "ONE_JOB_EACH", "COMPONENT_JOBS", "PROVE_JOBS", "SEED_JOBS", "BMC_JOBS",
           "COVER_JOBS", "SEED_COVER_JOBS",
           "WHOLE_LINE_ONE_LANE_JOBS", "WHOLE_LINE_ONE_LANE_BMC",
           "PROVE_LINES_JOBS", "LINE_SYSTEM_JOBS", "LINE_SYSTEM_QUEUE",
           "all_jobs", "job_by_name", "reset_check", "slowest_first", "liveness_depth",
           "termination_depth"]

#: The safety property groups (properties/base.py GROUPS).
SAFETY = ["stream", "conservation", "storage", "idle", "valid_count", "overflow", "unique_tag",
          "pipeline", "forwarding", "policy", "counters", "dual_threshold", "ema", "bypass",
          "throughput"]
#: The system's own safety groups: proven on the whole compressor, with L1's contract
#: (``L1_GROUPS``, proven on L1 alone: ``alone`` jobs, named ``l1-...``) and every other
#: component's assumed.
SYSTEM_SAFETY = [g for g in SAFETY if g not in L1_GROUPS]
#: Property groups proven together, one k-induction job each (job name: groups), on the
#: scaled configurations (``SPLIT``), on L1 alone and on the system ...
SCALED_GROUPS = {"conservation": ["conservation"],
                 "pipeline": ["pipeline", "valid_count", "overflow", "unique_tag",
                              "dual_threshold"],
                 "forwarding": ["forwarding"], "policy": ["policy"]}
SCALED_SYSTEM_GROUPS = {"safety": ["stream", "idle", "counters", "throughput"],
                        "modes": ["ema", "bypass"]}
#: ... and on the others, where one job proves every group of L1's but conservation, and
#: conservation is a job of its own (on small as one job 62 s, 13 + 23 s as two);
#: on the system, one job proves its groups, and the whole-storage facts are a job of their own.
#: ``storage`` exists only where the whole storage is read (``WHOLE_STORAGE``).
SMALL_GROUPS = {"safety": [g for g in L1_GROUPS if g != "conservation"],
                "conservation": ["conservation"]}
SMALL_SYSTEM_GROUPS = {"safety": [g for g in SYSTEM_SAFETY if g != "storage"],
                       "storage": ["storage"]}
#: On the scaled configurations (``SPLIT``) these groups are proven in several jobs, each
#: entry one job: a property, or a tuple of properties that are quick together (the others
#: assumed for the past cycles, as in every focused job; properties/base.py). Apart they take
#: seconds there, where the group as one job did not finish: conservation's balance in 10
#: minutes (it is composed of per-cycle steps through same-cycle lemmas, docs/proofs.md);
#: policy's induction in 16 on large; termination took 323-766 s on default as one job, 94 s
#: as five. Four of conservation's properties took 29 s on default as four jobs, 12 s as
#: one; seven of policy's 46 s and 10 s. A name that holds a parameter is a
#: pattern.
ONE_JOB_EACH = {
    "conservation": ["model_decision_conserves_the_tracked_address",
                     "model_step_conserves_the_tracked_address", "held_step",
                     ("stages_step", "queue_step", "accepted_eq_l1_plus_pipeline_plus_queued",
                      "idle_implies_accepted_eq_queued")],
    "policy": ["decision_writes_what_the_model_writes",
               "tracked_set_way0_is_the_models_after_init",
               "tracked_set_way1_is_the_models_after_init",
               "tracked_set_way2_is_the_models_after_init",
               "tracked_set_way3_is_the_models_after_init", "hit_miss_strobes_are_the_models",
               ("model_holds_each_tag_at_most_once", "flush_writes_what_the_model_writes",
                "no_other_write_names_the_tracked_set",
                "tracked_set_victim_is_the_models_after_init", "model_empty_while_init",
                "scan_stops_after_its_set_when_flush_drops", "discard_strobe_is_the_models")],
    "termination": ["measure_never_grows_under_flush", "measure_falls_once_in_every_K+1_cycles",
                    "measure_at_most_its_maximum", "flush_time_bounded_by_measure_fallen",
                    "flush_idle_within_B_*"],
}
SPLIT = ("default", "large")
#: Per-job settings where the defaults did not finish: (configuration, property) -> Job fields.
#: ``solver``: yices did not finish the induction in 10 minutes, z3 takes seconds (hit_miss:
#: yices is as quick as z3 with 2 ways, and does not finish with 4, even on 4 sets).
#: ``shared_read``: the harness reads s3's set through the tracked set's port when the two are
#: equal (``h.current``); with it z3 proves hit_miss in 3-4 s (not done in 10 minutes
#: without). Not used everywhere: it slowed default-termination-K2 from 5 to 13 minutes.
_HIT_MISS = dict(solver="z3", shared_read=True)
TUNING = {("large", "conservation/model_decision_conserves_the_tracked_address"): dict(solver="z3"),
          ("default", "policy/hit_miss_strobes_are_the_models"): _HIT_MISS,
          ("large", "policy/hit_miss_strobes_are_the_models"): _HIT_MISS}
#: Jobs that smtbmc proves quicker without ``--unroll`` (SymbiYosys's default with yices),
#: measured two at a time on this machine, each against itself with it: l1-default-pipeline
#: 17 s against 25, l1-large-policy-3 8 against 15, l1-default-policy-2 12 against 16 (the
#: others within a few seconds). The choice does not carry over between harnesses or depths:
#: on L1 alone l1-large-policy-0 takes 28 s with it and 50 without, where on the system it was
#: the other way round (30 against 53); large-termination-K2-0 was quicker without it at the
#: progress depth, and is quicker with it at its own (11 s against 21).
NO_UNROLL = {"l1-default-pipeline", "l1-large-policy-3", "l1-default-policy-2",
             "l1-large-forwarding", "l1-default-policy-1", "l1-default-conservation-2",
             "large-termination-K2-3"}
#: Jobs that smtbmc proves quicker with ``--stbv`` (the state of a step as bit vectors, not
#: uninterpreted functions), measured one at a time on this machine, CPU seconds against
#: themselves without it: the progress inductions (default-progress-K2 26 against 50,
#: assoc-progress-K3 9 against 37, mid and small about half) and the covers of the smaller
#: geometries (mid-cover 12 against 18, assoc-cover and small-cover 7 against 10,
#: small-storage 16 against 19). It is not a general gain: default-termination-K2-0 took 40
#: against 11, default-modes and default-safety twice as long, and on L1's arrays at large
#: (l1-large-policy-0, large-progress-K2's base case) and on l1-default-forwarding it did not
#: finish in minutes.
STBV = {"default-progress-K2", "assoc-progress-K3", "mid-progress-K2", "small-progress-K2",
        "mid-cover", "assoc-cover", "small-cover", "small-storage"}
#: Liveness groups (with DRAM fairness K).
LIVENESS = [["progress"], ["termination"]]
#: Configurations proven by k-induction, and their DRAM fairness K.
PROVEN = {"small": 2, "dm": 2, "assoc": 3, "mid": 2, "default": 2, "large": 2}
#: Configurations small enough to read all of their storage (global facts proven directly).
WHOLE_STORAGE = ("small", "dm", "assoc")
#: Bounded checks from reset (make bmc): depth, per configuration.
BMC_DEPTH = 10
#: ... and of the compressor on lines: INIT, a beat through the pipeline, L1's output register
#: and L2 to DRAM, a discard and idle again (its cover, reached in step 11), and one step more.
#: Each step costs several times the one before: 14 steps took 320 s, 13 take 45 s.
LINE_BMC_DEPTH = 13


@dataclass
class Job:
    name: str
    config: str
    mode: str                 # "prove" (k-induction), "bmc", "cover", or "sim" (covers
                              # reached by simulating the harness, proofs/simulate.py)
    depth: int
    focus: list = None        # groups / "group/name" asserted, "-group/name" not (None: all)
    fairness: int = None      # K (liveness jobs)
    whole_storage: bool = False
    memories: str = "arrays"  # "arrays" (SMT arrays) or "flops" (memory_map)
    reset: str = "any"
    covers: object = False    # True, or a list of cover names
    timeout: int = 1200
    design_path: str = None   # a directory holding a (mutant) copy of design/
    assume_others: bool = True  # outside the focus: assume (past cycles) or drop
    stimulus: str = None      # directed input sequence (properties.covers.STIMULI): deep covers, mutant checks
    skip: int = 0             # cover jobs: steps not checked (SymbiYosys ``skip``)
    unroll: bool = True       # smtbmc --unroll (SymbiYosys's default with yices) or --nounroll
    stbv: bool = False        # smtbmc --stbv: each step's state as bit vectors (STBV)
    solver: str = None        # "yices" or "z3" (None: proofs.gen.solver's choice)
    shared_read: bool = False  # harness: s3's set read through the tracked set's port (TUNING)
    component: str = None     # a component proven alone (properties.component), not the system
    geometry: dict = None     # the configuration's parameters, where ``config`` is not one of
                              # properties.harness.CONFIGS (the geometry sweep)
    alone: bool = False       # L1 alone (properties.harness.L1Alone: its contract, L1_GROUPS)
    witness: str = None       # sim jobs: a recorded run (proofs/witnesses/) drives the inputs
    lanes: int = 1            # > 1: the compressor on lines (properties.line_harness.LineHarness),
                              # or with ``alone`` the line L1 alone (its contract on lines)
    vcd: bool = True          # False: no VCD of a trace of yices, whose replay with z3 writes
                              # the VCD read (the mutation check)
    whole_line: bool = False  # L1 (one lane or lines) deciding by the whole-line rule, alone
                              # (L1Accumulator / LineAccumulator(whole_line=True)), or the
                              # compressor built with it (GradientCompressor(whole_line=True))

    @property
    def parameters(self):
        """The configuration's parameters (keyword arguments of GradientCompressor)."""
        return self.geometry or CONFIGS[self.config]

    @property
    def properties(self):
        if self.lanes > 1 and self.alone:
            rule = ", whole-line rule" if self.whole_line else ""
            return f"l1 alone on lines of {self.lanes}{rule}: " + (
                "covers" if self.mode == "cover" else _named(list(self.focus)))
        if self.lanes > 1 and self.config == "lines":
            rule = ", whole-line rule" if self.whole_line else ""
            return f"lines of {self.lanes}{rule}: " + ("covers" if self.mode == "cover"
                                                       else "lines")
        if self.lanes > 1:
            if self.mode == "cover":
                return f"system on lines of {self.lanes}: covers"
            but = [g[1:].partition("/")[2] for g in self.focus if g.startswith("-")]
            return (f"system on lines of {self.lanes}: " +
                    _named([g for g in self.focus if not g.startswith("-")]) +
                    (f" except {','.join(but)}" if but else ""))
        if self.component:
            groups = sorted({g for g, c in COMPONENT_GROUPS.items() if c == self.component} |
                            set(COMPONENTS[self.component].shares))
            if self.focus:
                groups = [g for g in self.focus if not g.startswith("-")]
            but = [g[1:].partition("/")[2] for g in self.focus or () if g.startswith("-")]
            return f"{self.component} alone: " + ("covers" if self.mode == "cover"
                                                  else _named(groups)) + \
                (f" except {','.join(but)}" if but else "")
        if self.mode in ("cover", "sim"):
            if self.witness:
                return f"covers, recorded run {os.path.basename(self.witness)}"
            return f"covers, {self.stimulus} stimulus" if self.stimulus else "covers"
        if self.alone:
            rule = ", whole-line rule" if self.whole_line else ""
            return f"l1 alone{rule}: " + _named(list(self.focus or L1_GROUPS))
        groups = list(self.focus) if self.focus else list(SAFETY)
        if self.fairness and not self.focus:
            groups += ["progress", "termination"]
        but = [g[1:].partition("/")[2] for g in groups if g.startswith("-")]
        named = [g for g in groups if not g.startswith("-")]
        safety = [g for g in named if g in SAFETY]
        if len(safety) > len(SAFETY) // 2:     # most of them: say which are not
            left = [g for g in SAFETY if g not in safety]
            named = (["safety" + (f" but {', '.join(left)}" if left else "")] +
                     [g for g in named if g not in SAFETY])
        return _named(named) + (f" except {','.join(but)}" if but else "")

    def to_dict(self):
        return asdict(self)


def _named(names):
    """Groups and properties, each group named once ("policy/a, b")."""
    text = []
    for name in names:
        group, _, prop = name.partition("/")
        if text and prop and text[-1].startswith(group + "/"):
            text[-1] += f", {prop}"
        else:
            text.append(name)
    return "+".join(text)


def liveness_depth(config, K):
    """Induction depth of the liveness jobs: longer than any wait but INIT's (which an
    invariant carries), i.e. than finishing a set's scan after ``flush`` drops, each way
    waiting up to ``P + 1`` cycles for a place in L2 (``P = l2_place_period``: ``K``, or
    ``K + 2`` for an L2 of depth 1)."""
    return config["ways"] * (l2_place_period(K, config["fifo_depth"]) + 1) + 4


def termination_depth(config, K):
    """Induction depth of the termination jobs: ``2 * (K + 1) + 4``, never deeper than
    :func:`liveness_depth`. Their facts are the ranking argument's (the measure never grows,
    falls once in every ``K + 1`` cycles, bounds the time under flush), which short windows
    carry (at most 6 steps on every proven configuration, at ``K`` 2 and 3), not the longest
    wait as progress needs; the depth leaves a margin over them, and a base case shorter than
    the progress jobs'."""
    return min(liveness_depth(config, K), 2 * (K + 1) + 4)


def _names(entry):
    """The property names of a :data:`ONE_JOB_EACH` entry."""
    return list(entry) if isinstance(entry, tuple) else [entry]


def _prove_jobs():
    return [replace(job, unroll=False) if job.name in NO_UNROLL else job
            for job in _prove_jobs_as_named()]


def _prove_jobs_as_named():
    jobs = []
    for config, K in PROVEN.items():
        whole = config in WHOLE_STORAGE
        scaled = config in SPLIT
        for alone, groups in ((True, SCALED_GROUPS if scaled else SMALL_GROUPS),
                              (False, SCALED_SYSTEM_GROUPS if scaled else SMALL_SYSTEM_GROUPS)):
            prefix = f"l1-{config}" if alone else config
            for job_name, g in groups.items():
                if g == ["storage"] and not whole:
                    continue
                split = [x for x in g if scaled and x in ONE_JOB_EACH]
                rest = [x for x in g if x not in split]
                if rest:
                    jobs.append(Job(f"{prefix}-{job_name}", config, "prove", 3, focus=rest,
                                    whole_storage=whole, timeout=900, alone=alone))
                for group in split:
                    for i, entry in enumerate(ONE_JOB_EACH[group]):
                        focus = [f"{group}/{name}" for name in _names(entry)]
                        jobs.append(Job(f"{prefix}-{group}-{i}", config, "prove", 3,
                                        focus=focus, whole_storage=whole, timeout=900,
                                        alone=alone,
                                        **(TUNING.get((config, focus[0]), {})
                                           if len(focus) == 1 else {})))
        for g in LIVENESS:
            depth = (termination_depth if g == ["termination"] else liveness_depth)(
                CONFIGS[config], K)
            if config in SPLIT and g[0] in ONE_JOB_EACH:
                jobs += [Job(f"{config}-{g[0]}-K{K}-{i}", config, "prove", depth,
                             focus=[f"{g[0]}/{name}" for name in _names(entry)], fairness=K,
                             whole_storage=whole, timeout=1800)
                         for i, entry in enumerate(ONE_JOB_EACH[g[0]])]
            else:
                jobs.append(Job(f"{config}-{g[0]}-K{K}", config, "prove", depth, focus=g,
                                fairness=K, whole_storage=whole, timeout=1800))
    return jobs


#: The bounded checks' safety properties, per configuration: in one job, or in two where that is
#: quicker: conservation (with the whole storage read, it sums over every L2 entry; on assoc
#: with storage) and the rest. A job asserts its properties and assumes nothing of the others
#: (``assume_others=False``): a bounded check from reset needs no induction hypothesis, so
#: the jobs together check what one job does. Split so, small took 53 + 74 s and assoc
#: 187 + 40 s, where one job took 296 s and 235-320 s (with the others assumed
#: for the past cycles, assoc's conservation alone took 483 s).
BMC_SAFETY = {"small": [("safety", [g for g in SAFETY if g != "conservation"]),
                        ("conservation", ["conservation"])],
              "dm": [("safety", None)],
              "assoc": [("safety", [g for g in SAFETY if g not in ("conservation", "storage")]),
                        ("conservation", ["conservation", "storage"])]}


#: The bounded checks' memories: flip-flops (``memory_map``) but for the conservation jobs,
#: which sum over the storage and are quicker on SMT arrays. CPU seconds, the runner's jobs on
#: this machine, flip-flops against arrays (measured on the seed's policy's jobs of the same
#: names without ``whole-``): small-safety-bmc 24 against 55, assoc-safety-bmc 17 against 29,
#: small-liveness-K2-bmc 7 against 14, assoc-liveness-K3-bmc 6 against 10;
#: small-conservation-bmc 78 against 58, assoc-conservation-bmc 193 against 132.
def _bmc_memories(name):
    return "arrays" if name == "conservation" else "flops"


def _bmc_jobs():
    """make bmc: the one-lane compressor of the default policy (the whole-line rule, jobs
    ``whole-<config>-...-bmc``) on the small configurations, and the compressor on 2 lanes
    under both line policies."""
    jobs = []
    for config in ("small", "dm", "assoc"):
        K = PROVEN[config]
        jobs += [Job(f"whole-{config}-{name}-bmc", config, "bmc", BMC_DEPTH, focus=focus,
                     whole_storage=True, assume_others=False, memories=_bmc_memories(name),
                     timeout=600, whole_line=True)
                 for name, focus in BMC_SAFETY[config]]
        jobs.append(Job(f"whole-{config}-liveness-K{K}-bmc", config, "bmc", BMC_DEPTH + 4,
                        focus=["progress", "termination"], fairness=K, whole_storage=True,
                        memories=_bmc_memories("liveness"), timeout=600, whole_line=True))
    return jobs + LINE_JOBS + WHOLE_LINE_JOBS


#: The compressor on lines, from reset: conservation at idle and the stream rules (bounded),
#: and covers that show the check is not vacuous.
#: A geometry where a beat to another line evicts at once (one set, one way), so that a
#: bounded run reaches evictions, merges, discards and idle within a few beats.
LINE_GEOMETRY = dict(addr_width=2, grad_width=2, sets=1, ways=1, max_updates=3, fifo_depth=2,
                     burst_size=1)
#: The check runs without smtbmc's ``--unroll``: at 14 steps its last step took 246 s with it,
#: 92 s without (the whole job, alone on this 2-core machine).
LINE_JOBS = [Job("lines2-bmc", "lines", "bmc", LINE_BMC_DEPTH, lanes=2, reset="initial",
                 geometry=LINE_GEOMETRY, timeout=600, unroll=False),
             Job("lines2-cover", "lines", "cover", LINE_BMC_DEPTH, lanes=2, covers=True,
                 reset="initial", geometry=LINE_GEOMETRY, timeout=600)]
#: ... and the same check of the compressor built with the whole-line rule
#: (GradientCompressor(lanes=2, whole_line=True)): conservation at idle and the stream rules,
#: and the cover that shows the check is not vacuous.
WHOLE_LINE_JOBS = [replace(job, name="whole-" + job.name, whole_line=True) for job in LINE_JOBS]


#: The line L1 alone (``design.LineAccumulator``, the harness of L1 alone built with ``lanes``):
#: L1's contract on lines, by k-induction, with L1's output stream rules (``stream``; on one lane
#: push is the queue's head, on lines an output register). As on the small configurations, one
#: job proves every group but conservation and one conservation: job name -> focus.
LINE_L1_GROUPS = {"safety": [g for g in L1_GROUPS if g != "conservation"] + ["stream"],
                  "conservation": ["conservation"]}


#: The line L1's small geometry: small's (2 x 2 lines, max_updates 3, 4-bit gradients) with
#: a 2-bit tag, so that a set can be full and miss (on small's 3-bit addresses, a line of 2
#: lanes and 2 sets leave a tag of one bit: two lines per set, never an eviction).
LINE_SMALL = CONFIGS["small"].replace(addr_width=4)


def _line_l1_jobs(lanes, config, geometry=None, whole=False):
    return [Job(f"l1-lines{lanes}-{config}-{name}", config, "prove", 3, focus=focus,
                whole_storage=whole, alone=True, lanes=lanes, timeout=900, geometry=geometry)
            for name, focus in LINE_L1_GROUPS.items()]


#: The line L1's proofs, on 2 lanes and LINE_SMALL (its 2 sets read whole).
LINE_L1_JOBS = _line_l1_jobs(2, "small", LINE_SMALL, whole=True)
#: ... and of the line L1 deciding by the whole-line rule (LineAccumulator(whole_line=True)).
WHOLE_LINE_L1_JOBS = [replace(job, name=job.name.replace("l1-lines2", "l1-whole-lines2"),
                              whole_line=True) for job in LINE_L1_JOBS]
#: ... with the transfer bound (properties/bound.py), the rule's guarantee, a job of its own.
WHOLE_LINE_L1_JOBS.append(replace(WHOLE_LINE_L1_JOBS[0], name="l1-whole-lines2-small-bound",
                                  focus=["bound"]))
def whole_line_name(name):
    """The name of the whole-line rule's job that is the seed policy's job ``name``
    (``l1-small-safety``: ``l1-whole-small-safety``; ``small-storage``: ``whole-small-storage``)."""
    return "l1-whole-" + name[3:] if name.startswith("l1-") else "whole-" + name


def _whole_line_jobs():
    """The one-lane compressor under its default policy, the whole-line rule
    (``design.params.WHOLE_LINE``), on every configuration of :data:`PROVEN`: the jobs of the
    seed's policy (:func:`_prove_jobs`, their tuning kept) with L1 built by the rule, the
    harness's model following it, named ``l1-whole-<config>-...`` (L1 alone) and
    ``whole-<config>-...`` (the system); and each configuration's transfer bound
    (properties/bound.py) on L1 alone (``bound``) and on the system (``system_bound``), a job
    each."""
    bounds = [Job(f"{'l1-' if alone else ''}{config}-bound", config, "prove", 3, focus=[group],
                  whole_storage=config in WHOLE_STORAGE, timeout=900, alone=alone)
              for config in PROVEN for alone, group in ((True, "bound"), (False, "system_bound"))]
    return [replace(job, name=whole_line_name(job.name), whole_line=True)
            for job in _encoded(_prove_jobs() + bounds)]


#: The one-lane L1 under the whole-line rule checked from reset (bounded, every group at once,
#: nothing assumed): the mutation check's check of a mutant of its whole-line decision
#: (proofs/mutants.py).
WHOLE_LINE_ONE_LANE_BMC = Job("l1-whole-small-bmc", "small", "bmc", 12,
                              focus=L1_GROUPS + ["bound"], whole_storage=True, alone=True,
                              whole_line=True, reset="initial", assume_others=False,
                              memories="flops", timeout=600)


def line_one_job_each(lanes, whole_line=False):
    """On the default geometry the line L1's groups are split as one lane's L1 is there
    (SCALED_GROUPS, ONE_JOB_EACH; the same job names), the line policy's two more properties
    with the quick ones, and its decision lane by lane (``decision_lane<i>_is_the_models``)
    one job a lane, after the others: each lane takes seconds alone, where two lanes in one
    job, or the whole line write or a way of the tracked set stated without them, did not
    finish in 5 minutes. With ``whole_line``, each lane's tests, the count and the written
    bit one job each too, after the lanes' decisions that use them."""
    policy = ONE_JOB_EACH["policy"][:-1] + [
        ONE_JOB_EACH["policy"][-1] + ("decision_evicts_what_the_model_evicts",
                                      "no_two_line_writes_for_one_line_in_a_beat")]
    policy += [f"decision_lane{i}_is_the_models" for i in range(lanes)]
    if whole_line:
        # Under the whole-line rule a lane's decision meets every lane's tests through the
        # written bit: each lane's tests, the count and the written bit are lemmas of their
        # own jobs, after the lanes' (properties/policy.py, _whole_line_decision_lemmas).
        policy += [f"decision_lane{i}_tests_are_the_models" for i in range(lanes)]
        policy += ["decision_count_is_the_models",
                   "decision_writes_its_line_iff_the_model_does"]
    return dict(ONE_JOB_EACH, policy=policy)


#: Per-job settings of the line L1's jobs (as TUNING): z3 proves the model's conservation step
#: at 8 lanes on default in about a minute, where yices had not finished in 4.
LINE_TUNING = {("default", "conservation/model_step_conserves_the_tracked_address"):
               dict(solver="z3")}
#: ... and under the whole-line rule: z3 proves the tracked set's way 2 in 151 s beside three
#: other solver jobs, where yices had not finished in 14 minutes (ways 0 and 1 take it 32 s).
WHOLE_LINE_TUNING = {("default", "policy/tracked_set_way2_is_the_models_after_init"):
                     dict(solver="z3")}


#: The line L1's groups on the scaled configurations, one job each (job name: groups): as
#: SCALED_GROUPS, with push's stream rules, and the pipeline group apart from the invariants
#: that join it on one lane (at 8 lanes on default 49 + 46 s as two jobs, 261 s as one).
LINE_SCALED_GROUPS = {"conservation": ["conservation"], "pipeline": ["pipeline"],
                      "invariants": ["valid_count", "overflow", "unique_tag", "dual_threshold",
                                     "stream"],
                      "forwarding": ["forwarding"], "policy": ["policy"]}


#: The time limit (wall time) of a line L1 job on a scaled configuration: at 8 lanes on
#: default its lane decisions take 138-376 s of CPU each, one at a time, and took 515-910 s
#: of wall time (one over 900) two at a time beside a place-and-route run on this 2-core
#: machine.
LINE_SCALED_TIMEOUT = 1800


def _line_l1_scaled_jobs(lanes, config, whole_line=False):
    jobs = []
    prefix = f"l1-whole-lines{lanes}" if whole_line else f"l1-lines{lanes}"
    for job_name, groups in LINE_SCALED_GROUPS.items():
        one_job_each = line_one_job_each(lanes, whole_line)
        split = [g for g in groups if g in one_job_each]
        rest = [g for g in groups if g not in split]
        if rest:
            jobs.append(Job(f"{prefix}-{config}-{job_name}", config, "prove", 3,
                            focus=rest, alone=True, lanes=lanes, timeout=LINE_SCALED_TIMEOUT,
                            whole_line=whole_line))
        for group in split:
            for i, entry in enumerate(one_job_each[group]):
                focus = [f"{group}/{name}" for name in _names(entry)]
                tuning = {**TUNING, **LINE_TUNING, **(WHOLE_LINE_TUNING if whole_line else {})}
                jobs.append(Job(f"{prefix}-{config}-{group}-{i}", config, "prove", 3,
                                focus=focus, alone=True, lanes=lanes,
                                timeout=LINE_SCALED_TIMEOUT, whole_line=whole_line,
                                **(tuning.get((config, focus[0]), {})
                                   if len(focus) == 1 else {})))
    return jobs


#: The compressor on lines as a system (``FormalHarness(..., lanes=N)``, not alone): its own
#: groups on lines, the line L1's contract (``LINE_L1_JOBS``) and L2's on lines
#: (``l2_lines``) assumed, by k-induction, on LINE_SMALL at 2 lanes with the whole storage
#: read (its 2 x 2 lines, L2's 4 writes): job name -> focus.
#: L2's contents sum ("storage") proves with L2's pointer facts of the same cycle in 73 s;
#: the queue's (its pairs and L1's output register) did not finish in 100-150 s as one
#: induction (yices, at depth 3 and 1, with SMT arrays or flip-flops; z3 not in 240 s), and
#: is composed: the queue's tracked sum (its contract, LINE_SYSTEM_QUEUE), the step at L1's
#: output register (``queue-step``, 7-8 s) and the slots in the same cycle (``queue``, 12-13
#: s; the two in one job took 190 s). The conservation at idle uses it as a same-cycle lemma.
_QUEUE_SUM = "storage/queue_shadow_sum_matches_its_contents"
_QUEUE_STEP = "storage/queue_shadow_is_its_tracked_sum_with_the_output_register"
_QUEUE_SLOTS = "storage/queue_slots_below*"
LINE_SYSTEM_GROUPS = {"safety": ["stream", "idle", "counters", "bypass",
                                 "system_conservation"],
                      # the run-time modes on lines: the EMA's beat update and lag (seconds:
                      # also in make prove, LINE_SYSTEM_IN_PROVE)
                      "modes": ["ema"],
                      "storage": ["storage", "-" + _QUEUE_SUM, "-" + _QUEUE_STEP,
                                  "-" + _QUEUE_SLOTS],
                      "queue-step": [_QUEUE_STEP],
                      "queue": [_QUEUE_SLOTS, _QUEUE_SUM]}
LINE_SMALL_2 = LINE_SMALL.replace(lanes=2)
LINE_SYSTEM_JOBS = [Job(f"lines2-small-{name}", "small", "prove", 3, focus=focus,
                        whole_storage=True, lanes=2, geometry=LINE_SMALL, timeout=900)
                    for name, focus in LINE_SYSTEM_GROUPS.items()]


def line_liveness_depth(config, K):
    """Induction depth of the progress job on lines: as :func:`liveness_depth`, longer than
    any wait but INIT's, where a place of L1's output queue may wait for two of L2's places
    (its pair's two writes), each up to ``P + 1`` cycles."""
    return 2 * config["ways"] * (l2_place_period(K, config["fifo_depth"]) + 1) + 4


#: ... their liveness under DRAM fairness K (as one lane's, LIVENESS), with the measure and
#: the bounds of lines (properties/liveness.py). The progress induction with smtbmc's --stbv
#: (as one lane's, STBV): 8 s of CPU against 58-59 without; the termination job without it
#: (12-13 s, with it 16).
LINE_K = PROVEN["small"]
#: ... and built with the whole-line rule: the same groups, and its transfer bound
#: (``system_bound``, properties/bound.py) a job of its own.
WHOLE_LINE_SYSTEM_JOBS = [replace(job, name="whole-" + job.name, whole_line=True)
                          for job in LINE_SYSTEM_JOBS]
WHOLE_LINE_SYSTEM_JOBS.append(replace(WHOLE_LINE_SYSTEM_JOBS[0], name="whole-lines2-small-bound",
                                      focus=["system_bound"]))
#: ... and its throughput (properties/throughput.py: a beat per cycle with DRAM always ready
#: and no flush; under the whole-line rule a beat causes at most one line write).
WHOLE_LINE_SYSTEM_JOBS.append(replace(WHOLE_LINE_SYSTEM_JOBS[0],
                                      name="whole-lines2-small-throughput",
                                      focus=["throughput"]))
LINE_SYSTEM_JOBS += [
    Job(f"lines2-small-progress-K{LINE_K}", "small", "prove",
        line_liveness_depth(LINE_SMALL, LINE_K), focus=["progress"], fairness=LINE_K,
        whole_storage=True, lanes=2, geometry=LINE_SMALL, timeout=600, stbv=True),
    Job(f"lines2-small-termination-K{LINE_K}", "small", "prove",
        termination_depth(LINE_SMALL, LINE_K), focus=["termination"], fairness=LINE_K,
        whole_storage=True, lanes=2, geometry=LINE_SMALL, timeout=600),
]
#: ... its cover from reset (the tracked address written to DRAM, a lane of it discarded,
#: and idle again: the conservation at idle is not vacuous), and L2 on lines at these lanes
#: and parameters (the contract the system's jobs assume).
LINE_SYSTEM_COVER = Job("lines2-small-cover", "small", "cover", 16, lanes=2,
                        geometry=LINE_SMALL, whole_storage=True, reset="initial",
                        covers=["lines_idle_after_a_dram_write_and_a_discard_at_tracked"],
                        timeout=900, focus=[], assume_others=False)
LINE_SYSTEM_L2 = [Job("l2_lines-lines2-small", "small", "prove", 3, component="l2_lines",
                      geometry=LINE_SMALL_2, timeout=300)]
#: ... and L2 on lines at the whole-line rule's value width (grad_width bits: the L2 of
#: GradientCompressor(lanes=2, whole_line=True) on these parameters), whose merges must fit
#: the narrower value.
LINE_SYSTEM_L2.append(Job("l2_lines_whole-lines2-small", "small", "prove", 3,
                          component="l2_lines_whole", geometry=LINE_SMALL_2, timeout=300))
#: ... and L1's output queue of the line L1's pair shape at these parameters, with its tracked
#: sum at the width of the system's balances (the contract the queue's sum assumes).
#: In two jobs: the chain of the slots' sums (slots_below<i>_...) took 15 s alone, the rest 10 s,
#: and as one job did not finish in 5 minutes.
_SLOTS_BELOW = "queue_sum/slots_below*"
LINE_SYSTEM_QUEUE = [Job("queue_lines-lines2-small", "small", "prove", 3,
                         component="queue_lines", geometry=LINE_SMALL_2, timeout=300,
                         focus=["queue", "queue_sum", "-" + _SLOTS_BELOW]),
                     Job("queue_lines-lines2-small-slots", "small", "prove", 3,
                         component="queue_lines", geometry=LINE_SMALL_2, timeout=300,
                         focus=[_SLOTS_BELOW])]
#: ... and of the line policy's (``whole_line=False``: values of grad_width + 2 bits), which
#: the line policy's system jobs (``lines2-small-*``) assume.
LINE_SYSTEM_QUEUE += [replace(job, name=job.name.replace("small", "small-line-policy"),
                              geometry=LINE_SMALL_2.replace(whole_line=False))
                      for job in LINE_SYSTEM_QUEUE]


#: ... and at 8 lanes on the default geometry (32 x 4 lines): not in make prove (its time:
#: docs/proofs.md); ``make prove-lines`` (``python -m gradient_compressor.proofs
#: prove-lines``) runs them all, ``run`` one by name.
LINE8_L1_JOBS = _line_l1_scaled_jobs(8, "default")
#: ... and the line L1 deciding by the whole-line rule, with its transfer bound (a job of its
#: own), the same jobs named l1-whole-lines8-default-*.
LINE8_WHOLE_L1_JOBS = _line_l1_scaled_jobs(8, "default", whole_line=True)
LINE8_WHOLE_L1_JOBS.append(Job("l1-whole-lines8-default-bound", "default", "prove", 3,
                               focus=["bound"], alone=True, lanes=8, whole_line=True,
                               timeout=LINE_SCALED_TIMEOUT))
#: ... and the compressor on 8 lanes as a system on the default geometry: L2 on lines at these
#: lanes and parameters alone, and the system's groups that need no whole storage (the
#: ``safety`` jobs' groups: at this size, as on one lane, the storage sums are not read), with
#: the line L1's and L2's contracts assumed.
LINE8_DEFAULT = CONFIGS["default"].replace(lanes=8)
LINE8_SYSTEM_JOBS = [Job("l2_lines-lines8-default", "default", "prove", 3, component="l2_lines",
                         geometry=LINE8_DEFAULT, timeout=300),
                     Job("lines8-default-safety", "default", "prove", 3,
                         focus=LINE_SYSTEM_GROUPS["safety"], lanes=8, timeout=900)]
#: make prove-lines: the line L1 and the system at 8 lanes on default, and the compressor on
#: lines as a system at 2 lanes on LINE_SMALL (L2 on lines there, the system's groups, its
#: cover).
PROVE_LINES_JOBS = (LINE8_L1_JOBS + LINE8_WHOLE_L1_JOBS + LINE8_SYSTEM_JOBS + LINE_SYSTEM_L2 +
                    LINE_SYSTEM_QUEUE + WHOLE_LINE_SYSTEM_JOBS +
                    LINE_SYSTEM_JOBS +
                    [LINE_SYSTEM_COVER])
#: The line L1's contract checked from reset (bounded, every group at once, nothing assumed):
#: the mutation check's first check of a lane mutant (proofs/mutants.py), deep enough for INIT,
#: three beats to one line through the pipeline and a flush of them.
#: ... and its covers, from reset (each case of the line policy reached on the tracked set).
LINE_L1_COVER = Job("l1-lines2-small-cover", "small", "cover", 20, covers=True,
                    geometry=LINE_SMALL,
                    whole_storage=True, alone=True, lanes=2, reset="initial", timeout=600,
                    focus=[], assume_others=False)
LINE_L1_BMC = Job("l1-lines2-small-bmc", "small", "bmc", 20, geometry=LINE_SMALL,
                  focus=[g for groups in LINE_L1_GROUPS.values() for g in groups],
                  whole_storage=True, alone=True, lanes=2, reset="initial",
                  assume_others=False, timeout=600)
#: ... and of the line L1 deciding by the whole-line rule, its transfer bound among them.
WHOLE_LINE_L1_BMC = replace(LINE_L1_BMC, name="l1-whole-lines2-small-bmc", whole_line=True,
                            focus=LINE_L1_BMC.focus + ["bound"])


#: Cover jobs (from reset, free inputs): configuration, depth, covers (None: all), steps
#: skipped (not checked). Reset comes in the first cycle only (step 0): a cover needs one run,
#: and a run reset only at its start is one. With reset free as well the solver also searches
#: the runs reset again later, which took default's cover job 469 s against 51.
#: The depths follow the pipeline (a gradient accepted in cycle t writes in t + 4): mid's
#: flush with every way valid completes in step 32. On default and large, where INIT alone
#: takes 32 and 1024 cycles, every cover is reached by simulation (``SIMULATED``): default's
#: free-input cover job (depth 43, its first eviction in step 42) took 44-52 s of the 8
#: minutes, where its simulations take a second each.
COVERS = [("small", 24, None, 0), ("dm", 24, None, 0), ("assoc", 24, None, 0),
          ("mid", 33, None, 0)]
#: Progress-bound covers (with DRAM fairness): the bound N met with equality, from reset (in
#: step 0) with free inputs: configuration, depth, steps skipped. N is exact on each: default
#: (INIT, N = sets + 1 = 33, step 33), dm and mid (INIT, N = 5, step 5), small (a scan that
#: flush dropping interrupts, N = ways + 3 = 5, step 14), assoc (the same scan with the queue
#: and L2 full and DRAM ready every third cycle, N = (ways + 1) * K - 4 = 11, step 33; its
#: first 32 steps, where the queue and L2 are still filling, are skipped). On large INIT
#: takes 1024 cycles, beyond BMC here. Assoc's, the longest cover job (60-90 s), is not part
#: of ``make prove``: its run is replayed there instead (``RECORDED``), and the solver's job
#: (``python -m gradient_compressor.proofs run assoc-progress-cover-K3``) finds a new one when a change to the
#: design makes the recorded run miss the cover.
PROGRESS_COVERS = [("default", 36, 0), ("small", 16, 0), ("dm", 8, 0), ("mid", 8, 0)]
SOLVER_ONLY_COVERS = [("assoc", 34, 32)]


#: Covers reached by simulation (proofs/simulate.py): the harness run from power-up under a
#: directed stimulus (properties.covers.STIMULI), every assertion and assumption checked in
#: every cycle. The deep covers that a free-input BMC does not reach (L2 full, the 255th
#: update's write, a flush of every way, on default; on large, where INIT alone takes 1024
#: cycles, every cover). A solver's BMC under the same stimulus reaches them too, in minutes
#: where the simulation takes seconds: a cover needs one run from reset, and this is one.
#: Configuration, stimulus, DRAM fairness K (the progress cover) or None, and a cycle limit:
#: the cycle the last cover is reached in (with L1 as it is now) and some margin; the run
#: stops when every cover is in.
SIMULATED = [("default", "one_address", None, 400), ("default", "l2_full", None, 200),
             ("default", "fill_then_flush", None, 500),
             ("default", "cross_threshold", None, 100), ("default", "evict_in_one_set", None, 100),
             ("default", "discard_then_flush", None, 100),
             ("default", "stochastic_rounding", None, 100),
             ("default", "bypass_window", None, 100), ("default", "ema_threshold", None, 100),
             ("large", "one_address", None, 1300), ("large", "l2_full", None, 1110),
             ("large", "cross_threshold", None, 1050), ("large", "evict_in_one_set", None, 1050),
             ("large", "fill_then_flush", None, 11300),
             ("large", "discard_then_flush", None, 1050),
             ("large", "stochastic_rounding", None, 1050),
             ("large", "bypass_window", None, 1050), ("large", "ema_threshold", None, 1050),
             ("large", "one_address", 2, 1050)]


#: Covers reached by replaying a solver's cover run in simulation (a Yosys witness from
#: reset, in ``proofs/witnesses/``; its inputs drive the harness, every assertion and
#: assumption checked in every cycle): configuration, witness name (``CONFIG-NAME.yw``), DRAM
#: fairness K, cycle limit. Where no directed stimulus has been written (the one-set scan
#: under slow DRAM that meets assoc's progress bound depends on which cycles DRAM is ready in,
#: and on L2's burst rule), the solver's run is kept as it is; its solver job is
#: ``SOLVER_ONLY_COVERS``'.
RECORDED = [("assoc", "progress-bound", 3, 40)]


def _simulated_jobs():
    from gradient_compressor.properties.covers import PROGRESS_COVER, STIMULI
    jobs = []
    for config, witness, K, depth in RECORDED:
        jobs.append(Job(f"{config}-sim-{witness}-K{K}", config, "sim", depth, fairness=K,
                        covers=[PROGRESS_COVER], timeout=600,
                        witness=f"proofs/witnesses/{config}-{witness}.yw"))
    for config, stimulus, K, depth in SIMULATED:
        name = f"{config}-sim-{stimulus.replace('_', '-')}" + (f"-K{K}" if K else "")
        covers = [PROGRESS_COVER] if K else STIMULI[stimulus]
        jobs.append(Job(name, config, "sim", depth, fairness=K, covers=covers,
                        stimulus=stimulus, timeout=600))
    return jobs


#: The solver's cover jobs assert nothing and assume no property (only the input assumptions
#: hold): a cover needs one run from reset, and the assertions along it are the k-induction
#: jobs' to prove (asserted here as well, default-cover took 51 s, without them 36 s).
BARE = dict(focus=[], assume_others=False)


def _cover_jobs():
    jobs = [Job(f"{config}-cover", config, "cover", depth, covers=only or True, skip=skip,
                reset="initial", timeout=1200, **BARE)
            for config, depth, only, skip in COVERS]
    jobs += [_progress_cover_job(*entry) for entry in PROGRESS_COVERS]
    return jobs + _simulated_jobs()


def _progress_cover_job(config, depth, skip):
    return Job(f"{config}-progress-cover-K{PROVEN[config]}", config, "cover", depth,
               fairness=PROVEN[config], covers=True, skip=skip, reset="initial", timeout=1200,
               **BARE)


def _solver_only_cover_jobs():
    """The solver's cover jobs whose runs ``make prove`` replays (:data:`RECORDED`): run by
    name, to find a new run."""
    return [_progress_cover_job(*entry) for entry in SOLVER_ONLY_COVERS]


def reset_check(job):
    """The bounded check from reset that follows a CTI of the k-induction job ``job`` (its
    properties, from reset in the first cycle only): deep enough to pass INIT (a cycle per
    set, up to 64 sets) and fill L2, or the component's own BMC depth."""
    config = job.parameters
    if job.component:
        spec = COMPONENTS[job.component]
        depth = spec.bmc_depth(spec.params(config))
    else:
        depth = min(config["sets"], 64) + config["fifo_depth"] + 2 * job.depth + 8
    return replace(job, name=f"{job.name}-from-reset", mode="bmc", depth=depth,
                   reset="initial", timeout=job.timeout)


def _component_jobs():
    """Each component proven alone (k-induction, seconds each) and its covers reached from
    reset, once per distinct set of its parameters among the proven configurations."""
    jobs = []
    for name, spec in COMPONENTS.items():
        for config in instances(name, {c: CONFIGS[c] for c in PROVEN}):
            jobs.append(Job(f"{name}-{config}", config, "prove", spec.depth, component=name,
                            solver=spec.solver, timeout=300))
            # Covers from reset, on the smallest and the product's parameters (where the
            # component has them): the covers show the contract is not vacuous, which the
            # sizes between add nothing to.
            if spec.covers and config in ("small", "default"):
                params = spec.params(CONFIGS[config])
                jobs.append(Job(f"{name}-{config}-cover", config, "cover",
                                spec.bmc_depth(params), component=name, covers=True,
                                reset="initial", timeout=300))
    return jobs


COMPONENT_JOBS = _component_jobs()


def _seed_component_jobs():
    """The components whose values' width follows the policy (``POLICY_WIDTH``) proven alone
    at the seed policy's width too (``grad_width + 2`` bits), named ``<component>-<config>-seed``:
    the seed policy's system jobs assume their contracts at that width."""
    seed = {c: CONFIGS[c].replace(whole_line=False) for c in PROVEN}
    return [Job(f"{name}-{config}-seed", config, "prove", COMPONENTS[name].depth, component=name,
                solver=COMPONENTS[name].solver, timeout=300, geometry=seed[config])
            for name in POLICY_WIDTH for config in instances(name, seed)]
#: Jobs that the solver proves quicker with the memories as flip-flops (``memory_map``), CPU
#: seconds against SMT arrays, measured one after the other on this machine:
#: l1-lines2-small-conservation 17 against 42, small-storage 17 against 21 (on the other small
#: jobs within a second or two, assoc-progress-K3 9 against 11 but 16 in a whole make prove;
#: make bmc's: ``_bmc_memories``).
FLOPS = {"l1-lines2-small-conservation", "small-storage"}


def _encoded(jobs):
    """``jobs``, those named in :data:`STBV` with ``stbv``, in :data:`FLOPS` with their memories
    as flip-flops."""
    return [replace(job, stbv=job.stbv or job.name in STBV,
                    memories="flops" if job.name in FLOPS else job.memories) for job in jobs]


WHOLE_LINE_JOBS_ONE_LANE = _whole_line_jobs()
#: The one-lane L1 deciding by the whole-line rule (L1Accumulator(whole_line=True)) alone ...
WHOLE_LINE_ONE_LANE_JOBS = [job for job in WHOLE_LINE_JOBS_ONE_LANE if job.alone]
#: ... and the one-lane compressor built with it (GradientCompressor(), the default), the
#: one-lane L1's contract assumed.
WHOLE_ONE_LANE_SYSTEM_JOBS = [job for job in WHOLE_LINE_JOBS_ONE_LANE if not job.alone]

#: The compressor on lines' jobs quick enough for make prove (seconds each: the EMA on lines,
#: the throughput under the whole-line rule), also in make prove-lines with the rest.
LINE_SYSTEM_IN_PROVE = [job for job in LINE_SYSTEM_JOBS + WHOLE_LINE_SYSTEM_JOBS
                        if job.name in ("lines2-small-modes", "whole-lines2-small-throughput")]
#: The covers of the one-lane compressor built by the seed's policy, in make prove-seed ...
SEED_COVER_JOBS = _encoded(_cover_jobs())
#: ... and the same covers of the one built by the default policy, the whole-line rule
#: (``whole-<config>-cover``, ``whole-<config>-sim-...``: every cover reached, from reset by the
#: solver or by simulation), so that its harness is not vacuous: in make prove.
COVER_JOBS = [replace(job, name=whole_line_name(job.name), whole_line=True)
              for job in SEED_COVER_JOBS]
PROVE_JOBS = (_encoded(COMPONENT_JOBS + WHOLE_LINE_JOBS_ONE_LANE + LINE_L1_JOBS +
                       WHOLE_LINE_L1_JOBS + LINE_SYSTEM_IN_PROVE) +
              COVER_JOBS + _encoded([LINE_L1_COVER]))
BMC_JOBS = _encoded(_bmc_jobs()) + [job for job in COVER_JOBS if job.name == "whole-small-cover"]
#: make prove-seed: the one-lane compressor under the seed's policy (``whole_line=False``), on
#: every configuration of PROVEN: L1 alone (``l1-<config>-...``) and the system, and its covers.
SEED_JOBS = _encoded(_seed_component_jobs() + _prove_jobs()) + SEED_COVER_JOBS


#: The longest jobs (35-200 s each; most jobs take seconds), longest first. ``make prove``
#: and ``make bmc`` start them first, so that no core runs one alone at the end.
SLOWEST = ["whole-assoc-conservation-bmc", "default-progress-K2", "whole-small-conservation-bmc",
           "whole-large-sim-fill-then-flush", "whole-mid-cover",
           "lines2-bmc", "whole-small-safety-bmc", "l1-large-policy-0", "large-progress-K2",
           "whole-assoc-safety-bmc", "l1-default-forwarding", "assoc-progress-K3",
           "large-termination-K2-0", "l1-default-policy-0", "l1-large-forwarding",
           "l1-default-pipeline", "mid-cover", "large-sim-fill-then-flush",
           "l1-lines2-small-safety"]


def slowest_first(jobs):
    """``jobs`` with those of :data:`SLOWEST` first, in its order; the rest as they were."""
    rank = {name: i for i, name in enumerate(SLOWEST)}
    return sorted(jobs, key=lambda j: rank.get(j.name, len(rank)))


def all_jobs():
    seen = {}
    for job in (PROVE_JOBS + SEED_JOBS + BMC_JOBS + _solver_only_cover_jobs() +
                [LINE_L1_BMC, WHOLE_LINE_L1_BMC, WHOLE_LINE_ONE_LANE_BMC] + PROVE_LINES_JOBS):
        seen.setdefault(job.name, job)
    return list(seen.values())


def job_by_name(name):
    for job in all_jobs():
        if job.name == name:
            return job
    raise KeyError(f"no job named {name!r}; try `python -m gradient_compressor.proofs list`")
