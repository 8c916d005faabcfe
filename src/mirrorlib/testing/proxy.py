"""A userspace TCP proxy that plays a network link: latency, a bandwidth cap, cuts, black holes.

The kernel of a CI machine usually has no ``netem`` and tests must not need root, so network
faults between a client and a cluster are made in userspace: one proxy *process* per cluster
listens on one port per broker node and forwards every connection to that node's client port.
Brokers of a cluster started with ``proxy=True`` advertise the proxy's ports, so every client
connection goes through it; controller and inter-broker traffic use their own listeners and
never do. The proxy runs in a process of its own (``python -m mirrorlib.testing.proxy``), so it
does not share the GIL with the process under test; :class:`NetworkLink` controls it from the
test process over a pipe (one JSON line per command), and the proxy exits when that pipe closes.

The link's state applies to every connection of every node, in both directions:

``latency_ms``
    Added delay, **one way**, in each direction (so a request/response round trip gets
    ``2 * latency_ms`` more). Every chunk read from one side is written to the other
    ``latency_ms`` after it arrived, in order and pipelined: a 100 ms delay does not limit a
    connection to one chunk per 100 ms.
``bandwidth``
    Bytes per second per direction for the whole link (all connections share it), or ``None``.
``cut``
    Existing connections are reset (RST) and new ones are accepted and reset at once: clients
    see connection errors immediately, as when a firewall rejects them.
``blackhole``
    Connections stay open but nothing moves: bytes in flight and new bytes are held, new
    connections are accepted and never answered, as on a dead WAN link (clients see timeouts).
    After :meth:`NetworkLink.heal` what was held is delivered, as TCP retransmits would.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, Self

import attrs

from mirrorlib.errors import TestClusterError

__all__ = ["LinkState", "LinkStats", "NetworkLink", "Route"]

#: Largest chunk read at once (and so the granularity of delay and bandwidth shaping).
CHUNK = 256 * 1024
#: Bytes a connection may hold per direction before it stops reading (TCP back-pressure then
#: reaches the sender). Must exceed bandwidth x one-way delay, or the delay caps throughput.
MAX_HELD = 64 * 1024 * 1024
#: Burst allowance of the bandwidth cap, in seconds of the configured rate.
BURST_S = 0.005


@attrs.frozen
class Route:
    """Listen on ``listen`` (host, port) and forward each connection to ``upstream``."""

    listen: tuple[str, int]
    upstream: tuple[str, int]

    def arg(self) -> str:
        return f"{self.listen[0]}:{self.listen[1]}={self.upstream[0]}:{self.upstream[1]}"

    @classmethod
    def parse(cls, text: str) -> Route:
        listen, _, upstream = text.partition("=")

        def hp(s: str) -> tuple[str, int]:
            host, _, port = s.rpartition(":")
            return host, int(port)

        return cls(hp(listen), hp(upstream))


@attrs.frozen
class LinkState:
    """What the link does now (see the module documentation)."""

    latency_ms: float = 0.0
    bandwidth: int | None = None
    cut: bool = False
    blackhole: bool = False

    @property
    def rtt_ms(self) -> float:
        """The round-trip time the proxy adds: twice the one-way ``latency_ms``."""
        return 2 * self.latency_ms


@attrs.frozen
class LinkStats:
    """Counters of the proxy process since it started."""

    #: Bytes forwarded from clients to brokers / from brokers to clients.
    bytes_up: int
    bytes_down: int
    #: Connections open now / accepted in all / reset by a cut or refused while cut.
    open_connections: int
    accepted: int
    reset: int
    #: CPU seconds (user + system) the proxy process used.
    cpu_seconds: float
    pid: int


# ---------------------------------------------------------------------------------------------
# the proxy process


class _Bucket:
    """A shared bandwidth cap for one direction: a virtual clock of when the link is free."""

    def __init__(self) -> None:
        self.free_at = 0.0

    def reserve(self, n: int, rate: int | None, now: float) -> float:
        """Reserve the link for ``n`` bytes; the time at which they may start."""
        if rate is None or rate <= 0:
            return now
        start = max(self.free_at, now - BURST_S)
        self.free_at = start + n / rate
        return start


class _Pipe:
    """One direction of one connection: read chunks, hold each ``latency`` long, write in order."""

    def __init__(
        self,
        link: _Link,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        bucket: _Bucket,
        up: bool,
    ) -> None:
        self.link = link
        self.reader = reader
        self.writer = writer
        self.bucket = bucket
        self.up = up
        self.queue: deque[tuple[float, bytes]] = deque()
        self.held = 0
        self.readable = asyncio.Event()
        self.readable.set()
        self.ready = asyncio.Event()

    async def read_loop(self) -> None:
        try:
            while True:
                await self.link.flowing.wait()
                await self.readable.wait()
                data = await self.reader.read(CHUNK)
                if not data:
                    break
                self.queue.append((time.monotonic(), data))
                self.held += len(data)
                if self.held >= MAX_HELD:
                    self.readable.clear()
                self.ready.set()
        finally:
            self.queue.append((0.0, b""))  # EOF marker
            self.ready.set()

    async def write_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while not self.queue:
                self.ready.clear()
                await self.ready.wait()
            arrived, data = self.queue[0]
            if not data:
                with contextlib.suppress(OSError, RuntimeError):
                    if self.writer.can_write_eof():
                        self.writer.write_eof()
                return
            delay = self.link.state.latency_ms / 1000.0
            due = arrived + delay
            now = loop.time()
            if due > now:
                await asyncio.sleep(due - now)
                continue  # the state may have changed meanwhile
            if not self.link.flowing.is_set():
                await self.link.flowing.wait()
                continue
            self.queue.popleft()
            self.held -= len(data)
            if self.held < MAX_HELD:
                self.readable.set()
            start = self.bucket.reserve(len(data), self.link.state.bandwidth, now)
            if start > now:
                await asyncio.sleep(start - now)
            self.writer.write(data)
            if self.up:
                self.link.bytes_up += len(data)
            else:
                self.link.bytes_down += len(data)
            await self.writer.drain()


class _Link:
    """The state of the proxy process: its routes, connections and the link's behaviour."""

    def __init__(self, routes: Sequence[Route]) -> None:
        self.routes = routes
        self.state = LinkState()
        #: Set unless black-holed: pipes move bytes only while it is set.
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.up_bucket = _Bucket()
        self.down_bucket = _Bucket()
        self.connections: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter | None]] = set()
        self.bytes_up = 0
        self.bytes_down = 0
        self.accepted = 0
        self.reset = 0
        self.servers: list[asyncio.Server] = []

    async def start(self) -> None:
        for route in self.routes:

            async def handle(
                r: asyncio.StreamReader, w: asyncio.StreamWriter, route: Route = route
            ) -> None:
                with contextlib.suppress(asyncio.CancelledError):  # at shutdown
                    await self.serve(r, w, route)

            server = await asyncio.start_server(
                handle, route.listen[0], route.listen[1], reuse_address=True, limit=CHUNK
            )
            self.servers.append(server)

    @staticmethod
    def _abort(writer: asyncio.StreamWriter | None) -> None:
        if writer is None:
            return
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                # linger 0: close sends RST, like a firewall rejecting the connection
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    async def serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, route: Route
    ) -> None:
        self.accepted += 1
        if self.state.cut:
            self.reset += 1
            self._abort(writer)
            return
        pair: tuple[asyncio.StreamWriter, asyncio.StreamWriter | None] = (writer, None)
        self.connections.add(pair)
        up_writer: asyncio.StreamWriter | None = None
        try:
            await self.flowing.wait()  # black hole: accepted, never answered
            if self.state.cut:
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(
                    route.upstream[0], route.upstream[1], limit=CHUNK
                )
            except OSError:
                return
            self.connections.discard(pair)
            pair = (writer, up_writer)
            self.connections.add(pair)
            if not self.state.cut:
                await self._bridge(reader, writer, up_reader, up_writer)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self.connections.discard(pair)
            for w in (writer, up_writer):
                if w is not None:
                    w.close()

    async def _bridge(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
    ) -> None:
        for w in (writer, up_writer):
            sock = w.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pipes = (
            _Pipe(self, reader, up_writer, self.up_bucket, up=True),
            _Pipe(self, up_reader, writer, self.down_bucket, up=False),
        )
        tasks = [asyncio.create_task(c) for p in pipes for c in (p.read_loop(), p.write_loop())]
        try:
            # both directions end (EOF forwarded), or one fails: then both are closed
            await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def cut(self) -> None:
        self.state = attrs.evolve(self.state, cut=True, blackhole=False)
        self.flowing.set()  # wakes waiters, which see the cut and end
        for client, upstream in list(self.connections):
            self.reset += 1
            self._abort(client)
            self._abort(upstream)
        self.connections.clear()

    def apply(self, command: Mapping[str, Any]) -> None:
        op = command["op"]
        if op == "set":
            changes: dict[str, Any] = {}
            if "latency_ms" in command:
                changes["latency_ms"] = max(0.0, float(command["latency_ms"]))
            if "bandwidth" in command:
                bw = command["bandwidth"]
                changes["bandwidth"] = None if bw is None else max(1, int(bw))
            self.state = attrs.evolve(self.state, **changes)
        elif op == "cut":
            self.cut()
        elif op == "blackhole":
            self.state = attrs.evolve(self.state, blackhole=True, cut=False)
            self.flowing.clear()
        elif op == "heal":
            self.state = attrs.evolve(self.state, blackhole=False, cut=False)
            self.flowing.set()
        elif op == "reset":
            self.state = LinkState()
            self.flowing.set()
        elif op != "stats":
            raise ValueError(f"unknown op {op!r}")

    def report(self) -> dict[str, Any]:
        times = os.times()
        return {
            "ok": True,
            "state": attrs.asdict(self.state),
            "stats": {
                "bytes_up": self.bytes_up,
                "bytes_down": self.bytes_down,
                "open_connections": len(self.connections),
                "accepted": self.accepted,
                "reset": self.reset,
                "cpu_seconds": times.user + times.system,
                "pid": os.getpid(),
            },
        }


