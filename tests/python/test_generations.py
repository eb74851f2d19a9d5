"""Index generations, embedded and remote: a BatchMeta kept across a clear
whose global indexes were handed out again, or whose partition_ids were
edited, never reaches another sample. Every call that takes a BatchMeta
(get_data, put, set_custom_meta, clear_samples) raises StaleSampleError (a
KeyError naming the partition, the index and the generations) and changes
nothing; BatchMeta's own operations keep the generations beside the
indexes."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import seqflow
from remote_cluster import process_cluster  # noqa: F401 (fixture)
from remote_services import client_in_each_mode, client_mode, clusters, make_client  # noqa: F401 (fixtures)
from required import require
from support import wait_until

torch = require("torch")
from tensordict import TensorDict  # noqa: E402


@pytest.fixture
def client(client_in_each_mode):  # noqa: F811
    return client_in_each_mode


def rows(start: int, count: int = 8) -> TensorDict:
    return TensorDict({"x": torch.arange(start, start + count).reshape(count, 1)}, batch_size=count)


def xs(client, meta) -> list[int]:
    return client.get_data(meta, format="numpy")["x"].reshape(-1).tolist()


def state(client, partition: str) -> dict:
    """What the controller and the storage hold for the partition."""
    everything = client.get_meta(["x"], 0, partition, mode="force_fetch")
    return {"indexes": everything.global_indexes, "generations": everything.generations,
            "custom_meta": everything.custom_meta, "x": xs(client, everything) if everything.size else [],
            "stats": client.stats()}


def test_the_issue_reproducer_raises_instead_of_reading_the_new_partition(client):
    client.put(rows(0), partition_id="base")
    meta = client.get_meta(["x"], 8, "base", task_name="t")
    client.clear_partition("base")
    client.put(rows(100), partition_id="new")
    with pytest.raises(seqflow.StaleSampleError) as raised:
        client.get_data(meta)
    assert isinstance(raised.value, KeyError)
    message = str(raised.value)
    assert "partition 'base'" in message and f"global index {meta.global_indexes[0]}" in message
    assert f"generation {meta.generations[0]} in the BatchMeta" in message


def test_reuse_inside_one_partition_refuses_every_call_with_the_stale_meta_and_changes_nothing(client):
    first = client.put(rows(0, 4), partition_id="p")
    client.clear_samples(first)
    second = client.put(rows(10, 4), partition_id="p")
    assert second.global_indexes == first.global_indexes
    assert second.generations != first.generations
    before = state(client, "p")
    stale = first.copy()
    stale.custom_meta = [{"score": 1}] * 4
    for call in (lambda: client.get_data(first),
                 lambda: client.put(TensorDict({"y": torch.ones(4, 1)}, batch_size=4), metadata=first),
                 lambda: client.set_custom_meta(stale),
                 lambda: client.clear_samples(first)):
        with pytest.raises(seqflow.StaleSampleError, match=f"now holds generation {second.generations[0]}"):
            call()
        assert state(client, "p") == before
    assert xs(client, second) == [10, 11, 12, 13]


def test_a_meta_whose_partition_ids_name_another_partition_is_refused(client):
    client.put(rows(0, 4), partition_id="base")
    other = client.put(rows(50, 4), partition_id="other")
    edited = other.copy()
    edited.partition_ids = ["base"] * 4
    with pytest.raises(seqflow.StaleSampleError, match="partition 'base'.*partition 'other'"):
        client.get_data(edited)
    by_hand = seqflow.BatchMeta(other.global_indexes, ["base"] * 4, other.field_schema)  # no generations
    with pytest.raises(seqflow.StaleSampleError, match="generation not known"):
        client.get_data(by_hand)
    assert xs(client, other) == [50, 51, 52, 53]


def test_a_hand_built_meta_without_generations_reads_and_writes_its_own_partition(client):
    put = client.put(rows(0, 3), partition_id="p")
    by_hand = seqflow.BatchMeta(put.global_indexes, ["p"] * 3, put.field_schema, [1, 1, 1])
    assert by_hand.generations is None
    assert xs(client, by_hand) == [0, 1, 2]
    written = client.put(TensorDict({"y": torch.zeros(3, 1)}, batch_size=3), metadata=by_hand)
    assert written.generations == put.generations


def test_checkpoint_round_trip_keeps_metas_valid(client, tmp_path):
    meta = client.put(rows(0, 4), partition_id="p")
    client.save_checkpoint(tmp_path / "ckpt")
    client.clear_partition("p")
    client.put(rows(100, 4), partition_id="q")  # reuses the indexes
    client.load_checkpoint(tmp_path / "ckpt")
    assert xs(client, meta) == [0, 1, 2, 3]
    meta.custom_meta = [{"k": i} for i in range(4)]
    client.set_custom_meta(meta)
    fresh = client.put(rows(200, 2), partition_id="p")
    assert not set(fresh.global_indexes) & set(meta.global_indexes)


def test_batch_meta_operations_keep_generations_beside_the_indexes(client):
    a = client.put(rows(0, 6), partition_id="a")
    b = client.put(rows(10, 2), partition_id="b")
    pairs = dict(zip(a.global_indexes + b.global_indexes, a.generations + b.generations))

    def aligned(meta):
        assert meta.generations is not None and len(meta.generations) == meta.size
        assert all(pairs[i] == g for i, g in zip(meta.global_indexes, meta.generations))

    for part in a.chunk(4):
        aligned(part)
    aligned(a.select_samples([5, 0, 3]))
    aligned(a[1:4])
    aligned(a.select_fields(["x"]))
    joined = seqflow.BatchMeta.concat([a, b])
    aligned(joined)
    assert xs(client, joined) == [0, 1, 2, 3, 4, 5, 10, 11]
    aligned(a.union(a.select_fields(["x"])))
    reordered = a.copy()
    reordered.reorder([5, 4, 3, 2, 1, 0])
    aligned(reordered)
    aligned(pickle.loads(pickle.dumps(a)))
    parts = joined.chunk_by_partition()
    for part in parts:
        aligned(part)
    mixed = seqflow.BatchMeta.concat([a, seqflow.BatchMeta(b.global_indexes, ["b", "b"], b.field_schema, [1, 1])])
    assert mixed.generations == a.generations + [0, 0]  # the hand-built part: not known
    assert xs(client, mixed) == [0, 1, 2, 3, 4, 5, 10, 11]
    with pytest.raises(ValueError, match="generations do not match"):
        stale = a.copy()
        stale.generations = [g + 1 for g in a.generations]
        a.union(stale)


def test_generations_are_checked_on_construction():
    with pytest.raises(ValueError, match="generations has 1"):
        seqflow.BatchMeta([1, 2], ["p", "p"], generations=[3])
    with pytest.raises(TypeError, match=r"generations\[0\]"):
        seqflow.BatchMeta([1], ["p"], generations=[-1])
    assert seqflow.BatchMeta([1], ["p"], generations=[np.uint64(2 ** 63)]).generations == [2 ** 63]


def test_the_compat_namespace_exports_the_error():
    from seqflow.compat import transfer_queue

    assert transfer_queue.StaleSampleError is seqflow.StaleSampleError
    assert issubclass(seqflow.StaleSampleError, KeyError)


def test_a_controller_restarted_without_checkpoint_never_serves_old_unit_data(process_cluster):  # noqa: F811
    cluster = process_cluster(2)
    client = cluster.client(timeout=20.0)
    old = client.put({"x": np.arange(8).reshape(8, 1), "y": np.arange(8).reshape(8, 1) + 1000}, partition_id="p")
    cluster.kill_controller()
    cluster.restart_controller()
    fresh_client = cluster.client(timeout=20.0)  # waits until both units registered again
    new = fresh_client.put({"x": np.arange(100, 104).reshape(4, 1)}, partition_id="p")
    assert new.global_indexes == old.global_indexes[:4]
    assert xs(fresh_client, new) == [100, 101, 102, 103]
    with pytest.raises(KeyError):  # the old sample's other field is not the new sample's
        fresh_client.get_data(new, fields=["y"])
    for reader in (fresh_client, client):  # the client from before the restart too
        with pytest.raises(seqflow.StaleSampleError):
            reader.get_data(old)
        with pytest.raises(seqflow.StaleSampleError):
            reader.get_data(seqflow.BatchMeta(old.global_indexes[4:], ["p"] * 4, old.field_schema))
    # The units dropped what they held from before.
    wait_until(lambda: fresh_client.stats()["samples"] == 4, 10, "the units hold only the 4 new samples")
