#!/usr/bin/env python3
"""seqflow's demo: what balancing a GRPO rollout over DP ranks buys, measured.

    python examples/demo/grpo_balance_demo.py [--steps 3] [--prompts 64] [--responses 4] [--ranks 8]
                                              [--seed 0] [--workload online|tokens]

(`./run demo` installs what it needs and runs it.) Each training step's
rollout (long-tailed response lengths) is split over the DP ranks three ways:

  naive            contiguous equal-count chunks in arrival order (SequentialSampler,
                   a DistributedSampler without shuffling)
  Karmarkar-Karp   on token counts, as many samples per rank (verl's _balance_batch)
  seqflow          through seqflow's data system: put -> get_meta -> get_data, split by
                   SeqlenBalancedSampler(workload="online") on the seconds its controller
                   predicts from the timings the ranks report

Every rank's share is trained for real (forward + backward of a small
transformer, CPU torch on one thread) and timed. The ranks run one after
another, so that they do not compete for the cores: a synchronous step then
takes as long as its slowest rank, and the others idle for 1 - mean / max of
it. Some rank shares are timed twice, to show the noise of the measurements.
Prints one line per step and a table; writes a JSON report and, with
matplotlib, a chart of every rank's time.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from options import Config, parse_config
from rollout import LENGTH_SCALE, MAX_LENGTH, MEDIAN_RESPONSE, MAX_PROMPT, MIN_PROMPT, RESPONSE_SIGMA, make_rollout

WARM_UP_MICRO_BATCHES = 32  # timed before step 0: the controller's first model of the task
WARM_UP_UNTIMED = 2  # torch's first calls, and the heap grown to the longest micro-batch


def warm_up(model, rng: np.random.Generator) -> list:
    """Micro-batches of 1-4 sequences of the rollouts' lengths, timed:
    (lengths, seconds) of each after the first few, which are the longest."""
    from model import train_seconds

    rollout = make_rollout(rng, WARM_UP_MICRO_BATCHES * 4, 1)
    longest = [rng.integers(0, 2**15, size=MAX_LENGTH)]
    records = []
    for i in range(WARM_UP_UNTIMED + WARM_UP_MICRO_BATCHES):
        picked = rng.choice(len(rollout.lengths), size=rng.integers(1, 5), replace=False)
        batch = longest if i < WARM_UP_UNTIMED else [rollout.token_ids[p] for p in picked]
        seconds = train_seconds(model, batch)
        model.zero_grad(set_to_none=True)
        records += [([len(s) for s in batch], seconds)] if i >= WARM_UP_UNTIMED else []
    return records


def run(config: Config) -> int:
    try:
        import torch
    except ImportError:
        print("grpo_balance_demo.py: error: the demo trains a small model with torch; install it "
              "(pip install torch, or ./run demo)", file=sys.stderr)
        return 2
    from balanced_stream import BalancedStream
    from chart import draw_chart
    from memory import keep_freed_memory
    from model import TinyCausalLM
    from noise import idle_from_noise, rank_noise
    from rank_work import idle, predicted_seconds, rank_works
    from step_timing import time_step
    from report import METHODS, label, step_line, summarize, table_lines, write_report
    from splits import karmarkar_karp_split, naive_split

    started = time.perf_counter()
    torch.set_num_threads(1)  # ranks run one at a time, each on one core
    keep_freed_memory()
    model = TinyCausalLM(MAX_LENGTH, seed=config.seed)
    rng = np.random.default_rng(config.seed)  # the lengths and token ids
    order_rng = np.random.default_rng([config.seed, 1])  # the order micro-batches are timed in
    print(f"seqflow demo: {config.steps} steps x {config.prompts} prompts x {config.responses} responses "
          f"= {config.samples:,} samples per step, over {config.ranks} DP ranks; seed {config.seed}")
    print(f"  lengths: prompt {MIN_PROMPT}-{MAX_PROMPT}, response lognormal (median {MEDIAN_RESPONSE:.0f}, "
          f"sigma {RESPONSE_SIGMA}), at most {MAX_LENGTH:,} tokens (a production rollout's / {LENGTH_SCALE})")
    print(f"  each rank trains its share for real (a {sum(p.numel() for p in model.parameters()):,}-parameter "
          f"transformer, forward + backward, micro-batches of at most {config.micro_batch_tokens:,} tokens); "
          "ranks run one after another")

    steps, noise_pairs = [], []
    with BalancedStream(config.responses, config.ranks, config.workload) as stream:
        stream.report(warm_up(model, rng))
        stream.wait_for_fit()
        for step in range(config.steps):
            rollout = make_rollout(rng, config.prompts, config.responses)
            streamed = stream.step(step, rollout)
            positions = {"naive": naive_split(config.samples, config.ranks),
                         "karmarkar_karp": karmarkar_karp_split(rollout.lengths, config.ranks),
                         "seqflow": streamed.positions}
            works = {method: rank_works([[rollout.token_ids[p] for p in rank] for rank in positions[method]],
                                        config.micro_batch_tokens) for method in METHODS if method != "seqflow"}
            works["seqflow"] = rank_works(streamed.token_ids, config.micro_batch_tokens)  # what get_data returned
            predictor = stream.model()  # as the controller saw the step when it split it
            times = time_step(model, works, order_rng)
            stream.report(times.records("seqflow"))
            noise_pairs += [pair for method in METHODS for pair in times.run_pairs(method)]
            result = {"step": step, "samples": config.samples, "tokens": rollout.tokens,
                      "exactly_once": streamed.exactly_once, "data_mismatches": streamed.data_mismatches,
                      "methods": {}}
            for method in METHODS:
                seconds = times.seconds(method)
                predicted = [predicted_seconds(predictor, work) for work in works[method]]
                result["methods"][method] = {
                    "positions_per_rank": [p.tolist() for p in positions[method]],
                    "tokens_per_rank": [work.tokens for work in works[method]],
                    "seconds_per_rank": seconds,
                    "step_seconds": max(seconds),
                    "idle": idle(seconds),
                    "predicted_seconds_per_rank": predicted,
                    "predicted_idle": idle(predicted),
                }
            steps.append(result)
            print(step_line(result), flush=True)

    summary = summarize(steps)
    noise = rank_noise(noise_pairs)
    floor = idle_from_noise(noise, config.ranks)
    exactly_once = all(s["exactly_once"] and not s["data_mismatches"] for s in steps)
    elapsed = time.perf_counter() - started
    report = {
        "config": {"steps": config.steps, "prompts": config.prompts, "responses": config.responses,
                   "ranks": config.ranks, "seed": config.seed, "workload": config.workload,
                   "micro_batch_tokens": config.micro_batch_tokens,
                   "labels": {method: label(method, config.workload) for method in METHODS}},
        "steps": steps,
        "summary": summary,
        "noise": {"pairs": noise_pairs, "rank_noise": noise, "idle_from_noise": floor},
        "exactly_once": exactly_once,
        "elapsed_s": elapsed,
    }
    print()
    print(f"mean over {config.steps} steps (step time: the slowest rank's; idle: 1 - mean/max of the rank times)")
    for line in table_lines(summary, config.workload):
        print("  " + line)
    print(f"noise: every micro-batch ran twice (the faster run counts); a rank's time from the first runs and "
          f"from the second differ by {100 * noise:.1f}% (sd), so ranks of equal work would show about "
          f"{100 * floor:.1f}% idle from noise alone")
    print(f"seqflow handed every sample to exactly one rank, every step: {'yes' if exactly_once else 'NO'}")
    write_report(config.report, report)
    print(f"report: {config.report}")
    why_not = draw_chart(config.png, report)
    print(f"chart: {config.png}" if why_not is None else f"chart: skipped, {why_not}")
    print(f"done in {elapsed:.1f} s")
    return 0 if exactly_once else 1


def main(argv=None) -> int:
    return run(parse_config(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
