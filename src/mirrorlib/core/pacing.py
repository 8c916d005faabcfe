"""Batches that fit the remote topic's ``max.message.bytes``: the sizing rules, no Kafka client.

The broker refuses a whole record batch larger than the topic's ``max.message.bytes``
(``MSG_SIZE_TOO_LARGE`` for every record of it) even when each record fits, and librdkafka does
not split it. The copier therefore *paces* a partition whose remote topic's limit is below the
producer's ``batch.size``: it holds the partition's records and produces them one batch at a time,
each within the partition's *budget* (see :mod:`mirrorlib.kafka.copier` for the mechanics). This
module holds the arithmetic: how big a record is in a batch, which partitions are paced, how many
held records make the next batch, and how the budget shrinks after a refusal.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

__all__ = [
    "RECORD_OVERHEAD",
    "Sized",
    "batch_budget",
    "batch_length",
    "halved_budget",
    "record_size",
    "size_check_above",
]

#: bytes a single-record batch adds around a record's key and value (batch header and varints)
RECORD_OVERHEAD = 96


class Sized(Protocol):
    """What a record (confluent-kafka's ``Message``) tells of its size."""

    def key(self) -> bytes | None: ...

    def value(self) -> bytes | None: ...

    def headers(self) -> Iterable[tuple[str, bytes | None]] | None: ...


def size_check_above(max_bytes: int | None) -> int:
    """The value length above which a record is measured (:func:`record_size`) against the
    remote topic's ``max_bytes`` before it is produced; below it the per-record hot loops skip
    the measuring. A record with a smaller value exceeds ``max_bytes`` only through a large key
    or headers: the target refuses it then, which parks the partition all the same."""
    return _UNLIMITED if max_bytes is None else max_bytes // 2 - RECORD_OVERHEAD


_UNLIMITED = 1 << 62


def record_size(msg: Sized) -> int:
    """Bytes a record takes in a record batch, framing included (an upper bound)."""
    key, value = msg.key(), msg.value()
    size = RECORD_OVERHEAD + (len(key) if key else 0) + (len(value) if value else 0)
    return size + sum(len(k) + len(v or b"") for k, v in msg.headers() or ())


def batch_budget(max_bytes: int | None, batch_size: int) -> int | None:
    """The batch budget of a partition whose remote topic has ``max_bytes``; ``None`` (not paced)
    when the producer's own batches (``batch_size``) fit."""
    return max_bytes if max_bytes is not None and max_bytes < batch_size else None


def batch_length(held: Sequence[Sized], budget: int | None) -> int:
    """How many of the ``held`` records (oldest first) make the next batch: as many as fit in
    ``budget`` (all when ``None``), and at least one."""
    if budget is None:
        return len(held)
    used = 0
    for n, msg in enumerate(held):
        size = record_size(msg)
        if used and used + size > budget:
            return n
        used += size
    return len(held)


def halved_budget(budget: int | None, batch_size: int, refused: Sized) -> int | None:
    """The budget after the target refused a batch holding ``refused`` as too large: half the
    current one (``batch_size`` when not paced); ``None`` when ``refused`` filled the budget alone
    (it was sent alone: the record itself is too large, a real refusal)."""
    current = batch_size if budget is None else budget
    if record_size(refused) >= current:
        return None
    return current // 2
