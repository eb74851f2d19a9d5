"""The controller and storage services in this process, with the settings of
``seqflow serve``, and CURVE key files: the arguments checked here, the
services started by _seqflow.server (python/bindings/service_bindings.cc,
over the public seqflow/server.h)."""

from __future__ import annotations

import os
from typing import Any, Iterable, Optional, Union

from seqflow import _seqflow
from seqflow._capacity import storage_options
from seqflow._checks import check_bool, check_count, check_instance, check_name, check_path
from seqflow.samplers import native_sampler

__all__ = ["ServiceHandle", "keygen", "read_key_file", "serve_controller", "serve_storage"]

_net = _seqflow.server
ServiceHandle = _net.ServiceHandle

PathLike = Union[str, "os.PathLike[str]"]


def _text(value: str, parameter: str) -> str:
    """An endpoint: a str (the service checks what it names)."""
    return check_instance(value, parameter, str, "a str")


def _path_text(value: Optional[PathLike], parameter: str) -> str:
    """A path argument as a str; "" (not set) for None."""
    return "" if value is None else check_path(value, parameter)


def _optional_count(value: Optional[int], parameter: str) -> int:
    """0 (the service's default) for None, else an integer >= 1."""
    return 0 if value is None else check_count(value, parameter, minimum=1)


def _client_key_files(values: Union[PathLike, Iterable[PathLike], None]) -> list[str]:
    """curve_clients: one path or an iterable of them."""
    if values is None:
        return []
    if isinstance(values, (str, os.PathLike)):
        return [_path_text(values, "curve_clients")]
    return [_path_text(value, f"curve_clients[{i}]") for i, value in enumerate(values)]


def _serving(metrics: Optional[str], max_workers: Optional[int], max_request_bytes: Optional[int],
             curve_secret: Optional[PathLike], curve_clients: Union[PathLike, Iterable[PathLike], None],
             curve_keys: Optional[PathLike], checkpoint_root: Optional[PathLike]) -> tuple[Any, ...]:
    """The settings both services take, checked, as the native calls take them."""
    return ("" if not metrics else check_name(metrics, "metrics"), _optional_count(max_workers, "max_workers"),
            _optional_count(max_request_bytes, "max_request_bytes"), _path_text(curve_secret, "curve_secret"),
            _client_key_files(curve_clients), _path_text(curve_keys, "curve_keys"),
            _path_text(checkpoint_root, "checkpoint_root"))


def serve_controller(bind: str = "tcp://127.0.0.1:5555", *, storage_units: int = 1, sampler: Any = None,
                     sampler_args: Optional[dict[str, Any]] = None, polling_mode: bool = False,
                     timing_alignment: int = 1, load_checkpoint: Optional[PathLike] = None,
                     metrics: Optional[str] = None, max_workers: Optional[int] = None,
                     max_request_bytes: Optional[int] = None, curve_secret: Optional[PathLike] = None,
                     curve_clients: Union[PathLike, Iterable[PathLike], None] = (),
                     curve_keys: Optional[PathLike] = None,
                     checkpoint_root: Optional[PathLike] = None) -> ServiceHandle:
    """The controller service in this process, serving when this returns
    (``seqflow serve controller``; port 0 in `bind` picks a free port).

    storage_units: units clients wait for. sampler: an instance, class or
    name (sampler_args for a class or name), Python samplers included.
    timing_alignment: see Client (seqflow serve controller --timing-alignment).
    metrics: "HOST:PORT" of a Prometheus endpoint. curve_keys: a cluster key
    directory (seqflow keygen --cluster DIR): CURVE with DIR/cluster.key,
    admitting DIR/cluster.pub and DIR/clients/*.pub, metrics behind
    DIR/metrics.token. Or curve_secret: the cluster .key file with
    curve_clients: .pub files (or directories of them) of the admitted
    clients (required with curve_secret).
    checkpoint_root: clients' save_checkpoint / load_checkpoint paths must
    lie under this directory (default: $SEQFLOW_CHECKPOINT_ROOT, else
    ~/.local/state/seqflow/checkpoints, made 0700; a relative path lies under it)."""
    endpoint = _text(bind, "bind")
    units = check_count(storage_units, "storage_units", minimum=1)
    handle = native_sampler(sampler, sampler_args)
    return _net.serve_controller(endpoint, units, handle, check_bool(polling_mode, "polling_mode"),
                                 check_count(timing_alignment, "timing_alignment", minimum=1),
                                 _path_text(load_checkpoint, "load_checkpoint"),
                                 *_serving(metrics, max_workers, max_request_bytes, curve_secret, curve_clients,
                                           curve_keys, checkpoint_root))


def serve_storage(controller: str, bind: str = "tcp://127.0.0.1:0", *, advertise: Optional[str] = None,
                  max_bytes: int = 0, max_samples: int = 0, max_bytes_per_partition: int = 0,
                  max_samples_per_partition: int = 0, when_full: str = "raise", high_watermark: float = 1.0,
                  low_watermark: Optional[float] = None, metrics: Optional[str] = None,
                  max_workers: Optional[int] = None, max_request_bytes: Optional[int] = None,
                  curve_secret: Optional[PathLike] = None,
                  curve_clients: Union[PathLike, Iterable[PathLike], None] = (),
                  curve_keys: Optional[PathLike] = None, controller_key: Optional[PathLike] = None,
                  checkpoint_root: Optional[PathLike] = None) -> ServiceHandle:
    """A storage unit in this process that registers with the controller
    service at `controller` (``seqflow serve storage``). advertise: the
    endpoint clients reach it at (default the bound one). max_bytes,
    max_samples, max_bytes_per_partition, max_samples_per_partition,
    when_full, high_watermark, low_watermark: capacity, as seqflow.Client
    takes it (0: unlimited); with when_full="wait" a put that does not fit
    is told so at once, and its client retries until the put's timeout
    (the unit holds no thread for it). curve_keys, curve_secret,
    curve_clients: as for serve_controller. controller_key: the controller's
    .pub file when it is not the cluster key. checkpoint_root: as for
    serve_controller."""
    return _net.serve_storage(_text(controller, "controller"), _text(bind, "bind"),
                              "" if not advertise else check_name(advertise, "advertise"),
                              storage_options(max_bytes=max_bytes, max_samples=max_samples,
                                              max_bytes_per_partition=max_bytes_per_partition,
                                              max_samples_per_partition=max_samples_per_partition,
                                              when_full=when_full, high_watermark=high_watermark,
                                              low_watermark=low_watermark),
                              *_serving(metrics, max_workers, max_request_bytes, curve_secret, curve_clients,
                                        curve_keys, checkpoint_root),
                              _path_text(controller_key, "controller_key"))


def keygen(prefix: PathLike, *, overwrite: bool = False) -> str:
    """A new CURVE key pair as prefix.key (public and secret key, mode 0600)
    and prefix.pub; returns the public key (Z85)."""
    path = check_path(prefix, "prefix")
    if not check_bool(overwrite, "overwrite"):
        for file in (f"{path}.key", f"{path}.pub"):
            if os.path.exists(file):
                raise ValueError(f"prefix {path!r}: {file} exists; pass overwrite=True to replace it")
    return _net.keygen(path)


def read_key_file(path: PathLike) -> tuple[str, Optional[str]]:
    """(public key, secret key or None) of a .key or .pub file, as Z85 text."""
    return _net.read_key_file(check_path(path, "path"))
