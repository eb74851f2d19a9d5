"""A calibrated (or online) workload wherever workload= is taken: partition,
pack.plan, pack.micro_batches, the balancing samplers and the CLI (balance,
pack, calibrate). Expectations come from the models' costs (brute force),
not from hard-coded answers."""

from __future__ import annotations

import itertools
import json
import subprocess

import numpy as np
import pytest

from seqflow import SeqlenBalancedSampler, TokenBudgetSampler
from seqflow import balance as sb
from seqflow import pack
from seqflow.balance import Workload
from seqflow.samplers import native_sampler
from remote_services import require_seqflow_command

SEQFLOW = require_seqflow_command()
# Attention-bound: the L^2 term dominates, so splitting long sequences apart matters more than tokens.
SQUARE_HEAVY = Workload.calibrated(per_token=1e-9, per_token_squared=1e-9, per_sequence=1e-6)
# Six lengths whose best equal-count split into two parts differs between tokens and SQUARE_HEAVY.
LENGTHS = [200, 1000, 100, 900, 1600, 2000]


def heaviest(parts, cost) -> int:
    return max(sum(cost(LENGTHS[i]) for i in part) for part in parts)


def best_equal_splits(cost):
    """Brute force: the smallest heaviest part over splits of LENGTHS into two
    parts of three, and every split that reaches it."""
    n = len(LENGTHS)
    splits = [(first, tuple(i for i in range(n) if i not in first)) for first in itertools.combinations(range(n), 3)]
    best = min(heaviest(split, cost) for split in splits)
    return best, [split for split in splits if heaviest(split, cost) == best]


def tokens(length: int) -> int:
    return length


@pytest.fixture(scope="module")
def optima():
    by_tokens, token_splits = best_equal_splits(tokens)
    by_model, model_splits = best_equal_splits(SQUARE_HEAVY.cost)
    # The instance separates the models: no split is best under both.
    assert all(heaviest(split, tokens) > by_tokens for split in model_splits)
    assert all(heaviest(split, SQUARE_HEAVY.cost) > by_model for split in token_splits)
    return by_tokens, by_model


def online_model(model: Workload) -> sb.OnlineWorkload:
    """An OnlineWorkload whose current fit is `model`, from its exact timings."""
    online = sb.OnlineWorkload(prior="tokens", window=64, min_records=8)
    rng = np.random.default_rng(3)
    for _ in range(32):
        lengths = rng.integers(16, 4096, rng.integers(1, 6))
        online.report(lengths, model.seconds(lengths))
    online.wait_for_refit()
    return online


def test_partition_balances_the_calibrated_cost(optima):
    by_tokens, by_model = optima
    assert heaviest(sb.partition(LENGTHS, 2, cardinality="equal").parts, tokens) == by_tokens
    for workload in (SQUARE_HEAVY, online_model(SQUARE_HEAVY)):
        result = sb.partition(LENGTHS, 2, cardinality="equal", workload=workload)
        assert heaviest(result.parts, SQUARE_HEAVY.cost) == by_model
        assert list(result.sums) == [sum(SQUARE_HEAVY.cost(LENGTHS[i]) for i in part) for part in result.parts]


@pytest.mark.parametrize("sampler_class", [SeqlenBalancedSampler, TokenBudgetSampler])
def test_balancing_samplers_take_a_workload(sampler_class, optima):
    by_tokens, by_model = optima
    # One more ready sample than a global batch of 3 per rank: token_budget serves a batch once the
    # next group would overflow; its token budget (every sample) is never the binding one here.
    ready = list(range(len(LENGTHS) + 1))
    custom_meta = {i: {"total_lengths": length} for i, length in enumerate(LENGTHS + [1])}

    def split(workload):
        if sampler_class is SeqlenBalancedSampler:
            sampler = SeqlenBalancedSampler(n_samples_per_prompt=1, dp_size=2, workload=workload)
        else:
            sampler = TokenBudgetSampler(max_tokens=sum(LENGTHS), dp_size=2, workload=workload)
        parts = [sampler.sample(ready, 3, dp_rank=rank, batch_index=0, custom_meta=custom_meta)[0]
                 for rank in range(2)]
        assert sorted(i for part in parts for i in part) == list(range(len(LENGTHS)))
        return parts

    assert heaviest(split("tokens"), tokens) == by_tokens
    assert heaviest(split(SQUARE_HEAVY), SQUARE_HEAVY.cost) == by_model


def test_sampler_by_name_takes_a_workload_spec_or_model():
    for workload in ("quadratic(0,1)", json.loads(SQUARE_HEAVY.to_json())):
        assert native_sampler("seqlen_balanced", {"dp_size": 2, "workload": workload}) is not None
    with pytest.raises(ValueError, match="argument 'workload' of sampler 'seqlen_balanced'"):
        native_sampler("seqlen_balanced", {"dp_size": 2, "workload": 3})


def test_pack_plan_balances_the_calibrated_cost():
    rng = np.random.default_rng(5)
    lengths = rng.integers(64, 4096, 48)
    for workload in (SQUARE_HEAVY, online_model(SQUARE_HEAVY)):
        plan = pack.plan(lengths, dp_size=2, optimizer_steps=2, pack_max_length=8192, workload=workload)
        for rank, steps in enumerate(plan.packs):
            for step, packs in enumerate(steps):
                expected = sum(SQUARE_HEAVY.cost(int(lengths[i])) for p in packs for i in p)
                assert plan.stats.workloads[rank][step] == expected


