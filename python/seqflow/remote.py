"""Remote mode's services from Python: in this process, and on a Ray cluster.

``serve_controller(...)`` and ``serve_storage(...)`` run a service in this
process with the settings of ``seqflow serve`` and return a ServiceHandle;
the controller may use a sampler written in Python, since it runs here.

On a Ray cluster, ``ray_client(name, num_storage_units=N)`` (what
``seqflow.init(backend="ray", num_storage_units=N, name=...)`` calls) starts
the controller and N storage units as detached, named actors spread over the
nodes; each actor runs its service in its own process, bound to its node's IP
address on a free port. Any other process of the job attaches with
``ray_client(name)`` (``seqflow.init(backend="ray", name=...)``): the actors
are found by name and tell the controller's endpoint. Ray is imported only
when one of these is called.

CURVE: one cluster key directory (``seqflow keygen --cluster DIR --clients
trainer``) serves the controller and every storage unit
(``curve_keys=DIR``): they admit DIR/cluster.pub and DIR/clients/*.pub
only; clients need ``DIR/cluster.pub`` and their own key
(``DIR/clients/trainer.key``). With Ray, the config names them:
``security.curve_keys`` (the services), ``security.server_public_key_file``
and ``security.client_key_file`` (the clients); the files must exist under
these paths on every node.
"""

from __future__ import annotations

import atexit
import os
import uuid
from typing import Any, Optional

from seqflow import _seqflow
from seqflow._capacity import capacity_of_settings, unit_share
from seqflow._checks import check_count
from seqflow._config import read_config
from seqflow._serve import ServiceHandle, keygen, read_key_file, serve_controller, serve_storage
from seqflow.client import Client, RemoteConfig

__all__ = [
    "RAY_NAMESPACE",
    "RayServices",
    "ServiceHandle",
    "keygen",
    "ray_client",
    "read_key_file",
    "serve_controller",
    "serve_storage",
    "shutdown_ray_services",
    "start_ray_services",
]

# Services still serving stop at exit, while the interpreter can still run the
# Python samplers their handlers may be calling; a child after fork leaves the
# parent's services alone.
atexit.register(_seqflow.server.stop_live_services)
os.register_at_fork(after_in_child=_seqflow.server.forget_parent_services)


# ---- Ray ----------------------------------------------------------------------

def _import_ray():
    try:
        import ray
    except ImportError as error:
        raise ImportError("seqflow.init(backend='ray') needs ray; install it (pip install ray)") from error
    if not ray.is_initialized():
        ray.init()
    return ray


# Detached actors live in this Ray namespace, so that every job of the
# cluster finds them by name, not only the job that started them.
RAY_NAMESPACE = "seqflow"


def _controller_name(name: str) -> str:
    return f"{name}.controller"


def _storage_name(name: str, index: int) -> str:
    return f"{name}.storage.{index}"


class _ServiceActor:
    """One service in a Ray actor's process, bound to its node's IP address."""

    def __init__(self, role: str, settings: dict, owner: str):
        import ray

        host = ray.util.get_node_ip_address()
        bind = f"tcp://[{host}]:0" if ":" in host else f"tcp://{host}:0"
        serve = serve_controller if role == "controller" else serve_storage
        self._host = host
        self._settings = settings
        self._owner = owner
        serving = dict(settings)
        metrics_port = serving.pop("metrics_port", None)
        if metrics_port is not None:
            serving["metrics"] = f"[{host}]:{metrics_port}" if ":" in host else f"{host}:{metrics_port}"
        self._handle = serve(bind=bind, **serving)

    def endpoint(self) -> str:
        return self._handle.endpoint

    def owner(self) -> str:
        """The token of the start_ray_services() call that created this actor."""
        return self._owner

    def storage_units(self) -> int:
        return self._settings["storage_units"]

    def metrics_endpoint(self) -> Optional[str]:
        """HOST:PORT of the Prometheus endpoint, None without one."""
        port = self._handle.metrics_port
        return None if port is None else f"{self._host}:{port}"

    def stats(self) -> dict:
        """A storage unit's use: {"samples": ..., "bytes": ...}."""
        return self._handle.stats()

    def stop(self) -> None:
        self._handle.stop()


class RayServices:
    """The controller and storage actors of one name."""

    def __init__(self, name: str, controller, units: list, owned: bool):
        self.name = name
        self.controller = controller
        self.units = units
        self.owned = owned  # created by this process's call

    @property
    def controller_address(self) -> str:
        import ray

        return ray.get(self.controller.endpoint.remote())

    @property
    def metrics_endpoint(self) -> Optional[str]:
        """The controller's Prometheus endpoint (HOST:PORT), None without one."""
        import ray

        return ray.get(self.controller.metrics_endpoint.remote())

    def stop(self) -> None:
        """Stops the services and kills their actors (storage units first)."""
        import ray

        for actor in [*self.units, self.controller]:
            try:
                ray.get(actor.stop.remote(), timeout=60)
            except Exception:  # an actor that died already is what stop() wants
                pass
            ray.kill(actor, no_restart=True)


