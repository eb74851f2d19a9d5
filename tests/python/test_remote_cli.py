"""`seqflow serve` and `seqflow keygen` as real processes: the serving line,
clean exit 0 on SIGTERM and SIGINT, bad options (exit 2 naming the option
and the value), the metrics endpoint, key files, and a client round trip
through a controller and two storage unit processes."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import urllib.request

import numpy as np
import pytest

import seqflow
from remote_services import LOCAL, ServeProcess, clusters, require_seqflow_command  # noqa: F401 (fixture)

SEQFLOW = require_seqflow_command()


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
    stats = client.stats()
    assert (stats["samples"], stats["bytes"]) == (10, x.nbytes) and stats["overhead_bytes"] > 0
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


CONTROLLER = ["serve", "controller", "--bind", LOCAL]
STORAGE = ["serve", "storage", "--controller", "tcp://127.0.0.1:1", "--bind", LOCAL]
NOT_HERE = "tcp://192.0.2.1:5555"  # TEST-NET-1: an address of no interface of this host


@pytest.mark.parametrize("args, option, value", [
    (["serve", "broker"], "ROLE", "'broker'"),
    (["serve", "controller", "--bind", "nonsense://x"], "--bind", "'nonsense://x'"),
    (["serve", "controller", "--bind", NOT_HERE], "--bind", NOT_HERE),
    (["serve", "storage", "--controller", "tcp://127.0.0.1:1", "--bind", "garbage"], "--bind", "'garbage'"),
    ([*CONTROLLER, "--storage-units", "0"], "--storage-units", "0"),
    ([*CONTROLLER, "--workers", "many"], "--workers", "'many'"),
    ([*CONTROLLER, "--max-request-bytes", "0"], "--max-request-bytes", "0"),
    ([*CONTROLLER, "--metrics", "9100"], "--metrics", "'9100'"),
    ([*CONTROLLER, "--metrics", "127.0.0.1:99999"], "--metrics", "127.0.0.1:99999"),
    ([*CONTROLLER, "--metrics", "192.0.2.1:9100"], "--metrics", "192.0.2.1"),
    ([*CONTROLLER, "--sampler", "fifo"], "--sampler", "'fifo'"),
    ([*CONTROLLER, "--sampler", "grpo_group_n"], "--sampler", "'grpo_group_n'"),
    ([*CONTROLLER, "--sampler", "grpo_group_n", "--sampler-args", "{oops"], "--sampler-args", "{oops"),
    ([*CONTROLLER, "--sampler-args", "{}"], "--sampler-args", "{}"),
    ([*CONTROLLER, "--polling-mode=yes"], "--polling-mode", "--polling-mode=yes"),
    ([*CONTROLLER, "--timing-alignment", "0"], "--timing-alignment", "0"),
    ([*CONTROLLER, "--timing-alignment", "eight"], "--timing-alignment", "'eight'"),
    ([*CONTROLLER, "--curve-secret", "missing.key"], "--curve-secret", "missing.key"),
    ([*CONTROLLER, "--curve-secret", "PUB"], "--curve-secret", "PUB"),
    ([*CONTROLLER, "--curve-clients", "a.pub,,b.pub"], "--curve-clients", "a.pub,,b.pub"),
    ([*CONTROLLER, "--curve-clients", "PUB"], "--curve-clients", "PUB"),
    ([*CONTROLLER, "--curve-secret", "KEY", "--curve-clients", "missing.pub"], "--curve-clients", "missing.pub"),
    # CURVE without an allow-list would admit any key pair: refused, on every service.
    ([*CONTROLLER, "--curve-secret", "KEY"], "--curve-clients", "--curve-keys DIR"),
    ([*STORAGE, "--curve-secret", "KEY"], "--curve-clients", "--curve-keys DIR"),
    ([*CONTROLLER, "--curve-keys", "/nonexistent/keys"], "--curve-keys", "/nonexistent/keys"),
    ([*STORAGE, "--curve-keys", "/nonexistent/keys"], "--curve-keys", "/nonexistent/keys"),
    ([*CONTROLLER, "--curve-keys", "/nonexistent/keys", "--curve-secret", "KEY"], "--curve-keys", "--curve-secret"),
    (["keygen", "--clients", "trainer"], "--clients", "--cluster"),
    ([*CONTROLLER, "--load-checkpoint", "/nonexistent/ckpt"], "--load-checkpoint", "/nonexistent/ckpt"),
    ([*CONTROLLER, "--checkpoint-root", "/nonexistent/root"], "--checkpoint-root", "/nonexistent/root"),
    ([*CONTROLLER, "--frobnicate"], "--frobnicate", "--frobnicate"),
    # ZeroMQ would take these modulo 65536 (-5 binds 65531): refused instead.
    (["serve", "controller", "--bind", "tcp://127.0.0.1:-5"], "--bind", "tcp://127.0.0.1:-5"),
    (["serve", "controller", "--bind", "tcp://127.0.0.1:99999"], "--bind", "tcp://127.0.0.1:99999"),
    ([*STORAGE, "--bind", "tcp://127.0.0.1:70000"], "--bind", "tcp://127.0.0.1:70000"),
    ([*CONTROLLER, "extra"], "argument", "'extra'"),
    (["serve", "storage"], "--controller", "--controller"),
    (["serve", "storage", "--controller", "garbage"], "--controller", "'garbage'"),
    (["serve", "storage", "--controller", "tcp://127.0.0.1:99999"], "--controller", "tcp://127.0.0.1:99999"),
    (["serve", "storage", "--controller", "tcp://127.0.0.1"], "--controller", "'tcp://127.0.0.1'"),
    ([*STORAGE, "--advertise", "garbage"], "--advertise", "'garbage'"),
    ([*STORAGE, "--checkpoint-root", "/nonexistent/r"], "--checkpoint-root", "/nonexistent/r"),
    ([*STORAGE, "--max-bytes", "-5"], "--max-bytes", "-5"),
    ([*STORAGE, "--max-samples", "x"], "--max-samples", "'x'"),
    ([*STORAGE, "--max-samples-per-partition", "-1"], "--max-samples-per-partition", "-1"),
    ([*STORAGE, "--max-bytes-per-partition", "1.5"], "--max-bytes-per-partition", "'1.5'"),
    ([*STORAGE, "--when-full", "block"], "--when-full", "'block'"),
    ([*STORAGE, "--high-watermark", "1.5"], "--high-watermark", "1.5"),
    ([*STORAGE, "--high-watermark", "half"], "--high-watermark", "'half'"),
    ([*STORAGE, "--low-watermark", "0"], "--low-watermark", "got 0"),
    ([*STORAGE, "--high-watermark", "0.5", "--low-watermark", "0.75"], "--low-watermark", "0.75"),
    ([*STORAGE, "--controller-key", "c.pub"], "--controller-key", "c.pub"),
    ([*STORAGE, "--curve-secret", "KEY", "--controller-key", "missing.pub"], "--controller-key", "missing.pub"),
    ([*STORAGE, "--metrics", "localhost"], "--metrics", "'localhost'"),
    (["keygen"], "PREFIX", "0 arguments"),
])
def test_bad_options_exit_2_naming_option_and_value(tmp_path, args, option, value):
    """Before serving: no serving line, no abort, one line naming both."""
    run("keygen", str(tmp_path / "cluster"))
    paths = {"KEY": str(tmp_path / "cluster.key"), "PUB": str(tmp_path / "cluster.pub")}
    result = run(*[paths.get(arg, arg) for arg in args])
    assert result.returncode == 2, result
    assert result.stdout == "", result
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("seqflow "), result.stderr
    assert option in result.stderr and paths.get(value, value) in result.stderr, result.stderr


def test_serve_storage_from_python_with_a_malformed_controller_raises():
    """seqflow.serve_storage checks the endpoint that its heartbeat thread
    connects to: a ValueError, not an abort of the process."""
    script = ("import seqflow\n"
              "try:\n"
              "    seqflow.serve_storage('garbage')\n"
              "except ValueError as error:\n"
              "    print(error)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "controller" in result.stdout and "'garbage'" in result.stdout, result.stdout


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


def test_keygen_cluster_writes_one_directory_for_every_service_and_client(tmp_path):
    keys = tmp_path / "keys"
    result = run("keygen", "--cluster", str(keys), "--clients", "trainer,rollout")
    assert result.returncode == 0, result.stderr
    assert "--curve-keys" in result.stdout
    for secret in ("cluster.key", "metrics.token", "clients/trainer.key", "clients/rollout.key"):
        assert stat.S_IMODE((keys / secret).stat().st_mode) == 0o600, secret
    assert stat.S_IMODE((keys / "clients").stat().st_mode) == 0o700
    token = (keys / "metrics.token").read_text().strip()
    assert len(token) == 64 and int(token, 16) >= 0
    public, _ = seqflow.read_key_file(keys / "cluster.key")
    assert seqflow.read_key_file(keys / "cluster.pub") == (public, None)
    again = run("keygen", "--cluster", str(keys))
    assert again.returncode == 2 and "--force" in again.stderr
    assert run("keygen", "--cluster", str(keys), "--clients", "eval").returncode == 0  # joins the cluster
    assert seqflow.read_key_file(keys / "cluster.pub") == (public, None)
    assert (keys / "clients" / "eval.pub").exists()
    taken = run("keygen", "--cluster", str(keys), "--clients", "trainer")
    assert taken.returncode == 2 and "trainer" in taken.stderr and "--force" in taken.stderr


def _transparent_huge_pages_on() -> bool:
    """Whether the kernel backs memory advised MADV_HUGEPAGE with huge pages (THP not "never")."""
    with open("/sys/kernel/mm/transparent_hugepage/enabled") as file:
        return file.read().split("[", 1)[1].split("]", 1)[0] != "never"


def _mappings(pid: int) -> list[tuple[int, int, dict[str, str]]]:
    """The process's mappings from /proc/PID/smaps: (begin, end, field -> value)."""
    with open(f"/proc/{pid}/smaps") as file:
        lines = file.read().splitlines()
    mappings: list[tuple[int, int, dict[str, str]]] = []
    for line in lines:
        head = line.split()[0]
        if ":" not in head:  # a mapping's first line: "begin-end perms offset dev inode [path]"
            begin, end = (int(part, 16) for part in head.split("-"))
            mappings.append((begin, end, {}))
        else:
            key, _, value = line.partition(":")
            mappings[-1][2][key] = value.strip()
    return mappings


