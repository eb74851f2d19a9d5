"""The seqflow client through its Python API: every call (sync and async),
every kind of data in and out, zero-copy reads, copying puts, atomic custom
metadata, checkpoints, and bad input that raises and changes nothing. Every
test that takes `client` or `make_client` runs twice: on an embedded client
and on a remote client of in-process services (remote_services.py). Real
clients, real threads; no mocks."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import re
import shutil
import time
import weakref

import numpy as np
import pytest

import seqflow
from background import Background
from remote_services import client_in_each_mode, client_mode, clusters, make_client  # noqa: F401 (fixtures)
from required import require
from seqflow import BatchMeta, Client

torch = require("torch")
tensordict = require("tensordict")
NonTensorStack, TensorDict = tensordict.NonTensorStack, tensordict.TensorDict


def as_list(value):
    """A list of a NonTensorStack (tensordict) or of a plain list."""
    return value.tolist() if hasattr(value, "tolist") else list(value)


@pytest.fixture
def client(client_in_each_mode):  # noqa: F811
    return client_in_each_mode


@pytest.fixture
def default_client(client_mode, clusters):  # noqa: F811
    """seqflow.init()'s default client: embedded, or remote through controller.address."""
    seqflow.close()
    config = None if client_mode == "embedded" else {"controller": {"address": clusters(2).address}}
    yield seqflow.init(config)
    seqflow.close()


def snapshot(c: Client):
    """What a failed call must not change."""
    parts = sorted(c.get_partition_list())
    produced = {p: [a.tolist() for a in c.get_production_status([], p)] for p in parts}
    return parts, produced, c.stats(), c.kv_list()


# ---- data in and out -----------------------------------------------------------

def test_dense_fields_round_trip_in_every_format(client):
    data = {
        "f32": np.arange(12, dtype=np.float32).reshape(4, 3),
        "i64": torch.arange(4),
        "bf16": torch.tensor([[1.5, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]], dtype=torch.bfloat16),
        "flag": np.array([True, False, True, True]),
        "score": [0.5, 1.5, 2.5, 3.5],
    }
    meta = client.put(data, partition_id="p")
    assert meta.size == 4 and meta.is_ready
    assert meta.field_schema["bf16"]["dtype"] == "bfloat16"
    out = client.get_data(meta, format="tensordict")
    assert isinstance(out, TensorDict) and out.batch_size == torch.Size([4])
    assert torch.equal(out["bf16"], data["bf16"])
    assert torch.equal(out["i64"], data["i64"])
    np.testing.assert_array_equal(out["f32"].numpy(), data["f32"])
    assert out["flag"].dtype == torch.bool
    np.testing.assert_array_equal(out["score"].numpy(), np.array(data["score"]))

    as_numpy = client.get_data(meta.select_fields(["f32", "flag", "score"]), format="numpy")
    assert isinstance(as_numpy, dict)
    np.testing.assert_array_equal(as_numpy["f32"], data["f32"])
    with pytest.raises(ValueError, match="bfloat16"):
        client.get_data(meta.select_fields(["bf16"]), format="numpy")
    as_torch = client.get_data(meta, format="torch")
    assert isinstance(as_torch, dict) and torch.equal(as_torch["i64"], data["i64"])


def test_variable_length_fields_round_trip(client):
    lists = [torch.arange(n, dtype=torch.int32) for n in (3, 1, 4)]
    jagged = torch.nested.nested_tensor_from_jagged(torch.arange(14.).reshape(7, 2), torch.tensor([0, 2, 3, 7]))
    meta = client.put({"ids": lists, "jag": jagged, "arrays": [np.arange(n) for n in (2, 5, 1)]}, partition_id="p")
    assert meta.field_schema["ids"]["is_nested"] and meta.field_schema["ids"]["shape"] == (-1,)
    out = client.get_data(meta, format="torch")
    assert out["ids"].is_nested
    for got, want in zip(out["ids"].unbind(), lists):
        assert torch.equal(got, want)
    for got, want in zip(out["jag"].unbind(), jagged.unbind()):
        assert torch.equal(got, want)
    as_numpy = client.get_data(meta, format="numpy")
    for got, n in zip(as_numpy["arrays"], (2, 5, 1)):
        np.testing.assert_array_equal(got, np.arange(n))


