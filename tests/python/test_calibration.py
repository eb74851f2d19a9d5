"""seqflow.balance.calibrate, calibrated Workloads (seconds, JSON, save/load,
pickling) and OnlineWorkload, from Python."""

from __future__ import annotations

import math
import errno
import pickle

import numpy as np
import pytest
import torch

from background import Background, finish_all
from seqflow import balance as sb
from seqflow.balance import Workload

TRUTH = {"per_token": 2e-6, "per_token_squared": 3e-11, "per_sequence": 5e-4, "per_micro_batch": 0.02}


# Attention-heavy timings on a kernel 8 wide whose ragged last block costs 20% more attention.
ALIGNED_TRUTH = {"per_token": 2e-6, "per_token_squared": 3e-10, "per_sequence": 5e-4, "per_micro_batch": 0.02,
                 "per_unaligned_token_squared": 6e-11, "alignment": 8}


def model_seconds(lengths, c=TRUTH) -> float:
    def squared(length):
        unaligned = length % c.get("alignment", 1) != 0
        return c["per_token_squared"] + (c["per_unaligned_token_squared"] if unaligned else 0.0)

    return c["per_micro_batch"] + sum(c["per_token"] * L + squared(L) * L * L + c["per_sequence"]
                                      for L in map(int, lengths))


def synthetic(rng, count: int, noise: float = 0.0, truth=TRUTH):
    """(lengths, seconds) pairs timed by `truth` with relative Gaussian noise."""
    records = []
    for _ in range(count):
        lengths = np.exp(rng.uniform(np.log(16), np.log(8192), rng.integers(1, 17))).astype(np.int64)
        records.append((lengths, model_seconds(lengths, truth) * (1 + noise * rng.standard_normal())))
    return records


def assert_recovers(workload, truth, rel):
    assert workload.kind == "calibrated"
    for name, value in truth.items():
        assert getattr(workload, name) == pytest.approx(value, rel=rel), name


def test_calibrate_recovers_coefficients_from_every_record_form():
    rng = np.random.default_rng(7)
    pairs = synthetic(rng, 60)
    forms = [(list(map(int, lengths)), seconds) if i % 3 == 0
             else {"lengths": torch.tensor(lengths), "seconds": np.float64(seconds)} if i % 3 == 1
             else (lengths.astype(np.int32), seconds) for i, (lengths, seconds) in enumerate(pairs)]
    cal = sb.calibrate(iter(forms))
    assert_recovers(cal, TRUTH, 1e-6)
    assert isinstance(cal, Workload)
    assert isinstance(cal.fit, sb.FitReport)
    assert (cal.fit.records, cal.fit.outliers) == (60, 0)
    assert cal.fit.max_error < 1e-9


def test_calibrate_leaves_out_injected_outliers():
    rng = np.random.default_rng(8)
    records = synthetic(rng, 300, noise=0.01)
    slow = rng.choice(len(records), 12, replace=False)
    for i in slow:
        records[i] = (records[i][0], records[i][1] * rng.uniform(3, 10))
    cal = sb.calibrate(records)
    assert_recovers(cal, TRUTH, 0.1)  # 1% noise: the small L^2 term is the least certain
    for lengths, _ in records:
        assert cal.seconds(lengths) == pytest.approx(model_seconds(lengths), rel=0.01)
    assert cal.fit.outliers == len(slow)
    assert cal.fit.median_error <= cal.fit.p90_error <= cal.fit.max_error < 0.05
    with pytest.raises(AttributeError):
        cal.fit.records = 3


def test_seconds_predicts_a_micro_batch():
    cal = Workload.calibrated(**TRUTH)
    for lengths in ([100, 2000, 0], np.array([5, 7]), torch.tensor([4096])):
        assert cal.seconds(lengths) == pytest.approx(model_seconds(lengths), rel=1e-12)
    assert cal.cost(1000) == round((TRUTH["per_token"] * 1000 + TRUTH["per_token_squared"] * 1e6
                                    + TRUTH["per_sequence"]) * 1e12)
    with pytest.raises(ValueError, match=r"lengths\[1\] = -3"):
        cal.seconds([5, -3])
    with pytest.raises(ValueError, match=r"lengths\[1\] must be an integer, got 1\.5"):
        cal.seconds([5, 1.5])
    with pytest.raises(ValueError, match=r"lengths\[1\] must be an integer, got np.float64\(1\.5\)"):
        cal.seconds(np.array([5, 1.5]))
    # Whole floats count, as the balancing functions take them.
    assert cal.seconds(np.array([5, 7])) == cal.seconds((5, 7)) == cal.seconds(np.array([5.0, 7.0]))
    for other in (Workload.tokens(), Workload.verl(), Workload.quadratic(3, 2)):
        with pytest.raises(ValueError, match=f"{re_escape(other.name)} has no seconds"):
            other.seconds([1])
        with pytest.raises(ValueError, match="no coefficients in seconds"):
            other.per_token  # noqa: B018


