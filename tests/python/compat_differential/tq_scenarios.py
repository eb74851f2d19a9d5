"""Scenarios run on TransferQueue 0.1.11 and on seqflow's transfer_queue
(``seqflow.compat.install_as_transfer_queue()``) by tq_differential_driver.py.

Each scenario takes an ``Env`` (the ``transfer_queue`` module, the config
``init`` returned, a scratch directory) and returns plain data (JSON:
lists, dicts, numbers, strings) describing what the calls returned:
values, dtypes, shapes, container type names, and for a call that raised,
the exception's type name and whether its message is non-empty. The same
module is imported by both interpreters, so it imports nothing of either.

Scenarios are grouped by the controller config they need (TransferQueue's
sampler and polling mode are fixed when the system starts); the driver
starts one system per group and runs the group's scenarios in order.
Global indexes are reported as labels (``Env.track``: their order of
appearance in the scenario's own puts) so that one scenario's allocation
does not shift the next scenario's results; ``index_allocation`` checks
the raw numbers once.
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
from tensordict import NonTensorData, NonTensorStack, TensorDict


@dataclass
class Group:
    sampler: Callable[[Any], Any]  # transfer_queue module -> the controller's sampler
    polling_mode: bool


# The sampler groups use polling mode: TransferQueue's blocking get_meta waits
# (minutes) for a rank whose share the first rank already consumed.
GROUPS = {
    "sequential": Group(lambda tq: tq.SequentialSampler(), polling_mode=False),
    "polling": Group(lambda tq: tq.SequentialSampler(), polling_mode=True),
    "grpo": Group(lambda tq: tq.GRPOGroupNSampler(n_samples_per_prompt=2), polling_mode=True),
    "rank_aware": Group(lambda tq: tq.RankAwareSampler(), polling_mode=True),
    "seqlen_balanced": Group(lambda tq: tq.SeqlenBalancedSampler(n_samples_per_prompt=2, dp_size=2),
                             polling_mode=True),
}

# name -> (group name, function); in definition order, which is run order within a group
SCENARIOS: dict[str, tuple[str, Callable]] = {}


def scenario(group: str, name: str | None = None):
    def register(function):
        SCENARIOS[name or function.__name__] = (group, function)
        return function

    return register


def _raised(error: BaseException) -> dict:
    """An exception as plain data: its type, the built-in types an except
    clause can catch it as, and whether it says anything."""
    return {"raises": type(error).__name__, "message_nonempty": bool(str(error)),
            "catchable_as": sorted(c.__name__ for c in type(error).__mro__ if c.__module__ == "builtins")}


@dataclass
class Env:
    tq: Any
    conf: Any
    scratch: str
    labels: dict = field(default_factory=dict)

    # ---- global indexes as labels ------------------------------------------------
    def track(self, meta) -> list:
        """Labels the indexes of a put's result in order of first appearance."""
        for index in meta.global_indexes:
            self.labels.setdefault(int(index), len(self.labels))
        return self.label(meta.global_indexes)

    def label(self, indexes) -> list:
        if isinstance(indexes, torch.Tensor):
            indexes = indexes.tolist()
        return [self.labels.get(int(i), f"untracked:{int(i)}") for i in indexes]

    # ---- descriptions ------------------------------------------------------------------
    def meta(self, meta) -> dict:
        """A BatchMeta (or anything else) as plain data."""
        if type(meta).__name__ != "BatchMeta":
            return self.describe(meta)
        described = {"type": "BatchMeta", "size": meta.size, "len": len(meta),
                     "indexes": self.label(meta.global_indexes), "partition_ids": list(meta.partition_ids),
                     "field_names": list(meta.field_names), "is_ready": bool(meta.is_ready),
                     "extra_info": self.describe(meta.get_all_extra_info()),
                     "custom_meta": self.describe(meta.get_all_custom_meta()),
                     "production_status": self.describe(meta.production_status)}
        return described

    def schema(self, meta) -> dict:
        """What BatchMeta.get_dtypes / get_shapes say of each field (the data type scenarios ask)."""
        return {"dtypes": {f: self.attempt(meta.get_dtypes, f) for f in meta.field_names},
                "shapes": {f: self.attempt(meta.get_shapes, f) for f in meta.field_names}}

    def kv_meta(self, meta) -> dict:
        return {"type": type(meta).__name__, "keys": list(meta.keys), "tags": self.describe(meta.tags),
                "partition_id": meta.partition_id,
                "fields": None if meta.fields is None else list(meta.fields),
                "extra_info": self.describe(meta.extra_info), "size": meta.size}

    def status(self, pair) -> dict:
        """(global indexes, status) of get_consumption_status / get_production_status."""
        indexes, status = pair
        return {"indexes": None if indexes is None else self.label(indexes), "status": self.describe(status),
                "index_type": type(indexes).__name__}

    def describe(self, value) -> Any:
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, bytes):
            return {"bytes": value.hex()}
        if isinstance(value, torch.dtype):
            return {"torch_dtype": str(value)}
        if isinstance(value, torch.Size):
            return {"torch_size": list(value)}
        if isinstance(value, torch.Tensor):
            if value.is_nested:
                return {"type": "Tensor", "nested": True, "layout": str(value.layout), "dtype": str(value.dtype),
                        "items": [self.describe(t) for t in value.unbind(0)]}
            data = value.detach()
            values = (data.float() if data.dtype == torch.bfloat16 else data).tolist()
            return {"type": "Tensor", "dtype": str(data.dtype), "shape": list(data.shape), "values": values}
        if isinstance(value, np.ndarray):
            return {"type": "ndarray", "dtype": str(value.dtype), "shape": list(value.shape),
                    "values": self.describe(value.tolist())}
        if isinstance(value, np.generic):
            return {"type": type(value).__name__, "value": value.item()}
        if isinstance(value, NonTensorData):
            return {"type": "NonTensorData", "batch_size": list(value.batch_size), "data": self.describe(value.data)}
        if isinstance(value, NonTensorStack):
            return {"type": "NonTensorStack", "batch_size": list(value.batch_size),
                    "items": self.describe(value.tolist())}
        if isinstance(value, TensorDict):
            keys = list(value.keys())
            return {"type": type(value).__name__, "batch_size": list(value.batch_size), "keys": keys,
                    "stored_types": {k: type(value.get(k)).__name__ for k in keys},
                    "fields": {k: self.describe(value[k]) for k in keys}}
        if type(value).__name__ == "BatchMeta":
            return self.meta(value)
        if type(value).__name__ == "KVBatchMeta":
            return self.kv_meta(value)
        if isinstance(value, dict):
            return {"dict": {str(k): self.describe(v) for k, v in value.items()}}
        if isinstance(value, (list, tuple)):
            return {"seq": type(value).__name__, "items": [self.describe(v) for v in value]}
        return {"object": type(value).__name__}

    def attempt_plain(self, function) -> dict:
        """attempt() for a function that returns plain data already (a described meta, labels)."""
        try:
            return {"returns": function()}
        except Exception as error:
            return _raised(error)

    def force_fetch(self, fields: list, partition: str):
        """Every sample of the partition (get_meta mode="force_fetch"), in put order: TransferQueue lists
        them in the iteration order of a Python set of their indexes, which depends on the index values."""
        meta = self.tq.get_client().get_meta(data_fields=fields, batch_size=1, partition_id=partition,
                                             mode="force_fetch")
        labels = self.label(meta.global_indexes)
        return meta.select_samples(sorted(range(len(labels)), key=lambda i: (isinstance(labels[i], str), str(labels[i]).zfill(12))))

    def attempt(self, function, *args, **kwargs) -> dict:
        """What the call returned (described), or which exception it raised."""
        try:
            return {"returns": self.describe(function(*args, **kwargs))}
        except Exception as error:
            return _raised(error)

    def partitions(self, prefix: str) -> list:
        """This scenario's partitions in get_partition_list (others' are not its business)."""
        return sorted(p for p in self.tq.get_client().get_partition_list() if p.startswith(prefix))


