"""When to write an offset sync, and the lineage that lets readers trust a run of them.

An *offset sync* ``(topic, partition, upstream_offset, downstream_offset)`` proves that upstream
record ``upstream_offset`` was copied to ``downstream_offset`` in the remote topic. Writing one per
record would double the traffic, so MirrorMaker 2 writes one only when it matters. This module is
that decision, as a pure state machine with no Kafka client in it: the replication loop reports
every record acknowledged by the target with :meth:`OffsetSyncEmitter.record`, and takes the syncs
to produce with :meth:`OffsetSyncEmitter.take_pending`.

The emission rule (MM2 3.7+, ``OffsetSyncWriter`` / ``MirrorSourceTask``)
-------------------------------------------------------------------------
Per partition the emitter keeps ``prev_up``, ``prev_down`` and ``last_sync_down`` (all -1 at the
start). For an acknowledged record ``(up, down)`` a sync is *due* when any of these holds:

* ``last_sync_down == -1`` -- the first record since the (re)start;
* ``down - (last_sync_down + 1) >= offset_lag_max`` -- a reader would answer ``last_sync_down + 1``
  for this record, which is now ``offset_lag_max`` or more behind;
* ``up - prev_up != 1`` -- an upstream gap (transaction marker, compaction, retention, a filtered
  record) or an upstream rewind;
* ``down < prev_down`` -- the downstream topic was truncated or recreated;
* only with ``sync_downstream_gaps`` (beyond MM2, whose copier writes no transactions):
  ``down - prev_down > 1`` -- a downstream gap, i.e. a transactional copier's commit marker.
  With the newest sync of each transaction promoted at its commit (:mod:`mirrorlib.kafka.copier.commit`),
  a partition gets a sync on both sides of every marker, so exact translation (below) covers
  every offset, not only those after the first ``offset_lag_max`` records of a transaction.

A due sync replaces the partition's entry in *pending* (latest per partition) and clears its
*delayed* entry; a sync that is not due replaces the partition's *delayed* entry. Beyond MM2,
a sync due for an upstream gap does not drop the delayed sync: that is the last record before
the gap, and it is sent first (it *closes* the contiguous run before the gap), so translation
stays exact up to the gap and right after it — a gap being the markers and aborted records of
a transactional source, compacted offsets, retention (docs/offset-translation.md).
:meth:`~OffsetSyncEmitter.promote_delayed` moves every delayed sync to pending -- MM2 does this on
each task commit (``offset.flush.interval.ms``, 60 s by default) so that quiet partitions still get
a sync for their newest record. The caller calls it periodically, more often is better.

Lineage (beyond MM2)
--------------------
Every sync handed out by :meth:`~OffsetSyncEmitter.take_pending` carries a :class:`SyncLineage`:
the emitter's random ``writer_id`` and a per-partition ``sequence``. The emitter guarantees:

    If two syncs of a partition carry the same writer id and sequences ``n`` and ``n + 1``, then
    every record the writer acknowledged between them (both included) followed its predecessor
    with ``up == prev_up + 1`` and ``down > prev_down``.

Sequences are consumed when a sync is *taken* for sending, so a sync that is lost on the way (send
failure, crash) leaves a hole in the sequence and readers never bridge it. Whenever the record
stream between the previous taken sync and the next one was not contiguous upstream (a gap, a
rewind, a downstream rewind, a restart), the emitter skips a sequence number on purpose. Readers
(:class:`mirrorlib.core.translate.OffsetTranslator`) add the one check the writer cannot make cheaply --
equal upstream and downstream deltas -- and then know every offset between the two syncs exactly.

The lineage travels in a record header (:data:`LINEAGE_HEADER`); the record key and value stay MM2's
bytes, and MM2's readers ignore headers, so Java MM2 and mirrorlib can share the topic.

Memory is bounded by the number of partitions: per partition a fixed-size state, at most one
pending and one delayed sync.
"""

from __future__ import annotations

import collections
import struct
import uuid
from collections.abc import Callable, Iterable
from typing import Final, Self

import attrs

from mirrorlib.core.records import OffsetSync, TopicPartition
from mirrorlib.errors import CodecError

