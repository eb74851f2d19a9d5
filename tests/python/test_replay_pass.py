"""seqflow.Client.replay_pass and the verl drop-ins' own checks: bad options
are refused naming the parameter and the value; a pass on an embedded
client selects, evicts and reports as docs/replay.md says. (verl's classes
against the drop-ins: test_compat_verl_replay_buffer.py.)"""

from __future__ import annotations

import itertools
import math
import random
import threading

import numpy as np
import pytest

import seqflow
from seqflow.compat.verl import ReplayBuffer, ReplayBufferAsync


def _group(client, uid, status, step, rewards=(0.0, 1.0)):
    client.kv_put(uid, "train", tag={"is_prompt": True, "status": status, "global_steps": step})
    client.kv_batch_put([f"{uid}_{s}_0" for s in range(len(rewards))], "train",
                        tags=[{"reward": r} for r in rewards])


@pytest.fixture
def client():
    made = seqflow.Client()
    yield made
    made.close()


@pytest.mark.parametrize("options, named", [
    ({"mode": "fast"}, "mode must be 'sync' or 'async', got 'fast'"),
    ({"max_off_policy_strategy": "keep"}, "max_off_policy_strategy must be 'drop' or 'wait', got 'keep'"),
    ({"max_off_policy_threshold": 0}, "max_off_policy_threshold = 0"),
    ({"step": "peek"}, "step must be 'count', 'evict' or 'sample', got 'peek'"),
    ({"gen_batch_size": -2}, "gen_batch_size = -2"),
    ({"wait": -1.0}, "wait must be a finite number of seconds"),
    ({"group_filter_tag": ""}, "group_filter_tag"),
    ({"group_values": {"a": [1.0]}}, "group_values for 1 groups need group_filter_metric"),
    ({"group_filter_tag": "r", "group_filter_metric": "acc"}, "from a tag or from the client, not both"),
    ({"group_filter_metric": "acc", "group_values": {"": [1.0]}}, "group_values uid"),
    ({"group_filter_metric": ""}, "group_filter_metric"),
    ({"pass_id": 0}, "pass_id must be >= 1, got 0"),
    ({"pass_id": 5, "lease": 0.0}, "lease must be a finite number of seconds > 0"),
])
def test_bad_options_are_refused_by_name(client, options, named):
    with pytest.raises(ValueError, match=named.replace("(", r"\(").replace(")", r"\)")):
        client.replay_pass("train", 1, 1, **options)


def test_a_pass_evicts_then_selects_and_names_its_metrics(client):
    _group(client, "old", "finished", 0)
    _group(client, "same", "finished", 4, (1.0, 1.0))
    _group(client, "new", "finished", 4)
    first = client.replay_pass("train", 4, 1, max_off_policy_threshold=2, group_filter_tag="reward")
    assert (first.refill, first.ready) == (2, False)
    second = client.replay_pass("train", 4, 1, max_off_policy_threshold=2, group_filter_tag="reward",
                                cursor=first.cursor)
    assert second.ready and second.selected_uids == ["new"] and second.keys == ["new_0_0", "new_1_0"]
    assert dict(second.cursor.metrics("training")) == {
        "training/off_policy/evicted_samples": 1.0, "training/off_policy/evicted_samples_staleness/mean": 5.0,
        "training/off_policy/evicted_samples_staleness/max": 5.0,
        "training/off_policy/evicted_samples_staleness/min": 5.0,
        "training/filter_groups/evicted_samples": 1.0}
    assert second.cursor.filtered_values == [(1.0, 1)]
    assert sorted(client.kv_list("train")["train"]) == ["new_0_0", "new_1_0"]


def _values_of_every_kind(rng):
    """Groups of DAPO values where exact equality and verl's np.std == 0 can disagree."""
    groups = [[0.1] * 3, [0.5] * 2, [0.7] * 3, [1e-200, 2e-200], [math.nan] * 2, [math.inf] * 2, [0.4], [0.2, 0.7],
              [1.0] * 130, [0.1] * 129 + [0.1 + 1e-17],
              [0.07918017704168812] * 196]  # numpy (halves above 128 values): std 0; a plain sum: not
    for _ in range(40):
        value = rng.choice([rng.random(), round(rng.random(), 1), 1 / rng.randint(1, 9)])
        groups.append([value] * rng.randint(1, 20) + ([] if rng.random() < 0.7 else [rng.random()]))
    return groups


def test_supplied_values_are_filtered_as_verl_does_with_numpy(client):
    groups = _values_of_every_kind(random.Random(7))
    for i, values in enumerate(groups):
        client.kv_put(f"g{i}", "train", tag={"is_prompt": True, "status": "finished", "global_steps": 1})
        client.kv_batch_put([f"g{i}_{s}_0" for s in range(len(values))], "train", tags=[{}] * len(values))
    listed = client.kv_list("train")

    asked = client.replay_pass("train", 1, 1, step="count", group_filter_metric="acc")
    assert sorted(asked.unclassified_keys) == sorted(key for key in listed["train"] if "_" in key)
    assert (asked.sampleable, client.kv_list("train")) == (0, listed)  # held in flight until their values come

    supplied = {f"g{i}": values for i, values in enumerate(groups)}
    supplied["g7"] = [0.2]  # not one value per trajectory: asked for again, not classified
    passed = client.replay_pass("train", 1, 1, step="evict", group_filter_metric="acc", group_values=supplied)
    with np.errstate(invalid="ignore"):  # inf - inf: numpy's std is nan, as verl computes it
        filtered = {f"g{i}" for i, values in enumerate(groups) if len(values) > 1 and float(np.std(values)) == 0.0}
    assert {"g1", "g3", "g10"} <= filtered and not {"g0", "g2", "g4", "g5"} & filtered  # the cases it is about
    left = {key for key in client.kv_list("train")["train"] if "_" not in key}
    assert left == set(supplied) - filtered
    assert passed.unclassified_keys == ["g7_0_0", "g7_1_0"] and passed.refill == len(filtered)


