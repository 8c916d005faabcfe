"""CPU seconds and peak memory of one process tree, from /proc (Linux)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name may contain spaces: split after the closing parenthesis
    return raw[raw.rindex(")") + 2 :].split()


def children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (from /proc/<pid>/task/*/children)."""
    out: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                kids = Path(f"/proc/{p}/task/{t}/children").read_text().split()
            except OSError:
                continue
            for k in kids:
                out.append(int(k))
                todo.append(int(k))
    return out


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid``'s process tree: utime+stime of ``pid`` and of its living
    descendants, plus every one's cutime+cstime (the CPU of children it has reaped). Spark's
    JVM and pyspark's daemon start and reap Python workers; their CPU lands in the reaper's
    cutime, so counting it for every process in the tree (not only the root) keeps it."""
    total = 0.0
    for p in [pid, *children(pid)]:
        fields = _stat(p)
        if fields is None:
            continue
        # fields[0] is the state (field 3); utime is field 14 -> index 11, cutime field 16
        ticks = int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
        total += ticks / _TICK
    return total


def tree_rss_bytes(pid: int) -> int:
    total = 0
    for p in [pid, *children(pid)]:
        fields = _stat(p)
        if fields is not None:
            total += int(fields[21]) * _PAGE  # rss (field 24), in pages
    return total


class ProcMonitor:
    """Samples the RSS of a process tree in the background; reads CPU seconds on demand."""

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        self.pid = pid
        self.interval = interval
        self.peak_rss = 0
        self._window_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"procmon-{pid}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            rss = tree_rss_bytes(self.pid)
            self.peak_rss = max(self.peak_rss, rss)
            self._window_peak = max(self._window_peak, rss)

    def cpu(self) -> float:
        return tree_cpu_seconds(self.pid)

    def reset_window(self) -> None:
        self._window_peak = tree_rss_bytes(self.pid)

    def window_peak_mb(self) -> float:
        return max(self._window_peak, tree_rss_bytes(self.pid)) / 1e6

    def peak_mb(self) -> float:
        return max(self.peak_rss, tree_rss_bytes(self.pid)) / 1e6

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)


def suspend_tree(pid: int) -> list[int]:
    """SIGSTOP ``pid`` and every descendant (a replicator's worker processes too: stopping only
    the parent lets them copy on); returns the stopped pids for :func:`resume_tree`."""
    tree = [pid, *children(pid)]
    for p in tree:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGSTOP)
    return tree


def resume_tree(tree: list[int]) -> None:
    """SIGCONT a :func:`suspend_tree`'s pids, children first (the parent finds them running)."""
    for p in reversed(tree):
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGCONT)


def machine_busy_seconds() -> float:
    """Busy CPU seconds of the whole machine so far (/proc/stat, all cores, idle and iowait
    excluded)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / _TICK


class MachineWindow:
    """What the whole machine and the brokers did during a measured window: cores busy per
    second of wall time, for the machine and for the broker processes (``broker_pids``). Shows
    whether a contender had cores left to take (two cores run the brokers of both clusters,
    the replicator and the harness)."""

    def __init__(self, broker_pids: list[int]) -> None:
        self.broker_pids = broker_pids
        self._t0 = 0.0
        self._machine0 = 0.0
        self._brokers0 = 0.0
        self.start()

    def _brokers(self) -> float:
        return sum(tree_cpu_seconds(p) for p in self.broker_pids)

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._machine0 = machine_busy_seconds()
        self._brokers0 = self._brokers()

    def cores(self) -> dict[str, float]:
        """``machine_cores`` and ``brokers_cores``: CPU seconds per second since :meth:`start`."""
        wall = max(time.monotonic() - self._t0, 1e-9)
        return {
            "machine_cores": round((machine_busy_seconds() - self._machine0) / wall, 2),
            "brokers_cores": round((self._brokers() - self._brokers0) / wall, 2),
        }
