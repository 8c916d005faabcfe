"""Helpers shared by the tests/kafka integration tests."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def unique(prefix: str = "t") -> str:
    """A topic-name-safe unique name (the session clusters are shared between tests)."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def eventually(fn: Callable[[], T], *, timeout: float = 30.0, interval: float = 0.2) -> T:
    """Call ``fn`` until it stops raising AssertionError (metadata propagates asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(interval)
