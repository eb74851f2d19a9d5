"""The secure deployment of docs/deployment.md (its Security section), run as
written with real `seqflow serve` processes on 127.0.0.1: the listed trainer
key puts and gets; an unlisted key pair gets a PermissionError naming the
authentication from the controller and from a storage unit; the trainer's
key calling the services' own register_storage gets a PermissionError; the
metrics need the cluster's token."""

from __future__ import annotations

import ast
import os
import re
import shlex
import struct
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import zmq

import seqflow
from remote_services import ServeProcess, require_seqflow_command

SEQFLOW = require_seqflow_command()
DEPLOYMENT_DOC = Path(__file__).resolve().parents[2] / "docs" / "deployment.md"
DEADLINE = 20.0  # seconds: every wait below ends by then
# ErrorCode::kPermissionDenied in a reply envelope's status byte (1 + the code).
PERMISSION_DENIED_STATUS = 6


def security_blocks() -> tuple[list[str], str]:
    """(the bash block's command lines, the python block) of docs/deployment.md's Security section."""
    text = DEPLOYMENT_DOC.read_text()
    section = text[text.index("\n## Security\n"):]
    section = section[:section.index("\n## ", 1)]  # this section only
    bash = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    python = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    lines = [line.split("  #")[0].strip() for line in bash.replace("\\\n", " ").splitlines()]
    return [line for line in lines if line], python


def replaced_option(words: list[str], option: str, value: str) -> list[str]:
    assert option in words, (option, words)
    at = words.index(option) + 1
    return [*words[:at], value, *words[at + 1:]]


class Deployment:
    """The page's commands, with its addresses replaced by free ports on 127.0.0.1."""

    def __init__(self, directory: Path, extra_controller_args: tuple[str, ...] = ()):
        commands, self.python = security_blocks()
        keygen, controller, storage = commands
        self.directory = directory
        assert keygen.startswith("seqflow keygen --cluster "), keygen
        subprocess.run([SEQFLOW, *shlex.split(keygen)[1:]], cwd=directory, check=True, capture_output=True,
                       timeout=DEADLINE)
        words = shlex.split(controller)
        assert words[:3] == ["seqflow", "serve", "controller"] and "--curve-keys" in words, words
        words = replaced_option(words, "--bind", "tcp://127.0.0.1:0")
        self.controller = ServeProcess("controller", *words[3:], *extra_controller_args, cwd=directory,
                                       startup_timeout=DEADLINE)
        self.units = []
        try:
            words = shlex.split(storage)
            assert words[:3] == ["seqflow", "serve", "storage"] and "--curve-keys" in words, words
            words = replaced_option(words, "--bind", "tcp://127.0.0.1:0")
            words = replaced_option(words, "--controller", self.controller.endpoint)
            self.units.append(ServeProcess("storage", *words[3:], cwd=directory, startup_timeout=DEADLINE))
        except BaseException:
            self.stop()
            raise

    def client_config(self) -> dict:
        """The page's seqflow.init config, at this controller."""
        call = self.python.strip()
        assert call.startswith("seqflow.init(") and call.endswith(")"), call
        config = ast.literal_eval(call[len("seqflow.init("):-1])
        config["controller"]["address"] = self.controller.endpoint
        config["timeout"] = DEADLINE
        return config

    def stop(self) -> None:
        for service in [*self.units, self.controller]:
            assert service.stop(timeout=DEADLINE) == 0


@pytest.fixture
def deployment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the page's paths are relative: keys/...
    started = Deployment(tmp_path)
    yield started
    started.stop()


def stranger_keys(directory: Path) -> tuple[str, str]:
    """A key pair of no list: (public, secret)."""
    subprocess.run([SEQFLOW, "keygen", str(directory / "stranger")], check=True, capture_output=True,
                   timeout=DEADLINE)
    public, secret = seqflow.read_key_file(directory / "stranger.key")
    return public, secret


def curve_dealer(context: zmq.Context, endpoint: str, server_key: str, public: str, secret: str) -> zmq.Socket:
    dealer = context.socket(zmq.DEALER)
    dealer.linger = 0
    dealer.curve_serverkey = server_key.encode()
    dealer.curve_publickey = public.encode()
    dealer.curve_secretkey = secret.encode()
    return dealer


def test_the_listed_trainer_key_puts_and_gets(deployment):
    client = seqflow.init(deployment.client_config())
    try:
        x = np.arange(12, dtype=np.int64).reshape(6, 2)
        meta = seqflow.put({"x": x}, partition_id="train")
        np.testing.assert_array_equal(seqflow.get_data(meta, format="numpy")["x"], x)
        assert client.stats()["samples"] == 6
    finally:
        seqflow.close()


