"""Client.kv_meta and Client.kv_keys: one controller call each, as the compat
layer's kv_retrieve_meta / kv_retrieve_keys need (TransferQueue's semantics).
Embedded and remote mode run the same tests."""

from __future__ import annotations

import numpy as np
import pytest

from remote_services import client_in_each_mode, client_mode, clusters, make_client  # noqa: F401 (fixtures)


@pytest.fixture
def client(client_in_each_mode):  # noqa: F811
    return client_in_each_mode


def test_kv_meta_missing_keys_error_skip_or_create(client):
    client.kv_batch_put(["a", "b", "c"], "p", fields={"x": np.arange(3)})
    meta = client.kv_meta(["c", "a"], "p")
    assert list(meta.global_indexes) == list(client.kv_meta(["c"], "p").global_indexes) + \
        list(client.kv_meta(["a"], "p").global_indexes)
    with pytest.raises(KeyError, match="nope"):
        client.kv_meta(["a", "nope"], "p")
    skipped = client.kv_meta(["nope", "b", "zzz", "a"], "p", missing="skip")
    assert list(skipped.global_indexes) == list(client.kv_meta(["b", "a"], "p").global_indexes)
    assert client.kv_meta(["a"], "gone", missing="skip").size == 0
    assert "gone" not in client.get_partition_list()
    created = client.kv_meta(["a", "d"], "p", create=True)
    assert created.size == 2 and "d" in client.kv_list("p")["p"]
    assert client.kv_meta(["k"], "fresh", create=True).size == 1
    assert "fresh" in client.get_partition_list()
    with pytest.raises(ValueError, match="missing"):
        client.kv_meta(["a"], "p", missing="ignore")


def test_kv_keys_maps_global_indexes_back_to_keys(client):
    client.kv_batch_put(["a", "b", "c"], "p", fields={"x": np.arange(3)})
    indexes = [int(i) for i in client.kv_meta(["c", "a", "b"], "p").global_indexes]
    assert client.kv_keys(indexes, "p") == ["c", "a", "b"]
    assert client.kv_keys(indexes[0], "p") == ["c"]
    assert client.kv_keys([], "p") == []
    put = client.put({"x": np.arange(1)}, partition_id="p")  # a sample without a key
    with pytest.raises(KeyError, match=str(put.global_indexes[0])):
        client.kv_keys(indexes + [int(put.global_indexes[0])], "p")
    with pytest.raises(KeyError, match="123456"):
        client.kv_keys([123456], "p")
    with pytest.raises(KeyError, match="gone"):
        client.kv_keys([indexes[0]], "gone")
    with pytest.raises(ValueError, match="global_indexes\\[1\\]"):
        client.kv_keys([indexes[0], "b"], "p")
    client.kv_clear(["a"], "p")
    with pytest.raises(KeyError):
        client.kv_keys([indexes[1]], "p")
