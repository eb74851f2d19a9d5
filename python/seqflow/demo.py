"""seqflow demo: one GRPO pipeline in one process, on seqflow's embedded client.

    python -m seqflow demo [--steps 4] [--prompts 64] [--responses 8] [--ranks 8]
                           [--seed 0] [--report out/demo_report.json]

A rollout producer thread writes, per training step, ``prompts x responses``
samples with long-tailed lengths into one partition (``train@global_step_S``):
real variable-length ``input_ids`` tensors, with ``total_lengths`` and the
prompt's ``group_id`` in custom_meta. Two tasks read them through
``seqflow.StreamingDataset`` (finite mode, one partition per step) on
``ranks`` simulated DP ranks (one thread per rank and task), all through one
``SeqlenBalancedSampler``:

- ``log_prob`` reads ``input_ids`` in two global batches per step while the
  rollout is still being written, computes a stand-in ``old_log_prob`` per
  response token and writes it back (``put`` with the batch's metadata);
- ``update_actor`` needs ``input_ids`` and ``old_log_prob``, so it sees a
  sample only after log_prob wrote it back; it reads the step as one global
  batch.

Per step the demo prints the samples, the tokens per rank (min / max), their
max/mean against the max/mean SequentialSampler would have had on the same
data (each global batch cut into contiguous per-rank chunks in arrival order,
as SequentialSampler hands them out), an exactly-once check per task (every
sample of the step consumed exactly once across the ranks), and the pack plan
of the actor's batch (``seqflow.pack.plan``: DP ranks x optimizer steps x
packs under a token cap). It writes a JSON report and, when matplotlib is
installed, a PNG chart of the per-rank load.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import queue
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

MIN_PROMPT = 100
MAX_PROMPT = 1500
MEDIAN_RESPONSE = 1500.0
RESPONSE_SIGMA = 1.0
MAX_RESPONSE = 16384
PROMPTS_PER_PUT = 4          # a rollout worker returns a few prompts' groups at a time
LOG_PROB_MICRO_BATCH = 8     # samples per log_prob forward pass
ACTOR_MICRO_BATCH = 16
EMPTY_BATCH_SLEEP = 0.005    # seconds a rank waits when nothing is ready
STEP_TIMEOUT = 300.0         # seconds without a finished step before the demo gives up
TASKS = ("log_prob", "update_actor")
TASK_FIELDS = {"log_prob": ["input_ids"], "update_actor": ["input_ids", "old_log_prob"]}


# ---------------------------------------------------------------------------
# Command line


def _integer(minimum: int):
    """An argparse type: an integer >= minimum."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


