"""Turning user input (lists, numpy arrays, torch tensors) into int64 arrays
(python/bindings/array_conversion.cc)."""

from seqflow import _seqflow

as_int64_array = _seqflow.as_int64_array
