"""What a running flow reports: its state, its partitions, their replication lag and stalls.

The public status model: a :class:`FlowStatus` (what ``Replicator.status()`` returns) holds a
:class:`PartitionStatus` per source partition and a :class:`WorkerStatus` per copier worker
process, in a :class:`FlowState`; a :class:`FlowSummary` is its state and errors without the
partitions. The lag math, the same for a running flow and for ``mirrorlib status``:
:func:`partition_lags` (positions, end offsets and newest replicated timestamps, in columns),
:func:`data_lag` and :class:`FlowLagView`. Values and pure functions only: the live counters
they are read from are :mod:`mirrorlib.core.counters`, the metrics :mod:`mirrorlib.core.metrics`.

**Unknown is not zero.** A partition's lag is ``None`` until both its position and the source's
end offset are known, and a flow's lag is ``None`` until at least one partition's is.

**Stalls.** A partition with records waiting and no progress (its position did not move) for
:data:`STALL_AFTER_S` is *stalled*; so is a flow whose target producer reports an idempotence or
coordinator problem (:func:`~mirrorlib.core.stalls.stall_reason`) until a partition makes
progress again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import Generic, Protocol, TypeVar

import attrs

__all__ = [
    "STALL_AFTER_S",
    "FlowLagView",
    "FlowState",
    "FlowStatus",
    "FlowSummary",
    "Lagging",
    "PartitionStatus",
    "WorkerStatus",
    "data_lag",
    "partition_lags",
]

#: Seconds a partition may have records waiting without its position moving before it is
#: reported stalled. Positions move in memory on every acknowledgement (at-least-once) or
#: transaction commit (exactly-once, every ``transaction.boundary.interval.ms``), so this does not
#: depend on ``offset.flush.interval.ms``.
STALL_AFTER_S = 30.0


class Lagging(Protocol):
    """A partition's lag as :func:`data_lag` reads it."""

    @property
    def lag_records(self) -> int | None: ...

    @property
    def internal(self) -> bool: ...


def data_lag(partitions: Iterable[Lagging]) -> tuple[int | None, int]:
    """The lag of a flow: records waiting in its data partitions whose lag is known (``None``
    when none is: unknown is not zero), and how many data partitions' lag is unknown. Internal
    partitions (heartbeats) are not counted."""
    known = 0
    total = 0
    unknown = 0
    for p in partitions:
        if p.internal:
            continue
        lag = p.lag_records
        if lag is None:
            unknown += 1
        else:
            known += 1
            total += lag
    return (total if known else None), unknown


L = TypeVar("L", bound=Lagging)


class FlowLagView(Generic[L]):
    """What a view of one flow derives from its partitions, the same for the in-process
    :class:`FlowStatus` and ``mirrorlib status``'s :class:`~mirrorlib.core.audit.FlowHealth`."""

    source: str
    target: str
    partitions: tuple[L, ...]

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"

    @property
    def data_partitions(self) -> tuple[L, ...]:
        """The partitions of user topics (not :attr:`internal_partitions`)."""
        return tuple(p for p in self.partitions if not p.internal)

    @property
    def internal_partitions(self) -> tuple[L, ...]:
        """The partitions of replicated MM2 topics (heartbeats)."""
        return tuple(p for p in self.partitions if p.internal)

    @property
    def lag_records(self) -> int | None:
        """Records waiting in data partitions whose lag is known; ``None`` when none is."""
        return data_lag(self.partitions)[0]

    @property
    def unknown_lag_partitions(self) -> int:
        """Data partitions whose lag is not known yet (not counted in :attr:`lag_records`)."""
        return data_lag(self.partitions)[1]


class FlowState(StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    DEGRADED = "degraded"  # running, but some partitions or components report errors
    STALLED = "stalled"  # running, but records are waiting and nothing moves (see `stalled`)
    FAILED = "failed"  # stopped by an error (e.g. data loss detected with the "stop" setting)
    STOPPED = "stopped"


def partition_lags(
    positions: Sequence[int | None], ends: Sequence[int | None], tails: Sequence[int | None],
    now_ms: int,
) -> tuple[list[int | None], list[float | None], list[bool]]:  # fmt: skip
    """The replication lag of partitions given in columns (position, source end offset and
    timestamp of the newest replicated record of each): the records between position and end
    offset, and, while some wait, the age of the newest replicated record in seconds (0 when
    caught up) — ``None``: unknown — and whether records wait (the end offset is past the
    position, or the position is not known yet). One pass per column, no object per partition."""
    lags: list[int | None] = [
        None if e is None or p is None else (e - p if e > p else 0)
        for p, e in zip(positions, ends, strict=True)
    ]
    seconds: list[float | None] = [
        None
        if lag is None
        else 0.0
        if not lag
        else None
        if t is None
        else max(now_ms - t, 0) / 1000.0
        for lag, t in zip(lags, tails, strict=True)
    ]
    waiting = [e is not None and (p is None or e > p) for p, e in zip(positions, ends, strict=True)]
    return lags, seconds, waiting


@attrs.frozen
class PartitionStatus:
    """One replicated source partition, as seen by this process."""

    topic: str  # source topic
    partition: int
    remote_topic: str
    position: int | None  # next upstream offset to replicate (None: not known yet)
    end_offset: int | None  # source log end offset last seen (None: not known yet)
    lag_records: int | None  # None: unknown
    lag_seconds: float | None  # None: unknown
    record_count: int
    byte_count: int
    last_record_age_ms: int | None
    last_replication_latency_ms: int | None
    lost_records: int
    error: str | None
    stalled: str | None = None  # why the partition is stalled, if it is
    internal: bool = False  # an MM2 topic (heartbeats), not user data
    worker: int | None = None  # the copier worker slot copying it (tasks.max > 1)


@attrs.frozen
class WorkerStatus:
    """One copier worker process of a flow (``tasks.max`` > 1), as its supervisor sees it."""

    slot: int
    pid: int | None  # None while the slot has no process (waiting to restart)
    partitions: int
    records_per_second: float
    restarts: int
    last_error: str | None = None


@attrs.frozen
class FlowSummary:
    """A flow's state and errors without its partitions (see
    :meth:`~mirrorlib.core.counters.StatsRegistry.scrape`)."""

    source: str
    target: str
    state: FlowState
    errors: tuple[str, ...]
    stalled: str | None  # why the flow is stalled, if it is
    stalled_partitions: int = 0


@attrs.frozen
class FlowStatus(FlowLagView["PartitionStatus"]):
    source: str
    target: str
    state: FlowState
    errors: tuple[str, ...]
    partitions: tuple[PartitionStatus, ...]
    last_heartbeat_ms: int | None
    last_checkpoint_ms: int | None
    checkpoints_emitted: int
    offset_syncs_emitted: int
    stalled: str | None = None  # why the flow is stalled, if it is
    workers: tuple[WorkerStatus, ...] = ()  # copier worker processes (tasks.max > 1)
    #: source partitions copied again from their first offset: a new incarnation of the source
    #: or remote topic (deleted and created again; mirrorlib.core.incarnations)
    new_incarnations: int = 0
    #: the last such events (topic, partition, what happened), newest last
    incarnation_events: tuple[str, ...] = ()
