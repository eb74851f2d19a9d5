"""An insert that runs out of memory changes nothing: in a process whose
address space is capped, inserting 10 million samples raises MemoryError
and leaves the partition as it was (no sample of the failed insert stays
unproduced), and the next insert works. A new partition the failed insert
would have made is not made."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

CAPPED_INSERT = textwrap.dedent("""
    import json, resource
    import numpy as np
    import seqflow

    client = seqflow.Client()
    client.put({"x": np.arange(4)}, partition_id="p")
    resident = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (resident + (512 << 20), resource.RLIM_INFINITY))
    outcome = {}
    for partition in ("p", "new"):
        try:
            client.get_meta([], 10_000_000, partition, mode="insert")
            outcome[partition] = "inserted"
        except MemoryError:
            outcome[partition] = "MemoryError"
    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    indexes, produced = client.get_production_status(["x"], "p")
    outcome["samples"] = len(indexes)
    outcome["produced"] = int(sum(produced))
    outcome["partitions"] = client.get_partition_list()
    outcome["after"] = client.get_meta([], 2, "p", mode="insert").global_indexes
    print(json.dumps(outcome))
""")


def test_an_insert_that_runs_out_of_memory_changes_nothing():
    run = subprocess.run([sys.executable, "-c", CAPPED_INSERT], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    outcome = json.loads(run.stdout.strip().splitlines()[-1])
    if outcome["p"] != "MemoryError":
        pytest.fail(f"10 million samples fit in 512 MiB more: the cap no longer provokes the failure ({outcome})")
    assert outcome["new"] == "MemoryError", outcome
    assert outcome["samples"] == 4 and outcome["produced"] == 4, outcome
    assert outcome["partitions"] == ["p"], outcome
    assert outcome["after"] == [4, 5], outcome
