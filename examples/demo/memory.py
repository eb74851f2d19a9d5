"""Freed memory stays in the process, as a GPU trainer's caching allocator
keeps it. With glibc's defaults, a long sequence's large buffers go back to
the system when freed and are faulted in again on the next micro-batch,
which made a long micro-batch's time vary by 15-20% from run to run (the
training benchmark's finding, bench/training_malloc.py)."""

from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD = -1  # mallopt parameters (glibc's malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_MAX = 32 * 1024 * 1024  # glibc's largest on 64-bit systems
NEVER_TRIM = 2**31 - 1


def keep_freed_memory() -> bool:
    """True when glibc's malloc took the settings (False elsewhere: the
    demo runs as well, its long micro-batches' times only vary more)."""
    name = ctypes.util.find_library("c")
    mallopt = getattr(ctypes.CDLL(name), "mallopt", None) if name else None
    return bool(mallopt and mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX) and mallopt(M_TRIM_THRESHOLD, NEVER_TRIM))