def _rows(n: int, width: int = 3, start: int = 0) -> torch.Tensor:
    return torch.arange(start, start + n * width).reshape(n, width)


# ==================== the life cycle (SequentialSampler, blocking get_meta) ====================
@scenario("sequential")
def index_allocation(env: Env):
    """Raw global indexes in a fresh system: consecutive per put, freed by clear_partition and reused."""
    client = env.tq.get_client()
    out = {"a": client.put(TensorDict({"x": _rows(3)}, batch_size=3), partition_id="alloc_a").global_indexes,
           "b": client.put(TensorDict({"x": _rows(2)}, batch_size=2), partition_id="alloc_b").global_indexes}
    client.clear_partition("alloc_a")
    out["c_after_clear"] = client.put(TensorDict({"x": _rows(4)}, batch_size=4), partition_id="alloc_c").global_indexes
    out["b_again"] = client.put(TensorDict({"x": _rows(1)}, batch_size=1), partition_id="alloc_b").global_indexes
    out["fetch_order_after_reuse"] = client.get_meta(data_fields=["x"], batch_size=4, partition_id="alloc_c",
                                                     task_name="t").global_indexes
    for partition in ("alloc_b", "alloc_c"):
        client.clear_partition(partition)
    return {k: [int(i) for i in v] for k, v in out.items()}


@scenario("sequential")
def lifecycle(env: Env):
    client, out = env.tq.get_client(), {}
    put = client.put(TensorDict({"prompt": _rows(4)}, batch_size=4), partition_id="life")
    env.track(put)
    out["put"] = env.meta(put)
    first = client.get_meta(data_fields=["prompt"], batch_size=2, partition_id="life", task_name="gen")
    second = client.get_meta(data_fields=["prompt"], batch_size=2, partition_id="life", task_name="gen")
    out["get_meta_first"], out["get_meta_second"] = env.meta(first), env.meta(second)
    out["get_data_first"] = env.describe(client.get_data(first))
    out["consumption_gen"] = env.status(client.get_consumption_status("gen", "life"))
    out["consumption_other_task"] = env.status(client.get_consumption_status("other", "life"))
    out["check_consumption_gen"] = client.check_consumption_status("gen", "life")
    out["check_consumption_other"] = client.check_consumption_status("other", "life")
    out["production_prompt"] = env.status(client.get_production_status(["prompt"], "life"))
    answered = client.put(TensorDict({"response": torch.tensor([[0.5, 1.5], [2.5, 3.5]])}, batch_size=2),
                          metadata=first)
    out["put_with_metadata"] = env.meta(answered)
    out["production_both"] = env.status(client.get_production_status(["prompt", "response"], "life"))
    out["check_production_response"] = client.check_production_status(["response"], "life")
    out["check_production_prompt"] = client.check_production_status(["prompt"], "life")
    trained = client.get_meta(data_fields=["prompt", "response"], batch_size=2, partition_id="life",
                              task_name="train")
    out["get_meta_both_fields"] = env.meta(trained)
    out["get_data_both_fields"] = env.describe(client.get_data(trained))
    trained.update_custom_meta([{"score": 1.0, "tag": "a"}, {"score": 2.0}])
    out["set_custom_meta"] = env.attempt(client.set_custom_meta, trained)
    everything = env.force_fetch(["prompt"], "life")
    out["force_fetch_after_custom_meta"] = env.meta(everything)
    out["reset_consumption_gen"] = env.attempt(client.reset_consumption, "life", "gen")
    out["consumption_gen_after_reset"] = env.status(client.get_consumption_status("gen", "life"))
    again = client.get_meta(data_fields=["prompt"], batch_size=4, partition_id="life", task_name="gen")
    out["get_meta_after_reset"] = env.meta(again)
    out["reset_consumption_all_tasks"] = env.attempt(client.reset_consumption, "life")
    out["consumption_train_after_reset_all"] = env.status(client.get_consumption_status("train", "life"))
    out["partitions"] = env.partitions("life")
    out["clear_samples"] = env.attempt(client.clear_samples, first)
    after_clear = env.force_fetch(["prompt"], "life")
    out["force_fetch_after_clear_samples"] = env.meta(after_clear)
    out["production_after_clear_samples"] = env.status(client.get_production_status(["prompt"], "life"))
    out["get_data_after_clear_samples"] = env.describe(client.get_data(after_clear))
    out["clear_partition"] = env.attempt(client.clear_partition, "life")
    out["partitions_after_clear"] = env.partitions("life")
    out["consumption_after_clear"] = env.status(client.get_consumption_status("gen", "life"))
    out["production_after_clear"] = env.status(client.get_production_status(["prompt"], "life"))
    return out


