"""The accelerator's gradient write path through the compressor's policy, as a stream.

:class:`CompressedWritePath` is a sink of :mod:`workloads.record`'s streams (``start``,
``micro_batch``, ``end_step``): a training run's quantised gradients go through the policy
emulator (:class:`model.emulator.LineEmulator`, bit-exact with the models and so with the RTL)
in a run-time mode, a flush at the end of every step, and it counts what DRAM receives. Each
step's gradients are packed into beats of ``lanes`` as :func:`reports.line_costs.pack_beats`
(the packing of :mod:`reports.line_costs` and :mod:`reports.sizing`) and the bytes are
:func:`reports.line_costs.dense_bytes` and :func:`~reports.line_costs.line_write_bytes`, or
under the whole-line rule (``whole_line=True``) :func:`~reports.line_costs.whole_line_bytes`
(:func:`~reports.line_costs.write_bytes` picks).

With ``keep_dram``, ``end_step`` returns what DRAM holds after the step's flush: per address
the sum of the values of the step's writes (DRAM's gradient buffer starts each step at 0;
every write adds its value at its address). That is what the optimiser sees when the write
path is in the training loop. :class:`SizingPaths` feeds one stream to many geometries.

Everything here is NumPy; only the training that drives it needs PyTorch.
"""

import numpy as np

from gradient_compressor.design.params import DEFAULTS, WHOLE_LINE

from .line_costs import dense_bytes, pack_beats, write_bytes
from .mode_comparison import mode_settings

__all__ = ["MODES", "mode_operations", "dram_sums", "CompressedWritePath", "SizingPaths"]

#: The modes a write path runs, in table order.
MODES = ("exact", "drop", "stochastic", "ema", "drop+bypass")


