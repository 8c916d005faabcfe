"""A node's worker reports, composed from the flow's counters (no broker)."""

from __future__ import annotations

import os

from mirrorlib import MirrorConfig
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.status import FlowState, StatsRegistry
from mirrorlib.core.worker_reports import SlotInfo, WorkerState
from mirrorlib.runtime.worker_status import WorkerReporter, copier_slot


def settings(**extra: str) -> FlowSettings:
    cfg = MirrorConfig.from_properties(
        {
            "clusters": "A, B",
            "A.bootstrap.servers": "127.0.0.1:1",
            "B.bootstrap.servers": "127.0.0.1:2",
            "A->B.enabled": "true",
            "node.id": "n7",
            **extra,
        }
    )
    return FlowSettings.from_config(cfg, cfg.flow("A", "B"))


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
