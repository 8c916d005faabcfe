"""tasks.max > 1 on two nodes of one flow: partitions move between the nodes only once the
workers that held them can write nothing more (exactly-once: no duplicate for read_committed)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from mirrorlib.testing import ClusterSet
from tests.runtime.conftest import read_all, wait_for
from tests.runtime.test_delivery import Load, assert_each_once
from tests.runtime.workers.test_worker_signals import Run, copying

pytestmark = pytest.mark.integration

EXACTLY_ONCE = {
    "B.exactly.once.source.support": "enabled",
    "A.consumer.isolation.level": "read_committed",
}


def test_partitions_revoked_while_a_node_stops_move_after_its_workers_committed(
    two_clusters: ClusterSet, tmp_path: Path
) -> None:
    """Node X copies under load; node Y joins the flow's group, which takes partitions from X
    (X's workers are to commit and release them). Meanwhile X is told to stop, while its
    workers are slow to commit (SIGSTOPped for 8 s here, like a commit that waits for the
    target). The partitions must go to Y only after X's workers committed and ended: if Y
    copied them from their stored positions while X's open transactions were still to commit,
    read_committed readers would see those records twice."""
    a, b = two_clusters
    topic = "handover.stop"
    a.create_topic(topic, 4)
    x = Run(two_clusters, topic, tmp_path, "handover-x", **EXACTLY_ONCE)
    y = Run(two_clusters, topic, tmp_path, "handover-y", **EXACTLY_ONCE)
    load = Load(a, topic, 4).start()
    stopped: list[int] = []
    try:
        x.start()
        workers = copying(x, two_clusters, topic)
        y.start()
        wait_for("Y started", lambda: "mirrorlib replicator started" in y.text(), timeout=90)
        for pid in workers:
            os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)
        # (X's supervisor replaces a worker silent for 6 s: the revocation must come before)
        wait_for(
            "the group taking partitions from X",
            lambda: "the group takes" in x.text(),
            timeout=5.0,
            interval=0.05,
        )
        os.kill(x.pid, signal.SIGTERM)
        time.sleep(8.0)  # (Y, given the partitions at once, would copy meanwhile)
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
        stopped.clear()
        assert x.wait() == 0, x.text()[-4000:]
        sent = load.stop()
        wait_for(
            "Y copies every record",
            lambda: (
                len({int(m.value()) for m in read_all(b, f"A.{topic}", read_committed=True)})
                >= sent
            ),
            timeout=90,
            interval=1.0,
        )
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        load.stop()
        x.kill()
        if y.proc is not None and y.proc.poll() is None:
            os.kill(y.pid, signal.SIGTERM)
            with contextlib.suppress(Exception):
                y.wait(60)
        y.kill()
    counts = Counter(int(m.value()) for m in read_all(b, f"A.{topic}", read_committed=True))
    assert_each_once(counts, sent)
