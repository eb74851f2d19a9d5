"""``transfer_queue.utils.logging_utils``: TransferQueue's get_logger, which
its recipes use for their own loggers."""

from __future__ import annotations

import logging
import os
from typing import Optional

LEVEL_ENV = "TQ_LOGGING_LEVEL"
_FORMAT = "%(asctime)s - %(levelname)s - %(name)s - %(message)s"


def get_logger(name: Optional[str], default_level: str = "WARNING") -> logging.Logger:
    """The logger `name` at level $TQ_LOGGING_LEVEL (else default_level),
    printing to stderr when no handler would (a Ray actor's process inherits
    no logging setup)."""
    logger = logging.getLogger(name)
    logger.setLevel(os.getenv(LEVEL_ENV, default_level))
    if not logger.hasHandlers():
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter(_FORMAT))
        logger.addHandler(handler)
    return logger


__all__ = ["get_logger"]
