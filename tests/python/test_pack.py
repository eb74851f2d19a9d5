"""Property tests of seqflow.pack: every guarantee of plan() and
micro_batches() over random inputs, and the materialised packs."""

from __future__ import annotations

import os

import numpy as np
import pytest

from seqflow import pack
from required import require


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


def test_plan_reports_progress_per_phase_without_changing_the_plan():
    rng = np.random.default_rng(5)
    lengths = rng.integers(1, 3000, 50_000)
    grouping = dict(dp_size=8, optimizer_steps=16, pack_max_length=8192, groups=np.arange(50_000) // 4)
    calls = []
    reported = pack.plan(lengths, **grouping, progress=lambda *at: calls.append(at))
    assert reported.packs == pack.plan(lengths, **grouping).packs
    phases = list(dict.fromkeys(phase for phase, _, _ in calls))
    assert phases[0] == "steps_first" and phases[-1] == "packing"
    assert set(phases) <= {"steps_first", "steps_by_size", "packing"}
    for phase in phases:
        done = [d for p, d, total in calls if p == phase]
        assert {total for p, _, total in calls if p == phase} == {50_000}
        assert done[0] == 0 and done[-1] == 50_000 and len(done) <= 1002
        assert all(later > earlier for earlier, later in zip(done, done[1:]))
    # The phases run one after another: no phase comes back once left.
    assert [p for i, (p, _, _) in enumerate(calls) if i == 0 or calls[i - 1][0] != p] == phases


def test_plan_progress_errors_reach_the_caller():
    ok = dict(dp_size=2, optimizer_steps=2, pack_max_length=100)

    def stop(phase, done, total):
        if phase == "packing":
            raise KeyboardInterrupt(f"stopped at {phase} {done}/{total}")

    with pytest.raises(KeyboardInterrupt, match="stopped at packing 0/6"):
        pack.plan([5, 6, 7, 8, 9, 10], **ok, progress=stop)
    with pytest.raises(TypeError, match="progress must be None or a callable.*got int"):
        pack.plan([1, 2, 3], **ok, progress=3)
    with pytest.raises(TypeError):  # a callable of the wrong arity: Python's own error, from the first call
        pack.plan([1, 2, 3], **ok, progress=lambda phase: None)


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
    torch = require("torch")
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


def _without_time_line(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith("time "))


def test_cli_pack_progress_goes_to_stderr_only(tmp_path):
    from test_cli import ok

    lengths = rollout_lengths(np.random.default_rng(7), 512).tolist()
    path = tmp_path / "lengths.txt"
    path.write_text("\n".join(map(str, lengths)))
    args = ["pack", str(path), "--dp", "4", "--steps", "8", "--cap", "32768", "--group-size", "4"]
    # stderr is a pipe here: no bar unless asked for.
    quiet, forced, off = (ok(*args, *flags, "--json", "-") for flags in ([], ["--progress"], ["--no-progress"]))
    assert quiet.stdout == forced.stdout == off.stdout  # the JSON plan, byte for byte
    bar = forced.stderr.decode()
    for phase in ("steps_first", "packing"):
        assert f"\r{phase}" in bar and "] 100%  512 / 512 samples" in bar
    assert "\r" not in quiet.stderr.decode() + off.stderr.decode()
    # The summary follows the bar's finished lines unchanged.
    summary = bar[bar.rindex("\n", 0, bar.index("input ")) + 1:]
    assert _without_time_line(summary) == _without_time_line(quiet.stderr.decode())
    human, human_forced = ok(*args), ok(*args, "--progress")
    assert _without_time_line(human.stdout.decode()) == _without_time_line(human_forced.stdout.decode())
    assert "\r" not in human_forced.stdout.decode() and "packing" in human_forced.stderr.decode()


def test_cli_pack_draws_progress_when_stderr_is_a_terminal():
    import pty
    import subprocess

    from test_cli import SEQFLOW

    def stderr_on_a_terminal(*flags: str) -> str:
        leader, follower = pty.openpty()
        try:
            result = subprocess.run([SEQFLOW, "pack", "--dp", "2", "--steps", "2", "--cap", "100", *flags],
                                    input=b"5\n60\n7\n80\n", stdout=subprocess.PIPE, stderr=follower, timeout=60)
            os.close(follower)
            follower = -1
            assert result.returncode == 0 and b"samples" in result.stdout
            chunks = []
            while True:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # EIO: the terminal's other end is closed and drained
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks).decode()
        finally:
            os.close(leader)
            if follower != -1:
                os.close(follower)

    drawn = stderr_on_a_terminal()
    assert "\rpacking" in drawn and "4 / 4 samples" in drawn
    assert stderr_on_a_terminal("--no-progress") == ""


