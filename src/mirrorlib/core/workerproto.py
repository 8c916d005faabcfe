"""What a flow's parent process and its copier worker processes tell each other.

With ``tasks.max`` > 1 a flow copies in worker processes (:mod:`mirrorlib.runtime.workers.child`),
driven by a supervisor in the parent (:mod:`mirrorlib.runtime.workers.supervisor`) over the worker's
stdin (parent -> worker) and stdout (worker -> parent). Each message is one *frame*: a 4-byte
big-endian length, then the pickled message. Both ends run the same installed mirrorlib (the
parent starts ``sys.executable -m mirrorlib.runtime.workers.child``), and the messages are plain
values: the flow's settings as data, never code of the embedding program.

Parent -> worker: :class:`Start` (once, first), then :class:`Topics` and :class:`Assign`
whenever they change (the first :class:`Assign` follows :class:`Start` at once),
:class:`SyncsFailed` (offset syncs of the worker's that the parent could not write),
:class:`Keepalive` every :data:`REPORT_INTERVAL_S` (a worker that hears nothing from its parent
for :func:`parent_silence_limit` exits: its parent is stopped or hung, and the group will give
its partitions to another node), :class:`Stop` to end. Worker -> parent: :class:`Report` every :data:`REPORT_INTERVAL_S` (the heartbeat, with
per-partition counters), :class:`Applied` once it holds exactly an assignment (every partition
it dropped is committed and released; it is sent only after the worker's transactional producer
was initialised, so the first one also says that any earlier process of the slot is fenced),
:class:`Syncs` (offset syncs, written by the parent) and :class:`Exit` (why it ends).

Pure: frames are made and taken apart here (:func:`encode_frame`, :func:`frame_size`,
:func:`decode_frame`); the streams are read and written by :mod:`mirrorlib.runtime.workers.frames`.
"""

from __future__ import annotations

import pickle
import struct
from collections.abc import Mapping
from typing import Any

import attrs

from mirrorlib.core.catalog import RemoteTopic
from mirrorlib.core.counters import PartitionStats
from mirrorlib.core.records import OffsetSync
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.syncs import EmittedSync, SyncLineage
from mirrorlib.errors import WorkerProtocolError

__all__ = [
    "DEFAULT_SESSION_TIMEOUT_S",
    "EXIT_FAILED",
    "EXIT_FENCED",
    "EXIT_PARENT_SILENT",
    "FRAME_HEADER_SIZE",
    "MAX_FRAME",
    "REPORT_INTERVAL_S",
    "Applied",
    "Assign",
    "Exit",
    "Keepalive",
    "PartitionReport",
    "Report",
    "ReportMerger",
    "Start",
    "Stop",
    "Syncs",
    "SyncsFailed",
    "Topics",
    "WorkerProtocolError",
    "decode_frame",
    "encode_frame",
    "frame_size",
    "parent_silence_limit",
    "report_of",
]

#: A worker's exit status when its producer was fenced (another process took its partitions):
#: it writes nothing more.
EXIT_FENCED = 3
#: A worker's exit status when the flow fails (data loss with ``data.loss.action=fail``): its
#: slot is not restarted.
EXIT_FAILED = 4
#: A worker's exit status when its parent sent nothing for longer than it waits
#: (:func:`parent_silence_limit`): it left without committing.
EXIT_PARENT_SILENT = 5

Key = tuple[str, int]

#: seconds between two reports (heartbeats) of a worker
REPORT_INTERVAL_S = 0.5
#: the source group's session timeout when the flow sets none (librdkafka's default)
DEFAULT_SESSION_TIMEOUT_S = 45.0
#: a frame larger than this is refused (a corrupt length)
MAX_FRAME = 256 * 1024 * 1024
_LEN = struct.Struct(">I")
#: bytes of a frame's header: the length of its body
FRAME_HEADER_SIZE = _LEN.size


@attrs.frozen
class Start:
    """The worker's job: copy for flow ``settings`` as slot ``slot`` of ``tasks``, writing
    through the transactional producer ``transactional_id``."""

    settings: FlowSettings
    slot: int
    transactional_id: str
    offsets_topic_partitions: int
    parent_pid: int
    log_level: int


@attrs.frozen
class Topics:
    """The flow's remote topics (source topic -> remote topic), as the metadata thread knows
    them."""

    topics: Mapping[str, RemoteTopic]


