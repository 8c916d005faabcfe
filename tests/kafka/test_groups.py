"""GroupAdmin against a real local cluster: a long-lived one answers again after a restart."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

from mirrorlib.core.records import OffsetAndMetadata, TopicPartition
from mirrorlib.errors import ClusterError
from mirrorlib.kafka.groups import GroupAdmin, GroupState
from mirrorlib.testing.pytest_plugin import ClusterRequest
from tests.kafka._util import unique

pytestmark = pytest.mark.integration

T = TypeVar("T")


def answered(call: Callable[[], T], within: float) -> tuple[T, int]:
    """``call()`` until it raises no ClusterError; its answer and the failed calls before."""
    deadline = time.monotonic() + within
    failures = 0
    while True:
        try:
            return call(), failures
        except ClusterError as exc:
            failures += 1
            if time.monotonic() > deadline:
                raise AssertionError(f"still failing after {within}s ({failures}): {exc}") from exc
            time.sleep(1)


def test_a_group_admin_that_lived_across_a_broker_restart_answers_again(
    private_kafka_clusters: ClusterRequest,
) -> None:
    """After a broker restart a long-lived admin client's coordinator requests (OffsetFetch,
    DescribeGroups) were measured to time out for minutes: the checkpoint task's group reads
    stopped. A call that failed for a retriable reason leaves a new client for the next one."""
    (cluster,) = private_kafka_clusters(1)
    topic = unique("grestart")
    cluster.create_topic(topic, 1)
    group = unique("g")
    tp = TopicPartition(topic, 0)
    admin = GroupAdmin({"bootstrap.servers": cluster.bootstrap_servers}, alias="A", timeout=5)
    admin.commit_offsets(group, {tp: OffsetAndMetadata(3)})
    assert admin.committed_offsets(group)[tp].offset == 3
    cluster.restart()

    def offsets() -> int:
        got = admin.committed_offsets_many([group])[group]
        if isinstance(got, ClusterError):
            raise got
        return got[tp].offset

    offset, failures = answered(offsets, within=60)
    assert offset == 3
    assert failures <= 3, failures
    state, failures = answered(lambda: admin.states([group])[group], within=30)
    assert state is GroupState.EMPTY
    assert failures <= 3, failures
