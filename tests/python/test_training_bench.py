"""The training benchmark's pieces (bench/training_*.py) at tiny size: the
packed model, the rollouts, every row's split, the calibration inputs and
the reports. No timing is asserted: bench/training_bench.py measures."""

from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from required import require

torch = require("torch")
require("tensordict")

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import seqflow.balance as sb  # noqa: E402
import training_bench as tb  # noqa: E402
import training_report  # noqa: E402
from training_data import DISTRIBUTIONS, Rollout, make_rollout  # noqa: E402
from training_model import CausalLM, ModelConfig, next_token_loss, train_micro_batch  # noqa: E402
from training_splits import contiguous, pack_lengths, pack_samples, seqflow_plan, verl_split  # noqa: E402

TINY = ModelConfig(vocab=64, width=32, heads=2, layers=2, max_length=128)


def rollout(dist="lognormal", prompts=8, group_size=3, max_length=128, seed=0) -> Rollout:
    return make_rollout(dist, prompts, group_size, max_length, TINY.vocab, np.random.default_rng(seed))


def test_packed_attention_equals_each_sequence_alone():
    torch.manual_seed(0)
    model = CausalLM(TINY)
    data = rollout(prompts=2, group_size=2)
    packed = pack_samples(data, [0, 1, 2, 3])
    logits = model(packed.input_ids, packed.position_ids, packed.cu_seqlens)
    alone = torch.cat([model(p.input_ids, p.position_ids, p.cu_seqlens)
                       for p in (pack_samples(data, [i]) for i in range(4))])
    torch.testing.assert_close(logits, alone, rtol=1e-4, atol=1e-5)


def test_loss_never_predicts_across_sequences():
    model = CausalLM(TINY)
    data = rollout(prompts=1, group_size=3)
    packed = pack_samples(data, [0, 1, 2])
    with torch.no_grad():
        loss = next_token_loss(model(packed.input_ids, packed.position_ids, packed.cu_seqlens), packed.labels,
                               packed.cu_seqlens)
        # the pack's mean = the token-weighted mean of each sequence's own loss
        total, count = 0.0, 0
        for i in range(3):
            alone = pack_samples(data, [i])
            logits = model(alone.input_ids, alone.position_ids, alone.cu_seqlens)
            total += float(next_token_loss(logits, alone.labels, alone.cu_seqlens)) * (len(alone.input_ids) - 1)
            count += len(alone.input_ids) - 1
    assert float(loss) == pytest.approx(total / count, rel=1e-5)


def test_train_micro_batch_accumulates_gradients():
    model = CausalLM(TINY)
    pack = pack_samples(rollout(prompts=1, group_size=2), [0, 1])
    train_micro_batch(model, pack)
    first = model.head.weight.grad.clone()
    train_micro_batch(model, pack)
    torch.testing.assert_close(model.head.weight.grad, 2 * first)


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_rollouts_keep_groups_adjacent_and_lengths_in_range(dist):
    data = rollout(dist, prompts=20, group_size=4, max_length=256)
    assert data.lengths.min() >= 1 and data.lengths.max() <= 256
    assert data.groups.tolist() == [g for g in range(20) for _ in range(4)]
    assert [len(ids) for ids in data.token_ids] == data.lengths.tolist()
    assert all(ids.min() >= 0 and ids.max() < TINY.vocab for ids in data.token_ids)


def check_split(data: Rollout, ranks, dp: int, cap: int):
    assert len(ranks) == dp
    seen = np.concatenate([p.samples for packs in ranks for p in packs])
    assert sorted(seen.tolist()) == list(range(len(data.lengths)))  # every sample exactly once
    for packs in ranks:
        rank_samples = np.concatenate([p.samples for p in packs])
        rank_groups = set(data.groups[rank_samples].tolist())
        assert all(set(np.flatnonzero(data.groups == g)) <= set(rank_samples.tolist()) for g in rank_groups)
        for p in packs:
            assert len(p.input_ids) <= cap
            assert pack_lengths(p).tolist() == data.lengths[p.samples].tolist()
            expected = np.concatenate([data.token_ids[i] for i in p.samples])
            assert p.input_ids.tolist() == expected.tolist()
            assert p.position_ids.tolist() == [i for n in data.lengths[p.samples] for i in range(n)]


