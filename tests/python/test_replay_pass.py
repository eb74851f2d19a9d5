"""seqflow.Client.replay_pass and the verl drop-ins' own checks: bad options
are refused naming the parameter and the value; a pass on an embedded
client selects, evicts and reports as docs/replay.md says. (verl's classes
against the drop-ins: test_compat_verl_replay_buffer.py.)"""

from __future__ import annotations

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