__all__ = [
    "DEFAULT_OFFSET_LAG_MAX",
    "LINEAGE_HEADER",
    "RESEND_AFTER_S",
    "EmittedSync",
    "FailedSyncs",
    "OffsetSyncEmitter",
    "SyncLineage",
    "SyncRecordDecoder",
    "lineage_from_headers",
]

#: Name of the record header that carries a :class:`SyncLineage` on an offset-sync record.
LINEAGE_HEADER: Final = "mirrorlib.lineage"
#: MM2's default ``offset.lag.max``.
DEFAULT_OFFSET_LAG_MAX: Final = 100

_LINEAGE_FORMAT: Final = 0
_LINEAGE_HEAD = struct.Struct(">bq")  # format version, sequence
_MAX_WRITER_ID_BYTES: Final = 255
_INT64_MAX: Final = 2**63 - 1


def _check_writer_id(writer_id: object) -> str:
    if not isinstance(writer_id, str):
        raise CodecError(f"SyncLineage.writer_id must be a str, got {type(writer_id).__name__}")
    try:
        raw = writer_id.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CodecError(f"SyncLineage.writer_id is not encodable as UTF-8: {exc}") from exc
    if not 0 < len(raw) <= _MAX_WRITER_ID_BYTES:
        raise CodecError(
            f"SyncLineage.writer_id must be 1..{_MAX_WRITER_ID_BYTES} UTF-8 bytes, got {len(raw)}"
        )
    return writer_id


def _check_sequence(sequence: object) -> int:
    if not isinstance(sequence, int) or isinstance(sequence, bool):
        raise CodecError(f"SyncLineage.sequence must be an int, got {type(sequence).__name__}")
    if not 0 <= sequence <= _INT64_MAX:
        raise CodecError(f"SyncLineage.sequence={sequence} is not a non-negative int64")
    return sequence


@attrs.frozen(order=True)
class SyncLineage:
    """Who wrote an offset sync, and where it sits in that writer's chain for the partition.

    ``writer_id`` names one :class:`OffsetSyncEmitter` instance (random, fresh per replication
    session); ``sequence`` counts the syncs that writer took for sending for this partition. Two
    syncs with the same writer and consecutive sequences were written back to back, and nothing
    between them broke the upstream sequence (see the module documentation).

    Encoded in the :data:`LINEAGE_HEADER` header as one format byte (0), the sequence as a
    big-endian int64, then the writer id in UTF-8 (1..255 bytes).
    """

    writer_id: str = attrs.field(converter=_check_writer_id)
    sequence: int = attrs.field(converter=_check_sequence)

    def encode(self) -> bytes:
        """The header value bytes."""
        return _LINEAGE_HEAD.pack(_LINEAGE_FORMAT, self.sequence) + self.writer_id.encode("utf-8")

    def to_header(self) -> tuple[str, bytes]:
        """``(LINEAGE_HEADER, value)``, ready to append to a producer record's headers."""
        return (LINEAGE_HEADER, self.encode())

    @classmethod
    def from_header(cls, value: bytes | bytearray | memoryview | None) -> Self:
        """Decode a :data:`LINEAGE_HEADER` value; malformed input raises ``CodecError``."""
        if value is None:
            raise CodecError("SyncLineage header value is missing (null)")
        if not isinstance(value, bytes | bytearray | memoryview):
            raise CodecError(f"SyncLineage header value must be bytes, got {type(value).__name__}")
        raw = bytes(value)
        if len(raw) < _LINEAGE_HEAD.size + 1:
            raise CodecError(f"SyncLineage header value is truncated ({len(raw)} bytes)")
        fmt, sequence = _LINEAGE_HEAD.unpack_from(raw)
        if fmt != _LINEAGE_FORMAT:
            raise CodecError(f"SyncLineage header has unknown format {fmt}")
        try:
            writer_id = raw[_LINEAGE_HEAD.size :].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CodecError(f"SyncLineage writer id is not valid UTF-8: {exc}") from exc
        return cls(writer_id, sequence)


