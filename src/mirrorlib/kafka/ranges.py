"""The Kafka side of the Spark engine (confluent-kafka and pyarrow, no Spark).

* :class:`SourceView` runs in the driver's long-lived stream-reader process: which source
  partitions are copyable now (the remote topic exists with that partition), their end offsets
  and where new ones start.
* :func:`read_ranges` runs in executor tasks: consumes exact upstream offset ranges and yields
  Arrow record batches (:func:`arrow_schema`).
* :func:`write_batches` runs in executor tasks: produces every record to the remote topic, same
  partition, with key, value, headers and timestamp (idempotent producer, ``acks=all``), feeds
  the target's delivery reports to an :class:`~mirrorlib.core.syncs.OffsetSyncEmitter` and writes
  the offset syncs itself once the target acknowledged the records -- the same emission rule,
  bytes and lineage header as the embedded copier.
* :func:`store_positions` runs in the driver once per committed batch: the batch's last copied
  offsets, in MM2's offsets topic on the target.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mirrorlib.core.batches import TP, Range
from mirrorlib.core.connect_offsets import SourcePosition, murmur2_partition
from mirrorlib.core.records import TopicPartition
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.syncs import OffsetSyncEmitter
from mirrorlib.errors import ClusterTimeoutError, DataLossError, KafkaRequestError
from mirrorlib.kafka import client_conf
from mirrorlib.kafka.admin import ClusterAdmin, kafka_error
from mirrorlib.kafka.offset_syncs import OffsetSyncWriter
from mirrorlib.kafka.positions import PositionStore

__all__ = [
    "SCHEMA_DDL",
    "DataLossError",
    "PartitionResult",
    "SourceView",
    "WriteResult",
    "arrow_schema",
    "read_ranges",
    "store_positions",
    "write_batches",
]

log = logging.getLogger(__name__)

#: The rows a mirrorlib source yields (and its sink takes), as Spark DDL. ``timestamp`` is
#: milliseconds since the epoch; ``timestampType`` is Kafka's (0 CreateTime, 1 LogAppendTime).
SCHEMA_DDL = (
    "topic STRING, partition INT, offset BIGINT, key BINARY, value BINARY, timestamp BIGINT, "
    "timestampType INT, headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
)
_COLUMNS = ("topic", "partition", "offset", "key", "value", "timestamp", "timestampType", "headers")
# librdkafka's timestamp types -> Kafka's
_TS_TYPE = {0: -1, 1: 0, 2: 1}


def arrow_schema() -> Any:
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

    return pa.schema(
        [
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("timestamp", pa.int64()),
            ("timestampType", pa.int32()),
            ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
        ]
    )


def _isolation(settings: FlowSettings) -> str:
    configured = str(settings.source_consumer.get("isolation.level", "")).lower()
    return configured or "read_uncommitted"  # the copier's choice for at-least-once


# -- driver: what to copy ------------------------------------------------------------------------


class SourceView:
    """Source partitions that can be copied now, their end offsets and starting positions."""

    def __init__(self, settings: FlowSettings, offsets_topic_partitions: int) -> None:
        self.s = settings
        self.offsets_topic_partitions = offsets_topic_partitions
        self._source: ClusterAdmin | None = None
        self._target: ClusterAdmin | None = None
        self._positions: PositionStore | None = None
        self._copyable: dict[str, int] = {}
        self._next_refresh = 0.0

    def close(self) -> None:
        if self._positions is not None:
            self._positions.close()
        self._source = self._target = self._positions = None

    def _admins(self) -> tuple[ClusterAdmin, ClusterAdmin]:
        if self._source is None or self._target is None:
            s = self.s
            self._source = ClusterAdmin(s.source_admin, alias=s.source, timeout=s.admin_timeout)
            self._target = ClusterAdmin(s.target_admin, alias=s.target, timeout=s.admin_timeout)
        return self._source, self._target

    def copyable(self, *, force: bool = False) -> dict[str, int]:
        """Source topic → number of its partitions whose remote partition exists on the target.

        Refreshed at most every ``refresh.topics.interval.seconds`` (the driver's metadata task
        creates remote topics and partitions on the same interval)."""
        now = time.monotonic()
        if force or now >= self._next_refresh:
            s = self.s
            source, target = self._admins()
            src = {t: n for t, n in source.list_topics().items() if s.should_replicate_topic(t)}
            tgt = target.list_topics(include_internal=True)
            copyable = {}
            for topic, n in src.items():
                remote = s.policy.format_remote_topic(s.source, topic)
                m = min(n, tgt.get(remote, 0))
                if m > 0:
                    copyable[topic] = m
            self._copyable = copyable
            self._next_refresh = now + min(s.refresh_topics_interval, 600.0)
        return dict(self._copyable)

    def partitions(self) -> list[TP]:
        return sorted((t, p) for t, n in self.copyable().items() for p in range(n))

    def watermarks(self, tps: Sequence[TP]) -> tuple[dict[TP, int], dict[TP, int]]:
        """``(earliest, latest)`` offsets; ``latest`` is the last stable offset when the source
        is read ``read_committed``."""
        from confluent_kafka import IsolationLevel
        from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

        if not tps:
            return {}, {}
        source, _ = self._admins()
        level = (
            IsolationLevel.READ_COMMITTED
            if _isolation(self.s) == "read_committed"
            else IsolationLevel.READ_UNCOMMITTED
        )
        timeout = self.s.admin_timeout
        out: list[dict[TP, int]] = []
        for spec in (OffsetSpec.earliest(), OffsetSpec.latest()):  # type: ignore[no-untyped-call]
            request = {KafkaTopicPartition(t, p): spec for t, p in tps}
            futures = source.client.list_offsets(
                request, isolation_level=level, request_timeout=timeout
            )
            got: dict[TP, int] = {}
            for ktp, fut in futures.items():
                try:
                    got[(ktp.topic, ktp.partition)] = int(fut.result(timeout + 5.0).offset)
                except KafkaException as exc:  # e.g. a partition being deleted: skip it now
                    log.warning("flow %s: offsets of %s-%d: %s", self.s.name, ktp.topic,
                                ktp.partition, exc)  # fmt: skip
            out.append(got)
        return out[0], out[1]

    def starting_offsets(self, tps: Sequence[TP]) -> dict[TP, int]:
        """Where partitions new to the query start: after the position stored in MM2's offsets
        topic (written by MM2, the embedded engine or an earlier Spark query), otherwise at the
        earliest or latest offset (``auto.offset.reset``)."""
        if not tps:
            return {}
        s = self.s
        if self._positions is None:
            self._positions = PositionStore(
                s.target_consumer,
                s.offset_storage_topic,
                source_alias=s.source,
                target_alias=s.target,
                partitions=self.offsets_topic_partitions,
                read_committed=s.exactly_once_enabled,
            )
        self._positions.refresh(timeout=s.admin_timeout)
        low, high = self.watermarks(tps)
        out = {}
        for tp in tps:
            if tp not in low or tp not in high:
                continue
            stored = self._positions.last_replicated(*tp)
            if stored is not None:
                out[tp] = stored + 1
            elif s.auto_offset_reset == "latest":
                out[tp] = high[tp]
            else:
                out[tp] = low[tp]
        return out


# -- executor: reading ---------------------------------------------------------------------------


def _consumer(settings: FlowSettings) -> Any:
    conf: dict[str, Any] = dict(settings.source_consumer)
    conf.update(
        {
            "group.id": f"{settings.copier_group_id}-spark",  # required; nothing is committed
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error",  # never jump silently
            "enable.partition.eof": True,
            "isolation.level": _isolation(settings),
        }
    )
    return Consumer(client_conf(conf))


def _take_batch(pa: Any, schema: Any, cols: list[list[Any]]) -> Any:
    """The columns as one ``pyarrow.RecordBatch``; the columns are emptied."""
    batch = pa.RecordBatch.from_arrays(
        [pa.array(c, type=schema.field(i).type) for i, c in enumerate(cols)], schema=schema
    )
    for c in cols:
        c.clear()
    return batch


def _append_row(cols: list[list[Any]], msg: Any, tp: TP, off: int) -> None:
    """Append ``msg`` to the columns (in ``_COLUMNS`` order)."""
    ts_type, ts = msg.timestamp()
    row = (*tp, off, msg.key(), msg.value(), ts, _TS_TYPE.get(ts_type, -1), msg.headers())
    for column, value in zip(cols, row, strict=True):
        column.append(value)


def _check_stall(
    settings: FlowSettings, last_progress: float, stall: float, missing: set[TP]
) -> None:
    """Raise :class:`ClusterTimeoutError` when nothing was read for ``stall`` seconds."""
    if time.monotonic() - last_progress > stall:
        raise ClusterTimeoutError(
            f"flow {settings.name}: no progress reading {sorted(missing)} for {stall:.0f}s",
            cluster=settings.source, code="_TIMED_OUT", retriable=True,
        )  # fmt: skip


def read_ranges(
    settings: FlowSettings,
    work: Sequence[Range],
    *,
    batch_rows: int = 10_000,
    stall_timeout: float | None = None,
) -> Iterator[Any]:
    """Yield ``pyarrow.RecordBatch``es with every record of ``work`` (each range
    ``[start, end)``), partition by partition in offset order. Deterministic between the same
    offsets, as Spark's replay of a batch needs. Offsets the source no longer holds raise
    :class:`DataLossError` (or are skipped and logged with ``data.loss.action=continue``)."""
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

    schema = arrow_schema()
    ends = {(r.topic, r.partition): r.end for r in work if r.end > r.start}
    if not ends:
        return
    stall = stall_timeout if stall_timeout is not None else max(settings.admin_timeout, 60.0)
    consumer = _consumer(settings)
    done: set[TP] = set()
    cols: list[list[Any]] = [[] for _ in _COLUMNS]
    offs = cols[2]

    def flush() -> Any:
        return _take_batch(pa, schema, cols)

    def finish(tp: TP) -> None:
        done.add(tp)
        consumer.pause([KafkaTopicPartition(tp[0], tp[1])])

    try:
        consumer.incremental_assign(
            [KafkaTopicPartition(r.topic, r.partition, r.start) for r in work if r.end > r.start]
        )
        last_progress = time.monotonic()
        while len(done) < len(ends):
            msgs = consumer.consume(5_000, timeout=0.5)
            if msgs:
                last_progress = time.monotonic()
            else:
                _check_stall(settings, last_progress, stall, set(ends) - done)
            for msg in msgs:
                err = msg.error()
                if err is not None:
                    _on_read_error(settings, consumer, msg, err, ends, done, finish)
                    continue
                tp = (msg.topic(), msg.partition())
                off = msg.offset()
                end = ends.get(tp)
                if end is None or tp in done:
                    continue
                if off >= end:
                    finish(tp)
                    continue
                _append_row(cols, msg, tp, off)
                if off + 1 >= end:
                    finish(tp)
            if len(offs) >= batch_rows:
                yield flush()
        if offs:
            yield flush()
    finally:
        consumer.close()


def _on_read_error(
    settings: FlowSettings,
    consumer: Any,
    msg: Any,
    err: Any,
    ends: Mapping[TP, int],
    done: set[TP],
    finish: Any,
) -> None:
    code = err.code()
    tp = (msg.topic(), msg.partition())
    if code == KafkaError._PARTITION_EOF:
        if tp in ends and tp not in done and msg.offset() >= ends[tp]:
            finish(tp)  # the range ends in transaction markers or compacted-away offsets
        return
    if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE) and tp in ends:
        ktp = KafkaTopicPartition(tp[0], tp[1])
        low, high = consumer.get_watermark_offsets(ktp, timeout=settings.admin_timeout)
        pos = consumer.position([ktp])[0].offset
        message = (
            f"data loss on {settings.source} {tp[0]}-{tp[1]}: the batch needs offsets up to "
            f"{ends[tp] - 1} from {pos if pos >= 0 else '?'} but the log holds {low}..{high - 1}"
        )
        if settings.data_loss_action == "fail":
            raise DataLossError(message + " (set data.loss.action=continue to skip the gap)")
        log.error("%s; continuing at %d as data.loss.action=continue", message, low)
        if low >= ends[tp]:
            finish(tp)
            return
        consumer.incremental_unassign([ktp])
        consumer.incremental_assign([KafkaTopicPartition(tp[0], tp[1], low)])
        return
    if err.fatal():
        raise kafka_error(
            KafkaException(err), cluster=settings.source, action=f"reading {tp[0]}-{tp[1]}",
            resource=tp[0],
        )  # fmt: skip
    log.warning("flow %s: source consumer error: %s", settings.name, err.str())


# -- executor: writing ---------------------------------------------------------------------------


@attrs.define
class PartitionResult:
    """What a task copied of one source partition."""

    topic: str
    partition: int
    first: int  # first upstream offset written
    last: int  # last upstream offset written
    records: int = 0
    bytes: int = 0
    acked: int = 0  # records the target acknowledged
    last_downstream: int = -1


@attrs.define
class WriteResult:
    """What one write task did (returned to the driver in the task's commit message)."""

    writer_id: str
    partitions: list[PartitionResult] = attrs.Factory(list)
    offset_syncs: int = 0
    offset_syncs_failed: int = 0
    seconds: float = 0.0

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)


