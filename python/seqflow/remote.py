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

CURVE: one cluster key pair (``seqflow keygen cluster`` or ``keygen``) serves
the controller and every storage unit (``curve_secret="cluster.key"``);
clients need ``cluster.pub`` and a key pair of their own. With Ray, the config
names them: ``security.server_secret_key_file`` (the services),
``security.server_public_key_file`` and ``security.client_key_file`` (the
clients); the files must exist under these paths on every node.
"""

from __future__ import annotations

import atexit
import os
import uuid
import weakref
from typing import Any, Optional, Sequence

from seqflow import _seqflow
from seqflow._checks import check_count
from seqflow._config import read_config
from seqflow.client import Client, RemoteConfig
from seqflow.samplers import native_sampler

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

_net = _seqflow.server

# Handles still serving, stopped at exit while the interpreter can still run
# the Python samplers their handlers may be calling.
_LIVE: "weakref.WeakSet[ServiceHandle]" = weakref.WeakSet()


class ServiceHandle:
    """A controller or storage service running in this process."""

    def __init__(self, native, role: str):
        self._native = native
        self.role = role
        native.start()
        _LIVE.add(self)

    @property
    def endpoint(self) -> str:
        """The bound endpoint, e.g. tcp://127.0.0.1:40123."""
        return self._native.endpoint

    @property
    def metrics_port(self) -> Optional[int]:
        return self._native.metrics_port

    @property
    def serving_line(self) -> str:
        """What ``seqflow serve`` prints: 'seqflow ROLE serving on ENDPOINT[ metrics on URL]'."""
        return self._native.serving_line

    def stats(self) -> dict:
        """A storage unit's use: {"samples": ..., "bytes": ...}."""
        if self.role != "storage":
            raise ValueError(f"stats() is a storage unit's, this is the {self.role}")
        return self._native.stats()

    def stop(self) -> None:
        """Stops serving (idempotent): running calls finish, queued ones are dropped."""
        if self._native is not None:  # None: the parent's service, in a child after fork
            self._native.stop()
        _LIVE.discard(self)

    def __enter__(self) -> "ServiceHandle":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ServiceHandle({self.role!r}, {self.endpoint!r})"


@atexit.register
def _stop_live_services() -> None:
    for handle in list(_LIVE):
        handle.stop()


def _forget_parent_services() -> None:
    """In a child after fork the services' threads are the parent's: never
    stop or free them here."""
    for handle in list(_LIVE):
        handle._native.abandon()
        handle._native = None
    _LIVE.clear()


os.register_at_fork(after_in_child=_forget_parent_services)


def _optional_count(value, name: str) -> int:
    """0 (the service's default) for None, else an integer >= 1."""
    return 0 if value is None else check_count(value, name, minimum=1)


def _path(value) -> str:
    return "" if value is None else os.fspath(value)


def _serving_args(metrics, max_workers, max_request_bytes, curve_secret, curve_clients, checkpoint_root) -> dict:
    if isinstance(curve_clients, (str, os.PathLike)):
        curve_clients = [curve_clients]
    return dict(metrics=metrics or "", max_workers=_optional_count(max_workers, "max_workers"),
                max_request_bytes=_optional_count(max_request_bytes, "max_request_bytes"),
                curve_secret=_path(curve_secret), curve_clients=[os.fspath(c) for c in curve_clients or ()],
                checkpoint_root=_path(checkpoint_root))


