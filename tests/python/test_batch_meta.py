"""BatchMeta and KVBatchMeta: TransferQueue 0.1.11's API, and one split rule
for data and metadata."""

from __future__ import annotations

import copy
import dataclasses
import gc
import json
import pickle
import subprocess
import sys
import weakref
from pathlib import Path

import numpy as np
import pytest

import batch_meta_scenario
import seqflow
from remote_services import client_in_each_mode, client_mode, clusters, make_client  # noqa: F401 (fixtures)
from required import require
from seqflow import BatchMeta
from seqflow.batch_meta import KVBatchMeta, chunk_sizes
from seqflow.streaming import split_batch

NESTING = seqflow._seqflow.limits.MAX_DECODE_NESTING

TOOLS_DIR = Path(__file__).resolve().parents[2] / "tools"


def schema_of(*fields, dtype="int64", shape=(2,)):
    return {f: {"dtype": dtype, "shape": shape, "is_nested": False, "is_non_tensor": False} for f in fields}


def make_meta(n=7, fields=("a", "b"), **kwargs):
    return BatchMeta(
        global_indexes=list(range(10, 10 + n)),
        partition_ids=["p"] * n,
        field_schema=schema_of(*fields),
        production_status=np.ones(n, dtype=np.int8),
        custom_meta=[{"i": i} for i in range(n)],
        extra_info={"source": "test"},
        **kwargs,
    )


def state(meta: BatchMeta) -> tuple:
    """What a batch holds, comparable with == (BatchMeta itself compares by identity, as TransferQueue's)."""
    return (meta.global_indexes, meta.partition_ids, meta.field_schema, meta.production_status.tolist(),
            meta.custom_meta, meta.extra_info)


def test_chunk_sizes_rule():
    assert chunk_sizes(7, 3) == [3, 2, 2]
    assert chunk_sizes(6, 4) == [2, 2, 1, 1]
    assert chunk_sizes(2, 4) == [1, 1, 0, 0]
    assert chunk_sizes(0, 2) == [0, 0]
    with pytest.raises(ValueError):
        chunk_sizes(3, 0)


# ---- construction -------------------------------------------------------------

def test_constructor_takes_transferqueues_keywords_and_defaults():
    meta = BatchMeta(global_indexes=np.arange(3), partition_ids=("p", "p", "q"))
    assert meta.global_indexes == [0, 1, 2] and type(meta.global_indexes[0]) is int
    assert meta.partition_ids == ["p", "p", "q"] and meta.field_schema == {} and meta.extra_info == {}
    assert meta.production_status.dtype == np.int8 and meta.production_status.tolist() == [0, 0, 0]
    assert meta.custom_meta == [{}, {}, {}] and meta._custom_backend_meta == [{}, {}, {}]
    assert not meta.is_ready and meta.field_names == []
    empty = BatchMeta()
    assert len(empty) == empty.size == 0 and not empty and not empty.is_ready and empty.is_empty()
    assert BatchMeta.empty(extra_info={"k": 1}).extra_info == {"k": 1}


def test_constructor_copies_what_it_is_given():
    indexes, schema, info, custom = [0, 1], schema_of("f"), {"k": [1]}, [{"c": 1}, {"c": 2}]
    meta = BatchMeta(indexes, ["p", "p"], schema, [1, 1], info, custom)
    indexes.append(9)
    schema["f"]["dtype"] = "float32"
    info["new"] = 1
    custom[0]["c"] = 99
    assert meta.global_indexes == [0, 1] and meta.field_schema["f"]["dtype"] == "int64"
    assert meta.extra_info == {"k": [1]} and meta.custom_meta[0] == {"c": 1}
    # Two batches made from one schema share no inner dict.
    other = BatchMeta([5, 6], ["p", "p"], meta.field_schema)
    other.field_schema["f"]["shape"] = (9,)
    assert meta.field_schema["f"]["shape"] == (2,)


@pytest.mark.parametrize("kwargs,error,message", [
    ({"partition_ids": ["p"]}, ValueError, "global_indexes has 2, partition_ids has 1"),
    ({"partition_ids": "pp"}, TypeError, "partition_ids must be a list"),
    ({"global_indexes": [0.5, 1.5]}, TypeError, "global_indexes must be a list of integers"),
    ({"global_indexes": 3}, TypeError, "global_indexes must be a list of integers"),
    ({"production_status": [1, 1, 1]}, ValueError, "production_status length 3 != batch_size 2"),
    ({"custom_meta": [{}]}, ValueError, "custom_meta length 1 != batch_size 2"),
    ({"custom_meta": [{}, 3]}, TypeError, r"custom_meta\[1\] must be a dict, got int"),
    ({"custom_meta": {"a": 1}}, TypeError, "custom_meta must be a list of dicts"),
    ({"field_schema": {"f": 3}}, TypeError, r"field_schema\['f'\] must be a dict"),
    ({"field_schema": {"f": {"per_sample_shapes": [(1,)]}}}, ValueError, "per_sample_shapes length 1 != batch_size 2"),
    ({"extra_info": [1]}, TypeError, "extra_info must be a dict"),
    ({"_custom_backend_meta": [{}]}, ValueError, "_custom_backend_meta length 1 != batch_size 2"),
])
def test_constructor_names_the_bad_parameter(kwargs, error, message):
    arguments = {"global_indexes": [0, 1], "partition_ids": ["p", "p"]} | kwargs
    with pytest.raises(error, match=message):
        BatchMeta(**arguments)