class _Writer:
    """One task's producer, in-flight bookkeeping and offset-sync emitter."""

    def __init__(self, settings: FlowSettings) -> None:
        s = self.s = settings
        self.emitter = OffsetSyncEmitter(offset_lag_max=s.offset_lag_max)
        self.result = WriteResult(self.emitter.writer_id)
        self.parts: dict[TP, PartitionResult] = {}
        self.tps: dict[TP, TopicPartition] = {}
        self.inflight: dict[tuple[str, int], deque[tuple[TP, int]]] = {}
        self.remotes: dict[str, str] = {}
        self.failures: list[str] = []
        self.blocked: set[TP] = set()
        pconf = s.record_producer(linger_ms=20, on_delivery=self._delivered)
        self.producer = Producer(client_conf(pconf))
        self.syncs: OffsetSyncWriter | None = None
        if s.emit_offset_syncs_enabled:
            self.syncs = OffsetSyncWriter(
                s.offset_syncs_producer,
                s.offset_syncs_topic,
                self.emitter,
                flow=s.name,
                on_written=self._sync_written,
                on_failed=self._sync_failed,
            )

    def remote(self, topic: str) -> str:
        name = self.remotes.get(topic)
        if name is None:
            name = self.remotes[topic] = self.s.policy.format_remote_topic(self.s.source, topic)
        return name

    def _delivered(self, err: Any, msg: Any) -> None:
        q = self.inflight.get((msg.topic(), msg.partition()))
        if not q:
            return
        tp, up = q.popleft()
        part = self.parts[tp]
        if err is not None:
            self.blocked.add(tp)
            if len(self.failures) < 10:
                self.failures.append(
                    f"{self.s.target} refused {tp[0]}-{tp[1]}@{up} -> "
                    f"{msg.topic()}-{msg.partition()}: {err.str()}"
                )
            return
        if tp in self.blocked:
            return  # after a refused record nothing of the partition counts: the task fails
        down = msg.offset()
        part.acked += 1
        part.last_downstream = down
        # A due sync is sent at once (as the embedded copier does): MM2 keeps only the latest
        # due sync per partition, so a burst of acknowledgements would replace it unwritten.
        if self.syncs is not None and self.emitter.record(self.tps[tp], up, down):
            self.send_syncs()

    def write(self, batches: Iterable[Any]) -> None:
        produce = self.producer.produce
        poll = self.producer.poll
        for rb in batches:
            if rb.num_rows == 0:
                continue
            cols = [rb.column(name).to_pylist() for name in _COLUMNS]
            for topic, partition, off, key, value, ts, _ts_type, hdrs in zip(*cols, strict=True):
                tp = (topic, partition)
                part = self.parts.get(tp)
                if part is None:
                    part = self.parts[tp] = PartitionResult(topic, partition, off, off)
                    self.tps[tp] = TopicPartition(topic, partition)
                    self.inflight.setdefault((self.remote(topic), partition), deque())
                remote = self.remotes[topic]
                if hdrs:
                    hdrs = [(h["key"], h["value"]) for h in hdrs]
                while True:
                    try:
                        produce(
                            remote,
                            value,
                            key,
                            partition,
                            timestamp=ts if ts is not None and ts > 0 else 0,
                            headers=hdrs or None,
                        )
                        break
                    except BufferError:
                        poll(0.05)  # the local queue is full: serve delivery reports
                self.inflight[(remote, partition)].append((tp, off))
                part.last = off
                part.records += 1
                part.bytes += len(value) if value is not None else 0
            poll(0)
            self.send_syncs()

    def send_syncs(self) -> None:
        if self.syncs is not None:
            self.syncs.send()
            self.syncs.poll()

    def _sync_written(self) -> None:
        self.result.offset_syncs += 1

    def _sync_failed(self) -> None:
        self.result.offset_syncs_failed += 1

    def finish(self, timeout: float) -> None:
        """Wait for every delivery report, then write the remaining offset syncs (the newest
        acknowledged record of every partition, as MM2 does on each task commit)."""
        deadline = time.monotonic() + timeout
        while len(self.producer) > 0 and time.monotonic() < deadline:
            self.producer.flush(min(1.0, max(deadline - time.monotonic(), 0.01)))
            self.send_syncs()
        unacked = len(self.producer)
        if self.syncs is not None:
            self.emitter.promote_delayed()
            self.send_syncs()
            left = self.syncs.flush(timeout)
            if left:
                log.warning("flow %s: %d offset sync(s) not confirmed", self.s.name, left)
        self.result.partitions = sorted(self.parts.values(), key=lambda p: (p.topic, p.partition))
        if self.failures:
            raise KafkaRequestError(
                f"flow {self.s.name}: the target refused records: " + "; ".join(self.failures),
                cluster=self.s.target,
            )
        if unacked:
            raise ClusterTimeoutError(
                f"flow {self.s.name}: {unacked} record(s) not acknowledged by {self.s.target} "
                f"within {timeout:.0f}s", cluster=self.s.target, code="_TIMED_OUT",
                retriable=True,
            )  # fmt: skip


