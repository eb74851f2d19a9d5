"""BatchMetas pickled by an earlier build (tests/data/pickles: the C++ class
of f38c0fc) load with this one and hold what the same batches built by this
constructor hold."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from seqflow import BatchMeta

CASES = pickle.loads((Path(__file__).resolve().parents[1] / "data" / "pickles" / "batch_meta.pickle").read_bytes())


def content(meta: BatchMeta) -> dict:
    """Everything a batch holds, comparable with == (arrays as lists)."""
    def plain(value):
        if isinstance(value, np.ndarray):
            return ("array", value.dtype.str, value.tolist())
        if isinstance(value, dict):
            return {key: plain(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(plain(item) for item in value)
        return value

    return plain({
        "global_indexes": meta.global_indexes, "partition_ids": meta.partition_ids, "generations": meta.generations,
        "field_schema": meta.field_schema, "production_status": meta.production_status,
        "field_names": meta.field_names, "produced": meta._field_produced(meta.field_names),
        "is_ready": meta.is_ready, "extra_info": meta.extra_info, "custom_meta": meta.get_all_custom_meta(),
        "backend_meta": meta._custom_backend_meta, "size": meta.size,
    })


def test_the_fixture_covers_each_kind_of_batch():
    assert {case["encoded"] for case in CASES.values()} == {True, False}
    arguments = [case["arguments"] for case in CASES.values()]
    assert any(a.get("generations") is not None for a in arguments)
    assert any(a.get("generations") is None for a in arguments)
    assert any(a.get("_custom_backend_meta") for a in arguments)
    assert any("per_sample_shapes" in entry for a in arguments for entry in (a.get("field_schema") or {}).values())
    assert any(case["write_versions"] for case in CASES.values())


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_earlier_pickle_loads_as_the_batch_the_constructor_makes(name):
    case = CASES[name]
    loaded = pickle.loads(case["pickle"])
    built = BatchMeta(**case["arguments"])
    assert type(loaded) is BatchMeta
    assert content(loaded) == content(built)
    assert loaded.write_versions == case["write_versions"]
    # custom_meta pickled still encoded stays so until read; decoded ones come back decoded.
    assert (loaded._custom_meta is None) == case["encoded"]
    assert loaded.production_status.flags.writeable
    again = pickle.loads(pickle.dumps(loaded))
    assert content(again) == content(loaded) and again.write_versions == loaded.write_versions
    assert (again._custom_meta is None) == case["encoded"]