@attrs.frozen
class Assign:
    """The partitions the worker is to copy from now on (the whole set, numbered). Of those it
    drops, the ``lost`` ones were lost to another node (its group session ended): the worker
    aborts its open transaction instead of committing them (what it copied since its last
    commit, of every partition, is copied again from the committed positions)."""

    version: int
    partitions: frozenset[Key]
    lost: frozenset[Key] = frozenset()


@attrs.frozen
class Stop:
    """Commit and end."""


@attrs.frozen
class Keepalive:
    """The parent runs (sent every :data:`REPORT_INTERVAL_S`)."""


def parent_silence_limit(settings: FlowSettings) -> float:
    """Seconds a worker goes on without any frame from its parent before it exits, writing
    nothing more: two thirds of the flow's source group session timeout (its parent's group
    membership ends after the whole timeout, and the group then gives the partitions its
    workers copy to another node), at least 6 report intervals. A parent stopped (SIGSTOP, a
    debugger) or hung that long has its workers end before another node copies their
    partitions."""
    raw = settings.source_consumer.get("session.timeout.ms")
    try:
        session = float(raw) / 1000.0 if raw is not None else DEFAULT_SESSION_TIMEOUT_S
    except (TypeError, ValueError):
        session = DEFAULT_SESSION_TIMEOUT_S
    return max(session * 2.0 / 3.0, 6 * REPORT_INTERVAL_S)


@attrs.frozen
class Applied:
    """The worker holds exactly the partitions of assignment ``version``: the ones it dropped
    are committed and no longer written."""

    version: int


@attrs.frozen
class PartitionReport:
    """The counters of one partition in a worker (see :class:`PartitionStats`); ``ages`` and
    ``latencies``: the record-age and replication-latency samples (ms) since the last report;
    ``holding``: which time the process holds the partition (its counters start from 0 each
    time it is given the partition again)."""

    topic: str
    partition: int
    remote_topic: str
    record_count: int
    byte_count: int
    position: int | None
    end_offset: int | None
    tail_timestamp_ms: int | None
    lost_records: int
    error: str | None
    ages: tuple[float, ...] = ()
    latencies: tuple[float, ...] = ()
    holding: int = 0


@attrs.frozen
class Report:
    """A worker's heartbeat: its partitions' counters and its errors."""

    pid: int
    partitions: tuple[PartitionReport, ...]
    errors: tuple[str, ...]
    #: partitions the worker started copying as a new incarnation (counted from its start), and
    #: the last such events (see mirrorlib.core.status.FlowStatus.new_incarnations)
    new_incarnations: int = 0
    incarnation_events: tuple[str, ...] = ()
    #: why the worker's copier is stalled while it reports, if it is: its loop blocked in a
    #: call to the clients (mirrorlib.core.counters.StatsRegistry.loop_stall)
    stalled: str | None = None


_SyncRow = tuple[str, int, int, int, str, int]


def _rows(syncs: tuple[EmittedSync, ...]) -> tuple[_SyncRow, ...]:
    return tuple(
        (s.sync.topic, s.sync.partition, s.sync.upstream_offset, s.sync.downstream_offset,
         s.lineage.writer_id, s.lineage.sequence)
        for s in syncs
    )  # fmt: skip


def _emitted(rows: tuple[_SyncRow, ...]) -> tuple[EmittedSync, ...]:
    return tuple(
        EmittedSync(OffsetSync(topic, partition, up, down), SyncLineage(writer_id, sequence))
        for topic, partition, up, down, writer_id, sequence in rows
    )


@attrs.frozen
class Syncs:
    """Offset syncs of committed records, for the parent to write.

    Pickled as plain tuples (one per sync): pickling the nested ``attrs`` values cost the worker
    about 10 us per sync and the parent 8 us to take apart, now about 1 and 5 us (a worker sends
    one sync per ``offset.lag.max`` records)."""

    syncs: tuple[EmittedSync, ...]

    def __reduce__(self) -> tuple[Any, ...]:
        return _of_rows, (Syncs, _rows(self.syncs))


@attrs.frozen
class SyncsFailed:
    """Offset syncs of the worker's (its :class:`Syncs`) that the parent could not write: the
    worker reports them to its emitter (:meth:`~mirrorlib.core.syncs.OffsetSyncEmitter.mark_failed`),
    which queues the partition's newest sync again so readers re-anchor soon."""

    syncs: tuple[EmittedSync, ...]

    def __reduce__(self) -> tuple[Any, ...]:
        return _of_rows, (SyncsFailed, _rows(self.syncs))


