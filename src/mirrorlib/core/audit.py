"""Pure computations behind ``mirrorlib verify`` and ``mirrorlib status`` (no Kafka I/O).

Verify
------
:func:`record_digest` condenses a record (key, value, headers, timestamp) into 16 bytes.
:func:`compare_partition` compares the digests of one source partition with those of its remote
partition and classifies every difference:

* **missing** — a source record inside the replicated range (below the flow's stored position)
  with no copy on the target: data loss;
* **duplicated** — extra copies of a record that is present (at-least-once replication after a
  crash re-copies a few records; exactly-once mode should show none);
* **extra** — a remote record that matches no source record at all (written by something else,
  or corrupted);
* **pending** — source records at or past the stored position that are not on the target yet
  (replication in progress; not an error);
* **truncated** — remote records older than the source's first remaining record (the source
  deleted them by retention after they were copied; not an error).

A partition whose source or remote topic is another *incarnation* (deleted and created again:
a new topic id) than the one its stored position was written for is reported too
(:attr:`PartitionAudit.incarnation`, :func:`mirrorlib.core.incarnations.mismatch`). Records of
an old incarnation left on the remote topic match no record of the source topic now: they count
as extra.

Records are matched as a multiset of digests, so the check does not depend on offsets (the
remote offsets differ from the source's after transactions, compaction or restarts).

Status
------
:class:`PartitionLag` and :class:`FlowHealth` model what ``mirrorlib status`` shows, computed from
the clusters alone. Unknown values are ``None`` (shown as ``unknown``/``?``), never 0.
Definitions:

* **lag (records)** of a source partition = its end offset minus the flow's stored position
  (the next offset to replicate), never negative;
* **lag (seconds)** = how long the oldest not-yet-replicated record has been waiting: now minus
  the timestamp of the source record at the stored position; 0 when there is no lag;
* **heartbeat age** = now minus the newest heartbeat of the flow found on the target;
* **checkpoint age** = now minus the timestamp of the newest record in the flow's checkpoints topic;
* **position age** = now minus the timestamp of the record that stored a partition's position
  (positions are stored every ``offset.flush.interval.ms``, and only when they moved);
* **stalled** partition = records wait and its position is older than :func:`stall_limit_s`.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import attrs

from mirrorlib.core.report import Block, Table, format_table, human_duration, render_plain
from mirrorlib.core.status import STALL_AFTER_S, FlowLagView
from mirrorlib.core.worker_reports import WorkerView, worker_table

__all__ = [
    "FlowHealth",
    "PartitionAudit",
    "PartitionLag",
    "VerifyProgress",
    "VerifyReport",
    "compare_partition",
    "flow_state",
    "format_table",
    "lag_records",
    "lag_seconds",
    "record_digest",
    "stall_limit_s",
]


def _field(h: Any, data: bytes | None) -> None:
    if data is None:
        h.update(b"\xff")
    else:
        h.update(b"\x00" + len(data).to_bytes(8, "big") + data)


def record_digest(
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] | None,
    timestamp: int | None,
) -> bytes:
    """A 16-byte digest of a record's key, value, headers (in order) and timestamp.

    ``None`` and empty bytes differ; no headers and an empty header list are the same (Kafka does
    not distinguish them).
    """
    h = hashlib.blake2b(digest_size=16)
    _field(h, key)
    _field(h, value)
    headers = headers or ()
    h.update(len(headers).to_bytes(4, "big"))
    for name, data in headers:
        _field(h, name.encode("utf-8"))
        _field(h, data)
    h.update((timestamp if timestamp is not None else -1).to_bytes(8, "big", signed=True))
    return h.digest()


@attrs.frozen
class PartitionAudit:
    """The comparison of one source partition with its remote partition."""

    topic: str
    partition: int
    remote_topic: str
    source_records: int
    remote_records: int
    matched: int
    missing: int
    duplicated: int
    extra: int
    pending: int
    truncated: int
    missing_offsets: tuple[int, ...] = ()  # the first few source offsets of missing records
    extra_offsets: tuple[int, ...] = ()  # the first few remote offsets of extra records
    #: the source or remote topic is another incarnation than the stored position was written
    #: for (deleted and created again: mirrorlib.core.incarnations.mismatch), else None
    incarnation: str | None = None

    @property
    def ok(self) -> bool:
        """No missing, extra or duplicated record, and the incarnations match."""
        return (
            self.missing == 0 and self.extra == 0 and self.duplicated == 0
            and self.incarnation is None
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {**attrs.asdict(self), "ok": self.ok}


#: How many offsets of missing/extra records a report lists per partition.
MAX_LISTED = 10


def compare_partition(
    topic: str,
    partition: int,
    remote_topic: str,
    source: Iterable[tuple[int, bytes]],
    remote: Iterable[tuple[int, bytes]],
    *,
    replicated_up_to: int | None,
    bucket_records: int | None = None,
    spill_dir: str | None = None,
) -> PartitionAudit:
    """Compare ``source`` and ``remote`` ``(offset, digest)`` sequences (in offset order).

    ``replicated_up_to`` is the flow's stored position for the partition (the next offset to
    replicate; ``None``: no position, so every unmatched source record is *pending*). Source
    records below it without a copy are *missing*; at or past it they are *pending*.

    Both sequences are read once, in order (they may be generators reading a partition window by
    window). With ``bucket_records`` the comparison holds at most about that many records at a
    time: once more are read, records are spilled to temporary files (in ``spill_dir``) in
    buckets of digests, and the buckets are compared one by one (a digest's records are all in
    one bucket, so the findings are the same).
    """
    with _Buckets(bucket_records, spill_dir) as buckets:
        for offset, digest in source:
            buckets.add_source(offset, digest)
        for offset, digest in remote:
            buckets.add_remote(offset, digest)
        tally = _Tally()
        for contents in buckets.contents():
            tally.add(contents, replicated_up_to)
    truncated, extra = tally.foreign(buckets.remote_records)
    return PartitionAudit(
        topic=topic, partition=partition, remote_topic=remote_topic,
        source_records=buckets.source_records, remote_records=buckets.remote_records,
        matched=tally.matched, missing=tally.missing, duplicated=tally.duplicated,
        extra=len(extra), pending=tally.pending, truncated=truncated,
        missing_offsets=tuple(sorted(tally.missing_offsets)[:MAX_LISTED]),
        extra_offsets=tuple(extra[:MAX_LISTED]),
    )  # fmt: skip


# (offset, digest) of source records; (index in the remote sequence, offset, digest) of remote ones
_Contents = tuple[list[tuple[int, bytes]], list[tuple[int, int, bytes]]]
_SOURCE = struct.Struct(">q16s")
_REMOTE = struct.Struct(">qq16s")


@attrs.define
class _Tally:
    """The findings of :func:`compare_partition`, added up over buckets of digests."""

    matched: int = 0
    missing: int = 0
    pending: int = 0
    duplicated: int = 0
    missing_offsets: list[int] = attrs.Factory(list)  # the first MAX_LISTED of each bucket
    first_match: int | None = None  # index of the first remote record matching the source
    # (index, offset) of remote records left over that match no source record, flattened
    unmatched: array[int] = attrs.Factory(lambda: array("q"))

    def add(self, contents: _Contents, replicated_up_to: int | None) -> None:
        source, remote = contents
        available = Counter(d for _, _, d in remote)
        source_digests = {d for _, d in source}
        missing: list[int] = []
        for offset, digest in source:
            if available[digest] > 0:
                available[digest] -= 1
                self.matched += 1
            elif replicated_up_to is not None and offset < replicated_up_to:
                missing.append(offset)
            else:
                self.pending += 1
        self.missing += len(missing)
        self.missing_offsets += missing[:MAX_LISTED]
        first = next((i for i, _, d in remote if d in source_digests), None)
        if first is not None and (self.first_match is None or first < self.first_match):
            self.first_match = first
        # leftovers: copies beyond the first one of a source record are duplicates; the others
        # are sorted out by foreign() once the first match of every bucket is known
        leftover = +available
        for i, offset, digest in remote:
            if leftover[digest] <= 0:
                continue
            if digest in source_digests:
                self.duplicated += 1
            else:
                self.unmatched.extend((i, offset))
            leftover[digest] -= 1

    def foreign(self, remote_records: int) -> tuple[int, list[int]]:
        """How many remote records matching no source record are *truncated* (they precede the
        first remote record that matches the source: the source deleted them by retention after
        they were copied), and the offsets of the others (*extra*), in remote order."""
        first = remote_records if self.first_match is None else self.first_match
        pairs = sorted(zip(self.unmatched[0::2], self.unmatched[1::2], strict=True))
        truncated = sum(1 for i, _ in pairs if i < first)
        return truncated, [offset for i, offset in pairs if i >= first]


class _Buckets:
    """Records of both sides, in memory up to ``limit`` records, else in files by digest."""

    def __init__(self, limit: int | None, directory: str | None) -> None:
        self.limit = limit
        self.directory = directory
        self.source_records = self.remote_records = 0
        self._source: list[tuple[int, bytes]] = []
        self._remote: list[tuple[int, int, bytes]] = []
        self._spill: tempfile.TemporaryDirectory[str] | None = None
        self._buffers: dict[tuple[str, int], bytearray] = {}

    def __enter__(self) -> _Buckets:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._spill is not None:
            self._spill.cleanup()

    def add_source(self, offset: int, digest: bytes) -> None:
        self.source_records += 1
        if self._spill is None:
            self._source.append((offset, digest))
            self._check()
        else:
            self._write("s", digest, _SOURCE.pack(offset, digest))

    def add_remote(self, offset: int, digest: bytes) -> None:
        index = self.remote_records
        self.remote_records += 1
        if self._spill is None:
            self._remote.append((index, offset, digest))
            self._check()
        else:
            self._write("r", digest, _REMOTE.pack(index, offset, digest))

    def _check(self) -> None:
        if self.limit is None or len(self._source) + len(self._remote) <= self.limit:
            return
        self._spill = tempfile.TemporaryDirectory(prefix="mirrorlib-verify-", dir=self.directory)
        for offset, digest in self._source:
            self._write("s", digest, _SOURCE.pack(offset, digest))
        for index, offset, digest in self._remote:
            self._write("r", digest, _REMOTE.pack(index, offset, digest))
        self._source, self._remote = [], []

    def _write(self, side: str, digest: bytes, data: bytes) -> None:
        key = (side, digest[0] % _SPILL_BUCKETS)
        buffer = self._buffers.setdefault(key, bytearray())
        buffer += data
        if len(buffer) >= _SPILL_BUFFER:
            self._flush(key)

    def _path(self, side: str, bucket: int) -> str:
        assert self._spill is not None
        return os.path.join(self._spill.name, f"{side}{bucket}")

    def _flush(self, key: tuple[str, int]) -> None:
        with open(self._path(*key), "ab") as fh:
            fh.write(self._buffers.pop(key))

    def _read(self, side: str, bucket: int, layout: struct.Struct) -> list[Any]:
        path = self._path(side, bucket)
        if not os.path.exists(path):
            return []
        with open(path, "rb") as fh:
            return list(layout.iter_unpack(fh.read()))

    def contents(self) -> Iterator[_Contents]:
        """Each bucket's records (in their order), one bucket at a time."""
        if self._spill is None:
            yield self._source, self._remote
            return
        for key in list(self._buffers):
            self._flush(key)
        for bucket in range(_SPILL_BUCKETS):
            yield self._read("s", bucket, _SOURCE), self._read("r", bucket, _REMOTE)


