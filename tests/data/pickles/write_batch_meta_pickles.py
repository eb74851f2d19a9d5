"""Writes batch_meta.pickle: BatchMetas pickled by the build that runs this,
each beside what it holds (the constructor's arguments that make the same
batch, and its write_versions), for tests/python/test_batch_meta_pickles.py.

    .venv/bin/python tests/data/pickles/write_batch_meta_pickles.py
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np

import seqflow
from seqflow import BatchMeta


def built_by_hand() -> dict[str, dict]:
    nested = {"dtype": "float32", "shape": (-1,), "is_nested": True, "is_non_tensor": False,
              "per_sample_shapes": [(2,), (3,), (1,)]}
    plain = {"dtype": "int64", "shape": (4,), "is_nested": False, "is_non_tensor": False}
    objects = {"dtype": None, "shape": None, "is_nested": False, "is_non_tensor": True}
    return {
        "decoded_nested_schema": dict(
            global_indexes=[4, 9, 2], partition_ids=["train", "train", "val"],
            field_schema={"tokens": nested, "label": plain}, production_status=np.array([1, 0, 1], dtype=np.int8),
            extra_info={"step": 7, "weights": np.arange(3.0), "nested": {"a": [1, 2]}},
            custom_meta=[{"len": 2}, {"len": 3, "tag": ["x"]}, {}]),
        "status_matrix_generations_backend": dict(
            global_indexes=[0, 1], partition_ids=["p", "p"], field_schema={"a": plain, "text": objects},
            production_status=np.array([[1, 1], [1, 0]], dtype=np.int8), generations=[5, 2**63 + 1],
            _custom_backend_meta=[{"a": {"slot": 1}}, {"_any": 2}]),
        "empty": dict(extra_info={"only": "info"}),
    }


def from_a_client() -> tuple[BatchMeta, dict]:
    """custom_meta still encoded (never read), generations and write_versions set."""
    client = seqflow.Client()
    client.put({"x": np.arange(6, dtype=np.int32).reshape(3, 2)}, partition_id="p",
               custom_meta=[{"k": i, "s": "v" * i} for i in range(3)])
    meta = client.get_meta(["x"], 3, "p", mode="force_fetch")
    meta = client.put({"y": np.ones((3, 1))}, metadata=meta)
    meta = client.put({"y": np.zeros((3, 1))}, metadata=meta)  # an overwrite: write_versions name it
    meta.extra_info = {"source": "client"}
    assert meta._custom_meta is None, "the custom_meta must still be encoded"
    arguments = dict(global_indexes=meta.global_indexes, partition_ids=meta.partition_ids,
                     field_schema=meta.field_schema, production_status=meta.production_status,
                     extra_info=meta.extra_info, custom_meta=meta.get_all_custom_meta(), generations=meta.generations)
    client.close()
    return meta, arguments


def main() -> None:
    cases = {}
    for name, arguments in built_by_hand().items():
        meta = BatchMeta(**arguments)
        meta.custom_meta  # noqa: B018 (decoded: the pickle holds the dicts)
        cases[name] = {"arguments": arguments, "encoded": False, "pickle": pickle.dumps(meta),
                       "write_versions": meta.write_versions}
    meta, arguments = from_a_client()
    cases["encoded_from_a_client"] = {"arguments": arguments, "encoded": True, "pickle": pickle.dumps(meta),
                                      "write_versions": meta.write_versions}
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("batch_meta.pickle")
    out.write_bytes(pickle.dumps(cases))
    print(f"wrote {len(cases)} batches to {out}")


if __name__ == "__main__":
    main()
