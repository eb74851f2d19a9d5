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
another, so that they do not compete for the cores (step_timing.py: every
micro-batch twice, in a random order; the two runs also give the noise). A
synchronous step takes as long as its slowest rank; the others idle for
1 - mean / max of it. Prints one line per step and a table; writes a JSON
report and, with matplotlib, a chart of every rank's time.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

from options import Config, parse_config
from rollout import LENGTH_SCALE, MAX_LENGTH, MAX_PROMPT, MEDIAN_RESPONSE, MIN_PROMPT, RESPONSE_SIGMA, make_rollout


def print_header(config: Config, parameters: int) -> None:
    print(f"seqflow demo: {config.steps} steps x {config.prompts} prompts x {config.responses} responses "
          f"= {config.samples:,} samples per step, over {config.ranks} DP ranks; seed {config.seed}")
    print(f"  lengths: prompt {MIN_PROMPT}-{MAX_PROMPT}, response lognormal (median {MEDIAN_RESPONSE:.0f}, "
          f"sigma {RESPONSE_SIGMA}), at most {MAX_LENGTH:,} tokens (a production rollout's / {LENGTH_SCALE})")
    print(f"  each rank trains its share for real (a {parameters:,}-parameter transformer, forward + backward, "
          f"micro-batches of at most {config.micro_batch_tokens:,} tokens); ranks run one after another")


def run_step(step: int, config: Config, rollout, stream, model, order_rng: np.random.Generator) -> tuple:
    """One step: the three splits of the rollout, trained and timed. Its
    report entry, and (first runs, second runs) seconds of every rank share."""
    from rank_work import rank_works
    from report import METHODS, method_result
    from splits import karmarkar_karp_split, naive_split
    from step_timing import time_step

    streamed = stream.step(step, rollout)
    positions = {"naive": naive_split(config.samples, config.ranks),
                 "karmarkar_karp": karmarkar_karp_split(rollout.lengths, config.ranks),
                 "seqflow": streamed.positions}
    token_ids = {method: [[rollout.token_ids[p] for p in rank] for rank in positions[method]]
                 for method in ("naive", "karmarkar_karp")}
    token_ids["seqflow"] = streamed.token_ids  # what get_data returned
    works = {method: rank_works(token_ids[method], config.micro_batch_tokens) for method in METHODS}
    predictor = stream.model()  # as the controller saw the step when it split it
    times = time_step(model, works, order_rng)
    stream.report(times.records("seqflow"))
    result = {"step": step, "samples": config.samples, "tokens": rollout.tokens,
              "exactly_once": streamed.exactly_once, "data_mismatches": streamed.data_mismatches,
              "methods": {method: method_result(positions[method], works[method], times.seconds(method), predictor)
                          for method in METHODS}}
    return result, [pair for method in METHODS for pair in times.run_pairs(method)]


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
    from report import METHODS, label, step_line, summarize, table_lines, write_report
    from warm_up import warm_up

    started = time.perf_counter()
    torch.set_num_threads(1)  # ranks run one at a time, each on one core
    keep_freed_memory()
    model = TinyCausalLM(MAX_LENGTH, seed=config.seed)
    rng = np.random.default_rng(config.seed)  # the lengths and token ids
    order_rng = np.random.default_rng([config.seed, 1])  # the order micro-batches are timed in
    print_header(config, sum(p.numel() for p in model.parameters()))
    steps, noise_pairs = [], []
    with BalancedStream(config.responses, config.ranks, config.workload) as stream:
        stream.report(warm_up(model, rng))
        stream.wait_for_fit()
        for step in range(config.steps):
            result, pairs = run_step(step, config, make_rollout(rng, config.prompts, config.responses), stream,
                                     model, order_rng)
            steps.append(result)
            noise_pairs += pairs
            print(step_line(result), flush=True)
        model_json = stream.model().to_json()  # the controller's model of the task, fitted to the timings

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
        "seqflow_model": json.loads(model_json),
        "exactly_once": exactly_once,
        "elapsed_s": elapsed,
    }
    print()
    print(f"mean over {config.steps} steps (step time: the slowest rank's; idle: 1 - mean/max of the rank times)")
    for line in table_lines(summary, config.workload):
        print("  " + line)
    print(f"noise: every micro-batch ran twice and its faster run counts; one run of a rank's share varies by "
          f"{100 * noise:.1f}% (sd), which alone would show as {100 * floor:.1f}% idle on ranks of equal work "
          "(the faster of two runs varies less)")
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