def test_strings_objects_and_tensordict_input(client):
    objects = [{"a": 1}, None, (1, 2), b"raw"]
    td = TensorDict({"x": torch.ones(4, 2)}, batch_size=[4])
    td.set("text", NonTensorStack("alpha", "β", "", "gamma"))
    meta = client.put(td, partition_id="p")
    client.put({"obj": objects}, metadata=meta)
    full = client.get_meta(["x", "text", "obj"], 4, "p", mode="force_fetch")
    assert full.field_schema["text"]["is_non_tensor"] and full.field_schema["obj"]["is_non_tensor"]
    out = client.get_data(full)
    assert out["text"].tolist() == ["alpha", "β", "", "gamma"]
    stored = [{"a": 1}, None, [1, 2], b"raw"]  # a tuple reads back as a list, as in TransferQueue
    assert out["obj"].tolist() == stored
    assert client.get_data(full, format="numpy")["obj"] == stored


def test_get_is_zero_copy_and_survives_clear(client, client_mode):
    source = np.random.default_rng(0).random((64, 128))
    meta = client.put({"x": source}, partition_id="p")
    first = client.get_data(meta, format="numpy", copy=False)["x"]
    second = client.get_data(meta, format="numpy", copy=False)["x"]
    # Embedded: views of the stored bytes. Remote: each get is a transfer of
    # its own, read in place from the bytes received (no view of the store).
    assert np.shares_memory(first, second) == (client_mode == "embedded")
    assert not np.shares_memory(first, source)
    assert not first.flags.writeable  # stored (or received) bytes cannot be edited through numpy
    np.testing.assert_array_equal(first, source)
    tensor = client.get_data(meta, format="torch", copy=False)["x"]
    assert np.shares_memory(tensor.numpy(), first) == (client_mode == "embedded")
    client.clear_partition("p")
    np.testing.assert_array_equal(first, source)  # the view keeps the buffer alive
    assert client.stats()["samples"] == 0
    # A copy, the default, is private.
    meta = client.put({"x": source}, partition_id="p")
    copied = client.get_data(meta, format="numpy")["x"]
    assert copied.flags.writeable
    assert not np.shares_memory(copied, client.get_data(meta, format="numpy", copy=False)["x"])


def test_a_sub_batch_in_order_is_still_a_view_and_out_of_order_is_gathered(client, client_mode):
    meta = client.put({"x": np.arange(10)}, partition_id="p")
    whole = client.get_data(meta, format="numpy", copy=False)["x"]
    middle = client.get_data(meta.select_samples([2, 3, 4]), format="numpy", copy=False)["x"]
    # Remote: every get is a transfer of its own, so no two gets share memory.
    assert np.shares_memory(whole, middle) == (client_mode == "embedded")
    np.testing.assert_array_equal(middle, [2, 3, 4])
    shuffled = client.get_data(meta.select_samples([4, 2, 3]), format="numpy", copy=False)["x"]
    assert not np.shares_memory(whole, shuffled)
    np.testing.assert_array_equal(shuffled, [4, 2, 3])


def test_put_copies_the_callers_data(client):
    source = np.arange(6, dtype=np.float64)
    tensor = torch.arange(6)
    ragged = [np.arange(3), np.arange(2)]
    meta = client.put({"a": source, "t": tensor}, partition_id="p")
    meta2 = client.put({"r": ragged}, partition_id="q")
    source[:] = -1
    tensor[:] = -1
    ragged[0][:] = -1
    out = client.get_data(meta, format="numpy")
    np.testing.assert_array_equal(out["a"], np.arange(6))
    np.testing.assert_array_equal(out["t"], np.arange(6))
    np.testing.assert_array_equal(client.get_data(meta2, format="numpy")["r"][0], np.arange(3))


def test_a_large_put_stores_one_copy_and_keeps_no_reference_to_the_callers_array(client):
    """What put's speed rests on, without timing it (bench/ measures it): the
    bytes are stored once, and the caller's array is not held after put."""
    source = np.random.default_rng(1).random((256, 16384)).astype(np.float32)  # 16 MiB
    expected = source.copy()
    alive = weakref.ref(source)
    meta = client.put({"x": source}, partition_id="p")
    stats = client.stats()
    assert (stats["samples"], stats["bytes"]) == (256, source.nbytes)
    assert stats["overhead_bytes"] > 0
    del source
    gc.collect()
    assert alive() is None
    np.testing.assert_array_equal(client.get_data(meta, format="numpy")["x"], expected)


# ---- metadata, custom metadata, modes ---------------------------------------------

