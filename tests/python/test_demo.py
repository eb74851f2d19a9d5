"""The demo (examples/demo/grpo_balance_demo.py), run as a user runs it: a
subprocess with a small configuration; its exit status, printed lines, JSON
report and chart. Its measured times are checked for consistency, never for
a speedup (timing belongs in the benchmarks)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from required import require

require("torch")  # the demo's ranks train a torch model

DEMO_DIR = Path(__file__).resolve().parents[2] / "examples" / "demo"
DEMO = DEMO_DIR / "grpo_balance_demo.py"
STEPS, PROMPTS, RESPONSES, RANKS = 2, 32, 2, 4
METHODS = ("naive", "karmarkar_karp", "seqflow")
DEADLINE = 300  # seconds for one run of the demo


def run_demo(tmp_path, *args, without=None):
    """`python grpo_balance_demo.py ARGS` in a subprocess; `without`: a
    module its imports do not find, as when it is not installed."""
    command = [sys.executable, str(DEMO), *args]
    if without:
        command[1:2] = ["-c", f"import runpy, sys; sys.modules[{without!r}] = None; "
                              f"sys.path.insert(0, {str(DEMO_DIR)!r}); sys.argv = {[str(DEMO), *args]!r}; "
                              f"runpy.run_path({str(DEMO)!r}, run_name='__main__')"]
    return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=DEADLINE)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("demo")
    done = run_demo(tmp_path, "--steps", str(STEPS), "--prompts", str(PROMPTS), "--responses", str(RESPONSES),
                    "--ranks", str(RANKS), "--seed", "3", "--report", "reports/demo.json", "--png", "ranks.png")
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, json.loads((tmp_path / "reports" / "demo.json").read_text()), tmp_path


def test_prints_each_step_and_one_table(demo):
    out, report, _ = demo
    assert f"{STEPS} steps x {PROMPTS} prompts x {RESPONSES} responses" in out
    for step in range(STEPS):
        assert f"step {step}: {PROMPTS * RESPONSES} samples" in out
    for label in report["config"]["labels"].values():
        assert sum(line.strip().startswith(label) for line in out.splitlines()) == 1, label
    assert "noise: every micro-batch ran twice" in out and "idle on ranks of equal work" in out
    assert "seqflow handed every sample to exactly one rank, every step: yes" in out
    assert "report: reports/demo.json" in out


def test_every_split_places_every_sample_once(demo):
    _, report, _ = demo
    assert report["exactly_once"] is True
    for step in report["steps"]:
        assert step["exactly_once"] is True and step["data_mismatches"] == 0
        for method in METHODS:
            row = step["methods"][method]
            placed = [p for rank in row["positions_per_rank"] for p in rank]
            assert sorted(placed) == list(range(PROMPTS * RESPONSES)), method
            assert [len(rank) for rank in row["positions_per_rank"]] == [PROMPTS * RESPONSES // RANKS] * RANKS
            assert sum(row["tokens_per_rank"]) == step["tokens"], method


def test_seqflow_keeps_each_prompts_responses_on_one_rank(demo):
    _, report, _ = demo
    for step in report["steps"]:
        prompts = [{p // RESPONSES for p in rank} for rank in step["methods"]["seqflow"]["positions_per_rank"]]
        assert sum(len(rank) for rank in prompts) == PROMPTS


def test_idle_and_speedup_come_from_the_measured_times(demo):
    _, report, _ = demo
    for method in METHODS:
        rows = [step["methods"][method] for step in report["steps"]]
        for row in rows:
            seconds = row["seconds_per_rank"]
            assert len(seconds) == RANKS and min(seconds) > 0
            assert row["step_seconds"] == max(seconds)
            assert row["idle"] == pytest.approx(1 - np.mean(seconds) / max(seconds))
        summary = report["summary"][method]
        assert summary["step_seconds"] == pytest.approx(np.mean([row["step_seconds"] for row in rows]))
        assert summary["idle"] == pytest.approx(np.mean([row["idle"] for row in rows]))
        assert summary["tokens_min"] == min(min(row["tokens_per_rank"]) for row in rows)
        assert summary["speedup"] == pytest.approx(report["summary"]["naive"]["step_seconds"]
                                                   / summary["step_seconds"])
    noise = report["noise"]
    assert len(noise["pairs"]) == STEPS * len(METHODS) * RANKS and noise["rank_noise"] >= 0
    assert 0 <= noise["idle_from_noise"] < 1


def test_seqflow_predicts_less_idle_than_the_naive_split(demo):
    """On the same rollouts, by the controller's own model of the times."""
    _, report, _ = demo
    assert report["summary"]["seqflow"]["predicted_idle"] < report["summary"]["naive"]["predicted_idle"]


def test_chart_legend_covers_no_bar(demo):
    _, report, tmp_path = demo
    pytest.importorskip("matplotlib")
    assert (tmp_path / "ranks.png").stat().st_size > 0
    sys.path.insert(0, str(DEMO_DIR))
    try:
        from chart import figure
    finally:
        sys.path.remove(str(DEMO_DIR))
    fig = figure(report)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (legend,) = fig.legends
    box = legend.get_window_extent(renderer)
    bars = [patch for ax in fig.axes for patch in ax.patches]
    assert len(bars) == len(METHODS) * RANKS
    for bar in bars:
        assert not box.overlaps(bar.get_window_extent(renderer))
    for ax in fig.axes:  # nor a title (the idle is in it)
        assert not box.overlaps(ax.title.get_window_extent(renderer))


TINY = ("--steps", "1", "--prompts", "8", "--responses", "2", "--ranks", "2", "--seed", "5")


def test_runs_without_matplotlib_and_says_the_chart_was_skipped(tmp_path):
    done = run_demo(tmp_path, *TINY, "--png", "ranks.png", without="matplotlib")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "chart: skipped, matplotlib is not installed" in done.stdout
    assert not (tmp_path / "ranks.png").exists()


def test_same_seed_same_splits_when_seqflow_balances_tokens(tmp_path):
    """Balanced by tokens, every split depends on the lengths alone (online,
    seqflow's follows the measured times)."""
    splits = []
    for run in range(2):
        done = run_demo(tmp_path, *TINY, "--workload", "tokens", "--report", f"run{run}.json")
        assert done.returncode == 0, done.stdout + done.stderr
        report = json.loads((tmp_path / f"run{run}.json").read_text())
        assert report["config"]["labels"]["seqflow"] == "seqflow (tokens)"
        splits.append([{m: s["methods"][m]["positions_per_rank"] for m in METHODS} for s in report["steps"]])
    assert splits[0] == splits[1]


@pytest.mark.parametrize("args, pattern", [
    (["--prompts", "10", "--ranks", "4"], re.escape("--prompts (10) must be a multiple of --ranks (4)")),
    (["--steps", "0"], "argument --steps: must be >= 1, got 0"),
    (["--ranks", "1"], "argument --ranks: must be >= 2, got 1"),
    (["--seed", "x"], "argument --seed: expected an integer, got 'x'"),
    (["--micro-batch-tokens", "100"], r"argument --micro-batch-tokens: must be >= \d+ \(the longest sample\), got 100"),
    (["--prompts", "8192", "--responses", "4"], re.escape("--prompts x --responses (8192 x 4) must be at most 16,384")),
    (["--workload", "verl"], "argument --workload: invalid choice: 'verl'"),
])
def test_bad_arguments_exit_2_naming_the_option_and_value(tmp_path, args, pattern):
    done = subprocess.run([sys.executable, str(DEMO), *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert re.search(pattern, done.stderr), done.stderr
