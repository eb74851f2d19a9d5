"""seqflow.balance.karmarkar_karp and get_seqlen_balanced_partitions against
verl's / TransferQueue's functions of the same names: the same parts in the
same order for every input those accept, ValueError where they would fail an
assertion."""

from __future__ import annotations

import numpy as np
import pytest

from seqflow import balance

FUNCTIONS = ("karmarkar_karp", "get_seqlen_balanced_partitions")


def random_lengths(rng, n: int, shape: str) -> list[int]:
    if shape == "random":
        values = rng.integers(0, 8193, n)
    elif shape == "ties":  # many equal lengths
        values = rng.integers(0, 4, n)
    elif shape == "all_equal":
        values = np.full(n, rng.integers(0, 100))
    elif shape == "zeros":
        values = np.zeros(n, dtype=np.int64)
    elif shape == "negative":
        values = rng.integers(-1000, 1001, n)
    elif shape == "negative_ties":
        values = rng.integers(-3, 4, n)
    elif shape == "wide":
        values = rng.integers(0, 2**40, n)
    else:
        raise AssertionError(shape)
    return [int(v) for v in values]


SHAPES = ("random", "ties", "all_equal", "zeros", "negative", "negative_ties", "wide")


def partition_counts(rng, n: int) -> list[int]:
    """k = 1, k = n, a divisor of n (for equal_size), a random k <= n, and k > n."""
    divisors = [d for d in range(1, n + 1) if n % d == 0]
    return sorted({1, n, int(rng.choice(divisors)), int(rng.integers(1, n + 1)), n + int(rng.integers(1, 4))})


def run_reference(fn, lengths, k, equal_size):
    """("ok", parts) or ("assert", message) for a failed assertion."""
    try:
        return "ok", fn(list(lengths), k, equal_size)
    except AssertionError as error:
        return "assert", str(error)


def assert_same_as_reference(reference, name, lengths, k, equal_size, arg=None) -> str:
    """Compares one call; returns the reference's outcome kind."""
    kind, expected = run_reference(reference[name], lengths, k, equal_size)
    ours = getattr(balance, name)
    given = lengths if arg is None else arg
    if kind == "assert":
        with pytest.raises(ValueError):
            ours(given, k, equal_size)
        return kind
    got = ours(given, k, equal_size)
    assert type(got) is list and all(type(part) is list for part in got)
    assert all(type(i) is int for part in got for i in part)
    assert got == expected, f"{name}({lengths}, {k}, {equal_size})"
    return kind


def test_matches_reference_on_thousands_of_random_inputs(reference, rng):
    outcomes = {(name, kind): 0 for name in FUNCTIONS for kind in ("ok", "assert")}
    fewer_items_than_parts = 0
    for round_ in range(1500):
        shape = SHAPES[round_ % len(SHAPES)]
        n = int(rng.integers(1, 41))
        lengths = random_lengths(rng, n, shape)
        for k in partition_counts(rng, n):
            for equal_size in (False, True):
                for name in FUNCTIONS:
                    kind = assert_same_as_reference(reference, name, lengths, k, equal_size)
                    outcomes[name, kind] += 1
                    if kind == "ok" and n < k:
                        fewer_items_than_parts += 1
    # Every path was taken, and exact matches are in the thousands.
    assert outcomes["karmarkar_karp", "ok"] > 6000, outcomes
    assert outcomes["get_seqlen_balanced_partitions", "ok"] > 6000, outcomes
    assert outcomes["karmarkar_karp", "assert"] > 100, outcomes
    assert outcomes["get_seqlen_balanced_partitions", "assert"] > 100, outcomes
    assert fewer_items_than_parts > 100


