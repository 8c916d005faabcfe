"""The copier workers' reports, published by a running flow and read by ``mirrorlib status``.

A flow copies in *worker slots*: ``tasks.max = 1`` has one (slot 0, the in-process copier
thread), ``tasks.max = N > 1`` has N worker processes per node (see
:mod:`mirrorlib.runtime.workers.supervisor`), and several nodes (``mirrorlib run`` processes on one file)
may share a flow. Every node writes, every :func:`report_interval` seconds, one
:class:`WorkerReport` per slot to the flow's worker status topic on the target
(``mm2-mirrorlib-status.<source>.internal``, compacted, one partition: see
:attr:`~mirrorlib.FlowConfig.worker_status_topic`), and a last one in state ``stopped`` when it
stops cleanly. ``mirrorlib status`` reads the newest report per slot and shows it with its age
(:class:`WorkerView`); a report older than :func:`silent_after` is *silent*: the node stopped
reporting (killed, hung, cut off), and nothing it said counts any more. A report older than
:func:`expire_after` (ten report intervals, at least a minute) is *expired*, whatever its state
(a silent node that never came back, the ``stopped`` rows of a clean stop): status no longer
shows it, and a live node of the flow writes its tombstone so that the compacted topic forgets
it (:func:`expired_reports`).

The topic is mirrorlib's own, not MM2's ``mm2-status.<source>.internal`` (Connect's status
storage): Connect parses every record of that topic as a connector, task or topic status, with
Connect's states only, so mirrorlib's records stay out of it. Its name is in MM2's namespace of
internal topics (``mm2….internal``: MM2's ``ReplicationPolicy.isInternalTopic``, and the
default ``topics.exclude``), so neither MM2 nor mirrorlib replicates it to another cluster.

Record format (version 1): the key is the JSON object ``{"flow", "node", "slot"}`` (compact,
sorted keys, so compaction keeps one record per slot), the value a JSON object with the fields
of :class:`WorkerReport` and ``"version": 1``. Unknown fields are ignored, and fields added
since (``transactional_id``) may be missing; a newer version is refused
(:class:`~mirrorlib.errors.CodecError`). A tombstone removes a slot.

The reports also tell a node which transactional ids to fence when the group gives it the
partitions of a node that left without a clean stop (:func:`departed_holders`; see
:mod:`mirrorlib.kafka.fencing`).

Pure: no Kafka client here (the topic's I/O is :mod:`mirrorlib.kafka.worker_reports`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any, Final

import attrs

from mirrorlib.core.report import Table, human_duration
from mirrorlib.errors import CodecError

__all__ = [
    "REPORT_VERSION",
    "PartitionLoad",
    "SlotInfo",
    "WorkerReport",
    "WorkerState",
    "WorkerView",
    "decode_report",
    "decode_report_key",
    "departed_holders",
    "encode_report",
    "expire_after",
    "expired_reports",
    "newest_reports",
    "report_interval",
    "report_key",
    "silent_after",
    "slot_reports",
    "view_reports",
    "worker_status_topic",
    "worker_table",
]

REPORT_VERSION: Final = 1
"""The version of the record format this module writes (and the newest it reads)."""

#: bounds of the report interval (seconds): the offset flush interval, within these
MIN_REPORT_INTERVAL_S: Final = 1.0
MAX_REPORT_INTERVAL_S: Final = 10.0
#: a report is silent after this many of its intervals (and at least SILENT_MIN_S)
SILENT_INTERVALS: Final = 3
SILENT_MIN_S: Final = 5.0
#: a report expires after this many of its intervals (and at least EXPIRE_MIN_S)
EXPIRE_INTERVALS: Final = 10
EXPIRE_MIN_S: Final = 60.0
#: partitions listed per worker in the table (``--json`` lists them all)
LISTED_PARTITIONS: Final = 4

Key = tuple[str, int]


def worker_status_topic(source: str) -> str:
    """The worker status topic of the flows from ``source``, on their target."""
    return f"mm2-mirrorlib-status.{source}.internal"


def report_interval(offset_flush_interval_s: float) -> float:
    """How often a node reports its workers: the offset flush interval, kept between
    :data:`MIN_REPORT_INTERVAL_S` and :data:`MAX_REPORT_INTERVAL_S` seconds."""
    return min(max(offset_flush_interval_s, MIN_REPORT_INTERVAL_S), MAX_REPORT_INTERVAL_S)


def silent_after(interval_s: float) -> float:
    """Seconds after which a report written every ``interval_s`` seconds is silent: three
    intervals, at least :data:`SILENT_MIN_S`."""
    return max(SILENT_INTERVALS * interval_s, SILENT_MIN_S)


def expire_after(interval_s: float) -> float:
    """Seconds after which a report written every ``interval_s`` seconds expires: ten
    intervals, at least :data:`EXPIRE_MIN_S`."""
    return max(EXPIRE_INTERVALS * interval_s, EXPIRE_MIN_S)


def _age_s(report: WorkerReport, now_ms: int) -> float:
    return max(now_ms - report.timestamp_ms, 0) / 1000.0


def departed_holders(
    reports: Iterable[WorkerReport],
    partitions: Iterable[Key],
    *,
    flow: str,
    node: str,
    now_ms: int,
) -> list[WorkerReport]:
    """The slots of *other* nodes of ``flow`` that may still hold an open transaction over
    some of ``partitions`` (which the group just gave ``node``): their newest report lists one
    of them, names a transactional id, did not say ``stopped`` (a clean stop commits) and is
    silent (older than :func:`silent_after` its interval): the node was killed, stopped or cut
    off, and its partitions came to ``node`` because it left the group. Their ids are to be
    fenced before ``node`` reads the partitions' positions."""
    wanted = frozenset(partitions)
    return [
        r
        for r in reports
        if r.flow == flow
        and r.node != node
        and r.transactional_id is not None
        and r.state is not WorkerState.STOPPED
        and _age_s(r, now_ms) > silent_after(r.interval_s)
        and wanted.intersection(r.partitions)
    ]


