"""32 client processes over 3 tasks against one controller and two storage
units, all of them separate processes on 127.0.0.1: every sample is
consumed exactly once per task and none is lost, while a producer is still
putting."""

from __future__ import annotations

import collections
import multiprocessing
import os
import queue
import subprocess
import sys
import time
import traceback

import numpy as np

from remote_cluster import process_cluster  # noqa: F401 (fixture)

SAMPLES = 3200
PUT_SIZE = 100
FETCH_SIZE = 8  # SAMPLES is a multiple: no task is left with a short remainder
TASKS = ("log_prob", "ref_log_prob", "update_actor")
CONSUMERS = 32
PARTITION = "train"


def consume(address: str, task: str, polling: bool, results) -> None:
    """A consumer process: fetches FETCH_SIZE samples at a time for `task`
    (polling: an empty batch when too few are ready; otherwise waiting up to
    a second at the controller) and reads them, until the task has consumed
    all SAMPLES; sends back the ids it got, or the error."""
    try:
        import seqflow

        client = seqflow.Client.remote(address, timeout=30.0, polling_mode=polling)
        ids: list[int] = []
        for _ in range(100_000):  # bounded: a task needs SAMPLES / FETCH_SIZE fetches in all
            try:
                meta = client.get_meta(["x"], FETCH_SIZE, PARTITION, task_name=task, timeout=1.0)
            except TimeoutError:
                meta = None  # nothing ready within a second
            if meta is not None and meta.size:
                got = [entry["id"] for entry in meta.custom_meta]
                data = client.get_data(meta, format="numpy")["x"].tolist()
                assert data == got, f"data {data} under ids {got}"
                ids += got
                continue
            # Nothing ready: done once every sample exists and the task consumed it.
            indexes, produced = client.get_production_status(["x"], PARTITION)
            if len(indexes) == SAMPLES and produced.all() and client.check_consumption_status(task, PARTITION):
                results.put((task, ids, None))
                return
            if polling:
                time.sleep(0.05)  # polling mode has nothing to wait on; back off
        raise AssertionError(f"{task}: consumption never completed")
    except BaseException:  # noqa: BLE001 - reported to the parent
        results.put((task, [], traceback.format_exc()))


def test_32_consumer_processes_over_3_tasks_get_every_sample_once(process_cluster):
    cluster = process_cluster(2)
    client = cluster.client(timeout=30.0)
    ids = np.arange(SAMPLES)

    def put(start: int) -> None:
        batch = ids[start:start + PUT_SIZE]
        client.put({"x": batch}, partition_id=PARTITION, custom_meta=[{"id": int(i)} for i in batch])

    put(0)  # the partition exists before any consumer asks for it
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    consumers = [context.Process(target=consume, args=(cluster.address, TASKS[k % len(TASKS)], k % 2 == 1, results),
                                 daemon=True) for k in range(CONSUMERS)]
    started = time.monotonic()
    try:
        for process in consumers:
            process.start()
        for start in range(PUT_SIZE, SAMPLES, PUT_SIZE):
            put(start)
        reports = []
        for _ in consumers:
            try:
                reports.append(results.get(timeout=max(1.0, 120 - (time.monotonic() - started))))
            except queue.Empty:
                raise AssertionError(f"only {len(reports)} of {CONSUMERS} consumers reported within 120 s")
        for process in consumers:
            process.join(30)
            assert process.exitcode == 0, f"a consumer exited with {process.exitcode}"
    finally:
        for process in consumers:
            if process.is_alive():
                process.kill()
                process.join(30)

    errors = [error for _, _, error in reports if error is not None]
    assert not errors, errors[0]
    for task in TASKS:
        got = collections.Counter(i for t, task_ids, _ in reports if t == task for i in task_ids)
        assert sorted(got) == ids.tolist(), f"{task}: {SAMPLES - len(got)} samples never consumed"
        assert max(got.values()) == 1, f"{task}: {[i for i, n in got.items() if n > 1][:10]} consumed twice"
        assert client.check_consumption_status(task, PARTITION)
    print(f"{CONSUMERS} consumers over {len(TASKS)} tasks: {time.monotonic() - started:.1f} s")


def test_a_consumer_process_that_reads_numpy_does_not_import_torch(process_cluster):
    """Each consumer process above pays for its imports; torch alone would
    cost seconds and ~250 MB in each of them."""
    cluster = process_cluster(1)
    script = (
        "import sys, numpy as np, seqflow\n"
        f"client = seqflow.Client.remote({cluster.address!r}, timeout=30.0)\n"
        "meta = client.put({'x': np.arange(4)}, partition_id='p', custom_meta=[{'id': i} for i in range(4)])\n"
        "got = client.get_meta(['x'], 4, 'p', task_name='t')\n"
        "assert client.get_data(got, format='numpy')['x'].tolist() == [m['id'] for m in got.custom_meta]\n"
        "print(sorted(name for name in ('torch', 'tensordict') if name in sys.modules))\n"
    )
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            env=environment)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", f"imported: {result.stdout.strip()}"
