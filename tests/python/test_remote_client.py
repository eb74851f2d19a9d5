"""The client in remote mode, against real services in this process (the
client suite itself, test_client.py, runs in both modes): samples on their block's unit for 1, 2 and 4 units, puts
sent from the caller's memory (free to change once put returns; freed when
a failed put's frames are dropped), checkpoints written by the services,
timeouts when the controller is gone, pickling as a config, and bad service
settings."""

from __future__ import annotations

import gc
import pickle
import re
import signal
import weakref

import numpy as np
import pytest

import seqflow
from background import Background
from remote_services import LOCAL, clusters  # noqa: F401 (fixture)
from required import require
from support import free_port, unit_of

torch = require("torch")

# test_client.py runs the client suite in both modes; this module holds what is remote only.


def expected_counts(indexes, units: int) -> list[int]:
    return [sum(1 for gi in indexes if unit_of(gi, units) == u) for u in range(units)]


@pytest.mark.parametrize("units", [1, 2, 4])
def test_samples_live_on_their_blocks_unit(clusters, units):
    cluster = clusters(units)
    client = cluster.client()
    ordered = cluster.units_by_endpoint()
    x = np.arange(480, dtype=np.int64).reshape(160, 3)
    meta = client.put({"x": x, "s": [f"s{i}" for i in range(160)]}, partition_id="p")
    indexes = meta.global_indexes
    assert indexes == list(range(160))
    assert [u.stats()["samples"] for u in ordered] == expected_counts(indexes, units)
    assert units == 1 or sorted(expected_counts(indexes, units))[-2] > 0  # more than one unit holds samples
    assert client.stats()["samples"] == 160

    got = client.get_meta(["x", "s"], 160, "p", task_name="t")
    data = client.get_data(got, format="numpy")
    np.testing.assert_array_equal(data["x"], x[got.global_indexes])
    assert data["s"] == [f"s{i}" for i in got.global_indexes]

    cleared = [1, 2, 3, 7, 70, 135]
    client.clear_samples(meta.select_samples(cleared))
    left = [gi for gi in indexes if gi not in cleared]
    assert [u.stats()["samples"] for u in ordered] == expected_counts(left, units)
    client.clear_partition("p")
    assert [u.stats()["samples"] for u in ordered] == [0] * units
    client.close()


@pytest.mark.parametrize("units", [1, 2])
def test_a_remote_put_sends_the_callers_memory_which_is_free_to_change_once_it_returns(clusters, units):
    client = clusters(units).client()
    dense = torch.randn(64, 3, 512)
    half = torch.randn(64, 700).to(torch.bfloat16)
    jagged = torch.nested.nested_tensor([torch.randn(n, 4) for n in range(1, 65)], layout=torch.jagged)
    array = np.random.default_rng(0).random((64, 1000))
    expected = {"dense": dense.clone(), "half": half.clone(), "jagged": [t.clone() for t in jagged.unbind()],
                "array": array.copy()}
    meta = client.put({"dense": dense, "half": half, "jagged": jagged, "array": array}, partition_id="p")
    dense.fill_(-1)
    array[:] = -1
    del half, jagged
    gc.collect()
    out = client.get_data(meta, format="torch")
    assert torch.equal(out["dense"], expected["dense"])
    assert torch.equal(out["half"], expected["half"])
    assert all(torch.equal(a, b) for a, b in zip(out["jagged"].unbind(), expected["jagged"]))
    np.testing.assert_array_equal(out["array"].numpy(), expected["array"])
    client.close()


def test_a_failed_put_frees_the_callers_array_when_the_client_closes(clusters):
    # A stopped storage unit leaves the put's frames queued in ZeroMQ, which
    # frees them on its own thread when the client closes: that release
    # takes the GIL, so the close must not hold it.
    cluster = clusters(1, processes=True)
    client = cluster.client(timeout=1.0)
    client.put({"x": np.zeros((4, 1024))}, partition_id="p")  # connects to the unit
    array = np.ones((64, 1 << 17))  # 64 MiB: more than the sockets buffer
    alive = weakref.ref(array)
    unit = cluster.units[0].process
    unit.send_signal(signal.SIGSTOP)
    try:
        with pytest.raises(TimeoutError):
            client.put({"x": array}, partition_id="p")
        del array
        gc.collect()
        Background(client.close, name="closing the client").finish(30)  # it must not hang
        gc.collect()
        assert alive() is None
    finally:
        unit.send_signal(signal.SIGCONT)


