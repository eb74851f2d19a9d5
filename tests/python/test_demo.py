"""The demo (python -m seqflow demo), run as a user runs it: a subprocess with
small parameters; its exit status, printed lines and JSON report."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from required import require

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
                    "--ranks", str(RANKS), "--seed", "3", "--report", str(report), "--png", str(tmp_path / "load.png"))
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
        plan = step["pack_plan"]
        assert plan["optimizer_steps"] == 2 and plan["packs_over_cap"] == 0
        assert 0.0 <= plan["padding_ratio"] < 1.0


def test_chart_is_drawn_or_skipped_with_a_reason(demo):
    done, _, tmp_path = demo
    assert done.returncode == 0, done.stderr
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "chart: skipped, matplotlib is not installed" in done.stdout
    else:
        assert (tmp_path / "load.png").stat().st_size > 0


def test_same_seed_same_balance(demo, tmp_path):
    done, report_path, _ = demo
    again = tmp_path / "again.json"
    second = run_demo(tmp_path, "--steps", "1", "--prompts", str(PROMPTS), "--responses", str(RESPONSES),
                      "--ranks", str(RANKS), "--seed", "3", "--report", str(again), "--png", str(tmp_path / "x.png"),
                      "--no-progress")
    assert second.returncode == 0, second.stderr
    first_step = json.loads(report_path.read_text())["steps"][0]
    assert json.loads(again.read_text())["steps"][0]["tasks"] == first_step["tasks"]


@pytest.mark.parametrize("args, fragment", [
    (["--prompts", "10", "--ranks", "4"], "--prompts (10) must be a multiple of --ranks (4)"),
    (["--steps", "0"], "must be >= 1"),
    (["--seed", "x"], "expected an integer, got 'x'"),
    (["--pack-max-length", "1000"], "must hold the longest sample"),
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