def expired_reports(reports: Iterable[WorkerReport], now_ms: int) -> list[WorkerReport]:
    """The ``reports`` that expired at ``now_ms`` (older than :func:`expire_after` their
    interval, whatever their state): not shown, and tombstoned by a live node."""
    return [r for r in reports if _age_s(r, now_ms) > expire_after(r.interval_s)]


class WorkerState(StrEnum):
    """What a worker slot was doing when its node reported it."""

    STARTING = "starting"  # its process is starting (no report from it yet)
    RUNNING = "running"
    RESTARTING = "restarting"  # its process ended; a new one starts after a back-off
    REPLACED = "replaced"  # its process stopped answering; a new one is taking over (fenced)
    STOPPED = "stopped"  # the node stopped cleanly
    #: the node stopped, but this slot's process did not end cleanly (killed, crashed) and its
    #: transactional id could not be fenced: its open transaction, over the partitions listed,
    #: is fenced by the node that copies them next (:func:`departed_holders`)
    ABANDONED = "abandoned"
    FAILED = "failed"  # the flow failed (no restart)


#: states of a slot that reports on: their reports go silent when the node does
LIVE_STATES: Final = frozenset(
    {WorkerState.STARTING, WorkerState.RUNNING, WorkerState.RESTARTING, WorkerState.REPLACED}
)


@attrs.frozen
class SlotInfo:
    """A worker slot as its node sees it now (what the node knows besides the counters)."""

    slot: int
    pid: int | None  # None while the slot has no process
    state: WorkerState
    partitions: frozenset[Key]
    restarts: int = 0
    last_error: str | None = None
    retry_in_s: float | None = None  # RESTARTING: seconds until the next start


@attrs.frozen
class PartitionLoad:
    """What a node knows of one partition it copies: recent rates and lag (``None``: unknown)."""

    records_per_second: float
    bytes_per_second: float
    lag_records: int | None


@attrs.frozen
class WorkerReport:
    """One worker slot of one node of a flow, at ``timestamp_ms`` (wall clock, ms)."""

    flow: str
    node: str
    slot: int
    pid: int | None
    state: WorkerState
    restarts: int
    partitions: tuple[Key, ...]  # sorted
    records_per_second: float
    bytes_per_second: float
    lag_records: int | None  # over its partitions; None when any is unknown
    timestamp_ms: int
    interval_s: float  # the node reports every interval_s seconds
    tasks_max: int = 1
    last_error: str | None = None
    retry_in_s: float | None = None
    #: the slot's producer's transactional id (``None``: it does not write in transactions)
    transactional_id: str | None = None

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.flow, self.node, self.slot)

    def stopped(self, timestamp_ms: int) -> WorkerReport:
        """The same slot, stopped at ``timestamp_ms`` (nothing copied any more). A failed slot
        stays failed, and an abandoned one stays abandoned, with the partitions it may have
        left a transaction open on."""
        state = WorkerState.STOPPED
        parts: tuple[Key, ...] = ()
        if self.state is WorkerState.FAILED:
            state = WorkerState.FAILED
        elif self.state is WorkerState.ABANDONED:
            state, parts = WorkerState.ABANDONED, self.partitions
        return attrs.evolve(
            self, state=state, partitions=parts, records_per_second=0.0, bytes_per_second=0.0,
            lag_records=None, timestamp_ms=timestamp_ms, retry_in_s=None,
        )  # fmt: skip


