"""A flow's live counters, and the status and metrics read from them.

The copier writes each source partition's counters into a :class:`PartitionStats` (records,
bytes, position, end offset, error, worker; record age and replication latency, each value also
observed by its remote topic's :class:`Histogram`), held by the flow's :class:`StatsRegistry`;
any other thread reads them as

* :meth:`StatsRegistry.snapshot` — a :class:`~mirrorlib.core.status.FlowStatus` (what
  ``Replicator.status()`` returns), its lag and stalls by the rules of :mod:`mirrorlib.core.status`
  and :func:`~mirrorlib.core.stalls.stall_reason`;
* :meth:`StatsRegistry.metrics` — :class:`~mirrorlib.core.metrics.Metric` values, MM2's names and
  tags (rates over :data:`RATE_WINDOW_S`);
* :meth:`StatsRegistry.scrape` and :meth:`StatsRegistry.families` — the families of
  :data:`~mirrorlib.core.metrics.METRICS`, in one pass over the partitions;
* :meth:`StatsRegistry.cursor` — a :class:`MetricsCursor`, which gives, per family, only the
  samples that changed since its previous read (a :class:`FamilyDelta`): for a scraper that keeps
  what it wrote, work in proportion to what changed.

Writers (the copier thread) set counters without a lock; a partition whose counters are set is
added to the registry's set of changed partitions, which the cursors take.
"""

from __future__ import annotations

import functools
import operator
import threading
import time
import weakref
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import accumulate, compress, repeat
from typing import NamedTuple

from mirrorlib.core.metrics import (
    LATENCY_BUCKETS_S,
    METRICS,
    Family,
    HistogramValue,
    Metric,
    MetricSpec,
)
from mirrorlib.core.stalls import stall_reason
from mirrorlib.core.status import (
    STALL_AFTER_S,
    FlowState,
    FlowStatus,
    FlowSummary,
    PartitionStatus,
    WorkerStatus,
    partition_lags,
)

__all__ = [
    "RATE_WINDOW_S",
    "FamilyDelta",
    "Histogram",
    "MetricsCursor",
    "PartitionStats",
    "SampleKey",
    "StatsRegistry",
]

#: ``record-rate`` and ``byte-rate`` cover the last window of at least this many seconds (and at
#: most twice as long), not the lifetime of the process.
RATE_WINDOW_S = 30.0


_SPEC = {s.name: s for s in METRICS}


class Histogram:
    """Counts of observed values (seconds) in the buckets of :data:`LATENCY_BUCKETS_S`.

    Written by one thread; read by any (a read copies the counts once)."""

    __slots__ = ("_bounds", "_counts", "_sum")

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BUCKETS_S) -> None:
        self._bounds = bounds
        self._counts = [0] * (len(bounds) + 1)  # not cumulative; the last one is +Inf
        self._sum = 0.0

    def observe(self, value: float) -> None:
        self._counts[bisect_left(self._bounds, value)] += 1
        self._sum += value

    def value(self) -> HistogramValue:
        buckets = tuple(zip(_upper_bounds(self._bounds), accumulate(self._counts), strict=True))
        return HistogramValue(buckets, self._sum)


@functools.cache
def _upper_bounds(bounds: tuple[float, ...]) -> tuple[float, ...]:
    """The buckets' upper bounds: ``bounds`` then ``+Inf``."""
    return (*bounds, float("inf"))


