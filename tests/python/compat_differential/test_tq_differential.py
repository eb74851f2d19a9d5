"""Differential tests: every scenario of tq_scenarios runs on the real
TransferQueue 0.1.11 (its own venv, tools/reference_peer.py) and on seqflow's
transfer_queue (install_as_transfer_queue(), seqflow.mode embedded and
local), and what the calls returned must be the same, field by field:
values, dtypes, shapes, container types, exception types.

Each side runs once per module in its own process (tq_differential_driver.py);
the three run at the same time. The test fails, never skips, when the
reference venv cannot be made.

SeqlenBalancedSampler is compared by properties: TransferQueue 0.1.11 hands
the same samples to a rank twice (and never hands out others) when the
ranks run at different speeds — its cache for one step is filled from the
samples still unconsumed, which include the slower rank's share of the
step before. seqflow gives every sample exactly once; the test asserts that.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[2]
for path in (HERE, REPO_ROOT / "tools"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import reference_peer  # noqa: E402
import tq_scenarios  # noqa: E402

DRIVER = HERE / "tq_differential_driver.py"
REFERENCE = "transferqueue"
SEQFLOW_SIDES = ("seqflow-embedded", "seqflow-local")
RUN_DEADLINE_S = 300  # the reference side starts Ray (under a minute); the seqflow sides take seconds
SHOWN_DIFFERENCES = 40
BY_PROPERTIES = ("sampler_seqlen_balanced",)


def _run_sides(python_of: dict, out_dir: Path) -> dict:
    started = {}
    for side, python in python_of.items():
        log = open(out_dir / f"{side}.log", "w")
        started[side] = (subprocess.Popen([python, str(DRIVER), side, str(out_dir / f"{side}.json")],
                                          stdout=log, stderr=subprocess.STDOUT, cwd=str(HERE)), log)
    reports, failures = {}, []
    for side, (process, log) in started.items():
        try:
            code = process.wait(timeout=RUN_DEADLINE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
            code = f"killed after {RUN_DEADLINE_S}s"
        log.close()
        if code != 0:
            tail = (out_dir / f"{side}.log").read_text(errors="replace")[-3000:]
            failures.append(f"the {side} driver exited {code}:\n{tail}")
        else:
            reports[side] = json.loads((out_dir / f"{side}.json").read_text())["results"]
    if failures:
        pytest.fail("\n\n".join(failures))
    return reports


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    """{side: {scenario: result}} for the reference and both seqflow modes."""
    try:
        reference_python = reference_peer.transferqueue_python()
    except reference_peer.ReferenceUnavailable as error:
        pytest.fail(f"TransferQueue {reference_peer.VERSION}'s venv cannot be made: {error}")
    pythons = {REFERENCE: reference_python, **{side: sys.executable for side in SEQFLOW_SIDES}}
    return _run_sides(pythons, tmp_path_factory.mktemp("tq-differential"))


# Where seqflow deliberately differs from TransferQueue (docs/switching.md,
# the difference table): a scenario's result key,
# what seqflow must answer there instead, and why. Everything else is compared
# with TransferQueue's result.
DELIBERATE = {
    "get_missing_key": (lambda got: got.get("raises") == "ValueError",
                        "kv_batch_get of a key the partition lacks is an error naming it; TransferQueue drops the key "
                        "when others are present"),
    "get_unknown_field": (lambda got: got.get("raises") == "ValueError",
                          "a selected field no key holds is an error; TransferQueue returns an empty TensorDict"),
    "kv_batch_get_field_only_k2_has": (lambda got: got.get("raises") == "ValueError",
                                       "a selected field some keys lack is an error naming them; TransferQueue "
                                       "returns an empty TensorDict"),
    "force_fetch_unknown_partition": (lambda got: got.get("returns", {}).get("size") == 0,
                                      "a partition that does not exist is empty for every call, force_fetch too"),
    "list_after": (lambda got: not {"k", "k1", "k2"} & set(got["returns"]["dict"].get("kvbad", {}).get("dict", {})),
                   "a kv put that fails validation registers none of its keys; TransferQueue keeps them"),
    "picks": (lambda got: got[2]["size"] == 0,
              "GRPO groups through a client are groups of one prompt; TransferQueue takes any consecutive ready "
              "indexes, across prompts"),
}


def _documented_schema_leaf(path: str, expected, actual) -> bool:
    """BatchMeta.get_dtypes / get_shapes as docs/switching.md documents them:
    dtype names ("int64") for TransferQueue's torch.dtype objects, shapes as
    tuples, () for one value per row where TransferQueue says [1], and -1 in
    the dimensions that vary where TransferQueue lists each row's length."""
    if ".dtypes." in f".{path}" and isinstance(expected, dict) and "torch_dtype" in expected:
        return actual == expected["torch_dtype"].removeprefix("torch.")
    if ".shapes." not in f".{path}":
        return False
    if path.endswith(".seq"):
        return {expected, actual} == {"list", "tuple"}
    if isinstance(expected, int) and actual == -1:  # one row's length in a dimension that varies
        return True
    if path.endswith(".items") and isinstance(expected, list) and isinstance(actual, list):
        return (expected == [1] and actual == []) or (
            len(expected) == len(actual) and all(a in (e, -1) for e, a in zip(expected, actual)))
    return False


