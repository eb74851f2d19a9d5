"""Back-pressure: a producer faster than its consumer against a storage capped
at --limit samples with when_full="wait", embedded (in this process) and
remote (`seqflow serve` processes: a controller and one unit). The producer
puts batches as fast as --speedup times the consumer's pace; the consumer
fetches, reads and clears. Reported per mode: samples produced and consumed,
the most the storage held (sampled after each consumer step), puts that
waited (remote: the unit's "full" answers), bytes the unit received per byte
it stored (remote: a waiting put asks whether it fits before it sends its
values again, so this stays near 1), resident memory (embedded: this
process's; remote: the unit process's) after the first minute (or the first
sixth of a shorter run) and at its most afterwards, beside the limit's bytes,
and whether every sample was read exactly once.

    python bench/back_pressure.py --seconds 600 --limit 1000 --batch 50 --speedup 4
"""

from __future__ import annotations

import argparse
import re
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

import seqflow

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))
from remote_services import LOCAL, ServeProcess  # noqa: E402


def rss_mib(pid: str = "self") -> float:
    with open(f"/proc/{pid}/status") as status:
        return int(re.search(r"VmRSS:\s+(\d+)", status.read()).group(1)) / 1024


def metric(text: str, name: str) -> float:
    """An unlabelled metric's value in a /metrics page."""
    return float(re.search(rf"^{name} (\S+)$", text, re.M).group(1))


class ExactlyOnce:
    """How often each id was read (0, 1 or 2: more than once), one byte per
    id (grown by doubling)."""

    def __init__(self) -> None:
        self.counts = np.zeros(1 << 20, np.uint8)
        self.consumed = 0

    def add(self, ids: np.ndarray) -> None:
        self.consumed += int(ids.size)
        if ids.size and int(ids.max()) >= self.counts.size:
            grown = np.zeros(max(self.counts.size * 2, int(ids.max()) + 1), np.uint8)
            grown[:self.counts.size] = self.counts
            self.counts = grown
        np.add.at(self.counts, ids, 1)
        self.counts[ids] = np.minimum(self.counts[ids], 2)  # no wrap past 255

    def holds(self, produced: int) -> bool:
        return bool((self.counts[:produced] == 1).all()) and not self.counts[produced:].any()


def run(mode: str, seconds: float, limit: int, batch: int, speedup: float, values: int) -> dict:
    processes = []
    if mode == "embedded":
        client = seqflow.Client(polling_mode=True, max_samples=limit, when_full="wait", timeout=60)
        memory_of = "self"
    else:
        controller = ServeProcess("controller", "--bind", LOCAL, "--storage-units", "1", "--polling-mode")
        processes.append(controller)
        unit = ServeProcess("storage", "--controller", controller.endpoint, "--bind", LOCAL, "--max-samples",
                            str(limit), "--when-full", "wait", "--metrics", "127.0.0.1:0")
        processes.append(unit)
        client = seqflow.Client.remote(controller.endpoint, polling_mode=True, timeout=60)
        memory_of = str(unit.process.pid)
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

    def consume(fields: list[str], count: int) -> int:
        meta = client.get_meta(fields, count, "p", task_name="train", polling=True)
        if meta.size:
            reads.add(np.asarray(client.get_data(meta)["id"]).reshape(-1))
            client.clear_samples(meta)
        return meta.size

    reads = ExactlyOnce()
    started = time.monotonic()
    warm_until = started + min(60.0, seconds / 6)
    warm_rss = peak_rss = None
    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    peak_held = 0
    deadline = started + seconds
    while time.monotonic() < deadline and not errors:
        consume(["id", "x"], batch)
        peak_held = max(peak_held, client.stats()["samples"])
        if time.monotonic() >= warm_until:
            rss = rss_mib(memory_of)
            warm_rss = rss if warm_rss is None else warm_rss
            peak_rss = rss if peak_rss is None else max(peak_rss, rss)
        time.sleep(consumer_step)
    stop.set()
    while producer.is_alive():  # a waiting put needs room to return
        consume(["id"], batch)
        producer.join(0.01)
    while consume(["id"], batch):
        pass
    waited = sent_per_stored = "-"
    if processes:
        with urllib.request.urlopen(processes[1].metrics_url + "/metrics", timeout=10) as reply:
            text = reply.read().decode()
        waited = str(int(metric(text, "seqflow_storage_puts_waited_total")))
        stored_bytes = produced[0] * (values * 4 + 8)  # "x" float32 and "id" int64 per sample
        sent_per_stored = f"{metric(text, 'seqflow_storage_put_bytes_total') / max(stored_bytes, 1):.3f}"
    client.close()
    for process in reversed(processes):
        process.stop()
    if errors:
        raise errors[0]
    return {"mode": mode, "produced": produced[0], "consumed": reads.consumed,
            "peak_held": peak_held, "waited": waited, "sent_per_stored": sent_per_stored,
            "warm_rss": warm_rss, "peak_rss": peak_rss, "exactly_once": reads.holds(produced[0])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--speedup", type=float, default=4)
    parser.add_argument("--values", type=int, default=1024, help="float32 values per sample")
    parser.add_argument("--modes", default="embedded,remote")
    args = parser.parse_args()
    limit_mib = args.limit * (args.values * 4 + 8) / 2**20
    print(f"limit {args.limit} samples ({limit_mib:.1f} MiB of values), batches of {args.batch}, "
          f"{args.values * 4} B per sample, producer {args.speedup}x the consumer's pace, {args.seconds} s per mode")
    print("| mode | produced | consumed | peak held | puts waited | bytes received per stored | "
          "RSS MiB after warm-up | RSS MiB at most afterwards | growth | exactly once |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for mode in args.modes.split(","):
        r = run(mode, args.seconds, args.limit, args.batch, args.speedup, args.values)
        print(f"| {r['mode']} | {r['produced']} | {r['consumed']} | {r['peak_held']} | {r['waited']} | "
              f"{r['sent_per_stored']} | {r['warm_rss']:.1f} | {r['peak_rss']:.1f} | "
              f"{r['peak_rss'] - r['warm_rss']:+.1f} | {r['exactly_once']} |", flush=True)


if __name__ == "__main__":
    main()
