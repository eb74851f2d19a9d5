"""The default client of a process: ``seqflow.init()`` makes it, and the
module-level API (``seqflow.put``, ``seqflow.get_meta``, ... and their
``async_`` twins) calls it, as TransferQueue's module functions do."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from seqflow._async import async_twin
from seqflow._checks import check_count, check_name
from seqflow._config import read_config
from seqflow.client import Client
from seqflow.remote import ray_client

if TYPE_CHECKING:  # typing_extensions: ParamSpec and Concatenate are in typing from Python 3.10 only
    from typing import TypeVar

    from typing_extensions import Concatenate, ParamSpec

    _Params = ParamSpec("_Params")
    _Result = TypeVar("_Result")

_DEFAULT: Optional[Client] = None
_LOCK = threading.RLock()
_BACKENDS = (None, "embedded", "ray")


def _new_lock() -> None:
    global _LOCK
    _LOCK = threading.RLock()  # a copy held by another parent thread would never be released


os.register_at_fork(after_in_child=_new_lock)


def init(config: Optional[Mapping[str, Any]] = None, *, backend: Optional[str] = None, name: str = "seqflow",
         num_storage_units: Optional[int] = None) -> Client:
    """Creates the default client and returns it. If one exists already it is
    returned and the arguments are ignored, as in TransferQueue.

    config: TransferQueue-style (dict or OmegaConf; see Client.from_config):
        embedded by default, remote when controller.address is set.
    backend="ray": services on the Ray cluster, named `name` (see
        seqflow.remote.ray_client): with num_storage_units, starts the
        controller and that many storage units as detached actors unless they
        run already (close() stops them); without, attaches to running ones.
    """
    global _DEFAULT
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS}, got {backend!r}")
    read_config(config)  # a bad config raises even when a default client exists already
    check_name(name, "name")
    if num_storage_units is not None:
        check_count(num_storage_units, "num_storage_units", minimum=1)
    with _LOCK:
        if _DEFAULT is None:
            _DEFAULT = (ray_client(name, config=config, num_storage_units=num_storage_units) if backend == "ray"
                        else Client.from_config(config))
        return _DEFAULT


def get_client() -> Client:
    """The default client; seqflow.init() must have been called."""
    if _DEFAULT is None:
        raise RuntimeError("seqflow is not initialized; call seqflow.init() first")
    return _DEFAULT


def close() -> None:
    """Closes the default client (and stops the Ray services its init()
    started); the next init() creates a new one."""
    global _DEFAULT
    with _LOCK:
        if _DEFAULT is not None:
            _DEFAULT.close()
        _DEFAULT = None


def _on_default_client(method: Callable[Concatenate[Client, _Params], _Result]) -> Callable[_Params, _Result]:
    """Client `method` as a module function that calls it on the default client."""

    def function(*args: _Params.args, **kwargs: _Params.kwargs) -> _Result:
        return method(get_client(), *args, **kwargs)

    function.__name__ = function.__qualname__ = method.__name__
    function.__doc__ = f"Client.{method.__name__} on the default client.\n\n{method.__doc__ or ''}"
    return function


# One line each (not a loop over _ASYNC_METHODS) so that type checkers see every name with its signature.
put = _on_default_client(Client.put)
get_meta = _on_default_client(Client.get_meta)
get_data = _on_default_client(Client.get_data)
set_custom_meta = _on_default_client(Client.set_custom_meta)
clear_partition = _on_default_client(Client.clear_partition)
clear_samples = _on_default_client(Client.clear_samples)
reset_consumption = _on_default_client(Client.reset_consumption)
ack = _on_default_client(Client.ack)
release = _on_default_client(Client.release)
get_consumption_status = _on_default_client(Client.get_consumption_status)
check_consumption_status = _on_default_client(Client.check_consumption_status)
get_production_status = _on_default_client(Client.get_production_status)
check_production_status = _on_default_client(Client.check_production_status)
get_partition_list = _on_default_client(Client.get_partition_list)
kv_put = _on_default_client(Client.kv_put)
kv_batch_put = _on_default_client(Client.kv_batch_put)
kv_batch_get = _on_default_client(Client.kv_batch_get)
kv_batch_get_by_meta = _on_default_client(Client.kv_batch_get_by_meta)
kv_meta = _on_default_client(Client.kv_meta)
kv_keys = _on_default_client(Client.kv_keys)
kv_list = _on_default_client(Client.kv_list)
kv_clear = _on_default_client(Client.kv_clear)
replay_pass = _on_default_client(Client.replay_pass)
ack_replay_pass = _on_default_client(Client.ack_replay_pass)
reissue_inflight_prompts = _on_default_client(Client.reissue_inflight_prompts)
save_checkpoint = _on_default_client(Client.save_checkpoint)
load_checkpoint = _on_default_client(Client.load_checkpoint)
report_timing = _on_default_client(Client.report_timing)
report_timings = _on_default_client(Client.report_timings)
task_workload = _on_default_client(Client.task_workload)

async_put = async_twin(put)
async_get_meta = async_twin(get_meta)
async_get_data = async_twin(get_data)
async_set_custom_meta = async_twin(set_custom_meta)
async_clear_partition = async_twin(clear_partition)
async_clear_samples = async_twin(clear_samples)
async_reset_consumption = async_twin(reset_consumption)
async_ack = async_twin(ack)
async_release = async_twin(release)
async_get_consumption_status = async_twin(get_consumption_status)
async_check_consumption_status = async_twin(check_consumption_status)
async_get_production_status = async_twin(get_production_status)
async_check_production_status = async_twin(check_production_status)
async_get_partition_list = async_twin(get_partition_list)
async_kv_put = async_twin(kv_put)
async_kv_batch_put = async_twin(kv_batch_put)
async_kv_batch_get = async_twin(kv_batch_get)
async_kv_batch_get_by_meta = async_twin(kv_batch_get_by_meta)
async_kv_meta = async_twin(kv_meta)
async_kv_keys = async_twin(kv_keys)
async_kv_list = async_twin(kv_list)
async_kv_clear = async_twin(kv_clear)
async_replay_pass = async_twin(replay_pass)
async_ack_replay_pass = async_twin(ack_replay_pass)
async_reissue_inflight_prompts = async_twin(reissue_inflight_prompts)
async_save_checkpoint = async_twin(save_checkpoint)
async_load_checkpoint = async_twin(load_checkpoint)
async_report_timing = async_twin(report_timing)
async_report_timings = async_twin(report_timings)
async_task_workload = async_twin(task_workload)

__all__ = [
    "close", "get_client", "init", "put", "get_meta", "get_data", "set_custom_meta", "clear_partition", "clear_samples",
    "reset_consumption", "ack", "release", "get_consumption_status", "check_consumption_status", "get_production_status",
    "check_production_status", "get_partition_list", "kv_put", "kv_batch_put", "kv_batch_get", "kv_batch_get_by_meta",
    "kv_meta", "kv_keys", "kv_list", "kv_clear", "replay_pass", "ack_replay_pass", "reissue_inflight_prompts",
    "save_checkpoint", "load_checkpoint", "report_timing",
    "report_timings", "task_workload", "async_put", "async_get_meta", "async_get_data", "async_set_custom_meta",
    "async_clear_partition", "async_clear_samples", "async_reset_consumption", "async_ack", "async_release",
    "async_get_consumption_status",
    "async_check_consumption_status", "async_get_production_status", "async_check_production_status",
    "async_get_partition_list", "async_kv_put", "async_kv_batch_put", "async_kv_batch_get",
    "async_kv_batch_get_by_meta", "async_kv_meta", "async_kv_keys", "async_kv_list", "async_kv_clear",
    "async_replay_pass", "async_ack_replay_pass", "async_reissue_inflight_prompts", "async_save_checkpoint",
    "async_load_checkpoint",
    "async_report_timing",
    "async_report_timings", "async_task_workload",
]
