"""One scenario of BatchMeta / KVBatchMeta calls, run on TransferQueue 0.1.11's
classes and on seqflow's (test_batch_meta.py): run(BatchMeta, KVBatchMeta)
returns a JSON-able record of every result and every error's type."""

import numpy as np
import torch
from tensordict import TensorDict


def _dtype(value):
    return None if value is None else str(value).removeprefix("torch.")


def _shape(value):
    return None if value is None else list(value)


def summary(meta):
    schema = {}
    for name, entry in meta.field_schema.items():
        schema[name] = {"dtype": _dtype(entry.get("dtype")), "shape": _shape(entry.get("shape")),
                        "is_nested": entry.get("is_nested"), "is_non_tensor": entry.get("is_non_tensor"),
                        "per_sample_shapes": None if entry.get("per_sample_shapes") is None
                        else [list(s) for s in entry["per_sample_shapes"]]}
    return {"len": len(meta), "size": meta.size, "global_indexes": [int(i) for i in meta.global_indexes],
            "partition_ids": list(meta.partition_ids), "field_names": list(meta.field_names), "schema": schema,
            "production_status": [int(s) for s in meta.production_status], "is_ready": meta.is_ready,
            "custom_meta": meta.custom_meta, "extra_info": meta.extra_info}


def kv_summary(meta):
    return {"len": len(meta), "size": meta.size, "keys": meta.keys, "tags": meta.tags,
            "partition_id": meta.partition_id, "fields": meta.fields, "extra_info": meta.extra_info}


def outcome(call):
    try:
        value = call()
        if hasattr(value, "field_schema"):
            value = summary(value)
        elif hasattr(value, "tags"):
            value = kv_summary(value)
        return {"value": value}
    except Exception as error:  # the type is what both sides must agree on
        return {"error": type(error).__name__}