def serve_controller(bind: str = "tcp://127.0.0.1:5555", *, storage_units: int = 1, sampler=None,
                     sampler_args: Optional[dict] = None, polling_mode: bool = False,
                     load_checkpoint: Optional[str] = None, metrics: Optional[str] = None,
                     max_workers: Optional[int] = None, max_request_bytes: Optional[int] = None,
                     curve_secret: Optional[str] = None, curve_clients: Sequence[str] = (),
                     checkpoint_root: Optional[str] = None) -> ServiceHandle:
    """The controller service in this process, serving when this returns
    (``seqflow serve controller``; port 0 in `bind` picks a free port).

    storage_units: units clients wait for. sampler: an instance, class or
    name (sampler_args for a class or name), Python samplers included.
    metrics: "HOST:PORT" of a Prometheus endpoint. curve_secret: the cluster
    .key file; curve_clients: .pub files (or directories of them) of the
    admitted clients (default: any client knowing the cluster public key).
    checkpoint_root: clients' save_checkpoint / load_checkpoint paths must
    lie under this directory (default: anywhere)."""
    native = _net.ControllerService(
        bind, check_count(storage_units, "storage_units", minimum=1), native_sampler(sampler, sampler_args),
        bool(polling_mode), _path(load_checkpoint),
        **_serving_args(metrics, max_workers, max_request_bytes, curve_secret, curve_clients, checkpoint_root))
    return ServiceHandle(native, "controller")


def serve_storage(controller: str, bind: str = "tcp://127.0.0.1:0", *, advertise: Optional[str] = None,
                  max_bytes: int = 0, max_samples: int = 0, metrics: Optional[str] = None,
                  max_workers: Optional[int] = None, max_request_bytes: Optional[int] = None,
                  curve_secret: Optional[str] = None, curve_clients: Sequence[str] = (),
                  controller_key: Optional[str] = None, checkpoint_root: Optional[str] = None) -> ServiceHandle:
    """A storage unit in this process that registers with the controller
    service at `controller` (``seqflow serve storage``). advertise: the
    endpoint clients reach it at (default the bound one). max_bytes,
    max_samples: capacity (0: unlimited). controller_key: the controller's
    .pub file when it is not the cluster key of curve_secret. checkpoint_root:
    as for serve_controller."""
    native = _net.StorageService(
        bind, controller, advertise or "", check_count(max_bytes, "max_bytes"), check_count(max_samples, "max_samples"),
        controller_key=_path(controller_key),
        **_serving_args(metrics, max_workers, max_request_bytes, curve_secret, curve_clients, checkpoint_root))
    return ServiceHandle(native, "storage")


def keygen(prefix, *, overwrite: bool = False) -> str:
    """A new CURVE key pair as prefix.key (public and secret key, mode 0600)
    and prefix.pub; returns the public key (Z85)."""
    prefix = os.fspath(prefix)
    if not overwrite:
        for path in (prefix + ".key", prefix + ".pub"):
            if os.path.exists(path):
                raise ValueError(f"prefix {prefix!r}: {path} exists; pass overwrite=True to replace it")
    return _net.write_key_files(prefix)


def read_key_file(path) -> tuple[str, Optional[str]]:
    """(public key, secret key or None) of a .key or .pub file, as Z85 text."""
    return _net.read_key_file(os.fspath(path))


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
                  checkpoint_root=settings.get("checkpoint_root"))
    controller = dict(sampler=settings.get("controller.sampler"), sampler_args=settings.get("controller.sampler_args"),
                      polling_mode=settings.get("controller.polling_mode", False), **common)
    storage = dict(max_bytes=settings.get("storage.max_bytes", 0), max_samples=settings.get("storage.max_samples", 0),
                   **common)
    return controller, storage


def start_ray_services(name: str = "seqflow", *, config=None, num_storage_units: int = 1,
                       actor_options: Optional[dict[str, Any]] = None,
                       metrics_port: Optional[int] = None) -> RayServices:
    """The controller and `num_storage_units` storage units as detached actors
    named NAME.controller and NAME.storage.I in the Ray namespace "seqflow",
    spread over the nodes; actors of these names that run already are reused.
    actor_options override the ray actor options (default: num_cpus=0,
    SPREAD, detached). metrics_port: the controller serves Prometheus
    metrics on its node's address at this port (0: any free port)."""
    ray = _import_ray()
    units = check_count(num_storage_units, "num_storage_units", minimum=1)
    controller_settings, storage_settings = _service_settings(config or {})
    controller_settings["storage_units"] = units
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
