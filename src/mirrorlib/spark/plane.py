"""The Spark data plane of one flow: a streaming query whose batches are copied by tasks.

The query is ``spark.readStream.format("mirrorlib")`` (:mod:`mirrorlib.spark.source`: Spark
plans each batch's offset ranges and keeps them in its checkpoint location) written with
``foreachBatch`` (:class:`CopyBatches`, in the driver process): the batch's planned ranges
(read from Spark's offset log, no Spark job), merged with what parked partitions still owe, are
packed by pending bytes into copy tasks
(``SparkContext.parallelize(...).mapPartitions``) that consume and produce the records
themselves (:func:`mirrorlib.kafka.ranges.copy_ranges`) and return only small results. Spark
schedules and retries the tasks; the batch is committed in the checkpoint once the function
returns, so a batch cut short (driver or executor killed, task failed) is copied again from the
same offsets (at-least-once).

A record the target refuses parks its partition instead of failing the query: the range it
still owes is kept by the driver, written to ``<flow checkpoint>/mirrorlib-parked/<batch>``
before the batch commits (so a driver restart owes it too), and copied again after a back-off.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mirrorlib.core import batches
from mirrorlib.core.batches import TP, Range
from mirrorlib.core.config import FlowConfig
from mirrorlib.core.retry import Backoff
from mirrorlib.core.settings import FlowSettings
from mirrorlib.kafka.ranges import (
    CopyResult,
    PartitionResult,
    SourceView,
    copy_ranges,
    store_positions,
)

if TYPE_CHECKING:
    from mirrorlib.runtime.flow import FlowRunner

__all__ = ["CopyBatches", "ParkedLog", "StreamingQuery"]

log = logging.getLogger(__name__)

#: weight of the newest batch in a partition's average record size
_SIZE_WEIGHT = 0.3
#: seconds between two readings of the source's end offsets by the driver (for the lag)
MEASURE_INTERVAL_S = 1.0


def flow_directory(checkpoint_location: str, flow: FlowConfig | FlowSettings) -> str:
    """The Spark checkpoint directory of one flow under ``checkpoint_location``."""
    return f"{checkpoint_location.rstrip('/')}/{flow.source}-to-{flow.target}"


def initial_offsets(settings: FlowSettings, offsets_topic_partitions: int) -> dict[TP, int]:
    """Where a new query starts each copyable partition (see
    :meth:`~mirrorlib.kafka.ranges.SourceView.starting_offsets`)."""
    view = SourceView(settings, offsets_topic_partitions)
    try:
        return view.starting_offsets(view.partitions())
    finally:
        view.close()


def _load_copier(_: Iterable[int]) -> Iterator[int]:
    """The body of a warm-up task: import the copy task's modules in the Python worker."""
    import mirrorlib.kafka.ranges  # noqa: F401

    yield 0


def start_workers(spark: Any, tasks: int) -> threading.Thread:
    """Start the executors' Python workers in the background (one task per core, importing the
    copy task's modules) while Spark plans the first batch: the first copy job then finds them
    running (``spark.python.worker.reuse``, Spark's default, keeps them). Started before the
    queries, it slowed down the Python processes Spark starts to plan them."""

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


def copy_task(
    settings: FlowSettings,
    max_bytes: Mapping[str, int | None],
    budgets: Mapping[TP, int],
    groups: Iterable[list[Range]],
) -> Iterator[CopyResult]:
    """The body of a copy task (on an executor): copy each group of ranges."""
    for work in groups:
        yield copy_ranges(settings, work, max_bytes=max_bytes, budgets=budgets)


class CheckpointFiles:
    """Small files in a flow's Spark checkpoint directory (any Hadoop file system), read and
    written through the driver's JVM."""

    def __init__(self, spark: Any, directory: str) -> None:
        jvm = spark._jvm
        self._path = jvm.org.apache.hadoop.fs.Path
        self._root = self._path(directory.rstrip("/"))
        self._fs = self._root.getFileSystem(spark._jsc.hadoopConfiguration())
        self._io = jvm.org.apache.commons.io.IOUtils

    def ids(self, folder: str) -> list[int]:
        """The numeric file names in ``folder`` (batch ids), sorted."""
        path = self._path(self._root, folder)
        if not self._fs.exists(path):
            return []
        names = [st.getPath().getName() for st in self._fs.listStatus(path)]
        return sorted(int(n) for n in names if n.isdigit())

    def read(self, name: str) -> bytes | None:
        path = self._path(self._root, name)
        if not self._fs.exists(path):
            return None
        stream = self._fs.open(path)
        try:
            return bytes(self._io.toByteArray(stream))
        finally:
            stream.close()

    def write(self, name: str, data: bytes) -> None:
        out = self._fs.create(self._path(self._root, name), True)
        try:
            out.write(bytearray(data))
        finally:
            out.close()

    def delete(self, name: str) -> None:
        self._fs.delete(self._path(self._root, name), False)


