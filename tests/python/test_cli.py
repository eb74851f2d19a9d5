"""The `seqflow` command line, run as a real process."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from remote_services import require_seqflow_command

SEQFLOW = require_seqflow_command()

BALANCE_OPTIONS = [
    "FILE",
    "--k",
    "--cardinality",
    "--workload",
    "--group-size",
    "--groups",
    "--algorithm",
    "--json",
    "--compare",
    "--help",
]
DEMO_OPTIONS = ["--prompts", "--responses", "--ranks", "--seed", "--help"]

LENGTHS = [523, 17, 4096, 1200, 88, 2048, 3000, 640, 9, 1500, 777, 310, 2900, 64, 1024, 450]


def run(*args: str, stdin: str | bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [SEQFLOW, *args],
        input=stdin.encode() if isinstance(stdin, str) else stdin,
        capture_output=True,
        timeout=60,
    )


def ok(*args: str, stdin: str | bytes | None = None) -> subprocess.CompletedProcess:
    result = run(*args, stdin=stdin)
    assert result.returncode == 0, result.stderr.decode()
    return result


def plan_of(*args: str, stdin: str | bytes | None = None) -> dict:
    """Runs balance with --json - and returns the parsed plan."""
    result = ok("balance", *args, "--json", "-", stdin=stdin)
    return json.loads(result.stdout)


def assert_valid_plan(plan: dict, lengths: list[int], k: int) -> None:
    assert plan["k"] == k
    assert len(plan["parts"]) == k
    indexes = sorted(i for part in plan["parts"] for i in part)
    assert indexes == list(range(len(lengths))), "every index exactly once"
    assert plan["sums"] == [sum(lengths[i] for i in part) for part in plan["parts"]]
    assert plan["lower_bound"] >= -(-sum(lengths) // k)
    assert max(plan["sums"]) >= plan["lower_bound"]
    for key in ("spread", "gap", "max_over_mean"):
        assert isinstance(plan[key], float) and plan[key] >= 0


def write_lines(path: Path, values) -> Path:
    path.write_text("\n".join(str(v) for v in values) + "\n")
    return path


# ---- help -------------------------------------------------------------------


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["help"]])
def test_top_level_help_lists_every_command(args):
    out = ok(*args).stdout.decode()
    assert out.startswith("usage: seqflow")
    for command in ("balance", "balance-demo", "help"):
        assert re.search(rf"^  {command}\b", out, re.M), command
    assert "example:" in out


def test_no_arguments_prints_usage_and_exits_2():
    result = run()
    assert result.returncode == 2
    assert "usage: seqflow" in result.stderr.decode()


@pytest.mark.parametrize("args", [["balance", "--help"], ["balance", "-h"], ["help", "balance"]])
def test_balance_help_mentions_every_option(args):
    out = ok(*args).stdout.decode()
    assert out.startswith("usage: seqflow balance")
    for option in BALANCE_OPTIONS:
        assert option in out, option
    for value in ("free", "equal", "balanced", "tokens", "verl", "quadratic(a,b)", "auto", "kk",
                  "lpt", "npy", "JSON"):
        assert value in out, value
    assert "example:\n  seqflow balance " in out


@pytest.mark.parametrize("args", [["balance-demo", "--help"], ["help", "balance-demo"]])
def test_balance_demo_help_mentions_every_option(args):
    out = ok(*args).stdout.decode()
    assert out.startswith("usage: seqflow balance-demo")
    for option in DEMO_OPTIONS:
        assert option in out, option
    assert "example:\n  seqflow balance-demo " in out


def test_help_ignores_other_arguments():
    # --help wins even next to a missing --k or a file that does not exist.
    out = ok("balance", "no-such-file", "--help").stdout.decode()
    assert out.startswith("usage: seqflow balance")


# ---- balance: inputs --------------------------------------------------------


def test_balance_text_file_with_blank_lines(tmp_path):
    path = tmp_path / "lengths.txt"
    path.write_text("\n" + "\n\n".join(str(v) for v in LENGTHS) + "\n  \n")
    plan = plan_of(str(path), "--k", "4")
    assert_valid_plan(plan, LENGTHS, 4)


def test_balance_summary(tmp_path):
    out = ok("balance", str(write_lines(tmp_path / "l.txt", LENGTHS)), "--k", "4").stdout.decode()
    for label in ("input", "k", "cardinality", "workload", "algorithm", "part load",
                  "spread", "lower bound", "gap", "time"):
        assert re.search(rf"^{label}\s", out, re.M), label
    assert f"{len(LENGTHS)} items" in out
    assert re.search(r"min [\d,]+\s+mean [\d,.]+\s+max [\d,]+", out)
    assert re.search(r"^time\s+[\d.]+ ms$", out, re.M)
    assert re.search(r"^gap\s+[\d.]+%", out, re.M)


@pytest.mark.parametrize("file_args", [[], ["-"]])
def test_balance_reads_stdin(file_args):
    stdin = "\n".join(str(v) for v in LENGTHS)
    plan = plan_of(*file_args, "--k", "3", stdin=stdin)
    assert_valid_plan(plan, LENGTHS, 3)


def test_balance_json_list(tmp_path):
    path = tmp_path / "lengths.json"
    path.write_text("  " + json.dumps(LENGTHS, indent=2))
    assert_valid_plan(plan_of(str(path), "--k", "5"), LENGTHS, 5)
    # A JSON list on stdin too.
    assert_valid_plan(plan_of("--k", "5", stdin=json.dumps(LENGTHS)), LENGTHS, 5)


@pytest.mark.parametrize("dtype", ["<i2", "<i4", "<i8", "<u2", "<u4", "<u8"])
def test_balance_npy(tmp_path, dtype):
    path = tmp_path / "lengths.npy"
    np.save(path, np.array(LENGTHS, dtype=dtype))
    assert_valid_plan(plan_of(str(path), "--k", "4"), LENGTHS, 4)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_balance_npy_one_byte(tmp_path, dtype):
    small = [v % 100 for v in LENGTHS]
    path = tmp_path / "lengths.npy"
    np.save(path, np.array(small, dtype=dtype))
    assert_valid_plan(plan_of(str(path), "--k", "4"), small, 4)


def test_balance_npy_on_stdin(tmp_path):
    path = tmp_path / "lengths.npy"
    np.save(path, np.array(LENGTHS, dtype=np.int64))
    assert_valid_plan(plan_of("-", "--k", "2", stdin=path.read_bytes()), LENGTHS, 2)


def test_balance_large_npy_matches_text(tmp_path):
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 20000, size=5000)
    np.save(tmp_path / "l.npy", lengths.astype(np.int32))
    write_lines(tmp_path / "l.txt", lengths.tolist())
    from_npy = plan_of(str(tmp_path / "l.npy"), "--k", "16")
    from_text = plan_of(str(tmp_path / "l.txt"), "--k", "16")
    assert from_npy == from_text
    assert_valid_plan(from_npy, lengths.tolist(), 16)


# ---- balance: options -------------------------------------------------------


def test_group_size_keeps_groups_whole(tmp_path):
    lengths = [((i * 7919) % 3000) + 1 for i in range(64)]
    path = write_lines(tmp_path / "l.txt", lengths)
    plan = plan_of(str(path), "--k", "4", "--group-size", "8", "--cardinality", "equal")
    assert_valid_plan(plan, lengths, 4)
    part_of = {i: p for p, part in enumerate(plan["parts"]) for i in part}
    for group in range(8):
        assert len({part_of[i] for i in range(group * 8, group * 8 + 8)}) == 1, group
    # equal cardinality over groups: every part holds two groups of eight
    assert [len(part) for part in plan["parts"]] == [16] * 4


def test_groups_file_keeps_groups_whole(tmp_path):
    lengths = LENGTHS
    groups = [i % 4 * 10 - 5 for i in range(len(lengths))]  # ids -5, 5, 15, 25 interleaved
    path = write_lines(tmp_path / "l.txt", lengths)
    groups_path = tmp_path / "g.json"
    groups_path.write_text(json.dumps(groups))
    plan = plan_of(str(path), "--k", "2", "--groups", str(groups_path))
    assert_valid_plan(plan, lengths, 2)
    part_of = {i: p for p, part in enumerate(plan["parts"]) for i in part}
    for group in set(groups):
        assert len({part_of[i] for i, g in enumerate(groups) if g == group}) == 1


def test_cardinality_workload_algorithm_are_reported(tmp_path):
    path = write_lines(tmp_path / "l.txt", LENGTHS)
    plan = plan_of(str(path), "--k", "4", "--cardinality", "equal", "--workload",
                   "quadratic(3,2)", "--algorithm", "lpt")
    assert (plan["algorithm"], plan["cardinality"], plan["workload"]) == (
        "lpt", "equal", "quadratic(3,2)")
    assert [len(part) for part in plan["parts"]] == [4] * 4
    costs = [3 * v + 2 * v * v for v in LENGTHS]
    assert plan["sums"] == [sum(costs[i] for i in part) for part in plan["parts"]]


def test_verl_workload(tmp_path):
    path = write_lines(tmp_path / "l.txt", LENGTHS)
    plan = plan_of(str(path), "--k", "4", "--workload", "verl", "--cardinality", "balanced")
    assert plan["workload"] == "verl"
    costs = [24576 * v + v * v for v in LENGTHS]
    assert plan["sums"] == [sum(costs[i] for i in part) for part in plan["parts"]]


def test_json_to_file_keeps_summary_on_stdout(tmp_path):
    path = write_lines(tmp_path / "l.txt", LENGTHS)
    out_path = tmp_path / "plan.json"
    result = ok("balance", str(path), "--k=4", "--json", str(out_path))
    assert "part load" in result.stdout.decode()
    plan = json.loads(out_path.read_text())
    assert list(plan) == ["k", "algorithm", "cardinality", "workload", "parts", "sums",
                          "lower_bound", "spread", "gap", "max_over_mean"]
    assert_valid_plan(plan, LENGTHS, 4)


def test_json_to_stdout_moves_summary_to_stderr(tmp_path):
    path = write_lines(tmp_path / "l.txt", LENGTHS)
    result = ok("balance", str(path), "--k", "4", "--json", "-")
    json.loads(result.stdout)  # nothing but the plan on stdout
    assert "part load" in result.stderr.decode()


def test_compare_prints_every_algorithm(tmp_path):
    path = write_lines(tmp_path / "l.txt", LENGTHS)
    out = ok("balance", str(path), "--k", "4", "--compare").stdout.decode()
    header = out.splitlines()[1].split()
    assert header == ["algorithm", "time", "ms", "max", "load", "spread", "gap"]
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:]}
    assert set(rows) == {"kk", "lpt", "auto"}
    for name, row in rows.items():
        assert len(row) == 5 and row[3].endswith("%") and row[4].endswith("%"), name
    # auto keeps the best plan, so its heaviest part is never heavier
    heaviest = {name: int(row[2].replace(",", "")) for name, row in rows.items()}
    assert heaviest["auto"] <= min(heaviest["kk"], heaviest["lpt"])


def test_compare_with_json_writes_the_chosen_algorithm(tmp_path):
    path = write_lines(tmp_path / "l.txt", LENGTHS)
    result = ok("balance", str(path), "--k", "4", "--compare", "--algorithm", "kk", "--json", "-")
    assert json.loads(result.stdout)["algorithm"] == "kk"
    assert "lpt" in result.stderr.decode()


# ---- balance: bad input -----------------------------------------------------


def bad(*args: str, stdin: str | bytes | None = None, command: str = "balance") -> str:
    result = run(*args, stdin=stdin)
    err = result.stderr.decode()
    assert result.returncode == 2, (result.returncode, err)
    assert result.stdout == b""
    assert err.startswith(f"seqflow {command}: error: ")
    assert err.count("\n") == 1, err  # one line, no stack trace
    for crash in ("Traceback", "terminate called", "Aborted", "Segmentation"):
        assert crash not in err
    return err


@pytest.fixture
def lengths_file(tmp_path) -> str:
    return str(write_lines(tmp_path / "l.txt", LENGTHS))


def test_missing_k(lengths_file):
    assert "--k" in bad("balance", lengths_file)


@pytest.mark.parametrize("value", ["four", "4.0", "", "1e3"])
def test_k_not_a_number(lengths_file, value):
    err = bad("balance", lengths_file, "--k", value)
    assert f"--k: '{value}' is not an integer" in err


@pytest.mark.parametrize("value", ["0", "-3"])
def test_k_not_positive(lengths_file, value):
    assert f"--k must be >= 1, got {value}" in bad("balance", lengths_file, "--k", value)


def test_k_without_value(lengths_file):
    assert "--k needs a value" in bad("balance", lengths_file, "--k")
    assert "--compare" in bad("balance", lengths_file, "--k", "--compare")


def test_k_larger_than_items(lengths_file):
    assert "k (99)" in bad("balance", lengths_file, "--k", "99")


def test_unknown_option(lengths_file):
    assert "unknown option '--frobnicate'" in bad("balance", lengths_file, "--k", "2",
                                                  "--frobnicate")


def test_unreadable_file(tmp_path):
    missing = str(tmp_path / "missing.txt")
    err = bad("balance", missing, "--k", "2")
    assert f"FILE '{missing}'" in err and "No such file" in err
    assert "is a directory" in bad("balance", str(tmp_path), "--k", "2")


def test_non_integer_line_names_line_number(tmp_path):
    path = tmp_path / "l.txt"
    path.write_text("10\n20\n\nabc\n40\n")
    err = bad("balance", str(path), "--k", "2")
    assert f"FILE '{path}' line 4: 'abc' is not an integer" in err


def test_non_integer_on_stdin():
    assert "FILE (stdin) line 2: '2.5' is not an integer" in bad("balance", "--k", "2",
                                                                  stdin="1\n2.5\n")


def test_negative_length(tmp_path):
    path = write_lines(tmp_path / "l.txt", [5, 6, -7, 8])
    assert "line 3: length -7 is negative" in bad("balance", str(path), "--k", "2")
    json_path = tmp_path / "l.json"
    json_path.write_text("[5, -1]")
    assert "element [1]: length -1 is negative" in bad("balance", str(json_path), "--k", "2")


def test_bad_json(tmp_path):
    path = tmp_path / "l.json"
    path.write_text("[1, 2,")
    assert "not a valid JSON list" in bad("balance", str(path), "--k", "2")
    path.write_text("[1, 2.5]")
    assert "element [1]: 2.5 is not an integer" in bad("balance", str(path), "--k", "2")


def test_empty_input():
    assert "contains no lengths" in bad("balance", "--k", "2", stdin="\n\n")


@pytest.mark.parametrize(
    "array, message",
    [
        (np.ones(4, dtype=np.float64), "dtype '<f8' is not supported"),
        (np.ones(4, dtype=">i4"), "dtype '>i4' is big-endian"),
        (np.ones((2, 3), dtype=np.int64), "has 2 dimensions"),
        (np.int64(7), "has 0 dimensions"),
        (np.asfortranarray(np.ones((2, 3), dtype=np.int64)), "fortran_order"),
        (np.array([3, -1], dtype=np.int16), "element [1]: length -1 is negative"),
        (np.array([2**63 + 1], dtype=np.uint64), "out of the int64 range"),
    ],
)
def test_bad_npy(tmp_path, array, message):
    path = tmp_path / "l.npy"
    np.save(path, array)
    err = bad("balance", str(path), "--k", "1")
    assert f"FILE '{path}'" in err and message in err


def test_truncated_npy(tmp_path):
    path = tmp_path / "l.npy"
    np.save(path, np.arange(10, dtype=np.int64))
    path.write_bytes(path.read_bytes()[:-3])
    assert "truncated .npy" in bad("balance", str(path), "--k", "1")


def test_bad_group_size(lengths_file):
    assert "--group-size 3 does not divide the number of items (16)" in bad(
        "balance", lengths_file, "--k", "2", "--group-size", "3")
    assert "--group-size: 'x' is not an integer" in bad("balance", lengths_file, "--k", "2",
                                                        "--group-size", "x")


def test_bad_groups_file(tmp_path, lengths_file):
    groups = write_lines(tmp_path / "g.txt", [0, 1, 2])
    assert "--groups" in bad("balance", lengths_file, "--k", "2", "--groups", str(groups))
    assert "give only one" in bad("balance", lengths_file, "--k", "2", "--groups", str(groups),
                                  "--group-size", "2")


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--cardinality", "most", "cardinality: unknown value 'most'"),
        ("--workload", "cubic", "workload: unknown model 'cubic'"),
        ("--algorithm", "greedy", "algorithm: unknown value 'greedy'"),
    ],
)
def test_bad_choice(lengths_file, option, value, message):
    assert message in bad("balance", lengths_file, "--k", "2", option, value)


def test_equal_cardinality_error_from_engine(lengths_file):
    assert "cardinality='equal'" in bad("balance", lengths_file, "--k", "3", "--cardinality",
                                        "equal")


def test_unwritable_json(lengths_file, tmp_path):
    target = str(tmp_path / "no-dir" / "plan.json")
    assert f"--json: cannot write '{target}'" in bad("balance", lengths_file, "--k", "2",
                                                     "--json", target)


# ---- every command: a bad value exits 2 with one line naming option and value


@pytest.mark.parametrize(
    "args, option, value",
    [
        (["balance", "LENGTHS", "--k", "x"], "--k", "'x'"),
        (["balance", "LENGTHS", "--k", "0"], "--k", "0"),
        (["balance", "LENGTHS", "--k", "2", "--cardinality", "most"], "--cardinality", "'most'"),
        (["balance", "LENGTHS", "--k", "2", "--workload", "cubic"], "--workload", "'cubic'"),
        (["balance", "LENGTHS", "--k", "2", "--workload", "quadratic(a,b)"], "--workload", "quadratic(a,b)"),
        (["balance", "LENGTHS", "--k", "2", "--algorithm", "greedy"], "--algorithm", "'greedy'"),
        (["balance", "LENGTHS", "--k", "2", "--group-size", "0"], "--group-size", "0"),
        (["balance", "LENGTHS", "--k", "2", "--groups", "MISSING"], "--groups", "MISSING"),
        (["balance", "LENGTHS", "--k", "2", "--json", "NO_DIR"], "--json", "NO_DIR"),
        (["balance", "LENGTHS", "--k", "2", "--compare=yes"], "--compare", "--compare=yes"),
        (["balance", "LENGTHS", "--k", "2", "--frobnicate"], "--frobnicate", "--frobnicate"),
        (["balance", "MISSING", "--k", "2"], "FILE", "MISSING"),
        (["balance-demo", "--prompts", "x"], "--prompts", "'x'"),
        (["balance-demo", "--responses", "0"], "--responses", "0"),
        (["balance-demo", "--ranks", "-1"], "--ranks", "-1"),
        (["balance-demo", "--seed", "-1"], "--seed", "-1"),
        (["balance-demo", "--frobnicate"], "--frobnicate", "--frobnicate"),
        (["pack", "LENGTHS", "--dp", "x", "--steps", "1", "--cap", "4096"], "--dp", "'x'"),
        (["pack", "LENGTHS", "--dp", "2", "--steps", "0", "--cap", "4096"], "--steps", "0"),
        (["pack", "LENGTHS", "--dp", "2", "--steps", "1", "--cap", "0"], "--cap", "0"),
        (["pack", "LENGTHS", "--dp", "2", "--steps", "1", "--cap", "4096", "--workload", "cubic"], "--workload",
         "'cubic'"),
        (["pack", "LENGTHS", "--dp", "2", "--steps", "1", "--cap", "4096", "--pad-to", "max"], "--pad-to", "'max'"),
        (["pack", "LENGTHS", "--dp", "2", "--steps", "1", "--cap", "4096", "--pad-chunk", "0"], "--pad-chunk", "0"),
        (["pack", "LENGTHS", "--dp", "2", "--steps", "1", "--cap", "4096", "--seed", "x"], "--seed", "'x'"),
        (["pack", "LENGTHS", "--dp", "2", "--steps", "1", "--cap", "4096", "--group-size", "3"], "--group-size",
         "3"),
        (["pack", "LENGTHS", "--dp", "2", "--steps", "1", "--cap", "4096", "--json", "NO_DIR"], "--json", "NO_DIR"),
        (["pack", "MISSING", "--dp", "2", "--steps", "1", "--cap", "4096"], "FILE", "MISSING"),
        (["keygen", "NO_DIR"], "PREFIX", "NO_DIR"),
        (["keygen", "--frobnicate"], "--frobnicate", "--frobnicate"),
    ],
)
def test_bad_value_is_named_in_one_line(tmp_path, lengths_file, args, option, value):
    paths = {"LENGTHS": lengths_file, "MISSING": str(tmp_path / "missing.txt"),
             "NO_DIR": str(tmp_path / "no-dir" / "out")}
    args = [paths.get(arg, arg) for arg in args]
    err = bad(*args, command=args[0])
    assert option in err and paths.get(value, value) in err, err


def test_unknown_subcommand():
    result = run("frobnicate")
    assert result.returncode == 2
    assert "unknown command 'frobnicate'" in result.stderr.decode()
    assert "Traceback" not in result.stderr.decode()


# ---- balance-demo ------------------------------------------------------------

DEMO_METHODS = ("contiguous", "kk (verl)", "auto")


def demo_rows(out: str) -> list[list[str]]:
    """Table rows of the demo, without the timing column."""
    rows = []
    for line in out.splitlines():
        for method in DEMO_METHODS:
            if line.startswith("  " + method + " "):  # table rows are indented
                cells = line[len(method) + 2:].split()
                rows.append([method, *cells[:-1]])
    return rows


def test_demo_prints_three_methods_on_two_workloads():
    out = ok("balance-demo").stdout.decode()
    assert "512 prompts x 8 responses" in out and "64 DP ranks" in out
    rows = demo_rows(out)
    assert [row[0] for row in rows] == list(DEMO_METHODS) * 2
    assert "verl" in out and "tokens" in out
    idle = {(i // 3, row[0]): float(row[4].rstrip("%")) for i, row in enumerate(rows)}
    for table in (0, 1):
        assert idle[(table, "auto")] <= idle[(table, "kk (verl)")] < idle[(table, "contiguous")]
    assert out.rstrip().splitlines()[-1].startswith("auto cuts rank idle time from")


def test_demo_is_deterministic_and_seeded():
    first = demo_rows(ok("balance-demo", "--seed", "3").stdout.decode())
    assert first == demo_rows(ok("balance-demo", "--seed", "3").stdout.decode())
    assert first != demo_rows(ok("balance-demo", "--seed", "4").stdout.decode())


def test_demo_options():
    out = ok("balance-demo", "--prompts", "64", "--responses", "4", "--ranks", "8").stdout.decode()
    assert "64 prompts x 4 responses = 256 sequences" in out and "8 DP ranks" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["--prompts", "500"], "--prompts (500) must be a multiple of --ranks (64)"),
        (["--ranks", "0"], "--ranks must be between 1 and"),
        (["--seed", "-1"], "--seed must be >= 0, got -1"),
        (["--responses", "many"], "--responses: 'many' is not an integer"),
        (["--bogus"], "unknown option '--bogus'"),
        (["extra"], "unexpected argument 'extra'"),
    ],
)
def test_demo_bad_input(args, message):
    assert message in bad("balance-demo", *args, command="balance-demo")
