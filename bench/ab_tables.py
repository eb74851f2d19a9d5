"""One benchmark script run by two installs side by side: A, B, A, B, ...
(each install's own interpreter, so each runs its own build), then every
numeric cell of the tables the script prints, as the median over the rounds
for A and for B, their ratio B / A, and A's own spread (max / min of its
rounds) as the noise floor: a ratio within it is no difference. Rows are
matched by their table's position and their first cell (the n-th row with
the same first cell as "cell #n").

    python bench/ab_tables.py OLD_VENV/bin/python NEW_VENV/bin/python --rounds 3 --columns ms \
        --a-root OLD_TREE --b-root . -- bench/pack_bench.py --rollouts 5

Each install runs the script from its own tree when --a-root / --b-root name
one (a benchmark that changed between the commits then runs as each commit
wrote it); by default both run the one given.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
from pathlib import Path

NUMBER = re.compile(r"^-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def cells(line: str) -> list[str]:
    """A table line's cells: between | bars, or apart by two or more spaces."""
    if line.lstrip().startswith("|"):
        return [cell.strip() for cell in line.strip().strip("|").split("|")]
    return [cell for cell in re.split(r"\s{2,}", line.strip()) if cell]


def tables(output: str) -> dict[tuple[int, str], dict[str, float]]:
    """(table ordinal, first cell) -> {column header: number} for every row of
    every table: a block of lines whose first (the header) has three cells or
    more, and whose rows have as many."""
    out: dict[tuple[int, str], dict[str, float]] = {}
    ordinal, header = -1, None
    for line in output.splitlines():
        row = cells(line) if line.strip() else []
        if header is not None and len(row) == len(header):
            if all(set(cell) <= set("-: ") for cell in row):
                continue  # a markdown rule
            numbers = {}
            for name, cell in zip(header[1:], row[1:]):
                match = NUMBER.match(cell.replace(",", ""))
                if match:
                    numbers[name] = float(match.group(0))
            key, seen = row[0], 1
            while (ordinal, key) in out:  # rows that share a first cell (one size, 1, 2 and 4 units) stay apart
                seen += 1
                key = f"{row[0]} #{seen}"
            out[(ordinal, key)] = numbers
        elif len(row) >= 3:
            ordinal, header = ordinal + 1, row
        else:
            header = None
    return out


def run(python: str, root: Path | None, script: list[str]) -> str:
    path = Path(script[0])
    command = [python, str(root / path if root else path), *script[1:]]
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a_python")
    parser.add_argument("b_python")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each install, alternated (default 3)")
    parser.add_argument("--a-root", type=Path, help="run the script from this tree for A")
    parser.add_argument("--b-root", type=Path, help="run the script from this tree for B")
    parser.add_argument("--columns", nargs="+", default=None, metavar="TEXT",
                        help="only columns whose header holds one of these (e.g. ms us): the timings")
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args, script = parser.parse_args(argv[:split]), argv[split + 1:]
    if not script:
        parser.error("name the benchmark script after --")
    if args.rounds < 2:
        parser.error(f"--rounds must be >= 2 (A's spread is the noise floor), got {args.rounds}")
    runs: dict[str, list[dict]] = {"A": [], "B": []}
    for _ in range(args.rounds):
        runs["A"].append(tables(run(args.a_python, args.a_root, script)))
        runs["B"].append(tables(run(args.b_python, args.b_root, script)))
    print(f"$ {' '.join(script)}: A = {args.a_python}, B = {args.b_python}, {args.rounds} rounds each, alternated")
    print("| table | row | column | A | B | B / A | A noise |")
    print("|---|---|---|---|---|---|---|")
    for key in runs["A"][0]:
        for column in runs["A"][0][key]:
            if args.columns and not any(text in column for text in args.columns):
                continue
            a = [r[key][column] for r in runs["A"] if column in r.get(key, {})]
            b = [r[key][column] for r in runs["B"] if column in r.get(key, {})]
            if len(a) != args.rounds or len(b) != args.rounds or min(a) <= 0:
                continue
            a_median, b_median = statistics.median(a), statistics.median(b)
            print(f"| {key[0]} | {key[1]} | {column} | {a_median:.4g} | {b_median:.4g} | "
                  f"{b_median / a_median:.2f} | {max(a) / min(a):.2f} |")


if __name__ == "__main__":
    main()
