"""Reading TransferQueue-style configs (dicts or OmegaConf configs), shared by
the client and the services, without importing torch.

read_config checks every key a seqflow config may hold: a value of the wrong
type raises naming its key and value, an unknown key raises naming it (a
typo would otherwise be ignored silently). TransferQueue's own keys pass
(backend, metrics, controller.zmq_info): TransferQueue configs hold settings
of storage backends seqflow does not have."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

from seqflow._checks import (
    ArgumentTypeError,
    check_bool,
    check_choice,
    check_count,
    check_number,
    check_path,
    check_seconds,
    short_repr,
)

__all__ = ["MAX_BUSY_POLL_US", "config_get", "read_config"]

# busy_poll_us's bound: beyond a second, sleeping is cheaper.
MAX_BUSY_POLL_US = 1_000_000
# storage.when_full: what a put that does not fit does.
WHEN_FULL = ("raise", "wait")


def _address(value: Any, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise ArgumentTypeError(f"{path} must name the controller service (e.g. tcp://10.0.0.1:5555), "
                                f"got {value!r}")
    return value


def _mapping(value: Any, path: str) -> Any:
    if not isinstance(value, Mapping):
        raise ArgumentTypeError(f"{path} must be a dict, got {type(value).__name__} {short_repr(value)}")
    return value


# Each key seqflow reads, with its check; None values count as unset.
_SETTINGS: dict[str, Callable[[Any, str], Any]] = {
    "controller.address": _address,
    "controller.sampler": lambda value, path: value,  # checked where it is used (seqflow.samplers.native_sampler)
    "controller.sampler_args": _mapping,
    "controller.polling_mode": check_bool,
    "controller.timing_alignment": lambda value, path: check_count(value, path, minimum=1),
    "controller.timeout": check_seconds,
    "timeout": check_seconds,
    "storage.max_bytes": check_count,
    "storage.max_samples": check_count,
    "storage.max_bytes_per_partition": check_count,
    "storage.max_samples_per_partition": check_count,
    "storage.when_full": lambda value, path: check_choice(value, path, WHEN_FULL),
    "storage.high_watermark": check_number,
    "storage.low_watermark": check_number,
    "backend.SimpleStorage.total_storage_size": check_count,
    "security.server_public_key_file": check_path,
    "security.client_key_file": check_path,
    "security.server_secret_key_file": check_path,
    "security.curve_keys": check_path,
    "local_copy": check_bool,
    "busy_poll_us": lambda value, path: check_count(value, path, maximum=MAX_BUSY_POLL_US),
    "checkpoint_root": check_path,
}
_SECTIONS = ("controller", "storage", "security", "backend", "backend.SimpleStorage", "metrics", "seqflow")
# Keys of TransferQueue (and of seqflow.compat.transfer_queue's "seqflow"
# section) that configs given to seqflow may hold: accepted, and not seqflow's
# to read or check.
_OTHERS_KEY = "controller.zmq_info"
_OTHERS_SECTIONS = ("backend.", "metrics.", "seqflow.")


def _read_section(section: Any, prefix: str, settings: dict[str, Any]) -> None:
    for key in section:
        if not isinstance(key, str):
            where = prefix[:-1] if prefix else "config"
            raise ArgumentTypeError(f"config keys must be str, got {key!r} in {where}")
        path = prefix + key
        value = section[key]
        if value is None:
            continue
        if path in _SECTIONS:
            if not isinstance(value, Mapping):
                raise ArgumentTypeError(f"config key {path!r} must be a dict, got {type(value).__name__} {value!r}")
            _read_section(value, path + ".", settings)
        elif path in _SETTINGS:
            settings[path] = _SETTINGS[path](value, path)
        elif path != _OTHERS_KEY and not path.startswith(_OTHERS_SECTIONS):
            raise ValueError(f"config key {path!r} is unknown; seqflow reads {', '.join(_SETTINGS)}")


def read_config(config: Any) -> dict[str, Any]:
    """The settings a config sets, checked, by dotted key ("controller.timeout")."""
    settings: dict[str, Any] = {}
    if config is None:
        return settings
    if not isinstance(config, Mapping):
        raise ArgumentTypeError(f"config must be a dict or an OmegaConf config, got {type(config).__name__} {config!r}")
    _read_section(config, "", settings)
    return settings


def config_get(config: Any, path: str, default: Any = None) -> Any:
    """config["a"]["b"] for path "a.b", for dicts and OmegaConf configs alike."""
    node = config
    for part in path.split("."):
        if node is None:
            return default
        if not hasattr(node, "get"):
            node = None
            continue
        try:
            node = node.get(part)
        except Exception:  # OmegaConf raises on missing keys in struct mode
            return default
    return default if node is None else node
