"""CURVE in remote mode: one cluster key pair for the controller and the
storage units; a listed client with the cluster's public key and its own
pair gets in, one with a wrong server key or none times out (the handshake
never completes), an unlisted key gets a PermissionError naming the
authentication, and a CURVE service without an allow-list refuses to
start."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

import seqflow
from remote_services import clusters, require_seqflow_command  # noqa: F401 (fixture)


@pytest.fixture
def keys(tmp_path):
    """Key files: the cluster pair, two clients' pairs, and a stranger's."""
    for name in ("cluster", "alice", "bob", "stranger"):
        seqflow.keygen(tmp_path / name)
    return tmp_path


def curve_client(cluster, keys, server: str = "cluster.pub", client: str = "alice.key", timeout: float = 10.0):
    return cluster.client(timeout=timeout, server_public_key_file=str(keys / server),
                          client_key_file=str(keys / client))


def round_trip(client) -> None:
    meta = client.put({"x": np.arange(6)}, partition_id="p")
    assert client.get_data(meta, format="numpy")["x"].tolist() == list(range(6))


@pytest.mark.parametrize("processes", [False, True], ids=["in-process", "seqflow-serve"])
def test_the_right_keys_get_in_and_wrong_or_no_keys_time_out(clusters, keys, processes):
    secret = str(keys / "cluster.key")
    allowed = [str(keys / "alice.pub")]
    cluster = clusters(2, processes=processes, controller_args={"curve_secret": secret, "curve_clients": allowed},
                       storage_args={"curve_secret": secret, "curve_clients": allowed})
    client = curve_client(cluster, keys)
    round_trip(client)
    client.close()
    with pytest.raises(TimeoutError):
        cluster.client(timeout=0.5)  # plaintext
    with pytest.raises(TimeoutError):
        curve_client(cluster, keys, server="stranger.pub", timeout=0.5)


def test_an_allow_list_admits_only_its_clients(clusters, keys):
    secret = str(keys / "cluster.key")
    allowed = [str(keys / "alice.pub"), str(keys / "bob.pub")]
    cluster = clusters(2, controller_args={"curve_secret": secret, "curve_clients": allowed},
                       storage_args={"curve_secret": secret, "curve_clients": allowed})
    for name in ("alice.key", "bob.key"):
        client = curve_client(cluster, keys, client=name)
        round_trip(client)
        client.close()
    with pytest.raises(PermissionError, match="refused this client's CURVE key.*ZAP authentication failed"):
        curve_client(cluster, keys, client="stranger.key")


def test_an_allow_list_directory_of_pub_files(clusters, keys, tmp_path):
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "alice.pub").write_bytes((keys / "alice.pub").read_bytes())
    secret = str(keys / "cluster.key")
    cluster = clusters(1, controller_args={"curve_secret": secret, "curve_clients": [str(allowed)]},
                       storage_args={"curve_secret": secret, "curve_clients": [str(allowed)]})
    round_trip(curve_client(cluster, keys))
    with pytest.raises(PermissionError, match="refused this client's CURVE key"):
        curve_client(cluster, keys, client="bob.key")


def test_key_file_mistakes_raise_value_error_naming_the_file(clusters, keys):
    allowed = [str(keys / "alice.pub")]
    cluster = clusters(1, controller_args={"curve_secret": str(keys / "cluster.key"), "curve_clients": allowed},
                       storage_args={"curve_secret": str(keys / "cluster.key"), "curve_clients": allowed})
    with pytest.raises(ValueError, match="alice.pub"):  # a .pub holds no secret key
        curve_client(cluster, keys, client="alice.pub")
    with pytest.raises(ValueError, match="cluster.pub"):
        seqflow.serve_controller("tcp://127.0.0.1:0", curve_secret=str(keys / "cluster.pub"))
    with pytest.raises(ValueError, match="CURVE secret key file"):
        seqflow.serve_controller("tcp://127.0.0.1:0", curve_clients=[str(keys / "alice.pub")])
    (keys / "broken.pub").write_text('public-key = "not a key"\n')
    with pytest.raises(ValueError, match="broken.pub"):
        seqflow.read_key_file(keys / "broken.pub")
    with pytest.raises(ValueError, match="exists"):
        seqflow.keygen(keys / "alice")


def test_a_curve_service_without_an_allow_list_refuses_to_start(keys):
    """Without one it would admit any key pair that knows cluster.pub."""
    for serve in (lambda **kw: seqflow.serve_controller("tcp://127.0.0.1:0", **kw),
                  lambda **kw: seqflow.serve_storage("tcp://127.0.0.1:1", "tcp://127.0.0.1:0", **kw)):
        with pytest.raises(ValueError, match="curve_secret.*needs curve_clients.*curve_keys=DIR"):
            serve(curve_secret=str(keys / "cluster.key"))


def test_curve_keys_in_python_and_its_mistakes(clusters, tmp_path):
    keys = tmp_path / "keys"
    subprocess.run([require_seqflow_command(), "keygen", "--cluster", str(keys), "--clients", "alice"], check=True,
                   capture_output=True, timeout=60)
    cluster = clusters(1, controller_args={"curve_keys": str(keys)}, storage_args={"curve_keys": str(keys)})
    client = cluster.client(server_public_key_file=str(keys / "cluster.pub"),
                            client_key_file=str(keys / "clients" / "alice.key"))
    round_trip(client)
    client.close()
    with pytest.raises(KeyError, match="curve_keys.*missing"):
        seqflow.serve_controller("tcp://127.0.0.1:0", curve_keys=str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="curve_keys.*replaces"):
        seqflow.serve_controller("tcp://127.0.0.1:0", curve_keys=str(keys), curve_secret=str(keys / "cluster.key"))


def test_the_ray_config_key_curve_keys_reaches_both_services():
    from seqflow.remote import _service_settings
    controller, storage = _service_settings({"security": {"curve_keys": "/shared/keys"}})
    assert controller["curve_keys"] == storage["curve_keys"] == "/shared/keys"
