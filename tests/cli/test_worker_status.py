"""``mirrorlib status`` shows every copier worker of a ``mirrorlib run`` node (tasks.max = 2),
read from the clusters: their partitions and rates while copying, silent after kill -9,
stopped after a clean stop."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from mirrorlib.cli import EXIT_FAILURE, EXIT_OK, main
from mirrorlib.testing import ClusterSet
from tests.runtime.conftest import ReplicatorProcess, mm2_properties, wait_for
from tests.runtime.test_delivery import Load

pytestmark = pytest.mark.integration

NODE = "status-node-1"  # the clusters are shared: other tests' nodes report too
TOPIC = "workers.status"


def workers(capsys: pytest.CaptureFixture[str], path: Path) -> tuple[dict[str, Any], list[Any]]:
    """The flow A->B as ``mirrorlib status --json`` shows it, and its workers on NODE."""
    code = main(["status", str(path), "--json", "--flow", "A->B"])
    out = capsys.readouterr().out
    # (1: the flow is stalled, e.g. after the kill; the report is complete all the same)
    assert code in (EXIT_OK, EXIT_FAILURE), out
    (flow,) = json.loads(out)["flows"]
    return flow, [w for w in flow["workers"] if w["node"] == NODE]


def test_status_lists_each_worker_with_its_partitions_and_rate_then_silent_after_kill_9(
    two_clusters: ClusterSet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, _ = two_clusters
    a.create_topic(TOPIC, 4)
    props = mm2_properties(
        two_clusters, ["A->B"],
        **{"A->B.topics": "workers\\.status", "tasks.max": "2", "node.id": NODE},
    )  # fmt: skip
    node = ReplicatorProcess(props, tmp_path)
    load = Load(a, TOPIC, 4).start()
    try:
        node.start()
        expected = {f"{TOPIC}-{p}" for p in range(4)}
        seen: list[Any] = []  # what status showed last (for the failure message)

        def copying() -> list[Any] | None:
            flow, rows = workers(capsys, node.path)
            flow_partitions = {f"{p['topic']}-{p['partition']}" for p in flow["partitions"]}
            seen[:] = [sorted(flow_partitions), rows]
            owned = [set(w["partitions"]) for w in rows]
            ok = (
                len(rows) == 2
                and all(w["state"] == "running" and w["records_per_second"] for w in rows)
                and set().union(*owned) == flow_partitions
                and expected <= flow_partitions
            )
            return rows if ok else None

        def wait_copying(what: str) -> list[Any]:
            try:
                return wait_for(what, copying, timeout=120)
            except AssertionError as exc:
                raise AssertionError(f"{exc}; status showed {seen}") from None

        rows = wait_copying("both workers copying, as status shows them")
        assert [w["slot"] for w in rows] == [0, 1]
        first, second = (set(w["partitions"]) for w in rows)
        assert first and second and not first & second
        pids = {w["pid"] for w in rows}
        assert len(pids) == 2 and node.proc.pid not in pids and os.getpid() not in pids
        assert all(w["bytes_per_second"] > 0 and not w["silent"] for w in rows)
        # the plain report has the worker table too
        assert main(["status", str(node.path), "--flow", "A->B"]) in (EXIT_OK, EXIT_FAILURE)
        text = capsys.readouterr().out
        assert "workers (" in text and NODE in text

        node.kill()  # kill -9 of the node: its workers exit with it, nobody reports any more

        def silent() -> list[Any] | None:
            _, rows = workers(capsys, node.path)
            return rows if len(rows) == 2 and all(w["silent"] for w in rows) else None

        rows = wait_for("both workers silent", silent, timeout=60)
        for w in rows:
            assert w["state"] == "silent" and w["reported_state"] == "running"
            assert w["age_s"] > 3 * w["report_interval_s"]
            # nothing is known of a silent worker: no rate, no lag (never 0)
            assert w["records_per_second"] is None and w["lag_records"] is None

        node.start()
        wait_copying("the restarted node's workers copying")
        assert node.stop() == 0

        def stopped() -> list[Any] | None:
            _, rows = workers(capsys, node.path)
            return rows if len(rows) == 2 and all(w["state"] == "stopped" for w in rows) else None

        rows = wait_for("both workers stopped", stopped, timeout=30)
        assert all(not w["silent"] and w["partitions"] == [] for w in rows)
    finally:
        load.stop()
        node.kill()
