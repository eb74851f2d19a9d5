"""What the training benchmark prints and draws: its tables, text bars of
the rank times, the PASS/FAIL lines of its targets, the PNG charts and the JSON results."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from balance_bench import table
from training_splits import pack_lengths

BAR_WIDTH = 40


def percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def seconds(value: float) -> str:
    return f"{value:.2f} s" if value >= 1 else f"{1e3 * value:.0f} ms"


CLOCK_TEXT = {"cpu": "CPU time of the training thread", "wall": "wall-clock time"}


def describe(config, settings, group_size: int, repeats: int, resolution, clock: str,
             torch_version: str) -> list[str]:
    runs = f"{repeats} runs"
    if resolution is not None:
        runs += (f" (the balanced rows, which the targets judge: more, until their idle from noise is at most "
                 f"{percent(resolution.idle)}, at most {resolution.max_rounds}; a row's runs in its table; "
                 f"calibration micro-batches: {resolution.max_rounds})")
    return [
        f"model: causal transformer, {config.layers} layers, width {config.width}, {config.heads} heads, "
        f"vocab {config.vocab}; CPU torch {torch_version}, 1 thread; attention per sequence inside a pack",
        f"data: GRPO, {group_size} responses per prompt, {settings.prompts_per_rank} prompts per rank; "
        f"samples of at most {settings.max_length:,} tokens, micro-batches of at most {settings.max_length:,} "
        f"tokens; each micro-batch's time the median of {runs}, a rank's the sum of its micro-batches' "
        f"(one micro-batch at a time, in a random order; {CLOCK_TEXT[clock]}), step = slowest rank",
        "rank noise: the standard error of a rank's time, from its micro-batches' spreads over their runs "
        "(1.25 x 1.48 MAD / sqrt(runs) each, independent); idle from noise: what a plan of equal ranks would "
        "idle, measured with that noise (the mean of 1 - mean/max over normal draws)",
        "",
    ]


def speed_lines(reference_seconds, speeds: list) -> list[str]:
    """How much the machine's speed moved during the run (the speed probe's
    readings), which the times above are corrected for."""
    if reference_seconds is None:
        return ["speed probe: off (times as measured)", ""]
    low, median, high = np.quantile(speeds, [0.0, 0.5, 1.0])
    return [f"speed probe: the reference micro-batch took {seconds(reference_seconds)} at the start; after the "
            f"{len(speeds)} runs it took {low:.2f}x-{high:.2f}x that (median {median:.2f}x); every round of runs is "
            "scaled to the starting speed by the median of its probes", ""]


def memory_lines(malloc: str, micro_batches: int, page_faults: int) -> list[str]:
    """How memory was allocated, and the page faults the timed micro-batches
    took (each a page zeroed by the kernel inside a micro-batch's time)."""
    return [f"memory: {malloc}; {page_faults:,} page faults in the {micro_batches:,} timed micro-batches", ""]


def unaligned_term(workload) -> str:
    if workload.alignment == 1:
        return ""
    return f" + {workload.per_unaligned_token_squared:.3e} s/token^2 of lengths not a multiple of {workload.alignment}"


def calibration_lines(calibration) -> list[str]:
    """A case's fit, and how far each model's seconds are from its
    calibration records' (the tokens and verl models scaled by least
    squares)."""
    workload, records = calibration.workload, calibration.records
    fit = workload.fit
    errors = []
    for name, predict in calibration.predictors.items():
        relative = [abs(predict(lengths) - seconds) / seconds for lengths, seconds in records]
        p90 = percent(float(np.quantile(relative, 0.9)))
        errors.append(f"{name} {percent(float(np.median(relative)))} (p90 {p90})")
    return [
        f"calibration: {len(records)} random micro-batches of both distributions (1-5 sequences, or filled up to the cap), "
        f"each the median of {calibration.runs} runs, timed right before the rows; "
        "seqflow.balance.calibrate: "
        f"{workload.per_token:.3e} s/token + {workload.per_token_squared:.3e} s/token^2 + "
        f"{workload.per_sequence:.3e} s/sequence + {workload.per_micro_batch:.3e} s/micro-batch"
        f"{unaligned_term(workload)}; "
        f"fit median error {percent(fit.median_error)}, p90 {percent(fit.p90_error)}, "
        f"{fit.outliers} of {fit.records} records left out as outliers",
        "micro-batch time error on those records, median: " + ", ".join(errors),
        "",
    ]


def row_cells(row) -> list[str]:
    return [
        row.predictor_name,
        seconds(row.step_seconds),
        percent(row.idle),
        str(row.timing.rounds),
        percent(float(np.median(row.timing.rank_noise))),
        percent(row.timing.noise_idle),
        percent(float(np.median(row.errors))),
        percent(float(row.errors.max())),
        f"{row.tokens / row.step_seconds:,.0f}",
        "/".join(str(n) for n in sorted({len(packs) for packs in row.ranks})),
    ]


ROW_HEADERS = ["predicted by", "step time", "idle", "runs", "rank noise (median)", "idle from noise",
               "rank error (median)", "rank error (max)", "tokens/s", "micro-batches per rank"]


def case_lines(case, repeats: int) -> list[str]:
    first = case.rows[0]
    samples = sum(len(p.samples) for packs in first.ranks for p in packs)
    lines = [
        f"## {case.label}: {samples} samples, {first.tokens:,} tokens",
        "",
        *calibration_lines(case.calibration),
        table(["row", *ROW_HEADERS], [[row.name, *row_cells(row)] for row in case.rows + case.online[-1:]],
              "llrrrrrrrrr"),
        "",
        *noise_check_lines(case.rows, repeats),
        "online, per step (each planned with the model fitted on the steps before; same rollout):",
        "",
    ]
    offline = calibrated_row(case)
    steps = [[row.name, *row_cells(row), f"{100 * (row.idle - offline.idle):+.1f} pp",
              f"{100 * (row.errors.max() - offline.errors.max()):+.1f} pp"] for row in case.online]
    lines += [table(["step", *ROW_HEADERS, "idle vs calibrated", "max error vs calibrated"], steps,
                    "llrrrrrrrrrrr"), ""]
    return lines + rank_bars(case) + [""]


def noise_check_lines(rows, repeats: int) -> list[str]:
    """The rank noise checked against the runs (Timing.halves_difference),
    over the rows (root mean square)."""
    if repeats < 2:
        return []
    measured, expected = np.sqrt(np.mean(np.square([row.timing.halves_difference() for row in rows]), axis=0))
    return [f"noise check: each rank's share of its row's mean from the odd and from the even runs differed by "
            f"{percent(measured)} sd (over the rows); the rank noise predicts {percent(expected)}", ""]


def calibrated_row(case):
    return next(row for row in case.rows if row.predictor_name == "calibrated")


def rank_bars(case) -> list[str]:
    """Per row, a bar per rank, all on one scale (the case's slowest rank)."""
    rows = case.rows + case.online[-1:]
    longest = max(row.step_seconds for row in rows)
    width = max(len(row.name) for row in rows)
    lines = [f"rank times ({case.label}; full bar = {seconds(longest)}):"]
    for row in rows:
        for rank, value in enumerate(row.measured):
            eighths = int(round(BAR_WIDTH * 8 * value / longest))
            bar = "\u2588" * (eighths // 8) + ("" if eighths % 8 == 0 else chr(0x2590 - eighths % 8))
            name = row.name if rank == 0 else ""
            lines.append(f"  {name:<{width}}  r{rank:<2} {bar:<{BAR_WIDTH}} {seconds(value)}")
    return lines


def online_step(case, idle_tolerance: float, error_tolerance: float):
    """The first online step at the offline fit (within the tolerances of its
    idle and max rank error), or None."""
    offline = calibrated_row(case)
    for step, row in enumerate(case.online, start=1):
        if row.idle <= offline.idle + idle_tolerance and row.errors.max() <= offline.errors.max() + error_tolerance:
            return step
    return None


def target_lines(cases, idle_target, error_target, steps_target, idle_tolerance, error_tolerance) -> list[str]:
    checks = []
    for case in cases:
        cal = calibrated_row(case)
        verl_rows = [row for row in case.rows if row.predictor_name == "verl"]
        verl_idle = min(row.idle for row in verl_rows)
        # The target is for cases that verl's workload leaves out of balance.
        checks.append((cal.idle <= idle_target if verl_idle > idle_target else None,
                       f"{case.label}: calibrated idle {percent(cal.idle)} (noise alone: "
                       f"{percent(cal.timing.noise_idle)}) <= {percent(idle_target)} where verl's workload idles more "
                       f"than that ({percent(verl_idle)} at best)"))
        checks.append((cal.errors.max() <= error_target,
                       f"{case.label}: calibrated prediction error per rank <= {percent(error_target)} "
                       f"(max {percent(cal.errors.max())})"))
        step = online_step(case, idle_tolerance, error_tolerance)
        checks.append((step is not None and step <= steps_target,
                       f"{case.label}: online at the offline fit (idle within {100 * idle_tolerance:.0f} pp, max "
                       f"error within {100 * error_tolerance:.0f} pp) within {steps_target} steps "
                       f"({'never in ' + str(len(case.online)) + ' steps' if step is None else 'step ' + str(step)})"))
    status = {True: "PASS", False: "FAIL", None: "n/a "}
    return ["targets (all measured in this run; n/a: the case does not meet the target's condition):",
            *(f"  {status[ok]}  {text}" for ok, text in checks)]


def row_results(row) -> dict:
    return {
        "name": row.name,
        "predicted_by": row.predictor_name,
        "measured": [float(x) for x in row.measured],
        "predicted": [float(x) for x in row.predicted],
        "rank_noise": [float(x) for x in row.timing.rank_noise],
        "noise_idle": row.timing.noise_idle,
        "packs": [[{"lengths": [int(n) for n in pack_lengths(pack)], "seconds": float(seconds),
                    "rounds": [float(x) for x in runs]}
                   for pack, seconds, runs in zip(packs, rank_seconds, rank_runs)]
                  for packs, rank_seconds, rank_runs in zip(row.ranks, row.pack_seconds, row.timing.runs)],
    }


def write_results(cases, path: Path) -> Path:
    """Every case's calibration records and fit, and every row's per-rank
    and per-pack times (lengths and seconds) as JSON: what the tables and
    charts summarize, for analysis across runs."""
    results = [{
        "dist": case.dist,
        "dp": case.dp,
        "calibration": {
            "workload": json.loads(case.calibration.workload.to_json()),
            "records": [{"lengths": [int(n) for n in lengths], "seconds": float(seconds)}
                        for lengths, seconds in case.calibration.records],
        },
        "rows": [row_results(row) for row in case.rows],
        "online": [row_results(row) for row in case.online],
    } for case in cases]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cases": results}, indent=1) + "\n")
    return path


def write_charts(cases, out: Path) -> list[Path]:
    """Per case: rank times per row, predicted vs measured rank times; and
    the online steps of every case. Returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for case in cases:
        slug = f"training_{case.dist}_dp{case.dp}"
        rows = case.rows + case.online[-1:]
        fig, axes = plt.subplots(1, len(rows), figsize=(2.2 * len(rows), 3.2), sharey=True)
        for ax, row in zip(axes, rows):
            ranks = np.arange(len(row.measured))
            ax.bar(ranks, row.measured, color="tab:blue", label="measured")
            ax.scatter(ranks, row.predicted, color="tab:orange", marker="_", s=120, label="predicted", zorder=3)
            ax.axhline(row.step_seconds, color="tab:red", linewidth=0.8)
            ax.set_title(f"{row.name}\nidle {percent(row.idle)}", fontsize=8)
            ax.set_xticks(ranks)
            ax.tick_params(labelsize=7)
        axes[0].set_ylabel("rank time, s")
        axes[0].legend(fontsize=7, loc="lower left")
        fig.suptitle(f"rank times, {case.label} (red: step time)", fontsize=9)
        fig.tight_layout()
        paths.append(save(fig, out / f"{slug}_ranks.png", plt))

        fig, ax = plt.subplots(figsize=(4.5, 4.5))
        for row in case.rows:
            ax.scatter(row.measured, row.predicted, s=14, label=f"{row.name} (by {row.predictor_name})")
        low = min(min(r.measured.min(), r.predicted.min()) for r in case.rows)
        high = max(max(r.measured.max(), r.predicted.max()) for r in case.rows)
        line = np.array([low, high])
        ax.plot(line, line, color="black", linewidth=0.8)
        ax.fill_between(line, 0.95 * line, 1.05 * line, color="grey", alpha=0.2, label="within 5%")
        ax.set_xlabel("measured rank time, s")
        ax.set_ylabel("predicted rank time, s")
        ax.set_title(f"predicted vs measured, {case.label}", fontsize=9)
        ax.legend(fontsize=6)
        fig.tight_layout()
        paths.append(save(fig, out / f"{slug}_predicted.png", plt))

    fig, (idle_ax, error_ax) = plt.subplots(1, 2, figsize=(8, 3.2))
    for case in cases:
        steps = np.arange(1, len(case.online) + 1)
        offline = calibrated_row(case)
        (line,) = idle_ax.plot(steps, [100 * r.idle for r in case.online], marker="o", label=case.label)
        idle_ax.axhline(100 * offline.idle, color=line.get_color(), linestyle="--", linewidth=0.8)
        error_ax.plot(steps, [100 * r.errors.max() for r in case.online], marker="o", color=line.get_color())
        error_ax.axhline(100 * offline.errors.max(), color=line.get_color(), linestyle="--", linewidth=0.8)
    for ax in (idle_ax, error_ax):
        ax.set_xticks(np.arange(1, max(len(case.online) for case in cases) + 1))
    idle_ax.set(xlabel="online step", ylabel="idle, %", title="idle (dashed: offline calibrated)")
    error_ax.set(xlabel="online step", ylabel="max rank error, %", title="prediction error (dashed: offline)")
    idle_ax.legend(fontsize=7)
    fig.tight_layout()
    paths.append(save(fig, out / "training_online.png", plt))
    return paths


def save(fig, path: Path, plt) -> Path:
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
