"""The demo (python -m seqflow demo), run as a user runs it: a subprocess with
small parameters; its exit status, printed lines and JSON report."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from required import require
from seqflow.demo.config import ACTOR_MICRO_BATCH

require("torch")  # the demo's ranks read through StreamingDataset

STEPS, PROMPTS, RESPONSES, RANKS = 2, 32, 4, 4
TASKS = ("log_prob", "update_actor")


def run_demo(tmp_path, *args, timeout=120):
    return subprocess.run([sys.executable, "-m", "seqflow", "demo", *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("demo")
    report = tmp_path / "reports" / "demo.json"
    done = run_demo(tmp_path, "--steps", str(STEPS), "--prompts", str(PROMPTS), "--responses", str(RESPONSES),
                    "--ranks", str(RANKS), "--seed", "3", "--report", str(report), "--png", str(tmp_path / "load.png"),
                    "--time-png", str(tmp_path / "time.png"))
    return done, report, tmp_path


def test_exits_zero_and_prints_each_step(demo):
    done, _, _ = demo
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"{STEPS} steps x {PROMPTS} prompts x {RESPONSES} responses" in out
    for step in range(STEPS):
        assert f"step {step}  train@global_step_{step}: {PROMPTS * RESPONSES} samples" in out
    for task in TASKS:
        lines = [line for line in out.splitlines() if line.strip().startswith(task) and "tokens/rank" in line]
        assert len(lines) == STEPS, out
        for line in lines:
            assert "min" in line and "max" in line and "SequentialSampler would be" in line
            assert "exactly once: yes" in line
    assert out.count("pack plan") == STEPS
    assert out.count("CPU seconds/rank") == STEPS
    assert "update_actor measured CPU time: ranks idle" in out
    assert "controller's model of update_actor after" in out
    assert "exactly once, every step and task: yes" in out
    assert "report: " in out
    assert "chart: " in out  # drawn, or skipped without matplotlib
    assert "see also: seqflow balance-demo" in out


def test_report_holds_every_step_and_task(demo):
    done, report_path, _ = demo
    assert done.returncode == 0, done.stderr
    report = json.loads(report_path.read_text())
    assert report["config"]["steps"] == STEPS and report["config"]["ranks"] == RANKS
    assert report["exactly_once"] is True
    assert [s["step"] for s in report["steps"]] == list(range(STEPS))
    for step in report["steps"]:
        assert step["samples"] == PROMPTS * RESPONSES
        for task in TASKS:
            t = step["tasks"][task]
            assert t["exactly_once"] is True
            assert t["data_mismatches"] == 0
            assert t["consumed"] == PROMPTS * RESPONSES
            assert len(t["tokens_per_rank"]) == RANKS
            assert sum(t["tokens_per_rank"]) == step["tokens"]
            assert sum(t["sequential_tokens_per_rank"]) == step["tokens"]
            assert sum(t["samples_per_rank"]) == PROMPTS * RESPONSES
            assert t["tokens_min"] == min(t["tokens_per_rank"]) and t["tokens_max"] == max(t["tokens_per_rank"])
            assert 1.0 <= t["imbalance"] <= t["sequential_imbalance"] + 1e-12
        timing = step["actor_time"]
        assert len(timing["seconds_per_rank"]) == RANKS and min(timing["seconds_per_rank"]) > 0
        seconds = timing["seconds_per_rank"]
        assert timing["idle"] == pytest.approx(1 - np.mean(seconds) / max(seconds))
        assert timing["micro_batches"] == PROMPTS * RESPONSES // ACTOR_MICRO_BATCH
        if step["step"] > 0:  # a model of the earlier steps predicted each rank
            assert len(timing["predicted_seconds_per_rank"]) == RANKS and timing["max_prediction_error"] >= 0
        plan = step["pack_plan"]
        assert plan["optimizer_steps"] == 2 and plan["packs_over_cap"] == 0
        assert 0.0 <= plan["padding_ratio"] < 1.0
    model = report["actor_time"]["model"]  # every actor micro-batch was reported to the controller
    assert model["reports"] == STEPS * PROMPTS * RESPONSES // ACTOR_MICRO_BATCH and model["fitted"]


def test_chart_is_drawn_or_skipped_with_a_reason(demo):
    done, _, tmp_path = demo
    assert done.returncode == 0, done.stderr
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "chart: skipped, matplotlib is not installed" in done.stdout
    else:
        assert (tmp_path / "load.png").stat().st_size > 0
        assert (tmp_path / "time.png").stat().st_size > 0
        assert f"chart: {tmp_path / 'time.png'}" in done.stdout


def test_same_seed_same_balance_by_tokens(tmp_path):
    """Balanced by tokens, the split depends on the lengths alone (online, it
    follows the measured times)."""
    reports = []
    for run in range(2):
        path = tmp_path / f"run{run}.json"
        done = run_demo(tmp_path, "--steps", "2", "--prompts", str(PROMPTS), "--responses", str(RESPONSES),
                        "--ranks", str(RANKS), "--seed", "3", "--report", str(path), "--png", str(tmp_path / "x.png"),
                        "--time-png", str(tmp_path / "t.png"), "--workload", "tokens", "--no-progress")
        assert done.returncode == 0, done.stderr
        reports.append(json.loads(path.read_text()))
    assert [s["tasks"] for s in reports[0]["steps"]] == [s["tasks"] for s in reports[1]["steps"]]
    assert reports[0]["config"]["workload"] == "tokens"


@pytest.mark.parametrize("args, fragment", [
    (["--prompts", "10", "--ranks", "4"], "--prompts (10) must be a multiple of --ranks (4)"),
    (["--steps", "0"], "must be >= 1"),
    (["--seed", "x"], "expected an integer, got 'x'"),
    (["--pack-max-length", "1000"], "must hold the longest sample"),
    (["--workload", "verl"], "invalid choice: 'verl'"),
])
def test_bad_arguments_exit_2_naming_the_value(capsys, args, fragment):
    from seqflow.demo import main

    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    assert fragment in capsys.readouterr().err


def test_module_usage(tmp_path, capsys):
    from seqflow.__main__ import main

    assert main(["--help"]) == 0 and "demo" in capsys.readouterr().out
    done = subprocess.run([sys.executable, "-m", "seqflow", "nope"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "unknown command 'nope'" in done.stderr
