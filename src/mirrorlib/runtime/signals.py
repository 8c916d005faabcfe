"""SIGINT / SIGTERM as a stop request for a blocking ``run()``
(:meth:`mirrorlib.Replicator.run`, :meth:`mirrorlib.spark.SparkReplicator.run`).

A Python signal handler runs in the main thread between two of its bytecodes, possibly while
that thread is inside a write to stderr (e.g. the log line that says the replicator started).
A handler that logs then writes to the same buffered stream: ``RuntimeError: reentrant call``,
which escapes logging's own error handling, ends the handler before it set the stop event, and
the stop request is lost: the process kept running after SIGTERM (seen in CI, 2 runs in 25 of a
SIGTERM right after the start line). So the handler here only records the signal and sets the
event; the caller logs it, from its own loop.
"""

from __future__ import annotations

import logging
import signal
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs

__all__ = ["StopSignals", "stop_on_signals"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


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

    def on_signal(signum: int, _frame: types.FrameType | None) -> None:
        signals.received = signum  # nothing else here: see the module docstring
        stop.set()

    installed: dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in _SIGNALS:
            installed[sig] = signal.signal(sig, on_signal)
    try:
        yield signals
    finally:
        for sig, previous in installed.items():
            signal.signal(sig, previous)
