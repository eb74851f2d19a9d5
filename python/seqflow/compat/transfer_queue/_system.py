"""Where the TransferQueue-compatible system runs and how a process joins it.

TransferQueue's ``init(conf)`` starts a controller and storage units (Ray
actors) once per job; ``init()`` in any other process of the job attaches to
them. seqflow does the same with its own services, in one of three modes,
picked by the config key ``seqflow.mode``:

- ``ray``: seqflow's services as Ray actors (what TransferQueue does), plus
  the actor named ``TransferQueueController`` in Ray namespace
  ``transfer_queue`` (see controller.py), which hands the config to joining
  processes and answers TransferQueue's partition calls.
- ``local``: the services on loopback threads of the initialising process.
- ``embedded``: controller and storage inside the process, no transport
  (fastest; no other process can join).
- ``auto`` (default): ``ray`` when Ray is initialised, else ``local``.

Processes started from the initialising one (fork, spawn, subprocess) find
the system through an environment variable; Ray workers through the named
actor.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from seqflow._checks import check_count
from seqflow._config import config_get
from seqflow.compat.transfer_queue.controller import ACTOR_NAME, ACTOR_NAMESPACE
from seqflow.samplers import BuiltinSampler

logger = logging.getLogger("seqflow.compat.transfer_queue")

SERVICES_NAME = "transfer_queue"  # seqflow's Ray services (namespace "seqflow")
JOIN_ENV = "SEQFLOW_TRANSFER_QUEUE"  # JSON: how child processes join
MODES = ("auto", "ray", "local", "embedded")
STORAGE_BACKENDS = ("SimpleStorage", "MooncakeStore", "Yuanrong", "RayStore")

# TransferQueue 0.1.11's defaults for the keys seqflow reads, and seqflow's own.
CONFIG_FILE = Path(__file__).with_name("config.yaml")


@dataclass
class System:
    """This process's view of the running system."""

    client: Any  # seqflow.Client
    conf: Any  # the merged config (OmegaConf) as TransferQueue's init returns it
    mode: str
    metrics_endpoint: Optional[str] = None
    owned: list = field(default_factory=list)  # what close() stops: services, actors

    def stop(self) -> None:
        self.client.close()
        _stop_all(self.owned)


def _stop_all(owned: list) -> None:
    """Stops what was started, last first; one failed stop does not keep the
    others running."""
    for stop in reversed(owned):
        try:
            stop()
        except Exception as error:
            logger.warning("stopping %s failed: %s", stop, error)
    owned.clear()


@contextlib.contextmanager
def _stopped_on_failure(owned: list):
    try:
        yield
    except BaseException:
        _stop_all(owned)
        raise


def _published(system: System, record: dict) -> System:
    """The started system, with its join record where child processes find it."""
    os.environ[JOIN_ENV] = json.dumps(record)
    return system


_LOCK = threading.RLock()
_SYSTEM: Optional[System] = None


def _merged_config(conf):
    from omegaconf import OmegaConf

    merged = OmegaConf.create(OmegaConf.to_container(OmegaConf.load(CONFIG_FILE)), flags={"allow_objects": True})
    if conf:
        merged = OmegaConf.merge(merged, conf)
    return merged


def _ray_if_initialized():
    try:
        import ray
    except ImportError:
        return None
    return ray if ray.is_initialized() else None


def _sampler_of(conf):
    """controller.sampler as TransferQueue takes it: an instance, a class, or
    a name of one of the samplers; a Python sampler gets the caller's
    numpy arrays in sampling_config as arrays (sampler.numpy_arguments)."""
    from seqflow.compat.transfer_queue.sampler.numpy_arguments import with_numpy_arguments

    return with_numpy_arguments(_configured_sampler(conf))


def _configured_sampler(conf):
    from seqflow.compat.transfer_queue import sampler as samplers

    sampler = config_get(conf, "controller.sampler", "SequentialSampler")
    if isinstance(sampler, str):
        named = getattr(samplers, sampler, None)
        if not (isinstance(named, type) and issubclass(named, samplers.BaseSampler)):
            raise ValueError(f"controller.sampler names no sampler: {sampler!r} (one of {samplers.__all__})")
        return named()
    if isinstance(sampler, type):
        if not issubclass(sampler, samplers.BaseSampler):
            raise ValueError(f"controller.sampler must be a BaseSampler instance, subclass or name, got {sampler!r}")
        return sampler()
    if not isinstance(sampler, samplers.BaseSampler):
        raise ValueError(f"controller.sampler must be a BaseSampler instance, subclass or name, got {sampler!r}")
    return sampler


