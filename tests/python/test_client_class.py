"""seqflow.Client and seqflow.RemoteConfig as classes: their documentation
and signatures, Python subclasses, RemoteConfig's value semantics, weak
references, garbage collection and the allow_pickle attribute."""

from __future__ import annotations

import dataclasses
import gc
import inspect
import pickle
import pydoc
import socket
import threading
import time
import weakref

import numpy as np
import pytest

import seqflow
from remote_services import clusters  # noqa: F401 (fixture)

DOCUMENTED_CALLS = ("put", "get_meta", "get_data", "kv_batch_get", "save_checkpoint", "report_timings")


@pytest.mark.parametrize("name", DOCUMENTED_CALLS)
def test_methods_module_functions_and_async_twins_carry_their_documentation(name):
    method = getattr(seqflow.Client, name)
    doc = method.__doc__
    assert len(doc.split()) >= 8, doc
    rendered = pydoc.render_doc(method, renderer=pydoc.plaintext)
    assert f"{name}(self, " in rendered and inspect.cleandoc(doc).splitlines()[0] in rendered
    assert doc in getattr(seqflow.Client, f"async_{name}").__doc__
    assert doc in getattr(seqflow, name).__doc__ and doc in getattr(seqflow, f"async_{name}").__doc__


def test_signatures_keep_their_keyword_names_defaults_and_keyword_only_markers():
    keyword_only = inspect.Parameter.KEYWORD_ONLY
    put = inspect.signature(seqflow.Client.put).parameters
    assert list(put) == ["self", "data", "metadata", "partition_id", "custom_meta", "allow_pickle"]
    assert put["custom_meta"].default is None and put["allow_pickle"].kind is keyword_only
    get_meta = inspect.signature(seqflow.Client.get_meta).parameters
    assert get_meta["mode"].default == "fetch" and get_meta["timeout"].kind is keyword_only
    get_data = inspect.signature(seqflow.Client.get_data).parameters
    assert list(get_data)[:3] == ["self", "metadata", "fields"] and get_data["fields"].kind is keyword_only
    client = seqflow.Client()
    client.put({"x": np.arange(3)}, partition_id="p")
    meta = client.get_meta(data_fields=["x"], batch_size=2, partition_id="p", mode="fetch", task_name="t",
                           sampling_config=None, timeout=1.0, polling=False)
    with pytest.raises(TypeError):
        client.get_data(meta, ["x"])  # fields is keyword-only
    assert client.get_data(meta, fields=["x"], format="numpy")["x"].tolist() == [0, 1]
    client.close()


def test_the_classes_document_themselves():
    for kind, words in [(seqflow.Client, "embedded"), (seqflow.RemoteConfig, "controller service")]:
        assert words in kind.__doc__ and words in pydoc.render_doc(kind, renderer=pydoc.plaintext)
    assert "TransferQueue's config keys" in seqflow.Client.from_config.__doc__
    assert "TimeoutError" in seqflow.Client.remote.__doc__
    assert seqflow.Client.__module__ == seqflow.RemoteConfig.__module__ == "seqflow.client"


class CountingClient(seqflow.Client):
    """A subclass with a constructor, an attribute and an override of its own."""

    puts = 0

    def __init__(self, *args, label: str = "counting", **kwargs):
        super().__init__(*args, **kwargs)
        self.label = label

    def put(self, data, *args, **kwargs):
        self.puts += 1
        return super().put(data, *args, **kwargs)


def test_a_python_subclass_of_an_embedded_client_works():
    client = CountingClient(polling_mode=True, label="mine")
    assert isinstance(client, seqflow.Client) and client.label == "mine" and client.polling_mode
    meta = client.put({"x": np.arange(4)}, partition_id="p")
    assert client.puts == 1 and client.get_data(meta, format="numpy")["x"].tolist() == [0, 1, 2, 3]
    built = CountingClient.from_config({"controller": {"polling_mode": True}})
    assert type(built) is CountingClient and built.polling_mode and built.label == "counting"
    client.close()
    built.close()


def test_a_python_subclass_of_a_remote_client_connects_and_pickles_as_itself(clusters):
    cluster = clusters(1)
    client = CountingClient.remote(cluster.address, timeout=5.0)
    assert type(client) is CountingClient and client.is_remote
    assert not hasattr(client, "label")  # remote clients are made without __init__, as before
    meta = client.put({"x": np.arange(3)}, partition_id="p")
    assert client.puts == 1
    client.allow_pickle = True
    copy = pickle.loads(pickle.dumps(client))
    assert type(copy) is CountingClient and copy.allow_pickle is True and copy.timeout == 5.0
    assert copy.get_data(meta, format="numpy")["x"].tolist() == [0, 1, 2]
    copy.close()
    client.close()