def test_a_fields_matrix_gives_per_sample_status_and_per_field_bits():
    matrix = np.array([[True, True], [True, False]])
    meta = BatchMeta([0, 1], ["p", "p"], schema_of("a", "b"), matrix)
    assert meta.production_status.tolist() == [1, 0] and not meta.is_ready
    assert meta._produced_fields() == ["a"]
    assert meta._field_produced(["b", "nope"]).tolist() == [[True, False], [False, False]]
    meta.production_status[1] = 1  # a sample marked produced has every field
    assert meta._produced_fields() == ["a", "b"] and meta.is_ready


# ---- queries ----------------------------------------------------------------------

def test_queries():
    meta = make_meta()
    assert meta.size == len(meta) == 7 and meta.field_names == ["a", "b"] and meta.is_ready
    assert meta.get_dtypes("a") == ["int64"] * 7 and meta.get_shapes("b") == [(2,)] * 7
    with pytest.raises(KeyError, match="'nope' not found in field_schema"):
        meta.get_shapes("nope")
    with pytest.raises(KeyError, match="nope"):
        meta.get_dtypes("nope")
    meta.production_status[3] = 0
    assert not meta.is_ready
    assert str(meta) == ("BatchMeta(size=7, field_names=['a', 'b'], is_ready=False, "
                         "global_indexes=[10, 11, 12, 13, 14, 15, 16], extra_info={'source': 'test'})")
    assert "size=7" in repr(meta)


def test_field_names_are_sorted():
    meta = BatchMeta([0], ["p"], schema_of("z", "a", "m"))
    assert meta.field_names == ["a", "m", "z"]


def test_batches_compare_by_identity_and_hash():
    a, b = make_meta(), make_meta()
    assert a == a and a != b and len({a, b}) == 2


def test_extra_info_methods():
    meta = make_meta(n=1)
    meta.set_extra_info("step", 3)
    assert meta.get_extra_info("step") == 3 and meta.get_extra_info("nope", "d") == "d"
    assert meta.has_extra_info("step") and not meta.has_extra_info("nope")
    meta.update_extra_info({"a": [1], "step": 4})
    everything = meta.get_all_extra_info()
    everything["a"].append(2)
    assert meta.extra_info == {"source": "test", "a": [1], "step": 4}
    assert meta.remove_extra_info("a") == [1] and meta.remove_extra_info("a") is None
    meta.clear_extra_info()
    assert meta.extra_info == {}


def test_custom_meta_methods():
    meta = make_meta(n=2)
    meta.update_custom_meta([{"x": 1}, {"y": 2}])
    meta.update_custom_meta(None)
    everything = meta.get_all_custom_meta()
    assert everything == [{"i": 0, "x": 1}, {"i": 1, "y": 2}]
    everything[0]["x"] = 5  # a copy
    assert meta.custom_meta[0]["x"] == 1
    with pytest.raises(ValueError, match="custom_meta length 1 != batch_size 2"):
        meta.update_custom_meta([{}])
    with pytest.raises(ValueError, match="custom_meta length 0 != batch_size 2"):  # as TransferQueue: [] is no None
        meta.update_custom_meta([])
    with pytest.raises(TypeError, match=r"custom_meta\[1\] must be a dict"):
        meta.update_custom_meta([{}, 3])
    meta.clear_custom_meta()
    assert meta.custom_meta == [{}, {}]
    with pytest.raises(ValueError, match="custom_meta length 3"):
        meta.custom_meta = [{}] * 3


def test_sample_views_are_read_only():
    meta = BatchMeta([4, 5], ["p", "q"], {
        "r": {"dtype": "int64", "shape": (-1,), "is_nested": True, "is_non_tensor": False,
              "per_sample_shapes": [(3,), (5,)]}} | schema_of("x"), [1, 0], custom_meta=[{"k": 1}, {}])
    samples = meta.samples
    assert len(samples) == 2 and [s.global_index for s in samples] == [4, 5]
    second = samples[-1]
    assert second.partition_id == "q" and second.production_status == 0
    assert second.fields["r"]["shape"] == (5,) and "per_sample_shapes" not in second.fields["r"]
    assert samples[0].fields["x"]["shape"] == (2,) and samples[0].custom_meta["k"] == 1
    with pytest.raises(TypeError):
        samples[0].custom_meta["k"] = 2
    with pytest.raises(TypeError):
        samples[0].fields["x"] = {}
    with pytest.raises(IndexError, match="out of range for a batch of 2"):
        samples[2]
    assert "global_index=4" in repr(samples[0])


