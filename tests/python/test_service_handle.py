"""seqflow.ServiceHandle: a controller or storage service in this process
(serve_controller / serve_storage): what it reports, stopping, and a child
process after fork, which must leave the parent's services alone."""

from __future__ import annotations

import atexit
import os
import time

import numpy as np
import pytest

import seqflow

LOCAL = "tcp://127.0.0.1:0"


def test_handle_reports_its_service_and_stops_as_a_context_manager():
    with seqflow.serve_controller(LOCAL) as controller, seqflow.serve_storage(controller.endpoint, LOCAL) as unit:
        assert controller.role == "controller" and unit.role == "storage"
        assert repr(controller) == f"ServiceHandle('controller', {controller.endpoint!r})"
        assert controller.metrics_port is None
        assert unit.serving_line == f"seqflow storage serving on {unit.endpoint}"
        assert unit.stats() == {"samples": 0, "bytes": 0, "overhead_bytes": 0}
        with pytest.raises(ValueError, match="stats\\(\\) is a storage unit's, this is the controller"):
            controller.stats()
    controller.stop()  # idempotent after the with block stopped it


def test_bad_service_arguments_are_named():
    with pytest.raises(ValueError, match="storage_units must be >= 1, got 0"):
        seqflow.serve_controller(LOCAL, storage_units=0)
    with pytest.raises(ValueError, match="max_workers must be >= 1, got 0"):
        seqflow.serve_controller(LOCAL, max_workers=0)
    with pytest.raises(ValueError, match="metrics must be HOST:PORT"):
        seqflow.serve_controller(LOCAL, metrics="no-port")
    with pytest.raises(ValueError, match="controller must be a ZeroMQ endpoint"):
        seqflow.serve_storage("tcp://127.0.0.1:99999", LOCAL)
    with pytest.raises(ValueError, match="max_bytes must be >= 0, got -1"):
        seqflow.serve_storage("tcp://127.0.0.1:5555", LOCAL, max_bytes=-1)


def test_child_after_fork_leaves_the_parents_services_serving(tmp_path):
    controller = seqflow.serve_controller(LOCAL)
    unit = seqflow.serve_storage(controller.endpoint, LOCAL)
    try:
        pid = os.fork()
        if pid == 0:  # the child: its exit handlers would stop the services; the fork hook forgot them
            status = 0
            try:
                atexit._run_exitfuncs()
            except BaseException:
                status = 1
            os._exit(status)
        deadline = time.monotonic() + 60
        while (waited := os.waitpid(pid, os.WNOHANG)) == (0, 0):
            assert time.monotonic() < deadline, "the child hung stopping its parent's services"
            time.sleep(0.05)
        assert os.waitstatus_to_exitcode(waited[1]) == 0
        client = seqflow.Client.remote(controller.endpoint, timeout=20.0)
        client.put({"x": np.arange(4)}, partition_id="p")
        assert unit.stats()["samples"] == 4
        client.close()
    finally:
        unit.stop()
        controller.stop()
