"""The harness's process-tree CPU counter (Linux /proc): reaped grandchildren still count."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench import procmon

# A child that starts a grandchild burning ~0.4 s of CPU, reaps it, then idles: the grandchild's
# CPU is then only in the child's cutime (as with Spark's workers reaped by pyspark's daemon).
CHILD = (
    "import subprocess, sys, time\n"
    "subprocess.run([sys.executable, '-c', "
    "'import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.4: pass'])\n"
    "print('reaped', flush=True)\n"
    "time.sleep(30)\n"
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_tree_cpu_counts_children_reaped_inside_the_tree():
    # root (sh) -> child (python) -> grandchild (python, reaped by the child)
    root = subprocess.Popen(
        ["/bin/sh", "-c", f'"{sys.executable}" -c "$0"; :', CHILD], stdout=subprocess.PIPE
    )
    try:
        assert root.stdout is not None
        assert root.stdout.readline().strip() == b"reaped"
        time.sleep(0.1)
        assert procmon.children(root.pid)  # the child is alive, the grandchild is gone
        assert procmon.tree_cpu_seconds(root.pid) >= 0.3
        assert procmon.tree_rss_bytes(root.pid) > 0
    finally:
        for pid in procmon.children(root.pid):
            subprocess.run(["kill", str(pid)], check=False)
        root.kill()
        root.wait(10)


def test_machine_window_counts_a_busy_broker_process_and_the_machine() -> None:
    """A process busy for the whole window shows as about one core of the 'brokers' and of the
    machine; an idle one as none."""
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.3)  # started
        spinning = procmon.MachineWindow([busy.pid])
        sleeping = procmon.MachineWindow([idle.pid])
        time.sleep(1.0)
        hot, cold = spinning.cores(), sleeping.cores()
    finally:
        busy.kill()
        idle.kill()
        busy.wait()
        idle.wait()
    assert 0.5 <= hot["brokers_cores"] <= 1.1
    assert hot["machine_cores"] >= 0.5
    assert cold["brokers_cores"] <= 0.1


def _state(pid: int) -> str:
    raw = Path(f"/proc/{pid}/stat").read_text()
    return raw[raw.rindex(")") + 2]


def test_a_tree_is_stopped_and_continued_whole() -> None:
    parent = subprocess.Popen(["sh", "-c", "sleep 30 & wait"])
    try:
        deadline = time.monotonic() + 10
        while not procmon.children(parent.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        (child,) = procmon.children(parent.pid)
        tree = procmon.suspend_tree(parent.pid)
        assert tree == [parent.pid, child]
        time.sleep(0.1)
        assert _state(parent.pid) == "T" and _state(child) == "T"
        procmon.resume_tree(tree)
        time.sleep(0.1)
        assert _state(parent.pid) != "T" and _state(child) != "T"
    finally:
        for pid in procmon.children(parent.pid):
            os.kill(pid, signal.SIGKILL)
        parent.kill()
        parent.wait(10)