#: Buckets of digests a spilled comparison is split into (by the digest's first byte).
_SPILL_BUCKETS = 256
_SPILL_BUFFER = 8 * 1024  # bytes written to a bucket's file at a time (at most 4 MiB held)


@attrs.frozen
class VerifyReport:
    """The audit of one flow: one :class:`PartitionAudit` per source partition."""

    flow: str
    partitions: tuple[PartitionAudit, ...]
    errors: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.errors and all(p.ok for p in self.partitions)

    def totals(self) -> dict[str, int]:
        keys = ("source_records", "remote_records", "matched", "missing", "duplicated",
                "extra", "pending", "truncated")  # fmt: skip
        return {k: sum(int(getattr(p, k)) for p in self.partitions) for k in keys}

    def to_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "ok": self.ok,
            "errors": list(self.errors),
            "totals": self.totals(),
            "partitions": [p.to_dict() for p in self.partitions],
        }

    def describe(self) -> str:
        """The plain-text report (what ``mirrorlib verify`` prints): :meth:`blocks` rendered."""
        return render_plain(self.blocks())

    def blocks(self) -> list[Block]:
        """Verdict, a table of partitions, totals, then the differing offsets and errors."""
        rows = tuple(
            (
                f"{p.topic}-{p.partition}", p.remote_topic, str(p.source_records),
                str(p.remote_records), str(p.missing), str(p.duplicated), str(p.extra),
                str(p.pending),
            )
            for p in self.partitions
        )  # fmt: skip
        t = self.totals()
        verdict = "OK" if self.ok else "PROBLEMS FOUND"
        out: list[Block] = [f"flow {self.flow}: {verdict}"]
        if self.partitions:
            header = ("partition", "remote", "source", "copied", "missing", "dup", "extra",
                      "pending")  # fmt: skip
            out.append(Table(header, rows))
        else:
            out.append("  no replicated partitions matched")
        out.append(
            f"  {t['source_records']} source record(s) checked: {t['missing']} missing, "
            f"{t['duplicated']} duplicated, {t['extra']} extra, {t['pending']} not replicated "
            f"yet, {t['truncated']} older than the source's log start"
        )
        for p in self.partitions:
            if p.incarnation is not None:
                out.append(f"  {p.topic}-{p.partition}: {p.incarnation}")
            if p.missing_offsets:
                out.append(
                    f"  {p.topic}-{p.partition}: missing source offsets "
                    + ", ".join(map(str, p.missing_offsets))
                    + (" ..." if p.missing > len(p.missing_offsets) else "")
                )
            if p.extra_offsets:
                out.append(
                    f"  {p.remote_topic}-{p.partition}: extra remote offsets "
                    + ", ".join(map(str, p.extra_offsets))
                    + (" ..." if p.extra > len(p.extra_offsets) else "")
                )
        out.extend(f"  error: {e}" for e in self.errors)
        return out