@scenario("sequential")
def module_level_calls(env: Env):
    """TransferQueue's module exposes the client through get_client(); its interface has no put/get_meta."""
    tq = env.tq
    names = ("kv_put", "kv_batch_put", "kv_batch_get", "kv_batch_get_by_meta",
             "kv_list", "kv_clear", "save_checkpoint", "load_checkpoint", "get_client", "init", "close",
             "get_metrics_endpoint", "async_kv_put", "async_kv_batch_get")
    client = tq.get_client()
    methods = ("put", "get_meta", "get_data", "set_custom_meta", "clear_partition", "clear_samples",
               "get_consumption_status", "get_production_status", "check_consumption_status",
               "check_production_status", "reset_consumption", "get_partition_list", "kv_retrieve_meta",
               "kv_retrieve_keys", "kv_list", "close", "async_put", "async_get_meta", "async_get_data")
    return {"module_has": {n: hasattr(tq, n) for n in names},
            "client_type": type(client).__name__,
            "client_has": {n: hasattr(client, n) for n in methods},
            "same_client_twice": tq.get_client() is client,
            "metrics_endpoint_disabled": env.attempt(tq.get_metrics_endpoint),
            "version": getattr(tq, "__version__", None)}


# ==================== data types through put / get_data and the KV API ====================
def _jagged():
    return torch.nested.nested_tensor([torch.arange(i + 1, dtype=torch.float32) for i in range(4)],
                                      layout=torch.jagged)


COLUMNS = {
    "float32": lambda: torch.arange(12, dtype=torch.float32).reshape(4, 3) / 4,
    "int64": lambda: _rows(4, 2),
    "bfloat16": lambda: (torch.arange(8, dtype=torch.float32).reshape(4, 2) / 8).to(torch.bfloat16),
    "bool": lambda: torch.tensor([[True, False], [False, False], [True, True], [False, True]]),
    "vector_1d": lambda: torch.tensor([3, 1, 4, 1]),
    "jagged": _jagged,
    "str_list": lambda: ["alpha", "b", "", "delta"],
    "dict_list": lambda: [{"x": 1}, {"x": 2, "y": [1, 2]}, {}, {"s": "t"}],
    "numpy_object": lambda: np.array([1, "a", None, 2.5], dtype=object),
    "numpy_bytes": lambda: np.array([b"ab", b"c", b"", b"xyz"]),
    # TransferQueue 0.1.11 cannot put a batched NonTensorData (TypeError in its storage manager); a stack
    # of per-sample NonTensorData is how it keeps non-tensor values itself
    "non_tensor_data": lambda: NonTensorStack(NonTensorData("a"), NonTensorData({"k": 1}), NonTensorData(2.5),
                                              NonTensorData(None)),
    "numpy_arrays_stack": lambda: NonTensorStack.from_list(
        [np.array([1, 2]), np.array([3]), np.array([4, 5, 6]), np.array([7])]),
}


def _column_roundtrip(column: str):
    def run(env: Env):
        client, out = env.tq.get_client(), {}
        partition = f"dtype_{column}"
        data = TensorDict({"value": COLUMNS[column](), "key": torch.arange(4)}, batch_size=4)
        out["put"] = env.attempt_plain(lambda: env.meta(_tracked(env, client.put(data, partition_id=partition))))
        if "raises" in out["put"]:
            return out
        out["put_schema"] = env.schema(env.force_fetch(["value", "key"], partition))
        whole = client.get_meta(data_fields=["value", "key"], batch_size=2, partition_id=partition, task_name="t")
        rest = client.get_meta(data_fields=["value", "key"], batch_size=2, partition_id=partition, task_name="t")
        out["meta_first_half"] = env.meta(whole)
        out["meta_first_half_schema"] = env.schema(whole)
        out["get_data_first_half"] = env.attempt(client.get_data, whole)
        out["get_data_second_half"] = env.attempt(client.get_data, rest)
        out["get_data_selected_field"] = env.attempt(client.get_data, rest.select_fields(["value"]))
        everything = env.force_fetch(["value"], partition)
        out["get_data_all_force_fetch"] = env.attempt(client.get_data, everything)
        client.clear_partition(partition)
        keys = [f"{column}_{i}" for i in range(4)]
        kv_data = TensorDict({"value": COLUMNS[column]()}, batch_size=4)
        out["kv_batch_put"] = env.attempt(env.tq.kv_batch_put, keys=keys, partition_id=f"kv_{partition}",
                                          fields=kv_data)
        out["kv_batch_get_reversed"] = env.attempt(env.tq.kv_batch_get, keys=keys[::-1],
                                                   partition_id=f"kv_{partition}")
        env.attempt(env.tq.kv_clear, keys=keys, partition_id=f"kv_{partition}")
        return out

    run.__name__ = f"dtype_{column}"
    return run


def _tracked(env: Env, meta):
    env.track(meta)
    return meta


for _column in COLUMNS:
    scenario("sequential", f"dtype_{_column}")(_column_roundtrip(_column))


@scenario("sequential")
def dtype_mixed_batch(env: Env):
    """Every column kind in one TensorDict, fetched in two halves and in reverse order."""
    client, out = env.tq.get_client(), {}
    fields = sorted(COLUMNS)
    data = TensorDict({name: COLUMNS[name]() for name in fields}, batch_size=4)
    out["put"] = env.attempt_plain(lambda: env.meta(_tracked(env, client.put(data, partition_id="dtype_mixed"))))
    if "raises" in out["put"]:
        return out
    out["schema"] = env.schema(env.force_fetch(fields, "dtype_mixed"))
    first = client.get_meta(data_fields=fields, batch_size=2, partition_id="dtype_mixed", task_name="t")
    out["meta"] = env.meta(first)
    out["get_data_first"] = env.attempt(client.get_data, first)
    everything = env.force_fetch(fields, "dtype_mixed")
    out["get_data_reordered"] = env.attempt(client.get_data, everything.select_samples([3, 1, 0, 2]))
    client.clear_partition("dtype_mixed")
    return out


