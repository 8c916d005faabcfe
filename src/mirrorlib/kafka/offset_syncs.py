"""Offset syncs on the wire: written (:class:`OffsetSyncWriter`) and read
(:class:`OffsetSyncReader`, :func:`read_offset_syncs`) here, and nowhere else.

Writing: the emitter's due syncs, as MM2's bytes plus the lineage header.

Used by the embedded copier and by the Spark executors alike, so both engines write syncs the
same way: to partition 0 of the offset-syncs topic with an idempotent producer of their own
(``acks=all``, a few milliseconds of linger), each with the lineage header that lets
:class:`~mirrorlib.core.translate.OffsetTranslator` translate exactly. A sync that cannot be queued
or written is reported to the emitter (:meth:`~mirrorlib.core.syncs.OffsetSyncEmitter.mark_failed`)
a second later (:class:`~mirrorlib.core.syncs.FailedSyncs`), so readers never bridge the hole it
leaves and the partition's newest sync is sent again.

Reading: every reader of the offset-syncs topic -- the checkpoint task following it, failover
reading it once -- decodes its records the same way (:class:`~mirrorlib.core.syncs.
SyncRecordDecoder`, lineage included) into an :class:`~mirrorlib.core.translate.OffsetTranslator`,
and skips a record that does not decode the same way (:class:`~mirrorlib.kafka.topiclog.
SkippedRecords`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from mirrorlib.core.syncs import EmittedSync, FailedSyncs, OffsetSyncEmitter, SyncRecordDecoder
from mirrorlib.core.translate import OffsetTranslator
from mirrorlib.errors import CodecError
from mirrorlib.kafka import client_conf
from mirrorlib.kafka.topiclog import Record, SkippedRecords, TopicLog

__all__ = ["OffsetSyncReader", "OffsetSyncWriter", "new_sync_producer", "read_offset_syncs"]

log = logging.getLogger(__name__)


def new_sync_producer(producer_config: Mapping[str, str]) -> Producer:
    """The producer an :class:`OffsetSyncWriter` writes with (idempotent, ``acks=all``, 5 ms
    linger), for callers that keep one between writers."""
    conf: dict[str, Any] = dict(producer_config)
    conf.update({"enable.idempotence": True, "acks": "all", "linger.ms": 5})
    return Producer(client_conf(conf))


class OffsetSyncWriter:
    """Sends an :class:`OffsetSyncEmitter`'s pending syncs to ``topic``.

    ``on_written`` / ``on_failed`` are called from delivery reports (served by :meth:`poll`).
    ``producer``: a :func:`new_sync_producer` to write with (default: a new one).
    Not thread-safe: call it from the thread that feeds the emitter.
    """

    def __init__(
        self,
        producer_config: Mapping[str, str],
        topic: str,
        emitter: OffsetSyncEmitter,
        *,
        flow: str,
        on_written: Callable[[], None] | None = None,
        on_failed: Callable[[], None] | None = None,
        producer: Producer | None = None,
    ) -> None:
        self._producer = producer if producer is not None else new_sync_producer(producer_config)
        self.topic = topic
        self.emitter = emitter
        self.flow = flow
        self._on_written = on_written
        self._on_failed = on_failed
        self._failed = FailedSyncs()  # reported to the emitter a second later (send)

    def send(self) -> None:
        """Queue every pending sync (call it right after ``emitter.record`` returns True), and
        the partition's newest sync again a second after one was not written."""
        if self._failed:
            self._failed.report(self.emitter, time.monotonic())
        for emitted in self.emitter.take_pending():
            self.write(emitted)

    def write(
        self, emitted: EmittedSync, failed: Callable[[EmittedSync], None] | None = None
    ) -> None:
        """Queue one taken sync (a copier worker's, written by its parent process: ``failed``
        is called instead of this writer's emitter's ``mark_failed`` if it is not written)."""
        headers: list[tuple[str, str | bytes | None]] = list(emitted.headers())
        try:
            self._producer.produce(
                self.topic,
                emitted.sync.encode_value(),
                emitted.sync.encode_key(),
                0,
                headers=headers,
                on_delivery=self._delivered(emitted, failed),
            )
        except (BufferError, KafkaException) as exc:
            log.warning("flow %s: offset sync %s not queued: %s", self.flow, emitted.sync, exc)
            self._not_written(emitted, failed)

    def poll(self) -> None:
        """Serve delivery reports."""
        self._producer.poll(0)

    def flush(self, timeout: float) -> int:
        """Wait for outstanding syncs; returns how many are still unconfirmed."""
        return int(self._producer.flush(timeout))

    def _not_written(
        self, emitted: EmittedSync, failed: Callable[[EmittedSync], None] | None
    ) -> None:
        if failed is None:
            self._failed.add(emitted, time.monotonic())
        else:
            failed(emitted)
        if self._on_failed is not None:
            self._on_failed()

    def _delivered(
        self, emitted: EmittedSync, failed: Callable[[EmittedSync], None] | None = None
    ) -> Callable[[KafkaError | None, Any], None]:
        def done(err: KafkaError | None, _msg: Any) -> None:
            if err is None:
                if self._on_written is not None:
                    self._on_written()
                return
            log.warning(
                "flow %s: offset sync %s was not written: %s", self.flow, emitted.sync, err.str()
            )
            self._not_written(emitted, failed)

        return done