def test_cli_pack_progress_flags_are_documented_and_exclusive():
    from test_cli import ok, run

    help_text = ok("pack", "--help").stdout.decode()
    assert "--progress" in help_text and "--no-progress" in help_text and "terminal" in help_text
    result = run("pack", "--dp", "2", "--steps", "1", "--cap", "100", "--progress", "--no-progress", stdin="5\n")
    assert result.returncode == 2
    assert "--progress and --no-progress" in result.stderr.decode()


def test_cli_pack_bad_input():
    from test_cli import run

    result = run("pack", "--dp", "2", "--steps", "1", "--cap", "100", stdin="5\n500\n")
    assert result.returncode == 2
    assert "lengths[1] = 500 exceeds pack_max_length" in result.stderr.decode()
    result = run("pack", "--steps", "1", "--cap", "100", stdin="5\n")
    assert result.returncode == 2 and "--dp" in result.stderr.decode()


# ---------------------------------------------------------------------------
# Numbers at and beyond the limits: errors that name the parameter and value


LONGEST = 2**31 - 1  # packs carry int32 cu_seqlens


def test_limits_are_exported():
    assert pack.MAX_PACK_LENGTH == LONGEST
    assert pack.MAX_PLAN_LISTS == pack.MAX_PADDING_SEQUENCES == 2**20


@pytest.mark.parametrize("cap", [2**31, 2**40, 2**62])
def test_pack_max_length_beyond_int32_is_refused(cap):
    # 2**62 used to give padding_tokens == -80; 2**40 plans whose padding
    # materialises as about 10**9 padding sequences.
    with pytest.raises(ValueError, match=rf"pack_max_length = {cap} exceeds the longest pack, {LONGEST}"):
        pack.plan([10, 20, 50], dp_size=2, optimizer_steps=1, pack_max_length=cap)
    with pytest.raises(ValueError, match=rf"pack_max_length = {cap}"):
        pack.xtuner_baseline([10, 20], dp_size=2, optimizer_steps=1, pack_max_length=cap)


def test_longest_pack_gives_exact_padding():
    p = pack.plan([10, 20, 50], dp_size=2, optimizer_steps=1, pack_max_length=LONGEST, pad_chunk=2**11)
    assert p.stats.padding_tokens == 2 * LONGEST - 80
    assert p.padding_sequences(0, 0, 0)[0] == 2**11


def test_padding_is_never_billions_of_sequences():
    # pad_chunk=1 under a cap of 2^31 - 1 would describe a pack's padding with
    # 2^31 one-token sequences (16 GB as a list).
    with pytest.raises(ValueError, match=r"pad_chunk = 1024 splits pack_max_length = 2147483647 tokens into "
                                         r"2097152 padding sequences, more than 1048576; raise pad_chunk to at least 2048"):
        pack.plan([10], dp_size=1, optimizer_steps=1, pack_max_length=LONGEST)
    with pytest.raises(ValueError, match=r"pad_chunk = 1 splits pack_max_length = 2097152"):
        pack.xtuner_baseline([10], dp_size=1, optimizer_steps=1, pack_max_length=2**21, pad_chunk=1)
    with pytest.raises(ValueError, match=r"pad_chunk = 1 splits padding = 1048577 tokens"):
        pack.padding_sequences(2**20 + 1, 1)
    assert len(pack.padding_sequences(2**20, 1)) == 2**20


def test_padding_sequences_refuse_more_padding_than_a_pack():
    with pytest.raises(ValueError, match=r"padding = 1125899906842624 exceeds the longest pack"):
        pack.padding_sequences(2**50, 1)
    assert pack.padding_sequences(LONGEST, 2**30) == [2**30, 2**30 - 1]


@pytest.mark.parametrize(
    "call, fragments",
    [
        (lambda: pack.micro_batches([1, 2, 3], 10, count_multiple=2**40), ("count_multiple", "1099511627776")),
        (lambda: pack.micro_batches([1, 2, 3], 10, dp_size=2**40), ("dp_size", "1099511627776")),
        (lambda: pack.micro_batches([[1] * 1025] + [[]] * 1023, 1), ("up to 1025 per rank", "1049600")),
        (lambda: pack.xtuner_baseline([1, 2], dp_size=2**40, optimizer_steps=1, pack_max_length=9),
         ("dp_size", "1099511627776")),
        (lambda: pack.xtuner_baseline([2**40], dp_size=1, optimizer_steps=1, pack_max_length=1),
         ("packs of rank 0, step 0", "1099511627776")),
        (lambda: pack.plan([], dp_size=2048, optimizer_steps=1024, pack_max_length=9),
         ("dp_size x optimizer_steps (2048 x 1024)",)),
        (lambda: pack.plan([10] * 2048, groups=[0] * 2048, dp_size=1024, optimizer_steps=1, pack_max_length=10),
         ("packs", "2048 per rank on 1024 ranks")),
    ],
)
def test_huge_counts_are_refused_before_allocating(call, fragments):
    with pytest.raises(ValueError) as error:
        call()
    for fragment in fragments:
        assert fragment in str(error.value), str(error.value)