@scenario("sequential")
def get_data_is_a_copy(env: Env):
    """Mutating what get_data returned does not change what the next get_data returns."""
    client = env.tq.get_client()
    env.track(client.put(TensorDict({"x": _rows(2).float(), "s": ["a", "b"]}, batch_size=2), partition_id="copy"))
    meta = env.force_fetch(["x", "s"], "copy")
    first = client.get_data(meta)
    first["x"].add_(100)
    second = client.get_data(meta)
    client.clear_partition("copy")
    return {"second_read": env.describe(second)}


# ==================== the KV API ====================
@scenario("sequential")
def kv_api(env: Env):
    tq, out = env.tq, {}
    out["kv_put"] = env.attempt(tq.kv_put, key="k1", partition_id="kvp",
                                fields={"a": torch.tensor([1, 2, 3]), "b": torch.tensor(1.5)}, tag={"score": 1})
    batch = TensorDict({"a": torch.tensor([[4, 5, 6], [7, 8, 9]]), "b": torch.tensor([2.5, 3.5])}, batch_size=2)
    out["kv_batch_put"] = env.attempt(tq.kv_batch_put, keys=["k2", "k3"], partition_id="kvp", fields=batch,
                                      tags=[{"score": 2}, {"score": 3, "note": "x"}])
    out["kv_list_partition"] = env.attempt(tq.kv_list, "kvp")
    out["kv_list_all"] = env.attempt(tq.kv_list)
    out["kv_batch_get"] = env.attempt(tq.kv_batch_get, keys=["k3", "k1"], partition_id="kvp")
    out["kv_batch_get_one_key_str"] = env.attempt(tq.kv_batch_get, keys="k2", partition_id="kvp")
    out["kv_batch_get_select_str"] = env.attempt(tq.kv_batch_get, keys=["k1", "k2"], partition_id="kvp",
                                                 select_fields="a")
    out["kv_batch_get_select_list"] = env.attempt(tq.kv_batch_get, keys=["k1"], partition_id="kvp",
                                                  select_fields=["b"])
    out["kv_put_tag_only"] = env.attempt(tq.kv_put, key="k1", partition_id="kvp", tag={"score": 10})
    out["kv_batch_put_tags_only"] = env.attempt(tq.kv_batch_put, keys=["k2", "k3"], partition_id="kvp",
                                                tags=[{"score": 20}, {"score": 30}])
    out["kv_list_after_tag_updates"] = env.attempt(tq.kv_list, "kvp")
    out["kv_put_new_field_on_existing_key"] = env.attempt(tq.kv_put, key="k2", partition_id="kvp",
                                                          fields={"c": torch.tensor([0.25])})
    out["kv_batch_get_field_only_k2_has"] = env.attempt(tq.kv_batch_get, keys=["k1", "k2"], partition_id="kvp",
                                                        select_fields=["c"])
    out["kv_put_partial_fields"] = env.attempt(tq.kv_put, key="k4", partition_id="kvp",
                                               fields={"a": torch.tensor([0, 0, 1])})
    out["kv_batch_get_partial_all_fields"] = env.attempt(tq.kv_batch_get, keys=["k1", "k4"], partition_id="kvp")
    out["kv_batch_get_partial_common_field"] = env.attempt(tq.kv_batch_get, keys=["k1", "k4"], partition_id="kvp",
                                                           select_fields=["a"])
    out["kv_put_non_tensor_values"] = env.attempt(tq.kv_put, key="k5", partition_id="kvp",
                                                  fields={"text": "hello", "ids": [1, 2]})
    out["kv_batch_get_non_tensor_values"] = env.attempt(tq.kv_batch_get, keys=["k5"], partition_id="kvp",
                                                        select_fields=["text", "ids"])
    meta = tq.kv_batch_put(keys=["k6", "k7"], partition_id="kvp",
                           fields=TensorDict({"a": _rows(2)}, batch_size=2))
    out["kv_batch_get_by_meta"] = env.attempt(tq.kv_batch_get_by_meta, meta)
    out["kv_batch_get_by_meta_select"] = env.attempt(tq.kv_batch_get_by_meta, meta, select_fields="a")
    out["kv_batch_get_by_meta_unknown_field"] = env.attempt(tq.kv_batch_get_by_meta, meta, select_fields=["zzz"])
    client = tq.get_client()
    out["client_kv_retrieve_keys"] = env.attempt(
        lambda: client.kv_retrieve_keys(client.kv_retrieve_meta(["k7", "k6"], "kvp").global_indexes, "kvp"))
    out["client_kv_retrieve_meta_missing_key"] = env.attempt(
        lambda: client.kv_retrieve_meta(["k1", "nope"], "kvp").size)
    out["kv_clear_one"] = env.attempt(tq.kv_clear, keys="k2", partition_id="kvp")
    out["kv_list_after_clear_one"] = env.attempt(tq.kv_list, "kvp")
    out["kv_batch_get_cleared_key"] = env.attempt(tq.kv_batch_get, keys=["k2"], partition_id="kvp")
    out["kv_put_cleared_key_again"] = env.attempt(tq.kv_put, key="k2", partition_id="kvp",
                                                  fields={"a": torch.tensor([9, 9, 9])})
    out["kv_clear_rest"] = env.attempt(tq.kv_clear, keys=["k1", "k2", "k3", "k4", "k5", "k6", "k7"],
                                       partition_id="kvp")
    out["kv_list_after_clear_all"] = env.attempt(tq.kv_list, "kvp")
    out["kv_list_unknown_partition"] = env.attempt(tq.kv_list, "kv_nope")
    out["partitions"] = env.partitions("kvp")
    return out


