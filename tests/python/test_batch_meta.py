"""BatchMeta's operations, and one split rule for data and metadata."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import seqflow
from seqflow import BatchMeta
from seqflow.batch_meta import chunk_sizes
from seqflow.streaming import split_batch


def make_meta(n=7, fields=("a", "b")):
    return BatchMeta(
        np.arange(10, 10 + n),
        ["p"] * n,
        {f: {"dtype": "int64", "shape": (2,), "is_nested": False, "is_non_tensor": False} for f in fields},
        np.ones((n, len(fields)), dtype=bool),
        [{"i": i} for i in range(n)],
        {"source": "test"},
    )


def test_chunk_sizes_rule():
    assert chunk_sizes(7, 3) == [3, 2, 2]
    assert chunk_sizes(6, 4) == [2, 2, 1, 1]
    assert chunk_sizes(2, 4) == [1, 1, 0, 0]
    assert chunk_sizes(0, 2) == [0, 0]
    with pytest.raises(ValueError):
        chunk_sizes(3, 0)


def test_queries_and_selections():
    meta = make_meta()
    assert meta.size == len(meta) == 7 and meta.field_names == ["a", "b"] and meta.is_ready
    part = meta.select_samples([4, 1])
    assert part.global_indexes.tolist() == [14, 11] and part.custom_meta == [{"i": 4}, {"i": 1}]
    only_b = meta.select_fields(["b"])
    assert only_b.field_names == ["b"] and only_b.production_status.shape == (7, 1)
    with pytest.raises(KeyError, match="nope"):
        meta.select_fields(["nope"])
    meta.production_status[3, 1] = False
    assert not meta.is_ready and meta.select_fields("a").is_ready
    assert BatchMeta.empty().size == 0 and BatchMeta.empty().is_empty()


def test_chunk_concat_reorder_union():
    meta = make_meta()
    parts = meta.chunk(3)
    assert [p.size for p in parts] == [3, 2, 2]
    assert BatchMeta.concat(parts) == meta
    assert [p.partition_ids[0] for p in meta.chunk_by_partition()] == ["p"]
    reordered = make_meta().reorder([6, 5, 4, 3, 2, 1, 0])
    assert reordered.global_indexes.tolist() == list(range(16, 9, -1))
    assert reordered.custom_meta[0] == {"i": 6}
    with pytest.raises(ValueError, match="permutation"):
        make_meta().reorder([0, 0, 1, 2, 3, 4, 5])
    left = make_meta(fields=("a",))
    right = make_meta(fields=("c",))
    right.custom_meta = [{"j": 1}] * 7
    both = left.union(right)
    assert both.field_names == ["a", "c"] and both.is_ready and both.custom_meta[2] == {"i": 2, "j": 1}
    with pytest.raises(ValueError, match="same samples"):
        left.union(make_meta(n=3))
    with pytest.raises(ValueError, match="concat"):
        BatchMeta.concat([make_meta(fields=("a",)), make_meta(fields=("b",))])


def test_update_custom_meta_and_pickle():
    meta = make_meta(n=2)
    meta.update_custom_meta([{"x": 1}, {"y": 2}])
    assert meta.get_all_custom_meta() == [{"i": 0, "x": 1}, {"i": 1, "y": 2}]
    with pytest.raises(ValueError, match="2 samples"):
        meta.update_custom_meta([{}])
    with pytest.raises(ValueError, match="dict"):
        meta.update_custom_meta([{}, 3])
    assert pickle.loads(pickle.dumps(meta)) == meta


@pytest.mark.parametrize("n,micro", [(7, 3), (8, 3), (5, 5), (5, 8), (1, 1), (10, 4)])
def test_data_and_meta_split_alike(n, micro):
    """TransferQueue cut 7 rows at micro-batch 3 as data [3, 3, 1] but meta [3, 2, 2]."""
    client = seqflow.Client()
    meta = client.put({"x": np.arange(n) * 10, "s": [str(i) for i in range(n)]}, partition_id="p")
    data = client.get_data(meta, format="numpy")
    parts = split_batch(data, meta, micro_batch_size=micro)
    assert len(parts) == -(-n // micro)
    for part_data, part_meta in parts:
        assert len(part_data["x"]) == len(part_data["s"]) == part_meta.size <= micro
        np.testing.assert_array_equal(part_data["x"], part_meta.global_indexes * 10)
    assert sum(p.size for _, p in parts) == n


def test_torch_split_alike():
    torch = pytest.importorskip("torch")
    client = seqflow.Client()
    ragged = [torch.arange(i + 1) for i in range(7)]
    meta = client.put({"x": torch.arange(7), "r": ragged}, partition_id="p")
    try:
        import tensordict  # noqa: F401
        formats = ("torch", "tensordict")
    except ImportError:
        formats = ("torch",)
    for fmt in formats:
        data = client.get_data(meta, format=fmt)
        parts = split_batch(data, meta, micro_batch_size=3)
        assert [m.size for _, m in parts] == [3, 2, 2]
        for part_data, part_meta in parts:
            assert part_data["x"].tolist() == part_meta.global_indexes.tolist()
            lengths = [t.numel() for t in part_data["r"].unbind()]
            assert lengths == [int(g) + 1 for g in part_meta.global_indexes]
