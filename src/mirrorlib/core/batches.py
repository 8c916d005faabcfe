"""Pure planning for the Spark engine: offsets in the checkpoint, batch budgets, task packing.

No Spark and no Kafka client here, so everything is unit-tested directly.

* Offsets are what Spark stores in ``<checkpoint>/offsets/N``: ``{topic: {partition: next}}``
  where ``next`` is the next upstream offset to copy. Keys are sorted (topics by name,
  partitions by number) so the JSON text of equal offsets is equal.
* :func:`allot` shares a batch's record budget (``ReadMaxRows``) between partitions max-min
  fairly: small backlogs drain completely, hot partitions get equal slices of the rest.
* :func:`pack` spreads partition ranges over tasks by *load* (records pending), longest first
  onto the least loaded task (LPT). A partition is never split: one task writes one target
  partition, which keeps the target's order equal to the source's and the offset syncs' chains
  intact.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

__all__ = ["Range", "allot", "decode_offsets", "encode_offsets", "pack", "ranges"]

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


def allot(
    start: Mapping[TP, int], available: Mapping[TP, int], budget: int | None
) -> dict[TP, int]:
    """End offsets for a batch: ``available`` capped so that at most ``budget`` records are
    taken in total (``None``: no cap). Partitions missing from ``start`` are new: they enter at
    their ``available`` value (their starting position) with nothing to copy in this batch."""
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
    # max-min fair share (water filling), deterministic: smallest backlogs first, then by name
    left = max(int(budget), 0)
    order = sorted(pending, key=lambda tp: (pending[tp], tp))
    for i, tp in enumerate(order):
        share = left // (len(order) - i)
        take = min(pending[tp], share)
        end[tp] += take
        left -= take
    # hand out the remainder of the integer division, one record each, hottest first
    for tp in sorted(pending, key=lambda tp: (-pending[tp], tp)):
        if left <= 0:
            break
        if end[tp] - start[tp] < pending[tp]:
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


def pack(work: Iterable[Range], tasks: int) -> list[list[Range]]:
    """Ranges grouped into at most ``tasks`` groups of balanced load (records), LPT order.

    Each group is sorted by topic and partition; empty groups are dropped.
    """
    items = sorted(work, key=lambda r: (-r.size, r.topic, r.partition))
    bins = max(int(tasks), 1)
    heap: list[tuple[int, int]] = [(0, i) for i in range(bins)]
    groups: list[list[Range]] = [[] for _ in range(bins)]
    for r in items:
        load, i = heapq.heappop(heap)
        groups[i].append(r)
        heapq.heappush(heap, (load + r.size, i))
    return [sorted(g) for g in groups if g]