def test_custom_meta_is_visible_with_the_data(client):
    errors = []

    def producer():
        for i in range(200):
            client.put({"x": np.full(2, i)}, partition_id="p",
                       custom_meta=[{"total_lengths": int(i), "tag": "a"}, {"total_lengths": int(i), "tag": "b"}])

    producing = Background(producer)
    seen = 0
    deadline = time.monotonic() + 120
    while seen < 400:
        if producing.done():
            producing.finish(0)  # re-raises a failed put at once
        assert time.monotonic() < deadline, f"saw {seen} of 400 samples"
        meta = client.get_meta(["x"], 2, "p", task_name="t", polling=True) if client.get_partition_list() else None
        if meta is None or meta.size == 0:
            continue
        values = client.get_data(meta, format="numpy")["x"]
        for value, custom in zip(values, meta.custom_meta):
            if custom.get("total_lengths") != int(value):
                errors.append((int(value), custom))
        seen += meta.size
    producing.finish(120)
    assert seen == 400 and not errors


def test_set_custom_meta_and_put_with_meta_custom_meta(client):
    meta = client.put({"x": np.arange(3)}, partition_id="p")
    meta.update_custom_meta([{"score": 1}, {"score": 2}, {"score": 3}])
    client.set_custom_meta(meta)
    again = client.get_meta(["x"], 3, "p", mode="force_fetch")
    assert [m["score"] for m in again.custom_meta] == [1, 2, 3]
    again.update_custom_meta([{"len": 7}] * 3)
    after = client.put({"y": np.arange(3)}, metadata=again)
    assert after.custom_meta[0] == {"score": 1, "len": 7}
    assert set(after.field_names) == {"x", "y"}


def test_get_meta_modes_polling_and_timeout(client):
    inserted = client.get_meta(["x"], 3, "p", mode="insert")
    assert inserted.size == 3 and inserted.field_names == []
    assert client.get_meta(["x"], 1, "p", task_name="t", polling=True).size == 0
    with pytest.raises(TimeoutError, match="timed out"):
        client.get_meta(["x"], 1, "p", task_name="t", timeout=0.05)
    client.put({"x": np.arange(3)}, metadata=inserted)
    assert client.get_meta(["x"], 3, "p", mode="force_fetch").size == 3
    fetched = client.get_meta(["x"], 2, "p", task_name="t")
    assert fetched.size == 2
    assert client.get_meta(["x"], 3, "p", mode="force_fetch").size == 3  # consumes nothing


def test_blocking_fetch_waits_for_a_put_from_another_thread(client):
    client.put({"x": np.arange(1)}, partition_id="p")
    client.get_meta(["x"], 1, "p", task_name="t")
    assert client.get_meta(["x"], 2, "p", task_name="t", polling=True).size == 0  # nothing ready before the put
    late_put = Background(lambda: client.put({"x": np.arange(2)}, partition_id="p"), delay=0.2)
    meta = client.get_meta(["x"], 2, "p", task_name="t", timeout=30)
    put = late_put.finish(30)
    # What the fetch returned are the samples put from the other thread: it waited for them.
    assert sorted(meta.global_indexes) == sorted(put.global_indexes)


def test_status_queries_and_reset(client):
    meta = client.put({"x": np.arange(4)}, partition_id="p")
    client.put({"y": np.arange(2)}, metadata=meta.select_samples([0, 1]))
    assert client.get_partition_list() == ["p"]
    indexes, produced = client.get_production_status(["x", "y"], "p")
    assert indexes.tolist() == sorted(meta.global_indexes) and produced.tolist() == [True, True, False, False]
    assert client.check_production_status(["x"], "p") and not client.check_production_status(["x", "y"], "p")
    # Per field, TransferQueue's layout: (samples, fields).
    _, per_field = client.get_production_status(["y", "x"], "p", per_field=True)
    assert per_field.dtype == np.bool_ and per_field.tolist() == [[True, True]] * 2 + [[False, True]] * 2
    client.get_meta(["x"], 4, "p", task_name="t")
    indexes, consumed = client.get_consumption_status("t", "p")
    assert indexes.dtype == np.int64 and consumed.dtype == np.bool_ and consumed.shape == (4,)
    assert consumed.all() and client.check_consumption_status("t", "p")
    assert not client.check_consumption_status("other", "p")
    assert client.reset_consumption("p", "t") is True
    assert not client.check_consumption_status("t", "p")
    assert client.get_meta(["x"], 4, "p", task_name="t").size == 4
    assert client.reset_consumption("p") is True
    assert client.get_meta(["x"], 4, "p", task_name="t").size == 4
    with pytest.raises(ValueError, match="per_field"):
        client.get_production_status(["x"], "p", per_field=1)