@pytest.mark.parametrize("dp", [2, 4])
@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_every_row_places_every_sample_once_under_the_cap(dp, dist):
    data = rollout(dist, prompts=3 * dp, group_size=3, max_length=128)
    check_split(data, contiguous(data, dp, 128), dp, 128)
    check_split(data, verl_split(data, dp, 128), dp, 128)
    for workload in ("tokens", "verl"):
        check_split(data, seqflow_plan(data, dp, 128, workload), dp, 128)


def test_contiguous_takes_prompts_in_order_and_verl_agrees_on_the_count():
    data = rollout(prompts=8, group_size=3)
    ranks = contiguous(data, 4, 128)
    firsts = [int(data.groups[packs[0].samples[0]]) for packs in ranks]
    assert firsts == sorted(firsts) and firsts[0] == 0
    assert len({len(packs) for packs in verl_split(data, 4, 128)}) == 1
    assert len({len(packs) for packs in seqflow_plan(data, 4, 128, "tokens")}) == 1


def test_calibration_batches_alternate_small_batches_and_packs_filled_under_the_cap():
    settings = tb.Settings(max_length=128, prompts_per_rank=1, calibration_batches=60, online_steps=1,
                           cases=(("lognormal", 2),))
    batches = tb.calibration_batches(settings, np.random.default_rng(0))
    assert len(batches) == 60
    small, filled = batches[0::2], batches[1::2]
    assert {len(b) for b in small} <= set(range(1, tb.MAX_SEQUENCES_PER_BATCH + 1))
    assert all(b.min() >= 1 and (b.sum() <= 128 or len(b) == 1) for b in small)
    assert all(b.min() >= 1 and b.sum() <= 128 for b in filled)
    assert max(len(b) for b in filled) > tb.MAX_SEQUENCES_PER_BATCH  # short sequences fill a pack
    assert np.mean([b.sum() for b in filled]) > np.mean([b.sum() for b in small])


def test_scaled_predictor_recovers_a_proportional_model():
    rng = np.random.default_rng(1)
    records = [(lengths, 3e-6 * float(tb.verl_cost(lengths).sum()))
               for lengths in (rng.integers(1, 500, size=rng.integers(1, 6)) for _ in range(20))]
    predict = tb.scaled_predictor(tb.verl_cost, records)
    for lengths, seconds in records:
        assert predict(lengths) == pytest.approx(seconds, rel=1e-9)


class Counter:
    def __init__(self):
        self.total = 0

    def update(self, n):
        self.total += n


def test_trainer_measures_every_rank_and_pack_and_counts_tokens():
    data = rollout(prompts=4, group_size=2)
    ranks = seqflow_plan(data, 2, 128, "tokens")
    trainer = tb.Trainer(TINY, Counter())
    [timing] = trainer.measure([ranks], repeats=3)
    assert timing.rank_seconds.shape == (2,) and (timing.rank_seconds > 0).all()
    assert [runs.shape for runs in timing.runs] == [(len(packs), 3) for packs in ranks]
    assert [len(s) for s in timing.pack_seconds] == [len(packs) for packs in ranks]
    assert trainer.bar.total == 3 * data.tokens
    assert trainer.micro_batches == 3 * sum(len(packs) for packs in ranks)
    assert isinstance(trainer.page_faults, int) and trainer.page_faults >= 0
    assert all(p.grad is None for p in trainer.model.parameters())  # each rank's gradients dropped


def make_row(name, predictor_name, measured, predicted):
    data = rollout(prompts=len(measured), group_size=1)
    ranks = [[pack_samples(data, [i])] for i in range(len(measured))]
    return tb.Row(name, predictor_name, ranks, tb.Timing([np.array([[m]]) for m in measured]), np.array(predicted))


def test_row_metrics_follow_their_definitions():
    row = make_row("r", "tokens", [1.0, 2.0, 4.0], [1.1, 2.0, 3.0])
    assert row.step_seconds == 4.0
    assert row.idle == pytest.approx(1 - (7 / 3) / 4)
    np.testing.assert_allclose(row.errors, [0.1, 0.0, 0.25])


def test_rank_noise_is_the_standard_error_of_the_packs_medians():
    spread = [1.0, 1.2, 0.8, 1.1, 0.9]  # median 1.0, MAD 0.1
    timing = tb.Timing([np.array([spread, spread]), np.array([[3.0] * 5])])
    pack_error = tb.MEDIAN_SE * tb.MAD_SD * 0.1 / np.sqrt(5)
    np.testing.assert_allclose(timing.rank_noise, [np.sqrt(2) * pack_error / 2.0, 0.0])
    assert tb.MEDIAN_SE == pytest.approx(np.sqrt(np.pi / 2), abs=1e-4)
    assert tb.MAD_SD == pytest.approx(1 / 0.6744898, abs=1e-4)  # 1 / the normal's 75th percentile


