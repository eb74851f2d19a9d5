"""Data in and out of the client: what needs torch or tensordict objects
(seqflow._columns holds the rules of numpy arrays and lists; the numpy
conversions out are C++: _seqflow.client.get_data); which values a field may
hold and what get_data returns is documented in docs/streaming.md (Data in
and out)."""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

from seqflow import _columns
from seqflow._columns import FieldInput

# The optional integrations, imported on first need (_load_optional): a
# client that only moves numpy arrays never pays for torch (seconds and
# ~250 MB per process, which many consumer processes multiply).
torch = tensordict = None
NonTensorStack = TensorDict = is_non_tensor = None
_loaded_optional = False


def _installed(name: str):
    """The module, or None when it is not installed (found without importing it)."""
    return importlib.import_module(name) if _findable(name) else None


def _findable(name: str) -> bool:
    """Whether a module can be imported, without importing it."""
    return importlib.util.find_spec(name) is not None


def _load_optional() -> None:
    global torch, tensordict, NonTensorStack, TensorDict, is_non_tensor, _loaded_optional
    if _loaded_optional:
        return
    torch, tensordict = _installed("torch"), _installed("tensordict")
    if tensordict is not None:
        from tensordict import NonTensorStack, TensorDict
        from tensordict.utils import is_non_tensor
    _loaded_optional = True


def _load_optional_if_in_use() -> None:
    """Input can hold a torch tensor or a TensorDict only if the caller
    imported torch: otherwise there is nothing to load."""
    if not _loaded_optional and "torch" in sys.modules:
        _load_optional()


def _is_tensor(value) -> bool:
    return torch is not None and isinstance(value, torch.Tensor)


def _is_tensordict(value) -> bool:
    return tensordict is not None and isinstance(value, tensordict.TensorDictBase)


def _check_tensor(value, field: str) -> None:
    """Refuses a tensor that holds no plain strided data, before torch's own
    message would name neither the field nor the cause."""
    if value.device.type == "meta":
        raise ValueError(f"field {field!r} is a tensor on the meta device, which holds no data")
    layout = str(value.layout)
    if layout != "torch.strided" and not value.is_nested:
        raise ValueError(f"field {field!r} is a tensor of layout {layout}; give a dense (strided) tensor")
    dtype = str(value.dtype).removeprefix("torch.")
    if value.is_quantized or dtype not in _columns.DTYPES:
        raise _columns.unstorable_dtype(field, dtype)


def _cpu_tensor(value, field: str):
    """A contiguous CPU tensor of plain strided data."""
    _check_tensor(value, field)
    return value.detach().cpu().contiguous()


def _tensor_input(field: str, value, borrow: bool) -> FieldInput:
    if not value.is_nested:
        if value.dim() == 0:
            raise ValueError(f"field {field!r} is a 0-d tensor; the first dimension must be the batch")
        return (field, _cpu_tensor(value, field), borrow)
    if value.layout == torch.jagged and getattr(value, "_lengths", None) is None:
        offsets = value.offsets().to("cpu", torch.int64)
        return (field, _cpu_tensor(value.values(), field), offsets, borrow)
    return (field, [_cpu_tensor(t, field) for t in value.unbind()])


def _field_input(field: str, value, borrow: bool = False, allow_pickle: bool = False) -> FieldInput:
    if tensordict is not None and is_non_tensor(value):
        if isinstance(value, NonTensorStack):
            return (field, value.tolist(), allow_pickle)
        rows = value.batch_size[0] if len(value.batch_size) else None
        return (field, _columns.non_tensor_rows(field, value.data, rows), allow_pickle)
    if _is_tensor(value):
        return _tensor_input(field, value, borrow)
    if isinstance(value, (list, tuple)) and value and _is_tensor(value[0]):  # a tensor per sample
        value = [_cpu_tensor(item, field) if _is_tensor(item) else item for item in value]
    return _columns.field_input(field, value, borrow, allow_pickle)


def fields_of(data, parameter: str = "data") -> list[tuple[str, Any]]:
    """(name, value) of each field of a TensorDict or a mapping (the caller's
    `parameter`); the names checked (seqflow._checks.check_name)."""
    if _is_tensordict(data):
        data = {key: data.get(key) for key in data.keys()}
    return _columns.fields_of(data, parameter)


def field_inputs(data, borrow: bool = False, allow_pickle: bool = False, parameter: str = "data") -> list[FieldInput]:
    """The native put's input of each field (seqflow._columns): the put
    copies the caller's data, or with borrow uses its tensors and arrays (a
    non-contiguous or non-CPU one through its contiguous CPU copy) as they
    are, valid only while the caller does not change them: for a put that
    has sent the data when it returns."""
    _load_optional_if_in_use()
    pairs = fields_of(data, parameter)
    if not pairs:
        raise ValueError(f"{parameter} holds no fields")
    return [_field_input(name, value, borrow, allow_pickle) for name, value in pairs]


