"""The balancing engine: split weighted items into k parts of near-equal load.

`partition` is seqflow's own API; `karmarkar_karp` and
`get_seqlen_balanced_partitions` reproduce verl's / TransferQueue's functions
of the same names exactly, for drop-in use.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seqflow import _seqflow
from seqflow._arrays import as_int64_array
from seqflow._checks import check_bool

Workload = _seqflow.balance.Workload

__all__ = [
    "Partition",
    "Workload",
    "partition",
    "karmarkar_karp",
    "get_seqlen_balanced_partitions",
]


@dataclass(frozen=True)
class Partition:
    """A split of items into k parts.

    parts: item indexes per part, each sorted ascending.
    sums: workload per part.
    assignment: part of each item.
    lower_bound: no split can make the heaviest part lighter than this.
    spread: (max - min) / mean of the part workloads.
    max_over_mean: heaviest part / mean.
    gap: heaviest part / lower_bound - 1.
    """

    parts: list
    sums: np.ndarray
    assignment: np.ndarray
    lower_bound: int
    spread: float
    max_over_mean: float
    gap: float

    def __repr__(self) -> str:
        sizes = [len(part) for part in self.parts]
        return (
            f"Partition(k={self.k}, items={sum(sizes)}, heaviest={self.heaviest}, "
            f"lower_bound={self.lower_bound}, gap={self.gap:.3g}, spread={self.spread:.3g}, "
            f"part sizes {min(sizes)}..{max(sizes)})"
        )

    @property
    def k(self) -> int:
        return len(self.parts)

    @property
    def heaviest(self) -> int:
        return int(self.sums.max())


_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_WORKLOADS = "'tokens', 'verl', 'quadratic(a,b)', ('quadratic', a, b) or a Workload"


def _as_workload(workload) -> Workload:
    if isinstance(workload, Workload):
        return workload
    if isinstance(workload, str):
        return Workload.parse(workload)
    if isinstance(workload, tuple) and len(workload) == 3 and workload[0] == "quadratic":
        try:
            a, b = _as_int(workload[1], "a"), _as_int(workload[2], "b")
        except ValueError as error:
            raise ValueError(f"workload = {workload!r}: {error}; workload must be {_WORKLOADS}") from None
        return Workload.quadratic(a, b)
    raise ValueError(f"workload must be {_WORKLOADS}, got {workload!r}")


def _as_int(value, name: str, *, low: int = _INT64_MIN, high: int = _INT64_MAX) -> int:
    """A Python int from an int or numpy integer (never a bool or a float, which
    would be truncated), within low..high: int64 unless told."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    number = int(value)
    if not low <= number <= high:
        allowed = "the int64 range" if (low, high) == (_INT64_MIN, _INT64_MAX) else f"{low}..{high}"
        raise ValueError(f"{name} = {number} is outside {allowed}")
    return number


def partition(
    weights,
    k: int,
    *,
    cardinality: str = "free",
    workload="tokens",
    groups=None,
    algorithm: str = "auto",
) -> Partition:
    """Split items with non-negative integer `weights` (sequence lengths) into
    `k` parts whose workloads are as even as possible.

    cardinality: "free" (any count per part), "equal" (same count; needs
        n % k == 0) or "balanced" (counts differ by at most one).
    workload: "tokens" (L), "verl" (24576*L + L*L), "quadratic(a,b)",
        ("quadratic", a, b) or a Workload.
    groups: optional group id per item (e.g. the responses of one prompt); a
        group never splits and counts as one item for cardinality.
    algorithm: "auto" (best of several, refined; never worse than "kk"),
        "kk" (Karmarkar-Karp largest differencing) or "lpt".
    """
    values = as_int64_array(weights, "weights")
    group_ids = None if groups is None else as_int64_array(groups, "groups", allow_negative=True)
    result = _seqflow.balance._partition(
        values, _as_int(k, "k"), str(cardinality), _as_workload(workload), group_ids, str(algorithm)
    )
    return Partition(**result)


def karmarkar_karp(seqlen_list, k_partitions: int, equal_size: bool) -> list[list[int]]:
    """verl's karmarkar_karp: k lists of item indexes, in verl's exact order."""
    values = as_int64_array(seqlen_list, "seqlen_list", allow_negative=True)
    return _seqflow.balance._karmarkar_karp(
        values, _as_int(k_partitions, "k_partitions"), check_bool(equal_size, "equal_size")
    )


def get_seqlen_balanced_partitions(seqlen_list, k_partitions: int, equal_size: bool) -> list[list[int]]:
    """verl's get_seqlen_balanced_partitions: as karmarkar_karp, each part sorted."""
    values = as_int64_array(seqlen_list, "seqlen_list", allow_negative=True)
    return _seqflow.balance._get_seqlen_balanced_partitions(
        values, _as_int(k_partitions, "k_partitions"), check_bool(equal_size, "equal_size")
    )
