"""Consumer-group commits read from a cluster's ``__consumer_offsets`` topic, as pure values.

The group coordinator stores every offset commit as a record of ``__consumer_offsets``
(Kafka's ``group-coordinator`` ``OffsetCommitKey`` / ``OffsetCommitValue`` messages). Reading that
topic continuously tells the checkpoint task about a commit moments after it happened, for every
group at once, instead of one ``OffsetFetch`` round trip per group and emission.

Record formats (Kafka 4.3's ``group-coordinator/src/main/resources/common/message``)
----------------------------------------------------------------------------------------
* Key: the record type as an INT16 (0 and 1: an offset commit; 2: group metadata; 3 and up: the
  KIP-848 consumer/share/streams group records), then for an offset commit ``group`` STRING,
  ``topic`` STRING, ``partition`` INT32 (STRING: INT16 length, UTF-8 bytes).
* Value: ``version`` INT16 (0..4) then ``offset`` INT64, ``leaderEpoch`` INT32 (v3+), ``metadata``
  STRING, ``commitTimestamp`` INT64, ``expireTimestamp`` INT64 (v1 only). Version 4 is a flexible
  version: ``metadata`` is a COMPACT_STRING (unsigned varint length + 1) and tagged fields follow.
* A null value (a tombstone) deletes the offset: the group deleted it, or it expired.

Transactional offset commits (``sendOffsetsToTransaction``) are written inside the producer's
transaction; reading with ``isolation.level=read_committed`` delivers those of committed
transactions only, when the transaction commits, exactly when the coordinator makes them visible
to ``OffsetFetch``.

:class:`CommitTable` keeps the newest committed offset per (group, partition) of the groups a flow
replicates, and which of them changed since the caller last took them.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Final

import attrs

from mirrorlib.core.records import OffsetAndMetadata, TopicPartition
from mirrorlib.errors import CodecError

__all__ = [
    "CONSUMER_OFFSETS_TOPIC",
    "CommitTable",
    "GroupCommit",
    "decode_commit",
    "decode_commit_key",
]

#: Kafka's internal topic of group commits.
CONSUMER_OFFSETS_TOPIC: Final = "__consumer_offsets"

_OFFSET_COMMIT_TYPES: Final = frozenset({0, 1})
_MAX_VALUE_VERSION: Final = 4
_FLEXIBLE_FROM: Final = 4
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


@attrs.frozen
class GroupCommit:
    """One record of ``__consumer_offsets`` about a committed offset.

    ``offset`` is ``None`` for a tombstone (the group's offset for the partition was deleted or
    expired); ``commit_ms`` is the coordinator's commit timestamp (epoch ms; ``None`` for a
    tombstone).
    """

    group: str
    topic_partition: TopicPartition
    offset: OffsetAndMetadata | None
    commit_ms: int | None


def _string(raw: bytes, pos: int, what: str) -> tuple[str, int]:
    if pos + 2 > len(raw):
        raise CodecError(f"__consumer_offsets record: truncated {what}")
    (size,) = _I16.unpack_from(raw, pos)
    pos += 2
    if size < 0 or pos + size > len(raw):
        raise CodecError(f"__consumer_offsets record: bad length {size} of {what}")
    try:
        return raw[pos : pos + size].decode("utf-8"), pos + size
    except UnicodeDecodeError as exc:
        raise CodecError(f"__consumer_offsets record: {what} is not UTF-8: {exc}") from exc


def _uvarint(raw: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(raw) or shift > 28:
            raise CodecError("__consumer_offsets record: bad unsigned varint")
        byte = raw[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def decode_commit_key(key: bytes | None) -> tuple[str, TopicPartition] | None:
    """``(group, topic-partition)`` of an offset-commit key; ``None`` for any other record type
    (group metadata, KIP-848 records). A malformed key raises :class:`CodecError`."""
    if key is None or len(key) < 2:
        raise CodecError("__consumer_offsets record without a key")
    (kind,) = _I16.unpack_from(key, 0)
    if kind not in _OFFSET_COMMIT_TYPES:
        return None
    group, pos = _string(key, 2, "group")
    topic, pos = _string(key, pos, "topic")
    if pos + 4 > len(key):
        raise CodecError("__consumer_offsets record: truncated partition")
    (partition,) = _I32.unpack_from(key, pos)
    return group, TopicPartition(topic, partition)


def _decode_value(value: bytes) -> tuple[OffsetAndMetadata, int]:
    try:
        (version,) = _I16.unpack_from(value, 0)
        if not 0 <= version <= _MAX_VALUE_VERSION:
            raise CodecError(f"__consumer_offsets record: unknown value version {version}")
        (offset,) = _I64.unpack_from(value, 2)
        pos = 10
        if version >= 3:
            pos += 4  # leaderEpoch
        if version >= _FLEXIBLE_FROM:
            size, pos = _uvarint(value, pos)
            size -= 1
            if size < 0 or pos + size > len(value):
                raise CodecError(f"__consumer_offsets record: bad metadata length {size}")
            metadata = value[pos : pos + size].decode("utf-8")
            pos += size
        else:
            metadata, pos = _string(value, pos, "metadata")
        (commit_ms,) = _I64.unpack_from(value, pos)
    except struct.error as exc:
        raise CodecError(f"__consumer_offsets record: truncated value: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise CodecError(f"__consumer_offsets record: metadata is not UTF-8: {exc}") from exc
    return OffsetAndMetadata(offset, metadata), commit_ms


def decode_commit(key: bytes | None, value: bytes | None) -> GroupCommit | None:
    """The offset commit (or tombstone) a ``__consumer_offsets`` record holds; ``None`` when it
    is another record type. Malformed bytes raise :class:`CodecError`."""
    found = decode_commit_key(key)
    if found is None:
        return None
    group, tp = found
    if value is None:
        return GroupCommit(group, tp, None, None)
    offset, commit_ms = _decode_value(value)
    return GroupCommit(group, tp, offset, commit_ms)


class CommitTable:
    """The newest committed offset per (group, partition) of the groups ``accept`` admits, fed
    from ``__consumer_offsets`` records in order (:meth:`add_record`), and the groups whose
    offsets changed since :meth:`take_changed` was last called.

    ``accept`` is asked once per group name (the answer is cached). Values of other groups are
    never decoded, so a busy cluster costs one key decode per foreign commit. Not thread-safe.
    """

    def __init__(self, accept: Callable[[str], bool]) -> None:
        self._accept = accept
        self._accepted: dict[str, bool] = {}
        # Offsets and commit times in two tables of the same keys: a checkpoint cycle copies a
        # group's offsets as one dict copy and looks its times up with a dict's own ``get``
        # (see :meth:`commit_times`), and no (offset, time) pair is built per commit.
        self._offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        self._times: dict[str, dict[TopicPartition, int]] = {}
        self._changed: set[str] = set()

    def add_record(self, key: bytes | None, value: bytes | None) -> bool:
        """Apply one record; returns whether it changed an admitted group's offsets."""
        found = decode_commit_key(key)
        if found is None:
            return False
        group, tp = found
        accepted = self._accepted.get(group)
        if accepted is None:
            accepted = self._accepted[group] = self._accept(group)
        if not accepted:
            return False
        if value is None:
            return self.remove(group, tp)
        offset, commit_ms = _decode_value(value)
        return self.put(group, tp, offset, commit_ms)

    def put(
        self, group: str, tp: TopicPartition, offset: OffsetAndMetadata, commit_ms: int
    ) -> bool:
        """Record ``group``'s commit of ``offset`` for ``tp`` at ``commit_ms``; returns whether the
        offset (or its metadata) changed."""
        offsets = self._offsets.get(group)
        if offsets is None:
            offsets = self._offsets[group] = {}
            self._times[group] = {}
        previous = offsets.get(tp)
        offsets[tp] = offset
        self._times[group][tp] = commit_ms
        if previous is not None and previous == offset:
            return False
        self._changed.add(group)
        return True

    def remove(self, group: str, tp: TopicPartition) -> bool:
        """Forget ``group``'s offset for ``tp`` (a tombstone); returns whether it was known."""
        offsets = self._offsets.get(group)
        if offsets is None or offsets.pop(tp, None) is None:
            return False
        self._times[group].pop(tp, None)
        if not offsets:
            del self._offsets[group]
            del self._times[group]
        self._changed.add(group)
        return True

    def take_changed(self) -> set[str]:
        """The groups whose offsets changed since the previous call (and forget them)."""
        changed, self._changed = self._changed, set()
        return changed

    def has_changed(self) -> bool:
        """Whether any group changed since :meth:`take_changed` was last called."""
        return bool(self._changed)

    def mark_changed(self, groups: set[str]) -> None:
        """Report ``groups`` as changed again (e.g. their emission was postponed)."""
        self._changed |= groups

    def offsets(self, group: str) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (empty if unknown)."""
        return dict(self._offsets.get(group, {}))

    def commit_ms(self, group: str, tp: TopicPartition) -> int | None:
        """When the group committed its current offset of ``tp`` (epoch ms), if known."""
        times = self._times.get(group)
        return None if times is None else times.get(tp)

    def commit_times(self, group: str) -> Mapping[TopicPartition, int]:
        """When the group committed each of its current offsets (epoch ms), as a live read-only
        view (no copy: for a caller that looks many of them up)."""
        return MappingProxyType(self._times.get(group, {}))

    def groups(self) -> list[str]:
        """Groups with at least one committed offset, sorted."""
        return sorted(self._offsets)

    def __iter__(self) -> Iterator[str]:
        return iter(self.groups())

    def __len__(self) -> int:
        return len(self._offsets)
