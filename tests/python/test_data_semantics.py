"""What get_data, kv_batch_get and StreamingDataset hand back, embedded and
remote alike: results the caller owns (zero-copy only on request, read-only
where numpy allows), non-tensor columns per row in TransferQueue's
containers, plain values without pickle and other objects only with
allow_pickle, tensor fields in TransferQueue's layout on request (checked
against the real TransferQueue 0.1.11 when its reference venv is at hand),
and one split rule for every kind of field."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

import seqflow
from seqflow.streaming import split_batch
from remote_services import client_in_each_mode, client_mode, clusters, make_client  # noqa: F401 (fixtures)
from required import require

torch = require("torch")
tensordict = require("tensordict")
from tensordict import NonTensorData, NonTensorStack, TensorDict  # noqa: E402

import tq_layout_probe  # noqa: E402

TOOLS_DIR = Path(__file__).resolve().parents[2] / "tools"
PROBE_TIMEOUT = 600  # Ray and TransferQueue start in a fresh process


class Opaque:
    """An object only pickle can store (importable, so pickle finds it again)."""

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return isinstance(other, Opaque) and other.value == self.value


@pytest.fixture
def client(client_in_each_mode):  # noqa: F811
    return client_in_each_mode


def force_fetch(client, fields, partition="p"):
    return client.get_meta(fields, 0, partition, mode="force_fetch")


# ---- results are the caller's -------------------------------------------------

def tensor_fields(n=4):
    return {
        "dense": torch.arange(n * 3, dtype=torch.float32).reshape(n, 3),
        "jagged": torch.nested.as_nested_tensor([torch.arange(i + 1.0) for i in range(n)], layout=torch.jagged),
        "strided": torch.nested.nested_tensor([torch.ones(i + 1, i + 2) for i in range(n)]),
    }


def values_of(field):
    if isinstance(field, torch.Tensor):
        return [row.clone() for row in field.unbind()]
    return [torch.as_tensor(row).clone() for row in field]


def scribble(field):
    """Writes into every row of a get_data field, whatever its container."""
    if isinstance(field, torch.Tensor) and not (field.is_nested and field.layout == torch.strided):
        (field.values() if field.is_nested else field).add_(100)
        return
    rows = field.unbind() if isinstance(field, torch.Tensor) else (
        field.tolist() if isinstance(field, NonTensorStack) else field)
    for row in rows:
        row += 100  # each a writable array or tensor viewing the field


def test_writing_into_a_result_changes_nothing_stored(client):
    metas = [client.put(tensor_fields(), partition_id="p")]
    # Samples of differing rank (from two partitions) come back one array each.
    ranks = [client.put({"ranks": [torch.ones(2), torch.ones(1)]}, partition_id="r1"),
             client.put({"ranks": [torch.ones(2, 2), torch.ones(1, 1)]}, partition_id="r2")]
    metas.append(seqflow.BatchMeta.concat(ranks))
    for meta in metas:
        names = meta.field_names
        before = {name: values_of(client.get_data(meta, format="torch")[name]) for name in names}
        for fmt in ("torch", "tensordict", "numpy"):
            data = client.get_data(meta, format=fmt)
            for name in names:
                scribble(data.get(name) if fmt == "tensordict" else data[name])
        after = {name: values_of(client.get_data(meta, format="torch")[name]) for name in names}
        for name in names:
            assert len(before[name]) == len(after[name]) == meta.size
            for old, new in zip(before[name], after[name]):
                assert torch.equal(old, new), name


def test_numpy_results_are_writable_copies_and_zero_copy_views_read_only(client):
    meta = client.put({"x": np.arange(12.0).reshape(4, 3)}, partition_id="p")
    owned = client.get_data(meta, format="numpy")["x"]
    assert owned.flags.writeable
    owned[:] = -1
    view = client.get_data(meta, format="numpy", copy=False)["x"]
    np.testing.assert_array_equal(view, np.arange(12.0).reshape(4, 3))
    assert not view.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        view[0, 0] = 5.0
    if not client.is_remote:  # embedded, the opt-in view is the stored bytes themselves
        assert np.shares_memory(view, client.get_data(meta, format="numpy", copy=False)["x"])
        assert not np.shares_memory(owned, view)


def test_kv_batch_get_copies_by_default(client):
    client.kv_batch_put(["a", "b"], "kv", fields={"x": torch.zeros(2, 3)})
    got = client.kv_batch_get(["a", "b"], "kv", format="torch")["x"]
    got.add_(1)
    assert client.kv_batch_get(["a", "b"], "kv", format="torch")["x"].sum() == 0
    view = client.kv_batch_get(["a", "b"], "kv", format="numpy", copy=False)["x"]
    assert not view.flags.writeable


# ---- non-tensor columns -----------------------------------------------------------

# (input, what each row reads back as): TransferQueue's per-row values; a
# tuple reads back as a list and numpy's str_ / bytes_ as str / bytes.
NON_TENSOR_CASES = {
    "list_str": (["a", "β", ""], ["a", "β", ""]),
    "list_bytes": ([b"x", b"", b"\x80\xc1"], [b"x", b"", b"\x80\xc1"]),
    "list_mixed": ([{"k": [1, None, 2.5]}, None, True], [{"k": [1, None, 2.5]}, None, True]),
    "list_tuple": ([(1, "a"), (), ([2],)], [[1, "a"], [], [[2]]]),
    "np_object": (np.array(["o0", {"d": 1}, 3], dtype=object), ["o0", {"d": 1}, 3]),
    "np_unicode": (np.array(["u0", "u1", "u2"]), ["u0", "u1", "u2"]),
    "np_bytes": (np.array([b"b0", b"b1", b"b2"], dtype="S4"), [b"b0", b"b1", b"b2"]),
    "ntd_rows": (NonTensorData(data=[{"i": 0}, {"i": 1}, {"i": 2}], batch_size=(3,)),
                 [{"i": 0}, {"i": 1}, {"i": 2}]),
    "ntd_array_rows": (NonTensorData(data=np.array(["x", "y", "z"], dtype=object), batch_size=(3,)),
                       ["x", "y", "z"]),
    "ntd_one_value": (NonTensorData(data="same", batch_size=(3,)), ["same"] * 3),
    "nts_dicts": (NonTensorStack(*[{"x": i} for i in range(3)]), [{"x": 0}, {"x": 1}, {"x": 2}]),
}


def non_tensor_batch():
    return TensorDict({name: value for name, (value, _) in NON_TENSOR_CASES.items()}, batch_size=[3])


def assert_non_tensor_rows(data, fmt):
    for name, (_, rows) in NON_TENSOR_CASES.items():
        field = data.get(name) if fmt == "tensordict" else data[name]
        if fmt == "tensordict":
            assert isinstance(field, NonTensorStack), name
            field = field.tolist()
        else:
            assert isinstance(field, list), name
        assert field == rows, name
        assert [type(v) for v in field] == [type(v) for v in rows], name


@pytest.mark.parametrize("fmt", ["tensordict", "torch", "numpy"])
def test_non_tensor_columns_come_back_per_row(client, fmt):
    meta = client.put(non_tensor_batch(), partition_id="p")
    assert all(meta.field_schema[name]["is_non_tensor"] for name in NON_TENSOR_CASES)
    assert_non_tensor_rows(client.get_data(force_fetch(client, list(NON_TENSOR_CASES)), format=fmt), fmt)
    client.kv_batch_put(["k0", "k1", "k2"], "kv", fields=non_tensor_batch())
    assert_non_tensor_rows(client.kv_batch_get(["k0", "k1", "k2"], "kv", format=fmt), fmt)


def test_a_plain_dict_of_non_tensor_fields_reads_the_same(client):
    client.put({name: value for name, (value, _) in NON_TENSOR_CASES.items()}, partition_id="p")
    assert_non_tensor_rows(client.get_data(force_fetch(client, list(NON_TENSOR_CASES))), "tensordict")


def test_kv_put_of_one_value_is_non_tensor_unless_a_tensor_or_array(client):
    client.kv_put("k", "kv", fields={"n": 7, "s": "hello", "d": {"a": [1]}, "t": torch.tensor([1, 2]),
                                     "a": np.arange(3), "z": torch.tensor(5)})
    got = client.kv_batch_get("k", "kv")
    assert got.get("n").tolist() == [7] and got.get("s").tolist() == ["hello"] and got.get("d").tolist() == [
        {"a": [1]}]
    assert got["t"].tolist() == [[1, 2]] and got["a"].tolist() == [[0, 1, 2]]
    assert got["z"].shape == (1,) and got["z"].tolist() == [5]  # a 0-d tensor keeps its shape per row


def test_non_tensor_data_with_a_list_of_the_wrong_length_is_refused(client):
    bad = {"x": np.zeros(3), "note": NonTensorData(data=[1, 2], batch_size=(3,))}
    with pytest.raises(ValueError, match="'note'.*2 values for a batch of 3 rows"):
        client.put(bad, partition_id="p")
    assert client.get_partition_list() == []


# ---- pickle only when allowed -------------------------------------------------------

def test_objects_need_allow_pickle_and_plain_values_never_use_it(client):
    with pytest.raises(ValueError, match=r'field "obj", sample 1 holds a .*Opaque.*allow_pickle=True'):
        client.put({"obj": [1, Opaque(2)]}, partition_id="p")
    with pytest.raises(ValueError, match=r'field "deep", sample 0 holds a .*Opaque'):
        client.put({"deep": [{"a": [Opaque(1)]}]}, partition_id="p")
    with pytest.raises(ValueError, match=r'field "keys", sample 0 holds a dict key 1'):
        client.put({"keys": [{1: "a"}]}, partition_id="p")
    assert client.get_partition_list() == []

    meta = client.put({"obj": [Opaque(1), "text"], "plain": [{"a": 2**63 - 1}, [b"x", -2.5]]},
                      partition_id="p", allow_pickle=True)
    # A reader that does not allow pickle reads plain values (so none was pickled) ...
    plain = client.get_data(meta, fields=["plain"], format="numpy")["plain"]
    assert plain == [{"a": 2**63 - 1}, [b"x", -2.5]]
    # ... and refuses pickled ones, naming the field and the sample.
    with pytest.raises(ValueError, match=r'field "obj", sample 0 holds a pickled object.*allow_pickle=True'):
        client.get_data(meta, fields=["obj"])
    assert client.get_data(meta, fields=["obj"], format="numpy", allow_pickle=True)["obj"] == [Opaque(1), "text"]
    client.allow_pickle = True  # the client's default, which the compat layer turns on
    assert client.get_data(meta, fields=["obj"], format="numpy")["obj"] == [Opaque(1), "text"]
    client.kv_put("k", "kv", fields={"o": Opaque(3)})
    assert client.kv_batch_get("k", "kv").get("o").tolist() == [Opaque(3)]
    with pytest.raises(ValueError, match='field "o", sample 0 holds a pickled object'):
        client.kv_batch_get("k", "kv", allow_pickle=False)


def test_integers_beyond_64_bits_and_non_str_keys_go_through_pickle_when_allowed(client):
    values = [2**70, {1: "a"}]
    meta = client.put({"v": values}, partition_id="p", allow_pickle=True)
    assert client.get_data(meta, format="numpy", allow_pickle=True)["v"] == values


# ---- tensor layouts ---------------------------------------------------------------

def describe_seqflow(client, layout="transfer_queue"):
    out = {}
    for name, value in tq_layout_probe.batch_cases().items():
        meta = client.put(TensorDict({name: value}, batch_size=tq_layout_probe.ROWS), partition_id=name)
        out[name] = tq_layout_probe.describe(client.get_data(meta, layout=layout).get(name))
    for name, value in tq_layout_probe.kv_cases().items():
        client.kv_put(name, "kv", fields={name: value})
        out[name] = tq_layout_probe.describe(client.kv_batch_get(name, "kv", layout=layout).get(name))
    return out


def containers(description):
    return {name: (d["container"], d.get("dtype")) for name, d in description.items()}


def test_transfer_queue_layout_nests_every_tensor_field_but_0d_rows(client):
    got = containers(describe_seqflow(client))
    assert got["dense_f32"] == ("jagged", "torch.float32") and got["dense_3d"] == ("jagged", "torch.float32")
    assert got["dense_1d"] == ("dense", "torch.int64") and got["kv_scalar"] == ("dense", "torch.int64")
    assert got["strided_same"][0] == "jagged" and got["strided_ragged"][0] == "strided"
    assert got["bf16"] == ("jagged", "torch.bfloat16") and got["list_list"] == ("jagged", "torch.int64")
    assert got["kv_vector"][0] == "jagged" and got["kv_int"][0] == "NonTensorStack"


def test_dense_layout_keeps_rows_of_one_shape_dense(client):
    got = containers(describe_seqflow(client, layout="dense"))
    assert got["dense_f32"][0] == got["dense_3d"][0] == got["strided_same"][0] == got["kv_vector"][0] == "dense"
    assert got["jagged"][0] == got["jagged_2d"][0] == "jagged"
    assert got["strided_ragged"][0] == "strided"
    with pytest.raises(ValueError, match="layout='transfer_queue'.*torch"):
        client.get_data(client.put({"x": np.zeros(2)}, partition_id="q"), format="numpy", layout="transfer_queue")
    with pytest.raises(ValueError, match="layout must be one of"):
        client.get_data(client.put({"x": np.zeros(2)}, partition_id="q"), layout="nested")


@pytest.fixture(scope="module")
def transfer_queue_results():
    """What the real TransferQueue returns for the probe's cases."""
    sys.path.insert(0, str(TOOLS_DIR))
    import reference_peer

    try:
        python = reference_peer.transferqueue_python()
    except reference_peer.ReferenceUnavailable as error:
        pytest.fail(f"TransferQueue {reference_peer.VERSION}'s reference venv cannot be made: {error}", pytrace=False)
    # The probe gets a temp dir of its own, to see that it removes its Ray
    # directory (one was once left in /tmp per run). Not pytest's tmp_path: Ray's
    # socket paths under it would exceed the 107-byte limit on a Unix socket path.
    with tempfile.TemporaryDirectory() as probe_tmp:
        done = subprocess.run([python, tq_layout_probe.__file__], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT, cwd=Path(tq_layout_probe.__file__).parent,
                              env={**os.environ, "TMPDIR": probe_tmp})
        assert done.returncode == 0, done.stderr[-3000:]
        left = [name for name in os.listdir(probe_tmp) if name.startswith("tqprobe")]
        assert not left, f"the probe left its Ray directory behind: {left}"
    return json.loads(done.stdout)


