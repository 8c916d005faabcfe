"""The checkpoint task on real clusters: the state of groups deleted on the source is forgotten, and
group offset sync never re-creates a group an operator deleted on the target."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mirrorlib.core.settings import FlowSettings
from mirrorlib.runtime.flow import CopierPlane, FlowRunner, stop_flows
from mirrorlib.testing import ClusterSet
from tests.runtime.conftest import commit_group, config, produce, wait_for

pytestmark = pytest.mark.integration


def _runner(clusters: ClusterSet, tag: str) -> FlowRunner[CopierPlane]:
    cfg = config(
        clusters, ["A->B"],
        **{"A->B.topics": f"ckprune\\.{tag}", "A->B.groups": f"ckprune-{tag}-.*",
           "sync.group.offsets.enabled": "true"},
    )  # fmt: skip
    settings = FlowSettings.from_config(cfg, cfg.flow("A", "B"))
    return FlowRunner(settings, CopierPlane(), thread_prefix=f"test-{tag}")


def _groups(runner: FlowRunner[Any]) -> set[str]:
    """The groups the flow's checkpoint task holds checkpoint state for."""
    task = runner.checkpoints
    if task is None:
        return set()
    for _ in range(10):  # the task's thread may change the store meanwhile
        try:
            return set(task.store.groups())
        except RuntimeError:
            time.sleep(0.05)
    raise AssertionError("the checkpoint store kept changing")


def _checkpointed(runner: FlowRunner[Any], group: str, offset: int) -> bool:
    task = runner.checkpoints
    return task is not None and any(
        down == offset for _up, down, _md in dict(task.store.latest(group)).values()
    )


def _committed_on(cluster: Any, group: str, topic: str) -> int | None:
    """``group``'s committed offset of partition 0 of ``topic`` (``None``: none)."""
    admin = cluster.admin_client()
    from confluent_kafka import ConsumerGroupTopicPartitions

    futures = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [KafkaTopicPartition(topic, 0)])]
    )
    result = futures[group].result(timeout=30)
    offsets = [tp.offset for tp in result.topic_partitions if tp.offset >= 0]
    return offsets[0] if offsets else None


def _delete_group(cluster: Any, group: str) -> None:
    admin = cluster.admin_client()
    admin.delete_consumer_groups([group], request_timeout=30)[group].result(timeout=30)


def test_groups_deleted_on_the_source_are_forgotten(two_clusters: ClusterSet) -> None:
    a, _b = two_clusters
    tag = uuid.uuid4().hex[:8]
    topic = f"ckprune.{tag}"
    a.create_topic(topic, 1)
    produce(a, topic, [{"value": str(i).encode()} for i in range(20)])
    gone, stays = f"ckprune-{tag}-gone", f"ckprune-{tag}-stays"
    for group in (gone, stays):
        commit_group(a, group, topic, {0: 10})
    runner = _runner(two_clusters, tag)
    runner.start()
    try:
        wait_for(
            "checkpoints of both groups",
            lambda: _checkpointed(runner, gone, 10) and _checkpointed(runner, stays, 10),
        )
        _delete_group(a, gone)  # an ephemeral group, say, deleted (or expired) on A
        wait_for("the deleted group forgotten", lambda: gone not in _groups(runner))
        assert stays in _groups(runner)
        assert _checkpointed(runner, stays, 10)
    finally:
        stop_flows([runner], timeout=30)


def test_a_group_deleted_on_the_target_is_not_re_created(two_clusters: ClusterSet) -> None:
    a, b = two_clusters
    tag = uuid.uuid4().hex[:8]
    topic, remote = f"ckprune.{tag}", f"A.ckprune.{tag}"
    a.create_topic(topic, 1)
    produce(a, topic, [{"value": str(i).encode()} for i in range(20)])
    deleted, new = f"ckprune-{tag}-deleted", f"ckprune-{tag}-new"
    commit_group(a, deleted, topic, {0: 10})
    runner = _runner(two_clusters, tag)
    runner.start()
    try:
        wait_for("the group synced to B", lambda: _committed_on(b, deleted, remote) == 10)
        _delete_group(b, deleted)  # the operator deletes it on B
        assert _committed_on(b, deleted, remote) is None
        # the group moves on on A: a newer checkpoint, which offset sync would commit on B
        commit_group(a, deleted, topic, {0: 15})
        wait_for("the newer checkpoint", lambda: _checkpointed(runner, deleted, 15))
        # a group new on A, that never existed on B, is still created there
        commit_group(a, new, topic, {0: 12})
        wait_for("the new group synced to B", lambda: _committed_on(b, new, remote) == 12)
        # several sync intervals (1 s) later, including a full round (every tenth), the
        # deleted group is still absent on B
        time.sleep(11)
        assert _committed_on(b, deleted, remote) is None
    finally:
        stop_flows([runner], timeout=30)
