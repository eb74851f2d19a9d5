"""Charts: the per-rank load as a PNG (matplotlib) and as text."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import numpy as np

BLOCKS = "▁▂▃▄▅▆▇█"


def sparkline(values, top: float) -> str:
    """One block character per value, its height value / top (eighths)."""
    if top <= 0:
        return BLOCKS[0] * len(values)
    return "".join(BLOCKS[min(len(BLOCKS) - 1, max(0, math.ceil(len(BLOCKS) * v / top) - 1))] for v in values)


NO_MATPLOTLIB = "matplotlib is not installed (pip install matplotlib)"


def pyplot():
    """matplotlib.pyplot on the file-only Agg backend; None without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def draw_chart(path: Path, report: dict) -> Optional[str]:
    """The per-rank load of update_actor per step, balanced vs sequential.
    Returns None when drawn, else why not."""
    plt = pyplot()
    if plt is None:
        return NO_MATPLOTLIB
    steps = report["steps"]
    ranks = report["config"]["ranks"]
    cols = min(4, len(steps))
    rows = math.ceil(len(steps) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows + 0.6), squeeze=False, sharey=True)
    x = np.arange(ranks)
    for ax, result in zip(axes.flat, steps):
        task = result["tasks"]["update_actor"]
        balanced = np.asarray(task["tokens_per_rank"]) / 1000
        sequential = np.asarray(task["sequential_tokens_per_rank"]) / 1000
        ax.bar(x - 0.2, sequential, 0.4, label="SequentialSampler", color="#c8c8c8")
        ax.bar(x + 0.2, balanced, 0.4, label="SeqlenBalancedSampler", color="#2a6fb0")
        ax.axhline(balanced.mean(), color="black", linewidth=0.8, linestyle="--", label="mean")
        ax.set_title(f"step {result['step']}: max/mean {task['sequential_imbalance']:.2f} -> {task['imbalance']:.3f}",
                     fontsize=10)
        ax.set_xlabel("DP rank")
        ax.set_xticks(x)
    for ax in axes[:, 0]:
        ax.set_ylabel("thousand tokens")
    for ax in list(axes.flat)[len(steps):]:
        ax.axis("off")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, frameon=False)
    fig.suptitle("update_actor: tokens per DP rank, per step")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")  # the legend is wider than one step's panel
    plt.close(fig)
    return None


def draw_time_chart(path: Path, report: dict) -> Optional[str]:
    """update_actor's measured CPU seconds per rank per step, and measured
    against what a model of the earlier steps predicted. None when drawn,
    else why not."""
    plt = pyplot()
    if plt is None:
        return NO_MATPLOTLIB
    steps = report["steps"]
    ranks = report["config"]["ranks"]
    fig, (bars, scatter) = plt.subplots(1, 2, figsize=(12, 4.2))
    width = 0.8 / len(steps)
    for i, result in enumerate(steps):
        seconds = np.asarray(result["actor_time"]["seconds_per_rank"])
        bars.bar(np.arange(ranks) + (i - (len(steps) - 1) / 2) * width, seconds, width,
                 label=f"step {result['step']}: idle {100 * result['actor_time']['idle']:.1f}%")
    bars.set_xticks(np.arange(ranks))
    bars.set_xlabel("DP rank")
    bars.set_ylabel("CPU seconds (update_actor)")
    bars.set_title(f"measured time per rank, balanced by {report['config']['workload']}", fontsize=10)
    bars.legend(fontsize=8)
    predicted = [(p, m) for result in steps for p, m in zip(result["actor_time"].get("predicted_seconds_per_rank", []),
                                                              result["actor_time"]["seconds_per_rank"])]
    if predicted:
        p, m = np.asarray(predicted).T
        top = 1.05 * max(p.max(), m.max())
        scatter.plot([0, top], [0, top], color="black", linewidth=0.8, linestyle="--", label="predicted = measured")
        scatter.scatter(p, m, s=18, color="#2a6fb0", label="one rank in one step")
        scatter.set_xlim(0, top)
        scatter.set_ylim(0, top)
        scatter.legend(fontsize=8)
    scatter.set_xlabel("predicted seconds (model fitted on the earlier steps)")
    scatter.set_ylabel("measured seconds")
    scatter.set_title("predicted vs measured time per rank", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return None
