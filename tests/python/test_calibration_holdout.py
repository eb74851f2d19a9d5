"""bench/calibration_holdout.py: its error cells are measured against the
packs' own times, and tell a fit that misses the alignment cost from one that
has it."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from required import require

require("torch")
require("tensordict")

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import calibration_holdout as holdout  # noqa: E402
import seqflow.balance as sb  # noqa: E402
from training_data import make_rollout  # noqa: E402
from training_splits import pack_lengths  # noqa: E402

CAP = 1024
TRUTH = sb.Workload.calibrated(per_token=1e-4, per_token_squared=2e-7, per_sequence=2e-3, per_micro_batch=1e-2,
                               per_unaligned_token_squared=4e-8, alignment=8)
FOUR_TERMS = sb.Workload.calibrated(per_token=1e-4, per_token_squared=2e-7, per_sequence=2e-3, per_micro_batch=1e-2)


def test_error_cells_measure_each_fit_against_the_packs_times():
    rollout = make_rollout("bimodal", 16, 4, CAP, 64, np.random.default_rng(0))
    plans = holdout.held_out_plans(rollout, 4, CAP)
    assert list(plans) == ["seqflow, tokens", "seqflow, verl workload", "verl KK, verl workload"]
    for ranks in plans.values():
        seconds = [[TRUTH.seconds(pack_lengths(p)) for p in packs] for packs in ranks]
        exact = holdout.error_cells(TRUTH, ranks, seconds, 8, 700)
        assert exact[:2] == ["0.0%", "0.0%"] and exact[-1] == "0.0%"
        assert exact[2] == "-" or exact[2].startswith("+0.0%")
        unaligned_packs = int(exact[3].split("(")[1].rstrip(")"))
        assert unaligned_packs > 0
        assert exact[3] in (f"+0.0% ({unaligned_packs})", f"-0.0% ({unaligned_packs})")
        missed = holdout.error_cells(FOUR_TERMS, ranks, seconds, 8, 700)
        assert float(missed[3].split("%")[0]) < -1  # the four terms underprice unaligned long packs
        assert float(missed[0].rstrip("%")) > 0
