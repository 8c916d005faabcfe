"""What a running flow reports: metrics with MM2's names, replication lag, state and errors.

Metrics follow MM2's names and tags (``record-count``, ``record-age-ms``,
``replication-latency-ms``, ``byte-rate``/``byte-count``, ``checkpoint-latency-ms``; tagged by
source, target, remote topic and partition) and add what MM2 lacks: replication lag in records
(``replication-lag-records``) and in seconds (``replication-lag-seconds``) per partition, the
offset ranges lost to source truncation (``lost-records``), and how fresh checkpoints are
(``checkpoint-commit-age-seconds``, ``checkpoint-sync-age-seconds``; defined in
:mod:`mirrorlib.runtime.checkpoints`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from enum import StrEnum

import attrs

__all__ = [
    "FlowState",
    "FlowStatus",
    "Metric",
    "PartitionStats",
    "PartitionStatus",
    "StatsRegistry",
]


class FlowState(StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    DEGRADED = "degraded"  # running, but some partitions or components report errors
    FAILED = "failed"  # stopped by an error (e.g. data loss detected with the "stop" setting)
    STOPPED = "stopped"


@attrs.frozen
class Metric:
    name: str
    tags: tuple[tuple[str, str], ...]
    value: float


@attrs.frozen
class PartitionStatus:
    """One replicated source partition, as seen by this process."""

    topic: str  # source topic
    partition: int
    remote_topic: str
    position: int | None  # next upstream offset to replicate (None: not started)
    end_offset: int | None  # source log end offset last seen
    lag_records: int | None
    lag_seconds: float | None
    record_count: int
    byte_count: int
    last_record_age_ms: int | None
    last_replication_latency_ms: int | None
    lost_records: int
    error: str | None


@attrs.frozen
class FlowStatus:
    source: str
    target: str
    state: FlowState
    errors: tuple[str, ...]
    partitions: tuple[PartitionStatus, ...]
    last_heartbeat_ms: int | None
    last_checkpoint_ms: int | None
    checkpoints_emitted: int
    offset_syncs_emitted: int

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"

    @property
    def lag_records(self) -> int:
        return sum(p.lag_records or 0 for p in self.partitions)


class _Window:
    """last/min/max/avg of a value over the lifetime of the stats (MM2 uses windowed stats)."""

    __slots__ = ("count", "last", "max", "min", "total")

    def __init__(self) -> None:
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

    def items(self, name: str) -> Iterator[tuple[str, float]]:
        if self.last is None or self.min is None or self.max is None:
            return
        yield name, self.last
        yield f"{name}-min", self.min
        yield f"{name}-max", self.max
        yield f"{name}-avg", self.total / self.count


class PartitionStats:
    """Mutable counters for one source partition; updated by the copier thread only."""

    __slots__ = (
        "age",
        "byte_count",
        "end_offset",
        "error",
        "latency",
        "lost_records",
        "position",
        "record_count",
        "remote_topic",
        "started",
        "tail_timestamp_ms",
    )

    def __init__(self, remote_topic: str) -> None:
        self.remote_topic = remote_topic
        self.record_count = 0
        self.byte_count = 0
        self.position: int | None = None
        self.end_offset: int | None = None
        self.tail_timestamp_ms: int | None = None  # timestamp of the last replicated record
        self.lost_records = 0
        self.error: str | None = None
        self.age = _Window()
        self.latency = _Window()
        self.started = time.monotonic()


class StatsRegistry:
    """All counters of one flow in this process, safe to read from other threads."""

    def __init__(self, source: str, target: str) -> None:
        self.source = source
        self.target = target
        self._lock = threading.Lock()
        self._partitions: dict[tuple[str, int], PartitionStats] = {}
        self._errors: dict[str, str] = {}
        self.state = FlowState.STARTING
        self.last_heartbeat_ms: int | None = None
        self.last_checkpoint_ms: int | None = None
        self.checkpoints_emitted = 0
        self.offset_syncs_emitted = 0
        self.checkpoint_latency = _Window()
        # see mirrorlib.runtime.checkpoints: commit -> checkpoint bound, and the syncs' age
        self.checkpoint_commit_age = _Window()
        self.checkpoint_sync_age = _Window()

    def partition(self, topic: str, partition: int, remote_topic: str) -> PartitionStats:
        key = (topic, partition)
        stats = self._partitions.get(key)
        if stats is None:
            with self._lock:
                stats = self._partitions.setdefault(key, PartitionStats(remote_topic))
        return stats

    def drop_partition(self, topic: str, partition: int) -> None:
        with self._lock:
            self._partitions.pop((topic, partition), None)

    def set_error(self, component: str, message: str | None) -> None:
        with self._lock:
            if message is None:
                self._errors.pop(component, None)
            else:
                self._errors[component] = message

    def errors(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(f"{k}: {v}" for k, v in sorted(self._errors.items()))

    def snapshot(self) -> FlowStatus:
        now_ms = int(time.time() * 1000)
        with self._lock:
            items = sorted(self._partitions.items())
        partitions = []
        for (topic, partition), s in items:
            lag = None
            if s.end_offset is not None and s.position is not None:
                lag = max(s.end_offset - s.position, 0)
            lag_seconds: float | None = None
            if lag == 0:
                lag_seconds = 0.0
            elif lag is not None and s.tail_timestamp_ms is not None:
                lag_seconds = max(now_ms - s.tail_timestamp_ms, 0) / 1000.0
            partitions.append(
                PartitionStatus(
                    topic=topic,
                    partition=partition,
                    remote_topic=s.remote_topic,
                    position=s.position,
                    end_offset=s.end_offset,
                    lag_records=lag,
                    lag_seconds=lag_seconds,
                    record_count=s.record_count,
                    byte_count=s.byte_count,
                    last_record_age_ms=None if s.age.last is None else int(s.age.last),
                    last_replication_latency_ms=(
                        None if s.latency.last is None else int(s.latency.last)
                    ),
                    lost_records=s.lost_records,
                    error=s.error,
                )
            )
        errors = self.errors() + tuple(
            f"{p.topic}-{p.partition}: {p.error}" for p in partitions if p.error
        )
        state = self.state
        if state is FlowState.RUNNING and errors:
            state = FlowState.DEGRADED
        return FlowStatus(
            source=self.source,
            target=self.target,
            state=state,
            errors=errors,
            partitions=tuple(partitions),
            last_heartbeat_ms=self.last_heartbeat_ms,
            last_checkpoint_ms=self.last_checkpoint_ms,
            checkpoints_emitted=self.checkpoints_emitted,
            offset_syncs_emitted=self.offset_syncs_emitted,
        )

    def metrics(self) -> list[Metric]:
        """Every metric of this flow, with MM2's names and tags."""
        out: list[Metric] = []
        base = (("source", self.source), ("target", self.target))
        status = self.snapshot()
        with self._lock:
            items = sorted(self._partitions.items())
        lag = {(p.topic, p.partition): p for p in status.partitions}
        for (topic, partition), s in items:
            tags = (*base, ("topic", s.remote_topic), ("partition", str(partition)))
            elapsed = max(time.monotonic() - s.started, 1e-9)
            out.append(Metric("record-count", tags, s.record_count))
            out.append(Metric("record-rate", tags, s.record_count / elapsed))
            out.append(Metric("byte-count", tags, s.byte_count))
            out.append(Metric("byte-rate", tags, s.byte_count / elapsed))
            out.extend(Metric(n, tags, v) for n, v in s.age.items("record-age-ms"))
            out.extend(Metric(n, tags, v) for n, v in s.latency.items("replication-latency-ms"))
            out.append(Metric("lost-records", tags, s.lost_records))
            ps = lag[(topic, partition)]
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
        return out
