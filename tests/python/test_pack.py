"""Property tests of seqflow.pack: every guarantee of plan() and
micro_batches() over random inputs, and the materialised packs."""

from __future__ import annotations

import numpy as np
import pytest

from seqflow import pack


def rollout_lengths(rng, n, cap=16384):
    """A prompt of 100-1500 tokens plus a lognormal response, capped."""
    return np.minimum(rng.integers(100, 1501, n) + rng.lognormal(7.0, 1.0, n).astype(np.int64), cap)


def check_plan(p: pack.PackPlan, lengths, *, dp_size, optimizer_steps, pack_max_length,
               groups=None, pad_to="cap", pad_chunk=1024):
    lengths = np.asarray(lengths, dtype=np.int64)
    assert len(p.packs) == dp_size
    seen = np.zeros(lengths.size, dtype=np.int64)
    place = {}
    for rank in range(dp_size):
        assert len(p.packs[rank]) == optimizer_steps
        for step in range(optimizer_steps):
            packs = p.packs[rank][step]
            assert len(packs) >= 1
            assert len(packs) == len(p.packs[0][step]), "ranks differ in pack count"
            for slot, samples in enumerate(packs):
                tokens = int(lengths[samples].sum()) if samples else 0
                assert p.pack_tokens[rank][step][slot] == tokens
                assert tokens <= pack_max_length
                padded = p.padded_length(rank, step, slot)
                assert padded >= 1
                if pad_to == "cap":
                    assert padded == pack_max_length
                elif pad_to == "step_max":
                    slot_max = max(p.pack_tokens[r][step][slot] for r in range(dp_size))
                    assert padded == max(slot_max, 1)
                else:
                    assert p.pack_padding[rank][step][slot] == (1 if tokens == 0 else 0)
                pieces = p.padding_sequences(rank, step, slot)
                assert sum(pieces) == p.pack_padding[rank][step][slot]
                assert all(1 <= piece <= pad_chunk for piece in pieces)
                for s in samples:
                    seen[s] += 1
                    if groups is not None:
                        assert place.setdefault(groups[s], (rank, step)) == (rank, step)
    assert (seen == 1).all(), "every sample exactly once"
    per_step = [
        {(groups[i] if groups is not None else i) for r in range(dp_size) for pk in p.packs[r][t] for i in pk}
        for t in range(optimizer_steps)
    ]
    assert max(map(len, per_step)) - min(map(len, per_step)) <= 1, "group counts per step"
    s = p.stats
    assert s.tokens.shape == (dp_size, optimizer_steps)
    assert s.tokens.sum() == lengths.sum() == s.real_tokens
    assert s.packs_over_cap == 0
    assert (s.packs_per_step >= s.min_packs_per_step).all()
    assert s.padding_tokens == sum(
        p.pack_padding[r][t][j] for r in range(dp_size) for t in range(optimizer_steps)
        for j in range(len(p.packs[r][t]))
    )
    if s.empty_rank_steps:
        assert any("no samples" in note for note in p.notes)


CASES = [
    # n, dp, steps, cap
    (0, 4, 3, 100),
    (1, 8, 4, 100),
    (5, 4, 8, 50),
    (7, 8, 2, 1000),
    (31, 4, 8, 300),
    (64, 8, 8, 64),
    (257, 8, 4, 2048),
    (600, 7, 3, 1500),
]


