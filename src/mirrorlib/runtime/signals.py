"""SIGINT / SIGTERM as a stop request for a blocking ``run()``
(:meth:`mirrorlib.Replicator.run`, :meth:`mirrorlib.spark.SparkReplicator.run`).

A Python signal handler runs in the main thread between two of its bytecodes, possibly while
that thread is inside a write to stderr (e.g. the log line that says the replicator started).
A handler that logs then writes to the same buffered stream: ``RuntimeError: reentrant call``,
which escapes logging's own error handling, ends the handler before it set the stop event, and
the stop request is lost: the process kept running after SIGTERM (seen in CI, 2 runs in 25 of a
SIGTERM right after the start line). So the handler here only records the signal; the caller
logs it, from its own loop.

Nor does the handler set the stop event: the main thread may hold the event's own lock when the
handler runs (``Event.wait`` is Python code around a ``threading.Lock``; the handler can run as
it leaves its ``with`` block), and ``Event.set`` then waits for that lock forever, in the thread
that holds it: the process hung after SIGTERM (seen in CI and reproduced, about 1 in 50 SIGTERMs
sent 0-3 s after the start line). The handler writes a byte to a pipe instead (a system call, no
lock), and a thread of its own reads it and sets the event.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs

__all__ = ["StopSignals", "stop_on_signals"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_SIGNALLED, _DONE = b"s", b"."


@attrs.define
class StopSignals:
    """The stop signal received while :func:`stop_on_signals` was installed, if any."""

    received: int | None = None

    def describe(self) -> str | None:
        """E.g. ``"received signal 15 (SIGTERM): stopping"``; ``None`` if none was received."""
        if self.received is None:
            return None
        return f"received signal {self.received} ({signal.Signals(self.received).name}): stopping"

    def log(self, logger: logging.Logger) -> None:
        """Log the signal received, if any (from the run loop, not the handler)."""
        if (received := self.describe()) is not None:
            logger.info("%s", received)


@contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[StopSignals]:
    """While the block runs, SIGINT and SIGTERM set ``stop`` (and are recorded in the
    :class:`StopSignals` yielded); the previous handlers are restored after it. Outside the main
    thread signals cannot be handled in Python, and nothing is installed."""
    signals = StopSignals()
    if threading.current_thread() is not threading.main_thread():
        yield signals
        return
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)  # (a full pipe: a stop is on its way already)

    def relay() -> None:  # sets the event outside the handler: see the module docstring
        while os.read(read_end, 1) == _SIGNALLED:
            stop.set()

    def on_signal(signum: int, _frame: types.FrameType | None) -> None:
        signals.received = signum  # nothing else here: see the module docstring
        with contextlib.suppress(BlockingIOError):
            os.write(write_end, _SIGNALLED)

    thread = threading.Thread(target=relay, name="mirrorlib signals", daemon=True)
    thread.start()
    installed: dict[signal.Signals, Any] = {}
    try:
        for sig in _SIGNALS:
            installed[sig] = signal.signal(sig, on_signal)
        yield signals
    finally:
        for sig, previous in installed.items():
            signal.signal(sig, previous)
        os.set_blocking(write_end, True)
        os.write(write_end, _DONE)  # (after every byte a handler wrote: the relay sets first)
        thread.join(5.0)
        os.close(write_end)
        if not thread.is_alive():
            os.close(read_end)
