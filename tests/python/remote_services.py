"""Real seqflow services for the remote-mode tests, on 127.0.0.1 with free
ports: in this process (seqflow.serve_controller / serve_storage) or as
`seqflow serve` processes. Every fixture stops what it started, and a
process that does not stop in time is killed."""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import pytest

import seqflow
from required import MissingTestDependency

LOCAL = "tcp://127.0.0.1:0"


def find_seqflow_command() -> Optional[str]:
    """$SEQFLOW_BIN, the console script next to this Python, or one on PATH."""
    found = os.environ.get("SEQFLOW_BIN")
    if found:
        return found
    beside_python = Path(sys.executable).parent / "seqflow"
    if beside_python.exists():
        return str(beside_python)
    return shutil.which("seqflow")


def require_seqflow_command() -> str:
    """find_seqflow_command(), or a failure: the README's test command installs it."""
    command = find_seqflow_command()
    if command is None:
        raise MissingTestDependency("the seqflow command is not installed: the README's test command (./run tests) "
                                    "installs it next to python (pip install .), or set $SEQFLOW_BIN")
    return command


class ServeProcess:
    """`seqflow serve ROLE ...` as a child process that is serving once the
    constructor returns: its first stdout line names the endpoint."""

    def __init__(self, role: str, *args: str, startup_timeout: float = 20.0, wrapper: tuple[str, ...] = (),
                 cwd: Optional[Path] = None, environment: Optional[dict[str, str]] = None):
        """wrapper: a command that runs the service, e.g. ("unshare", "--pid", "--fork"); cwd: its directory;
        environment: variables set for it on top of this process's."""
        command = require_seqflow_command()
        self.process = subprocess.Popen([*wrapper, command, "serve", role, *args], stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, cwd=cwd,
                                        env=None if environment is None else {**os.environ, **environment})
        self.line = self._first_line(startup_timeout)
        words = self.line.split()
        if words[:4] != ["seqflow", role, "serving", "on"]:
            self.kill()
            raise AssertionError(f"unexpected serving line {self.line!r}")
        self.endpoint = words[4]
        self.metrics_url = words[7] if len(words) > 7 and words[5:7] == ["metrics", "on"] else None

    def _first_line(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        out = b""
        fd = self.process.stdout.fileno()
        while not out.endswith(b"\n"):
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(left, 0))
            chunk = os.read(fd, 4096) if ready else b""
            if not chunk:  # timed out, or the process ended
                self.kill()
                raise AssertionError(f"seqflow serve printed no serving line: {out!r}; stderr: "
                                     f"{self.process.stderr.read().decode(errors='replace')}")
            out += chunk
        return out.decode().strip()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        """Sends `sig` and returns the exit status (killed after `timeout`)."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(f"seqflow serve did not exit within {timeout} s of signal {sig}")
        self.process.stdout.close()
        self.process.stderr.close()
        return self.process.returncode

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)  # SIGKILL: it cannot refuse


class Cluster:
    """One controller and N storage units, in this process or as processes."""

    def __init__(self, units: int = 1, *, processes: bool = False, controller_args: Optional[dict] = None,
                 storage_args: Optional[dict] = None):
        self.processes = processes
        self.units = []
        controller_args = dict(controller_args or {})
        storage_args = dict(storage_args or {})
        controller_args.setdefault("storage_units", units)
        if processes:
            self.controller = ServeProcess("controller", "--bind", LOCAL, *_flags(controller_args))
        else:
            self.controller = seqflow.serve_controller(LOCAL, **controller_args)
        self.address = self.controller.endpoint
        try:
            for _ in range(units):
                if processes:
                    self.units.append(ServeProcess("storage", "--controller", self.address, "--bind", LOCAL,
                                                   *_flags(storage_args)))
                else:
                    self.units.append(seqflow.serve_storage(self.address, LOCAL, **storage_args))
        except BaseException:
            self.stop()
            raise

    def units_by_endpoint(self):
        """The units in routing order: sample gi lives on unit (gi // 64) % N (support.unit_of)."""
        return sorted(self.units, key=lambda unit: unit.endpoint)

    def client(self, **kwargs) -> seqflow.Client:
        kwargs.setdefault("timeout", 20.0)
        return seqflow.Client.remote(self.address, **kwargs)

    def stop(self) -> None:
        for service in [*self.units, self.controller]:
            service.stop()


def _flags(args: dict) -> list[str]:
    """{"storage_units": 2, "polling_mode": True} -> ["--storage-units", "2", "--polling-mode"]."""
    flags = []
    for name, value in args.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif isinstance(value, (list, tuple)):
            flags += [flag, ",".join(str(v) for v in value)]
        elif value is not None and value is not False:
            flags += [flag, str(value)]
    return flags


@pytest.fixture
def clusters():
    """start(units, processes=False, ...) -> Cluster; all stopped at teardown."""
    started: list[Cluster] = []

    def start(units: int = 1, **kwargs) -> Cluster:
        cluster = Cluster(units, **kwargs)
        started.append(cluster)
        return cluster

    yield start
    for cluster in reversed(started):
        cluster.stop()


MODES = ("embedded", "remote")


@pytest.fixture(params=MODES)
def client_mode(request) -> str:
    """The mode a client-suite test runs in: once "embedded", once "remote"."""
    return request.param


@pytest.fixture
def make_client(client_mode, clusters):
    """make_client(sampler=None, *, sampler_args=None, polling_mode=False,
    max_samples=0, units=2, timing_alignment=1) -> a new client in this
    test's mode: an embedded client with those settings, or a remote client
    of a new in-process cluster (`units` storage units) whose controller has
    the sampler, polling mode and timing alignment and whose units each hold
    at most max_samples. Each call makes a separate store; every client is
    closed at teardown."""
    made: list[seqflow.Client] = []

    def make(sampler=None, *, sampler_args: Optional[dict] = None, polling_mode: bool = False,
             max_samples: int = 0, units: int = 2, timing_alignment: int = 1) -> seqflow.Client:
        if client_mode == "embedded":
            client = seqflow.Client(sampler, sampler_args=sampler_args, polling_mode=polling_mode,
                                    max_samples=max_samples, timing_alignment=timing_alignment)
        else:
            cluster = clusters(units, controller_args={"sampler": sampler, "sampler_args": sampler_args,
                                                       "polling_mode": polling_mode,
                                                       "timing_alignment": timing_alignment},
                               storage_args={"max_samples": max_samples})
            client = cluster.client(polling_mode=polling_mode)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


@pytest.fixture
def client_in_each_mode(make_client):
    """An embedded client, then a remote client of an in-process cluster of two storage units."""
    return make_client()
