"""Record real gradient traces by training a tiny model with PyTorch on the CPU.

Optional: needs the ``record`` extra (``pip install -e '.[record]'``, PyTorch). The traces it
wrote are committed in ``workloads/traces/``, so reports and tests need no PyTorch.

What is recorded: every gradient that backpropagation produces, tensor by tensor in the order
autograd produces them (a hook on each parameter: the last layer first), for every micro-batch
of every step (gradient accumulation: ``micro_batches`` backward passes per optimiser step).
An embedding uses sparse gradients, so each token occurrence writes its row (``dim`` values),
as an accelerator's backward pass for a lookup does; popular rows recur within a step.

Quantisation: each tensor gets its own scale, fixed for the whole trace, from the first
micro-batch: ``scale = max|g| / 8192`` (a 4x headroom below the int16 limit for later steps;
values beyond saturate, and the trace's meta counts them). The threshold (one per step, the
same for every step) is the 99th percentile of ``|q|`` over the first step, so about 1% of the
gradients take the direct path, the sparsity that deep gradient compression aims at.

Data is generated here (no downloads): for the ``embed`` model, sequences of Zipf-distributed
tokens whose class is decided by which of four "keyword" groups is most frequent; for the
``mlp`` model, a noisy linear-plus-ReLU teacher on Gaussian inputs.

Run: ``python -m workloads.record --model embed --out workloads/traces/tiny-embed.npz``.
"""

import argparse
import sys

import numpy as np

from .trace import Trace, save

__all__ = ["record", "main"]

SCALE_DIV = 8192


def _require_torch():
    try:
        import torch
    except ImportError:
        raise SystemExit("error: recording needs PyTorch: pip install -e '.[record]' "
                         "(the committed traces in workloads/traces/ need no PyTorch)")
    return torch


def _model_and_data(torch, kind, seed, vocab, seq, dim, hidden, classes, features):
    nn = torch.nn
    gen = torch.Generator().manual_seed(seed)
    if kind == "embed":
        class TinyEmbed(nn.Module):
            def __init__(self):
                super().__init__()
                self.embedding = nn.Embedding(vocab, dim, sparse=True)
                self.fc0 = nn.Linear(dim, hidden)
                self.fc1 = nn.Linear(hidden, classes)

            def forward(self, tokens):
                x = self.embedding(tokens).mean(dim=1)
                return self.fc1(torch.relu(self.fc0(x)))

        ranks = torch.arange(1, vocab + 1, dtype=torch.float64)
        probs = (1.0 / ranks ** 1.1)
        probs = probs / probs.sum()
        groups = torch.randperm(vocab, generator=gen)[:4 * 8].reshape(4, 8)

        def batch(n):
            tokens = torch.multinomial(probs.expand(n, -1), seq, replacement=True,
                                       generator=gen)
            counts = torch.stack([torch.isin(tokens, g).sum(dim=1) for g in groups], dim=1)
            labels = (counts.float() + 0.1 * torch.rand(counts.shape, generator=gen)).argmax(1)
            return tokens, labels
        return TinyEmbed(), batch

    teacher_w = torch.randn(features, classes, generator=gen)

    def batch(n):
        x = torch.randn(n, features, generator=gen)
        logits = torch.relu(x @ teacher_w) + 0.3 * torch.randn(n, classes, generator=gen)
        return x, logits.argmax(1)
    model = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden // 2),
                          nn.ReLU(), nn.Linear(hidden // 2, classes))
    return model, batch


def record(*, kind="embed", steps=5, micro_batches=4, batch_size=16, lr=0.5, seed=0,
           vocab=128, seq=8, dim=8, hidden=32, classes=4, features=16):
    """Train and record; return a :class:`~workloads.trace.Trace`."""
    torch = _require_torch()
    torch.manual_seed(seed)
    model, batch = _model_and_data(torch, kind, seed, vocab, seq, dim, hidden, classes, features)
    params = list(model.named_parameters())
    bases, base = {}, 0
    for name, p in params:
        bases[name] = base
        base += -(-p.numel() // 64) * 64

    events = []        # (tensor name, flat indices (np) or None, values (np)) in backprop order

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
    for name, p in params:
        p.register_hook(hook_for(name))

    optimiser = torch.optim.SGD(model.parameters(), lr=lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    step_events, losses = [], []
    for step in range(steps):
        optimiser.zero_grad()
        start = len(events)
        total = 0.0
        for _ in range(micro_batches):
            x, y = batch(batch_size)
            loss = loss_fn(model(x), y) / micro_batches
            loss.backward()
            total += float(loss.detach())
        optimiser.step()
        losses.append(total)
        step_events.append(events[start:])

    # Per-tensor scales from the first micro-batch in which each tensor appears.
    scales = {}
    for name, _, vals in step_events[0]:
        if name not in scales:
            peak = float(np.max(np.abs(vals))) if len(vals) else 0.0
            scales[name] = peak / SCALE_DIV if peak > 0 else 1.0

    addr, grad, step_end, saturated, n = [], [], [], 0, 0
    for evs in step_events:
        for name, index, vals in evs:
            q = np.rint(vals / scales[name])
            saturated += int(np.sum(np.abs(q) > 2 ** 15 - 1))
            q = np.clip(q, -2 ** 15, 2 ** 15 - 1)
            idx = np.arange(len(vals)) if index is None else index
            addr.append(bases[name] + idx)
            grad.append(q.astype(np.int16))
            n += len(vals)
        step_end.append(n)
    addr = np.concatenate(addr).astype(np.uint32)
    grad = np.concatenate(grad).astype(np.int16)
    first = grad[:step_end[0]].astype(np.int64)
    threshold = max(1, int(np.percentile(np.abs(first), 99)))
    model_desc = (f"embedding {vocab}x{dim} (sparse) -> mean -> {dim}-{hidden}-{classes} MLP"
                  if kind == "embed" else
                  f"MLP {features}-{hidden}-{hidden // 2}-{classes}")
    return Trace(addr, grad, np.array(step_end), np.full(steps, threshold, dtype=np.uint16),
                 name=f"tiny-{kind}",
                 description=(f"PyTorch {torch.__version__} CPU training of a tiny {model_desc} "
                              f"on generated data: {steps} SGD steps x {micro_batches} "
                              f"micro-batches of {batch_size}; per-tensor int16 scales, "
                              f"threshold = 99th percentile of |q| in step 0 ({threshold})"),
                 meta={"source": "workloads.record", "model": kind, "seed": seed,
                       "steps": steps, "micro_batches": micro_batches,
                       "batch_size": batch_size, "lr": lr, "losses": losses,
                       "saturated": saturated, "torch": torch.__version__,
                       "tensors": [{"name": name, "base": bases[name], "size": p.numel(),
                                    "scale": scales.get(name, 1.0)} for name, p in params]})


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m workloads.record",
        description="Record a real gradient trace by training a tiny model on the CPU "
                    "(needs PyTorch: pip install -e '.[record]').")
    parser.add_argument("--model", choices=("embed", "mlp"), default="embed")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--micro-batches", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="output .npz trace")
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
