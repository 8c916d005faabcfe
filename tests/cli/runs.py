"""Driving ``mirrorlib run`` as a subprocess: start it, wait for a line of its log, stop it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import attrs

__all__ = ["Stopped", "start_run", "stop_after_line"]


@attrs.frozen
class Stopped:
    """What a stopped run wrote on stderr: up to the awaited line (``seen``) and after it
    (``rest``), and how many seconds it took to end after SIGTERM."""

    seen: str
    rest: str
    exit_seconds: float

    @property
    def stderr(self) -> str:
        return self.seen + self.rest


def start_run(*args: str) -> subprocess.Popen[str]:
    """``python -m mirrorlib run ARGS...`` with its output piped (its log is on stderr)."""
    return subprocess.Popen(
        [sys.executable, "-m", "mirrorlib", "run", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def stop_after_line(
    proc: subprocess.Popen[str],
    fragment: str,
    *,
    within: float = 60.0,
    delay: float = 0.0,
    exit_within: float = 60.0,
) -> Stopped:
    """Read ``proc``'s stderr until a line containing ``fragment`` (failing unless it comes
    within ``within`` seconds), wait ``delay`` seconds, send SIGTERM and wait up to
    ``exit_within`` seconds for the process to end (``proc`` is killed if it is still
    running)."""
    assert proc.stderr is not None
    seen: list[str] = []
    try:
        deadline = time.monotonic() + within
        for line in proc.stderr:
            seen.append(line)
            if fragment in line:
                break
            assert time.monotonic() < deadline, "".join(seen)
        else:
            raise AssertionError(f"ended before logging {fragment!r}:\n{''.join(seen)}")
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGTERM)
        signalled = time.monotonic()
        _, rest = proc.communicate(timeout=exit_within)
        took = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return Stopped("".join(seen), rest, took)
