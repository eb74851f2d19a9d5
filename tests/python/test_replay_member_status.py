"""Client.replay_pass(member_status=True): each trajectory's own "status"
tag takes part in its group's lifecycle. A group waits while a member is
pending or running; failed and aborted members are left out of the answer and
cleared with their group; a group whose members all failed is
a failed group; verl's drop-in takes the same option. Embedded and remote
run the same tests."""

from __future__ import annotations

import numpy as np
import pytest

from remote_services import client_in_each_mode, client_mode, clusters, make_client  # noqa: F401 (fixtures)
from seqflow.compat.verl import ReplayBufferAsync


@pytest.fixture
def client(client_in_each_mode):  # noqa: F811
    return client_in_each_mode


def _prompt(client, uid, status="finished", step=1):
    client.kv_put(uid, "train", tag={"is_prompt": True, "status": status, "global_steps": step})


def _members(client, uid, statuses):
    """One trajectory per status (None: no status tag), each with a value to read back."""
    keys = [f"{uid}_{i}_0" for i in range(len(statuses))]
    tags = [{"reward": 1.0} if status is None else {"reward": 1.0, "status": status} for status in statuses]
    client.kv_batch_put(keys, "train", fields={"x": np.arange(len(keys), dtype=np.int64).reshape(-1, 1)}, tags=tags)
    return keys


def test_a_group_is_served_once_no_member_is_running_and_without_its_aborted_ones(client):
    _prompt(client, "a")
    keys = _members(client, "a", ["finished", "running", "aborted", None])
    waiting = client.replay_pass("train", 1, 1, member_status=True)
    assert (waiting.ready, waiting.sampleable) == (False, 0)
    assert client.replay_pass("train", 1, 1, step="count").sampleable == 1  # verl's layout: the prompt decides

    _prompt(client, "b")
    _members(client, "b", ["finished"])
    client.kv_put(keys[1], "train", tag={"reward": 1.0, "status": "finished"})
    served = client.replay_pass("train", 1, 1, member_status=True)
    assert served.selected_uids == ["a"]
    assert served.keys == [keys[0], keys[1], keys[3]]
    assert sorted(client.kv_list("train")["train"]) == sorted([keys[0], keys[1], keys[3], "b", "b_0_0"])


def test_a_finished_group_whose_members_all_failed_is_evicted_as_failed(client):
    _prompt(client, "a")
    _members(client, "a", ["failed", "aborted"])
    evicted = client.replay_pass("train", 1, 1, member_status=True)
    assert evicted.refill == 1
    metrics = dict(evicted.cursor.metrics("training"))
    assert metrics["training/rollout_failure/evicted_samples"] == 1.0
    assert metrics["training/rollout_failure/left_out_trajectories"] == 2.0
    assert client.kv_list("train").get("train", {}) == {}


def test_a_status_none_of_the_five_names_its_key_and_member_status_must_be_a_bool(client):
    _prompt(client, "a")
    _members(client, "a", ["done"])
    with pytest.raises(ValueError, match=r"member_status.*'a_0_0'"):
        client.replay_pass("train", 1, 1, member_status=True)
    with pytest.raises(TypeError, match="member_status"):
        client.replay_pass("train", 1, 1, member_status="yes")


def test_verls_drop_in_takes_member_status_and_serves_the_group_once_its_members_are_done(client):
    _prompt(client, "a")
    keys = _members(client, "a", ["finished", "running", "aborted"])
    buffer = ReplayBufferAsync("async", {}, None, "drop", {}, poll_interval=0.01, client=client, member_status=True)
    assert buffer.get_sampleable_count(1, "train") == 0
    client.kv_put(keys[1], "train", tag={"reward": 1.0, "status": "finished"})
    batch, metrics = buffer.sample(1, "train", 1)
    # seqflow's own metric: the aborted member, released with its served group
    assert (batch.keys, metrics) == (keys[:2], {"training/rollout_failure/left_out_trajectories": 1})
    assert type(metrics["training/rollout_failure/left_out_trajectories"]) is int  # a count, as verl's are
    with pytest.raises(TypeError, match="member_status"):
        ReplayBufferAsync("async", {}, None, "drop", {}, client=client, member_status=1)
