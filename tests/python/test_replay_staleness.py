"""Client.replay_pass(max_staleness_versions=...) and the verl drop-in's
seqflow-only keyword of the same name: groups stale by policy version
(their oldest trajectory started too many versions ago) are dropped and
counted, or waited for. Embedded and remote run the same tests."""

from __future__ import annotations

import threading

import pytest

from remote_services import client_in_each_mode, client_mode, clusters, make_client  # noqa: F401 (fixtures)
from seqflow.compat.verl import ReplayBufferAsync

VERSION_EVICTED = "training/off_policy/version_evicted_samples"


@pytest.fixture
def client(client_in_each_mode):  # noqa: F811
    return client_in_each_mode


def _group(client, uid, status, step=1, trajectories=2):
    """A prompt key and its trajectories, inserted at the client's current policy version."""
    client.kv_put(uid, "train", tag={"is_prompt": True, "status": status, "global_steps": step})
    client.kv_batch_put([f"{uid}_{s}_0" for s in range(trajectories)], "train",
                        tags=[{"reward": float(s)} for s in range(trajectories)])


def _finish(client, uid, step=1):
    client.kv_put(uid, "train", tag={"is_prompt": True, "status": "finished", "global_steps": step})


def test_a_stale_group_is_dropped_and_counted_one_at_the_bound_is_kept(client):
    max_staleness = 1
    _group(client, "stale", "finished")
    client.set_policy_version(1)
    _group(client, "bound", "finished")
    current = 1 + max_staleness
    client.set_policy_version(current)
    first = client.replay_pass("train", 1, 1, max_staleness_versions=max_staleness)
    assert (first.refill, first.ready) == (1, False)
    assert dict(first.cursor.metrics("training")) == {
        VERSION_EVICTED: 1.0, "training/off_policy/version_evicted_samples_age/max": float(current)}
    assert sorted(client.kv_list("train")["train"]) == ["bound", "bound_0_0", "bound_1_0"]
    second = client.replay_pass("train", 1, 1, max_staleness_versions=max_staleness, cursor=first.cursor)
    assert second.selected_uids == ["bound"]


def test_wait_holds_sampling_until_the_stale_group_in_flight_finishes(client):
    _group(client, "slow", "running", step=0)
    client.set_policy_version(3)
    _group(client, "done", "finished")
    held = client.replay_pass("train", 1, 1, max_staleness_versions=2, max_off_policy_strategy="wait")
    assert not held.ready and held.refill == 0
    _finish(client, "slow", step=0)
    released = client.replay_pass("train", 1, 1, max_staleness_versions=2, max_off_policy_strategy="wait")
    assert released.selected_uids == ["slow"]


@pytest.mark.parametrize("options, named", [
    ({"max_staleness_versions": -1}, "max_staleness_versions = -1 must be >= 0"),
    ({"max_staleness_versions": 2, "mode": "sync"}, "max_staleness_versions = 2 is for mode 'async'"),
])
def test_bad_values_are_refused_by_name(client, options, named):
    with pytest.raises(ValueError, match=named):
        client.replay_pass("train", 1, 1, **options)


def test_the_drop_in_reports_its_version_evictions_only_when_there_are_some(client):
    _group(client, "old", "finished")
    current = 2
    client.set_policy_version(current)
    refilled = threading.Event()

    def refill(count):
        assert count == 1
        _group(client, "new", "finished")
        refilled.set()

    buffer = ReplayBufferAsync("async", {}, None, "drop", {}, poll_interval=0.01, refill_fn=refill, client=client,
                               max_staleness_versions=1)
    batch, metrics = buffer.sample(1, "train", 1)
    assert refilled.is_set() and batch.keys == ["new_0_0", "new_1_0"]
    assert metrics == {VERSION_EVICTED: 1, "training/off_policy/version_evicted_samples_age/max": float(current)}
    assert isinstance(metrics[VERSION_EVICTED], int)  # counts are ints, as verl's *_samples
    _group(client, "later", "finished")
    _, metrics = buffer.sample(1, "train", 1)
    assert metrics == {}  # nothing evicted: no version metric
