"""The default client of a process: ``seqflow.init()`` makes it, and the
module-level API (``seqflow.put``, ``seqflow.get_meta``, ... and their
``async_`` twins) calls it, as TransferQueue's module functions do."""

import inspect
import os
import threading

from seqflow._checks import check_count, check_name
from seqflow._config import read_config
from seqflow.client import _ASYNC_METHODS, Client
from seqflow.remote import ray_client

_DEFAULT = None
_LOCK = threading.RLock()
_BACKENDS = (None, "embedded", "ray")


def _new_lock() -> None:
    global _LOCK
    _LOCK = threading.RLock()  # a copy held by another parent thread would never be released


os.register_at_fork(after_in_child=_new_lock)


def init(config=None, *, backend=None, name: str = "seqflow", num_storage_units=None) -> Client:
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


def _module_function(name: str):
    method = getattr(Client, name)
    if inspect.iscoroutinefunction(method):
        async def function(*args, **kwargs):
            return await method(get_client(), *args, **kwargs)
    else:
        def function(*args, **kwargs):
            return method(get_client(), *args, **kwargs)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"Client.{name} on the default client.\n\n{method.__doc__ or ''}"
    return function


API_FUNCTIONS = (*_ASYNC_METHODS, *(f"async_{n}" for n in _ASYNC_METHODS))
globals().update({name: _module_function(name) for name in API_FUNCTIONS})
__all__ = ["close", "get_client", "init", *API_FUNCTIONS]
