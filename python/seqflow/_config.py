"""Reading TransferQueue-style configs and checking the numbers users pass:
shared by the client and the services, without importing torch."""

from __future__ import annotations

from typing import Optional

import numpy as np


def config_get(config, path: str, default=None):
    """config["a"]["b"] for path "a.b", for dicts and OmegaConf configs alike."""
    node = config
    for key in path.split("."):
        if node is None:
            return default
        try:
            node = node.get(key) if hasattr(node, "get") else None
        except Exception:  # OmegaConf raises on missing keys in struct mode
            return default
    return default if node is None else node


def check_count(value, name: str, *, minimum: int = 0, maximum: Optional[int] = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return int(value)


def check_seconds(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not value > 0:
        raise ValueError(f"{name} must be a number of seconds > 0, got {value!r}")
    return float(value)