def test_checkpoint_written_by_the_services_restores_another_cluster(clusters, tmp_path):
    first = clusters(2)
    client = first.client()
    client.put({"x": np.arange(6), "s": list("abcdef")}, partition_id="p",
               custom_meta=[{"total_lengths": i} for i in range(6)])
    client.kv_put("key", "kv", {"v": np.arange(3)}, tag={"t": 1})
    assert client.get_meta(["x"], 2, "p", task_name="t").size == 2
    client.save_checkpoint(tmp_path / "ckpt")

    other = clusters(2).client()
    other.put({"z": np.arange(2)}, partition_id="gone")
    before = (sorted(other.get_partition_list()), other.stats())
    with pytest.raises(FileNotFoundError, match="missing"):
        other.load_checkpoint(tmp_path / "missing")
    assert (sorted(other.get_partition_list()), other.stats()) == before
    other.load_checkpoint(tmp_path / "ckpt")
    assert sorted(other.get_partition_list()) == ["kv", "p"]
    rest = other.get_meta(["x", "s"], 4, "p", task_name="t")
    assert rest.size == 4
    data = other.get_data(rest, format="numpy")
    assert [int(m["total_lengths"]) for m in rest.custom_meta] == data["x"].tolist()
    assert data["s"] == [chr(ord("a") + int(v)) for v in data["x"]]
    assert other.kv_batch_get("key", "kv", format="numpy")["v"].tolist() == [[0, 1, 2]]
    assert other.kv_list("kv") == {"kv": {"key": {"t": 1}}}


def test_controller_started_from_a_checkpoint(clusters, tmp_path):
    client = clusters(1).client()
    client.put({"x": np.arange(3)}, partition_id="p")
    client.save_checkpoint(tmp_path / "ckpt")
    restarted = clusters(1, controller_args={"load_checkpoint": str(tmp_path / "ckpt")}).client()
    assert restarted.get_partition_list() == ["p"]
    assert restarted.check_production_status(["x"], "p")


def test_a_python_sampler_runs_in_the_in_process_controller(clusters):
    class EveryOther(seqflow.BaseSampler):
        def sample(self, ready_indexes, batch_size, *args, **kwargs):
            picked = list(ready_indexes)[::2][:batch_size]
            return (picked, picked) if len(picked) == batch_size else ([], [])

    client = clusters(2, controller_args={"sampler": EveryOther()}).client()
    client.put({"x": np.arange(8)}, partition_id="p")
    assert client.get_meta(["x"], 3, "p", task_name="t").global_indexes == [0, 2, 4]


def test_init_from_a_config_naming_the_controller(clusters):
    cluster = clusters(1, controller_args={"polling_mode": True})
    seqflow.close()
    try:
        client = seqflow.init({"controller": {"address": cluster.address, "polling_mode": True}, "timeout": 5})
        assert client.is_remote and client.polling_mode and client.timeout == 5.0
        meta = seqflow.put({"x": np.arange(3)}, partition_id="p")
        got = seqflow.get_meta(["x"], 3, "p", task_name="t")
        assert seqflow.get_data(got, format="numpy")["x"].tolist() == meta.global_indexes
        assert seqflow.get_meta(["x"], 1, "p", task_name="t").size == 0  # polling: nothing left
    finally:
        seqflow.close()


def test_omegaconf_config_naming_the_controller(clusters):
    omegaconf = require("omegaconf")
    cluster = clusters(1)
    config = omegaconf.OmegaConf.create({"controller": {"address": cluster.address}, "timeout": 5})
    client = seqflow.Client.from_config(config)
    assert client.is_remote and client.remote_config.address == cluster.address
    client.close()


def test_a_remote_client_pickles_as_its_config_and_an_embedded_one_refuses(clusters):
    client = clusters(2).client()
    meta = client.put({"x": np.arange(4)}, partition_id="p")
    copy = pickle.loads(pickle.dumps(client))
    assert copy.remote_config == client.remote_config
    assert copy.get_data(meta, format="numpy")["x"].tolist() == [0, 1, 2, 3]
    copy.close()
    with pytest.raises(TypeError, match="embedded"):
        pickle.dumps(seqflow.Client())


def test_timeout_when_no_controller_answers():
    # Ended by the client's own 0.5 s deadline, which the error names (the
    # test's deadline is pytest's timeout).
    with pytest.raises(TimeoutError, match=r"within \d+ ms") as raised:
        seqflow.Client.remote(f"tcp://127.0.0.1:{free_port()}", timeout=0.5)
    assert int(re.search(r"within (\d+) ms", str(raised.value))[1]) <= 500, raised.value


