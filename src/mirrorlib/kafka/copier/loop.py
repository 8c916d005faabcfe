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
* **Loss is never silent.** A position below the source log's start (retention) is reported
  with the lost offset range; ``data.loss.action`` chooses between failing the flow (default)
  and continuing with the gap counted in ``lost-records``. A position past the end of the same
  log (truncated) resumes at the new end, with a warning. A topic deleted and created again (a
  new topic id, source or remote) is a new incarnation, copied from its first offset with a
  warning (:mod:`mirrorlib.core.incarnations`; :mod:`mirrorlib.kafka.copier.assignment`). A record the
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
The copier owns its clients (opened, closed, recreated when dead or stuck) and the consume ->
produce loop with its per-record hot path, pacing and acknowledgements. How it gets its
partitions (group subscription or direct assignment, start offsets) is
:mod:`mirrorlib.kafka.copier.assignment`; what it does with refused or too large records and lost
offsets (parking, retrying, resending, data loss) is :mod:`mirrorlib.kafka.copier.parking`; both work on
the copier's partition map through a :class:`~mirrorlib.kafka.copier.parts.CopierContext`. What a
delivery report means is :mod:`mirrorlib.core.acks` (per-partition in-flight records, matched
with the reports a run at a time; no Kafka client); when acknowledged records become stored
positions (and, for exactly-once, committed transactions) is a
:class:`~mirrorlib.kafka.copier.commit.Committer` (:mod:`mirrorlib.kafka.copier.commit`); the batch sizing of
paced partitions is :mod:`mirrorlib.core.pacing`. The loop calls those once per batch or per
round, never per record.

A flow with record transforms (``transforms``; :mod:`mirrorlib.core.transforms`) passes each
consumed batch through them first (:mod:`mirrorlib.kafka.transformed`), then through the same
hot loop; a flow without them calls nothing more per record.

Partitions are shared between processes running the same flow through a consumer group on the
source cluster (``mirrorlib-<A>-><B>``, cooperative-sticky assignment); positions come from the
target's offsets topic, never from that group, which commits nothing. The copier is a *static*
member of that group (``group.instance.id`` from ``node.id``, by default the host name): a
process killed and restarted gets its partitions back at once instead of after the session
timeout, and a clean stop leaves the group (:mod:`mirrorlib.kafka.static_member`), so the other
processes get its partitions at once.

Worker mode (``tasks.max`` > 1)
-------------------------------
A copier worker process (:mod:`mirrorlib.runtime.workers.child`) runs a copier with a
:class:`~mirrorlib.kafka.copier.assignment.DirectAssignment`: no group, ``assign`` of the partitions its
parent gives it (incrementally), each resumed from its stored position; and a
``transactional_id`` of its own slot: whatever the delivery mode, records and positions go
through the exactly-once :class:`~mirrorlib.kafka.copier.commit.TransactionCommitter` (the fence of the
slot), and a producer that dies (fenced by a newer process of the slot, or any fatal error)
ends the copier (:attr:`Copier.fenced`) instead of being recreated with the same id. Its offset
syncs go to a ``sync_sink`` (the parent writes them).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mirrorlib.core.catalog import TopicCatalog
from mirrorlib.core.config.clients import replication_isolation
from mirrorlib.core.counters import StatsRegistry
from mirrorlib.core.pacing import batch_length, size_check_above
from mirrorlib.core.retry import Backoff
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.stalls import StuckProducer
from mirrorlib.core.status import FlowState
from mirrorlib.core.syncs import OffsetSyncEmitter
from mirrorlib.errors import DataLossError
from mirrorlib.kafka import client_conf, client_log
from mirrorlib.kafka.copier.assignment import Assignment, DirectAssignment
from mirrorlib.kafka.copier.commit import Committer, TransactionCommitter, committer_for
from mirrorlib.kafka.copier.parking import Parking
from mirrorlib.kafka.copier.parts import CopierContext, Part
from mirrorlib.kafka.offset_syncs import OffsetSyncWriter
from mirrorlib.kafka.positions import PositionStore
from mirrorlib.kafka.produce import fatal_error, produce_waiting
from mirrorlib.kafka.static_member import fenced_reason, member_fenced
from mirrorlib.kafka.transformed import transform_batch

__all__ = ["Copier", "DataLossError", "DirectAssignment", "SyncSink"]

