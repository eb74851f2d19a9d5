"""The balancing engine: split weighted items into k parts of near-equal load.

`partition` is seqflow's own API; `karmarkar_karp` and
`get_seqlen_balanced_partitions` reproduce verl's / TransferQueue's functions
of the same names exactly, for drop-in use. Partition and Workload are the C++
objects (include/seqflow/balance.h, workload.h).

`calibrate` fits a Workload in seconds to measured micro-batch times and
`OnlineWorkload` keeps one current while training runs (calibration.h).
"""

from __future__ import annotations

import numbers
import os
import tempfile

from seqflow import _seqflow
from seqflow._arrays import as_int64_array
from seqflow._checks import check_bool, short_repr

Workload = _seqflow.balance.Workload
Partition = _seqflow.balance.Partition
FitReport = _seqflow.balance.FitReport

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


def partition(weights, k: int, *, cardinality: str = "free", workload="tokens", groups=None,
              algorithm: str = "auto") -> Partition:
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
    values = as_int64_array(weights, "weights")
    group_ids = None if groups is None else as_int64_array(groups, "groups", allow_negative=True)
    return _seqflow.balance._partition(values, k, str(cardinality), workload, group_ids, str(algorithm))


def karmarkar_karp(seqlen_list, k_partitions: int, equal_size: bool) -> list[list[int]]:
    """verl's karmarkar_karp: k lists of item indexes, in verl's exact order."""
    values = as_int64_array(seqlen_list, "seqlen_list", allow_negative=True)
    return _seqflow.balance._karmarkar_karp(values, k_partitions, check_bool(equal_size, "equal_size"))


def get_seqlen_balanced_partitions(seqlen_list, k_partitions: int, equal_size: bool) -> list[list[int]]:
    """verl's get_seqlen_balanced_partitions: as karmarkar_karp, each part sorted."""
    values = as_int64_array(seqlen_list, "seqlen_list", allow_negative=True)
    return _seqflow.balance._get_seqlen_balanced_partitions(values, k_partitions,
                                                             check_bool(equal_size, "equal_size"))


def _seconds_value(value, name: str) -> float:
    """A measured time as a float; C++ checks it is finite and > 0."""
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        value = value.item()  # numpy / torch scalars
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number of seconds, got {short_repr(value)}")
    return float(value)


def _timing_record(record, index: int):
    where = f"records[{index}]"
    if isinstance(record, dict):
        if set(record) != {"lengths", "seconds"}:
            raise ValueError(f"{where} must have the keys 'lengths' and 'seconds', got {sorted(map(str, record))}")
        lengths, seconds = record["lengths"], record["seconds"]
    elif isinstance(record, (tuple, list)) and len(record) == 2:
        lengths, seconds = record
    else:
        raise ValueError(f"{where} must be a (lengths, seconds) pair or a dict with 'lengths' and 'seconds', "
                         f"got {short_repr(record)}")
    return (as_int64_array(lengths, f"{where}.lengths", allow_negative=True),
            _seconds_value(seconds, f"{where}.seconds"))


def calibrate(records, *, min_records: int = 8, outlier_threshold: float = 3.5, min_outlier_error: float = 0.05,
              max_outlier_fraction: float = 0.4) -> Workload:
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
    """
    converted = [_timing_record(record, index) for index, record in enumerate(records)]
    return _seqflow.balance._calibrate([lengths for lengths, _ in converted], [seconds for _, seconds in converted],
                                       min_records, float(outlier_threshold), float(min_outlier_error),
                                       float(max_outlier_fraction))


def _workload_seconds(self, lengths) -> float:
    """Predicted seconds of one micro-batch of these sequence lengths
    (calibrated workloads only)."""
    return self._seconds(as_int64_array(lengths, "lengths", allow_negative=True))


def _workload_save(self, path) -> None:
    """Write to_json() to `path` (replaced atomically)."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    with tempfile.NamedTemporaryFile("w", dir=directory, prefix=".workload-", suffix=".tmp", delete=False) as file:
        file.write(self.to_json() + "\n")
    os.replace(file.name, path)


def _workload_load(path) -> Workload:
    """The Workload save() wrote to `path`."""
    with open(os.fspath(path), encoding="utf-8") as file:
        return Workload.from_json(file.read())


Workload.seconds = _workload_seconds
Workload.save = _workload_save
Workload.load = staticmethod(_workload_load)


class OnlineWorkload(_seqflow.balance.OnlineWorkload):
    """A calibrated workload kept current from timings reported while
    training runs. report() is thread-safe and cheap; a background thread
    refits on the latest `window` records. `workload` is the current model
    (the prior until `min_records` records are in); pass the OnlineWorkload
    itself wherever workload= is taken, and the call uses that snapshot."""

    def report(self, lengths, seconds) -> None:
        """One measured micro-batch: its sequence lengths and seconds."""
        self._report(as_int64_array(lengths, "lengths", allow_negative=True), _seconds_value(seconds, "seconds"))
