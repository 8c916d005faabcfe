"""A stand-in for ``python -m mirrorlib.runtime.workers.child`` that copies nothing (supervisor tests).

It answers every assignment, reports its partitions every 0.2 s (one record each), and exits on
``Stop`` or when its stdin ends. Environment variables change it:

* ``FAKE_WORKER_SILENT=<path>``: the first process of slot 0 reports once, creates ``<path>``
  and then goes silent (it keeps running but sends nothing), like a stopped worker;
* ``FAKE_WORKER_SLOW_APPLY=<s>``: an assignment is applied (and confirmed) ``<s>`` seconds after
  it came; the worker reports its old partitions meanwhile;
* ``FAKE_WORKER_FINAL_REPORTS=<n>``: on ``Stop``, the worker exits at once and a child of it
  sends ``n`` more reports (the last with ``n`` records per partition) from 0.3 s on, like frames
  still in the pipe when the worker's exit is seen;
* ``FAKE_WORKER_FAIL=<path>``: the first process of slot 0 given partitions fails like data loss
  (``Exit(failed=True)``, status :data:`~mirrorlib.core.workerproto.EXIT_FAILED`) and creates
  ``<path>``;
* ``FAKE_WORKER_PARENT_SILENT=<path>``: the first process of slot 1 given partitions creates
  ``<path>`` and exits as a worker whose parent sent nothing for too long (status
  :data:`~mirrorlib.core.workerproto.EXIT_PARENT_SILENT`);
* ``FAKE_WORKER_STOP_DELAY=<s>``: on ``Stop``, the worker exits (cleanly) ``<s>`` seconds later,
  like a worker committing a large transaction; ``-1``: it never does (it must be killed);
* ``FAKE_WORKER_STALLED=<path>``: the first process of slot 1 creates ``<path>`` and reports
  its loop blocked (``Report.stalled``), like a copier waiting in a call to an unreachable target;
* ``FAKE_WORKER_LOG=<path>``: each holding of a partition (from the assignment that gives it to
  the process to the one that takes it away) is appended to ``<path>`` as a line
  ``slot pid topic partition holding`` when its first report has been written to the pipe.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from mirrorlib.core.workerproto import (
    EXIT_FAILED,
    EXIT_PARENT_SILENT,
    Applied,
    Assign,
    Exit,
    PartitionReport,
    Report,
    Start,
    Stop,
)
from mirrorlib.runtime.workers.frames import read_frame, write_frame

Key = tuple[str, int]


def _report(held: dict[Key, int], records: int = 1, stalled: str | None = None) -> Report:
    """One report: ``records`` records for each partition held (partition -> its holding)."""
    parts = tuple(
        PartitionReport(t, p, f"A.{t}", records, 10 * records, 1, 1, None, 0, None, holding=h)
        for (t, p), h in sorted(held.items())
    )
    return Report(os.getpid(), parts, (), stalled=stalled)


def main() -> None:
    out = sys.stdout.buffer
    start = read_frame(sys.stdin.buffer)
    assert isinstance(start, Start)
    silent = os.environ.get("FAKE_WORKER_SILENT")
    if silent and start.slot == 0 and not os.path.exists(silent):
        write_frame(out, Report(os.getpid(), (), ()))
        with open(silent, "w") as f:
            f.write(str(os.getpid()))
        while read_frame(sys.stdin.buffer) is not None:
            pass  # reads but never answers
        return
    fail = os.environ.get("FAKE_WORKER_FAIL")
    fail = fail if fail and start.slot == 0 and not os.path.exists(fail) else None
    leave = os.environ.get("FAKE_WORKER_PARENT_SILENT")
    leave = leave if leave and start.slot == 1 and not os.path.exists(leave) else None
    slow = float(os.environ.get("FAKE_WORKER_SLOW_APPLY", "0"))
    final = int(os.environ.get("FAKE_WORKER_FINAL_REPORTS", "0"))
    stop_delay = float(os.environ.get("FAKE_WORKER_STOP_DELAY", "0"))
    log = os.environ.get("FAKE_WORKER_LOG")
    stalled = os.environ.get("FAKE_WORKER_STALLED")
    blocked = None
    if stalled and start.slot == 1 and not os.path.exists(stalled):
        with open(stalled, "w") as f:
            f.write(str(os.getpid()))
        blocked = "copier: blocked for 31s in a call to the clients"
    lock = threading.Lock()
    held: frozenset[Key] = frozenset()
    holdings = 0  # assignments applied
    since: dict[Key, int] = {}  # partition -> the holding it came with
    logged: set[tuple[Key, int]] = set()

    def send(message: object) -> None:
        with lock:
            write_frame(out, message)

    def report() -> None:
        while True:
            with lock:
                now = {k: since[k] for k in held}
                write_frame(out, _report(now, stalled=blocked))
                new = [(k, h) for k, h in now.items() if (k, h) not in logged]
                if log and new:
                    with open(log, "a") as f:
                        for (t, p), h in new:
                            f.write(f"{start.slot} {os.getpid()} {t} {p} {h}\n")
                logged.update(new)
            time.sleep(0.2)

    threading.Thread(target=report, daemon=True).start()
    while (message := read_frame(sys.stdin.buffer)) is not None:
        if isinstance(message, Stop):
            if stop_delay < 0:
                continue  # never stops
            time.sleep(stop_delay)
            send(Exit("stopped", clean=True))
            with lock:  # no report half written
                if final and os.fork() == 0:
                    time.sleep(0.3)  # the worker's exit was seen: its last frames come now
                    for records in range(2, final + 1):
                        write_frame(out, _report({k: since[k] for k in held}, records))
                        time.sleep(0.01)
                os._exit(0)
        if isinstance(message, Assign):
            if fail and message.partitions:
                with open(fail, "w") as f:
                    f.write(str(os.getpid()))
                send(Exit("data loss", failed=True))
                os._exit(EXIT_FAILED)
            if leave and message.partitions:
                with open(leave, "w") as f:
                    f.write(str(os.getpid()))
                os._exit(EXIT_PARENT_SILENT)
            time.sleep(slow)
            with lock:
                holdings += 1
                for key in message.partitions - held:
                    since[key] = holdings
                held = message.partitions
            send(Applied(message.version))


if __name__ == "__main__":
    main()
