"""seqflow: balanced data flow for LLM reinforcement-learning post-training.

The streaming API follows TransferQueue's names and meanings:
``seqflow.init(config)``, ``seqflow.put``, ``seqflow.get_meta``,
``seqflow.get_data``, the kv_* calls, checkpoints, each also as
``async_<name>``; ``BatchMeta``; the samplers; ``StreamingDataset`` and
``StreamingDataLoader`` (these two need torch). Remote mode:
``seqflow.init({"controller": {"address": ...}})`` or
``seqflow.init(backend="ray", ...)``; ``serve_controller``/``serve_storage``
run services in this process (see seqflow.remote).

The streaming API loads on first use, so that ``seqflow.balance`` and
``seqflow.pack`` cost no torch import (seconds and ~250 MB).
"""

import importlib
from typing import TYPE_CHECKING

from seqflow import _seqflow, balance, pack

__version__ = "0.1.0"

_LAZY_NAMES = {
    "BatchMeta": "seqflow.batch_meta",
    "KVBatchMeta": "seqflow.batch_meta",
    "Client": "seqflow.client",
    "RemoteConfig": "seqflow.client",
    "StaleSampleError": "seqflow.client",
    "BaseSampler": "seqflow.samplers",
    "SequentialSampler": "seqflow.samplers",
    "GRPOGroupNSampler": "seqflow.samplers",
    "RankAwareSampler": "seqflow.samplers",
    "SeqlenBalancedSampler": "seqflow.samplers",
    "TokenBudgetSampler": "seqflow.samplers",
    "StreamingDataset": "seqflow.streaming",
    "StreamingDataLoader": "seqflow.streaming",
    "ServiceHandle": "seqflow.remote",
    "serve_controller": "seqflow.remote",
    "serve_storage": "seqflow.remote",
    "keygen": "seqflow.remote",
    "read_key_file": "seqflow.remote",
    "shutdown_ray_services": "seqflow.remote",
}




def _earlier_name(name: str) -> object:
    """seqflow._seqflow.BatchMeta: the name pickles written while BatchMeta was a C++ class give it."""
    if name == "BatchMeta":
        return importlib.import_module("seqflow.batch_meta").BatchMeta
    raise AttributeError(f"module 'seqflow._seqflow' has no attribute '{name}'")


setattr(_seqflow, "__getattr__", _earlier_name)

if TYPE_CHECKING:
    # What __getattr__ loads on first use, spelled out for type checkers
    # ("import X as X": re-exported under mypy --strict).
    from seqflow.batch_meta import BatchMeta as BatchMeta, KVBatchMeta as KVBatchMeta
    from seqflow.client import Client as Client, RemoteConfig as RemoteConfig, StaleSampleError as StaleSampleError
    from seqflow.default_client import *  # noqa: F403 (init, close, get_client and the calls on the default client)
    from seqflow.remote import (
        ServiceHandle as ServiceHandle,
        keygen as keygen,
        read_key_file as read_key_file,
        serve_controller as serve_controller,
        serve_storage as serve_storage,
        shutdown_ray_services as shutdown_ray_services,
    )
    from seqflow.samplers import (
        BaseSampler as BaseSampler,
        GRPOGroupNSampler as GRPOGroupNSampler,
        RankAwareSampler as RankAwareSampler,
        SeqlenBalancedSampler as SeqlenBalancedSampler,
        SequentialSampler as SequentialSampler,
        TokenBudgetSampler as TokenBudgetSampler,
    )
    from seqflow.streaming import StreamingDataLoader as StreamingDataLoader, StreamingDataset as StreamingDataset
else:
    # Hidden from type checkers: they would take every unknown name for a lazy one.
    def _default_client_module():
        return importlib.import_module("seqflow.default_client")

    def __getattr__(name):
        if name in _LAZY_NAMES:
            return getattr(importlib.import_module(_LAZY_NAMES[name]), name)
        if name == "__all__":
            return ["balance", "pack", "__version__", *_LAZY_NAMES, *_default_client_module().__all__]
        if not name.startswith("_"):  # a private name is a submodule being imported, never a client function
            default = _default_client_module()
            if name in default.__all__:
                return getattr(default, name)
        raise AttributeError(f"module 'seqflow' has no attribute {name!r}")

    def __dir__():
        return sorted(set(globals()) | set(__getattr__("__all__")))