def test_remote_config_compares_hashes_prints_and_pickles_by_value():
    config = seqflow.RemoteConfig("tcp://127.0.0.1:1", timeout=2, busy_poll_us=7)
    same = seqflow.RemoteConfig("tcp://127.0.0.1:1", 2.0, False, None, None, True, 7)
    other = seqflow.RemoteConfig("tcp://127.0.0.1:1", timeout=3)
    assert config == same and hash(config) == hash(same) and config != other and config != "tcp://127.0.0.1:1"
    assert isinstance(config.timeout, float) and config.timeout == 2.0
    assert repr(config) == ("RemoteConfig(address='tcp://127.0.0.1:1', timeout=2.0, polling_mode=False, "
                            "server_public_key_file=None, client_key_file=None, local_copy=True, busy_poll_us=7)")
    assert pickle.loads(pickle.dumps(config)) == config
    with pytest.raises(AttributeError):
        config.timeout = 5.0
    from_config = seqflow.RemoteConfig.from_config({"controller": {"address": "tcp://h:2", "timeout": 4}})
    assert (from_config.address, from_config.timeout) == ("tcp://h:2", 4.0)


def test_remote_config_keeps_the_dataclass_functions_it_had():
    config = seqflow.RemoteConfig("tcp://127.0.0.1:1", timeout=2, busy_poll_us=7)
    assert dataclasses.is_dataclass(config)
    names = [f.name for f in dataclasses.fields(seqflow.RemoteConfig)]
    assert names == ["address", "timeout", "polling_mode", "server_public_key_file", "client_key_file", "local_copy",
                     "busy_poll_us"] == list(seqflow.RemoteConfig.__match_args__)
    defaults = {f.name: f.default for f in dataclasses.fields(config)}
    assert defaults["address"] is dataclasses.MISSING
    assert defaults == {**vars_of(seqflow.RemoteConfig("tcp://h:1")), "address": dataclasses.MISSING}
    changed = dataclasses.replace(config, timeout=9)
    assert type(changed) is seqflow.RemoteConfig and changed.timeout == 9.0 and changed.busy_poll_us == 7
    assert changed == seqflow.RemoteConfig("tcp://127.0.0.1:1", timeout=9, busy_poll_us=7)
    assert dataclasses.asdict(config) == vars_of(config) and dataclasses.astuple(config) == config.__getstate__()
    with pytest.raises(ValueError, match="timeout"):  # replace checks as the constructor does
        dataclasses.replace(config, timeout=-1)


def pickled_as_before(state: tuple) -> bytes:
    """A RemoteConfig as its C++ class pickled it: the class made without __init__, then its fields as a tuple
    (its __getstate__) handed to __setstate__ (opcodes GLOBAL, EMPTY_TUPLE, NEWOBJ, the state, BUILD)."""
    return b"\x80\x02cseqflow.client\nRemoteConfig\n)\x81" + pickle.dumps(state, protocol=2)[2:-1] + b"b."


def test_a_remote_config_pickled_by_earlier_versions_loads_and_is_checked_again():
    config = pickle.loads(pickled_as_before(("tcp://h:1", 2.0, False, None, None, True, 7)))
    assert config == seqflow.RemoteConfig("tcp://h:1", timeout=2, busy_poll_us=7)
    assert pickle.loads(pickle.dumps(config, protocol=2)) == config
    with pytest.raises(ValueError, match="timeout must be a finite number of seconds > 0"):
        pickle.loads(pickled_as_before(("tcp://h:1", -1.0, False, None, None, True, 7)))


def vars_of(config) -> dict:
    return {name: getattr(config, name) for name in seqflow.RemoteConfig.__match_args__}


def test_clients_are_weakly_referenceable_and_collected_through_cycles():
    client = seqflow.Client()
    ref = weakref.ref(client)
    client.myself = client  # a cycle through the instance dict
    client.sampler = client  # and one through an attribute the class declares
    del client
    gc.collect()
    assert ref() is None


