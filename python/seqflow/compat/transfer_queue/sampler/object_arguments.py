"""Python objects in ``sampling_config``, handed to samplers as they were.

TransferQueue pickles a get_meta request, so its samplers get the caller's
sampling_config values as given (its tutorial hands a numpy array of
priorities). seqflow's requests carry JSON-like values only: this layer's
client sends any other value pickled, under ``PICKLED``, and the samplers it
runs for a TransferQueue config (``ObjectArgumentsSampler``) unpickle it
before their sample() sees it.
"""

from __future__ import annotations

import base64
import pickle
from typing import Any, Optional

from seqflow import _seqflow
from seqflow.samplers import BaseSampler

PICKLED = "__transfer_queue_pickled__"
_PLAIN = (type(None), bool, int, float, str)


def _is_plain(value) -> bool:
    if isinstance(value, _PLAIN):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_plain(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(key, str) and _is_plain(item) for key, item in value.items())
    return False


def encoded(sampling_config: Optional[dict]) -> Optional[dict]:
    """sampling_config with each value seqflow's requests cannot carry pickled."""
    if not isinstance(sampling_config, dict) or all(_is_plain(v) for v in sampling_config.values()):
        return sampling_config
    return {key: value if _is_plain(value) else {PICKLED: base64.b64encode(pickle.dumps(value)).decode("ascii")}
            for key, value in sampling_config.items()}


def decoded(kwargs: dict) -> dict:
    return {key: pickle.loads(base64.b64decode(value[PICKLED]))
            if isinstance(value, dict) and list(value) == [PICKLED] else value
            for key, value in kwargs.items()}


class ObjectArgumentsSampler:
    """A Python sampler whose sample() and reserved() get the caller's
    sampling_config objects unpickled; everything else is the sampler's."""

    def __init__(self, sampler):
        self.sampler = sampler

    def sample(self, ready_indexes, batch_size: int, *args, **kwargs) -> tuple[list[int], list[int]]:
        return self.sampler.sample(ready_indexes, batch_size, *args, **decoded(kwargs))

    def reserved(self, partition_id: str, task_name: str, sampling_config: dict) -> Optional[list[int]]:
        return self.sampler.reserved(partition_id, task_name, decoded(sampling_config))

    def _native_handle(self):
        return _seqflow.client.python_sampler(self)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "sampler":  # unpickling looks these up before __init__ ran
            raise AttributeError(name)
        return getattr(self.sampler, name)


BaseSampler.register(ObjectArgumentsSampler)


def with_object_arguments(sampler):
    """The sampler to run for a TransferQueue config: built-in (C++) samplers
    read no Python objects and run as they are."""
    if isinstance(sampler, (_seqflow.client.BuiltinSampler, ObjectArgumentsSampler)):
        return sampler
    return ObjectArgumentsSampler(sampler)


__all__ = ["ObjectArgumentsSampler", "decoded", "encoded", "with_object_arguments"]
