"""Back-pressure: a producer faster than its consumer against a storage capped
at --limit samples with when_full="wait", embedded and remote (in-process
services, one unit). The producer puts batches as fast as --speedup times the
consumer's pace; the consumer fetches, reads and clears. Reported per mode:
samples produced and consumed, the most the storage held (sampled after each
consumer step), puts that waited (remote: the unit's "full" answers), bytes
the unit received per byte it stored (remote: a waiting put asks whether it
fits before it sends its values again, so this stays near 1), the process's
peak resident memory growth, and whether every sample was read exactly once.

    python bench/back_pressure.py --seconds 20 --limit 1000 --batch 50 --speedup 4
"""

from __future__ import annotations

import argparse
import re
import threading
import time
import urllib.request

import numpy as np

import seqflow

LOCAL = "tcp://127.0.0.1:0"


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        return int(re.search(r"VmRSS:\s+(\d+)", status.read()).group(1)) / 1024


def metric(text: str, name: str) -> float:
    """An unlabelled metric's value in a /metrics page."""
    return float(re.search(rf"^{name} (\S+)$", text, re.M).group(1))


def run(mode: str, seconds: float, limit: int, batch: int, speedup: float, values: int) -> dict:
    services = []
    if mode == "embedded":
        client = seqflow.Client(polling_mode=True, max_samples=limit, when_full="wait", timeout=60)
    else:
        controller = seqflow.serve_controller(LOCAL, storage_units=1, polling_mode=True)
        unit = seqflow.serve_storage(controller.endpoint, LOCAL, max_samples=limit, when_full="wait",
                                     metrics="127.0.0.1:0")
        services = [unit, controller]
        client = seqflow.Client.remote(controller.endpoint, polling_mode=True, timeout=60)
    consumer_step = 0.002  # seconds per consumed batch
    stop = threading.Event()
    produced = [0]
    errors: list[BaseException] = []

    def produce() -> None:
        try:
            while not stop.is_set():
                ids = np.arange(produced[0], produced[0] + batch)
                client.put({"id": ids, "x": np.zeros((batch, values), np.float32)}, partition_id="p")
                produced[0] += batch
                time.sleep(consumer_step / speedup)
        except BaseException as error:  # reported below
            errors.append(error)

    base_rss = rss_mib()
    peak_rss = base_rss
    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    seen = np.zeros(0, np.int64)
    peak_held = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not errors:
        meta = client.get_meta(["id", "x"], batch, "p", task_name="train", polling=True)
        peak_held = max(peak_held, client.stats()["samples"])
        if meta.size:
            seen = np.concatenate([seen, np.asarray(client.get_data(meta)["id"]).reshape(-1)])
            client.clear_samples(meta)
        peak_rss = max(peak_rss, rss_mib())
        time.sleep(consumer_step)
    stop.set()
    while producer.is_alive():  # a waiting put needs room to return
        meta = client.get_meta(["id"], batch, "p", task_name="train", polling=True)
        if meta.size:
            seen = np.concatenate([seen, np.asarray(client.get_data(meta)["id"]).reshape(-1)])
            client.clear_samples(meta)
        producer.join(0.01)
    rest = client.get_meta(["id"], 1, "p", task_name="train", polling=True)
    while rest.size:
        seen = np.concatenate([seen, np.asarray(client.get_data(rest)["id"]).reshape(-1)])
        rest = client.get_meta(["id"], 1, "p", task_name="train", polling=True)
    waited = sent_per_stored = "-"
    if services:
        with urllib.request.urlopen(f"http://127.0.0.1:{services[0].metrics_port}/metrics", timeout=10) as reply:
            text = reply.read().decode()
        waited = str(int(metric(text, "seqflow_storage_puts_waited_total")))
        stored_bytes = produced[0] * (values * 4 + 8)  # "x" float32 and "id" int64 per sample
        sent_per_stored = f"{metric(text, 'seqflow_storage_put_bytes_total') / max(stored_bytes, 1):.3f}"
    client.close()
    for service in services:
        service.stop()
    if errors:
        raise errors[0]
    ids = np.sort(seen)
    exactly_once = len(ids) == produced[0] and bool(np.array_equal(ids, np.arange(produced[0])))
    return {"mode": mode, "produced": produced[0], "consumed": len(seen), "peak_held": peak_held,
            "waited": waited, "sent_per_stored": sent_per_stored, "rss_growth_mib": peak_rss - base_rss,
            "exactly_once": exactly_once}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--speedup", type=float, default=4)
    parser.add_argument("--values", type=int, default=1024, help="float32 values per sample")
    args = parser.parse_args()
    print(f"limit {args.limit} samples, batches of {args.batch}, {args.values * 4} B per sample, producer "
          f"{args.speedup}x the consumer's pace, {args.seconds} s per mode")
    print("| mode | produced | consumed | peak held | puts waited | bytes received per stored | RSS growth MiB "
          "| exactly once |")
    print("|---|---|---|---|---|---|---|---|")
    for mode in ("embedded", "remote"):
        r = run(mode, args.seconds, args.limit, args.batch, args.speedup, args.values)
        print(f"| {r['mode']} | {r['produced']} | {r['consumed']} | {r['peak_held']} | {r['waited']} | "
              f"{r['sent_per_stored']} | {r['rss_growth_mib']:.1f} | {r['exactly_once']} |")


if __name__ == "__main__":
    main()