def test_allow_pickle_is_a_class_default_set_per_client():
    assert seqflow.Client.allow_pickle is False
    trusting, careful = seqflow.Client(), seqflow.Client()
    trusting.allow_pickle = True
    trusting.put({"obj": [{1, 2}]}, partition_id="p")
    with pytest.raises(ValueError, match="allow_pickle"):
        careful.put({"obj": [{1, 2}]}, partition_id="p")
    assert careful.allow_pickle is False and seqflow.Client.allow_pickle is False
    trusting.close()
    careful.close()


def test_a_closed_client_refuses_calls():
    client = seqflow.Client()
    client.close()
    client.close()  # twice is fine
    with pytest.raises(RuntimeError, match="this seqflow client is closed"):
        client.get_partition_list()
    with pytest.raises(RuntimeError, match="this seqflow client is closed"):
        client.polling_mode  # noqa: B018


def test_a_client_closed_while_it_connects_on_first_use_stays_closed():
    with socket.socket() as probe:  # a port nothing listens on yet
        probe.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    client = pickle.loads(pickle.dumps(seqflow.Client._unpickled(seqflow.RemoteConfig(address, timeout=30.0), 30.0,
                                                                    False)))
    outcome = []

    def first_call():
        try:
            outcome.append(client.get_partition_list())
        except RuntimeError as error:
            outcome.append(error)

    caller = threading.Thread(target=first_call)
    caller.start()  # connects on first use: waits for the controller, without the GIL
    time.sleep(0.3)
    client.close()
    controller = seqflow.serve_controller(address)
    storage = seqflow.serve_storage(controller.endpoint)
    try:
        caller.join(timeout=30)
        assert not caller.is_alive()
        assert len(outcome) == 1 and isinstance(outcome[0], RuntimeError), outcome
        with pytest.raises(RuntimeError, match="this seqflow client is closed"):
            client.get_partition_list()
    finally:
        storage.stop()
        controller.stop()


def test_an_unpickled_client_checks_what_the_pickle_holds():
    config = seqflow.RemoteConfig("tcp://127.0.0.1:1")
    with pytest.raises(TypeError, match="config must be a RemoteConfig"):
        seqflow.Client._unpickled("tcp://127.0.0.1:1", 1.0, False)
    with pytest.raises(TypeError, match="timeout must be a number of seconds, got 'soon'"):
        seqflow.Client._unpickled(config, "soon", False)
    with pytest.raises(TypeError, match="allow_pickle must be True or False, got 'no'"):
        seqflow.Client._unpickled(config, 1.0, "no")
    assert seqflow.Client._unpickled(config, 1.0, None).allow_pickle is False


def test_a_clients_timeout_is_checked_when_set():
    client = seqflow.Client()
    client.timeout = 2
    assert client.timeout == 2.0
    for bad, error in ((None, TypeError), ("5", TypeError), (float("nan"), ValueError), (-1, ValueError)):
        with pytest.raises(error, match="timeout"):
            client.timeout = bad
    assert client.timeout == 2.0
    client.close()


class EqualToEverything(seqflow.Client):
    """A subclass whose instances compare equal and do not hash: remote clients are tracked by identity."""

    def __eq__(self, other):
        return True

    __hash__ = None


def test_remote_clients_of_a_subclass_that_compares_by_value_are_tracked_apart(clusters):
    cluster = clusters(1)
    first = EqualToEverything.remote(cluster.address, timeout=5.0)
    second = EqualToEverything.remote(cluster.address, timeout=5.0)
    first.put({"x": np.arange(2)}, partition_id="p")
    assert second.get_partition_list() == ["p"]
    first.close()
    second.close()


def test_a_lazily_connecting_client_checks_a_puts_arguments_before_it_connects():
    """An unpickled remote client connects on first use: a put with bad
    arguments (an empty custom_meta for two samples, a float128 field) fails
    on them at once, without waiting to connect to a controller that is not there."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    client = seqflow.Client._unpickled(seqflow.RemoteConfig(address, timeout=30.0), 30.0, False)
    started = time.monotonic()
    with pytest.raises(ValueError, match="custom_meta holds 0 entries for 2 samples"):
        client.put({"x": np.arange(2)}, partition_id="p", custom_meta=[])
    with pytest.raises(ValueError, match='field "f" has dtype float128, which seqflow does not store'):
        client.put({"f": np.zeros(2, dtype=np.longdouble)}, partition_id="p")
    assert time.monotonic() - started < 10, "the checks waited for the connection"
    client.close()