@scenario("sequential")
def kv_bad_input(env: Env):
    tq, out = env.tq, {}
    tq.kv_put(key="present", partition_id="kvbad", fields={"a": torch.tensor([1])})
    out["get_missing_key"] = env.attempt(tq.kv_batch_get, keys=["present", "missing"], partition_id="kvbad")
    out["get_only_missing_key"] = env.attempt(tq.kv_batch_get, keys=["missing"], partition_id="kvbad")
    out["get_missing_partition"] = env.attempt(tq.kv_batch_get, keys=["present"], partition_id="kvbad_nope")
    out["get_unknown_field"] = env.attempt(tq.kv_batch_get, keys=["present"], partition_id="kvbad",
                                           select_fields=["zzz"])
    out["put_nothing"] = env.attempt(tq.kv_put, key="k", partition_id="kvbad")
    out["batch_put_nothing"] = env.attempt(tq.kv_batch_put, keys=["k"], partition_id="kvbad")
    out["batch_put_tags_length_mismatch"] = env.attempt(tq.kv_batch_put, keys=["k1", "k2"], partition_id="kvbad",
                                                        tags=[{"a": 1}])
    out["batch_put_fields_length_mismatch"] = env.attempt(
        tq.kv_batch_put, keys=["k1", "k2"], partition_id="kvbad", fields=TensorDict({"a": _rows(3)}, batch_size=3))
    out["batch_put_empty_keys"] = env.attempt(tq.kv_batch_put, keys=[], partition_id="kvbad", tags=[])
    out["batch_put_non_str_key"] = env.attempt(tq.kv_batch_put, keys=[1, 2], partition_id="kvbad",
                                               tags=[{}, {}])
    out["put_nested_field"] = env.attempt(tq.kv_put, key="k", partition_id="kvbad", fields={"j": _jagged()})
    out["put_fields_wrong_type"] = env.attempt(tq.kv_put, key="k", partition_id="kvbad", fields=[1, 2])
    out["get_empty_keys"] = env.attempt(tq.kv_batch_get, keys=[], partition_id="kvbad")
    out["clear_missing_key"] = env.attempt(tq.kv_clear, keys=["missing"], partition_id="kvbad")
    out["clear_missing_partition"] = env.attempt(tq.kv_clear, keys=["present"], partition_id="kvbad_nope")
    out["list_after"] = env.attempt(tq.kv_list, "kvbad")
    tq.kv_clear(keys=["present"], partition_id="kvbad")
    return out


# ==================== checkpoints ====================
@scenario("sequential")
def checkpoint(env: Env):
    tq, client, out = env.tq, env.tq.get_client(), {}
    env.track(client.put(TensorDict({"x": _rows(4), "s": ["a", "b", "c", "d"]}, batch_size=4),
                         partition_id="ckpt"))
    consumed = client.get_meta(data_fields=["x"], batch_size=2, partition_id="ckpt", task_name="t")
    consumed.update_custom_meta([{"c": 1}, {"c": 2}])
    client.set_custom_meta(consumed)
    tq.kv_put(key="key", partition_id="ckpt_kv", fields={"v": torch.tensor([1.0, 2.0])}, tag={"tag": "x"})
    directory = os.path.join(env.scratch, "ckpt")
    out["save"] = env.attempt(tq.save_checkpoint, directory, metadata={"step": 3, "note": "n"})
    metadata_file = os.path.join(directory, "metadata.json")
    out["metadata_json_user_metadata"] = env.attempt(lambda: json.load(open(metadata_file))["user_metadata"])
    client.clear_partition("ckpt")
    tq.kv_clear(keys=["key"], partition_id="ckpt_kv")
    tq.kv_put(key="after_save", partition_id="ckpt_kv", fields={"v": torch.tensor([5.0, 6.0])})
    out["partitions_before_load"] = env.partitions("ckpt")
    out["load"] = env.attempt(tq.load_checkpoint, directory)
    out["partitions_after_load"] = env.partitions("ckpt")
    out["consumption_after_load"] = env.status(client.get_consumption_status("t", "ckpt"))
    rest = client.get_meta(data_fields=["x", "s"], batch_size=2, partition_id="ckpt", task_name="t")
    out["get_meta_after_load"] = env.meta(rest)
    everything = env.force_fetch(["x", "s"], "ckpt")
    out["force_fetch_after_load"] = env.meta(everything)
    out["get_data_after_load"] = env.attempt(client.get_data, everything)
    out["kv_list_after_load"] = env.attempt(tq.kv_list, "ckpt_kv")
    out["kv_get_after_load"] = env.attempt(tq.kv_batch_get, keys=["key"], partition_id="ckpt_kv")
    out["save_again_same_dir"] = env.attempt(tq.save_checkpoint, directory)
    out["load_missing_dir"] = env.attempt(tq.load_checkpoint, os.path.join(env.scratch, "no_such_checkpoint"))
    empty = os.path.join(env.scratch, "empty_dir")
    os.makedirs(empty, exist_ok=True)
    out["load_dir_without_checkpoint"] = env.attempt(tq.load_checkpoint, empty)
    client.clear_partition("ckpt")
    env.attempt(tq.kv_clear, keys=["key", "after_save"], partition_id="ckpt_kv")
    return out


# ==================== BatchMeta operations ====================
def _meta_of_six(env: Env, partition: str):
    client = env.tq.get_client()
    data = TensorDict({"a": _rows(6), "b": torch.arange(6).float(), "s": [f"s{i}" for i in range(6)]},
                      batch_size=6)
    env.track(client.put(data, partition_id=partition))
    return env.force_fetch(["a", "b", "s"], partition)


@scenario("sequential")
def batch_meta_slicing(env: Env):
    meta, out = _meta_of_six(env, "bm_slice"), {}
    meta.set_extra_info("epoch", 2)
    meta.update_custom_meta([{"i": i} for i in range(6)])
    out["chunk_3"] = env.attempt(meta.chunk, 3)
    out["chunk_4_uneven"] = env.attempt(meta.chunk, 4)
    out["chunk_8_more_than_size"] = env.attempt(meta.chunk, 8)
    out["select_samples"] = env.attempt(meta.select_samples, [4, 0, 2])
    out["select_samples_out_of_range"] = env.attempt(meta.select_samples, [9])
    out["select_fields"] = env.attempt(meta.select_fields, ["s", "a"])
    out["select_fields_unknown"] = env.attempt(meta.select_fields, ["zzz"])
    out["getitem_int"] = env.attempt(lambda: meta[1])
    out["getitem_slice"] = env.attempt(lambda: meta[1:4])
    out["getitem_negative"] = env.attempt(lambda: meta[-1])
    out["copy"] = env.attempt(meta.copy)
    reordered = meta.copy()
    out["reorder"] = env.attempt(reordered.reorder, [5, 4, 3, 2, 1, 0])
    out["after_reorder"] = env.meta(reordered)
    out["chunk_by_partition"] = env.attempt(meta.chunk_by_partition)
    out["samples_view"] = env.attempt(lambda: [
        {"global_index": env.label([s.global_index])[0], "partition_id": s.partition_id,
         "production_status": int(s.production_status), "custom_meta": env.describe(dict(s.custom_meta)),
         "field_names": sorted(s.fields)} for s in meta.samples])
    out["len_samples"] = len(meta.samples)
    env.tq.get_client().clear_partition("bm_slice")
    return out


