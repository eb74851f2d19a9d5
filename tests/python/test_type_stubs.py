"""Type checkers see seqflow's API: the package ships py.typed and typed stubs
of the C++ module (seqflow/_seqflow/*.pyi, generated at build time), and its
modules name what they re-export instead of filling globals() at import time.
mypy --strict on a user's script resolves the README's calls to real types,
and reports a call with an argument of the wrong type."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

import seqflow
from seqflow import _seqflow

PACKAGE = Path(seqflow.__file__).parent

# What each module exported before its names were spelled out (the
# globals().update era): none may disappear.
EXPORTED_BEFORE = {
    "seqflow.balance": [
        "FitReport", "OnlineWorkload", "Partition", "Workload", "calibrate", "partition", "karmarkar_karp",
        "get_seqlen_balanced_partitions", "timing_columns",
    ],
    "seqflow.pack": [
        "MAX_PACK_LENGTH", "MAX_PADDING_SEQUENCES", "MAX_PLAN_LISTS", "MicroBatchPlan", "PackPlan", "PackStats",
        "PackedSequence", "Ragged", "inverse_permutation", "materialize", "micro_batches", "padding_sequences", "plan",
        "xtuner_baseline",
    ],
    "seqflow.default_client": [
        "close", "get_client", "init",
        *(prefix + name for prefix in ("", "async_") for name in (
            "put", "get_meta", "get_data", "set_custom_meta", "clear_partition", "clear_samples", "reset_consumption",
            "ack", "release",
            "get_consumption_status", "check_consumption_status", "get_production_status",
            "check_production_status", "get_partition_list", "kv_put", "kv_batch_put", "kv_batch_get",
            "kv_batch_get_by_meta", "kv_meta", "kv_keys", "kv_list", "kv_clear", "replay_pass", "ack_replay_pass",
            "reissue_inflight_prompts", "save_checkpoint",
            "load_checkpoint", "report_timing", "report_timings", "task_workload")),
    ],
    # Private, but used beyond the package (seqflow.compat, tests): once re-exports of C++ submodules, now Python.
    "seqflow._checks": [
        "ArgumentTypeError", "INT64_MAX", "INT64_MIN", "MAX_NAME_BYTES", "MAX_PATH_BYTES", "MAX_SECONDS", "check_bool",
        "check_choice", "check_count", "check_dicts", "check_instance", "check_int64", "check_int64_list",
        "check_list", "check_name", "check_names", "check_optional_bool", "check_optional_name", "check_path",
        "check_seconds", "check_tag", "short_repr",
    ],
    "seqflow._config": ["MAX_BUSY_POLL_US", "config_get", "read_config"],
}
# seqflow.balance's timing_columns was importable but never in __all__.
NOT_IN_ALL = {"seqflow.balance": {"timing_columns"}}

# The package's whole public namespace (seqflow.__all__ before the change).
TOP_LEVEL_BEFORE = [
    "balance", "pack", "__version__", "BatchMeta", "KVBatchMeta", "Client", "RemoteConfig", "StaleSampleError",
    "BaseSampler", "SequentialSampler", "GRPOGroupNSampler", "RankAwareSampler", "SeqlenBalancedSampler",
    "TokenBudgetSampler", "StreamingDataset", "StreamingDataLoader", "ServiceHandle", "serve_controller",
    "serve_storage", "keygen", "read_key_file", "shutdown_ray_services", *EXPORTED_BEFORE["seqflow.default_client"],
]


@pytest.mark.parametrize("module_name", sorted(EXPORTED_BEFORE))
def test_every_name_exported_before_still_is(module_name):
    module = importlib.import_module(module_name)
    names = EXPORTED_BEFORE[module_name]
    assert [name for name in names if not hasattr(module, name)] == []
    assert sorted(module.__all__) == sorted(set(names) - NOT_IN_ALL.get(module_name, set()))


def test_every_client_call_with_an_async_twin_is_a_module_function_too():
    from seqflow import default_client
    from seqflow.client import _ASYNC_METHODS

    expected = {*_ASYNC_METHODS, *(f"async_{name}" for name in _ASYNC_METHODS)}
    assert sorted(expected - set(default_client.__all__)) == []


def test_the_package_namespace_keeps_every_name():
    assert sorted(seqflow.__all__) == sorted(TOP_LEVEL_BEFORE)
    assert all(hasattr(seqflow, name) for name in TOP_LEVEL_BEFORE)


def test_the_installed_package_ships_the_marker_and_a_stub_per_submodule():
    assert (PACKAGE / "py.typed").is_file()
    stubs = PACKAGE / "_seqflow"
    assert (stubs / "__init__.pyi").is_file()
    submodules = [name for name, value in vars(_seqflow).items() if isinstance(value, types.ModuleType)]
    assert "balance" in submodules and "client" in submodules
    assert [name for name in submodules if not (stubs / f"{name}.pyi").is_file()] == []
    assert "def partition(" in (stubs / "balance.pyi").read_text()


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory):
    """One cache for the module's mypy runs: the first analyses numpy and seqflow, the others reuse it."""
    pytest.importorskip("mypy", reason="mypy is not installed (./run tests installs it)")
    return tmp_path_factory.mktemp("mypy_cache")


