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


# ---- custom_meta as the engine sends it: MessagePack, decoded on first read ----

def _fetched(custom_meta, fields=("x",)):
    client = seqflow.Client()
    n = len(custom_meta)
    client.put({f: np.arange(n) for f in fields}, partition_id="p", custom_meta=custom_meta)
    meta = client.get_meta(list(fields), n, "p", task_name="t", polling=True)
    assert meta.size == n
    return client, meta


def test_fetched_custom_meta_round_trips_and_is_decoded_once():
    values = [{"total_lengths": 17}, {},
              {"nested": {"a": [1, 2.5, None, True, False]}, "s": "h\u00e9llo \u2713"},
              {"big": 2**64 - 1, "neg": -2**63, "small": -5, "f": -0.125, "u16": 40000, "i32": -70000}]
    _, meta = _fetched(values)
    assert meta._custom_meta is None  # nothing decoded by the fetch itself
    assert meta.custom_meta == values
    assert meta.custom_meta is meta.custom_meta  # decoded once: changes stick
    meta.custom_meta[0]["total_lengths"] = 3
    assert meta.custom_meta[0] == {"total_lengths": 3}


def test_selections_of_a_fetched_batch_keep_custom_meta_encoded():
    values = [{"i": i, "s": "x" * (i * 7)} for i in range(6)]
    values[2] = {}
    client, meta = _fetched(values, fields=("x", "y"))
    tail = meta.select_samples(range(3, 6))  # kept encoded for the end
    gi = meta.global_indexes.tolist()
    for positions in ([1, 2, 3], [4, 0, 2, 2], [-1, -6], [], range(6), [5], np.array([3, 1])):
        part = meta.select_samples(positions)
        assert part._custom_meta is None, positions  # bytes cut out, no dict built
        at = list(positions)
        assert part.custom_meta == [values[i] for i in at]
        assert part.global_indexes.tolist() == [gi[i] for i in at]
        assert part.production_status.shape == (len(at), 2)
    parts = meta.split([2, 4])
    assert [p._custom_meta for p in parts] == [None, None]
    assert parts[0].custom_meta + parts[1].custom_meta == values
    only_x = meta.select_fields(["x"])
    assert only_x._custom_meta is None and only_x.custom_meta == values
    assert pickle.loads(pickle.dumps(parts[1])) == parts[1]
    assert meta._custom_meta is None  # none of this decoded the batch itself

    # Parts are independent: changing one leaves the batch and the others alone.
    parts[0].custom_meta[0]["i"] = 99
    assert meta.custom_meta[0]["i"] == 0 and meta.select_samples([0]).custom_meta == [values[0]]
    # Once the batch is decoded (and maybe changed), selections copy its dicts.
    meta.custom_meta[1]["i"] = 42
    copied = meta.select_samples([1])
    assert copied.custom_meta[0]["i"] == 42
    copied.custom_meta[0]["i"] = 0
    assert meta.custom_meta[1]["i"] == 42

    # An encoded part goes back to the engine as it is.
    assert tail._custom_meta is None
    client.put({"z": np.arange(3)}, metadata=tail)
    again = client.get_meta(["z"], 3, "p", task_name="u", polling=True)
    assert again.custom_meta == values[3:]


def _decode(entries):
    """decode_custom_meta over MessagePack entries (one bytes object each)."""
    offsets = np.cumsum([0] + [len(e) for e in entries]).astype(np.uint32)
    return seqflow._seqflow.client.decode_custom_meta(b"".join(entries), offsets)


