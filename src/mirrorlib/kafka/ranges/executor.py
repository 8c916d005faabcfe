"""The executors' side of the Spark engine: copy tasks (confluent-kafka only, no Spark).

:func:`copy_ranges` runs in executor tasks: consumes exact upstream offset ranges and produces
every record to the remote topic, same partition, with key, value, headers and timestamp
(idempotent producer, ``acks=all``), feeds the target's delivery reports to an
:class:`~mirrorlib.core.syncs.OffsetSyncEmitter` and writes the offset syncs itself once the
target acknowledged the records -- the same emission rule, bytes and lineage header as the
embedded copier. Records never leave the task; it returns a small :class:`CopyResult`. Its
clients (:class:`TaskClients`) are kept by the Python worker for the next task when the task
ended with nothing in flight.

Batches larger than the remote topic's ``max.message.bytes`` are avoided as the embedded copier
avoids them (:mod:`mirrorlib.core.pacing`): a partition whose remote topic's limit is below the
producer's ``batch.size`` is *paced* (its records are produced one budget-sized batch at a
time), and a ``MSG_SIZE_TOO_LARGE`` refusal halves the partition's budget and copies again from
the refused record. A record the target refuses otherwise (or one larger than the limit on its
own) *parks* its partition at that record: the task copies the rest and reports where the
partition stopped; the driver copies it again later (see :func:`mirrorlib.core.batches.settle`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mirrorlib.core.acks import InFlight, record_syncs
from mirrorlib.core.batches import TP, Range
from mirrorlib.core.config.clients import replication_isolation
from mirrorlib.core.pacing import (
    batch_budget,
    batch_length,
    size_check_above,
)
from mirrorlib.core.records import TopicPartition
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.syncs import OffsetSyncEmitter
from mirrorlib.errors import ClusterTimeoutError, DataLossError
from mirrorlib.kafka import client_conf, consumer_dead
from mirrorlib.kafka.admin import kafka_error
from mirrorlib.kafka.offset_syncs import OffsetSyncWriter, new_sync_producer
from mirrorlib.kafka.produce import (
    fatal_error,
    produce_waiting,
    producer_died,
    smaller_batches,
    too_large,
)
from mirrorlib.kafka.transformed import transform_batch

__all__ = [
    "CopyResult",
    "DataLossError",
    "PartitionResult",
    "TaskClients",
    "copy_ranges",
    "kept_clients",
    "source_isolation",
]

log = logging.getLogger(__name__)


def source_isolation(settings: FlowSettings) -> str:
    """The source's isolation level, as the embedded copier reads it (read_committed unless the
    configuration says read_uncommitted): for the copy tasks and the driver's end offsets."""
    return replication_isolation(
        settings.source_consumer.get("isolation.level"), exactly_once=settings.exactly_once_enabled
    )


@attrs.define
class PartitionResult:
    """What a task copied of one source partition's range ``[start, end)``."""

    topic: str
    partition: int
    start: int
    end: int
    copied_to: int  # the first upstream offset not copied (``end`` when the range is done)
    records: int = 0  # records the target acknowledged
    bytes: int = 0  # their value bytes
    last_downstream: int = -1  # target offset of the last acknowledged record
    last_timestamp: int = 0  # its timestamp (ms)
    high_watermark: int = -1  # the source's end offset last seen by the task (-1: unknown)
    lost: int = 0  # records skipped because the source log no longer held them
    budget: int | None = None  # the paced batch budget in bytes the task ended with
    error: str | None = None  # why the partition stopped before ``end`` (parked)

    @property
    def parked(self) -> bool:
        return self.copied_to < self.end


@attrs.define
class CopyResult:
    """What one copy task did (returned to the driver; no record)."""

    writer_id: str
    partitions: list[PartitionResult] = attrs.Factory(list)
    offset_syncs: int = 0
    offset_syncs_failed: int = 0
    seconds: float = 0.0
    #: seconds from the task's start (clients built or borrowed included) to its first record
    #: read; None: it read none
    first_record_s: float | None = None

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)