def slot_reports(
    slots: Iterable[SlotInfo],
    loads: Mapping[Key, PartitionLoad],
    *,
    flow: str,
    node: str,
    tasks_max: int,
    timestamp_ms: int,
    interval_s: float,
    transactional_id: Callable[[int], str | None] = lambda slot: None,
) -> list[WorkerReport]:
    """One report per slot: its partitions' rates summed, and their lag (``None`` when a
    partition's lag or load is unknown, or the slot is between processes: never 0 for
    unknown)."""
    out = []
    for info in sorted(slots, key=lambda s: s.slot):
        parts = sorted(info.partitions)
        known = [loads[k] for k in parts if k in loads]
        lags = [p.lag_records for p in known]
        unknown = len(known) < len(parts) or None in lags
        if not parts and info.state is not WorkerState.RUNNING:
            unknown = True  # between processes: its partitions wait, their lag is not its own
        lag = None if unknown else sum(x or 0 for x in lags)
        out.append(
            WorkerReport(
                flow=flow, node=node, slot=info.slot, pid=info.pid, state=info.state,
                restarts=info.restarts, partitions=tuple(parts),
                records_per_second=sum(p.records_per_second for p in known),
                bytes_per_second=sum(p.bytes_per_second for p in known),
                lag_records=lag, timestamp_ms=timestamp_ms, interval_s=interval_s,
                tasks_max=tasks_max, last_error=info.last_error, retry_in_s=info.retry_in_s,
                transactional_id=transactional_id(info.slot),
            )
        )  # fmt: skip
    return out


# -- record format ------------------------------------------------------------------------------


