"""The Spark data plane of one flow: a streaming query whose batches are copied by tasks.

Spark drives the batches with a query on its built-in ``rate-micro-batch`` source (a row per
batch, never read); its ``foreachBatch`` function (:class:`CopyBatches`, in the driver's
Python process) plans the batch's offset ranges (:mod:`mirrorlib.spark.planner`, kept in the
flow's checkpoint location before anything is copied), merges what parked partitions still owe,
and packs them by pending bytes into copy tasks
(``SparkContext.parallelize(...).mapPartitions``) that consume and produce the records
themselves (:func:`mirrorlib.kafka.ranges.executor.copy_ranges`) and return only small results. Spark
schedules and retries the tasks; the batch is committed in the checkpoint once the function
returns, so a batch cut short (driver or executor killed, task failed) is copied again from the
same plan (at-least-once).

A record the target refuses parks its partition instead of failing the query: the range it
still owes is kept by the driver, written to ``<flow checkpoint>/mirrorlib-parked/<batch>``
before the batch commits (so a driver restart owes it too), and copied again after a back-off.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import json
import logging
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from mirrorlib.core import batches
from mirrorlib.core.acks import PARKING_BACKOFF
from mirrorlib.core.batches import TP, Plan, Range
from mirrorlib.core.config import FlowConfig
from mirrorlib.core.counters import StatsRegistry
from mirrorlib.core.incarnations import Incarnation
from mirrorlib.core.retry import Backoff
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.status import FlowState
from mirrorlib.core.worker_reports import SlotInfo, WorkerReport, slot_reports
from mirrorlib.errors import (
    KafkaRequestError,
    MirrorError,
    RecordRefusedError,
)
from mirrorlib.kafka.ranges.driver import SourceView, position_producer, store_positions
from mirrorlib.kafka.ranges.executor import CopyResult, PartitionResult, copy_ranges
from mirrorlib.runtime.workers.status import WorkerReporter, copier_slot, partition_loads
from mirrorlib.spark.checkpoint import CheckpointFiles, refuse_earlier_checkpoint
from mirrorlib.spark.planner import BatchPlanner, PlanLog

if TYPE_CHECKING:
    from mirrorlib.runtime.flow import FlowRunner

__all__ = ["CopyBatches", "ParkedLog", "StreamingQuery", "rehearse"]

log = logging.getLogger(__name__)

#: weight of the newest batch in a partition's average record size
_SIZE_WEIGHT = 0.3
#: seconds between two readings of the source's end offsets by the driver (for the lag)
MEASURE_INTERVAL_S = 1.0

#: Refusals in a row after which a backfill gives up on a parked partition and fails. Parking
#: retries with the embedded engine's back-off (1 s, growing to at most 60 s); a continuous
#: query, like the embedded engine, keeps retrying.
BACKFILL_REFUSALS = 5
#: the flow status's error component for offset syncs a batch's tasks could not write
SYNCS_ERROR = "offset-syncs"
#: the flow status's error component for positions the driver could not store
POSITIONS_ERROR = "positions"
#: Storing positions that fails for every batch with positions to store, for at least
#: :data:`POSITION_FAILURE_S` seconds and :data:`POSITION_FAILURES` batches in a row, fails the
#: flow (until then it shows as the flow's ``positions`` error, and the positions not stored
#: are stored with the next batch's).
POSITION_FAILURE_S = 300.0
POSITION_FAILURES = 3


def flow_directory(checkpoint_location: str, flow: FlowConfig | FlowSettings) -> str:
    """The Spark checkpoint directory of one flow under ``checkpoint_location``."""
    return f"{checkpoint_location.rstrip('/')}/{flow.source}-to-{flow.target}"


def _load_copier(_: Iterable[int]) -> Iterator[int]:
    """The body of a warm-up task: import the copy task's modules in the Python worker."""
    import mirrorlib.kafka.ranges.executor  # noqa: F401

    yield 0