def _consumer(settings: FlowSettings) -> Any:
    # the embedded copier's fetch settings, a shorter prefetch and fetch wait (FlowSettings.
    # range_consumer: a short fetch queue back-off, 8 MiB partition fetches, 20,000 messages
    # queued, 20 ms fetch wait, unless the configuration sets them)
    conf: dict[str, Any] = settings.range_consumer()
    conf.update(
        {
            "group.id": f"{settings.copier_group_id}-spark",  # required; nothing is committed
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error",  # never jump silently
            "enable.partition.eof": True,
            "isolation.level": source_isolation(settings),
        }
    )
    return Consumer(client_conf(conf))


#: the record producer's ``linger.ms`` unless the configuration sets it
_LINGER_MS = 20
#: sets of clients kept per configuration in one process (one per task running at once)
_KEEP_PER_KEY = 4


class TaskClients:
    """A copy task's Kafka clients: the source consumer, the record producer and the offset-sync
    producer. Built once per Python worker process and configuration, and lent to one task at a
    time (:func:`copy_ranges`): Spark reuses its Python workers (``spark.python.worker.reuse``,
    the default), so a batch's tasks find their clients connected, with the target's metadata
    and the producer's idempotence state, instead of building them again every batch.

    The task produces each record with its own delivery callback (no report reaches a later
    task); the consumer is assigned the task's ranges and unassigned after it.
    """

    def __init__(self, settings: FlowSettings) -> None:
        pconf = settings.record_producer(linger_ms=_LINGER_MS)
        self.batch_size = int(pconf.get("batch.size", 1_000_000))
        self.producer = Producer(client_conf(pconf))
        self.consumer = _consumer(settings)
        self.syncs_producer = (
            new_sync_producer(settings.offset_syncs_producer)
            if settings.emit_offset_syncs_enabled
            else None
        )

    def idle(self) -> bool:
        """Nothing of the last task is left in flight (the clients can serve another task)."""
        return len(self.producer) == 0 and (
            self.syncs_producer is None or len(self.syncs_producer) == 0
        )

    def release(self) -> None:
        """Detach the task: the consumer's partitions resumed (librdkafka keeps a partition
        paused across assignments) and unassigned."""
        assigned = self.consumer.assignment()
        if assigned:
            self.consumer.resume(assigned)
            self.consumer.incremental_unassign(assigned)

    def close(self) -> None:
        self.consumer.close()


def _clients_key(settings: FlowSettings) -> str:
    """What the clients of a flow's copy tasks are built from (their configurations)."""
    parts = (
        settings.record_producer(linger_ms=_LINGER_MS),
        settings.range_consumer(),
        settings.offset_syncs_producer if settings.emit_offset_syncs_enabled else None,
        settings.copier_group_id,
        source_isolation(settings),
    )
    return json.dumps(parts, sort_keys=True, default=str)