@attrs.frozen
class VerifyProgress:
    """How far ``mirrorlib verify`` has read a flow: ``done`` of ``total`` offsets (source and
    remote partitions together); ``finished`` on the last report."""

    flow: str
    done: int
    total: int
    finished: bool = False

    @property
    def percent(self) -> float:
        return 100.0 * self.done / self.total if self.total else 100.0

    def __str__(self) -> str:
        return f"verify {self.flow}: {self.done}/{self.total} records read ({self.percent:.0f}%)"


# -- status -------------------------------------------------------------------------------------


def lag_records(end_offset: int | None, position: int | None) -> int | None:
    """Records not yet replicated: ``end - position`` (``None`` when either is unknown)."""
    if end_offset is None or position is None:
        return None
    return max(end_offset - position, 0)


def lag_seconds(lag: int | None, next_timestamp_ms: int | None, now_ms: int) -> float | None:
    """Age of the oldest record not yet replicated (0 without lag; ``None`` when unknown)."""
    if lag is None:
        return None
    if lag == 0:
        return 0.0
    if next_timestamp_ms is None:
        return None
    return max(now_ms - next_timestamp_ms, 0) / 1000.0


def stall_limit_s(offset_flush_interval_s: float) -> float:
    """How old a stored position of a partition with records waiting may be before the partition
    counts as stalled: two flush intervals (a healthy flow stores moved positions every
    interval) plus :data:`~mirrorlib.core.status.STALL_AFTER_S`."""
    return 2 * offset_flush_interval_s + STALL_AFTER_S