def call_mypy(tmp_path: Path, cache: Path, *arguments: str) -> tuple[int, str]:
    """mypy with seqflow as installed in this Python."""
    # torch (seqflow.streaming imports it) is not analysed: minutes of mypy's time, and not what is tested here.
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n[mypy-torch.*]\nfollow_imports = skip\nfollow_imports_for_stubs = True\n")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(config), "--cache-dir", str(cache),
         "--python-executable", sys.executable, *arguments],
        cwd=tmp_path, capture_output=True, text=True, timeout=600)
    return done.returncode, done.stdout + done.stderr


def run_mypy(tmp_path: Path, cache: Path, source: str) -> tuple[int, str]:
    """mypy --strict on `source` as a user's script."""
    script = tmp_path / "user_script.py"
    script.write_text(textwrap.dedent(source))
    return call_mypy(tmp_path, cache, "--strict", str(script))


def revealed_types(output: str) -> list[str]:
    return re.findall(r'note: Revealed type is "(.*)"', output)


def test_mypy_resolves_the_readme_calls_to_seqflow_types(tmp_path, mypy_cache):
    code, output = run_mypy(tmp_path, mypy_cache, """
        import numpy as np
        import seqflow
        import seqflow.balance as sb
        import seqflow.pack as sp

        lengths = np.random.default_rng(0).integers(100, 4000, 512)
        groups = np.repeat(np.arange(64), 8)
        balanced = sb.partition(lengths, 64, groups=groups, cardinality="equal", workload="verl")
        packs = sp.plan(lengths, dp_size=8, optimizer_steps=4, pack_max_length=32768, groups=groups,
                        pad_to="step_max")
        client = seqflow.init({"controller": {"sampler": seqflow.SeqlenBalancedSampler(n_samples_per_prompt=8,
                                                                                       dp_size=8)}})
        meta = client.put({"input_ids": [np.ones(4, np.int64)]}, partition_id="train@step_0")
        seqflow.put({"input_ids": [np.ones(4, np.int64)]}, partition_id="train@step_1")
        seqflow.close()
        reveal_type(sb.partition)
        reveal_type(sp.plan)
        reveal_type(seqflow.init)
        reveal_type(seqflow.Client.put)
        reveal_type(seqflow.put)
        reveal_type(seqflow.async_put)
        reveal_type(balanced)
        reveal_type(packs)
        reveal_type(client)
        reveal_type(meta)
    """)
    assert code == 0, output
    revealed = revealed_types(output)
    assert len(revealed) == 10, output
    assert [text for text in revealed if text == "Any" or "def (*Any, **Any)" in text] == [], output
    assert revealed[6:] == ["seqflow._seqflow.balance.Partition", "seqflow._seqflow.pack.PackPlan",
                            "seqflow.client.Client", "seqflow.batch_meta.BatchMeta"], output
    assert "Coroutine[Any, Any, seqflow.batch_meta.BatchMeta]" in revealed[5], output


def test_mypy_sees_every_public_name(tmp_path, mypy_cache):
    lines = ["import seqflow", *(f"import {name}" for name in EXPORTED_BEFORE)]
    lines += [f"print({module}.{name})" for module, names in EXPORTED_BEFORE.items() for name in names
              if name not in NOT_IN_ALL.get(module, set())]
    lines += [f"print(seqflow.{name})" for name in TOP_LEVEL_BEFORE]
    # Client's async_<name> twins (seqflow/client.py names each in the class body).
    twins = [name for name in dir(seqflow.Client) if name.startswith("async_")]
    assert "async_put" in twins
    lines += [f"print(seqflow.Client.{name})" for name in twins]
    code, output = run_mypy(tmp_path, mypy_cache, "\n".join(lines) + "\n")
    assert code == 0, output


