"""The balancing engine: split weighted items into k parts of near-equal load.

`partition` is seqflow's own API; `karmarkar_karp` and
`get_seqlen_balanced_partitions` reproduce verl's / TransferQueue's functions
of the same names exactly, for drop-in use. Partition and Workload are the C++
objects (include/seqflow/balance.h, workload.h).
"""

from __future__ import annotations

from seqflow import _seqflow
from seqflow._arrays import as_int64_array
from seqflow._checks import check_bool

Workload = _seqflow.balance.Workload
Partition = _seqflow.balance.Partition

__all__ = [
    "Partition",
    "Workload",
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
        ("quadratic", a, b) or a Workload.
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
