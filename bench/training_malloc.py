"""How the training benchmark's process allocates memory.

CPU torch takes its tensors from glibc malloc. With glibc's defaults, the
large buffers of a long sequence's attention and activations are given
back to the operating system when freed (munmap, or the heap trimmed) and
faulted in again, page by page and zeroed, on the next micro-batch: a
1,024-token micro-batch here took 8,000-31,000 page faults on most runs
and 15-20% longer than without them, by an amount that moved with the
heap's history and the kernel's memory state, while short micro-batches
took none. No GPU trainer pays that (the
CUDA caching allocator keeps freed blocks), so the benchmark keeps freed
memory in the process too: every micro-batch then costs what its compute
costs.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import resource

# mallopt parameters (glibc's malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# glibc's largest mmap threshold on 64-bit systems; larger blocks are always mapped.
MMAP_THRESHOLD_MAX = 32 * 1024 * 1024
NEVER_TRIM = 2**31 - 1

MODES = {
    "keep": "glibc malloc keeps freed memory for reuse (mmap threshold 32 MiB, no trimming), as a GPU "
            "caching allocator does",
    "system": "glibc malloc's defaults (large freed buffers go back to the system and are faulted in again)",
}


def set_mode(mode: str) -> str:
    """Applies `mode` (one of MODES) to this process and says what it did."""
    if mode not in MODES:
        raise ValueError(f"malloc mode must be one of {sorted(MODES)}, got {mode!r}")
    if mode == "system":
        return MODES[mode]
    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else None
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return "the system's malloc (no glibc mallopt here: freed memory may go back to the system)"
    if not (mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX) and mallopt(M_TRIM_THRESHOLD, NEVER_TRIM)):
        return "glibc malloc's defaults (mallopt refused the settings)"
    return MODES[mode]


def page_faults() -> int:
    """Minor page faults of the calling thread so far."""
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
