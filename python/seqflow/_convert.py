"""Data in and out of the client.

In: a tensordict.TensorDict or a dict of fields. A field is a torch tensor or
numpy array (samples along the first dimension), a torch nested tensor
(jagged or strided), a list of arrays / tensors of varying shape, a list of
numbers, or non-tensor values: a list of other values, a numpy array of
dtype object, str or bytes, a tensordict NonTensorStack (one value per row)
or NonTensorData (a list or array of one value per row, or one value for
every row). Tensor fields are copied once, in C++, into a buffer the storage
owns; with borrow=True (remote clients, whose put has sent every byte when it
returns) tensors and arrays are sent from their own memory instead.
Non-tensor values are stored without pickle when they are plain (None, bool,
int, float, str, bytes, lists, tuples and str-keyed dicts of them; a tuple
reads back as a list); anything else needs allow_pickle=True on both sides.

Out: a TensorDict when tensordict is installed, otherwise a dict. By default
(copy=True) every array is the caller's own; copy=False returns views of the
stored bytes where the samples lie back to back (numpy arrays read-only,
torch tensors sharing the stored bytes). Tensor fields in layout "dense":
rows of one shape as one dense tensor, rows differing in their first
dimension as a jagged nested tensor, rows differing in more dimensions as a
strided nested tensor, rows of differing rank as a list; layout
"transfer_queue": TransferQueue 0.1.11's containers, which are nested (jagged
where the rows differ at most in their first dimension, else strided) unless
every row is 0-d. Non-tensor fields come back as a NonTensorStack
(tensordict) or a list, one value per row.
"""

from __future__ import annotations

import importlib.util
import numbers
import sys
from typing import Any, Mapping

import numpy as np

from seqflow import _seqflow
from seqflow._checks import ArgumentTypeError, check_name, short_repr

_native = _seqflow.client

# The optional integrations, imported on first need (_load_optional): a
# client that only moves numpy arrays never pays for torch (seconds and
# ~250 MB per process, which many consumer processes multiply).
torch = None
tensordict = None
NonTensorData = NonTensorStack = TensorDict = is_non_tensor = None
_loaded_optional = False


def _load_optional() -> None:
    global torch, tensordict, NonTensorData, NonTensorStack, TensorDict, is_non_tensor, _loaded_optional
    if _loaded_optional:
        return
    try:
        import torch as torch_module
    except ImportError:  # pragma: no cover - exercised only without torch
        torch_module = None
    try:
        import tensordict as tensordict_module
        from tensordict import NonTensorData, NonTensorStack, TensorDict
        from tensordict.utils import is_non_tensor
    except ImportError:
        tensordict_module = None
    torch, tensordict = torch_module, tensordict_module
    _loaded_optional = True


def _load_optional_if_in_use() -> None:
    """Input can hold a torch tensor or a TensorDict only if the caller
    imported torch: otherwise there is nothing to load."""
    if not _loaded_optional and "torch" in sys.modules:
        _load_optional()

FORMATS = ("auto", "numpy", "torch", "tensordict")


def _is_tensor(value) -> bool:
    return torch is not None and isinstance(value, torch.Tensor)


# What C++ reads of a tensor (DLPack); the message is the one C++ gives for an unsupported dtype.
_STORABLE_TORCH_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
                          "float64")
# numpy kinds of the dtypes above (the others: complex, datetime, structured, objects, ...).
_STORABLE_NUMPY_KINDS = "biuf"


def _unstorable_dtype(field: str, dtype_name: str) -> ValueError:
    return ValueError(f'field "{field}" has dtype {dtype_name}, which seqflow does not store; use bool, uint8, '
                      "int8-64, float16, bfloat16, float32 or float64")


def _check_tensor(value, field: str) -> None:
    """Refuses tensors that hold no plain strided data, before torch's own
    message would name neither the field nor the cause."""
    if value.device.type == "meta":
        raise ValueError(f"field {field!r} is a tensor on the meta device, which holds no data")
    if value.layout != torch.strided and not value.is_nested:
        raise ValueError(f"field {field!r} is a tensor of layout {value.layout}; give a dense (strided) tensor")
    if value.is_quantized or str(value.dtype).removeprefix("torch.") not in _STORABLE_TORCH_DTYPES:
        raise _unstorable_dtype(field, str(value.dtype).removeprefix("torch."))


def _cpu_tensor(value, field: str):
    _check_tensor(value, field)
    value = value.detach()
    if value.device.type != "cpu":
        value = value.cpu()
    return value.contiguous()


