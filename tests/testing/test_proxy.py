"""The network-fault proxy on plain TCP servers (no Kafka): delay, cap, cut, black hole."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from mirrorlib.errors import TestClusterError
from mirrorlib.testing import LinkState, NetworkLink
from mirrorlib.testing.config import HOST, free_port
from mirrorlib.testing.proxy import CHUNK, Route


class _Server:
    """A TCP server in threads: ``echo`` answers every byte, else it counts what it receives."""

    def __init__(self, echo: bool) -> None:
        self.echo = echo
        self.received = 0
        self.sock = socket.socket()
        self.sock.bind((HOST, 0))
        self.sock.listen(16)
        self.port = int(self.sock.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                while data := conn.recv(1 << 18):
                    if self.echo:
                        conn.sendall(data)
                    else:
                        self.received += len(data)
            except OSError:
                return


@pytest.fixture(scope="module")
def echo_link() -> Iterator[tuple[NetworkLink, int]]:
    server = _Server(echo=True)
    port = free_port()
    with NetworkLink([Route((HOST, port), (HOST, server.port))], name="echo") as link:
        yield link, port
    server.sock.close()


@pytest.fixture
def link(echo_link: tuple[NetworkLink, int]) -> Iterator[NetworkLink]:
    echo_link[0].reset()
    yield echo_link[0]
    echo_link[0].reset()


def _connect(port: int, timeout: float = 5.0) -> socket.socket:
    conn = socket.create_connection((HOST, port), timeout=timeout)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn


def _rtt_ms(conn: socket.socket) -> float:
    start = time.monotonic()
    conn.sendall(b"ping")
    got = b""
    while len(got) < 4:
        chunk = conn.recv(16)
        if not chunk:
            raise ConnectionError("closed")
        got += chunk
    return (time.monotonic() - start) * 1000


def test_latency_is_one_way_in_each_direction(
    link: NetworkLink, echo_link: tuple[NetworkLink, int]
) -> None:
    with _connect(echo_link[1]) as conn:
        base = min(_rtt_ms(conn) for _ in range(5))
        link.set_latency(40)
        assert link.state == LinkState(latency_ms=40.0) and link.state.rtt_ms == 80.0
        delayed = min(_rtt_ms(conn) for _ in range(5))
        link.set_rtt(30)
        rtt30 = min(_rtt_ms(conn) for _ in range(5))
    assert base < 20, base
    # 2 x 40 ms added (a loaded machine adds on top, never less)
    assert 80 <= delayed < 80 + base + 60, (base, delayed)
    assert 30 <= rtt30 < 30 + base + 60, (base, rtt30)


def test_delay_is_pipelined_and_the_cap_holds() -> None:
    sink = _Server(echo=False)
    port = free_port()
    payload = b"x" * (1 << 20)
    with NetworkLink([Route((HOST, port), (HOST, sink.port))], name="sink") as link:
        link.set_latency(100)
        with _connect(port) as conn:
            start = time.monotonic()
            for _ in range(20):  # 20 MiB in 256 KiB chunks: 80 chunks
                conn.sendall(payload)
            while sink.received < 20 * len(payload):
                time.sleep(0.01)
                assert time.monotonic() - start < 30, sink.received
            delayed = time.monotonic() - start
        # one chunk per 100 ms would take 8 s; a pipelined delay adds ~0.1 s
        assert delayed < 4.0, delayed
        link.set_latency(0)
        link.set_bandwidth(2_000_000)
        sink.received = 0
        with _connect(port) as conn:
            start = time.monotonic()
            for _ in range(4):
                conn.sendall(payload)
            while sink.received < 4 * len(payload):
                time.sleep(0.01)
                assert time.monotonic() - start < 30, sink.received
            capped = time.monotonic() - start
        # the first chunk leaves at once, each later one when the link is free again
        rate = (4 * len(payload) - CHUNK) / capped
        assert 1_500_000 < rate <= 2_040_000, rate
        stats = link.stats()
        assert stats.bytes_up == 24 * len(payload) and stats.bytes_down == 0
        assert stats.cpu_seconds > 0 and stats.pid == link.pid
    sink.sock.close()


def test_cut_resets_and_refuses_until_healed(
    link: NetworkLink, echo_link: tuple[NetworkLink, int]
) -> None:
    conn = _connect(echo_link[1])
    _rtt_ms(conn)
    link.cut()
    assert link.state.cut
    with pytest.raises(OSError):
        _rtt_ms(conn)
    conn.close()
    with pytest.raises(OSError), _connect(echo_link[1]) as fresh:
        _rtt_ms(fresh)  # accepted, then reset at once
    link.heal()
    with _connect(echo_link[1]) as healed:
        assert _rtt_ms(healed) < 1000
    assert link.stats().reset >= 2


def test_blackhole_holds_bytes_until_healed(
    link: NetworkLink, echo_link: tuple[NetworkLink, int]
) -> None:
    with _connect(echo_link[1], timeout=1.0) as conn, _connect(echo_link[1], timeout=1.0) as idle:
        _rtt_ms(conn)
        link.blackhole()
        with pytest.raises(TimeoutError):
            _rtt_ms(conn)  # no error, no answer: a dead link
        with pytest.raises(TimeoutError), _connect(echo_link[1], timeout=1.0) as fresh:
            _rtt_ms(fresh)
        link.heal()
        conn.settimeout(5.0)
        assert conn.recv(16) == b"ping"  # what was held arrives after the heal
        idle.settimeout(5.0)
        assert _rtt_ms(idle) < 1000


def test_a_stopped_link_refuses_commands() -> None:
    link = NetworkLink([Route((HOST, free_port()), (HOST, 1))], name="idle")
    with pytest.raises(TestClusterError, match="not running"):
        link.cut()
    with link:
        link.cut()
        link.heal()
    assert not link.is_running
