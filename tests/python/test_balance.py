"""seqflow.balance.partition: every figure of the result recomputed from the
input, cardinality, groups, workload models, algorithms, accepted inputs and
the errors on bad ones."""

from __future__ import annotations

import math

import numpy as np
import pytest

from seqflow import balance
from seqflow._arrays import as_int64_array
from seqflow.balance import Workload
from required import require

VERL_LINEAR = 24576  # verl's 6 * hidden for a 4096-hidden model
# workload spec -> (a, b) with cost = a * L + b * L * L
WORKLOADS = {"tokens": (1, 0), "verl": (VERL_LINEAR, 1), "quadratic(3,2)": (3, 2)}
CARDINALITIES = ("free", "equal", "balanced")
ALGORITHMS = ("auto", "kk", "lpt")


def lognormal_lengths(rng, n: int) -> np.ndarray:
    return (1 + rng.lognormal(6.5, 1.0, n)).astype(np.int64)


def check_partition(weights, k, result, *, cardinality="free", coefficients=(1, 0), groups=None):
    """Asserts every promise of `result` by recomputing it from the input with
    Python integers: coverage, sorted parts, assignment, sums, cardinality,
    whole groups, lower bound and the quality figures."""
    lengths = [int(w) for w in weights]
    a, b = coefficients
    costs = [a * length + b * length * length for length in lengths]
    n = len(lengths)
    assert isinstance(result, balance.Partition)
    assert result.k == k == len(result.parts) == len(result.sums)
    assert len(result.assignment) == n
    assert sorted(int(i) for part in result.parts for i in part) == list(range(n))

    unit_of = list(range(n)) if groups is None else [int(g) for g in groups]
    unit_costs: dict[int, int] = {}
    part_of_unit: dict[int, int] = {}
    unit_counts = [0] * k
    for p, part in enumerate(result.parts):
        items = [int(i) for i in part]
        assert items == sorted(items), f"part {p} is not ascending"
        assert all(int(result.assignment[i]) == p for i in items)
        assert int(result.sums[p]) == sum(costs[i] for i in items)
        for i in items:
            unit = unit_of[i]
            unit_costs[unit] = unit_costs.get(unit, 0) + costs[i]
            if unit not in part_of_unit:
                part_of_unit[unit] = p
                unit_counts[p] += 1
            assert part_of_unit[unit] == p, f"group {unit} is split"
    if cardinality == "equal":
        assert len(set(unit_counts)) == 1, unit_counts
    elif cardinality == "balanced":
        assert max(unit_counts) - min(unit_counts) <= 1, unit_counts

    sums = [int(s) for s in result.sums]
    total = sum(costs)
    heaviest, lightest = max(sums), min(sums)
    assert result.lower_bound == max(-(-total // k), max(unit_costs.values()))
    assert result.heaviest == heaviest
    assert result.lower_bound <= heaviest
    assert result.gap >= 0
    if total > 0:
        mean = total / k
        assert result.spread == pytest.approx((heaviest - lightest) / mean, rel=1e-12, abs=1e-15)
        assert result.max_over_mean == pytest.approx(heaviest / mean, rel=1e-12)
        assert result.gap == pytest.approx(heaviest / result.lower_bound - 1, rel=1e-12, abs=1e-15)
    else:
        assert result.spread == 0 and result.gap == 0 and math.isfinite(result.max_over_mean)


def assert_same(first: balance.Partition, second: balance.Partition):
    assert len(first.parts) == len(second.parts)
    for x, y in zip(first.parts, second.parts):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(first.sums, second.sums)
    np.testing.assert_array_equal(first.assignment, second.assignment)
    assert (first.lower_bound, first.spread, first.max_over_mean, first.gap) == (
        second.lower_bound, second.spread, second.max_over_mean, second.gap)


# ---- the result ------------------------------------------------------------------


@pytest.mark.parametrize("workload", WORKLOADS)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("cardinality", CARDINALITIES)
def test_every_figure_matches_a_recomputation(rng, cardinality, algorithm, workload):
    weights = lognormal_lengths(rng, 60)
    for k in (1, 3, 4, 7, 60):
        if cardinality == "equal" and 60 % k:
            continue
        result = balance.partition(weights, k, cardinality=cardinality, algorithm=algorithm, workload=workload)
        check_partition(weights, k, result, cardinality=cardinality, coefficients=WORKLOADS[workload])
        assert_same(result, balance.partition(
            weights, k, cardinality=cardinality, algorithm=algorithm, workload=workload))


def test_result_types():
    result = balance.partition([5, 3, 8, 1], 2)
    assert isinstance(result.parts, list) and all(isinstance(p, np.ndarray) for p in result.parts)
    assert result.sums.dtype == np.int64 and result.assignment.dtype == np.int64
    assert isinstance(result.lower_bound, int)
    assert all(isinstance(x, float) for x in (result.spread, result.max_over_mean, result.gap))


def test_auto_beats_kk_on_the_textbook_example():
    # Largest differencing gives 16 | 14 on this input; the optimum is {8,7} | {6,5,4}.
    weights = [8, 7, 6, 5, 4]
    kk = balance.partition(weights, 2, algorithm="kk")
    check_partition(weights, 2, kk)
    assert kk.heaviest == 16
    best = balance.partition(weights, 2)
    check_partition(weights, 2, best)
    assert sorted(int(s) for s in best.sums) == [15, 15]
    assert best.lower_bound == 15
    assert (best.gap, best.spread, best.max_over_mean) == (0.0, 0.0, 1.0)


def test_quality_figures_by_hand():
    # Equal cardinality forces {10,1} | {1,1}: sums 11 and 2, mean 6.5, bound 10.
    result = balance.partition([10, 1, 1, 1], 2, cardinality="equal")
    assert sorted(int(s) for s in result.sums) == [2, 11]
    assert result.lower_bound == 10
    assert result.spread == pytest.approx(9 / 6.5)
    assert result.max_over_mean == pytest.approx(11 / 6.5)
    assert result.gap == pytest.approx(0.1)
    # ceil(total / k) as the bound: 7 / 2 -> 4.
    assert balance.partition([2, 2, 3], 2).lower_bound == 4


def test_all_zero_weights():
    for cardinality in CARDINALITIES:
        result = balance.partition([0] * 6, 3, cardinality=cardinality)
        check_partition([0] * 6, 3, result, cardinality=cardinality)


# ---- workload models -----------------------------------------------------------


@pytest.mark.parametrize("length", [0, 1, 2, 1000, 32768, 2**20])
def test_workload_cost_formulas(length):
    assert Workload.tokens().cost(length) == length
    assert Workload.verl().cost(length) == VERL_LINEAR * length + length * length
    assert Workload.quadratic(3, 2).cost(length) == 3 * length + 2 * length * length
    assert Workload.parse("quadratic(7,5)").cost(length) == 7 * length + 5 * length * length
    assert Workload.parse("quadratic:7,5").cost(length) == 7 * length + 5 * length * length


def test_workload_names_and_specs():
    assert Workload.parse("tokens") == Workload.tokens()
    assert Workload.parse("verl") == Workload.verl()
    assert Workload.parse("quadratic(3,2)") == Workload.quadratic(3, 2)
    assert Workload.verl().name == "verl"
    assert Workload.quadratic(3, 2).name == "quadratic(3,2)"


# Factories: a Workload held by pytest's parametrization outlives the module and nanobind reports it leaked at exit.
@pytest.mark.parametrize("make_workload", [lambda: "quadratic(3,2)", lambda: Workload.quadratic(3, 2),
                                           lambda: ("quadratic", 3, 2)], ids=["str", "object", "tuple"])
def test_workload_spellings_agree(make_workload):
    workload = make_workload()
    weights = [120, 4000, 35, 900, 77, 2500]
    result = balance.partition(weights, 3, workload=workload)
    check_partition(weights, 3, result, coefficients=(3, 2))
    assert_same(result, balance.partition(weights, 3, workload="quadratic(3,2)"))


def test_workload_changes_what_is_balanced():
    # Nine short sequences and one long one: even in tokens, not in verl's cost.
    weights = [1000] * 9 + [9000]
    assert balance.partition(weights, 2).heaviest == 9000
    verl = balance.partition(weights, 2, workload="verl")
    check_partition(weights, 2, verl, coefficients=WORKLOADS["verl"])
    long_cost = VERL_LINEAR * 9000 + 9000 * 9000
    assert long_cost > 9 * (VERL_LINEAR * 1000 + 1000 * 1000)
    assert verl.heaviest == verl.lower_bound == long_cost
    np.testing.assert_array_equal(verl.parts[int(verl.assignment[9])], [9])


def test_linear_workload_ignores_the_square():
    # 2**33 squared does not fit in int64, but quadratic(5, 0) never squares.
    length = 2**33
    assert Workload.tokens().cost(length) == length
    assert Workload.quadratic(5, 0).cost(length) == 5 * length
    result = balance.partition([length, 7], 2, workload="quadratic(5,0)")
    check_partition([length, 7], 2, result, coefficients=(5, 0))


# ---- cardinality and groups ------------------------------------------------------


def test_equal_cardinality_same_count_per_part(rng):
    weights = lognormal_lengths(rng, 24)
    for k in (2, 3, 4, 6, 8, 12):
        result = balance.partition(weights, k, cardinality="equal")
        assert {len(part) for part in result.parts} == {24 // k}
        check_partition(weights, k, result, cardinality="equal")


def test_equal_cardinality_needs_a_multiple_of_k():
    with pytest.raises(ValueError) as error:
        balance.partition([1, 2, 3, 4, 5], 2, cardinality="equal")
    message = str(error.value)
    assert "balanced" in message and "cardinality" in message and "5" in message and "2" in message


def test_balanced_cardinality_any_count(rng):
    for n in (5, 6, 7, 9, 11, 17):
        weights = lognormal_lengths(rng, n)
        for k in range(1, n + 1):
            result = balance.partition(weights, k, cardinality="balanced")
            sizes = [len(part) for part in result.parts]
            assert max(sizes) - min(sizes) <= 1
            check_partition(weights, k, result, cardinality="balanced")
    # Counts cost balance: three and two of [1, 10, 1, 1, 1] give at best 11, free gives 10.
    assert balance.partition([1, 10, 1, 1, 1], 2, cardinality="balanced").heaviest == 11
    assert balance.partition([1, 10, 1, 1, 1], 2).heaviest == 10


@pytest.mark.parametrize("cardinality", CARDINALITIES)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_groups_never_split_and_count_as_one(rng, cardinality, algorithm):
    # 12 groups of 1..5 items each (sizes differ), ids arbitrary and shuffled.
    sizes = rng.integers(1, 6, 12)
    ids = rng.choice(np.arange(-500, 500), 12, replace=False)
    groups = np.repeat(ids, sizes)
    rng.shuffle(groups)
    weights = lognormal_lengths(rng, len(groups))
    for k in (2, 3, 4, 12):
        result = balance.partition(weights, k, cardinality=cardinality, groups=groups, algorithm=algorithm)
        check_partition(weights, k, result, cardinality=cardinality, groups=groups)
        if cardinality == "equal":
            counts = [len({int(groups[i]) for i in part}) for part in result.parts]
            assert counts == [12 // k] * k


def test_group_weight_is_the_sum_of_its_items_workloads():
    # Under verl the group {3, 4} costs cost(3) + cost(4), not cost(7).
    verl = Workload.verl()
    result = balance.partition([3, 9, 4], 2, groups=[42, 8, 42], workload="verl")
    check_partition([3, 9, 4], 2, result, coefficients=WORKLOADS["verl"], groups=[42, 8, 42])
    part = int(result.assignment[0])
    assert int(result.assignment[2]) == part
    assert int(result.sums[part]) == verl.cost(3) + verl.cost(4)


def test_equal_cardinality_counts_groups():
    with pytest.raises(ValueError, match="groups.*balanced"):
        balance.partition([5, 5, 5, 5], 2, groups=[0, 0, 1, 2], cardinality="equal")
    # Five items, four groups: equal counts groups, two per part. {10,5} | {5,6} is best.
    groups = [0, 0, 1, 2, 3]
    result = balance.partition([5, 5, 5, 5, 6], 2, groups=groups, cardinality="equal")
    check_partition([5, 5, 5, 5, 6], 2, result, cardinality="equal", groups=groups)
    assert result.heaviest == 15


# ---- algorithms --------------------------------------------------------------------


def test_auto_never_heavier_than_kk_or_lpt(rng):
    for round_ in range(150):
        n = int(rng.integers(1, 50))
        weights = rng.integers(0, 4, n) if round_ % 2 else lognormal_lengths(rng, n)
        k = int(rng.integers(1, n + 1))
        groups = rng.integers(0, n, n) if round_ % 3 == 0 else None
        if groups is not None:
            k = min(k, len(set(groups.tolist())))
        for cardinality in CARDINALITIES:
            units = n if groups is None else len(set(groups.tolist()))
            if cardinality == "equal" and units % k:
                continue
            heaviest = {}
            for algorithm in ALGORITHMS:
                result = balance.partition(weights, k, cardinality=cardinality, groups=groups, algorithm=algorithm)
                check_partition(weights, k, result, cardinality=cardinality, groups=groups)
                heaviest[algorithm] = result.heaviest
            assert heaviest["auto"] <= heaviest["kk"], (weights.tolist(), k, cardinality)
            assert heaviest["auto"] <= heaviest["lpt"], (weights.tolist(), k, cardinality)


def test_auto_is_near_the_bound_with_ten_items_per_part(rng):
    for k in (2, 8, 32):
        for workload in ("tokens", "verl"):
            weights = lognormal_lengths(rng, 10 * k)
            assert balance.partition(weights, k, workload=workload).gap < 0.001


def test_same_input_same_output(rng):
    weights = lognormal_lengths(rng, 2000)
    groups = np.arange(2000) // 4
    for cardinality in CARDINALITIES:
        for algorithm in ALGORITHMS:
            kwargs = dict(cardinality=cardinality, algorithm=algorithm, workload="verl", groups=groups)
            assert_same(balance.partition(weights, 20, **kwargs), balance.partition(weights, 20, **kwargs))


# ---- accepted inputs ---------------------------------------------------------------

LENGTHS = [512, 77, 3000, 0, 1024, 250, 9, 4096, 640, 333]


@pytest.mark.parametrize(
    "convert",
    [
        list,
        tuple,
        lambda x: np.array(x, dtype=np.int64),
        lambda x: np.array(x, dtype=np.int32),
        lambda x: np.array(x, dtype=np.uint16),
        lambda x: np.array(x, dtype=np.uint32),
        lambda x: np.array(x, dtype=np.uint64),
        lambda x: np.array(x, dtype=np.float64),
        lambda x: np.array(x, dtype=np.float32),
        lambda x: np.array([v for v in x for _ in range(2)], dtype=np.int64)[::2],  # strided view
        lambda x: [np.int64(v) for v in x],
    ],
    ids=["list", "tuple", "int64", "int32", "uint16", "uint32", "uint64", "float64", "float32", "strided",
         "numpy-scalars"],
)
def test_accepts_every_integer_container(convert):
    expected = balance.partition(LENGTHS, 3, groups=[0, 0, 1, 2, 3, 3, 4, 5, 6, 7])
    check_partition(LENGTHS, 3, expected, groups=[0, 0, 1, 2, 3, 3, 4, 5, 6, 7])
    got = balance.partition(convert(LENGTHS), 3, groups=convert([0, 0, 1, 2, 3, 3, 4, 5, 6, 7]))
    assert_same(expected, got)


def test_accepts_numpy_integer_k():
    assert_same(balance.partition(LENGTHS, np.int64(3)), balance.partition(LENGTHS, 3))


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "float64"])
def test_accepts_torch_tensors(dtype):
    torch = require("torch")
    tensor = torch.tensor(LENGTHS, dtype=getattr(torch, dtype))
    groups = torch.tensor([0, 0, 1, 2, 3, 3, 4, 5, 6, 7], dtype=torch.int64)
    assert_same(balance.partition(tensor, 3, groups=groups), balance.partition(LENGTHS, 3, groups=groups.tolist()))
    assert balance.karmarkar_karp(tensor, 3, False) == balance.karmarkar_karp(LENGTHS, 3, False)


def test_int64_contiguous_array_is_not_copied():
    array = np.array(LENGTHS, dtype=np.int64)
    view = as_int64_array(array, "weights")
    assert np.shares_memory(view, array)
    # Layouts and dtypes that need a copy still give the right values.
    strided = np.array(LENGTHS * 2, dtype=np.int64)[::2]
    converted = as_int64_array(strided, "weights")
    assert converted.flags.c_contiguous and converted.dtype == np.int64
    np.testing.assert_array_equal(converted, strided)
    np.testing.assert_array_equal(as_int64_array(np.array(LENGTHS, dtype=np.int32), "weights"), LENGTHS)


def test_int64_torch_tensor_is_not_copied():
    torch = require("torch")
    tensor = torch.tensor(LENGTHS, dtype=torch.int64)
    assert np.shares_memory(as_int64_array(tensor, "weights"), tensor.numpy())


# ---- bad input ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, kwargs, fragments",
    [
        (([3, -2, 5], 2), {}, ("weights[1]", "-2")),
        ((np.array([3, -2, 5]), 2), {}, ("weights[1]", "-2")),
        (([3, 1.5, 5], 2), {}, ("weights[1]", "1.5")),
        ((np.array([3.0, np.nan]), 1), {}, ("weights[1]", "nan")),
        ((np.array([3.0, np.inf]), 1), {}, ("weights[1]", "inf")),
        (([3, None], 1), {}, ("weights[1]", "None")),
        ((["a", "b"], 1), {}, ("weights",)),
        (([2**63, 1], 1), {}, ("weights",)),
        (([[1, 2], [3, 4]], 1), {}, ("weights", "(2, 2)")),
        (([], 1), {}, ("weights", "empty")),
        (([1, 2, 3], 0), {}, ("k", "0")),
        (([1, 2, 3], -2), {}, ("k", "-2")),
        (([1, 2, 3], 2.5), {}, ("k", "2.5")),
        (([1, 2, 3], 2.0), {}, ("k", "2.0")),
        (([1, 2, 3], "2"), {}, ("k", "'2'")),
        (([1, 2, 3], None), {}, ("k", "None")),
        (([1, 2, 3], 4), {}, ("k", "4", "3")),
        (([1, 2, 3], 3), {"groups": [7, 7, 8]}, ("k", "3", "groups", "2")),
        (([1, 2, 3], 1), {"groups": [0, 1]}, ("groups", "2", "3")),
        (([1, 2, 3], 1), {"groups": [0, 1.5, 2]}, ("groups", "1.5")),
        (([1, 2, 3], 1), {"groups": np.zeros((3, 1))}, ("groups", "(3, 1)")),
        (([1, 2, 3, 4, 5], 2), {"cardinality": "equal"}, ("cardinality", "balanced")),
        (([1, 2, 3], 1), {"cardinality": "even"}, ("cardinality", "even")),
        (([1, 2, 3], 1), {"algorithm": "greedy"}, ("algorithm", "greedy")),
        (([1, 2, 3], 1), {"workload": "cubic"}, ("workload", "cubic")),
        (([1, 2, 3], 1), {"workload": "quadratic(-1,2)"}, ("workload", "-1")),
        (([1, 2, 3], 1), {"workload": 42}, ("workload", "42")),
        # Each verl cost of 3e9 fits in int64 (about 9.00007e18); the sum does not.
        (([3_000_000_000] * 2, 1), {"workload": "verl"}, ("weights", "verl", "overflow")),
        (([2**62, 2**62], 2), {}, ("weights", "overflow")),
        (([2**63 - 1, 1], 2), {}, ("weights", "overflow")),
    ],
)
def test_bad_input_is_a_value_error_naming_parameter_and_value(args, kwargs, fragments):
    with pytest.raises(ValueError) as error:
        balance.partition(*args, **kwargs)
    for fragment in fragments:
        assert fragment in str(error.value), f"{fragment!r} not in {str(error.value)!r}"


def test_cost_overflow_names_the_weight():
    # verl's cost of 4e9 overflows int64 on its own: the error must point at the weight.
    with pytest.raises(ValueError) as error:
        balance.partition([10, 4_000_000_000], 2, workload="verl")
    message = str(error.value)
    assert "weights" in message and "4000000000" in message and "overflow" in message


@pytest.mark.parametrize("k", [2**63, -(2**63) - 1])
def test_k_beyond_int64_is_named(k):
    with pytest.raises(ValueError, match=rf"k = {k} is outside the int64 range"):
        balance.partition([1, 2, 3], k)


def test_verl_functions_refuse_huge_k_and_non_bool_flags():
    # k_partitions = 2**40 used to raise MemoryError (std::bad_alloc).
    with pytest.raises(ValueError, match=r"k_partitions \(1099511627776\) exceeds both len\(seqlen_list\) \(3\)"):
        balance.karmarkar_karp([5, 3, 2], 2**40, False)
    assert len(balance.karmarkar_karp([5, 3, 2], 5, False)) == 5  # empty parts, as in verl
    for function in (balance.karmarkar_karp, balance.get_seqlen_balanced_partitions):
        with pytest.raises(ValueError, match=r"equal_size must be True or False, got 'yes'"):
            function([5, 3, 2], 1, "yes")
        with pytest.raises(ValueError, match=r"k_partitions = 9223372036854775808 is outside the int64 range"):
            function([5, 3, 2], 2**63, False)


@pytest.mark.parametrize(
    "workload, fragments",
    [
        (("quadratic", "x", 1), ("workload = ('quadratic', 'x', 1)", "a must be an integer, got 'x'", "'verl'")),
        (("quadratic", 1, 2.5), ("workload = ('quadratic', 1, 2.5)", "b must be an integer, got 2.5")),
        (("quadratic", 2**63, 1), ("a = 9223372036854775808 is outside the int64 range",)),
    ],
)
def test_bad_workload_tuple_is_named(workload, fragments):
    # ("quadratic", "x", 1) used to fail with "invalid literal for int()".
    with pytest.raises(ValueError) as error:
        balance.partition([1, 2, 3], 1, workload=workload)
    for fragment in fragments:
        assert fragment in str(error.value), str(error.value)


@pytest.mark.parametrize(
    "call, error_type, fragments",
    [
        (lambda: Workload.quadratic(1, 2.0), ValueError, ("b must be an integer, got 2.0",)),
        (lambda: Workload.quadratic(True, 1), ValueError, ("a must be an integer, got True",)),
        (lambda: Workload.quadratic(2**63, 1), ValueError, ("a = 9223372036854775808 is outside the int64 range",)),
        (lambda: Workload.verl().cost(2**64), ValueError, ("length = 18446744073709551616 is outside the int64 range",)),
        (lambda: Workload.verl().cost(float("nan")), ValueError, ("length must be an integer, got nan",)),
        (lambda: Workload.parse(3), TypeError, ("spec must be a str, got int 3",)),
        # None is no int and no str: nanobind names the signature and the types given.
        (lambda: Workload.quadratic(None, 1), TypeError, ("quadratic(a: int, b: int)", "types: NoneType, int")),
        (lambda: Workload.parse(None), TypeError, ("parse(spec: str)", "types: NoneType")),
    ],
)
def test_workload_methods_name_bad_arguments(call, error_type, fragments):
    with pytest.raises(error_type) as error:
        call()
    for fragment in fragments:
        assert fragment in str(error.value), str(error.value)
    assert Workload.quadratic(np.int64(3), 1).cost(np.int32(2)) == 10


@pytest.mark.parametrize("function", [balance.karmarkar_karp, balance.get_seqlen_balanced_partitions])
def test_verl_functions_take_lists_as_arrays(function):
    # A list of ints is converted in C++, anything else by numpy: the same answer and the same errors either way.
    lengths = np.random.default_rng(5).integers(-50, 5000, 304)
    expected = function(lengths, 8, True)
    assert function(lengths.tolist(), 8, True) == expected
    assert function(tuple(lengths.tolist()), 8, True) == expected
    assert function([float(x) for x in lengths], 8, True) == expected  # whole floats, as numpy takes them
    assert function([np.int32(x) for x in lengths], 8, True) == expected
    with pytest.raises(ValueError, match=r"seqlen_list\[1\] = 1\.5 is not an integer"):
        function([1, 1.5, 3], 1, False)
    with pytest.raises(ValueError, match=r"seqlen_list\[1\] = 18446744073709551616 is beyond the int64 range"):
        function([1, 2**64, 3], 1, False)
