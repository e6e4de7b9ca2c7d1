"""Gradient traces: what the compute core writes toward DRAM during training, step by step.

A trace is a stream of gradients ``(addr, grad)`` cut into training steps; the compressor is
flushed at the end of every step (the flush barrier of a training step), so every step's
gradients reach DRAM before the next step starts.

File format (version 1)
-----------------------
A compressed NumPy archive (``.npz``, written by :func:`save`, read by :func:`load`, loaded with
``allow_pickle=False``) holding exactly these arrays:

``addr``      ``uint32``, shape ``(N,)``: word address of each gradient (one parameter per
              address; a tensor occupies ``[base, base + size)``).
``grad``      ``int16``, shape ``(N,)``: the gradient, quantised to a signed 16-bit integer
              (real traces: each tensor with its own scale, ``real = grad * scale``).
``step_end``  ``int64``, shape ``(S,)``, ``S >= 1``: non-decreasing, ``step_end[-1] == N``;
              step ``s`` is ``grad[step_end[s-1]:step_end[s]]`` (step 0 starts at 0). A flush
              follows every step. A step may be empty (a flush with nothing new).
``threshold`` ``uint16``, shape ``(S,)`` (one threshold per step) or ``(N,)`` (one per
              gradient); ``meta["threshold_per"]`` says which (``"step"`` or ``"gradient"``).
``meta``      a 0-d unicode array holding a JSON object: ``format`` (``"gradient-trace"``),
              ``version`` (1), ``name``, ``description``, ``threshold_per`` and, optionally,
              ``source`` (how it was made), ``tensors`` (a list of ``{"name", "base", "size",
              "scale"}``, in address order), ``phases`` (a list of ``{"name", "start",
              "end"}``: named ranges ``[start, end)`` of gradient indices) and any other
              JSON-able facts (seed, model, ...).

Loading a file that breaks any of these rules raises :class:`TraceError` with a message that
names the file and the problem.
"""

import json
import os
import zipfile
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Trace", "TraceError", "save", "load", "FORMAT", "VERSION"]

FORMAT = "gradient-trace"
VERSION = 1

_ARRAYS = {"addr": np.uint32, "grad": np.int16, "step_end": np.int64, "threshold": np.uint16}


class TraceError(ValueError):
    """A trace file or trace is malformed; the message says what is wrong."""


@dataclass
class Trace:
    """A gradient trace in memory (see the module documentation for the meaning of each field).

    ``threshold`` has one entry per step or one per gradient.
    """
    addr: np.ndarray
    grad: np.ndarray
    step_end: np.ndarray
    threshold: np.ndarray
    name: str = "trace"
    description: str = ""
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        self.addr = np.asarray(self.addr)
        self.grad = np.asarray(self.grad)
        self.step_end = np.asarray(self.step_end)
        self.threshold = np.asarray(self.threshold)
        for name, dtype in _ARRAYS.items():
            array = getattr(self, name)
            if array.ndim != 1:
                raise TraceError(f"trace '{self.name}': '{name}' must be one-dimensional, "
                                 f"not of shape {array.shape}")
            if array.dtype != dtype:
                if array.size and not np.issubdtype(array.dtype, np.integer):
                    raise TraceError(f"trace '{self.name}': '{name}' must hold integers "
                                     f"({np.dtype(dtype).name}), not {array.dtype}")
                info = np.iinfo(dtype)
                if array.size and (array.min() < info.min or array.max() > info.max):
                    raise TraceError(f"trace '{self.name}': '{name}' has values outside "
                                     f"{np.dtype(dtype).name} [{info.min}, {info.max}]")
                setattr(self, name, array.astype(dtype))
        self.validate()

    # -- checks ------------------------------------------------------------------------------

    def validate(self):
        n, steps = len(self.grad), len(self.step_end)
        where = f"trace '{self.name}'"
        if len(self.addr) != n:
            raise TraceError(f"{where}: 'addr' has {len(self.addr)} entries but 'grad' has {n}")
        if steps < 1:
            raise TraceError(f"{where}: 'step_end' is empty; a trace has at least one step")
        if np.any(np.diff(self.step_end) < 0) or self.step_end[0] < 0:
            raise TraceError(f"{where}: 'step_end' must be non-decreasing and non-negative")
        if self.step_end[-1] != n:
            raise TraceError(f"{where}: the last 'step_end' ({int(self.step_end[-1])}) must "
                             f"equal the number of gradients ({n})")
        if len(self.threshold) not in (steps, n):
            raise TraceError(f"{where}: 'threshold' has {len(self.threshold)} entries; it needs "
                             f"one per step ({steps}) or one per gradient ({n})")

    # -- views -------------------------------------------------------------------------------

    def __len__(self):
        return len(self.grad)

    @property
    def steps(self):
        return len(self.step_end)

    @property
    def threshold_per(self):
        """``"step"`` or ``"gradient"``."""
        if len(self.threshold) == self.steps and \
                self.meta.get("threshold_per", "step") == "step":
            return "step"
        return "gradient"

    def step_bounds(self):
        """``(start, end)`` of each step."""
        starts = np.concatenate([[0], self.step_end[:-1]])
        return list(zip(starts.tolist(), self.step_end.tolist()))

    def thresholds(self):
        """One threshold per gradient (``uint16`` array)."""
        if self.threshold_per == "gradient":
            return self.threshold
        counts = np.diff(np.concatenate([[0], self.step_end]))
        return np.repeat(self.threshold, counts)

    def ops(self, threshold=None, limit=None):
        """The reference model's / driver's operations: gradients, with a flush after every step.

        ``threshold`` overrides the trace's thresholds; ``limit`` keeps the first ``limit``
        gradients (the step in which it falls is cut there and still flushed).
        """
        addr, grad = self.addr.tolist(), self.grad.tolist()
        thr = [int(threshold)] * len(grad) if threshold is not None else self.thresholds().tolist()
        out = []
        for start, end in self.step_bounds():
            if limit is not None:
                if start >= limit:
                    break
                end = min(end, limit)
            out.extend(("grad", a, g, t) for a, g, t in zip(addr[start:end], grad[start:end],
                                                            thr[start:end]))
            out.append(("flush",))
        return out

    def head(self, limit):
        """A trace of the first ``limit`` gradients (steps cut as in :meth:`ops`, and the
        ``phases`` of its ``meta`` with them)."""
        if limit is None or limit >= len(self):
            return self
        keep = []
        for end in (min(int(e), limit) for e in self.step_end):
            keep.append(end)
            if end >= limit:
                break
        thr = self.threshold[:limit] if self.threshold_per == "gradient" \
            else self.threshold[:len(keep)]
        meta = dict(self.meta, truncated_to=int(limit))
        if "phases" in meta:     # indices of gradients: keep those of the first `limit`
            meta["phases"] = [dict(phase, end=min(phase["end"], limit))
                              for phase in meta["phases"] if phase["start"] < limit]
        return Trace(self.addr[:limit], self.grad[:limit], np.array(keep), thr,
                     name=self.name, description=f"{self.description} (first {limit} "
                                                  f"gradients only)", meta=meta)

    def summary(self):
        """A few facts about the trace, for reports."""
        grad = self.grad.astype(np.int64)
        thr = self.thresholds().astype(np.int64)
        return {
            "gradients": int(len(self)),
            "steps": int(self.steps),
            "distinct_addresses": int(len(np.unique(self.addr))) if len(self) else 0,
            "zero_fraction": float(np.mean(grad == 0)) if len(self) else 0.0,
            "direct_fraction": float(np.mean(np.abs(grad) >= thr)) if len(self) else 0.0,
            "threshold_min": int(thr.min()) if len(self) else None,
            "threshold_max": int(thr.max()) if len(self) else None,
            "abs_grad_percentiles": {
                str(p): float(np.percentile(np.abs(grad), p)) for p in (50, 90, 99, 99.9)
            } if len(self) else {},
        }


