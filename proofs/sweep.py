"""The geometry sweep: the proofs on every power-of-two geometry from 1 x 1 to 1024 x 8 sets x
ways and L2 depths 1 to 64, every mode input free, as a job matrix (the scheduled workflow
``.github/workflows/sweep.yml``, one runner per sets x ways) or any slice of it here.

    python -m proofs sweep [--sets 1 2 ...] [--ways 1 2 ...] [--depths 1 2 ...] [-j 2] [--list]

A geometry is named ``s<sets>w<ways>d<depth>``: addresses of ``log2(sets) + 2`` bits (a 2-bit
tag), 4-bit gradients, ``max_updates`` 3, bursts of ``max(1, depth // 2)``. L1's contract is
proven alone once per sets x ways (it has no L2: ``s<sets>w<ways>-l1-...``), as on the small
configurations: its groups but conservation in one k-induction job, conservation in another.
Each L2 depth then proves the system's safety groups in one job, progress and termination
under DRAM fairness K = 2 in a job each (an induction window one cycle longer than the proven
configurations'), and L2 alone at that depth.
"""

from .jobs import SMALL_GROUPS, SMALL_SYSTEM_GROUPS, Job, liveness_depth

__all__ = ["SETS", "WAYS", "DEPTHS", "geometry", "sweep_jobs"]

SETS = [2 ** i for i in range(11)]       # 1 ... 1024
WAYS = [1, 2, 4, 8]
DEPTHS = [2 ** i for i in range(7)]      # 1 ... 64
#: DRAM fairness of the liveness jobs.
K = 2


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
                               timeout=3600, **kw)
                if d == depths[0]:
                    # L1 has no L2: its contract once per sets x ways.
                    jobs += [Job(f"s{s}w{w}-l1-{suffix}", name, "prove", 3, geometry=config,
                                 timeout=3600, focus=groups, alone=True)
                             for suffix, groups in SMALL_GROUPS.items()]
                # One cycle past the proven configurations' window: at 1 x 1 with L2 depth 1
                # the progress induction has a CTI at liveness_depth (7) and holds at 8.
                live = liveness_depth(config, K) + 1
                jobs += [
                    job("safety", focus=SMALL_SYSTEM_GROUPS["safety"]),
                    job("progress", depth=live, focus=["progress"], fairness=K),
                    job("termination", depth=live, focus=["termination"], fairness=K),
                    job("l2", component="l2"),
                ]
    return jobs