def test_partition_that_does_not_exist_is_empty_not_an_error(client):
    """As in TransferQueue: programs poll, check, clear and reset partitions
    before their first put and after their clear."""
    meta = client.put({"x": np.arange(3)}, partition_id="gone")
    client.kv_put("k", "gone", tag={"a": 1})
    client.clear_partition("gone")
    client.put({"x": np.arange(2)}, partition_id="kept")
    before = snapshot(client)
    for partition in ("gone", "never"):
        assert client.get_meta(["x"], 1, partition, task_name="t", polling=True).size == 0
        forced = client.get_meta(["x"], 1, partition, mode="force_fetch")
        assert forced.size == 0
        assert client.get_consumption_status("t", partition) == (None, None)
        assert client.get_production_status(["x"], partition) == (None, None)
        assert client.get_production_status(["x"], partition, per_field=True) == (None, None)
        assert client.check_consumption_status("t", partition) is False
        assert client.check_production_status(["x"], partition) is False
        assert client.kv_list(partition) == {}
        client.kv_clear(["k"], partition)
        client.clear_partition(partition)
        assert client.reset_consumption(partition) is True
        assert client.reset_consumption(partition, "t") is True
    client.clear_samples(meta)  # its samples are gone with their partition
    assert client.get_partition_list() == ["kept"]
    assert snapshot(client) == before


def test_blocking_fetch_waits_for_its_partition_to_be_created_and_filled(client):
    fetcher = Background(client.get_meta, ["x"], 2, "later", task_name="t", timeout=20)
    time.sleep(0.2)
    client.get_meta(["x"], 1, "later", mode="insert")  # made, nothing produced yet
    time.sleep(0.1)
    put = client.put({"x": np.arange(2)}, partition_id="later")
    got = fetcher.finish(30)
    assert sorted(got.global_indexes) == sorted(put.global_indexes)
    with pytest.raises(TimeoutError, match="'never'"):
        client.get_meta(["x"], 1, "never", task_name="t", timeout=0.1)


def test_force_fetch_returns_every_sample_produced_or_not_and_consumes_nothing(client):
    first = client.put({"x": np.arange(2)}, partition_id="p")
    client.put({"y": np.arange(2) * 10}, metadata=first)
    client.put({"x": np.arange(1)}, partition_id="p")
    consumed = client.get_meta(["x"], 1, "p", task_name="t")
    forced = client.get_meta(["x", "y"], 0, "p", mode="force_fetch")
    assert forced.size == 3 and not forced.is_ready
    assert forced.field_names == ["x", "y"]
    assert [forced.select_samples([i]).is_ready for i in range(3)] == [True, True, False]
    assert client.get_meta(["x"], 3, "p", mode="force_fetch", task_name="t").size == 3
    _, flags = client.get_consumption_status("t", "p")
    assert int(flags.sum()) == consumed.size == 1  # force_fetch consumed nothing
    only_y = client.get_meta(["y"], 0, "p", mode="force_fetch").select_samples([0, 1])
    assert client.get_data(only_y, format="numpy")["y"].tolist() == [0, 10]


def test_partitions_are_listed_oldest_first(client):
    """As in TransferQueue: programs clear all but the newest N partitions."""
    for step in (9, 10, 11):
        client.put({"x": np.arange(1)}, partition_id=f"train@global_step_{step}")
    client.clear_partition("train@global_step_9")
    client.put({"x": np.arange(1)}, partition_id="train@global_step_9")  # made again: the newest
    assert client.get_partition_list() == [f"train@global_step_{s}" for s in (10, 11, 9)]


def test_clear_samples_and_partition_release_storage(client):
    meta = client.put({"x": np.arange(4)}, partition_id="p")
    client.put({"x": np.arange(2)}, partition_id="q")
    client.clear_samples(meta.select_samples([0, 1]))
    assert client.stats()["samples"] == 4
    assert client.get_meta(["x"], 4, "p", mode="force_fetch").size == 2
    client.clear_partition("p")
    assert client.get_partition_list() == ["q"]
    assert client.stats()["samples"] == 2


# ---- key-value API --------------------------------------------------------------

