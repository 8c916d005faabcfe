"""Partition counts, offsets, first timestamps and record digests, read for the out-of-process views
(:mod:`mirrorlib.runtime.operations`: ``status`` and ``verify``).

Requests that fail raise :class:`~mirrorlib.errors.ClusterError` naming the cluster or the
partition.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import IsolationLevel, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

from mirrorlib.core.audit import record_digest
from mirrorlib.errors import ClusterError
from mirrorlib.kafka import new_consumer
from mirrorlib.kafka.admin import FreshAdmin
from mirrorlib.kafka.admin import list_offsets as fresh_list_offsets

__all__ = [
    "first_records",
    "first_timestamps",
    "list_offsets",
    "read_digests",
    "topic_partitions",
]


def _consumer(config: Mapping[str, Any]) -> Any:
    conf = dict(config)
    conf.update(
        {
            "group.id": "mirrorlib-inspect",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": False,
        }
    )
    return new_consumer(conf)


def topic_partitions(admin: Any, alias: str, timeout: float) -> dict[str, int]:
    """Partition count of every topic of the cluster that ``admin`` (an ``AdminClient``) talks
    to; topics with an error or no partitions are left out."""
    try:
        md = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise ClusterError(f"cluster {alias}: cannot list topics: {exc}") from exc
    return {n: len(t.partitions) for n, t in md.topics.items() if t.error is None and t.partitions}


def list_offsets(
    admin: Any,
    alias: str,
    tps: Iterable[tuple[str, int]],
    latest: bool,
    timeout: float,
    *,
    read_committed: bool = False,
) -> dict[tuple[str, int], int]:
    """Earliest or latest offset of each partition (one ListOffsets request); the latest is the
    last stable offset when ``read_committed`` (what a ``read_committed`` reader can reach).
    Raises :class:`~mirrorlib.errors.KafkaRequestError` naming the partition a broker refused
    until ``timeout``."""
    spec = OffsetSpec.latest() if latest else OffsetSpec.earliest()  # type: ignore[no-untyped-call]
    request = {(t, p): spec for t, p in tps}
    if not request:
        return {}
    level = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
    # partitions refused for a moved leader are asked again with fresh metadata until timeout
    return fresh_list_offsets(
        FreshAdmin(alias=alias, client=admin), request, timeout=timeout, isolation_level=level,
        action=f"list {'latest' if latest else 'earliest'} offsets",
    )  # fmt: skip


def first_timestamps(
    consumer_config: Mapping[str, Any], positions: Mapping[tuple[str, int], int], timeout: float
) -> dict[tuple[str, int], int]:
    """The timestamp of the record at each position (partitions whose record does not arrive
    within ``timeout`` are left out)."""
    if not positions:
        return {}
    consumer = _consumer(consumer_config)
    try:
        consumer.assign([KafkaTopicPartition(t, p, o) for (t, p), o in positions.items()])
        found: dict[tuple[str, int], int] = {}
        deadline = time.monotonic() + timeout
        while len(found) < len(positions) and time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=0.5):
                if msg.error() is not None:
                    continue
                key = (msg.topic(), msg.partition())
                if key not in found:
                    found[key] = msg.timestamp()[1]
                    consumer.pause([KafkaTopicPartition(key[0], key[1])])
        return found
    finally:
        consumer.close()


def first_records(
    consumer_config: Mapping[str, Any],
    ranges: Mapping[tuple[str, int], tuple[int, int]],
    timeout: float,
    *,
    read_committed: bool,
) -> dict[tuple[str, int], int | None]:
    """For each partition, the timestamp of its first record in ``[start, end)``, read with
    the given isolation level, or ``None`` when the range holds no record at all: only
    transaction markers, records of aborted transactions (``read_committed``) or offsets
    compacted away — the consumer's position moves past those without delivering anything.
    Partitions whose answer does not come within ``timeout`` are left out."""
    if not ranges:
        return {}
    conf = dict(consumer_config)
    conf["isolation.level"] = "read_committed" if read_committed else "read_uncommitted"
    consumer = _consumer(conf)
    try:
        consumer.assign([KafkaTopicPartition(t, p, s) for (t, p), (s, _) in ranges.items()])
        found: dict[tuple[str, int], int | None] = {}
        deadline = time.monotonic() + timeout
        while len(found) < len(ranges) and time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=0.5):
                key = (msg.topic(), msg.partition())
                if msg.error() is not None or key in found:
                    continue
                found[key] = msg.timestamp()[1] if msg.offset() < ranges[key][1] else None
                consumer.pause([KafkaTopicPartition(key[0], key[1])])
            waiting = [KafkaTopicPartition(t, p) for t, p in ranges if (t, p) not in found]
            for ktp in consumer.position(waiting) if waiting else ():
                if ktp.offset >= ranges[(ktp.topic, ktp.partition)][1]:
                    found[(ktp.topic, ktp.partition)] = None  # past the end: nothing in between
        return found
    finally:
        consumer.close()


def read_digests(
    consumer_config: Mapping[str, Any],
    topic: str,
    partition: int,
    start: int,
    end: int,
    *,
    read_committed: bool,
    timeout: float,
    progress: Callable[[int], None] | None = None,
) -> list[tuple[int, bytes]]:
    """``(offset, digest)`` of the records of one partition in ``[start, end)``.

    ``progress`` receives, after each batch, how many offsets the read advanced (transaction
    markers and compacted gaps included), so the counts add up to ``end - start`` once the
    range is read."""
    out: list[tuple[int, bytes]] = []
    if end <= start:
        return out
    conf = dict(consumer_config)
    conf["isolation.level"] = "read_committed" if read_committed else "read_uncommitted"
    consumer = _consumer(conf)
    reached = start  # every offset below this one is read (or is a marker or a gap)
    try:
        consumer.assign([KafkaTopicPartition(topic, partition, start)])
        deadline = time.monotonic() + timeout
        while reached < end:
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"reading {topic}-{partition} [{start}, {end}) timed out after {timeout:.0f}s"
                )
            msgs = consumer.consume(2000, timeout=0.5)
            before = reached
            for msg in msgs:
                if msg.error() is None and msg.offset() < end:
                    out.append((msg.offset(), record_digest(
                        msg.key(), msg.value(), msg.headers(), msg.timestamp()[1])))  # fmt: skip
                if msg.error() is None:
                    reached = min(max(reached, msg.offset() + 1), end)
            if not msgs:  # transaction markers or a compacted tail: the position moves on
                position = consumer.position([KafkaTopicPartition(topic, partition)])[0].offset
                reached = min(max(reached, position), end)
            if progress is not None and reached > before:
                progress(reached - before)
        return out
    finally:
        consumer.close()