def batch_end_offsets(files: CheckpointFiles, batch_id: int) -> dict[TP, int] | None:
    """The end offsets of batch ``batch_id`` as Spark's offset log holds them, ``None`` when
    the file or the line is missing."""
    raw = files.read(f"offsets/{batch_id}")
    return None if raw is None else batches.offsets_in_log(raw.decode("utf-8"))


class ParkedLog:
    """What parked partitions owe, after each batch, in the flow's checkpoint directory:
    ``mirrorlib-parked/<batch id>``, JSON. The state before batch ``N`` is the newest file with
    an id below ``N`` (a file of a batch that did not commit is ignored when Spark runs that
    batch again)."""

    FOLDER = "mirrorlib-parked"

    def __init__(self, files: CheckpointFiles) -> None:
        self.files = files

    def load(self, batch_id: int) -> dict[TP, Range]:
        ids = [i for i in self.files.ids(self.FOLDER) if i < batch_id]
        raw = self.files.read(f"{self.FOLDER}/{ids[-1]}") if ids else None
        if raw is None:
            return {}
        return batches.decode_owed(json.loads(raw.decode("utf-8")))

    def save(self, batch_id: int, owed: Mapping[TP, Range]) -> None:
        data = json.dumps(batches.encode_owed(owed)).encode("utf-8")
        self.files.write(f"{self.FOLDER}/{batch_id}", data)
        for old in self.files.ids(self.FOLDER):
            if old < batch_id - 1:
                self.files.delete(f"{self.FOLDER}/{old}")


class CopyBatches:
    """The ``foreachBatch`` function of one flow's query (runs in the driver process)."""

    def __init__(
        self,
        flow: FlowRunner[Any],
        spark: Any,
        tasks: int,
        files: CheckpointFiles,
        initial: Mapping[TP, int] | None = None,
    ) -> None:
        self.flow = flow
        self.s = flow.settings
        self.spark = spark
        self.tasks = tasks
        self.files = files
        self.initial = dict(initial) if initial is not None else None
        """The offsets the source starts batch 0 at (``None``: not known to the driver)."""
        self.parked_log = ParkedLog(files)
        self._view: SourceView | None = None  # the source's end offsets, for the status
        self._measure_at = 0.0
        self.owed: dict[TP, Range] | None = None  # read from the parked log at the first batch
        self.retry_at: dict[TP, float] = {}
        self.backoffs: dict[TP, Backoff] = {}
        self.budgets: dict[TP, int] = {}
        self.sizes: dict[TP, float] = {}
        self.records = 0
        self.batches = 0

    def _due(self, tp: TP) -> bool:
        return self.retry_at.get(tp, 0.0) <= time.monotonic()

    def __call__(self, df: Any, batch_id: int) -> None:
        started = time.monotonic()
        planned, end = self._planned(df, batch_id)
        listed = time.monotonic()
        if self.owed is None:
            self.owed = self.parked_log.load(batch_id)
            if self.owed:
                log.warning(
                    "flow %s: parked partitions owe %s", self.s.name, sorted(self.owed.values())
                )
        before = dict(self.owed)
        work, owed = batches.settle(planned, self.owed, self._due)
        results = self._copy(work, batch_id) if work else []
        for res in results:
            for part in res.partitions:
                self._account(part, owed)
        if owed != before:
            self.parked_log.save(batch_id, owed)
        self.owed = owed
        self._store_positions(results, batch_id)
        if end:
            self._measure(end, owed)
        records = sum(r.records for r in results)
        self.records += records
        self.batches += 1
        if work:
            log.info(
                "flow %s: batch %d: %d records in %d task(s), %d offset syncs, %.2fs "
                "(ranges %.2fs, slowest task %.2fs)",
                self.s.name,
                batch_id,
                records,
                len(results),
                sum(r.offset_syncs for r in results),
                time.monotonic() - started,
                listed - started,
                max((r.seconds for r in results), default=0.0),
            )

    def _planned(self, df: Any, batch_id: int) -> tuple[list[Range], dict[TP, int] | None]:
        """The batch's planned ranges and end offsets, read from Spark's offset log without a
        Spark job: from the previous batch's end offsets (batch 0: the initial offsets the query
        was started with) to this batch's. When the log does not tell (a file missing), the
        ranges come from the batch's rows (a one-task Spark job)."""
        end = batch_end_offsets(self.files, batch_id)
        start = self.initial if batch_id == 0 else batch_end_offsets(self.files, batch_id - 1)
        if end is not None and start is not None:
            return batches.ranges(start, end), end
        log.info("flow %s: batch %d: planned ranges from its rows", self.s.name, batch_id)
        return [Range(r[0], int(r[1]), int(r[2]), int(r[3])) for r in df.collect()], end

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
            backoff = self.backoffs.setdefault(tp, Backoff(1.0, 60.0))
            self.retry_at[tp] = time.monotonic() + backoff.next_delay()
        else:
            self.backoffs.pop(tp, None)
            self.retry_at.pop(tp, None)

    def _store_positions(self, results: Sequence[CopyResult], batch_id: int) -> None:
        """Store the batch's last copied offset per source partition in MM2's offsets topic on
        the target, so MM2 or the embedded engine can continue where Spark stopped (and a query
        started without a checkpoint resumes there). Spark's checkpoint (with the parked log)
        stays the source of truth for Spark; failing to store a position only logs a warning."""
        last = {
            (p.topic, p.partition): p.copied_to - 1
            for r in results
            for p in r.partitions
            if p.copied_to > p.start
        }
        if not last:
            return
        try:
            store_positions(self.s, self.flow.metadata.offsets_topic_partitions, last)
        except Exception as exc:
            log.warning(
                "flow %s: storing positions of batch %d failed: %s", self.s.name, batch_id, exc
            )


