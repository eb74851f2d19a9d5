"""A storage unit's capacity (the engine's StorageOptions) from the arguments
of seqflow.Client, serve_storage and the config keys storage.*: Python
values checked here, ranges (watermarks) by the engine, naming the
parameter."""

from __future__ import annotations

import datetime
from typing import Any, Optional

from seqflow import _seqflow
from seqflow._checks import check_choice, check_count, check_number, check_seconds
from seqflow._config import WHEN_FULL

__all__ = ["CAPACITY_KEYS", "capacity_of_settings", "storage_options", "unit_share"]

# The storage.* config keys that set capacity, by their argument's name.
CAPACITY_KEYS = ("max_bytes", "max_samples", "max_bytes_per_partition", "max_samples_per_partition", "when_full",
                 "high_watermark", "low_watermark")

# The limits that add up over a cluster's units. Not the per-partition ones:
# global indexes are shared by every partition, so one partition's samples
# can all lie on one unit (single-sample puts to two partitions in turn).
SUMMED_LIMITS = ("max_bytes", "max_samples")


def storage_options(*, max_bytes: Any = 0, max_samples: Any = 0, max_bytes_per_partition: Any = 0,
                    max_samples_per_partition: Any = 0, when_full: Any = "raise", high_watermark: Any = 1.0,
                    low_watermark: Any = None, wait_timeout: Optional[float] = None) -> Any:
    """The engine's StorageOptions; ValueError (or ArgumentTypeError) naming a bad argument.
    wait_timeout: seconds a waiting put of this process waits for room (None: the engine's 30 s)."""
    options = _seqflow.client.StorageOptions()
    options.max_bytes = check_count(max_bytes, "max_bytes")
    options.max_samples = check_count(max_samples, "max_samples")
    options.max_bytes_per_partition = check_count(max_bytes_per_partition, "max_bytes_per_partition")
    options.max_samples_per_partition = check_count(max_samples_per_partition, "max_samples_per_partition")
    options.when_full = _seqflow.client.WhenFull[check_choice(when_full, "when_full", WHEN_FULL).upper()]
    options.high_watermark = check_number(high_watermark, "high_watermark")
    options.low_watermark = None if low_watermark is None else check_number(low_watermark, "low_watermark")
    if wait_timeout is not None:
        options.wait_timeout = datetime.timedelta(seconds=check_seconds(wait_timeout, "wait_timeout", allow_zero=True))
    options.check()
    return options


def capacity_of_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """storage_options' arguments that a config (read_config's settings) sets:
    TransferQueue's backend.SimpleStorage.total_storage_size is max_samples
    unless storage.max_samples is set."""
    capacity = {key: settings[f"storage.{key}"] for key in CAPACITY_KEYS if f"storage.{key}" in settings}
    if "backend.SimpleStorage.total_storage_size" in settings:
        capacity.setdefault("max_samples", settings["backend.SimpleStorage.total_storage_size"])
    return capacity


def unit_share(settings: dict[str, Any], units: int) -> dict[str, Any]:
    """One storage unit's settings when the config's total limits
    (storage.max_samples, storage.max_bytes) bound the whole cluster, as they
    bound an embedded client: each divided by `units`, rounded up (0, no
    limit, stays 0), like TransferQueue's total_storage_size. Samples are
    placed in blocks (seqflow._seqflow.limits.PLACEMENT_BLOCK consecutive
    global indexes, block b on unit b % units) and the smallest free index is
    reused first, so the units fill evenly to within a block (bytes too while
    values are of about one size): a job may be refused up to a block per
    unit short of the total (all of a job of fewer than units x 64 samples
    fills the first units first), never above it. Other settings, the
    per-partition limits among them, pass unchanged."""
    return {key: -(-value // units) if key in SUMMED_LIMITS else value for key, value in settings.items()}