# ---- selections ---------------------------------------------------------------------

def test_select_samples_and_indexing():
    meta = make_meta()
    part = meta.select_samples([4, 1])
    assert part.global_indexes == [14, 11] and part.custom_meta == [{"i": 4}, {"i": 1}]
    assert part.production_status.tolist() == [1, 1] and part.extra_info == meta.extra_info
    part.custom_meta[0]["i"] = 99
    part.field_schema["a"]["shape"] = (9,)
    assert meta.custom_meta[4] == {"i": 4} and meta.field_schema["a"]["shape"] == (2,)
    for bad in ([7], [-1]):
        with pytest.raises(ValueError, match=r"sample_indices must lie in \[0, 7\)"):
            meta.select_samples(bad)
    with pytest.raises(ValueError, match="integer positions"):
        meta.select_samples([0.5])
    assert meta[2].global_indexes == [12] and meta[-1].global_indexes == [16]
    assert meta[1:6:2].global_indexes == [11, 13, 15] and meta[::-1].global_indexes == list(range(16, 9, -1))
    with pytest.raises(IndexError, match="out of range"):
        meta[7]
    with pytest.raises(TypeError, match="not supported"):
        meta["a"]


def test_select_fields_keeps_those_the_batch_has():
    meta = make_meta(_custom_backend_meta=[{"a": 1, "b": 2, "_all": 3}] * 7)
    only_b = meta.select_fields(["b", "nope"])
    assert only_b.field_names == ["b"] and only_b.production_status.tolist() == [1] * 7
    assert only_b._custom_backend_meta[0] == {"b": 2, "_all": 3}
    only_b.set_extra_info("k", 1)
    only_b.update_custom_meta([{"i": -1}] * 7)
    only_b.field_schema["b"]["dtype"] = "float32"
    assert "k" not in meta.extra_info and meta.custom_meta[0] == {"i": 0}
    assert meta.field_schema["b"]["dtype"] == "int64"
    assert meta.select_fields("a").field_names == ["a"]


def test_chunk_and_chunk_by_partition():
    meta = make_meta(n=10)
    parts = meta.chunk(3)
    assert [p.size for p in parts] == [4, 3, 3] and parts[1].custom_meta[0] == {"i": 4}
    assert [p.size for p in make_meta(n=2).chunk(4)] == [1, 1, 0, 0]
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="chunks must be an integer >= 1"):
            meta.chunk(bad)
    mixed = BatchMeta([1, 2, 3, 4], ["A", "B", "A", "B"], custom_meta=[{"n": n} for n in range(4)])
    by_partition = mixed.chunk_by_partition()
    assert [(p.partition_ids, p.global_indexes) for p in by_partition] == [(["A", "A"], [1, 3]), (["B", "B"], [2, 4])]


def test_reorder_in_place():
    meta = BatchMeta([0, 1, 2], ["p"] * 3, {"r": {"dtype": "int64", "shape": (-1,), "is_nested": True,
                                                   "is_non_tensor": False, "per_sample_shapes": [(1,), (2,), (3,)]}},
                     [1, 0, 1], custom_meta=[{"i": 0}, {"i": 1}, {"i": 2}])
    assert meta.reorder([2, 0, 1]) is None
    assert meta.global_indexes == [2, 0, 1] and meta.production_status.tolist() == [1, 1, 0]
    assert meta.custom_meta == [{"i": 2}, {"i": 0}, {"i": 1}]
    assert meta.get_shapes("r") == [(3,), (1,), (2,)]
    with pytest.raises(ValueError, match="mismatch batch size 3"):
        meta.reorder([0, 1])
    with pytest.raises(ValueError, match="duplicates"):
        meta.reorder([0, 0, 1])
    with pytest.raises(ValueError, match=r"must lie in \[0, 3\)"):
        meta.reorder([0, 1, 3])


def test_copy_is_deep():
    meta = make_meta(n=2)
    meta.set_extra_info("nested", {"a": [1]})
    twin = meta.copy()
    assert state(twin) == state(meta) and twin is not meta
    twin.extra_info["nested"]["a"].append(2)
    twin.custom_meta[0]["i"] = 9
    twin.field_schema["a"]["shape"] = (5,)
    twin.production_status[0] = 0
    assert meta.extra_info["nested"] == {"a": [1]} and meta.custom_meta[0] == {"i": 0}
    assert meta.field_schema["a"]["shape"] == (2,) and meta.production_status[0] == 1


# ---- combinations -------------------------------------------------------------------

