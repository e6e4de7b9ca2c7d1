"""Synthetic gradient traces shaped like real ones, with realistic address orders.

Values: each tensor (layer) has its own scale (log-uniform over a range of quantisation steps),
and each parameter has a slowly varying "true" gradient plus per-micro-batch noise, both drawn
from a Student-t distribution with few degrees of freedom (heavy tails: most values near zero,
a few large). A fraction of the gradients is exactly zero (dead ReLUs, masked tokens). Values
are rounded to int16 (saturating).

Address orders (one ``Trace`` per generator; a flush ends every step):

``one_pass``    one backward pass per step: tensors in backprop order (last layer first), each
                parameter written once.
``microbatch``  gradient accumulation: ``k`` micro-batches per step, each a full backward pass,
                so each parameter is updated ``k`` times per step, a whole model apart.
``embedding``   an embedding table whose rows are looked up by Zipf-distributed tokens: each
                token occurrence writes its row, so popular rows are reused many times within a
                step; the dense layers above it are written once per step.
``tiled``       a matrix-multiply weight gradient computed tile by tile: for each output tile,
                ``k_chunks`` partial sums are written one after the other (short reuse distance).

Every generator is deterministic for a given ``seed``.
"""

import numpy as np

from .trace import Trace

__all__ = ["GENERATORS", "one_pass", "microbatch", "embedding", "tiled", "generate"]

INT16_MIN, INT16_MAX = -2 ** 15, 2 ** 15 - 1


