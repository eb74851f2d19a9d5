"""numpy arrays in ``sampling_config``, handed to samplers as arrays.

TransferQueue pickles a get_meta request, so its samplers get the caller's
sampling_config values as given; its sampler tutorial hands a numpy array of
priorities. seqflow's requests carry JSON-like values: this layer's client
sends each numpy array (also inside lists and dicts) as its dtype, shape and
bytes under ``ARRAY``, and the Python samplers it runs for a TransferQueue
config (``NumpyArgumentsSampler``) get the array back. No pickle: the
controller runs no code a client sends. Other objects are refused, naming
the key.
"""

from __future__ import annotations

import base64
from typing import Any, Optional

import numpy as np

from seqflow import _seqflow
from seqflow.samplers import BaseSampler, BuiltinSampler

ARRAY = "__transfer_queue_ndarray__"


def _encoded_value(value):
    if isinstance(value, np.ndarray) and value.dtype != object:
        return {ARRAY: {"dtype": value.dtype.str, "shape": list(value.shape),
                        "data": base64.b64encode(np.ascontiguousarray(value).tobytes()).decode("ascii")}}
    if isinstance(value, (list, tuple)):
        return [_encoded_value(item) for item in value]
    if isinstance(value, dict):
        return {key: _encoded_value(item) for key, item in value.items()}
    return value


def _decoded_value(value):
    if isinstance(value, dict) and list(value) == [ARRAY]:
        array = value[ARRAY]
        return np.frombuffer(base64.b64decode(array["data"]), dtype=np.dtype(array["dtype"])).reshape(
            array["shape"]).copy()  # writable, as the caller's was
    if isinstance(value, list):
        return [_decoded_value(item) for item in value]
    if isinstance(value, dict):
        return {key: _decoded_value(item) for key, item in value.items()}
    return value


def encoded(sampling_config: Optional[dict]) -> Optional[dict]:
    """sampling_config with its numpy arrays in a form seqflow's requests carry."""
    return _encoded_value(sampling_config) if isinstance(sampling_config, dict) else sampling_config


def decoded(kwargs: dict) -> dict:
    return {key: _decoded_value(value) for key, value in kwargs.items()}


class NumpyArgumentsSampler:
    """A Python sampler whose sample() and reserved() get the caller's numpy
    arrays back; everything else is the sampler's own."""

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


BaseSampler.register(NumpyArgumentsSampler)


def with_numpy_arguments(sampler):
    """The sampler to run for a TransferQueue config: built-in (C++) samplers
    read no arrays and run as they are."""
    if isinstance(sampler, (BuiltinSampler, NumpyArgumentsSampler)):
        return sampler
    return NumpyArgumentsSampler(sampler)


__all__ = ["NumpyArgumentsSampler", "decoded", "encoded", "with_numpy_arguments"]
