"""Fetch leases: get_meta(lease=seconds) consumes and leases the samples;
ack keeps them consumed for good, release (or the lease's expiry, when the
consumer died or stalled) serves them again, once. Each test runs on an
embedded client and on a remote client of an in-process cluster."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

import seqflow
from remote_services import client_in_each_mode, client_mode, clusters, make_client  # noqa: F401 (fixtures)


@pytest.fixture
def client(client_in_each_mode):  # noqa: F811
    return client_in_each_mode


def put_values(client, values, partition_id="p"):
    client.put({"x": np.asarray(values, dtype=np.int64)}, partition_id=partition_id)


def xs(client, meta):
    return client.get_data(meta, format="numpy")["x"].tolist()


def fetch_when_back(client, batch_size, deadline_seconds=10.0):
    """A blocking fetch: only an expired lease can answer it."""
    return client.get_meta(["x"], batch_size, "p", task_name="train", timeout=deadline_seconds)


def test_an_acknowledged_batch_is_never_served_again(client):
    put_values(client, [1, 2, 3])
    batch = client.get_meta(["x"], 2, "p", task_name="train", lease=0.2)
    assert xs(client, batch) == [1, 2]
    assert client.ack(batch, "train") == 2
    time.sleep(0.5)  # past the lease
    rest = client.get_meta(["x"], 1, "p", task_name="train", polling=True)
    assert xs(client, rest) == [3]
    assert client.get_meta(["x"], 1, "p", task_name="train", polling=True).size == 0
    assert client.ack(batch, "train") == 0  # once


def test_an_unacknowledged_batch_comes_back_once_when_its_lease_expires(client):
    put_values(client, [1, 2, 3, 4])
    held = client.get_meta(["x"], 2, "p", task_name="train", lease=0.3)  # its consumer dies
    other = client.get_meta(["x"], 1, "p", task_name="train")
    assert xs(client, other) == [3]
    again = fetch_when_back(client, 3)
    assert xs(client, again) == [1, 2, 4]  # the leased two first, in arrival order
    assert client.ack(held, "train") == 0, "a late acknowledgement ends nothing"
    assert client.get_meta(["x"], 1, "p", task_name="train", polling=True).size == 0


def test_release_serves_the_batch_again_at_once(client):
    put_values(client, [5, 6])
    batch = client.get_meta(["x"], 2, "p", task_name="train", lease=3600)
    assert client.get_meta(["x"], 1, "p", task_name="train", polling=True).size == 0
    assert client.release(batch, "train") == 2
    assert xs(client, client.get_meta(["x"], 2, "p", task_name="train", polling=True)) == [5, 6]


def test_a_late_release_leaves_the_next_holders_lease_alone(client):
    put_values(client, [9])
    stalled = client.get_meta(["x"], 1, "p", task_name="train", lease=0.2)
    retaken = fetch_when_back(client, 1)  # served again after the expiry
    assert client.release(retaken, "train") == 0  # it took no lease
    client.reset_consumption("p", "train")
    current = client.get_meta(["x"], 1, "p", task_name="train", lease=3600)
    assert client.release(stalled, "train") == 0, "a stalled consumer's late release ended another's lease"
    assert client.get_meta(["x"], 1, "p", task_name="train", polling=True).size == 0
    assert client.ack(current, "train") == 1


def test_leases_are_per_task(client):
    put_values(client, [1, 2])
    actor = client.get_meta(["x"], 2, "p", task_name="actor", lease=3600)
    ref = client.get_meta(["x"], 2, "p", task_name="ref", lease=3600)
    assert client.ack(actor, "ref") == 0  # the batch names actor's lease, which ref does not hold
    assert client.ack(actor, "actor") == 2
    assert client.release(ref, "ref") == 2
    assert client.get_meta(["x"], 2, "p", task_name="actor", polling=True).size == 0
    assert client.get_meta(["x"], 2, "p", task_name="ref", polling=True).size == 2


def test_async_twins(client):
    put_values(client, [1, 2])

    async def main():
        batch = await client.async_get_meta(["x"], 2, "p", task_name="train", lease=60)
        return await client.async_release(batch, "train"), await client.async_get_meta(
            ["x"], 2, "p", task_name="train", lease=60)

    released, again = asyncio.run(main())
    assert released == 2 and again.size == 2
    assert asyncio.run(client.async_ack(again, "train")) == 2


def test_the_module_level_calls():
    seqflow.init()
    try:
        seqflow.put({"x": np.arange(3)}, partition_id="p")
        batch = seqflow.get_meta(["x"], 3, "p", task_name="train", lease=60)
        assert seqflow.release(batch, "train") == 3
        batch = seqflow.get_meta(["x"], 3, "p", task_name="train", lease=60)
        assert asyncio.run(seqflow.async_ack(batch, "train")) == 3
    finally:
        seqflow.close()


@pytest.mark.parametrize("lease, error, fragment", [
    (0, ValueError, "lease must be a finite number of seconds > 0"),
    (-1.0, ValueError, "lease must be a finite number of seconds > 0"),
    (0.0001, ValueError, "lease must be at least 0.001 seconds, got 0.0001"),
    (8 * 86400.0, ValueError, "lease must be 1 to 604800000 ms (0: no lease), got 691200000"),
    ("1", TypeError, "lease must be a number of seconds, got '1'"),
])
def test_bad_leases_are_named(client, lease, error, fragment):
    put_values(client, [1])
    with pytest.raises(error) as raised:
        client.get_meta(["x"], 1, "p", task_name="train", lease=lease)
    assert fragment in str(raised.value)
    # Nothing was consumed by the refused call.
    assert client.get_meta(["x"], 1, "p", task_name="train", polling=True).size == 1


def test_a_lease_is_for_fetches_only(client):
    with pytest.raises(ValueError, match="lease applies to fetch mode only"):
        client.get_meta(["x"], 1, "p", mode="insert", lease=1.0)
    with pytest.raises(TypeError, match="metadata must be a BatchMeta"):
        client.ack("not a batch", "train")