def lineage_from_headers(
    headers: Iterable[tuple[str, bytes | None]] | None,
) -> SyncLineage | None:
    """The lineage in a record's headers, or ``None`` if absent or malformed.

    A sync without a readable lineage is simply treated like one written by MM2 (conservative
    translation), so a damaged header can never make translation less safe. The last
    :data:`LINEAGE_HEADER` wins, as with Kafka's ``Headers.lastHeader``.
    """
    if headers is None:
        return None
    found: bytes | None = None
    present = False
    for name, value in headers:
        if name == LINEAGE_HEADER:
            found, present = value, True
    if not present:
        return None
    try:
        return SyncLineage.from_header(found)
    except CodecError:
        return None


_TWO_I64 = struct.Struct(">qq")
#: Distinct keys and writer ids a SyncRecordDecoder remembers before starting afresh.
_DECODER_CACHE: Final = 1_000_000


class SyncRecordDecoder:
    """Decodes offset-sync records for a reader that takes in many: the same results as
    :meth:`OffsetSync.decode <mirrorlib.core.records.OffsetSync.decode>` and
    :func:`lineage_from_headers`, as plain fields, without building values. Keys (one per
    partition) and writer ids (one per writer session) repeat, so each distinct one is decoded
    and validated once and remembered (up to a million, then the memory starts afresh).
    """

    def __init__(self) -> None:
        self._keys: dict[bytes, tuple[str, int]] = {}
        self._writers: dict[bytes, str | None] = {}

    def decode(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: Iterable[tuple[str, bytes | None]] | None,
    ) -> tuple[str, int, int, int, str | None, int]:
        """``(topic, partition, upstream, downstream, writer_id, sequence)`` of one record;
        ``writer_id`` is ``None`` (and ``sequence`` -1) without a readable lineage. Malformed
        keys or values raise :class:`~mirrorlib.errors.CodecError`."""
        found = self._keys.get(key) if isinstance(key, bytes) else None
        if found is None or value is None or len(value) < _TWO_I64.size:
            sync = OffsetSync.decode(key, value)  # validates, raises CodecError
            if len(self._keys) >= _DECODER_CACHE:
                self._keys.clear()
            if isinstance(key, bytes):
                self._keys[key] = (sync.topic, sync.partition)
            up, down = sync.upstream_offset, sync.downstream_offset
            topic, partition = sync.topic, sync.partition
        else:
            topic, partition = found
            up, down = _TWO_I64.unpack_from(value)
        raw: bytes | None = None
        if headers is not None:
            for name, header in headers:
                if name == LINEAGE_HEADER:
                    raw = header if header is not None else b""
        if raw is None or len(raw) <= _LINEAGE_HEAD.size:
            return topic, partition, up, down, None, -1
        fmt, sequence = _LINEAGE_HEAD.unpack_from(raw)
        if fmt != _LINEAGE_FORMAT or sequence < 0:
            return topic, partition, up, down, None, -1
        name_bytes = bytes(raw[_LINEAGE_HEAD.size :])
        writer = self._writers.get(name_bytes, "")
        if writer == "":
            try:
                writer = SyncLineage(name_bytes.decode("utf-8"), sequence).writer_id
            except (CodecError, UnicodeDecodeError):
                writer = None
            if len(self._writers) >= _DECODER_CACHE:
                self._writers.clear()
            self._writers[name_bytes] = writer
        return topic, partition, up, down, writer, (-1 if writer is None else sequence)


@attrs.frozen
class EmittedSync:
    """An offset sync taken for sending, with its lineage.

    Produce ``sync.encode_key()`` / ``sync.encode_value()`` with :meth:`headers` to the offset-syncs
    topic, partition 0. Report a failed send with :meth:`OffsetSyncEmitter.mark_failed`.
    """

    sync: OffsetSync
    lineage: SyncLineage

    @property
    def topic_partition(self) -> TopicPartition:
        return self.sync.topic_partition

    def headers(self) -> list[tuple[str, bytes]]:
        """The record headers to send with the sync."""
        return [self.lineage.to_header()]