def test_total_workload_overflow_names_lengths():
    with pytest.raises(ValueError, match=r"^lengths: the total workload under verl overflows"):
        pack.plan([LONGEST] * 2, dp_size=1, optimizer_steps=3, pack_max_length=LONGEST, pad_chunk=2**11,
                  workload="verl")
    with pytest.raises(ValueError, match=r"^lengths: the total workload under verl overflows"):
        pack.micro_batches([2**31] * 2, 2**40, workload="verl")
    with pytest.raises(ValueError, match=r"^lengths: the total workload under tokens overflows"):
        pack.xtuner_baseline([2**62, 2**62], dp_size=1, optimizer_steps=1, pack_max_length=10)


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 2**64])
@pytest.mark.parametrize("name", ["dp_size", "optimizer_steps", "pack_max_length", "pad_chunk"])
def test_integers_beyond_int64_are_named(name, value):
    ok = dict(dp_size=2, optimizer_steps=1, pack_max_length=100)
    with pytest.raises(ValueError, match=rf"{name} = {value} is outside the int64 range"):
        pack.plan([1, 2, 3], **{**ok, name: value})


def test_seed_takes_any_uint64():
    ok = dict(dp_size=2, optimizer_steps=1, pack_max_length=100)
    assert pack.plan([1, 2, 3], seed=2**64 - 1, **ok).stats.real_tokens == 6
    with pytest.raises(ValueError, match=r"seed = 18446744073709551616 is outside 0\.\.18446744073709551615"):
        pack.plan([1, 2, 3], seed=2**64, **ok)
    with pytest.raises(ValueError, match=r"seed = -1 is outside"):
        pack.plan([1, 2, 3], seed=-1, **ok)


@pytest.mark.parametrize("workload", [("quadratic", "x", 1), ("quadratic", None, 1), ("quadratic", 2.7, 1)])
def test_bad_workload_tuple_names_value_and_accepted_values(workload):
    # ("quadratic", "x", 1) used to fail with "invalid literal for int()"; 2.7 was truncated to 2.
    with pytest.raises(ValueError) as error:
        pack.plan([1, 2], dp_size=1, optimizer_steps=1, pack_max_length=9, workload=workload)
    message = str(error.value)
    assert message.startswith(f"workload = {workload!r}: a") and "'tokens', 'verl'" in message, message


def test_micro_batches_flags_and_ranks_are_checked():
    with pytest.raises(ValueError, match=r"same_count_across_ranks must be True or False, got 'no'"):
        pack.micro_batches([1, 2], 10, same_count_across_ranks="no")
    mb = pack.micro_batches([1, 2, 3], 4, dp_size=2)
    for bad in (-1, 2):
        with pytest.raises(ValueError, match=rf"rank must be in 0\.\.1, got {bad}"):
            mb.order(bad)
        with pytest.raises(ValueError, match=rf"rank must be in 0\.\.1, got {bad}"):
            mb.restore_order(bad)
    with pytest.raises(ValueError, match=r"rank must be an integer, got 1\.0"):
        mb.order(1.0)


def test_pack_plan_accessors_check_their_indexes():
    p = pack.plan([2, 3], dp_size=2, optimizer_steps=1, pack_max_length=4)
    assert p.padded_length(1, 0, 0) == 4
    with pytest.raises(ValueError, match=r"rank must be in 0\.\.1, got -1"):
        p.padded_length(-1, 0, 0)
    with pytest.raises(ValueError, match=r"step must be in 0\.\.0, got 1"):
        p.padding_sequences(0, 1, 0)
    with pytest.raises(ValueError, match=r"slot must be in 0\.\.0, got 3"):
        p.padding_sequences(0, 0, 3)
    with pytest.raises(ValueError, match=r"slot must be an integer, got True"):
        p.padded_length(0, 0, True)


def small_plan():
    return pack.plan([2, 3], dp_size=2, optimizer_steps=1, pack_max_length=4)


