"""What TransferQueue 0.1.11 hands back for each kind of field, as JSON.

Imported by test_data_semantics (which builds the same inputs and describes
seqflow's results alike) and run as a script by the python of the reference
venv (tools/reference_peer.py), where it puts every case into the real
TransferQueue (SimpleStorage, two units, on a private Ray instance) and
prints {case: description}. Needs only numpy, torch and tensordict, so both
environments can import it.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import tempfile

import numpy as np
import torch
from tensordict import NonTensorData, NonTensorStack, TensorDict

ROWS = 3


def batch_cases(n: int = ROWS) -> dict:
    """One field per case, n rows each, as a TransferQueue user puts them."""
    return {
        "dense_f32": torch.arange(n * 5, dtype=torch.float32).reshape(n, 5),
        "dense_1d": torch.arange(n, dtype=torch.int64),
        "dense_3d": torch.arange(n * 6, dtype=torch.float32).reshape(n, 2, 3),
        "bf16": torch.ones(n, 2, dtype=torch.bfloat16),
        "jagged": torch.nested.as_nested_tensor([torch.arange(i + 1.0) for i in range(n)], layout=torch.jagged),
        "jagged_2d": torch.nested.as_nested_tensor([torch.ones(i + 1, 4) * i for i in range(n)], layout=torch.jagged),
        "strided_same": torch.nested.nested_tensor([torch.full((3, 4), float(i)) for i in range(n)]),
        "strided_ragged": torch.nested.nested_tensor([torch.ones(i + 1, i + 2) * i for i in range(n)]),
        "list_int": [i * 10 for i in range(n)],
        "list_bool": [i % 2 == 0 for i in range(n)],
        "list_list": [[i, i + 1] for i in range(n)],
        "list_str": [f"s{i}" for i in range(n)],
        "list_bytes": [f"b{i}".encode() for i in range(n)],
        "list_dict": [{"k": i, "v": [i, None, "x"]} for i in range(n)],
        "list_none": [None] * n,
        "np_f64": np.arange(n * 3, dtype=np.float64).reshape(n, 3),
        "np_bytes": np.array([f"bs_{i}".encode() for i in range(n)], dtype="|S10"),
        "np_unicode": np.array([f"u_{i}" for i in range(n)]),
        "np_obj_str": np.array([f"o_{i}" for i in range(n)], dtype=object),
        "np_obj_dict": np.array([{"d": i} for i in range(n)], dtype=object),
        "ntd_list": NonTensorData(data=[{"idx": i, "text": f"t{i}"} for i in range(n)], batch_size=(n,)),
        "nts_str": NonTensorStack(*[f"t{i}" for i in range(n)]),
        "nts_tuple": NonTensorStack(*[(i, "a") for i in range(n)]),
        "nts_float": NonTensorStack(*[i / 4 for i in range(n)]),
    }


def kv_cases() -> dict:
    """Single-sample kv_put values."""
    return {"kv_vector": torch.tensor([1, 2, 3]), "kv_scalar": torch.tensor(5), "kv_str": "hello", "kv_int": 7,
            "kv_dict": {"a": 1}, "kv_list": [1, 2]}


def _value(item):
    """repr of the value, numpy's str_ / bytes_ as the str / bytes they equal."""
    if isinstance(item, float) and math.isnan(item):
        return "nan"
    if isinstance(item, (str, bytes)):
        return repr(str(item) if isinstance(item, str) else bytes(item))
    return repr(item)


def _tensor_rows(tensor) -> list:
    return [{"shape": list(row.shape), "values": row.float().tolist()} for row in tensor.unbind()]


def describe(value, order=None) -> dict:
    """Container, dtype and each row (in `order`, default as given)."""
    if isinstance(value, torch.Tensor):
        out = {"dtype": str(value.dtype)}
        if value.is_nested:
            out["container"] = "jagged" if value.layout == torch.jagged else "strided"
        else:
            out["container"] = "dense"
            out["shape"] = list(value.shape)
        rows = _tensor_rows(value)
    elif isinstance(value, NonTensorStack):
        out = {"container": "NonTensorStack"}
        rows = [{"type": type(item).__name__, "value": _value(item)} for item in value.tolist()]
    else:
        out = {"container": type(value).__name__}
        rows = [{"type": type(item).__name__, "value": _value(item)} for item in list(value)]
    out["rows"] = rows if order is None else [rows[i] for i in order]
    return out


def _probe_transfer_queue() -> dict:
    ray_dir = tempfile.mkdtemp(prefix="tqprobe")
    try:
        return _probe_on_private_ray(ray_dir)
    finally:
        # Ray leaves its session files there: one directory in /tmp per run otherwise.
        shutil.rmtree(ray_dir, ignore_errors=True)


def _probe_on_private_ray(ray_dir: str) -> dict:
    import ray
    import transfer_queue as tq
    from omegaconf import OmegaConf

    # A private instance (its own directory: other processes' ray.init() must
    # not find it) with room for the controller and both units (a CPU each).
    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False, _temp_dir=ray_dir)
    tq.init(OmegaConf.create({"controller": {"polling_mode": True},
                              "backend": {"storage_backend": "SimpleStorage",
                                          "SimpleStorage": {"num_data_storage_units": 2}}}))
    client = tq.get_client()
    report = {}
    try:
        for name, value in batch_cases().items():
            client.put(data=TensorDict({name: value}, batch_size=ROWS), partition_id=name)
            meta = client.get_meta(data_fields=[name], batch_size=ROWS, partition_id=name, mode="force_fetch",
                                   task_name="probe")
            order = sorted(range(meta.size), key=lambda i: meta.global_indexes[i])
            report[name] = describe(client.get_data(meta).get(name), order)
        for name, value in kv_cases().items():
            tq.kv_put(key=name, partition_id="kv", fields={name: value})
            report[name] = describe(tq.kv_batch_get(keys=[name], partition_id="kv", select_fields=[name]).get(name))
    finally:
        tq.close()
        ray.shutdown()
    return report


if __name__ == "__main__":
    json.dump(_probe_transfer_queue(), sys.stdout)