def save(trace, path):
    """Write ``trace`` to ``path`` (a ``.npz`` file)."""
    meta = dict(trace.meta)
    meta.update(format=FORMAT, version=VERSION, name=trace.name,
                description=trace.description, threshold_per=trace.threshold_per)
    from gradient_compressor.console import replacing
    with replacing(path) as [part], open(part, "wb") as f:
        np.savez_compressed(f, addr=trace.addr, grad=trace.grad, step_end=trace.step_end,
                            threshold=trace.threshold, meta=np.array(json.dumps(meta)))


def load(path):
    """Read a trace written by :func:`save`; raise :class:`TraceError` on any problem."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise TraceError(f"{path}: no such trace file")
    if os.path.isdir(path):
        raise TraceError(f"{path}: is a directory, not a trace file")
    if not zipfile.is_zipfile(path):
        raise TraceError(f"{path}: not a .npz trace file (not a zip archive)")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except Exception as error:   # corrupt members, pickled objects, ...
        raise TraceError(f"{path}: cannot read the archive: {error}") from None
    missing = [name for name in (*_ARRAYS, "meta") if name not in arrays]
    if missing:
        raise TraceError(f"{path}: missing array(s) {', '.join(missing)} "
                         f"(a trace holds addr, grad, step_end, threshold and meta)")
    for name, dtype in _ARRAYS.items():
        if arrays[name].dtype != dtype:
            raise TraceError(f"{path}: '{name}' must be {np.dtype(dtype).name}, "
                             f"not {arrays[name].dtype}")
    raw = arrays["meta"]
    if raw.shape != () or raw.dtype.kind != "U":
        raise TraceError(f"{path}: 'meta' must be a 0-d string array holding JSON")
    try:
        meta = json.loads(str(raw))
    except json.JSONDecodeError as error:
        raise TraceError(f"{path}: 'meta' is not valid JSON: {error}") from None
    if not isinstance(meta, dict):
        raise TraceError(f"{path}: 'meta' must be a JSON object")
    if meta.get("format") != FORMAT:
        raise TraceError(f"{path}: meta 'format' is {meta.get('format')!r}, "
                         f"expected {FORMAT!r}")
    if meta.get("version") != VERSION:
        raise TraceError(f"{path}: trace format version {meta.get('version')!r} is not "
                         f"supported (this reader knows version {VERSION})")
    if meta.get("threshold_per", "step") not in ("step", "gradient"):
        raise TraceError(f"{path}: meta 'threshold_per' must be 'step' or 'gradient'")
    per = meta.get("threshold_per", "step")
    expected = len(arrays["step_end"]) if per == "step" else len(arrays["grad"])
    if len(arrays["threshold"]) != expected:
        raise TraceError(f"{path}: 'threshold' has {len(arrays['threshold'])} entries but "
                         f"threshold_per={per!r} needs {expected}")
    try:
        return Trace(arrays["addr"], arrays["grad"], arrays["step_end"], arrays["threshold"],
                     name=str(meta.get("name", os.path.basename(path))),
                     description=str(meta.get("description", "")), meta=meta)
    except TraceError as error:
        raise TraceError(f"{path}: {error}") from None
