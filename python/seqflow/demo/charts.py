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


def draw_chart(path: Path, report: dict) -> Optional[str]:
    """The per-rank load of update_actor per step, balanced vs sequential.
    Returns None when drawn, else why not."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install matplotlib)"
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