# numpy's str_ and bytes_ read back as str and bytes (equal values, base types).
NUMPY_STRING_TYPES = {"str_": "str", "bytes_": "bytes"}


def normalized(description):
    for row in description["rows"]:
        if "type" in row:
            row["type"] = NUMPY_STRING_TYPES.get(row["type"], row["type"])
    return description


def test_transfer_queue_layout_matches_the_real_transfer_queue(client, transfer_queue_results):
    ours = describe_seqflow(client)
    assert set(ours) == set(transfer_queue_results)
    for name in ours:
        assert normalized(ours[name]) == normalized(transfer_queue_results[name]), name


# ---- one split rule --------------------------------------------------------------------

def mixed_batch(n):
    return TensorDict({
        "dense": torch.arange(n * 2).reshape(n, 2),
        "jagged": torch.nested.as_nested_tensor([torch.arange(i % 3 + 1) for i in range(n)], layout=torch.jagged),
        "strided": torch.nested.nested_tensor([torch.full((i % 2 + 1, i % 3 + 1), i) for i in range(n)]),
        "text": NonTensorStack(*[f"t{i}" for i in range(n)]),
    }, batch_size=[n])


@pytest.mark.parametrize("fmt", ["tensordict", "torch"])
def test_split_batch_cuts_every_kind_of_field_like_the_metadata(client, fmt):
    n = 7
    meta = client.put(mixed_batch(n), partition_id="p")
    data = client.get_data(meta, format=fmt)
    parts = split_batch(data, meta, micro_batch_size=3)
    assert [m.size for _, m in parts] == [3, 2, 2]
    start = 0
    for part, part_meta in parts:
        stop = start + part_meta.size
        assert list(part_meta.global_indexes) == list(meta.global_indexes)[start:stop]
        get = part.get if fmt == "tensordict" else part.__getitem__
        assert get("dense").tolist() == [[2 * i, 2 * i + 1] for i in range(start, stop)]
        assert [r.tolist() for r in get("jagged").unbind()] == [list(range(i % 3 + 1)) for i in range(start, stop)]
        strided = get("strided")
        assert strided.is_nested and strided.layout == torch.strided
        assert [list(r.shape) for r in strided.unbind()] == [[i % 2 + 1, i % 3 + 1] for i in range(start, stop)]
        text = get("text")
        assert (text.tolist() if fmt == "tensordict" else text) == [f"t{i}" for i in range(start, stop)]
        start = stop


