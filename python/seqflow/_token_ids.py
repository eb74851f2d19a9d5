"""Token ids (or labels) of many samples as seqflow.pack.materialize takes
them: a list of 1-D arrays or tensors, a torch nested tensor, or a Ragged
(one flat array and offsets). Ids must have an integer dtype: float ids may
already be wrong (float32 holds integers exactly only up to 2^24)."""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import numpy as np
from numpy.typing import ArrayLike

from seqflow._arrays import as_int64_array
from seqflow._checks import INT64_MAX

__all__ = ["Ragged", "token_samples"]


class Ragged(NamedTuple):
    """Token ids of many samples in one flat array: sample i is
    values[offsets[i]:offsets[i + 1]]."""

    values: ArrayLike
    offsets: ArrayLike


Ragged.__module__ = "seqflow.pack"


def token_samples(token_ids: Any, name: str) -> tuple[list[np.ndarray], Optional[np.ndarray]]:
    """([one int64 array per sample], None), or ([the flat values], offsets) of a Ragged."""
    if isinstance(token_ids, Ragged):
        values = _id_array(token_ids.values, f"{name}.values")
        if values.ndim != 1:
            raise ValueError(f"{name}.values must be one-dimensional, got shape {values.shape}")
        return [values], as_int64_array(token_ids.offsets, f"{name}.offsets")
    samples = token_ids.unbind() if getattr(token_ids, "is_nested", False) is True else token_ids  # nested tensor
    try:
        items = list(samples)
    except TypeError:
        raise ValueError(f"{name} must be a list of 1-D arrays or tensors, a nested tensor or a Ragged, "
                         f"got {type(token_ids).__name__}") from None
    return [_id_array(sample, f"{name}[{index}]").reshape(-1) for index, sample in enumerate(items)], None


def _id_array(values: Any, name: str) -> np.ndarray:
    """Token ids or labels as a C-contiguous int64 array; float dtypes are refused even when whole."""
    source = values
    if hasattr(values, "detach"):  # a torch tensor
        if values.is_floating_point() or values.is_complex():
            raise ValueError(f"{name} has dtype {values.dtype}; token ids and labels must be integers")
        source = values.detach().cpu().numpy()
    try:
        array = np.asarray(source)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be an array of integer token ids: {error}") from None
    kind = array.dtype.kind
    if array.size and kind not in "iu":
        raise ValueError(f"{name} has dtype {array.dtype}; token ids and labels must be integers")
    if kind == "u" and array.size and array.max() > INT64_MAX:
        raise ValueError(f"{name} holds {int(array.max())}, beyond the int64 range")
    return np.ascontiguousarray(array, dtype=np.int64)
