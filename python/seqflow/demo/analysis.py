"""Per-step analysis: balance against SequentialSampler, exactly-once checks, the pack plan."""

from __future__ import annotations

import time

import numpy as np

from seqflow.demo.charts import sparkline
from seqflow.demo.config import TASKS, Config
from seqflow.demo.rollout import StepRollout, partition_of


def max_over_mean(loads) -> float:
    loads = np.asarray(loads, dtype=np.float64)
    mean = loads.mean()
    return float(loads.max() / mean) if mean > 0 else 1.0


def sequential_loads(lengths: np.ndarray, ranks: int, rank_batch: int) -> np.ndarray:
    """Tokens per rank had SequentialSampler handed the same samples out: each
    global batch of rank_batch * ranks samples in arrival order, cut into
    contiguous chunks of rank_batch, chunk r to rank r."""
    loads = np.zeros(ranks, dtype=np.int64)
    for start in range(0, len(lengths), rank_batch):
        chunk = start // rank_batch
        loads[chunk % ranks] += int(lengths[start:start + rank_batch].sum())
    return loads


def analyse_step(client, config: Config, step: int, rollout: StepRollout, records: dict) -> dict:
    lengths = rollout.total_lengths
    expected = sorted(rollout.global_indexes)
    tasks = {}
    for task in TASKS:
        ranks = records[task]
        seen = [gi for r in ranks for gi in r.global_indexes]
        exactly_once = (sorted(seen) == expected and len(set(seen)) == len(seen)
                        and client.check_consumption_status(task, partition_of(step)))
        tokens = [r.tokens for r in ranks]
        sequential = sequential_loads(lengths, config.ranks, config.rank_batch_size(task))
        tasks[task] = {
            "batches_per_step": config.batches_per_step(task),
            "batch_size_per_rank": config.rank_batch_size(task),
            "samples_per_rank": [len(r.global_indexes) for r in ranks],
            "tokens_per_rank": tokens,
            "tokens_min": min(tokens),
            "tokens_max": max(tokens),
            "imbalance": max_over_mean(tokens),
            "sequential_tokens_per_rank": sequential.tolist(),
            "sequential_imbalance": max_over_mean(sequential),
            "exactly_once": bool(exactly_once),
            "consumed": len(seen),
            "data_mismatches": sum(r.mismatches for r in ranks),
        }
    return {"step": step, "partition_id": partition_of(step), "samples": int(len(lengths)),
            "tokens": int(lengths.sum()), "tasks": tasks}


def pack_step(config: Config, step: int, rollout: StepRollout, actor_ranks: list) -> dict:
    """seqflow.pack.plan on the actor's global batch of this step."""
    import seqflow.pack

    position = {gi: i for i, gi in enumerate(rollout.global_indexes)}
    order = sorted(position[gi] for r in actor_ranks for gi in r.global_indexes)
    lengths = rollout.total_lengths[order]
    groups = np.asarray(order, dtype=np.int64) // config.responses
    start = time.perf_counter()
    plan = seqflow.pack.plan(lengths, groups=groups, dp_size=config.ranks, optimizer_steps=config.optimizer_steps,
                             pack_max_length=config.pack_max_length, pad_to="step_max")
    seconds = time.perf_counter() - start
    stats = plan.stats
    return {
        "optimizer_steps": plan.optimizer_steps,
        "pack_max_length": plan.pack_max_length,
        "pad_to": plan.pad_to,
        "packs_per_step": stats.packs_per_step.tolist(),
        "min_packs_per_step": stats.min_packs_per_step.tolist(),
        "padding_ratio": float(stats.padding_ratio),
        "max_token_spread": float(stats.token_spread.max()) if stats.token_spread.size else 0.0,
        "max_pack_tokens": int(stats.max_pack_tokens),
        "packs_over_cap": int(stats.packs_over_cap),
        "plan_ms": 1000 * seconds,
        "notes": list(plan.notes),
    }


def yes_or_no(flag: bool) -> str:
    return "yes" if flag else "NO"


def step_lines(result: dict, config: Config) -> list[str]:
    lines = [f"step {result['step']}  {result['partition_id']}: {result['samples']:,} samples, "
             f"{result['tokens']:,} tokens"]
    for task in TASKS:
        t = result["tasks"][task]
        lines.append(
            f"  {task:<13} tokens/rank min {t['tokens_min']:>9,} max {t['tokens_max']:>9,}   "
            f"max/mean {t['imbalance']:.3f}  (SequentialSampler would be {t['sequential_imbalance']:.3f})   "
            f"exactly once: {yes_or_no(t['exactly_once'] and not t['data_mismatches'])}")
        top = max(t["sequential_tokens_per_rank"] + t["tokens_per_rank"])
        lines.append(f"  {'':<13} tokens per rank: SequentialSampler {sparkline(t['sequential_tokens_per_rank'], top)}"
                     f"   seqflow {sparkline(t['tokens_per_rank'], top)}")
    p = result["pack_plan"]
    packs = p["packs_per_step"]
    lines.append(
        f"  {'pack plan':<13} {p['optimizer_steps']} optimizer steps x {'/'.join(map(str, packs))} packs per rank "
        f"(cap {p['pack_max_length']:,}, pad to {p['pad_to']}): padding {100 * p['padding_ratio']:.1f}%, "
        f"rank spread {100 * p['max_token_spread']:.2f}%, {p['plan_ms']:.1f} ms")
    return lines