def test_calibrate_with_an_alignment_fits_the_unaligned_term():
    records = synthetic(np.random.default_rng(12), 200, truth=ALIGNED_TRUTH)
    cal = sb.calibrate(records, alignment=8)
    assert_recovers(cal, ALIGNED_TRUTH, 1e-6)
    assert cal.fit.max_error < 1e-9
    assert cal.cost(1017) > cal.cost(1024)
    assert "alignment=8" in cal.name
    four_terms = sb.calibrate(records)
    assert (four_terms.alignment, four_terms.per_unaligned_token_squared) == (1, 0.0)
    assert four_terms.fit.max_error > 0.01
    online = sb.OnlineWorkload(window=256, min_records=16, alignment=8)
    for lengths, seconds in records:
        online.report(lengths, seconds)
    online.wait_for_refit()
    assert_recovers(online.workload, ALIGNED_TRUTH, 1e-6)


def test_the_alignment_term_round_trips_and_is_checked(tmp_path):
    cal = Workload.calibrated(**ALIGNED_TRUTH)
    assert cal.seconds([1016, 1017]) == pytest.approx(model_seconds([1016, 1017], ALIGNED_TRUTH), rel=1e-12)
    assert Workload.from_json(cal.to_json()) == cal
    assert pickle.loads(pickle.dumps(cal)) == cal
    assert "alignment" not in Workload.calibrated(**TRUTH).to_json()
    with pytest.raises(ValueError, match="alignment = 0"):
        sb.calibrate(synthetic(np.random.default_rng(13), 10), alignment=0)
    with pytest.raises(ValueError, match="alignment must be an integer"):
        sb.calibrate(synthetic(np.random.default_rng(13), 10), alignment=8.5)
    with pytest.raises(ValueError, match="alignment = -1"):
        sb.OnlineWorkload(alignment=-1)
    with pytest.raises(ValueError, match="per_unaligned_token_squared = 1e-12 needs an alignment > 1"):
        Workload.calibrated(per_token=1e-6, per_unaligned_token_squared=1e-12)


def re_escape(text: str) -> str:
    import re
    return re.escape(text)


# Built in the test: Workload objects held by pytest's parametrization outlive
# the module and nanobind reports them as leaked at exit.
ALL_KINDS = {"tokens": Workload.tokens, "verl": Workload.verl, "quadratic": lambda: Workload.quadratic(3, 2),
             "calibrated": lambda: Workload.calibrated(**TRUTH)}


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_json_save_load_and_pickle_round_trip(kind, tmp_path):
    workload = ALL_KINDS[kind]()
    assert workload.kind == kind
    assert Workload.from_json(workload.to_json()) == workload
    path = tmp_path / "model.json"
    workload.save(path)
    loaded = Workload.load(str(path))
    assert loaded == workload and loaded.name == workload.name and loaded.cost(777) == workload.cost(777)
    unpickled = pickle.loads(pickle.dumps(workload))
    assert unpickled == workload and unpickled.kind == workload.kind


def test_loading_a_missing_model_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.json") as missing:
        Workload.load(tmp_path / "missing.json")
    assert missing.value.errno == errno.ENOENT and missing.value.filename == str(tmp_path / "missing.json")
    with pytest.raises(TypeError, match="path must be a str or an os.PathLike, got int 3"):
        Workload.tokens().save(3)
    with pytest.raises(ValueError, match="path must not contain NUL"):
        Workload.tokens().save("a\0b")


def test_fitted_model_keeps_its_fit_through_json():
    rng = np.random.default_rng(9)
    cal = sb.calibrate(synthetic(rng, 40, noise=0.01))
    back = Workload.from_json(cal.to_json())
    for name in ("records", "outliers", "median_error", "p90_error", "max_error"):
        assert getattr(back.fit, name) == getattr(cal.fit, name)
    assert back.fit.records == 40


