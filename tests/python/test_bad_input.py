"""Bad arguments to every public call raise TypeError or ValueError naming
the parameter and the value, with the same text in embedded and remote mode,
before anything is stored; never a message of nanobind, the standard library
or torch. One rule for names (fields, partition ids, keys, tag keys, task
names): a non-empty str of at most 1024 bytes of UTF-8, no NUL, no lone
surrogate. Configs: real bools, checked numbers, unknown keys named."""

from __future__ import annotations

import re

import numpy as np
import pytest

import seqflow
from remote_services import Cluster
from seqflow._checks import MAX_NAME_BYTES
from required import require

torch = require("torch")

# Texts of messages that must never reach a caller of the public API.
LEAKED = ("incompatible function arguments", "Invoked with", "std::", "bad_cast", "invalid literal",
          "has no attribute", "Cannot copy out of meta", "expected str, bytes or os.PathLike", "too large to convert",
          "embedded null")

LONG_NAME = "n" * (MAX_NAME_BYTES + 1)
LONG_UTF8_NAME = "é" * (MAX_NAME_BYTES // 2 + 1)  # fewer characters than the limit, more bytes
NAN = float("nan")


@pytest.fixture(scope="module")
def cluster():
    started = Cluster(1)
    yield started
    started.stop()


@pytest.fixture
def clients(cluster):
    """(embedded, remote), each holding partition "p" (field x, 4 samples) and
    key "k" in partition "kv"; the remote cluster emptied afterwards."""
    made = [seqflow.Client(), cluster.client()]
    for client in made:
        client.put({"x": np.arange(4)}, partition_id="p")
        client.kv_put("k", "kv", {"x": np.arange(2)}, tag={"t": 1})
    yield made
    for client in made:
        for partition in client.get_partition_list():
            client.clear_partition(partition)
        client.close()


def snapshot(client):
    parts = sorted(client.get_partition_list())
    return parts, client.stats(), client.kv_list()


def still_works(client):
    meta = client.put({"x": np.arange(2)}, partition_id="after")
    got = client.get_data(client.get_meta(["x"], 2, "after", task_name="check"), format="numpy")
    assert got["x"].tolist() == [0, 1] and meta.size == 2
    client.clear_partition("after")


def force_meta(client):
    return client.get_meta(["x"], 4, "p", mode="force_fetch")


def unit_meta_tensor():
    return torch.empty(2, 3, device="meta")


# (id, error type, text the message holds, call(client)).
CALLS = [
    # ---- names: partition ids
    ("put_partition_none", TypeError, "partition_id must be a str, got NoneType None",
     lambda c: c.put({"x": np.arange(1)}, partition_id=None)),
    ("put_partition_int", TypeError, "partition_id must be a str, got int 5",
     lambda c: c.put({"x": np.arange(1)}, partition_id=5)),
    ("put_partition_empty", ValueError, "partition_id must not be empty, got ''",
     lambda c: c.put({"x": np.arange(1)}, partition_id="")),
    ("put_partition_nul", ValueError, r"partition_id must not contain NUL ('\x00'), got 'a\x00b'",
     lambda c: c.put({"x": np.arange(1)}, partition_id="a\0b")),
    ("put_partition_surrogate", ValueError,
     r"partition_id must be valid UTF-8 (it holds a lone surrogate), got '\ud800'",
     lambda c: c.put({"x": np.arange(1)}, partition_id="\ud800")),
    ("put_partition_long", ValueError, f"partition_id must be at most 1024 bytes of UTF-8, has {MAX_NAME_BYTES + 1}",
     lambda c: c.put({"x": np.arange(1)}, partition_id=LONG_NAME)),
    ("put_partition_long_utf8", ValueError, f"must be at most 1024 bytes of UTF-8, has {2 * len(LONG_UTF8_NAME)}",
     lambda c: c.put({"x": np.arange(1)}, partition_id=LONG_UTF8_NAME)),
    ("get_meta_partition_none", TypeError, "partition_id must be a str, got NoneType None",
     lambda c: c.get_meta(["x"], 1, None, task_name="t")),
    ("clear_partition_none", TypeError, "partition_id must be a str, got NoneType None",
     lambda c: c.clear_partition(None)),
    ("clear_partition_nul", ValueError, r"partition_id must not contain NUL ('\x00'), got 'p\x00'",
     lambda c: c.clear_partition("p\0")),
    ("reset_partition_none", TypeError, "partition_id must be a str, got NoneType None",
     lambda c: c.reset_consumption(None)),
    ("consumption_partition_int", TypeError, "partition_id must be a str, got int 3",
     lambda c: c.get_consumption_status("t", 3)),
    ("check_consumption_partition_surrogate", ValueError, r"partition_id must be valid UTF-8",
     lambda c: c.check_consumption_status("t", "\udfff")),
    ("production_partition_none", TypeError, "partition_id must be a str, got NoneType None",
     lambda c: c.get_production_status(["x"], None)),
    ("check_production_partition_empty", ValueError, "partition_id must not be empty, got ''",
     lambda c: c.check_production_status(["x"], "")),
    ("kv_list_partition_int", TypeError, "partition_id must be a str, got int 5", lambda c: c.kv_list(5)),
    ("kv_list_partition_nul", ValueError, r"partition_id must not contain NUL", lambda c: c.kv_list("\0")),
    ("kv_put_partition_none", TypeError, "partition_id must be a str, got NoneType None",
     lambda c: c.kv_put("k2", None, {"x": np.arange(2)})),
    ("kv_clear_partition_int", TypeError, "partition_id must be a str, got int 5", lambda c: c.kv_clear(["k"], 5)),
    ("kv_keys_partition_none", TypeError, "partition_id must be a str, got NoneType None",
     lambda c: c.kv_keys([0], None)),
    ("kv_meta_partition_bytes", TypeError, "partition_id must be a str, got bytes b'kv'",
     lambda c: c.kv_meta(["k"], b"kv")),
    ("kv_batch_get_partition_nul", ValueError, r"partition_id must not contain NUL",
     lambda c: c.kv_batch_get(["k"], "kv\0")),
    # ---- names: fields
    ("put_field_nul", ValueError, r"field name must not contain NUL ('\x00'), got 'a\x00b'",
     lambda c: c.put({"a\0b": np.arange(2)}, partition_id="p")),
    ("put_field_empty", ValueError, "field name must not be empty, got ''",
     lambda c: c.put({"": np.arange(2)}, partition_id="p")),
    ("put_field_int", TypeError, "field name must be a str, got int 3",
     lambda c: c.put({3: np.arange(2)}, partition_id="p")),
    ("put_field_surrogate", ValueError, r"field name must be valid UTF-8 (it holds a lone surrogate), got '\udc00'",
     lambda c: c.put({"\udc00": np.arange(2)}, partition_id="p")),
    ("put_field_long", ValueError, "field name must be at most 1024 bytes",
     lambda c: c.put({LONG_NAME: np.arange(2)}, partition_id="p")),
    ("put_existing_field_nul", ValueError, r"field name must not contain NUL",
     lambda c: c.put({"y\0": np.arange(4)}, metadata=force_meta(c))),
    ("kv_put_field_nul", ValueError, r"field name must not contain NUL", lambda c: c.kv_put("k", "kv", {"a\0": 1})),
    ("kv_batch_put_field_surrogate", ValueError, "field name must be valid UTF-8",
     lambda c: c.kv_batch_put(["k"], "kv", {"\ud800": np.arange(1)})),
    ("get_meta_fields_none", TypeError, "data_fields must be a str or a list of str, got NoneType None",
     lambda c: c.get_meta(None, 1, "p", task_name="t")),
    ("get_meta_fields_item_none", TypeError, "data_fields[1] must be a str, got NoneType None",
     lambda c: c.get_meta(["x", None], 1, "p", task_name="t")),
    ("get_meta_fields_nul", ValueError, r"data_fields[0] must not contain NUL ('\x00'), got 'x\x00'",
     lambda c: c.get_meta(["x\0"], 1, "p", task_name="t")),
    ("get_data_fields_surrogate", ValueError, "fields[0] must be valid UTF-8",
     lambda c: c.get_data(force_meta(c), fields=["\ud800"])),
    ("production_fields_int", TypeError, "data_fields[0] must be a str, got int 1",
     lambda c: c.get_production_status([1], "p")),
    ("check_production_fields_none", TypeError, "data_fields must be a str or a list of str, got NoneType",
     lambda c: c.check_production_status(None, "p")),
    ("kv_batch_get_select_fields_empty", ValueError, "select_fields[0] must not be empty",
     lambda c: c.kv_batch_get(["k"], "kv", select_fields=[""])),
    # ---- names: keys, tag keys, task names
    ("kv_put_key_none", TypeError, "key must be a str, got NoneType None",
     lambda c: c.kv_put(None, "kv", {"x": np.arange(2)})),
    ("kv_put_key_nul", ValueError, r"key must not contain NUL ('\x00'), got 'a\x00b'",
     lambda c: c.kv_put("a\0b", "kv", {"x": np.arange(2)})),
    ("kv_put_key_long", ValueError, "key must be at most 1024 bytes", lambda c: c.kv_put(LONG_NAME, "kv", tag={})),
    ("kv_batch_put_keys_none", TypeError, "keys must be a str or a list of str, got NoneType None",
     lambda c: c.kv_batch_put(None, "kv", {"x": np.arange(2)})),
    ("kv_batch_put_key_item_int", TypeError, "keys[1] must be a str, got int 7",
     lambda c: c.kv_batch_put(["a", 7], "kv", {"x": np.arange(2)})),
    ("kv_batch_get_keys_int", TypeError, "keys must be a str or a list of str, got int 5",
     lambda c: c.kv_batch_get(5, "kv")),
    ("kv_meta_key_surrogate", ValueError, "keys[0] must be valid UTF-8", lambda c: c.kv_meta(["\ud800"], "kv")),
    ("kv_clear_keys_none", TypeError, "keys must be a str or a list of str, got NoneType None",
     lambda c: c.kv_clear(None, "kv")),
    ("kv_put_tag_str", TypeError, "tag must be a dict or None, got str 'x'", lambda c: c.kv_put("k", "kv", tag="x")),
    ("kv_put_tag_list", TypeError, "tag must be a dict or None, got list [1]", lambda c: c.kv_put("k", "kv", tag=[1])),
    ("kv_put_tag_key_int", TypeError, "tag key must be a str, got int 1", lambda c: c.kv_put("k", "kv", tag={1: 2})),
    ("kv_put_tag_key_surrogate", ValueError, r"tag key must be valid UTF-8 (it holds a lone surrogate), got '\ud800'",
     lambda c: c.kv_put("k", "kv", tag={"\ud800": 1})),
    ("kv_put_tag_key_nul", ValueError, r"tag key must not contain NUL", lambda c: c.kv_put("k", "kv", tag={"a\0": 1})),
    ("kv_batch_put_tags_item_int", TypeError, "tags[1] must be a dict or None, got int 5",
     lambda c: c.kv_batch_put(["a", "b"], "kv", tags=[{}, 5])),
    ("kv_batch_put_tags_str", TypeError, "tags must be a list of dicts (one per key) or None, got str 'ab'",
     lambda c: c.kv_batch_put(["a", "b"], "kv", tags="ab")),
    ("kv_batch_put_no_keys", ValueError, "kv_batch_put of no keys: keys must name at least one sample",
     lambda c: c.kv_batch_put([], "kv", {"x": np.arange(0)})),
    ("kv_batch_put_no_keys_tags_only", ValueError, "kv_batch_put of no keys",
     lambda c: c.kv_batch_put([], "kv", tags=[])),
    ("kv_batch_put_tag_key_empty", ValueError, "tags[0] key must not be empty",
     lambda c: c.kv_batch_put(["a"], "kv", tags=[{"": 1}])),
    ("get_meta_task_int", TypeError, "task_name must be a str, got int 5",
     lambda c: c.get_meta(["x"], 1, "p", task_name=5)),
    ("get_meta_task_nul", ValueError, r"task_name must not contain NUL",
     lambda c: c.get_meta(["x"], 1, "p", task_name="t\0")),
    ("reset_task_int", TypeError, "task_name must be a str, got int 5", lambda c: c.reset_consumption("p", 5)),
    ("consumption_task_none", TypeError, "task_name must be a str, got NoneType None",
     lambda c: c.get_consumption_status(None, "p")),
    ("check_consumption_task_surrogate", ValueError, "task_name must be valid UTF-8",
     lambda c: c.check_consumption_status("\ud800", "p")),
    ("sampling_key_surrogate", ValueError, "sampling_config key must be valid UTF-8",
     lambda c: c.get_meta(["x"], 1, "p", task_name="t", sampling_config={"\ud800": 1})),
    ("custom_meta_key_surrogate", ValueError, r"""custom_meta[0] has key '\ud800', which cannot be encoded as UTF-8""",
     lambda c: c.put({"x": np.arange(1)}, partition_id="p", custom_meta=[{"\ud800": 1}])),
    ("nested_tag_key_surrogate", ValueError, r"""tags[0]["a"] has key '\udc00', which cannot be encoded as UTF-8""",
     lambda c: c.kv_put("k", "kv", tag={"a": {"\udc00": 1}})),
    # ---- numbers
    ("batch_size_2_63", ValueError, "batch_size must be <= 9223372036854775807, got 9223372036854775808",
     lambda c: c.get_meta(["x"], 2**63, "p", task_name="t")),
    ("batch_size_none", TypeError, "batch_size must be an integer, got None",
     lambda c: c.get_meta(["x"], None, "p", task_name="t")),
    ("batch_size_float", TypeError, "batch_size must be an integer, got 1.5",
     lambda c: c.get_meta(["x"], 1.5, "p", task_name="t")),
    ("batch_size_str", TypeError, "batch_size must be an integer, got '2'",
     lambda c: c.get_meta(["x"], "2", "p", task_name="t")),
    ("batch_index_2_63", ValueError, "sampling_config['batch_index'] must be <= 9223372036854775807",
     lambda c: c.get_meta(["x"], 1, "p", task_name="t", sampling_config={"batch_index": 2**63})),
    ("batch_index_negative", ValueError, "sampling_config['batch_index'] must be >= 0, got -1",
     lambda c: c.get_meta(["x"], 1, "p", task_name="t", sampling_config={"batch_index": -1})),
    ("batch_index_nan", TypeError, "sampling_config['batch_index'] must be an integer, got nan",
     lambda c: c.get_meta(["x"], 1, "p", task_name="t", sampling_config={"batch_index": NAN})),
    ("dp_rank_2_63", ValueError, "sampling_config['dp_rank'] must be <= 9223372036854775807",
     lambda c: c.get_meta(["x"], 1, "p", task_name="t", sampling_config={"dp_rank": 2**63})),
    ("timeout_nan", ValueError, "timeout must be a finite number of seconds >= 0 and <= 1e+09, got nan",
     lambda c: c.get_meta(["x"], 1, "p", task_name="t", timeout=NAN)),
    ("timeout_negative", ValueError, "timeout must be a finite number of seconds >= 0 and <= 1e+09, got -1",
     lambda c: c.get_meta(["x"], 1, "p", task_name="t", timeout=-1)),
    # Finite, but a deadline that far out would overflow the engine's clock.
    ("timeout_huge", ValueError, "timeout must be a finite number of seconds >= 0 and <= 1e+09, got 1e+300",
     lambda c: c.get_meta(["x"], 1, "p", task_name="t", polling=True, timeout=1e300)),
    ("timeout_str", TypeError, "timeout must be a number of seconds, got '5'",
     lambda c: c.get_meta(["x"], 1, "p", task_name="t", timeout="5")),
    ("kv_keys_2_63", ValueError, "global_indexes[1] must be <= 9223372036854775807, got 9223372036854775808",
     lambda c: c.kv_keys([0, 2**63], "kv")),
    ("kv_keys_uint64", ValueError, "global_indexes[0] must be <= 9223372036854775807",
     lambda c: c.kv_keys(np.array([2**63], dtype=np.uint64), "kv")),
    ("kv_keys_nan", TypeError, "global_indexes[0] must be an integer, got nan", lambda c: c.kv_keys([NAN], "kv")),
    ("kv_keys_nested", TypeError, "global_indexes[0] must be an integer, got [0]", lambda c: c.kv_keys([[0]], "kv")),
    ("kv_keys_none", TypeError, "global_indexes must be an integer or a list of integers, got None",
     lambda c: c.kv_keys(None, "kv")),
    ("policy_version_2_63", ValueError, "version must be <= 9223372036854775807, got 9223372036854775808",
     lambda c: c.set_policy_version(2**63)),
    ("policy_version_float", TypeError, "version must be an integer, got 1.5", lambda c: c.set_policy_version(1.5)),
    ("policy_version_bool", TypeError, "version must be an integer, got True", lambda c: c.set_policy_version(True)),
    ("policy_versions_both", ValueError, "policy_versions takes global_indexes or keys, exactly one of them",
     lambda c: c.policy_versions("kv", [0], keys=["a"])),
    ("field_beyond_64_bits", ValueError, "field 'big' holds numbers that fit no 64-bit dtype",
     lambda c: c.put({"big": [1, 2**64]}, partition_id="p")),
    # ---- bools and choices
    ("polling_str", TypeError, "polling must be True or False, got 'false'",
     lambda c: c.get_meta(["x"], 1, "p", task_name="t", polling="false")),
    ("copy_str", TypeError, "copy must be True or False, got 'no'", lambda c: c.get_data(force_meta(c), copy="no")),
    ("allow_pickle_str", TypeError, "allow_pickle must be True or False, got 'yes'",
     lambda c: c.put({"o": [object()]}, partition_id="p", allow_pickle="yes")),
    # Checked also where no field would be pickled (a tag alone).
    ("kv_put_allow_pickle_tag_only", TypeError, "allow_pickle must be True or False, got 'yes'",
     lambda c: c.kv_put("k", "kv", tag={"a": 1}, allow_pickle="yes")),
    ("kv_batch_put_allow_pickle_tags_only", TypeError, "allow_pickle must be True or False, got 1",
     lambda c: c.kv_batch_put(["k"], "kv", tags=[{"a": 1}], allow_pickle=1)),
    # [] is a wrong length for rows, not "no custom_meta".
    ("put_custom_meta_empty", ValueError, "custom_meta holds 0 entries for 2 samples",
     lambda c: c.put({"x": np.arange(2)}, partition_id="p", custom_meta=[])),
    ("per_field_int", TypeError, "per_field must be True or False, got 1",
     lambda c: c.get_production_status(["x"], "p", per_field=1)),
    ("create_str", TypeError, "create must be True or False, got 'yes'",
     lambda c: c.kv_meta(["new"], "kv", create="yes")),
    ("mode_none", ValueError, "mode must be one of ('fetch', 'force_fetch', 'insert'), got None",
     lambda c: c.get_meta(["x"], 1, "p", mode=None, task_name="t")),
    ("missing_none", ValueError, "missing must be one of ('error', 'skip'), got None",
     lambda c: c.kv_meta(["k"], "kv", missing=None)),
    # ---- what belongs where: a BatchMeta, a list, data of a storable kind
    ("get_data_str", TypeError, "metadata must be a BatchMeta, got str 'x'", lambda c: c.get_data("x")),
    ("set_custom_meta_str", TypeError, "metadata must be a BatchMeta, got str 'x'", lambda c: c.set_custom_meta("x")),
    ("clear_samples_none", TypeError, "metadata must be a BatchMeta, got NoneType None",
     lambda c: c.clear_samples(None)),
    ("put_metadata_dict", TypeError, "metadata must be a BatchMeta or None, got dict {}",
     lambda c: c.put({"x": np.arange(1)}, metadata={})),
    ("kv_batch_get_by_meta_str", TypeError, "meta must be a KVBatchMeta, got str 'x'",
     lambda c: c.kv_batch_get_by_meta("x")),
    ("put_data_none", TypeError, "data must be a TensorDict or a dict of fields, got NoneType None",
     lambda c: c.put(None, partition_id="p")),
    ("kv_put_fields_list", TypeError, "fields must be a TensorDict or a dict of fields, got list [1]",
     lambda c: c.kv_put("k", "kv", [1])),
    ("sampling_config_zero", TypeError, "sampling_config must be a dict or None, got int 0",
     lambda c: c.get_meta(["x"], 1, "p", task_name="t", sampling_config=0)),
    ("kv_keys_bool", TypeError, "global_indexes must be an integer or a list of integers, got True",
     lambda c: c.kv_keys(True, "kv")),
    ("kv_keys_str", TypeError, "global_indexes must be an integer or a list of integers, got '0'",
     lambda c: c.kv_keys("0", "kv")),
    ("custom_meta_int", TypeError, "custom_meta must be a list of dicts (one per sample) or None, got int 5",
     lambda c: c.put({"x": np.arange(1)}, partition_id="p", custom_meta=5)),
    ("custom_meta_item_none", TypeError, "custom_meta[0] must be a dict, got NoneType None",
     lambda c: c.put({"x": np.arange(1)}, partition_id="p", custom_meta=[None])),
    # Top-level custom_meta keys follow the name rule, as tags' keys do.
    ("custom_meta_key_empty", ValueError, "custom_meta[1] key must not be empty, got ''",
     lambda c: c.put({"x": np.arange(2)}, partition_id="p", custom_meta=[{}, {"": 1}])),
    ("custom_meta_key_nul", ValueError, r"custom_meta[0] key must not contain NUL ('\x00'), got 'a\x00'",
     lambda c: c.put({"x": np.arange(1)}, partition_id="p", custom_meta=[{"a\0": 1}])),
    ("datetime_field", ValueError, 'field "d" has dtype datetime64[D], which seqflow does not store',
     lambda c: c.put({"d": np.array(["2020-01-01", "2020-01-02"], dtype="datetime64[D]")}, partition_id="p")),
    ("structured_field", ValueError, 'field "s" has dtype [(\'a\', \'<i4\'), (\'b\', \'<f4\')], which seqflow '
     "does not store", lambda c: c.put({"s": np.zeros(2, dtype=[("a", "<i4"), ("b", "<f4")])}, partition_id="p")),
    ("ragged_object_arrays", ValueError, 'field "r" has dtype object, which seqflow does not store',
     lambda c: c.put({"r": [np.array([1, None]), np.array([2])]}, partition_id="p")),
    ("meta_tensor", ValueError, "field 'm' is a tensor on the meta device, which holds no data",
     lambda c: c.put({"m": unit_meta_tensor()}, partition_id="p")),
    ("kv_meta_tensor", ValueError, "field 'm' is a tensor on the meta device",
     lambda c: c.kv_put("k", "kv", {"m": torch.empty(3, device="meta")})),
    ("sparse_tensor", ValueError, "field 'sp' is a tensor of layout torch.sparse_coo",
     lambda c: c.put({"sp": torch.eye(2).to_sparse()}, partition_id="p")),
    ("complex_tensor", ValueError, 'field "c" has dtype complex64, which seqflow does not store',
     lambda c: c.put({"c": torch.zeros(2, dtype=torch.complex64)}, partition_id="p")),
    # ---- checkpoints
    ("save_directory_none", TypeError, "directory must be a str or an os.PathLike, got NoneType None",
     lambda c: c.save_checkpoint(None)),
    ("save_directory_nul", ValueError, r"directory must not contain NUL", lambda c: c.save_checkpoint("/tmp/a\0b")),
    ("save_include_storage_str", TypeError, "include_storage must be True or False, got 'no'",
     lambda c: c.save_checkpoint("/tmp/never-written", include_storage="no")),
    ("save_metadata_list", TypeError, "metadata must be a dict (JSON-able) or None, got list [1]",
     lambda c: c.save_checkpoint("/tmp/never-written", metadata=[1])),
    ("load_directory_int", TypeError, "directory must be a str or an os.PathLike, got int 5",
     lambda c: c.load_checkpoint(5)),
]


@pytest.mark.parametrize("error, text, call", [case[1:] for case in CALLS], ids=[case[0] for case in CALLS])
def test_bad_argument_raises_the_same_clear_error_in_both_modes_and_changes_nothing(clients, error, text, call):
    messages = []
    for client in clients:
        before = snapshot(client)
        with pytest.raises(error, match=re.escape(text)) as raised:
            call(client)
        message = str(raised.value)
        assert not any(leak in message for leak in LEAKED), message
        assert snapshot(client) == before
        still_works(client)
        messages.append(message)
    embedded, remote = messages
    assert embedded == remote


def test_a_wrong_type_is_a_type_error_and_a_value_error():
    """A wrong type raises TypeError; callers that caught ValueError for it
    (seqflow's error before) still do."""
    client = seqflow.Client()
    with pytest.raises(TypeError) as raised:
        client.clear_partition(None)
    assert isinstance(raised.value, ValueError)
    client.close()


def test_module_level_calls_check_their_arguments():
    seqflow.close()
    seqflow.init()
    with pytest.raises(TypeError, match=re.escape("metadata must be a BatchMeta, got str 'x'")):
        seqflow.get_data("x")
    with pytest.raises(TypeError, match=re.escape("partition_id must be a str, got NoneType None")):
        seqflow.put({"x": np.arange(1)}, partition_id=None)
    still_works(seqflow.get_client())
    seqflow.close()


def test_names_at_the_limit_and_beyond_ascii_are_accepted(clients):
    at_limit = "n" * MAX_NAME_BYTES
    for client in clients:
        client.kv_put(at_limit, "kv", {"x": np.arange(2)}, tag={"é€": 1})
        client.put({"é": np.arange(1)}, partition_id=at_limit)
        assert client.kv_list("kv")["kv"][at_limit] == {"é€": 1}
        assert client.get_production_status(["é"], at_limit)[1].tolist() == [True]


def test_a_big_endian_array_is_stored_as_its_values(clients):
    for client in clients:
        meta = client.put({"b": np.arange(3, dtype=">i4")}, partition_id="be")
        assert client.get_data(meta, format="numpy")["b"].tolist() == [0, 1, 2]


# ---- configs ----------------------------------------------------------------------

# (id, error type, text the message holds, config).
CONFIGS = [
    ("str", TypeError, "config must be a dict or an OmegaConf config, got str 'garbage'", "garbage"),
    ("int", TypeError, "config must be a dict or an OmegaConf config, got int 5", 5),
    ("polling_str", TypeError, "controller.polling_mode must be True or False, got 'false'",
     {"controller": {"polling_mode": "false"}}),
    ("polling_int", TypeError, "controller.polling_mode must be True or False, got 1",
     {"controller": {"polling_mode": 1}}),
    ("max_bytes_str", TypeError, "storage.max_bytes must be an integer, got 'x'", {"storage": {"max_bytes": "x"}}),
    ("max_samples_negative", ValueError, "storage.max_samples must be >= 0, got -1", {"storage": {"max_samples": -1}}),
    ("max_samples_2_64", ValueError, "storage.max_samples must be <= 9223372036854775807",
     {"storage": {"max_samples": 2**64}}),
    ("total_storage_size_float", TypeError, "backend.SimpleStorage.total_storage_size must be an integer, got 1.5",
     {"backend": {"SimpleStorage": {"total_storage_size": 1.5}}}),
    ("timeout_str", TypeError, "timeout must be a number of seconds, got '5'", {"timeout": "5"}),
    ("timeout_nan", ValueError, "controller.timeout must be a finite number of seconds > 0 and <= 1e+09, got nan",
     {"controller": {"timeout": NAN}}),
    ("local_copy_str", TypeError, "local_copy must be True or False, got 'yes'", {"local_copy": "yes"}),
    ("busy_poll_huge", ValueError, "busy_poll_us must be <= 1000000, got 10000000", {"busy_poll_us": 10**7}),
    ("sampler_args_list", TypeError, "controller.sampler_args must be a dict, got list [1]",
     {"controller": {"sampler_args": [1]}}),
    ("section_str", TypeError, "config key 'controller' must be a dict, got str 'x'", {"controller": "x"}),
    ("unknown_top_key", ValueError, "config key 'controlr' is unknown", {"controlr": {"polling_mode": True}}),
    ("unknown_nested_key", ValueError, "config key 'controller.poling_mode' is unknown",
     {"controller": {"poling_mode": True}}),
    ("key_int", TypeError, "config keys must be str, got 1 in config", {1: 2}),
    ("address_int", TypeError, "controller.address must name the controller service", {"controller": {"address": 5}}),
]


@pytest.mark.parametrize("error, text, config", [case[1:] for case in CONFIGS], ids=[case[0] for case in CONFIGS])
def test_bad_config_raises_naming_the_key_and_value(error, text, config):
    seqflow.close()
    for make in (seqflow.init, seqflow.Client.from_config):
        with pytest.raises(error, match=re.escape(text)) as raised:
            make(config)
        assert not any(leak in str(raised.value) for leak in LEAKED)
    with pytest.raises(RuntimeError, match="init"):
        seqflow.get_client()  # the failed init left no default client
    client = seqflow.init({"controller": {"polling_mode": True}})
    still_works(client)
    seqflow.close()


def test_transfer_queue_configs_keep_working():
    """TransferQueue's own settings (storage backends, metrics) are accepted."""
    config = {"controller": {"sampler": "SequentialSampler", "polling_mode": True},
              "backend": {"storage_backend": "SimpleStorage",
                          "SimpleStorage": {"total_storage_size": 8, "num_data_storage_units": 2}},
              "metrics": {"enabled": False}, "timeout": 5}
    client = seqflow.Client.from_config(config)
    assert client.polling_mode and client.timeout == 5.0
    still_works(client)
    omegaconf = require("omegaconf")
    assert seqflow.Client.from_config(omegaconf.OmegaConf.create(config)).polling_mode


# (id, error type, text the message holds, call()).
CONSTRUCTORS = [
    ("client_polling_str", TypeError, "polling_mode must be True or False, got 'false'",
     lambda: seqflow.Client(polling_mode="false")),
    ("client_max_bytes_2_64", ValueError, "max_bytes must be <= 9223372036854775807",
     lambda: seqflow.Client(max_bytes=2**64)),
    ("client_sampler_args_str", TypeError, "sampler_args must be a dict or None, got str 'x'",
     lambda: seqflow.Client(sampler_args="x")),
    ("client_timeout_str", TypeError, "timeout must be a number of seconds, got '5'",
     lambda: seqflow.Client(timeout="5")),
    ("remote_polling_str", TypeError, "polling_mode must be True or False, got 'false'",
     lambda: seqflow.RemoteConfig("tcp://127.0.0.1:1", polling_mode="false")),
    ("remote_timeout_inf", ValueError, "timeout must be a finite number of seconds > 0 and <= 1e+09, got inf",
     lambda: seqflow.RemoteConfig("tcp://127.0.0.1:1", timeout=float("inf"))),
    ("remote_key_file_int", TypeError, "client_key_file must be a str or an os.PathLike, got int 5",
     lambda: seqflow.RemoteConfig("tcp://127.0.0.1:1", server_public_key_file="s.pub", client_key_file=5)),
    ("init_name_nul", ValueError, r"name must not contain NUL", lambda: seqflow.init(name="a\0")),
    ("init_units_zero", ValueError, "num_storage_units must be >= 1, got 0",
     lambda: seqflow.init(backend="ray", num_storage_units=0)),
    ("batch_meta_partition_none", TypeError, "partition_ids[0] must be a str, got NoneType None",
     lambda: seqflow.BatchMeta([0], [None])),
    ("batch_meta_index_2_63", ValueError, "global_indexes has values beyond the int64 range",
     lambda: seqflow.BatchMeta(np.array([2**63], dtype=np.uint64), ["p"])),
    ("batch_meta_field_nul", ValueError, r"field_schema key must not contain NUL",
     lambda: seqflow.BatchMeta([0], ["p"], field_schema={"a\0": {}})),
    ("kv_batch_meta_key_none", TypeError, "keys[0] must be a str, got NoneType None",
     lambda: seqflow.KVBatchMeta(keys=[None], tags=[{}])),
    ("kv_batch_meta_partition_int", TypeError, "partition_id must be a str, got int 5",
     lambda: seqflow.KVBatchMeta(keys=["k"], tags=[{}], partition_id=5)),
    ("kv_batch_meta_field_surrogate", ValueError, "fields[0] must be valid UTF-8",
     lambda: seqflow.KVBatchMeta(keys=["k"], tags=[{}], fields=["\ud800"])),
]


@pytest.mark.parametrize("error, text, call", [case[1:] for case in CONSTRUCTORS],
                         ids=[case[0] for case in CONSTRUCTORS])
def test_bad_constructor_arguments_raise_naming_the_parameter(error, text, call):
    seqflow.close()
    with pytest.raises(error, match=re.escape(text)) as raised:
        call()
    assert not any(leak in str(raised.value) for leak in LEAKED)
    with pytest.raises(RuntimeError, match="init"):
        seqflow.get_client()


def test_jagged_values_and_offsets_that_disagree_are_refused():
    """The native put checks a jagged field's offsets itself (torch's nested
    tensors never hand over bad ones; a caller of the binding may)."""
    client = seqflow.Client()
    native = client._connected()
    values = np.arange(6.0, dtype=np.float32)
    for offsets, pattern in [([0, 4, 7], r"offsets\[2\] = 7 is outside \[4, 6\]; offsets ascend within the rows"),
                             ([0, 3, 2], r"offsets\[2\] = 2 is outside \[3, 6\]"),
                             ([-1, 2], r"offsets\[0\] = -1 is outside \[0, 6\]"), ([7], r"offsets\[0\] = 7"),
                             ([], "needs values with a first dimension and offsets")]:
        with pytest.raises(ValueError, match=pattern):
            native.put_new("p", [("x", values, np.array(offsets, dtype=np.int64), False)], None)
    assert client.stats()["samples"] == 0