def _storage_settings(conf) -> tuple[int, int]:
    """(units, samples per unit; 0 = unlimited)."""
    backend = config_get(conf, "backend.storage_backend", "SimpleStorage")
    if backend not in STORAGE_BACKENDS:
        raise ValueError(f"backend.storage_backend must be one of {STORAGE_BACKENDS}, got {backend!r}")
    if backend != "SimpleStorage":
        logger.warning("backend.storage_backend %r: seqflow keeps the data in its own storage units", backend)
    units = config_get(conf, "backend.SimpleStorage.num_data_storage_units", 2)
    if isinstance(units, bool) or not isinstance(units, int) or units < 1:
        raise ValueError(f"backend.SimpleStorage.num_data_storage_units must be an integer >= 1, got {units!r}")
    total = config_get(conf, "backend.SimpleStorage.total_storage_size", None)
    if total is None:
        return units, 0
    if isinstance(total, bool) or not isinstance(total, int) or total < 1:
        raise ValueError(f"backend.SimpleStorage.total_storage_size must be an integer >= 1 or null, got {total!r}")
    return units, math.ceil(total / units)


def _metrics_port(conf) -> Optional[int]:
    if not config_get(conf, "metrics.enabled", False):
        return None
    port = config_get(conf, "metrics.port", 0)
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"metrics.port must be an integer in 0..65535, got {port!r}")
    return port


def _timing_alignment(conf) -> int:
    """seqflow's controller.timing_alignment (see seqflow.Client)."""
    return check_count(config_get(conf, "controller.timing_alignment", 1), "controller.timing_alignment", minimum=1)


def _join_record(address: str, conf, metrics_endpoint: Optional[str]) -> dict:
    return {"address": address, "polling_mode": bool(config_get(conf, "controller.polling_mode", False)),
            "metrics_endpoint": metrics_endpoint}


def _remote_client(record: dict):
    from seqflow.client import Client

    return Client.remote(record["address"], polling_mode=record["polling_mode"])


def _conf_with_address(conf, record: dict):
    """The config a joining process gets: its controller.address lets
    seqflow.Client.from_config (and StreamingDataset(config=...)) connect."""
    from omegaconf import OmegaConf

    conf = OmegaConf.merge(conf, {"controller": {"address": record["address"]}})
    if record["metrics_endpoint"]:
        conf = OmegaConf.merge(conf, {"metrics": {"enabled": True, "endpoint": record["metrics_endpoint"]}})
    return conf


# ---- starting ----------------------------------------------------------------
def _start_embedded(conf) -> System:
    from seqflow.client import Client

    units, per_unit = _storage_settings(conf)
    client = Client(_sampler_of(conf), polling_mode=bool(config_get(conf, "controller.polling_mode", False)),
                    max_samples=per_unit * units, timing_alignment=_timing_alignment(conf))
    if _metrics_port(conf) is not None:
        logger.warning("metrics.enabled: embedded mode has no metrics endpoint; use seqflow.mode local or ray")
    return _published(System(client, conf, "embedded"), {"embedded_pid": os.getpid()})


def _start_local(conf) -> System:
    from seqflow.remote import serve_controller, serve_storage

    units, per_unit = _storage_settings(conf)
    port = _metrics_port(conf)
    owned = []
    with _stopped_on_failure(owned):
        controller = serve_controller("tcp://127.0.0.1:0", storage_units=units, sampler=_sampler_of(conf),
                                      polling_mode=bool(config_get(conf, "controller.polling_mode", False)),
                                      timing_alignment=_timing_alignment(conf),
                                      metrics=None if port is None else f"127.0.0.1:{port}")
        owned.append(controller.stop)
        for _ in range(units):
            owned.append(serve_storage(controller.endpoint, max_samples=per_unit).stop)
        metrics = None if port is None else f"127.0.0.1:{controller.metrics_port}"
        record = _join_record(controller.endpoint, conf, metrics)
        return _published(System(_remote_client(record), _conf_with_address(conf, record), "local", metrics, owned),
                          record)


