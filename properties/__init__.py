"""Formal properties of the gradient compressor, grouped by contract:

* :mod:`.assumptions` -- assumptions on the inputs;
* :mod:`.outputs` -- assertions on the outputs (stream rules, conservation, idle, counters);
* :mod:`.invariants` -- internal invariants (valid_count, overflow, unique tags, L2, pipeline);
* :mod:`.policy` -- the tracked set's writes and row follow the reference model's rules;
* :mod:`.writeback` -- L2 is an order-preserving FIFO (one tracked write);
* :mod:`.liveness` -- progress and flush termination (a ranking function), with their bounds;
* :mod:`.covers` -- reachability;

bound to the design by :class:`.harness.FormalHarness`.
"""

from .base import GROUPS, PropertySet
from .harness import CONFIGS, FormalHarness, flush_bound, progress_bound

__all__ = ["FormalHarness", "CONFIGS", "flush_bound", "progress_bound", "GROUPS", "PropertySet"]
