"""Hosts apart on one machine: the client, the controller and each storage
unit in its own Linux network namespace, joined by veth pairs to a bridge
in a "switch" namespace, on 10.200.0.0/24. Each run names its namespaces
after this process's pid, so parallel runs do not collide, and removes them
(and every process it started) on exit, failed or not.

    with HostsApart(units=2) as hosts:
        controller_address = hosts.start_services()
        client = hosts.agent("client")          # Python in the client's namespace
        client.call(connect, address=controller_address, timeout=5.0)
        hosts.link_down("unit0"); hosts.link_up("unit0")
        hosts.rate_limit("unit0", 50_000_000)   # bits/s, tbf on both ends of its link

Services are `seqflow serve` processes (remote_services.ServeProcess) run
with `ip netns exec`. Client code runs in an Agent: a Python process in a
namespace that calls module-level functions `f(state, **kwargs)` on request
and sends back their JSON result or error; `state` is a dict that lives as
long as the agent (a seqflow client, say). With `relay=True`, a TCP relay
(tcp_relay.py) in its own namespace stands between the client and the
services: it delays, closes and resets connections on command (the kernel
needs no netem).

Run as `python netns_harness.py agent`, this file is the agent."""

from __future__ import annotations

import builtins
import importlib.util
import itertools
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

SUBNET = "10.200.0"
HOST_NUMBERS = {"controller": 2, "relay": 3, "client": 10}  # unitN: 20 + N
CONTROLLER_PORT = 5555
UNIT_PORT = 6000  # unit N listens on UNIT_PORT + N (distinct, so the relay can listen for each)
METRICS_PORT = 9100
COMMAND_TIMEOUT = 10.0  # one `ip` or `tc` command
STARTUP_TIMEOUT = 20.0  # a service, agent or relay until it says it is ready
STOP_TIMEOUT = 15.0
# The token bucket's depth: four GSO packets (64 KiB each; a smaller bucket
# makes tbf split them, and TCP reaches 0.4x of 10 Gbit/s). A deeper one
# lets each transfer start at the bare veth's speed, which overstates the
# rate a bench measures (and 1 MiB and more stalled TCP at 10 Gbit/s here).
TBF_BURST = 256 * 1024
HERE = Path(__file__).resolve().parent
AGENT_ENVIRONMENT = "SEQFLOW_NETNS_AGENT"  # set in agents: the namespace they run in

_runs = itertools.count()


class NamespacesUnavailable(Exception):
    """This machine cannot make network namespaces for us (the reason says why)."""