def test_failed_kv_put_leaves_tags_as_they_were(client):
    client.kv_put("k", "kv", {"x": torch.tensor([1, 2, 3])}, tag={"s": 1})
    with pytest.raises(ValueError, match="dtype conflict"):
        client.kv_put("k", "kv", {"x": torch.tensor([1.5, 2.5, 3.5])}, tag={"s": 2, "new": True})
    with pytest.raises(ValueError, match="dtype conflict"):
        client.kv_batch_put(["k", "k2"], "kv", {"x": torch.tensor([[1.5, 2.5, 3.5], [1.0, 1.0, 1.0]])},
                            tags=[{"s": 3}, {"s": 4}])
    with pytest.raises(ValueError, match=r"tags\[1\] \(key 'k2'\).*total_lengths"):
        client.kv_batch_put(["k", "k2"], "kv", {"x": torch.tensor([[4, 5, 6], [7, 8, 9]])},
                            tags=[{"s": 5}, {"total_lengths": -1}])
    assert client.kv_list("kv") == {"kv": {"k": {"s": 1}}}
    assert client.kv_batch_get("k", "kv")["x"].tolist() == [[1, 2, 3]]
    client.kv_put("k", "kv", {"x": torch.tensor([4, 5, 6])}, tag={"new": True})
    assert client.kv_list("kv") == {"kv": {"k": {"s": 1, "new": True}}}


def test_kv_calls(client):
    one = client.kv_put("k1", "kv", {"x": torch.tensor([1, 2, 3]), "text": "hello"}, tag={"score": 0.5})
    assert one.keys == ["k1"] and set(one.fields) == {"x", "text"} and one.tags[0]["score"] == 0.5
    batch = client.kv_batch_put(["k2", "k3"], "kv", {"x": torch.tensor([[4, 5, 6], [7, 8, 9]]), "text": ["a", "b"]},
                                tags=[{"score": 1.0}, {"score": 2.0}])
    assert batch.size == 2
    data = client.kv_batch_get(["k3", "k1"], "kv")
    assert data["x"].tolist() == [[7, 8, 9], [1, 2, 3]] and as_list(data["text"]) == ["b", "hello"]
    only_x = client.kv_batch_get("k2", "kv", select_fields="x")
    assert list(only_x.keys()) == ["x"]
    assert client.kv_batch_get_by_meta(batch)["x"].shape == (2, 3)
    assert client.kv_list() == {"kv": {"k1": {"score": 0.5}, "k2": {"score": 1.0}, "k3": {"score": 2.0}}}
    client.kv_put("k1", "kv", tag={"score": 0.75})
    assert client.kv_list("kv")["kv"]["k1"] == {"score": 0.75}
    with pytest.raises(KeyError, match="nope"):
        client.kv_batch_get(["k1", "nope"], "kv")
    client.kv_clear(["k1", "k2"], "kv")
    assert list(client.kv_list("kv")["kv"]) == ["k3"]
    assert client.stats()["samples"] == 1
    client.kv_clear(["k1", "k3"], "kv")  # k1 is gone already: skipped, as in TransferQueue
    assert client.stats()["samples"] == 0
    # Partitions stay listed once their keys are gone, and with no keys at all.
    client.put({"x": np.arange(2)}, partition_id="plain")
    assert client.kv_list("kv") == {"kv": {}}
    assert client.kv_list() == {"kv": {}, "plain": {}}
    assert client.kv_list("never") == {}
    assert list(client.kv_list()) == client.get_partition_list() == ["kv", "plain"]
    # Keys in the order they were made, as in TransferQueue.
    client.kv_batch_put(["zz", "aa", "mm"], "kv", tags=[{"i": 0}, {"i": 1}, {"i": 2}])
    assert list(client.kv_list("kv")["kv"].items()) == [("zz", {"i": 0}), ("aa", {"i": 1}), ("mm", {"i": 2})]


# ---- checkpoints -------------------------------------------------------------------

def test_checkpoint_round_trip(client, make_client, tmp_path):  # noqa: F811
    client.put({"x": np.arange(6), "s": list("abcdef")}, partition_id="p",
               custom_meta=[{"total_lengths": i} for i in range(6)])
    client.kv_put("key", "kv", {"v": np.arange(3)}, tag={"t": 1})
    client.get_meta(["x"], 2, "p", task_name="t")
    client.save_checkpoint(tmp_path / "ckpt")

    other = make_client()  # another store (remote: another cluster)
    other.put({"z": np.arange(2)}, partition_id="gone")
    other.load_checkpoint(tmp_path / "ckpt")
    assert sorted(other.get_partition_list()) == ["kv", "p"]
    rest = other.get_meta(["x", "s"], 4, "p", task_name="t")
    assert rest.size == 4
    data = other.get_data(rest, format="numpy")
    assert [int(m["total_lengths"]) for m in rest.custom_meta] == data["x"].tolist()
    assert data["s"] == [chr(ord("a") + int(v)) for v in data["x"]]
    assert other.kv_batch_get("key", "kv", format="numpy")["v"].tolist() == [[0, 1, 2]]


