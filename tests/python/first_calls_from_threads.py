"""Run by test_first_calls_from_threads.py: eight threads make their first seqflow calls at once."""
import sys
import threading

sys.setswitchinterval(1e-6)  # switch threads as often as CPython allows: inside any first lookup's import too
import numpy as np  # noqa: E402

import seqflow  # noqa: E402

client = seqflow.Client(polling_mode=True)
barrier = threading.Barrier(8)
errors = []


def first_calls(rank):
    try:
        barrier.wait()
        meta = client.put({"x": np.arange(4) + rank}, partition_id=f"p{rank}")
        client.get_meta(["x"], 4, f"p{rank}", task_name="t")
        client.get_data(meta)
        client.kv_put(f"k{rank}", "kv", {"y": np.arange(2)})
    except BaseException as error:  # noqa: BLE001
        errors.append(error)


threads = [threading.Thread(target=first_calls, args=(r,)) for r in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("errors", errors)
