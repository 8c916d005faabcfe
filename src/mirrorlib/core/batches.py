"""Pure planning for the Spark engine: offsets in the checkpoint, batch budgets, task packing.

No Spark and no Kafka client here, so everything is unit-tested directly.

* Offsets are what Spark stores in ``<checkpoint>/offsets/N``: ``{topic: {partition: next}}``
  where ``next`` is the next upstream offset to copy. Keys are sorted (topics by name,
  partitions by number) so the JSON text of equal offsets is equal.
* :func:`allot` shares a batch's record budget (``ReadMaxRows``) between partitions max-min
  fairly: small backlogs drain completely, hot partitions get equal slices of the rest.
  With several tasks, no partition takes more than its task's share of the budget, so a hot
  partition does not make one task the straggler of every batch (its backlog drains over the
  next batches instead).
* :func:`pack` spreads partition ranges over tasks by *load* (bytes pending: records times the
  partition's average record size, when known), longest first onto the least loaded task (LPT).
  A partition is never split: one task writes one target partition, which keeps the target's
  order equal to the source's and the offset syncs' chains intact.
* :class:`Plan` is a batch's planned offsets as the driver keeps them in the checkpoint
  location (``mirrorlib-plans/<batch id>``), so that a replayed batch copies the same ranges,
  with the topic IDs seen when it was planned: the next batch of a topic re-created since (a
  new ID) starts at the new log's first offset, not where the last one ended
  (:func:`mirrorlib.core.incarnations.rebase`).
* :func:`settle` merges what a parked partition still owes (records planned in earlier batches
  but not copied: the target refused one) into a batch's planned ranges.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from mirrorlib.core.incarnations import Incarnation

__all__ = [
    "Plan",
    "Range",
    "allot",
    "decode_offsets",
    "decode_owed",
    "encode_offsets",
    "encode_owed",
    "pack",
    "ranges",
    "record_bytes",
    "settle",
]

TP = tuple[str, int]


@attrs.frozen(order=True)
class Range:
    """Upstream offsets ``[start, end)`` of one source partition to copy in a batch."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(self.end - self.start, 0)


def encode_offsets(offsets: Mapping[TP, int]) -> dict[str, dict[str, int]]:
    """``{(topic, partition): next}`` → the JSON-ready checkpoint dict with a stable order."""
    out: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        out.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return out


def decode_offsets(raw: Mapping[str, Any] | None) -> dict[TP, int]:
    """The inverse of :func:`encode_offsets` (tolerates ``None`` and an empty dict)."""
    out: dict[TP, int] = {}
    for topic, parts in (raw or {}).items():
        for partition, offset in parts.items():
            out[(str(topic), int(partition))] = int(offset)
    return out


def encode_owed(owed: Mapping[TP, Range]) -> list[list[Any]]:
    """What parked partitions owe, JSON-ready: ``[[topic, partition, start, end], ...]``."""
    return [[r.topic, r.partition, r.start, r.end] for _, r in sorted(owed.items())]


def _offsets(offsets: Mapping[TP, int]) -> dict[TP, int]:
    return dict(offsets)


def _ids(ids: Mapping[str, Incarnation]) -> dict[str, Incarnation]:
    return dict(ids)


@attrs.frozen
class Plan:
    """The planned offsets of one batch: each source partition is copied from ``start`` to
    ``end`` (next upstream offsets); ``latest`` holds the source's end offsets seen when the
    batch was planned (``latest - end`` is the lag the batch leaves)."""

    start: Mapping[TP, int] = attrs.field(converter=_offsets)
    end: Mapping[TP, int] = attrs.field(converter=_offsets)
    latest: Mapping[TP, int] = attrs.field(converter=_offsets, factory=dict)
    #: source topic -> the IDs of it and its remote topic when the batch was planned
    ids: Mapping[str, Incarnation] = attrs.field(converter=_ids, factory=dict)

    @property
    def ranges(self) -> list[Range]:
        return ranges(self.start, self.end)

    def encode(self) -> str:
        """JSON text with a stable order (see :func:`encode_offsets`)."""
        return json.dumps(
            {
                "start": encode_offsets(self.start),
                "end": encode_offsets(self.end),
                "latest": encode_offsets(self.latest),
                "ids": {t: [i.source_id, i.remote_id] for t, i in sorted(self.ids.items())},
            },
            sort_keys=True,
        )

    @classmethod
    def decode(cls, text: str) -> Plan:
        raw = json.loads(text)
        return cls(
            decode_offsets(raw.get("start")),
            decode_offsets(raw.get("end")),
            decode_offsets(raw.get("latest")),
            {str(t): Incarnation(*ids) for t, ids in (raw.get("ids") or {}).items()},
        )


