"""Runs tq_scenarios on one side and writes what they returned as JSON.

    python tq_differential_driver.py SIDE OUT_JSON [SCENARIO ...]

SIDE is ``transferqueue`` (the real TransferQueue 0.1.11: run with the
interpreter of tools/reference_peer.transferqueue_python()) or
``seqflow-embedded`` / ``seqflow-local`` (seqflow's transfer_queue through
install_as_transfer_queue(), config ``seqflow.mode`` embedded or local).
One system per scenario group (the group fixes the sampler and polling
mode), scenarios in order within it; each scenario has a deadline.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
import warnings

SIDES = ("transferqueue", "seqflow-embedded", "seqflow-local")
SCENARIO_DEADLINE_S = 60
DRAIN_SAMPLES = 64  # more than any scenario frees


class ScenarioTimeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise ScenarioTimeout(f"scenario exceeded its {SCENARIO_DEADLINE_S}s deadline")


def _import_transfer_queue(side: str):
    if side == "transferqueue":
        import ray

        # address="local": a private Ray instance, never another job's cluster. TransferQueue's
        # controller and its two storage units each reserve one (logical) CPU.
        ray.init(address="local", num_cpus=3, include_dashboard=False, log_to_driver=False)
    else:
        import seqflow.compat

        seqflow.compat.install_as_transfer_queue()
    import transfer_queue

    return transfer_queue


def _config(tq, side: str, group):
    from omegaconf import OmegaConf

    conf = {"controller": {"sampler": group.sampler(tq), "polling_mode": group.polling_mode}}
    if side != "transferqueue":
        conf["seqflow"] = {"mode": side.removeprefix("seqflow-")}
    return OmegaConf.create(conf, flags={"allow_objects": True})


def _error(error: BaseException) -> dict:
    return {"type": type(error).__name__, "message": str(error)[:500],
            "traceback": traceback.format_exc()[-3000:]}


def _start_group(tq, side: str, group, running):
    """The system for `group`: the running one when only the sampler changes on TransferQueue (its
    controller's register_sampler saves starting three Ray actors again), else a new one."""
    if side == "transferqueue" and running is not None and running[0].polling_mode == group.polling_mode:
        import ray

        controller = ray.get_actor("TransferQueueController", namespace="transfer_queue")
        ray.get(controller.register_sampler.remote(group.sampler(tq)))
        return running[1]
    if running is not None:
        tq.close()
    return tq.init(_config(tq, side, group))


def _drain(tq) -> None:
    """Takes up the global indexes a scenario freed (TransferQueue reuses them first, in its own order), so
    the next scenario's samples are numbered, and so fetched, in the order it put them."""
    import torch
    from tensordict import TensorDict

    tq.get_client().put(TensorDict({"drain": torch.zeros(DRAIN_SAMPLES, 1)}, batch_size=DRAIN_SAMPLES),
                        partition_id="zz_drain")


def run(side: str, wanted: list[str]) -> dict:
    import tq_scenarios

    tq = _import_transfer_queue(side)
    scratch = tempfile.mkdtemp(prefix=f"tq-differential-{side}-")
    results, seconds = {}, {}
    signal.signal(signal.SIGALRM, _on_alarm)
    running = None  # (group, config) of the running system
    for group_name in tq_scenarios.GROUPS:
        names = [n for n, (g, _) in tq_scenarios.SCENARIOS.items() if g == group_name and (not wanted or n in wanted)]
        if not names:
            continue
        group = tq_scenarios.GROUPS[group_name]
        started = time.monotonic()
        try:
            conf = _start_group(tq, side, group, running)
            running = (group, conf)
        except Exception as error:
            for name in names:
                results[name] = {"scenario_error": {"during": f"start of group {group_name}", **_error(error)}}
            running = None
            continue
        seconds[f"start {group_name}"] = round(time.monotonic() - started, 2)
        for name in names:
            env = tq_scenarios.Env(tq=tq, conf=conf, scratch=os.path.join(scratch, name))
            os.makedirs(env.scratch)
            started = time.monotonic()
            signal.alarm(SCENARIO_DEADLINE_S)
            try:
                results[name] = tq_scenarios.SCENARIOS[name][1](env)
            except BaseException as error:  # noqa: BLE001 - a timeout or a broken scenario is a result too
                results[name] = {"scenario_error": _error(error)}
            finally:
                signal.alarm(0)
            seconds[name] = round(time.monotonic() - started, 2)
            try:
                _drain(tq)
            except Exception as error:
                results[name] = {"scenario_error": {"during": "draining freed indexes", **_error(error)}}
    if running is not None:
        tq.close()
    if side == "transferqueue":
        import ray

        ray.shutdown()  # the Ray instance this process started, with its helper processes
    shutil.rmtree(scratch, ignore_errors=True)
    return {"side": side, "results": results, "seconds": seconds}


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in SIDES:
        print(__doc__, file=sys.stderr)
        return 2
    side, out_path, wanted = argv[0], argv[1], argv[2:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    warnings.filterwarnings("ignore")
    report = run(side, wanted)
    # json.dumps first: a result that is not plain data fails here, not half-written
    text = json.dumps(report, indent=1, sort_keys=True)
    with open(out_path, "w") as out:
        out.write(text)
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    # TransferQueue's client threads and Ray keep the interpreter alive; the report is written.
    os._exit(code)