def test_concat():
    meta = make_meta()
    restored = BatchMeta.concat(meta.chunk(3))
    assert state(restored) == state(meta)
    assert state(BatchMeta.concat([None, BatchMeta.empty(), meta])) == state(meta)
    assert BatchMeta.concat([]).size == 0 and BatchMeta.concat([BatchMeta.empty({"k": 1})]).size == 0
    with pytest.raises(ValueError, match=r"field_names mismatch at chunk\[1\]"):
        BatchMeta.concat([make_meta(fields=("a",)), make_meta(fields=("b",))])
    floats = BatchMeta([1], ["p"], schema_of("a", "b", dtype="torch.float32"), [1])
    with pytest.raises(ValueError, match=r"Field 'a' dtype mismatch in concat: chunk\[0\]=int64, chunk\[1\]=float32"):
        BatchMeta.concat([meta, floats])
    unchecked = BatchMeta.concat([meta, floats], validate=False)
    assert unchecked.size == 8 and unchecked.field_schema["a"]["dtype"] == "int64"


def test_concat_merges_extra_info_and_refuses_conflicts():
    torch = require("torch")

    def one(index, **info):
        return BatchMeta([index], ["p"], schema_of("f"), [1], extra_info=info)

    merged = BatchMeta.concat([one(0, common="ok", only_a=1), one(1, common="ok", only_b=2)])
    assert merged.extra_info == {"common": "ok", "only_a": 1, "only_b": 2}
    same = BatchMeta.concat([one(0, t=torch.tensor([1.0, 2.0]), a=np.arange(3)),
                             one(1, t=torch.tensor([1.0, 2.0]), a=np.arange(3))])
    assert torch.equal(same.extra_info["t"], torch.tensor([1.0, 2.0]))
    for left, right in ((1, 2), (torch.tensor([1.0]), torch.tensor([2.0])), (np.arange(2), np.arange(3)), (1, 1.0)):
        with pytest.raises(ValueError, match="extra_info key 'step' has conflicting values"):
            BatchMeta.concat([one(0, step=left), one(1, step=right)])


def test_concat_joins_per_sample_shapes_of_nested_fields():
    def part(indexes, entry):
        return BatchMeta(indexes, ["p"] * len(indexes), {"r": entry})

    dense = {"dtype": "int64", "shape": (4,), "is_nested": False, "is_non_tensor": False}
    nested = {"dtype": "int64", "shape": (-1,), "is_nested": True, "is_non_tensor": False,
              "per_sample_shapes": [(2,), (3,)]}
    joined = BatchMeta.concat([part([0], dense), part([1, 2], nested)])
    assert joined.field_schema["r"]["is_nested"] and joined.get_shapes("r") == [(4,), (2,), (3,)]
    assert joined.field_schema["r"]["shape"] == (-1,)


def test_union():
    left = make_meta(fields=("a",), _custom_backend_meta=[{"a": 1}] * 7)
    right = make_meta(fields=("a", "c"))
    right.field_schema["a"]["dtype"] = "float32"
    right.custom_meta = [{"j": 1}] * 7
    right.production_status[2] = 0
    right.extra_info = {"source": "right", "r": 1}
    both = left.union(right)
    assert both.field_names == ["a", "c"] and both.field_schema["a"]["dtype"] == "float32"
    assert both.production_status.tolist() == [1, 1, 0, 1, 1, 1, 1] and not both.is_ready
    assert both.custom_meta[2] == {"i": 2, "j": 1} and both.extra_info == {"source": "right", "r": 1}
    assert both._custom_backend_meta[0] == {"a": 1}
    both.custom_meta[0]["i"] = 9
    assert left.custom_meta[0] == {"i": 0}
    with pytest.raises(ValueError, match="global_indexes do not match"):
        left.union(make_meta(n=3))
    with pytest.raises(ValueError, match="partition_ids do not match"):
        left.union(BatchMeta(left.global_indexes, ["q"] * 7))
    for result in (left.union(BatchMeta.empty()), BatchMeta.empty().union(left), left.union(None)):
        assert result is not left and state(result) == state(left)
        result.extra_info["new"] = 1
        assert "new" not in left.extra_info


