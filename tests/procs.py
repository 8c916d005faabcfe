"""Processes on this machine, from Linux's /proc (for tests that look at the processes a
replicator or a Spark session starts)."""

from __future__ import annotations

import contextlib
from pathlib import Path


def parents() -> dict[int, int]:
    """Process id -> its parent's, for every process now."""
    out: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = (entry / "stat").read_text()
                out[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return out


def children(pid: int) -> list[int]:
    """Process ids whose parent is ``pid``."""
    return [p for p, parent in parents().items() if parent == pid]


def descendants(pid: int) -> list[int]:
    """Process ids of ``pid``'s children, their children, and so on."""
    links = parents()
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        kids = [p for p, pp in links.items() if pp == parent]
        found += kids
        todo += kids
    return found