class _ClientPool:
    """The :class:`TaskClients` kept by this process, by configuration."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[str, list[TaskClients]] = {}

    def acquire(self, settings: FlowSettings) -> tuple[str, TaskClients]:
        key = _clients_key(settings)
        with self._lock:
            kept = self._idle.get(key)
            if kept:
                return key, kept.pop()
        return key, TaskClients(settings)

    def give_back(self, key: str, clients: TaskClients) -> None:
        """Keep ``clients`` for the next task if they are idle, else close them."""
        try:
            clients.release()
            keep = clients.idle()
        except Exception as exc:
            log.debug("copy task clients not kept: %s", exc)
            keep = False
        if keep:
            with self._lock:
                kept = self._idle.setdefault(key, [])
                if len(kept) < _KEEP_PER_KEY:
                    kept.append(clients)
                    return
        self.discard(clients)

    @staticmethod
    def discard(clients: TaskClients) -> None:
        try:
            clients.close()
        except Exception as exc:
            log.debug("closing copy task clients: %s", exc)

    def count(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._idle.values())


_POOL = _ClientPool()


def kept_clients() -> int:
    """How many sets of copy task clients this process keeps idle for the next tasks."""
    return _POOL.count()


class _Lane:
    """One partition's range in a task: reading, pacing, in flight, acknowledged."""

    __slots__ = (
        "acks",
        "budget",
        "check_above",
        "ktp",
        "max_bytes",
        "parked_at",
        "pending",
        "read_done",
        "remote",
        "result",
        "rewind",
        "size_head",
        "sizes",
        "throttled",
        "tp",
        "utp",
    )

    def __init__(
        self,
        r: Range,
        remote: str,
        max_bytes: int | None,
        budget: int | None,
        on_first_report: Callable[[InFlight], None],
    ) -> None:
        self.tp = (r.topic, r.partition)
        self.utp = TopicPartition(r.topic, r.partition)
        self.ktp = KafkaTopicPartition(r.topic, r.partition)
        self.remote = remote
        self.max_bytes = max_bytes
        self.check_above = size_check_above(max_bytes)  # (a per-record check skipped below)
        self.budget = budget
        self.result = PartitionResult(r.topic, r.partition, r.start, r.end, r.start, budget=budget)
        self.read_done = r.end <= r.start
        self.pending: deque[Any] = deque()  # paced: records waiting for their batch
        # produced and not yet acknowledged: upstream offsets (and delivery reports) in
        # ``acks``, value sizes in ``sizes`` from ``size_head`` on (per record: two appends)
        self.acks = InFlight(on_first_report)
        self.sizes: list[int] = []
        self.size_head = 0
        self.rewind: int | None = None  # too large: copy again from here once reports are in
        self.parked_at: int | None = None  # refused: nothing from here on counts
        self.throttled = False

    @property
    def paced(self) -> bool:
        return self.budget is not None

    @property
    def stopped(self) -> bool:
        return self.result.error is not None

    @property
    def blocked_at(self) -> int | None:
        """No acknowledgement from this upstream offset on counts (a refusal)."""
        return self.rewind if self.rewind is not None else self.parked_at

    @property
    def done(self) -> bool:
        if self.acks.outstanding or self.rewind is not None:
            return False
        return self.stopped or (self.read_done and not self.pending)

    def acked_bytes(self, matched: int, acked: int) -> int:
        """The value bytes of the first ``acked`` of the ``matched`` oldest records in flight
        (the acknowledged ones are always the oldest), forgetting the ``matched``."""
        sizes, head = self.sizes, self.size_head
        nbytes = sum(sizes[head : head + acked]) if acked else 0
        head += matched
        if head >= len(sizes):
            sizes.clear()
            head = 0
        elif head > 65_536:
            del sizes[:head]
            head = 0
        self.size_head = head
        return nbytes