def _compact(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode("utf-8")


def report_key(flow: str, node: str, slot: int) -> bytes:
    """The record key of a slot (one per slot: the topic is compacted)."""
    return _compact({"flow": flow, "node": node, "slot": slot})


def decode_report_key(key: bytes | None) -> tuple[str, str, int]:
    """``(flow, node, slot)`` of a record key; :class:`CodecError` when it is not one."""
    try:
        obj = json.loads(key or b"")
        flow, node, slot = obj["flow"], obj["node"], obj["slot"]
    except (ValueError, TypeError, KeyError) as exc:
        raise CodecError(f"not a worker report key: {key!r}") from exc
    if not (isinstance(flow, str) and isinstance(node, str) and isinstance(slot, int)):
        raise CodecError(f"not a worker report key: {key!r}")
    return flow, node, slot


def encode_report(report: WorkerReport) -> bytes:
    """The record value of ``report`` (its key: :func:`report_key`)."""
    value = attrs.asdict(report)
    value["state"] = report.state.value
    value["partitions"] = [[t, p] for t, p in report.partitions]
    value["version"] = REPORT_VERSION
    return _compact(value)


def decode_report(value: bytes) -> WorkerReport:
    """A report from its record value; :class:`CodecError` when it is not one (or of a newer
    version than :data:`REPORT_VERSION`). Unknown fields are ignored."""
    try:
        obj = json.loads(value)
        version = obj.get("version")
        if not isinstance(version, int) or version > REPORT_VERSION:
            raise CodecError(f"worker report of unknown version {version!r}")
        lag = obj.get("lag_records")
        pid = obj.get("pid")
        retry = obj.get("retry_in_s")
        error = obj.get("last_error")
        tid = obj.get("transactional_id")
        return WorkerReport(
            flow=str(obj["flow"]), node=str(obj["node"]), slot=int(obj["slot"]),
            pid=None if pid is None else int(pid), state=WorkerState(obj["state"]),
            restarts=int(obj["restarts"]),
            partitions=tuple((str(t), int(p)) for t, p in obj["partitions"]),
            records_per_second=float(obj["records_per_second"]),
            bytes_per_second=float(obj["bytes_per_second"]),
            lag_records=None if lag is None else int(lag), timestamp_ms=int(obj["timestamp_ms"]),
            interval_s=float(obj["interval_s"]), tasks_max=int(obj.get("tasks_max", 1)),
            last_error=None if error is None else str(error),
            retry_in_s=None if retry is None else float(retry),
            transactional_id=None if tid is None else str(tid),
        )  # fmt: skip
    except CodecError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise CodecError(f"not a worker report: {value[:200]!r}: {exc}") from exc


def newest_reports(
    records: Iterable[tuple[bytes | None, bytes | None]],
) -> tuple[dict[tuple[str, str, int], WorkerReport], list[str]]:
    """The newest report per slot from ``(key, value)`` records in log order (a tombstone
    removes its slot), and a message per record that does not decode (skipped)."""
    reports: dict[tuple[str, str, int], WorkerReport] = {}
    problems: list[str] = []
    for key, value in records:
        try:
            slot_key = decode_report_key(key)
            if value is None:
                reports.pop(slot_key, None)
                continue
            report = decode_report(value)
        except CodecError as exc:
            problems.append(str(exc))
            continue
        reports[slot_key] = report
    return reports, problems


# -- what status shows ---------------------------------------------------------------------------


@attrs.frozen
class WorkerView:
    """A report as ``mirrorlib status`` shows it: with its age, and ``silent`` when its node
    stopped reporting (then its rates and lag are unknown, not the last ones reported)."""

    report: WorkerReport
    age_s: float
    silent: bool

    @property
    def state(self) -> str:
        """The slot's state now: ``silent``, or the reported one."""
        return "silent" if self.silent else self.report.state.value

    @property
    def records_per_second(self) -> float | None:
        return None if self.silent else self.report.records_per_second

    @property
    def bytes_per_second(self) -> float | None:
        return None if self.silent else self.report.bytes_per_second

    @property
    def lag_records(self) -> int | None:
        return None if self.silent else self.report.lag_records

    def to_dict(self) -> dict[str, Any]:
        r = self.report
        return {
            "node": r.node, "slot": r.slot, "pid": r.pid, "state": self.state,
            "reported_state": r.state.value, "silent": self.silent, "age_s": self.age_s,
            "restarts": r.restarts, "partitions": [f"{t}-{p}" for t, p in r.partitions],
            "records_per_second": self.records_per_second,
            "bytes_per_second": self.bytes_per_second, "lag_records": self.lag_records,
            "report_interval_s": r.interval_s, "tasks_max": r.tasks_max,
            "last_error": r.last_error, "retry_in_s": r.retry_in_s,
        }  # fmt: skip


def view_reports(reports: Iterable[WorkerReport], now_ms: int) -> tuple[WorkerView, ...]:
    """``reports`` by node and slot, each with its age at ``now_ms`` and whether it is silent
    (a live state older than :func:`silent_after` its interval; a stopped or failed slot is
    expected to be quiet), without the expired ones (:func:`expired_reports`)."""
    reports = list(reports)
    expired = {r.key for r in expired_reports(reports, now_ms)}
    views = []
    for r in sorted(reports, key=lambda r: (r.node, r.slot)):
        if r.key in expired:
            continue
        age = _age_s(r, now_ms)
        silent = r.state in LIVE_STATES and age > silent_after(r.interval_s)
        views.append(WorkerView(r, age, silent))
    return tuple(views)


def _partitions_cell(parts: Sequence[Key]) -> str:
    if not parts:
        return "0"
    listed = ", ".join(f"{t}-{p}" for t, p in parts[:LISTED_PARTITIONS])
    more = " ..." if len(parts) > LISTED_PARTITIONS else ""
    return f"{len(parts)}: {listed}{more}"


def _state_cell(view: WorkerView) -> str:
    r = view.report
    if view.silent:
        return f"silent (was {r.state.value})"
    if r.state is WorkerState.RESTARTING and r.retry_in_s is not None:
        return f"restarting (in {r.retry_in_s:.0f}s)"
    return r.state.value


def _rate(v: float | None, unit: str) -> str:
    return "?" if v is None else f"{v:,.0f} {unit}"


def worker_table(views: Sequence[WorkerView]) -> Table:
    """One row per worker slot: node, slot, pid, state, restarts, partitions, rates, lag and
    report age (``?``: unknown; a silent worker's rates and lag are unknown)."""
    rows = tuple(
        (
            v.report.node, str(v.report.slot), "-" if v.report.pid is None else str(v.report.pid),
            _state_cell(v), str(v.report.restarts), _partitions_cell(v.report.partitions),
            _rate(v.records_per_second, "rec/s"), _rate(v.bytes_per_second, "B/s"),
            "?" if v.lag_records is None else str(v.lag_records),
            f"{human_duration(v.age_s)} ago",
        )
        for v in views
    )  # fmt: skip
    header = ("node", "slot", "pid", "state", "restarts", "partitions", "records", "bytes",
              "lag", "reported")  # fmt: skip
    return Table(header, rows)