def test_micro_batches_balance_the_calibrated_cost():
    rng = np.random.default_rng(6)
    lengths = rng.integers(64, 4096, 40)
    for per_rank in (False, True):
        given = [lengths[:20], lengths[20:]] if per_rank else lengths
        plan = pack.micro_batches(given, 8192, dp_size=2, workload=SQUARE_HEAVY)
        for rank, batches in enumerate(plan.batches):
            local = given[rank] if per_rank else lengths
            for b, batch in enumerate(batches):
                assert plan.workloads[rank][b] == sum(SQUARE_HEAVY.cost(int(local[i])) for i in batch)


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([SEQFLOW, *args], input=stdin, capture_output=True, text=True, timeout=60)


def timings_file(tmp_path, model: Workload, count: int = 40):
    rng = np.random.default_rng(4)
    records = []
    for _ in range(count):
        lengths = [int(x) for x in rng.integers(16, 4096, rng.integers(1, 8))]
        records.append({"lengths": lengths, "seconds": model.seconds(lengths)})
    path = tmp_path / "timings.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path, records


def test_cli_calibrate_then_balance_and_pack_with_the_model(tmp_path, optima):
    _, by_model = optima
    truth = Workload.calibrated(per_token=2e-6, per_token_squared=3e-10, per_sequence=1e-4, per_micro_batch=0.01)
    timings, records = timings_file(tmp_path, truth)
    model_path = tmp_path / "model.json"
    result = cli("calibrate", "--timings", str(timings), "--out", str(model_path))
    assert result.returncode == 0, result.stderr
    fitted = Workload.load(model_path)
    assert fitted == sb.calibrate(records)
    for name in ("per_token", "per_token_squared", "per_sequence", "per_micro_batch"):
        assert name in result.stdout
        assert getattr(fitted, name) == pytest.approx(getattr(truth, name), rel=1e-6)
    assert "records 40, outliers 0" in result.stdout

    SQUARE_HEAVY.save(model_path)
    lengths_file = tmp_path / "lengths.txt"
    lengths_file.write_text("\n".join(map(str, LENGTHS)) + "\n")
    result = cli("balance", str(lengths_file), "--k", "2", "--cardinality", "equal", "--workload", str(model_path),
                 "--json", "-")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["workload"] == SQUARE_HEAVY.name
    assert heaviest(plan["parts"], SQUARE_HEAVY.cost) == by_model

    result = cli("pack", str(lengths_file), "--dp", "2", "--steps", "1", "--cap", "4096", "--workload",
                 str(model_path), "--json", "-")
    assert result.returncode == 0, result.stderr
    packed = json.loads(result.stdout)
    for rank, steps in enumerate(packed["packs"]):
        for step, packs in enumerate(steps):
            expected = sum(SQUARE_HEAVY.cost(LENGTHS[i]) for p in packs for i in p)
            assert packed["stats"]["workloads"][rank][step] == expected


def test_cli_calibrate_with_an_alignment(tmp_path):
    truth = Workload.calibrated(per_token=2e-6, per_token_squared=3e-10, per_sequence=1e-4, per_micro_batch=0.01,
                                per_unaligned_token_squared=6e-11, alignment=8)
    timings, records = timings_file(tmp_path, truth, count=120)
    model_path = tmp_path / "model.json"
    result = cli("calibrate", "--timings", str(timings), "--alignment", "8", "--out", str(model_path))
    assert result.returncode == 0, result.stderr
    fitted = Workload.load(model_path)
    assert fitted == sb.calibrate(records, alignment=8)
    assert (fitted.alignment, fitted.per_unaligned_token_squared) == (8, pytest.approx(6e-11, rel=1e-6))
    assert "per_unaligned_token_squared (L % 8 != 0)" in result.stdout
    result = cli("calibrate", "--timings", str(timings))
    assert result.returncode == 0 and "per_unaligned_token_squared" not in result.stdout
    result = cli("calibrate", "--timings", str(timings), "--alignment", "0")
    assert result.returncode == 2 and "--alignment" in result.stderr and "0" in result.stderr


def test_cli_bad_models_and_timings_are_named(tmp_path):
    bad_model = tmp_path / "bad.json"
    bad_model.write_text('{"format": 1, "kind": "calibrated"}')
    result = cli("balance", "-", "--k", "2", "--workload", str(bad_model), stdin="1\n2\n")
    assert result.returncode == 2
    assert "--workload" in result.stderr and str(bad_model) in result.stderr and "per_token" in result.stderr

    result = cli("balance", "-", "--k", "2", "--workload", str(tmp_path / "missing.json"), stdin="1\n2\n")
    assert result.returncode == 2 and "--workload: no model file" in result.stderr

    timings = tmp_path / "t.jsonl"
    timings.write_text('{"lengths": [1, 2], "seconds": 1}\n\n{"lengths": [1, -2], "seconds": 1}\n')
    result = cli("calibrate", "--timings", str(timings))
    assert result.returncode == 2
    assert "records[1].lengths[1] = -2" in result.stderr
    timings.write_text('{"lengths": [1, 2], "seconds": "x"}\n')
    result = cli("calibrate", "--timings", str(timings))
    assert result.returncode == 2 and "line 1" in result.stderr and "seconds" in result.stderr
    result = cli("calibrate")
    assert result.returncode == 2 and "--timings FILE is required" in result.stderr