class _Copy:
    """One task's lanes and offset-sync emitter, on the clients it borrowed."""

    def __init__(
        self,
        settings: FlowSettings,
        clients: TaskClients,
        work: Sequence[Range],
        max_bytes: Mapping[str, int | None],
        budgets: Mapping[TP, int],
        started: float,
    ) -> None:
        s = self.s = settings
        self.emitter = OffsetSyncEmitter(offset_lag_max=s.offset_lag_max)
        self.result = CopyResult(self.emitter.writer_id)
        self.batch_size = clients.batch_size
        self.lanes: dict[TP, _Lane] = {}
        self._ready: list[InFlight] = []  # lanes with delivery reports to match
        by_acks: dict[int, _Lane] = {}
        for r in work:
            remote = s.policy.format_remote_topic(s.source, r.topic)
            limit = max_bytes.get(r.topic)
            budget = budgets.get((r.topic, r.partition), batch_budget(limit, self.batch_size))
            lane = _Lane(r, remote, limit, budget, self._ready.append)
            self.lanes[lane.tp] = by_acks[id(lane.acks)] = lane
        self._by_acks = by_acks
        self.producer = clients.producer
        self.consumer = clients.consumer
        self.syncs: OffsetSyncWriter | None = None
        if clients.syncs_producer is not None:
            self.syncs = OffsetSyncWriter(
                s.offset_syncs_producer,
                s.offset_syncs_topic,
                self.emitter,
                flow=s.name,
                on_written=self._sync_written,
                on_failed=self._sync_failed,
                producer=clients.syncs_producer,
            )
        self.started = started  # the task's (copy_ranges') start
        self.progress_at = time.monotonic()
        # a consumed batch goes to the hot loop as it is, unless the flow has record transforms
        self.copy_batch: Callable[[list[Any]], None] = (
            self.copy if s.record_transforms is None else self._copy_transformed
        )

    # -- delivery reports (matched a run at a time: mirrorlib.core.acks)

    def drain(self) -> None:
        """Match the delivery reports served since the last call with the records produced."""
        ready = self._ready
        if not ready:
            return
        inflights = ready[:]
        ready.clear()
        for inflight in inflights:
            if inflight.has_reports:
                self._acked(self._by_acks[id(inflight)])

    def _acked(self, lane: _Lane) -> None:
        inflight = lane.acks
        before = inflight.outstanding
        acks = inflight.take(lane.blocked_at)
        if acks is None:
            return
        self.progress_at = time.monotonic()
        nbytes = lane.acked_bytes(before - inflight.outstanding, acks.count)
        if acks.count:
            res = lane.result
            res.records += acks.count
            res.bytes += nbytes
            res.copied_to = acks.upstream[-1] + 1
            res.last_downstream = acks.reports[-1].offset()
            if acks.tail_timestamp > 0:
                res.last_timestamp = acks.tail_timestamp
            if self.syncs is not None:
                record_syncs(self.emitter, lane.utp, acks, self.send_syncs)
        if acks.refused:
            up, msg = acks.refused[0]
            if lane.rewind is None and (lane.parked_at is None or up < lane.parked_at):
                self._refused(lane, up, msg.error(), msg)

    def _refused(self, lane: _Lane, up: int, err: Any, msg: Any) -> None:
        if producer_died(err, transactional=False) is not None:
            # not a refusal by the target: the producer died (e.g. a fatal idempotence error)
            # with the record in flight. The task fails, and Spark retries it with new clients
            # from the range's start (the task's clients are closed, not kept).
            self.serve(0)  # raises the fatal error itself, served after the reports
            raise kafka_error(KafkaException(err), cluster=self.s.target, action="producing")
        if err.code() == KafkaError.MSG_SIZE_TOO_LARGE:
            s = self.s
            budget = smaller_batches(
                log, s.name, s.target, lane.tp, lane.budget, self.batch_size, msg
            )
            if budget is not None:
                lane.budget = lane.result.budget = budget
                lane.rewind = up
                return
        self._park(
            lane, up, f"{self.s.target} refused {lane.tp[0]}-{lane.tp[1]}@{up} -> "
            f"{lane.remote}-{lane.tp[1]}: {err.str()}",
        )  # fmt: skip

    def _park(self, lane: _Lane, up: int, error: str) -> None:
        """Stop ``lane`` at upstream offset ``up``: nothing from there on counts as copied."""
        log.warning("flow %s: %s (the partition is parked)", self.s.name, error)
        lane.result.error = error
        lane.parked_at = up if lane.parked_at is None else min(lane.parked_at, up)
        lane.pending.clear()
        self._pause(lane)

    def _pause(self, lane: _Lane) -> None:
        if not lane.throttled:
            self.consumer.pause([lane.ktp])
            lane.throttled = True

    def _resume(self, lane: _Lane) -> None:
        if lane.throttled and not lane.read_done and not lane.stopped:
            self.consumer.resume([lane.ktp])
            lane.throttled = False

    # -- reading and producing

    def copy(self, msgs: list[Any]) -> None:  # noqa: PLR0912, PLR0915 - the per-record hot loop, kept whole
        """Produce a consumed batch. Per record only the produce call and remembering its
        upstream offset and size; the rest once per run of one partition."""
        produce: Any = self.producer.produce  # (per-record delivery callbacks: InFlight's)
        lanes = self.lanes
        key: tuple[str, int] | None = None
        lane: _Lane | None = None
        skip = True  # the records of this run are not copied (not ours, done, parked, rewound)
        last_off, last_ts = -1, 0
        for msg in msgs:
            err = msg.error()
            if err is not None:
                self._on_read_error(msg, err)
                key = None  # it may have changed a lane: the next record looks again
                continue
            tp = (msg.topic(), msg.partition())
            if tp != key:
                if lane is not None and last_off >= 0:
                    lane.acks.end_run(last_off, last_ts)
                key, lane, last_off = tp, lanes.get(tp), -1
                skip = lane is None or lane.read_done or lane.stopped or lane.rewind is not None
                if lane is not None and not skip:
                    res = lane.result
                    start, end = res.start, res.end
                    paced, check_above = lane.paced, lane.check_above
                    remote, partition, dr = lane.remote, tp[1], lane.acks.on_delivery
                    produced, sized = lane.acks.produced, lane.sizes.append
            if skip:
                continue
            assert lane is not None  # (not skipped: a lane of this task)
            off = msg.offset()
            if off < start:
                continue  # fetched for an earlier task of these clients
            if off + 1 >= end:
                self._read_done(lane)
                if off >= end:
                    continue
            if paced:
                lane.pending.append(msg)
                if len(lane.pending) >= 10_000:
                    self._pause(lane)
                continue
            value = msg.value()
            if value is not None and len(value) > check_above and self._oversized(lane, msg):
                skip = True  # parked: nothing more of this partition counts
                continue
            ts = msg.timestamp()[1]
            try:
                # positional: topic, value, key, partition, callback, on_delivery, timestamp,
                # headers (no keyword dict per record)
                produce(
                    remote, value, msg.key(), partition, dr, None, ts if ts > 0 else 0,
                    msg.headers(),
                )  # fmt: skip
            except (BufferError, KafkaException):
                if not self._send(lane, msg, ts):
                    skip = True  # parked
                    continue
            produced(off)
            sized(len(value) if value is not None else 0)
            last_off, last_ts = off, ts
        if lane is not None and last_off >= 0:
            lane.acks.end_run(last_off, last_ts)

    def _copy_transformed(self, msgs: list[Any]) -> None:
        """A flow with record transforms: the batch after them goes through the same loop
        (:mod:`mirrorlib.kafka.transformed`). A range ending in dropped records is read when its
        last record was; a partition a transform failed on is parked at that record (after the
        records before it were produced): its range stops there, a later task copies it again."""
        chain = self.s.record_transforms
        assert chain is not None
        lanes = self.lanes
        ended: list[_Lane] = []

        def remote_of(topic: str, partition: int, offset: int) -> str | None:
            lane = lanes.get((topic, partition))
            if lane is None or lane.read_done or lane.stopped or lane.rewind is not None:
                return None
            res = lane.result
            return lane.remote if res.start <= offset < res.end else None

        def dropped(topic: str, partition: int, offset: int) -> None:
            lane = lanes[(topic, partition)]
            if offset + 1 >= lane.result.end:
                ended.append(lane)  # (after the copy: a lane read to its end copies nothing)

        batch, failures = transform_batch(msgs, chain, remote_of, dropped)
        self.copy(batch)
        for lane in ended:
            self._read_done(lane)
        for topic, partition, offset, reason in failures:
            lane = lanes[(topic, partition)]
            if lane.parked_at is None or offset < lane.parked_at:
                self._park(lane, offset, f"record transforms of {self.s.name}: {reason}")

    def _read_done(self, lane: _Lane) -> None:
        if not lane.read_done:
            lane.read_done = True
            if not lane.throttled:
                self.consumer.pause([lane.ktp])
            lane.throttled = True

    def _oversized(self, lane: _Lane, msg: Any) -> bool:
        """Park ``lane`` at ``msg`` if it is larger than the remote topic's limit on its own.

        The first record of a range goes to the target whatever the known limit says: a parked
        partition's retry starts there, and the limit (cached by the driver) may have been
        raised since it was read; a refusal parks the partition all the same."""
        off = msg.offset()
        max_bytes = lane.max_bytes
        if max_bytes is None or off == lane.result.start:
            return False
        reason = too_large(msg, max_bytes, lane.remote, self.s.target)
        if reason is None:
            return False
        self._park(lane, off, reason)
        return True

    def _send(self, lane: _Lane, msg: Any, ts: int) -> bool:
        """Produce one record, serving delivery reports while the local queue is full; returns
        whether it was produced (a refusal by the producer parks the partition)."""
        try:
            return produce_waiting(
                self.producer.produce, self.serve, lane.remote, lane.tp[1], msg, ts,
                lane.acks.on_delivery,
            )  # fmt: skip
        except KafkaException as exc:
            if fatal_error(exc) is not None:  # the producer is dead: the task fails
                raise kafka_error(exc, cluster=self.s.target, action="producing") from exc
            self._park(lane, msg.offset(), f"{self.s.target} refused the record: {exc}")
            return False

    def _send_batch(self, lane: _Lane, count: int) -> None:
        """Produce the next ``count`` records waiting in a paced lane."""
        last_off, last_ts = -1, 0
        for _ in range(count):
            msg = lane.pending.popleft()
            if self._oversized(lane, msg):
                break
            off, value, ts = msg.offset(), msg.value(), msg.timestamp()[1]
            if not self._send(lane, msg, ts):
                break
            lane.acks.produced(off)
            lane.sizes.append(len(value) if value is not None else 0)
            last_off, last_ts = off, ts
        if last_off >= 0:
            lane.acks.end_run(last_off, last_ts)

    def send_paced(self) -> None:
        """Produce the next batch of every paced lane with nothing in flight; copy a lane
        refused as too large again from the refused record once its reports are in."""
        for lane in self.lanes.values():
            if lane.acks.outstanding:
                continue
            if lane.rewind is not None:
                self.consumer.seek(KafkaTopicPartition(*lane.tp, lane.rewind))
                lane.rewind = None
                lane.pending.clear()
                lane.read_done = False
                lane.throttled = True
                self._resume(lane)
                continue
            if lane.pending and not lane.stopped:
                self._send_batch(lane, batch_length(lane.pending, lane.budget))
                if len(lane.pending) < 1_000:
                    self._resume(lane)

    # -- offset syncs

    def send_syncs(self) -> None:
        if self.syncs is not None:
            self.syncs.send()
            self.syncs.poll()

    def serve(self, timeout: float, *, flush: bool = False) -> None:
        """Serve the producer's delivery reports (``flush``: wait up to ``timeout`` for all of
        them). confluent-kafka raises the producer's fatal error from these calls: the task
        fails with it, named."""
        try:
            if flush:
                self.producer.flush(timeout)
            else:
                self.producer.poll(timeout)
        except KafkaException as exc:
            raise kafka_error(exc, cluster=self.s.target, action="producing") from exc

    def _sync_written(self) -> None:
        self.result.offset_syncs += 1

    def _sync_failed(self) -> None:
        self.result.offset_syncs_failed += 1

    @property
    def parked(self) -> bool:
        """Whether a partition of the task stopped at a refused record."""
        return any(lane.stopped for lane in self.lanes.values())

    # -- the loop

    def run(self, stall: float) -> None:
        lanes = list(self.lanes.values())
        work = [lane for lane in lanes if not lane.read_done]
        if work:
            self.consumer.incremental_assign(
                [KafkaTopicPartition(*lane.tp, lane.result.start) for lane in work]
            )
        consumer = self.consumer
        while not all(lane.done for lane in lanes):
            reading = any(not (lane.throttled or lane.stopped) for lane in lanes)
            # Block only until the first record, then take what is already fetched (as the
            # embedded copier does: consume(n, t) would hold the records it has while waiting)
            first = consumer.poll(0.1) if reading else None
            msgs = [first, *consumer.consume(5_000, timeout=0)] if first is not None else []
            if msgs:
                self.progress_at = time.monotonic()
                if self.result.first_record_s is None:
                    self.result.first_record_s = self.progress_at - self.started
                self.copy_batch(msgs)
            self.serve(0 if msgs else 0.01)
            self.drain()
            self.send_paced()
            self.send_syncs()
            if time.monotonic() - self.progress_at > stall:
                stuck = sorted(lane.tp for lane in lanes if not lane.done)
                raise ClusterTimeoutError(
                    f"flow {self.s.name}: no progress copying {stuck} for {stall:.0f}s",
                    cluster=self.s.source, code="_TIMED_OUT", retriable=True,
                )  # fmt: skip
        for lane in work:
            try:
                _, high = self.consumer.get_watermark_offsets(lane.ktp, cached=True)
            except KafkaException:
                continue
            lane.result.high_watermark = int(high) if high is not None else -1

    def _on_read_error(self, msg: Any, err: Any) -> None:
        code = err.code()
        lane = self.lanes.get((msg.topic(), msg.partition()))
        if code == KafkaError._PARTITION_EOF:
            # a range may end in transaction markers or compacted-away offsets
            if lane is not None and not lane.read_done and msg.offset() >= lane.result.end:
                self._read_done(lane)
            return
        if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE) and lane:
            self._data_loss(lane)
            return
        if consumer_dead(err):
            raise kafka_error(
                KafkaException(err), cluster=self.s.source,
                action=f"reading {msg.topic()}-{msg.partition()}", resource=msg.topic(),
            )  # fmt: skip
        log.warning("flow %s: source consumer error: %s", self.s.name, err.str())

    def _data_loss(self, lane: _Lane) -> None:
        low, high = self.consumer.get_watermark_offsets(lane.ktp, timeout=self.s.admin_timeout)
        pos = self.consumer.position([lane.ktp])[0].offset
        res = lane.result
        frm = pos if pos >= 0 else res.copied_to
        message = (
            f"data loss on {self.s.source} {lane.tp[0]}-{lane.tp[1]}: the batch needs offsets "
            f"up to {res.end - 1} from {frm} but the log holds {low}..{high - 1}"
        )
        if self.s.data_loss_action == "fail":
            raise DataLossError(message + " (set data.loss.action=continue to skip the gap)")
        log.error("%s; continuing at %d as data.loss.action=continue", message, low)
        res.lost += max(min(low, res.end) - frm, 0)
        if low >= res.end:
            self._read_done(lane)
            return
        self.consumer.incremental_unassign([lane.ktp])
        self.consumer.incremental_assign([KafkaTopicPartition(*lane.tp, low)])

    def finish(self, timeout: float) -> None:
        """Wait for every delivery report, then write the remaining offset syncs (the newest
        acknowledged record of every partition, as MM2 does on each task commit)."""
        deadline = time.monotonic() + timeout
        while len(self.producer) > 0 and time.monotonic() < deadline:
            self.serve(min(1.0, max(deadline - time.monotonic(), 0.01)), flush=True)
            self.drain()
            self.send_syncs()
        self.drain()
        if self.syncs is not None:
            self.emitter.promote_delayed()
            self.send_syncs()
            left = self.syncs.flush(timeout)
            if left:
                log.warning("flow %s: %d offset sync(s) not confirmed", self.s.name, left)
        for lane in self.lanes.values():
            # a range may end in transaction markers or compacted-away offsets: done is done
            if lane.done:
                res = lane.result
                res.copied_to = res.end if lane.parked_at is None else lane.parked_at
        self.result.partitions = [self.lanes[tp].result for tp in sorted(self.lanes)]


