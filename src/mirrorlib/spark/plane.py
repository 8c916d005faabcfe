"""The Spark data plane of one flow: a streaming query whose batches are copied by tasks.

The query is ``spark.readStream.format("mirrorlib")`` (:mod:`mirrorlib.spark.source`: Spark
plans each batch's offset ranges and keeps them in its checkpoint location) written with
``foreachBatch`` (:class:`CopyBatches`, in the driver process): the batch's planned ranges,
merged with what parked partitions still owe, are packed by pending bytes into copy tasks
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

import functools
import json
import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mirrorlib.core import batches
from mirrorlib.core.batches import TP, Range
from mirrorlib.core.config import FlowConfig
from mirrorlib.core.retry import Backoff
from mirrorlib.core.settings import FlowSettings
from mirrorlib.kafka.ranges import CopyResult, PartitionResult, copy_ranges, store_positions

if TYPE_CHECKING:
    from mirrorlib.runtime.flow import FlowRunner

__all__ = ["CopyBatches", "ParkedLog", "StreamingQuery"]

log = logging.getLogger(__name__)

#: weight of the newest batch in a partition's average record size
_SIZE_WEIGHT = 0.3


def flow_directory(checkpoint_location: str, flow: FlowConfig | FlowSettings) -> str:
    """The Spark checkpoint directory of one flow under ``checkpoint_location``."""
    return f"{checkpoint_location.rstrip('/')}/{flow.source}-to-{flow.target}"


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
    """What parked partitions owe, after each batch, in the flow's checkpoint directory (any
    Hadoop file system, through the driver's JVM): ``mirrorlib-parked/<batch id>``, JSON. The
    state before batch ``N`` is the newest file with an id below ``N`` (a file of a batch that
    did not commit is ignored when Spark runs that batch again)."""

    def __init__(self, spark: Any, directory: str) -> None:
        jvm = spark._jvm
        self._path = jvm.org.apache.hadoop.fs.Path
        self._dir = self._path(f"{directory.rstrip('/')}/mirrorlib-parked")
        self._fs = self._dir.getFileSystem(spark._jsc.hadoopConfiguration())
        self._io = jvm.org.apache.commons.io.IOUtils

    def _ids(self) -> list[int]:
        if not self._fs.exists(self._dir):
            return []
        names = [st.getPath().getName() for st in self._fs.listStatus(self._dir)]
        return sorted(int(n) for n in names if n.isdigit())

    def load(self, batch_id: int) -> dict[TP, Range]:
        ids = [i for i in self._ids() if i < batch_id]
        if not ids:
            return {}
        stream = self._fs.open(self._path(self._dir, str(ids[-1])))
        try:
            raw = bytes(self._io.toByteArray(stream))
        finally:
            stream.close()
        return batches.decode_owed(json.loads(raw.decode("utf-8")))

    def save(self, batch_id: int, owed: Mapping[TP, Range]) -> None:
        data = json.dumps(batches.encode_owed(owed)).encode("utf-8")
        out = self._fs.create(self._path(self._dir, str(batch_id)), True)
        try:
            out.write(bytearray(data))
        finally:
            out.close()
        for old in self._ids():
            if old < batch_id - 1:
                self._fs.delete(self._path(self._dir, str(old)), False)


class CopyBatches:
    """The ``foreachBatch`` function of one flow's query (runs in the driver process)."""

    def __init__(self, flow: FlowRunner[Any], spark: Any, tasks: int, directory: str) -> None:
        self.flow = flow
        self.s = flow.settings
        self.spark = spark
        self.tasks = tasks
        self.parked_log = ParkedLog(spark, directory)
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
        planned = [Range(r[0], int(r[1]), int(r[2]), int(r[3])) for r in df.collect()]
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
        from mirrorlib.spark.source import encode_settings

        s = flow.settings
        directory = flow_directory(self.checkpoint_location, s)
        options = {
            "flow.secret": encode_settings(s),
            "offsets.partitions": str(flow.metadata.offsets_topic_partitions),
            "tasks": str(self.tasks),
            "max.records.per.batch": str(self.max_records_per_batch or 0),
        }
        self.batches = CopyBatches(flow, self.spark, self.tasks, directory)
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