def single_sample_inputs(fields, borrow: bool = False, allow_pickle: bool = False) -> list[FieldInput]:
    """The put's inputs of one sample from a dict of per-sample values (kv_put): a
    tensor or a numeric array is the sample's row; any other value is a
    non-tensor value, as in TransferQueue (a number too)."""
    _load_optional_if_in_use()
    if _is_tensordict(fields):
        return field_inputs(fields, borrow, allow_pickle, "fields")
    inputs = []
    for name, value in fields_of(fields, "fields"):
        if not _is_tensor(value):
            inputs.append(_columns.sample_input(name, value, borrow, allow_pickle))
        elif value.is_nested:
            raise ValueError(f"field {name!r}: a nested tensor holds a batch; use kv_batch_put")
        else:
            inputs.append(_tensor_input(name, value.unsqueeze(0), borrow))
    return inputs


# ---- out --------------------------------------------------------------------


_FORMATS = ("auto", "numpy", "torch", "tensordict")
_LAYOUTS = ("dense", "transfer_queue")


def resolve_format(fmt: str, layout: str = "dense") -> str:
    """get_data's format checked and resolved: 'auto' is 'tensordict' when
    tensordict is installed, else 'torch' for layout 'transfer_queue' and
    'numpy' for 'dense' (found without importing torch)."""
    if not isinstance(fmt, str) or fmt not in _FORMATS:
        raise ValueError(f"format must be one of {_FORMATS}, got {fmt!r}")
    if not isinstance(layout, str) or layout not in _LAYOUTS:
        raise ValueError(f"layout must be one of {_LAYOUTS}, got {layout!r}")
    transfer_queue = layout == "transfer_queue"
    if fmt == "numpy" and transfer_queue:
        raise ValueError("layout='transfer_queue' returns torch nested tensors; use format 'auto', 'torch' or "
                         "'tensordict'")
    if fmt == "auto":
        fmt = "tensordict" if _findable("tensordict") else "torch" if transfer_queue else "numpy"
    if fmt != "numpy" and not _findable("torch"):
        raise ValueError(f"format='{fmt}' needs torch, which is not installed")
    if fmt == "tensordict" and not _findable("tensordict"):
        raise ValueError("format='tensordict' needs tensordict, which is not installed")
    if fmt != "numpy":
        _load_optional()
    return fmt


def container(kind: str, value, *offsets):
    """The torch or tensordict container a field of get_data's result comes in
    (_seqflow.client.get_data calls it for each field that is not a plain array or list)."""
    if kind == "jagged":
        return torch.nested.nested_tensor_from_jagged(value, offsets[0])
    if kind == "strided":
        return torch.nested.as_nested_tensor(value, layout=torch.strided)
    return NonTensorStack(*value) if value else NonTensorStack()  # "stack"


def as_result(fields: dict, size: int, fmt: str):
    """The get_data result: a TensorDict of the fields, or the dict itself."""
    return TensorDict(fields, batch_size=[size]) if fmt == "tensordict" else fields


def nested_flags(fields: list[str], meta) -> list[bool]:
    return [bool(meta.field_schema.get(f, {}).get("is_nested", False)) for f in fields]


def slice_rows(value, start: int, stop: int):
    """Rows [start, stop) of one field of get_data's result (arrays, tensors,
    jagged and strided nested tensors, NonTensorStacks, lists, TensorDicts),
    as views where the type allows (a strided nested tensor is copied)."""
    if _is_tensordict(value) and not is_non_tensor(value):
        # Field by field: a TensorDict cannot slice a strided nested tensor itself.
        return TensorDict({key: slice_rows(value.get(key), start, stop) for key in value.keys()},
                          batch_size=[stop - start, *value.batch_size[1:]])
    if _is_tensor(value) and value.is_nested:
        if value.layout == torch.jagged and getattr(value, "_lengths", None) is None:
            offsets = value.offsets()
            lo, hi = int(offsets[start]), int(offsets[stop])
            return torch.nested.nested_tensor_from_jagged(value.values()[lo:hi], offsets[start:stop + 1] - lo)
        return torch.nested.as_nested_tensor(list(value.unbind()[start:stop]), layout=value.layout)
    return value[start:stop]


def split_rows(data, sizes) -> list:
    """Consecutive parts of get_data's result with the given row counts."""
    _load_optional_if_in_use()
    bounds = [0]
    for size in sizes:
        bounds.append(bounds[-1] + size)
    if _is_tensordict(data):
        return [slice_rows(data, start, stop) for start, stop in zip(bounds, bounds[1:])]
    return [{name: slice_rows(value, start, stop) for name, value in data.items()}
            for start, stop in zip(bounds, bounds[1:])]
