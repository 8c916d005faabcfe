# ruff: noqa: N802  (Spark's method and argument names)
"""The Python data source ``mirrorlib`` (Spark 4 ``pyspark.sql.datasource``): a stream reader
that plans a flow's batches. Its offsets (``{topic: {partition: next upstream offset}}``) are
what Spark keeps in the checkpoint location; its rows are the batch's *planned ranges*, one per
source partition with records to copy (``topic, partition, startOffset, endOffset``), never
records: the driver's ``foreachBatch`` function (:mod:`mirrorlib.spark.plane`) hands them to
copy tasks that move the records from the source to the target themselves.

Where each piece runs (see ``docs/spark.md``):

* :class:`MirrorStreamReader` ``initialOffset`` / ``latestOffset`` / ``partitions``: one
  long-lived Python process on the driver per query (holds admin clients between batches);
* :meth:`MirrorStreamReader.read`: only when the driver cannot read a batch's planned ranges
  from Spark's offset log (one small task, no Kafka I/O).

Options (strings): ``flow.secret`` (the pickled :class:`~mirrorlib.core.settings.FlowSettings`,
base64; named so that Spark redacts it from plans and the UI), ``offsets.partitions``,
``tasks``, ``max.records.per.batch``, ``initial.offsets`` (where a new query starts, JSON;
computed by the driver).
"""

from __future__ import annotations

import base64
import json
import logging
import pickle
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

try:  # Spark 4.2+: admission control and Trigger.AvailableNow for Python sources
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - Spark 4.0/4.1: one batch per trigger, no limits

    class ReadLimit:  # type: ignore[no-redef]
        pass

    class ReadAllAvailable(ReadLimit):  # type: ignore[no-redef]
        pass

    class ReadMaxRows(ReadLimit):  # type: ignore[no-redef]
        def __init__(self, max_rows: int) -> None:
            self.max_rows = max_rows

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass


from mirrorlib.core import batches
from mirrorlib.core.settings import FlowSettings
from mirrorlib.errors import ConfigError
from mirrorlib.kafka.ranges import SourceView

__all__ = [
    "SCHEMA_DDL",
    "MirrorDataSource",
    "MirrorInputPartition",
    "MirrorStreamReader",
    "decode_settings",
    "encode_settings",
]

log = logging.getLogger(__name__)

SETTINGS_OPTION = "flow.secret"
#: The offsets a new query starts at (JSON, as in the checkpoint), computed by the driver so that
#: it knows batch 0's planned ranges; without it the source computes them.
INITIAL_OFFSETS_OPTION = "initial.offsets"

#: The rows of a mirrorlib source: the planned range ``[startOffset, endOffset)`` of each source
#: partition with records to copy in the batch.
SCHEMA_DDL = "topic STRING, partition INT, startOffset BIGINT, endOffset BIGINT"


def encode_settings(settings: FlowSettings) -> str:
    """Pickle a flow's settings for the data source options (a user's replication policy
    defined in ``__main__`` is pickled by value, other classes by reference)."""
    from pyspark import cloudpickle

    blob: bytes = cloudpickle.dumps(settings)  # type: ignore[no-untyped-call]
    return base64.b64encode(blob).decode("ascii")


def decode_settings(options: Mapping[str, str]) -> FlowSettings:
    raw = options.get(SETTINGS_OPTION)
    if not raw:
        raise ConfigError(
            "the mirrorlib data source needs its flow settings; start it with "
            "mirrorlib.spark.SparkReplicator"
        )
    settings = pickle.loads(base64.b64decode(raw))
    if not isinstance(settings, FlowSettings):
        raise ConfigError(
            f"option {SETTINGS_OPTION} holds {type(settings).__name__}", key=SETTINGS_OPTION
        )
    return settings


class MirrorDataSource(DataSource):
    """``spark.readStream.format("mirrorlib")``: the planned ranges of a flow's batches."""

    @classmethod
    def name(cls) -> str:
        return "mirrorlib"

    def schema(self) -> str:
        return SCHEMA_DDL

    def streamReader(self, schema: Any) -> MirrorStreamReader:
        return MirrorStreamReader(dict(self.options))


