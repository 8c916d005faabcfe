"""MM2's internal records — checkpoints, heartbeats and offset syncs — as immutable values.

Each record encodes and decodes byte-for-byte like MirrorMaker 2's Java classes
(``org.apache.kafka.connect.mirror.Checkpoint``, ``Heartbeat`` and ``OffsetSync``), so topics
written by mirrorlib are read by MM2's own clients and the other way round.

The encoding is Kafka's legacy protocol ``Schema``/``Struct`` layout: fields in declared order,
big-endian integers, and strings as a signed int16 byte length followed by UTF-8 bytes
(never null, at most 32767 bytes).

* Checkpoint key: ``group`` STRING, ``topic`` STRING (the *downstream*, renamed topic),
  ``partition`` INT32. Value: ``version`` INT16 (0), ``upstreamOffset`` INT64,
  ``offset`` INT64 (downstream), ``metadata`` STRING.
* Heartbeat key: ``sourceClusterAlias`` STRING, ``targetClusterAlias`` STRING.
  Value: ``version`` INT16 (0), ``timestamp`` INT64 (epoch milliseconds).
* OffsetSync key: ``topic`` STRING (the *upstream* topic), ``partition`` INT32.
  Value, **without** a version header: ``upstreamOffset`` INT64, ``offset`` INT64 (downstream).

Decoding follows MM2's readers: trailing bytes are ignored, and the version header is read but, like
MM2 (whose version check is a disabled Java ``assert``), any version is decoded with the V0 layout.
Anything else that is malformed — truncated input, a negative string length, invalid UTF-8, a
missing key or value — raises :class:`~mirrorlib.errors.CodecError`, never another exception.
"""

from __future__ import annotations

import struct
from typing import Final, Self

import attrs

from mirrorlib.errors import CodecError

__all__ = [
    "Checkpoint",
    "Heartbeat",
    "OffsetAndMetadata",
    "OffsetSync",
    "TopicPartition",
]

VERSION: Final = 0
_MAX_STRING_BYTES: Final = 32767
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_TWO_I64 = struct.Struct(">qq")
_HEARTBEAT_VALUE = struct.Struct(">hq")
_CHECKPOINT_VALUE_HEAD = struct.Struct(">hqq")
_EMPTY_STRING: Final = b"\x00\x00"


def _none_to_empty(value: str | None) -> str:
    return "" if value is None else value