class OffsetSyncReader:
    """Takes offset-sync records into :attr:`translator`, in topic order.

    Records that do not decode are skipped (:attr:`skipped`). Per upstream partition it keeps
    the record timestamp (the writer's produce time, ms) of the newest sync read
    (:attr:`sync_ms`) and whether the partition got syncs since :meth:`take_touched` was last
    called (a checkpoint task translates those partitions' groups again).
    """

    def __init__(self, translator: OffsetTranslator, *, where: str) -> None:
        self.translator = translator
        self.skipped = SkippedRecords("an offset sync", where)
        #: Record timestamp (ms) of the newest offset sync read, per upstream partition.
        self.sync_ms: dict[tuple[str, int], int] = {}
        self._decoder = SyncRecordDecoder()
        self._touched: set[tuple[str, int]] = set()

    def take(self, records: Iterable[Record]) -> int:
        """Take in offset-sync records (``confluent_kafka.Message``-like: ``key()``,
        ``value()``, ``headers()``, ``timestamp()``); returns how many were syncs."""
        decode = self._decoder.decode
        add = self.translator.add_offsets
        sync_ms, touched = self.sync_ms, self._touched
        count = 0
        for msg in records:
            try:
                topic, partition, up, down, writer, seq = decode(
                    msg.key(), msg.value(), msg.headers()
                )
            except CodecError as exc:
                self.skipped.skip(msg, exc)
                continue
            add(topic, partition, up, down, writer, seq)
            key = (topic, partition)
            touched.add(key)
            ts = msg.timestamp()[1]
            if ts > 0:  # the writer's produce time (-1: not available)
                sync_ms[key] = ts
            count += 1
        return count

    def take_touched(self) -> set[tuple[str, int]]:
        """The upstream partitions that got syncs since the previous call."""
        touched, self._touched = self._touched, set()
        return touched


def read_offset_syncs(
    consumer_config: Mapping[str, str],
    topic: str,
    *,
    alias: str,
    timeout: float = 30.0,
) -> OffsetTranslator:
    """An :class:`~mirrorlib.core.translate.OffsetTranslator` fed with every offset sync of
    ``topic`` on cluster ``alias`` (partition 0, as MM2 writes them); raises
    :class:`~mirrorlib.errors.ClusterError` when the topic cannot be read."""
    reader = OffsetSyncReader(OffsetTranslator(), where=f"cluster {alias}")

    def handle(msg: Record) -> None:
        reader.take((msg,))

    with TopicLog(consumer_config, topic, alias=alias, partitions=[0]) as syncs_log:
        syncs_log.read_to_end(handle, timeout=timeout)
    reader.skipped.summary(topic)
    return reader.translator
