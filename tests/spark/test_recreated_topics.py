"""The Spark engine and topics deleted and created again (a new topic id): the new incarnation
is copied from its first offset, whether the query was stopped meanwhile (restarted from its
checkpoint) or running (mirrorlib.core.incarnations)."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

import pytest

from mirrorlib import MirrorConfig, translate_offsets
from mirrorlib.testing import ClusterSet
from tests.runtime.conftest import commit_group, mm2_properties, read_all, wait_for
from tests.runtime.test_recreated_topics import WARNING, copied, recreate

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_a_recreated_source_topic_is_copied_from_its_first_offset(
    two_clusters: ClusterSet, spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from mirrorlib.spark import SparkReplicator

    a, b = two_clusters
    name = f"sprec{uuid.uuid4().hex[:6]}"
    topic, remote = f"{name}.t", f"A.{name}.t"
    a.create_topic(topic, 1)
    a.produce(topic, [f"old-{i}" for i in range(1000)])
    props = mm2_properties(
        two_clusters, ["A->B"], **{"A->B.topics": f"{name}\\..*", "A->B.groups": f"{name}-.*"}
    )
    cfg = MirrorConfig.from_properties(props)
    checkpoint = str(tmp_path / "chk")
    job = SparkReplicator(cfg, spark, checkpoint_location=checkpoint).start()
    try:
        wait_for("the old topic copied", lambda: copied(b, remote, "old-", 1000, eos=False))
    finally:
        job.stop()
    # stopped, re-created with more records, started again from the same checkpoint
    recreate(a, topic)
    a.produce(topic, [f"new-{i}" for i in range(3000)])
    with caplog.at_level(logging.WARNING):
        job = SparkReplicator(cfg, spark, checkpoint_location=checkpoint).start()
        try:
            wait_for(
                "every record of the new topic copied",
                lambda: copied(b, remote, "new-", 3000, eos=False),
                timeout=120,
            )
            assert WARNING in caplog.text
            assert job.status()[0].new_incarnations >= 1
            # a group of the new incarnation fails over to its own records
            group = f"{name}-g"
            commit_group(a, group, topic, {0: 2000})

            def translated() -> int | None:
                got = translate_offsets({"bootstrap.servers": b.bootstrap_servers}, "A", group)
                return next((om.offset for tp, om in got.items() if tp.topic == remote), None)

            down = wait_for("the group's checkpoint", translated, timeout=90)
            at = {m.offset(): m.value().decode() for m in read_all(b, remote)}
            assert at[down].startswith("new-") and int(at[down][4:]) <= 2000, at[down]
            # re-created again while the query runs
            seen = job.status()[0].new_incarnations
            recreate(a, topic)
            a.produce(topic, [f"newer-{i}" for i in range(500)])
            wait_for(
                "every record of the newer topic copied",
                lambda: copied(b, remote, "newer-", 500, eos=False),
                timeout=120,
            )
            assert job.status()[0].new_incarnations > seen
        finally:
            job.stop()
