"""What a field of a put may hold (numpy arrays and lists; seqflow._convert
adds torch and tensordict), and the rule that turns each kind into the
field's input to the native put: a tuple the put converts in C++ with every
other field, in one crossing (python/bindings/bindings/tensor_conversion.h):
(field, array, borrow), (field, values, offsets, borrow), (field, [array per
sample]) or (field, [value per sample], allow_pickle)."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any, Optional, Union

import numpy as np

from seqflow import _seqflow
from seqflow._checks import check_instance, check_name

# A field as the native put takes it (the tuples above).
FieldInput = Union[tuple[str, Any, bool], tuple[str, Any, Any, bool], tuple[str, list[Any]], tuple[str, list[Any], bool]]

# The element types the engine stores, by name (seqflow/tensor.h).
DTYPES: frozenset[str] = frozenset(_seqflow.convert.DTYPES)

# The numpy kinds of the dtypes seqflow stores (not complex, datetime,
# structured, ...), and those a put stores as one non-tensor value per row
# (objects, str, bytes).
_STORABLE_KINDS = "biuf"
_NON_TENSOR_KINDS = "OUS"


def unstorable_dtype(field: str, dtype: str) -> ValueError:
    """The error for a dtype seqflow does not store (`dtype`: its numpy or torch name)."""
    return ValueError(f'field "{field}" has dtype {dtype}, which seqflow does not store; '
                      "use bool, uint8, int8-64, float16, bfloat16, float32 or float64")


def _is_non_tensor_array(array: np.ndarray) -> bool:
    return array.dtype.kind in _NON_TENSOR_KINDS


# Checked first: the ABC check costs more, once per item of a long list.
_PLAIN_NUMBER_TYPES = frozenset((int, float, bool))


def _is_number(item: object) -> bool:
    """A number a list field stores densely: numbers.Number or numpy.bool_, but not complex."""
    return type(item) in _PLAIN_NUMBER_TYPES or (
        not isinstance(item, complex) and isinstance(item, (numbers.Number, np.bool_)))


def _is_array(item: object) -> bool:
    """A numpy array, or a tensor the caller made a contiguous CPU one (any DLPack producer)."""
    return isinstance(item, np.ndarray) or hasattr(item, "__dlpack__")


# Per numpy dtype number: whether seqflow stores the dtype (dtype.name costs
# over a microsecond; the number and a lookup, a few dozen nanoseconds).
_storable_by_number: dict[int, bool] = {}


def _is_storable(dtype: np.dtype) -> bool:
    known = _storable_by_number.get(dtype.num)
    if known is None:
        known = _storable_by_number[dtype.num] = dtype.kind in _STORABLE_KINDS and dtype.name in DTYPES
    return known


def _native_order(array: np.ndarray, field: str) -> np.ndarray:
    """A C-contiguous array in this machine's byte order (DLPack carries no
    other), refusing dtypes seqflow does not store (float128, say)."""
    if not _is_storable(array.dtype):
        raise unstorable_dtype(field, str(array.dtype))
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    return np.ascontiguousarray(array)


def _array_rows(array: np.ndarray) -> list[Any]:
    """One value per row of a numpy array of objects, strings or bytes."""
    return list(array) if array.ndim == 1 else array.tolist()


def _list_input(field: str, value: list[Any] | tuple[Any, ...], allow_pickle: bool) -> FieldInput:
    """A plain list: arrays (a tensor field of varying shapes), numbers (dense), or non-tensor values."""
    items = list(value)
    if not items:
        raise ValueError(f"field {field!r} is an empty list; a field needs one value per sample")
    if all(_is_array(item) for item in items):
        return (field, [_native_order(item, field) if isinstance(item, np.ndarray) else item for item in items])
    if not all(_is_number(item) for item in items):
        return (field, items, allow_pickle)
    array = np.asarray(items)
    if array.dtype.kind == "O":  # an int beyond 64 bits
        raise ValueError(f"field {field!r} holds numbers that fit no 64-bit dtype, got {items[:8]!r}")
    return (field, _native_order(array, field), False)


def field_input(field: str, value: Any, borrow: bool = False, allow_pickle: bool = False) -> FieldInput:
    """The native put's input of one field: a numpy array (samples along the
    first dimension; one of objects, str or bytes is one non-tensor value per
    row), a list of arrays or tensors of varying shape, a list of numbers, or
    a list of non-tensor values. Tensor fields are copied once into a buffer
    the storage owns; with borrow (remote clients, whose put has sent every
    byte when it returns) arrays are sent from their own memory. Non-tensor
    values are stored without pickle when they are plain (None, bool, int,
    float, str, bytes, lists, tuples and str-keyed dicts of them; a tuple
    reads back as a list); anything else needs allow_pickle=True on both
    sides."""
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            raise ValueError(f"field {field!r} is a 0-d array; the first dimension must be the batch")
        if _is_non_tensor_array(value):
            return (field, _array_rows(value), allow_pickle)
        return (field, _native_order(value, field), borrow)
    if isinstance(value, (list, tuple)):
        return _list_input(field, value, allow_pickle)
    raise ValueError(f"field {field!r} is a {type(value).__name__}; "
                     "give a tensor, an array or a list with one value per sample")


def input_rows(field: FieldInput) -> int:
    """The number of samples one field input holds (its first dimension; a jagged one's offsets less one)."""
    return len(field[2]) - 1 if len(field) == 4 else len(field[1])


def sample_input(field: str, value: Any, borrow: bool = False, allow_pickle: bool = False) -> FieldInput:
    """The input of one sample's value (kv_put): a numeric array is the
    sample's row; any other value (a number too) is one non-tensor value, as
    in TransferQueue."""
    if isinstance(value, np.ndarray) and not _is_non_tensor_array(value):
        return field_input(field, value[None], borrow, allow_pickle)
    return (field, [value], allow_pickle)


def non_tensor_rows(field: str, data: Any, rows: Optional[int]) -> list[Any]:
    """One value per row of a tensordict NonTensorData's data (for a batch of
    `rows`, None without a batch size): a list or an array of one value per
    row is read per row, as TransferQueue reads it; anything else is that
    value in every row."""
    if isinstance(data, (np.ndarray, list, tuple)):
        if rows is not None and len(data) != rows:
            raise ValueError(f"field {field!r}: NonTensorData holds {len(data)} values for a batch of {rows} rows; "
                             "give one value per row (for the same list in every row, use a NonTensorStack of it)")
        return _array_rows(data) if isinstance(data, np.ndarray) else list(data)
    if rows is None:
        raise ValueError(f"field {field!r}: NonTensorData without a batch size holds one value; "
                         "give one value per row (a list, or a NonTensorStack)")
    return [data] * rows


def fields_of(data: Any, parameter: str = "data") -> list[tuple[str, Any]]:
    """(name, value) of each field of a mapping (the caller's `parameter`), the names checked."""
    check_instance(data, parameter, Mapping, "a TensorDict or a dict of fields")
    pairs = list(data.items())
    for name, _ in pairs:
        check_name(name, "field name")
    return pairs
