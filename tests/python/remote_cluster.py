"""A controller and storage units as `seqflow serve` processes on 127.0.0.1
that a fault test can SIGKILL and start again on the same endpoint. Built on
the service processes of remote_services; the fixture closes the clients it
made and stops (or kills) every process it started."""

from __future__ import annotations

import signal
from typing import Optional

import pytest

import seqflow
from remote_services import LOCAL, ServeProcess


class ProcessCluster:
    """One controller process and `units` storage unit processes."""

    def __init__(self, units: int, *controller_flags: str):
        self.unit_count = units
        self.controller_flags = controller_flags
        self.controller: Optional[ServeProcess] = self._start_controller(LOCAL)
        self.address = self.controller.endpoint
        self.units: list[ServeProcess] = []
        self.clients: list[seqflow.Client] = []
        try:
            for _ in range(units):
                self.units.append(self._start_unit(LOCAL))
        except BaseException:
            self.stop()
            raise

    def _start_controller(self, bind: str, *extra_flags: str) -> ServeProcess:
        return ServeProcess("controller", "--bind", bind, "--storage-units", str(self.unit_count),
                            *self.controller_flags, *extra_flags)

    def _start_unit(self, bind: str) -> ServeProcess:
        return ServeProcess("storage", "--controller", self.address, "--bind", bind)

    def units_by_endpoint(self) -> list[ServeProcess]:
        """The units in routing order: sample gi lives on unit (gi // 64) % N (support.unit_of)."""
        return sorted(self.units, key=lambda unit: unit.endpoint)

    def client(self, timeout: float) -> seqflow.Client:
        """A remote client, closed by stop()."""
        client = seqflow.Client.remote(self.address, timeout=timeout)
        self.clients.append(client)
        return client

    def kill_unit(self, unit: ServeProcess) -> None:
        """SIGKILL: no goodbye to the controller or the clients, as in a crash."""
        unit.kill()

    def restart_unit(self, unit: ServeProcess) -> ServeProcess:
        """A fresh (empty) unit bound to the dead one's endpoint, so that the
        routing is unchanged; it registers with the controller itself."""
        replacement = self._start_unit(unit.endpoint)
        self.units[self.units.index(unit)] = replacement
        return replacement

    def kill_controller(self) -> None:
        self.controller.kill()

    def restart_controller(self, *extra_flags: str) -> ServeProcess:
        """A new controller on the old endpoint; the running storage units
        register with it by their heartbeat."""
        self.controller = self._start_controller(self.address, *extra_flags)
        return self.controller

    def stop(self) -> None:
        """SIGTERM to every live process (units first), each checked to exit 0;
        a process that fails that is killed and the failure raised at the end."""
        for client in self.clients:
            client.close()
        failures = []
        for service in [*self.units, self.controller]:
            if service is None:
                continue
            try:
                status = service.stop()
                # A killed process reports -SIGKILL: only the ones that lived must exit 0.
                if status not in (0, -signal.SIGKILL):
                    failures.append(f"{service.line!r} exited with {status}")
            except BaseException as error:  # noqa: BLE001 - the others must still stop
                service.kill()
                failures.append(f"{service.line!r}: {error}")
        if failures:
            raise AssertionError("services did not stop cleanly: " + "; ".join(failures))


@pytest.fixture
def process_cluster():
    """start(units, *controller_flags) -> ProcessCluster; all stopped at teardown."""
    started: list[ProcessCluster] = []

    def start(units: int, *controller_flags: str) -> ProcessCluster:
        cluster = ProcessCluster(units, *controller_flags)
        started.append(cluster)
        return cluster

    yield start
    for cluster in reversed(started):
        cluster.stop()

