"""Workloads for the bandwidth reports: the trace format, the seed's stimulus, synthetic
generators shaped like real gradients, and recorded real traces (``workloads/traces/``).

:func:`get_workload` turns a name (``seed``, a synthetic generator, a committed trace) or a path
to a ``.npz`` trace into a :class:`~workloads.trace.Trace`.
"""

import os
from pathlib import Path

from .trace import Trace, TraceError, load, save
from .seed import seed_trace, SEED_REPORTED
from .synthetic import GENERATORS

__all__ = ["Trace", "TraceError", "load", "save", "seed_trace", "SEED_REPORTED", "GENERATORS",
           "TRACE_DIR", "LIVE_WORKLOADS", "workload_names", "get_workload", "DEFAULT_WORKLOADS"]

#: Committed real traces (recorded with ``python -m gradient_compressor.workloads.record``).
TRACE_DIR = Path(__file__).resolve().parent / "traces"

#: What ``compressor-report`` runs when no workload is named.
DEFAULT_WORKLOADS = ["seed", "synthetic-one-pass", "synthetic-microbatch", "synthetic-embedding",
                     "synthetic-tiled", "tiny-embed", "tiny-mlp"]


#: Workloads recorded live by training a model of :mod:`workloads.models` (needs PyTorch):
#: ``{name: (model, run size)}``, short runs sized for the RTL reports (about 10**5 gradients);
#: ``python -m gradient_compressor.reports.training`` trains the same models longer, in the
#: loop.
LIVE_WORKLOADS = {
    "train-recsys": ("recsys", {"steps": 3, "micro_batches": 4, "batch_size": 64}),
    "train-lm": ("lm", {"steps": 2, "micro_batches": 2, "batch_size": 4, "dim": 32,
                        "layers": 1}),
    "train-digits": ("digits", {"steps": 3, "micro_batches": 4, "batch_size": 16}),
}


def _live(name):
    """Record the live workload ``name`` (:data:`LIVE_WORKLOADS`)."""
    try:
        import torch  # noqa: F401
        import sklearn  # noqa: F401
    except ImportError as error:
        raise TraceError(f"{name} is recorded live by training and needs "
                         f"{error.name or 'PyTorch and scikit-learn'}: docs/training.md") \
            from None
    from .record import record
    kind, size = LIVE_WORKLOADS[name]
    return record(kind=kind, **size)


def _recorded():
    return {p.stem: p for p in sorted(TRACE_DIR.glob("*.npz"))}


def workload_names():
    """Every workload name :func:`get_workload` knows."""
    return ["seed", *GENERATORS, *_recorded(), *LIVE_WORKLOADS]


def get_workload(name, **params):
    """The :class:`Trace` of a workload name, or of a ``.npz`` file path. ``params`` go to the
    synthetic generators (the keyword arguments of :mod:`workloads.synthetic`'s functions);
    a parameter a generator does not take raises :class:`TraceError`."""
    if name in GENERATORS:
        import inspect
        accepted = inspect.signature(GENERATORS[name]).parameters
        unknown = sorted(k for k in params if k not in accepted or k.startswith("_"))
        if unknown:
            raise TraceError(f"{name} takes no parameter {', '.join(unknown)} (it takes "
                             f"{', '.join(k for k in accepted if not k.startswith('_'))})")
        try:
            return GENERATORS[name](**params)
        except (TypeError, ValueError) as error:
            raise TraceError(f"{name}: bad parameters {params}: {error}") from None
    if name == "seed":
        return seed_trace()
    if name in LIVE_WORKLOADS:
        return _live(name)
    recorded = _recorded()
    if name in recorded:
        return load(recorded[name])
    if name.endswith(".npz") or os.sep in name or os.path.exists(name):
        return load(name)
    raise TraceError(f"unknown workload {name!r}: choose from {', '.join(workload_names())}, "
                     f"or give the path of a .npz trace")
