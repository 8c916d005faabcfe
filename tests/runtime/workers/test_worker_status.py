"""A node's worker reports, composed from the flow's counters (no broker), and the expired
reports a live node forgets (on real clusters)."""

from __future__ import annotations

import os
import time

import pytest

from mirrorlib.core.counters import StatsRegistry
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.status import FlowState
from mirrorlib.core.worker_reports import SlotInfo, WorkerReport, WorkerState
from mirrorlib.kafka.worker_reports import WorkerReportWriter, read_worker_reports
from mirrorlib.runtime.workers.status import WorkerReporter, copier_slot
from mirrorlib.testing import ClusterSet
from tests.runtime.conftest import config, offline_settings


def settings(**extra: str) -> FlowSettings:
    return offline_settings(**{"node.id": "n7", **extra})


def counters() -> StatsRegistry:
    stats = StatsRegistry("A", "B")
    known = stats.partition("t", 0, "A.t")
    known.position, known.end_offset = 90, 100
    stats.partition("t", 1, "A.t")  # nothing known yet
    return stats


def test_the_in_process_copier_is_slot_0_with_every_partition() -> None:
    stats = counters()
    stats.state = FlowState.RUNNING
    [slot] = copier_slot(stats)
    assert (slot.slot, slot.pid, slot.state) == (0, os.getpid(), WorkerState.RUNNING)
    assert slot.partitions == {("t", 0), ("t", 1)}
    stats.state = FlowState.FAILED
    assert copier_slot(stats)[0].state is WorkerState.FAILED


def test_reports_name_the_flow_node_and_interval_and_keep_unknown_lag_unknown() -> None:
    stats = counters()
    slots = (
        SlotInfo(0, 1, WorkerState.RUNNING, frozenset({("t", 0)})),
        SlotInfo(1, 2, WorkerState.RUNNING, frozenset({("t", 1)})),
    )
    reporter = WorkerReporter(
        settings(**{"B.offset.flush.interval.ms": "2000", "tasks.max": "2"}), stats, lambda: slots
    )
    r0, r1 = reporter.reports()
    assert (r0.flow, r0.node, r0.tasks_max, r0.interval_s) == ("A->B", "n7", 2, 2.0)
    assert r0.lag_records == 10
    assert r1.lag_records is None


@pytest.mark.integration
def test_a_live_node_tombstones_expired_reports_of_any_node(two_clusters: ClusterSet) -> None:
    _, b = two_clusters
    cfg = config(two_clusters, ["A->B"], **{"node.id": "expiry-live"})
    s = FlowSettings.from_config(cfg, cfg.flow("A", "B"))
    if s.worker_status_topic not in b.topic_names():
        b.create_topic(s.worker_status_topic, config={"cleanup.policy": "compact"})
    now_ms = int(time.time() * 1000)
    fresh, gone, stopped = (
        WorkerReport(
            flow="A->B",
            node=node,
            slot=0,
            pid=1,
            state=state,
            restarts=0,
            partitions=(),
            records_per_second=0.0,
            bytes_per_second=0.0,
            lag_records=None,
            timestamp_ms=now_ms - int(age_s * 1000),
            interval_s=1.0,
        )
        for node, state, age_s in (
            ("expiry-fresh", WorkerState.STOPPED, 1.0),
            ("expiry-gone", WorkerState.RUNNING, 3600.0),
            ("expiry-stopped", WorkerState.STOPPED, 120.0),
        )
    )
    writer = WorkerReportWriter(
        s.target_producer, s.target_admin, s.worker_status_topic, alias=s.target
    )
    try:
        assert writer.write([fresh, gone, stopped]) is None
        reporter = WorkerReporter(s, StatsRegistry("A", "B"), lambda: ())
        forgotten = reporter.forget_expired(writer)
        assert {gone.key, stopped.key} <= {r.key for r in forgotten}
        assert fresh.key not in {r.key for r in forgotten}
    finally:
        writer.close()

    def nodes() -> set[str]:
        reports, _ = read_worker_reports(
            s.target_consumer, s.target_admin, s.worker_status_topic, alias=s.target, timeout=10
        )
        return {r.node for r in reports if r.node.startswith("expiry-")}

    assert nodes() == {"expiry-fresh"}  # the tombstones hide them at once (compaction follows)