@scenario("sequential")
def batch_meta_combining(env: Env):
    meta, out = _meta_of_six(env, "bm_comb"), {}
    client = env.tq.get_client()
    parts = meta.chunk(3)
    out["concat_chunks"] = env.attempt(env.tq.BatchMeta.concat, parts)
    out["concat_empty_list"] = env.attempt(env.tq.BatchMeta.concat, [])
    out["concat_with_empty_meta"] = env.attempt(env.tq.BatchMeta.concat, [parts[0], env.tq.BatchMeta.empty()])
    out["concat_mismatched_fields"] = env.attempt(
        env.tq.BatchMeta.concat, [parts[0].select_fields(["a"]), parts[1].select_fields(["b"])])
    out["concat_mismatched_fields_no_validate"] = env.attempt(
        env.tq.BatchMeta.concat, [parts[0].select_fields(["a"]), parts[1].select_fields(["b"])], validate=False)
    left, right = meta.select_fields(["a"]), meta.select_fields(["b", "s"])
    out["union_fields"] = env.attempt(left.union, right)
    out["union_other_samples"] = env.attempt(parts[0].union, parts[1])
    out["union_none"] = env.attempt(left.union, None)
    first, second = parts[0].copy(), parts[0].copy()
    first.set_extra_info("x", 1)
    second.set_extra_info("y", 2)
    out["union_extra_info"] = env.attempt(first.union, second)
    out["concat_extra_info"] = env.attempt(env.tq.BatchMeta.concat, [first, parts[1]])
    env.track(client.put(TensorDict({"a": _rows(2)}, batch_size=2), partition_id="bm_comb_other"))
    other = env.force_fetch(["a"], "bm_comb_other")
    mixed = env.tq.BatchMeta.concat([parts[0].select_fields(["a"]), other])
    out["concat_two_partitions"] = env.meta(mixed)
    out["chunk_by_partition_two"] = env.attempt(mixed.chunk_by_partition)
    out["add_fields"] = env.attempt(parts[2].add_fields, TensorDict({"new": torch.ones(2, 1)}, batch_size=2))
    out["empty"] = env.meta(env.tq.BatchMeta.empty())
    out["empty_with_extra_info"] = env.meta(env.tq.BatchMeta.empty(extra_info={"k": "v"}))
    client.clear_partition("bm_comb")
    client.clear_partition("bm_comb_other")
    return out


@scenario("sequential")
def batch_meta_info(env: Env):
    meta, out = _meta_of_six(env, "bm_info"), {}
    meta.set_extra_info("a", 1)
    meta.update_extra_info({"b": [1, 2], "c": "x"})
    out["get_extra_info"] = [meta.get_extra_info("a"), meta.get_extra_info("missing", "default")]
    out["has_extra_info"] = [meta.has_extra_info("b"), meta.has_extra_info("zzz")]
    out["remove_extra_info"] = env.attempt(meta.remove_extra_info, "c")
    out["remove_missing_extra_info"] = env.attempt(meta.remove_extra_info, "zzz")
    out["all_extra_info"] = env.describe(meta.get_all_extra_info())
    out["extra_info_after_chunk"] = [env.describe(c.get_all_extra_info()) for c in meta.chunk(2)]
    out["extra_info_after_select"] = env.describe(meta.select_samples([0]).get_all_extra_info())
    meta.clear_extra_info()
    out["extra_info_after_clear"] = env.describe(meta.get_all_extra_info())
    out["custom_meta_initially"] = env.describe(meta.get_all_custom_meta())
    out["update_custom_meta"] = env.attempt(meta.update_custom_meta, [{"i": i} for i in range(6)])
    out["update_custom_meta_merges"] = env.attempt(meta.update_custom_meta, [{"j": i} for i in range(6)])
    out["custom_meta"] = env.describe(meta.get_all_custom_meta())
    out["update_custom_meta_wrong_length"] = env.attempt(meta.update_custom_meta, [{"i": 0}])
    out["update_custom_meta_none"] = env.attempt(meta.update_custom_meta, None)
    out["custom_meta_after_chunk"] = [env.describe(c.get_all_custom_meta()) for c in meta.chunk(3)]
    out["custom_meta_after_select"] = env.describe(meta.select_samples([5, 0]).get_all_custom_meta())
    out["custom_meta_returned_list_is_copy"] = env.attempt(
        lambda: (meta.get_all_custom_meta()[0].update({"mutated": True}), meta.get_all_custom_meta()[0])[1])
    meta.clear_custom_meta()
    out["custom_meta_after_clear"] = env.describe(meta.get_all_custom_meta())
    out["dtypes"] = {f: env.attempt(meta.get_dtypes, f) for f in ("a", "b", "s", "zzz")}
    out["shapes"] = {f: env.attempt(meta.get_shapes, f) for f in ("a", "b", "s", "zzz")}
    env.tq.get_client().clear_partition("bm_info")
    return out


@scenario("sequential")
def kv_batch_meta_ops(env: Env):
    KVBatchMeta, out = env.tq.KVBatchMeta, {}
    meta = KVBatchMeta(keys=["a", "b", "c", "d", "e"], tags=[{"i": i} for i in range(5)], partition_id="p",
                       fields=["x"], extra_info={"e": 1})
    out["meta"] = env.kv_meta(meta)
    out["chunk_2"] = env.attempt(meta.chunk, 2)
    out["select_keys"] = env.attempt(meta.select_keys, ["d", "a"])
    out["select_missing_key"] = env.attempt(meta.select_keys, ["zzz"])
    out["concat"] = env.attempt(KVBatchMeta.concat, meta.chunk(3))
    reordered = KVBatchMeta(keys=["a", "b", "c"], tags=[{}, {"t": 1}, {}], partition_id="p")
    out["reorder"] = env.attempt(reordered.reorder, [2, 0, 1])
    out["after_reorder"] = env.kv_meta(reordered)
    out["duplicate_keys"] = env.attempt(KVBatchMeta, keys=["a", "a"], tags=[{}, {}])
    out["tags_length_mismatch"] = env.attempt(KVBatchMeta, keys=["a"], tags=[])
    out["default"] = env.kv_meta(KVBatchMeta())
    return out


