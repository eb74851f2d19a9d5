"""seqflow.Client and seqflow.RemoteConfig: C++ classes (python/bindings/client_class.cc,
remote_config.cc; see help(Client)), with ``async_<name>`` twins of their calls, which run the
call in a worker thread: the C++ side releases the GIL for every controller and storage call, so
waiting never blocks the event loop or other Python threads. seqflow.default_client holds the
process's default client (``seqflow.init``) and the module-level functions."""

import dataclasses

from seqflow import _seqflow
from seqflow._async import async_twin

__all__ = ["Client", "RemoteConfig", "StaleSampleError"]

Client = _seqflow.client.Client
RemoteConfig = _seqflow.client.RemoteConfig
# RemoteConfig was a frozen dataclass: dataclasses.fields, replace and asdict keep working on
# the bound class through the field records of a dataclass of the same fields and defaults.
_DEFAULTS = RemoteConfig("tcp://127.0.0.1:1")
RemoteConfig.__dataclass_fields__ = dataclasses.make_dataclass("RemoteConfig", [
    (name, object) if name == "address" else (name, object, dataclasses.field(default=getattr(_DEFAULTS, name)))
    for name in RemoteConfig.__match_args__], frozen=True).__dataclass_fields__
# A BatchMeta names a sample that is gone or whose global index holds another sample now (a KeyError).
StaleSampleError = _seqflow.StaleSampleError

_ASYNC_METHODS = (
    "put", "get_meta", "get_data", "set_custom_meta", "clear_partition", "clear_samples", "reset_consumption",
    "get_consumption_status", "check_consumption_status", "get_production_status", "check_production_status",
    "get_partition_list", "kv_put", "kv_batch_put", "kv_batch_get", "kv_batch_get_by_meta", "kv_meta", "kv_keys",
    "kv_list", "kv_clear", "save_checkpoint", "load_checkpoint", "report_timing", "report_timings", "task_workload",
)
for _name in _ASYNC_METHODS:
    setattr(Client, f"async_{_name}", async_twin(getattr(Client, _name)))