def decode_owed(raw: Iterable[Sequence[Any]] | None) -> dict[TP, Range]:
    """The inverse of :func:`encode_owed` (tolerates ``None``)."""
    out: dict[TP, Range] = {}
    for topic, partition, start, end in raw or ():
        r = Range(str(topic), int(partition), int(start), int(end))
        out[(r.topic, r.partition)] = r
    return out


def allot(
    start: Mapping[TP, int],
    available: Mapping[TP, int],
    budget: int | None,
    tasks: int = 1,
) -> dict[TP, int]:
    """End offsets for a batch: ``available`` capped so that at most ``budget`` records are
    taken in total (``None``: no cap). Partitions missing from ``start`` are new: they enter at
    their ``available`` value (their starting position) with nothing to copy in this batch.

    With ``tasks`` > 1 and a budget, one partition takes at most ``budget / tasks`` (rounded
    up; the whole budget when it is the only one pending): the batch's work can then be spread
    over the tasks, rather than one task copying a hot partition while the others idle."""
    end: dict[TP, int] = {}
    pending: dict[TP, int] = {}
    for tp, avail in available.items():
        if tp not in start:
            end[tp] = avail
            continue
        s = start[tp]
        end[tp] = s
        if avail > s:
            pending[tp] = avail - s
    for tp, s in start.items():
        end.setdefault(tp, s)  # a partition that vanished keeps its position
    total = sum(pending.values())
    if budget is None or total <= budget:
        for tp, n in pending.items():
            end[tp] += n
        return end
    left = max(int(budget), 0)
    lanes = min(max(int(tasks), 1), len(pending))
    cap = -(-left // lanes) if lanes > 1 else left
    # max-min fair share (water filling), deterministic: smallest backlogs first, then by name
    order = sorted(pending, key=lambda tp: (pending[tp], tp))
    for i, tp in enumerate(order):
        share = left // (len(order) - i)
        take = min(pending[tp], share, cap)
        end[tp] += take
        left -= take
    # hand out the remainder of the integer division, one record each, hottest first
    for tp in sorted(pending, key=lambda tp: (-pending[tp], tp)):
        if left <= 0:
            break
        if end[tp] - start[tp] < min(pending[tp], cap):
            end[tp] += 1
            left -= 1
    return end


def ranges(start: Mapping[TP, int], end: Mapping[TP, int]) -> list[Range]:
    """The non-empty ranges of a batch (partitions new in ``end`` have no range yet)."""
    out = []
    for (topic, partition), e in sorted(end.items()):
        s = start.get((topic, partition))
        if s is not None and e > s:
            out.append(Range(topic, partition, s, e))
    return out


def record_bytes(sizes: Mapping[TP, float]) -> Callable[[Range], float]:
    """The pending bytes of a range: its records times its partition's average record size
    (``sizes``; partitions not measured yet count the mean of the measured ones, or 1)."""
    default = sum(sizes.values()) / len(sizes) if sizes else 1.0
    return lambda r: r.size * sizes.get((r.topic, r.partition), default)


def pack(
    work: Iterable[Range], tasks: int, load: Callable[[Range], float] | None = None
) -> list[list[Range]]:
    """Ranges grouped into at most ``tasks`` groups of balanced ``load`` (default: records;
    the Spark engine passes :func:`record_bytes`), LPT order. A partition appears once.

    Each group is sorted by topic and partition; empty groups are dropped.
    """
    weight: Callable[[Range], float] = load if load is not None else (lambda r: r.size)
    items = sorted(work, key=lambda r: (-weight(r), r.topic, r.partition))
    bins = max(int(tasks), 1)
    heap: list[tuple[float, int]] = [(0.0, i) for i in range(bins)]
    groups: list[list[Range]] = [[] for _ in range(bins)]
    for r in items:
        total, i = heapq.heappop(heap)
        groups[i].append(r)
        heapq.heappush(heap, (total + weight(r), i))
    return [sorted(g) for g in groups if g]


def settle(
    work: Sequence[Range], owed: Mapping[TP, Range], due: Callable[[TP], bool]
) -> tuple[list[Range], dict[TP, Range]]:
    """A batch's ranges to copy, and what stays owed, given the ranges ``owed`` by parked
    partitions (``[first offset not copied, end planned so far)``).

    A parked partition's planned range extends what it owes (the two are contiguous: Spark's
    next batch starts where the last one was planned to end). When ``due(tp)`` (its back-off
    is over) the whole owed range is copied in this batch; otherwise nothing of it is, and it
    stays owed. Partitions that owe nothing copy their planned range."""
    left = dict(owed)
    out: list[Range] = []
    for r in work:
        tp = (r.topic, r.partition)
        debt = left.get(tp)
        if debt is None:
            out.append(r)
            continue
        left[tp] = Range(r.topic, r.partition, min(debt.start, r.start), max(debt.end, r.end))
    for tp, debt in sorted(left.items()):
        if due(tp):
            del left[tp]
            if debt.size:
                out.append(debt)
    return sorted(out), left