class _Window:
    """last/min/max/avg of a value in ms (MM2's ``-min``/``-max``/``-avg``, over the lifetime of
    the stats); each value is also observed, in seconds, by ``histogram``."""

    __slots__ = ("count", "histogram", "last", "max", "min", "total")

    def __init__(self, histogram: Histogram | None = None) -> None:
        self.histogram = histogram
        self.count = 0
        self.total = 0.0
        self.last: float | None = None
        self.min: float | None = None
        self.max: float | None = None

    def record(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.last = value
        self.min = value if self.min is None else min(self.min, value)
        self.max = value if self.max is None else max(self.max, value)
        if self.histogram is not None:
            self.histogram.observe(value / 1000.0)

    def record_many(self, values: Sequence[float]) -> None:
        """:meth:`record` each of ``values``, in order (for a writer that collects many values
        at once: one call instead of one per value)."""
        if not values:
            return
        self.count += len(values)
        self.total += sum(values)
        self.last = values[-1]
        low, high = min(values), max(values)
        self.min = low if self.min is None else min(self.min, low)
        self.max = high if self.max is None else max(self.max, high)
        if self.histogram is not None:
            observe = self.histogram.observe
            for value in values:
                observe(value / 1000.0)

    def items(self, name: str) -> Iterator[tuple[str, float]]:
        if self.last is None or self.min is None or self.max is None:
            return
        yield name, self.last
        yield f"{name}-min", self.min
        yield f"{name}-max", self.max
        yield f"{name}-avg", self.total / self.count


class PartitionStats:
    """Mutable counters for one source partition; updated by the copier thread only.

    :attr:`progress_at` is the last time the position moved forward or the partition was seen
    with nothing waiting (its end offset at or below its position). Setting a counter, the
    position, the end offset, the error or the worker adds the partition to ``changed`` (its registry's
    set of partitions changed since a :class:`MetricsCursor` last read them)."""

    __slots__ = (
        "_byte_count",
        "_changed",
        "_end_offset",
        "_error",
        "_lost_records",
        "_position",
        "_rate_mark",
        "_rate_prev",
        "_record_count",
        "_tail_timestamp_ms",
        "_worker",
        "age",
        "internal",
        "latency",
        "progress_at",
        "remote_topic",
        "started",
    )

    def __init__(
        self,
        remote_topic: str,
        latency: Histogram | None = None,
        age: Histogram | None = None,
        *,
        internal: bool = False,
        changed: set[PartitionStats] | None = None,
    ) -> None:
        self._changed = changed
        self.remote_topic = remote_topic
        self.internal = internal
        self._record_count = 0
        self._byte_count = 0
        self._position: int | None = None
        self._end_offset: int | None = None
        self._tail_timestamp_ms: int | None = None
        self._lost_records = 0
        self._error: str | None = None
        self._worker: int | None = None
        self.age = _Window(age)
        self.latency = _Window(latency)
        self.started = time.monotonic()
        self.progress_at = self.started  # monotonic time of the last progress (or creation)
        self._rate_prev = self._rate_mark = (self.started, 0, 0)

    def _moved(self) -> None:
        if self._changed is not None:
            self._changed.add(self)

    @property
    def record_count(self) -> int:
        """Records replicated and acknowledged."""
        return self._record_count

    @record_count.setter
    def record_count(self, value: int) -> None:
        self._record_count = value
        self._moved()

    @property
    def byte_count(self) -> int:
        """Bytes of record values replicated and acknowledged."""
        return self._byte_count

    @byte_count.setter
    def byte_count(self, value: int) -> None:
        self._byte_count = value
        self._moved()

    @property
    def lost_records(self) -> int:
        """Records the source lost before they were replicated."""
        return self._lost_records

    @lost_records.setter
    def lost_records(self, value: int) -> None:
        self._lost_records = value
        self._moved()

    @property
    def tail_timestamp_ms(self) -> int | None:
        """The timestamp of the last replicated record (``None``: none yet)."""
        return self._tail_timestamp_ms

    @tail_timestamp_ms.setter
    def tail_timestamp_ms(self, value: int | None) -> None:
        self._tail_timestamp_ms = value
        self._moved()

    @property
    def error(self) -> str | None:
        """What is wrong with the partition now, if anything."""
        return self._error

    @error.setter
    def error(self, value: str | None) -> None:
        self._error = value
        self._moved()

    @property
    def worker(self) -> int | None:
        """The copier worker slot copying the partition (``tasks.max`` > 1; else ``None``)."""
        return self._worker

    @worker.setter
    def worker(self, value: int | None) -> None:
        self._worker = value
        self._moved()

    @property
    def position(self) -> int | None:
        """The next upstream offset to replicate (``None``: not known yet)."""
        return self._position

    @position.setter
    def position(self, value: int | None) -> None:
        if value is not None and (self._position is None or value > self._position):
            self.progress_at = time.monotonic()
        self._position = value
        self._moved()

    @property
    def end_offset(self) -> int | None:
        """The source log end offset last seen (``None``: not known yet)."""
        return self._end_offset

    @end_offset.setter
    def end_offset(self, value: int | None) -> None:
        if value is not None and self._position is not None and value <= self._position:
            self.progress_at = time.monotonic()  # caught up: the stall clock starts afresh
        self._end_offset = value
        self._moved()

    def rates(self, now: float) -> tuple[float, float]:
        """(records/s, bytes/s) since a mark at least :data:`RATE_WINDOW_S` old (or the start)."""
        records, nbytes = self._record_count, self._byte_count
        if now - self._rate_mark[0] >= RATE_WINDOW_S:
            self._rate_prev, self._rate_mark = self._rate_mark, (now, records, nbytes)
        t0, r0, b0 = self._rate_prev
        elapsed = max(now - t0, 1e-9)
        return (records - r0) / elapsed, (nbytes - b0) / elapsed

    def idle_until(self, when: float) -> None:
        """The counters did not move until ``when`` (monotonic) and their rates were 0 then:
        the rate window restarts as if :meth:`rates` had been read every window until then
        (a reader that skips idle partitions calls this when one moves again)."""
        _, records, nbytes = self._rate_mark
        if when - self._rate_mark[0] >= RATE_WINDOW_S:
            self._rate_prev = (when - RATE_WINDOW_S, records, nbytes)
            self._rate_mark = (when, records, nbytes)


_POSITION = operator.attrgetter("_position")
_END = operator.attrgetter("_end_offset")
_TAIL = operator.attrgetter("_tail_timestamp_ms")
_PROGRESS = operator.attrgetter("progress_at")


def _lags(
    stats: Sequence[PartitionStats], now_ms: int
) -> tuple[list[int | None], list[float | None], list[bool]]:
    """:func:`partition_lags` of ``stats``."""
    return partition_lags(
        list(map(_POSITION, stats)), list(map(_END, stats)), list(map(_TAIL, stats)), now_ms
    )


class _Row(NamedTuple):
    """One partition as the status and the metrics show it."""

    topic: str
    partition: int
    stats: PartitionStats
    lag_records: int | None
    lag_seconds: float | None
    stalled: str | None


class StatsRegistry:
    """All counters of one flow in this process, safe to read from other threads.

    ``internal`` tells which source topics are MM2's (heartbeats: shown apart from data topics);
    ``stall_after`` is the stall timeout in seconds (:data:`STALL_AFTER_S`)."""

    def __init__(
        self,
        source: str,
        target: str,
        *,
        internal: Callable[[str], bool] | None = None,
        stall_after: float = STALL_AFTER_S,
    ) -> None:
        self.source = source
        self.target = target
        self._internal = internal
        self.stall_after = stall_after
        self._lock = threading.Lock()
        self._partitions: dict[tuple[str, int], PartitionStats] = {}
        self._members = 0  # changes of the partitions' membership (added, dropped)
        self._changed: set[PartitionStats] = set()  # since the cursors' last read
        self._cursors: weakref.WeakSet[MetricsCursor] = weakref.WeakSet()
        self._topic_histograms: dict[str, tuple[Histogram, Histogram]] = {}  # latency, age
        self._errors: dict[str, str] = {}
        self._stalls: dict[str, tuple[str, float]] = {}  # component -> (reason, monotonic time)
        self._held: dict[str, str] = {}  # component -> stall reason, until set otherwise
        self.state = FlowState.STARTING
        self.last_heartbeat_ms: int | None = None
        self.last_checkpoint_ms: int | None = None
        self.checkpoints_emitted = 0
        self.offset_syncs_emitted = 0
        self.new_incarnations = 0  # see FlowStatus.new_incarnations
        self._incarnation_events: deque[str] = deque(maxlen=10)
        self.checkpoint_latency = _Window(Histogram())
        # see mirrorlib.runtime.checkpoints: commit -> checkpoint bound, and the syncs' age
        self.checkpoint_commit_age = _Window()
        self.checkpoint_sync_age = _Window()
        self.workers: tuple[WorkerStatus, ...] = ()  # set by the worker supervisor
        #: when (monotonic) the copier's loop last came round, or last began opening its
        #: clients; ``None``: no copier loops in this process (see :meth:`loop_stall`)
        self.loop_at: float | None = None

    def partition(self, topic: str, partition: int, remote_topic: str) -> PartitionStats:
        key = (topic, partition)
        stats = self._partitions.get(key)
        if stats is None:
            with self._lock:
                stats = self._partitions.get(key)
                if stats is None:
                    latency, age = self._topic_histograms.setdefault(
                        remote_topic, (Histogram(), Histogram())
                    )
                    internal = self._internal is not None and self._internal(topic)
                    stats = self._partitions[key] = PartitionStats(
                        remote_topic, latency, age, internal=internal, changed=self._changed
                    )
                    self._members += 1
        return stats

    def partitions(self) -> dict[tuple[str, int], PartitionStats]:
        """The partitions' live counters (a copy of the map; the counters are shared)."""
        with self._lock:
            return dict(self._partitions)

    def drop_partition(self, topic: str, partition: int) -> None:
        with self._lock:
            stats = self._partitions.pop((topic, partition), None)
            if stats is not None:
                self._members += 1
                self._changed.discard(stats)

    def set_error(self, component: str, message: str | None) -> None:
        with self._lock:
            if message is None:
                self._errors.pop(component, None)
            else:
                self._errors[component] = message

    def client_problem(self, component: str, message: str) -> str | None:
        """A client's error or log line: if it means the client cannot write (see
        :func:`stall_reason`), the flow is stalled until a partition makes progress. Returns
        the stall reason, if it is one."""
        reason = stall_reason(message)
        if reason is not None:
            with self._lock:
                self._stalls[component] = (reason, time.monotonic())
        return reason

    def set_stall(self, component: str, reason: str | None) -> None:
        """``component`` is stalled for ``reason`` until set otherwise (``None``): a worker
        process's blocked loop, as it reports it (see :meth:`loop_stall`)."""
        with self._lock:
            if reason is None:
                self._held.pop(component, None)
            else:
                self._held[component] = reason

    def errors(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(f"{k}: {v}" for k, v in sorted(self._errors.items()))

    def loop_stall(self, now: float | None = None) -> str | None:
        """Why the flow is stalled if its copier's loop has not come round for longer than
        :attr:`stall_after`: it is blocked in a client call (a transaction commit or a producer
        initialisation waiting for an unreachable target, say). Its partitions' end offsets are
        not refreshed meanwhile, so their lag would show the last values seen — 0 for a flow
        that was caught up — however many records arrive at the source."""
        at = self.loop_at
        if at is None:
            return None
        idle = (time.monotonic() if now is None else now) - at
        if idle <= self.stall_after:
            return None
        return (
            f"copier: blocked for {idle:.0f}s in a call to the clients (the lag shown is the "
            f"last one seen)"
        )

    def _client_stalls(self, progress: float) -> list[str]:
        """Reported client problems not followed by ``progress`` (older ones are forgotten), and
        the stalls set (:meth:`set_stall`)."""
        with self._lock:
            for component, (_, at) in list(self._stalls.items()):
                if progress > at:
                    del self._stalls[component]
            stalls = {c: r for c, (r, _) in self._stalls.items()} | self._held
            return [f"{c}: {r}" for c, r in sorted(stalls.items())]

    def _rows(
        self,
        items: Iterable[tuple[tuple[str, int], PartitionStats]],
        now: float | None = None,
        now_ms: int | None = None,
    ) -> list[_Row]:
        """What the status and the metrics show of each partition (lag, stall), in one pass."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        now = time.monotonic() if now is None else now
        items = list(items)
        stats = [s for _, s in items]
        lags, seconds, waiting = _lags(stats, now_ms)
        stalled = self._stalled
        return [
            _Row(key[0], key[1], s, lag, lag_s, stalled(lag, now - s.progress_at) if w else None)
            for (key, s), lag, lag_s, w in zip(items, lags, seconds, waiting, strict=True)
        ]

    def _row(self, key: tuple[str, int], s: PartitionStats, now_ms: int, now: float) -> _Row:
        """What the status and the metrics show of one partition (``now``: monotonic)."""
        return self._rows(((key, s),), now, now_ms)[0]

    def _stalled(self, lag: int | None, idle: float) -> str | None:
        """Why a partition with records waiting (``lag`` of them; ``None``: unknown) and no
        progress for ``idle`` seconds is stalled, if it is."""
        if idle <= self.stall_after:
            return None
        what = "unknown number of" if lag is None else str(lag)
        return f"no progress for {idle:.0f}s with {what} record(s) waiting"

    def _summary(
        self, items: list[tuple[tuple[str, int], PartitionStats]], rows: list[_Row]
    ) -> FlowSummary:
        """The flow's state, errors and stall reason from its partitions' ``rows``."""
        stuck = [r for r in rows if r.stalled]
        return self._summary_of(
            [(r.topic, r.partition, r.stats.error) for r in rows if r.stats.error],
            min(stuck, key=lambda r: (r.topic, r.partition), default=None),
            len(stuck),
            max((s.progress_at for _, s in items), default=0.0),
        )

    def _summary_of(
        self,
        failing: list[tuple[str, int, str]],
        first: _Row | None,
        stuck: int,
        progress: float,
    ) -> FlowSummary:
        """The flow's state, errors and stall reason from its partitions' errors (``failing``),
        the row of its first stalled partition (by topic and partition), how many are
        ``stuck`` and the last time a partition made ``progress``."""
        errors = self.errors() + tuple(
            f"{topic}-{partition}: {error}" for topic, partition, error in sorted(failing)
        )
        reasons = self._client_stalls(progress)
        blocked = self.loop_stall()
        if blocked is not None:
            reasons.append(blocked)
        if first is not None:
            more = f" (and {stuck - 1} more partition(s))" if stuck > 1 else ""
            reasons.append(f"{first.topic}-{first.partition}: {first.stalled}{more}")
        state = self.state
        if state in (FlowState.RUNNING, FlowState.STARTING) and reasons:
            state = FlowState.STALLED
        elif state is FlowState.RUNNING and errors:
            state = FlowState.DEGRADED
        return FlowSummary(
            source=self.source,
            target=self.target,
            state=state,
            errors=errors,
            stalled="; ".join(reasons) or None,
            stalled_partitions=stuck,
        )

    def snapshot(self) -> FlowStatus:
        with self._lock:
            items = sorted(self._partitions.items())
        rows = self._rows(items)
        partitions = tuple(
            PartitionStatus(
                topic=r.topic,
                partition=r.partition,
                remote_topic=r.stats.remote_topic,
                position=r.stats.position,
                end_offset=r.stats.end_offset,
                lag_records=r.lag_records,
                lag_seconds=r.lag_seconds,
                record_count=r.stats.record_count,
                byte_count=r.stats.byte_count,
                last_record_age_ms=None if r.stats.age.last is None else int(r.stats.age.last),
                last_replication_latency_ms=(
                    None if r.stats.latency.last is None else int(r.stats.latency.last)
                ),
                lost_records=r.stats.lost_records,
                error=r.stats.error,
                stalled=r.stalled,
                internal=r.stats.internal,
                worker=r.stats.worker,
            )
            for r in rows
        )
        summary = self._summary(items, rows)
        return FlowStatus(
            source=self.source,
            target=self.target,
            state=summary.state,
            errors=summary.errors,
            partitions=partitions,
            last_heartbeat_ms=self.last_heartbeat_ms,
            last_checkpoint_ms=self.last_checkpoint_ms,
            checkpoints_emitted=self.checkpoints_emitted,
            offset_syncs_emitted=self.offset_syncs_emitted,
            stalled=summary.stalled,
            workers=self.workers,
            new_incarnations=self.new_incarnations,
            incarnation_events=tuple(self._incarnation_events),
        )

    def incarnations(self) -> tuple[int, tuple[str, ...]]:
        """:attr:`FlowStatus.new_incarnations` and :attr:`FlowStatus.incarnation_events`."""
        with self._lock:
            return self.new_incarnations, tuple(self._incarnation_events)

    def new_incarnation(self, event: str, count: int = 1) -> None:
        """``count`` source partitions start copying a new incarnation (``event`` says which
        and why; see :attr:`FlowStatus.new_incarnations`)."""
        with self._lock:
            self.new_incarnations += count
            self._incarnation_events.append(event)

    def _rates(self, now: float | None = None) -> dict[tuple[str, int], tuple[float, float]]:
        now = time.monotonic() if now is None else now
        with self._lock:
            return {key: s.rates(now) for key, s in self._partitions.items()}

    def metrics(self) -> list[Metric]:
        """Every metric of this flow, with MM2's names and tags (rates over the last
        :data:`RATE_WINDOW_S` to twice that)."""
        out: list[Metric] = []
        base = (("source", self.source), ("target", self.target))
        status = self.snapshot()
        rates = self._rates()
        with self._lock:
            items = sorted(self._partitions.items())
        lag = {(p.topic, p.partition): p for p in status.partitions}
        for (topic, partition), s in items:
            ps = lag.get((topic, partition))
            if ps is None:  # assigned after the snapshot
                continue
            tags = (*base, ("topic", s.remote_topic), ("partition", str(partition)))
            record_rate, byte_rate = rates.get((topic, partition), (0.0, 0.0))
            out.append(Metric("record-count", tags, s.record_count))
            out.append(Metric("record-rate", tags, record_rate))
            out.append(Metric("byte-count", tags, s.byte_count))
            out.append(Metric("byte-rate", tags, byte_rate))
            out.extend(Metric(n, tags, v) for n, v in s.age.items("record-age-ms"))
            out.extend(Metric(n, tags, v) for n, v in s.latency.items("replication-latency-ms"))
            out.append(Metric("lost-records", tags, s.lost_records))
            if ps.lag_records is not None:
                out.append(Metric("replication-lag-records", tags, ps.lag_records))
            if ps.lag_seconds is not None:
                out.append(Metric("replication-lag-seconds", tags, ps.lag_seconds))
        out.extend(
            Metric(n, base, v) for n, v in self.checkpoint_latency.items("checkpoint-latency-ms")
        )
        out.extend(
            Metric(n, base, v)
            for n, v in self.checkpoint_commit_age.items("checkpoint-commit-age-seconds")
        )
        out.extend(
            Metric(n, base, v)
            for n, v in self.checkpoint_sync_age.items("checkpoint-sync-age-seconds")
        )
        out.append(Metric("checkpoint-count", base, self.checkpoints_emitted))
        out.append(Metric("offset-sync-count", base, self.offset_syncs_emitted))
        out.append(Metric("new-incarnation-count", base, self.new_incarnations))
        return out

    def scrape(self, now: float | None = None) -> tuple[FlowSummary, list[Family]]:
        """The flow's state and its metric families, in one pass over the partitions and
        without a per-partition status object (cheaper than :meth:`snapshot` followed by
        :meth:`families`; :meth:`cursor` is cheaper still when a scraper keeps what it wrote).
        ``now``: the scrape's :func:`time.monotonic` time (rates, stalls), by default now."""
        with self._lock:
            items = list(self._partitions.items())
        rows = self._rows(items, now)
        summary = self._summary(items, rows)
        return summary, list(self._families(rows, summary, now))

    def cursor(self) -> MetricsCursor:
        """A reader of this flow's samples that returns only what changed since its last read
        (see :class:`MetricsCursor`)."""
        cursor = MetricsCursor(self)
        with self._lock:
            self._cursors.add(cursor)
        return cursor

    def _take_changes(self, cursor: MetricsCursor) -> set[PartitionStats]:
        """The partitions changed since ``cursor`` last took them (the others keep theirs)."""
        with self._lock:
            taken = self._changed.copy()  # writers add without the lock: copy, then remove
            self._changed.difference_update(taken)
            for other in self._cursors:
                if other is not cursor:
                    other._pending |= taken
            mine, cursor._pending = cursor._pending | taken, set()
        return mine

    def families(self, status: FlowStatus | None = None) -> Iterator[Family]:
        """The metrics of :data:`METRICS` with their samples now (one pass over the partitions;
        no per-partition object is kept between scrapes). ``status``: a snapshot just taken."""
        if status is None:
            yield from self.scrape()[1]
            return
        with self._lock:
            stats = dict(self._partitions)
        rows = [
            _Row(p.topic, p.partition, s, p.lag_records, p.lag_seconds, p.stalled)
            for p in status.partitions
            if (s := stats.get((p.topic, p.partition))) is not None
        ]
        summary = FlowSummary(
            self.source, self.target, status.state, status.errors, status.stalled,
            sum(1 for p in status.partitions if p.stalled),
        )  # fmt: skip
        yield from self._families(rows, summary)

    def _families(
        self, rows: list[_Row], summary: FlowSummary, now: float | None = None
    ) -> Iterator[Family]:
        flow = (self.source, self.target)
        rates = self._rates(now)
        with self._lock:
            histograms = dict(self._topic_histograms)
        samples: dict[str, list[tuple[tuple[str, ...], float | HistogramValue]]] = {
            name: [] for name in _PER_PARTITION
        }
        columns = [samples[name] for name in _PER_PARTITION]
        workers: list[tuple[tuple[str, ...], float | HistogramValue]] = []
        topic_rates: dict[str, list[float]] = {}
        no_rate = (0.0, 0.0)
        for r in rows:
            s = r.stats
            labels = (*flow, s.remote_topic, str(r.partition))
            values = _partition_values(s, r.lag_records, r.lag_seconds, bool(r.stalled))
            for column, value in zip(columns, values, strict=False):  # the worker: below
                if value is not None:  # unknown: no sample
                    column.append((labels, value))
            if s.worker is not None:
                workers.append((labels, float(s.worker)))
            record_rate, byte_rate = rates.get((r.topic, r.partition), no_rate)
            acc = topic_rates.get(s.remote_topic)
            if acc is None:
                acc = topic_rates[s.remote_topic] = [0.0, 0.0]
            acc[0] += record_rate
            acc[1] += byte_rate
        for name, column in samples.items():
            yield Family(_SPEC[name], tuple(column))
        yield Family(
            _SPEC["record_rate"], tuple(((*flow, t), r[0]) for t, r in sorted(topic_rates.items()))
        )
        yield Family(
            _SPEC["byte_rate"], tuple(((*flow, t), r[1]) for t, r in sorted(topic_rates.items()))
        )
        yield Family(
            _SPEC["replication_latency_seconds"],
            tuple(((*flow, t), h[0].value()) for t, h in sorted(histograms.items())),
        )
        yield Family(
            _SPEC["record_age_seconds"],
            tuple(((*flow, t), h[1].value()) for t, h in sorted(histograms.items())),
        )
        yield from self._flow_families(summary)
        yield Family(_SPEC["partition_worker"], tuple(workers))
        for name, per_worker in self._worker_samples().items():
            yield Family(_SPEC[name], tuple((labels, value) for _, labels, value in per_worker))

    def _worker_samples(self) -> dict[str, list[tuple[int, tuple[str, ...], float]]]:
        """The samples of :data:`_PER_WORKER` as ``(slot, labels, value)``, in slot order."""
        flow = (self.source, self.target)
        samples: dict[str, list[tuple[int, tuple[str, ...], float]]] = {
            name: [] for name in _PER_WORKER
        }
        for w in self.workers:
            labels = (*flow, str(w.slot))
            samples["worker_partitions"].append((w.slot, labels, float(w.partitions)))
            samples["worker_record_rate"].append((w.slot, labels, w.records_per_second))
            samples["worker_restarts_total"].append((w.slot, labels, float(w.restarts)))
        return samples

    def _flow_families(self, summary: FlowSummary) -> Iterator[Family]:
        """The families with one sample for the whole flow."""
        flow = (self.source, self.target)
        checkpoint = self.checkpoint_latency.histogram
        assert checkpoint is not None
        yield Family(_SPEC["checkpoint_latency_seconds"], ((flow, checkpoint.value()),))
        yield Family(_SPEC["checkpoints_total"], ((flow, float(self.checkpoints_emitted)),))
        yield Family(_SPEC["offset_syncs_total"], ((flow, float(self.offset_syncs_emitted)),))
        yield Family(_SPEC["new_incarnations_total"], ((flow, float(self.new_incarnations)),))
        yield Family(_SPEC["stalled_partitions"], ((flow, float(summary.stalled_partitions)),))
        yield Family(_SPEC["flow_stalled"], ((flow, 1.0 if summary.stalled else 0.0),))


# -- incremental reads (a scraper that keeps what it wrote) ---------------------------------------

SampleKey = tuple[str, int] | str | int | tuple[()]
Sample = tuple[SampleKey, tuple[str, ...], float | HistogramValue | None]


class FamilyDelta(NamedTuple):
    """What changed in the samples of one :class:`MetricSpec` since a cursor's last read.

    Each sample has a key: ``(topic, partition)`` (source partition) for per-partition
    metrics, the remote topic for per-topic ones, the worker slot for per-worker ones, ``()``
    for the flow's. ``keys`` is every
    sample's key in the order :meth:`StatsRegistry.families` yields them, given when that set
    or order changed (``None``: as last read); ``changed`` holds ``(key, labels, value)`` for
    the samples that are new or whose value changed (value ``None``: no sample now)."""

    spec: MetricSpec
    keys: tuple[SampleKey, ...] | None
    changed: list[Sample]


#: The per-partition metrics, in the order of :data:`METRICS` and of :func:`_partition_values`.
_PER_PARTITION = (
    "records_total", "bytes_total", "lost_records_total", "replication_lag_records",
    "replication_lag_seconds", "partition_stalled",
)  # fmt: skip


def _partition_values(
    s: PartitionStats, lag: int | None, lag_seconds: float | None, stalled: bool
) -> tuple[float | None, ...]:
    """A partition's samples of :data:`_PER_PARTITION`, then of ``partition_worker``
    (``None``: no sample): :func:`_value_columns` of one partition."""
    return tuple(c[0] for c in _value_columns([s], [lag], [lag_seconds], [stalled]))


def _value_columns(
    stats: list[PartitionStats],
    lags: list[int | None],
    lag_seconds: list[float | None],
    stalled: list[bool],
) -> list[list[float | None]]:
    """The samples of :data:`_PER_PARTITION`, then of ``partition_worker`` (``None``: no
    sample), of partitions in columns, from their counters and what :func:`partition_lags` and
    the stall rule give of them."""
    return [
        list(map(float, map(_RECORDS, stats))),
        list(map(float, map(_BYTES, stats))),
        list(map(float, map(_LOST, stats))),
        [None if lag is None else float(lag) for lag in lags],
        lag_seconds,
        list(map(float, stalled)),
        [None if w is None else float(w) for w in map(_WORKER_SLOT, stats)],
    ]


_COLUMNS = range(len(_PER_PARTITION) + 1)
_RECORDS = operator.attrgetter("_record_count")
_BYTES = operator.attrgetter("_byte_count")
_LOST = operator.attrgetter("_lost_records")
_ERROR = operator.attrgetter("_error")
_WORKER_SLOT = operator.attrgetter("_worker")
_REMOTE_TOPIC = operator.attrgetter("remote_topic")
_ABSENT = float("nan")  # a sample not written yet: unequal to every value, None included

#: The per-worker metrics (``tasks.max`` > 1), in the order of :data:`METRICS`.
_PER_WORKER = ("worker_partitions", "worker_record_rate", "worker_restarts_total")


class MetricsCursor:
    """Reads a :class:`StatsRegistry`'s samples incrementally: each :meth:`read` returns the
    flow's summary and, per metric of :data:`METRICS`, only the samples that changed since the
    previous read (all of them the first time). The work is proportional to what changed:
    the partitions whose counters, position, end offset, error or worker were set since the
    last read (the registry collects them as they are written), the partitions with records
    waiting (their lag in seconds and stall state change with time), the partitions still
    counted in a rate, and the topics (rates; histograms are rewritten only when they were
    observed). The per-worker samples (``tasks.max`` > 1: a few) are all given at each read.

    Replaying every delta onto the previous samples gives what :meth:`StatsRegistry.scrape`
    returns at the same time. Make one with :meth:`StatsRegistry.cursor`, one per reader; not
    thread-safe."""

    def __init__(self, registry: StatsRegistry) -> None:
        self.registry = registry
        self._pending: set[PartitionStats] = set()  # changes other cursors took for this one
        self._members = -1
        # The partitions in columns, by slot (their order in the registry at the last change of
        # its membership): key, counters, labels and, per column of _partition_values, the
        # value last given (absent: not given yet). The sets and the errors are of slots.
        self._slots: dict[PartitionStats, int] = {}
        self._keys: list[tuple[str, int]] = []
        self._stats: list[PartitionStats] = []
        self._labels: list[tuple[str, ...]] = []
        self._known: list[list[float | None]] = [[] for _ in _COLUMNS]
        self._topic_names: set[str] = set()
        self._waiting: set[int] = set()  # records waiting at the last read
        self._moving: set[int] = set()  # a rate other than 0 at the last read
        self._failing: dict[int, str] = {}
        self._progress = 0.0
        self._read_at: float | None = None
        self._topics: tuple[str, ...] = ()
        self._rates: dict[str, tuple[float, float]] = {}
        self._histograms: tuple[str, ...] = ()
        self._observed: dict[str, tuple[float, int, float, int]] = {}

    def read(self, now: float | None = None) -> tuple[FlowSummary, list[FamilyDelta]]:
        """The flow's summary and what changed (``now``: :func:`time.monotonic` time)."""
        reg = self.registry
        now = time.monotonic() if now is None else now
        changes = reg._take_changes(self)
        keys: tuple[SampleKey, ...] | None = None
        with reg._lock:
            histograms = dict(reg._topic_histograms)
            if reg._members != self._members:
                self._members = reg._members
                keys, fresh = self._rejoin(list(reg._partitions.items()))
                changes.update(fresh)
        slots = self._slots
        todo = {slot for s in changes if (slot := slots.get(s)) is not None}
        partitions, summary, rates = self._partitions(todo, now)
        self._read_at = now
        deltas = [FamilyDelta(_SPEC[name], keys, partitions[name]) for name in _PER_PARTITION]
        deltas += self._topic_rates(rates)
        deltas += self._topic_histograms(histograms)
        for family in reg._flow_families(summary):
            ((labels, value),) = family.samples
            deltas.append(FamilyDelta(family.spec, ((),), [((), labels, value)]))
        deltas.append(FamilyDelta(_SPEC["partition_worker"], keys, partitions["partition_worker"]))
        for name, per_worker in reg._worker_samples().items():  # few workers: all of them
            changed: list[Sample] = [(slot, labels, value) for slot, labels, value in per_worker]
            deltas.append(
                FamilyDelta(_SPEC[name], tuple(slot for slot, _, _ in per_worker), changed)
            )
        return summary, deltas

    def _rejoin(
        self, items: list[tuple[tuple[str, int], PartitionStats]]
    ) -> tuple[tuple[SampleKey, ...], list[PartitionStats]]:
        """Partitions were added or dropped: the slots follow, keeping what was given of the
        partitions still there; the keys in order, and the partitions new to this cursor."""
        flow = (self.registry.source, self.registry.target)
        stats = [s for _, s in items]
        was = list(map(self._slots.get, stats, repeat(-1)))  # each one's slot before
        slot_now = {j: i for i, j in enumerate(was) if j >= 0}
        labels = self._labels
        self._labels = [
            labels[j] if j >= 0 else (*flow, s.remote_topic, str(key[1]))
            for (key, s), j in zip(items, was, strict=True)
        ]
        self._known = [[known[j] if j >= 0 else _ABSENT for j in was] for known in self._known]
        self._slots = {s: i for i, s in enumerate(stats)}
        self._keys = [key for key, _ in items]
        self._stats = stats
        self._waiting = {slot_now[j] for j in self._waiting if j in slot_now}
        self._moving = {slot_now[j] for j in self._moving if j in slot_now}
        self._failing = {slot_now[j]: e for j, e in self._failing.items() if j in slot_now}
        self._progress = max(map(_PROGRESS, stats), default=0.0)
        self._topics = ()  # the topics are counted again
        self._topic_names = set(map(_REMOTE_TOPIC, stats))
        return tuple(self._keys), [s for s, j in zip(stats, was, strict=True) if j < 0]

    def _partitions(
        self, todo: set[int], now: float
    ) -> tuple[dict[str, list[Sample]], FlowSummary, dict[str, list[float]]]:
        """The changed samples of the partitions in ``todo`` (slots changed since the last
        read) or waiting, the flow's summary and the topics' rates. Read in columns: each
        attribute of all those partitions at once, each sample compared with what was last
        given at C level; the partitions only waiting give the samples that change with time
        alone (lag in seconds, stalled)."""
        reg = self.registry
        now_ms = int(time.time() * 1000)
        waiting, stall_after = self._waiting, reg.stall_after
        changed: dict[str, list[Sample]] = {
            name: [] for name in (*_PER_PARTITION, "partition_worker")
        }
        slots = list(todo)
        ours = len(slots)  # slots[:ours]: every sample; slots[ours:]: those changing with time
        slots += waiting.difference(todo)
        stats = list(map(self._stats.__getitem__, slots))
        lags, seconds, waits = _lags(stats, now_ms)
        at = list(map(_PROGRESS, stats))
        stalls = [w and now - t > stall_after for w, t in zip(waits, at, strict=True)]
        self._progress = max(self._progress, max(at, default=self._progress))
        waiting.difference_update(slots)
        waiting.update(compress(slots, waits))
        mine = stats[:ours]
        self._errors(slots[:ours], list(map(_ERROR, mine)))
        # every sample of slots[:ours], the lag in seconds and the stall flag of all slots
        columns = _value_columns(mine, lags[:ours], seconds, stalls)
        for known, out, values in zip(self._known, changed.values(), columns, strict=True):
            self._compare(slots[: len(values)], values, known, out)
        stuck = list(compress(slots, stalls))
        summary = self._summary(stuck, now_ms, now)
        return changed, summary, self._topic_sums(todo, now)

    def _errors(self, slots: list[int], errors: list[str | None]) -> None:
        """The errors of the partitions of ``slots`` now (kept for the summary)."""
        failing = self._failing
        if failing or any(errors):
            for slot, error in zip(slots, errors, strict=True):
                if error:
                    failing[slot] = error
                else:
                    failing.pop(slot, None)

    def _compare(
        self, slots: list[int], values: list[float | None], known: list[float | None],
        out: list[Sample],
    ) -> None:  # fmt: skip
        """Add to ``out`` the samples of ``slots`` whose value is not the one ``known`` (last
        given), and remember them."""
        differ = list(map(operator.ne, values, map(known.__getitem__, slots)))
        if not any(differ):
            return
        moved, now = list(compress(slots, differ)), list(compress(values, differ))
        deque(map(known.__setitem__, moved, now), maxlen=0)
        keys, labels = map(self._keys.__getitem__, moved), map(self._labels.__getitem__, moved)
        out.extend(zip(keys, labels, now, strict=True))

    def _summary(self, stuck: list[int], now_ms: int, now: float) -> FlowSummary:
        """The flow's summary, given its stalled partitions (``stuck``) at this read."""
        reg = self.registry
        first = None
        if stuck:
            slot = min(stuck, key=self._keys.__getitem__)
            first = reg._row(self._keys[slot], self._stats[slot], now_ms, now)
        keys = self._keys
        failing = [(*keys[slot], e) for slot, e in self._failing.items()]
        return reg._summary_of(failing, first, len(stuck), self._progress)

    def _topic_sums(self, todo: set[int], now: float) -> dict[str, list[float]]:
        """Each topic's record and byte rates: the sums of its partitions' (only those that
        moved since their rate was last 0 are read)."""
        sums: dict[str, list[float]] = {t: [0.0, 0.0] for t in self._topic_names}
        moving, read_at = self._moving, self._read_at
        slots = list(todo | moving)
        stats = list(map(self._stats.__getitem__, slots))
        if read_at is not None:  # moving again after their rates were 0
            for slot, s in zip(slots, stats, strict=True):
                if slot not in moving:
                    s.idle_until(read_at)
        rates = list(map(PartitionStats.rates, stats, repeat(now)))
        nonzero = list(map(any, rates))
        moving.difference_update(slots)
        moving.update(compress(slots, nonzero))
        for topic, (record_rate, byte_rate) in compress(
            zip(map(_REMOTE_TOPIC, stats), rates, strict=True), nonzero
        ):
            acc = sums[topic]
            acc[0] += record_rate
            acc[1] += byte_rate
        return sums

    def _topic_rates(self, rates: dict[str, list[float]]) -> list[FamilyDelta]:
        flow = (self.registry.source, self.registry.target)
        topics = tuple(sorted(rates))
        keys: tuple[SampleKey, ...] | None = None
        if topics != self._topics:
            self._topics = keys = topics
            self._rates = {}
        records: list[Sample] = []
        nbytes: list[Sample] = []
        for topic in topics:
            record_rate, byte_rate = rates[topic]
            last = self._rates.get(topic)
            if last is None or last[0] != record_rate:
                records.append((topic, (*flow, topic), record_rate))
            if last is None or last[1] != byte_rate:
                nbytes.append((topic, (*flow, topic), byte_rate))
            self._rates[topic] = (record_rate, byte_rate)
        return [
            FamilyDelta(_SPEC["record_rate"], keys, records),
            FamilyDelta(_SPEC["byte_rate"], keys, nbytes),
        ]

    def _topic_histograms(
        self, histograms: dict[str, tuple[Histogram, Histogram]]
    ) -> list[FamilyDelta]:
        flow = (self.registry.source, self.registry.target)
        topics = tuple(sorted(histograms))
        keys: tuple[SampleKey, ...] | None = None
        if topics != self._histograms:
            self._histograms = keys = topics
        latency: list[Sample] = []
        age: list[Sample] = []
        for topic in topics:
            lat_h, age_h = histograms[topic]
            observed = (lat_h._sum, sum(lat_h._counts), age_h._sum, sum(age_h._counts))
            last = self._observed.get(topic)
            if observed == last:
                continue
            self._observed[topic] = observed
            if last is None or observed[:2] != last[:2]:
                latency.append((topic, (*flow, topic), lat_h.value()))
            if last is None or observed[2:] != last[2:]:
                age.append((topic, (*flow, topic), age_h.value()))
        return [
            FamilyDelta(_SPEC["replication_latency_seconds"], keys, latency),
            FamilyDelta(_SPEC["record_age_seconds"], keys, age),
        ]
