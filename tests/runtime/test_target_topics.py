"""The copier follows what it learns of the remote topics: their max.message.bytes and growth."""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    ResourceType,
)

from mirrorlib import Replicator
from mirrorlib.core.settings import FlowSettings
from mirrorlib.testing import BaseCluster, ClusterSet
from tests.runtime.conftest import config, end_offsets, read_all, wait_for
from tests.runtime.test_replicator import replicated

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("eos", [False, True], ids=["at-least-once", "exactly-once"])
def test_a_backlog_is_copied_into_a_topic_with_a_small_max_message_bytes(
    two_clusters: ClusterSet, eos: bool
) -> None:
    """Records of 1-5 KB fit a 20 KB max.message.bytes one by one, but not in the 1 MB batches
    the replication producer builds from a backlog: the copier must send smaller batches."""
    a, b = two_clusters
    topic = f"smallmax.{'eos' if eos else 'alo'}"
    a.create_topic(topic, 2, config={"max.message.bytes": "20000"})
    rng = random.Random(11)
    values = [rng.randbytes(rng.randint(1000, 5000)) for _ in range(3000)]
    # the source topic refuses big batches too: produce the backlog in small ones
    producer = Producer({**a.client_config(), "linger.ms": 20, "batch.size": 15_000})
    for i, value in enumerate(values):
        producer.produce(topic, value, key=b"k%d" % i, partition=i % 2)
        producer.poll(0)
    assert producer.flush(60) == 0
    extra = {"B.exactly.once.source.support": "enabled"} if eos else {}
    cfg = config(two_clusters, ["A->B"], **{"A->B.topics": topic.replace(".", "\\."), **extra})
    errors: set[str] = set()
    with Replicator(cfg) as r:

        def done() -> bool:
            errors.update(p.error for p in r.status()[0].partitions if p.error)
            return replicated(r, topic) >= len(values)

        wait_for(f"{len(values)} records replicated", done, timeout=120)
    assert not errors  # no partition was parked on the way
    got = read_all(b, f"A.{topic}", read_committed=eos)
    for partition in (0, 1):
        copied = [m.value() for m in got if m.partition() == partition]
        assert copied == values[partition::2]  # all of them, in order, once


def test_a_record_larger_than_max_message_bytes_still_stops_its_partition(
    two_clusters: ClusterSet,
) -> None:
    """Smaller batches do not help a record that is too large on its own: a real refusal."""
    a, b = two_clusters
    topic = "smallmax.big"
    a.create_topic(topic, 1, config={"max.message.bytes": "300000"})
    b.create_topic(f"A.{topic}", 1, config={"max.message.bytes": "20000"})
    values = [b"a%d" % i * 1000 for i in range(20)] + [b"x" * 100_000, b"after"]
    producer = Producer({**a.client_config(), "linger.ms": 5})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    cfg = config(
        two_clusters,
        ["A->B"],
        **{"A->B.topics": "smallmax\\.big", "config.properties.exclude": "max\\.message\\.bytes"},
    )
    with Replicator(cfg) as r:

        def stuck() -> str | None:
            part = next((p for p in r.status()[0].partitions if p.topic == topic), None)
            return part.error if part is not None and part.error else None

        error = wait_for("the partition reports the refused record", stuck)
        assert f"{topic}-0@20" in error, error
        wait_for("the records before it", lambda: replicated(r, "smallmax.big") >= 20)
        time.sleep(2)
        assert replicated(r, "smallmax.big") == 20
    assert [m.value() for m in read_all(b, f"A.{topic}")] == values[:20]