def differences(expected, actual, path: str = "") -> list[str]:
    """Where `actual` differs from `expected`, one line per leaf."""
    if isinstance(expected, dict) and isinstance(actual, dict) and "raises" in expected and "raises" in actual:
        # The same except clause must catch seqflow's error: TransferQueue's type among the types it is.
        if expected["raises"] in actual["catchable_as"] and expected["message_nonempty"] == actual["message_nonempty"]:
            return []
        return [f"{path}: transferqueue raises {expected['raises']}, seqflow {actual['raises']} "
                f"(catchable as {actual['catchable_as']})"]
    if isinstance(expected, dict) and isinstance(actual, dict):
        found = []
        for key in list(expected) + [k for k in actual if k not in expected]:
            where = f"{path}.{key}" if path else str(key)
            if key not in actual:
                found.append(f"{where}: transferqueue={_short(expected[key])} seqflow=<missing>")
            elif key not in expected:
                found.append(f"{where}: transferqueue=<missing> seqflow={_short(actual[key])}")
            else:
                found += differences(expected[key], actual[key], where)
        return found
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        return [d for i, (e, a) in enumerate(zip(expected, actual)) for d in differences(e, a, f"{path}[{i}]")]
    if expected == actual and type(expected) is type(actual):
        return []
    if _documented_schema_leaf(path, expected, actual):
        return []
    return [f"{path}: transferqueue={_short(expected)} seqflow={_short(actual)}"]


def _short(value, limit: int = 300) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + "..."


def _reference_result(results: dict, name: str):
    reference = results[REFERENCE][name]
    assert "scenario_error" not in reference, f"the scenario itself fails on TransferQueue: {reference}"
    return reference


EXACT = [name for name in tq_scenarios.SCENARIOS if name not in BY_PROPERTIES]


@pytest.mark.parametrize("side", SEQFLOW_SIDES)
@pytest.mark.parametrize("name", EXACT)
def test_same_results_as_transferqueue(results, name, side):
    expected, got = _reference_result(results, name), results[side][name]
    found = []
    for key in set(expected) | set(got) if isinstance(expected, dict) and isinstance(got, dict) else ():
        if key in DELIBERATE:
            meets, why = DELIBERATE[key]
            if key not in got or not meets(got[key]):
                found.append(f"{key}: seqflow={_short(got.get(key))}, not what docs/switching.md documents ({why})")
    skip = set(DELIBERATE) if isinstance(expected, dict) else set()
    found += differences({k: v for k, v in expected.items() if k not in skip} if skip else expected,
                         {k: v for k, v in got.items() if k not in skip} if skip else got)
    assert not found, f"{len(found)} differences:\n" + "\n".join(found[:SHOWN_DIFFERENCES])


def _balanced_properties(result: dict) -> dict:
    """What both systems must share: every call answered with one complete prompt group of the per-rank
    batch size (2 samples: labels 2g, 2g+1)."""
    calls = []
    for call in result["calls"]:
        got = call["got"]
        if "returns" not in got:
            calls.append({"dp_rank": call["dp_rank"], "batch_index": call["batch_index"], "raises": got})
            continue
        labels = sorted(got["returns"])
        calls.append({"dp_rank": call["dp_rank"], "batch_index": call["batch_index"], "size": len(labels),
                      "complete_groups": all(labels[i] % 2 == 0 and labels[i + 1] == labels[i] + 1
                                             for i in range(0, len(labels) - 1, 2)) and len(labels) % 2 == 0})
    return {"lengths": result["lengths"], "calls": calls}


@pytest.mark.parametrize("side", SEQFLOW_SIDES)
def test_seqlen_balanced_sampler_like_transferqueue_but_exactly_once(results, side):
    reference = _reference_result(results, "sampler_seqlen_balanced")
    got = results[side]["sampler_seqlen_balanced"]
    found = differences(_balanced_properties(reference), _balanced_properties(got))
    assert not found, "\n".join(found[:SHOWN_DIFFERENCES])
    handed_out = sorted(label for call in got["calls"] for label in call["got"]["returns"])
    assert handed_out == list(range(len(got["lengths"]))), "every sample exactly once across ranks and steps"
