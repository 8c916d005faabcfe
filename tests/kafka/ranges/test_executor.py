"""Copy tasks' Kafka I/O (mirrorlib.kafka.ranges.executor) against real clusters, without Spark."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import attrs
import pytest
from confluent_kafka import KafkaError, Producer

import mirrorlib.kafka.ranges.executor
from mirrorlib.core.batches import Range
from mirrorlib.core.settings import FlowSettings
from mirrorlib.errors import ClusterTimeoutError, MirrorError
from mirrorlib.kafka.ranges.executor import copy_ranges, kept_clients
from mirrorlib.testing import ClusterSet
from tests.kafka._util import unique
from tests.kafka.librdkafka_hooks import provoke_fatal_error
from tests.runtime.conftest import config, produce, read_all

pytestmark = pytest.mark.integration

TS0 = (int(time.time()) - 3600) * 1000


def _flow(
    clusters: ClusterSet, partitions: int, records: list[dict[str, Any]]
) -> tuple[str, FlowSettings]:
    """A new source topic holding ``records``, its remote topic, and the A->B flow's settings
    (with the offset-syncs topic created)."""
    a, b = clusters
    topic = unique("rg")
    a.create_topic(topic, partitions)
    b.create_topic(f"A.{topic}", partitions)
    produce(a, topic, records)
    cfg = config(clusters, ["A->B"])
    (flow,) = cfg.pairs_for_targets(["B"])
    s = FlowSettings.from_config(cfg, flow)
    with contextlib.suppress(Exception):  # shared clusters: another test may have created it
        (a if s.offset_syncs_cluster == a.alias else b).create_topic(s.offset_syncs_topic)
    return topic, s


def test_tasks_of_one_process_share_their_clients_and_copy_every_range_exactly(
    two_clusters: ClusterSet,
) -> None:
    records = [
        {
            "key": f"k{i}".encode(),
            "value": f"v{i}".encode(),
            "partition": i % 2,
            "timestamp": TS0 + i,
        }
        for i in range(300)
    ]
    topic, s = _flow(two_clusters, 2, records)
    b = two_clusters["B"]

    first = copy_ranges(s, [Range(topic, 0, 0, 100), Range(topic, 1, 0, 100)])
    assert first.records == 200
    kept = kept_clients()
    assert kept >= 1  # kept for the next task

    # the next task borrows them: the same partitions further on, then a range again (a replay)
    second = copy_ranges(s, [Range(topic, 0, 100, 150), Range(topic, 1, 100, 150)])
    assert second.records == 100
    third = copy_ranges(s, [Range(topic, 1, 40, 50)])
    assert third.records == 10
    assert kept_clients() == kept  # borrowed and given back
    assert [p.copied_to for p in second.partitions] == [150, 150]
    assert second.offset_syncs > 0
    for task in (first, second, third):  # the wait for the first record, within the task
        assert task.first_record_s is not None and 0 < task.first_record_s <= task.seconds
    assert copy_ranges(s, [Range(topic, 0, 150, 150)]).first_record_s is None  # nothing to read

    copied = read_all(b, f"A.{topic}")
    by_partition = {p: [m.value() for m in copied if m.partition() == p] for p in (0, 1)}
    assert by_partition[0] == [f"v{i}".encode() for i in range(0, 300, 2)][:150]
    expected_1 = [f"v{i}".encode() for i in range(1, 300, 2)]
    assert by_partition[1] == expected_1[:150] + expected_1[40:50]
    assert all(m.timestamp()[1] == TS0 + int(m.value()[1:]) for m in copied)


def test_a_failed_task_closes_its_clients_instead_of_keeping_them(
    two_clusters: ClusterSet,
) -> None:
    records = [{"value": b"v", "partition": 0, "timestamp": TS0}] * 5
    topic, s = _flow(two_clusters, 1, records)
    assert copy_ranges(s, [Range(topic, 0, 0, 5)]).records == 5
    kept = kept_clients()  # (at least the set this task gave back)

    # offsets 5..9 do not exist yet: no progress, the task fails (Spark would retry it)
    with pytest.raises(ClusterTimeoutError):
        copy_ranges(s, [Range(topic, 0, 0, 10)], stall_timeout=2.0)
    assert kept_clients() == kept - 1  # the set it borrowed was closed

    assert copy_ranges(s, [Range(topic, 0, 0, 5)]).records == 5  # new clients, kept after
    assert kept_clients() == kept


def test_a_fatal_producer_error_fails_the_task_instead_of_parking(
    two_clusters: ClusterSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record producer dies (a fatal idempotence error) with the range's last records in
    flight: librdkafka purges them ("Purged in queue") and raises the fatal error from the next
    poll. The task fails with the producer's error (Spark retries it with new clients, copying
    the range again) instead of parking the partition as if the target had refused a record."""
    records = [{"value": b"v%d" % i, "partition": 0, "timestamp": TS0} for i in range(50)]
    topic, s = _flow(two_clusters, 1, records)
    assert copy_ranges(s, [Range(topic, 0, 0, 10)]).records == 10  # clients kept, connected

    class DiesAfterTheLastRecord(Producer):  # type: ignore[misc]
        def produce(self, *args: Any, **kwargs: Any) -> None:
            super().produce(*args, **kwargs)
            if args[1] == b"v49":
                provoke_fatal_error(self, KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER)

    monkeypatch.setattr(mirrorlib.kafka.ranges.executor, "Producer", DiesAfterTheLastRecord)
    # a configuration of its own: the task builds new clients with the patched producer
    dying = attrs.evolve(s, target_producer={**s.target_producer, "client.id": unique("dies")})
    with pytest.raises(MirrorError, match="OUT_OF_ORDER_SEQUENCE_NUMBER"):
        copy_ranges(dying, [Range(topic, 0, 10, 50)])
    monkeypatch.undo()
    retried = copy_ranges(dying, [Range(topic, 0, 10, 50)])  # Spark's retry: new clients
    assert retried.records == 40
    assert [p.error for p in retried.partitions] == [None]
    copied = {m.value() for m in read_all(two_clusters["B"], f"A.{topic}")}
    assert copied == {r["value"] for r in records}