def write_batches(settings: FlowSettings, batches: Iterable[Any]) -> WriteResult:
    """Copy Arrow record batches (:func:`arrow_schema`) to the target; returns when every
    record is acknowledged and the offset syncs covering them are written. Raises if the target
    refused a record (the task fails and Spark retries it)."""
    started = time.monotonic()
    writer = _Writer(settings)
    timeout = max(settings.admin_timeout, 60.0) * 5
    try:
        writer.write(batches)
    except BaseException:
        # still wait for what was sent and write the syncs of what the target acknowledged
        try:
            writer.finish(timeout)
        except Exception as exc:
            log.warning("flow %s: after a failed write: %s", settings.name, exc)
        raise
    writer.finish(timeout)
    writer.result.seconds = time.monotonic() - started
    return writer.result


# -- driver: positions ---------------------------------------------------------------------------

_POSITION_PRODUCERS: dict[str, Any] = {}


def store_positions(settings: FlowSettings, partitions: int, last: Mapping[TP, int]) -> None:
    """Store the last copied upstream offset of each source partition in MM2's offsets topic on
    the target (``partitions`` is the topic's partition count), as the embedded copier does.
    One producer per flow is kept for the process. Raises
    :class:`~mirrorlib.errors.ClusterTimeoutError` when the records are not acknowledged within
    the admin timeout."""
    key = f"{settings.name}|{settings.offset_storage_topic}"
    producer = _POSITION_PRODUCERS.get(key)
    if producer is None:
        conf = client_conf(
            settings.target_producer, acks="all", **{"enable.idempotence": True, "linger.ms": 0}
        )
        producer = _POSITION_PRODUCERS[key] = Producer(conf)
    for (topic, partition), offset in sorted(last.items()):
        pos = SourcePosition(settings.source, topic, partition, offset)
        k = pos.encode_key()
        producer.produce(
            settings.offset_storage_topic, pos.encode_value(), k, murmur2_partition(k, partitions)
        )
    left = producer.flush(settings.admin_timeout)
    if left:
        raise ClusterTimeoutError(
            f"flow {settings.name}: {left} position record(s) not acknowledged by "
            f"{settings.target}", cluster=settings.target, resource=settings.offset_storage_topic,
            code="_TIMED_OUT", retriable=True,
        )  # fmt: skip