async def _serve(routes: Sequence[Route]) -> None:
    link = _Link(routes)
    await link.start()
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)

    def reply(obj: Mapping[str, Any]) -> None:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    reply({"ok": True, "ready": True, "pid": os.getpid()})
    while True:
        line = await stdin.readline()
        if not line:  # the controlling process went away: so do we
            break
        try:
            command = json.loads(line)
            if command.get("op") == "quit":
                reply({"ok": True})
                break
            link.apply(command)
            reply(link.report())
        except Exception as exc:  # a bad command must not kill the link
            reply({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
    link.cut()
    for server in link.servers:
        server.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mirrorlib.testing.proxy")
    parser.add_argument("routes", nargs="+", help="LISTEN_HOST:PORT=UPSTREAM_HOST:PORT")
    args = parser.parse_args(argv)
    routes = [Route.parse(r) for r in args.routes]
    try:
        asyncio.run(_serve(routes))
    except OSError as exc:
        sys.stdout.write(json.dumps({"ok": False, "error": f"{exc}"}) + "\n")
        sys.stdout.flush()
        return 1
    return 0


# ---------------------------------------------------------------------------------------------
# the controller, in the test process


#: What the proxy process runs (``-m mirrorlib.testing.proxy`` would import this module twice).
_MAIN = "import sys; from mirrorlib.testing.proxy import main; sys.exit(main(sys.argv[1:]))"


class NetworkLink:
    """The network between clients and one cluster: controls its proxy process.

    ``routes`` map each listening port to a broker's client port. :meth:`start` runs the proxy
    (``python -m mirrorlib.testing.proxy``) and returns once every port listens; the state
    survives until :meth:`stop`. All methods are thread-safe and return at once (the proxy
    applies a change before it answers).
    """

    def __init__(self, routes: Sequence[Route], *, name: str = "link") -> None:
        self.routes = tuple(routes)
        self.name = name
        self._proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()
        self._state = LinkState()

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    @property
    def is_running(self) -> bool:
        return self.pid is not None

    def start(self, timeout: float = 30.0) -> Self:
        """Start the proxy process (no-op if it runs); it starts with the state of the link
        as last set (a fresh link: no delay, no cap, healed)."""
        with self._lock:
            if self.is_running:
                return self
            proc = subprocess.Popen(
                [sys.executable, "-c", _MAIN, *(r.arg() for r in self.routes)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=None,
                text=True,
                bufsize=1,
            )
            self._proc = proc
            answer = self._read(timeout)
            if not answer.get("ready"):
                self._kill()
                raise TestClusterError(f"network proxy {self.name} failed to start: {answer}")
            state = self._state
        if state != LinkState():
            self._command(
                {"op": "set", "latency_ms": state.latency_ms, "bandwidth": state.bandwidth}
            )
            if state.cut:
                self._command({"op": "cut"})
            elif state.blackhole:
                self._command({"op": "blackhole"})
        return self

    def _read(self, timeout: float) -> dict[str, Any]:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        stdout = proc.stdout
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        if not result:
            raise TestClusterError(f"network proxy {self.name}: no answer within {timeout:g}s")
        if not result[0]:
            raise TestClusterError(
                f"network proxy {self.name} exited (code {proc.wait(5)}); routes "
                f"{[r.arg() for r in self.routes]}"
            )
        answer: dict[str, Any] = json.loads(result[0])
        return answer

    def _kill(self) -> None:
        proc = self._proc
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
        self._proc = None

    def stop(self) -> None:
        """Stop the proxy process (connections through it end). Idempotent."""
        with self._lock:
            proc = self._proc
            if proc is None:
                return
            if proc.poll() is None and proc.stdin is not None:
                with contextlib.suppress(OSError, ValueError):
                    proc.stdin.write('{"op": "quit"}\n')
                    proc.stdin.flush()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(5)
            self._kill()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- commands -------------------------------------------------------------------------

    def _command(self, command: Mapping[str, Any]) -> dict[str, Any]:
        with self._lock:
            proc = self._proc
            if proc is None or proc.poll() is not None or proc.stdin is None:
                raise TestClusterError(f"network proxy {self.name} is not running")
            proc.stdin.write(json.dumps(command) + "\n")
            proc.stdin.flush()
            answer = self._read(30.0)
            if not answer.get("ok"):
                raise TestClusterError(f"network proxy {self.name}: {answer.get('error')}")
            self._state = LinkState(**answer["state"])
            return answer

    @property
    def state(self) -> LinkState:
        """The link's current state (as last set)."""
        return self._state

    def set_latency(self, one_way_ms: float) -> None:
        """Delay every chunk by ``one_way_ms`` in each direction (RTT grows by twice that)."""
        self._command({"op": "set", "latency_ms": float(one_way_ms)})

    def set_rtt(self, rtt_ms: float) -> None:
        """Add ``rtt_ms`` to the round trip: ``rtt_ms / 2`` of delay in each direction."""
        self.set_latency(rtt_ms / 2)

    def set_bandwidth(self, bytes_per_second: int | None) -> None:
        """Cap each direction of the whole link at ``bytes_per_second`` (``None``: no cap)."""
        self._command({"op": "set", "bandwidth": bytes_per_second})

    def cut(self) -> None:
        """Reset every connection and refuse new ones until :meth:`heal`."""
        self._command({"op": "cut"})

    def blackhole(self) -> None:
        """Hold every byte and leave new connections unanswered until :meth:`heal`."""
        self._command({"op": "blackhole"})

    def heal(self) -> None:
        """End a cut or black hole (latency and bandwidth stay as set)."""
        self._command({"op": "heal"})

    def reset(self) -> None:
        """Back to a plain link: healed, no delay, no cap."""
        self._command({"op": "reset"})

    def stats(self) -> LinkStats:
        """The proxy's byte and connection counters and its CPU time."""
        return LinkStats(**self._command({"op": "stats"})["stats"])

    def __repr__(self) -> str:
        return f"<NetworkLink {self.name} {self._state} pid={self.pid}>"


if __name__ == "__main__":  # pragma: no cover - the proxy process
    sys.exit(main())