@attrs.frozen
class PartitionLag:
    """One replicated source partition as ``mirrorlib status`` sees it (``None``: unknown)."""

    topic: str
    partition: int
    remote_topic: str
    end_offset: int | None
    position: int | None  # next upstream offset to replicate (None: no stored position)
    lag_records: int | None
    lag_seconds: float | None
    position_age_s: float | None = None  # how long ago the position was stored
    internal: bool = False  # an MM2 topic (heartbeats), shown apart from data topics

    def stalled(self, limit_s: float) -> str | None:
        """Why the partition looks stalled: the oldest waiting record and the stored position
        are both older than ``limit_s`` (see :func:`stall_limit_s`); ``None`` otherwise or when
        unknown."""
        if not self.lag_records or self.position_age_s is None or self.lag_seconds is None:
            return None
        if min(self.position_age_s, self.lag_seconds) <= limit_s:
            return None
        return (
            f"{self.topic}-{self.partition}: no position stored for {self.position_age_s:.0f}s "
            f"with {self.lag_records} record(s) waiting"
        )

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


def flow_state(
    *,
    errors: Sequence[str],
    heartbeat_age_s: float | None,
    heartbeat_interval_s: float | None,
    any_position: bool,
    stalled: bool = False,
) -> str:
    """``unreachable`` (a cluster did not answer), ``not started`` (no position, no heartbeat),
    ``running`` (heartbeats are fresh: younger than 3 intervals, at least 10 s), ``stalled``
    (heartbeats stopped, or ``stalled``: a partition's records wait and its position does not
    move) or ``idle`` (positions exist but no heartbeats are emitted)."""
    if errors:
        return "unreachable"
    if stalled:
        return "stalled"
    if heartbeat_age_s is None:
        return "idle" if any_position else "not started"
    limit = max(10.0, 3 * (heartbeat_interval_s or 1.0))
    return "running" if heartbeat_age_s <= limit else "stalled"