def test_matches_reference_on_larger_inputs(reference, rng):
    for round_ in range(60):
        shape = SHAPES[round_ % len(SHAPES)]
        n = int(rng.integers(100, 400))
        lengths = random_lengths(rng, n, shape)
        k = int(rng.choice([2, 4, 8, 16, 32]))
        n -= n % k
        lengths = lengths[:n]
        for equal_size in (False, True):
            for name in FUNCTIONS:
                assert_same_as_reference(reference, name, lengths, k, equal_size)


@pytest.mark.parametrize("lengths", [[0], [5], [0, 0, 0, 0], [7] * 12, [3, 3, 3, 1, 1, 1], [-4, -4, 2, 2]])
@pytest.mark.parametrize("k", [1, 2, 3, 4, 6, 12, 13])
def test_matches_reference_on_edge_cases(reference, lengths, k):
    for equal_size in (False, True):
        for name in FUNCTIONS:
            assert_same_as_reference(reference, name, lengths, k, equal_size)


def test_accepts_the_same_lengths_in_every_container(reference, rng):
    lengths = random_lengths(rng, 24, "random")
    containers = [
        tuple(lengths),
        np.array(lengths, dtype=np.int64),
        np.array(lengths, dtype=np.int32),
        np.array(lengths, dtype=np.uint32),
        np.array(lengths, dtype=np.float64),
    ]
    for container in containers:
        for equal_size in (False, True):
            for name in FUNCTIONS:
                assert_same_as_reference(reference, name, lengths, 4, equal_size, arg=container)


def test_fewer_items_than_parts(reference):
    lengths = [9, 2, 4]
    # karmarkar_karp accepts it and leaves parts empty, exactly like verl.
    assert assert_same_as_reference(reference, "karmarkar_karp", lengths, 5, False) == "ok"
    assert sum(len(part) == 0 for part in balance.karmarkar_karp(lengths, 5, False)) == 2
    # get_seqlen_balanced_partitions would fail verl's assertion: a ValueError instead.
    kind, message = run_reference(reference["get_seqlen_balanced_partitions"], lengths, 5, False)
    assert kind == "assert"
    with pytest.raises(ValueError, match=r"k_partitions") as error:
        balance.get_seqlen_balanced_partitions(lengths, 5, False)
    assert "3" in str(error.value) and "5" in str(error.value)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_equal_size_needs_a_multiple_of_k(reference, name):
    lengths = [5, 1, 4, 2, 3]
    assert run_reference(reference[name], lengths, 2, True)[0] == "assert"
    with pytest.raises(ValueError) as error:
        getattr(balance, name)(lengths, 2, True)
    message = str(error.value)
    assert "equal_size" in message and "5" in message and "2" in message


@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize(
    "args, fragments",
    [
        (([1, 2, 3], 0, False), ("k_partitions", "0")),
        (([1, 2, 3], -1, False), ("k_partitions", "-1")),
        (([1, 2, 3], 1.5, False), ("k_partitions", "1.5")),
        (([1, 2, 3], "2", False), ("k_partitions", "'2'")),
        (([1, 2.5, 3], 1, False), ("seqlen_list", "2.5")),
        (([1, float("nan")], 1, False), ("seqlen_list", "nan")),
        (([[1, 2], [3, 4]], 1, False), ("seqlen_list", "(2, 2)")),
        (([2**62, 2**62], 1, False), ("seqlen_list", "overflow")),
        (([2**63, 1], 1, False), ("seqlen_list",)),
    ],
)
def test_bad_input_is_a_value_error_naming_the_parameter(name, args, fragments):
    with pytest.raises(ValueError) as error:
        getattr(balance, name)(*args)
    for fragment in fragments:
        assert fragment in str(error.value)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_empty_input_is_a_value_error(name):
    with pytest.raises(ValueError, match="seqlen_list|k_partitions"):
        getattr(balance, name)([], 1, False)


def test_deterministic(rng):
    lengths = random_lengths(rng, 320, "ties")
    for name in FUNCTIONS:
        fn = getattr(balance, name)
        assert fn(lengths, 8, True) == fn(lengths, 8, True)
