"""The models that :mod:`workloads.record` trains (PyTorch, CPU), with their data and metrics.

Each builder takes ``torch``, a seed and its size parameters, and returns a :class:`ModelSpec`:
the model, a function drawing a training batch, the loss, the optimiser, an evaluation on
held-out data and the tensors a user would keep exact (for the bypass windows). The data
needs no download:

* ``embed``, ``mlp``: the tiny models of the committed traces (``tiny-embed``, ``tiny-mlp``):
  Zipf token sequences labelled by keyword groups; a noisy ReLU teacher on Gaussian inputs;
* ``recsys``: a recommendation model (DLRM-like) with several embedding tables, each indexed
  by a Zipf-distributed row per sample (sparse gradients: one row per lookup), a bottom MLP on
  dense features and a top MLP on their concatenation; clicks from a hidden teacher;
* ``lm``: a small transformer language model over bytes, trained on the Python standard
  library's own ``.py`` sources (the running interpreter's: every machine has them);
* ``digits``: an MLP on scikit-learn's bundled 8 x 8 digits (1797 images).

The order in which a model registers its parameters is the order of their addresses
(:class:`workloads.record.TensorLayout`): embeddings first, the head last, so that the tensors
kept exact lie in at most two address ranges (the compressor has two bypass windows).
"""

from dataclasses import dataclass, field
from typing import Callable

__all__ = ["ModelSpec", "BUILDERS", "stdlib_text"]


@dataclass
class ModelSpec:
    """A model to train and what it needs.

    Attributes
    ----------
    model : torch.nn.Module
    batch : callable
        ``batch(n) -> (inputs, targets)``: the next training batch of ``n`` samples.
    loss : callable
        ``loss(output, targets) -> scalar tensor``.
    optimiser : callable
        ``optimiser(parameters) -> torch.optim.Optimizer``.
    evaluate : callable
        ``evaluate() -> {"loss": float, "accuracy": float}`` on held-out data (the same data
        for every run of a seed).
    exact : tuple of str
        Prefixes of the parameter names a user would keep exact (bypass windows).
    description : str
    lr : float
    """
    model: object
    batch: Callable
    loss: Callable
    optimiser: Callable
    evaluate: Callable
    exact: tuple = ()
    description: str = ""
    lr: float = 0.0
    extra: dict = field(default_factory=dict)


def _accuracy_eval(torch, model, loss_fn, inputs, targets, predict):
    def evaluate():
        with torch.no_grad():
            out = model(inputs)
            return {"loss": float(loss_fn(out, targets)),
                    "accuracy": float((predict(out) == targets).float().mean())}
    return evaluate


def _sgd(torch, lr):
    return lambda parameters: torch.optim.SGD(parameters, lr=lr)


def tiny_embed(torch, seed, *, vocab=128, seq=8, dim=8, hidden=32, classes=4, lr=0.5):
    """The ``tiny-embed`` model (its random draws in the order the committed trace was made)."""
    nn = torch.nn
    gen = torch.Generator().manual_seed(seed)

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
        tokens = torch.multinomial(probs.expand(n, -1), seq, replacement=True, generator=gen)
        counts = torch.stack([torch.isin(tokens, g).sum(dim=1) for g in groups], dim=1)
        labels = (counts.float() + 0.1 * torch.rand(counts.shape, generator=gen)).argmax(1)
        return tokens, labels
    model = TinyEmbed()
    loss_fn = nn.CrossEntropyLoss()
    return ModelSpec(model, batch, loss_fn, _sgd(torch, lr),
                     lambda: _accuracy_eval(torch, model, loss_fn, *batch(1024),
                                            lambda out: out.argmax(1))(),
                     exact=("embedding.",), lr=lr,
                     description=f"embedding {vocab}x{dim} (sparse) -> mean -> "
                                 f"{dim}-{hidden}-{classes} MLP")