def _secs(v: float | None) -> str:
    return "unknown" if v is None else human_duration(v)


def _ago(what: str, age_s: float | None) -> str:
    return f"no {what}" if age_s is None else f"{what} {human_duration(age_s)} ago"


@attrs.frozen
class FlowHealth(FlowLagView["PartitionLag"]):
    """The state of one flow, computed from the clusters (``mirrorlib status``).

    Lag is summed over data partitions whose lag is known (``None`` when none is); the
    partitions of internal topics (heartbeats) are listed apart and not counted."""

    source: str
    target: str
    state: str
    partitions: tuple[PartitionLag, ...]
    heartbeat_age_s: float | None
    checkpoint_age_s: float | None
    errors: tuple[str, ...] = ()
    stalled: str | None = None  # why the flow is stalled, when it is
    position_flush_interval_s: float | None = None  # offset.flush.interval.ms, in seconds
    workers: tuple[WorkerView, ...] = ()  # the copier workers' newest reports (mirrorlib only)

    @property
    def silent_workers(self) -> int:
        """Workers whose node stopped reporting (see :mod:`mirrorlib.core.worker_reports`)."""
        return sum(1 for w in self.workers if w.silent)

    @property
    def lag_seconds(self) -> float | None:
        values = [p.lag_seconds for p in self.data_partitions if p.lag_seconds is not None]
        return max(values) if values else None

    @property
    def position_age_s(self) -> float | None:
        """Age of the newest stored position of the flow (``None``: none stored)."""
        ages = [p.position_age_s for p in self.partitions if p.position_age_s is not None]
        return min(ages) if ages else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "flow": self.name,
            "source": self.source,
            "target": self.target,
            "state": self.state,
            "stalled": self.stalled,
            "lag_records": self.lag_records,
            "lag_seconds": self.lag_seconds,
            "unknown_lag_partitions": self.unknown_lag_partitions,
            "position_age_s": self.position_age_s,
            "heartbeat_age_s": self.heartbeat_age_s,
            "checkpoint_age_s": self.checkpoint_age_s,
            "errors": list(self.errors),
            "partitions": [p.to_dict() for p in self.partitions],
            "workers": [w.to_dict() for w in self.workers],
        }

    def summary(self) -> str:
        """The first line of :meth:`describe`: state, lag, ages."""
        state = f"stalled: {self.stalled}" if self.stalled else self.state
        if self.lag_records is None:
            lag = "lag unknown"
        else:
            lag = f"lag {self.lag_records} record(s) / {_secs(self.lag_seconds)}"
        if self.unknown_lag_partitions and self.lag_records is not None:
            lag += f" (+{self.unknown_lag_partitions} partition(s) unknown)"
        every = (
            ""
            if self.position_flush_interval_s is None
            else f" (every {self.position_flush_interval_s:g}s)"
        )
        stored = (
            "no position stored"
            if self.position_age_s is None
            else f"positions stored {human_duration(self.position_age_s)} ago{every}"
        )
        return (
            f"{self.name}: {state}  {lag}  {stored}  "
            f"{_ago('heartbeat', self.heartbeat_age_s)}  "
            f"{_ago('checkpoint', self.checkpoint_age_s)}"
        )

    def describe(self, limit: int | None = None) -> str:
        """The plain-text report (what ``mirrorlib status`` prints): :meth:`blocks` rendered."""
        return render_plain(self.blocks(limit))

    def blocks(self, limit: int | None = None) -> list[Block]:
        """:meth:`summary`, then a table of data partitions (the ``limit`` with most lag, unknown
        lag first, when given), internal topics apart, the workers, then errors."""

        def table(parts: Sequence[PartitionLag]) -> Table:
            rows = tuple(
                (
                    f"{p.topic}-{p.partition}", p.remote_topic,
                    "-" if p.end_offset is None else str(p.end_offset),
                    "-" if p.position is None else str(p.position),
                    "?" if p.lag_records is None else str(p.lag_records),
                    "?" if p.lag_seconds is None else f"{p.lag_seconds:.1f}",
                    "-" if p.position_age_s is None else f"{human_duration(p.position_age_s)} ago",
                )
                for p in parts
            )  # fmt: skip
            return Table(("partition", "remote", "end", "position", "lag", "lag s", "stored"), rows)

        out: list[Block] = [self.summary()]
        data = list(self.data_partitions)
        hidden = 0
        if limit is not None and len(data) > limit:
            worst = sorted(data, key=lambda p: (p.lag_records is not None, -(p.lag_records or 0)))[
                :limit
            ]
            keep = {id(p) for p in worst}
            hidden = len(data) - limit
            data = [p for p in data if id(p) in keep]
        if data:
            out.append(table(data))
        if hidden:
            out.append(f"  ... {hidden} more partition(s)")
        internal = self.internal_partitions
        if internal:
            out.append("  internal topics (heartbeats; lag of up to a flush interval is normal):")
            out.append(table(internal))
        if self.workers:
            nodes = len({w.report.node for w in self.workers})
            silent = f", {self.silent_workers} silent" if self.silent_workers else ""
            out.append(f"  workers ({len(self.workers)} on {nodes} node(s){silent}):")
            out.append(worker_table(self.workers))
            out.extend(
                f"  worker {w.report.node} slot {w.report.slot}, last error: {w.report.last_error}"
                for w in self.workers
                if w.report.last_error
            )
        out.extend(f"  error: {e}" for e in self.errors)
        return out


def status_json(flows: Iterable[FlowHealth]) -> str:
    return json.dumps({"flows": [f.to_dict() for f in flows]}, indent=2)