class MirrorInputPartition(InputPartition):
    """The planned ranges of a batch: ``(topic, partition, start, end)`` tuples."""

    def __init__(self, ranges: Sequence[tuple[str, int, int, int]]) -> None:
        super().__init__(list(ranges))
        self.ranges = list(ranges)


class MirrorStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are ``{topic: {partition: next_upstream_offset}}``
    (see :mod:`mirrorlib.core.batches`)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = dict(options)
        self.settings = decode_settings(self.options)
        self.tasks = max(int(self.options.get("tasks", "2")), 1)
        raw_max = int(self.options.get("max.records.per.batch", "0") or "0")
        self.max_records = raw_max if raw_max > 0 else None
        self.offsets_partitions = int(self.options.get("offsets.partitions", "25"))
        self._view: SourceView | None = None
        self._pinned: dict[batches.TP, int] | None = None  # AvailableNow: offsets seen at start
        self._last: dict[batches.TP, int] | None = None
        self._latest: dict[batches.TP, int] = {}  # the end offsets seen by latestOffset

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_view"] = None  # admin clients stay in the driver process
        return state

    @property
    def view(self) -> SourceView:
        if self._view is None:
            self._view = SourceView(self.settings, self.offsets_partitions)
        return self._view

    # -- offsets (driver) --------------------------------------------------------------------

    def initialOffset(self) -> dict[str, Any]:
        given = self.options.get(INITIAL_OFFSETS_OPTION)
        if given:
            start = batches.decode_offsets(json.loads(given))
        else:
            start = self.view.starting_offsets(self.view.partitions())
        log.info("flow %s: initial offsets for %d partitions", self.settings.name, len(start))
        self._last = start
        return batches.encode_offsets(start)

    def getDefaultReadLimit(self) -> Any:
        return ReadAllAvailable() if self.max_records is None else ReadMaxRows(self.max_records)

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.view.partitions()
        _, high = self.view.watermarks(tps)
        self._pinned = high
        log.info(
            "flow %s: backfill up to the end offsets of %d partitions (%d records in the logs)",
            self.settings.name,
            len(high),
            sum(high.values()),
        )

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: ReadLimit | None = None
    ) -> dict[str, Any]:
        begin = batches.decode_offsets(start) if start is not None else dict(self._last or {})
        view = self.view
        if self._pinned is not None:
            tps = sorted(self._pinned)
            available = {tp: self._pinned[tp] for tp in tps if tp in begin}
        else:
            tps = view.partitions()
            _, high = view.watermarks([tp for tp in tps if tp in begin])
            available = {tp: high[tp] for tp in tps if tp in high}
        new = [tp for tp in tps if tp not in begin]
        if new:
            starts = view.starting_offsets(new)
            if self._pinned is not None:
                starts = {tp: min(o, self._pinned[tp]) for tp, o in starts.items()}
            available.update(starts)
            log.info("flow %s: new partitions %s", self.settings.name, sorted(starts))
        budget = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        if limit is None and start is None:
            budget = self.max_records  # Spark < 4.2 calls latestOffset() without a limit
        end = batches.allot(begin, available, budget, self.tasks)
        self._last = end
        self._latest = available
        return batches.encode_offsets(end)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """The source's end offsets seen when the batch was planned (Spark's progress shows
        them as the source's ``latestOffset``: minus ``endOffset``, the records of lag each
        partition has after the batch)."""
        return batches.encode_offsets(self._latest) if self._latest else None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        """One partition holding every planned range: the driver packs them into copy tasks
        (with what parked partitions still owe, which this process does not know)."""
        work = batches.ranges(batches.decode_offsets(start), batches.decode_offsets(end))
        if not work:
            return []
        return [MirrorInputPartition([(r.topic, r.partition, r.start, r.end) for r in work])]

    def commit(self, end: dict[str, Any]) -> None:
        return None

    def stop(self) -> None:
        if self._view is not None:
            self._view.close()
            self._view = None

    # -- rows (one small task per batch) ---------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[tuple[str, int, int, int]]:
        yield from (tuple(r) for r in partition.value)