def unavailable_reason() -> Optional[str]:
    """Why namespaces cannot be made here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root (this runs as uid %d)" % os.geteuid()
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "the iproute2 commands ip and tc are not installed"
    return None


def run(*command: str, input: Optional[str] = None) -> str:
    """Runs a command to its end (within COMMAND_TIMEOUT); its stdout, or an error with its stderr."""
    done = subprocess.run(command, input=input, capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited with {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def unit_role(index: int) -> str:
    return f"unit{index}"


def host_address(role: str) -> str:
    number = 20 + int(role[4:]) if role.startswith("unit") else HOST_NUMBERS[role]
    return f"{SUBNET}.{number}"


class HostsApart:
    """A namespace per role, a bridge between them, and what runs in them."""

    def __init__(self, units: int = 1, *, relay: bool = False):
        self.unit_count = units
        self.relay_wanted = relay
        self.name = f"sfnet{os.getpid()}-{next(_runs)}"
        self.switch = f"{self.name}-switch"
        self.roles = ["client", "controller", *map(unit_role, range(units)), *(["relay"] if relay else [])]
        self.namespaces: list[str] = []  # made so far: what close() removes
        self.services: list = []
        self.agents: list[Agent] = []
        self.relay: Optional[Relay] = None
        self.logs: Optional[Path] = None  # the agents' and the relay's stderr

    def namespace(self, role: str) -> str:
        return f"{self.name}-{role}"

    def __enter__(self) -> "HostsApart":
        # A module an agent loads runs its top level there: one that starts
        # hosts at import would start them again in every agent, recursively.
        assert AGENT_ENVIRONMENT not in os.environ, "HostsApart started inside an agent (unguarded module code?)"
        reason = unavailable_reason()
        if reason:
            raise NamespacesUnavailable(reason)
        try:
            run("ip", "netns", "add", self.switch)
        except RuntimeError as error:
            raise NamespacesUnavailable(f"cannot make a network namespace: {error}") from None
        self.namespaces.append(self.switch)
        self.logs = Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
        try:
            self._wire()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _wire(self) -> None:
        run("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
        run("ip", "-n", self.switch, "link", "set", "br0", "up")
        for role in self.roles:
            namespace = self.namespace(role)
            run("ip", "netns", "add", namespace)
            self.namespaces.append(namespace)
            # eth0 in the role's namespace; its peer, named after the role, on the switch.
            run("ip", "link", "add", "eth0", "netns", namespace, "type", "veth", "peer", "name", role,
                "netns", self.switch)
            run("ip", "-n", self.switch, "link", "set", role, "master", "br0", "up")
            run("ip", "-n", namespace, "-batch", "-", input="link set lo up\n"
                f"addr add {host_address(role)}/24 dev eth0\nlink set eth0 up\n")

    def close(self) -> None:
        """Stops every agent, relay and service (killed past their deadline),
        then removes the namespaces; raises what failed once all is gone."""
        failures = []
        for agent in self.agents:
            failures += agent.close()
        if self.relay is not None:
            failures += self.relay.close()
        for service in reversed(self.services):
            try:
                status = service.stop(timeout=STOP_TIMEOUT)
                if status not in (0, -signal.SIGKILL):
                    failures.append(f"{service.line!r} exited with {status}")
            except BaseException as error:  # noqa: BLE001 - the rest must still go
                service.kill()
                failures.append(f"{service.line!r}: {error}")
        for namespace in reversed(self.namespaces):
            try:
                run("ip", "netns", "delete", namespace)
            except (RuntimeError, subprocess.TimeoutExpired) as error:
                failures.append(str(error))
        self.namespaces.clear()
        self.services.clear()
        self.agents.clear()
        self.relay = None
        if self.logs is not None:
            shutil.rmtree(self.logs, ignore_errors=True)
        if failures:
            raise AssertionError("tearing the namespaces down: " + "; ".join(failures))

    # ---- what runs in the namespaces --------------------------------------

    def serve(self, role: str, service: str, *flags: str):
        """`seqflow serve SERVICE FLAGS` in the role's namespace, serving on return."""
        from remote_services import ServeProcess  # imports seqflow: not needed by the agent

        process = ServeProcess(service, *flags, startup_timeout=STARTUP_TIMEOUT,
                               wrapper=("ip", "netns", "exec", self.namespace(role)))
        self.services.append(process)
        return process

    def start_services(self, *, metrics: bool = False) -> str:
        """The controller and every unit, each in its namespace; with a relay,
        the relay too, and the units advertise their route through it. Returns
        the controller address a client uses (the relay's, with a relay).
        metrics: each unit serves its metrics (metrics_url)."""
        controller = f"tcp://{host_address('controller')}:{CONTROLLER_PORT}"
        if self.relay_wanted:
            routes = {"controller": (CONTROLLER_PORT, "controller", CONTROLLER_PORT)}
            routes.update({unit_role(i): (UNIT_PORT + i, unit_role(i), UNIT_PORT + i) for i in range(self.unit_count)})
            self.relay = Relay(self.namespace("relay"), routes, self.logs / "relay.log")
        self.serve("controller", "controller", "--bind", controller, "--storage-units", str(self.unit_count))
        for i in range(self.unit_count):
            role = unit_role(i)
            flags = ["--bind", f"tcp://{host_address(role)}:{UNIT_PORT + i}", "--controller", controller]
            if self.relay_wanted:
                # Clients (and the controller) reach the unit through the relay.
                flags += ["--advertise", f"tcp://{host_address('relay')}:{UNIT_PORT + i}"]
            if metrics:
                flags += ["--metrics", f"{host_address(role)}:{METRICS_PORT}"]
            self.serve(role, "storage", *flags)
        if self.relay_wanted:
            return f"tcp://{host_address('relay')}:{CONTROLLER_PORT}"
        return controller

    def metrics_url(self, unit: int) -> str:
        """Where unit `unit` serves its metrics (start_services(metrics=True)), seen from any namespace."""
        return f"http://{host_address(unit_role(unit))}:{METRICS_PORT}/metrics"

    def agent(self, role: str, environment: Optional[dict[str, str]] = None) -> "Agent":
        """A Python process in the role's namespace, with this process's
        environment plus `environment`."""
        agent = Agent(self.namespace(role), self.logs / f"agent-{role}-{len(self.agents)}.log", environment)
        self.agents.append(agent)
        return agent

    # ---- the links ----------------------------------------------------------

    def link_down(self, role: str) -> None:
        """Pulls the role's cable: its switch port goes down (the role's eth0 loses its carrier)."""
        run("ip", "-n", self.switch, "link", "set", role, "down")

    def link_up(self, role: str) -> None:
        run("ip", "-n", self.switch, "link", "set", role, "up")
        deadline = time.monotonic() + COMMAND_TIMEOUT
        while not self._carrier(role):
            if time.monotonic() > deadline:
                raise AssertionError(f"the link of {role} has no carrier {COMMAND_TIMEOUT} s after it was set up")
            time.sleep(0.01)

    def _carrier(self, role: str) -> bool:
        ends = [("-n", self.switch, role), ("-n", self.namespace(role), "eth0")]
        return all(json.loads(run("ip", "-j", flag, namespace, "link", "show", "dev", device))[0]["operstate"] == "UP"
                   for flag, namespace, device in ends)

    def rate_limit(self, role: str, bits_per_second: Optional[int]) -> None:
        """A token bucket (tbf) of `bits_per_second` on both ends of the
        role's link, so each direction is limited; None lifts it (if set)."""
        ends = [(self.switch, role), (self.namespace(role), "eth0")]
        for namespace, device in ends:
            if bits_per_second is None:
                qdiscs = json.loads(run("tc", "-j", "-n", namespace, "qdisc", "show", "dev", device))
                if any(qdisc["kind"] == "tbf" for qdisc in qdiscs):
                    run("tc", "-n", namespace, "qdisc", "del", "dev", device, "root")
                continue
            run("tc", "-n", namespace, "qdisc", "replace", "dev", device, "root", "tbf", "rate",
                f"{bits_per_second}bit", "burst", str(TBF_BURST), "latency", "20ms")

    def link_bytes(self, role: str) -> dict[str, int]:
        """Bytes its switch port sent the role ("to") and received from it ("from")."""
        stats = json.loads(run("ip", "-j", "-s", "-n", self.switch, "link", "show", "dev", role))[0]["stats64"]
        return {"to": stats["tx"]["bytes"], "from": stats["rx"]["bytes"]}

    def wait_for_link_bytes(self, role: str, direction: str, at_least: int, timeout: float) -> None:
        """Waits until the role's port has moved `at_least` more bytes in direction "to" or "from"."""
        start = self.link_bytes(role)[direction]
        deadline = time.monotonic() + timeout
        while self.link_bytes(role)[direction] - start < at_least:
            if time.monotonic() > deadline:
                raise AssertionError(f"{at_least} bytes did not pass {direction} {role} within {timeout} s")
            time.sleep(0.005)