def _plain_array(value, field: str):
    """A C-contiguous CPU array or tensor that C++ can read through DLPack."""
    if _is_tensor(value):
        return _cpu_tensor(value, field)
    return _native_order(value, field)


def _native_order(array: np.ndarray, field: str) -> np.ndarray:
    """A C-contiguous array in this machine's byte order (DLPack carries no
    other), refusing dtypes seqflow does not store."""
    if array.dtype.kind not in _STORABLE_NUMPY_KINDS:
        raise _unstorable_dtype(field, str(array.dtype))
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    return np.ascontiguousarray(array)


def _is_number(item) -> bool:
    return isinstance(item, (numbers.Number, np.bool_)) and not isinstance(item, complex)


def _nested_column(field: str, value, borrow: bool):
    if value.layout == torch.jagged and getattr(value, "_lengths", None) is None:
        values = _cpu_tensor(value.values(), field)
        offsets = value.offsets().cpu().numpy().astype(np.int64)
        rows = np.diff(offsets)
        inner = list(values.shape[1:])
        shapes = np.empty((len(rows), 1 + len(inner)), dtype=np.int64)
        shapes[:, 0] = rows
        shapes[:, 1:] = inner
        if offsets[0] != 0:
            values = values[int(offsets[0]):int(offsets[-1])].contiguous()
        return _native.packed_column(field, values, shapes, borrow)
    return _native.ragged_column(field, [_cpu_tensor(t, field) for t in value.unbind()])


def _list_column(field: str, items: list, allow_pickle: bool):
    """A plain list: arrays or tensors (a tensor field), numbers (dense), or
    non-tensor values."""
    if len(items) == 0:
        raise ValueError(f"field {field!r} is an empty list; a field needs one value per sample")
    if all(isinstance(i, np.ndarray) or _is_tensor(i) for i in items):
        return _native.ragged_column(field, [_plain_array(i, field) for i in items])
    if all(_is_number(i) for i in items):
        array = np.asarray(items)
        if array.dtype.kind == "O":  # an int beyond 64 bits
            raise ValueError(f"field {field!r} holds numbers that fit no 64-bit dtype, got {items[:8]!r}")
        return _native.dense_column(field, _native_order(array, field))
    return _native.object_column(field, items, allow_pickle)


def _non_tensor_values(field: str, value) -> list:
    """One value per row of a NonTensorStack, a NonTensorData or a numpy
    array of objects / strings / bytes. A NonTensorData holding a list or an
    array of one value per row is read per row, as TransferQueue reads it;
    one holding anything else is that value in every row."""
    if isinstance(value, np.ndarray):
        return list(value) if value.ndim == 1 else value.tolist()
    if isinstance(value, NonTensorStack):
        return value.tolist()
    data = value.data
    rows = value.batch_size[0] if len(value.batch_size) else None
    if isinstance(data, (list, tuple, np.ndarray)):
        if rows is not None and len(data) != rows:
            raise ValueError(
                f"field {field!r}: NonTensorData holds {len(data)} values for a batch of {rows} rows; give one "
                "value per row (for the same list in every row, use a NonTensorStack of it)")
        return _non_tensor_values(field, data) if isinstance(data, np.ndarray) else list(data)
    if rows is None:
        raise ValueError(f"field {field!r}: NonTensorData without a batch size holds one value; give one value "
                         "per row (a list, or a NonTensorStack)")
    return [data] * rows


def _column(field: str, value, borrow: bool = False, allow_pickle: bool = False):
    if tensordict is not None and is_non_tensor(value):
        return _native.object_column(field, _non_tensor_values(field, value), allow_pickle)
    if _is_tensor(value):
        if value.is_nested:
            return _nested_column(field, value, borrow)
        if value.dim() == 0:
            raise ValueError(f"field {field!r} is a 0-d tensor; the first dimension must be the batch")
        return _native.dense_column(field, _cpu_tensor(value, field), borrow)
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            raise ValueError(f"field {field!r} is a 0-d array; the first dimension must be the batch")
        if value.dtype.kind in "OUS":
            return _native.object_column(field, _non_tensor_values(field, value), allow_pickle)
        return _native.dense_column(field, _native_order(value, field), borrow)
    if isinstance(value, (list, tuple)):
        return _list_column(field, list(value), allow_pickle)
    raise ValueError(
        f"field {field!r} is a {type(value).__name__}; give a tensor, an array or a list with one value per sample")