_positive = _integer(1)
_non_negative = _integer(0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m seqflow demo",
        description="A GRPO pipeline in one process: a rollout producer, a log-prob task and an actor-update "
                    "task over simulated DP ranks, balanced by SeqlenBalancedSampler.",
        epilog="example: python -m seqflow demo --steps 2 --prompts 32 --ranks 4 --seed 7")
    parser.add_argument("--steps", type=_positive, default=4, help="training steps, one partition each (default 4)")
    parser.add_argument("--prompts", type=_positive, default=64,
                        help="prompts per step, a multiple of --ranks (default 64)")
    parser.add_argument("--responses", type=_positive, default=8,
                        help="responses per prompt, the GRPO group size (default 8)")
    parser.add_argument("--ranks", type=_positive, default=8, help="simulated data-parallel ranks (default 8)")
    parser.add_argument("--seed", type=_non_negative, default=0, help="seed of the length generator (default 0)")
    parser.add_argument("--report", default="out/demo_report.json",
                        help="where to write the JSON report (default out/demo_report.json)")
    parser.add_argument("--png", default="out/demo_load.png",
                        help="where to draw the per-rank load chart when matplotlib is installed "
                             "(default out/demo_load.png)")
    parser.add_argument("--optimizer-steps", type=_positive, default=2,
                        help="optimizer steps per training step in the pack plan (default 2)")
    parser.add_argument("--pack-max-length", type=_positive, default=32768,
                        help=f"token cap of a pack, >= {MAX_PROMPT + MAX_RESPONSE} (default 32768)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


@dataclass
class Config:
    steps: int
    prompts: int
    responses: int
    ranks: int
    seed: int
    report: Path
    png: Path
    optimizer_steps: int
    pack_max_length: int
    progress: bool

    @property
    def samples(self) -> int:
        return self.prompts * self.responses

    def batches_per_step(self, task: str) -> int:
        """log_prob: two global batches per step when the prompts allow it
        (it starts while the rollout is still written); update_actor: one."""
        if task == "log_prob" and self.prompts % (2 * self.ranks) == 0:
            return 2
        return 1

    def rank_batch_size(self, task: str) -> int:
        return self.samples // (self.ranks * self.batches_per_step(task))


def parse_config(argv) -> Config:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.prompts % args.ranks != 0:
        parser.error(f"--prompts ({args.prompts}) must be a multiple of --ranks ({args.ranks}) "
                     "so every rank gets the same number of prompts")
    if args.pack_max_length < MAX_PROMPT + MAX_RESPONSE:
        parser.error(f"--pack-max-length ({args.pack_max_length}) must hold the longest sample, "
                     f"{MAX_PROMPT + MAX_RESPONSE} tokens")
    if args.prompts * args.responses > 1_000_000:
        parser.error("--prompts x --responses must be at most 1,000,000 samples per step")
    return Config(args.steps, args.prompts, args.responses, args.ranks, args.seed, Path(args.report),
                  Path(args.png), args.optimizer_steps, args.pack_max_length, not args.no_progress)


# ---------------------------------------------------------------------------
# Progress bar: tqdm when installed, else a carriage-return bar on stderr.


class Progress:
    """Counts consumed samples; write() prints a line above the bar."""

    def __init__(self, total: int, enabled: bool):
        self.total = total
        self.done = 0
        self.lock = threading.Lock()
        self.start = time.perf_counter()
        self.last_draw = 0.0
        self.tqdm = None
        self.enabled = enabled and sys.stderr.isatty()
        if self.enabled:
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self.tqdm = tqdm(total=total, unit="sample", desc="samples consumed", file=sys.stderr,
                                 dynamic_ncols=True)

    def update(self, n: int) -> None:
        with self.lock:
            self.done += n
            if self.tqdm is not None:
                self.tqdm.update(n)
            elif self.enabled:
                now = time.perf_counter()
                if now - self.last_draw >= 0.1 or self.done >= self.total:
                    self.last_draw = now
                    self._draw()

    def _draw(self) -> None:
        width = 30
        share = self.done / self.total if self.total else 1.0
        filled = int(round(width * share))
        elapsed = time.perf_counter() - self.start
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {100 * share:5.1f}%  "
                         f"{self.done:,}/{self.total:,} samples consumed  {elapsed:5.1f}s")
        sys.stderr.flush()

    def write(self, text: str) -> None:
        with self.lock:
            if self.tqdm is not None:
                self.tqdm.write(text, file=sys.stdout)
                return
            if self.enabled:
                sys.stderr.write("\r\033[K")
                sys.stderr.flush()
            print(text, flush=True)
            if self.enabled:
                self._draw()

    def close(self) -> None:
        with self.lock:
            if self.tqdm is not None:
                self.tqdm.close()
            elif self.enabled:
                self._draw()
                sys.stderr.write("\n")
                sys.stderr.flush()


# ---------------------------------------------------------------------------
# The rollout