def start_workers(spark: Any, tasks: int) -> threading.Thread:
    """Start the executors' Python workers in the background (one task per core, importing the
    copy task's modules) while the driver prepares the flows and plans the first batches: the
    first copy job then finds them running (``spark.python.worker.reuse``, Spark's default,
    keeps them)."""

    def run() -> None:
        sc = spark.sparkContext
        started = time.monotonic()
        try:
            sc.setJobDescription("mirrorlib: start the Python workers")
            sc.parallelize(range(tasks), tasks).mapPartitions(_load_copier).collect()
            log.info("Python workers started in %.2fs", time.monotonic() - started)
        except Exception as exc:  # only a head start: the copy job starts them anyway
            log.debug("starting the Python workers: %s", exc)
        finally:
            with contextlib.suppress(Exception):
                sc.setJobDescription(None)

    thread = threading.Thread(target=run, name="mirrorlib-spark-workers", daemon=True)
    thread.start()
    return thread


def rehearse(spark: Any, directory: str, *, batches: int = 2, timeout: float = 120.0) -> None:
    """Run the engine's query shape on no data, loading the classes a job loads (see
    :func:`mirrorlib.spark.session.prepare_archive`): the executors' Python workers
    (:func:`start_workers`), then a ``rate-micro-batch`` query, checkpointed in ``directory``,
    whose ``foreachBatch`` runs a Python job on the executors, for ``batches`` batches."""
    sc = spark.sparkContext
    tasks = max(int(sc.defaultParallelism), 1)
    start_workers(spark, tasks).join(timeout)
    done = threading.Event()
    seen: list[int] = []

    def batch(_frame: Any, batch_id: int) -> None:
        sc.parallelize(range(tasks), tasks).mapPartitions(_load_copier).collect()
        seen.append(batch_id)
        if len(seen) >= batches:
            done.set()

    query = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", 1)
        .option("numPartitions", 1)
        .load()
        .writeStream.foreachBatch(batch)
        .option("checkpointLocation", directory)
        .queryName("mirrorlib rehearsal")
        .trigger(processingTime="0 seconds")
        .start()
    )
    try:
        if not done.wait(timeout):
            raise MirrorError(f"Spark ran {len(seen)} of {batches} batches in {timeout:.0f}s")
    finally:
        query.stop()


def _first_records(results: Sequence[CopyResult]) -> str:
    """The tasks' waits for their first record, for the batch's log line: ``0.02-0.41s``."""
    waits = sorted(r.first_record_s for r in results if r.first_record_s is not None)
    if not waits:
        return "-"
    if len(waits) == 1 or waits[0] == waits[-1]:
        return f"{waits[0]:.2f}s"
    return f"{waits[0]:.2f}-{waits[-1]:.2f}s"


def copy_task(
    settings: FlowSettings,
    max_bytes: Mapping[str, int | None],
    budgets: Mapping[TP, int],
    groups: Iterable[list[Range]],
) -> Iterator[CopyResult]:
    """The body of a copy task (on an executor): copy each group of ranges."""
    for work in groups:
        yield copy_ranges(settings, work, max_bytes=max_bytes, budgets=budgets)


class ParkedLog:
    """What parked partitions owe, after each batch, in the flow's checkpoint directory:
    ``mirrorlib-parked/<batch id>``, JSON. The state before batch ``N`` is the newest file with
    an id below ``N`` (a file of a batch that did not commit is ignored when Spark runs that
    batch again).

    :meth:`save` is called after every batch and writes a file only when the state differs
    from the newest one this process wrote, and always at its first batch (a replay: the file
    of the killed run of that batch may hold another state). It keeps the newest file below the
    batch it writes: Spark may replay that batch, whose state before is that file, however many
    batches ago it was written."""

    FOLDER = "mirrorlib-parked"

    def __init__(self, files: CheckpointFiles) -> None:
        self.files = files
        self._written: dict[TP, Range] | None = None  # the newest state this process wrote

    def load(self, batch_id: int) -> dict[TP, Range]:
        ids = [i for i in self.files.ids(self.FOLDER) if i < batch_id]
        raw = self.files.read(f"{self.FOLDER}/{ids[-1]}") if ids else None
        if raw is None:
            return {}
        return batches.decode_owed(json.loads(raw.decode("utf-8")))

    def save(self, batch_id: int, owed: Mapping[TP, Range]) -> None:
        """Keep ``owed`` as the state after batch ``batch_id`` (see the class)."""
        if self._written is not None and dict(owed) == self._written:
            return
        data = json.dumps(batches.encode_owed(owed)).encode("utf-8")
        self.files.write(f"{self.FOLDER}/{batch_id}", data)
        self._written = dict(owed)
        ids = self.files.ids(self.FOLDER)
        below = [i for i in ids if i < batch_id]
        keep = below[-1] if below else batch_id  # the state before this batch, for its replay
        for old in ids:
            if old < keep:
                self.files.delete(f"{self.FOLDER}/{old}")