def test_checkpoint_keeps_the_users_metadata(client, tmp_path):
    client.put({"x": np.arange(2)}, partition_id="p")
    assert client.save_checkpoint(tmp_path / "c", metadata={"step": 42, "loss": 0.5, "tags": ["a"]}) is None
    with open(tmp_path / "c" / "metadata.json") as f:
        assert json.load(f) == {"storage_saved": True, "user_metadata": {"step": 42, "loss": 0.5, "tags": ["a"]}}
    client.clear_partition("p")
    assert client.load_checkpoint(tmp_path / "c") == {"step": 42, "loss": 0.5, "tags": ["a"]}
    assert client.get_partition_list() == ["p"]
    client.save_checkpoint(tmp_path / "c", include_storage=False)  # ignored: the data is always saved
    with open(tmp_path / "c" / "metadata.json") as f:
        assert json.load(f) == {"storage_saved": True, "user_metadata": {}}
    assert client.load_checkpoint(tmp_path / "c") == {}
    assert client.check_production_status(["x"], "p")
    for bad, pattern in [({"x": object()}, 'metadata["x"]'), ([1, 2], "metadata must be a dict")]:
        with pytest.raises(ValueError, match=re.escape(pattern)):
            client.save_checkpoint(tmp_path / "d", metadata=bad)
        assert not (tmp_path / "d").exists()
    with pytest.raises(ValueError, match="include_storage"):
        client.save_checkpoint(tmp_path / "d", include_storage="no")


def test_missing_or_corrupt_checkpoint_leaves_state_unchanged(client, make_client, tmp_path):  # noqa: F811
    client.put({"x": np.arange(3)}, partition_id="p")
    before = snapshot(client)
    with pytest.raises(FileNotFoundError, match="missing"):
        client.load_checkpoint(tmp_path / "missing")
    (tmp_path / "not-a-checkpoint").mkdir()
    with pytest.raises(FileNotFoundError, match="metadata.json"):
        client.load_checkpoint(tmp_path / "not-a-checkpoint")
    assert snapshot(client) == before

    source = make_client()
    source.put({"y": np.arange(5)}, partition_id="q")
    source.save_checkpoint(tmp_path / "good")
    for name, spoil in [
        ("truncated", lambda d: os.truncate(d / "storage.ckpt", 16)),
        ("no-controller", lambda d: os.remove(d / "controller.ckpt")),
        ("garbage", lambda d: (d / "controller.ckpt").write_bytes(b"x" * (d / "controller.ckpt").stat().st_size)),
    ]:
        broken = tmp_path / name
        shutil.copytree(tmp_path / "good", broken)
        spoil(broken)
        with pytest.raises(ValueError):
            client.load_checkpoint(broken)
        assert snapshot(client) == before, name


def test_files_of_two_saves_never_load_together(client, tmp_path):
    # 100 samples: remote, every unit holds some (blocks of 64 global indexes), so each file differs.
    for name, first, score in [("earlier", 0, 1), ("later", 100, 2)]:
        client.clear_partition("q")
        client.put({"y": np.arange(first, first + 100)}, partition_id="q", custom_meta=[{"score": score}] * 100)
        client.save_checkpoint(tmp_path / name, metadata={"step": score})
    client.clear_partition("q")
    client.put({"x": np.arange(3)}, partition_id="p")
    before = snapshot(client)
    # Each file of the earlier save in turn (remote: storage.ckpt indexes the
    # units' files storage.ckpt.unit<N>), copied over the later one's.
    for file in sorted(p.name for p in (tmp_path / "earlier").iterdir() if p.name != "manifest.json"):
        mixed = tmp_path / f"mixed-{file}"
        shutil.copytree(tmp_path / "later", mixed)
        shutil.copyfile(tmp_path / "earlier" / file, mixed / file)
        with pytest.raises(ValueError, match="mixes saves|corrupt"):
            client.load_checkpoint(mixed)
        assert snapshot(client) == before, file
    assert client.load_checkpoint(tmp_path / "later") == {"step": 2}
    meta = client.get_meta(["y"], 100, "q", task_name="t")
    assert [m["score"] for m in meta.custom_meta] == [2] * 100
    assert sorted(client.get_data(meta, format="numpy")["y"].tolist()) == list(range(100, 200))


# ---- bad input ----------------------------------------------------------------------

def nested_dict(depth: int) -> dict:
    value = {"v": 1}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


