"""`seqflow serve` and `seqflow keygen` as real processes: the serving line,
clean exit 0 on SIGTERM and SIGINT, bad options (exit 2 naming the option
and the value), the metrics endpoint, key files, and a client round trip
through a controller and two storage unit processes."""

from __future__ import annotations

import signal
import stat
import subprocess
import urllib.request

import numpy as np
import pytest

import seqflow
from remote_services import LOCAL, ServeProcess, clusters, find_seqflow_command  # noqa: F401 (fixture)

SEQFLOW = find_seqflow_command()
pytestmark = pytest.mark.skipif(SEQFLOW is None, reason="the seqflow command is not installed (pip install .)")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([SEQFLOW, *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_prints_its_endpoint_and_exits_0_on_a_signal(sig):
    controller = ServeProcess("controller", "--bind", LOCAL, "--storage-units", "1")
    try:
        assert controller.endpoint.startswith("tcp://127.0.0.1:") and not controller.endpoint.endswith(":0")
        storage = ServeProcess("storage", "--controller", controller.endpoint)
        assert storage.endpoint.startswith("tcp://127.0.0.1:")
        assert storage.stop(sig) == 0
    finally:
        assert controller.stop(sig) == 0


def test_round_trip_through_service_processes(clusters):
    cluster = clusters(2, processes=True)
    client = cluster.client()
    x = np.arange(40, dtype=np.float32).reshape(10, 4)
    meta = client.put({"x": x}, partition_id="p", custom_meta=[{"total_lengths": i} for i in range(10)])
    assert client.stats() == {"samples": 10, "bytes": x.nbytes}
    got = client.get_meta(["x"], 10, "p", task_name="t")
    np.testing.assert_array_equal(client.get_data(got, format="numpy")["x"], x[got.global_indexes])
    assert [m["total_lengths"] for m in got.custom_meta] == got.global_indexes
    client.clear_samples(meta)
    assert client.stats()["samples"] == 0
    client.close()


def test_metrics_endpoint_of_a_service_process():
    controller = ServeProcess("controller", "--bind", LOCAL, "--metrics", "127.0.0.1:0")
    try:
        assert controller.metrics_url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(controller.metrics_url + "/metrics", timeout=10) as reply:
            assert b"seqflow_requests_total" in reply.read()
        with urllib.request.urlopen(controller.metrics_url + "/health", timeout=10) as reply:
            assert reply.status == 200
    finally:
        assert controller.stop() == 0


@pytest.mark.parametrize("args, named", [
    (["serve"], "usage: seqflow serve"),
    (["serve", "broker"], "'broker'"),
    (["serve", "controller", "--storage-units", "0"], "--storage-units"),
    (["serve", "controller", "--workers", "many"], "'many'"),
    (["serve", "controller", "--bind", "nonsense://x"], "nonsense://x"),
    (["serve", "controller", "--bind", LOCAL, "--metrics", "9100"], "'9100'"),
    (["serve", "controller", "--bind", LOCAL, "--metrics", "127.0.0.1:99999"], "127.0.0.1:99999"),
    (["serve", "controller", "--sampler", "fifo"], "'fifo'"),
    (["serve", "controller", "--sampler", "grpo_group_n", "--sampler-args", "{oops"], "{oops"),
    (["serve", "controller", "--sampler-args", "{}"], "--sampler"),
    (["serve", "controller", "--curve-secret", "missing.key"], "missing.key"),
    (["serve", "controller", "--curve-clients", "a.pub,,b.pub"], "a.pub,,b.pub"),
    (["serve", "controller", "--load-checkpoint", "/nonexistent/ckpt"], "/nonexistent/ckpt"),
    (["serve", "controller", "--frobnicate"], "--frobnicate"),
    (["serve", "controller", "--checkpoint-root", "/nonexistent/root"], "/nonexistent/root"),
    (["serve", "storage", "--controller", "tcp://127.0.0.1:1", "--checkpoint-root", "/nonexistent/r"], "/nonexistent/r"),
    (["serve", "storage"], "--controller"),
    (["serve", "storage", "--controller", "tcp://127.0.0.1:1", "--max-bytes", "-5"], "-5"),
    (["serve", "storage", "--controller", "tcp://127.0.0.1:1", "--controller-key", "c.pub"], "c.pub"),
    (["keygen"], "PREFIX"),
])
def test_bad_options_exit_2_naming_option_and_value(args, named):
    result = run(*args)
    assert result.returncode == 2, result
    assert named in result.stderr


def test_help_lists_serve_and_keygen():
    out = run("--help").stdout
    assert "serve" in out and "keygen" in out
    for role in ("controller", "storage"):
        result = run("serve", role, "--help")
        assert result.returncode == 0 and f"usage: seqflow serve {role}" in result.stdout
        assert "--curve-secret" in result.stdout and "--metrics" in result.stdout


def test_keygen_writes_a_private_key_and_a_public_key(tmp_path):
    prefix = tmp_path / "cluster"
    result = run("keygen", str(prefix))
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE((tmp_path / "cluster.key").stat().st_mode) == 0o600
    public, secret = seqflow.read_key_file(tmp_path / "cluster.key")
    assert len(public) == 40 and len(secret) == 40
    assert seqflow.read_key_file(tmp_path / "cluster.pub") == (public, None)
    again = run("keygen", str(prefix))
    assert again.returncode == 2 and "--force" in again.stderr
    assert seqflow.read_key_file(tmp_path / "cluster.key") == (public, secret)  # not replaced
    assert run("keygen", str(prefix), "--force").returncode == 0
    assert seqflow.read_key_file(tmp_path / "cluster.key")[0] != public