class CopyBatches:
    """The ``foreachBatch`` function of one flow's query (runs in the driver process)."""

    def __init__(
        self,
        flow: FlowRunner[Any],
        spark: Any,
        tasks: int,
        files: CheckpointFiles,
        planner: BatchPlanner,
        *,
        backfill: bool = False,
    ) -> None:
        self.flow = flow
        self.s = flow.settings
        self.spark = spark
        self.tasks = tasks
        self.files = files
        self.planner = planner
        self.plan_log = PlanLog(files)
        self.backfill = backfill
        self.finished = threading.Event()
        """Set by a backfill's first batch with nothing left to copy (the query is stopped)."""
        self.plans: collections.deque[tuple[int, Plan]] = collections.deque(maxlen=100)
        """The plans of the last batches (batch id, plan), oldest first."""
        self.parked_log = ParkedLog(files)
        self._view: SourceView | None = None  # the source's end offsets, for the status
        self._measure_at = 0.0
        self.owed: dict[TP, Range] | None = None  # read from the parked log at the first batch
        self.retry_at: dict[TP, float] = {}
        self.backoffs: dict[TP, Backoff] = {}
        self.refused: dict[TP, str | None] = {}  # why each partition parked last
        self.budgets: dict[TP, int] = {}
        self.sizes: dict[TP, float] = {}
        self.records = 0
        self.batches = 0
        self.unstored: dict[TP, int] = {}  # positions a failed store left, for the next one
        self._unstored_ids: dict[str, Incarnation] = {}  # the topic IDs they were copied with
        self.store_failures = 0  # batches in a row whose positions could not be stored
        self._failing_since = 0.0  # (monotonic) the first of them
        position_producer(self.s)  # connects while the first batch copies

    def _due(self, tp: TP) -> bool:
        return self.retry_at.get(tp, 0.0) <= time.monotonic()

    def __call__(self, df: Any, batch_id: int) -> None:
        started = time.monotonic()
        if not self.batches:
            log.info("flow %s: start-up: first batch (%d) called", self.s.name, batch_id)
        plan = self._plan(batch_id)
        planned, end = plan.ranges, dict(plan.end)
        listed = time.monotonic()
        if self.owed is None:
            self.owed = self.parked_log.load(batch_id)
            if self.owed:
                log.warning(
                    "flow %s: parked partitions owe %s", self.s.name, sorted(self.owed.values())
                )
        work, owed = batches.settle(planned, self.owed, self._due)
        results = self._copy(work, batch_id) if work else []
        copied = time.monotonic()
        for res in results:
            for part in res.partitions:
                self._account(part, owed)
        self.parked_log.save(batch_id, owed)  # (written only when it changed)
        self.owed = owed
        self._count_syncs(results, batch_id)
        self._store_positions(results, batch_id)
        stored = time.monotonic()
        if end:
            self._measure(end, owed)
        records = sum(r.records for r in results)
        self.records += records
        self.batches += 1
        if self.backfill and not planned:
            self._backfill_left(owed)
        if work:
            log.info(
                "flow %s: batch %d: %d records in %d task(s), %d offset syncs, %.2fs "
                "(ranges %.2fs; copy job %.2fs: slowest task %.2fs, first record after %s; "
                "positions %.2fs)",
                self.s.name,
                batch_id,
                records,
                len(results),
                sum(r.offset_syncs for r in results),
                time.monotonic() - started,
                listed - started,
                copied - listed,
                max((r.seconds for r in results), default=0.0),
                _first_records(results),
                stored - copied,
            )

    def _count_syncs(self, results: Sequence[CopyResult], batch_id: int) -> None:
        """Count the offset syncs the batch's tasks wrote in the flow's status; syncs a task
        could not write show as the flow's ``offset-syncs`` error until a later batch writes
        syncs with none refused. A sync not written leaves checkpoints translating with the
        partition's older syncs (a consumer that fails over re-reads more, nothing is skipped);
        the partition's next copied record writes a new one (each task numbers its own)."""
        written = sum(r.offset_syncs for r in results)
        failed = sum(r.offset_syncs_failed for r in results)
        self.flow.stats.offset_syncs_emitted += written
        if failed:
            message = (
                f"batch {batch_id}: {failed} offset sync(s) not written to "
                f"{self.s.offset_syncs_topic} (see the executors' log); a partition's next "
                "copied record writes a new one"
            )
            log.warning("flow %s: %s", self.s.name, message)
            self.flow.stats.set_error(SYNCS_ERROR, message)
        elif written:
            self.flow.stats.set_error(SYNCS_ERROR, None)

    def _backfill_left(self, owed: Mapping[TP, Range]) -> None:
        """A backfill's batch that planned nothing new (everything up to the pinned offsets was
        planned): the backfill is done once parked partitions owe nothing either. A partition
        the target refused :data:`BACKFILL_REFUSALS` times in a row fails the backfill
        (:class:`~mirrorlib.errors.RecordRefusedError`, naming it; the owed range stays in the
        checkpoint for the next run); until then the batch waits out the earliest back-off, so
        no stream of empty batches runs meanwhile (:meth:`StreamingQuery.stop` cuts it short)."""
        if not owed:
            self.finished.set()  # a backfill's end: nothing left up to the pinned offsets
            return
        stuck = [
            tp
            for tp in sorted(owed)
            if (b := self.backoffs.get(tp)) and b.failures >= BACKFILL_REFUSALS
        ]
        if stuck:
            raise RecordRefusedError(
                f"flow {self.s.name}: backfill failed: the target refused "
                + "; ".join(
                    f"{t}-{p}@{owed[(t, p)].start} {BACKFILL_REFUSALS} times "
                    f"({self.refused.get((t, p)) or 'refused'})"
                    for t, p in stuck
                )
                + "; the ranges not copied stay owed in the checkpoint for the next run"
            )
        wait = min(self.retry_at.get(tp, 0.0) for tp in owed) - time.monotonic()
        if wait > 0:
            self.finished.wait(wait)

    def _plan(self, batch_id: int) -> Plan:
        """The batch's plan: the one kept in the checkpoint location if Spark replays the batch,
        else a new one from where the previous batch ended (a new query: from the initial
        offsets), written there before anything is copied."""
        plan = self.plan_log.get(batch_id)
        if plan is not None:
            log.info("flow %s: batch %d: replaying its plan", self.s.name, batch_id)
        else:
            if self.backfill:
                self.planner.pin()
            last = self.plan_log.last(batch_id)
            if last is None:
                plan = self.planner.plan(self.planner.initial())
            else:  # (with its topic ids: a topic re-created since starts anew)
                plan = self.planner.plan(last.end, last.ids)
            for event, new in self.planner.take_events():
                if new:
                    self.flow.stats.new_incarnation(event)
            self.plan_log.save(batch_id, plan)
        self.plans.append((batch_id, plan))
        return plan

    def _measure(self, end: Mapping[TP, int], owed: Mapping[TP, Range]) -> None:
        """The lag of every partition of the batch, not only of those it copied: a partition
        owes nothing before the batch's end offset unless it is parked, and the source's end
        offsets are read now (at most once per :data:`MEASURE_INTERVAL_S`)."""
        s = self.s
        high: dict[TP, int] = {}
        now = time.monotonic()
        if now >= self._measure_at:
            self._measure_at = now + MEASURE_INTERVAL_S
            try:
                if self._view is None:
                    self._view = SourceView(s, self.flow.metadata.offsets_topic_partitions)
                _, high = self._view.watermarks(sorted(end))
            except Exception as exc:  # only the status is late
                log.debug("flow %s: reading the source's end offsets: %s", s.name, exc)
        for tp, offset in end.items():
            st = self.flow.stats.partition(
                tp[0], tp[1], s.policy.format_remote_topic(s.source, tp[0])
            )
            if tp not in owed:
                st.position = offset
            if tp in high:
                st.end_offset = high[tp]

    def close(self) -> None:
        self.planner.close()
        if self._view is not None:
            self._view.close()
            self._view = None

    def _copy(self, work: Sequence[Range], batch_id: int) -> list[CopyResult]:
        groups = batches.pack(work, self.tasks, batches.record_bytes(self.sizes))
        catalog = self.flow.catalog.snapshot()[1]
        max_bytes = {t: rt.max_message_bytes for t, rt in catalog.items()}
        topics = {r.topic for r in work}
        body = functools.partial(
            copy_task,
            self.s,
            {t: max_bytes.get(t) for t in topics},
            {tp: b for tp, b in self.budgets.items() if tp[0] in topics},
        )
        sc = self.spark.sparkContext
        sc.setJobDescription(f"mirrorlib {self.s.name} batch {batch_id}: copy")
        try:
            out: list[CopyResult] = (
                sc.parallelize(groups, len(groups)).mapPartitions(body).collect()
            )
        finally:
            sc.setJobDescription(None)
        return out

    def _account(self, part: PartitionResult, owed: dict[TP, Range]) -> None:
        """Count one partition's result: statistics, record sizes, pacing and parking."""
        tp = (part.topic, part.partition)
        st = self.flow.stats.partition(
            part.topic, part.partition, self.s.policy.format_remote_topic(self.s.source, part.topic)
        )
        st.record_count += part.records
        st.byte_count += part.bytes
        st.lost_records += part.lost
        if part.last_timestamp > 0:
            st.tail_timestamp_ms = part.last_timestamp
        st.position = part.copied_to
        if part.high_watermark >= 0:
            st.end_offset = part.high_watermark
        st.error = part.error
        if part.records:
            size = part.bytes / part.records
            old = self.sizes.get(tp)
            self.sizes[tp] = size if old is None else old + _SIZE_WEIGHT * (size - old)
        if part.budget is not None:
            self.budgets[tp] = part.budget
        if part.parked:
            owed[tp] = Range(part.topic, part.partition, part.copied_to, part.end)
            self.refused[tp] = part.error
            backoff = self.backoffs.setdefault(tp, Backoff(*PARKING_BACKOFF))
            self.retry_at[tp] = time.monotonic() + backoff.next_delay()
        else:
            self.backoffs.pop(tp, None)
            self.retry_at.pop(tp, None)
            self.refused.pop(tp, None)

    def _ids(self, batch_id: int) -> dict[str, Incarnation]:
        """The topic IDs batch ``batch_id`` was planned with (stored with its positions)."""
        return next((dict(p.ids) for b, p in reversed(self.plans) if b == batch_id), {})

    def _store_positions(self, results: Sequence[CopyResult], batch_id: int) -> None:
        """Store the batch's last copied offset per source partition in MM2's offsets topic on
        the target, so MM2 or the embedded engine can continue where Spark stopped (and a query
        started without a checkpoint resumes there). Spark's checkpoint (with the parked log)
        stays the source of truth for Spark.

        A store that fails shows as the flow's ``positions`` error (naming the topic and the
        cause) and its positions are stored with the next batch's (unless their topic was
        re-created since); once it failed for :data:`POSITION_FAILURE_S` seconds and
        :data:`POSITION_FAILURES` batches in a row, the flow fails with a
        :class:`~mirrorlib.errors.KafkaRequestError` saying so. A batch that copied nothing
        stores nothing and counts neither way."""
        ids = self._ids(batch_id)
        last = {
            tp: offset
            for tp, offset in self.unstored.items()
            if self._unstored_ids.get(tp[0]) == ids.get(tp[0])
        }
        last.update(
            ((p.topic, p.partition), p.copied_to - 1)
            for r in results
            for p in r.partitions
            if p.copied_to > p.start
        )
        if not last:
            return
        s = self.s
        try:
            store_positions(s, self.flow.metadata.offsets_topic_partitions, last, ids)
        except Exception as exc:
            self._store_failed(exc, batch_id, last, ids)
            return
        self.unstored, self._unstored_ids = {}, {}
        if self.store_failures:
            log.info("flow %s: positions stored again (batch %d)", s.name, batch_id)
            self.store_failures = 0
            self.flow.stats.set_error(POSITIONS_ERROR, None)

    def _store_failed(
        self, exc: Exception, batch_id: int, last: dict[TP, int], ids: dict[str, Incarnation]
    ) -> None:
        s = self.s
        now = time.monotonic()
        if not self.store_failures:
            self._failing_since = now
        self.store_failures += 1
        self.unstored, self._unstored_ids = last, ids
        failing = now - self._failing_since
        what = (
            f"not stored in {s.offset_storage_topic} on {s.target} "
            f"({self.store_failures} batch(es) in a row, for {failing:.0f}s; last: batch "
            f"{batch_id}): {exc}"
        )
        if self.store_failures >= POSITION_FAILURES and failing >= POSITION_FAILURE_S:
            message = (
                f"flow {s.name} failed: positions {what}. Spark's checkpoint still holds where the "
                "flow is (a restart with it resumes there); status, verify and a handover to "
                "MM2 or the embedded engine read these positions"
            )
            log.error("%s", message)
            self.flow.stats.set_error(POSITIONS_ERROR, what)
            self.flow.stats.state = FlowState.FAILED
            raise KafkaRequestError(
                message, cluster=s.target, resource=s.offset_storage_topic,
                code=getattr(exc, "code", None),
            ) from exc  # fmt: skip
        log.warning(
            "flow %s: positions %s; they are stored with the next batch's (the flow fails after %.0fs "
            "and %d batches in a row)", s.name, what, POSITION_FAILURE_S, POSITION_FAILURES,
        )  # fmt: skip
        self.flow.stats.set_error(POSITIONS_ERROR, what)


