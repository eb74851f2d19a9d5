"""The Ray path: seqflow.init(backend="ray", num_storage_units=N, name=...)
starts the controller and N storage units as detached, named actors; a Ray
task in another process attaches by name and reads what the driver put;
close() stops the services this process started; shutdown_ray_services
stops them from anywhere."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import numpy as np
import pytest

import seqflow
from seqflow.remote import RAY_NAMESPACE, start_ray_services
from required import require

ray = require("ray")


@pytest.fixture(scope="module")
def ray_cluster():
    # Workers import seqflow from where this process does (an installed
    # package or a source tree on PYTHONPATH), and this module for its task.
    package_parent = str(Path(seqflow.__file__).resolve().parents[1])
    here = str(Path(__file__).resolve().parent)
    path = os.pathsep.join(p for p in (package_parent, here, os.environ.get("PYTHONPATH")) if p)
    ray.init(num_cpus=2, include_dashboard=False, runtime_env={"env_vars": {"PYTHONPATH": path}},
             log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture
def name(ray_cluster):
    """A fresh service name; whatever runs under it is stopped afterwards."""
    name = f"seqflow-test-{uuid.uuid4().hex[:8]}"
    yield name
    seqflow.close()
    seqflow.shutdown_ray_services(name)


def actor_exists(name: str) -> bool:
    try:
        ray.get_actor(name, namespace=RAY_NAMESPACE)
        return True
    except ValueError:
        return False


@ray.remote
def read_in_another_process(name: str, partition_id: str, count: int) -> list[int]:
    import seqflow

    client = seqflow.init(backend="ray", name=name)
    meta = client.get_meta(["x"], count, partition_id, task_name="remote-reader")
    out = client.get_data(meta, format="numpy")["x"].tolist()
    seqflow.close()  # attached, not started here: the services keep running
    return sorted(out)


def test_services_as_actors_shared_by_another_process(name):
    client = seqflow.init(backend="ray", name=name, num_storage_units=2, config={"timeout": 30})
    assert client.is_remote
    assert client.remote_config.address.startswith("tcp://")
    for actor in (f"{name}.controller", f"{name}.storage.0", f"{name}.storage.1"):
        assert actor_exists(actor), actor
    client.put({"x": np.arange(80)}, partition_id="p")
    units = [ray.get_actor(f"{name}.storage.{i}", namespace=RAY_NAMESPACE) for i in range(2)]
    units.sort(key=lambda unit: ray.get(unit.endpoint.remote()))  # routing order: blocks of 64 indexes in turn
    assert [ray.get(unit.stats.remote())["samples"] for unit in units] == [64, 16]
    assert ray.get(read_in_another_process.remote(name, "p", 80), timeout=120) == list(range(80))
    assert client.check_consumption_status("remote-reader", "p")
    assert actor_exists(f"{name}.controller")  # the reader's close() left them running

    seqflow.close()  # this process started them: they stop
    assert not actor_exists(f"{name}.controller")
    assert not actor_exists(f"{name}.storage.0")


def test_a_second_start_attaches_and_shutdown_stops_from_anywhere(name):
    from seqflow.remote import ray_client

    first = ray_client(name, num_storage_units=1)
    second = ray_client(name, num_storage_units=1)  # runs already: attached, not owned
    assert second.remote_config.address == first.remote_config.address
    second.close()
    assert actor_exists(f"{name}.controller")
    with pytest.raises(ValueError, match="num_storage_units"):
        ray_client(name, num_storage_units=3)
    assert seqflow.shutdown_ray_services(name)
    assert not actor_exists(f"{name}.controller")
    assert not seqflow.shutdown_ray_services(name)


def test_attaching_to_missing_services_raises_key_error(name):
    with pytest.raises(KeyError, match=name):
        seqflow.init(backend="ray", name=name)


def test_unknown_backend_is_rejected():
    with pytest.raises(ValueError, match="backend"):
        seqflow.init(backend="spark")


@pytest.mark.parametrize(("config", "error", "message"), [
    ({"controller": {"polling_mode": "false"}}, TypeError, "controller.polling_mode must be True or False, got 'false'"),
    ({"storage": {"max_bytes": "1GB"}}, TypeError, "storage.max_bytes"),
    ({"storag": {"max_bytes": 1}}, ValueError, "config key 'storag' is unknown"),
])
def test_bad_service_settings_are_refused_before_any_actor_starts(name, config, error, message):
    with pytest.raises(error, match=message):
        start_ray_services(name, config=config, num_storage_units=1)
    assert not actor_exists(f"{name}.controller")


@pytest.mark.parametrize("config", [{"storage": {"max_samples": 5}},
                                    {"backend": {"SimpleStorage": {"total_storage_size": 5}}}],
                         ids=["storage.max_samples", "transferqueue_total_storage_size"])
@pytest.mark.parametrize("backend", ["embedded", "ray"])
def test_the_configs_storage_limit_bounds_the_whole_job_on_either_backend(name, backend, config):
    # Ray's two units take 3 samples each (the limit divided by the units, rounded up), and
    # the first block of global indexes lies on one unit: the job holds 3 there, never above 5.
    on_ray = backend == "ray"
    client = seqflow.init(config,
                          **({"backend": "ray", "name": name, "num_storage_units": 2} if on_ray else {}))
    fitted = 0
    with pytest.raises(ValueError, match=f"storage full: max_samples is {3 if on_ray else 5}"):
        for _ in range(10):
            client.put({"x": np.array([fitted])}, partition_id="p")
            fitted += 1
    assert fitted == (3 if on_ray else 5)
    meta = client.get_meta(["x"], 10, "p", mode="force_fetch")
    assert sorted(client.get_data(meta, format="numpy")["x"].tolist()) == list(range(fitted))