def _advised_huge(fields: dict[str, str]) -> bool:
    """Whether the mapping was advised MADV_HUGEPAGE (VmFlags "hg"): seqflow's block cache does it; glibc
    does not for ZeroMQ's messages unless told to by GLIBC_TUNABLES=glibc.malloc.hugetlb=1."""
    return "hg" in fields["VmFlags"].split()


def _huge_kib(fields: dict[str, str]) -> int:
    return int(fields["AnonHugePages"].split()[0])


@pytest.mark.parametrize("tunables", [None, "glibc.malloc.hugetlb=0"])
def test_a_units_large_received_values_sit_in_huge_page_blocks_of_its_cache(tunables):
    # Over TCP (local_copy off), ZeroMQ allocates each received frame; glibc
    # maps a 64 MiB one afresh, and faulted in 4 KiB at a time it held a
    # 10 Gbit/s link at 0.87x. seqflow gives ZeroMQ's large messages blocks
    # of its own cache instead, whatever glibc's tunables say.
    environment = {} if tunables is None else {"GLIBC_TUNABLES": tunables}
    controller = ServeProcess("controller", "--bind", LOCAL, "--storage-units", "1")
    unit = None
    try:
        unit = ServeProcess("storage", "--controller", controller.endpoint, "--bind", LOCAL,
                            environment=environment)
        client = seqflow.Client.remote(controller.endpoint, local_copy=False, timeout=60)
        try:
            client.put({"x": np.ones((64, 1 << 20), dtype=np.uint8)}, partition_id="p")
            blocks = [fields for begin, end, fields in _mappings(unit.process.pid)
                      if end - begin >= 64 << 20 and _advised_huge(fields)]
        finally:
            client.close()
        assert blocks, "no mapping of 64 MiB or more in the unit was advised onto huge pages"
        if _transparent_huge_pages_on():
            assert max(_huge_kib(fields) for fields in blocks) >= 32 << 10, blocks
    finally:
        if unit is not None:
            assert unit.stop() == 0
        assert controller.stop() == 0