def test_the_stubs_themselves_check(tmp_path, mypy_cache):
    """Every name in the stubs resolves: a hand-written binding signature (nb::sig) that uses a
    name the stub does not import fails here (cmake/stubgen_patterns.txt adds the imports)."""
    stubs = sorted((PACKAGE / "_seqflow").glob("*.pyi"))
    modules = ["seqflow._seqflow" + ("" if stub.stem == "__init__" else f".{stub.stem}") for stub in stubs]
    code, output = call_mypy(tmp_path, mypy_cache, "--no-silence-site-packages", "--follow-imports=silent",
                        *(argument for module in modules for argument in ("-m", module)))
    errors = [line for line in output.splitlines() if "/seqflow/_seqflow/" in line and ": error:" in line]
    # [override]: Workload.__eq__ takes a Workload and RemoteConfig.__eq__ returns object, as bound.
    assert [line for line in errors if not line.endswith("[override]")] == [], output
    submodules = [value for value in vars(_seqflow).values() if isinstance(value, types.ModuleType)]
    assert len(modules) == len(submodules) + 1 and f"checked {len(modules)} source files" in output, output


def test_mypy_reports_an_argument_of_the_wrong_type(tmp_path, mypy_cache):
    code, output = run_mypy(tmp_path, mypy_cache, """
        import seqflow.balance as sb
        import seqflow.pack as sp

        sb.partition([5, 3, 2], "2")
        sp.plan([5, 3, 2], dp_size="2", optimizer_steps=1, pack_max_length=8)
        missing = sb.no_such_function
    """)
    assert code == 1, output
    assert re.search(r':5: error: Argument 2 to "partition" has incompatible type "str"; expected "int', output), output
    assert re.search(r':6: error: Argument "dp_size" to "plan" has incompatible type "str"; expected "int', output), \
        output
    assert re.search(r':7: error: Module has no attribute "no_such_function"', output), output


def test_mypy_sees_typed_parameters_of_the_balancing_and_packing_calls(tmp_path, mypy_cache):
    """Every parameter of the balancing and packing functions has a type (none is `object` or Any): a call with
    an argument of the wrong type, in each position the engine reads, is reported."""
    code, output = run_mypy(tmp_path, mypy_cache, """
        import seqflow.balance as sb
        import seqflow.pack as sp

        sb.partition("lengths", 2)
        sb.partition([5, 3, 2], 2, workload=3.5)
        sb.partition([5, 3, 2], 2, groups=["a", "b", "c"])
        sb.karmarkar_karp({"a": 1}, 2, False)
        sb.get_seqlen_balanced_partitions([5, 3], 2, "no")
        sp.plan([1.5], dp_size=1, optimizer_steps=1, pack_max_length=8)
        sp.plan([5], dp_size=1, optimizer_steps=1, pack_max_length=8, progress=3)
        sp.micro_batches([5, 3], "100")
        sp.inverse_permutation("0123")
        sp.xtuner_baseline([5], dp_size=1, optimizer_steps=1, pack_max_length=None)
        sp.materialize([], [[1, 2]])
        sb.calibrate([], min_records="8")
        sb.OnlineWorkload(prior=3)
    """)
    assert code == 1, output
    reported = sorted({int(line) for line in re.findall(r":(\d+): error: ", output)})
    assert reported == list(range(5, 18)), output
    # The typed C++ functions under them: nanobind's signatures, no parameter left `object` or unannotated.
    for native in ("balance", "pack"):
        stub = ast.parse((PACKAGE / "_seqflow" / f"{native}.pyi").read_text())
        functions = [node for node in stub.body if isinstance(node, ast.FunctionDef)]
        assert {"partition", "plan"} & {function.name for function in functions}, native
        untyped = [f"{function.name}({argument.arg})" for function in functions for argument in function.args.args
                   if argument.annotation is None or ast.unparse(argument.annotation) in ("object", "Any")]
        assert untyped == [], native