# ---- lines from a child's stdout, each by a deadline ---------------------------

class LineReader:
    def __init__(self, process: subprocess.Popen, what: str, log: Optional[Path]):
        self.process, self.what, self.log = process, what, log
        self.buffer = b""

    def read(self, timeout: float) -> dict:
        """The next line as JSON; AssertionError if none comes in time or the process ends."""
        deadline = time.monotonic() + timeout
        fd = self.process.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(left, 0))
            if not ready:
                raise AssertionError(f"{self.what} said nothing within {timeout} s{self._log_tail()}")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise AssertionError(f"{self.what} ended (status {self.process.wait(STOP_TIMEOUT)})"
                                     f"{self._log_tail()}")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def _log_tail(self) -> str:
        if self.log is None or not self.log.exists():
            return ""
        return "; its stderr ends: " + self.log.read_text(errors="replace")[-2000:]


def stop_child(process: subprocess.Popen, what: str) -> list[str]:
    """Closes its stdin (the child's signal to exit) and waits; kills it past
    STOP_TIMEOUT. The failures, as text."""
    if process.stdin:
        try:
            process.stdin.close()
        except OSError:
            pass
    try:
        status = process.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(STOP_TIMEOUT)
        return [f"{what} did not exit within {STOP_TIMEOUT} s of its stdin closing (killed)"]
    finally:
        process.stdout.close()
    return [] if status in (0, -signal.SIGKILL) else [f"{what} exited with {status}"]