@attrs.frozen(order=True, cache_hash=True)
class TopicPartition:
    """A topic name and partition number."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@attrs.frozen
class OffsetAndMetadata:
    """A committed consumer offset with its metadata string (never ``None``, as in Java)."""

    offset: int
    metadata: str = attrs.field(default="", converter=_none_to_empty)


# -- encoding primitives -------------------------------------------------------------------------


def _encode_string(value: str, field: str, record: str) -> bytes:
    if not isinstance(value, str):
        raise CodecError(f"{record}.{field} must be a str, got {type(value).__name__}")
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError as exc:  # lone surrogates
        raise CodecError(f"{record}.{field} is not encodable as UTF-8: {exc}") from exc
    if len(raw) > _MAX_STRING_BYTES:
        raise CodecError(
            f"{record}.{field} is {len(raw)} UTF-8 bytes; the MM2 wire format allows at most "
            f"{_MAX_STRING_BYTES}"
        )
    return _I16.pack(len(raw)) + raw


def _check_int(value: int, field: str, record: str, lo: int, hi: int, kind: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise CodecError(f"{record}.{field} must be an int, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise CodecError(f"{record}.{field}={value} does not fit in an {kind}")


class _Reader:
    """Reads protocol primitives from a byte string, raising CodecError on malformed input."""

    __slots__ = ("_buf", "_pos", "_what")

    def __init__(self, buf: bytes | bytearray | memoryview | None, what: str) -> None:
        if buf is None:
            raise CodecError(f"{what} is missing (null)")
        if not isinstance(buf, bytes | bytearray | memoryview):
            raise CodecError(f"{what} must be bytes, got {type(buf).__name__}")
        self._buf = bytes(buf)
        self._pos = 0
        self._what = what

    def _take(self, n: int, field: str) -> bytes:
        end = self._pos + n
        if end > len(self._buf):
            raise CodecError(
                f"{self._what} is truncated: field '{field}' needs {n} bytes at offset "
                f"{self._pos}, only {len(self._buf) - self._pos} remain"
            )
        chunk = self._buf[self._pos : end]
        self._pos = end
        return chunk

    def string(self, field: str) -> str:
        (length,) = _I16.unpack(self._take(2, field))
        if length < 0:
            raise CodecError(f"{self._what}: field '{field}' has negative length {length}")
        raw = self._take(length, field)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CodecError(f"{self._what}: field '{field}' is not valid UTF-8: {exc}") from exc

    def int16(self, field: str) -> int:
        return int(_I16.unpack(self._take(2, field))[0])

    def int32(self, field: str) -> int:
        return int(_I32.unpack(self._take(4, field))[0])

    def int64(self, field: str) -> int:
        return int(_I64.unpack(self._take(8, field))[0])


# -- records -------------------------------------------------------------------------------------


@attrs.frozen(order=True)
class Checkpoint:
    """A consumer group's offset for one partition, translated to the target cluster.

    ``topic`` is the downstream (remote) topic name, as in MM2. ``upstream_offset`` is the group's
    committed offset on the source cluster; ``downstream_offset`` the translated offset on the
    target cluster.
    """

    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = attrs.field(default="", converter=_none_to_empty)

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def offset_and_metadata(self) -> OffsetAndMetadata:
        """The downstream offset and metadata, as a consumer on the target would commit them."""
        return OffsetAndMetadata(self.downstream_offset, self.metadata)

    def encode_key(self) -> bytes:
        return self.key_prefix(self.group) + self.key_suffix(self.topic, self.partition)

    def encode_value(self) -> bytes:
        for name in ("upstream_offset", "downstream_offset"):
            _check_int(getattr(self, name), name, "Checkpoint", _INT64_MIN, _INT64_MAX, "int64")
        return self.value_bytes(self.upstream_offset, self.downstream_offset, self.metadata)

    # The encoding in parts, for writers of many checkpoints (the key is prefix + suffix): the
    # parts repeat (one group, one partition), so a writer encodes each once.

    @staticmethod
    def key_prefix(group: str) -> bytes:
        """The key bytes of ``group`` (the start of every key of the group's checkpoints)."""
        return _encode_string(group, "group", "Checkpoint")

    @staticmethod
    def key_suffix(topic: str, partition: int) -> bytes:
        """The key bytes after the group: downstream ``topic`` and ``partition``."""
        _check_int(partition, "partition", "Checkpoint", _INT32_MIN, _INT32_MAX, "int32")
        return _encode_string(topic, "topic", "Checkpoint") + _I32.pack(partition)

    @staticmethod
    def value_bytes(upstream_offset: int, downstream_offset: int, metadata: str) -> bytes:
        """The value bytes of a checkpoint (offsets must be int64s: ``struct.error`` if not)."""
        if not metadata:
            return _CHECKPOINT_VALUE_HEAD.pack(VERSION, upstream_offset, downstream_offset) + (
                _EMPTY_STRING
            )
        return _CHECKPOINT_VALUE_HEAD.pack(
            VERSION, upstream_offset, downstream_offset
        ) + _encode_string(metadata, "metadata", "Checkpoint")

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> Self:
        k = _Reader(key, "Checkpoint key")
        group = k.string("group")
        topic = k.string("topic")
        partition = k.int32("partition")
        v = _Reader(value, "Checkpoint value")
        v.int16("version")
        upstream = v.int64("upstreamOffset")
        downstream = v.int64("offset")
        metadata = v.string("metadata")
        return cls(group, topic, partition, upstream, downstream, metadata)

    def __str__(self) -> str:
        return (
            f"Checkpoint{{consumerGroupId={self.group}, topicPartition={self.topic}-"
            f"{self.partition}, upstreamOffset={self.upstream_offset}, "
            f"downstreamOffset={self.downstream_offset}, metadata={self.metadata}}}"
        )


@attrs.frozen(order=True)
class Heartbeat:
    """Proof of a live replication path from ``source_cluster_alias`` to ``target_cluster_alias``.

    ``timestamp`` is epoch milliseconds.
    """

    source_cluster_alias: str
    target_cluster_alias: str
    timestamp: int

    def encode_key(self) -> bytes:
        return _encode_string(
            self.source_cluster_alias, "source_cluster_alias", "Heartbeat"
        ) + _encode_string(self.target_cluster_alias, "target_cluster_alias", "Heartbeat")

    def encode_value(self) -> bytes:
        _check_int(self.timestamp, "timestamp", "Heartbeat", _INT64_MIN, _INT64_MAX, "int64")
        return _HEARTBEAT_VALUE.pack(VERSION, self.timestamp)

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> Self:
        k = _Reader(key, "Heartbeat key")
        source = k.string("sourceClusterAlias")
        target = k.string("targetClusterAlias")
        v = _Reader(value, "Heartbeat value")
        v.int16("version")
        timestamp = v.int64("timestamp")
        return cls(source, target, timestamp)

    def __str__(self) -> str:
        return (
            f"Heartbeat{{sourceClusterAlias={self.source_cluster_alias}, "
            f"targetClusterAlias={self.target_cluster_alias}, timestamp={self.timestamp}}}"
        )


@attrs.frozen(order=True)
class OffsetSync:
    """Proof that upstream record ``upstream_offset`` of ``topic``/``partition`` landed at
    ``downstream_offset`` in the remote topic. ``topic`` is the upstream (source) topic name."""

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def encode_key(self) -> bytes:
        _check_int(self.partition, "partition", "OffsetSync", _INT32_MIN, _INT32_MAX, "int32")
        return _encode_string(self.topic, "topic", "OffsetSync") + _I32.pack(self.partition)

    def encode_value(self) -> bytes:
        for name in ("upstream_offset", "downstream_offset"):
            _check_int(getattr(self, name), name, "OffsetSync", _INT64_MIN, _INT64_MAX, "int64")
        return _TWO_I64.pack(self.upstream_offset, self.downstream_offset)

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> Self:
        k = _Reader(key, "OffsetSync key")
        topic = k.string("topic")
        partition = k.int32("partition")
        v = _Reader(value, "OffsetSync value")
        upstream = v.int64("upstreamOffset")
        downstream = v.int64("offset")
        return cls(topic, partition, upstream, downstream)

    def __str__(self) -> str:
        return (
            f"OffsetSync{{topicPartition={self.topic}-{self.partition}, "
            f"upstreamOffset={self.upstream_offset}, downstreamOffset={self.downstream_offset}}}"
        )