class _Queued:
    """A sync waiting in pending/delayed, with the break count seen at its record.

    Kept as plain fields (the :class:`OffsetSync` value is built only when the sync is taken):
    :meth:`OffsetSyncEmitter.record` runs once per replicated record and updates the delayed
    entry of a partition in place.
    """

    __slots__ = ("breaks", "down", "tp", "up")

    def __init__(self, tp: TopicPartition, up: int, down: int, breaks: int) -> None:
        self.tp = tp
        self.up = up
        self.down = down
        self.breaks = breaks

    @property
    def sync(self) -> OffsetSync:
        return OffsetSync(self.tp.topic, self.tp.partition, self.up, self.down)


class _PartitionState:
    """MM2's ``PartitionState`` plus the chain bookkeeping for lineage."""

    __slots__ = (
        "anchor_breaks",
        "breaks",
        "last_sync_down",
        "last_taken_seq",
        "next_seq",
        "prev_down",
        "prev_up",
    )

    def __init__(self, next_seq: int) -> None:
        self.prev_up = -1
        self.prev_down = -1
        self.last_sync_down = -1
        # Number of records so far that broke contiguity (first record, gap, rewind).
        self.breaks = 0
        # `breaks` as seen at the record of the last taken sync; None: no chain to continue.
        self.anchor_breaks: int | None = None
        self.next_seq = next_seq
        self.last_taken_seq = -1


#: a downstream step no record can take: the downstream-gap rule off (MM2's rule)
_NO_GAP_RULE = 1 << 62


