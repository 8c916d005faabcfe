"""The Spark engine and a transactional source (the same log as
tests/runtime/test_transactional_source.py): the copy tasks and the driver's batches read
committed records only, status shows no lag past the trailing commit marker, ``verify`` finds no
difference and groups committed at markers and in aborted ranges fail over exactly."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

import pytest

from mirrorlib import MirrorConfig
from mirrorlib.runtime.failover import failover
from mirrorlib.runtime.operations import flow_status, verify_flow
from mirrorlib.testing import ClusterSet
from tests.runtime.conftest import mm2_properties, read_all, wait_for
from tests.runtime.test_transactional_source import (
    GROUPS,
    PARTITIONS,
    by_partition,
    commit_group,
    count,
    expected_translation,
    read_from,
    wait_empty,
    write_source,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_only_committed_records_are_copied_and_groups_fail_over_exactly(
    two_clusters: ClusterSet, spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from mirrorlib.spark import SparkReplicator

    a, b = two_clusters
    topic = f"sptx{uuid.uuid4().hex[:8]}.t"
    remote = f"A.{topic}"
    committed = write_source(a, topic)
    groups = {f"{topic}-g{i}": GROUPS[i] for i in (1, 2, 4)}  # markers, aborted, the end
    for group, offsets in groups.items():
        commit_group(a, group, topic, offsets)
    pattern = topic.replace(".", "\\.")
    cfg = MirrorConfig.from_properties(
        mm2_properties(
            two_clusters, ["A->B"], **{"A->B.topics": pattern, "A->B.groups": f"{pattern}-.*"}
        )
    )
    flow = cfg.flow("A", "B")
    with caplog.at_level(logging.WARNING):
        job = SparkReplicator(cfg, spark, checkpoint_location=str(tmp_path / "chk")).start()
    try:
        wait_for(
            "every committed record on B",
            lambda: count(b, remote) >= len(committed) * PARTITIONS,
            timeout=120,
        )
        wait_empty(
            "no lag in the job's status",
            lambda: [
                (p.partition, p.position, p.end_offset, p.lag_records)
                for p in job.status()[0].partitions
                if p.topic == topic and p.lag_records != 0
            ],
        )
        wait_empty(
            "no lag in `mirrorlib status`",
            lambda: [
                (p.partition, p.position, p.end_offset, p.lag_records)
                for p in flow_status(cfg, flow).partitions
                if p.topic == topic and p.lag_records != 0
            ],
        )
        for readers_committed in (True, False):
            on_b = by_partition(read_all(b, remote, read_committed=readers_committed))
            for p in range(PARTITIONS):
                assert [v for _, v in on_b[p]] == committed, (p, readers_committed)
        report = verify_flow(cfg, flow, pattern)
        assert report.ok, report.describe()
        assert report.totals()["matched"] == len(committed) * PARTITIONS

        source = by_partition(read_all(a, topic, read_committed=True))
        target = by_partition(read_all(b, remote, read_committed=True))
        for group, offsets in groups.items():
            want = {
                p: expected_translation(source[p], target[p], offsets[p]) for p in range(PARTITIONS)
            }

            def exact(group: str = group, want: dict[int, int | None] = want) -> Any:
                plan = failover(cfg, group, "A", "B", dry_run=True)
                got = {x.partition: x.translated for x in plan.partitions}
                return all(
                    got.get(p) == w
                    if w is not None
                    else got.get(p) is not None and got[p] > target[p][-1][0]
                    for p, w in want.items()
                )

            wait_for(f"{group} {offsets} translated exactly to {want}", exact)
            plan = failover(cfg, group, "A", "B")
            assert plan.applied and plan.skipped_total == 0
            for x in plan.partitions:
                assert x.translated is not None
                unprocessed = [v for o, v in source[x.partition] if o >= offsets[x.partition]]
                assert read_from(b, remote, x.partition, x.translated) == unprocessed
    finally:
        job.stop()
    assert not [r for r in caplog.records if "isolation.level" in r.getMessage()]