log = logging.getLogger("mirrorlib.kafka.copier")  # the copier logs as one (assignment, parking)

#: back-off (seconds) of a copier restart (a parked partition's: PartitionProgress.retries)
_BACKOFF_BASE_S, _BACKOFF_CAP_S = 1.0, 60.0
# a record size no max.message.bytes check applies to (the remote topic's limit is unknown)
_NO_LIMIT = 1 << 62
# librdkafka's periodic metadata refresh (topic.metadata.refresh.interval.ms default), seconds
_METADATA_REFRESH_MAX_S = 300.0
#: Seconds a refresh of the lag inputs may spend asking for last stable offsets (below).
_STABLE_OFFSETS_BUDGET_S = 0.25


def _unnamed_fatal(exc: BaseException) -> bool:
    """``exc`` carries librdkafka's generic fatal error (``_FATAL``), which names no cause."""
    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    return isinstance(err, KafkaError) and err.code() == KafkaError._FATAL


class SyncSink(Protocol):
    """Where a copier's due offset syncs go (by default an
    :class:`~mirrorlib.kafka.offset_syncs.OffsetSyncWriter`)."""

    def send(self) -> None: ...

    def poll(self) -> None: ...

    def flush(self, timeout: float) -> int: ...


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
        # worker mode: this id, transactions in any delivery mode, a dead producer ends the copier
        self._transactional_id = transactional_id
        self._transactional = transactional_id is not None or settings.exactly_once_enabled
        self._sync_sink = sync_sink
        self.fenced: str | None = None
        """Why the copier ended because its (worker) producer died or was fenced."""
        self.final_flush_failed: str | None = None
        """Why the last flush of positions (exactly-once: the commit) at a stop failed."""
        self.catalog = catalog
        self.stats = stats
        self.positions = positions
        # transactional: a sync after each commit marker too (exact translation across them)
        self.emitter = OffsetSyncEmitter(
            offset_lag_max=settings.offset_lag_max, sync_downstream_gaps=self._transactional
        )
        # shared with the assignment and the parking; the loop uses its containers directly
        ctx = self._ctx = CopierContext(
            settings, stats, self.emitter, transactional=self._transactional
        )
        self._parts = ctx.parts
        self._ready = ctx.ready
        self._queued = ctx.queued
        self._fatal = ctx.fatal
        self._parking = Parking(ctx, refresh_metadata=self._refresh_target_metadata)
        self._assignment = Assignment(
            ctx, catalog, positions, assignment, refresh_metadata=self._refresh_target_metadata
        )
        self._parking.recheck = lambda topic: self._assignment.check_incarnations(
            time.monotonic(), topics={topic}
        )
        committer = TransactionCommitter if transactional_id else committer_for(settings)
        self.committer: Committer = committer(
            settings,
            positions,
            self.emitter,
            self._parts,
            send_syncs=self._send_offset_syncs,
            drain_acks=self._drain_acks,
            rewind=self._parking.rewind,
        )
        ctx.committer = self.committer
        self._last_watermarks = 0.0
        self._producer: Any = None
        self._syncs: SyncSink | None = None
        self.failed: str | None = None
        self._degraded: set[str] = set()
        self._stuck = StuckProducer()  # the target producer: recreated when stuck
        self._stuck_reason = ""  # its last problem
        self._last_latency_sample = 0.0
        self._acked_since_sample: set[Part] = set()  # latency sampling visits only these
        self._stopping = threading.Event()  # the stop request of `run`
        self._reads_committed = True  # the source consumer's isolation level (set by _open)
        # a consumed batch goes to the hot loop as it is, unless the flow has record transforms
        self._copy_batch: Callable[[list[Any]], None] = (
            self._copy if settings.record_transforms is None else self._copy_transformed
        )

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
        cconf["isolation.level"] = replication_isolation(  # read_committed unless told not to
            cconf.get("isolation.level"), exactly_once=s.exactly_once_enabled
        )
        self._reads_committed = cconf["isolation.level"] == "read_committed"
        pconf = s.record_producer(
            linger_ms=5,
            error_cb=self._client_error("target", s.target),
            logger=client_log(lambda line: self._client_problem("target", line)),
        )
        self._ctx.batch_size = int(pconf["batch.size"])
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
        self._ctx.consumer = Consumer(client_conf(cconf))

    def _close(self, graceful: bool) -> None:
        self._assignment.remember_starts()
        ctx = self._ctx
        consumer, ctx.consumer = ctx.consumer, None
        try:
            if graceful and self.failed is None:
                self.committer.checkpoint(final=True)
        except Exception as exc:  # closing must not hide the original problem
            self.final_flush_failed = str(exc)  # (a worker's transaction may be left open)
            log.warning("flow %s: final position flush failed: %s", self.s.name, exc)
        if consumer is not None:
            try:
                ctx.consumer = consumer
                if graceful and self.failed is None:
                    try:
                        self._assignment.leave_group(min(self.s.admin_timeout, 10.0))
                    except Exception as exc:  # closing goes on; the group's session ends it
                        log.warning("flow %s: leaving the flow's group failed: %s",
                                    self.s.name, exc)  # fmt: skip
                consumer.close()  # revokes partitions (callbacks run here)
                self._assignment.raise_callback_error()
            except Exception as exc:
                log.warning("flow %s: closing the source consumer failed: %s", self.s.name, exc)
            finally:
                ctx.consumer = None
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
        self._assignment.reset()

    # -- main loop -------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        self._stopping = stop
        try:
            self._run(stop)
        finally:
            self.stats.loop_at = None
            self.positions.close()

    def _run(self, stop: threading.Event) -> None:
        backoff = Backoff(base=_BACKOFF_BASE_S, cap=_BACKOFF_CAP_S)
        while not stop.is_set() and self.failed is None:
            try:
                self.stats.loop_at = time.monotonic()  # (opening may block: see loop_stall)
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
                fenced = self._fatal.get("source")
                if fenced is not None and member_fenced(fenced):
                    self._member_fenced(fenced)
                    self._close(graceful=False)
                    return
                delay = backoff.next_delay()
                if "target" not in self._fatal and _unnamed_fatal(exc):
                    self._serve_target_errors()  # (the fatal error's cause, for the status)
                dead = self._fatal.get("target")
                if dead is None and "source" not in self._fatal:
                    dead = fatal_error(exc)  # raised by a producer call (poll, flush, commit)
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
                self.stats.loop_at = None  # waiting to retry (the error says so), not blocked
                backoff.wait(stop)

    def _serve_target_errors(self) -> None:
        """A producer call raised librdkafka's generic fatal error ("Local: Fatal error") before
        the error callback was served with its cause (say ``OUT_OF_ORDER_SEQUENCE_NUMBER``):
        serve it now, so the status and the log name the cause."""
        if self._producer is not None:
            with contextlib.suppress(Exception):
                self._producer.poll(0)

    def _member_fenced(self, err: KafkaError) -> None:
        """Another process joined the flow's group as this node (the same ``group.instance.id``):
        a second process started with the same ``node.id`` (by default the host name), or this
        process's own replacement while this one was paused. Either way this process must not
        copy the flow any more: the flow fails, saying why
        (:func:`~mirrorlib.kafka.static_member.fenced_reason`)."""
        message = fenced_reason(self.s, err)
        self.failed = message
        self.stats.set_error("copier", message)
        self.stats.state = FlowState.FAILED
        log.error("flow %s stopped: %s", self.s.name, message)

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
        consumer = self._ctx.consumer
        producer = self._producer
        batch = s.consume_batch
        committer = self.committer
        assignment, parking = self._assignment, self._parking
        while not stop.is_set():
            self.stats.loop_at = time.monotonic()  # came round (StatsRegistry.loop_stall)
            assignment.sync_subscription()
            if assignment.direct is not None:
                assignment.sync_assignment()
            if assignment.idle():
                stop.wait(0.2)
                continue
            queued = bool(self._queued)  # paced partitions wait for acknowledgements: no blocking
            # Block only until the first record, then take what is already fetched, backlog or
            # not: consume(n, t) waits until n records arrive or t passes, and while it waited
            # the records it held were neither produced nor their delivery reports served
            # (docs/benchmarks.md, "Where the copier waited").
            first = consumer.poll(0.0 if queued else 0.1)
            msgs = [first, *consumer.consume(batch - 1, timeout=0)] if first is not None else []
            assignment.raise_callback_error()  # (a rebalance served by the poll failed)
            if msgs and "source" in self._degraded:
                self._degraded.discard("source")
                self.stats.set_error("source", None)
            if msgs:
                committer.begin()
                self._copy_batch(msgs)
            producer.poll(0.01 if queued and not msgs else 0)
            if self._fatal:  # reported to error_cb: restart the clients
                raise KafkaException(next(iter(self._fatal.values())))
            self._drain_acks()
            if self._queued:
                self._send_queued()
            now = time.monotonic()
            caught_up = not msgs and not queued
            if msgs and not queued and len(msgs) < batch and committer.wants_caught_up(now):
                caught_up = self._read_to_end(committer.transaction_partitions())
            committer.tick(now, caught_up=caught_up)
            parking.retry_parked(now)
            self._send_offset_syncs()
            self._sync_producer_poll()
            if now - self._last_latency_sample >= 0.1:
                self._sample_latency()
                self._last_latency_sample = now
            if now - self._last_watermarks >= 2.0:
                assignment.check_static_assignment(now)
                if assignment.check_incarnations(now):
                    continue  # (a re-created topic's partitions were assigned again)
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
        consume_error = self._parking.consume_error  # (failure paths, bound once per batch)
        too_large, refused = self._parking.too_large, self._parking.refused
        part: Part | None = None
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
        for msg in msgs:
            err = msg.error()
            if err is not None:
                if part is not None and last_off >= 0:  # (before the error moves positions)
                    self._end_run(part, last_off, last_ts, nbytes)
                part, last_off, nbytes, cur_partition = None, -1, 0, -1
                consume_error(msg, err)
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
                    half_max = size_check_above(part.max_bytes)
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
            if value is not None and len(value) > half_max and too_large(part, msg):
                skip = True  # parked: the rest of the run is read again after the retry
                continue
            offset = msg.offset()
            try:
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
                except BufferError:  # queue full: serve delivery reports, then retry
                    if not self._produce_waiting(part, msg, ts):
                        break  # stopping: this record and the rest are copied after a restart
            except KafkaException as exc:
                refused(part, offset, exc)
                skip = bool(part.parked_until)
                continue
            sent_append(offset)
            last_off = offset
            last_ts = ts
            if value is not None:
                nbytes += len(value)
        if part is not None and last_off >= 0:
            self._end_run(part, last_off, last_ts, nbytes)

    def _copy_transformed(self, msgs: list[Any]) -> None:
        """A flow with record transforms: the batch after them goes through the same loop
        (:mod:`mirrorlib.kafka.transformed`); a partition a transform failed on is parked at
        that record, after the records before it were produced."""
        chain = self.s.record_transforms
        assert chain is not None
        parts = self._parts

        def remote_of(topic: str, partition: int, offset: int) -> str | None:
            del offset
            part = parts.get((topic, partition))
            return None if part is None or part.parked_until else part.remote

        batch, failures = transform_batch(msgs, chain, remote_of)
        self._copy(batch)
        for topic, partition, offset, reason in failures:
            part = parts.get((topic, partition))
            if part is None:
                continue  # revoked meanwhile
            if part.parked_until and part.blocked_at is not None and part.blocked_at <= offset:
                continue  # parked at an earlier record by the loop: retried from there
            self._parking.park(part, offset, f"record transforms of {self.s.name}: {reason}")

    def _end_run(self, part: Part, last_offset: int, last_ts: int, nbytes: int) -> None:
        """Bookkeeping once per produced run of one partition."""
        part.end_run(last_offset, last_ts)
        st = part.stats
        st.byte_count += nbytes
        if last_ts > 0:  # record-age-ms, sampled once per run
            st.age.record(time.time() * 1000.0 - last_ts)
        if self._transactional:
            part.txn_last = last_offset

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
                    self._ctx.consumer.pause([KafkaTopicPartition(*part.key)])
                    part.throttled = True
            else:
                self._parking.drop_pending(part)

    def _send_batch(self, part: Part) -> None:
        """Produce records of ``part.pending`` up to the partition's budget (at least one):
        with nothing else of the partition queued, librdkafka's batch is at most that."""
        pending = part.pending
        nbytes = last_ts = 0
        last_off = -1
        self.committer.begin()
        for _ in range(batch_length(pending, part.budget)):
            msg = pending[0]
            if part.max_bytes is not None and self._parking.too_large(part, msg):
                return  # parked (and seeked back: `pending` is dropped)
            ts = msg.timestamp()[1]
            offset = msg.offset()
            try:
                if not self._produce_waiting(part, msg, ts):
                    break  # stopping: the rest is copied again after a restart
            except KafkaException as exc:
                self._parking.refused(part, offset, exc)
                return
            pending.popleft()
            part.produced(offset)
            last_off, last_ts = offset, ts
            nbytes += len(msg.value() or b"")
        if last_off >= 0:
            self._end_run(part, last_off, last_ts, nbytes)

    def _produce_waiting(self, part: Part, msg: Any, ts: int) -> bool:
        """Produce ``msg`` (with back-pressure); False when the queue is full and a stop was
        requested."""
        producer = self._producer
        return produce_waiting(
            producer.produce, producer.poll, part.remote, part.key[1], msg, ts, part.on_delivery,
            self._stopping,
        )  # fmt: skip

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
                succeeded = self._acked(cast(Part, part)) or succeeded
        if succeeded:
            self._stuck.moved()
        if succeeded and "target" in self._degraded:
            self._degraded.discard("target")
            self.stats.set_error("target", None)

    def _acked(self, part: Part) -> bool:
        """Process ``part``'s delivery reports; returns whether any record succeeded."""
        acks = part.take(part.blocked_at)
        if acks is None or self._parts.get(part.key) is not part:
            return False  # nothing to match, or revoked or lost meanwhile: not ours
        if acks.refused:
            self._parking.refusals(part, acks)
        if not acks.count:
            return False
        st = part.stats  # (the committer counts the records: exactly-once, when they commit)
        if acks.tail_timestamp > 0:  # replication-latency-ms is sampled from it in the loop
            st.tail_timestamp_ms = acks.tail_timestamp
            self._acked_since_sample.add(part)
        self.committer.acknowledged(part, acks)
        return True

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

    def _read_to_end(self, keys: list[tuple[str, int]]) -> bool:
        """Whether the consumer's position in every partition of ``keys`` reached the end
        offset its last fetch response carried (both kept by librdkafka: no request; the
        position moves past transaction markers and compacted gaps, which the last copied
        record does not). While records keep arriving no round consumes nothing, yet the copier
        has caught up: its transaction commits then instead of when it is
        ``transaction.boundary.interval.ms`` old."""
        if not keys:
            return False
        consumer = self._ctx.consumer
        try:
            positions = consumer.position([KafkaTopicPartition(*key) for key in keys])
            for ktp in positions:
                _, high = consumer.get_watermark_offsets(ktp, cached=True)
                if ktp.offset < 0 or high < 0 or ktp.offset < high:
                    return False
        except KafkaException:
            return False
        return True

    def _refresh_end_offsets(self) -> None:
        """Update lag inputs: source end offsets (from fetch responses, no extra requests) and
        the consumer's position for partitions with nothing in flight (it moves past
        transaction markers and compacted gaps, which no record acknowledgement covers)."""
        consumer = self._ctx.consumer
        parts = [p for p in self._parts.values() if not p.parked_until and p.blocked_at is None]
        idle = [p for p in parts if not p.outstanding and not p.pending]
        try:
            consumed = consumer.position([KafkaTopicPartition(*p.key) for p in idle])
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
        # Fetch responses keep the high watermark; a read_committed reader ends at the last
        # stable offset. An idle partition whose position stays below the high watermark is
        # most likely behind a source transaction still open: its records are not lag (a
        # producer that keeps transactions open for minutes, as Flink does between checkpoints,
        # would make the flow look stalled). Ask for its last stable offset (a request), within
        # a time budget per refresh.
        stable = {(k.topic, k.partition): k.offset for k in consumed if k.offset >= 0}
        budget = time.monotonic() + _STABLE_OFFSETS_BUDGET_S
        for part in parts:
            ktp = KafkaTopicPartition(part.key[0], part.key[1])
            try:
                low, high = consumer.get_watermark_offsets(ktp, cached=True)
            except KafkaException:
                continue
            at = stable.get(part.key)
            behind = self._reads_committed and at is not None and at < high
            if behind and time.monotonic() < budget:
                with contextlib.suppress(KafkaException):
                    high = min(high, consumer.get_watermark_offsets(ktp, timeout=1.0)[1])
            if high >= 0:
                part.stats.end_offset = high
                if part.acked is None and part.stats.position is None and low == high:
                    part.stats.position = high  # an empty partition: nothing to replicate
