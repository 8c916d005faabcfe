"""How a copier worker process ends (``python -m mirrorlib.runtime.workers.child``): no Kafka needed."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from mirrorlib.core.workerproto import EXIT_FENCED, Exit, Start
from mirrorlib.runtime.workers.frames import read_frame, write_frame
from tests.runtime.conftest import offline_settings

WORKER = [sys.executable, "-m", "mirrorlib.runtime.workers.child"]


def test_a_worker_ending_while_its_parent_keeps_the_pipe_open_exits_with_its_own_status() -> None:
    """The worker's producer cannot be initialised (nobody listens on the target): it ends with
    :data:`EXIT_FENCED` while its parent keeps its stdin open, so the thread reading the parent's
    frames is inside a read of stdin when the worker ends. Python's shutdown must not abort on
    that thread ("Fatal Python error: _enter_buffered_busy: could not acquire lock for <stdin>
    at interpreter shutdown", status -6): the parent would take a fenced worker for a crashed
    one."""
    settings = offline_settings(**{"tasks.max": "2", "admin.timeout.ms": "1000"})
    start = Start(
        settings=settings, slot=0, transactional_id="mirrorlib-test-exit-0",
        offsets_topic_partitions=5, parent_pid=os.getpid(), log_level=20,
    )  # fmt: skip
    proc = subprocess.Popen(
        WORKER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        write_frame(proc.stdin, start)
        messages = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            message = read_frame(proc.stdout)
            if message is None:
                break
            messages.append(message)
        code = proc.wait(30)  # stdin still open: the parent is alive
        stderr = proc.stderr.read().decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
    assert "Fatal Python error" not in stderr, stderr[-3000:]
    assert code == EXIT_FENCED, stderr[-3000:]
    exits = [m for m in messages if isinstance(m, Exit)]
    assert len(exits) == 1 and exits[0].fenced and not exits[0].clean, exits