def test_a_clients_large_get_lands_in_huge_page_memory_of_its_own_cache():
    # The client side of the same: the received 64 MiB value is the ZeroMQ
    # message itself (no copy), in a block asked to sit on huge pages.
    controller = ServeProcess("controller", "--bind", LOCAL, "--storage-units", "1")
    unit = None
    try:
        unit = ServeProcess("storage", "--controller", controller.endpoint, "--bind", LOCAL)
        client = seqflow.Client.remote(controller.endpoint, local_copy=False, timeout=60)
        try:
            sent = np.arange(64 << 20, dtype=np.uint8).reshape(64, 1 << 20)
            client.put({"x": sent}, partition_id="p")
            got = client.get_data(client.get_meta(partition_id="p", data_fields=["x"], batch_size=64,
                                                  task_name="t"))["x"]
            got = np.asarray(got)
            assert np.array_equal(got, sent)
            address = got.__array_interface__["data"][0]
            [mapping] = [fields for begin, end, fields in _mappings(os.getpid()) if begin <= address < end]
            assert _advised_huge(mapping), f"the block was not advised onto huge pages: {mapping}"
            if _transparent_huge_pages_on():
                assert _huge_kib(mapping) >= 32 << 10, mapping
        finally:
            client.close()
    finally:
        if unit is not None:
            assert unit.stop() == 0
        assert controller.stop() == 0
