"""The proof jobs: which harness, configuration, mode and depth each one runs."""

from dataclasses import dataclass, asdict

from properties.harness import CONFIGS, flush_bound

__all__ = ["Job", "PROVE_JOBS", "BMC_JOBS", "COVER_JOBS", "all_jobs", "job_by_name"]

#: Property groups proven together (one k-induction job each, per configuration).
GROUPS = [["stream", "l2"], ["conservation"], ["idle", "valid_count"],
          ["overflow", "unique_tag", "pipeline"]]
#: (configuration, K) of the flush termination proofs.
TERMINATION = [("small", 2), ("dm", 2), ("assoc", 3), ("mid", 2)]
#: BMC depths: small configurations (make bmc), default configuration (make prove).
BMC_DEPTH = 10
DEFAULT_DEPTH = 37
DEFAULT_CONS_DEPTH = 36
MID_CONS_DEPTH = 12

#: The one property not proven by induction on mid (see _prove_jobs).
MID_UNPROVEN = "conservation/l2_shadow_sum_matches_storage"

SAFETY = ["stream", "conservation", "idle", "valid_count", "overflow", "unique_tag", "l2",
          "pipeline"]


@dataclass
class Job:
    name: str
    config: str
    mode: str                 # "prove" (k-induction), "bmc" or "cover"
    depth: int
    focus: list = None        # groups / "group/name" asserted, "-group/name" not (None: all)
    fairness: int = None      # K (termination jobs)
    full_l1: bool = True
    full_l2: bool = True
    reset: str = "any"
    covers: bool = False
    timeout: int = 1200
    design_path: str = None   # a directory holding a (mutant) copy of design/
    assume_others: bool = True  # outside the focus: assume (past cycles) or drop

    @property
    def properties(self):
        if self.mode == "cover":
            return "covers"
        groups = list(self.focus) if self.focus else list(SAFETY)
        if self.fairness and not self.focus:
            groups.append("termination")
        but = [g[1:].partition("/")[2] for g in groups if g.startswith("-")]
        text = "+".join(g for g in groups if not g.startswith("-"))
        return text + (f" except {','.join(but)}" if but else "")

    def to_dict(self):
        return asdict(self)


def _bound(config, K):
    c = CONFIGS[config]
    return flush_bound(c["sets"], c["ways"], c["fifo_depth"], K)


def _prove_jobs():
    jobs = []
    # Safety properties, by group, on the small configurations: k-induction. Each job asserts
    # its groups and assumes the others for the past cycles only (sound: see properties.base).
    for config in ("small", "dm", "assoc", "mid"):
        for g in GROUPS:
            if config == "mid" and g == ["conservation"]:
                # Every conservation property but the L2 shadow sum (which the others assume
                # for the past cycles): its induction step on mid (8 L2 entries) ran out of
                # minutes with yices and z3, at depth 1 too; the rest takes ~30-40 s. The sum
                # is checked by mid-conservation-bmc (docs/proofs.md).
                jobs.append(Job("mid-conservation-except-l2-sum", config, "prove", 3,
                                focus=g + [f"-{MID_UNPROVEN}"], timeout=600))
                continue
            jobs.append(Job(f"{config}-{'-'.join(g)}", config, "prove", 3, focus=g,
                            timeout=600))
    # Flush termination: k-induction deeper than the bound (the whole flush is in the window).
    for config, K in TERMINATION:
        B = _bound(config, K)
        jobs.append(Job(f"{config}-termination-K{K}", config, "prove", B + 2,
                        focus=["termination"], fairness=K))
    # Default configuration: bounded from reset (INIT takes 32 cycles).
    jobs.append(Job("default-control-bmc", "default", "bmc", DEFAULT_DEPTH,
                    focus=["stream", "idle", "valid_count", "overflow", "unique_tag", "l2",
                           "pipeline"], reset="initial", timeout=900))
    jobs.append(Job("default-conservation-bmc", "default", "bmc", DEFAULT_CONS_DEPTH,
                    focus=["conservation"], reset="initial", timeout=900))
    # mid's L2 shadow sum (not proven by induction there): bounded from reset, INIT (4 cycles)
    # and 7 cycles of traffic (step 11 alone took ~60 s; deeper soon costs minutes a cycle).
    jobs.append(Job("mid-conservation-bmc", "mid", "bmc", MID_CONS_DEPTH,
                    focus=["conservation"], reset="initial", timeout=600))
    return jobs


def _bmc_jobs():
    jobs = []
    for config in ("small", "dm", "assoc"):
        jobs.append(Job(f"{config}-safety-bmc", config, "bmc", BMC_DEPTH, reset="initial",
                        timeout=600))
    for config, K in TERMINATION:
        B = _bound(config, K)
        # From reset: INIT (sets cycles), a few cycles of traffic, then B + 1 cycles of flush.
        jobs.append(Job(f"{config}-termination-K{K}-bmc", config, "bmc",
                        B + CONFIGS[config]["sets"] + 8,
                        focus=["termination"], fairness=K, reset="initial", timeout=600))
    return jobs


def _cover_jobs():
    return [Job(f"{config}-cover", config, "cover", 24, covers=True)
            for config in ("small", "dm", "assoc")]


PROVE_JOBS = _prove_jobs() + _cover_jobs()
BMC_JOBS = _bmc_jobs() + _cover_jobs()[:1]
COVER_JOBS = _cover_jobs()


def all_jobs():
    seen = {}
    for job in PROVE_JOBS + BMC_JOBS:
        seen.setdefault(job.name, job)
    return list(seen.values())


def job_by_name(name):
    for job in all_jobs():
        if job.name == name:
            return job
    raise KeyError(f"no job named {name!r}; try `python -m proofs list`")