def tiny_mlp(torch, seed, *, features=16, hidden=32, classes=4, lr=0.5):
    """The ``tiny-mlp`` model (its random draws in the order the committed trace was made)."""
    nn = torch.nn
    gen = torch.Generator().manual_seed(seed)
    teacher_w = torch.randn(features, classes, generator=gen)

    def batch(n):
        x = torch.randn(n, features, generator=gen)
        logits = torch.relu(x @ teacher_w) + 0.3 * torch.randn(n, classes, generator=gen)
        return x, logits.argmax(1)
    model = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden // 2),
                          nn.ReLU(), nn.Linear(hidden // 2, classes))
    loss_fn = nn.CrossEntropyLoss()
    return ModelSpec(model, batch, loss_fn, _sgd(torch, lr),
                     lambda: _accuracy_eval(torch, model, loss_fn, *batch(1024),
                                            lambda out: out.argmax(1))(),
                     exact=("4.",), lr=lr,
                     description=f"MLP {features}-{hidden}-{hidden // 2}-{classes}")


def recsys(torch, seed, *, rows=(50000, 20000, 5000), dim=16, dense=8, zipf=1.1, lr=1.0,
           evaluate_samples=4096):
    """A DLRM-like click model: ``len(rows)`` embedding tables of ``dim`` (sparse gradients),
    one Zipf(``zipf``) lookup per table and sample, a bottom MLP on ``dense`` features, a top
    MLP on the concatenation; clicks from a hidden teacher with its own row vectors."""
    nn = torch.nn
    gen = torch.Generator().manual_seed(seed)
    probs = []
    for n in rows:
        p = 1.0 / torch.arange(1, n + 1, dtype=torch.float64) ** zipf
        probs.append(p / p.sum())
    teacher_rows = [torch.randn(n, 4, generator=gen) for n in rows]
    teacher_dense = torch.randn(dense, 4, generator=gen)
    teacher_out = torch.randn(4, generator=gen)

    def draw(n, g):
        index = torch.stack([torch.multinomial(p, n, replacement=True, generator=g)
                             for p in probs], dim=1)
        x = torch.randn(n, dense, generator=g)
        h = x @ teacher_dense + sum(t[index[:, k]] for k, t in enumerate(teacher_rows))
        logit = torch.tanh(h) @ teacher_out + 0.3 * torch.randn(n, generator=g)
        return (index, x), (logit > 0).float()

    class Recsys(nn.Module):
        def __init__(self):
            super().__init__()
            self.tables = nn.ModuleList(nn.Embedding(n, dim, sparse=True) for n in rows)
            self.bottom = nn.Sequential(nn.Linear(dense, 32), nn.ReLU(), nn.Linear(32, dim))
            self.top = nn.Sequential(nn.Linear(dim * (len(rows) + 1), 64), nn.ReLU(),
                                     nn.Linear(64, 1))

        def forward(self, inputs):
            index, x = inputs
            parts = [self.bottom(x)] + [t(index[:, k]) for k, t in enumerate(self.tables)]
            return self.top(torch.relu(torch.cat(parts, dim=1))).squeeze(1)

    model = Recsys()
    for table in model.tables:
        nn.init.normal_(table.weight, std=0.1)
    held_out = draw(evaluate_samples, torch.Generator().manual_seed(10_000 + seed))
    loss_fn = nn.BCEWithLogitsLoss()
    return ModelSpec(model, lambda n: draw(n, gen), loss_fn, _sgd(torch, lr),
                     _accuracy_eval(torch, model, loss_fn, *held_out,
                                    lambda out: (out > 0).float()),
                     exact=("top.2.",), lr=lr,
                     description=f"recommendation model: {len(rows)} embedding tables "
                                 f"({' + '.join(map(str, rows))} rows x {dim}, sparse, "
                                 f"Zipf({zipf}) lookups), bottom MLP {dense}-32-{dim}, top MLP "
                                 f"{dim * (len(rows) + 1)}-64-1")


def stdlib_text(limit):
    """The first ``limit`` bytes of the Python standard library's top-level ``.py`` files,
    in name order, concatenated (the running interpreter's library)."""
    import sysconfig
    from pathlib import Path
    chunks, size = [], 0
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        data = path.read_bytes()
        chunks.append(data)
        size += len(data)
        if size >= limit:
            break
    return b"".join(chunks)[:limit]


def lm(torch, seed, *, dim=128, heads=4, layers=2, context=64, text_bytes=2_000_000, lr=3e-3,
       evaluate_windows=256):
    """A byte-level transformer language model (pre-norm, causal) on the standard library's
    sources: 90 % for training windows, the last 10 % held out."""
    import numpy as np
    nn = torch.nn
    gen = torch.Generator().manual_seed(seed)
    data = torch.from_numpy(np.frombuffer(stdlib_text(text_bytes), np.uint8).astype(np.int64))
    split = len(data) * 9 // 10
    train, valid = data[:split], data[split:]

    def windows(text, starts):
        rows = torch.stack([text[s:s + context + 1] for s in starts.tolist()])
        return rows[:, :-1], rows[:, 1:]

    class TinyLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(256, dim)
            self.pos = nn.Embedding(context, dim)
            self.blocks = nn.ModuleList(
                nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True,
                                           norm_first=True) for _ in range(layers))
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, 256)

        def forward(self, x):
            h = self.tok(x) + self.pos(torch.arange(x.shape[1]))
            mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
            for block in self.blocks:
                h = block(h, src_mask=mask, is_causal=True)
            return self.head(self.norm(h))

    def loss_fn(out, targets):
        return nn.functional.cross_entropy(out.reshape(-1, 256), targets.reshape(-1))

    model = TinyLM()
    starts = torch.linspace(0, len(valid) - context - 2, evaluate_windows).long()
    held_out = windows(valid, starts)
    return ModelSpec(model,
                     lambda n: windows(train, torch.randint(0, split - context - 1, (n,),
                                                            generator=gen)),
                     loss_fn, lambda parameters: torch.optim.Adam(parameters, lr=lr),
                     _accuracy_eval(torch, model, loss_fn, *held_out, lambda out: out.argmax(2)),
                     exact=("tok.", "pos.", "head."), lr=lr,
                     description=f"byte-level transformer LM ({layers} layers, {dim} wide, "
                                 f"{heads} heads, context {context}) on the first "
                                 f"{len(data)} bytes of the Python standard library's .py "
                                 f"sources")