class OffsetSyncEmitter:
    """MM2's offset-sync emission rule, with lineage for exact translation.

    ``offset_lag_max`` is MM2's ``offset.lag.max`` (default 100; 0 means a sync for every record).
    ``writer_id`` defaults to a random UUID; give each replication session its own emitter.

    Usage, per record acknowledged by the target cluster::

        emitter.record(tp, upstream_offset, downstream_offset)
        for emitted in emitter.take_pending():
            produce(emitted.sync, emitted.headers())   # on failure: emitter.mark_failed(emitted)

    and periodically (MM2: every offset commit) ``emitter.promote_delayed()`` followed by
    ``take_pending()``. The emitter is not thread-safe; guard it with a lock if the producer
    callbacks run on another thread.
    """

    def __init__(
        self,
        offset_lag_max: int = DEFAULT_OFFSET_LAG_MAX,
        *,
        writer_id: str | None = None,
        sync_downstream_gaps: bool = False,
    ) -> None:
        if isinstance(offset_lag_max, bool) or not isinstance(offset_lag_max, int):
            raise TypeError("offset_lag_max must be an int")
        self._offset_lag_max = offset_lag_max
        # a transactional writer's commit markers: a sync right after each (see the module)
        self._gap = 1 if sync_downstream_gaps else _NO_GAP_RULE
        self._writer_id = _check_writer_id(uuid.uuid4().hex if writer_id is None else writer_id)
        self._states: dict[TopicPartition, _PartitionState] = {}
        self._pending: dict[TopicPartition, _Queued] = {}
        self._delayed: dict[TopicPartition, _Queued] = {}
        # the last record before an upstream gap: taken right before the partition's pending sync
        self._closing: dict[TopicPartition, _Queued] = {}
        # Highest sequence handed out for any partition, so a partition forgotten and seen again
        # never reuses a sequence number of this writer.
        self._max_issued = -1

    @property
    def writer_id(self) -> str:
        return self._writer_id

    @property
    def offset_lag_max(self) -> int:
        return self._offset_lag_max

    # -- recording -------------------------------------------------------------------------------

    def record(self, tp: TopicPartition, upstream_offset: int, downstream_offset: int) -> bool:
        """Report that upstream record ``upstream_offset`` of ``tp`` was acknowledged by the
        target at ``downstream_offset``; returns whether a sync became due (queued as pending).

        ``tp`` is the *upstream* topic-partition (offset syncs are keyed by it). Call it in the
        order the target acknowledged the records, once per record, and only for records that
        were actually written (MM2 skips records an SMT filtered out).
        """
        state = self._states.get(tp)
        if state is None:
            state = self._states[tp] = _PartitionState(self._fresh_sequence())
        up, down = upstream_offset, downstream_offset
        gap = up - state.prev_up > 1 and state.prev_up >= 0
        due = (
            state.last_sync_down == -1
            or down - (state.last_sync_down + 1) >= self._offset_lag_max
            or up - state.prev_up != 1
            or down < state.prev_down
            or down - state.prev_down > self._gap
        )
        # Chain bookkeeping: anything but a +1 step upstream and a forward step downstream breaks
        # the chain (stricter than MM2's `down < prev_down`, which lets down == prev_down pass).
        if state.prev_up == -1 or up - state.prev_up != 1 or down <= state.prev_down:
            state.breaks += 1
        state.prev_up = up
        state.prev_down = down
        if due:
            state.last_sync_down = down
            before = self._delayed.pop(tp, None)  # the previous record, if it had no sync
            if gap and before is not None:
                self._closing[tp] = before
            self._pending[tp] = _Queued(tp, up, down, state.breaks)
            return True
        queued = self._delayed.get(tp)
        if queued is None:
            self._delayed[tp] = _Queued(tp, up, down, state.breaks)
        else:  # the common case: replace the partition's delayed sync without allocating
            queued.up = up
            queued.down = down
            queued.breaks = state.breaks
        return False

    def record_run(
        self,
        tp: TopicPartition,
        upstream_offset: int,
        downstream_offset: int,
        count: int,
        on_due: Callable[[], None] | None = None,
    ) -> int:
        """Report ``count`` records acknowledged in a row at consecutive offsets: upstream
        ``upstream_offset + i`` at downstream ``downstream_offset + i`` for ``i < count``.

        Same result as calling :meth:`record` for each of them in order, but in time
        proportional to the number of syncs that become due, not to ``count``. ``on_due`` is
        called right after each due sync is queued (before the next one could replace it in
        *pending*), so a caller can send every due sync. Returns how many became due.
        """
        if count <= 0:
            return 0
        up, down, lag = upstream_offset, downstream_offset, self._offset_lag_max
        due = 0
        i = 0
        while i < count:
            if self.record(tp, up + i, down + i):
                due += 1
                if on_due is not None:
                    on_due()
            # The records after i step by +1 on both sides, so the only rule that can make one
            # due is staleness: downstream reaching last_sync_down + 1 + lag. Skip to it.
            state = self._states[tp]
            nxt = max(state.last_sync_down + 1 + lag - down, i + 1)
            if nxt > i + 1:
                last_quiet = min(nxt, count) - 1  # the records i+1..last_quiet are not due
                if last_quiet > i:
                    state.prev_up = up + last_quiet
                    state.prev_down = down + last_quiet
                    queued = self._delayed.get(tp)
                    if queued is None:
                        self._delayed[tp] = _Queued(
                            tp, up + last_quiet, down + last_quiet, state.breaks
                        )
                    else:
                        queued.up = up + last_quiet
                        queued.down = down + last_quiet
                        queued.breaks = state.breaks
            i = nxt
        return due

    def promote_delayed(self) -> None:
        """Move every delayed sync to pending (MM2 does this on each task commit)."""
        self._pending.update(self._delayed)
        self._delayed.clear()

    # -- sending ---------------------------------------------------------------------------------

    def take_pending(self, max_count: int | None = None) -> list[EmittedSync]:
        """Remove and return pending syncs (oldest partition entry first), each with a fresh
        lineage. ``max_count`` limits how many are taken (MM2 allows 10 in flight)."""
        taken: list[EmittedSync] = []
        while self._pending and (max_count is None or len(taken) < max_count):
            tp = next(iter(self._pending))
            # the sync closing the run before a gap goes first (the pending one stays first)
            queued = self._closing.pop(tp, None) or self._pending.pop(tp)
            state = self._states.get(tp)
            if state is None:  # pragma: no cover - forget() drops queued syncs too
                continue
            seq = state.next_seq
            if state.anchor_breaks is not None and queued.breaks != state.anchor_breaks:
                seq += 1  # skip a number: the stream since the last taken sync was not contiguous
            state.next_seq = seq + 1
            state.last_taken_seq = seq
            state.anchor_breaks = queued.breaks
            self._max_issued = max(self._max_issued, seq)
            taken.append(EmittedSync(queued.sync, SyncLineage(self._writer_id, seq)))
        return taken

    def mark_failed(self, emitted: EmittedSync) -> None:
        """Report that ``emitted`` was not written (and will not be retried by the caller).

        Its sequence number stays consumed, so readers never bridge the hole. To re-anchor readers
        quickly, the newest known sync of the partition is queued for sending: the newer delayed
        sync if there is one, otherwise ``emitted`` itself again (with a new sequence number) if it
        is still the newest taken sync. MM2 just drops a failed sync.
        """
        tp = emitted.topic_partition
        state = self._states.get(tp)
        if state is None or emitted.lineage.writer_id != self._writer_id:
            return
        if tp in self._pending:
            return  # a newer sync is already queued
        delayed = self._delayed.pop(tp, None)
        if delayed is not None:
            state.last_sync_down = delayed.down
            self._pending[tp] = delayed
        elif emitted.lineage.sequence == state.last_taken_seq:
            sync = emitted.sync
            self._pending[tp] = _Queued(
                tp, sync.upstream_offset, sync.downstream_offset, state.breaks
            )

    # -- partition lifecycle ---------------------------------------------------------------------

    def reset(self, tp: TopicPartition) -> None:
        """Restart ``tp``'s emission state as after a task restart: the next record is due and
        the lineage chain is broken. Queued syncs stay queued."""
        old = self._states.get(tp)
        if old is None:
            return
        state = _PartitionState(old.next_seq + 1)  # skip a number: no chain across the reset
        state.last_taken_seq = old.last_taken_seq
        # Records after the reset count breaks above anything still queued from before it, so a
        # queued pre-reset sync and a post-reset sync can never look contiguous.
        state.breaks = old.breaks + 1
        self._states[tp] = state

    def forget(self, tp: TopicPartition) -> None:
        """Drop all state and queued syncs for ``tp`` (e.g. the partition was revoked)."""
        self._states.pop(tp, None)
        self._pending.pop(tp, None)
        self._delayed.pop(tp, None)
        self._closing.pop(tp, None)

    # -- introspection ---------------------------------------------------------------------------

    def pending(self) -> dict[TopicPartition, OffsetSync]:
        """A copy of the pending syncs (due, waiting to be taken)."""
        return {tp: q.sync for tp, q in self._pending.items()}

    def delayed(self) -> dict[TopicPartition, OffsetSync]:
        """A copy of the delayed syncs (not due; sent after :meth:`promote_delayed`)."""
        return {tp: q.sync for tp, q in self._delayed.items()}

    def last_sync_downstream(self, tp: TopicPartition) -> int:
        """MM2's ``lastSyncDownstreamOffset`` for ``tp`` (-1 if none)."""
        state = self._states.get(tp)
        return -1 if state is None else state.last_sync_down

    def partitions(self) -> list[TopicPartition]:
        """Partitions with emission state."""
        return list(self._states)

    def __len__(self) -> int:
        return len(self._states)

    def _fresh_sequence(self) -> int:
        return 0 if self._max_issued < 0 else self._max_issued + 2