@pytest.mark.parametrize(
    "records, message",
    [
        ([([1], 1.0)] * 7, "7 records, fewer than min_records = 8"),
        ([([1], 1.0)] * 8 + [([1, -2], 1.0)], r"records\[8\]\.lengths\[1\] = -2 is negative"),
        ([([1], 1.0)] * 8 + [([], 1.0)], r"records\[8\]\.lengths is empty"),
        ([([1], 1.0)] * 3 + [([1], 0.0)] + [([1], 1.0)] * 5, r"records\[3\]\.seconds = 0 must be a finite number > 0"),
        ([([1], 1.0)] * 3 + [([1], math.nan)] + [([1], 1.0)] * 5, r"records\[3\]\.seconds = nan"),
        ([([1], 1.0)] * 2 + [([1], "1")], r"records\[2\]\.seconds must be a number of seconds, got '1'"),
        ([([1], 1.0)] * 2 + [([1.5], 1.0)], r"records\[2\]\.lengths\[0\] = 1.5 is not an integer"),
        ([([1], 1.0)] * 2 + [[1, 2, 3]], r"records\[2\] must be a \(lengths, seconds\) pair"),
        ([{"lengths": [1]}], r"records\[0\] must have the keys 'lengths' and 'seconds'"),
    ],
    ids=["few", "negative", "empty", "zero_seconds", "nan_seconds", "str_seconds", "float_length", "triple",
         "dict_keys"],
)
def test_calibrate_bad_input_is_named(records, message):
    with pytest.raises(ValueError, match=message):
        sb.calibrate(records)


def test_bad_models_and_options_are_named():
    with pytest.raises(ValueError, match="min_records = 3"):
        sb.calibrate([([1], 1.0)] * 10, min_records=3)
    with pytest.raises(ValueError, match="per_token = -1"):
        Workload.calibrated(per_token=-1.0)
    with pytest.raises(ValueError, match="unknown key 'x'"):
        Workload.from_json('{"format": 1, "kind": "tokens", "x": 1}')
    with pytest.raises(TypeError, match="text must be a str, got int 3"):
        Workload.from_json(3)


def test_online_workload_prior_then_fit():
    online = sb.OnlineWorkload(prior="verl", window=64, min_records=16)
    assert online.workload == Workload.verl()
    assert online.fit.records == 0
    rng = np.random.default_rng(11)
    records = synthetic(rng, 20)
    for lengths, seconds in records[:15]:
        online.report(lengths, seconds)
    online.wait_for_refit()
    assert online.reports == 15 and online.workload == Workload.verl()
    for lengths, seconds in records[15:]:
        online.report(list(map(int, lengths)), seconds)
    online.wait_for_refit()
    assert online.reports == 20
    assert_recovers(online.workload, TRUTH, 1e-6)
    assert online.fit.records == 20
    assert "OnlineWorkload(reports=20" in repr(online)


def test_online_workload_bad_input_is_named():
    with pytest.raises(ValueError, match="min_records = 2"):
        sb.OnlineWorkload(min_records=2)
    with pytest.raises(ValueError, match="window = 8"):
        sb.OnlineWorkload(window=8, min_records=16)
    with pytest.raises(ValueError, match="window must be an integer"):
        sb.OnlineWorkload(window="big")
    with pytest.raises(ValueError, match="workload must be"):
        sb.OnlineWorkload(prior=3.5)
    online = sb.OnlineWorkload()
    with pytest.raises(ValueError, match=r"lengths\[1\] = -1 is negative"):
        online.report([1, -1], 1.0)
    with pytest.raises(ValueError, match="seconds = inf"):
        online.report([1], math.inf)
    with pytest.raises(ValueError, match="seconds must be a number of seconds"):
        online.report([1], None)
    assert online.reports == 0


def test_online_workload_takes_reports_from_many_threads():
    online = sb.OnlineWorkload(window=4096, min_records=16)
    per_thread = 200

    def reporter(seed):
        rng = np.random.default_rng(seed)
        for lengths, seconds in synthetic(rng, per_thread):
            online.report(torch.from_numpy(lengths), seconds)

    works = [Background(reporter, seed, name=f"reporter {seed}") for seed in range(4)]
    snapshots = [online.workload for _ in range(50)]  # reads while the reporters run
    finish_all(works, timeout=60)
    online.wait_for_refit()
    assert online.reports == 4 * per_thread
    assert online.fit.records == 4 * per_thread
    assert_recovers(online.workload, TRUTH, 1e-6)
    assert all(s == Workload.tokens() or s.kind == "calibrated" for s in snapshots)