@dataclass
class StepRollout:
    """What the producer wrote for one step, in arrival (put) order."""

    prompt_lengths: np.ndarray    # per prompt
    response_lengths: np.ndarray  # per sample, prompt-major
    global_indexes: list = field(default_factory=list)

    @property
    def total_lengths(self) -> np.ndarray:
        return np.repeat(self.prompt_lengths, len(self.response_lengths) // len(self.prompt_lengths)) \
            + self.response_lengths


def make_rollout(rng: np.random.Generator, prompts: int, responses: int) -> StepRollout:
    prompt = rng.integers(MIN_PROMPT, MAX_PROMPT, size=prompts, endpoint=True)
    drawn = MEDIAN_RESPONSE * np.exp(RESPONSE_SIGMA * rng.standard_normal(prompts * responses))
    response = np.clip(np.rint(drawn), 1, MAX_RESPONSE).astype(np.int64)
    return StepRollout(prompt.astype(np.int64), response)


def partition_of(step: int) -> str:
    return f"train@global_step_{step}"


def produce(client, config: Config, rollouts: list, stop: threading.Event) -> None:
    """Writes each step's samples, PROMPTS_PER_PUT prompts (whole groups) per put."""
    rng = np.random.default_rng([config.seed, 1])
    n = config.responses
    for step, rollout in enumerate(rollouts):
        uid = 0
        for first in range(0, config.prompts, PROMPTS_PER_PUT):
            if stop.is_set():
                return
            rows, meta = [], []
            for p in range(first, min(first + PROMPTS_PER_PUT, config.prompts)):
                prompt_len = int(rollout.prompt_lengths[p])
                prompt_ids = rng.integers(3, 32000, size=prompt_len)
                for r in range(n):
                    response_len = int(rollout.response_lengths[p * n + r])
                    ids = np.concatenate([prompt_ids, rng.integers(3, 32000, size=response_len)])
                    ids[0] = uid  # lets the readers check that data and metadata agree
                    rows.append(ids)
                    meta.append({"total_lengths": prompt_len + response_len, "group_id": step * config.prompts + p,
                                 "response_length": response_len, "uid": uid})
                    uid += 1
            put = client.put({"input_ids": rows}, partition_id=partition_of(step), custom_meta=meta)
            rollout.global_indexes.extend(put.global_indexes)
            time.sleep(0.002)  # generation takes time: readers start before the step is complete


# ---------------------------------------------------------------------------
# The tasks: one thread per (task, rank), one StreamingDataset each.


@dataclass
class RankRecord:
    global_indexes: list = field(default_factory=list)
    tokens: int = 0
    batches: int = 0
    mismatches: int = 0


def fake_log_prob(response_ids: np.ndarray) -> np.ndarray:
    """A stand-in for a model's per-token log-probabilities (cheap, deterministic)."""
    return (-0.01 * np.log1p(response_ids % 1024)).astype(np.float32)


def run_rank(client, config: Config, task: str, rank: int, records: list, finished: "queue.Queue",
             progress: Progress, stop: threading.Event) -> None:
    from seqflow import StreamingDataset

    dataset = StreamingDataset(
        batch_size=config.rank_batch_size(task),
        micro_batch_size=LOG_PROB_MICRO_BATCH if task == "log_prob" else ACTOR_MICRO_BATCH,
        data_fields=TASK_FIELDS[task], partition_id=partition_of(0), task_name=task, dp_rank=rank,
        should_check_consumption_status=True, total_samples=config.samples, client=client,
        data_format="numpy", empty_batch_sleep=EMPTY_BATCH_SLEEP, keep_batches=False)
    for step in range(config.steps):
        if step:
            dataset.step(partition_of(step))
        record: RankRecord = records[step][task][rank]
        for data, meta in dataset:
            if stop.is_set():
                return
            ids = data["input_ids"]
            for i, entry in enumerate(meta.custom_meta):
                if len(ids[i]) != entry["total_lengths"] or int(ids[i][0]) != entry["uid"]:
                    record.mismatches += 1
            if task == "log_prob":
                log_probs = [fake_log_prob(ids[i][len(ids[i]) - entry["response_length"]:])
                             for i, entry in enumerate(meta.custom_meta)]
                client.put({"old_log_prob": log_probs}, metadata=meta)
            else:
                for i, entry in enumerate(meta.custom_meta):
                    if len(data["old_log_prob"][i]) != entry["response_length"]:
                        record.mismatches += 1
            record.global_indexes.extend(meta.global_indexes)
            record.tokens += sum(int(m["total_lengths"]) for m in meta.custom_meta)
            record.batches += 1
            progress.update(meta.size)
        finished.put((step, task, rank))


# ---------------------------------------------------------------------------
# Per-step analysis


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


def _yes(flag: bool) -> str:
    return "yes" if flag else "NO"


def step_lines(result: dict, config: Config) -> list[str]:
    lines = [f"step {result['step']}  {result['partition_id']}: {result['samples']:,} samples, "
             f"{result['tokens']:,} tokens"]
    for task in TASKS:
        t = result["tasks"][task]
        lines.append(
            f"  {task:<13} tokens/rank min {t['tokens_min']:>9,} max {t['tokens_max']:>9,}   "
            f"max/mean {t['imbalance']:.3f}  (SequentialSampler would be {t['sequential_imbalance']:.3f})   "
            f"exactly once: {_yes(t['exactly_once'] and not t['data_mismatches'])}")
    p = result["pack_plan"]
    packs = p["packs_per_step"]
    lines.append(
        f"  {'pack plan':<13} {p['optimizer_steps']} optimizer steps x {'/'.join(map(str, packs))} packs per rank "
        f"(cap {p['pack_max_length']:,}, pad to {p['pad_to']}): padding {100 * p['padding_ratio']:.1f}%, "
        f"rank spread {100 * p['max_token_spread']:.2f}%, {p['plan_ms']:.1f} ms")
    return lines


# ---------------------------------------------------------------------------
# Outputs


def write_report(path: Path, report: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(tmp, path)


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


# ---------------------------------------------------------------------------


def run(config: Config) -> int:
    try:
        import torch  # noqa: F401  (StreamingDataset is a torch IterableDataset)
    except ImportError:
        print("seqflow demo: error: the demo reads through seqflow.StreamingDataset, which needs torch; "
              "install it (pip install torch)", file=sys.stderr)
        return 2
    import seqflow

    started = time.perf_counter()
    rng = np.random.default_rng(config.seed)
    rollouts = [make_rollout(rng, config.prompts, config.responses) for _ in range(config.steps)]

    sampler = seqflow.SeqlenBalancedSampler(n_samples_per_prompt=config.responses, dp_size=config.ranks)
    client = seqflow.init({"controller": {"sampler": sampler}})
    if client.sampler is not sampler:
        print("seqflow demo: error: a default seqflow client exists already; call seqflow.close() first",
              file=sys.stderr)
        return 2

    print(f"seqflow demo: {config.steps} steps x {config.prompts} prompts x {config.responses} responses "
          f"= {config.samples:,} samples per step, over {config.ranks} DP ranks (threads)")
    print(f"  embedded client, SeqlenBalancedSampler(n_samples_per_prompt={config.responses}, "
          f"dp_size={config.ranks}); seed {config.seed}")
    print(f"  lengths: prompt uniform {MIN_PROMPT}..{MAX_PROMPT}, response lognormal (median {MEDIAN_RESPONSE:.0f}, "
          f"sigma {RESPONSE_SIGMA}) capped at {MAX_RESPONSE:,}")
    for task in TASKS:
        print(f"  {task}: reads {TASK_FIELDS[task]} through StreamingDataset, "
              f"{config.batches_per_step(task)} global batch(es) per step of {config.rank_batch_size(task)} "
              f"samples per rank" + ("; writes old_log_prob back" if task == "log_prob" else ""))
    print(flush=True)

    records = [{task: [RankRecord() for _ in range(config.ranks)] for task in TASKS} for _ in range(config.steps)]
    finished: queue.Queue = queue.Queue()
    stop = threading.Event()
    errors: list = []
    progress = Progress(config.steps * config.samples * len(TASKS), config.progress)

    def guarded(fn, *args):
        def body():
            try:
                fn(*args)
            except BaseException as error:  # reported by the main thread
                errors.append(error)
                stop.set()
                finished.put(None)
        return threading.Thread(target=body, daemon=True)

    threads = [guarded(produce, client, config, rollouts, stop)]
    threads += [guarded(run_rank, client, config, task, rank, records, finished, progress, stop)
                for task in TASKS for rank in range(config.ranks)]
    for t in threads:
        t.start()

    steps_out = []
    pending = [len(TASKS) * config.ranks] * config.steps
    try:
        for step in range(config.steps):
            while pending[step] and not errors:
                try:
                    item = finished.get(timeout=STEP_TIMEOUT)
                except queue.Empty:
                    raise RuntimeError(f"step {step}: no rank finished within {STEP_TIMEOUT:.0f} s") from None
                if item is not None:
                    pending[item[0]] -= 1
            if errors:
                break
            result = analyse_step(client, config, step, rollouts[step], records[step])
            result["pack_plan"] = pack_step(config, step, rollouts[step], records[step]["update_actor"])
            result["elapsed_s"] = time.perf_counter() - started
            steps_out.append(result)
            progress.write("\n".join(step_lines(result, config)))
            client.clear_partition(partition_of(step))  # the step is done: release its samples
    finally:
        stop.set() if errors else None
        progress.close()
        for t in threads:
            t.join(timeout=10)
        seqflow.close()
    if errors:
        raise errors[0]

    elapsed = time.perf_counter() - started
    ok = all(s["tasks"][t]["exactly_once"] and not s["tasks"][t]["data_mismatches"]
             for s in steps_out for t in TASKS)
    summary = {}
    for task in TASKS:
        bal = [s["tasks"][task]["imbalance"] for s in steps_out]
        seq = [s["tasks"][task]["sequential_imbalance"] for s in steps_out]
        summary[task] = {"mean_imbalance": float(np.mean(bal)), "mean_sequential_imbalance": float(np.mean(seq)),
                         "idle": float(np.mean([1 - 1 / b for b in bal])),
                         "sequential_idle": float(np.mean([1 - 1 / s for s in seq]))}
    report = {
        "config": {"steps": config.steps, "prompts": config.prompts, "responses": config.responses,
                   "ranks": config.ranks, "seed": config.seed, "optimizer_steps": config.optimizer_steps,
                   "pack_max_length": config.pack_max_length,
                   "lengths": {"prompt": [MIN_PROMPT, MAX_PROMPT], "response_median": MEDIAN_RESPONSE,
                               "response_sigma": RESPONSE_SIGMA, "response_cap": MAX_RESPONSE},
                   "sampler": f"SeqlenBalancedSampler(n_samples_per_prompt={config.responses}, "
                              f"dp_size={config.ranks})"},
        "steps": steps_out,
        "summary": summary,
        "exactly_once": ok,
        "elapsed_s": elapsed,
    }

    print()
    for task in TASKS:
        s = summary[task]
        print(f"{task}: mean max/mean {s['mean_imbalance']:.3f} vs {s['mean_sequential_imbalance']:.3f} with "
              f"SequentialSampler: ranks idle {100 * s['idle']:.1f}% of each step instead of "
              f"{100 * s['sequential_idle']:.1f}%")
    print(f"exactly once, every step and task: {_yes(ok)}")
    write_report(config.report, report)
    print(f"report: {config.report}")
    why_not = draw_chart(config.png, report)
    print(f"chart: {config.png}" if why_not is None else f"chart: skipped, {why_not}")
    print(f"done in {elapsed:.1f} s")
    print("see also: seqflow balance-demo (the C++ balancing demo: contiguous vs verl kk vs auto splits of one "
          "batch)")
    return 0 if ok else 1


def main(argv=None) -> int:
    config = parse_config(sys.argv[1:] if argv is None else argv)
    return run(config)


if __name__ == "__main__":
    sys.exit(main())
