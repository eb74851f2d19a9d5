"""Property-based bad input (Hypothesis), embedded and remote (`seqflow serve`
processes on loopback): a state machine makes calls of the public API whose
every argument is drawn valid or not (None, wrong types, huge and negative
ints, NaN, empty strings, NUL, lone surrogates, odd dtypes and shapes, nested
dicts, mismatched lengths, stale or forged BatchMetas) against a model of
what the client stores. Each call either succeeds (only if every argument is
valid) or raises the documented type (TypeError for a wrong type, ValueError
for a wrong value, KeyError for samples and keys that do not exist,
TimeoutError for a waiting fetch) whose message names the argument at
fault; it succeeds whenever all are valid. After each call: the stored
samples, fields, custom_meta, keys and tags are the model's (a failed call
changed nothing), valid puts read back bit for bit, no task got a sample twice
(consumption status is the model's) and every sample reaches every task in the
end; the services are alive.

Profiles (SEQFLOW_HYPOTHESIS_PROFILE): "ci" (default: derandomized, so every
run makes the same calls, ~40 s for both modes) and "explore" (random, 1000
examples, failures kept in .hypothesis/)."""

from __future__ import annotations

import dataclasses
import faulthandler
import functools
import math
import os
from typing import Any, Optional

import numpy as np
import pytest

from required import require

require("hypothesis")  # a clear failure when missing: the README's test command installs it
from hypothesis import HealthCheck, Phase, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import (RuleBasedStateMachine, invariant, precondition, rule,  # noqa: E402
                                 run_state_machine_as_test)

import seqflow  # noqa: E402
from remote_services import Cluster  # noqa: E402
from seqflow._checks import MAX_NAME_BYTES  # noqa: E402
from seqflow._seqflow.limits import MAX_GLOBAL_INDEX  # noqa: E402

settings.register_profile(
    "ci", max_examples=200, stateful_step_count=30, deadline=None, derandomize=True, database=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],  # no "explain": minutes per failure
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
settings.register_profile("explore", parent=settings.get_profile("ci"), max_examples=1000, derandomize=False,
                          database=settings.default.database)
PROFILE = settings.get_profile(os.environ.get("SEQFLOW_HYPOTHESIS_PROFILE", "ci"))

# A hung call must fail the run, not stall it: one call gets this long, then the process exits with every
# thread's traceback (the longest wait drawn is 0.02 s; a remote call's own timeout is 20 s).
CALL_LIMIT_S = 90

# Texts of messages that must never reach a caller of the public API.
LEAKED = ("incompatible function arguments", "Invoked with", "std::", "bad_cast", "invalid literal",
          "has no attribute", "Cannot copy out of meta", "expected str, bytes or os.PathLike", "too large to convert",
          "embedded null", "object of type", "NoneType' object", "unhashable type", "out of range")

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# The largest insert the engine takes is 2**31 samples; valid inserts here stay small so the model stays small.
MAX_INSERT = 2**31

TASKS = ("t0", "té")
DATA_PARTITIONS = ("p0", "p1", "pé€ 字")
KV_PARTITIONS = ("kv0", "kvé")
KEYS = ("k0", "k1", "ké\x7f", "k" * MAX_NAME_BYTES)
GHOST = "ghost"  # a valid name that only an insert (get_meta mode="insert") creates


# ---- arguments: a value and whether it is valid ---------------------------------------------------

@dataclasses.dataclass
class Arg:
    """value; ok: True valid, False invalid, None either (the API leaves it
    open); names: texts of which a message blaming this argument holds one;
    errors: the exception types it may cause."""

    value: Any
    ok: Optional[bool] = True
    names: tuple = ()
    errors: tuple = (TypeError, ValueError)

    def __repr__(self):
        state = {True: "valid", False: "INVALID", None: "either"}[self.ok]
        return f"<{state} {self.value!r:.120}>"


def good(value) -> Arg:
    return Arg(value)


def bad_type(value, *names) -> Arg:
    return Arg(value, False, names, (TypeError,))


def bad_value(value, *names) -> Arg:
    return Arg(value, False, names, (ValueError,))


def valid_or_bad(valid: st.SearchStrategy, invalid: st.SearchStrategy, valid_weight: int = 7) -> st.SearchStrategy:
    """Mostly valid (valid_weight to 1), so that calls also succeed; shrinks towards valid."""
    return st.sampled_from(range(valid_weight + 1)).flatmap(lambda i: invalid if i == valid_weight else valid)


LONG_NAME = "n" * (MAX_NAME_BYTES + 1)
LONG_UTF8_NAME = "é" * (MAX_NAME_BYTES // 2 + 1)
WRONG_TYPE_NAMES = [None, 5, -1, 2**64, 2.5, math.nan, True, b"p0", bytearray(b"p"), ["p0"], ("p0",), {"p0": 1},
                    np.int64(3), np.array(["p0"])]
WRONG_VALUE_NAMES = ["", "\0", "a\0b", "\ud800", "x\udfff", LONG_NAME, LONG_UTF8_NAME]
# Any text, lone surrogates included: valid when non-empty without NUL and surrogates.
ANY_TEXT = st.text(st.one_of(st.characters(), st.characters(categories=["Cs"]), st.just("\0")), max_size=4)


def _is_name(text: str) -> bool:
    return bool(text) and "\0" not in text and not any(0xD800 <= ord(ch) <= 0xDFFF for ch in text)


@functools.lru_cache(maxsize=None)
def name_arg(parameter: str, pool, *, free_text: bool = True) -> st.SearchStrategy:
    """A name argument: from the pool, drawn text (either), or a wrong type or value."""
    invalid = st.one_of(st.sampled_from(WRONG_TYPE_NAMES).map(lambda v: bad_type(v, parameter)),
                        st.sampled_from(WRONG_VALUE_NAMES).map(lambda v: bad_value(v, parameter)))
    valid = st.sampled_from(pool).map(good)
    if free_text:
        drawn = ANY_TEXT.map(lambda t: good(t) if _is_name(t) else bad_value(t, parameter))
        valid = st.one_of(valid, valid, drawn)
    return valid_or_bad(valid, invalid)


@functools.lru_cache(maxsize=None)
def names_arg(parameter: str, pool, *, min_size: int = 0) -> st.SearchStrategy:
    """A list of names (or one str), possibly with bad items or of a wrong type."""
    valid = st.one_of(st.lists(st.sampled_from(pool), min_size=min_size, max_size=3, unique=True).map(good),
                      st.sampled_from(pool).map(good))
    item_bad = st.tuples(st.lists(st.sampled_from(pool), max_size=2, unique=True),
                         st.one_of(st.sampled_from(WRONG_TYPE_NAMES).map(lambda v: (v, TypeError)),
                                   st.sampled_from(WRONG_VALUE_NAMES).map(lambda v: (v, ValueError)))).map(
        lambda t: Arg(t[0] + [t[1][0]], False, (f"{parameter}[{len(t[0])}]",), (t[1][1],)))
    whole_bad = st.sampled_from([None, 5, 2.5, b"x", True]).map(lambda v: bad_type(v, parameter))
    return valid_or_bad(valid, st.one_of(item_bad, whole_bad))


# ---- values: plain (MessagePack) values, rows and their normal form ------------------------------------

INT64 = st.integers(INT64_MIN, INT64_MAX)
KEY_TEXT = st.text(min_size=1, max_size=4).filter(lambda t: "\0" not in t)
SCALARS = st.one_of(st.none(), st.booleans(), INT64, st.floats(), st.text(max_size=4))
PLAIN = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(KEY_TEXT, inner, max_size=3)), max_leaves=6)
ENTRY = st.dictionaries(KEY_TEXT, PLAIN, max_size=3)
# Values of a non-tensor field: a list of numbers only would be a numeric (tensor) field.
NON_NUMBERS = st.one_of(st.none(), st.text(max_size=4), st.binary(max_size=4), st.lists(PLAIN, max_size=3),
                        st.dictionaries(KEY_TEXT, PLAIN, max_size=3))