# ==================== StreamingDataset ====================
def _consume(env: Env, dataset, limit: int) -> list:
    return [{"data": env.describe(batch), "indexes": env.label(meta.global_indexes)}
            for batch, meta in itertools.islice(iter(dataset), limit)]


@scenario("sequential")
def streaming_dataset_finite(env: Env):
    client, out = env.tq.get_client(), {}
    env.track(client.put(TensorDict({"x": _rows(8), "s": [f"s{i}" for i in range(8)]}, batch_size=8),
                         partition_id="stream_f"))
    dataset = env.tq.StreamingDataset(config=env.conf, batch_size=4, micro_batch_size=2, data_fields=["x", "s"],
                                      partition_id="stream_f", task_name="fin", dp_rank=0,
                                      should_check_consumption_status=True)
    out["first_pass"] = _consume(env, dataset, 100)
    dataset.reset()
    out["after_reset"] = [item["indexes"] for item in _consume(env, dataset, 100)]
    out["buffered_batches"] = len(dataset.buffer) if hasattr(dataset, "buffer") else "no buffer attribute"
    dataset.step("stream_f_next")
    env.track(client.put(TensorDict({"x": _rows(4, start=100), "s": ["n0", "n1", "n2", "n3"]}, batch_size=4),
                         partition_id="stream_f_next"))
    out["after_step"] = _consume(env, dataset, 100)
    out["bad_micro_batch_size"] = env.attempt(
        env.tq.StreamingDataset, config=env.conf, batch_size=4, micro_batch_size=0, data_fields=["x"],
        partition_id="stream_f", task_name="fin", dp_rank=0)
    out["bad_data_fields"] = env.attempt(
        env.tq.StreamingDataset, config=env.conf, batch_size=4, micro_batch_size=1, data_fields=[],
        partition_id="stream_f", task_name="fin", dp_rank=0)
    out["bad_dp_rank"] = env.attempt(
        env.tq.StreamingDataset, config=env.conf, batch_size=4, micro_batch_size=1, data_fields=["x"],
        partition_id="stream_f", task_name="fin", dp_rank=-1)
    client.clear_partition("stream_f")
    client.clear_partition("stream_f_next")
    return out


@scenario("sequential")
def streaming_dataset_streaming(env: Env):
    client, out = env.tq.get_client(), {}
    env.track(client.put(TensorDict({"x": _rows(6), "j": torch.nested.nested_tensor(
        [torch.arange(i + 1) for i in range(6)], layout=torch.jagged)}, batch_size=6), partition_id="stream_s"))
    dataset = env.tq.StreamingDataset(config=env.conf, batch_size=2, micro_batch_size=1, data_fields=["x", "j"],
                                      partition_id="stream_s", task_name="str", dp_rank=0)
    iterator = iter(dataset)
    out["first_six"] = [{"data": env.describe(b), "indexes": env.label(m.global_indexes)}
                        for b, m in itertools.islice(iterator, 6)]
    env.track(client.put(TensorDict({"x": _rows(2, start=50), "j": torch.nested.nested_tensor(
        [torch.arange(3), torch.arange(1)], layout=torch.jagged)}, batch_size=2), partition_id="stream_s"))
    out["after_more_data"] = [{"data": env.describe(b), "indexes": env.label(m.global_indexes)}
                              for b, m in itertools.islice(iterator, 2)]
    iterator.close()
    out["consumed"] = client.check_consumption_status("str", "stream_s")
    loader = env.tq.StreamingDataLoader(dataset, num_workers=0)
    out["loader_type"] = type(loader).__name__
    client.clear_partition("stream_s")
    return out


# ==================== bad input to the client ====================
@scenario("sequential")
def client_bad_input(env: Env):
    client, out = env.tq.get_client(), {}
    data = TensorDict({"x": _rows(2)}, batch_size=2)
    out["put_without_partition"] = env.attempt(client.put, data)
    out["put_empty_metadata"] = env.attempt(client.put, data, metadata=env.tq.BatchMeta.empty())
    env.track(client.put(data, partition_id="bad"))
    meta = env.force_fetch(["x"], "bad")
    out["put_size_mismatch"] = env.attempt(client.put, TensorDict({"y": _rows(3)}, batch_size=3), metadata=meta)
    out["get_meta_bad_mode"] = env.attempt(client.get_meta, data_fields=["x"], batch_size=1, partition_id="bad",
                                           mode="bogus", task_name="t")
    out["get_meta_fetch_without_task"] = env.attempt(client.get_meta, data_fields=["x"], batch_size=1,
                                                     partition_id="bad")
    unknown = env.attempt_plain(lambda: env.meta(env.force_fetch(["x", "nope"], "bad")))
    out["force_fetch_unknown_field"] = unknown
    if "returns" in unknown:
        out["get_data_unknown_field"] = env.attempt(lambda: client.get_data(env.force_fetch(["x", "nope"], "bad")))
    out["get_data_empty_meta"] = env.attempt(client.get_data, env.tq.BatchMeta.empty())
    out["clear_unknown_partition"] = env.attempt(client.clear_partition, "bad_nope")
    out["reset_unknown_partition"] = env.attempt(client.reset_consumption, "bad_nope")
    out["consumption_unknown_partition"] = env.attempt_plain(lambda: env.status(
        client.get_consumption_status("t", "bad_nope")))
    out["production_unknown_partition"] = env.attempt_plain(lambda: env.status(
        client.get_production_status(["x"], "bad_nope")))
    out["check_consumption_unknown_partition"] = env.attempt(client.check_consumption_status, "t", "bad_nope")
    out["check_production_unknown_partition"] = env.attempt(client.check_production_status, ["x"], "bad_nope")
    out["force_fetch_unknown_partition"] = env.attempt_plain(lambda: env.meta(env.force_fetch(["x"], "bad_nope")))
    out["partitions_after_unknown_queries"] = env.partitions("bad")
    client.clear_partition("bad")
    return out