@pytest.mark.parametrize("sd", [0.0, 0.002, 0.01])
def test_noise_idle_is_what_equal_ranks_idle_when_measured_with_that_noise(sd):
    # Two ranks of 1 s: 1 - mean/max = |a - b| / (2 max), to first order in
    # sd (small here) sd |z1 - z2| / 2, whose mean is sd / sqrt(pi).
    assert tb.noise_idle(np.array([sd, sd])) == pytest.approx(sd / np.sqrt(np.pi), rel=0.03, abs=1e-12)


def test_noise_idle_grows_with_the_ranks():
    timings = [tb.Timing([np.array([[1.0, 1.1, 0.9, 1.05, 0.95]])] * dp) for dp in (2, 4, 16)]
    idles = [t.noise_idle for t in timings]
    assert idles == [tb.noise_idle(t.rank_noise) for t in timings]
    assert 0 < idles[0] < idles[1] < idles[2]


def test_halves_difference_compares_the_odd_and_even_rounds():
    # Rank 0 takes 1.0 s in the odd rounds and 1.2 s in the even ones: shares
    # (1, 1) and (1.2, 1) / 1.1, a difference of +-0.2 / 2.2.
    timing = tb.Timing([np.array([[1.0, 1.2] * 3]), np.array([[1.0] * 6])])
    measured, expected = timing.halves_difference()
    assert measured == pytest.approx(0.2 / 2.2)
    assert expected > 0
    with pytest.raises(ValueError, match="at least 2 rounds, got 1"):
        tb.Timing([np.array([[1.0]])]).halves_difference()


@pytest.mark.parametrize("rounds", [5, 8])
def test_rank_noise_predicts_how_far_the_halves_differ_under_normal_noise(rounds):
    rng = np.random.default_rng(5)
    packs = rng.uniform(0.05, 0.3, size=(256, 7))  # 256 ranks of 7 micro-batches
    timing = tb.Timing([p[:, None] * (1 + 0.08 * rng.standard_normal((7, rounds))) for p in packs])
    measured, expected = timing.halves_difference()
    assert measured == pytest.approx(expected, rel=0.2)


def test_online_step_is_the_first_at_the_offline_fit():
    case = tb.Case("lognormal", 3, calibration=None)
    case.rows = [make_row("cal", "calibrated", [1.0, 1.0, 1.0], [1.0, 1.0, 1.0])]
    case.online = [make_row("s1", "tokens", [1.0, 1.0, 2.0], [1.0, 1.0, 1.0]),
                   make_row("s2", "online", [1.0, 1.0, 1.0], [1.0, 1.0, 1.04]),
                   make_row("s3", "online", [1.0, 1.0, 1.0], [1.0, 1.0, 1.0])]
    assert training_report.online_step(case, 0.01, 0.02) == 3
    assert training_report.online_step(case, 0.01, 0.05) == 2
    case.online = case.online[:1]
    assert training_report.online_step(case, 0.01, 0.05) is None


