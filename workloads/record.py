"""Record real gradients by training a model with PyTorch on the CPU: as a trace, or streamed.

Optional: needs the ``record`` extra (PyTorch, scikit-learn; docs/training.md says how to get
PyTorch's CPU wheel). The tiny traces it wrote are committed in ``workloads/traces/``, so
reports and tests need no PyTorch. The models are in :mod:`workloads.models`.

What is recorded: every gradient that backpropagation produces, tensor by tensor in the order
autograd produces them (a hook on each parameter: the last layer first), each tensor in address
order, for every micro-batch of every step (gradient accumulation: ``micro_batches`` backward
passes per optimiser step). An embedding with sparse gradients writes one row per lookup
(``dim`` values), in lookup order, as an accelerator's backward pass for a lookup does; popular
rows recur within a step. Each tensor occupies ``[base, base + size)``, the bases in the order
the model registers its parameters, each a multiple of 64 (:class:`TensorLayout`).

Quantisation (:class:`Quantiser`, the one place for the rule): each tensor gets its own scale,
fixed for the whole run, from the first micro-batch in which it appears: ``scale = max|g| /
8192`` (a 4x headroom below the int16 limit for later steps; values beyond saturate, and the
trace's meta counts them). The threshold (one per step, the same for every step) is the 99th
percentile of ``|q|`` over the first step (:func:`step_threshold`), so about 1% of the
gradients take the direct path, the sparsity that deep gradient compression aims at.

Where the gradients go: :func:`train` hands each micro-batch's quantised gradients to a *sink*
through a :class:`GradientStream` (which holds the first step back until its threshold is
known). :class:`TraceSink` collects them into a :class:`~workloads.trace.Trace`
(:func:`record`); :class:`reports.write_path.CompressedWritePath` streams them through the
compressor's policy and, in the loop, gives the optimiser what DRAM holds after each step's
flush. A sink has three methods:

* ``start(layout, threshold)``: before the first gradient;
* ``micro_batch(addr, grad)``: one backward pass's gradients in write order (``uint32``,
  ``int16``);
* ``end_step()``: the flush; returns ``None``, or the ``int64`` sum per address of what DRAM
  received in the step (``layout.total`` of them), which the optimiser then sees, de-quantised.

Run: ``python -m gradient_compressor.workloads.record --model embed
--out workloads/traces/tiny-embed.npz``.
"""

import sys

import numpy as np

from .trace import Trace, save

__all__ = ["SCALE_DIV", "TensorLayout", "Quantiser", "step_threshold", "GradientStream",
           "TraceSink", "train", "record", "main"]

#: A tensor's scale is its first micro-batch's ``max|g|`` over this.
SCALE_DIV = 8192
#: The threshold is this percentile of ``|q|`` over the first step.
THRESHOLD_PERCENTILE = 99
#: Each tensor's base address is a multiple of this.
ALIGN = 64
_QMIN, _QMAX = -2 ** 15, 2 ** 15 - 1


def _require_torch():
    try:
        import torch
    except ImportError:
        raise SystemExit("error: recording needs PyTorch: pip install -e '.[record]' "
                         "(docs/training.md: the CPU wheel; the committed traces in "
                         "workloads/traces/ need no PyTorch)") from None
    return torch