def _deep(levels: int):
    value: Any = 1
    for _ in range(levels):
        value = {"d": value}
    return value


class Opaque:
    """An object only pickle could store."""


# Entries of custom_meta / tags that must be refused: (entry, names the message holds besides the parameter).
BAD_ENTRIES = [
    {"a": Opaque()}, {"a": b"x"}, {"a": 2**70}, {"a": INT64_MIN - 1}, {"a": "\ud800"}, {"\ud800": 1}, {1: 2},
    {"a": {1: 2}}, {"a": {"\udc00": 1}}, {"a": _deep(40)}, {"a": np.float32(1)}, {"a": np.bool_(True)},
    {"a": {1, 2}}, {"a": 1 + 2j}, {None: 1},
]
WRONG_TYPE_ENTRIES = [None, 5, "x", [1], ("a", 1)]


@functools.lru_cache(maxsize=None)
def entries_arg(parameter: str, n: int, *, tag_rules: bool) -> st.SearchStrategy:
    """custom_meta (tag_rules False) or tags: None, one dict per sample, or bad."""
    entry = st.one_of(ENTRY, st.none()) if tag_rules else ENTRY
    valid = st.one_of(st.none(), st.lists(entry, min_size=n, max_size=n)).map(good)
    item = f"{parameter}[" if parameter == "custom_meta" else parameter
    wrong_length = st.lists(ENTRY, max_size=5).filter(lambda es: len(es) != n).map(
        lambda es: Arg(es, False, (parameter,), (ValueError,)))
    wrong_container = st.sampled_from([5, "ab", {"a": 1}, b"x", 2.5]).map(lambda v: bad_type(v, parameter))
    bad_entry = st.tuples(st.lists(ENTRY, min_size=n - 1, max_size=n - 1), st.sampled_from(BAD_ENTRIES),
                          st.integers(0, n - 1)).map(
        lambda t: Arg(t[0][:t[2]] + [t[1]] + t[0][t[2]:], False, (item,), (TypeError, ValueError)))
    # A tag may be None (no tag for that key); a custom_meta entry may not.
    wrong_types = WRONG_TYPE_ENTRIES[1:] if tag_rules else WRONG_TYPE_ENTRIES
    wrong_entry = st.tuples(st.lists(ENTRY, min_size=n - 1, max_size=n - 1), st.sampled_from(wrong_types),
                            st.integers(0, n - 1)).map(
        lambda t: Arg(t[0][:t[2]] + [t[1]] + t[0][t[2]:], False, (item,), (TypeError, ValueError)))
    # Top-level keys "" and "a\0": tags follow the name rule, custom_meta (encoded as given) takes them.
    odd_key = st.tuples(st.lists(ENTRY, min_size=n, max_size=n), st.sampled_from(["", "a\0"])).map(
        lambda t: Arg([{**e, t[1]: 1} for e in t[0]], False if tag_rules else None, (item,), (ValueError,)))
    # Integers in [2**63, 2**64) fit MessagePack's uint64.
    uint = st.lists(ENTRY, min_size=n, max_size=n).map(
        lambda es: Arg([{**e, "u": 2**63 + 5} for e in es], None, (item,), (ValueError,)))
    return valid_or_bad(valid, st.one_of(wrong_length, wrong_container, bad_entry, wrong_entry, odd_key, uint))


def norm_array(array) -> tuple:
    array = np.asarray(array)
    native = array.astype(array.dtype.newbyteorder("="))
    return ("array", native.dtype.str, native.shape, np.ascontiguousarray(native).tobytes())


