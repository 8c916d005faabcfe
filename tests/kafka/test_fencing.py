"""Fencing a transactional id (mirrorlib.kafka.fencing): its errors; a node fencing another
node that left the flow's group (real clusters, two ``mirrorlib run`` processes). A worker
supervisor fencing its own down slot is tested in tests/runtime/workers/test_workers.py."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections import Counter
from pathlib import Path

import attrs
import pytest
from confluent_kafka import KafkaException

from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.worker_reports import WorkerReport, WorkerState
from mirrorlib.errors import ClusterTimeoutError, MirrorError
from mirrorlib.kafka.fencing import DepartedFence, fence_transactional_id
from mirrorlib.kafka.worker_reports import WorkerReportWriter
from mirrorlib.testing import ClusterSet
from tests.runtime.conftest import (
    ReplicatorProcess,
    config,
    mm2_properties,
    read_all,
    wait_for,
)
from tests.runtime.test_delivery import Load, assert_each_once


def test_an_unreachable_coordinator_is_an_error_naming_the_id_and_the_cluster() -> None:
    with pytest.raises(MirrorError, match=r"fencing the transactional id t-0 on cluster B"):
        fence_transactional_id(
            {"bootstrap.servers": "127.0.0.1:1"}, "t-0", cluster="B", timeout=1.0
        )


def test_the_users_producer_settings_cannot_turn_idempotence_off_for_the_fence() -> None:
    # a transactional producer needs idempotence: the user's setting for the record producer
    # (which mirrorlib overrides there too) must not make the fence a configuration error
    with pytest.raises(ClusterTimeoutError, match=r"fencing the transactional id t-1 on cluster B"):
        fence_transactional_id(
            {"bootstrap.servers": "127.0.0.1:1", "enable.idempotence": "false"},
            "t-1",
            cluster="B",
            timeout=1.0,
        )  # (it reached the coordinator's address, not a configuration error)


def _departed_node(settings: FlowSettings, topic: str, slots: int) -> list[WorkerReport]:
    """The last reports of node "gone" (``slots`` slots, one partition each), a minute old."""
    ts = int(time.time() * 1000) - 60_000

    def report(i: int) -> WorkerReport:
        return WorkerReport(
            flow=settings.name, node="gone", slot=i, pid=None, state=WorkerState.RUNNING,
            restarts=0, partitions=((topic, i),), records_per_second=0.0,
            bytes_per_second=0.0, lag_records=None, timestamp_ms=ts, interval_s=1.0,
            tasks_max=slots, transactional_id=f"{settings.name}.gone.{i}",
        )  # fmt: skip

    return [report(i) for i in range(slots)]


@pytest.mark.integration
def test_a_departed_nodes_slots_are_fenced_at_once_and_once(two_clusters: ClusterSet) -> None:
    """A node of ``tasks.max=4`` left: the node given its partitions fences its four
    transactional ids together (each fence waits for the coordinator, up to its timeout: one
    after another, a node of ``tasks.max=16`` would hold up the new holder's assignment for
    16 timeouts), and a second assignment of the same partitions fences nothing again."""
    topic = "departed.slots"
    cfg = config(two_clusters, ["A->B"], **{"B.exactly.once.source.support": "enabled"})
    settings = attrs.evolve(FlowSettings.from_config(cfg, cfg.flow("A", "B")), node="here")
    reports = _departed_node(settings, topic, 4)
    with contextlib.suppress(KafkaException):  # (the internal topics' job; other tests ran it)
        two_clusters[1].create_topic(settings.worker_status_topic, 1)
    writer = WorkerReportWriter(
        settings.target_producer, settings.target_admin, settings.worker_status_topic, alias="B"
    )
    assert writer.write(reports) is None
    writer.close()
    partitions = [(topic, i) for i in range(4)]
    fence = DepartedFence(settings)
    assert sorted(fence.before_copying(partitions)) == [r.transactional_id for r in reports]
    assert fence.before_copying(partitions) == []

    # the same with a target that does not answer: four fences of 3 s each fail together
    unanswered = attrs.evolve(
        settings,
        target_producer={**settings.target_producer, "bootstrap.servers": "127.0.0.1:1"},
        admin_timeout=3.0,
    )
    began = time.monotonic()
    assert DepartedFence(unanswered).before_copying(partitions) == []
    took = time.monotonic() - began
    assert took < 2 * 3.0, f"the fences ran one after another: {took:.1f} s for four"


@pytest.mark.integration
@pytest.mark.parametrize("tasks", [1, 2])
def test_a_node_stopped_past_the_session_timeout_is_fenced_by_the_node_taking_its_partitions(
    two_clusters: ClusterSet, tmp_path: Path, tasks: int
) -> None:
    """Two nodes share an exactly-once flow (``tasks.max`` 1: the in-process copier; 2: worker
    processes). Node x is SIGSTOPped under load for longer than the group's session timeout: the
    group gives its partitions to node y, which fences x's transactional ids before it reads
    their positions (x's reports are silent). When x wakes up, its open transaction is gone and
    its producer can neither write nor commit: ``read_committed`` readers of B see every record
    exactly once, in order."""
    a, b = two_clusters
    topic = f"fence.nodes{tasks}"
    a.create_topic(topic, 4)
    props = mm2_properties(
        two_clusters,
        ["A->B"],
        **{
            "A->B.topics": f"fence\\.nodes{tasks}",
            "tasks.max": str(tasks),
            "B.exactly.once.source.support": "enabled",
            "A.consumer.isolation.level": "read_committed",
            "A->B.source.consumer.session.timeout.ms": "8000",
            "offset.flush.interval.ms": "1000",  # reports every 1 s: silent after 5 s
        },
    )
    x = ReplicatorProcess({**props, "node.id": f"x{tasks}"}, tmp_path, name="x")
    y = ReplicatorProcess({**props, "node.id": f"y{tasks}"}, tmp_path, name="y")
    load = Load(a, topic, 4, transactional=True).start()
    stopped = False
    try:
        x.start()
        wait_for("node x copying", lambda: "A->B: assigned ['" in x.log.read_text() or
                 "this process copies ['" in x.log.read_text(), timeout=90)  # fmt: skip
        time.sleep(2.0)
        y.start()
        wait_for("node y copying", lambda: "A->B: assigned ['" in y.log.read_text() or
                 "this process copies ['" in y.log.read_text(), timeout=90)  # fmt: skip
        time.sleep(2.0)
        os.kill(x.proc.pid, signal.SIGSTOP)  # (its workers, if any, go on: the parent is stopped)
        stopped = True
        fenced = f"fenced its transactional id mirrorlib-A->B-x{tasks}"
        wait_for("node y fenced node x", lambda: fenced in y.log.read_text(), timeout=60)
        time.sleep(2.0)
        os.kill(x.proc.pid, signal.SIGCONT)
        stopped = False
        time.sleep(3.0)  # x wakes up with what it had fetched and its open transaction
        sent = load.stop()

        def all_there() -> bool:
            values = {int(m.value()) for m in read_all(b, f"A.{topic}", read_committed=True)}
            return len(values) >= sent

        wait_for("every record on B (read_committed)", all_there, timeout=120)
        assert y.stop() == 0, y.log_tail()
        assert x.stop() == 0, x.log_tail()
    finally:
        if stopped:
            os.kill(x.proc.pid, signal.SIGCONT)
        load.stop()
        x.kill()
        y.kill()
    counts = Counter(int(m.value()) for m in read_all(b, f"A.{topic}", read_committed=True))
    assert_each_once(counts, sent)
