"""A stand-in for ``python -m mirrorlib.runtime.worker`` that copies nothing (supervisor tests).

It answers every assignment, reports its partitions every 0.2 s, and exits on ``Stop`` or when its
stdin ends. With ``FAKE_WORKER_SILENT=<path>``, the first process of slot 0 reports once, creates
``<path>`` and then goes silent (it keeps running but sends nothing), like a stopped worker.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from mirrorlib.core.workerproto import (
    Applied,
    Assign,
    PartitionReport,
    Report,
    Start,
    Stop,
)
from mirrorlib.runtime.frames import read_frame, write_frame


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
    lock = threading.Lock()
    held: frozenset[tuple[str, int]] = frozenset()

    def send(message: object) -> None:
        with lock:
            write_frame(out, message)

    def report() -> None:
        while True:
            parts = tuple(
                PartitionReport(t, p, f"A.{t}", 1, 10, 1, 1, None, 0, None) for t, p in sorted(held)
            )
            send(Report(os.getpid(), parts, ()))
            time.sleep(0.2)

    threading.Thread(target=report, daemon=True).start()
    while (message := read_frame(sys.stdin.buffer)) is not None:
        if isinstance(message, Stop):
            return
        if isinstance(message, Assign):
            held = message.partitions
            send(Applied(message.version))


if __name__ == "__main__":
    main()