class TensorLayout:
    """Where each tensor lies in the accelerator's address space.

    Parameters
    ----------
    tensors : list of (str, int)
        Names and sizes, in address order; each base is the previous end rounded up to a
        multiple of :data:`ALIGN`.
    exact : sequence of str
        Prefixes of the names of the tensors a user would keep exact (the model's; for the
        bypass windows of :func:`reports.write_path.mode_operations`).
    """

    def __init__(self, tensors, exact=()):
        self.exact = tuple(exact)
        self.names = [name for name, _ in tensors]
        self.size = dict(tensors)
        self.base, base = {}, 0
        for name, size in tensors:
            self.base[name] = base
            base += -(-size // ALIGN) * ALIGN
        #: Addresses spanned, ``[0, total)``.
        self.total = base

    def addresses(self, name, index=None):
        """The addresses of tensor ``name``'s elements ``index`` (all of them, in order, if
        None)."""
        index = np.arange(self.size[name]) if index is None else index
        return self.base[name] + index

    def ranges(self, prefixes):
        """The address ranges ``[(first, last)]`` (inclusive) of the tensors whose names start
        with one of ``prefixes``, tensors next to each other in the layout merged."""
        out = []
        previous = None
        for i, name in enumerate(self.names):
            if not name.startswith(tuple(prefixes)):
                continue
            last = self.base[name] + self.size[name] - 1
            if out and previous == i - 1:
                out[-1] = (out[-1][0], last)
            else:
                out.append((self.base[name], last))
            previous = i
        return out

    def meta(self, scales):
        """The trace's ``tensors`` list."""
        return [{"name": name, "base": self.base[name], "size": self.size[name],
                 "scale": scales.get(name, 1.0)} for name in self.names]


class Quantiser:
    """Per-tensor int16 quantisation with scales fixed at each tensor's first micro-batch.

    Attributes
    ----------
    scales : dict
        ``{tensor name: scale}`` (``real = q * scale``).
    saturated : int
        Gradients clipped to the int16 range so far.
    """

    def __init__(self):
        self.scales = {}
        self.saturated = 0

    def quantise(self, name, values):
        """``values`` (float64) of tensor ``name`` as int16, its scale set on first use."""
        if name not in self.scales:
            peak = float(np.max(np.abs(values))) if len(values) else 0.0
            self.scales[name] = peak / SCALE_DIV if peak > 0 else 1.0
        q = np.rint(values / self.scales[name])
        self.saturated += int(np.count_nonzero(np.abs(q) > _QMAX))
        return np.clip(q, _QMIN, _QMAX).astype(np.int16)

    def dequantise(self, name, sums):
        """Integer sums of tensor ``name`` as real values (float64)."""
        return sums * self.scales.get(name, 1.0)


def step_threshold(grads):
    """The threshold of a run: the :data:`THRESHOLD_PERCENTILE` th percentile of ``|q|`` over
    its first step's gradients ``grads``, at least 1."""
    if not len(grads):
        return 1
    return max(1, int(np.percentile(np.abs(grads.astype(np.int64)), THRESHOLD_PERCENTILE)))


class GradientStream:
    """Quantises a run's gradients micro-batch by micro-batch and hands them to ``sink``;
    the first step is held back until its end, when the threshold is known.

    Parameters
    ----------
    layout : TensorLayout
    sink : object
        Has ``start``, ``micro_batch`` and ``end_step`` (see the module documentation).
    """

    def __init__(self, layout, sink):
        self.layout, self.sink = layout, sink
        self.quantiser = Quantiser()
        self.threshold = None
        self.gradients = 0
        self._held = []

    def micro_batch(self, events):
        """One backward pass: ``events`` are ``(tensor name, flat indices or None for all,
        float64 values)`` in the order backpropagation produced them."""
        addr, grad = [], []
        for name, index, values in events:
            addr.append(self.layout.addresses(name, index))
            grad.append(self.quantiser.quantise(name, values))
        addr = np.concatenate(addr).astype(np.uint32) if addr else np.empty(0, np.uint32)
        grad = np.concatenate(grad) if grad else np.empty(0, np.int16)
        self.gradients += len(grad)
        if self.threshold is None:
            self._held.append((addr, grad))
        else:
            self.sink.micro_batch(addr, grad)

    def end_step(self):
        """The flush: ``{tensor name: float64 values}`` of what DRAM holds after it,
        de-quantised, if the sink returns its sums, else None."""
        if self.threshold is None:
            self.threshold = step_threshold(np.concatenate([g for _, g in self._held]
                                                           or [np.empty(0, np.int16)]))
            self.sink.start(self.layout, self.threshold)
            for addr, grad in self._held:
                self.sink.micro_batch(addr, grad)
            self._held = []
        sums = self.sink.end_step()
        if sums is None:
            return None
        return {name: self.quantiser.dequantise(
                    name, sums[self.layout.base[name]:][:self.layout.size[name]])
                for name in self.layout.names}


class TraceSink:
    """A sink that keeps every gradient, for :meth:`trace`."""

    def __init__(self):
        self.addr, self.grad, self.step_end, self.n = [], [], [], 0
        self.threshold = None

    def start(self, layout, threshold):
        self.threshold = threshold

    def micro_batch(self, addr, grad):
        self.addr.append(addr)
        self.grad.append(grad)
        self.n += len(grad)

    def end_step(self):
        self.step_end.append(self.n)

    def trace(self, **fields):
        """The :class:`~workloads.trace.Trace` of what was kept (``fields``: name,
        description, meta)."""
        steps = len(self.step_end)
        return Trace(np.concatenate(self.addr).astype(np.uint32),
                     np.concatenate(self.grad).astype(np.int16), np.array(self.step_end),
                     np.full(steps, self.threshold, dtype=np.uint16), **fields)


def _hooks(torch, named_parameters, events):
    """A hook on each parameter that appends ``(name, index, values)`` to ``events``."""
    def hook_for(name):
        def hook(grad):
            if grad.is_sparse:
                # One row per lookup, in lookup order (uncoalesced).
                rows = grad._indices()[0].numpy()
                vals = grad._values().numpy()
                width = vals.shape[1]
                index = (rows[:, None] * width + np.arange(width)[None, :]).ravel()
                events.append((name, index, vals.ravel().astype(np.float64)))
            else:
                events.append((name, None, grad.detach().reshape(-1).numpy().astype(np.float64)))
        return hook
    for name, p in named_parameters:
        p.register_hook(hook_for(name))


def train(kind, *, steps, micro_batches, batch_size, seed=0, sink=None, on_step=None,
          **model_args):
    """Train a model of :data:`workloads.models.BUILDERS`; with a ``sink``, every gradient
    goes to it through a :class:`GradientStream`, and where the sink returns DRAM's sums the
    optimiser steps on them (the write path in the loop).

    Parameters
    ----------
    kind : str
        A model name (``embed``, ``mlp``, ``recsys``, ``lm``, ``digits``).
    steps, micro_batches, batch_size, seed : int
    sink : object or None
        None: plain FP32 training, no gradient leaves autograd.
    on_step : callable or None
        ``on_step(step, loss)`` after each optimiser step.
    **model_args
        The builder's size parameters.

    Returns
    -------
    dict
        ``losses`` (per step), ``evaluation`` (held-out ``loss`` and ``accuracy``),
        ``layout``, ``stream`` (None without a sink), ``spec`` and ``torch``.
    """
    from .models import BUILDERS
    torch = _require_torch()
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    spec = BUILDERS[kind](torch, seed, **model_args)
    named = list(spec.model.named_parameters())
    layout = TensorLayout([(name, p.numel()) for name, p in named], exact=spec.exact)
    stream, events = None, []
    if sink is not None:
        stream = GradientStream(layout, sink)
        _hooks(torch, named, events)
    optimiser = spec.optimiser(spec.model.parameters())
    losses = []
    for step in range(steps):
        optimiser.zero_grad()
        total = 0.0
        for _ in range(micro_batches):
            x, y = spec.batch(batch_size)
            loss = spec.loss(spec.model(x), y) / micro_batches
            loss.backward()
            total += float(loss.detach())
            if stream is not None:
                stream.micro_batch(events)
                events.clear()
        if stream is not None:
            dram = stream.end_step()
            if dram is not None:
                for name, p in named:
                    p.grad = torch.from_numpy(dram[name]).reshape(p.shape).to(p.dtype)
        optimiser.step()
        losses.append(total)
        if on_step is not None:
            on_step(step, total)
    return {"losses": losses, "evaluation": spec.evaluate(), "layout": layout,
            "stream": stream, "spec": spec, "torch": torch.__version__}


def record(*, kind="embed", steps=5, micro_batches=4, batch_size=16, seed=0, **model_args):
    """Train and record every gradient; return a :class:`~workloads.trace.Trace` (named
    ``tiny-embed`` or ``tiny-mlp`` for the tiny models, else ``train-<kind>``)."""
    sink = TraceSink()
    run = train(kind, steps=steps, micro_batches=micro_batches, batch_size=batch_size,
                seed=seed, sink=sink, **model_args)
    stream, spec = run["stream"], run["spec"]
    threshold = stream.threshold
    tiny = kind in ("embed", "mlp")     # the committed traces' words, kept
    what = (f" of a tiny {spec.description} on generated data: {steps} SGD steps" if tiny
            else f", {spec.description}: {steps} optimiser steps")
    return sink.trace(
        name=f"tiny-{kind}" if tiny else f"train-{kind}",
        description=(f"PyTorch {run['torch']} CPU training{what} x {micro_batches} "
                     f"micro-batches of {batch_size}; per-tensor int16 scales, "
                     f"threshold = 99th percentile of |q| in step 0 ({threshold})"),
        meta={"source": "workloads.record", "model": kind, "seed": seed,
              "steps": steps, "micro_batches": micro_batches,
              "batch_size": batch_size, "lr": spec.lr, "losses": run["losses"],
              "saturated": stream.quantiser.saturated, "torch": run["torch"],
              "tensors": run["layout"].meta(stream.quantiser.scales)})


def main(argv=None):
    from .models import BUILDERS
    from gradient_compressor.console import ArgumentParser, file_name
    parser = ArgumentParser(
        prog="python -m gradient_compressor.workloads.record",
        description="Record a real gradient trace by training a model on the CPU "
                    "(needs PyTorch: pip install -e '.[record]').")
    parser.add_argument("--model", choices=sorted(BUILDERS), default="embed")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--micro-batches", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=file_name, required=True, help="output .npz trace")
    args = parser.parse_args(argv)
    if min(args.steps, args.micro_batches, args.batch_size) < 1:
        parser.error("--steps, --micro-batches and --batch-size must be at least 1")
    trace = record(kind=args.model, steps=args.steps, micro_batches=args.micro_batches,
                   batch_size=args.batch_size, seed=args.seed)
    save(trace, args.out)
    print(f"wrote {args.out}: {len(trace)} gradients, {trace.steps} steps, threshold "
          f"{int(trace.threshold[0])}, losses {[round(l, 3) for l in trace.meta['losses']]}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
