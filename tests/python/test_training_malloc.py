"""bench/training_malloc.py: the training benchmark keeps freed memory in
the process, so a micro-batch's time holds no page faults of buffers the
previous one gave back. The modes are process-wide, so each runs in a
process of its own."""

from __future__ import annotations

import mmap
import subprocess
import sys
from pathlib import Path

import pytest

from required import require

require("torch")

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import training_malloc  # noqa: E402
import training_report  # noqa: E402

PAGE_BYTES = 4096
BUFFER_BYTES = 24 * 1024 * 1024  # over glibc's default mmap threshold, under the kept one

# In a fresh process with the mode given: allocates and frees BUFFER_BYTES
# through torch; prints the bytes that were mapped for it and the bytes its
# free added to the heap's free bytes (glibc's mallinfo2). Counted from the
# allocation, not from before it: the allocation may first use up free bytes
# the heap held already (its top), which the free then gives back as well.
ONE_BUFFER = f"""
import ctypes, sys, torch
sys.path.insert(0, {str(BENCH)!r})
import training_malloc
training_malloc.set_mode(sys.argv[1])
class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
before = libc.mallinfo2()
buffer = torch.ones({BUFFER_BYTES} // 4)
during = libc.mallinfo2()
del buffer
after = libc.mallinfo2()
print(during.hblkhd - before.hblkhd, after.fordblks - during.fordblks)
"""

# In a fresh process with the mode given: trains a 1,024-token micro-batch of
# the benchmark's model RUNS times; prints the page faults of the runs after
# the first few (which grow the heap to what the micro-batch needs).
RUNS, SETTLING_RUNS = 14, 4
LONG_MICRO_BATCHES = f"""
import sys, numpy as np, torch
sys.path.insert(0, {str(BENCH)!r})
import training_malloc
training_malloc.set_mode(sys.argv[1])
from training_bench import random_pack
from training_model import CausalLM, ModelConfig, train_micro_batch
torch.set_num_threads(1)
model = CausalLM(ModelConfig(max_length=1024))
pack = random_pack(np.array([1024]), model.config.vocab, np.random.default_rng(0))
for run in range({RUNS}):
    if run == {SETTLING_RUNS}:
        before = training_malloc.page_faults()
    train_micro_batch(model, pack)
    model.zero_grad(set_to_none=True)
print(training_malloc.page_faults() - before)
"""


def run_in_process(script: str, mode: str) -> list[int]:
    done = subprocess.run([sys.executable, "-c", script, mode], capture_output=True, text=True, timeout=300,
                          check=True)
    return [int(word) for word in done.stdout.split()]


def test_keep_takes_large_buffers_from_the_heap_and_keeps_them_after_free():
    mapped, kept = run_in_process(ONE_BUFFER, "keep")
    assert mapped == 0 and kept >= BUFFER_BYTES
    # glibc's defaults map such a buffer of its own and unmap it when freed.
    mapped, kept = run_in_process(ONE_BUFFER, "system")
    assert mapped >= BUFFER_BYTES and kept < BUFFER_BYTES


def test_keep_trains_a_long_micro_batch_again_without_page_faults():
    [kept] = run_in_process(LONG_MICRO_BATCHES, "keep")
    [system] = run_in_process(LONG_MICRO_BATCHES, "system")
    # glibc's defaults took 58,000-150,000 over these ten runs here; keep takes
    # none but a rare 16 MiB of heap growth (4,097 in a quiet run). Side by
    # side, not against a fixed count: a loaded machine (a CI run) adds faults
    # to both, and once took keep to 17,920.
    assert system >= 4 * 16 * 1024 * 1024 // PAGE_BYTES, f"glibc's defaults faulted only {system} times"
    assert kept * 2 <= system, f"keep: {kept} page faults, glibc's defaults: {system}"


def test_mode_names_the_parameter_and_value_when_unknown():
    with pytest.raises(ValueError, match=r"malloc mode must be one of \['keep', 'system'\], got 'cached'"):
        training_malloc.set_mode("cached")


def test_page_faults_counts_the_pages_a_new_mapping_touches():
    pages = 64
    with mmap.mmap(-1, pages * PAGE_BYTES) as mapping:  # fresh pages: the first write to each faults
        before = training_malloc.page_faults()
        for offset in range(0, pages * PAGE_BYTES, PAGE_BYTES):
            mapping[offset] = 1
        assert training_malloc.page_faults() - before >= pages


def test_memory_lines_say_the_mode_and_the_faults_per_timed_micro_batch():
    line = training_report.memory_lines("glibc malloc keeps freed memory", 12_345, 6_789)[0]
    assert line == "memory: glibc malloc keeps freed memory; 6,789 page faults in the 12,345 timed micro-batches"
