"""The chart: every rank's measured time in the last step, one panel per
method, the slowest rank (the step's time) as a line; the legend above the
panels, clear of the bars."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np

NO_MATPLOTLIB = "matplotlib is not installed (pip install matplotlib)"
COLORS = {"naive": "#b0b0b0", "karmarkar_karp": "#e0a040", "seqflow": "#2a6fb0"}


def pyplot():
    """matplotlib.pyplot on the file-only Agg backend; None without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def figure(report: dict):
    """The chart's figure (None without matplotlib): per split, each rank's
    seconds in the last step, side by side."""
    plt = pyplot()
    if plt is None:
        return None
    last = report["steps"][-1]
    labels = report["config"]["labels"]
    methods = list(labels)
    ranks = report["config"]["ranks"]
    fig, axes = plt.subplots(1, len(methods), figsize=(4 * len(methods), 4), sharey=True, squeeze=False)
    x = np.arange(ranks)
    for ax, method in zip(axes[0], methods):
        row = last["methods"][method]
        seconds = np.asarray(row["seconds_per_rank"])
        ax.bar(x, seconds, 0.7, color=COLORS[method], label="a rank's measured time (forward + backward)")
        ax.axhline(seconds.max(), color="black", linewidth=0.9, linestyle="--",
                   label="the step's time: every rank waits for the slowest")
        ax.set_title(f"{labels[method]}\nstep {1000 * row['step_seconds']:.0f} ms, idle {100 * row['idle']:.1f}%",
                     fontsize=10)
        ax.set_xlabel("DP rank")
        ax.set_xticks(x)
    axes[0, 0].set_ylabel("seconds")
    fig.suptitle(f"step {last['step']}: the same rollout over {ranks} DP ranks, split three ways")
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="upper center", ncol=2, frameon=False,
               bbox_to_anchor=(0.5, 0.93))
    fig.tight_layout(rect=(0, 0, 1, 0.89))  # the top 11% holds the title and the legend
    return fig


def draw_chart(path: Path, report: dict) -> Optional[str]:
    """Writes the chart; None when drawn, else why not."""
    fig = figure(report)
    if fig is None:
        return NO_MATPLOTLIB
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    pyplot().close(fig)
    return None
