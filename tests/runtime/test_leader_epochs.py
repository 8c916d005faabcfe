"""Exactly-once replication goes on after broker restarts (issue 34).

A broker restart moves every partition's leader epoch on. Clients that live across it (the flow's
position store on the target, the checkpoint task's offset-syncs reader) hold the old epoch in
their metadata and the broker answers FENCED_LEADER_EPOCH until they fetch fresh metadata. The
replicator must retry with fresh metadata and carry on: nothing lost, nothing twice for a
``read_committed`` reader, checkpoints emitted again."""

from __future__ import annotations

import logging
import time
from collections import Counter

import pytest
from confluent_kafka import KafkaException

from mirrorlib import Checkpoint, Replicator
from mirrorlib.core.status import FlowState
from mirrorlib.testing.pytest_plugin import ClusterRequest
from tests.runtime.conftest import commit_group, config, end_offsets, produce, read_all, wait_for

pytestmark = pytest.mark.integration

PARTITIONS = 2


def _values(n: int, start: int) -> list[dict[str, object]]:
    return [{"value": str(start + i).encode(), "partition": i % PARTITIONS} for i in range(n)]


@pytest.mark.parametrize("tasks", [1, 2])
def test_exactly_once_goes_on_after_the_target_and_the_source_broker_restart(
    private_kafka_clusters: ClusterRequest, caplog: pytest.LogCaptureFixture, tasks: int
) -> None:
    """``tasks.max`` 1: the in-process copier; 2: copier worker processes (each reads the
    flow's positions with a reader of its own)."""
    a, b = private_kafka_clusters(["A", "B"])
    topic = "epoch.t"
    group = "epoch-group"
    a.create_topic(topic, PARTITIONS)
    cfg = config(
        [a, b],
        ["A->B"],
        **{
            "A->B.topics": "epoch\\..*",
            "A->B.groups": "epoch-.*",
            "B.exactly.once.source.support": "enabled",
            "tasks.max": str(tasks),
            "transaction.boundary.interval.ms": "300",
        },
    )
    remote = f"A.{topic}"

    def committed_count() -> int:
        try:
            return len({m.value() for m in read_all(b, remote, read_committed=True)})
        except KafkaException:  # the remote topic is not there yet
            return 0

    total = 0
    with Replicator(cfg) as r:
        produce(a, topic, _values(200, total))
        total += 200
        wait_for("the first records on B", lambda: committed_count() >= total, timeout=60)
        for side in (b, a):  # the target first, then the source
            side.restart()
            produce(a, topic, _values(200, total))
            total += 200
            wanted = total
            wait_for(
                f"every record on B after {side.alias} restarted",
                lambda: committed_count() >= wanted,  # noqa: B023  (called at once)
                timeout=90,
            )
        # the checkpoint task recovered: a group's commit made after both restarts is
        # translated and emitted
        ends = {p: e for p, e in end_offsets(a, topic).items()}
        commit_group(a, group, topic, ends)

        def checkpointed() -> bool:
            got = {
                cp.topic_partition.partition: cp.upstream_offset
                for m in read_all(b, "A.checkpoints.internal")
                for cp in [Checkpoint.decode(m.key(), m.value())]
                if cp.group == group
            }
            return got == ends

        wait_for("checkpoints of the group's commit after the restarts", checkpointed, timeout=60)
        wait_for("flow running", lambda: r.status()[0].state is FlowState.RUNNING, timeout=60)
        # nothing retried for ever: a few seconds later no request fails on a stale epoch
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="mirrorlib"):
            produce(a, topic, _values(20, total))
            total += 20
            wait_for("the last records on B", lambda: committed_count() >= total, timeout=60)
            time.sleep(3)
        stale = [rec.getMessage() for rec in caplog.records if "LEADER_EPOCH" in rec.getMessage()]
        assert not stale, stale[:3]
        assert r.status()[0].state is FlowState.RUNNING
    counts = Counter(int(m.value()) for m in read_all(b, remote, read_committed=True))
    missing = [i for i in range(total) if counts[i] == 0]
    twice = {i: c for i, c in counts.items() if c > 1}
    assert not missing, f"{len(missing)} records lost, e.g. {missing[:10]}"
    assert not twice, f"{len(twice)} records seen more than once, e.g. {list(twice.items())[:10]}"
