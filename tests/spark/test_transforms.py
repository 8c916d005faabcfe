"""The Spark engine with record transforms (the same source log and transforms as
tests/runtime/test_transforms.py): exactly the records that should arrive arrive, changed as
configured, ranges ending in dropped records are not lag, and groups committed before, inside,
at and after the dropped records fail over exactly."""

from __future__ import annotations

import functools
import uuid
from pathlib import Path
from typing import Any

import pytest

from mirrorlib import MirrorConfig
from mirrorlib.runtime.failover import FailoverRefusedError, failover
from mirrorlib.testing import ClusterSet
from tests.runtime.conftest import commit_group, mm2_properties, read_all, wait_for
from tests.runtime.test_transforms import (
    COPIED,
    GROUPS,
    PARTITIONS,
    TRANSFORMS,
    expected_translation,
    write_source,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_filtered_and_changed_records_and_exact_failover(
    two_clusters: ClusterSet, spark: Any, tmp_path: Path
) -> None:
    from mirrorlib.spark import SparkReplicator

    a, b = two_clusters
    topic = f"spsmt{uuid.uuid4().hex[:8]}.t"
    remote = f"A.{topic}"
    write_source(a, topic)
    groups = [f"{topic}-g{i}" for i in range(len(GROUPS))]
    for group, offsets in zip(groups, GROUPS, strict=True):
        commit_group(a, group, topic, dict(enumerate(offsets)))
    pattern = topic.replace(".", "\\.")
    cfg = MirrorConfig.from_properties(
        mm2_properties(
            two_clusters,
            ["A->B"],
            **{"A->B.topics": pattern, "A->B.groups": f"{pattern}-.*"},
            **{f"A->B.{k}": v for k, v in TRANSFORMS.items()},
        )
    )
    want = {
        p: [(f"{p}-{up}!".encode(), [("origin", b"site-a")]) for up in COPIED]
        for p in range(PARTITIONS)
    }
    job = SparkReplicator(cfg, spark, checkpoint_location=str(tmp_path / "chk")).start()
    try:

        def arrived() -> bool:
            if remote not in b.topic_names():
                return False
            return len(read_all(b, remote)) >= len(COPIED) * PARTITIONS

        wait_for("every copied record on B", arrived, timeout=180)

        def caught_up() -> bool:
            mine = [p for p in job.status()[0].partitions if p.topic == topic]
            return len(mine) == PARTITIONS and all(p.lag_records == 0 for p in mine)

        wait_for("no lag in the job's status (dropped records are not lag)", caught_up)
        got: dict[int, list[Any]] = {p: [] for p in range(PARTITIONS)}
        for m in read_all(b, remote):
            got[m.partition()].append((m.value(), m.headers()))
        assert got == want

        seen: dict[str, Any] = {}

        def exact(group: str, offsets: tuple[int, ...]) -> Any:
            try:
                plan = failover(cfg, group, "A", "B", dry_run=True)
            except FailoverRefusedError as exc:
                seen[group] = exc
                return None
            seen[group] = plan.describe()
            got = {x.partition: x.translated for x in plan.partitions if x.topic == remote}
            ok = all(got.get(p) == expected_translation(o) for p, o in enumerate(offsets))
            return plan if ok and plan.skipped_total == 0 else None

        for group, offsets in zip(groups, GROUPS, strict=True):
            try:
                wait_for(f"{group} at {offsets} translated exactly",
                         functools.partial(exact, group, offsets), timeout=60)  # fmt: skip
            except AssertionError as exc:
                raise AssertionError(f"{exc}\nlast plan: {seen.get(group)}") from None
    finally:
        job.stop()
