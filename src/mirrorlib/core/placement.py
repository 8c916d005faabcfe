"""Placing a flow's partitions on its copier worker processes (``tasks.max`` > 1), by load.

A partition's *load* is what it will cost to copy soon: its pending bytes (source end offset
minus position, in bytes as far as known) plus its recent byte rate over
:data:`RATE_HORIZON_S` seconds. A partition whose load is unknown weighs
:data:`UNKNOWN_LOAD` so that, with no load known at all, placement balances partition counts.

:func:`place` keeps every partition on the live slot that holds it (moving a partition between
two live workers costs a release, a commit and a fresh fetch), places the others on the least
loaded slots (largest first), and moves partitions between live slots only when the most loaded
slot carries more than ``imbalance`` times the least loaded one's load (and the move makes the
pair more even). Pure: no clock, no Kafka client; the supervisor
(:mod:`mirrorlib.runtime.workers.supervisor`) executes the result, a move as release-confirm-then-assign.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

__all__ = ["RATE_HORIZON_S", "UNKNOWN_LOAD", "Placement", "load_of", "place"]

Key = tuple[str, int]

#: seconds of recent byte rate a partition's load counts besides its pending bytes
RATE_HORIZON_S = 30.0
#: the load of a partition nothing is known about yet (1 byte: counts decide among unknowns)
UNKNOWN_LOAD = 1.0
#: moves considered in one call, at most (each move is a release and a fresh fetch)
MAX_MOVES = 64


def load_of(pending_bytes: float | None, byte_rate: float | None) -> float:
    """The load of one partition (see the module)."""
    if pending_bytes is None and byte_rate is None:
        return UNKNOWN_LOAD
    return max(pending_bytes or 0.0, 0.0) + max(byte_rate or 0.0, 0.0) * RATE_HORIZON_S + 1.0


@attrs.frozen
class Placement:
    """Where each partition goes: ``slots`` maps every placed partition to its slot; ``moved``
    lists the partitions taken from one live slot to another (``(key, from, to)``)."""

    slots: Mapping[Key, int]
    moved: tuple[tuple[Key, int, int], ...] = ()

    def of(self, slot: int) -> frozenset[Key]:
        """The partitions placed on ``slot``."""
        return frozenset(k for k, s in self.slots.items() if s == slot)


def place(
    loads: Mapping[Key, float],
    current: Mapping[Key, int],
    slots: Iterable[int],
    *,
    imbalance: float = 2.0,
) -> Placement:
    """Place the partitions of ``loads`` (partition -> load) on ``slots`` (the live ones).

    ``current``: where partitions are now; a partition on a slot not in ``slots`` (dead) or not
    in ``loads`` (gone) is dropped from it. Returns an empty placement when there is no slot.
    """
    live = sorted(set(slots))
    if not live:
        return Placement({})
    out: dict[Key, int] = {}
    total = dict.fromkeys(live, 0.0)
    count = dict.fromkeys(live, 0)
    for key, slot in current.items():
        if key in loads and slot in total:
            out[key] = slot
            total[slot] += loads[key]
            count[slot] += 1
    # largest first onto the least loaded slot (ties: fewer partitions, lower slot)
    for key in sorted((k for k in loads if k not in out), key=lambda k: (-loads[k], k)):
        slot = min(live, key=lambda s: (total[s], count[s], s))
        out[key] = slot
        total[slot] += loads[key]
        count[slot] += 1
    moved: list[tuple[Key, int, int]] = []
    while len(moved) < MAX_MOVES:
        high = max(live, key=lambda s: (total[s], count[s], -s))
        low = min(live, key=lambda s: (total[s], count[s], s))
        if high == low or total[high] <= imbalance * max(total[low], UNKNOWN_LOAD):
            break
        gap = total[high] - total[low]
        # the largest partition whose move makes the pair more even
        candidates = [k for k, s in out.items() if s == high and 0 < loads[k] < gap]
        if not candidates:
            break
        key = max(candidates, key=lambda k: (loads[k], k))
        out[key] = low
        total[high] -= loads[key]
        total[low] += loads[key]
        count[high] -= 1
        count[low] += 1
        moved.append((key, high, low))
    return Placement(out, tuple(moved))