def test_add_fields():
    torch = require("torch")
    tensordict = require("tensordict")
    meta = BatchMeta([0, 1, 2], ["p"] * 3)
    data = tensordict.TensorDict({"x": torch.zeros(3, 4, dtype=torch.bfloat16), "n": torch.arange(3)}, batch_size=3)
    assert meta.add_fields(data) is meta
    assert meta.field_schema["x"] == {"dtype": "bfloat16", "shape": (4,), "is_nested": False, "is_non_tensor": False}
    assert meta.field_schema["n"]["shape"] == () and meta.is_ready
    meta.add_fields({"r": [np.arange(1), np.arange(3), np.arange(2)], "s": ["a", "b", "c"],
                     "v": [1.5, 2.5, 3.5]}, set_all_ready=False)
    assert meta.get_shapes("r") == [(1,), (3,), (2,)] and meta.field_schema["r"]["shape"] == (-1,)
    assert meta.field_schema["s"] == {"dtype": None, "shape": None, "is_nested": False, "is_non_tensor": True}
    assert meta.field_schema["v"]["dtype"] == "float64" and meta.field_names == ["n", "r", "s", "v", "x"]
    jagged = torch.nested.nested_tensor([torch.zeros(2, 3), torch.zeros(4, 3), torch.zeros(1, 3)],
                                        layout=torch.jagged)
    meta.production_status[:] = 0
    meta.add_fields(tensordict.TensorDict({"j": jagged}, batch_size=3), set_all_ready=False)
    assert meta.get_shapes("j") == [(2, 3), (4, 3), (1, 3)] and meta.field_schema["j"]["shape"] == (-1, 3)
    assert not meta.is_ready
    assert meta.add_fields(tensordict.TensorDict({}, batch_size=0)) is meta
    with pytest.raises(ValueError, match="batch size mismatch: self.size=3 vs tensor_dict=2"):
        meta.add_fields({"y": np.zeros(2)})
    with pytest.raises(ValueError, match="field 'y' holds 2 samples, the batch 3"):
        meta.add_fields({"x": np.zeros(3), "y": np.zeros(2)})
    with pytest.raises(TypeError, match="tensor_dict must be a TensorDict or a dict"):
        meta.add_fields([1, 2, 3])


def test_pickling_keeps_everything_and_makes_status_writable():
    meta = make_meta(n=3, _custom_backend_meta=[{"a": {"k": 1}}] * 3)
    restored = pickle.loads(pickle.dumps(meta))
    assert state(restored) == state(meta) and restored._custom_backend_meta == meta._custom_backend_meta
    assert restored._custom_meta == meta.custom_meta  # decoded stays decoded
    # Ray's zero-copy deserialisation: arrays over read-only out-of-band buffers.
    buffers = []
    data = pickle.dumps(meta, protocol=5, buffer_callback=buffers.append)
    thawed = pickle.loads(data, buffers=[memoryview(b).toreadonly() for b in buffers])
    assert buffers and thawed.production_status.flags.writeable
    assert state(thawed) == state(meta)
    thawed.add_fields({"z": np.zeros(3)})
    # TransferQueue's own test finds production_status in the state by __slots__.
    frozen = list(meta.__getstate__())
    at = BatchMeta.__slots__.index("production_status")
    frozen[at] = frozen[at].copy()
    frozen[at].flags.writeable = False
    by_hand = BatchMeta.__new__(BatchMeta)
    by_hand.__setstate__(tuple(frozen))
    assert by_hand.production_status.flags.writeable and state(by_hand) == state(meta)
    assert state(copy.deepcopy(meta)) == state(meta)


def test_a_batch_in_its_own_extra_info_is_collected():
    class Marker:
        pass

    meta, marker = make_meta(n=2), Marker()
    meta.extra_info = {"self": meta, "marker": marker}
    meta.custom_meta[0]["batch"] = meta
    alive = weakref.ref(marker)
    del meta, marker
    gc.collect()
    assert alive() is None


def test_attribute_setters_check_per_sample_lists():
    meta = make_meta(n=2)
    with pytest.raises(ValueError, match="_custom_backend_meta length 1 != batch_size 2"):
        meta._custom_backend_meta = [{}]
    with pytest.raises(TypeError, match=r"_custom_backend_meta\[0\] must be a dict, got int"):
        meta._custom_backend_meta = [1, {}]
    with pytest.raises(TypeError, match="custom_meta must be a list of dicts, one per sample, got str"):
        meta.custom_meta = "ab"
    given = [{"b": 1}, {"b": 2}]
    meta._custom_backend_meta = given
    given[0]["b"] = 9  # the setter copies each dict
    assert meta._custom_backend_meta == [{"b": 1}, {"b": 2}]
    meta.custom_meta = None
    assert meta.custom_meta == [{}, {}]
    meta.field_schema, meta.production_status = schema_of("q"), np.array([1, 0], dtype=np.int8)
    assert meta.field_names == ["q"] and not meta.is_ready
    with pytest.raises(AttributeError):
        meta.global_indexes = [1, 2]
    with pytest.raises(AttributeError):
        meta.anything_else = 1


@pytest.mark.parametrize("call", [
    lambda meta, kv: meta.select_samples(5), lambda meta, kv: meta.select_fields(None),
    lambda meta, kv: meta.split(None), lambda meta, kv: meta.reorder(3), lambda meta, kv: meta._field_produced(3),
    lambda meta, kv: BatchMeta.concat(5), lambda meta, kv: meta.get_shapes(["x"]),
    lambda meta, kv: kv.select_keys(5), lambda meta, kv: kv.reorder(5), lambda meta, kv: KVBatchMeta.concat(5)])
