"""The control plane at a scale local clusters hold: 2,000 partitions and 500 consumer groups.

Every group's new commit is checkpointed within two checkpoint intervals, and every group's
offsets are synced to B within two sync intervals after that.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from mirrorlib import Checkpoint, Replicator
from mirrorlib.testing import BaseCluster, ClusterSet
from tests.runtime.conftest import config, decoded, wait_for

pytestmark = pytest.mark.integration

TOPICS = 100
PARTITIONS = 20  # per topic: 2,000 in all
GROUPS = 500
GROUP_PARTITIONS = TOPICS * PARTITIONS // GROUPS  # 4: every partition has one group
EMIT_INTERVAL = 5
SYNC_INTERVAL = 5
CHECKPOINTS = "A.checkpoints.internal"


def topic(i: int) -> str:
    return f"scale.t{i:03d}"


def group_partitions() -> Iterator[tuple[str, str, list[int]]]:
    """(group, topic, partitions) of every group."""
    per_topic = PARTITIONS // GROUP_PARTITIONS
    for g in range(GROUPS):
        first = (g % per_topic) * GROUP_PARTITIONS
        yield f"scale-g{g:03d}", topic(g // per_topic), list(range(first, first + GROUP_PARTITIONS))


def commit_all(admin: AdminClient, offset: int) -> None:
    """Commit ``offset`` for every group on its partitions (one request per group, at once)."""
    futures = []
    for group, name, partitions in group_partitions():
        request = ConsumerGroupTopicPartitions(
            group, [KafkaTopicPartition(name, p, offset) for p in partitions]
        )
        futures += admin.alter_consumer_group_offsets([request]).values()
    for future in futures:
        future.result(60)


def group_offsets(admin: AdminClient) -> dict[tuple[str, str, int], int]:
    """(group, topic, partition) -> offset committed on a cluster, for every group."""
    futures = [
        f
        for group, _, _ in group_partitions()
        for f in admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
    ]
    out = {}
    for future in futures:
        answer = future.result(60)
        for tp in answer.topic_partitions:
            if tp.offset >= 0:
                out[(answer.group_id, tp.topic, tp.partition)] = tp.offset
    return out


def checkpoints(b: BaseCluster) -> dict[tuple[str, str, int], Checkpoint]:
    """The newest checkpoint of every (group, remote topic, partition) of this test."""
    return {
        (cp.group, cp.topic, cp.partition): cp
        for cp in decoded(b, CHECKPOINTS, Checkpoint)
        if cp.group.startswith("scale-")
    }


def test_checkpoints_and_group_offsets_of_500_groups_on_2000_partitions(
    two_clusters: ClusterSet,
) -> None:
    a, b = two_clusters
    source_admin = AdminClient(a.client_config())
    target_admin = AdminClient(b.client_config())
    names = [topic(i) for i in range(TOPICS)]
    for name in names:
        a.create_topic(name, PARTITIONS)
    producer = Producer({**a.client_config(), "linger.ms": 20})
    for name in names:
        for p in range(PARTITIONS):
            producer.produce(name, b"x", partition=p)
    assert producer.flush(60) == 0
    commit_all(source_admin, 0)
    cfg = config(
        two_clusters, ["A->B"],
        **{
            "A->B.topics": "scale\\..*",
            "A->B.groups": "scale-.*",
            "emit.checkpoints.interval.seconds": str(EMIT_INTERVAL),
            "sync.group.offsets.enabled": "true",
            "sync.group.offsets.interval.seconds": str(SYNC_INTERVAL),
        },
    )  # fmt: skip
    pairs = {(g, f"A.{t}", p) for g, t, ps in group_partitions() for p in ps}
    try:
        with Replicator(cfg) as r:

            def replicated() -> bool:
                status = next(s for s in r.status() if s.name == "A->B")
                parts = status.data_partitions
                return len(parts) == TOPICS * PARTITIONS and status.lag_records == 0

            wait_for("2,000 partitions replicated", replicated, timeout=150)
            # every group checkpointed once (at offset 0): the flow is in its steady state
            wait_for("the first checkpoints", lambda: checkpoints(b).keys() >= pairs, timeout=60)
            committed_at = time.monotonic()
            commit_all(source_admin, 1)
            time.sleep(max(committed_at + 2 * EMIT_INTERVAL - time.monotonic(), 0))
            latest = checkpoints(b)
            stale = sorted(k for k in pairs if latest[k].upstream_offset != 1)
            assert not stale, (
                f"{len(stale)} of {len(pairs)} commits not checkpointed within "
                f"{2 * EMIT_INTERVAL:.0f}s, e.g. {stale[:5]}"
            )
            time.sleep(
                max(committed_at + 2 * (EMIT_INTERVAL + SYNC_INTERVAL) - time.monotonic(), 0)
            )
            on_b = group_offsets(target_admin)
    finally:
        for admin, prefix in ((source_admin, ""), (target_admin, "A.")):
            for future in admin.delete_topics([prefix + n for n in names]).values():
                try:
                    future.result(60)
                except Exception:  # never created (a failure above says why)
                    pass
    behind = sorted(k for k in pairs if on_b.get(k) != latest[k].downstream_offset)
    assert not behind, (
        f"{len(behind)} of {len(pairs)} group offsets not synced to B within "
        f"{2 * SYNC_INTERVAL:.0f}s of their checkpoints, e.g. "
        f"{[(k, on_b.get(k), latest[k].downstream_offset) for k in behind[:5]]}"
    )
