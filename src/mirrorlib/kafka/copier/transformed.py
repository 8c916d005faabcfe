"""A flow's record transforms (:mod:`mirrorlib.core.transforms`) applied to a consumed batch.

The copier's hot loop (:meth:`~mirrorlib.kafka.copier.loop.Copier._copy`) is the same with and
without transforms: a flow with transforms first passes each consumed batch through
:func:`transform_batch`, which returns the batch the loop copies — the records a transform
changed replaced by :class:`TransformedMessage` (the consumed message's methods, with the new
key, value, headers and timestamp), the dropped ones left out — and the partitions a transform
failed on. A flow without transforms never calls it: it pays nothing per record.

A dropped record is never produced, so no acknowledgement covers it: the offset syncs see an
upstream gap there and write a sync on both sides of it (:mod:`mirrorlib.core.syncs`), and
translation stays exact across it. A transform that raises stops its partition at that record:
the records of the partition before it in the batch are copied, the ones from it on are left out,
and the copier parks the partition there (:mod:`mirrorlib.kafka.copier.parking`) with the error
in the status; it is fetched again from that record after the back-off, so no record is skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mirrorlib.core.transforms import TransformChain, TransformRecord
from mirrorlib.kafka.copier.parts import Part

__all__ = ["TransformFailure", "TransformedMessage", "transform_batch"]

#: ``(partition, upstream offset, why)``: a transform failed on that record
TransformFailure = tuple[Part, int, str]

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
    msgs: list[Any], chain: TransformChain, parts: Mapping[tuple[str, int], Part]
) -> tuple[list[Any], list[TransformFailure]]:
    """The batch the copier copies after ``chain`` (see the module), and the partitions a
    transform failed on. Errors, and records of partitions that are not the copier's or are
    parked (the loop skips them), pass through unchanged."""
    out: list[Any] = []
    failures: list[TransformFailure] = []
    failed: set[tuple[str, int]] = set()
    apply = chain.apply
    key: tuple[str, int] | None = None
    part: Part | None = None
    for msg in msgs:
        if msg.error() is not None:
            out.append(msg)
            continue
        topic, partition = msg.topic(), msg.partition()
        if key is None or key[0] != topic or key[1] != partition:
            key = (topic, partition)
            part = parts.get(key)
        if part is None or part.parked_until:
            out.append(msg)
            continue
        if key in failed:
            continue  # fetched again from the failed record after the back-off
        offset = msg.offset()
        record = TransformRecord(
            msg.key(),
            msg.value(),
            tuple(msg.headers() or ()),
            msg.timestamp()[1],
            topic,
            partition,
            offset,
            part.remote,
        )
        try:
            result = apply(record)
        except Exception as exc:
            failed.add(key)
            failures.append((part, offset, str(exc)))
            continue
        if result is record:
            out.append(msg)
        elif result is not None:
            out.append(TransformedMessage(result))
    return out, failures
