"""The balancing engine: split weighted items into k parts of near-equal load.

`partition` is seqflow's own API; `karmarkar_karp` and
`get_seqlen_balanced_partitions` reproduce verl's / TransferQueue's functions
of the same names exactly, for drop-in use. Partition and Workload are the C++
objects (include/seqflow/balance.h, workload.h).

`calibrate` fits a Workload in seconds to measured micro-batch times and
`OnlineWorkload` keeps one current while training runs (calibration.h).
Every name here is bound from C++ (python/bindings/balance_bindings.cc,
calibration_bindings.cc).
"""

from seqflow._seqflow.balance import (
    FitReport,
    OnlineWorkload,
    Partition,
    Workload,
    calibrate,
    get_seqlen_balanced_partitions,
    karmarkar_karp,
    partition,
    timing_columns,  # not public: Client.report_timings converts its records with it
)

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