def test_a_non_iterable_argument_is_a_type_error(call):
    with pytest.raises(TypeError):
        call(make_meta(n=2), KVBatchMeta(keys=["a"], tags=[{}]))


def test_help_shows_the_docstrings():
    assert "TransferQueue 0.1.11" in BatchMeta.__doc__
    assert "in [0, size)" in BatchMeta.select_samples.__doc__
    assert "partition and the set of fields" in KVBatchMeta.concat.__doc__
    assert "no key twice" in KVBatchMeta.__post_init__.__doc__


def test_kv_batch_meta_is_a_dataclass():
    kv = KVBatchMeta(keys=["a", "b"], tags=[{"t": 1}, {}], partition_id="p", fields=["x"])
    assert [f.name for f in dataclasses.fields(kv)] == ["keys", "tags", "partition_id", "fields", "extra_info"]
    assert dataclasses.asdict(kv) == {"keys": ["a", "b"], "tags": [{"t": 1}, {}], "partition_id": "p",
                                      "fields": ["x"], "extra_info": {}}
    other = dataclasses.replace(kv, keys=["c", "d"])
    assert other.keys == ["c", "d"] and other.tags == kv.tags and other.tags is not kv.tags
    assert kv == KVBatchMeta(keys=["a", "b"], tags=[{"t": 1}, {}], partition_id="p", fields=["x"]) != other
    assert pickle.loads(pickle.dumps(kv)) == kv
    assert str(kv) == "KVBatchMeta(size=2, field_names=['x'], extra_info={})" and len(kv) == kv.size == 2
    assert repr(kv).startswith("KVBatchMeta(keys=['a', 'b'], tags=")