def _service_settings(config) -> tuple[dict, dict]:
    """(controller settings, storage settings) of a TransferQueue-style config, checked as
    read_config checks every config ('polling_mode: "false"' is refused, not taken as True)."""
    settings = read_config(config)
    common = dict(curve_secret=settings.get("security.server_secret_key_file"),
                  curve_keys=settings.get("security.curve_keys"), checkpoint_root=settings.get("checkpoint_root"))
    controller = dict(sampler=settings.get("controller.sampler"), sampler_args=settings.get("controller.sampler_args"),
                      polling_mode=settings.get("controller.polling_mode", False),
                      timing_alignment=settings.get("controller.timing_alignment", 1), **common)
    storage = dict(capacity_of_settings(settings), **common)
    return controller, storage


def start_ray_services(name: str = "seqflow", *, config=None, num_storage_units: int = 1,
                       actor_options: Optional[dict[str, Any]] = None,
                       metrics_port: Optional[int] = None) -> RayServices:
    """The controller and `num_storage_units` storage units as detached actors
    named NAME.controller and NAME.storage.I in the Ray namespace "seqflow",
    spread over the nodes; actors of these names that run already are reused.
    actor_options override the ray actor options (default: num_cpus=0,
    SPREAD, detached). metrics_port: the controller serves Prometheus
    metrics on its node's address at this port (0: any free port). The
    config's storage limits bound the whole cluster: each unit takes its
    share (seqflow._capacity.unit_share)."""
    ray = _import_ray()
    units = check_count(num_storage_units, "num_storage_units", minimum=1)
    controller_settings, storage_settings = _service_settings(config or {})
    controller_settings["storage_units"] = units
    storage_settings = unit_share(storage_settings, units)  # the config's limits are the cluster's
    if metrics_port is not None:
        controller_settings["metrics_port"] = check_count(metrics_port, "metrics_port", maximum=65535)
    options = dict(lifetime="detached", namespace=RAY_NAMESPACE, scheduling_strategy="SPREAD", num_cpus=0,
                   get_if_exists=True, **(actor_options or {}))
    actor_class = ray.remote(_ServiceActor)
    token = uuid.uuid4().hex
    controller = actor_class.options(name=_controller_name(name), **options).remote(
        "controller", controller_settings, token)
    running_units = ray.get(controller.storage_units.remote())
    if running_units != units:
        raise ValueError(f"num_storage_units is {units}, but the seqflow services named {name!r} run with "
                         f"{running_units}; pick another name or stop them (seqflow.shutdown_ray_services)")
    endpoint = ray.get(controller.endpoint.remote())
    storage_actors = [
        actor_class.options(name=_storage_name(name, i), **options).remote(
            "storage", {**storage_settings, "controller": endpoint}, token)
        for i in range(units)
    ]
    ray.get([actor.endpoint.remote() for actor in storage_actors])  # raises if a unit failed to start
    return RayServices(name, controller, storage_actors, ray.get(controller.owner.remote()) == token)


def _find_services(ray, name: str) -> Optional[RayServices]:
    try:
        controller = ray.get_actor(_controller_name(name), namespace=RAY_NAMESPACE)
    except ValueError:
        return None
    units = []
    for i in range(ray.get(controller.storage_units.remote())):
        try:
            units.append(ray.get_actor(_storage_name(name, i), namespace=RAY_NAMESPACE))
        except ValueError:  # a unit that died; the rest still stop
            continue
    return RayServices(name, controller, units, owned=False)


def ray_client(name: str = "seqflow", *, config=None, num_storage_units: Optional[int] = None,
               actor_options: Optional[dict[str, Any]] = None) -> Client:
    """A remote client of the seqflow services named `name` on the Ray
    cluster. With num_storage_units they are started unless they run already
    (start_ray_services), and the client's close() stops them if this call
    started them; without, they must run (KeyError otherwise). The config's
    timeout, controller.polling_mode and security.* keys apply to the
    client."""
    ray = _import_ray()
    if num_storage_units is None:
        services = _find_services(ray, name)
        if services is None:
            raise KeyError(f"no seqflow services named {name!r} on this Ray cluster; start them with "
                           f"seqflow.init(backend='ray', name={name!r}, num_storage_units=N)")
    else:
        services = start_ray_services(name, config=config, num_storage_units=num_storage_units,
                                      actor_options=actor_options)
    remote = RemoteConfig.from_config(config or {}, address=services.controller_address)
    try:
        return Client._connect(remote, services=services if services.owned else None)
    except BaseException:
        if services.owned:
            services.stop()
        raise


def shutdown_ray_services(name: str = "seqflow") -> bool:
    """Stops the seqflow services named `name` on the Ray cluster, from any
    process; False when none run."""
    services = _find_services(_import_ray(), name)
    if services is None:
        return False
    services.stop()
    return True