def _layout(sizes, align=64):
    """Base address of each tensor: contiguous, each aligned to ``align`` words."""
    bases, base = [], 0
    for size in sizes:
        bases.append(base)
        base += -(-size // align) * align
    return bases


def _scales(rng, n, low, high):
    return np.exp(rng.uniform(np.log(low), np.log(high), size=n))


def _heavy(rng, size, df):
    return rng.standard_t(df, size=size)


def _quantise(values):
    return np.clip(np.rint(values), INT16_MIN, INT16_MAX).astype(np.int16)


class _Values:
    """Per-parameter gradient source: ``mean_p + noise`` with heavy tails, per-tensor scale."""

    def __init__(self, rng, sizes, scale_range, df, signal, zero_fraction):
        self.rng, self.df, self.zero_fraction = rng, df, zero_fraction
        self.scales = _scales(rng, len(sizes), *scale_range)
        self.sizes = sizes
        self.signal = signal
        self.means = [s * signal * _heavy(rng, n, df) for s, n in zip(self.scales, sizes)]

    def drift(self):
        """New step: the true gradient moves a little."""
        for i, (s, n) in enumerate(zip(self.scales, self.sizes)):
            self.means[i] = 0.8 * self.means[i] + 0.2 * s * self.signal * \
                _heavy(self.rng, n, self.df)

    def sample(self, tensor, index=None, share=1.0):
        """Gradient values for ``tensor`` (all parameters, or those at ``index``); ``share`` is
        the fraction of the true gradient this contribution carries (micro-batches, tiles)."""
        mean = self.means[tensor] if index is None else self.means[tensor][index]
        n = len(mean)
        noise = self.scales[tensor] * np.sqrt(share) * _heavy(self.rng, n, self.df)
        values = share * mean + noise
        if self.zero_fraction:
            values[self.rng.random(n) < self.zero_fraction] = 0
        return _quantise(values)


def _trace(name, description, addr_chunks, grad_chunks, step_end, threshold, meta):
    addr = np.concatenate(addr_chunks).astype(np.uint32) if addr_chunks else np.zeros(0, np.uint32)
    grad = np.concatenate(grad_chunks).astype(np.int16) if grad_chunks else np.zeros(0, np.int16)
    return Trace(addr, grad, np.array(step_end, dtype=np.int64),
                 np.full(len(step_end), threshold, dtype=np.uint16),
                 name=name, description=description, meta=meta)


def _meta(kind, seed, names, sizes, bases, values, **extra):
    return {"source": f"workloads.synthetic.{kind}", "seed": seed,
            "tensors": [{"name": n, "base": int(b), "size": int(s), "scale": float(sc)}
                        for n, s, b, sc in zip(names, sizes, bases, values.scales)],
            **extra}


def _mlp_sizes(widths):
    names, sizes = [], []
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
        names += [f"fc{i}.weight", f"fc{i}.bias"]
        sizes += [a * b, b]
    return names, sizes


def one_pass(*, steps=4, widths=(64, 48, 32, 10), threshold=50, scale_range=(2, 24), df=3.0,
             zero_fraction=0.2, seed=0):
    """One backward pass per step over an MLP of the given layer widths."""
    return microbatch(steps=steps, k=1, widths=widths, threshold=threshold,
                      scale_range=scale_range, df=df, zero_fraction=zero_fraction, seed=seed,
                      _name="synthetic-one-pass")


def microbatch(*, steps=4, k=4, widths=(32, 24, 16, 10), threshold=50, scale_range=(2, 24),
               df=3.0, zero_fraction=0.2, seed=0, _name="synthetic-microbatch"):
    """``k`` micro-batches per step, each a full backward pass (gradient accumulation)."""
    rng = np.random.default_rng(seed)
    names, sizes = _mlp_sizes(list(widths))
    bases = _layout(sizes)
    values = _Values(rng, sizes, scale_range, df, signal=0.5, zero_fraction=zero_fraction)
    order = list(range(len(sizes)))[::-1]            # backprop: last layer first
    addr, grad, step_end, total = [], [], [], 0
    for step in range(steps):
        if step:
            values.drift()
        for _ in range(k):
            for t in order:
                addr.append(bases[t] + np.arange(sizes[t]))
                grad.append(values.sample(t, share=1.0 / k))
                total += sizes[t]
        step_end.append(total)
    desc = (f"MLP {'-'.join(map(str, widths))}, {steps} steps x {k} micro-batch(es), "
            f"backprop order, Student-t(df={df}) values, per-layer scales "
            f"{scale_range[0]}..{scale_range[1]} LSB, threshold {threshold}")
    return _trace(_name, desc, addr, grad, step_end, threshold,
                  _meta("microbatch", seed, names, sizes, bases, values, k=k,
                        widths=list(widths), steps=steps))


def embedding(*, steps=4, vocab=512, dim=16, tokens=256, zipf=1.2, dense=(16, 32, 10),
              threshold=50, scale_range=(2, 24), df=3.0, zero_fraction=0.0, seed=0):
    """An embedding table (``vocab`` x ``dim``) under Zipf token lookups, then dense layers."""
    rng = np.random.default_rng(seed)
    dnames, dsizes = _mlp_sizes([dim, *dense[1:]]) if dense else ([], [])
    names, sizes = ["embedding.weight", *dnames], [vocab * dim, *dsizes]
    bases = _layout(sizes)
    values = _Values(rng, sizes, scale_range, df, signal=0.5, zero_fraction=zero_fraction)
    addr, grad, step_end, total = [], [], [], 0
    for step in range(steps):
        if step:
            values.drift()
        for t in range(len(sizes) - 1, 0, -1):       # dense layers, backprop order
            addr.append(bases[t] + np.arange(sizes[t]))
            grad.append(values.sample(t))
            total += sizes[t]
        rows = (rng.zipf(zipf, size=tokens) - 1) % vocab   # token ids, popular ones first
        rows = rng.permutation(vocab)[rows]                # popular rows spread over the table
        for row in rows:                                   # each occurrence writes its row
            index = row * dim + np.arange(dim)
            addr.append(bases[0] + index)
            grad.append(values.sample(0, index, share=1.0 / 4))
            total += dim
        step_end.append(total)
    desc = (f"embedding {vocab}x{dim} with {tokens} Zipf({zipf}) lookups per step, then "
            f"dense {'-'.join(map(str, [dim, *dense[1:]]))}; {steps} steps, threshold {threshold}")
    return _trace("synthetic-embedding", desc, addr, grad, step_end, threshold,
                  _meta("embedding", seed, names, sizes, bases, values, vocab=vocab, dim=dim,
                        tokens=tokens, zipf=zipf, steps=steps))


def tiled(*, steps=2, m=64, n=64, tile=(8, 8), k_chunks=4, threshold=50, scale_range=(2, 24),
          df=3.0, zero_fraction=0.0, seed=0):
    """A weight gradient ``m`` x ``n`` written as ``k_chunks`` partial sums per output tile."""
    rng = np.random.default_rng(seed)
    names, sizes = ["gemm.weight"], [m * n]
    bases = _layout(sizes)
    values = _Values(rng, sizes, scale_range, df, signal=0.5, zero_fraction=zero_fraction)
    tm, tn = tile
    addr, grad, step_end, total = [], [], [], 0
    for step in range(steps):
        if step:
            values.drift()
        for i0 in range(0, m, tm):
            for j0 in range(0, n, tn):
                rows, cols = np.meshgrid(np.arange(i0, min(i0 + tm, m)),
                                         np.arange(j0, min(j0 + tn, n)), indexing="ij")
                index = (rows * n + cols).ravel()
                for _ in range(k_chunks):
                    addr.append(bases[0] + index)
                    grad.append(values.sample(0, index, share=1.0 / k_chunks))
                    total += len(index)
        step_end.append(total)
    desc = (f"GEMM weight gradient {m}x{n}, {tm}x{tn} output tiles, {k_chunks} partial sums "
            f"per tile, {steps} steps, threshold {threshold}")
    return _trace("synthetic-tiled", desc, addr, grad, step_end, threshold,
                  _meta("tiled", seed, names, sizes, bases, values, m=m, n=n, tile=list(tile),
                        k_chunks=k_chunks, steps=steps))


GENERATORS = {
    "synthetic-one-pass": one_pass,
    "synthetic-microbatch": microbatch,
    "synthetic-embedding": embedding,
    "synthetic-tiled": tiled,
}


def generate(name, **kwargs):
    """Build the synthetic trace ``name`` (a key of :data:`GENERATORS`)."""
    try:
        generator = GENERATORS[name]
    except KeyError:
        raise ValueError(f"unknown synthetic workload {name!r}; "
                         f"choose from {', '.join(GENERATORS)}") from None
    return generator(**kwargs)
