"""seqflow.compat.install_as_transfer_queue(): TransferQueue 0.1.11's import
names, its init/close/get_client life cycle in every mode (embedded, local
services, Ray actors), joining from other processes, the metrics endpoint,
the client's KV retrieval calls and bad configs."""

from __future__ import annotations

import ast
import multiprocessing
import sys
import types
import urllib.request
import zipfile

import pytest
from required import require

torch = require("torch")
from tensordict import TensorDict  # noqa: E402

import seqflow.compat  # noqa: E402

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2] / "tools"))
import reference_peer  # noqa: E402

seqflow.compat.install_as_transfer_queue()
import transfer_queue as tq  # noqa: E402


def wheel_source(path: str) -> str:
    with zipfile.ZipFile(reference_peer.wheel_path()) as wheel:
        return wheel.read(path).decode()


def test_every_public_name_of_transfer_queue_exists():
    tree = ast.parse(wheel_source("transfer_queue/__init__.py"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names.update(alias.asname or alias.name for alias in node.names)
    assert "kv_batch_put" in names and "StreamingDataset" in names  # the parse found TransferQueue's exports
    missing = sorted(n for n in names if not hasattr(tq, n))
    assert missing == []


PUBLIC_MODULES = ("interface", "client", "metadata", "controller", "storage", "sampler", "sampler.base",
                  "sampler.sequential_sampler", "sampler.grpo_group_n_sampler", "sampler.rank_aware_sampler",
                  "sampler.seqlen_balanced_sampler", "dataloader", "dataloader.streaming_dataset",
                  "dataloader.streaming_dataloader", "utils")


PACKAGES = ("storage", "sampler", "dataloader", "utils")


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_public_submodules_resolve_to_seqflow(module):
    path = module.replace(".", "/") + ("/__init__" if module in PACKAGES else "")
    wheel_source(f"transfer_queue/{path}.py")  # TransferQueue 0.1.11 has this module
    imported = __import__(f"transfer_queue.{module}", fromlist=["_"])
    assert imported.__name__ == f"seqflow.compat.transfer_queue.{module}"
    assert sys.modules[f"transfer_queue.{module}"] is imported


def test_classes_are_seqflows_own():
    from transfer_queue.metadata import BatchMeta
    from transfer_queue.sampler import SeqlenBalancedSampler

    import seqflow

    assert BatchMeta is seqflow.BatchMeta and SeqlenBalancedSampler is seqflow.SeqlenBalancedSampler


def test_install_twice_and_over_a_foreign_module(monkeypatch):
    foreign = types.ModuleType("transfer_queue.metadata")
    monkeypatch.setitem(sys.modules, "transfer_queue.metadata", foreign)
    seqflow.compat.install_as_transfer_queue()
    seqflow.compat.install_as_transfer_queue()
    finders = [f for f in sys.meta_path if type(f).__name__ == "ModuleAlias"]
    assert len(finders) == 1
    import transfer_queue.metadata as metadata

    assert metadata is not foreign and metadata.BatchMeta is seqflow.BatchMeta


def test_processes_started_afterwards_import_transfer_queue_as_seqflow():
    """Ray workers and spawned children never call install_as_transfer_queue();
    they inherit SEQFLOW_AS_TRANSFER_QUEUE and seqflow's startup hook."""
    import os
    import subprocess

    probe = [sys.executable, "-c", "import transfer_queue; print(transfer_queue.__name__)"]
    assert os.environ["SEQFLOW_AS_TRANSFER_QUEUE"] == "1"
    child = subprocess.run(probe, capture_output=True, text=True, timeout=120)
    assert child.stdout.strip() == "seqflow.compat.transfer_queue", child.stderr
    without = {k: v for k, v in os.environ.items() if k != "SEQFLOW_AS_TRANSFER_QUEUE"}
    plain = subprocess.run(probe, capture_output=True, text=True, timeout=120, env=without)
    assert plain.returncode != 0 and "No module named 'transfer_queue'" in plain.stderr


def test_seqlen_balanced_functions_fail_an_assertion_on_bad_input():
    from transfer_queue.sampler.seqlen_balanced_sampler import get_seqlen_balanced_partitions

    reference = reference_peer.load()["get_seqlen_balanced_partitions"]
    lengths = [5, 1, 4, 2, 9, 9, 3, 7]
    assert get_seqlen_balanced_partitions(lengths, 2, True) == reference(lengths, 2, True)
    with pytest.raises(AssertionError):
        reference([1, 2], 3, False)
    with pytest.raises(AssertionError, match="k_partitions"):
        get_seqlen_balanced_partitions([1, 2], 3, False)


# ---- life cycle in every mode ------------------------------------------------------
def total(tensor) -> int:
    """Sum of a field as TransferQueue returns it (dense or nested rows)."""
    return int(sum(row.sum().item() for row in tensor.unbind(0)))


def rows(tensor) -> list:
    return [row.tolist() for row in tensor.unbind(0)]


def batch(n: int, start: int = 0) -> TensorDict:
    return TensorDict({"x": torch.arange(start, start + 2 * n).reshape(n, 2)}, batch_size=n)


@pytest.fixture
def system(request):
    mode = request.param
    ray = None
    if mode == "ray":
        import ray

        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    conf = tq.init({"controller": {"polling_mode": True, "timing_alignment": 8}, "seqflow": {"mode": mode},
                    "metrics": {"enabled": mode != "embedded"}})
    try:
        yield mode, conf
    finally:
        tq.close()
        if ray is not None:
            ray.shutdown()


def consume_in_child(queue) -> None:
    """A spawned process: init() with no config joins the parent's system."""
    seqflow.compat.install_as_transfer_queue()
    import transfer_queue

    try:
        transfer_queue.init()
        client = transfer_queue.get_client()
        meta = client.get_meta(["x"], 2, "p", task_name="child")
        queue.put(("ok", total(client.get_data(meta)["x"])))
        transfer_queue.close()
    except Exception as error:  # reported to the test, which asserts on it
        queue.put((type(error).__name__, str(error)))


def run_child() -> tuple:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=consume_in_child, args=(queue,))
    child.start()
    try:
        return queue.get(timeout=120)
    finally:
        child.join(timeout=60)
        if child.is_alive():
            child.kill()
            child.join(timeout=30)


@pytest.mark.parametrize("system", ["embedded", "local", "ray"], indirect=True)
def test_the_configs_timing_alignment_reaches_the_controller(system):
    from test_task_workload import expect_unaligned_truth, fitted, timings, unaligned_seconds_of

    client = tq.get_client().seqflow
    client.report_timings("update_actor", timings(64, truth=unaligned_seconds_of))
    expect_unaligned_truth(fitted(client, "update_actor", 64).workload)


@pytest.mark.parametrize("system", ["embedded", "local", "ray"], indirect=True)
def test_life_cycle_and_joining(system):
    mode, conf = system
    client = tq.get_client()
    assert tq.init() is not None and tq.get_client() is client  # init again: the same system
    meta = client.put(batch(2), partition_id="p")
    assert meta.size == 2
    fetched = client.get_meta(["x"], 2, "p", task_name="parent")
    assert rows(client.get_data(fetched)["x"]) == [[0, 1], [2, 3]]
    outcome = run_child()
    if mode == "embedded":
        assert outcome[0] == "RuntimeError" and "embedded" in outcome[1]
    else:
        assert outcome == ("ok", 6)
    if mode != "embedded":
        import pickle

        copied = pickle.loads(pickle.dumps(client.seqflow))  # as a DataLoader worker gets it
        assert copied.allow_pickle and copied.get_partition_list() == ["p"]
        endpoint = tq.get_metrics_endpoint()
        with urllib.request.urlopen(f"http://{endpoint}/metrics", timeout=30) as reply:
            assert b"seqflow_" in reply.read()
    else:
        assert tq.get_metrics_endpoint() is None


def test_a_ray_worker_joins_and_the_config_actor_answers():
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        tq.init({"controller": {"polling_mode": True}})
        tq.get_client().put(batch(2, 10), partition_id="p")

        @ray.remote
        def worker():
            seqflow.compat.install_as_transfer_queue()
            import transfer_queue

            transfer_queue.init()
            client = transfer_queue.get_client()
            x = client.get_data(client.get_meta(["x"], 2, "p", task_name="w"))["x"]
            return int(sum(row.sum().item() for row in x.unbind(0)))

        assert ray.get(worker.remote(), timeout=120) == sum(range(10, 14))
        actor = ray.get_actor("TransferQueueController", namespace="transfer_queue")
        assert ray.get(actor.get_config.remote()).controller.address.startswith("tcp://")
        indexes, consumed = ray.get(actor.get_consumption_status.remote("p", "w"))
        assert indexes.tolist() == [0, 1] and consumed.tolist() == [1, 1] and consumed.dtype == torch.int8
        assert ray.get(actor.get_production_status.remote("p", ["x"]))[1].tolist() == [[1], [1]]
        ray.get(actor.reset_consumption.remote("p", "w"))
        assert not tq.get_client().check_consumption_status("w", "p")
        assert ray.get(actor.list_partitions.remote()) == ["p"]
        ray.get(actor.clear_partition.remote("p"))
        assert ray.get(actor.list_partitions.remote()) == [] and tq.get_client().get_partition_list() == []
        tq.close()
        with pytest.raises(ValueError):
            ray.get_actor("TransferQueueController", namespace="transfer_queue")
    finally:
        tq.close()
        ray.shutdown()


def test_close_then_init_starts_a_new_system():
    tq.init({"seqflow": {"mode": "local"}})
    tq.get_client().put(batch(1), partition_id="gone")
    tq.close()
    with pytest.raises(RuntimeError, match="init"):
        tq.get_client()
    for checkpoint_call in (tq.save_checkpoint, tq.load_checkpoint):  # TransferQueue's error before init()
        with pytest.raises(RuntimeError, match="init"):
            checkpoint_call("/tmp/seqflow-never-written")
    tq.init({"seqflow": {"mode": "local"}})
    try:
        assert tq.get_client().get_partition_list() == []
    finally:
        tq.close()


# ---- KV retrieval calls (verl's bridge uses them) --------------------------------------
@pytest.mark.parametrize("system", ["embedded", "local"], indirect=True)
def test_kv_retrieve_meta_and_keys(system):
    client = tq.get_client()
    tq.kv_batch_put(["a", "b"], "kv", fields=TensorDict({"v": torch.ones(2, 3)}, batch_size=2))
    meta = client.kv_retrieve_meta(["a", "missing", "b"], "kv")
    assert meta.size == 2 and meta.field_names == ["v"]  # a missing key is left out
    assert client.kv_retrieve_keys(list(meta.global_indexes), "kv") == ["a", "b"]
    created = client.kv_retrieve_meta("c", "kv", create=True)
    assert created.size == 1 and created.field_names == []
    assert set(tq.kv_list("kv")["kv"]) == {"a", "b", "c"}
    assert client.kv_retrieve_meta(["x"], "no_such_partition").size == 0
    with pytest.raises(RuntimeError, match="no corresponding keys"):
        client.kv_retrieve_keys([10_000], "kv")
    with pytest.raises(TypeError):
        client.kv_retrieve_meta(7, "kv")
    with pytest.raises(ValueError, match="empty"):
        client.kv_retrieve_keys([], "kv")


# ---- bad configs ------------------------------------------------------------
@pytest.mark.parametrize("conf, message", [
    ({"seqflow": {"mode": "cloud"}}, "seqflow.mode"),
    ({"controller": {"sampler": "NoSuchSampler"}}, "controller.sampler"),
    ({"controller": {"sampler": 42}}, "controller.sampler"),
    ({"backend": {"storage_backend": "Tape"}}, "backend.storage_backend"),
    ({"backend": {"SimpleStorage": {"num_data_storage_units": 0}}}, "num_data_storage_units"),
    ({"backend": {"SimpleStorage": {"total_storage_size": -5}}}, "total_storage_size"),
    ({"metrics": {"enabled": True, "port": 70000}}, "metrics.port"),
])
def test_bad_config_names_the_key(conf, message):
    conf = {"seqflow": {"mode": "local"}, **conf}
    with pytest.raises(ValueError, match=message):
        tq.init(conf)
    with pytest.raises(RuntimeError):
        tq.get_client()  # nothing was started


@pytest.mark.parametrize("system", ["embedded", "local"], indirect=True)
def test_refused_requests_are_runtime_errors_as_in_transfer_queue(system):
    from transfer_queue.client import RequestRefused

    client = tq.get_client()
    client.put(batch(2), partition_id="p")
    for bad in (dict(mode="bogus", task_name="t"), dict(mode="fetch", task_name=None)):
        with pytest.raises(RuntimeError) as caught:
            client.get_meta(["x"], 2, "p", **bad)
        assert isinstance(caught.value, ValueError) and isinstance(caught.value, RequestRefused)
    assert client.get_meta(["x"], 0, "p", task_name="t").size == 0  # TransferQueue answers a batch of 0 empty
    assert client.get_meta(["x"], 2, "p", task_name="t").size == 2  # and consumed nothing


@pytest.mark.parametrize("system", ["embedded"], indirect=True)
def test_data_parser_rewrites_columns_before_they_are_stored(system):
    """TransferQueue's data_parser gets the batch as a plain dict of columns
    (nested tensors and NonTensorStacks as lists) and rewrites it in place."""
    from tensordict.tensorclass import NonTensorStack

    seen = {}

    def fetch_urls(columns):
        seen.update({name: type(value).__name__ for name, value in columns.items()})
        columns["text"] = [f"content of {url}" for url in columns["text"]]

    client = tq.get_client()
    data = TensorDict({"text": NonTensorStack("a://1", "a://2"), "x": torch.ones(2, 2)}, batch_size=2)
    meta = client.put(data, partition_id="parsed", data_parser=fetch_urls)
    assert seen == {"text": "list", "x": "Tensor"}
    assert list(client.get_data(meta)["text"]) == ["content of a://1", "content of a://2"]
    tq.kv_batch_put(["k"], "parsed_kv", fields=TensorDict({"text": NonTensorStack("a://3")}, batch_size=1),
                    data_parser=fetch_urls)
    assert list(tq.kv_batch_get("k", "parsed_kv")["text"]) == ["content of a://3"]


# ---- what TransferQueue's tutorials and recipes rely on --------------------------------
# (they run unmodified in tests/python/compat/test_transferqueue_tutorials.py)
def test_the_default_config_is_a_resource_of_the_package():
    from importlib import resources

    from omegaconf import OmegaConf

    conf = OmegaConf.load(resources.files("transfer_queue") / "config.yaml")
    reference = OmegaConf.create(wheel_source("transfer_queue/config.yaml"))
    for key in ("controller.sampler", "controller.polling_mode", "backend.storage_backend",
                "backend.SimpleStorage.num_data_storage_units", "backend.SimpleStorage.total_storage_size",
                "metrics.enabled", "metrics.port"):
        assert OmegaConf.select(conf, key) == OmegaConf.select(reference, key), key


def test_get_logger_reads_the_level_from_the_environment(monkeypatch):
    from transfer_queue.utils.logging_utils import get_logger

    monkeypatch.setenv("TQ_LOGGING_LEVEL", "ERROR")
    assert get_logger("tq-test-logger", default_level="INFO").level == __import__("logging").ERROR
    monkeypatch.delenv("TQ_LOGGING_LEVEL")
    logger = get_logger("tq-test-logger", default_level="INFO")
    assert logger.level == __import__("logging").INFO and logger.hasHandlers()


class _PrioritySampler(tq.BaseSampler):
    """Takes the ready samples of highest priority: needs the numpy arrays themselves."""

    def sample(self, ready_indexes, batch_size, priority_scores=None, weights=None, **kwargs):
        import numpy as np

        assert isinstance(priority_scores, np.ndarray) and priority_scores.flags.writeable
        assert isinstance(weights["w"][0], np.ndarray) and weights["w"][0].shape == (2, 2)
        chosen = sorted(ready_indexes, key=lambda i: -priority_scores[i])[:batch_size]
        return chosen, chosen


@pytest.mark.parametrize("mode", ["embedded", "local"])
def test_a_python_sampler_gets_numpy_arrays_of_sampling_config_as_arrays(mode):
    import numpy as np

    tq.init({"controller": {"sampler": _PrioritySampler()}, "seqflow": {"mode": mode}})
    try:
        client = tq.get_client()
        client.put(batch(4), partition_id="p")
        sampling_config = {"priority_scores": np.array([0.1, 5.0, 0.2, 9.0]), "dp_rank": 0,
                           "weights": {"w": [np.eye(2, dtype=np.float32)]}}
        meta = client.get_meta(["x"], 2, "p", task_name="t", sampling_config=sampling_config)
        assert list(meta.global_indexes) == [3, 1]
        with pytest.raises(ValueError, match="sampling_config\\['tags'\\]"):
            client.get_meta(["x"], 1, "p", task_name="t", sampling_config={"tags": {"a", "b"}})
    finally:
        tq.close()


@pytest.mark.parametrize("system", ["embedded"], indirect=True)
def test_a_kv_put_of_another_dtype_is_stored_in_the_fields_first_one_when_exact(system):
    tq.kv_put("a", "kv", fields=TensorDict({"m": torch.ones(1, 3)}, batch_size=1))
    tq.kv_batch_put(["b", "c"], "kv", fields=TensorDict({"m": torch.ones(2, 3, dtype=torch.int64)}, batch_size=2))
    read = tq.kv_batch_get(["a", "b", "c"], "kv")["m"]
    assert read.dtype == torch.float32  # as TransferQueue reads it back
    assert [row.tolist() for row in read.unbind()] == [[1.0] * 3] * 3
    with pytest.raises(ValueError, match="dtype"):  # 2**40 + 1 has no float32: nothing stored
        tq.kv_put("d", "kv", fields=TensorDict({"m": torch.full((1, 3), 2**40 + 1)}, batch_size=1))
    assert set(tq.kv_list("kv")["kv"]) == {"a", "b", "c"}
