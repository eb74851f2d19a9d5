"""The demo's run: starts the producer and the ranks, analyses each step, writes the report and charts."""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
import time
from pathlib import Path

import numpy as np

from seqflow.demo.analysis import yes_or_no, analyse_step, pack_step, step_lines
from seqflow.demo.charts import draw_chart
from seqflow.demo.config import (MAX_PROMPT, MAX_RESPONSE, MEDIAN_RESPONSE, MIN_PROMPT, RESPONSE_SIGMA, STEP_TIMEOUT,
                                  TASK_FIELDS, TASKS, Config, parse_config)
from seqflow.demo.progress import Progress
from seqflow.demo.ranks import RankRecord, run_rank
from seqflow.demo.rollout import make_rollout, partition_of, produce


def write_report(path: Path, report: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(tmp, path)


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
    print(f"exactly once, every step and task: {yes_or_no(ok)}")
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