class StreamingQuery:
    """The Spark data plane of one flow (a :class:`~mirrorlib.runtime.flow.DataPlane`): its
    Structured Streaming query (mirrorlib's source, :class:`CopyBatches` for each batch)."""

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
        self.batches: CopyBatches | None = None
        self.query: Any = None
        """The ``pyspark.sql.streaming.StreamingQuery`` (``None`` until started)."""

    def prepare(self, flow: FlowRunner[Any]) -> None:
        """A first topic refresh, so that remote topics exist before batch 0."""
        flow.metadata.refresh_topics()

    def start(self, flow: FlowRunner[Any]) -> None:
        from mirrorlib.spark.source import INITIAL_OFFSETS_OPTION, encode_settings

        s = flow.settings
        directory = flow_directory(self.checkpoint_location, s)
        options = {
            "flow.secret": encode_settings(s),
            "offsets.partitions": str(flow.metadata.offsets_topic_partitions),
            "tasks": str(self.tasks),
            "max.records.per.batch": str(self.max_records_per_batch or 0),
        }
        files = CheckpointFiles(self.spark, directory)
        initial = None
        if not files.ids("commits"):
            # A new query: its initial offsets are computed here and handed to the source, so
            # the driver knows batch 0's start without asking Spark.
            initial = initial_offsets(s, flow.metadata.offsets_topic_partitions)
            options[INITIAL_OFFSETS_OPTION] = json.dumps(batches.encode_offsets(initial))
        self.batches = CopyBatches(flow, self.spark, self.tasks, files, initial)
        writer = (
            self.spark.readStream.format("mirrorlib")
            .options(**options)
            .load()
            .writeStream.foreachBatch(self.batches)
            .option("checkpointLocation", directory)
            .queryName(f"mirrorlib {s.source}->{s.target}")
        )
        if self.mode == "backfill":
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=self.trigger_interval)
        self.name = s.name
        self.query = writer.start()
        log.info("flow %s: Spark query started (%s, %d tasks)", s.name, self.mode, self.tasks)

    def stop(self) -> None:
        """Stop the query (an unfinished batch is replayed on restart)."""
        if self.query is None:
            return
        try:
            self.query.stop()
        except Exception as exc:  # a failed query: nothing left to stop
            log.warning("flow %s: stopping the query: %s", self.name, exc)
        if self.batches is not None:
            self.batches.close()