def test_timeout_once_the_controller_stops(clusters):
    cluster = clusters(1)
    client = cluster.client(timeout=0.5)
    client.put({"x": np.arange(2)}, partition_id="p")
    cluster.controller.stop()
    with pytest.raises(TimeoutError):
        client.get_partition_list()
    with pytest.raises(TimeoutError):
        client.put({"x": np.arange(2)}, partition_id="p")


def test_bad_remote_arguments_raise_value_error():
    for kwargs, pattern in [({"address": ""}, "address"), ({"address": "tcp://h:1", "timeout": 0}, "timeout"),
                            ({"address": "tcp://h:1", "client_key_file": "c.key"}, "both")]:
        with pytest.raises(ValueError, match=pattern):
            seqflow.RemoteConfig(**kwargs)
    with pytest.raises(ValueError, match="not-an-endpoint"):
        seqflow.Client.remote("not-an-endpoint", timeout=0.5)


def test_bad_service_settings_raise_value_error_naming_them(clusters):
    with pytest.raises(ValueError, match="storage_units"):
        seqflow.serve_controller(LOCAL, storage_units=0)
    with pytest.raises(ValueError, match="nonsense"):
        seqflow.serve_controller("nonsense://x")
    with pytest.raises(ValueError, match="metrics.*'nohost'"):
        seqflow.serve_controller(LOCAL, metrics="nohost")
    with pytest.raises(ValueError, match="controller endpoint"):
        seqflow.serve_storage("")
    with pytest.raises(ValueError, match="max_bytes"):
        seqflow.serve_storage("tcp://127.0.0.1:1", max_bytes=-1)
    with pytest.raises(KeyError, match="missing.key"):
        seqflow.serve_controller(LOCAL, curve_secret="missing.key")
    taken = clusters(1).address
    with pytest.raises(ValueError, match=taken.replace(".", r"\.")):
        seqflow.serve_controller(taken)


def test_service_handle_reports_its_endpoint_and_metrics(clusters):
    controller = seqflow.serve_controller(LOCAL, metrics="127.0.0.1:0")
    try:
        port = controller.metrics_port
        assert controller.serving_line == (f"seqflow controller serving on {controller.endpoint} "
                                           f"metrics on http://127.0.0.1:{port}")
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
            assert b"seqflow_requests_total" in reply.read()
    finally:
        controller.stop()
    controller.stop()  # idempotent


def test_kv_list_polls_see_every_change_and_hand_out_fresh_dicts(clusters):
    """A remote client keeps its last listing (the controller answers a poll of an unchanged partition without
    the keys); what it hands out is still the caller's own, and a change through another client always shows."""
    cluster = clusters(1)
    lister, writer = cluster.client(), cluster.client()
    writer.kv_batch_put(["a", "b"], "kv", tags=[{"s": "pending"}, {"s": "pending"}])
    first = lister.kv_list()
    first["kv"]["a"]["s"] = "mutated"
    del first["kv"]["b"]
    assert lister.kv_list() == lister.kv_list("kv") == {"kv": {"a": {"s": "pending"}, "b": {"s": "pending"}}}
    writer.kv_put("a", "kv", tag={"s": "finished"})
    assert lister.kv_list("kv") == {"kv": {"a": {"s": "finished"}, "b": {"s": "pending"}}}
    writer.kv_clear(["b"], "kv")
    writer.put({"x": np.arange(2)}, partition_id="plain")
    assert lister.kv_list() == {"kv": {"a": {"s": "finished"}}, "plain": {}}
    writer.clear_partition("kv")
    assert lister.kv_list("kv") == {}
    assert lister.kv_list() == {"plain": {}}
    writer.kv_put("a", "kv", tag={"s": "new"})
    assert lister.kv_list() == {"plain": {}, "kv": {"a": {"s": "new"}}}


@pytest.mark.parametrize("mode", ["embedded", "remote"])
def test_polling_mode_is_a_default_that_a_call_overrides(clusters, mode):
    """The client's polling_mode is get_meta's default in both modes; polling=False waits (embedded, it used to
    poll regardless)."""
    client = seqflow.Client(polling_mode=True) if mode == "embedded" else clusters(1).client(polling_mode=True)
    try:
        client.put({"x": np.arange(1)}, partition_id="p")
        assert client.get_meta(["x"], 2, "p", task_name="t").size == 0
        with pytest.raises(TimeoutError, match="timed out"):
            client.get_meta(["x"], 2, "p", task_name="t", polling=False, timeout=0.05)
        late_put = Background(lambda: client.put({"x": np.arange(1)}, partition_id="p"), delay=0.2)
        assert client.get_meta(["x"], 2, "p", task_name="t", polling=False, timeout=30).size == 2
        late_put.finish(30)
    finally:
        client.close()
