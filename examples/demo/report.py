"""The demo's results: a JSON report and the lines it prints (one table)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from rank_work import idle, predicted_seconds

METHODS = ("naive", "karmarkar_karp", "seqflow")  # as the report names them


def label(method: str, workload: str) -> str:
    """How the table and the chart name a method."""
    return {"naive": "naive (contiguous chunks)",
            "karmarkar_karp": "Karmarkar-Karp on tokens (verl)",
            "seqflow": "seqflow (measured time)" if workload == "online" else "seqflow (tokens)"}[method]


def method_result(positions: list, works: list, seconds: list, predictor) -> dict:
    """One method's entry in a step: where each sample went, the tokens and
    the measured and predicted seconds of each rank."""
    predicted = [predicted_seconds(predictor, work) for work in works]
    return {
        "positions_per_rank": [p.tolist() for p in positions],
        "tokens_per_rank": [work.tokens for work in works],
        "seconds_per_rank": seconds,
        "step_seconds": max(seconds),
        "idle": idle(seconds),
        "predicted_seconds_per_rank": predicted,
        "predicted_idle": idle(predicted),
    }


def summarize(steps: list) -> dict:
    """Per method, over the steps: mean step time (the slowest rank), mean
    idle, the fewest and most tokens a rank had, speedup over naive."""
    summary = {}
    for method in METHODS:
        rows = [s["methods"][method] for s in steps]
        summary[method] = {
            "step_seconds": float(np.mean([r["step_seconds"] for r in rows])),
            "idle": float(np.mean([r["idle"] for r in rows])),
            "predicted_idle": float(np.mean([r["predicted_idle"] for r in rows])),
            "tokens_min": min(min(r["tokens_per_rank"]) for r in rows),
            "tokens_max": max(max(r["tokens_per_rank"]) for r in rows),
        }
    for method in METHODS:
        summary[method]["speedup"] = summary["naive"]["step_seconds"] / summary[method]["step_seconds"]
    return summary


def step_line(result: dict) -> str:
    idles = ", ".join(f"{method.replace('_', '-')} {100 * result['methods'][method]['idle']:.1f}%"
                      for method in METHODS)
    once = "yes" if result["exactly_once"] and not result["data_mismatches"] else "NO"
    return (f"step {result['step']}: {result['samples']:,} samples, {result['tokens']:,} tokens; "
            f"idle {idles}; seqflow exactly once: {once}")


def table_lines(summary: dict, workload: str) -> list[str]:
    labels = {method: label(method, workload) for method in METHODS}
    width = max(len(text) for text in labels.values())
    lines = [f"{'split':<{width}}  {'step time':>9}  {'idle':>6}  {'tokens per rank':>15}  {'speedup':>7}"]
    for method, s in summary.items():
        tokens = f"{s['tokens_min']:,}-{s['tokens_max']:,}"
        lines.append(f"{labels[method]:<{width}}  {1000 * s['step_seconds']:>6.0f} ms  {100 * s['idle']:>5.1f}%  "
                     f"{tokens:>15}  {s['speedup']:>6.2f}x")
    return lines


def write_report(path: Path, report: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(tmp, path)