@pytest.mark.parametrize("n,dp,steps,cap", CASES)
@pytest.mark.parametrize("pad_to", ["cap", "step_max", "none"])
@pytest.mark.parametrize("grouped", [False, True])
def test_plan_guarantees_on_random_inputs(n, dp, steps, cap, pad_to, grouped):
    rng = np.random.default_rng(n * 1000 + dp * 10 + steps)
    for workload in ("tokens", "verl"):
        lengths = rng.integers(0, cap + 1, n)
        groups = np.repeat(np.arange(n), rng.integers(1, 6, n))[:n] * 7 - 3 if grouped else None
        p = pack.plan(lengths, dp_size=dp, optimizer_steps=steps, pack_max_length=cap,
                      groups=groups, workload=workload, pad_to=pad_to, pad_chunk=1 + cap // 7)
        check_plan(p, lengths, dp_size=dp, optimizer_steps=steps, pack_max_length=cap,
                   groups=groups, pad_to=pad_to, pad_chunk=1 + cap // 7)


def test_fewer_samples_than_rank_steps_still_gives_every_step():
    p = pack.plan([10, 20, 30], dp_size=4, optimizer_steps=5, pack_max_length=64)
    check_plan(p, [10, 20, 30], dp_size=4, optimizer_steps=5, pack_max_length=64)
    assert p.stats.empty_rank_steps == 17
    assert "17 of 20" in p.notes[0]


def test_one_huge_sample_and_all_equal_lengths():
    lengths = [5, 100, 7, 3, 9, 1]
    p = pack.plan(lengths, dp_size=2, optimizer_steps=1, pack_max_length=100)
    check_plan(p, lengths, dp_size=2, optimizer_steps=1, pack_max_length=100)
    assert p.stats.max_pack_tokens == 100
    equal = [1000] * 256
    p = pack.plan(equal, dp_size=8, optimizer_steps=4, pack_max_length=4000)
    assert p.stats.padding_tokens == 0
    assert list(p.stats.packs_per_step) == [2, 2, 2, 2]


@pytest.mark.parametrize("n,dp,steps,cap", [(2048, 32, 8, 65536), (512, 8, 4, 32768)])
def test_rollout_batches_are_balanced_and_tight(n, dp, steps, cap):
    rng = np.random.default_rng(n)
    lengths = rollout_lengths(rng, n)
    for pad_to in ("cap", "step_max"):
        p = pack.plan(lengths, dp_size=dp, optimizer_steps=steps, pack_max_length=cap, pad_to=pad_to)
        check_plan(p, lengths, dp_size=dp, optimizer_steps=steps, pack_max_length=cap, pad_to=pad_to)
        assert p.stats.token_spread.max() <= 0.02
        assert (p.stats.packs_per_step == p.stats.min_packs_per_step).all()
        if pad_to == "step_max":
            assert p.stats.padding_ratio <= 0.15
    base = pack.xtuner_baseline(lengths, dp_size=dp, optimizer_steps=steps, pack_max_length=cap)
    ours = pack.plan(lengths, dp_size=dp, optimizer_steps=steps, pack_max_length=cap)
    assert ours.stats.padding_ratio <= base.stats.padding_ratio + 0.01


def test_bad_input_raises_value_error_naming_it():
    ok = dict(dp_size=2, optimizer_steps=2, pack_max_length=100)
    for name in ("dp_size", "optimizer_steps", "pack_max_length", "pad_chunk"):
        with pytest.raises(ValueError, match=name):
            pack.plan([1, 2, 3], **{**ok, name: 0})
    with pytest.raises(ValueError, match=r"lengths\[1\]"):
        pack.plan([1, -2, 3], **ok)
    with pytest.raises(ValueError, match=r"lengths\[2\] = 101 exceeds pack_max_length"):
        pack.plan([1, 2, 101], **ok)
    with pytest.raises(ValueError, match="groups"):
        pack.plan([1, 2, 3], groups=[0, 1], **ok)
    with pytest.raises(ValueError, match="pad_to"):
        pack.plan([1, 2, 3], pad_to="full", **ok)
    with pytest.raises(ValueError, match="dp_size"):
        pack.plan([1, 2, 3], dp_size=2.5, optimizer_steps=1, pack_max_length=10)


def test_plan_is_deterministic_and_repr_is_concise():
    rng = np.random.default_rng(3)
    lengths = rng.integers(1, 500, 300)
    a = pack.plan(lengths, dp_size=6, optimizer_steps=3, pack_max_length=2000)
    b = pack.plan(list(lengths), dp_size=6, optimizer_steps=3, pack_max_length=2000)
    assert a.packs == b.packs
    text = repr(a)
    assert text.startswith("PackPlan(samples=300, dp_size=6") and len(text) < 300
    c = pack.plan(lengths, dp_size=6, optimizer_steps=3, pack_max_length=2000, seed=9)
    check_plan(c, lengths, dp_size=6, optimizer_steps=3, pack_max_length=2000)
    assert a.to_dict()["stats"]["padding_tokens"] == a.stats.padding_tokens


def test_xtuner_baseline_keeps_its_defects():
    with pytest.raises(ValueError, match="baseline"):
        pack.xtuner_baseline([5] * 10, dp_size=4, optimizer_steps=1, pack_max_length=100)
    base = pack.xtuner_baseline([60] * 6, dp_size=2, optimizer_steps=1, pack_max_length=100)
    assert base.stats.packs_over_cap > 0


# ---------------------------------------------------------------------------
# micro_batches


def check_micro_batches(m: pack.MicroBatchPlan, lengths, cap, *, dp_size, same=True, multiple=1):
    assert len(m.batches) == dp_size
    counts = m.counts
    if same:
        assert len(set(counts)) == 1
    seen = []
    for rank, batches in enumerate(m.batches):
        assert counts[rank] % multiple == 0
        assert counts[rank] >= m.min_counts[rank]
        for i, batch in enumerate(batches):
            assert m.tokens[rank][i] == sum(lengths[j] for j in batch) <= cap
            seen.extend(batch)
    assert sorted(seen) == list(range(len(lengths)))


@pytest.mark.parametrize("n", [0, 1, 9, 150])
@pytest.mark.parametrize("dp", [1, 3, 8])
@pytest.mark.parametrize("multiple", [1, 2])
def test_micro_batches_on_random_inputs(n, dp, multiple):
    rng = np.random.default_rng(n + dp)
    lengths = rng.integers(0, 2049, n).tolist()
    for same in (True, False):
        m = pack.micro_batches(lengths, 2048, dp_size=dp, same_count_across_ranks=same,
                               count_multiple=multiple, workload="verl")
        check_micro_batches(m, lengths, 2048, dp_size=dp, same=same, multiple=multiple)


def test_micro_batches_enforce_the_cap_and_restore_order():
    lengths = [51, 51, 51, 51, 10]
    m = pack.micro_batches(lengths, 100)
    assert m.counts == [4]
    assert all(t <= 100 for t in m.tokens[0])
    outputs = np.array([lengths[i] for i in m.order()])
    assert outputs[m.restore_order()].tolist() == lengths
    with pytest.raises(ValueError, match=r"lengths\[1\] = 500 exceeds max_token_len"):
        pack.micro_batches([5, 500], 100)


def test_micro_batches_per_rank_input_and_interleave():
    m = pack.micro_batches([[90, 90, 90, 90], [10, 10]], 100)
    assert m.counts == [4, 4] and m.empty_batches == 2
    m = pack.micro_batches([100, 80, 60, 40, 20, 10], 100, count_multiple=6)
    assert m.tokens[0] == [100, 10, 80, 20, 60, 40]
    m = pack.micro_batches(list(range(40)), 100, dp_size=4)
    order = m.order(rank=2)
    restored = order[m.restore_order(rank=2)]
    assert restored.tolist() == sorted(order.tolist())


def test_inverse_permutation():
    assert pack.inverse_permutation([3, 0, 2, 1]).tolist() == [1, 3, 2, 0]
    with pytest.raises(ValueError, match="permutation"):
        pack.inverse_permutation([0, 0])


# ---------------------------------------------------------------------------
# materialize


def make_tokens(lengths, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(1, 30000, n) for n in lengths]


def test_materialize_builds_flat_packs():
    lengths = [5, 3, 7, 2, 9, 4]
    p = pack.plan(lengths, dp_size=2, optimizer_steps=1, pack_max_length=16, pad_to="cap", pad_chunk=4)
    tokens = make_tokens(lengths)
    packed = pack.materialize(p, tokens, rank=1, step=0, pad_id=0, ignore_index=-100)
    assert len(packed) == len(p.packs[1][0])
    for slot, seq in enumerate(packed):
        samples = p.packs[1][0][slot]
        assert seq.input_ids.shape == (16,)
        real = sum(lengths[i] for i in samples)
        expected = np.concatenate([tokens[i] for i in samples] + [np.zeros(16 - real, np.int64)])
        assert (seq.input_ids == expected).all()
        assert (seq.labels[real:] == -100).all() and (seq.labels[:real] == seq.input_ids[:real]).all()
        sizes = [lengths[i] for i in samples] + p.padding_sequences(1, 0, slot)
        assert seq.cu_seqlens.tolist() == np.concatenate([[0], np.cumsum(sizes)]).tolist()
        assert seq.cu_seqlens.dtype == np.int32
        assert seq.position_ids.tolist() == [i for n in sizes for i in range(n)]
        assert max(np.diff(seq.cu_seqlens)[len(samples):], default=0) <= 4
    everything = pack.materialize(p, tokens)
    assert len(everything) == 2 and len(everything[0]) == 1


def test_materialize_ragged_and_errors():
    lengths = [4, 6, 2]
    p = pack.plan(lengths, dp_size=1, optimizer_steps=1, pack_max_length=16, pad_to="none")
    tokens = make_tokens(lengths)
    ragged = pack.Ragged(np.concatenate(tokens), np.concatenate([[0], np.cumsum(lengths)]))
    a = pack.materialize(p, tokens, rank=0, step=0)
    b = pack.materialize(p, ragged, rank=0, step=0)
    assert all((x.input_ids == y.input_ids).all() for x, y in zip(a, b))
    with pytest.raises(ValueError, match="token_ids"):
        pack.materialize(p, tokens[:2])
    with pytest.raises(ValueError, match=r"token_ids\[1\] has 5 tokens"):
        pack.materialize(p, [tokens[0], tokens[1][:5], tokens[2]])


def test_materialize_torch():
    torch = pytest.importorskip("torch")
    lengths = [4, 6, 2]
    p = pack.plan(lengths, dp_size=1, optimizer_steps=1, pack_max_length=16, pad_to="step_max")
    tokens = [torch.arange(n) + 1 for n in lengths]
    (seq,) = pack.materialize(p, tokens, rank=0, step=0, backend="torch")
    assert isinstance(seq.input_ids, torch.Tensor) and seq.cu_seqlens.dtype == torch.int32
    assert seq.input_ids.shape[0] == 12


# ---------------------------------------------------------------------------
# seqflow pack (the command line)


def test_cli_pack_writes_a_plan_and_compares(tmp_path):
    from test_cli import ok  # skips when the seqflow command is not installed

    rng = np.random.default_rng(5)
    lengths = rollout_lengths(rng, 256).tolist()
    (tmp_path / "lengths.txt").write_text("\n".join(map(str, lengths)))
    result = ok("pack", str(tmp_path / "lengths.txt"), "--dp", "8", "--steps", "4", "--cap", "32768",
                "--group-size", "4", "--pad-to", "step_max", "--json", "-", "--compare")
    plan = __import__("json").loads(result.stdout)
    human = result.stderr.decode()
    assert "xtuner baseline" in human and "padding" in human
    assert plan["pad_to"] == "step_max" and len(plan["packs"]) == 8
    seen = sorted(i for rank in plan["packs"] for step in rank for p in step for i in p)
    assert seen == list(range(256))
    for rank in plan["packs"]:
        assert len(rank) == 4
    for r, rank in enumerate(plan["pack_tokens"]):
        for t, step in enumerate(rank):
            assert len(step) == len(plan["pack_tokens"][0][t])
            assert all(tokens <= 32768 for tokens in step)


def test_cli_pack_bad_input():
    from test_cli import run

    result = run("pack", "--dp", "2", "--steps", "1", "--cap", "100", stdin="5\n500\n")
    assert result.returncode == 2
    assert "lengths[1] = 500 exceeds pack_max_length" in result.stderr.decode()
    result = run("pack", "--steps", "1", "--cap", "100", stdin="5\n")
    assert result.returncode == 2 and "--dp" in result.stderr.decode()
