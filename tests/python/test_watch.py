"""seqflow.Client.watch / awatch: a partition's changes pushed by the
controller, embedded and against real `seqflow serve` processes: a status
change reaches a waiting watcher, filters run in the controller, the async
iterator, the end at close and at the timeout, bad arguments named."""

from __future__ import annotations

import asyncio
import threading

import pytest

import seqflow
from seqflow._watch import Watch
from seqflow.compat import verl_replay_buffer
from seqflow.compat.verl import ReplayBufferAsync

from remote_cluster import process_cluster  # noqa: F401 (fixture)
from support import wait_until

DEADLINE = 30.0  # seconds: what a waiting step may take on a loaded machine


@pytest.fixture(params=["embedded", "remote"])
def client(request, process_cluster):  # noqa: F811 (fixture)
    if request.param == "embedded":
        made = seqflow.Client()
        yield made
        made.close()
    else:
        yield process_cluster(1).client(timeout=DEADLINE)


def test_a_status_change_reaches_a_waiting_watcher(client):
    client.kv_put("u1", "train", tag={"status": "running"})
    changes = client.watch("train", tag_field="status", timeout=DEADLINE)
    seen = []
    waiting = threading.Thread(target=lambda: seen.append(next(changes)))
    waiting.start()
    client.kv_put("u1_0", "train", tag={"reward": 1.0})  # no status: filtered out in the controller
    client.kv_put("u1", "train", tag={"status": "finished"})
    waiting.join(DEADLINE)
    assert not waiting.is_alive(), "the change did not reach the watcher"
    [change] = seen
    assert (change.kind, change.key, change.tag) == ("tagged", "u1", {"status": "finished"})
    assert change.global_index == client.kv_meta("u1", "train").global_indexes[0]


def test_changes_come_oldest_first_filtered_by_key_prefix(client):
    changes = client.watch("train", key_prefix="a", timeout=DEADLINE)
    client.kv_batch_put(["a1", "b1", "a2"], "train", tags=[{"n": 1}, {"n": 2}, {"n": 3}])
    client.kv_clear(["a1"], "train")
    got = [next(changes) for _ in range(3)]
    assert [(change.kind, change.key) for change in got] == [("inserted", "a1"), ("inserted", "a2"), ("cleared", "a1")]
    assert got[1].tag == {"n": 3}


def test_the_async_iterator_yields_the_same_changes(client):
    async def first_change():
        changes = client.awatch("train", tag_field="status", timeout=DEADLINE)
        client.kv_put("u", "train", tag={"status": "finished"})
        return await changes.__anext__()

    change = asyncio.run(first_change())
    assert (change.kind, change.key, change.tag) == ("inserted", "u", {"status": "finished"})


def test_the_iterator_ends_at_its_timeout_and_when_the_client_closes(client):
    assert list(client.watch("idle", timeout=0.2)) == []
    config = client.remote_config
    watching = seqflow.Client.remote(config.address, timeout=DEADLINE) if config is not None else seqflow.Client()
    changes = watching.watch("idle")
    seen = []
    draining = threading.Thread(target=lambda: seen.extend(changes))
    draining.start()
    watching.close()
    draining.join(DEADLINE)
    assert not draining.is_alive(), "the iterator outlived its client"
    assert seen == []


@pytest.mark.parametrize("arguments, error, named", [
    ({"partition_id": ""}, ValueError, "partition_id"),
    ({"key_prefix": 5}, TypeError, "key_prefix"),
    ({"tag_field": "a\0b"}, ValueError, "tag_field"),
    ({"timeout": -1.0}, ValueError, "timeout"),
    ({"max_changes": 0}, ValueError, "max_changes must be >= 1, got 0"),
    ({"max_changes": 10**6}, ValueError, "max_changes must be <= 65536"),
])
def test_bad_arguments_are_refused_by_name(client, arguments, error, named):
    call = {"partition_id": "train", **arguments}
    with pytest.raises(error, match=named):
        client.watch(**call)
    with pytest.raises(error, match=named):
        client.awatch(**call)


def test_the_verl_drop_in_waits_on_a_watch_between_idle_passes(client, monkeypatch):
    waits = []

    class RecordingWatch(Watch):
        def next_changes(self, longest=1.0):
            waits.append(longest)
            return super().next_changes(longest)

    monkeypatch.setattr(verl_replay_buffer, "Watch", RecordingWatch)
    client.kv_put("u", "train", tag={"is_prompt": True, "status": "running", "global_steps": 0})
    client.kv_put("u_0_0", "train", tag={"reward": 1.0})
    buffer = ReplayBufferAsync("async", {}, None, "drop", {}, poll_interval=30.0, client=client)
    result = []
    waiting = threading.Thread(target=lambda: result.append(buffer.wait_for_sampleable(0, "train", 1)))
    waiting.start()
    wait_until(lambda: waits, DEADLINE, "an idle pass waiting on the watch")
    client.kv_put("u", "train", tag={"status": "finished"})
    waiting.join(DEADLINE)
    assert not waiting.is_alive(), "the finished group did not end the wait"
    assert result[0][0] == {"u"}
    assert set(waits) == {30.0}, "the drop-in waited for a change up to poll_interval"