#: seconds after which a sync that was not written is reported to its emitter (:class:`FailedSyncs`)
RESEND_AFTER_S: Final = 1.0


class FailedSyncs:
    """Offset syncs that were not written, reported to their emitter
    (:meth:`OffsetSyncEmitter.mark_failed`, which queues the partition's newest sync again)
    ``delay`` seconds after the failure: an offset-syncs topic that keeps refusing them costs one
    more write (and warning) per partition and ``delay``, instead of one after each refusal
    (16 in 3 s on loopback). :meth:`add` and :meth:`report` may run in different threads (one
    each)."""

    def __init__(self, delay: float = RESEND_AFTER_S) -> None:
        self._delay = delay
        self._held: collections.deque[tuple[float, EmittedSync]] = collections.deque()

    def add(self, emitted: EmittedSync, now: float) -> None:
        """``emitted`` was not written (``now``: a monotonic clock's reading)."""
        self._held.append((now + self._delay, emitted))

    def report(self, emitter: OffsetSyncEmitter, now: float) -> int:
        """Report the failures held for ``delay`` to ``emitter``, in the order they came;
        returns how many."""
        held, count = self._held, 0
        while held and held[0][0] <= now:
            emitter.mark_failed(held.popleft()[1])
            count += 1
        return count

    def __len__(self) -> int:
        return len(self._held)
