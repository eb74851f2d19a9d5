"""The balancing engine: split weighted items into k parts of near-equal load.

`partition` is seqflow's own API; `karmarkar_karp` and
`get_seqlen_balanced_partitions` reproduce verl's / TransferQueue's functions
of the same names exactly, for drop-in use. Partition and Workload are the C++
objects (include/seqflow/balance.h, workload.h).

`calibrate` fits a Workload in seconds to measured micro-batch times and
`OnlineWorkload` keeps one current while training runs (calibration.h).
The functions here convert their arguments once (numpy) and call one typed
C++ function each (python/bindings/balance_bindings.cc,
calibration_bindings.cc); the algorithms run there.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable
from typing import Any, Optional

import numpy as np

from seqflow._arguments import WorkloadLike, int64_argument, workload_argument
from seqflow._arrays import IntArrayLike, as_int64_array
from seqflow._checks import check_bool, short_repr
from seqflow._seqflow import balance as _native
from seqflow._seqflow.balance import FitReport, Partition, Workload

__all__ = [
    "FitReport",
    "OnlineWorkload",
    "Partition",
    "Workload",
    "calibrate",
    "partition",
    "karmarkar_karp",
    "get_seqlen_balanced_partitions",
]


def partition(weights: IntArrayLike, k: int, *, cardinality: str = "free", workload: WorkloadLike = "tokens",
              groups: Optional[IntArrayLike] = None, algorithm: str = "auto") -> Partition:
    """Split items with non-negative integer `weights` (sequence lengths) into
    `k` parts whose workloads are as even as possible.

    cardinality: "free" (any count per part), "equal" (same count; needs
        n % k == 0) or "balanced" (counts differ by at most one).
    workload: "tokens" (L), "verl" (24576*L + L*L), "quadratic(a,b)",
        ("quadratic", a, b), a Workload (calibrated ones too) or an
        OnlineWorkload (its current model).
    groups: optional group id per item (e.g. the responses of one prompt); a
        group never splits and counts as one item for cardinality.
    algorithm: "auto" (best of several, refined; never worse than "kk"),
        "kk" (Karmarkar-Karp largest differencing) or "lpt".
    """
    # Negative weights: the engine names them (weights[i] = v is negative).
    values = as_int64_array(weights, "weights", allow_negative=True)
    group_ids = None if groups is None else as_int64_array(groups, "groups", allow_negative=True)
    return _native.partition(values, int64_argument(k, "k"), str(cardinality), workload_argument(workload),
                             group_ids, str(algorithm))


def karmarkar_karp(seqlen_list: IntArrayLike, k_partitions: int, equal_size: bool) -> list[list[int]]:
    """verl's karmarkar_karp: k lists of item indexes, in verl's exact order."""
    return _verl_call(_native.karmarkar_karp, seqlen_list, k_partitions, equal_size)


def get_seqlen_balanced_partitions(seqlen_list: IntArrayLike, k_partitions: int,
                                   equal_size: bool) -> list[list[int]]:
    """verl's get_seqlen_balanced_partitions: as karmarkar_karp, each part sorted."""
    return _verl_call(_native.get_seqlen_balanced_partitions, seqlen_list, k_partitions, equal_size)


def _verl_call(function: Callable[..., list[list[int]]], seqlen_list: IntArrayLike, k_partitions: int, equal_size: bool) -> list[list[int]]:
    k = int64_argument(k_partitions, "k_partitions")
    equal = check_bool(equal_size, "equal_size")
    if type(seqlen_list) is list:
        try:  # a list of ints, as verl passes it: converted in C++ (numpy's conversion costs more)
            return function(seqlen_list, k, equal)
        except TypeError:
            pass  # other elements: converted below, a bad one named
    values = as_int64_array(seqlen_list, "seqlen_list", allow_negative=True)  # verl sorts negative lengths too
    return function(values, k, equal)