def fields_of(data, parameter: str = "data") -> list[tuple[str, Any]]:
    """(name, value) of each field of a TensorDict or a mapping (the caller's
    `parameter`); the names checked (seqflow._checks.check_name)."""
    if tensordict is not None and isinstance(data, tensordict.TensorDictBase):
        pairs = [(key, data.get(key)) for key in data.keys()]
    elif isinstance(data, Mapping):
        pairs = list(data.items())
    else:
        raise ArgumentTypeError(f"{parameter} must be a TensorDict or a dict of fields, got {type(data).__name__} "
                                f"{short_repr(data)}")
    for name, _ in pairs:
        check_name(name, "field name")
    return pairs


def to_columns(data, borrow: bool = False, allow_pickle: bool = False, parameter: str = "data") -> list:
    """One native Column per field: a copy of the caller's data, or with
    borrow a view of its tensors and arrays (a non-contiguous or non-CPU one
    through its contiguous CPU copy), valid only while the caller does not
    change them: for a put that has sent the data when it returns."""
    _load_optional_if_in_use()
    pairs = fields_of(data, parameter)
    if not pairs:
        raise ValueError(f"{parameter} holds no fields")
    return [_column(name, value, borrow, allow_pickle) for name, value in pairs]


def single_sample_columns(fields, borrow: bool = False, allow_pickle: bool = False) -> list:
    """Columns of one sample from a dict of per-sample values (kv_put): a
    tensor or a numeric array is the sample's row; any other value is a
    non-tensor value, as in TransferQueue (a number too)."""
    _load_optional_if_in_use()
    if tensordict is not None and isinstance(fields, tensordict.TensorDictBase):
        return to_columns(fields, borrow, allow_pickle, "fields")
    columns = []
    for name, value in fields_of(fields, "fields"):
        if _is_tensor(value):
            if value.is_nested:
                raise ValueError(f"field {name!r}: a nested tensor holds a batch; use kv_batch_put")
            columns.append(_column(name, value.unsqueeze(0), borrow))
        elif isinstance(value, np.ndarray) and value.dtype.kind not in "OUS":
            columns.append(_column(name, value[np.newaxis], borrow))
        else:
            columns.append(_native.object_column(name, [value], allow_pickle))
    return columns


# ---- out --------------------------------------------------------------------

LAYOUTS = ("dense", "transfer_queue")


def resolve_format(fmt: str, layout: str = "dense") -> str:
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if fmt == "numpy":
        if layout == "transfer_queue":
            raise ValueError("layout='transfer_queue' returns torch nested tensors; use format 'auto', 'torch' or "
                             "'tensordict'")
        return fmt
    if fmt == "auto" and importlib.util.find_spec("tensordict") is None and layout == "dense":
        return "numpy"  # without importing torch to find out
    _load_optional()
    if fmt == "auto":
        fmt = "tensordict" if tensordict is not None else "torch" if layout == "transfer_queue" else "numpy"
    if fmt in ("torch", "tensordict") and torch is None:
        raise ValueError(f"format={fmt!r} needs torch, which is not installed")
    if fmt == "tensordict" and tensordict is None:
        raise ValueError("format='tensordict' needs tensordict, which is not installed")
    return fmt


def _torch_of(array: np.ndarray, dtype: str):
    tensor = torch.from_numpy(array)
    return tensor.view(torch.bfloat16) if dtype == "bfloat16" else tensor


def _numpy_of(array: np.ndarray, dtype: str, field: str):
    if dtype == "bfloat16":
        raise ValueError(f"field {field!r} is bfloat16, which numpy cannot hold; use format='torch'")
    return array


def _split_ragged(values: np.ndarray, shapes: np.ndarray) -> list[np.ndarray]:
    counts = np.prod(shapes, axis=1) if shapes.shape[1] else np.ones(len(shapes), dtype=np.int64)
    bounds = np.concatenate([[0], np.cumsum(counts)])
    return [values[bounds[i]:bounds[i + 1]].reshape(tuple(shapes[i])) for i in range(len(shapes))]