def copy_ranges(
    settings: FlowSettings,
    work: Sequence[Range],
    *,
    max_bytes: Mapping[str, int | None] | None = None,
    budgets: Mapping[TP, int] | None = None,
    stall_timeout: float | None = None,
) -> CopyResult:
    """Copy every record of ``work`` (each range ``[start, end)``) to the remote topics, same
    partition; returns when every record is acknowledged (or its partition parked) and the
    offset syncs covering them are written.

    ``max_bytes``: source topic → its remote topic's ``max.message.bytes`` (when known);
    ``budgets``: paced batch budgets learnt by earlier tasks (after ``MSG_SIZE_TOO_LARGE``).
    Offsets the source no longer holds raise :class:`DataLossError` (or are skipped and counted
    with ``data.loss.action=continue``); no progress for ``stall_timeout`` seconds raises
    :class:`~mirrorlib.errors.ClusterTimeoutError` (Spark retries the task).

    The task borrows this process's :class:`TaskClients` for the flow's configuration (built on
    first use) and gives them back for the next task when it succeeded with nothing left in
    flight and no partition parked; otherwise they are closed."""
    started = time.monotonic()
    s = settings
    stall = stall_timeout if stall_timeout is not None else max(s.admin_timeout, 60.0)
    key, clients = _POOL.acquire(s)
    try:
        task = _Copy(s, clients, work, max_bytes or {}, budgets or {}, started)
        try:
            task.run(stall)
        except BaseException:
            # still wait for what was sent and write the syncs of what the target acknowledged
            try:
                task.finish(stall)
            except Exception as exc:
                log.warning("flow %s: after a failed copy: %s", s.name, exc)
            raise
        task.finish(stall)
    except BaseException:
        _POOL.discard(clients)  # a failed task's clients are not trusted with the next one
        raise
    if task.parked:
        _POOL.discard(clients)  # the target refused records: the next task starts afresh
    else:
        _POOL.give_back(key, clients)  # kept only if nothing is left in flight
    task.result.seconds = time.monotonic() - started
    return task.result
