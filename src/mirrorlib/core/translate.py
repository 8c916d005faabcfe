"""Offset translation: from a consumer group's upstream offset to a safe downstream offset.

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
that they stay spread over exponentially growing age buckets), and the newest sync's lineage --
held in flat arrays (the slots as one-byte indexes into a small pool of syncs, runs as
``array('q')`` triples, writer ids interned once per translator): from about 0.5 KiB for a
partition without runs to about 3 KiB with 64 runs, independent of the number of syncs.
"""

from __future__ import annotations

from array import array
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


# Invariant B compares slots i and i + 1: its bound is ``up + 2^(i+1) - 2^i``; invariant C's for
# slot i is ``up + 2^max(i-2, 0)``. Both as Java long arithmetic: the steps are wrapped here, and
# a sum is wrapped only when it leaves the int64 range (the common case needs no wrap; C's steps
# are positive, so its sums can only leave it upwards).
_STEP_B: Final = tuple(_wrap64(_SHIFT[i + 1] - _SHIFT[i]) for i in range(SYNCS_PER_PARTITION - 1))
_STEP_C: Final = tuple(_SHIFT[max(i - 2, 0)] for i in range(SYNCS_PER_PARTITION))
_INT64_MAX: Final = 2**63 - 1


def _replace_head(slots: bytearray, original: bytes, pool: array[int], new: int) -> int:
    """The usual head of :func:`_update_slots`'s walk, at once; returns its last slot ``p``.

    Slots 1..p that held the old newest sync ``h`` (as slot 0 did) while the new sync is more
    than 2^(i-1) past it (invariant B fails) take the new sync: in the walk each of them finds
    ``h`` not recent enough and skips it because the next slot holds ``h`` too. With syncs every
    100 offsets that is the first 7 slots of each update. Only for non-negative offsets, where
    no Java long arithmetic can wrap (else ``p`` is 0 and the walk does it all).
    """
    h_up = pool[2 * original[0]]
    if h_up < 0:
        return 0
    leading = SYNCS_PER_PARTITION - len(original.lstrip(original[:1]))
    gap = pool[2 * new] - h_up
    p = min(leading - 1, (gap - 1).bit_length() if gap > 0 else 0, SYNCS_PER_PARTITION - 1)
    if p > 0:
        slots[1 : p + 1] = bytes((new,)) * p
    return p


def _update_slots(slots: bytearray, original: bytes, pool: array[int], new: int) -> None:
    """MM2's ``OffsetSyncStore.updateSyncArray`` (KAFKA-14666, KAFKA-15202), on a copy.

    Slots hold indexes into the partition's pool of syncs (``pool[2 * k]`` is the upstream offset
    of pool entry ``k``); two slots hold the same sync when they hold the same index, as MM2
    compares ``OffsetSync`` objects by identity. Slot 0 takes the new sync ``new``. Walking up the
    array, each slot whose sync became too old for its position (invariant B: ``x.up <= y.up +
    2^j - 2^i`` for slots i < j) is replaced by the best candidate from the old array: the newest
    one that is recent enough (B) and separated from its neighbours (invariant C: ``x.up >= y.up
    + 2^max(i-2, 0)``). The walk stops at the first slot that still satisfies B, since B then
    holds for all later slots. (Written out inline: it runs for every offset sync read.)
    Updates ``slots`` in place; ``original`` is its content before the update.
    """
    replacement = new
    slots[0] = new
    last = SYNCS_PER_PARTITION - 1
    replacement_index = p = _replace_head(slots, original, pool, new)
    for current in range(p + 1, SYNCS_PER_PARTITION):
        previous = current - 1
        prev_slot = slots[previous]
        prev_up = pool[2 * prev_slot]
        step_b, step_c = _STEP_B[previous], _STEP_C[previous]
        # Stop at the first slot that still satisfies B (it then holds for all later slots).
        # Checked before the search for a replacement below, which only feeds the slots this
        # walk goes on to replace: the same result, without the search for the slot it stops at.
        here = slots[current]
        if prev_slot == here:
            break
        bound = pool[2 * here] + step_b
        bound = bound if _INT64_MIN <= bound <= _INT64_MAX else _wrap64(bound)
        if bound < 0 or prev_up <= bound:
            break
        following = slots[current + 1] if current < last else -1
        next_bound = pool[2 * following] + _STEP_C[current] if following >= 0 else 0
        next_bound = next_bound if next_bound <= _INT64_MAX else _wrap64(next_bound)
        while True:
            old = original[replacement_index]
            old_up = pool[2 * old]
            if prev_slot == old:
                is_recent = separated_from_previous = True
            else:
                bound = old_up + step_b
                if not _INT64_MIN <= bound <= _INT64_MAX:
                    bound = _wrap64(bound)
                is_recent = bound < 0 or prev_up <= bound
                bound = old_up + step_c
                if bound > _INT64_MAX:
                    bound = _wrap64(bound)
                separated_from_previous = bound >= 0 and prev_up >= bound
            separated_from_next = following in (-1, old) or (0 <= next_bound <= old_up)
            promote = is_recent and separated_from_previous and separated_from_next
            if promote:
                replacement = old
            skip = not separated_from_previous or (
                replacement_index < last and old == original[replacement_index + 1]
            )
            if promote or skip:
                replacement_index += 1
            if not (replacement_index < current and skip):
                break
        slots[current] = replacement


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


