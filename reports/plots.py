"""PNG plots of the reports (matplotlib, Agg backend: no display needed)."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from gradient_compressor.model import CAUSES  # noqa: E402

__all__ = ["plot_causes", "plot_bursts", "plot_summary", "plot_sweep"]

COLOURS = {"DIRECT": "#d62728", "ACCUM_THRESHOLD": "#ff7f0e", "MAX_UPDATES": "#9467bd",
           "EVICTION": "#1f77b4", "FLUSH": "#2ca02c", "STOCHASTIC": "#8c564b"}


def plot_causes(metrics, path, geometry):
    """Per step: DRAM writes by cause (stacked), with the no-compression and oracle levels."""
    steps = metrics["writes_per_step"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4),
                                   gridspec_kw={"width_ratios": [2, 1]})
    xs = list(range(len(steps)))
    bottom = [0] * len(steps)
    for cause in CAUSES:
        values = [s[cause] for s in steps]
        if any(values):
            ax1.bar(xs, values, bottom=bottom, label=cause, color=COLOURS[cause])
            bottom = [b + v for b, v in zip(bottom, values)]
    # One tick per step (a run of one step would otherwise get fractional ticks), and room
    # above the bars for the legend.
    ax1.set_xticks(xs, [str(x) for x in xs] if len(xs) <= 20 else None)
    if len(xs) > 20:
        ax1.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax1.set_xlim(-0.6, len(steps) - 0.4)
    ax1.set_ylim(0, max(bottom + [1]) * 1.3)
    ax1.set_xlabel("training step (flush at the end of each)")
    ax1.set_ylabel("DRAM writes")
    ax1.set_title(f"{metrics['workload']}: writes per step by cause ({geometry})")
    ax1.legend(fontsize=8, loc="upper center", ncol=3)
    # Totals: none / RTL / oracle, stacked by cause.
    refs = metrics["reference_points"]
    columns = [("no compression", {"DIRECT": metrics["gradients"]}, True),
               ("RTL", metrics["writes_by_cause"], False),
               ("oracle\n(unbounded L1)", refs["oracle"]["writes_by_cause"], False)]
    for i, (label, causes, plain) in enumerate(columns):
        base = 0
        for cause in CAUSES:
            value = causes.get(cause, 0)
            if value:
                ax2.bar(i, value, bottom=base, color="#999999" if plain else COLOURS[cause])
                base += value
        ax2.text(i, base, f"{base}", ha="center", va="bottom", fontsize=8)
    ax2.set_xticks(range(3), [c[0] for c in columns], fontsize=8)
    ax2.set_ylabel("DRAM writes (after the final flush)")
    ax2.set_title("totals")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_bursts(metrics, path):
    """Histogram of DRAM burst lengths (runs of writes on consecutive cycles)."""
    hist = {int(k): v for k, v in metrics["bursts"]["histogram"].items()}
    fig, ax = plt.subplots(figsize=(6, 3.5))
    longest = max(hist, default=1)
    if longest <= 40:
        ax.bar(list(hist), list(hist.values()), color="#1f77b4")
    else:   # log-spaced bins, so that short and long bursts both show
        edges = sorted({int(round(e)) for e in
                        [1.5 ** k for k in range(0, 64) if 1.5 ** k <= longest * 1.5]} |
                       {1, longest + 1})
        ax.hist(list(hist), bins=edges, weights=list(hist.values()), color="#1f77b4",
                edgecolor="white")
        ax.set_xscale("log")
    ax.set_xlabel("burst length (consecutive-cycle DRAM writes)")
    ax.set_ylabel("bursts")
    ax.set_title(f"{metrics['workload']}: {metrics['bursts']['count']} bursts")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_summary(all_metrics, path, geometry):
    """Compression ratio per workload: RTL vs the unbounded-L1 oracle (1.0 = no compression)."""
    ok = [m for m in all_metrics if m["conservation"]["ok"]]
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(ok) + 2), 4))
    xs = range(len(ok))
    rtl = [m["compression_ratio"] or 0 for m in ok]
    oracle = [m["reference_points"]["oracle"]["compression_ratio"] or 0 for m in ok]
    ax.bar([x - 0.2 for x in xs], rtl, width=0.4, label=f"RTL ({geometry})", color="#1f77b4")
    ax.bar([x + 0.2 for x in xs], oracle, width=0.4, label="oracle (unbounded L1)",
           color="#aec7e8")
    ax.axhline(1.0, color="k", lw=0.8, ls="--", label="no compression")
    for x, r in zip(xs, rtl):
        ax.text(x - 0.2, r, f"{r:.2f}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(list(xs), [m["workload"] for m in ok], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("compression ratio (gradients / DRAM writes)")
    ax.set_title("after the final flush")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_sweep(points, oracle, path, title, engine_note):
    """Compression ratio against L1 entries, one line per (ways, threshold), oracle as lines."""
    fig, ax = plt.subplots(figsize=(10.5, 5))
    thresholds = sorted({p["threshold"] for p in points})
    ways_list = sorted({p["ways"] for p in points})
    cmap = plt.get_cmap("viridis")
    markers = "os^Dvx*"
    smalls = sorted({p.get("small_threshold", 0) for p in points})
    styles = ["-", "--", "-.", ":"]
    for ti, threshold in enumerate(thresholds):
        colour = cmap(ti / max(1, len(thresholds) - 1) * 0.85)
        for si, small in enumerate(smalls):
            for wi, ways in enumerate(ways_list):
                line = sorted((p for p in points if p["threshold"] == threshold
                               and p["ways"] == ways and p.get("small_threshold", 0) == small),
                              key=lambda p: p["entries"])
                dual = f", small {small}" if small else ""
                if line:
                    ax.plot([p["entries"] for p in line],
                            [p["compression_ratio"] for p in line],
                            marker=markers[wi % len(markers)], color=colour,
                            ls=styles[si % len(styles)],
                            label=f"threshold {threshold}{dual}, {ways}-way")
        if threshold in oracle:
            ax.axhline(oracle[threshold], color=colour, ls="--", lw=1,
                       label=f"oracle (unbounded L1), threshold {threshold}")
    ax.axhline(1.0, color="k", lw=0.8, ls=":", label="no compression")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("L1 size (entries = sets x ways)")
    ax.set_ylabel("compression ratio after flush (gradients / DRAM writes)")
    ax.set_title(title, fontsize=10)
    ax.text(0.01, 0.01, engine_note, transform=ax.transAxes, fontsize=7, va="bottom")
    # Beside the plot, not over its lines.
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