def test_the_drop_ins_refuse_verls_bad_constructor_arguments_by_name(client):
    common = {"trainer_mode": "async", "trainer_config": {}, "sampler_kwargs": {}, "client": client}
    with pytest.raises(ValueError, match="max_off_policy_threshold .* got -1"):
        ReplayBufferAsync(max_off_policy_threshold=-1, max_off_policy_strategy="drop", **common)
    with pytest.raises(ValueError, match="max_off_policy_strategy .* got 'later'"):
        ReplayBufferAsync(max_off_policy_threshold=None, max_off_policy_strategy="later", **common)
    with pytest.raises(ValueError, match="requires refill_fn"):
        ReplayBufferAsync(max_off_policy_threshold=None, max_off_policy_strategy="drop", filter_groups_metric="r",
                          **common)
    with pytest.raises(ValueError, match="max_inflight_gen_batches must be a positive integer, got 0"):
        ReplayBuffer(max_off_policy_threshold=None, max_off_policy_strategy="drop", filter_groups_metric="r",
                     refill_fn=print, max_inflight_gen_batches=0, train_batch_size=2, **common)
    with pytest.raises(ValueError, match="sync_refill_failed_groups requires gen_batch_size=1, got 2"):
        ReplayBuffer(max_off_policy_threshold=None, max_off_policy_strategy="drop", refill_fn=print,
                     sync_refill_failed_groups=True, gen_batch_size=2, **common)


def test_the_async_drop_in_counts_waits_and_samples_on_a_given_client(client):
    _group(client, "a", "finished", 1)
    _group(client, "b", "failure", 2, (0.0,))
    refills = []
    buffer = ReplayBufferAsync("async", {}, None, "drop", {}, poll_interval=0.01,
                               refill_fn=lambda k: (refills.append(k), _group(client, "r", "finished", 3)),
                               client=client)
    assert buffer.get_sampleable_count(3, "train") == 1  # the failed group is not sampleable; nothing evicted
    uids, metrics = buffer.wait_for_sampleable(3, "train", 2)
    assert (uids, metrics, refills) == ({"a", "r"}, {"training/rollout_failure/evicted_samples": 1}, [1])
    batch, metrics = buffer.sample(3, "train", 1)
    assert (batch.keys, batch.partition_id, metrics) == (["a_0_0", "a_1_0"], "train", {})
    assert "a" not in client.kv_list("train")["train"]  # its prompt key cleared, its trajectories kept


def test_a_sample_returns_while_groups_keep_finishing(client):
    """Groups without their DAPO values yet are held in flight, not the whole pass: sample() returns while a
    worker finishes a group every few milliseconds (each values round trip used to meet new ones and start over)."""
    stop = threading.Event()

    def finish_groups():
        for i in itertools.count():
            if stop.wait(0.005):
                return
            client.kv_batch_put([f"w{i}_0_0", f"w{i}_1_0"], "train",
                                fields={"rm_scores": np.array([[0.0], [1.0]], np.float32)})
            client.kv_put(f"w{i}", "train", tag={"is_prompt": True, "status": "finished", "global_steps": 1})

    worker = threading.Thread(target=finish_groups)
    worker.start()
    sampled = []
    buffer = ReplayBufferAsync("async", {}, None, "drop", {}, poll_interval=0.01, refill_fn=lambda count: None,
                               filter_groups_metric="reward", client=client)
    sampler = threading.Thread(target=lambda: sampled.append(buffer.sample(1, "train", 4)))
    sampler.start()
    sampler.join(timeout=60)
    stop.set()
    worker.join(timeout=60)
    assert not sampler.is_alive() and len(sampled[0][0].keys) == 8


def test_a_pass_with_an_id_is_answered_again_and_held_until_acknowledged(client):
    _group(client, "a", "finished", 1)
    _group(client, "b", "finished", 2)
    first = client.replay_pass("train", 3, 1, pass_id=7)
    assert first.kept and first.selected_uids == ["a"]
    again = client.replay_pass("train", 3, 1, pass_id=7)  # as a retry whose first reply was lost
    assert (again.selected_uids, again.keys, again.tags) == (first.selected_uids, first.keys, first.tags)
    assert client.replay_pass("train", 3, 1, step="count").sampleable == 1  # a is held, b sampleable
    assert "a" in client.kv_list("train")["train"]
    assert client.ack_replay_pass("train", 7) and client.ack_replay_pass("train", 7)
    assert "a" not in client.kv_list("train")["train"]
    assert not client.ack_replay_pass("train", 8)
    with pytest.raises(ValueError, match="pass_id = 7 .* was acknowledged"):
        client.replay_pass("train", 3, 1, pass_id=7)
    with pytest.raises(ValueError, match="pass_id must be >= 1"):
        client.ack_replay_pass("train", -1)