def test_custom_meta_may_nest_32_levels_in_every_mode(client):
    deepest = nested_dict(32)
    client.put({"x": np.arange(1)}, partition_id="p", custom_meta=[deepest])
    assert client.get_meta(["x"], 1, "p", task_name="t").custom_meta[0] == deepest


def test_bad_input_raises_clearly_and_changes_nothing(client):
    meta = client.put({"x": np.arange(4, dtype=np.int64)}, partition_id="p")
    holds_itself = []
    holds_itself.append(holds_itself)
    client.kv_put("k", "kv", {"x": np.arange(2)})
    before = snapshot(client)
    cases = [
        (KeyError, "nope", lambda: client.kv_batch_get(["k", "nope"], "kv")),
        (ValueError, "partition_id", lambda: client.get_meta(["x"], 1, "", task_name="t")),
        (KeyError, "missing", lambda: client.get_data(meta, fields=["missing"])),
        (ValueError, "dtype conflict", lambda: client.put({"x": np.zeros(2, dtype=np.float32)}, partition_id="p")),
        (ValueError, "dtype conflict", lambda: client.put({"x": np.zeros(4, dtype=np.float32)}, metadata=meta)),
        (ValueError, "batch_size", lambda: client.get_meta(["x"], 0, "p", task_name="t")),
        (ValueError, "batch_size", lambda: client.get_meta(["x"], -3, "p", task_name="t")),
        (ValueError, "rank", lambda: client.put({"r": [np.zeros(2), np.zeros((2, 2))]}, partition_id="new")),
        (ValueError, "dtype", lambda: client.put({"r": [np.zeros(2), np.zeros(2, np.int32)]}, partition_id="new")),
        (ValueError, "samples", lambda: client.put({"a": np.arange(2), "b": np.arange(3)}, partition_id="new")),
        (ValueError, "custom_meta[1]", lambda: client.put({"x": np.arange(2)}, partition_id="new",
                                                         custom_meta=[{}, {"bad": object()}])),
        (ValueError, 'custom_meta[0]["k"][1]', lambda: client.put({"x": np.arange(1)}, partition_id="new",
                                                                      custom_meta=[{"k": [1, {2}]}])),
        (ValueError, "custom_meta[0] must be a dict", lambda: client.put({"x": np.arange(1)}, partition_id="p",
                                                                        custom_meta=[[1]])),
        (ValueError, "custom_meta[1] (global index", lambda: client.put({"x": np.arange(2)}, partition_id="new",
                                                                       custom_meta=[{}, nested_dict(33)])),
        (ValueError, "nests containers deeper than 32 levels", lambda: client.put(
            {"x": np.arange(1)}, partition_id="new", custom_meta=[nested_dict(40)])),
        (ValueError, "does a container hold itself?", lambda: client.put({"x": np.arange(1)}, partition_id="new",
                                                                        custom_meta=[{"l": holds_itself}])),
        (ValueError, "entries for 4 samples", lambda: client.put({"x": np.arange(4)}, partition_id="p",
                                                                 custom_meta=[{}])),
        (ValueError, "partition_id", lambda: client.put({"x": np.arange(1)})),
        (ValueError, "0-d", lambda: client.put({"x": np.array(3)}, partition_id="new")),
        (ValueError, "empty list", lambda: client.put({"x": []}, partition_id="new")),
        (ValueError, "uint16", lambda: client.put({"x": np.zeros(2, np.uint16)}, partition_id="new")),
        (ValueError, "dtype conflict", lambda: client.kv_batch_put(["k", "fresh"], "kv", {"x": np.zeros(2)})),
        (ValueError, "mode", lambda: client.get_meta(["x"], 1, "p", mode="grab", task_name="t")),
    ]
    for error, pattern, call in cases:
        with pytest.raises(error, match=re.escape(pattern)):
            call()
        assert snapshot(client) == before, pattern


def test_put_against_cleared_samples_raises(client):
    meta = client.put({"x": np.arange(2)}, partition_id="p")
    client.clear_samples(meta)
    with pytest.raises(seqflow.StaleSampleError, match="no longer exists"):
        client.put({"y": np.arange(2)}, metadata=meta)
    assert client.stats()["samples"] == 0


# ---- async and module-level functions ------------------------------------------------

