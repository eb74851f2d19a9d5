"""report_timing, embedded and remote: ranks report how long their
micro-batches took; the controller fits each task's workload model in the
background and hands it out (task_workload); checkpoints keep the models."""

from __future__ import annotations

import asyncio
import itertools
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from remote_services import client_in_each_mode, client_mode, clusters, make_client  # noqa: F401 (fixtures)

# seconds = per_micro_batch + sum(per_token * L + per_token_squared * L^2 + per_sequence)
TRUTH = {"per_token": 2e-6, "per_token_squared": 4e-9, "per_sequence": 1e-4, "per_micro_batch": 5e-4}


def seconds_of(lengths) -> float:
    lengths = np.asarray(lengths, dtype=np.float64)
    return TRUTH["per_micro_batch"] + float(
        (TRUTH["per_token"] * lengths + TRUTH["per_token_squared"] * lengths**2 + TRUTH["per_sequence"]).sum())


# A kernel vectorised over 8 positions: a length that is not a multiple of 8
# costs this much more per token squared.
UNALIGNED = 1e-9


def unaligned_seconds_of(lengths) -> float:
    lengths = np.asarray(lengths, dtype=np.float64)
    return seconds_of(lengths) + UNALIGNED * float((lengths[lengths % 8 != 0] ** 2).sum())


def timings(count: int, seed: int = 0, truth=seconds_of) -> list:
    """Micro-batches of 1-4 sequences of 50..4000 tokens (about half of them
    a multiple of 8), timed by `truth`."""
    rng = np.random.default_rng(seed)
    records = []
    for _ in range(count):
        lengths = rng.integers(50, 4000, size=int(rng.integers(1, 5)))
        lengths = np.where(rng.random(lengths.size) < 0.5, lengths - lengths % 8, lengths)
        records.append((lengths, truth(lengths)))
    return records


@pytest.fixture
def client(client_in_each_mode):  # noqa: F811
    return client_in_each_mode


def fitted(client, task: str, reports: int, deadline: float = 30.0, exact: bool = True):
    """The fit runs in the background: the task's model once it covers
    `reports` timings (bounded wait); `exact`: once it prices a sequence of
    1000 tokens (a multiple of 8) as the timings' truth does."""
    stop = time.monotonic() + deadline
    while True:
        model = client.task_workload(task)
        if (model is not None and model.reports == reports and model.fitted and model.workload.fit.records == reports
                and (not exact or model.workload.seconds([1000]) == pytest.approx(seconds_of([1000]), rel=1e-3))):
            return model
        assert time.monotonic() < stop, f"no fit of {reports} reports for {task!r}: {model}"
        time.sleep(0.01)


def test_reported_timings_give_each_task_its_fitted_model(client):
    assert client.task_workload("update_actor") is None
    records = timings(48)
    for lengths, seconds in records[:8]:
        client.report_timing("update_actor", lengths, seconds)
    early = client.task_workload("update_actor")
    assert early.reports == 8 and not early.fitted and early.workload.name == "tokens"
    client.report_timings("update_actor", [{"lengths": list(map(int, lengths)), "seconds": seconds}
                                           for lengths, seconds in records[8:]])
    model = fitted(client, "update_actor", 48)
    assert model.task_name == "update_actor"
    for name, value in TRUTH.items():
        assert getattr(model.workload, name) == pytest.approx(value, rel=1e-3, abs=1e-12)
    assert model.workload.fit.records == 48 and model.workload.fit.median_error < 1e-3
    assert client.task_workload("log_prob") is None  # another task has its own model


def expect_unaligned_truth(workload) -> None:
    assert workload.alignment == 8
    assert workload.per_unaligned_token_squared == pytest.approx(UNALIGNED, rel=1e-3)
    for lengths in ([1001], [3999, 40], [4000], [50, 2001, 300]):
        assert workload.seconds(lengths) == pytest.approx(unaligned_seconds_of(lengths), rel=1e-3)


def test_a_timing_alignment_fits_what_unaligned_lengths_cost_more(make_client):  # noqa: F811
    records = timings(64, truth=unaligned_seconds_of)
    aligned = make_client(timing_alignment=8)
    aligned.report_timings("update_actor", records)
    expect_unaligned_truth(fitted(aligned, "update_actor", 64).workload)
    # The same timings without the term: four coefficients cannot price both kinds of length.
    plain = make_client()
    plain.report_timings("update_actor", records)
    workload = fitted(plain, "update_actor", 64, exact=False).workload
    assert (workload.alignment, workload.per_unaligned_token_squared) == (1, 0)
    assert workload.fit.median_error > 0.01


def test_a_timing_alignment_comes_from_the_config_and_the_serve_command(clusters):  # noqa: F811
    import seqflow

    cluster = clusters(1, processes=True, controller_args={"timing_alignment": 8})
    for client in (seqflow.Client.from_config({"controller": {"timing_alignment": 8}}), cluster.client()):
        try:
            client.report_timings("update_actor", timings(64, truth=unaligned_seconds_of))
            expect_unaligned_truth(fitted(client, "update_actor", 64).workload)
        finally:
            client.close()


@pytest.mark.parametrize("value, fragment", [(0, ">= 1, got 0"), (-8, ">= 1, got -8"), ("8", "integer, got '8'"),
                                             (2.5, "integer, got 2.5"), (True, "integer, got True")])
