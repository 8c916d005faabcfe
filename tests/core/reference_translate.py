"""The object-per-sync OffsetTranslator of mirrorlib 0.x, kept unchanged as the oracle of
tests/core/test_translate_compact.py (the compact one must answer the same).

Offset translation: from a consumer group's upstream offset to a safe downstream offset.

What a sync proves
------------------
An offset sync ``(U, D)`` proves one fact: upstream record ``U`` was copied to downstream offset
``D``. A consumer group whose committed upstream offset is ``u`` has consumed everything below
``u`` and nothing from ``u`` on. Translating ``u`` means finding a downstream offset from which a
consumer reads every record at or after ``u`` (re-reading a few is acceptable, skipping one is data
loss).

MirrorMaker 2's answer (the floor)
----------------------------------
MM2's ``OffsetSyncStore`` keeps, per partition, 64 slots of syncs spaced roughly exponentially
into the past: slot 0 is the newest sync, slot ``i`` is at most about ``2**i`` upstream offsets
behind it. To translate ``u`` it takes the newest retained sync with ``U <= u`` and answers ``D``
if ``u == U``, else ``D + 1``: the group has consumed ``U``, but the sync says nothing about how
many of the upstream offsets after ``U`` became downstream records (gaps, transaction markers,
filtered records), so ``D + 1`` is the largest offset that is sure not to skip anything. A group
older than every retained sync cannot be translated (MM2 answers -1; we answer ``None``). An
upstream rewind (a sync below the newest one: the topic was recreated) clears the history.

Exact runs (beyond MM2)
-----------------------
Syncs written by :class:`mirrorlib.core.syncs.OffsetSyncEmitter` carry a :class:`~mirrorlib.core.syncs.
SyncLineage` (writer id, per-partition sequence). When two syncs of a partition arrive back to back
from the same writer with sequences ``n`` and ``n + 1``, the writer guarantees that every record it
acknowledged between them stepped ``+1`` upstream and forward downstream. If moreover
``U2 - U1 == D2 - D1``, every downstream step was exactly ``+1`` too, so every ``u`` in ``[U1, U2]``
is a record that sits at ``D1 + (u - U1)``: translation there is exact. Such pairs are merged into
*runs* ``[U_start, U_end] -> D_start``; a healthy partition needs one run per writer session or per
upstream gap, not one per sync. A run's end is itself a sync, so for an offset after a run (and
before the next) the run still gives MM2's ``D_end + 1`` even when MM2's thinned history has
dropped that sync.

``translate`` answers ``max(MM2 answer, run answer)``. Both are safe (never past the first
downstream offset a consumer must read), so the maximum is safe, never less precise than MM2, and
exact inside runs. Syncs without lineage (written by MM2) only feed the MM2 history.

Safety fixes over MM2
---------------------
A sync whose downstream offset goes *backwards* (``D < D_newest``, or equal ``D`` for a different
``U``) means the downstream topic was recreated or written out of order; every older sync would
then answer past the new records, so the history is cleared as for an upstream rewind. MM2 keeps
it and can skip records.

Memory
------
Per partition: 64 history slots, at most ``max_runs`` runs (default 64; older runs are thinned so
that they stay spread over exponentially growing age buckets), and the newest sync's lineage -- a
few kilobytes, independent of the number of syncs.
"""

from __future__ import annotations

import bisect
from typing import Final

import attrs

from mirrorlib.core.records import OffsetSync, TopicPartition
from mirrorlib.core.syncs import SyncLineage

__all__ = [
    "DEFAULT_MAX_RUNS",
    "SYNCS_PER_PARTITION",
    "ExactRun",
    "OffsetTranslator",
]

#: History slots per partition, as in MM2 (one per bit of a Java long).
SYNCS_PER_PARTITION: Final = 64
#: Default bound on exact runs kept per partition.
DEFAULT_MAX_RUNS: Final = 64

_INT64_MIN: Final = -(2**63)
_TWO64: Final = 2**64


def _wrap64(value: int) -> int:
    """``value`` as a Java ``long`` (two's complement wrap-around)."""
    return (value - _INT64_MIN) % _TWO64 + _INT64_MIN


