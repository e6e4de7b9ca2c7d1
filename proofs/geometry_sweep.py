"""The geometry sweep: the proofs on every power-of-two geometry from 1 x 1 to 1024 x 8 sets x
ways and L2 depths 1 to 64, every mode input free, as a job matrix (the scheduled workflow
``.github/workflows/sweep.yml``, one runner per sets x ways) or any slice of it here.

    python -m gradient_compressor.proofs sweep [--sets 1 2 ...] [--ways 1 2 ...]
        [--depths 1 2 ...] [-j 2] [--list]

A geometry is named ``s<sets>w<ways>d<depth>``: addresses of ``log2(sets) + 2`` bits (a 2-bit
tag), 4-bit gradients, ``max_updates`` 3, bursts of ``max(1, depth // 2)``. L1's contract is
proven alone once per sets x ways (it has no L2: ``s<sets>w<ways>-l1-...``), as on the small
configurations: its groups but conservation in one k-induction job, conservation in another.
Each L2 depth then proves the system's safety groups in one job, progress and termination
under DRAM fairness K = 2 in a job each (an induction window longer than the proven
configurations' by a cycle per way and two), and L2 alone at that depth.
"""

from .jobs import SMALL_GROUPS, SMALL_SYSTEM_GROUPS, Job, liveness_depth

__all__ = ["SETS", "WAYS", "DEPTHS", "geometry", "sweep_jobs"]

SETS = [2 ** i for i in range(11)]       # 1 ... 1024
WAYS = [1, 2, 4, 8]
DEPTHS = [2 ** i for i in range(7)]      # 1 ... 64
#: DRAM fairness of the liveness jobs.
K = 2
#: Seconds a solver may run in one of the sweep's jobs before it is stopped (TIMEOUT: no
#: verdict). A job ends within three such limits (its proof; after a CTI, the check from reset;
#: the z3 replay of a counterexample), so a runner's slice (two L1 jobs and four per L2 depth,
#: 30 jobs, two at a time) ends within 15 x 3 x 7 = 315 minutes, inside the workflow's 350.
JOB_TIMEOUT = 420


def geometry(sets, ways, depth):
    """The configuration of one point of the sweep."""
    return dict(addr_width=(sets - 1).bit_length() + 2, grad_width=4, sets=sets, ways=ways,
                max_updates=3, fifo_depth=depth, burst_size=max(1, depth // 2))


def sweep_jobs(sets=SETS, ways=WAYS, depths=DEPTHS):
    """The jobs of the sweep's slice ``sets`` x ``ways`` x ``depths``."""
    jobs = []
    for s in sets:
        for w in ways:
            for d in depths:
                name, config = f"s{s}w{w}d{d}", geometry(s, w, d)

                def job(suffix, mode="prove", depth=3, **kw):
                    return Job(f"{name}-{suffix}", name, mode, depth, geometry=config,
                               timeout=JOB_TIMEOUT, **kw)
                if d == depths[0]:
                    # L1 has no L2: its contract once per sets x ways.
                    jobs += [Job(f"s{s}w{w}-l1-{suffix}", name, "prove", 3, geometry=config,
                                 timeout=JOB_TIMEOUT, focus=groups, alone=True)
                             for suffix, groups in SMALL_GROUPS.items()]
                # Past the proven configurations' window by a cycle per way and two: with an L2
                # of depth 2 and K = 2 a place may wait K + 1 cycles after one freed a cycle
                # apart (at 2 x 2 the progress induction has a CTI at liveness_depth, 10, and
                # holds at 12; at 2 x 4, a CTI at 18 and holds at 20).
                live = liveness_depth(config, K) + w + 2
                jobs += [
                    job("safety", focus=SMALL_SYSTEM_GROUPS["safety"]),
                    job("progress", depth=live, focus=["progress"], fairness=K),
                    job("termination", depth=live, focus=["termination"], fairness=K),
                    job("l2", component="l2"),
                ]
    return jobs