def _lower_max_message_bytes(target: BaseCluster, topic: str, value: int) -> None:
    """Lower ``max.message.bytes`` of ``topic`` on ``target`` behind the copier's back."""
    lowered = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry(
                "max.message.bytes", str(value), incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    admin = AdminClient(target.client_config())
    for future in admin.incremental_alter_configs([lowered]).values():
        future.result(30)


def committed(target: BaseCluster, topic: str, partition: int) -> list[bytes]:
    """The values of ``partition`` of ``topic`` a ``read_committed`` consumer of ``target`` sees."""
    return [
        m.value()
        for m in read_all(target, topic, read_committed=True)
        if m.partition() == partition
    ]


@contextlib.contextmanager
def _a_refused_record_in_a_latest_flow(
    clusters: ClusterSet, topic: str
) -> Iterator[tuple[Replicator, Producer]]:
    """An exactly-once flow started at the end of the log (``auto.offset.reset=latest``, 100
    records of history not to copy) whose target then refuses record 50 of partition 0 (its
    remote topic's max.message.bytes was lowered after the copier cached it) while partition 1
    gets 20 records: yields once the refusal is reported and the 20 records are copied."""
    a, b = clusters
    a.create_topic(topic, 2, config={"max.message.bytes": "300000"})
    producer = Producer({**a.client_config(), "linger.ms": 5})
    for i in range(100):
        producer.produce(topic, b"history-%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    cfg = config(
        clusters,
        ["A->B"],
        **{
            "A->B.topics": topic.replace(".", "\\."),
            "A->B.consumer.auto.offset.reset": "latest",
            "B.exactly.once.source.support": "enabled",
            "config.properties.exclude": "max\\.message\\.bytes",
        },
    )
    with Replicator(cfg) as r:
        wait_for(
            "both partitions assigned",
            lambda: len([p for p in r.status()[0].partitions if p.topic == topic]) == 2,
        )
        time.sleep(2)  # the consumer is at the end of the log
        _lower_max_message_bytes(b, f"A.{topic}", 20_000)
        for i in range(20):
            producer.produce(topic, b"after-%d" % i, partition=1)
        producer.produce(topic, b"x" * 100_000, partition=0)  # refused by the target
        assert producer.flush(30) == 0

        def refused() -> str | None:
            return next((p.error for p in r.status()[0].partitions if p.error), None)

        error = wait_for("the partition reports the refused record", refused)
        assert f"{topic}-0@50" in error, error
        wait_for("the records after the start", lambda: len(committed(b, f"A.{topic}", 1)) >= 20)
        yield r, producer


def test_exactly_once_parks_a_partition_at_a_refused_record_and_copies_the_others(
    two_clusters: ClusterSet,
) -> None:
    """A refused record fails its transaction: it is aborted and every partition of it rewound
    (with nothing committed yet, to the first record it produced, not to the beginning of the
    log); the refusing partition waits at the refused record, the others are copied once. The
    status counts the committed records only (the aborted transaction's are copied again)."""
    _, b = two_clusters
    topic = "latest.abort"
    with _a_refused_record_in_a_latest_flow(two_clusters, topic) as (r, _):
        time.sleep(3)
        counted = {
            p.partition: p.record_count for p in r.status()[0].partitions if p.topic == topic
        }
    assert committed(b, f"A.{topic}", 0) == []
    assert committed(b, f"A.{topic}", 1) == [b"after-%d" % i for i in range(20)]
    assert counted == {0: 0, 1: 20}
    everything = [m.value() for m in read_all(b, f"A.{topic}")]  # aborted records too
    assert not [v for v in everything if v.startswith(b"history-")], everything[:5]


def test_a_restarted_copier_resumes_a_partition_never_committed_where_it_started(
    two_clusters: ClusterSet,
) -> None:
    """Recreating the copier's clients (its producer fenced) must not move a partition with no
    stored position to the end of the log again (``auto.offset.reset=latest``): that would skip
    the refused record, and copy what follows it."""
    _, b = two_clusters
    topic = "latest.restart"
    remote = f"A.{topic}"
    with _a_refused_record_in_a_latest_flow(two_clusters, topic) as (r, producer):
        cfg = r.config
        settings = FlowSettings.from_config(cfg, cfg.flow("A", "B"))
        rival = Producer({**b.client_config(), "transactional.id": settings.transactional_id})
        rival.init_transactions(30)  # fences the copier's producer: its clients are recreated
        producer.produce(topic, b"later", partition=0)
        for i in range(20, 40):
            producer.produce(topic, b"after-%d" % i, partition=1)
        assert producer.flush(30) == 0
        wait_for("the records after the restart", lambda: len(committed(b, remote, 1)) >= 40)

        def refused_again() -> str | None:
            return next((p.error for p in r.status()[0].partitions if p.error), None)

        error = wait_for("the refused record reported again", refused_again)
        assert f"{topic}-0@50" in error, error
        time.sleep(3)
    assert committed(b, remote, 0) == []  # not b"later": the restart did not skip record 50
    assert committed(b, remote, 1) == [b"after-%d" % i for i in range(40)]


def test_partitions_added_to_a_topic_alone_are_copied_within_a_refresh_interval(
    two_clusters: ClusterSet,
) -> None:
    """Growing a topic changes no topic name: the copier must still pick the new partitions up
    (its consumer and its producer), within a refresh interval (1 s here) plus seconds."""
    a, b = two_clusters
    topic = "growalone.t"
    a.create_topic(topic, 1)
    a.produce(topic, [b"before"])
    cfg = config(two_clusters, ["A->B"], **{"A->B.topics": "growalone\\..*"})
    with Replicator(cfg) as r:
        wait_for("the first record", lambda: replicated(r, "growalone") >= 1)
        admin = a.admin_client()
        admin.create_partitions([NewPartitions(topic, 3)])[topic].result(30)
        grown = time.monotonic()
        for partition in (1, 2):
            a.produce(topic, [b"new-%d" % partition], partition=partition)
        wait_for("records of the new partitions", lambda: replicated(r, "growalone") >= 3, 30)
        took = time.monotonic() - grown
    assert len(end_offsets(b, f"A.{topic}")) == 3
    got = {(m.partition(), m.value()) for m in read_all(b, f"A.{topic}")}
    assert got == {(0, b"before"), (1, b"new-1"), (2, b"new-2")}, took