def test_decoder_reads_every_messagepack_type():
    k = b"\x81\xa1k"  # {"k": <value>}
    cases = [
        (b"\xc0", None), (b"\xc2", False), (b"\xc3", True), (b"\x7f", 127), (b"\xe0", -32),
        (b"\xcc\xff", 255), (b"\xcd\xff\xff", 65535), (b"\xce\xff\xff\xff\xff", 2**32 - 1),
        (b"\xcf" + b"\xff" * 8, 2**64 - 1), (b"\xd0\x80", -128), (b"\xd1\x80\x00", -2**15),
        (b"\xd2\x80\x00\x00\x00", -2**31), (b"\xd3\x80" + b"\x00" * 7, -2**63),
        (b"\xca\x3f\xc0\x00\x00", 1.5), (b"\xcb\x3f\xf8" + b"\x00" * 6, 1.5),
        (b"\xa3abc", "abc"), (b"\xd9\x03abc", "abc"), (b"\xda\x00\x03abc", "abc"),
        (b"\xdb\x00\x00\x00\x03abc", "abc"), (b"\xa2\xc3\xa9", "\u00e9"),
        (b"\xc4\x02\x01\x02", b"\x01\x02"), (b"\xc5\x00\x02\x01\x02", b"\x01\x02"),
        (b"\xc6\x00\x00\x00\x02\x01\x02", b"\x01\x02"),
        (b"\xc7\x02\x05xy", b"xy"), (b"\xc8\x00\x02\x05xy", b"xy"), (b"\xc9\x00\x00\x00\x02\x05xy", b"xy"),
        (b"\xd4\x05x", b"x"), (b"\xd5\x05xy", b"xy"), (b"\xd6\x05" + b"a" * 4, b"a" * 4),
        (b"\xd7\x05" + b"a" * 8, b"a" * 8), (b"\xd8\x05" + b"a" * 16, b"a" * 16),
        (b"\x92\x01\xa1a", [1, "a"]), (b"\xdc\x00\x02\x01\x02", [1, 2]), (b"\xdd\x00\x00\x00\x02\x01\x02", [1, 2]),
        (b"\x90", []), (b"\x80", {}), (b"\x81\xa1j\x92\x80\x90", {"j": [{}, []]}),
    ]
    decoded = _decode([k + packed for packed, _ in cases])
    for (packed, expected), got in zip(cases, decoded):
        assert got == {"k": expected} and type(got["k"]) is type(expected), packed
    assert _decode([b"\xde\x00\x01\xa1k\x01", b"\xdf\x00\x00\x00\x01\xd9\x01k\x01", b""]) == [{"k": 1}, {"k": 1}, {}]
    # Keys are shared between entries; values are not.
    first, second = _decode([b"\x81\xa1k\x90", b"\x81\xa1k\x90"])
    assert first == second and first["k"] is not second["k"]
    assert _decode([]) == []
    deep = b"\x81\xa1k" + b"\x91" * 999 + b"\x01"  # 1,000 levels: the limit
    assert isinstance(_decode([deep])[0]["k"], list)


@pytest.mark.parametrize("entry,message", [
    (b"\x81\xa1k", "is not valid MessagePack: the data ends inside a value at byte 3"),
    (b"\x81\xa1k\xdd\xff\xff\xff\xff", "an array of 4294967295 elements overruns the data at byte 3"),
    (b"\x81\xa1k\xa5ab", "the data ends inside a value at byte 4"),
    (b"\x80\x00", "1 bytes follow the value at byte 1"),
    (b"\x81\x01\x01", "a map key is not a string at byte 1"),
    (b"\x81\xa1\xff\x01", "invalid UTF-8 in a map key at byte 2"),
    (b"\x81\xa1k\xa1\xff", "invalid UTF-8 in a string at byte 4"),
    (b"\x81\xa1k\xc1", "0xc1 is not a type at byte 3"),
    (b"\x81\xa1k" + b"\x91" * 1000 + b"\x01", "nests deeper than 1000 levels at byte 1002"),
    (b"\x05", "is not a MessagePack map"),
    (b"\x91\x80", "is not a MessagePack map"),
])
def test_decoder_rejects_malformed_entries(entry, message):
    with pytest.raises(ValueError, match=r"custom_meta\[1\].*" + message):
        _decode([b"", entry])


def test_deeply_nested_encoded_custom_meta_is_refused_not_recursed_into():
    """A batch whose encoded custom_meta nests 100,000 levels (crafted bytes):
    reading it and handing it back to the engine are errors naming the limit,
    not stack overflows."""
    client, meta = _fetched([{"k": 1}, {"k": 2}])
    fetched = meta._encoded_meta
    good = b"\x81\xa1k\x01"
    deep = b"\x81\xa1k" + b"\x91" * 100_000 + b"\x01"
    # In place of the engine's bytes: decoded on first read, or sent back as they are.
    meta._encoded_meta = (good + deep, np.array([0, len(good), len(good) + len(deep)], dtype=np.uint32))
    with pytest.raises(ValueError, match=r"custom_meta\[1\] nests deeper than 1000 levels"):
        client.put({"z": np.arange(2)}, metadata=meta)
    with pytest.raises(ValueError, match=r"custom_meta\[1\] nests deeper than 1000 levels"):
        meta.custom_meta
    # A selection keeps the bytes encoded, and the engine checks them the same.
    with pytest.raises(ValueError, match=r"custom_meta\[0\] nests deeper than 1000 levels"):
        client.put({"z": np.arange(1)}, metadata=meta.select_samples([1]))
    meta._encoded_meta = fetched  # the engine's own bytes still go through
    client.put({"z": np.arange(2)}, metadata=meta)
    assert client.get_meta(["z"], 2, "p", task_name="u", polling=True).custom_meta == [{"k": 1}, {"k": 2}]


def test_decoder_checks_offsets():
    decode = seqflow._seqflow.client.decode_custom_meta
    with pytest.raises(ValueError, match="start at 0 and end at the byte count 2"):
        decode(b"\x80\x80", np.array([0, 1], dtype=np.uint32))
    with pytest.raises(ValueError, match="must ascend, entry 2 is 1"):
        decode(b"\x80\x80", np.array([0, 2, 1, 2], dtype=np.uint32))