# ==================== polling mode (SequentialSampler) ====================
@scenario("polling")
def polling_get_meta(env: Env):
    client, out = env.tq.get_client(), {}
    out["unknown_partition"] = env.attempt_plain(lambda: env.meta(client.get_meta(
        data_fields=["x"], batch_size=2, partition_id="poll_nope", task_name="t")))
    out["partitions_after_unknown"] = env.partitions("poll")
    env.track(client.put(TensorDict({"x": _rows(3)}, batch_size=3), partition_id="poll"))
    out["more_than_ready"] = env.meta(client.get_meta(data_fields=["x"], batch_size=4, partition_id="poll",
                                                      task_name="t"))
    out["two"] = env.meta(client.get_meta(data_fields=["x"], batch_size=2, partition_id="poll", task_name="t"))
    out["two_of_one_left"] = env.meta(client.get_meta(data_fields=["x"], batch_size=2, partition_id="poll",
                                                      task_name="t"))
    out["unproduced_field"] = env.attempt_plain(lambda: env.meta(client.get_meta(
        data_fields=["x", "never"], batch_size=1, partition_id="poll", task_name="u")))
    out["batch_size_zero"] = env.attempt_plain(lambda: env.meta(client.get_meta(
        data_fields=["x"], batch_size=0, partition_id="poll", task_name="v")))
    out["last_one"] = env.meta(client.get_meta(data_fields=["x"], batch_size=1, partition_id="poll", task_name="t"))
    out["consumed"] = client.check_consumption_status("t", "poll")
    client.clear_partition("poll")
    return out


# ==================== samplers through the system ====================
@scenario("grpo")
def sampler_grpo_group_n(env: Env):
    client, out = env.tq.get_client(), {}
    env.track(client.put(TensorDict({"prompt": _rows(8)}, batch_size=8), partition_id="grpo"))
    everything = env.force_fetch(["prompt"], "grpo")
    # responses for samples 0-3 and 5-6: group (4, 5) is incomplete, (6, 7) too
    answered = everything.select_samples([0, 1, 2, 3, 5, 6])
    client.put(TensorDict({"response": torch.arange(6).unsqueeze(1)}, batch_size=6), metadata=answered)
    picks = []
    for batch_size in (2, 2, 2):
        picks.append(env.meta(client.get_meta(data_fields=["response"], batch_size=batch_size,
                                              partition_id="grpo", task_name="train")))
    out["picks"] = picks
    out["not_multiple_of_n"] = env.attempt_plain(lambda: env.meta(client.get_meta(
        data_fields=["prompt"], batch_size=3, partition_id="grpo", task_name="other")))
    cached = [client.get_meta(data_fields=["prompt"], batch_size=2, partition_id="grpo", task_name="cache",
                              sampling_config={"dp_rank": 0, "batch_index": 0}) for _ in range(2)]
    out["same_dp_rank_and_batch_index"] = [env.label(m.global_indexes) for m in cached]
    out["next_batch_index"] = env.label(client.get_meta(
        data_fields=["prompt"], batch_size=4, partition_id="grpo", task_name="cache",
        sampling_config={"dp_rank": 0, "batch_index": 1}).global_indexes)
    client.clear_partition("grpo")
    return out


@scenario("rank_aware")
def sampler_rank_aware(env: Env):
    client, out = env.tq.get_client(), {}
    env.track(client.put(TensorDict({"x": _rows(8)}, batch_size=8), partition_id="ranks"))

    def fetch(dp_rank, batch_index, batch_size=2, task="train"):
        # as StreamingDataset passes it: TransferQueue's RankAwareSampler needs task_name and partition_id here
        config = {"dp_rank": dp_rank, "batch_index": batch_index, "task_name": task, "partition_id": "ranks"}
        return env.label(client.get_meta(data_fields=["x"], batch_size=batch_size, partition_id="ranks",
                                         task_name=task, sampling_config=config).global_indexes)

    out["rank0_batch0"] = fetch(0, 0)
    out["rank0_batch0_again"] = fetch(0, 0)
    out["rank1_batch0"] = fetch(1, 0)
    out["rank0_batch1"] = fetch(0, 1)
    out["rank1_batch1"] = fetch(1, 1)
    out["consumed_after_four_batches"] = client.check_consumption_status("train", "ranks")
    out["rank0_batch2_not_enough"] = env.attempt(fetch, 0, 2, batch_size=4)
    out["negative_dp_rank"] = env.attempt(fetch, -1, 0, task="neg")
    out["other_task"] = fetch(0, 0, batch_size=8, task="eval")
    client.clear_partition("ranks")
    return out


LENGTHS = [30, 30, 5, 5, 12, 12, 1, 1, 20, 25, 7, 3]


@scenario("seqlen_balanced")
def sampler_seqlen_balanced(env: Env):
    """dp_size=2, 2 samples per prompt, per-rank batch 2 (one group each per step), 12 samples with
    total_lengths in custom_meta, the two ranks running at different speeds (rank 0 asks for step 1 before
    rank 1 asked for step 0). Reports what each call got; the test compares properties."""
    client = env.tq.get_client()
    env.track(client.put(TensorDict({"x": _rows(12)}, batch_size=12), partition_id="bal"))
    everything = env.force_fetch(["x"], "bal")
    everything.update_custom_meta([{"total_lengths": n} for n in LENGTHS])
    client.set_custom_meta(everything)
    calls = []
    for dp_rank, batch_index in ((0, 0), (0, 1), (1, 0), (1, 1), (0, 2), (1, 2)):
        got = env.attempt_plain(lambda: env.label(client.get_meta(
            data_fields=["x"], batch_size=2, partition_id="bal", task_name="train",
            sampling_config={"dp_rank": dp_rank, "batch_index": batch_index, "task_name": "train",
                             "partition_id": "bal"}).global_indexes))
        calls.append({"dp_rank": dp_rank, "batch_index": batch_index, "got": got})
    client.clear_partition("bal")
    return {"lengths": LENGTHS, "calls": calls}