#: Smallest pool size at which unreferenced entries are dropped (then at twice what remains).
_POOL_MIN: Final = 12
_U16_MAX: Final = 0xFFFF


class _Partition:
    """Translation state of one partition, in flat arrays (about 0.5 to 3 KiB):

    * ``pool``: received syncs as ``up, down`` pairs; ``slots`` (a 64-byte bytearray, updated in place) holds MM2's history as
      indexes into it. Unreferenced entries are dropped when the pool reaches ``limit`` entries,
      twice the entries that remained last time (usually about ten distinct syncs are referenced).
    * ``runs``: exact runs as ``start, end, down`` triples, oldest first; ``writers``: each
      run's interned writer id (an index into the translator's table).
    * ``writer``/``sequence``: the newest sync's lineage (``writer == -1``: none).
    * ``generation``: changes whenever the history is cleared (see
      :meth:`OffsetTranslator.stamp`).
    """

    __slots__ = ("generation", "limit", "pool", "runs", "sequence", "slots", "writer", "writers")

    def __init__(self, up: int, down: int, writer: int, sequence: int, generation: int) -> None:
        self.pool = array("q", (up, down))
        self.slots = bytearray(SYNCS_PER_PARTITION)
        self.runs = array("q")
        self.writers = array("H")  # widened to "i" past 65,535 interned writer ids
        self.limit = _POOL_MIN
        self.writer = writer
        self.sequence = sequence
        self.generation = generation

    def clear(self, up: int, down: int, generation: int) -> None:
        self.pool = array("q", (up, down))
        self.slots = bytearray(SYNCS_PER_PARTITION)
        del self.runs[:]
        del self.writers[:]
        self.generation = generation

    def push(self, up: int, down: int) -> None:
        """Append a sync to the pool and update the history slots with it."""
        pool = self.pool
        if len(pool) >= 2 * self.limit:
            pool = self._compact()
        pool.append(up)
        pool.append(down)
        _update_slots(self.slots, bytes(self.slots), pool, len(pool) // 2 - 1)

    def _compact(self) -> array[int]:
        keep = sorted(set(self.slots))
        remap = bytearray(256)  # old index -> new index, applied by bytearray.translate
        pool = self.pool
        kept: list[int] = []
        for new, old in enumerate(keep):
            remap[old] = new
            kept += (pool[2 * old], pool[2 * old + 1])
        self.pool = array("q", kept)
        self.slots = self.slots.translate(remap)
        self.limit = max(_POOL_MIN, 2 * len(keep))
        return self.pool

    def head(self) -> tuple[int, int]:
        """The newest sync's ``(up, down)``."""
        k = 2 * self.slots[0]
        return self.pool[k], self.pool[k + 1]

    def sync(self, k: int) -> tuple[int, int]:
        return self.pool[2 * k], self.pool[2 * k + 1]

    def mm2(self, upstream_offset: int) -> int | None:
        pool = self.pool
        chosen = self.slots[-1]
        for slot in self.slots:
            if pool[2 * slot] <= upstream_offset:
                chosen = slot
                break
        up = pool[2 * chosen]
        if up > upstream_offset:
            return None  # older than all retained history; MM2 answers -1
        return pool[2 * chosen + 1] + (0 if upstream_offset == up else 1)

    def from_runs(self, upstream_offset: int) -> int | None:
        """Exact inside a run; past a run's end, MM2's ``+1`` rule applied to the run's end
        sync (which MM2's thinned history may no longer hold)."""
        runs = self.runs
        i = len(runs) - 3
        while i >= 0 and runs[i] > upstream_offset:
            i -= 3
        if i < 0:
            return None
        start, end, down = runs[i], runs[i + 1], runs[i + 2]
        if upstream_offset <= end:
            return down + (upstream_offset - start)
        return down + (end - start) + 1


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
        # Interned writer ids: runs and lineages hold an index into _writers.
        self._writer_index: dict[str, int] = {}
        self._writers: list[str] = []
        self._generation = 0

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
        if lineage is None:
            self.add_offsets(sync.topic, sync.partition, sync.upstream_offset,
                             sync.downstream_offset)  # fmt: skip
        else:
            self.add_offsets(sync.topic, sync.partition, sync.upstream_offset,
                             sync.downstream_offset, lineage.writer_id, lineage.sequence)  # fmt: skip

    def add_offsets(
        self,
        topic: str,
        partition: int,
        upstream_offset: int,
        downstream_offset: int,
        writer_id: str | None = None,
        sequence: int = -1,
    ) -> None:
        """:meth:`add` without building the values: the sync ``(topic, partition,
        upstream_offset, downstream_offset)`` with lineage ``(writer_id, sequence)`` (``writer_id
        None``: no lineage). For readers that decode records themselves."""
        if writer_id is None:
            writer = -1
        else:
            found = self._writer_index.get(writer_id)
            if found is None:
                found = self._writer_index[writer_id] = len(self._writers)
                self._writers.append(writer_id)
            writer = found
        up, down = upstream_offset, downstream_offset
        key = (topic, partition)
        part = self._partitions.get(key)
        if part is None:
            self._generation += 1
            self._partitions[key] = _Partition(up, down, writer, sequence, self._generation)
            return
        head_up, head_down = part.head()
        upstream_rewind = up < head_up
        downstream_rewind = down < head_down or (down == head_down and up != head_up)
        if self._only_last or upstream_rewind or downstream_rewind:
            self._generation += 1
            part.clear(up, down, self._generation)
        else:
            part.push(up, down)
            if (
                writer >= 0
                and writer == part.writer
                and sequence == part.sequence + 1
                and up > head_up
                and up - head_up == down - head_down
            ):
                self._extend_runs(part, head_up, up, head_down, writer)
        part.writer = writer
        part.sequence = sequence

    def _extend_runs(self, part: _Partition, start: int, end: int, down: int, writer: int) -> None:
        runs = part.runs
        if runs:
            last_start, last_end, last_down = runs[-3], runs[-2], runs[-1]
            if last_end == start and last_down + (start - last_start) == down:
                runs[-2] = end
                return
        runs.extend((start, end, down))
        if writer > _U16_MAX and part.writers.typecode == "H":
            part.writers = array("i", part.writers)
        part.writers.append(writer)
        if len(part.writers) > self._max_runs:
            self._thin(part, end)

    @staticmethod
    def _thin(part: _Partition, head_up: int) -> None:
        """Drop one run (never the newest): from the most crowded age bucket (age measured from
        the newest sync, buckets growing exponentially; older bucket on ties), the shortest run
        (older on ties). Recent history stays dense, older history sparser, like MM2's slots."""
        runs = part.runs
        count = len(part.writers) - 1
        counts: dict[int, int] = {}
        buckets = [(head_up - runs[3 * i + 1]).bit_length() for i in range(count)]
        for b in buckets:
            counts[b] = counts.get(b, 0) + 1
        crowded = max(counts, key=lambda b: (counts[b], b))
        victim = min(
            (i for i, b in enumerate(buckets) if b == crowded),
            key=lambda i: (runs[3 * i + 1] - runs[3 * i], i),
        )
        del runs[3 * victim : 3 * victim + 3]
        del part.writers[victim]

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
        return OffsetSync(topic, partition, *part.head())

    def stamp(self, topic: str, partition: int) -> tuple[int, int] | None:
        """``(generation, newest upstream offset)`` of the partition's syncs, or ``None``.

        The generation changes whenever the partition's history is cleared (a rewind, or the
        partition forgotten and seen again). While it stays the same, a new sync can raise the
        answer of :meth:`translate` only for offsets above the newest upstream offset it had:
        below it, later syncs only thin the history out. So a reader that translated ``u`` under
        stamp ``(g, h)`` with ``u <= h`` gets nothing newer by translating it again under
        ``(g, h')`` -- which is what lets the checkpoint task skip unchanged pairs.
        """
        part = self._partitions.get((topic, partition))
        if part is None:
            return None
        return part.generation, part.head()[0]

    def history_slots(self, topic: str, partition: int) -> list[OffsetSync]:
        """The 64 MM2 history slots, newest first (repeats included); empty if unknown."""
        part = self._partitions.get((topic, partition))
        if part is None:
            return []
        return [OffsetSync(topic, partition, *part.sync(k)) for k in part.slots]

    def history(self, topic: str, partition: int) -> list[OffsetSync]:
        """The distinct retained syncs, newest first."""
        part = self._partitions.get((topic, partition))
        if part is None:
            return []
        out: list[OffsetSync] = []
        previous = -1
        for k in part.slots:
            if k != previous:
                out.append(OffsetSync(topic, partition, *part.sync(k)))
            previous = k
        return out

    def runs(self, topic: str, partition: int) -> list[ExactRun]:
        """The exact runs kept for the partition, oldest first."""
        part = self._partitions.get((topic, partition))
        if part is None:
            return []
        r, writers = part.runs, self._writers
        return [
            ExactRun(r[3 * i], r[3 * i + 1], r[3 * i + 2], writers[w])
            for i, w in enumerate(part.writers)
        ]

    def forget(self, topic: str, partition: int) -> None:
        """Drop everything known about the partition."""
        self._partitions.pop((topic, partition), None)

    def clear(self) -> None:
        """Drop everything known about all partitions."""
        self._partitions.clear()