def test_same_results_as_transferqueue():
    """batch_meta_scenario.py's calls (every method, their errors' types) on
    TransferQueue 0.1.11's own classes, in the reference venv, and on seqflow's."""
    sys.path.insert(0, str(TOOLS_DIR))
    import reference_peer

    try:
        python = reference_peer.transferqueue_python()
    except reference_peer.ReferenceUnavailable as error:
        pytest.fail(f"TransferQueue {reference_peer.VERSION}, the reference, cannot be had: {error}")
    done = subprocess.run([python, batch_meta_scenario.__file__], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = json.loads(done.stdout)
    ours = json.loads(json.dumps(batch_meta_scenario.run(BatchMeta, KVBatchMeta), default=repr))
    assert ours.keys() == theirs.keys()
    for step, result in theirs.items():
        assert ours[step] == result, step


# ---- with the engine, embedded and remote ---------------------------------------------
@pytest.fixture
def client(client_in_each_mode):  # noqa: F811
    return client_in_each_mode


def test_fetched_batch_has_transferqueues_types_and_per_field_bits(client):
    put = client.put({"x": np.arange(4), "s": ["a", "b", "c", "d"]}, partition_id="p")
    assert put.global_indexes == [0, 1, 2, 3] and put.production_status.tolist() == [1] * 4 and put.is_ready
    assert put.field_schema["s"] == {"dtype": None, "shape": None, "is_nested": False, "is_non_tensor": True}
    assert put.field_schema["x"] == {"dtype": "int64", "shape": (), "is_nested": False, "is_non_tensor": False}
    more = client.put({"y": np.arange(2)}, metadata=put.select_samples([2, 0]))
    assert more.global_indexes == [2, 0] and more.field_names == ["s", "x", "y"] and more.is_ready
    everything = client.get_meta(["x", "y"], 4, "p", mode="force_fetch")
    assert everything.production_status.dtype == np.int8 and not everything.is_ready
    assert dict(zip(everything.global_indexes, everything.production_status.tolist())) == {0: 1, 1: 0, 2: 1, 3: 0}
    # Which fields a sample has travels privately (the kv API reads it).
    client.kv_batch_put(["k0", "k1", "k2"], "kv", {"x": np.arange(3)})
    client.kv_put("k1", "kv", {"y": np.arange(2)})
    keyed = client.kv_meta(["k0", "k1", "k2"], "kv")
    assert keyed.production_status.dtype == np.int8 and keyed.production_status.tolist() == [0, 1, 0]
    assert keyed._field_produced(["x", "y"]).tolist() == [[True, False], [True, True], [True, False]]
    assert keyed.select_fields(["y"])._field_produced(["y"]).tolist() == [[False], [True], [False]]
    assert keyed[1:]._produced_fields() == ["x"] and keyed[1]._produced_fields() == ["x", "y"]
    with pytest.raises(ValueError, match=r"field 'y' is not set for keys \['k0', 'k2'\]"):
        client.kv_batch_get(["k0", "k1", "k2"], "kv", select_fields=["y"])
    # extra_info stays in Python, whatever it holds.
    more.extra_info = {"step": np.arange(2), "any": object}
    again = client.put({"z": np.arange(2)}, metadata=more)
    assert again.extra_info["any"] is object and again.extra_info["step"] is more.extra_info["step"]
    assert again.extra_info is not more.extra_info
    # A batch the caller made goes to the engine too: its samples count as having every field.
    made = BatchMeta([1, 3], ["p", "p"], schema_of("x", dtype=np.int64, shape=()), [1, 1])
    assert client.put({"y": np.arange(2)}, metadata=made).is_ready
    assert client.get_meta(["x", "y"], 4, "p", mode="force_fetch").is_ready


@pytest.mark.parametrize("n,micro", [(7, 3), (8, 3), (5, 5), (5, 8), (1, 1), (10, 4)])
def test_data_and_meta_split_alike(n, micro, client):
    """TransferQueue cut 7 rows at micro-batch 3 as data [3, 3, 1] but meta [3, 2, 2]."""
    meta = client.put({"x": np.arange(n) * 10, "s": [str(i) for i in range(n)]}, partition_id="p")
    data = client.get_data(meta, format="numpy")
    parts = split_batch(data, meta, micro_batch_size=micro)
    assert len(parts) == -(-n // micro)
    for part_data, part_meta in parts:
        assert len(part_data["x"]) == len(part_data["s"]) == part_meta.size <= micro
        np.testing.assert_array_equal(part_data["x"], np.asarray(part_meta.global_indexes) * 10)
    assert sum(p.size for _, p in parts) == n


def test_torch_split_alike(client):
    torch = require("torch")
    require("tensordict")
    ragged = [torch.arange(i + 1) for i in range(7)]
    meta = client.put({"x": torch.arange(7), "r": ragged}, partition_id="p")
    for fmt in ("torch", "tensordict"):
        data = client.get_data(meta, format=fmt)
        parts = split_batch(data, meta, micro_batch_size=3)
        assert [m.size for _, m in parts] == [3, 2, 2]
        for part_data, part_meta in parts:
            assert part_data["x"].tolist() == part_meta.global_indexes
            lengths = [t.numel() for t in part_data["r"].unbind()]
            assert lengths == [int(g) + 1 for g in part_meta.global_indexes]


# ---- custom_meta as the engine sends it: MessagePack, decoded on first read ----

def _fetched(client, custom_meta, fields=("x",)):
    n = len(custom_meta)
    client.put({f: np.arange(n) for f in fields}, partition_id="p", custom_meta=custom_meta)
    meta = client.get_meta(list(fields), n, "p", task_name="t", polling=True)
    assert meta.size == n
    return meta


def test_fetched_custom_meta_round_trips_and_is_decoded_once(client):
    values = [{"total_lengths": 17}, {},
              {"nested": {"a": [1, 2.5, None, True, False]}, "s": "h\u00e9llo \u2713"},
              {"big": 2**64 - 1, "neg": -2**63, "small": -5, "f": -0.125, "u16": 40000, "i32": -70000}]
    meta = _fetched(client, values)
    assert meta._custom_meta is None  # nothing decoded by the fetch itself
    assert meta.get_all_custom_meta() == values and meta._custom_meta is None  # a copy, the batch stays encoded
    assert meta.custom_meta == values
    assert meta.custom_meta is meta.custom_meta  # decoded once: changes stick
    meta.custom_meta[0]["total_lengths"] = 3
    assert meta.custom_meta[0] == {"total_lengths": 3}


def test_selections_of_a_fetched_batch_keep_custom_meta_encoded(client):
    values = [{"i": i, "s": "x" * (i * 7)} for i in range(6)]
    values[2] = {}
    meta = _fetched(client, values, fields=("x", "y"))
    tail = meta.select_samples(range(3, 6))  # kept encoded for the end
    gi = meta.global_indexes
    for positions in ([1, 2, 3], [4, 0, 2, 2], [5, 0], [], range(6), [5], np.array([3, 1])):
        part = meta.select_samples(positions)
        assert part._custom_meta is None, positions  # bytes cut out, no dict built
        at = list(positions)
        assert part.custom_meta == [values[i] for i in at]
        assert part.global_indexes == [gi[i] for i in at]
        assert part.production_status.tolist() == [1] * len(at)
        assert part._field_produced(["x", "y"]).shape == (len(at), 2)
    parts = meta.split([2, 4])
    assert [p._custom_meta for p in parts] == [None, None]
    assert parts[0].custom_meta + parts[1].custom_meta == values
    only_x = meta.select_fields(["x"])
    assert only_x._custom_meta is None and only_x.custom_meta == values
    encoded = meta.split([2, 4])
    restored = pickle.loads(pickle.dumps(encoded[1]))
    assert restored._custom_meta is None and state(restored) == state(parts[1])
    joined = BatchMeta.concat(encoded[::-1])  # encoded parts join encoded
    assert joined._custom_meta is None and joined.custom_meta == values[2:] + values[:2]
    assert meta.copy()._custom_meta is None
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
    deep = b"\x81\xa1k" + b"\x91" * (NESTING - 1) + b"\x01"  # the limit's levels
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
    (b"\x81\xa1k" + b"\x91" * NESTING + b"\x01", f"nests deeper than {NESTING} levels at byte {NESTING + 2}"),
    (b"\x05", "is not a MessagePack map"),
    (b"\x91\x80", "is not a MessagePack map"),
])
def test_decoder_rejects_malformed_entries(entry, message):
    with pytest.raises(ValueError, match=r"custom_meta\[1\].*" + message):
        _decode([b"", entry])