def test_rank_bars_scale_to_the_slowest_rank():
    case = tb.Case("lognormal", 2, calibration=None)
    case.rows = [make_row("a", "tokens", [1.0, 0.5], [1.0, 0.5]), make_row("b", "calibrated", [0.25, 0.75],
                                                                            [0.25, 0.75])]
    case.online = []
    bars = training_report.rank_bars(case)[1:]
    full = [line.count("\u2588") for line in bars]
    assert full == [training_report.BAR_WIDTH * m // 1 for m in (1, 0.5, 0.25, 0.75)]


def test_same_packs_compares_every_rank_and_pack():
    data = rollout(prompts=4, group_size=2)
    ranks = seqflow_plan(data, 2, 128, "tokens")
    assert tb.same_packs(ranks, seqflow_plan(data, 2, 128, "tokens"))
    assert not tb.same_packs(ranks, ranks[::-1])  # no sample is on two ranks
    assert not tb.same_packs(ranks, ranks[:1])
    assert not tb.same_packs(ranks, [ranks[0], ranks[1][:-1]])


def test_collector_paused_inside_and_back_after_an_error():
    import gc

    with pytest.raises(RuntimeError):
        with tb.collector_paused():
            assert not gc.isenabled()
            raise RuntimeError("inside")
    assert gc.isenabled()


def test_online_rows_start_from_tokens_then_use_the_refitted_model():
    data = rollout(prompts=8, group_size=2, max_length=128)
    settings = tb.Settings(max_length=128, prompts_per_rank=4, calibration_batches=0, online_steps=3,
                           cases=(("lognormal", 2),))
    trainer = tb.Trainer(TINY, Counter())
    [tokens_row] = tb.measured_rows(trainer, [("seqflow, tokens", "tokens", seqflow_plan(data, 2, 128, "tokens"))],
                                    {"tokens": lambda lengths: 1.0}, 1)
    rows = tb.online_rows(trainer, data, 2, settings, {"tokens": lambda lengths: 1.0}, 1, [tokens_row])
    assert rows[0].predictor_name == "tokens (prior)"
    assert rows[0].timing is tokens_row.timing  # the tokens prior's plan is the tokens row's: not run again
    reported = np.cumsum([0] + [sum(len(packs) for packs in row.ranks) for row in rows[:-1]])
    # a step plans with a fit once the steps before it reported min_records micro-batches
    assert [row.predictor_name for row in rows] == [
        "online" if n >= tb.ONLINE_MIN_RECORDS else "tokens (prior)" for n in reported]
    assert "online" in [row.predictor_name for row in rows]


def test_trainer_times_with_the_clock_it_is_given():
    ticks = iter(range(100))
    trainer = tb.Trainer(TINY, Counter(), clock=lambda: 2.0 * next(ticks))
    assert trainer.seconds(pack_samples(rollout(prompts=1, group_size=1), [0])) == 2.0
    assert set(tb.CLOCKS) == {"cpu", "wall"}


@pytest.mark.parametrize("verl_slowest, calibrated_slowest, status", [
    (1.01, 1.01, "n/a"),  # verl's workload idles < 2%: nothing for the calibrated model to fix
    (1.2, 1.01, "PASS"),
    (1.2, 1.1, "FAIL"),
])
def test_idle_target_applies_where_verls_workload_idles_more(verl_slowest, calibrated_slowest, status):
    case = tb.Case("lognormal", 2, calibration=None)
    case.rows = [make_row("verl", "verl", [1.0, verl_slowest], [1.0, 1.0]),
                 make_row("cal", "calibrated", [1.0, calibrated_slowest], [1.0, 1.0])]
    case.online = [make_row("s1", "online", [1.0, 1.0], [1.0, 1.0])]
    lines = training_report.target_lines([case], 0.02, 0.05, 3, 0.01, 0.02)
    assert lines[1].split()[0] == status and "calibrated idle" in lines[1]


class DriftingTrainer(tb.Trainer):
    """A micro-batch takes 1 ms per token times the machine's slowness, which
    the test changes: the speed probe must scale every run back."""

    def __init__(self, reference):
        super().__init__(TINY, Counter(), reference=reference)
        self.slowness = 1.0

    def seconds(self, pack):
        return 1e-3 * len(pack.input_ids) * self.slowness


def probed_after_a_slowdown(dp: int, slowness: float):
    """(ranks of a plan on dp ranks, their tokens, a DriftingTrainer whose
    probe started at speed 1 and whose machine then slowed by `slowness`)."""
    ranks = seqflow_plan(rollout(prompts=2 * dp, group_size=2), dp, 128, "tokens")
    rank_tokens = np.array([sum(len(p.input_ids) for p in packs) for packs in ranks])
    trainer = DriftingTrainer(tb.reference_pack(128, TINY.vocab))
    trainer.start_speed_probe()
    trainer.slowness = slowness
    return ranks, rank_tokens, trainer


def test_speed_probe_scales_rank_and_calibration_times_to_the_starting_speed():
    ranks, rank_tokens, probed = probed_after_a_slowdown(2, 2.5)  # slower after the calibration's start
    [timing] = probed.measure([ranks], repeats=3)
    np.testing.assert_allclose(timing.rank_seconds, 1e-3 * rank_tokens)
    np.testing.assert_allclose([sum(s) for s in timing.pack_seconds], 1e-3 * rank_tokens)
    assert probed.speeds == pytest.approx([2.5] * 6)  # one probe after each rank run

    unprobed = DriftingTrainer(None)
    unprobed.start_speed_probe()
    unprobed.slowness = 2.5
    np.testing.assert_allclose(unprobed.measure([ranks], repeats=3)[0].rank_seconds, 2.5e-3 * rank_tokens)
    assert unprobed.speeds == []


def test_a_straggling_probe_scales_no_rank_its_round_takes_the_median_probe():
    ranks, rank_tokens, trainer = probed_after_a_slowdown(3, 2.0)
    probes = itertools.cycle([True, False, False])  # the probe after the first rank of every round straggles

    def seconds(pack):
        straggles = pack is trainer.reference and next(probes)
        return DriftingTrainer.seconds(trainer, pack) * (10.0 if straggles else 1.0)

    trainer.seconds = seconds
    [timing] = trainer.measure([ranks], repeats=3)
    np.testing.assert_allclose(timing.rank_seconds, 1e-3 * rank_tokens)  # one probe per run would put rank 0 at 10x


def test_rank_time_is_the_sum_of_its_packs_medians_so_stragglers_in_different_runs_drop_out():
    data = rollout(prompts=4, group_size=2)
    ranks = seqflow_plan(data, 1, 128, "tokens")
    packs = ranks[0]
    assert len(packs) >= 3
    trainer = DriftingTrainer(None)
    runs_of = collections.Counter()

    def seconds(pack):  # pack i straggles in its run i: every run of the rank holds a straggler
        index = next(i for i, p in enumerate(packs) if p is pack)
        straggles = runs_of[index] == index
        runs_of[index] += 1
        return 1e-3 * len(pack.input_ids) * (5.0 if straggles else 1.0)

    trainer.seconds = seconds
    [timing] = trainer.measure([ranks], repeats=3)
    np.testing.assert_allclose(timing.rank_seconds, 1e-3 * sum(len(p.input_ids) for p in packs))
    np.testing.assert_allclose(timing.pack_seconds[0], [1e-3 * len(p.input_ids) for p in packs])


def test_plans_are_timed_in_interleaved_rounds_so_a_spell_of_the_machine_is_in_one_round_of_each():
    ranks = seqflow_plan(rollout(prompts=4, group_size=2), 2, 128, "tokens")
    plans = [ranks, [packs[::-1] for packs in ranks], ranks[::-1]]  # three plans, as long as each other
    calls_per_round = sum(len(packs) for packs in ranks)
    trainer = DriftingTrainer(None)
    calls = [0]

    def seconds(pack):  # slow for the first three rounds' worth of micro-batches
        calls[0] += 1
        return 1e-3 * len(pack.input_ids) * (4.0 if calls[0] <= 3 * calls_per_round else 1.0)

    trainer.seconds = seconds
    timings = trainer.measure(plans, repeats=5)
    for plan, timing in zip(plans, timings):  # one plan after another: the first one 4x in 3 of 5 runs
        np.testing.assert_allclose(timing.rank_seconds, [1e-3 * sum(len(p.input_ids) for p in packs) for packs in plan])


class InOrder:
    """An order generator that keeps the micro-batches in plan order (a rank after another)."""

    @staticmethod
    def permutation(count: int) -> np.ndarray:
        return np.arange(count)


@pytest.mark.parametrize("order, rank_0_factor", [(None, 1.0), (InOrder(), 4.0)])
def test_a_rounds_micro_batches_run_in_a_random_order_so_a_recurring_spell_lands_on_no_rank_whole(
        order, rank_0_factor):
    ranks = seqflow_plan(rollout(prompts=32, group_size=2), 16, 128, "tokens")
    per_round = sum(len(packs) for packs in ranks)
    spell = len(ranks[0])  # as many micro-batches as rank 0 holds
    rank_tokens = np.array([sum(len(p.input_ids) for p in packs) for packs in ranks])
    trainer = DriftingTrainer(None)
    if order is not None:
        trainer.order = order
    calls = [0]

    def seconds(pack):  # the first `spell` micro-batches of every round run 4x slower
        slow = calls[0] % per_round < spell
        calls[0] += 1
        return 1e-3 * len(pack.input_ids) * (4.0 if slow else 1.0)

    trainer.seconds = seconds
    [timing] = trainer.measure([ranks], repeats=7)
    expected = 1e-3 * rank_tokens
    expected[0] *= rank_0_factor  # in plan order the spell is rank 0's whole run in every round
    np.testing.assert_allclose(timing.rank_seconds, expected)


def test_calibration_records_are_medians_of_runs_scaled_by_the_speed_probe():
    settings = tb.Settings(max_length=128, prompts_per_rank=1, calibration_batches=12, online_steps=1,
                           cases=(("lognormal", 2),))
    trainer = DriftingTrainer(tb.reference_pack(128, TINY.vocab))
    slowness = iter([1.0] * (tb.WARMUP_BATCHES + tb.REFERENCE_RUNS) + [3.0] * 1000)
    # Micro-batch i straggles (10x) in its run i % 3, whatever order a round runs them in.
    runs_of = collections.Counter()
    index_of = {}
    runs = []

    def seconds(pack):  # slows down once the probe has its starting speed
        factor = next(slowness)
        if pack is not trainer.reference:
            runs.append(len(pack.input_ids))
            index = index_of.setdefault(id(pack), len(index_of))
            factor *= 10.0 if runs_of[id(pack)] == index % 3 else 1.0
            runs_of[id(pack)] += 1
        return 1e-3 * len(pack.input_ids) * factor

    trainer.seconds = seconds
    rng = np.random.default_rng(0)
    tb.warm_up(trainer, settings, TINY.vocab, rng)
    calibration = tb.calibrate(trainer, settings, TINY.vocab, rng, repeats=3)
    assert len(calibration.records) == 12 and len(runs) == tb.WARMUP_BATCHES + 3 * 12
    for lengths, recorded in calibration.records:
        assert recorded == pytest.approx(1e-3 * lengths.sum())
        for name in ("tokens", "calibrated"):  # both fit a time proportional to the tokens
            assert calibration.predictors[name](lengths) == pytest.approx(recorded, rel=1e-3)


class ShiftingAttentionTrainer(tb.Trainer):
    """A micro-batch takes 1 ms per token plus `attention` ms per token^2 of
    each sequence; the test changes `attention` between cases, as the
    machine's state moves the cost of long attention relative to the rest."""

    def __init__(self):
        super().__init__(TINY, Counter())
        self.attention = 1e-5

    def seconds(self, pack):
        lengths = pack_lengths(pack).astype(np.float64)
        return 1e-3 * lengths.sum() + 1e-3 * self.attention * float(lengths @ lengths)


class RaggedAttentionTrainer(tb.Trainer):
    """Attention-heavy micro-batches whose sequences cost 30% more attention
    when their length is not a multiple of 8 (as torch's CPU kernel on AVX2)."""

    def __init__(self):
        super().__init__(TINY, Counter())

    def seconds(self, pack):
        lengths = pack_lengths(pack).astype(np.int64)
        attention = np.where(lengths % 8 != 0, 1.3, 1.0) * lengths.astype(np.float64) ** 2
        return 1e-3 * lengths.sum() + 1e-5 * float(attention.sum())


def test_the_alignment_setting_fits_the_calibrated_and_online_models_with_that_term():
    settings = tb.Settings(max_length=1000, prompts_per_rank=8, calibration_batches=40, online_steps=3,
                           cases=(("bimodal", 2),))
    errors = {}
    for alignment in (1, 8):
        case = tb.run_case(RaggedAttentionTrainer(), "bimodal", 2, dataclasses.replace(settings, alignment=alignment),
                           repeats=1)
        workload = case.calibration.workload
        assert workload.alignment == alignment
        assert (workload.per_unaligned_token_squared > 0) == (alignment == 8)
        assert ("not a multiple of 8" in training_report.calibration_lines(case.calibration)[0]) == (alignment == 8)
        assert case.online[-1].predictor_name == "online"
        errors[alignment] = max(float(training_report.calibrated_row(case).errors.max()),
                                float(case.online[-1].errors.max()))
    assert errors[8] < 1e-6 < 0.01 < errors[1]  # exact with the term, off without it


def test_each_case_calibrates_right_before_its_rows_so_a_shift_between_cases_is_no_error():
    settings = tb.Settings(max_length=1000, prompts_per_rank=2, calibration_batches=20, online_steps=2,
                           cases=(("bimodal", 2), ("lognormal", 2)))
    trainer = ShiftingAttentionTrainer()
    first = tb.run_case(trainer, "bimodal", 2, settings, repeats=1)
    trainer.attention = 1e-2  # long attention became far costlier after the first case
    second = tb.run_case(trainer, "lognormal", 2, settings, repeats=1)
    calibrated = [training_report.calibrated_row(case) for case in (first, second)]
    for row in calibrated:
        np.testing.assert_allclose(row.predicted, row.measured, rtol=1e-3)
    stale = tb.predicted_ranks(first.calibration.workload.seconds, calibrated[1].ranks)
    assert (np.abs(stale - calibrated[1].measured) / calibrated[1].measured).max() > 0.2
    for case in (first, second):  # lognormal cases too calibrate on long sequences (bimodal's long mode)
        lengths = np.concatenate([lengths for lengths, _ in case.calibration.records])
        assert np.sum(lengths >= 700) >= 5


def test_results_json_holds_every_rank_pack_and_calibration_record(tmp_path):
    settings = tb.Settings(max_length=1000, prompts_per_rank=2, calibration_batches=20, online_steps=2,
                           cases=(("bimodal", 2),))
    case = tb.run_case(ShiftingAttentionTrainer(), "bimodal", 2, settings, repeats=1)
    path = training_report.write_results([case], tmp_path / "out" / "training_results.json")
    [saved] = json.loads(path.read_text())["cases"]
    assert (saved["dist"], saved["dp"]) == ("bimodal", 2)
    assert sb.Workload.from_json(json.dumps(saved["calibration"]["workload"])) == case.calibration.workload
    assert [(r["lengths"], r["seconds"]) for r in saved["calibration"]["records"]] == [
        (lengths.tolist(), seconds) for lengths, seconds in case.calibration.records]
    for rows, saved_rows in ((case.rows, saved["rows"]), (case.online, saved["online"])):
        assert [r["name"] for r in saved_rows] == [row.name for row in rows]
        for row, saved_row in zip(rows, saved_rows):
            assert saved_row["measured"] == row.measured.tolist() and saved_row["predicted"] == row.predicted.tolist()
            assert saved_row["rank_noise"] == row.timing.rank_noise.tolist()
            assert saved_row["noise_idle"] == row.timing.noise_idle
            assert [[(p["lengths"], p["seconds"], p["rounds"]) for p in packs] for packs in saved_row["packs"]] == [
                [(pack_lengths(pack).tolist(), seconds, runs.tolist()) for pack, seconds, runs in zip(packs, rank_seconds,
                                                                                                     rank_runs)]
                for packs, rank_seconds, rank_runs in zip(row.ranks, row.pack_seconds, row.timing.runs)]


def test_case_report_shows_every_row_with_its_idle_and_noise():
    settings = tb.Settings(max_length=1000, prompts_per_rank=2, calibration_batches=20, online_steps=2,
                           cases=(("bimodal", 2),))
    case = tb.run_case(ShiftingAttentionTrainer(), "bimodal", 2, settings, repeats=3)
    lines = "\n".join(training_report.case_lines(case, 3)).splitlines()
    assert case.calibration.runs == 3 and "each the median of 3 runs" in "\n".join(lines)
    for row in case.rows + case.online:
        shown = [line for line in lines if line.startswith(f"| {row.name} ")]
        assert len(shown) == (2 if row is case.online[-1] else 1)  # the last online step is in both tables
        for line in shown:
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            # the fake trainer's rounds are all alike: no noise
            assert cells[3:7] == [training_report.percent(row.idle), "3", "0.0%", "0.0%"]
    assert ("noise check: each rank's share of its row's mean from the odd and from the even runs differed by 0.0% "
            "sd (over the rows); the rank noise predicts 0.0%") in lines
    targets = training_report.target_lines([case], 0.02, 0.05, 3, 0.01, 0.02)
    assert "(noise alone: 0.0%)" in targets[1]


class NoisyTrainer(DriftingTrainer):
    """A micro-batch takes 1 ms per token times a seeded random factor of
    sd `sd` (the machine's noise), counted per plan by its packs."""

    def __init__(self, sd: float):
        super().__init__(None)
        self.sd = sd
        self.noise = np.random.default_rng(5)
        self.runs = collections.Counter()  # id(pack) -> runs

    def seconds(self, pack):
        self.runs[id(pack)] += 1
        return 1e-3 * len(pack.input_ids) * (1.0 + self.sd * self.noise.standard_normal())


def test_timing_with_round_adds_a_column_to_every_rank():
    timing = tb.Timing([np.array([[1.0, 2.0]]), np.empty((0, 2))])
    more = timing.with_round([[3.0], []])
    assert more.rounds == 3 and timing.rounds == 2
    assert [runs.tolist() for runs in more.runs] == [[[1.0, 2.0, 3.0]], []]


@pytest.mark.parametrize("bound", [0.02, 0.01])
def test_resolution_times_the_judged_plans_alone_until_their_idle_from_noise_is_under_the_bound(bound):
    ranks = seqflow_plan(rollout(prompts=16, group_size=2), 8, 128, "tokens")
    plans = [ranks, [packs[::-1] for packs in ranks], ranks[::-1]]
    trainer = NoisyTrainer(0.05)
    timings = trainer.measure(plans, 3, tb.Resolution(bound, 200), judged=[0, 2])
    assert timings[1].rounds == 3  # not judged: the common rounds only
    for plan in (0, 2):
        timing = timings[plan]
        assert 3 < timing.rounds < 200
        assert timing.noise_idle <= bound
        # the round before the last was not yet resolved
        earlier = tb.Timing([runs[:, :-1] for runs in timing.runs])
        assert earlier.noise_idle > bound
        # every pack of the plan ran in every one of its rounds
        assert all(trainer.runs[id(p)] >= timing.rounds for packs in plans[plan] for p in packs)
    assert [runs.shape for runs in timings[0].runs] == [(len(packs), timings[0].rounds) for packs in ranks]


def test_resolution_stops_at_its_most_rounds_and_without_it_measure_takes_the_repeats():
    ranks = seqflow_plan(rollout(prompts=8, group_size=2), 4, 128, "tokens")
    [capped] = NoisyTrainer(0.2).measure([ranks], 3, tb.Resolution(1e-6, 7), judged=[0])
    assert capped.rounds == 7 and capped.noise_idle > 1e-6
    [resolved] = NoisyTrainer(0.0).measure([ranks], 3, tb.Resolution(0.01, 7), judged=[0])
    assert resolved.rounds == 3  # no noise: the floor is 0 after the common rounds
    [plain] = NoisyTrainer(0.2).measure([ranks], 3)
    assert plain.rounds == 3


def test_a_case_resolves_every_balanced_row():
    settings = tb.Settings(max_length=128, prompts_per_rank=2, calibration_batches=12, online_steps=3,
                           cases=(("lognormal", 4),))
    trainer = NoisyTrainer(0.05)
    case = tb.run_case(trainer, "lognormal", 4, settings, 3, tb.Resolution(0.01, 9))
    assert case.calibration.runs == 9  # the fit behind every calibrated prediction: the most runs
    assert "each the median of 9 runs" in training_report.calibration_lines(case.calibration)[0]
    assert case.rows[0].name == "contiguous" and case.rows[0].timing.rounds == 3  # no target reads it
    for row in case.rows[1:] + case.online:  # every balanced row, the online steps' too
        assert 3 < row.timing.rounds <= 9 and (row.timing.rounds == 9 or row.timing.noise_idle <= 0.01), row.name
    assert case.online[0].predictor_name == "tokens (prior)" and case.online[1].predictor_name == "online"


def test_the_header_names_the_resolution_and_the_tables_each_rows_runs():
    settings = tb.Settings(max_length=128, prompts_per_rank=2, calibration_batches=4, online_steps=1,
                           cases=(("lognormal", 2),))
    plain = training_report.describe(TINY, settings, 4, 5, None, "cpu", "2.13.0")[1]
    assert "the median of 5 runs, a rank's" in plain
    resolved = training_report.describe(TINY, settings, 4, 5, tb.Resolution(0.01, 40), "cpu", "2.13.0")[1]
    assert ("the median of 5 runs (the balanced rows, which the targets judge: more, until their idle from noise "
            "is at most 1.0%, at most 40; a row's runs in its table; calibration micro-batches: 40)") in resolved
    assert training_report.ROW_HEADERS[3] == "runs"


@pytest.mark.parametrize("args, message", [
    (["--resolve", "0"], "--resolve must be a percentage between 0 and 100, got 0.0"),
    (["--resolve", "150"], "--resolve must be a percentage between 0 and 100, got 150.0"),
    (["--resolve", "1", "--max-repeats", "4"], "--max-repeats must be >= --repeats (5), got 4"),
])
def test_bad_resolution_arguments_are_refused_by_name(args, message, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["training_bench.py", *args])
    with pytest.raises(SystemExit) as exit_info:
        tb.main()
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_reference_pack_fills_the_cap_with_a_mix_of_lengths():
    pack = tb.reference_pack(128, TINY.vocab)
    assert pack_lengths(pack).tolist() == [64, 32, 16, 16]
    assert int(pack.input_ids.max()) < TINY.vocab


def test_speed_lines_report_the_probe_range_or_that_it_is_off():
    assert training_report.speed_lines(None, [])[0] == "speed probe: off (times as measured)"
    line = training_report.speed_lines(0.08, [0.9, 1.0, 1.3])[0]
    assert "took 80 ms at the start" in line and "after the 3 runs it took 0.90x-1.30x that (median 1.00x)" in line