def mode_operations(mode, threshold, layout):
    """The operations that set ``mode`` up before a run's first gradient.

    ``exact``, ``drop``, ``stochastic`` and ``ema`` are :func:`reports.mode_comparison.
    mode_settings`' (``small_threshold = threshold // 4``); ``drop+bypass`` is ``drop`` with
    the bypass windows over the tensors the model keeps exact (``layout.exact``: name
    prefixes; those are written through, never dropped).

    Parameters
    ----------
    mode : str
        One of :data:`MODES`.
    threshold : int
        The run's threshold.
    layout : workloads.record.TensorLayout

    Raises
    ------
    ValueError
        An unknown mode; ``drop+bypass`` with no tensor to keep exact, or with tensors in
        more address ranges than the compressor has windows (two).
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}: choose from {', '.join(MODES)}")
    settings = mode_settings(threshold, threshold // 4, 0, max(layout.total - 1, 0))
    if mode != "drop+bypass":
        return settings[mode]
    windows = layout.ranges(layout.exact)
    if not windows:
        raise ValueError(f"drop+bypass: no tensor named "
                         f"{', '.join(layout.exact) or '(none given)'}* to keep exact")
    if len(windows) > 2:
        raise ValueError(f"drop+bypass: the tensors kept exact lie in {len(windows)} address "
                         f"ranges, and the compressor has 2 bypass windows")
    modes = {}
    for i, (low, high) in enumerate(windows):
        modes.update({f"bypass__{i}__base": low, f"bypass__{i}__limit": high,
                      f"bypass__{i}__enable": 1})
    return settings["drop"] + [("modes", modes)]


def dram_sums(writes, size):
    """Per address, the sum of the values of ``writes`` (a :class:`model.emulator.
    WriteArrays`; each masked-in lane adds its value at line + lane), as ``int64`` of
    ``size`` addresses."""
    lanes = writes.lanes
    if not len(writes):
        return np.zeros(size, np.int64)
    addr = (writes.addr.astype(np.int64)[:, None] + np.arange(lanes)).ravel()
    values = writes.values.astype(np.int64).ravel()
    inside = addr < size                      # lanes past the last tensor hold 0
    return np.bincount(addr[inside], weights=values[inside], minlength=size).astype(np.int64)


class CompressedWritePath:
    """A training run's gradients through the compressor's policy, counted (a sink).

    Parameters
    ----------
    mode : str
        One of :data:`MODES`.
    lanes, sets, ways, max_updates : int
        The compressor: lines of ``lanes``, an L1 of ``sets x ways`` lines.
    keep_dram : bool
        Return DRAM's per-address sums from :meth:`end_step` (for training in the loop).
    whole_line : bool
        Run the whole-line rule (the emulator's; the RTL built with ``whole_line=True``
        writes the same from L1), its values counted in the gradients' format
        (:func:`reports.line_costs.whole_line_bytes`).

    Attributes
    ----------
    gradients, beats, line_writes, steps : int
        Counted so far.
    discards : int
        Gradients a lossy mode accounted as discarded.
    """

    def __init__(self, mode="exact", *, lanes=1, sets=DEFAULTS["sets"], ways=DEFAULTS["ways"],
                 max_updates=DEFAULTS["max_updates"], keep_dram=False, whole_line=WHOLE_LINE):
        from gradient_compressor.model.emulator import LineEmulator
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}: choose from {', '.join(MODES)}")
        self.mode, self.keep_dram = mode, keep_dram
        self.lanes = lanes
        self.emulator = LineEmulator(lanes=lanes, sets=sets, ways=ways, max_updates=max_updates,
                                     whole_line=whole_line)
        self.gradients = self.beats = self.line_writes = self.steps = self.discards = 0
        self.threshold = self.layout = None
        self._pending = []

    def start(self, layout, threshold):
        """Set the mode up (:func:`mode_operations`) for a run of ``layout`` at ``threshold``."""
        self.layout, self.threshold = layout, threshold
        self.emulator.run(mode_operations(self.mode, threshold, layout))

    def micro_batch(self, addr, grad):
        """One backward pass's gradients (held until the step's end: beats are packed per
        step, as :mod:`reports.line_costs` packs a trace's)."""
        self._pending.append((addr, grad))

    def end_step(self):
        """Run the step and its flush; DRAM's per-address sums if ``keep_dram``, else None."""
        addr = np.concatenate([a for a, _ in self._pending] or [np.empty(0, np.uint32)])
        grad = np.concatenate([g for _, g in self._pending] or [np.empty(0, np.int16)])
        self._pending = []
        writes = self.write_step(addr, grad)
        return dram_sums(writes, self.layout.total) if self.keep_dram else None

    def write_step(self, addr, grad):
        """Run one step's gradients (and the flush) through the policy; the writes."""
        return self.write_beats(*pack_beats(addr, grad, self.threshold, self.lanes), len(grad))

    def write_beats(self, line, grads, mask, gradients):
        """Run one step's beats (of :func:`reports.line_costs.pack_beats`, holding
        ``gradients``) and the flush through the policy; the writes."""
        writes = self.emulator.run_beats(line, grads, self.threshold, mask=mask,
                                         events=[(len(line), ("flush",))])
        self.gradients += gradients
        self.beats += len(line)
        self.line_writes += len(writes)
        self.steps += 1
        # counted, not kept: a lossy mode's run of 10^8 gradients discards tens of millions
        self.discards += len(self.emulator.take_discard_arrays()[0])
        return writes

    @property
    def dense_bytes(self):
        """Bytes of dense write-through of the same beats (no compressor)."""
        return dense_bytes(self.beats, self.lanes)

    @property
    def line_bytes(self):
        """Bytes of the compressor's line writes (under the whole-line rule, its values in the
        gradients' format)."""
        return write_bytes(self.emulator.whole_line)(self.line_writes, self.lanes)

    @property
    def saving(self):
        """``1 - line bytes / dense bytes`` (negative: the compressor costs more)."""
        return 1 - self.line_bytes / self.dense_bytes if self.beats else 0.0


class SizingPaths:
    """One stream through exact mode at many (lanes, sets, ways), counted (a sink).

    Parameters
    ----------
    lanes : sequence of int
    grid : sequence of (int, int)
        ``(sets, ways)`` geometries (:func:`reports.sizing.geometries`).
    on_step : callable or None
        Called after each step with the number of geometries run.
    whole_line : bool
        Every path under the whole-line rule (:class:`CompressedWritePath`'s ``whole_line``).
    """

    def __init__(self, lanes, grid, on_step=None, whole_line=WHOLE_LINE):
        self.paths = {(n, s, w): CompressedWritePath(lanes=n, sets=s, ways=w,
                                                     whole_line=whole_line)
                      for n in lanes for s, w in grid}
        self.lanes = sorted(set(lanes))
        self.on_step = on_step
        self.threshold = None
        self._pending = []

    def start(self, layout, threshold):
        self.threshold = threshold
        for path in self.paths.values():
            path.start(layout, threshold)

    def micro_batch(self, addr, grad):
        self._pending.append((addr, grad))

    def end_step(self):
        addr = np.concatenate([a for a, _ in self._pending] or [np.empty(0, np.uint32)])
        grad = np.concatenate([g for _, g in self._pending] or [np.empty(0, np.int16)])
        self._pending = []
        for lanes in self.lanes:              # packed once per lane count
            beats = pack_beats(addr, grad, self.threshold, lanes)
            for (n, _, _), path in self.paths.items():
                if n == lanes:
                    path.write_beats(*beats, len(grad))
        if self.on_step:
            self.on_step(len(self.paths))
        return None