def test_a_bad_timing_alignment_is_refused_by_name(value, fragment):
    import seqflow

    with pytest.raises((TypeError, ValueError), match=f"^timing_alignment must be.*{fragment}"):
        seqflow.Client(timing_alignment=value)
    with pytest.raises((TypeError, ValueError), match=f"^timing_alignment must be.*{fragment}"):
        seqflow.serve_controller("tcp://127.0.0.1:0", timing_alignment=value)
    with pytest.raises((TypeError, ValueError), match=f"^controller.timing_alignment must be.*{fragment}"):
        seqflow.Client.from_config({"controller": {"timing_alignment": value}})


def test_async_twins_report_and_read(client):
    async def go():
        await client.async_report_timings("actor", timings(20))
        return await client.async_task_workload("actor")

    assert asyncio.run(go()).reports == 20


@pytest.mark.parametrize("records, fragments", [
    ([([100, 200], -1.0)], ["records[0].seconds", "-1"]),
    ([([100], 0.1), ([], 0.1)], ["records[1]", "lengths"]),
    ([([100], 0.1), ([5, -3], 0.1)], ["records[1].lengths[1]", "-3"]),
    ([([100], float("nan"))], ["records[0].seconds"]),
    ([([100], "fast")], ["records[0].seconds", "'fast'"]),
    ([([1.5], 0.1)], ["records[0].lengths[0]", "1.5"]),
    ([(1, 2, 3)], ["records[0]", "(lengths, seconds)"]),
    ([{"lengths": [1]}], ["records[0]", "'lengths' and 'seconds'"]),
])
def test_a_bad_record_is_refused_by_name_and_none_is_taken(client, records, fragments):
    client.report_timings("actor", timings(2))
    with pytest.raises(ValueError) as error:
        client.report_timings("actor", records)
    for fragment in fragments:
        assert fragment in str(error.value)
    assert client.task_workload("actor").reports == 2


@pytest.mark.parametrize("task_name, fragment", [("", "task_name must not be empty"), (7, "task_name")])
def test_a_bad_task_name_is_refused(client, task_name, fragment):
    with pytest.raises((ValueError, TypeError), match=fragment):
        client.report_timing(task_name, [100], 0.1)


def test_a_sampler_given_the_online_workload_balances_the_tasks_fit(make_client):  # noqa: F811
    import seqflow

    client = make_client(seqflow.SeqlenBalancedSampler(n_samples_per_prompt=1, dp_size=2, workload="online"))
    lengths = [1000, 700, 600, 500, 400, 200]
    cost = {n: seconds_of([n]) - TRUTH["per_micro_batch"] for n in lengths}
    best = min(max(sum(cost[n] for n in part), sum(cost[n] for n in lengths if n not in part))
               for part in itertools.combinations(lengths, 3))

    def slowest_rank(partition: str) -> float:
        client.put({"x": np.zeros((len(lengths), 1))}, partition_id=partition,
                   custom_meta=[{"total_lengths": n} for n in lengths])
        seconds = []
        for rank in range(2):
            meta = client.get_meta(["x"], 3, partition, task_name="actor",
                                   sampling_config={"dp_rank": rank, "batch_index": 0})
            seconds.append(sum(cost[m["total_lengths"]] for m in meta.custom_meta))
        return max(seconds)

    assert slowest_rank("before") > 1.01 * best  # tokens (no timings yet) is not the best split of the seconds
    client.report_timings("actor", timings(64))
    fitted(client, "actor", 64)
    assert slowest_rank("after") == pytest.approx(best, rel=1e-9)


def same_model(actual, expected) -> bool:
    return (actual.task_name, actual.workload.to_json(), actual.reports, actual.fitted) == (
        expected.task_name, expected.workload.to_json(), expected.reports, expected.fitted)


def test_a_loaded_checkpoint_answers_with_each_tasks_saved_model(make_client, tmp_path):  # noqa: F811
    client = make_client()
    records = timings(48)
    client.report_timings("update_actor", records)
    client.report_timings("log_prob", records[:10])
    model = fitted(client, "update_actor", 48)
    client.save_checkpoint(tmp_path / "ckpt")

    restored = make_client()
    restored.report_timings("other", timings(3))  # replaced by the load
    restored.load_checkpoint(tmp_path / "ckpt")
    assert same_model(restored.task_workload("update_actor"), model)
    assert same_model(restored.task_workload("log_prob"), client.task_workload("log_prob"))
    assert restored.task_workload("other") is None
    # The unfitted model goes on from its 10 records: 6 more make its first fit.
    restored.report_timings("log_prob", records[10:16])
    assert fitted(restored, "log_prob", 16).workload.fit.records == 16


# Saved by a build before checkpoints held task models (tests/data/checkpoints/README.md).
BEFORE_TASK_MODELS = Path(__file__).resolve().parents[1] / "data" / "checkpoints"


def test_a_checkpoint_from_before_task_models_loads_without_them(client_mode, make_client, tmp_path):  # noqa: F811
    client = make_client()  # remote: two storage units, as when it was saved
    client.report_timings("actor", timings(2))
    # A copy: services read checkpoints only under their root (the tests': the temp directory).
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(BEFORE_TASK_MODELS / f"before_task_models_{client_mode}", checkpoint)
    client.load_checkpoint(checkpoint)
    assert client.task_workload("actor") is None
    meta = client.get_meta(["x"], 3, "train", task_name="reader")
    data = client.get_data(meta)
    assert sorted(np.asarray(data["x"]).ravel().tolist()) == list(range(6))

