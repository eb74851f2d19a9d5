"""Times BatchMeta's cutting, joining and pickling on a 10k-sample, 4-field
batch (one line per operation: microseconds per call, best of 5 repeats);
with --custom-meta each sample also holds a decoded custom_meta dict.

    .venv/bin/python bench/batch_meta_ops.py [--custom-meta]
"""

from __future__ import annotations

import argparse
import pickle
import timeit

import numpy as np

from seqflow import BatchMeta

SAMPLES = 10_000
FIELDS = ("input_ids", "labels", "attention_mask", "reward")


def batch(custom_meta: bool = False) -> BatchMeta:
    schema = {f: {"dtype": "int64", "shape": (128,), "is_nested": False, "is_non_tensor": False} for f in FIELDS}
    return BatchMeta(global_indexes=list(range(SAMPLES)), partition_ids=["train"] * SAMPLES, field_schema=schema,
                     production_status=np.ones(SAMPLES, dtype=np.int8), extra_info={"step": 1},
                     generations=list(range(1, SAMPLES + 1)),
                     custom_meta=[{"i": i, "tag": "t"} for i in range(SAMPLES)] if custom_meta else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--custom-meta", action="store_true")
    meta = batch(parser.parse_args().custom_meta)
    parts = meta.chunk(8)
    positions = list(np.random.default_rng(0).permutation(SAMPLES))
    half = list(range(0, SAMPLES, 2))
    pickled = pickle.dumps(meta)
    calls = {
        "chunk(8)": lambda: meta.chunk(8),
        "concat(8 parts)": lambda: BatchMeta.concat(parts),
        "select_samples(5k)": lambda: meta.select_samples(half),
        "reorder(10k)": lambda: meta.copy().reorder(positions),
        "copy()": lambda: meta.copy(),
        "pickle.dumps": lambda: pickle.dumps(meta),
        "pickle.loads": lambda: pickle.loads(pickled),
    }
    for name, call in calls.items():
        number = 20
        best = min(timeit.repeat(call, number=number, repeat=5)) / number
        print(f"{name:22s} {best * 1e6:10.1f} us")


if __name__ == "__main__":
    main()
