"""SIGINT / SIGTERM stop a blocking ``run()``, wherever the main thread is when they arrive."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from mirrorlib import MirrorConfig, Replicator
from mirrorlib.runtime.signals import stop_on_signals

UNREACHABLE = (
    "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:1\n"
    "A->B.enabled = true\n"
)


@pytest.fixture(autouse=True)
def _main_thread_only() -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are handled in the main thread only")


class _SignalledWhileWriting(logging.Handler):
    """A log stream that, like Python's buffered stderr, refuses a reentrant write, and like
    :class:`logging.StreamHandler` swallows an error raised while it writes. While it writes
    the line saying the replicator started, this process receives SIGTERM: the signal handler
    runs inside the write, as when an operator's SIGTERM lands in the middle of that line."""

    def __init__(self) -> None:
        super().__init__()
        self._writing = False
        self.reentered = 0
        self.swallowed: list[BaseException] = []

    def emit(self, record: logging.LogRecord) -> None:
        if self._writing:
            self.reentered += 1
            raise RuntimeError("reentrant call inside the log stream")
        self._writing = True
        try:
            if "replicator started" in record.getMessage():
                os.kill(os.getpid(), signal.SIGTERM)
                spin_until = time.monotonic() + 0.3  # the handler runs between two bytecodes
                while time.monotonic() < spin_until:
                    pass
        except Exception as exc:  # what StreamHandler.emit does (handleError)
            self.swallowed.append(exc)
        finally:
            self._writing = False


def test_sigterm_while_the_start_line_is_written_stops_the_replicator() -> None:
    handler = _SignalledWhileWriting()
    logger = logging.getLogger("mirrorlib")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    replicator = Replicator(MirrorConfig.from_properties(UNREACHABLE))
    rescue = threading.Timer(30.0, replicator.stop)  # the stop request was lost: end the test
    rescue.start()
    try:
        began = time.monotonic()
        replicator.run()
        took = time.monotonic() - began
    finally:
        rescue.cancel()
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert handler.reentered == 0 and handler.swallowed == []
    assert took < 15.0, f"SIGTERM did not stop run(): it ended after {took:.1f} s"


def test_stop_on_signals_records_the_signal_and_restores_the_handlers() -> None:
    stop = threading.Event()
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with stop_on_signals(stop) as signals:
        assert signals.describe() is None
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.wait(5.0)
    assert signals.received == signal.SIGINT
    assert signals.describe() == "received signal 2 (SIGINT): stopping"
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_stop_on_signals_installs_nothing_outside_the_main_thread() -> None:
    seen: list[object] = []

    def in_thread() -> None:
        with stop_on_signals(threading.Event()):
            seen.append(signal.getsignal(signal.SIGTERM))

    before = signal.getsignal(signal.SIGTERM)
    worker = threading.Thread(target=in_thread)
    worker.start()
    worker.join()
    assert seen == [before]


_HELD_LOCK_SCRIPT = """
import os, signal, sys, threading, time
from mirrorlib.runtime.signals import stop_on_signals

class Event:  # like threading.Event: set() takes a lock that wait() holds for a moment
    def __init__(self):
        self.lock = threading.Lock()
        self.flag = threading.Event()
    def set(self):
        with self.lock:
            self.flag.set()

stop = Event()
with stop_on_signals(stop) as signals:
    with stop.lock:  # the main thread holds the event's lock when the signal comes
        os.kill(os.getpid(), signal.SIGTERM)
        spin_until = time.monotonic() + 0.3  # the handler runs between two bytecodes
        while time.monotonic() < spin_until:
            pass
    assert stop.flag.wait(10), "the stop request was lost"
print(signals.describe())
"""


def test_a_signal_while_the_main_thread_holds_the_events_lock_stops_without_a_deadlock() -> None:
    """The handler runs in the main thread, which may be inside ``Event.wait`` holding the
    event's lock (the process hung after SIGTERM: CI, and about 1 in 50 stops 0-3 s after the
    start line). Run in a process of its own: a deadlock there ends at the timeout."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _HELD_LOCK_SCRIPT],
            check=False,
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError("the signal handler deadlocked on the event's lock") from exc
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "received signal 15 (SIGTERM): stopping"