def test_an_unlisted_key_is_refused_by_the_controller_and_by_a_storage_unit(deployment, tmp_path):
    stranger = tmp_path / "stranger.key"
    stranger_keys(tmp_path)
    cluster_pub = str(tmp_path / "keys" / "cluster.pub")
    for endpoint in (deployment.controller.endpoint, deployment.units[0].endpoint):
        started = time.monotonic()
        with pytest.raises(PermissionError) as refused:
            seqflow.Client.remote(endpoint, timeout=DEADLINE, server_public_key_file=cluster_pub,
                                  client_key_file=str(stranger))
        message = str(refused.value)
        assert endpoint in message and "ZAP authentication failed" in message, message
        assert "refused this client's CURVE key" in message, message
        assert time.monotonic() - started < DEADLINE / 2, "the refusal must not wait for the deadline"
    # The listed key passes the unit's authentication (the unit then answers
    # that it is no controller).
    with pytest.raises(KeyError, match="unknown operation"):
        seqflow.Client.remote(deployment.units[0].endpoint, timeout=DEADLINE, server_public_key_file=cluster_pub,
                              client_key_file=str(tmp_path / "keys" / "clients" / "trainer.key"))


def test_a_raw_curve_socket_with_an_unlisted_key_reads_nothing_from_a_unit(deployment, tmp_path):
    """What the intruder of issue 38 did, with pyzmq: its handshake fails authentication."""
    public, secret = stranger_keys(tmp_path)
    cluster_public, _ = seqflow.read_key_file(tmp_path / "keys" / "cluster.pub")
    context = zmq.Context()
    try:
        dealer = curve_dealer(context, deployment.units[0].endpoint, cluster_public, public, secret)
        monitor = dealer.get_monitor_socket(zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_SUCCEEDED)
        dealer.connect(deployment.units[0].endpoint)
        assert monitor.poll(DEADLINE * 1000), "no handshake event within the deadline"
        event = struct.unpack("=HI", monitor.recv_multipart()[0][:6])
        assert event == (zmq.EVENT_HANDSHAKE_FAILED_AUTH, 400), event
        dealer.disable_monitor()
        monitor.close()
        dealer.close()
    finally:
        context.destroy(linger=0)


def test_a_listed_client_key_may_not_register_storage(deployment, tmp_path):
    """register_storage is the services' own: only the cluster key may call it."""
    cluster_public, _ = seqflow.read_key_file(tmp_path / "keys" / "cluster.pub")
    public, secret = seqflow.read_key_file(tmp_path / "keys" / "clients" / "trainer.key")
    context = zmq.Context()
    try:
        dealer = curve_dealer(context, deployment.controller.endpoint, cluster_public, public, secret)
        dealer.connect(deployment.controller.endpoint)
        request_id = 7
        # The envelope: the request id (8 bytes, little-endian) and the op; the
        # arguments are never read.
        dealer.send_multipart([struct.pack("<Q", request_id) + b"register_storage", b"{}"])
        assert dealer.poll(DEADLINE * 1000), "no reply within the deadline"
        envelope, message = dealer.recv_multipart()
        assert struct.unpack("<Q", envelope[:8])[0] == request_id
        assert envelope[8] == PERMISSION_DENIED_STATUS, (envelope, message)
        text = message.decode()
        assert "'register_storage'" in text and "services' own" in text, text
        # The same key's data calls go on.
        dealer.send_multipart([struct.pack("<Q", request_id + 1) + b"ping"])
        assert dealer.poll(DEADLINE * 1000), "no reply within the deadline"
        assert dealer.recv_multipart()[0] == struct.pack("<Q", request_id + 1) + b"\0"
        dealer.close()
    finally:
        context.destroy(linger=0)

def test_metrics_need_the_cluster_token(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    deployment = Deployment(tmp_path, extra_controller_args=("--metrics", "127.0.0.1:0"))
    try:
        url = deployment.controller.metrics_url
        token = (tmp_path / "keys" / "metrics.token").read_text().strip()
        assert len(token) == 64 and os.stat(tmp_path / "keys" / "metrics.token").st_mode & 0o777 == 0o600
        for header in (None, "Bearer wrong", f"Basic {token}"):
            request = urllib.request.Request(url + "/metrics", headers={"Authorization": header} if header else {})
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=DEADLINE)
            assert refused.value.code == 401
        request = urllib.request.Request(url + "/metrics", headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=DEADLINE) as reply:
            assert reply.status == 200 and b"seqflow_requests_total" in reply.read()
        with urllib.request.urlopen(url + "/health", timeout=DEADLINE) as reply:
            assert reply.status == 200
    finally:
        deployment.stop()