def _of_rows(kind: type[Syncs | SyncsFailed], rows: tuple[_SyncRow, ...]) -> Syncs | SyncsFailed:
    """A :class:`Syncs` or :class:`SyncsFailed` from its pickled rows."""
    return kind(_emitted(rows))


@attrs.frozen
class Exit:
    """The worker ends: ``fenced`` when its producer died or was fenced (its slot may have a
    newer process), ``failed`` when the flow must stop (data loss). ``clean``: it stopped
    cleanly, its last transaction committed (or aborted) and its producer closed, so its slot's
    transactional id has no open transaction and needs no fence; sent only by a worker that
    exits with status 0 right after."""

    reason: str
    fenced: bool = False
    failed: bool = False
    clean: bool = False


def encode_frame(message: object) -> bytes:
    """The frame of ``message``: its header, then its body."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _LEN.pack(len(data)) + data


def frame_size(header: bytes) -> int:
    """The length of the body that follows ``header`` (:data:`FRAME_HEADER_SIZE` bytes);
    :class:`~mirrorlib.errors.WorkerProtocolError` above :data:`MAX_FRAME` (a corrupt stream)."""
    (size,) = _LEN.unpack(header)
    if size > MAX_FRAME:
        raise WorkerProtocolError(f"worker frame of {size} bytes refused (corrupt stream?)")
    return int(size)


def decode_frame(body: bytes) -> Any:
    """The message of a frame's body."""
    return pickle.loads(body)  # only ever from our own parent or worker process


def report_of(
    topic: str,
    partition: int,
    stats: PartitionStats,
    ages: tuple[float, ...] = (),
    latencies: tuple[float, ...] = (),
    holding: int = 0,
) -> PartitionReport:
    """The report of one partition's counters (``holding``: see :class:`PartitionReport`)."""
    return PartitionReport(
        topic=topic,
        partition=partition,
        remote_topic=stats.remote_topic,
        record_count=stats.record_count,
        byte_count=stats.byte_count,
        position=stats.position,
        end_offset=stats.end_offset,
        tail_timestamp_ms=stats.tail_timestamp_ms,
        lost_records=stats.lost_records,
        error=stats.error,
        ages=ages,
        latencies=latencies,
        holding=holding,
    )


class ReportMerger:
    """Applies the reports of one worker process to the parent's counters.

    Counters (records, bytes, lost records) move by the difference to the same process's last
    report of the same holding of the partition, so a restarted worker, or one given the
    partition again (both counting from 0), never moves them back; positions, end offsets and
    errors are taken as reported.
    """

    def __init__(self) -> None:
        self._last: dict[Key, PartitionReport] = {}
        self._incarnations = 0

    def new_incarnations(self, report: Report) -> tuple[str, ...]:
        """The new-incarnation events of ``report`` not counted yet (one per partition)."""
        count = max(report.new_incarnations - self._incarnations, 0)
        self._incarnations = max(report.new_incarnations, self._incarnations)
        if not count:
            return ()
        events = report.incarnation_events[-count:]
        return (*(("",) * (count - len(events))), *events)

    def apply(self, report: PartitionReport, stats: PartitionStats) -> None:
        key = (report.topic, report.partition)
        last = self._last.get(key)
        if last is not None and last.holding != report.holding:
            last = None  # the process was given the partition again: it counts from 0
        self._last[key] = report
        stats.record_count += max(report.record_count - (last.record_count if last else 0), 0)
        stats.byte_count += max(report.byte_count - (last.byte_count if last else 0), 0)
        stats.lost_records += max(report.lost_records - (last.lost_records if last else 0), 0)
        if report.position is not None:
            stats.position = report.position
        if report.end_offset is not None:
            stats.end_offset = report.end_offset
        if report.tail_timestamp_ms is not None:
            stats.tail_timestamp_ms = report.tail_timestamp_ms
        stats.error = report.error
        for age in report.ages:
            stats.age.record(age)
        for latency in report.latencies:
            stats.latency.record(latency)

    def forget(self, key: Key) -> None:
        """The partition left this process: its next report (if it comes back) counts anew."""
        self._last.pop(key, None)
