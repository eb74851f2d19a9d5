"""A TCP relay that stands between seqflow's peers, for tests of slow and
broken links where the kernel has no netem: it forwards each route's
connections to the route's target and, on command, delays every chunk, or
cuts a connection (a FIN, or an RST through SO_LINGER 0) once a set number
of bytes or chunks has passed in one direction.

    python tcp_relay.py NAME=LISTEN_HOST:PORT>TARGET_HOST:PORT ...

prints one JSON line once every route listens, then answers one JSON line
per JSON command read from stdin, and exits when stdin closes:

    {"op": "delay", "seconds": 0.03}          every chunk, each direction, from now on
    {"op": "cut", "route": "unit0", "how": "reset", "direction": "up", "pass_bytes": 1048576}
        the next connection of the route to carry more than pass_bytes in
        that direction after this command is cut there ("up": towards the
        target, "down": back; "pass_chunks": K cuts at the chunk after K)
    {"op": "cut_all", "route": "controller", "how": "close"}   every open connection, now
    {"op": "stats"}                           per route: accepted, open, bytes, cuts
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Optional

CHUNK = 1 << 16
QUEUED_CHUNKS = 64  # per direction: a slow reader holds back its writer instead of the relay's memory
COMMAND_TIMEOUT = 10.0


@dataclass
class CutRule:
    """One armed cut: the first connection past the budget is cut."""
    how: str  # "close" or "reset"
    direction: str  # "up" or "down"
    bytes_left: Optional[int]
    chunks_left: Optional[int]


@dataclass
class Route:
    name: str
    listen: tuple[str, int]
    target: tuple[str, int]
    accepted: int = 0
    cuts: int = 0
    bytes: dict = field(default_factory=lambda: {"up": 0, "down": 0})
    connections: set = field(default_factory=set)
    rule: Optional[CutRule] = None


class Connection:
    """A client's connection and the relay's own to the target."""

    def __init__(self, route: Route, relay: "Relay", client: tuple, target: tuple):
        self.route, self.relay = route, relay
        self.readers = {"up": client[0], "down": target[0]}
        self.writers = {"up": target[1], "down": client[1]}  # where each direction's bytes go
        self.cut_done = asyncio.Event()

    async def run(self) -> None:
        pumps = [asyncio.create_task(self._pump(direction)) for direction in ("up", "down")]
        cut = asyncio.create_task(self.cut_done.wait())
        # Either side's EOF or error, or a cut, ends both directions.
        await asyncio.wait([*pumps, cut], return_when=asyncio.FIRST_COMPLETED)
        for task in [*pumps, cut]:
            task.cancel()
        await asyncio.gather(*pumps, cut, return_exceptions=True)
        if not self.cut_done.is_set():
            for writer in self.writers.values():
                writer.close()

    def cut(self, how: str) -> None:
        """Closes both sockets now: with an RST when how is "reset"."""
        for writer in self.writers.values():
            if how == "reset":
                sock = writer.get_extra_info("socket")
                if sock is not None:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.transport.abort()
            else:
                writer.close()
        self.route.cuts += 1
        self.cut_done.set()

    async def _pump(self, direction: str) -> None:
        reader, writer = self.readers[direction], self.writers[direction]
        queue: asyncio.Queue = asyncio.Queue(QUEUED_CHUNKS)
        deliver = asyncio.create_task(self._deliver(queue, writer))
        try:
            how = None
            while how is None:
                chunk = await reader.read(CHUNK)
                if not chunk:
                    how = "eof"
                    break
                chunk, how = self._spend(direction, chunk)
                if chunk:
                    self.route.bytes[direction] += len(chunk)
                    await queue.put((time.monotonic() + self.relay.delay, chunk, None))
            await queue.put((time.monotonic() + self.relay.delay, b"", how))
            await deliver
        finally:
            deliver.cancel()

    def _spend(self, direction: str, chunk: bytes) -> tuple[bytes, Optional[str]]:
        """(the part of chunk to forward, how to cut after it or None)."""
        rule = self.route.rule
        if rule is None or rule.direction != direction:
            return chunk, None
        if rule.chunks_left is not None:
            if rule.chunks_left > 0:
                rule.chunks_left -= 1
                return chunk, None
            self.route.rule = None
            return b"", rule.how
        if len(chunk) <= rule.bytes_left:
            rule.bytes_left -= len(chunk)
            return chunk, None
        self.route.rule = None
        return chunk[:rule.bytes_left], rule.how

    async def _deliver(self, queue: asyncio.Queue, writer: asyncio.StreamWriter) -> None:
        """Writes each chunk when its delay is up, in order; then the cut or EOF."""
        while True:
            due, chunk, action = await queue.get()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if action == "eof":
                if writer.can_write_eof():
                    writer.write_eof()
                return
            if action is not None:
                self.cut(action)
                return
            writer.write(chunk)
            await writer.drain()


class Relay:
    def __init__(self, routes: list[Route]):
        self.routes = {route.name: route for route in routes}
        self.delay = 0.0
        self.servers = []

    async def start(self) -> None:
        for route in self.routes.values():
            server = await asyncio.start_server(lambda r, w, route=route: self._accept(route, r, w),
                                                *route.listen, reuse_address=True)
            self.servers.append(server)

    async def _accept(self, route: Route, reader, writer) -> None:
        route.accepted += 1
        try:
            target = await asyncio.wait_for(asyncio.open_connection(*route.target), COMMAND_TIMEOUT)
        except (OSError, asyncio.TimeoutError):
            writer.close()  # the client sees the refusal as a closed connection
            return
        for w in (writer, target[1]):
            w.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection = Connection(route, self, (reader, writer), target)
        route.connections.add(connection)
        try:
            await connection.run()
        finally:
            route.connections.discard(connection)

    def command(self, request: dict) -> dict:
        op = request["op"]
        if op == "delay":
            self.delay = float(request["seconds"])
            return {}
        if op == "cut":
            self.routes[request["route"]].rule = CutRule(request["how"], request["direction"],
                                                         request.get("pass_bytes"), request.get("pass_chunks"))
            return {}
        if op == "cut_all":
            route = self.routes[request["route"]]
            for connection in list(route.connections):
                connection.cut(request["how"])
            return {"cut": len(route.connections)}
        if op == "stats":
            return {name: {"accepted": route.accepted, "open": len(route.connections), "cuts": route.cuts,
                           "bytes": dict(route.bytes), "armed": route.rule is not None}
                    for name, route in self.routes.items()}
        raise ValueError(f"unknown op {op!r}")


def parse_route(text: str) -> Route:
    """NAME=HOST:PORT>HOST:PORT"""
    name, addresses = text.split("=", 1)
    listen, target = addresses.split(">", 1)

    def host_port(address: str) -> tuple[str, int]:
        host, port = address.rsplit(":", 1)
        return host, int(port)

    return Route(name, host_port(listen), host_port(target))


def main() -> None:
    relay = Relay([parse_route(text) for text in sys.argv[1:]])
    loop = asyncio.new_event_loop()
    loop.run_until_complete(relay.start())
    threading.Thread(target=loop.run_forever, daemon=True).start()
    print(json.dumps({"listening": sorted(relay.routes)}), flush=True)

    async def handle(request: dict) -> dict:
        return relay.command(request)

    for line in sys.stdin:  # commands run on the loop's thread: no locks needed
        try:
            reply = asyncio.run_coroutine_threadsafe(handle(json.loads(line)), loop).result(COMMAND_TIMEOUT)
            reply = {"ok": reply}
        except Exception as error:  # noqa: BLE001 - reported to the harness, which fails the test
            reply = {"error": repr(error)}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