def test_materialize_refuses_float_token_ids():
    # 1.7 used to become token 1.
    p = small_plan()
    with pytest.raises(ValueError, match=r"token_ids\[0\] has dtype float64; token ids and labels must be integers"):
        pack.materialize(p, [np.array([1.7, 2.0]), np.array([1, 2, 3])])
    with pytest.raises(ValueError, match=r"token_ids\[1\] has dtype float32"):
        pack.materialize(p, [[1, 2], np.array([1, 2, 3], dtype=np.float32)])
    with pytest.raises(ValueError, match=r"labels\[0\] has dtype float64"):
        pack.materialize(p, [[1, 2], [1, 2, 3]], labels=[[0.5, 1.0], [1, 2, 3]])
    with pytest.raises(ValueError, match=r"token_ids.values has dtype float64"):
        pack.materialize(p, pack.Ragged(np.arange(5.0), [0, 2, 5]))
    with pytest.raises(ValueError, match=r"token_ids\[0\] has dtype bool"):
        pack.materialize(p, [np.array([True, False]), [1, 2, 3]])


def test_materialize_refuses_float_tensors():
    torch = require("torch")
    with pytest.raises(ValueError, match=r"token_ids\[0\] has dtype torch.bfloat16"):
        pack.materialize(small_plan(), [torch.ones(2, dtype=torch.bfloat16), torch.arange(3)])


def test_materialize_keeps_large_ids_exact_across_dtypes():
    # uint64 beside int64 used to concatenate through float64 and round.
    p = pack.plan([1, 2], dp_size=1, optimizer_steps=1, pack_max_length=4, pad_to="none")
    big = 2**62 + 1
    (seq,) = pack.materialize(p, [np.array([big], dtype=np.uint64), np.array([5, 6])], rank=0, step=0)
    assert seq.input_ids.dtype == np.int64 and big in seq.input_ids.tolist()
    with pytest.raises(ValueError, match=r"token_ids\[0\] holds 18446744073709551615, beyond the int64 range"):
        pack.materialize(p, [np.array([2**64 - 1], dtype=np.uint64), [5, 6]])
    empty = pack.plan([0, 2], dp_size=1, optimizer_steps=1, pack_max_length=4, pad_to="none")
    (seq,) = pack.materialize(empty, [[], [7, 8]], rank=0, step=0)
    assert seq.input_ids.tolist() == [7, 8]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"rank": -1}, r"rank must be in 0\.\.1, got -1"),
        ({"rank": 2}, r"rank must be in 0\.\.1, got 2"),
        ({"rank": 0, "step": -1}, r"step must be in 0\.\.0, got -1"),
        ({"step": 1}, r"step must be in 0\.\.0, got 1"),
        ({"rank": 1.0}, r"rank must be an integer, got 1\.0"),
        ({"step": True}, r"step must be an integer, got True"),
        ({"rank": 2**64}, r"rank = 18446744073709551616 is outside the int64 range"),
        ({"pad_id": 1.5}, r"pad_id must be an integer, got 1\.5"),
        ({"pad_id": None}, r"pad_id must be an integer, got None"),
        ({"ignore_index": 2**63}, r"ignore_index = 9223372036854775808 is outside the int64 range"),
    ],
)
def test_materialize_checks_rank_step_and_fill_values(kwargs, message):
    # rank=-1 / step=-1 used to give the last rank / step.
    with pytest.raises(ValueError, match=message):
        pack.materialize(small_plan(), [[1, 2], [1, 2, 3]], **kwargs)


def test_materialize_names_a_bad_plan_or_token_ids():
    with pytest.raises(ValueError, match=r"plan must be a PackPlan .* got dict"):
        pack.materialize({}, [[1, 2], [1, 2, 3]])
    with pytest.raises(ValueError, match=r"token_ids must be a list of 1-D arrays .* got int"):
        pack.materialize(small_plan(), 5)
    with pytest.raises(ValueError, match=r"labels must be a list of 1-D arrays .* got float"):
        pack.materialize(small_plan(), [[1, 2], [1, 2, 3]], labels=2.5)
    with pytest.raises(ValueError, match=r"token_ids.values must be one-dimensional"):
        pack.materialize(small_plan(), pack.Ragged(np.zeros((5, 1), np.int64), [0, 2, 5]))


def test_cli_pack_refuses_a_cap_beyond_the_longest_pack():
    from test_cli import run

    result = run("pack", "--dp", "2", "--steps", "1", "--cap", str(2**40), stdin="5\n")
    assert result.returncode == 2
    message = result.stderr.decode()
    assert "--cap" in message and "1099511627776" in message and "2147483647" in message, message