def test_async_calls_do_not_block_the_event_loop(client, tmp_path):
    async def scenario():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        tick_task = asyncio.create_task(ticker())
        placeholder = await client.async_get_meta(["x"], 1, "p", mode="insert")  # the partition exists
        waiting = asyncio.create_task(client.async_get_meta(["x"], 2, "p", task_name="t", timeout=30))
        await asyncio.sleep(0)  # the fetch is under way
        ticks_then = ticks
        while ticks < ticks_then + 5:  # the loop keeps running while get_meta waits (bounded: wait_for below)
            await asyncio.sleep(0.01)
        assert not waiting.done()  # it is still waiting for samples no one has put
        put_meta = await client.async_put({"x": np.arange(2)}, partition_id="p")
        meta = await waiting
        await client.async_clear_samples(placeholder)
        data = await client.async_get_data(meta, format="numpy")
        assert sorted(data["x"].tolist()) == [0, 1] and put_meta.size == 2
        assert await client.async_check_consumption_status("t", "p")
        assert (await client.async_get_consumption_status("t", "p"))[1].all()
        assert await client.async_check_production_status(["x"], "p")
        assert (await client.async_get_production_status(["x"], "p"))[1].all()
        assert await client.async_get_partition_list() == ["p"]
        await client.async_set_custom_meta(meta)
        await client.async_reset_consumption("p")
        await client.async_kv_put("k", "kv", {"v": np.arange(2)})
        await client.async_kv_batch_put(["a"], "kv", {"v": np.arange(2)[None]})
        assert (await client.async_kv_batch_get(["k", "a"], "kv", format="numpy"))["v"].shape == (2, 2)
        assert set((await client.async_kv_list("kv"))["kv"]) == {"k", "a"}
        await client.async_kv_clear("a", "kv")
        await client.async_save_checkpoint(tmp_path / "c")
        await client.async_load_checkpoint(tmp_path / "c")
        await client.async_clear_samples(meta)
        await client.async_clear_partition("kv")
        tick_task.cancel()

    asyncio.run(asyncio.wait_for(scenario(), 120))


def test_module_level_api(default_client, tmp_path):
    assert seqflow.get_client() is default_client
    assert seqflow.init({"controller": {"polling_mode": True}}) is default_client  # config ignored once initialized
    meta = seqflow.put({"x": np.arange(3)}, partition_id="p")
    got = seqflow.get_meta(["x"], 3, "p", task_name="t")
    assert seqflow.get_data(got, format="numpy")["x"].tolist() == meta.global_indexes
    assert seqflow.check_consumption_status("t", "p")
    seqflow.save_checkpoint(tmp_path / "c")
    assert asyncio.run(seqflow.async_get_partition_list()) == ["p"]
    seqflow.close()
    with pytest.raises(RuntimeError, match="init"):
        seqflow.get_client()


@pytest.mark.parametrize("make_sampler", [lambda: "GRPOGroupNSampler", lambda: seqflow.SequentialSampler,
                                          seqflow.RankAwareSampler, lambda: "rank_aware"],
                         ids=["GRPOGroupNSampler", "SequentialSampler", "RankAwareSampler()", "rank_aware"])
def test_init_config_names_the_sampler(make_sampler, client_mode, clusters):  # noqa: F811
    sampler = make_sampler()  # an instance keeps its state: one per test
    sampler_args = {"n_samples_per_prompt": 2} if sampler == "GRPOGroupNSampler" else None
    if client_mode == "embedded":
        config = {"controller": {"sampler": sampler, "polling_mode": True, "sampler_args": sampler_args},
                  "backend": {"SimpleStorage": {"total_storage_size": 4}}}
    else:  # the sampler and the capacity belong to the services; the config names their address
        cluster = clusters(1, controller_args={"sampler": sampler, "sampler_args": sampler_args},
                           storage_args={"max_samples": 4})
        config = {"controller": {"address": cluster.address, "polling_mode": True}}
    c = Client.from_config(config)
    try:
        assert c.polling_mode
        c.put({"x": np.arange(4)}, partition_id="p")
        with pytest.raises(ValueError):
            c.put({"x": np.arange(1)}, partition_id="p")  # capacity 4 samples
        assert c.get_meta(["x"], 2, "p", task_name="t").size == 2
    finally:
        c.close()


def test_omegaconf_config(client_mode, clusters):  # noqa: F811
    omegaconf = require("omegaconf")
    controller = {"sampler": "SequentialSampler", "polling_mode": True}
    if client_mode == "remote":
        controller = {"address": clusters(1).address, "polling_mode": True}
    c = Client.from_config(omegaconf.OmegaConf.create({"controller": controller}))
    try:
        assert c.polling_mode and (c.remote_config is None) == (client_mode == "embedded")
    finally:
        c.close()


def test_unknown_sampler_name_is_rejected(make_client):  # noqa: F811
    with pytest.raises(ValueError):
        make_client("NoSuchSampler")  # remote: serve_controller refuses it
