"""The interpreter exiting while daemon threads are inside seqflow calls
(polling and blocking fetches, puts, gets, a Python sampler, balancing),
embedded and remote: the process ends with the main script's status, without an abort
("terminate called ...") and without hanging. Each case runs as a fresh
Python process, several times: where the exit meets the threads varies."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from remote_services import clusters  # noqa: F401 (fixture)

RUNS = 3

# The child: a client, daemon threads that loop on seqflow calls, and an
# exit once every thread is under way. The loops use locals only: module
# globals vanish while the interpreter finalizes.
CHILD = textwrap.dedent("""
    import sys, threading
    import numpy as np
    import seqflow
    import seqflow.balance
    from seqflow import BaseSampler

    mode, address, exit_status = sys.argv[1], sys.argv[2], int(sys.argv[3])

    class EveryReady(BaseSampler):
        def sample(self, ready_indexes, batch_size, **kwargs):
            return list(ready_indexes)[:batch_size], []

    if mode == "embedded":
        client = seqflow.Client()
    elif mode == "python_sampler":
        client = seqflow.Client(EveryReady())
    else:
        if mode == "remote_in_process":
            # A Python sampler: the service's workers take the GIL too.
            controller = seqflow.serve_controller("tcp://127.0.0.1:0", sampler=EveryReady())
            storage = seqflow.serve_storage(controller.endpoint, "tcp://127.0.0.1:0")
            address = controller.endpoint
        client = seqflow.Client.remote(address, timeout=20.0)

    x = np.arange(64, dtype=np.float32).reshape(16, 4)
    meta = client.put({"x": x}, partition_id="p")

    def polling_get_meta(get_meta=client.get_meta):
        while True:
            yield get_meta(["x"], 8, "p", task_name="poll", polling=True)

    def blocking_get_meta(get_meta=client.get_meta, timeout_error=TimeoutError):
        while True:
            yield
            try:
                get_meta(["never"], 8, "empty", task_name="block", polling=False, timeout=0.05)
            except timeout_error:
                pass

    def get_data(get=client.get_data, meta=meta):
        while True:
            yield get(meta, format="numpy")

    def put(put=client.put, x=x):
        while True:
            yield put({"x": x}, partition_id="q")

    def balance(partition=seqflow.balance.partition, lengths=np.arange(1, 20001)):
        while True:
            yield partition(lengths, 8)

    started, failures = [], []
    for loop in (polling_get_meta, blocking_get_meta, get_data, put, balance):
        under_way = threading.Event()
        started.append(under_way)
        def run(loop=loop, under_way=under_way, failures=failures):
            try:
                for _ in loop():
                    under_way.set()
            except BaseException as error:  # a call failed before the exit began: the test fails
                failures.append(repr(error))
                under_way.set()
                raise
        threading.Thread(target=run, daemon=True).start()
    for under_way in started:
        assert under_way.wait(60), "a thread never got under way"
    assert not failures, failures
    print("exiting", flush=True)
    sys.exit(exit_status)
""")


def run_child(mode: str, address: str = "-", exit_status: int = 0) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD, mode, address, str(exit_status)], capture_output=True,
                          text=True, timeout=120)


def assert_clean_exits(mode: str, address: str = "-", exit_status: int = 0) -> None:
    for _ in range(RUNS):
        result = run_child(mode, address, exit_status)
        assert "exiting" in result.stdout, result.stderr
        assert "terminate called" not in result.stderr, result.stderr
        assert "Fatal Python error" not in result.stderr, result.stderr
        assert result.returncode == exit_status, result.stderr


@pytest.mark.parametrize("mode", ["embedded", "python_sampler"])
def test_exit_with_daemon_threads_inside_calls(mode):
    assert_clean_exits(mode)


def test_exit_with_daemon_threads_inside_calls_to_services_of_this_process():
    """atexit stops the services (whose workers call the Python sampler)
    while the threads wait for their replies: no hang either."""
    assert_clean_exits("remote_in_process")


def test_exit_with_daemon_threads_inside_calls_to_service_processes(clusters):
    cluster = clusters(1, processes=True)
    assert_clean_exits("remote", cluster.address)


def test_exit_keeps_the_scripts_status():
    assert_clean_exits("embedded", exit_status=3)