# Java's `1L << n` for n in 0..63 (1L << 63 is Long.MIN_VALUE).
_SHIFT: Final = tuple(_wrap64(1 << n) for n in range(SYNCS_PER_PARTITION))


class _Slot:
    """One received sync. Slots are compared by identity, as MM2 compares ``OffsetSync`` objects:
    the same values received twice are two distinct syncs."""

    __slots__ = ("down", "up")

    def __init__(self, up: int, down: int) -> None:
        self.up = up
        self.down = down


def _invariant_b(x: _Slot, y: _Slot, i: int, j: int) -> bool:
    """MM2 invariant B for slots i < j: ``x.up <= y.up + 2^j - 2^i`` (Java long arithmetic)."""
    bound = _wrap64(y.up + _SHIFT[j] - _SHIFT[i])
    return x is y or bound < 0 or x.up <= bound


def _invariant_c(x: _Slot, y: _Slot, i: int) -> bool:
    """MM2 invariant C for slot i: ``x.up >= y.up + 2^max(i-2, 0)`` (Java long arithmetic)."""
    bound = _wrap64(y.up + _SHIFT[max(i - 2, 0)])
    return x is y or (bound >= 0 and x.up >= bound)


def _updated_slots(original: list[_Slot], new: _Slot) -> list[_Slot]:
    """MM2's ``OffsetSyncStore.updateSyncArray`` (KAFKA-14666, KAFKA-15202), on a copy.

    Slot 0 takes the new sync. Walking up the array, each slot whose sync became too old for its
    position (invariant B) is replaced by the best candidate from the old array: the newest one
    that is recent enough (B) and separated from its neighbours (C). The walk stops at the first
    slot that still satisfies B, since B then holds for all later slots.
    """
    slots = list(original)
    replacement = new
    replacement_index = 0
    slots[0] = new
    for current in range(1, SYNCS_PER_PARTITION):
        previous = current - 1
        while True:
            old = original[replacement_index]
            is_recent = _invariant_b(slots[previous], old, previous, current)
            separated_from_previous = _invariant_c(slots[previous], old, previous)
            nxt = current + 1
            separated_from_next = nxt >= SYNCS_PER_PARTITION or _invariant_c(
                old, slots[nxt], current
            )
            duplicate = (
                replacement_index + 1 < SYNCS_PER_PARTITION
                and old is original[replacement_index + 1]
            )
            promote = is_recent and separated_from_previous and separated_from_next
            if promote:
                replacement = old
            skip = duplicate or not separated_from_previous
            if promote or skip:
                replacement_index += 1
            if not (replacement_index < current and skip):
                break
        if _invariant_b(slots[previous], slots[current], previous, current):
            break
        slots[current] = replacement
    return slots


@attrs.frozen(order=True)
class ExactRun:
    """A verified contiguous range: every upstream offset ``u`` in
    ``[upstream_start, upstream_end]`` is a record copied to ``downstream_start + (u -
    upstream_start)`` by writer ``writer_id``."""

    upstream_start: int
    upstream_end: int
    downstream_start: int
    writer_id: str

    def translate(self, upstream_offset: int) -> int | None:
        """The exact downstream offset of ``upstream_offset``, or ``None`` outside the run."""
        if self.upstream_start <= upstream_offset <= self.upstream_end:
            return self.downstream_start + (upstream_offset - self.upstream_start)
        return None


class _Run:
    __slots__ = ("down", "end", "start", "writer")

    def __init__(self, start: int, end: int, down: int, writer: str) -> None:
        self.start = start
        self.end = end
        self.down = down
        self.writer = writer


def _run_start(run: _Run) -> int:
    return run.start