class DriverReporter(WorkerReporter):
    """Publishes the driver of a flow's query as its worker slot 0 for ``mirrorlib status``
    (:mod:`mirrorlib.runtime.workers.status`): the flow's state, and the error of positions it
    could not store. No transactional id: Spark writes none."""

    def __init__(self, settings: FlowSettings, stats: StatsRegistry) -> None:
        super().__init__(settings, stats, lambda: driver_slot(stats))

    def reports(self) -> list[WorkerReport]:
        return slot_reports(
            self.slots(), partition_loads(self.stats), flow=self.s.name, node=self.s.node,
            tasks_max=1, timestamp_ms=int(time.time() * 1000), interval_s=self.interval,
            transactional_id=lambda _slot: None,
        )  # fmt: skip


def driver_slot(stats: StatsRegistry) -> tuple[SlotInfo, ...]:
    """The driver as slot 0 of this process (as the embedded copier's
    :func:`~mirrorlib.runtime.workers.status.copier_slot`), with the flow's ``positions`` error."""
    prefix = f"{POSITIONS_ERROR}: "
    error = next((e for e in stats.errors() if e.startswith(prefix)), None)
    return tuple(attrs.evolve(slot, last_error=error) for slot in copier_slot(stats))


class StreamingQuery:
    """The Spark data plane of one flow (a :class:`~mirrorlib.runtime.flow.DataPlane`): its
    Structured Streaming query (driven by `rate-micro-batch`, :class:`CopyBatches` for each batch)."""

    def __init__(
        self,
        spark: Any,
        *,
        checkpoint_location: str,
        mode: str,
        trigger_interval: str,
        max_records_per_batch: int | None,
        tasks: int,
    ) -> None:
        self.spark = spark
        self.checkpoint_location = checkpoint_location
        self.mode = mode
        self.trigger_interval = trigger_interval
        self.max_records_per_batch = max_records_per_batch
        self.tasks = tasks
        self.name = ""
        self._stopping = False
        self.batches: CopyBatches | None = None
        self.query: Any = None
        """The ``pyspark.sql.streaming.StreamingQuery`` (``None`` until started)."""

    def prepare(self, flow: FlowRunner[Any]) -> None:
        """A first topic refresh, so that remote topics exist before batch 0."""
        flow.metadata.refresh_topics()

    def start(self, flow: FlowRunner[Any]) -> None:
        s = flow.settings
        began = time.monotonic()
        directory = flow_directory(self.checkpoint_location, s)
        files = CheckpointFiles(self.spark, directory)
        refuse_earlier_checkpoint(files, directory)
        planner = BatchPlanner(
            s,
            flow.metadata.offsets_topic_partitions,
            tasks=self.tasks,
            max_records=self.max_records_per_batch,
        )
        backfill = self.mode == "backfill"
        planner.prepare(initial=not files.ids(PlanLog.FOLDER), pin=backfill)
        self.batches = CopyBatches(flow, self.spark, self.tasks, files, planner, backfill=backfill)
        # Spark's built-in rate-micro-batch source only drives the batches (one row each, never
        # read): the planning runs in this process, in the foreachBatch function, so no Python
        # process is started to plan (see docs/spark.md, start-up).
        defined = time.monotonic()
        writer = (
            self.spark.readStream.format("rate-micro-batch")
            .option("rowsPerBatch", 1)
            .option("numPartitions", 1)
            .load()
            .writeStream.foreachBatch(self.batches)
            .option("checkpointLocation", directory)
            .queryName(f"mirrorlib {s.source}->{s.target}")
        )
        # a backfill runs its batches back to back and is stopped by its first empty plan
        trigger = "0 seconds" if backfill else self.trigger_interval
        writer = writer.trigger(processingTime=trigger)
        self.name = s.name
        loaded = time.monotonic()
        self.query = writer.start()
        # the driver as the flow's worker for `mirrorlib status` (state, positions not stored)
        flow.spawn("worker status", DriverReporter(s, flow.stats).run)
        if backfill:
            threading.Thread(
                target=self._end_backfill,
                args=(self.batches.finished, self.query),
                name=f"mirrorlib-spark-backfill-{s.source}-{s.target}",
                daemon=True,
            ).start()
        log.info(
            "flow %s: Spark query started (%s, %d tasks) in %.2fs (checkpoint files %.2fs, "
            "foreachBatch query defined %.2fs, started %.2fs)",
            s.name,
            self.mode,
            self.tasks,
            time.monotonic() - began,
            defined - began,
            loaded - defined,
            time.monotonic() - loaded,
        )

    def _end_backfill(self, finished: threading.Event, query: Any) -> None:
        """Stop a backfill's query once a batch found nothing left to copy (from this thread:
        the batch's own thread cannot stop the query it runs in). Every earlier batch has
        committed; the empty one is replayed, harmlessly, if the stop cuts it short."""
        finished.wait()
        if self._stopping:
            return
        log.info("flow %s: backfill done", self.name)
        try:
            query.stop()
        except Exception as exc:
            log.warning("flow %s: stopping the finished backfill: %s", self.name, exc)

    def stop(self) -> None:
        """Stop the query (an unfinished batch is replayed on restart)."""
        self._stopping = True
        if self.batches is not None:
            self.batches.finished.set()  # releases a backfill's watcher
        if self.query is None:
            return
        try:
            self.query.stop()
        except Exception as exc:  # a failed query: nothing left to stop
            log.warning("flow %s: stopping the query: %s", self.name, exc)
        if self.batches is not None:
            self.batches.close()
