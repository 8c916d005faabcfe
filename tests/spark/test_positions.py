"""Positions the Spark driver cannot store, on real local clusters (``local[2]``)."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest

import mirrorlib.spark.plane as plane
from mirrorlib import MirrorConfig
from mirrorlib.core.status import FlowState
from mirrorlib.core.worker_reports import WorkerState, WorkerView
from mirrorlib.runtime.operations import flow_status, select_flows
from mirrorlib.testing import ClusterSet
from tests.runtime.conftest import end_offsets, mm2_properties, produce, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_positions_the_target_refuses_show_in_the_status_then_fail_the_flow(
    two_clusters: ClusterSet, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flow's offsets topic refuses every position (``max.message.bytes`` 10): records
    are copied, the flow's ``positions`` error names the topic in ``handle.status()`` and in
    ``mirrorlib status`` (the driver's worker report); once the failure has lasted long enough
    (shortened here), the flow fails naming the topic."""
    from mirrorlib.spark import SparkReplicator

    a, b = two_clusters
    name = f"sp{uuid.uuid4().hex[:8]}"
    topic, offsets = f"{name}.t", f"{name}-offsets"
    a.create_topic(topic, 2)
    b.create_topic(offsets, 5, config={"cleanup.policy": "compact", "max.message.bytes": "10"})
    produce(a, topic, [{"value": b"%d" % i, "partition": i % 2} for i in range(100)])
    cfg = MirrorConfig.from_properties(
        mm2_properties(
            two_clusters,
            ["A->B"],
            **{"A->B.topics": re.escape(topic), "offset.storage.topic": offsets},
        )
    )
    (flow,) = select_flows(cfg, "A->B")
    monkeypatch.setattr(plane, "POSITION_FAILURE_S", 1e9)  # not yet
    job = SparkReplicator(cfg, spark, checkpoint_location=str(tmp_path / "chk"))
    try:
        handle = job.start()
        errors = wait_for(
            "the positions error in the status",
            lambda: [e for e in handle.status()[0].errors if e.startswith("positions: ")],
            timeout=120,
        )
        assert f"not stored in {offsets} on B" in errors[0], errors
        wait_for("100 records on B", lambda: sum(end_offsets(b, f"A.{topic}").values()) >= 100)
        assert handle.status()[0].state is FlowState.DEGRADED
        assert handle.active

        def driver() -> WorkerView | None:  # mirrorlib status: from the clusters
            workers = flow_status(cfg, flow, timeout=30.0).workers
            return next((w for w in workers if offsets in (w.report.last_error or "")), None)

        view = wait_for("the driver's report with the error", driver, timeout=60)
        assert view.report.state is WorkerState.RUNNING

        # the failure lasts (heartbeats are copied every second: every batch stores positions)
        monkeypatch.setattr(plane, "POSITION_FAILURE_S", 0.0)
        with pytest.raises(Exception, match=f"positions not stored in {offsets} on B") as failed:
            handle.await_termination(timeout=120)
        assert "KafkaRequestError" in str(failed.value)
        assert handle.status()[0].state is FlowState.FAILED
        view = wait_for(
            "the driver's report: failed",
            lambda: (v := driver()) is not None and v.report.state is WorkerState.FAILED,
            timeout=60,
        )
    finally:
        job.stop()