def _jagged(stacked, lengths: np.ndarray):
    """A jagged nested tensor viewing `stacked` (the rows concatenated along
    their first dimension), row i holding lengths[i] of its entries."""
    offsets = torch.from_numpy(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
    return torch.nested.nested_tensor_from_jagged(stacked, offsets)


def _nested_rows(values, shapes: np.ndarray):
    """Rows of one rank: jagged when only their first dimension differs, else
    strided (which copies them), as TransferQueue packs them."""
    if (shapes[:, 1:] == shapes[:1, 1:]).all():
        return _jagged(values.reshape(int(shapes[:, 0].sum()), *shapes[0, 1:].tolist()), shapes[:, 0])
    counts = np.prod(shapes, axis=1)
    bounds = np.concatenate([[0], np.cumsum(counts)])
    rows = [values[bounds[i]:bounds[i + 1]].reshape(tuple(shapes[i])) for i in range(len(shapes))]
    return torch.nested.as_nested_tensor(rows, layout=torch.strided)


def _non_tensor_stack(values: list):
    return NonTensorStack(*values) if values else NonTensorStack()


def _field_out(field: str, native: tuple, fmt: str, layout: str):
    kind = native[0]
    if kind == "objects":
        return _non_tensor_stack(native[1]) if fmt == "tensordict" else native[1]
    dtype = native[-1]
    if kind == "dense":
        array = native[1]
        if fmt == "numpy":
            return _numpy_of(array, dtype, field)
        tensor = _torch_of(array, dtype)
        if layout == "transfer_queue" and tensor.dim() > 1:  # TransferQueue nests all but 0-d rows
            rows, first = tensor.shape[0], tensor.shape[1]
            return _jagged(tensor.reshape(rows * first, *tensor.shape[2:]), np.full(rows, first))
        return tensor
    if kind == "ragged":
        values, shapes = native[1], native[2]
        if fmt == "numpy":
            return _split_ragged(_numpy_of(values, dtype, field), shapes)
        if shapes.shape[1] == 0:  # 0-d rows
            return _torch_of(values, dtype)
        return _nested_rows(_torch_of(values, dtype), shapes)
    arrays = native[1]  # "list": samples of differing rank
    if fmt == "numpy":
        return [_numpy_of(a, dtype, field) for a in arrays]
    out = [_torch_of(a, dtype) for a in arrays]
    return _non_tensor_stack(out) if fmt == "tensordict" else out


def _empty_field(schema: dict, fmt: str):
    if schema.get("is_non_tensor"):
        return NonTensorStack() if fmt == "tensordict" else []
    dtype = schema["dtype"]
    shape = tuple(0 if d < 0 else d for d in schema.get("shape") or ())
    if schema.get("is_nested") and fmt == "numpy":
        return []
    if fmt == "numpy":
        return np.zeros((0, *shape), dtype=dtype)
    return torch.zeros((0, *shape), dtype=getattr(torch, dtype))


def from_native(fields: list[str], native: dict, meta, fmt: str, layout: str = "dense"):
    """Assembles the get_data result: a TensorDict, or a dict of fields."""
    out = {}
    for field in fields:
        if field in native:
            out[field] = _field_out(field, native[field], fmt, layout)
        elif field in meta.field_schema:
            out[field] = _empty_field(meta.field_schema[field], fmt)
    if fmt != "tensordict":
        return out
    return TensorDict(out, batch_size=[meta.size])


def nested_flags(fields: list[str], meta) -> list[bool]:
    return [bool(meta.field_schema.get(f, {}).get("is_nested", False)) for f in fields]


def slice_rows(value, start: int, stop: int):
    """Rows [start, stop) of one field of get_data's result (arrays, tensors,
    jagged and strided nested tensors, NonTensorStacks, lists, TensorDicts),
    as views where the type allows (a strided nested tensor is copied)."""
    if tensordict is not None and isinstance(value, tensordict.TensorDictBase) and not is_non_tensor(value):
        # Field by field: a TensorDict cannot slice a strided nested tensor itself.
        return TensorDict({key: slice_rows(value.get(key), start, stop) for key in value.keys()},
                          batch_size=[stop - start, *value.batch_size[1:]])
    if torch is not None and isinstance(value, torch.Tensor) and value.is_nested:
        if value.layout == torch.jagged and getattr(value, "_lengths", None) is None:
            offsets = value.offsets()
            lo, hi = int(offsets[start]), int(offsets[stop])
            return torch.nested.nested_tensor_from_jagged(value.values()[lo:hi], offsets[start:stop + 1] - lo)
        return torch.nested.as_nested_tensor(list(value.unbind()[start:stop]), layout=value.layout)
    return value[start:stop]


def split_rows(data, sizes) -> list:
    """Consecutive parts of get_data's result with the given row counts."""
    _load_optional_if_in_use()
    parts, start = [], 0
    for size in sizes:
        stop = start + size
        if tensordict is not None and isinstance(data, tensordict.TensorDictBase):
            parts.append(slice_rows(data, start, stop))
        else:
            parts.append({name: slice_rows(value, start, stop) for name, value in data.items()})
        start = stop
    return parts