def digits(torch, seed, *, hidden=64, lr=0.3, test=297):
    """An MLP ``64-hidden-hidden-10`` on scikit-learn's digits; the last ``test`` images (of
    a fixed shuffle, the same for every seed) held out."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise SystemExit("error: the digits model needs scikit-learn: pip install -e "
                         "'.[record]'") from None
    nn = torch.nn
    gen = torch.Generator().manual_seed(seed)
    images, labels = load_digits(return_X_y=True)
    x = torch.tensor(images / 16.0, dtype=torch.float32)
    y = torch.tensor(labels, dtype=torch.int64)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(12345))
    train, held = order[:-test], order[-test:]
    model = nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                          nn.Linear(hidden, 10))
    loss_fn = nn.CrossEntropyLoss()

    def batch(n):
        pick = train[torch.randint(0, len(train), (n,), generator=gen)]
        return x[pick], y[pick]
    return ModelSpec(model, batch, loss_fn, _sgd(torch, lr),
                     _accuracy_eval(torch, model, loss_fn, x[held], y[held],
                                    lambda out: out.argmax(1)),
                     exact=("4.",), lr=lr,
                     description=f"MLP 64-{hidden}-{hidden}-10 on scikit-learn's digits "
                                 f"({len(train)} training images, {test} held out)")


#: The model builders by name.
BUILDERS = {"embed": tiny_embed, "mlp": tiny_mlp, "recsys": recsys, "lm": lm, "digits": digits}