def norm(value) -> Any:
    """A hashable normal form: types kept apart (True vs 1 vs 1.0), NaN equal to NaN, tuples as lists."""
    if isinstance(value, np.ndarray):
        return norm_array(value)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else value.hex())
    if isinstance(value, (str, bytes)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return ("list", tuple(norm(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted(((k, norm(v)) for k, v in value.items()), key=repr)))
    raise AssertionError(f"unexpected value {value!r}")


def output_rows(column, n: int) -> list:
    """get_data's numpy output of one field as n normal-form rows."""
    if isinstance(column, np.ndarray):
        assert column.shape[0] == n, (column.shape, n)
        return [norm_array(column[i]) for i in range(n)]
    assert isinstance(column, list) and len(column) == n, (type(column), n)
    return [norm_array(v) if isinstance(v, np.ndarray) else norm(v) for v in column]


# ---- data of a put: canonical fields (one dtype and row rank each), odd variants, bad data -----------

@dataclasses.dataclass
class Field:
    """One drawn field: its column, its rows' normal form, its schema
    signature (kind, dtype, row rank)."""

    column: Any
    rows: list
    signature: tuple


def _dense(array: np.ndarray) -> Field:
    return Field(array, [norm_array(array[i]) for i in range(len(array))],
                 ("tensor", array.dtype.newbyteorder("=").str, array.ndim - 1))


def canonical_field(name: str, n: int) -> st.SearchStrategy:
    if name == "x":  # int64, 0-d rows
        return st.lists(INT64, min_size=n, max_size=n).map(lambda v: _dense(np.array(v, dtype=np.int64)))
    if name == "v":  # float32 (2,) rows, NaN and infinities included, sometimes non-contiguous
        return st.tuples(st.lists(st.floats(width=32), min_size=2 * n, max_size=2 * n), st.booleans()).map(
            lambda t: _dense(np.array(t[0], dtype=np.float32).reshape(n, 2) if t[1] else
                             np.array(t[0] + t[0], dtype=np.float32).reshape(n, 4)[:, ::2]))
    if name == "e":  # big-endian int32 (3,) rows: stored as their values
        return st.lists(st.integers(-2**31, 2**31 - 1), min_size=3 * n, max_size=3 * n).map(
            lambda v: _dense(np.array(v, dtype=">i4").reshape(n, 3)))
    if name == "f":  # bool
        return st.lists(st.booleans(), min_size=n, max_size=n).map(lambda v: _dense(np.array(v, dtype=bool)))
    if name == "h":  # float16 (0,) rows: empty rows
        return st.just(n).map(lambda k: _dense(np.zeros((k, 0), dtype=np.float16)))
    if name == "r":  # int32 rows of 0-3 values: ragged
        return st.lists(st.lists(st.integers(-2**31, 2**31 - 1), max_size=3), min_size=n, max_size=n).map(
            lambda rows: Field([np.array(r, dtype=np.int32) for r in rows],
                               [norm_array(np.array(r, dtype=np.int32)) for r in rows], ("tensor", "<i4", 1)))
    if name == "s":  # non-tensor values: strings with NUL, bytes, None, numbers, nested lists and dicts
        return st.lists(NON_NUMBERS, min_size=n, max_size=n).map(
            lambda v: Field(v, [norm(x) for x in v], ("objects",)))
    raise AssertionError(name)


DATA_FIELDS = ("x", "v", "e", "f", "h", "r", "s")


def odd_x(n: int) -> st.SearchStrategy:
    """Field "x" of another dtype, rank or kind: valid until the partition holds "x" otherwise."""
    return st.sampled_from([
        _dense(np.arange(n, dtype=np.float32)),
        _dense(np.arange(2 * n, dtype=np.int64).reshape(n, 2)),
        Field([f"s{i}" for i in range(n)], [f"s{i}" for i in range(n)], ("objects",)),
    ])


def bad_columns(n: int, allow_pickle: bool) -> list:
    """Data of one field no put may store (the last one: without allow_pickle)."""
    columns = [
        np.arange(n, dtype=np.uint64), np.zeros(n, dtype=np.complex64),
        np.array(["2020-01-01"] * n, dtype="datetime64[D]"), np.zeros(n, dtype=[("a", "<i4"), ("b", "<f4")]),
        np.array(3), np.zeros((0, 2)), [], {"a": 1}, 5, None, [1, 2**64] + [0] * (n - 2),
    ]
    # values only pickle stores
    return columns if allow_pickle else columns + [[Opaque()] * n, [1 + 2j] * n, ["\ud800"] * n]


@dataclasses.dataclass
class Data:
    arg: Arg
    fields: dict  # name -> Field of what a success stores
    n: int


@st.composite
def data_arg(draw_, n: int, schema: dict, *, allow_pickle: bool = False) -> Data:
    """put's data for n samples: canonical fields, "x" of odd kinds, or bad."""
    if True:
        names = draw_(st.lists(st.sampled_from(DATA_FIELDS), min_size=1, max_size=3, unique=True))
        fields = {name: draw_(canonical_field(name, n)) for name in names}
        if draw_(st.integers(0, 4)) == 0:
            fields["x"] = draw_(odd_x(n))
        columns = {name: f.column for name, f in fields.items()}
        problem = draw_(st.integers(0, 11))
        if problem == 0:  # one bad field among good ones
            columns[draw_(st.sampled_from(["bad", "x", "s"]))] = draw_(st.sampled_from(bad_columns(n, allow_pickle)))
            return Data(Arg(columns, False, ("field", "data"), (TypeError, ValueError)), {}, n)
        if problem == 1:  # a field of another number of samples
            columns["bad"] = np.arange(n + draw_(st.sampled_from([1, 2, -1]))) if n > 1 else np.arange(2)
            return Data(Arg(columns, False, ("field",), (ValueError,)), {}, n)
        if problem == 2:  # a bad field name
            bad_name = draw_(st.sampled_from([None, 1, 2.5, b"x", "", "a\0", "\ud800", LONG_NAME, ("x",)]))
            columns[bad_name] = next(iter(columns.values()))
            return Data(Arg(columns, False, ("field name",),
                            (TypeError,) if not isinstance(bad_name, str) else (ValueError,)), {}, n)
        if problem == 3:  # not a dict of fields, or no field
            value = draw_(st.sampled_from([None, 5, "x", [1, 2], {}, np.arange(n), b"x"]))
            return Data(Arg(value, False, ("data",), (TypeError, ValueError)), {}, n)
        if any(schema.get(name, f.signature) != f.signature for name, f in fields.items()):
            return Data(Arg(columns, False, ("field",), (ValueError,)), {}, n)  # the partition holds it otherwise
        return Data(Arg(columns), fields, n)


@functools.lru_cache(maxsize=None)
def bool_arg(parameter: str, *, none_ok: bool = True) -> st.SearchStrategy:
    valid = st.sampled_from([True, False, np.bool_(True)] + ([None] if none_ok else [])).map(good)
    invalid = st.sampled_from(["false", "yes", 1, 0, 1.0, (True,)] + ([] if none_ok else [None])).map(
        lambda v: bad_type(v, parameter))
    return valid_or_bad(valid, invalid)


@functools.lru_cache(maxsize=None)
def choice_arg(parameter: str, valid_values, invalid_values) -> st.SearchStrategy:
    return valid_or_bad(st.sampled_from(valid_values).map(good),
                        st.sampled_from(invalid_values).map(lambda v: bad_value(v, parameter)))


@st.composite
def kv_fields_arg(draw_, n: int, schema: dict, *, batch: bool, allow_pickle: bool):
        """kv fields: "a" int64 rows of 1-3 values, "c" float32 (2, 2) rows, "o" plain values; or bad.
        batch: one row per key (kv_batch_put), else the row of one key (kv_put)."""
        if True:
            names = draw_(st.lists(st.sampled_from(["a", "c", "o"]), min_size=1, max_size=3, unique=True))
            fields, columns = {}, {}
            for name in names:
                if name == "a":
                    rows = [np.array(r, dtype=np.int64) for r in draw_(st.lists(
                        st.lists(INT64, min_size=1, max_size=3), min_size=n, max_size=n))]
                    fields[name] = Field(rows, [norm_array(r) for r in rows], ("tensor", "<i8", 1))
                    columns[name] = rows if batch else rows[0]
                elif name == "c":
                    values = draw_(st.lists(st.floats(width=32), min_size=4 * n, max_size=4 * n))
                    array = np.array(values, dtype=np.float32).reshape(n, 2, 2)
                    fields[name] = Field(array, [norm_array(r) for r in array], ("tensor", "<f4", 2))
                    columns[name] = array if batch else array[0]
                else:  # one value of a key is non-tensor whatever it is; a batch's numbers would be a tensor
                    values = draw_(st.lists(NON_NUMBERS if batch else st.one_of(PLAIN, st.binary(max_size=3)),
                                            min_size=n, max_size=n))
                    fields[name] = Field(values, [norm(v) for v in values], ("objects",))
                    columns[name] = values if batch else values[0]
            problem = draw_(st.integers(0, 11))
            if problem == 0:  # one field of a value no put may store
                values = [np.zeros(2, dtype=np.complex64), np.zeros(2, dtype=np.uint64)]
                if batch:
                    values.append(2**64)  # a column of numbers beyond 64 bits
                if not allow_pickle:  # values only pickle stores
                    values += [Opaque(), 1j, "\ud800"] + ([] if batch else [2**64, np.float32(1)])
                value = draw_(st.sampled_from(values))
                name = "bad"
                if schema.get("a") == ("tensor", "<i8", 1) and draw_(st.booleans()):
                    name, value = "a", np.arange(3.0)  # the partition holds int64 rows
                if batch:
                    value = np.stack([value] * n) if isinstance(value, np.ndarray) else [value] * n
                columns[name] = value
                return Arg(columns, False, ("field",), (ValueError,)), {}
            if problem == 1:
                bad_name = draw_(st.sampled_from([None, 1, "", "a\0", "\udc00"]))
                columns[bad_name] = next(iter(columns.values()))
                return Arg(columns, False, ("field name",),
                           (ValueError,) if isinstance(bad_name, str) else (TypeError,)), {}
            if problem == 2:
                return bad_type(draw_(st.sampled_from([5, "x", [1], (1,), b"ab"])), "fields"), {}
            if problem == 3 and batch:  # rows for another number of keys
                columns = {name: (np.concatenate([c, c]) if isinstance(c, np.ndarray) else c + c)
                           for name, c in columns.items()}
                return Arg(columns, False, ("keys", "samples", "field"), (ValueError,)), {}
            if any(schema.get(name, f.signature) != f.signature for name, f in fields.items()):
                return Arg(columns, False, ("field",), (ValueError,)), {}
            return good(columns), fields


FAILED = object()
TIMED_OUT = object()


def attempt(call, args: dict, *, may_time_out: bool = False):
    """call() with the drawn args ({parameter: Arg}): its result, FAILED or
    TIMED_OUT, after checking that the outcome fits the arguments."""
    invalid = {p: a for p, a in args.items() if a.ok is False}
    suspects = {p: a for p, a in args.items() if a.ok is not True}
    faulthandler.dump_traceback_later(CALL_LIMIT_S, exit=True)
    try:
        result = call()
    except TimeoutError as error:
        assert may_time_out, f"TimeoutError although nothing waits: {error}; args {args}"
        return TIMED_OUT
    except Exception as error:  # noqa: BLE001 - the type is what is checked
        message = str(error)
        assert suspects, f"valid call raised {type(error).__name__}: {message}; args {args}"
        kinds = tuple({kind for a in suspects.values() for kind in a.errors})
        assert isinstance(error, kinds), (
            f"{type(error).__name__}: {message} is none of {[k.__name__ for k in kinds]}; suspects {suspects}")
        assert any(name in message for a in suspects.values() for name in a.names), (
            f"the message {message!r} names none of {suspects}")
        assert not any(leak in message for leak in LEAKED), message
        return FAILED
    finally:
        faulthandler.cancel_dump_traceback_later()
    assert not invalid, f"succeeded although {invalid} are invalid"
    return result




# ---- the model and the machine ------------------------------------------------------------------------

@dataclasses.dataclass
class Sample:
    fields: dict  # name -> normal-form row
    custom: dict  # custom_meta (tags of a key)
    key: Optional[str] = None


class Model:
    def __init__(self):
        self.partitions: list[str] = []  # listed partitions, oldest first
        self.samples: dict[str, dict[int, Sample]] = {}
        self.schema: dict[str, dict[str, tuple]] = {}
        self.consumed: dict[tuple[str, str], set] = {}
        self.cleared: list[tuple[str, int]] = []  # samples that were, for stale metadata

    def create(self, partition: str) -> None:
        if partition not in self.samples:
            self.partitions.append(partition)
            self.samples[partition] = {}
            self.schema[partition] = {}

    def remove_sample(self, partition: str, gi: int) -> None:
        del self.samples[partition][gi]
        for (p, _), done in self.consumed.items():
            if p == partition:
                done.discard(gi)
        self.cleared.append((partition, gi))

    def drop(self, partition: str) -> None:
        if partition in self.samples:
            for gi in list(self.samples[partition]):
                self.remove_sample(partition, gi)
            self.partitions.remove(partition)
            del self.samples[partition], self.schema[partition]

    def keys(self, partition: str) -> dict[str, int]:
        return {s.key: gi for gi, s in self.samples.get(partition, {}).items() if s.key is not None}

    def ready(self, partition: str, fields, task: str) -> list[int]:
        done = self.consumed.get((partition, task), set())
        return [gi for gi, s in self.samples.get(partition, {}).items()
                if gi not in done and all(f in s.fields for f in fields)]


class BadInputMachine(RuleBasedStateMachine):
    """Drives one client (embedded or remote): set before the run."""

    client: seqflow.Client = None
    services: Optional[Cluster] = None

    def __init__(self):
        super().__init__()
        for partition in self.client.get_partition_list():
            self.client.clear_partition(partition)
        self.model = Model()

    # ---- helpers
    def _meta_of(self, partition: str, gis: list[int], fields=None):
        """A BatchMeta of these live samples, as force_fetch gives it."""
        meta = self.client.get_meta(fields or [], 1, partition, mode="force_fetch")
        where = {gi: i for i, gi in enumerate(meta.global_indexes)}
        return meta.select_samples([where[gi] for gi in gis])

    def _live_meta(self, data, *, min_size: int = 1):
        """(partition, gis, meta) of some live samples, or None."""
        choices = [p for p in self.model.partitions if len(self.model.samples[p]) >= min_size]
        if not choices:
            return None
        partition = data.draw(st.sampled_from(choices), label="partition of the metadata")
        gis = data.draw(st.lists(st.sampled_from(sorted(self.model.samples[partition])), min_size=min_size,
                                 max_size=4, unique=True), label="samples")
        return partition, gis

    def _check_rows(self, partition: str, gis: list[int], out: dict, fields) -> None:
        samples = self.model.samples[partition]
        assert isinstance(out, dict), type(out)
        assert sorted(out) == sorted(fields), (sorted(out), fields)
        for name in fields:
            assert output_rows(out[name], len(gis)) == [samples[gi].fields[name] for gi in gis], name

    def _metadata_arg(self, data, *, stale_error: Optional[type]) -> tuple[Arg, Optional[tuple], Optional[str]]:
        """A metadata argument, (partition, gis) when it names live samples
        (() for an empty BatchMeta), and the partition it names. Samples that
        do not exist raise stale_error (None: are no error)."""
        kind = data.draw(st.sampled_from(["live"] * 8 + ["stale", "forged", "wrong type", "empty"]),
                         label="metadata kind")
        if kind == "live":
            found = self._live_meta(data)
            if found is not None:
                partition, gis = found
                return Arg(self._meta_of(partition, gis)), (partition, gis), partition
            kind = "forged"
        if kind in ("stale", "forged"):
            if kind == "stale" and self.model.cleared:
                partition, gi = data.draw(st.sampled_from(self.model.cleared), label="stale sample")
            else:
                gi = data.draw(st.sampled_from([10**12, INT64_MAX, -1, INT64_MIN]), label="forged index")
                partition = data.draw(st.sampled_from(DATA_PARTITIONS + (GHOST,)), label="forged partition")
            meta = seqflow.BatchMeta([gi], [partition])
            # The engine hands a cleared sample's global index to a later sample (as TransferQueue does).
            owner = next((p for p, samples in self.model.samples.items() if gi in samples), None)
            if owner == partition:  # reused in the same partition: the metadata names that live sample
                return Arg(meta), (partition, [gi]), partition
            if owner is not None:  # a live sample of another partition: refused, or done to nothing
                return Arg(meta, None, ("global index", "sample", "partition"), (KeyError, ValueError)), None, \
                    partition
            # A negative index: refused as a bad value (remote) or found nowhere (embedded).
            errors = (stale_error, ValueError) if gi < 0 else (stale_error,)
            if stale_error is None:  # a clear: gone samples are skipped, impossible indexes refused
                possible = 0 <= gi <= MAX_GLOBAL_INDEX
                return Arg(meta, None if gi < 0 else possible, ("global index", "sample", "partition"),
                           (KeyError, ValueError)), None, partition
            return Arg(meta, False, ("global index", "sample", "partition", "global_indexes"), errors), None, partition
        if kind == "empty":
            return Arg(seqflow.BatchMeta()), (), None
        value = data.draw(st.sampled_from([None, "x", 5, {"global_indexes": [0]}, [0], seqflow.KVBatchMeta()]),
                          label="metadata")
        return bad_type(value, "metadata"), None, None

    # ---- put
    @rule(data=st.data())
    def put_new_samples(self, data):
        partition = data.draw(name_arg("partition_id", DATA_PARTITIONS), label="partition_id")
        n = data.draw(st.integers(1, 4), label="n")
        pickle = data.draw(bool_arg("allow_pickle"), label="allow_pickle")
        schema = self.model.schema.get(partition.value, {}) if partition.ok else {}
        drawn = data.draw(data_arg(n, schema, allow_pickle=bool(pickle.ok and pickle.value)), label="data")
        custom = data.draw(entries_arg("custom_meta", n, tag_rules=False), label="custom_meta")
        args = {"data": drawn.arg, "partition_id": partition, "custom_meta": custom, "allow_pickle": pickle}
        meta = attempt(lambda: self.client.put(drawn.arg.value, partition_id=partition.value,
                                               custom_meta=custom.value, allow_pickle=pickle.value), args)
        if meta is FAILED:
            return
        gis = meta.global_indexes
        assert meta.size == n and len(set(gis)) == n and meta.partition_ids == [partition.value] * n
        known = set(gis) & {gi for p in self.model.samples.values() for gi in p}
        assert not known, f"put reused the global indexes {known}"
        self.model.create(partition.value)
        entries = custom.value or [{}] * n
        for i, gi in enumerate(gis):
            self.model.samples[partition.value][gi] = Sample({f: v.rows[i] for f, v in drawn.fields.items()},
                                                             dict(entries[i]))
        for name, f in drawn.fields.items():
            self.model.schema[partition.value].setdefault(name, f.signature)
        # a valid put reads back exactly (custom_meta: checked after every step)
        out = self.client.get_data(meta, fields=list(drawn.fields), format="numpy")
        self._check_rows(partition.value, gis, out, list(drawn.fields))

    @rule(data=st.data())
    def put_more_fields(self, data):
        """put with metadata: more fields (or new values) of existing samples."""
        metadata, target, partition = self._metadata_arg(data, stale_error=KeyError)
        n = len(target[1]) if target else 1
        drawn = data.draw(data_arg(n, self.model.schema.get(partition, {})), label="data")
        custom = data.draw(valid_or_bad(st.just(good(None)), st.sampled_from([5, "ab", b"x"]).map(
            lambda v: bad_type(v, "custom_meta"))), label="custom_meta")
        if metadata.value is None:  # put without metadata: new samples, in partition_id (None here)
            metadata = bad_type(None, "metadata", "partition_id")
        if target == ():  # an empty BatchMeta: one row of data too many
            metadata = Arg(metadata.value, False, ("metadata",), (ValueError,))
        args = {"metadata": metadata, "data": drawn.arg, "custom_meta": custom}
        result = attempt(lambda: self.client.put(drawn.arg.value, metadata=metadata.value,
                                                 custom_meta=custom.value), args)
        if result is FAILED:
            return
        partition, gis = target
        assert result.global_indexes == gis
        for name, f in drawn.fields.items():
            self.model.schema[partition].setdefault(name, f.signature)
            for i, gi in enumerate(gis):
                self.model.samples[partition][gi].fields[name] = f.rows[i]
        out = self.client.get_data(result, fields=list(drawn.fields), format="numpy")
        self._check_rows(partition, gis, out, list(drawn.fields))

    # ---- get_meta
    @rule(data=st.data())
    def get_meta(self, data):
        fields = data.draw(names_arg("data_fields", ("x", "v", "s", "r", "a", "zz")), label="data_fields")
        mode = data.draw(choice_arg("mode", ("fetch", "fetch", "force_fetch", "insert"),
                                    (None, "FETCH", "", 1, "fetch\0")), label="mode")
        partition = data.draw(name_arg("partition_id", DATA_PARTITIONS + KV_PARTITIONS + (GHOST,)),
                              label="partition_id")
        task = data.draw(valid_or_bad(st.sampled_from(TASKS + (None,)).map(good), st.one_of(
            st.sampled_from([5, b"t", ["t0"]]).map(lambda v: bad_type(v, "task_name")),
            st.sampled_from(["", "t\0", "\ud800"]).map(lambda v: bad_value(v, "task_name")))), label="task_name")
        polling = data.draw(bool_arg("polling"), label="polling")
        blocking = polling.ok and not polling.value  # False, or None: the client's polling_mode (False)
        small = st.sampled_from([0, 0.0, 0.001, 0.02, np.float32(0.001), np.int64(0)])
        timeout = data.draw(valid_or_bad(
            small.map(good) if blocking else st.one_of(small.map(good), st.just(good(None))),
            # 1e300: finite, past seqflow's limit of 1e9 s (a deadline past it would overflow the clock)
            st.one_of(st.sampled_from([-1, -0.5, math.nan, math.inf, -math.inf, 1e300]).map(
                lambda v: bad_value(v, "timeout")), st.sampled_from(["1", True, [1]]).map(
                lambda v: bad_type(v, "timeout")))), label="timeout")
        sampling = data.draw(valid_or_bad(
            st.one_of(st.none(), st.dictionaries(st.sampled_from(["temperature", "n", "é"]), PLAIN, max_size=2)).map(
                good),
            st.sampled_from([
                (0, False, TypeError), ("x", False, TypeError), ([("a", 1)], False, TypeError),
                ({1: 2}, False, TypeError), ({"\ud800": 1}, False, ValueError), ({"": 1}, False, ValueError),
                ({"partition": 1}, False, ValueError), ({"sample_info": 1}, False, ValueError),
                ({"dp_rank": -1}, False, ValueError), ({"dp_rank": 2**63}, False, ValueError),
                ({"dp_rank": "0"}, False, TypeError), ({"batch_index": math.nan}, False, TypeError),
                ({"batch_index": True}, False, TypeError), ({"o": Opaque()}, False, ValueError),
                ({"o": 2**70}, False, ValueError), ({"o": "\udc00"}, False, ValueError),
                ({"o": b"x"}, None, ValueError), ({"o": _deep(40)}, None, ValueError),
            ]).map(lambda t: Arg(t[0], t[1], ("sampling_config",), (t[2],)))), label="sampling_config")
        insert = mode.ok and mode.value == "insert"
        valid_sizes = st.integers(1, 8) if insert else st.one_of(st.integers(1, 8), st.sampled_from(
            [2**31, 2**62, INT64_MAX, np.int64(3), np.int32(2)]))
        size_bad_values = [0, -1, INT64_MIN] + ([2**31 + 1, INT64_MAX] if insert else [])
        force = mode.ok and mode.value == "force_fetch"
        batch_size = data.draw(valid_or_bad(valid_sizes.map(good), st.one_of(
            st.sampled_from(size_bad_values + [2**63, -2**63 - 1, 2**64]).map(
                lambda v: Arg(v, None if force and INT64_MIN <= v <= INT64_MAX else False, ("batch_size",),
                              (ValueError,))),
            st.sampled_from([None, 1.0, math.nan, "2", True, [1], np.float64(2)]).map(
                lambda v: bad_type(v, "batch_size")))), label="batch_size")
        args = {"data_fields": fields, "batch_size": batch_size, "partition_id": partition, "mode": mode,
                "task_name": task, "sampling_config": sampling, "timeout": timeout, "polling": polling}
        fetch = mode.ok and mode.value == "fetch"
        if fetch and task.value is None:  # a fetch needs a task
            args["task_name"] = Arg(None, False, ("task_name",), (ValueError,))
        ready = []
        if all(a.ok for a in args.values()) and fetch:
            ready = self.model.ready(partition.value, fields.value if isinstance(fields.value, list)
                                     else [fields.value], task.value)
        may_wait = fetch and blocking and len(ready) < (batch_size.value if batch_size.ok else 0)
        meta = attempt(lambda: self.client.get_meta(
            fields.value, batch_size.value, partition.value, mode=mode.value, task_name=task.value,
            sampling_config=sampling.value, timeout=timeout.value, polling=polling.value), args,
            may_time_out=may_wait)
        if meta in (FAILED, TIMED_OUT):
            if meta is TIMED_OUT:
                assert may_wait, f"timed out with {len(ready)} ready samples"
            return
        gis = meta.global_indexes
        assert len(set(gis)) == len(gis), f"a sample twice in one batch: {gis}"
        if mode.value == "insert":
            assert meta.size == batch_size.value
            self.model.create(partition.value)
            for gi in gis:
                assert all(gi not in p for p in self.model.samples.values())
                self.model.samples[partition.value][gi] = Sample({}, {})
        elif mode.value == "force_fetch":
            assert sorted(gis) == sorted(self.model.samples.get(partition.value, {}))
        else:
            assert set(gis) <= set(ready), f"fetched {sorted(set(gis) - set(ready))}, not ready or consumed already"
            wanted = int(batch_size.value)
            assert meta.size == (wanted if len(ready) >= wanted else 0), (meta.size, wanted, len(ready))
            self.model.consumed.setdefault((partition.value, task.value), set()).update(gis)

    # ---- get_data
    @rule(data=st.data())
    def get_data(self, data):
        metadata, target, _ = self._metadata_arg(data, stale_error=KeyError)
        if target:
            partition, gis = target
            held = [set(self.model.samples[partition][gi].fields) for gi in gis]
            common, some = sorted(set.intersection(*held)), sorted(set.union(*held) - set.intersection(*held))
        else:
            common, some = ["x"], []
        valid_fields = st.one_of(st.none(), st.lists(st.sampled_from(common), unique=True) if common else
                                 st.just([])).map(good)
        lacking = st.sampled_from(some + ["zz"]).map(lambda f: Arg([f], False, ("field", f), (KeyError,)))
        fields = data.draw(valid_or_bad(valid_fields, st.one_of(lacking, st.sampled_from(
            [(5, TypeError), ([None], TypeError), (["\0"], ValueError), ([""], ValueError), (b"x", TypeError)]).map(
            lambda t: Arg(t[0], False, ("fields",), (t[1],))))), label="fields")
        requested = fields.value
        if fields.ok and fields.value is None and isinstance(metadata.value, seqflow.BatchMeta):
            requested = metadata.value.field_names
        if fields.ok is False and KeyError in fields.errors and not target:
            fields = Arg(fields.value, None, fields.names, (KeyError,))  # of samples that may not exist either
        if not (fields.ok and requested) and metadata.ok is False and KeyError in metadata.errors:
            metadata = Arg(metadata.value, None, metadata.names, metadata.errors)  # no field read: maybe no error
        fmt = data.draw(choice_arg("format", ("numpy",), ("xml", None, 5, "NUMPY")), label="format")
        layout = data.draw(choice_arg("layout", ("dense",), ("transfer_queue", None, 0, "sparse")), label="layout")
        copy = data.draw(bool_arg("copy", none_ok=False), label="copy")
        pickle = data.draw(bool_arg("allow_pickle"), label="allow_pickle")
        args = {"metadata": metadata, "fields": fields, "format": fmt, "layout": layout, "copy": copy,
                "allow_pickle": pickle}
        out = attempt(lambda: self.client.get_data(metadata.value, fields=fields.value, format=fmt.value,
                                                   layout=layout.value, copy=copy.value,
                                                   allow_pickle=pickle.value), args)
        if out is FAILED or not target:
            return
        partition, gis = target
        self._check_rows(partition, gis, out, list(requested))

    # ---- custom_meta, clears, consumption
    @rule(data=st.data())
    def set_custom_meta(self, data):
        metadata, target, _ = self._metadata_arg(data, stale_error=KeyError)
        n = len(target[1]) if target else 1
        entries = data.draw(entries_arg("custom_meta", n, tag_rules=False), label="custom_meta")
        meta = metadata.value
        if not (isinstance(meta, seqflow.BatchMeta) and meta.size):
            entries = good(None)

        def call():
            if entries.value is not None:
                meta.update_custom_meta(entries.value)
            return self.client.set_custom_meta(meta)
        if attempt(call, {"metadata": metadata, "custom_meta": entries}) is FAILED or not target:
            return
        partition, gis = target
        for gi, entry in zip(gis, entries.value or [{}] * n):
            self.model.samples[partition][gi].custom.update(entry)

    @rule(data=st.data())
    def clear_samples(self, data):
        metadata, target, _ = self._metadata_arg(data, stale_error=None)
        if target and data.draw(st.booleans(), label="under another partition's name"):
            partition, gis = target
            other = data.draw(st.sampled_from([p for p in DATA_PARTITIONS + KV_PARTITIONS + (GHOST,) if p != partition]))
            # not the other partition's samples: skipped, or refused, never cleared
            metadata = Arg(seqflow.BatchMeta(gis, [other] * len(gis)), None, ("global index", "sample", "partition"),
                           (KeyError, ValueError))
            target = None
        if attempt(lambda: self.client.clear_samples(metadata.value), {"metadata": metadata}) is FAILED or not target:
            return
        partition, gis = target
        for gi in gis:
            self.model.remove_sample(partition, gi)

    @rule(data=st.data())
    def clear_partition(self, data):
        partition = data.draw(name_arg("partition_id", DATA_PARTITIONS + KV_PARTITIONS + (GHOST,)))
        if attempt(lambda: self.client.clear_partition(partition.value), {"partition_id": partition}) is not FAILED:
            self.model.drop(partition.value)
            for key in [k for k in self.model.consumed if k[0] == partition.value]:
                del self.model.consumed[key]

    @rule(data=st.data())
    def reset_consumption(self, data):
        partition = data.draw(name_arg("partition_id", DATA_PARTITIONS + (GHOST,)), label="partition_id")
        task = data.draw(valid_or_bad(st.sampled_from(TASKS + (None,)).map(good), st.one_of(
            st.sampled_from([5, b"t"]).map(lambda v: bad_type(v, "task_name")),
            st.sampled_from(["", "\0"]).map(lambda v: bad_value(v, "task_name")))), label="task_name")
        result = attempt(lambda: self.client.reset_consumption(partition.value, task.value),
                         {"partition_id": partition, "task_name": task})
        if result is FAILED:
            return
        assert result is True
        for (p, t), done in self.model.consumed.items():
            if p == partition.value and task.value in (None, t):
                done.clear()

    # ---- status
    @rule(data=st.data())
    def status_calls(self, data):
        partition = data.draw(name_arg("partition_id", DATA_PARTITIONS + KV_PARTITIONS + (GHOST,)),
                              label="partition_id")
        task = data.draw(name_arg("task_name", TASKS, free_text=False), label="task_name")
        fields = data.draw(names_arg("data_fields", ("x", "s", "a", "zz")), label="data_fields")
        per_field = data.draw(bool_arg("per_field", none_ok=False), label="per_field")
        samples = self.model.samples.get(partition.value) if partition.ok else None
        exists = samples is not None
        gis = sorted(samples) if exists else []
        done = self.model.consumed.get((partition.value, task.value), set()) if task.ok and partition.ok else set()

        got = attempt(lambda: self.client.get_consumption_status(task.value, partition.value),
                      {"task_name": task, "partition_id": partition})
        if got is not FAILED:
            indexes, flags = got
            if not exists:
                assert (indexes, flags) == (None, None)
            else:
                assert indexes.tolist() == gis and flags.tolist() == [gi in done for gi in gis]
        got = attempt(lambda: self.client.check_consumption_status(task.value, partition.value),
                      {"task_name": task, "partition_id": partition})
        if got is not FAILED:
            assert got is (bool(gis) and all(gi in done for gi in gis))

        names = [fields.value] if isinstance(fields.value, str) else fields.value
        got = attempt(lambda: self.client.get_production_status(fields.value, partition.value, per_field=per_field.value),
                      {"data_fields": fields, "partition_id": partition, "per_field": per_field})
        if got is not FAILED:
            indexes, produced = got
            if not exists:
                assert (indexes, produced) == (None, None)
            else:
                expect = [[f in samples[gi].fields for f in names] for gi in gis]
                assert indexes.tolist() == gis
                assert produced.tolist() == (expect if per_field.value else [all(row) for row in expect])
        got = attempt(lambda: self.client.check_production_status(fields.value, partition.value),
                      {"data_fields": fields, "partition_id": partition})
        if got is not FAILED:
            assert got is (bool(gis) and all(f in samples[gi].fields for gi in gis for f in names))

    # ---- key-value API
    def _kv_store(self, partition: str, keys: list, fields: dict, tags) -> None:
        self.model.create(partition)
        known = self.model.keys(partition)
        new = [k for k in keys if k not in known]
        if new:
            meta = self.client.kv_meta(new, partition)
            for key, gi in zip(new, meta.global_indexes):
                assert all(gi not in p for p in self.model.samples.values()), gi
                self.model.samples[partition][gi] = Sample({}, {}, key)
        where = self.model.keys(partition)
        for i, key in enumerate(keys):
            sample = self.model.samples[partition][where[key]]
            for name, f in fields.items():
                sample.fields[name] = f.rows[i]
            if tags is not None and tags[i] is not None:
                sample.custom.update(tags[i])
        for name, f in fields.items():
            self.model.schema[partition].setdefault(name, f.signature)

    @rule(data=st.data())
    def kv_put(self, data):
        key = data.draw(name_arg("key", KEYS), label="key")
        partition = data.draw(name_arg("partition_id", KV_PARTITIONS, free_text=False), label="partition_id")
        pickle = data.draw(bool_arg("allow_pickle"), label="allow_pickle")
        schema = self.model.schema.get(partition.value, {}) if partition.ok else {}
        fields, stored = data.draw(st.one_of(st.just((good(None), {})), kv_fields_arg(
            1, schema, batch=False, allow_pickle=bool(pickle.ok and pickle.value))), label="fields")
        tag = data.draw(valid_or_bad(st.one_of(st.none(), ENTRY).map(good), st.one_of(
            st.sampled_from(BAD_ENTRIES).map(lambda e: Arg(e, False, ("tag",), (TypeError, ValueError))),
            st.sampled_from([5, "x", [{}], b"x", 2.5]).map(lambda v: bad_type(v, "tag")),
            st.sampled_from(["", "a\0"]).map(lambda k: bad_value({k: 1}, "tag")),
            st.just(Arg({"u": 2**63 + 5}, None, ("tag",), (ValueError,))))), label="tag")
        args = {"key": key, "partition_id": partition, "fields": fields, "tag": tag, "allow_pickle": pickle}
        if fields.value is None and tag.value is None:
            args["fields"] = Arg(None, False, ("fields or a tag",), (ValueError,))
        result = attempt(lambda: self.client.kv_put(key.value, partition.value, fields.value, tag.value,
                                                    allow_pickle=pickle.value), args)
        if result is FAILED:
            return
        assert result.keys == [key.value] and result.partition_id == partition.value
        self._kv_store(partition.value, [key.value], stored, [tag.value])

    @rule(data=st.data())
    def kv_batch_put(self, data):
        keys = data.draw(valid_or_bad(st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True).map(good),
                                      st.one_of(
            st.sampled_from(KEYS).map(lambda k: bad_value([k, k], "key")),
            st.sampled_from([None, 5, b"k"]).map(lambda v: bad_type(v, "keys")),
            st.sampled_from([[None], ["k0", 7]]).map(lambda v: Arg(v, False, ("keys[",), (TypeError,))),
            st.sampled_from([["\ud800"], ["k0", ""], ["a\0"]]).map(lambda v: Arg(v, False, ("keys[",), (ValueError,))),
        )), label="keys")
        n = len(keys.value) if isinstance(keys.value, list) else 1
        partition = data.draw(name_arg("partition_id", KV_PARTITIONS, free_text=False), label="partition_id")
        pickle = data.draw(bool_arg("allow_pickle"), label="allow_pickle")
        schema = self.model.schema.get(partition.value, {}) if partition.ok else {}
        fields, stored = data.draw(st.one_of(st.just((good(None), {})), kv_fields_arg(
            n, schema, batch=True, allow_pickle=bool(pickle.ok and pickle.value))), label="fields")
        tags = data.draw(entries_arg("tags", n, tag_rules=True), label="tags")
        args = {"keys": keys, "partition_id": partition, "fields": fields, "tags": tags, "allow_pickle": pickle}
        if fields.value is None and tags.value is None:
            args["fields"] = Arg(None, False, ("fields or tags",), (ValueError,))
        result = attempt(lambda: self.client.kv_batch_put(keys.value, partition.value, fields.value, tags.value,
                                                          allow_pickle=pickle.value), args)
        if result is FAILED:
            return
        assert result.keys == keys.value
        self._kv_store(partition.value, keys.value, stored, tags.value)

    @precondition(lambda self: any(self.model.keys(p) for p in self.model.partitions))
    @rule(data=st.data())
    def kv_batch_get(self, data):
        with_keys = tuple(p for p in self.model.partitions if self.model.keys(p))
        partition = data.draw(name_arg("partition_id", with_keys * 3 + KV_PARTITIONS + (GHOST,), free_text=False),
                              label="partition_id")
        known = self.model.keys(partition.value) if partition.ok else {}
        present = tuple(sorted(known))
        if present:
            keys = data.draw(valid_or_bad(
                st.one_of(st.lists(st.sampled_from(present), min_size=1, max_size=3, unique=True),
                          st.sampled_from(present)).map(good),
                st.one_of(names_arg("keys", present + ("missing",), min_size=1), names_arg("keys", ("missing",)))),
                label="keys")
        else:
            keys = data.draw(names_arg("keys", ("missing",), min_size=1), label="keys")
        names = [keys.value] if isinstance(keys.value, str) else keys.value
        all_known = bool(keys.ok and partition.ok and partition.value in self.model.samples
                         and all(k in known for k in names))
        if keys.ok and partition.ok and not all_known:
            keys = Arg(keys.value, False, ("key", "partition_id"), (KeyError,))
        select = data.draw(valid_or_bad(st.one_of(st.none(), st.lists(st.sampled_from(["a", "c", "o"]), min_size=1,
                                                                      max_size=2, unique=True)).map(good),
                                        st.sampled_from([5, [None], [""], "\0"]).map(
                                            lambda v: Arg(v, False, ("select_fields",), (TypeError, ValueError)))),
                           label="select_fields")
        gis = [known[k] for k in names] if all_known else []
        samples = self.model.samples.get(partition.value, {}) if partition.ok else {}
        held = set.intersection(*(set(samples[gi].fields) for gi in gis)) if gis else set()
        if gis and select.ok and select.value is not None and not set(select.value) <= held:
            select = Arg(select.value, False, ("field",), (ValueError,))
        fmt = data.draw(choice_arg("format", ("numpy",), ("xml", None)), label="format")
        args = {"keys": keys, "partition_id": partition, "select_fields": select, "format": fmt}
        out = attempt(lambda: self.client.kv_batch_get(keys.value, partition.value, select_fields=select.value,
                                                       format=fmt.value), args)
        if out is FAILED:
            return
        if not gis:  # no key: no rows, of whichever fields
            assert all(len(column) == 0 for column in out.values()), out
            return
        fields = sorted(held) if select.value is None else select.value
        assert sorted(out) == sorted(fields), (sorted(out), fields)
        for name in fields:
            assert output_rows(out[name], len(gis)) == [samples[gi].fields[name] for gi in gis], name

    @rule(data=st.data())
    def kv_clear(self, data):
        partition = data.draw(name_arg("partition_id", KV_PARTITIONS + (GHOST,), free_text=False),
                              label="partition_id")
        keys = data.draw(names_arg("keys", KEYS + ("missing",)), label="keys")
        result = attempt(lambda: self.client.kv_clear(keys.value, partition.value),
                         {"keys": keys, "partition_id": partition})
        if result is FAILED:
            return
        known = self.model.keys(partition.value)
        for key in [keys.value] if isinstance(keys.value, str) else keys.value:
            if key in known:
                self.model.remove_sample(partition.value, known.pop(key))

    @rule(data=st.data())
    def kv_list(self, data):
        partition = data.draw(st.one_of(st.just(good(None)), name_arg(
            "partition_id", KV_PARTITIONS + DATA_PARTITIONS + (GHOST,))).map(
            lambda a: good(None) if a.value is None else a), label="partition_id")  # None: every partition
        got = attempt(lambda: self.client.kv_list(partition.value), {"partition_id": partition})
        if got is FAILED:
            return
        listed = self.model.partitions if partition.value is None else [
            p for p in self.model.partitions if p == partition.value]
        self._check_kv_list(got, listed)

    def _check_kv_list(self, got: dict, partitions) -> None:
        expected = {p: {s.key: norm(s.custom) for s in self.model.samples[p].values() if s.key is not None}
                    for p in partitions}
        assert {p: {k: norm(tag) for k, tag in tags.items()} for p, tags in got.items()} == expected

    # ---- invariants
    @invariant()
    def state_is_the_models(self):
        client, model = self.client, self.model
        assert client.get_partition_list() == model.partitions
        for partition in model.partitions:
            meta = client.get_meta([], 1, partition, mode="force_fetch")
            samples = model.samples[partition]
            assert sorted(meta.global_indexes) == sorted(samples), f"lost or extra samples in {partition!r}"
            assert len(set(meta.global_indexes)) == meta.size
            for gi, custom in zip(meta.global_indexes, meta.custom_meta):
                assert norm(custom) == norm(samples[gi].custom), (partition, gi, custom, samples[gi].custom)
            for task in TASKS:
                indexes, flags = client.get_consumption_status(task, partition)
                done = model.consumed.get((partition, task), set())
                assert dict(zip(indexes.tolist(), flags.tolist())) == {gi: gi in done for gi in samples}
        self._check_kv_list(client.kv_list(), model.partitions)
        if self.services is not None:
            for service in [self.services.controller, *self.services.units]:
                assert service.process.poll() is None, f"{service.line!r} died"

    def teardown(self):
        """Every task gets every sample it has not consumed, once; the client still works."""
        try:
            for partition in self.model.partitions:
                for task in TASKS:
                    left = sorted(self.model.ready(partition, [], task))
                    if left:
                        meta = self.client.get_meta([], len(left), partition, task_name=task, polling=True)
                        assert sorted(meta.global_indexes) == left, (partition, task)
                    rest = self.client.get_meta([], 1, partition, task_name=task, polling=True)
                    assert rest.size == 0, f"{partition!r} gave task {task!r} a sample twice: {rest.global_indexes}"
                    assert self.client.check_consumption_status(task, partition) is bool(self.model.samples[partition])
            meta = self.client.put({"x": np.arange(3)}, partition_id="after")
            assert self.client.get_data(meta, format="numpy")["x"].tolist() == [0, 1, 2]
        finally:
            for partition in self.client.get_partition_list():
                self.client.clear_partition(partition)


@pytest.fixture(scope="module")
def services():
    cluster = Cluster(2, processes=True)
    yield cluster
    cluster.stop()


@pytest.mark.parametrize("mode", ["embedded", "remote"])
def test_every_call_succeeds_or_raises_the_documented_error_and_keeps_the_state(mode, request):
    if mode == "embedded":
        client, cluster = seqflow.Client(timeout=5.0), None
    else:
        cluster = request.getfixturevalue("services")
        client = cluster.client(timeout=20.0)
    machine = type(f"BadInput{mode.title()}", (BadInputMachine,), {"client": client, "services": cluster})
    try:
        run_state_machine_as_test(machine, settings=PROFILE)
    finally:
        client.close()
        # Hypothesis keeps the machine class: a client it held would be reported as leaked at exit.
        machine.client = None