# ---- the relay --------------------------------------------------------------

class Relay:
    """tcp_relay.py in a namespace; routes: name -> (listen port, target role, target port)."""

    def __init__(self, namespace: str, routes: dict[str, tuple[int, str, int]], log: Path):
        relay_host = host_address("relay")
        arguments = [f"{name}={relay_host}:{port}>{host_address(role)}:{target_port}"
                     for name, (port, role, target_port) in routes.items()]
        self.log = log
        with open(log, "wb") as stderr:
            self.process = subprocess.Popen(["ip", "netns", "exec", namespace, sys.executable, "-u",
                                             str(HERE / "tcp_relay.py"), *arguments],
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
        self.lines = LineReader(self.process, "the relay", log)
        try:
            self.lines.read(STARTUP_TIMEOUT)
        except BaseException:
            self.close()
            raise

    def command(self, **request) -> Any:
        self.process.stdin.write((json.dumps(request) + "\n").encode())
        self.process.stdin.flush()
        reply = self.lines.read(COMMAND_TIMEOUT)
        if "error" in reply:
            raise AssertionError(f"the relay refused {request}: {reply['error']}")
        return reply["ok"]

    def delay(self, seconds: float) -> None:
        """Every chunk from now on arrives `seconds` later, in each direction."""
        self.command(op="delay", seconds=seconds)

    def cut(self, route: str, how: str, direction: str, *, pass_bytes: Optional[int] = None,
            pass_chunks: Optional[int] = None) -> None:
        """Arms one cut ("close": a FIN, "reset": an RST) of the route's next
        connection to carry more than pass_bytes (or pass_chunks chunks) in
        `direction` ("up": towards the service, "down": back)."""
        self.command(op="cut", route=route, how=how, direction=direction, pass_bytes=pass_bytes,
                     pass_chunks=pass_chunks)

    def cut_all(self, route: str, how: str) -> int:
        return self.command(op="cut_all", route=route, how=how)["cut"]

    def stats(self) -> dict:
        """Per route: accepted, open, cuts, bytes {"up", "down"}, armed."""
        return self.command(op="stats")

    def close(self) -> list[str]:
        return stop_child(self.process, "the relay")


# ---- Python in a namespace ------------------------------------------------------

@dataclass
class Outcome:
    """What a call in an agent did: its value or its error, and how long it ran there."""
    value: Any
    error: Optional[BaseException]
    seconds: float


def rebuilt_error(described: dict) -> BaseException:
    """The agent's error as the nearest built-in exception type, its message
    led by the original type's name (seqflow's StaleSampleError: a KeyError)."""
    kind = getattr(builtins, described["builtin"], Exception)
    error = kind(f"{described['type']}: {described['message']}")
    error.remote_type = described["type"]
    return error


class PendingCall:
    def __init__(self, agent: "Agent", name: str):
        self.agent, self.name = agent, name
        self.outcome_: Optional[Outcome] = None

    def outcome(self, timeout: float) -> Outcome:
        """Waits up to `timeout` for the call to end; a call still running
        then is a hang: the agent is killed and AssertionError raised."""
        if self.outcome_ is None:
            try:
                reply = self.agent.lines.read(timeout)
            except AssertionError as error:
                self.agent.process.kill()
                raise AssertionError(f"{self.name} in {self.agent.namespace}: {error}") from None
            finally:
                self.agent.pending = None
            error = rebuilt_error(reply["error"]) if "error" in reply else None
            self.outcome_ = Outcome(reply.get("value"), error, reply["seconds"])
        return self.outcome_

    def result(self, timeout: float) -> Any:
        outcome = self.outcome(timeout)
        if outcome.error is not None:
            raise outcome.error
        return outcome.value


class Agent:
    """A Python process in `namespace` that runs one function at a time:
    start(f, **kwargs) sends it, PendingCall.outcome(timeout) collects it."""

    def __init__(self, namespace: str, log: Path, environment: Optional[dict[str, str]] = None):
        self.namespace, self.log = namespace, log
        self.pending: Optional[PendingCall] = None
        with open(log, "wb") as stderr:
            self.process = subprocess.Popen(["ip", "netns", "exec", namespace, sys.executable, "-u", __file__,
                                             "agent"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                            env={**os.environ, **(environment or {}), AGENT_ENVIRONMENT: namespace})
        self.lines = LineReader(self.process, f"the agent in {namespace}", log)
        try:
            self.lines.read(STARTUP_TIMEOUT)
        except BaseException:
            self.close()
            raise

    def start(self, function: Callable, /, **kwargs) -> PendingCall:
        """Runs function(state, **kwargs) in the agent; it must be a
        module-level function of an importable file, kwargs JSON."""
        assert self.pending is None, f"{self.pending.name} is still running in {self.namespace}"
        module = sys.modules[function.__module__]
        request = {"file": module.__file__, "module": function.__module__, "function": function.__qualname__,
                   "kwargs": kwargs}
        self.process.stdin.write((json.dumps(request) + "\n").encode())
        self.process.stdin.flush()
        self.pending = PendingCall(self, function.__qualname__)
        return self.pending

    def call(self, function: Callable, wait_seconds: float, /, **kwargs) -> Any:
        """function's value within wait_seconds, or its error raised here (rebuilt_error)."""
        return self.start(function, **kwargs).result(wait_seconds)

    def close(self) -> list[str]:
        return stop_child(self.process, f"the agent in {self.namespace}")


def _agent_main() -> None:
    state: dict[str, Any] = {}
    modules: dict[str, Any] = {}
    print(json.dumps({"ready": os.getpid()}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        module = modules.get(request["file"])
        if module is None:
            # By file: the caller may be a script (__main__) or a test module outside sys.path.
            name = "agent_target" if request["module"] == "__main__" else request["module"]
            spec = importlib.util.spec_from_file_location(name, request["file"])
            module = modules[request["file"]] = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        started = time.monotonic()
        try:
            reply = {"value": getattr(module, request["function"])(state, **request["kwargs"])}
        except Exception as error:  # noqa: BLE001 - sent to the caller, which judges it
            builtin = next(kind.__name__ for kind in type(error).__mro__ if getattr(builtins, kind.__name__, None)
                           is kind)
            reply = {"error": {"type": type(error).__name__, "builtin": builtin, "message": str(error)}}
        reply["seconds"] = time.monotonic() - started
        print(json.dumps(reply), flush=True)
    for value in state.values():  # stdin closed: the caller is done
        close = getattr(value, "close", None)
        if close is not None:
            close()


if __name__ == "__main__" and sys.argv[1:] == ["agent"]:
    _agent_main()