class _Partition:
    """Translation state of one partition: MM2's slots, exact runs, and the newest lineage."""

    __slots__ = ("lineage", "runs", "slots")

    def __init__(self, first: _Slot, lineage: SyncLineage | None) -> None:
        self.slots: list[_Slot] = [first] * SYNCS_PER_PARTITION
        self.runs: list[_Run] = []
        self.lineage = lineage

    def clear(self, sync: _Slot) -> None:
        self.slots = [sync] * SYNCS_PER_PARTITION
        self.runs.clear()

    def mm2(self, upstream_offset: int) -> int | None:
        chosen = self.slots[-1]
        for slot in self.slots:
            if slot.up <= upstream_offset:
                chosen = slot
                break
        if chosen.up > upstream_offset:
            return None  # older than all retained history; MM2 answers -1
        return chosen.down + (0 if upstream_offset == chosen.up else 1)

    def from_runs(self, upstream_offset: int) -> int | None:
        """Exact inside a run; past a run's end, MM2's ``+1`` rule applied to the run's end
        sync (which MM2's thinned history may no longer hold)."""
        i = bisect.bisect_right(self.runs, upstream_offset, key=_run_start) - 1
        if i < 0:
            return None
        run = self.runs[i]
        if upstream_offset <= run.end:
            return run.down + (upstream_offset - run.start)
        return run.down + (run.end - run.start) + 1


