"""Reading a whole (usually compacted) topic, like Kafka Connect's ``KafkaBasedLog``.

MM2 keeps its state in topics: offset syncs, checkpoints, heartbeats and Connect offsets. A
:class:`TopicLog` assigns every partition of one topic (or the ones asked for) to a group-less
consumer, reads from the beginning and can then be polled again to follow new records. "Caught
up" means the consumer's position has reached the end offsets that were listed at the time of the
call, so a reader never waits for records that do not exist.

A record of such a topic that does not decode (someone else wrote to it, or it was damaged) is
skipped by every reader the same way (:class:`SkippedRecords`, :func:`decoded`): counted, the
first :data:`MAX_CORRUPT_WARNINGS` of a reader logged one by one, a bounded read's count logged
at its end. It never stops the reader, and never hides: a skipped record is always in the log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final, TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, IsolationLevel, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

from mirrorlib.errors import ClusterError, CodecError, TopicReadTimeoutError
from mirrorlib.kafka import client_conf
from mirrorlib.kafka.admin import FreshAdmin, list_offsets

__all__ = ["MAX_CORRUPT_WARNINGS", "Record", "SkippedRecords", "TopicLog", "decoded"]

Record = Any  # a confluent_kafka.Message without error

log = logging.getLogger(__name__)

#: At most this many records that do not decode are logged one by one per reader.
MAX_CORRUPT_WARNINGS: Final = 5

_T = TypeVar("_T")


class SkippedRecords:
    """The one policy for records of an internal topic that do not decode, per reader: each is
    skipped and counted (:attr:`count`); the first :data:`MAX_CORRUPT_WARNINGS` are logged one
    by one with where they are and why, then one line says the rest are only counted; a bounded
    read logs the total at its end (:meth:`summary`). ``what``: what a record should be ("a
    checkpoint"); ``where``: who reads ("flow A->B", "cluster B")."""

    __slots__ = ("count", "what", "where")

    def __init__(self, what: str, where: str) -> None:
        self.what = what
        self.where = where
        self.count = 0

    def skip(self, msg: Record, exc: Exception) -> None:
        """Skip ``msg``, which failed to decode with ``exc``."""
        self.count += 1
        if self.count <= MAX_CORRUPT_WARNINGS:
            log.warning(
                "%s: skipping a record of %s-%d at offset %d that is not %s: %s",
                self.where, msg.topic(), msg.partition(), msg.offset(), self.what, exc,
            )  # fmt: skip
            if self.count == MAX_CORRUPT_WARNINGS:
                log.warning(
                    "%s: %d records that are not %s so far; further ones are skipped and "
                    "counted without a line each", self.where, self.count, self.what,
                )  # fmt: skip

    def summary(self, topic: str, read: int | None = None) -> None:
        """Log how many records of ``topic`` were skipped (of ``read`` read), if any."""
        if not self.count:
            return
        of = "" if read is None else f" of {read}"
        log.warning("%s: skipped %d corrupt record(s)%s in %s", self.where, self.count, of, topic)


def decoded(
    msgs: Iterable[Record],
    decode: Callable[[bytes | None, bytes | None], _T],
    skipped: SkippedRecords,
) -> Iterator[_T]:
    """``decode(key, value)`` of each record of ``msgs``; those that raise
    :class:`~mirrorlib.errors.CodecError` are skipped (:meth:`SkippedRecords.skip`)."""
    for msg in msgs:
        try:
            value = decode(msg.key(), msg.value())
        except CodecError as exc:
            skipped.skip(msg, exc)
            continue
        yield value


#: Seconds after which a read to the end that is still going says in the log what it waits for.
_TELL_AFTER = 5.0

_OPEN_TRANSACTION = (
    "; reading read_committed, it waits for the transactions still open on these partitions to "
    "end (committed, aborted, or aborted by the broker after transaction.timeout.ms)"
)

#: Longest wait of one consume call while reading to the end (see TopicLog.read_to_end).
_READ_WAIT = 0.05

# librdkafka consumer-only properties, left out of the AdminClient built from a consumer config
_CONSUMER_ONLY = frozenset(
    {
        "group.id",
        "group.instance.id",
        "auto.offset.reset",
        "enable.auto.commit",
        "enable.auto.offset.store",
        "auto.commit.interval.ms",
        "isolation.level",
        "enable.partition.eof",
        "partition.assignment.strategy",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "max.poll.interval.ms",
        "fetch.min.bytes",
        "fetch.max.bytes",
        "fetch.wait.max.ms",
        "max.partition.fetch.bytes",
        "fetch.message.max.bytes",
        "queued.min.messages",
        "queued.max.messages.kbytes",
        "check.crcs",
        "group.protocol",
        "group.remote.assignor",
        "consume.callback.max.messages",
        "fetch.queue.backoff.ms",
        "fetch.error.backoff.ms",
        "offset.store.method",
        "allow.auto.create.topics",
    }
)


class TopicLog:
    """Follows one topic from the beginning with a group-less consumer.

    ``config`` is a librdkafka consumer configuration (bootstrap, security); group and commit
    settings are forced. ``alias`` names the cluster in errors. ``start``: the offset to start
    from per partition (the next one to read; the others start at the beginning, and so does a
    partition whose start is out of range, e.g. after the topic was recreated).
    """

    def __init__(
        self,
        config: Mapping[str, str],
        topic: str,
        *,
        alias: str,
        partitions: Iterable[int] | None = None,
        read_committed: bool = False,
        start: Mapping[int, int] | None = None,
    ) -> None:
        conf: dict[str, Any] = dict(config)
        conf.update(
            {
                "group.id": conf.get("group.id", "mirrorlib-topic-log"),
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
                "enable.partition.eof": False,
                "isolation.level": "read_committed" if read_committed else "read_uncommitted",
            }
        )
        self.topic = topic
        self.alias = alias
        self._consumer = Consumer(client_conf(conf))
        self._read_committed = read_committed
        # lives as long as the reader, across broker restarts and leader moves: its requests
        # are retried with fresh metadata (a stale leader epoch fails them until refreshed)
        self._admin = FreshAdmin(
            {k: v for k, v in config.items() if k not in _CONSUMER_ONLY}, alias=alias
        )
        self._partitions = None if partitions is None else sorted(set(partitions))
        self._assigned: list[int] = []
        self._start = dict(start or {})

    def _ensure_assigned(self, timeout: float) -> list[int]:
        if self._assigned:
            return self._assigned
        partitions = self._partitions
        if partitions is None:
            try:
                md = self._consumer.list_topics(self.topic, timeout=timeout)
            except KafkaException as exc:
                raise ClusterError(
                    f"cluster {self.alias}: cannot read metadata of topic {self.topic}: {exc}"
                ) from exc
            meta = md.topics.get(self.topic)
            if meta is None or meta.error is not None or not meta.partitions:
                raise ClusterError(
                    f"cluster {self.alias}: topic {self.topic} does not exist"
                    + (f" ({meta.error})" if meta is not None and meta.error else "")
                )
            partitions = sorted(meta.partitions)
        self._consumer.assign(
            [
                KafkaTopicPartition(self.topic, p, self._start.get(p, OFFSET_BEGINNING))
                for p in partitions
            ]
        )
        self._assigned = list(partitions)
        return self._assigned

    def end_offsets(
        self, timeout: float = 30.0, *, committed: bool | None = None
    ) -> dict[int, int]:
        """The end offset of each partition, in one ListOffsets request: the high watermark, or
        the last stable offset when reading ``read_committed`` (``committed``: which one, instead
        of the reader's isolation level).

        Partitions a broker refuses (no leader yet, a leader epoch that moved on) are asked again
        with fresh metadata until ``timeout``; then :class:`~mirrorlib.errors.ClusterError`
        (a :class:`~mirrorlib.errors.KafkaRequestError`) names the partition and the error."""
        deadline = time.monotonic() + timeout
        partitions = self._ensure_assigned(timeout)
        isolation = (
            IsolationLevel.READ_COMMITTED
            if (self._read_committed if committed is None else committed)
            else IsolationLevel.READ_UNCOMMITTED
        )
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        ends = list_offsets(
            self._admin,
            {(self.topic, p): latest for p in partitions},
            timeout=max(deadline - time.monotonic(), 0.001),
            isolation_level=isolation,
            action=f"list end offsets of {self.topic}",
        )
        return {p: offset for (_, p), offset in ends.items()}

    def read_to_end(
        self, handle: Callable[[Record], None], *, timeout: float = 60.0, batch: int = 1000
    ) -> int:
        """Deliver every record up to the end offsets listed now to ``handle``; return the count.

        The end is the high watermark, also when reading ``read_committed``: the read goes on
        until the consumer's position reaches it, so it waits for a transaction still open on the
        topic to end (committed, aborted, or aborted by the broker after the producer's
        ``transaction.timeout.ms``) instead of stopping at the last stable offset and missing the
        records committed after the open transaction began.

        Raises :class:`TopicReadTimeoutError` when the end is not reached within ``timeout``
        seconds.
        """
        started = time.monotonic()
        deadline = started + timeout
        ends = self.end_offsets(timeout=timeout, committed=False)
        positions = self._positions()
        pending = {p for p, end in ends.items() if positions.get(p, 0) < end}
        count = 0
        told = False
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TopicReadTimeoutError(
                    f"cluster {self.alias}: reading {self.topic} to its end timed out after "
                    f"{timeout:.0f}s (partitions not caught up: {self._behind(pending, ends)})"
                    + (_OPEN_TRANSACTION if self._read_committed else "")
                )
            if not told and time.monotonic() - started >= _TELL_AFTER:
                told = True
                log.info(
                    "cluster %s: still reading %s to its end (position/end: %s)%s",
                    self.alias,
                    self.topic,
                    self._behind(pending, ends),
                    _OPEN_TRANSACTION if self._read_committed else "",
                )
            # consume() returns when `batch` records are there or the timeout expires: a short
            # timeout, so the last records of the end are not followed by a long idle wait
            for msg in self._consumer.consume(batch, timeout=min(_READ_WAIT, remaining)):
                err = msg.error()
                if err is not None:
                    self._raise_if_fatal(err)
                    continue
                handle(msg)
                count += 1
                partition, offset = msg.partition(), msg.offset()
                if (
                    partition is not None
                    and offset is not None
                    and offset + 1 >= ends.get(partition, 0)
                ):
                    pending.discard(partition)
            if pending:
                positions = self._positions()
                pending = {p for p in pending if positions.get(p, 0) < ends[p]}
        return count

    def _behind(self, pending: Iterable[int], ends: Mapping[int, int]) -> str:
        positions = self._positions()
        return ", ".join(f"{p}: {positions.get(p, 0)}/{ends[p]}" for p in sorted(pending))

    def poll(
        self, handle: Callable[[Record], None], *, timeout: float = 0.5, batch: int = 1000
    ) -> int:
        """Deliver whatever new records arrive within ``timeout``; return the count."""
        self._ensure_assigned(30.0)
        count = 0
        for msg in self._consumer.consume(batch, timeout=timeout):
            err = msg.error()
            if err is not None:
                self._raise_if_fatal(err)
                continue
            handle(msg)
            count += 1
        return count

    def poll_batch(
        self, handle: Callable[[list[Record]], object], *, timeout: float = 0.5, batch: int = 1000
    ) -> int:
        """Like :meth:`poll`, but hands the records over as one list (one call per batch, for
        readers that take in many); returns how many were read (errors excluded)."""
        self._ensure_assigned(30.0)
        records: list[Record] = []
        for msg in self._consumer.consume(batch, timeout=timeout):
            err = msg.error()
            if err is not None:
                self._raise_if_fatal(err)
                continue
            records.append(msg)
        if records:
            handle(records)
        return len(records)

    def _positions(self) -> dict[int, int]:
        result: dict[int, int] = {}
        for tp in self._consumer.position(
            [KafkaTopicPartition(self.topic, p) for p in self._assigned]
        ):
            # a negative position means "nothing fetched yet": treat as the start
            result[tp.partition] = tp.offset if tp.offset >= 0 else self._start.get(tp.partition, 0)
        return result

    def _raise_if_fatal(self, err: KafkaError) -> None:
        if err.fatal() or err.code() in (
            KafkaError.TOPIC_AUTHORIZATION_FAILED,
            KafkaError.UNKNOWN_TOPIC_OR_PART,
            KafkaError._UNKNOWN_TOPIC,
        ):
            raise ClusterError(f"cluster {self.alias}: reading {self.topic} failed: {err.str()}")

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> TopicLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