def run(BatchMeta, KVBatchMeta):
    def schema(*names, shape=(2,)):
        return {n: {"dtype": torch.float32, "shape": shape, "is_nested": False, "is_non_tensor": False}
                for n in names}

    def base():
        return BatchMeta(global_indexes=list(range(10, 17)), partition_ids=["p", "q"] * 3 + ["p"],
                         field_schema=schema("b", "a"), production_status=np.array([1, 1, 0, 1, 1, 1, 0], np.int8),
                         extra_info={"step": 3, "cfg": {"lr": 0.1}}, custom_meta=[{"i": i} for i in range(7)])

    record = {}
    meta = base()
    record["base"] = summary(meta)
    record["str"] = str(BatchMeta(global_indexes=[1, 2], partition_ids=["p", "p"], extra_info={"k": 1}))
    record["empty"] = summary(BatchMeta.empty(extra_info={"e": 1}))
    record["chunk3"] = [summary(c) for c in meta.chunk(3)]
    record["chunk9"] = [len(c) for c in meta.chunk(9)]
    record["by_partition"] = [summary(c) for c in meta.chunk_by_partition()]
    record["select_samples"] = summary(meta.select_samples([4, 1, 1]))
    record["select_out_of_range"] = outcome(lambda: meta.select_samples([7]))
    record["select_negative"] = outcome(lambda: meta.select_samples([-1]))
    record["index"] = [summary(meta[2]), summary(meta[-1]), summary(meta[1:6:2]), summary(meta[::-1])]
    record["index_errors"] = [outcome(lambda: meta[7]), outcome(lambda: meta["a"])]
    record["select_fields"] = summary(meta.select_fields(["b", "nope"]))
    record["dtypes_shapes"] = [[_dtype(d) for d in meta.get_dtypes("a")], [_shape(s) for s in meta.get_shapes("a")],
                               outcome(lambda: meta.get_shapes("nope"))]
    record["concat"] = summary(BatchMeta.concat(meta.chunk(3)))
    record["concat_empty"] = [summary(BatchMeta.concat([])), summary(BatchMeta.concat([BatchMeta.empty()]))]

    def one(index, fields=("a",), **info):
        return BatchMeta(global_indexes=[index], partition_ids=["p"], field_schema=schema(*fields),
                         production_status=np.ones(1, np.int8), extra_info=info)

    record["concat_extra"] = summary(BatchMeta.concat([one(0, s=1, a=[1]), one(1, s=1, b=[2.0])]))
    record["concat_tensor"] = outcome(lambda: torch.equal(
        BatchMeta.concat([one(0, t=torch.ones(2)), one(1, t=torch.ones(2))]).extra_info["t"], torch.ones(2)))
    record["concat_conflict"] = [outcome(lambda: BatchMeta.concat([one(0, s=1), one(1, s=2)])),
                                 outcome(lambda: BatchMeta.concat([one(0, s=1), one(1, s=1.0)])),
                                 outcome(lambda: BatchMeta.concat([one(0, s=np.arange(2)), one(1, s=np.arange(2))]))]
    record["concat_fields_mismatch"] = outcome(lambda: BatchMeta.concat([one(0), one(1, fields=("b",))]))
    other = BatchMeta(global_indexes=list(range(10, 17)), partition_ids=["p", "q"] * 3 + ["p"],
                      field_schema=schema("a", "c", shape=(5,)),
                      production_status=np.array([1, 0, 1, 1, 1, 1, 1], np.int8),
                      extra_info={"step": 4, "o": 1}, custom_meta=[{"j": i} for i in range(7)])
    record["union"] = summary(meta.union(other))
    record["union_empty"] = [summary(meta.union(BatchMeta.empty())), summary(BatchMeta.empty().union(meta))]
    record["union_mismatch"] = [outcome(lambda: meta.union(meta.select_samples([0, 1]))),
                                outcome(lambda: meta.union(BatchMeta(global_indexes=list(range(10, 17)),
                                                                     partition_ids=["x"] * 7)))]
    reordered = base()
    reordered.reorder([6, 5, 4, 3, 2, 1, 0])
    record["reorder"] = summary(reordered)
    record["reorder_errors"] = [outcome(lambda: base().reorder([0, 1])), outcome(lambda: base().reorder([0] * 7))]
    grown = base()
    grown.add_fields(TensorDict({"x": torch.zeros(7, 3), "n": torch.zeros(7, 2, dtype=torch.int64)}, batch_size=7))
    record["add_fields"] = summary(grown)
    quiet = base()
    quiet.add_fields(TensorDict({"x": torch.zeros(7, 3)}, batch_size=7), set_all_ready=False)
    record["add_fields_not_ready"] = summary(quiet)
    record["add_fields_mismatch"] = outcome(
        lambda: base().add_fields(TensorDict({"x": torch.zeros(2, 3)}, batch_size=2)))
    copied = meta.copy()
    copied.extra_info["cfg"]["lr"] = 9
    copied.custom_meta[0]["i"] = 9
    record["copy_isolated"] = summary(meta)
    record["extra_info_calls"] = [meta.get_extra_info("step"), meta.get_extra_info("nope", 5),
                                  meta.has_extra_info("cfg"), meta.remove_extra_info("step"),
                                  meta.remove_extra_info("step"), meta.get_all_extra_info()]
    meta.update_custom_meta([{"u": i} for i in range(7)])
    record["custom_meta_calls"] = [meta.get_all_custom_meta(), outcome(lambda: meta.update_custom_meta([{}]))]
    meta.clear_custom_meta()
    record["cleared"] = meta.custom_meta
    nested = BatchMeta(global_indexes=[0, 1], partition_ids=["p", "p"], field_schema={
        "r": {"dtype": torch.int64, "shape": None, "is_nested": True, "is_non_tensor": False,
              "per_sample_shapes": [(3,), (5,)]}}, production_status=np.array([1, 0], np.int8))
    record["samples"] = [[int(s.global_index), s.partition_id, s.production_status, _shape(s.fields["r"]["shape"])]
                         for s in nested.samples]
    record["nested_select"] = summary(nested.select_samples([1]))
    record["bad_init"] = [outcome(lambda: BatchMeta(global_indexes=[0, 1], partition_ids=["p"])),
                          outcome(lambda: BatchMeta(global_indexes=[0], partition_ids=["p"], production_status=[1, 1])),
                          outcome(lambda: BatchMeta(global_indexes=[0], partition_ids=["p"], custom_meta=[{}, {}]))]

    kv = KVBatchMeta(keys=[f"k{i}" for i in range(7)], tags=[{"i": i} for i in range(7)], partition_id="p",
                     fields=["f"], extra_info={"e": 1})
    record["kv"] = kv_summary(kv)
    record["kv_empty"] = kv_summary(KVBatchMeta())
    record["kv_chunk"] = [kv_summary(c) for c in kv.chunk(3)] + [len(c) for c in kv.chunk(9)]
    record["kv_select"] = kv_summary(kv.select_keys(["k5", "k1"]))
    record["kv_select_errors"] = [outcome(lambda: kv.select_keys(["k1", "k1"])), outcome(lambda: kv.select_keys(["z"]))]
    record["kv_concat"] = kv_summary(KVBatchMeta.concat(kv.chunk(3) + [KVBatchMeta()]))
    record["kv_concat_errors"] = [
        outcome(lambda: KVBatchMeta.concat([kv, KVBatchMeta(keys=["z"], tags=[{}], partition_id="q", fields=["f"])])),
        outcome(lambda: KVBatchMeta.concat([kv, KVBatchMeta(keys=["z"], tags=[{}], partition_id="p", fields=["g"])])),
        outcome(lambda: KVBatchMeta.concat([KVBatchMeta(keys=["y"], tags=[{}], extra_info={"s": 1}),
                                            KVBatchMeta(keys=["z"], tags=[{}], extra_info={"s": 2})]))]
    kv.reorder([6, 5, 4, 3, 2, 1, 0])
    record["kv_reorder"] = kv_summary(kv)
    record["kv_reorder_errors"] = [outcome(lambda: kv.reorder([0])), outcome(lambda: kv.reorder([0] * 7))]
    record["kv_bad_init"] = [outcome(lambda: KVBatchMeta(keys=["a"], tags=[])),
                             outcome(lambda: KVBatchMeta(keys=["a", "a"], tags=[{}, {}])),
                             outcome(lambda: KVBatchMeta(keys=["a"], tags=[{}], fields=["f", "f"]))]
    return record


if __name__ == "__main__":
    import json
    import sys

    from transfer_queue.metadata import BatchMeta, KVBatchMeta

    json.dump(run(BatchMeta, KVBatchMeta), sys.stdout, default=repr)