class OffsetTranslator:
    """Translates upstream consumer-group offsets to downstream offsets from offset syncs.

    Feed it every offset sync in the order they were written (:meth:`add`, with the sync's
    :class:`~mirrorlib.core.syncs.SyncLineage` when the record has one), then :meth:`translate`.
    See the module documentation for the semantics. Memory per partition is bounded: 64 history
    slots plus at most ``max_runs`` exact runs.

    To mimic MM2 when the checkpoints topic could not be loaded, read the existing syncs between
    :meth:`begin_initial_load` and :meth:`end_initial_load`: only the last sync per partition is
    kept from that read, and nothing is translated until it ends. Not thread-safe.
    """

    def __init__(self, *, max_runs: int = DEFAULT_MAX_RUNS) -> None:
        if isinstance(max_runs, bool) or not isinstance(max_runs, int) or max_runs < 1:
            raise ValueError(f"max_runs must be a positive int, got {max_runs!r}")
        self._max_runs = max_runs
        self._partitions: dict[tuple[str, int], _Partition] = {}
        self._loading = False
        self._only_last = False

    # -- loading ---------------------------------------------------------------------------------

    def begin_initial_load(self, *, only_last: bool = True) -> None:
        """Start an initial read of the offset-syncs topic: :meth:`translate` answers ``None``
        until :meth:`end_initial_load`. With ``only_last`` (MM2's ``initializationMustReadToEnd``,
        used when checkpoints could not be loaded) each sync replaces the partition's history,
        so no translation can go below a checkpoint emitted by an earlier generation."""
        self._loading = True
        self._only_last = only_last

    def end_initial_load(self) -> None:
        """The initial read reached the end of the topic; translation is available again."""
        self._loading = False
        self._only_last = False

    @property
    def loading(self) -> bool:
        return self._loading

    # -- adding syncs ----------------------------------------------------------------------------

    def add(self, sync: OffsetSync, lineage: SyncLineage | None = None) -> None:
        """Record ``sync`` (the next one in the offset-syncs topic), with its lineage if any."""
        key = (sync.topic, sync.partition)
        up, down = sync.upstream_offset, sync.downstream_offset
        new = _Slot(up, down)
        part = self._partitions.get(key)
        if part is None:
            self._partitions[key] = _Partition(new, lineage)
            return
        head = part.slots[0]
        upstream_rewind = up < head.up
        downstream_rewind = down < head.down or (down == head.down and up != head.up)
        if self._only_last or upstream_rewind or downstream_rewind:
            part.clear(new)
        else:
            part.slots = _updated_slots(part.slots, new)
            previous = part.lineage
            if (
                lineage is not None
                and previous is not None
                and lineage.writer_id == previous.writer_id
                and lineage.sequence == previous.sequence + 1
                and up > head.up
                and up - head.up == down - head.down
            ):
                self._extend_runs(part, head.up, up, head.down, lineage.writer_id)
        part.lineage = lineage

    def _extend_runs(self, part: _Partition, start: int, end: int, down: int, writer: str) -> None:
        runs = part.runs
        if runs:
            last = runs[-1]
            if last.end == start and last.down + (start - last.start) == down:
                last.end = end
                return
        runs.append(_Run(start, end, down, writer))
        if len(runs) > self._max_runs:
            self._thin(runs, end)

    @staticmethod
    def _thin(runs: list[_Run], head_up: int) -> None:
        """Drop one run (never the newest): from the most crowded age bucket (age measured from
        the newest sync, buckets growing exponentially; older bucket on ties), the shortest run
        (older on ties). Recent history stays dense, older history sparser, like MM2's slots."""
        counts: dict[int, int] = {}
        buckets = [(head_up - run.end).bit_length() for run in runs[:-1]]
        for b in buckets:
            counts[b] = counts.get(b, 0) + 1
        crowded = max(counts, key=lambda b: (counts[b], b))
        victim = min(
            (i for i, b in enumerate(buckets) if b == crowded),
            key=lambda i: (runs[i].end - runs[i].start, i),
        )
        del runs[victim]

    # -- translating -----------------------------------------------------------------------------

    def translate(self, topic: str, partition: int, upstream_offset: int) -> int | None:
        """The downstream offset a group at ``upstream_offset`` should resume from, or ``None``.

        ``None`` when: still in the initial load, no sync known for the partition, or the offset
        is older than all retained history. Never past the first downstream record the group
        still has to read; at least MM2's answer; exact inside verified runs.
        """
        if self._loading:
            return None
        part = self._partitions.get((topic, partition))
        if part is None:
            return None
        mm2 = part.mm2(upstream_offset)
        exact = part.from_runs(upstream_offset)
        if exact is None:
            return mm2
        if mm2 is None:
            return exact
        return max(mm2, exact)

    def translate_mm2(self, topic: str, partition: int, upstream_offset: int) -> int | None:
        """MM2's answer from the retained history alone (no exact runs), for comparison."""
        if self._loading:
            return None
        part = self._partitions.get((topic, partition))
        return None if part is None else part.mm2(upstream_offset)

    # -- introspection ---------------------------------------------------------------------------

    def known(self, topic: str, partition: int) -> bool:
        """Whether any sync is known for the partition."""
        return (topic, partition) in self._partitions

    def partitions(self) -> list[TopicPartition]:
        """Partitions with at least one sync, in first-seen order."""
        return [TopicPartition(t, p) for t, p in self._partitions]

    def __len__(self) -> int:
        return len(self._partitions)

    def __contains__(self, tp: object) -> bool:
        return isinstance(tp, TopicPartition) and (tp.topic, tp.partition) in self._partitions

    def latest(self, topic: str, partition: int) -> OffsetSync | None:
        """The newest sync of the partition, or ``None``."""
        part = self._partitions.get((topic, partition))
        if part is None:
            return None
        head = part.slots[0]
        return OffsetSync(topic, partition, head.up, head.down)

    def history_slots(self, topic: str, partition: int) -> list[OffsetSync]:
        """The 64 MM2 history slots, newest first (repeats included); empty if unknown."""
        part = self._partitions.get((topic, partition))
        if part is None:
            return []
        return [OffsetSync(topic, partition, s.up, s.down) for s in part.slots]

    def history(self, topic: str, partition: int) -> list[OffsetSync]:
        """The distinct retained syncs, newest first."""
        part = self._partitions.get((topic, partition))
        if part is None:
            return []
        out: list[OffsetSync] = []
        previous: _Slot | None = None
        for s in part.slots:
            if s is not previous:
                out.append(OffsetSync(topic, partition, s.up, s.down))
            previous = s
        return out

    def runs(self, topic: str, partition: int) -> list[ExactRun]:
        """The exact runs kept for the partition, oldest first."""
        part = self._partitions.get((topic, partition))
        if part is None:
            return []
        return [ExactRun(r.start, r.end, r.down, r.writer) for r in part.runs]

    def forget(self, topic: str, partition: int) -> None:
        """Drop everything known about the partition."""
        self._partitions.pop((topic, partition), None)

    def clear(self) -> None:
        """Drop everything known about all partitions."""
        self._partitions.clear()