def test_streaming_dataset_yields_non_tensor_columns_per_row(client):
    n = 6
    client.put(mixed_batch(n), partition_id="train")
    for layout, dense in (("dense", "dense"), ("transfer_queue", "jagged")):
        client.reset_consumption("train")
        dataset = seqflow.StreamingDataset(batch_size=n, micro_batch_size=4, data_fields=["text", "strided", "dense"],
                                           partition_id="train", task_name="t", should_check_consumption_status=True,
                                           total_samples=n, client=client, empty_batch_sleep=0.01,
                                           data_layout=layout)
        parts = list(dataset)
        texts = [t for data, _ in parts for t in data.get("text").tolist()]
        assert sorted(texts) == sorted(f"t{i}" for i in range(n))
        assert [meta.size for _, meta in parts] == [3, 3]
        assert all(data.get("strided").layout == torch.strided for data, _ in parts)
        assert all(tq_layout_probe.describe(data.get("dense"))["container"] == dense for data, _ in parts)


def test_a_field_no_sample_holds_comes_back_empty_in_its_schema_shape():
    def empty(schema, fmt):
        meta = seqflow.BatchMeta(field_schema={"f": schema})  # no samples: nothing to fetch, no client needed
        return seqflow._seqflow.client.get_data(None, meta._native, meta.field_schema, ["f"], [False], fmt, "dense",
                                                True, True, False, lambda *kind: kind)["f"]

    assert empty({"dtype": "int16", "shape": [-1, 3], "is_nested": True}, "numpy") == []
    array = empty({"dtype": "int16", "shape": [-1, 3]}, "numpy")
    assert array.shape == (0, 0, 3) and array.dtype == np.int16
    tensor = empty({"dtype": "bfloat16", "shape": [4]}, "torch")
    assert tensor.shape == (0, 4) and tensor.dtype == torch.bfloat16
    assert empty({"is_non_tensor": True}, "tensordict") == ("stack", [])
    assert empty({"is_non_tensor": True}, "numpy") == []
    with pytest.raises(ValueError, match="field 'f' is bfloat16, which numpy cannot hold; use format='torch'"):
        empty({"dtype": "bfloat16", "shape": [4]}, "numpy")
