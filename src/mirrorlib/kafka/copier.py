"""The record copier of a flow A->B: consume from A, produce to B, keep positions and offset syncs.

Delivery guarantees
-------------------
* **At-least-once** (default). A source position is stored only after every record up to it was
  acknowledged by the target (``acks=all``, idempotent producer, so per-partition order holds).
  After a crash, replication resumes at the stored position: records copied since the last
  position flush are copied again (duplicates), none is skipped.
* **Exactly-once** (``<target>.exactly.once.source.support = enabled``). Records and the positions
  that cover them are written in one Kafka transaction on the target; the position topic is read
  with ``read_committed``. A ``read_committed`` consumer of the target sees every source record
  exactly once, whatever moment the process is killed. Fencing is per node
  (``transactional.id`` = ``mirrorlib-<A>-><B>-<node>``): a restarted node fences its previous
  incarnation.
* **Loss is never silent.** A position that the source log no longer holds (retention, deleted and
  recreated topic) is reported with the lost offset range; ``data.loss.action`` chooses between
  failing the flow (default) and continuing with the gap counted in ``lost-records``. A record the
  target refuses (e.g. too large) stops its partition at that record, with the error in the
  status, and is retried with back-off; later records of that partition are never acknowledged
  past it.
* **A dead client is recreated.** A fatal error of the target producer (fenced by another
  producer with the same ``transactional.id``, or a fatal idempotence error such as
  ``OUT_OF_ORDER_SEQUENCE_NUMBER``) or of the source consumer closes the copier's clients and
  opens new ones, with back-off, the error in the flow's status meanwhile. Nothing is written
  through a dead producer: at-least-once resumes from the stored positions (records copied since
  are copied again), exactly-once from the committed ones (the new producer's initialisation
  aborts the open transaction). So is a *stuck* producer: one that keeps reporting it cannot get
  a producer id or reach its coordinator while records wait and none is acknowledged, for
  :data:`~mirrorlib.core.stalls.STUCK_PRODUCER_S` (librdkafka would retry forever, from the same
  broker; see :class:`~mirrorlib.core.stalls.StuckProducer`).

Batches and the remote topic's ``max.message.bytes``
----------------------------------------------------
The broker refuses a whole record batch larger than the topic's ``max.message.bytes``
(``MSG_SIZE_TOO_LARGE`` for every record of it) even when each record fits, and librdkafka does
not split it: a backlog copied into a topic with a small limit would fail batch after batch.
The replication producer keeps ``batch.size`` (1 MB by default) for throughput, and librdkafka
can only batch the records queued for a partition, so a partition whose remote topic has a
``max.message.bytes`` below ``batch.size`` is *paced*: its records wait in the copier and are
produced one batch at a time, at most ``max.message.bytes`` (records plus framing) and only once
the partition has nothing in flight (the partition is paused on the source meanwhile). Other
partitions are not affected. A ``MSG_SIZE_TOO_LARGE`` refusal all the same (the limit was
unknown or lowered since) halves the partition's batch budget and sends the refused records
again at once, without back-off; only a record refused while it was sent alone is a real
refusal, which stops its partition as above (so does a record larger than the known limit,
before it is sent).

Partition growth
----------------
Growing a source topic changes no topic name, so the subscription stays the same: the source
consumer refreshes its metadata every ``refresh.topics.interval.seconds`` (at most librdkafka's
5 minutes) to see new partitions, and the producer's metadata is refreshed as soon as the catalog
shows the remote topic grown (without it, produces to the new partitions fail locally with
``_UNKNOWN_PARTITION`` until librdkafka's periodic refresh).

Structure
---------
The copier is the consume -> produce loop and what needs its consumer: subscription and
assignment, parking and retrying partitions, detecting data loss, pacing. What a delivery report
means is :mod:`mirrorlib.core.acks` (per-partition in-flight records, matched with the reports a
run at a time; no Kafka client); when acknowledged records become stored positions (and, for
exactly-once, committed transactions) is a :class:`~mirrorlib.kafka.commit.Committer`
(:mod:`mirrorlib.kafka.commit`); the batch sizing of paced partitions is
:mod:`mirrorlib.core.pacing`. The loop calls those once per batch or per round, never per record.

Partitions are shared between processes running the same flow through a consumer group on the
source cluster (``mirrorlib-<A>-><B>``, cooperative-sticky assignment); positions come from the
target's offsets topic, never from that group, which commits nothing. With ``node.id`` set, the
copier is a *static* member of that group (``group.instance.id``): a restarted process gets its
partitions back at once instead of after the session timeout.

Worker mode (``tasks.max`` > 1)
-------------------------------
A copier worker process (:mod:`mirrorlib.runtime.worker`) runs a copier with a
:class:`DirectAssignment`: no group, ``assign`` of the partitions its parent gives it
(incrementally), each resumed from its stored position; and a ``transactional_id`` of its own
slot: whatever the delivery mode, records and positions go through the exactly-once
:class:`~mirrorlib.kafka.commit.TransactionCommitter` (the fence of the slot), and a producer
that dies (fenced by a newer process of the slot, or any fatal error) ends the copier
(:attr:`Copier.fenced`) instead of being recreated with the same id. Its offset syncs go to a
``sync_sink`` (the parent writes them).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Protocol, cast

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
)
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mirrorlib.core.acks import Acknowledged, InFlight, PartitionProgress
from mirrorlib.core.catalog import RemoteTopic, TopicCatalog
from mirrorlib.core.pacing import (
    RECORD_OVERHEAD,
    batch_budget,
    batch_length,
    halved_budget,
    record_size,
)
from mirrorlib.core.retry import Backoff
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.stalls import StuckProducer
from mirrorlib.core.status import FlowState, PartitionStats, StatsRegistry
from mirrorlib.core.syncs import OffsetSyncEmitter
from mirrorlib.errors import DataLossError
from mirrorlib.kafka import client_conf, client_log
from mirrorlib.kafka.commit import Committer, TransactionCommitter, committer_for
from mirrorlib.kafka.offset_syncs import OffsetSyncWriter
from mirrorlib.kafka.positions import PositionStore

__all__ = ["Copier", "DataLossError", "DirectAssignment", "SyncSink"]

log = logging.getLogger(__name__)

#: back-off (seconds) of a copier restart (a parked partition's: PartitionProgress.retries)
_BACKOFF_BASE_S, _BACKOFF_CAP_S = 1.0, 60.0
# seconds between two renewals of a stale static-member assignment
_RESUBSCRIBE_MIN_S = 10.0
# a record size no max.message.bytes check applies to (the remote topic's limit is unknown)
_NO_LIMIT = 1 << 62
# librdkafka's periodic metadata refresh (topic.metadata.refresh.interval.ms default), seconds
_METADATA_REFRESH_MAX_S = 300.0
# errors of a produce call or delivery report that mean the producer itself is dead (fenced by
# another transactional producer, or a fatal idempotence error such as OUT_OF_ORDER_SEQUENCE)
_PRODUCER_DEAD = frozenset({KafkaError._FATAL, KafkaError._FENCED, KafkaError.PRODUCER_FENCED})
# errors of a delivery report that mean the record was withdrawn by the producer itself (its
# transaction failed and is aborted), not refused by the target
_WITHDRAWN = frozenset({KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT})


def _fatal_error(err: object) -> KafkaError | None:
    """``err`` (a ``KafkaError``, or a ``KafkaException`` carrying one) if it is fatal
    to its client, else ``None``."""
    if isinstance(err, KafkaException):
        err = err.args[0] if err.args else None
    if isinstance(err, KafkaError) and (err.fatal() or err.code() in _PRODUCER_DEAD):
        return err
    return None


class SyncSink(Protocol):
    """Where a copier's due offset syncs go (by default an
    :class:`~mirrorlib.kafka.offset_syncs.OffsetSyncWriter`)."""

    def send(self) -> None: ...

    def poll(self) -> None: ...

    def flush(self, timeout: float) -> int: ...


class DirectAssignment:
    """The partitions a worker copier is to copy, set from another thread (see the module).

    :meth:`set` publishes a numbered assignment; the copier applies it on its next round (its
    dropped partitions committed and unassigned first) and then calls ``applied(version)``."""

    def __init__(self, applied: Callable[[int], None]) -> None:
        self._lock = threading.Lock()
        self._version = -1
        self._partitions: frozenset[tuple[str, int]] = frozenset()
        self.applied = applied

    def set(self, version: int, partitions: Iterable[tuple[str, int]]) -> None:
        with self._lock:
            self._version, self._partitions = version, frozenset(partitions)

    def wanted(self) -> tuple[int, frozenset[tuple[str, int]]]:
        with self._lock:
            return self._version, self._partitions


class _Part(PartitionProgress):
    """Copier state of one assigned source partition: its progress (in flight, acknowledged,
    blocked; :class:`~mirrorlib.core.acks.PartitionProgress`), remote topic, pacing and parking."""

    __slots__ = (
        "budget",
        "max_bytes",
        "parked_until",
        "pending",
        "probe_at",
        "remote",
        "sampled_ts",
        "throttled",
    )

    def __init__(
        self,
        key: tuple[str, int],
        remote: str,
        stats: PartitionStats,
        ready: Callable[[InFlight], None],
    ) -> None:
        super().__init__(key, stats, ready)
        self.remote = remote
        self.max_bytes: int | None = None  # the remote topic's max.message.bytes
        # paced (see the module docstring): bytes the partition may have in flight, None: any
        self.budget: int | None = None
        self.pending: deque[Any] = deque()  # paced: records consumed, not produced yet
        self.throttled = False  # paced: paused on the source until `pending` is produced
        self.sampled_ts: int | None = None  # tail timestamp at the last latency sample
        self.parked_until = 0.0
        # A retry sends the record it was parked at to the target once, whatever the known
        # max.message.bytes says: the limit may have been raised since it was read (it is cached).
        self.probe_at: int | None = None

    def first_to_copy_again(self) -> int | None:
        """With nothing acknowledged: the first upstream offset still to be copied — the first
        record produced (:meth:`~mirrorlib.core.acks.PartitionProgress.first_unsettled`),
        queued (paced) or blocked at — or ``None`` when it read nothing yet."""
        unsettled = (
            self.first_unsettled(),
            self.pending[0].offset() if self.pending else None,
            self.blocked_at,
        )
        return min((o for o in unsettled if o is not None), default=None)


class Copier:
    """Copies records of one flow; run :meth:`run` in a dedicated thread."""

    def __init__(
        self,
        settings: FlowSettings,
        catalog: TopicCatalog,
        stats: StatsRegistry,
        positions: PositionStore,
        *,
        assignment: DirectAssignment | None = None,
        transactional_id: str | None = None,
        sync_sink: Callable[[OffsetSyncEmitter], SyncSink] | None = None,
    ) -> None:
        self.s = settings
        self._direct = assignment
        self._direct_version = -1  # the assignment version applied
        # worker mode: this id, transactions in any delivery mode, a dead producer ends the copier
        self._transactional_id = transactional_id
        self._transactional = transactional_id is not None or settings.exactly_once_enabled
        self._sync_sink = sync_sink
        self.fenced: str | None = None
        """Why the copier ended because its (worker) producer died or was fenced."""
        self.catalog = catalog
        self.stats = stats
        self.positions = positions
        self.emitter = OffsetSyncEmitter(offset_lag_max=settings.offset_lag_max)
        self._parts: dict[tuple[str, int], _Part] = {}
        self._ready: list[InFlight] = []  # partitions with delivery reports to match
        self._queued: set[_Part] = set()  # paced partitions with records in `pending`
        self._batch_size = 1_000_000  # the replication producer's batch.size
        self._remote_of: dict[str, RemoteTopic] = {}
        self._catalog_version = -1
        self._subscribed: list[str] = []
        # auto.offset.reset=latest: where partitions without a stored position started in this
        # copier's first run; a restart of its clients resumes them there (_remember_starts)
        self._starts: dict[tuple[str, int], int] = {}
        committer = TransactionCommitter if transactional_id else committer_for(settings)
        self.committer: Committer = committer(
            settings,
            positions,
            self.emitter,
            self._parts,
            send_syncs=self._send_offset_syncs,
            drain_acks=self._drain_acks,
            rewind=self._rewind,
        )
        self._last_watermarks = 0.0
        self._consumer: Any = None
        self._producer: Any = None
        self._syncs: SyncSink | None = None
        self.failed: str | None = None
        self._degraded: set[str] = set()
        # fatal errors of the open clients ("source", "target"): they are recreated
        self._fatal: dict[str, KafkaError] = {}
        self._stuck = StuckProducer()  # the target producer: recreated when stuck
        self._stuck_reason = ""  # its last problem
        self._last_latency_sample = 0.0
        self._acked_since_sample: set[_Part] = set()  # latency sampling visits only these
        self._resubscribed = 0.0  # when a stale static assignment was last renewed
        self._stopping = threading.Event()  # the stop request of `run`

    # -- clients ---------------------------------------------------------------------------------

    def _open(self) -> None:
        s = self.s
        self._fatal.clear()
        cconf = s.record_consumer()
        cconf.update(
            {
                "group.id": s.copier_group_id,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "error",  # we apply the reset rule ourselves: no silent jumps
                "partition.assignment.strategy": "cooperative-sticky",
                **({"group.instance.id": s.group_instance_id} if s.group_instance_id else {}),
                "enable.partition.eof": False,
                "error_cb": self._client_error("source", s.source),
            }
        )
        # new partitions of a subscribed topic are seen at this refresh (no name changes)
        refresh = min(max(s.refresh_topics_interval, 1.0), _METADATA_REFRESH_MAX_S)
        cconf.setdefault("topic.metadata.refresh.interval.ms", int(refresh * 1000))
        if s.exactly_once_enabled:
            cconf["isolation.level"] = "read_committed"
        else:
            cconf.setdefault("isolation.level", "read_uncommitted")
        pconf = s.record_producer(
            linger_ms=5,
            error_cb=self._client_error("target", s.target),
            logger=client_log(lambda line: self._client_problem("target", line)),
        )
        self._batch_size = int(pconf["batch.size"])
        if self._transactional:
            pconf["transactional.id"] = self._transactional_id or s.transactional_id
        self._producer = Producer(client_conf(pconf))
        self._stuck.moved()
        if self._transactional:
            self._producer.init_transactions(s.admin_timeout)
        self.committer.open(self._producer)
        if s.emit_offset_syncs_enabled and self._sync_sink is not None:
            self._syncs = self._sync_sink(self.emitter)
        elif s.emit_offset_syncs_enabled:
            self._syncs = OffsetSyncWriter(
                s.offset_syncs_producer,
                s.offset_syncs_topic,
                self.emitter,
                flow=s.name,
                on_written=self._sync_written,
            )
        self._consumer = Consumer(client_conf(cconf))

    def _close(self, graceful: bool) -> None:
        self._remember_starts()
        consumer, self._consumer = self._consumer, None
        try:
            if graceful and self.failed is None:
                self.committer.checkpoint(final=True)
        except Exception as exc:  # closing must not hide the original problem
            log.warning("flow %s: final position flush failed: %s", self.s.name, exc)
        if consumer is not None:
            try:
                self._consumer = consumer
                consumer.close()  # revokes partitions (callbacks run here)
            except Exception as exc:
                log.warning("flow %s: closing the source consumer failed: %s", self.s.name, exc)
            finally:
                self._consumer = None
        # A dead (fatal, fenced) producer may fail its flush, or a delivery report served by it:
        # closing goes on (nothing unacknowledged was recorded; it is copied again).
        for name, client, timeout in (("offset syncs", self._syncs, 5.0),
                                      ("target", self._producer, 10.0)):  # fmt: skip
            if client is not None:
                try:
                    client.flush(timeout)
                except Exception as exc:
                    log.warning("flow %s: flushing the %s producer failed: %s", self.s.name,
                                name, exc)  # fmt: skip
        self._syncs = None
        self._producer = None
        self.committer.close()
        self._parts.clear()
        self._ready.clear()
        self._queued.clear()
        self._subscribed = []
        self._catalog_version = -1
        self._direct_version = -1

    def _remember_starts(self) -> None:
        """Before the clients close: where each partition without a stored position started
        (``auto.offset.reset=latest``), so that a restart of the clients resumes it there, not at
        the end of the log again, which would skip the records produced meanwhile and never
        committed (an aborted transaction, or positions not flushed yet)."""
        if self.s.auto_offset_reset != "latest" or self._consumer is None:
            return
        fresh = [
            p
            for p in self._parts.values()
            if p.key not in self._starts and self.positions.last_replicated(*p.key) is None
        ]
        if not fresh:
            return
        try:
            consumed = self._consumer.position([KafkaTopicPartition(*p.key) for p in fresh])
        except KafkaException:
            consumed = []
        at = {(t.topic, t.partition): t.offset for t in consumed if t.offset >= 0}
        for part in fresh:
            unsettled = (part.first_to_copy_again(), at.get(part.key))
            start = min((o for o in unsettled if o is not None), default=None)
            if start is not None:
                self._starts[part.key] = start

    # -- main loop -------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        self._stopping = stop
        try:
            self._run(stop)
        finally:
            self.positions.close()

    def _run(self, stop: threading.Event) -> None:
        backoff = Backoff(base=_BACKOFF_BASE_S, cap=_BACKOFF_CAP_S)
        while not stop.is_set() and self.failed is None:
            try:
                self._open()
                self.stats.set_error("copier", None)
                backoff.reset()
                stuck = self._loop(stop)
                if stuck is not None and self._transactional_id is not None:
                    self._end_worker(f"the producer was stuck: {stuck}")
                    return
                if stuck is not None:
                    self._producer_stuck(stuck)
                    self._close(graceful=False)
                    continue
                self._close(graceful=True)
            except DataLossError as exc:
                self.failed = str(exc)
                self.stats.set_error("copier", str(exc))
                self.stats.state = FlowState.FAILED
                log.error("flow %s stopped: %s", self.s.name, exc)
                self._close(graceful=False)
            except Exception as exc:
                delay = backoff.next_delay()
                dead = self._fatal.get("target")
                if dead is None and "source" not in self._fatal:
                    dead = _fatal_error(exc)  # raised by a producer call (poll, flush, commit)
                if self._transactional_id is not None:  # one producer epoch per worker
                    reason = (
                        f"{dead.name()}: {dead.str()}" if dead else f"{type(exc).__name__}: {exc}"
                    )
                    log.debug("flow %s: worker copier failed", self.s.name, exc_info=True)
                    self._end_worker(reason)
                    return
                if dead is not None:
                    self._producer_died(dead, delay)
                else:
                    self.stats.set_error(
                        "copier", f"{type(exc).__name__}: {exc} (retrying in {delay:.0f}s)"
                    )
                    log.exception("flow %s: copier failed, retrying in %.0fs", self.s.name, delay)
                self._close(graceful=False)
                backoff.wait(stop)

    def _producer_died(self, err: KafkaError, delay: float) -> None:
        """The target producer hit a fatal error (fenced, or a fatal idempotence error): it can
        write nothing any more, so nothing is written through it while closing (exactly-once:
        the open transaction is aborted by the next producer's initialisation); the copier's
        clients are recreated and copying resumes from the stored positions."""
        self.committer.close()
        self.stats.set_error(
            "copier",
            f"fatal error of the producer to {self.s.target}: {err.name()}: {err.str()} "
            f"(recreating the clients in {delay:.0f}s)",
        )
        log.error(
            "flow %s: fatal error of the producer to %s: %s: %s; recreating the clients and "
            "resuming from the stored positions in %.0fs",
            self.s.name,
            self.s.target,
            err.name(),
            err.str(),
            delay,
        )

    def _end_worker(self, reason: str) -> None:
        """Worker mode: the producer of this slot died, was fenced (a newer process of the slot
        initialised the same transactional id) or the clients failed. Nothing more is written:
        the copier ends without flushing, committing or re-initialising the id (that could fence
        a newer process of the slot in turn); the supervisor starts a new process."""
        self.fenced = reason
        self.committer.close()
        self._producer = None  # not flushed: whatever it holds is aborted or fenced
        self._syncs = None
        self.stats.set_error("copier", f"producer to {self.s.target} ended: {self.fenced}")
        log.error(
            "flow %s: the producer %s to %s ended (%s); the worker stops",
            self.s.name,
            self._transactional_id,
            self.s.target,
            self.fenced,
        )
        with contextlib.suppress(Exception):
            self._close(graceful=False)

    def _producer_stuck(self, reason: str) -> None:
        """The target producer has not written for :data:`~mirrorlib.core.stalls.STUCK_PRODUCER_S`,
        reporting ``reason``: it is recreated, as after a fatal error (nothing more is written
        through it; copying resumes from the stored positions)."""
        self.committer.close()
        self.stats.set_error("copier", f"the producer to {self.s.target} was stuck: {reason}")
        log.warning(
            "flow %s: the producer to %s wrote nothing for %.0fs (%s); recreating the clients and "
            "resuming from the stored positions",
            self.s.name,
            self.s.target,
            self._stuck.after,
            reason,
        )

    def _loop(self, stop: threading.Event) -> str | None:
        """Copy until ``stop``; returns why the target producer is stuck if it is (the clients
        are to be recreated), else ``None``."""
        s = self.s
        consumer = self._consumer
        producer = self._producer
        batch = s.consume_batch
        committer = self.committer
        while not stop.is_set():
            self._sync_subscription()
            if self._direct is not None:
                self._sync_assignment()
            if not (self._parts if self._direct is not None else self._subscribed):
                stop.wait(0.2)
                continue
            queued = bool(self._queued)  # paced partitions wait for acknowledgements: no blocking
            # Block only until the first record, then take what is already fetched, backlog or
            # not: consume(n, t) waits until n records arrive or t passes, and while it waited
            # the records it held were neither produced nor their delivery reports served
            # (docs/benchmarks.md, "Where the copier waited").
            first = consumer.poll(0.0 if queued else 0.1)
            msgs = [first, *consumer.consume(batch - 1, timeout=0)] if first is not None else []
            if msgs and "source" in self._degraded:
                self._degraded.discard("source")
                self.stats.set_error("source", None)
            if msgs:
                committer.begin()
                self._copy(msgs)
            producer.poll(0.01 if queued and not msgs else 0)
            if self._fatal:  # reported to error_cb: restart the clients
                raise KafkaException(next(iter(self._fatal.values())))
            self._drain_acks()
            if self._queued:
                self._send_queued()
            now = time.monotonic()
            committer.tick(now, caught_up=not msgs and not queued)
            self._retry_parked(now)
            self._send_offset_syncs()
            self._sync_producer_poll()
            if now - self._last_latency_sample >= 0.1:
                self._sample_latency()
                self._last_latency_sample = now
            if now - self._last_watermarks >= 2.0:
                self._check_static_assignment(now)
                self._refresh_end_offsets()
                self._last_watermarks = now
                waiting = any(p.outstanding for p in self._parts.values())
                if self._stuck.stuck(now, waiting=waiting):
                    return self._stuck_reason
        return None

    def _copy(self, msgs: list[Any]) -> None:  # noqa: PLR0912, PLR0915 - the per-record hot loop, kept whole (no per-record calls)
        """Produce a consumed batch. Per record only what cannot be batched: the produce call
        and remembering its upstream offset; the rest once per run of one partition."""
        produce = self._producer.produce
        parts = self._parts
        part: _Part | None = None
        cur_topic: str | None = None
        cur_partition = -1
        sent_append: Callable[[int], None] | None = None
        remote = ""
        dr: Any = None
        half_max = _NO_LIMIT
        queue: Callable[[Any], None] | None = None
        skip = True  # the current run's records are not copied (see below)
        last_off = -1
        last_ts = 0
        nbytes = 0
        stopped = False
        for msg in msgs:
            err = msg.error()
            if err is not None:
                self._on_consume_error(msg, err)
                continue
            topic = msg.topic()
            partition = msg.partition()
            if partition != cur_partition or topic != cur_topic:
                if part is not None and last_off >= 0:
                    self._end_run(part, last_off, last_ts, nbytes)
                cur_topic, cur_partition = topic, partition
                part = parts.get((topic, partition))
                last_off, nbytes = -1, 0
                # not ours any more, or waiting for a retry (it was seeked back)
                skip = part is None or bool(part.parked_until)
                if part is not None:
                    sent_append = part.produced
                    remote, dr = part.remote, part.on_delivery
                    # records this large are checked against max.message.bytes (no limit: none)
                    half_max = (
                        _NO_LIMIT if part.max_bytes is None else part.max_bytes // 2
                    ) - RECORD_OVERHEAD
                    queue = None
                    if part.budget is not None or part.pending:
                        queue = part.pending.append
                        self._queued.add(part)
            if skip:
                continue
            assert part is not None and sent_append is not None  # (not skipped: ours)
            if queue is not None:
                queue(msg)  # paced: produced by _send_queued, a batch at a time
                continue
            value = msg.value()
            ts = msg.timestamp()[1]
            if value is not None and len(value) > half_max and self._too_large(part, msg):
                skip = True  # parked: the rest of the run is read again after the retry
                continue
            offset = msg.offset()
            try:
                while True:
                    try:
                        # positional: topic, value, key, partition, callback, on_delivery,
                        # timestamp, headers (no keyword dict per record)
                        produce(
                            remote,
                            value,
                            msg.key(),
                            partition,
                            dr,
                            None,
                            ts if ts > 0 else 0,
                            msg.headers(),
                        )
                        break
                    except BufferError:  # queue full: serve delivery reports, then retry
                        if self._stopping.is_set():  # (the target may be down for minutes)
                            stopped = True
                            break
                        self._producer.poll(0.05)
            except KafkaException as exc:
                self._refused(part, offset, exc)
                skip = bool(part.parked_until)
                continue
            if stopped:  # not produced: this record and the rest are copied after a restart
                break
            sent_append(offset)
            last_off = offset
            last_ts = ts
            if value is not None:
                nbytes += len(value)
        if part is not None and last_off >= 0:
            self._end_run(part, last_off, last_ts, nbytes)

    def _end_run(self, part: _Part, last_offset: int, last_ts: int, nbytes: int) -> None:
        """Bookkeeping once per produced run of one partition."""
        part.end_run(last_offset, last_ts)
        st = part.stats
        st.byte_count += nbytes
        if last_ts > 0:  # record-age-ms, sampled once per run
            st.age.record(time.time() * 1000.0 - last_ts)
        if self._transactional:
            part.txn_last = last_offset

    def _refused(self, part: _Part, offset: int, exc: KafkaException) -> None:
        """A produce call failed locally: park the partition at the record."""
        err = exc.args[0] if exc.args else None
        if (dead := _fatal_error(err)) is not None:
            self._fatal.setdefault("target", dead)  # (error_cb may have named the cause)
            raise exc
        if isinstance(err, KafkaError) and err.code() == KafkaError._UNKNOWN_PARTITION:
            # the remote topic grew since the producer's metadata: the retry will know
            self._refresh_target_metadata([part.remote])
        if (
            self.committer.in_transaction
            and isinstance(err, KafkaError)
            and err.code() == KafkaError._STATE
        ):
            # the transaction failed (a record of it was refused): no record is taken until it
            # is aborted, which rewinds every partition of it; this one goes on from there
            self.committer.refused()
            self._resend(part, offset)
            return
        self._park(part, offset, f"target refused the record: {exc}")

    def _too_large(self, part: _Part, msg: Any) -> bool:
        """Park the partition at a record the target topic's max.message.bytes would refuse."""
        assert part.max_bytes is not None
        size = record_size(msg)
        if size <= part.max_bytes:
            return False
        topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
        if part.probe_at == offset:  # a retry: the target decides (a refusal parks it again)
            part.probe_at = None
            return False
        size -= RECORD_OVERHEAD
        self._park(
            part,
            offset,
            f"record {topic}-{partition}@{offset} ({size} bytes) is larger than "
            f"max.message.bytes={part.max_bytes} of {part.remote} on {self.s.target}; "
            f"raise it on the target topic to replicate it",
        )
        return True

    # -- paced partitions (remote topics with a small max.message.bytes) ----------------------

    def _send_queued(self) -> None:
        """Produce the next batch of every paced partition that has nothing in flight; pause
        the ones with records left on the source, resume the ones done."""
        for part in list(self._queued):
            if self._parts.get(part.key) is not part:
                self._queued.discard(part)
                continue
            if not part.outstanding and not part.parked_until:
                self._send_batch(part)
            if part.pending:
                if not part.throttled and not part.parked_until:
                    self._consumer.pause([KafkaTopicPartition(*part.key)])
                    part.throttled = True
            else:
                self._drop_pending(part)

    def _send_batch(self, part: _Part) -> None:
        """Produce records of ``part.pending`` up to the partition's budget (at least one):
        with nothing else of the partition queued, librdkafka's batch is at most that."""
        pending = part.pending
        nbytes = last_ts = 0
        last_off = -1
        self.committer.begin()
        for _ in range(batch_length(pending, part.budget)):
            msg = pending[0]
            if part.max_bytes is not None and self._too_large(part, msg):
                return  # parked (and seeked back: `pending` is dropped)
            ts = msg.timestamp()[1]
            offset = msg.offset()
            try:
                if not self._produce_paced(part, msg, ts):
                    break  # stopping: the rest is copied again after a restart
            except KafkaException as exc:
                self._refused(part, offset, exc)
                return
            pending.popleft()
            part.produced(offset)
            last_off, last_ts = offset, ts
            nbytes += len(msg.value() or b"")
        if last_off >= 0:
            self._end_run(part, last_off, last_ts, nbytes)

    def _produce_paced(self, part: _Part, msg: Any, ts: int) -> bool:
        """Produce ``msg``; False when the queue is full and a stop was requested."""
        while True:
            try:
                self._producer.produce(
                    part.remote,
                    msg.value(),
                    msg.key(),
                    part.key[1],
                    part.on_delivery,
                    None,
                    ts if ts > 0 else 0,
                    msg.headers(),
                )
                return True
            except BufferError:  # queue full: serve delivery reports, then retry
                if self._stopping.is_set():  # (the target may be down for minutes)
                    return False
                self._producer.poll(0.05)

    def _drop_pending(self, part: _Part) -> None:
        """Forget the records a paced partition holds (done, or seeked back: they are read
        again) and resume it on the source unless it is parked."""
        part.pending.clear()
        self._queued.discard(part)
        if part.throttled:
            part.throttled = False
            if not part.parked_until and self._parts.get(part.key) is part:
                self._consumer.resume([KafkaTopicPartition(*part.key)])

    def _smaller_batches(self, part: _Part, msg: Any) -> bool:
        """After a ``MSG_SIZE_TOO_LARGE`` refusal of ``msg``: halve the partition's batch
        budget and return True, or return False when ``msg`` was sent alone (a real refusal)."""
        budget = halved_budget(part.budget, self._batch_size, msg)
        if budget is None:
            return False
        part.budget = budget
        log.warning(
            "flow %s: %s refused a batch of %s-%d as too large; sending batches of at most "
            "%d bytes",
            self.s.name,
            self.s.target,
            part.key[0],
            part.key[1],
            part.budget,
        )
        return True

    def _resend(self, part: _Part, offset: int) -> None:
        """Send ``part`` again from ``offset`` as soon as its outstanding reports are in (no
        back-off): a parking that is due at once."""
        part.blocked_at = offset if part.blocked_at is None else min(part.blocked_at, offset)
        part.parked_until = time.monotonic()
        with contextlib.suppress(KafkaException):
            self._consumer.pause([KafkaTopicPartition(*part.key)])
        if not self.committer.in_transaction:
            self._seek(part, part.blocked_at)  # (EOS: the failed commit aborts and rewinds)

    # -- acknowledgements ------------------------------------------------------------------------

    def _drain_acks(self) -> None:
        """Match the delivery reports served since the last call with the records produced."""
        ready = self._ready
        if not ready:
            return
        parts = ready[:]
        ready.clear()
        succeeded = False
        for part in parts:
            if part.has_reports:
                succeeded = self._acked(cast(_Part, part)) or succeeded
        if succeeded:
            self._stuck.moved()
        if succeeded and "target" in self._degraded:
            self._degraded.discard("target")
            self.stats.set_error("target", None)

    def _acked(self, part: _Part) -> bool:
        """Process ``part``'s delivery reports; returns whether any record succeeded."""
        acks = part.take(part.blocked_at)
        if acks is None or self._parts.get(part.key) is not part:
            return False  # nothing to match, or revoked or lost meanwhile: not ours
        if acks.refused:
            self._refusals(part, acks)
        if not acks.count:
            return False
        st = part.stats
        st.record_count += acks.count
        if acks.tail_timestamp > 0:  # replication-latency-ms is sampled from it in the loop
            st.tail_timestamp_ms = acks.tail_timestamp
            self._acked_since_sample.add(part)
        self.committer.acknowledged(part, acks)
        return True

    def _refusals(self, part: _Part, acks: Acknowledged) -> None:
        """Records the target refused: send a batch refused as too large again in smaller
        batches, park the partition at any other refused record."""
        for _, msg in acks.refused:
            if (dead := _fatal_error(msg.error())) is not None:
                self._fatal.setdefault("target", dead)  # (error_cb may have named the cause)
                raise KafkaException(dead)
        part.blocked_at = acks.blocked_at
        self.committer.refused()  # exactly-once: the transaction cannot commit any more
        shrunk = withdrawn = False
        for upstream, msg in acks.refused:
            err: Any = msg.error()
            if self._transactional and err.code() in _WITHDRAWN:
                if not withdrawn:  # not refused: withdrawn with its transaction, sent again
                    self._resend(part, upstream)
                    withdrawn = True
                continue
            if err.code() == KafkaError.MSG_SIZE_TOO_LARGE and (
                shrunk or self._smaller_batches(part, msg)
            ):
                if not shrunk:  # the later records (of the same batch) are sent again too
                    self._resend(part, upstream)
                    shrunk = True
                continue
            self._park(
                part,
                upstream,
                f"record {part.key[0]}-{part.key[1]}@{upstream} was refused by "
                f"{self.s.target} ({msg.topic()}): {err.str()}",  # type: ignore[attr-defined]
                from_delivery=True,
            )

    def _client_error(self, side: str, alias: str) -> Any:
        """librdkafka's client-level errors (all brokers down, authentication...) go into the
        flow's status until data flows again."""

        def on_error(err: KafkaError) -> None:
            if err.fatal():  # the client is dead: the loop restarts the clients
                self._fatal[side] = err
            self._degraded.add(side)
            self.stats.set_error(side, f"cluster {alias}: {err.str()}")
            self._client_problem(side, f"cluster {alias}: {err.str()}")
            log.warning("flow %s: %s cluster %s: %s", self.s.name, side, alias, err.str())

        return on_error

    def _client_problem(self, side: str, message: str) -> None:
        """A client's error or warning: into the status if it means the client cannot write; for
        the target producer, towards recreating it if that lasts (:class:`StuckProducer`)."""
        reason = self.stats.client_problem(side, message)
        if reason is not None and side == "target":
            self._stuck.problem(time.monotonic())
            self._stuck_reason = reason

    # -- subscription and assignment -------------------------------------------------------------

    def _sync_subscription(self) -> None:
        if self.catalog.version == self._catalog_version:
            return
        version, topics = self.catalog.snapshot()
        self._catalog_version = version
        grown = [
            rt.name
            for topic, rt in topics.items()
            if (old := self._remote_of.get(topic)) is not None and rt.partitions > old.partitions
        ]
        self._remote_of = topics
        if grown:
            self._refresh_target_metadata(grown)
        for part in self._parts.values():  # partitions may have grown on the target
            rt = topics.get(part.key[0])
            if rt is not None:
                part.remote = rt.name
                if rt.max_message_bytes != part.max_bytes:
                    part.max_bytes = rt.max_message_bytes
                    part.budget = batch_budget(part.max_bytes, self._batch_size)
        if self._direct is not None:
            return  # worker mode: the parent assigns partitions (_sync_assignment)
        names = sorted(topics)
        if names == self._subscribed:
            return
        self._subscribed = names
        if names:
            self._consumer.subscribe(
                names, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
            )
        else:
            self._consumer.unsubscribe()

    def _sync_assignment(self) -> None:
        """Worker mode: apply the parent's latest assignment (dropped partitions are committed
        and unassigned first), then confirm it."""
        assert self._direct is not None
        version, wanted = self._direct.wanted()
        if version == self._direct_version:
            return
        gone = [KafkaTopicPartition(t, p) for (t, p) in sorted(set(self._parts) - wanted)]
        if gone:
            self._on_revoke(self._consumer, gone)
        new = [KafkaTopicPartition(t, p) for (t, p) in sorted(wanted - set(self._parts))]
        if new:
            self._on_assign(self._consumer, new)
        self._direct_version = version
        self._direct.applied(version)

    def _check_static_assignment(self, now: float) -> None:
        """A static member (``group.instance.id``) that rejoins as the group's leader gets its
        previous assignment back without a rebalance, even when its subscription changed
        (librdkafka does not act on the broker's "skip assignment"): partitions of topics it no
        longer subscribes to are held paused (never copied) and the subscription is renewed,
        which makes the group assign again."""
        if self._direct is not None or not self.s.group_instance_id or not self._subscribed:
            return
        if now - self._resubscribed < _RESUBSCRIBE_MIN_S:
            return
        stale = [t for t in self._consumer.assignment() if t.topic not in self._subscribed]
        if not stale:
            return
        self._resubscribed = now
        log.info(
            "flow %s: the group assigned partitions of topics not replicated any more (%s): "
            "subscribing again",
            self.s.name,
            sorted({t.topic for t in stale}),
        )
        self._consumer.unsubscribe()
        self._consumer.subscribe(
            self._subscribed,
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )

    def _refresh_target_metadata(self, topics: list[str]) -> None:
        """Make the producer learn the partition counts of remote topics now (librdkafka
        refreshes them every 5 minutes only, and fails produces to partitions it does not know)."""
        log.info(
            "flow %s: refreshing the partitions of %s on %s", self.s.name, topics, self.s.target
        )
        for topic in topics:
            try:
                self._producer.list_topics(topic, timeout=self.s.admin_timeout)
            except KafkaException as exc:
                log.warning("flow %s: metadata of %s not refreshed: %s", self.s.name, topic, exc)

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        foreign = [
            t for t in partitions if self._direct is None and t.topic not in self._subscribed
        ]
        if foreign:  # a static member's stale assignment: held paused, never copied
            consumer.incremental_assign(foreign)
            consumer.pause(foreign)
            partitions = [t for t in partitions if t.topic in self._subscribed]
        if not partitions:
            consumer.incremental_assign([])
            return
        started = time.monotonic()
        self.positions.refresh(timeout=self.s.admin_timeout)
        log.debug("flow %s: positions read in %.2fs", self.s.name, time.monotonic() - started)
        assign = []
        for ktp in partitions:
            key = (ktp.topic, ktp.partition)
            rt = self._remote_of.get(ktp.topic)
            remote = (
                rt.name
                if rt is not None
                else self.s.policy.format_remote_topic(self.s.source, ktp.topic)
            )
            stats = self.stats.partition(ktp.topic, ktp.partition, remote)
            part = _Part(key, remote, stats, self._ready.append)
            part.max_bytes = rt.max_message_bytes if rt is not None else None
            part.budget = batch_budget(part.max_bytes, self._batch_size)
            last = self.positions.last_replicated(*key)
            part.acked = last
            self._parts[key] = part
            if last is not None:
                start = last + 1
                stats.position = start
            elif self.s.auto_offset_reset == "latest":
                start = self._starts.get(key, OFFSET_END)
            else:
                start = OFFSET_BEGINNING
            self.emitter.forget(part.tp)
            if rt is not None and ktp.partition >= rt.partitions:
                part.parked_until = time.monotonic() + 1.0
                stats.error = (
                    f"waiting for partition {ktp.partition} of {rt.name} on {self.s.target}"
                )
            assign.append(KafkaTopicPartition(ktp.topic, ktp.partition, start))
        log.info("flow %s: assigned %s", self.s.name, [f"{t.topic}-{t.partition}" for t in assign])
        consumer.incremental_assign(assign)
        for ktp in assign:
            part = self._parts[(ktp.topic, ktp.partition)]
            if part.parked_until:
                consumer.pause([KafkaTopicPartition(ktp.topic, ktp.partition)])

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        keys = {(t.topic, t.partition) for t in partitions}
        try:
            self.committer.checkpoint(only=keys)
        finally:
            self._forget(keys)
            consumer.incremental_unassign(partitions)

    def _on_lost(self, consumer: Any, partitions: list[Any]) -> None:
        keys = {(t.topic, t.partition) for t in partitions}
        self.committer.lost()
        self._forget(keys)
        consumer.incremental_unassign(partitions)

    def _forget(self, keys: set[tuple[str, int]]) -> None:
        for key in keys:
            part = self._parts.pop(key, None)
            if part is not None:
                self.emitter.forget(part.tp)
                self._queued.discard(part)
            self.stats.drop_partition(*key)
        self.committer.forget(keys)

    def _rewind(self, part: PartitionProgress) -> None:
        """After an aborted transaction: fetch ``part`` again from its committed position (with
        none yet: from the first record it produced, queued or was blocked at, or, having read
        nothing, from where it is)."""
        assert isinstance(part, _Part)
        if self._consumer is None:
            return  # the clients are closing: the next ones start from the stored positions
        if part.acked is not None:
            self._seek(part, part.acked + 1)
            return
        first = part.first_to_copy_again()
        if first is not None:
            self._seek(part, first)

    # -- failures --------------------------------------------------------------------------------

    def _seek(self, part: _Part, offset: int) -> None:
        """Move the fetch position of a partition (re-assigning it when a plain seek is refused,
        e.g. after an offset-out-of-range error stopped its fetcher)."""
        ktp = KafkaTopicPartition(part.key[0], part.key[1], offset)
        try:
            self._consumer.seek(ktp)
        except KafkaException as exc:
            log.debug("seek %s to %s refused (%s); re-assigning", part.key, offset, exc)
            self._consumer.incremental_unassign([KafkaTopicPartition(part.key[0], part.key[1])])
            self._consumer.incremental_assign([ktp])
            if part.parked_until:
                self._consumer.pause([KafkaTopicPartition(part.key[0], part.key[1])])
        self._drop_pending(part)  # records read before `offset` are read again

    def _park(self, part: _Part, offset: int, reason: str, *, from_delivery: bool = False) -> None:
        """Stop a partition at ``offset`` and retry it later with back-off."""
        delay = part.retries.next_delay()
        if not part.parked_until:
            log.error(
                "flow %s: %s; partition paused, retrying in %.0fs", self.s.name, reason, delay
            )
        part.parked_until = time.monotonic() + delay
        part.stats.error = reason
        ktp = KafkaTopicPartition(part.key[0], part.key[1])
        with contextlib.suppress(KafkaException):
            self._consumer.pause([ktp])
        part.blocked_at = offset if part.blocked_at is None else min(part.blocked_at, offset)
        if self.committer.in_transaction and from_delivery:
            return  # the commit will fail and abort; positions roll back there
        self._seek(part, part.blocked_at)

    def _retry_parked(self, now: float) -> None:
        for part in self._parts.values():
            if part.parked_until and now >= part.parked_until:
                if part.outstanding:
                    continue  # wait for outstanding delivery reports of this partition
                rt = self._remote_of.get(part.key[0])
                if rt is not None and part.key[1] >= rt.partitions:
                    part.parked_until = now + 1.0
                    continue
                part.parked_until = 0.0
                if part.blocked_at is not None:
                    self._seek(part, part.blocked_at)
                part.probe_at = part.blocked_at
                part.blocked_at = None
                part.stats.error = None
                self._consumer.resume([KafkaTopicPartition(part.key[0], part.key[1])])

    def _on_consume_error(self, msg: Any, err: KafkaError) -> None:
        code = err.code()
        if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
            self._on_out_of_range(msg.topic(), msg.partition(), err)
            return
        if err.fatal():
            self._fatal["source"] = err
            raise KafkaException(err)
        if code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC):
            log.warning(
                "flow %s: source topic %s vanished: %s", self.s.name, msg.topic(), err.str()
            )
            return
        self.stats.set_error("source", f"{self.s.source}: {err.str()}")
        log.warning("flow %s: source consumer error: %s", self.s.name, err.str())

    def _on_out_of_range(self, topic: str | None, partition: int | None, err: KafkaError) -> None:
        if topic is None or partition is None:
            raise KafkaException(err)
        part = self._parts.get((topic, partition))
        if part is None:
            return
        low, high = self._consumer.get_watermark_offsets(
            KafkaTopicPartition(topic, partition), timeout=self.s.admin_timeout
        )
        expected = 0 if part.acked is None else part.acked + 1
        if expected < low:
            lost = (expected, low - 1)
            what = f"retention removed offsets {lost[0]}..{lost[1]} before they were replicated"
            resume = low
        else:
            lost = (high, expected - 1)
            what = (
                f"the log ends at {high} but the stored position is {expected} "
                "(topic deleted and recreated, or truncated)"
            )
            resume = low
        count = max(lost[1] - lost[0] + 1, 0)
        message = (
            f"data loss on {self.s.source} {topic}-{partition}: {what}; "
            f"{count} record(s) cannot be replicated"
        )
        if self.s.data_loss_action == "fail":
            raise DataLossError(message + " (flow stopped; set data.loss.action=continue to skip)")
        log.error("%s; continuing at offset %d as data.loss.action=continue", message, resume)
        part.stats.lost_records += count
        part.stats.error = message
        self.emitter.reset(part.tp)  # the next record starts a new chain of offset syncs
        self._seek(part, resume)
        part.acked = resume - 1 if resume > 0 else None
        self.committer.moved(part.key)

    # -- offset syncs and lag ----------------------------------------------------------------------

    def _send_offset_syncs(self) -> None:
        if self._syncs is not None:
            self._syncs.send()

    def _sync_producer_poll(self) -> None:
        if self._syncs is not None:
            self._syncs.poll()

    def _sync_written(self) -> None:
        self.stats.offset_syncs_emitted += 1

    def _sample_latency(self) -> None:
        """replication-latency-ms: now minus the source timestamp of the newest acknowledged
        record, sampled per partition (at most every 100 ms) instead of per record. Only the
        partitions acknowledged since the last sample are visited: the cost follows the active
        partitions, not the assigned ones."""
        now_ms = time.time() * 1000.0
        acked, self._acked_since_sample = self._acked_since_sample, set()
        for part in acked:
            if self._parts.get(part.key) is not part:
                continue  # revoked or lost meanwhile
            st = part.stats
            ts = st.tail_timestamp_ms
            if ts is not None and ts != part.sampled_ts:
                part.sampled_ts = ts
                st.latency.record(now_ms - ts)

    def _refresh_end_offsets(self) -> None:
        """Update lag inputs: source end offsets (from fetch responses, no extra requests) and
        the consumer's position for partitions with nothing in flight (it moves past
        transaction markers and compacted gaps, which no record acknowledgement covers)."""
        parts = [p for p in self._parts.values() if not p.parked_until and p.blocked_at is None]
        idle = [p for p in parts if not p.outstanding and not p.pending]
        try:
            consumed = self._consumer.position([KafkaTopicPartition(*p.key) for p in idle])
        except KafkaException:
            consumed = []
        for ktp in consumed:
            part = self._parts.get((ktp.topic, ktp.partition))
            committed = not self.committer.in_transaction
            if (
                part is not None
                and committed
                and ktp.offset >= 0
                and (part.stats.position is None or ktp.offset > part.stats.position)
            ):
                part.stats.position = ktp.offset
        for part in parts:
            try:
                low, high = self._consumer.get_watermark_offsets(
                    KafkaTopicPartition(part.key[0], part.key[1]), cached=True
                )
            except KafkaException:
                continue
            if high >= 0:
                part.stats.end_offset = high
                if part.acked is None and part.stats.position is None and low == high:
                    part.stats.position = high  # an empty partition: nothing to replicate