def _start_ray(ray, conf) -> System:
    from seqflow.compat.transfer_queue.controller import TransferQueueController
    from seqflow.remote import start_ray_services

    units, per_unit = _storage_settings(conf)
    port = _metrics_port(conf)
    sampler = _sampler_of(conf)  # checked here; the actor gets a built-in's class or name when one was given
    configured = config_get(conf, "controller.sampler", None)
    builtin = isinstance(sampler, BuiltinSampler)
    settings = {"controller": {"sampler": configured if builtin and isinstance(configured, (str, type)) else sampler,
                               "polling_mode": bool(config_get(conf, "controller.polling_mode", False)),
                               "timing_alignment": _timing_alignment(conf)},
                "storage": {"max_samples": per_unit * units}}  # each unit takes per_unit (unit_share)
    services = start_ray_services(SERVICES_NAME, config=settings, num_storage_units=units, metrics_port=port)
    owned = [services.stop] if services.owned else []
    with _stopped_on_failure(owned):
        metrics = services.metrics_endpoint if port is not None else None
        record = _join_record(services.controller_address, conf, metrics)
        joined = _conf_with_address(conf, record)
        actor = TransferQueueController.options(name=ACTOR_NAME, namespace=ACTOR_NAMESPACE, lifetime="detached",
                                                num_cpus=0, get_if_exists=True).remote(joined)
        owned.append(lambda: ray.kill(actor, no_restart=True))
        ray.get(actor.store_config.remote(joined))
        return _published(System(_remote_client(record), joined, "ray", metrics, owned), record)


# ---- joining -----------------------------------------------------------------
def _join_from_environment() -> Optional[System]:
    text = os.environ.get(JOIN_ENV)
    if not text:
        return None
    record = json.loads(text)
    if "embedded_pid" in record:
        if record["embedded_pid"] == os.getpid():
            return None  # this process's own system was closed
        raise RuntimeError(
            f"transfer_queue runs embedded in process {record['embedded_pid']} (seqflow.mode: embedded), so other "
            "processes cannot join it; start it with seqflow.mode 'local' or 'ray'")
    try:
        client = _remote_client(record)
    except TimeoutError:
        return None  # the system that process started is gone
    conf = _conf_with_address(_merged_config(None), record)
    return System(client, conf, "joined", record["metrics_endpoint"])


def _join_from_ray(ray) -> Optional[System]:
    try:
        actor = ray.get_actor(ACTOR_NAME, namespace=ACTOR_NAMESPACE)
    except ValueError:
        return None
    conf = ray.get(actor.get_config.remote())
    address = config_get(conf, "controller.address", None)
    if address is None:
        return None
    record = {"address": address, "polling_mode": bool(config_get(conf, "controller.polling_mode", False)),
              "metrics_endpoint": config_get(conf, "metrics.endpoint", None)}
    return System(_remote_client(record), conf, "joined", record["metrics_endpoint"])


def init(conf=None):
    """TransferQueue's init: join the running system, else start one from
    `conf` (merged over TransferQueue's defaults). Returns the config."""
    global _SYSTEM
    with _LOCK:
        if _SYSTEM is not None:
            return conf if conf is not None else _SYSTEM.conf
        ray = _ray_if_initialized()
        joined = _join_from_environment() or (_join_from_ray(ray) if ray is not None else None)
        if joined is not None:
            _SYSTEM = joined
            return conf if conf is not None else joined.conf
        merged = _merged_config(conf)
        mode = config_get(merged, "seqflow.mode", "auto")
        if mode not in MODES:
            raise ValueError(f"seqflow.mode must be one of {MODES}, got {mode!r}")
        if mode == "auto":
            mode = "ray" if ray is not None else "local"
        if mode == "ray" and ray is None:
            import ray as ray_module

            ray_module.init()
            ray = ray_module
        start = {"ray": lambda: _start_ray(ray, merged), "local": lambda: _start_local(merged),
                 "embedded": lambda: _start_embedded(merged)}[mode]
        _SYSTEM = start()
        return _SYSTEM.conf


def require() -> System:
    """The running system, joined on first use as TransferQueue's calls do."""
    system = _SYSTEM
    if system is None:
        with _LOCK:
            if _SYSTEM is None:
                ray = _ray_if_initialized()
                joined = _join_from_environment() or (_join_from_ray(ray) if ray is not None else None)
                if joined is None:
                    raise RuntimeError("TransferQueue is not initialized. Call transfer_queue.init() first.")
                globals()["_SYSTEM"] = joined
            system = _SYSTEM
    return system


def close() -> None:
    """Closes this process's client; stops the services if this process
    started them."""
    global _SYSTEM
    with _LOCK:
        system, _SYSTEM = _SYSTEM, None
        if system is None:
            return
        if system.owned or system.mode == "embedded":
            os.environ.pop(JOIN_ENV, None)
        system.stop()
