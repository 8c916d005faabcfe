"""The copier's assignment with a stand-in consumer (no broker): what a rebalance callback
raises stays out of librdkafka and comes back after the poll."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mirrorlib.core.catalog import RemoteTopic, TopicCatalog
from mirrorlib.core.counters import StatsRegistry
from mirrorlib.core.syncs import OffsetSyncEmitter
from mirrorlib.kafka.copier.assignment import Assignment
from mirrorlib.kafka.copier.parts import CopierContext
from mirrorlib.kafka.positions import PositionStore
from tests.runtime.conftest import offline_settings

FENCED = KafkaException(KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True))


class StandInConsumer:
    """Records what the assignment asks of the consumer; keeps the rebalance callbacks."""

    def __init__(self) -> None:
        self.callbacks: dict[str, Any] = {}
        self.unassigned: list[tuple[str, int]] = []

    def subscribe(self, topics: list[str], **callbacks: Any) -> None:
        self.callbacks = callbacks

    def incremental_unassign(self, partitions: list[Any]) -> None:
        self.unassigned += [(t.topic, t.partition) for t in partitions]


class FencedCommitter:
    """A transaction committer whose producer was fenced: aborting and committing fail."""

    def lost(self) -> None:
        raise FENCED

    def checkpoint(self, *, only: set[tuple[str, int]] | None = None) -> None:
        raise FENCED

    def forget(self, keys: set[tuple[str, int]]) -> None:
        pass


def subscribed_assignment() -> tuple[Assignment, StandInConsumer]:
    s = offline_settings(**{"A->B.topics": "orders"})
    ctx = CopierContext(
        s, StatsRegistry(s.source, s.target), OffsetSyncEmitter(), transactional=True
    )
    ctx.committer = FencedCommitter()  # type: ignore[assignment]
    consumer = StandInConsumer()
    ctx.consumer = consumer
    catalog = TopicCatalog()
    catalog.publish({"orders": RemoteTopic("A.orders", 2)})
    positions = PositionStore(
        s.target_consumer, s.offset_storage_topic, source_alias=s.source, target_alias=s.target,
        partitions=1, read_committed=True,
    )  # fmt: skip
    assignment = Assignment(ctx, catalog, positions, None, refresh_metadata=lambda topics: None)
    assignment.sync_subscription()
    return assignment, consumer


@pytest.mark.parametrize("callback", ["on_lost", "on_revoke"])
def test_a_failing_rebalance_callback_completes_the_rebalance_and_raises_after_the_poll(
    callback: str,
) -> None:
    """A lost (or revoked) partition whose transaction cannot be aborted (committed) because the
    producer was fenced: the callback returns normally to librdkafka with the partitions
    unassigned, and the copier's loop gets the fencing error from ``raise_callback_error`` as a
    ``KafkaException`` — once."""
    assignment, consumer = subscribed_assignment()
    assert set(consumer.callbacks) == {"on_assign", "on_revoke", "on_lost"}

    consumer.callbacks[callback](consumer, [KafkaTopicPartition("orders", 0)])

    assert consumer.unassigned == [("orders", 0)]
    with pytest.raises(KafkaException) as raised:
        assignment.raise_callback_error()
    assert raised.value is FENCED
    assignment.raise_callback_error()  # nothing more
