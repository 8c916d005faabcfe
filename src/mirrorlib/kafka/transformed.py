"""A flow's record transforms (:mod:`mirrorlib.core.transforms`) applied to a consumed batch,
for both copy loops: the embedded copier's (:mod:`mirrorlib.kafka.copier.loop`) and the Spark
engine's copy tasks (:mod:`mirrorlib.kafka.ranges.executor`).

Each loop's per-record hot path is the same with and without transforms: a flow with transforms
first passes each consumed batch through :func:`transform_batch`, which returns the batch the
loop copies — the records a transform changed replaced by :class:`TransformedMessage` (the
consumed message's methods, with the new key, value, headers and timestamp), the dropped ones
left out — and the records a transform failed on. A flow without transforms never calls it: it
pays nothing per record.

A dropped record is never produced, so no acknowledgement covers it: the offset syncs see an
upstream gap there and write a sync on both sides of it (:mod:`mirrorlib.core.syncs`), and
translation stays exact across it. A transform that raises stops its partition at that record:
the records of the partition before it in the batch are copied, the ones from it on are left out,
and the loop parks the partition there (the embedded copier: :mod:`mirrorlib.kafka.copier.parking`;
a copy task: the partition's range stops there and a later batch copies it again) with the error
in the status; it is read again from that record, so no record is skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mirrorlib.core.transforms import TransformChain, TransformRecord

__all__ = ["TransformFailure", "TransformedMessage", "transform_batch"]

#: ``(topic, partition, upstream offset, why)``: a transform failed on that record
TransformFailure = tuple[str, int, int, str]

_CREATE_TIME = 1  # confluent-kafka's TIMESTAMP_CREATE_TIME


class TransformedMessage:
    """A consumed record after the transforms changed it: the methods of confluent-kafka's
    ``Message`` the copier uses."""

    __slots__ = ("_record",)

    def __init__(self, record: TransformRecord) -> None:
        self._record = record

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return self._record.topic

    def partition(self) -> int:
        return self._record.partition

    def offset(self) -> int:
        return self._record.offset

    def key(self) -> bytes | None:
        return self._record.key

    def value(self) -> bytes | None:
        return self._record.value

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return list(self._record.headers) or None  # (the producer takes a list)

    def timestamp(self) -> tuple[int, int]:
        return (_CREATE_TIME, self._record.timestamp)


def transform_batch(
    msgs: list[Any],
    chain: TransformChain,
    remote_of: Callable[[str, int, int], str | None],
    on_dropped: Callable[[str, int, int], None] | None = None,
) -> tuple[list[Any], list[TransformFailure]]:
    """The batch the loop copies after ``chain`` (see the module), and the records a transform
    failed on (at most one per partition: the rest of the partition is left out).

    ``remote_of(topic, partition, offset)`` is the remote topic of a record the loop copies, or
    ``None`` for one it skips (not its partition, parked, outside its range), which passes
    through untransformed, as do errors. ``on_dropped(topic, partition, offset)`` is told of
    each record a transform dropped."""
    out: list[Any] = []
    failures: list[TransformFailure] = []
    failed: set[tuple[str, int]] = set()
    apply = chain.apply
    for msg in msgs:
        if msg.error() is not None:
            out.append(msg)
            continue
        topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
        remote = remote_of(topic, partition, offset)
        if remote is None:
            out.append(msg)
            continue
        if failed and (topic, partition) in failed:
            continue  # read again from the failed record
        record = TransformRecord(
            msg.key(),
            msg.value(),
            tuple(msg.headers() or ()),
            msg.timestamp()[1],
            topic,
            partition,
            offset,
            remote,
        )
        try:
            result = apply(record)
        except Exception as exc:
            failed.add((topic, partition))
            failures.append((topic, partition, offset, str(exc)))
            continue
        if result is record:
            out.append(msg)
        elif result is not None:
            out.append(TransformedMessage(result))
        elif on_dropped is not None:
            on_dropped(topic, partition, offset)
    return out, failures
