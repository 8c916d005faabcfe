"""Helpers shared by the JVM processes ``mirrorlib.testing`` runs (brokers, the real MM2)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

__all__ = ["tail_file", "terminate"]


def tail_file(path: Path, lines: int = 50, max_bytes: int = 512 * 1024) -> str:
    """The last ``lines`` lines of ``path`` (reading at most its last ``max_bytes``); "" if the
    file does not exist yet."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - max_bytes))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def terminate(
    proc: subprocess.Popen[bytes],
    *,
    force: bool,
    timeout: float = 30.0,
    note: Callable[[str], None] | None = None,
    what: str = "process",
) -> int | None:
    """Stop ``proc``: SIGTERM and wait up to ``timeout`` s (unless ``force``), then SIGKILL by
    pid. Returns the exit code."""
    if proc.poll() is None:
        if not force:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                if note is not None:
                    note(f"{what} did not stop within {timeout:g}s of SIGTERM; SIGKILL")
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(30)
    return proc.returncode