def calibrate(records: Iterable[Any], *, min_records: int = 8, outlier_threshold: float = 3.5,
              min_outlier_error: float = 0.05, max_outlier_fraction: float = 0.4, alignment: int = 1) -> Workload:
    """Fit a calibrated Workload to measured times.

    records: an iterable of (lengths, seconds) pairs or {"lengths": ...,
        "seconds": ...} dicts, one per micro-batch (or pack): the sequence
        lengths it held (list, numpy or torch integers) and its seconds.
    The model, seconds = per_micro_batch + sum over sequences of (per_token * L
    + per_token_squared * L^2 + per_sequence), is fitted by non-negative least
    squares on relative errors, leaving out outliers (warm-up steps,
    stragglers): records whose relative error is beyond `outlier_threshold`
    robust standard deviations and beyond `min_outlier_error`, at most
    `max_outlier_fraction` of them. The result's `fit` reports the errors.
    alignment > 1 also fits per_unaligned_token_squared, the extra L^2 seconds of
    a sequence whose length is not a multiple of it (8 for torch's CPU attention
    with AVX2, which takes a slower path on a ragged last block).
    """
    lengths, seconds = timing_columns(records)
    # float() as Python spells it (a numeric string too); the engine checks the ranges.
    return _native.calibrate(lengths, seconds, int64_argument(min_records, "min_records"), float(outlier_threshold),
                             float(min_outlier_error), float(max_outlier_fraction),
                             int64_argument(alignment, "alignment"))


def timing_columns(records: Iterable[Any]) -> tuple[list[np.ndarray], list[float]]:
    """The lengths arrays and the seconds of timing records: an iterable of
    (lengths, seconds) pairs or {"lengths": ..., "seconds": ...} dicts."""
    lengths: list[np.ndarray] = []
    seconds: list[float] = []
    for index, record in enumerate(records):
        where = f"records[{index}]"
        if isinstance(record, dict):
            if len(record) != 2 or "lengths" not in record or "seconds" not in record:
                raise ValueError(f"{where} must have the keys 'lengths' and 'seconds', "
                                 f"got {sorted(str(key) for key in record)!r}")
            record_lengths, record_seconds = record["lengths"], record["seconds"]
        elif isinstance(record, (tuple, list)) and len(record) == 2:
            record_lengths, record_seconds = record
        else:
            raise ValueError(f"{where} must be a (lengths, seconds) pair or a dict with 'lengths' and 'seconds', "
                             f"got {short_repr(record)}")
        # Negative lengths: the engine names them (records[i].lengths[j] = v is negative).
        lengths.append(as_int64_array(record_lengths, f"{where}.lengths", allow_negative=True))
        seconds.append(seconds_value(record_seconds, f"{where}.seconds"))
    return lengths, seconds


class OnlineWorkload(_native.OnlineWorkload):
    """A calibrated workload kept current from timings reported while
    training runs. report() is thread-safe and cheap; a background thread
    refits on the latest `window` records. `workload` is the current model
    (the prior until `min_records` records are in); pass the OnlineWorkload
    itself wherever workload= is taken, and the call uses that snapshot."""

    def __init__(self, prior: WorkloadLike = "tokens", window: int = 4096, min_records: int = 16,
                 alignment: int = 1) -> None:
        super().__init__(workload_argument(prior), int64_argument(window, "window"),
                         int64_argument(min_records, "min_records"), int64_argument(alignment, "alignment"))

    def report(self, lengths: IntArrayLike, seconds: float) -> None:  # type: ignore[override]
        """One measured micro-batch: its sequence lengths and seconds."""
        super().report(as_int64_array(lengths, "lengths", allow_negative=True), seconds_value(seconds, "seconds"))


def seconds_value(value: Any, name: str) -> float:
    """A measured time as a float (numpy and torch scalars too); the engine checks it is finite and > 0."""
    number = value.item() if hasattr(value, "item") and getattr(value, "ndim", None) == 0 else value
    if isinstance(number, bool) or not isinstance(number, numbers.Real):
        raise ValueError(f"{name} must be a number of seconds, got {short_repr(number)}")
    return float(number)