def test_deeply_nested_encoded_custom_meta_is_refused_not_recursed_into(client):
    """A batch whose encoded custom_meta nests 100,000 levels (crafted bytes):
    reading it and handing it back to the engine are errors naming the limit,
    not stack overflows."""
    meta = _fetched(client, [{"k": 1}, {"k": 2}])
    fetched = meta._encoded_meta
    good = b"\x81\xa1k\x01"
    deep = b"\x81\xa1k" + b"\x91" * 100_000 + b"\x01"
    # In place of the engine's bytes: decoded on first read, or sent back as they are.
    meta._encoded_meta = (good + deep, np.array([0, len(good), len(good) + len(deep)], dtype=np.uint32))
    with pytest.raises(ValueError, match=rf"custom_meta\[1\] nests deeper than {NESTING} levels"):
        client.put({"z": np.arange(2)}, metadata=meta)
    with pytest.raises(ValueError, match=rf"custom_meta\[1\] nests deeper than {NESTING} levels"):
        meta.custom_meta
    # A selection keeps the bytes encoded, and the engine checks them the same.
    with pytest.raises(ValueError, match=rf"custom_meta\[0\] nests deeper than {NESTING} levels"):
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


def test_kv_put_reply_is_validated_and_owns_its_tags(client):
    """A kv put's KVBatchMeta skips the defensive deep copy (its lists are
    made for it) but not the checks, and shares nothing with the caller."""
    tags = [{"status": "running", "nested": {"step": 1}}, {"status": "finished"}]
    meta = client.kv_batch_put(["a", "b"], "kv", tags=tags)
    assert meta.tags == tags and meta.keys == ["a", "b"]
    meta.tags[0]["nested"]["step"] = 99
    assert tags[0]["nested"]["step"] == 1
    assert client.kv_list("kv")["kv"]["a"]["nested"] == {"step": 1}
    with pytest.raises(ValueError, match='"c" appears twice'):
        client.kv_batch_put(["c", "c"], "kv", tags=[{}, {}])


class Tagged(BatchMeta):
    """A subclass at module level (pickle finds it by name)."""

    __slots__ = ()


def test_a_subclass_gets_its_own_class_back():
    meta = Tagged(global_indexes=[1, 2, 3], partition_ids=["p", "p", "q"], field_schema=schema_of("a"),
                  production_status=[1, 1, 1])
    parts = [meta.select_samples([2, 0]), meta[0], meta[0:2], meta.select_fields(["a"]), meta.copy(),
             meta.union(meta), Tagged.concat([meta, meta]), Tagged.empty(), *meta.chunk(2), *meta.split([1, 2]),
             *meta.chunk_by_partition(), pickle.loads(pickle.dumps(meta)), copy.deepcopy(meta)]
    assert [type(part) for part in parts] == [Tagged] * len(parts)


def test_a_fetched_batch_builds_field_schema_and_status_from_the_engine_on_first_read(client):
    client.put({"x": np.arange(6).reshape(3, 2), "t": [[1], [1, 2], [3]]}, partition_id="p")
    meta = client.get_meta(["x", "t"], 3, "p", mode="force_fetch")
    assert meta._engine_view() is meta._native  # nothing read: the engine's batch as it came
    built = BatchMeta(global_indexes=meta.global_indexes, partition_ids=meta.partition_ids,
                      field_schema=meta.field_schema, production_status=meta.production_status,
                      generations=meta.generations)
    assert meta._engine_view() is not meta._native  # read once: the Python members are the truth now
    assert meta.field_schema["x"] == {"dtype": "int64", "shape": (2,), "is_nested": False, "is_non_tensor": False}
    assert meta.production_status.dtype == np.int8 and meta.production_status.tolist() == [1, 1, 1]
    assert state(meta) == state(built) and meta._produced_fields() == built._produced_fields() == ["t", "x"]
    meta.production_status[1] = 0  # the array is the caller's to write, and counts
    assert not meta.is_ready and meta._field_produced(["x"]).tolist() == [[True], [True], [True]]
