"""MM2's stored source positions, in Kafka Connect's offsets-topic format.

MirrorMaker 2 keeps the position of each replicated source partition in its Connect offsets topic,
``mm2-offsets.<source>.internal`` on the target cluster, as JSON (Connect's ``JsonConverter`` with
schemas disabled)::

    key   ["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"orders"}]
    value {"offset":99}

The stored offset is the *last replicated* upstream offset; replication resumes at ``offset + 1``.
A tombstone (no value) or a negative offset means "no position".

mirrorlib stores its positions in the same topic with the same bytes — keys are written in the
exact order Java's ``HashMap`` iterates them, because Connect looks keys up by their bytes — so a
user can switch a flow from MM2 to mirrorlib and back without re-copying anything. Connect also
partitions this topic by the murmur2 hash of the key bytes; :func:`murmur2_partition` gives the
same partition as Java's default partitioner.

**Topic IDs (beyond MM2).** mirrorlib adds the IDs of the source topic and of the remote topic
the position was read from and written to: ``{"offset":99,"topic_id":"…","remote_topic_id":"…"}``
(:mod:`mirrorlib.core.incarnations`: a re-created topic is a new log). MM2 reads only
``offset`` from the value (``MirrorUtils.unwrapOffset``; ``validateSourceOffset`` checks only
that key too) and writes it alone, so the extra fields never stop MM2 from taking over; a
position written by MM2 has none, and mirrorlib records them with the next position it writes.
"""

from __future__ import annotations

import json
from typing import Final

import attrs

from mirrorlib.core.records import TopicPartition
from mirrorlib.errors import CodecError

__all__ = [
    "SOURCE_CONNECTOR",
    "SourcePosition",
    "murmur2",
    "murmur2_partition",
]

SOURCE_CONNECTOR: Final = "MirrorSourceConnector"


def _dumps(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


@attrs.frozen
class SourcePosition:
    """The stored position of one source partition of a flow: ``offset`` was the last replicated
    upstream offset (``None``: no position stored, or a tombstone)."""

    cluster: str
    topic: str
    partition: int
    offset: int | None
    topic_id: str | None = None  # the source topic's id (Kafka's base64 text), when stored
    remote_topic_id: str | None = None  # the remote topic's id, when stored

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def next_offset(self) -> int | None:
        """Where replication resumes (``offset + 1``), or ``None`` to follow ``auto.offset.reset``."""
        return None if self.offset is None or self.offset < 0 else self.offset + 1

    def encode_key(self, connector: str = SOURCE_CONNECTOR) -> bytes:
        # Java HashMap iteration order for these three keys is cluster, partition, topic.
        return _dumps(
            [connector, {"cluster": self.cluster, "partition": self.partition, "topic": self.topic}]
        )

    def encode_value(self) -> bytes | None:
        if self.offset is None:
            return None
        value: dict[str, object] = {"offset": self.offset}
        if self.topic_id is not None:
            value["topic_id"] = self.topic_id
        if self.remote_topic_id is not None:
            value["remote_topic_id"] = self.remote_topic_id
        return _dumps(value)

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> SourcePosition | None:
        """Decode one record of a Connect offsets topic.

        Returns ``None`` for records that belong to other connectors (checkpoint and heartbeat
        bookkeeping share the topic); raises :class:`CodecError` for malformed source records.
        """
        if key is None:
            raise CodecError("Connect offset record has no key")
        try:
            parsed_key = json.loads(key)
        except (ValueError, UnicodeDecodeError) as exc:
            raise CodecError(f"Connect offset key is not JSON: {key[:80]!r}") from exc
        if (
            not isinstance(parsed_key, list)
            or len(parsed_key) != 2
            or not isinstance(parsed_key[1], dict)
        ):
            raise CodecError(f"Connect offset key is not [connector, partition]: {key[:80]!r}")
        connector, part = parsed_key
        if connector != SOURCE_CONNECTOR:
            return None
        cluster, topic, partition = part.get("cluster"), part.get("topic"), part.get("partition")
        if (
            not isinstance(cluster, str)
            or not isinstance(topic, str)
            or not isinstance(partition, int)
            or isinstance(partition, bool)
        ):
            raise CodecError(f"MirrorSourceConnector offset key has bad fields: {key[:120]!r}")
        if value is None:
            return cls(cluster, topic, partition, None)
        try:
            parsed_value = json.loads(value)
        except (ValueError, UnicodeDecodeError) as exc:
            raise CodecError(f"Connect offset value is not JSON: {value[:80]!r}") from exc
        offset = parsed_value.get("offset") if isinstance(parsed_value, dict) else None
        if offset is None:
            return cls(cluster, topic, partition, None)
        if not isinstance(offset, int) or isinstance(offset, bool):
            raise CodecError(f"MirrorSourceConnector offset is not an integer: {value[:80]!r}")
        assert isinstance(parsed_value, dict)
        ids = [parsed_value.get(k) for k in ("topic_id", "remote_topic_id")]
        topic_id, remote_id = (i if isinstance(i, str) and i else None for i in ids)
        return cls(cluster, topic, partition, offset, topic_id, remote_id)


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash (``org.apache.kafka.common.utils.Utils.murmur2``), as a signed int32."""
    length = len(data)
    seed = 0x9747B28C
    m = 0x5BD1E995
    r = 24
    h = (seed ^ length) & 0xFFFFFFFF
    length4 = length // 4
    for i in range(length4):
        i4 = i * 4
        k = data[i4] | (data[i4 + 1] << 8) | (data[i4 + 2] << 16) | (data[i4 + 3] << 24)
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = length % 4
    base = length & ~3
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def murmur2_partition(key: bytes, num_partitions: int) -> int:
    """The partition Java's default partitioner picks for a keyed record."""
    if num_partitions <= 0:
        raise ValueError("num_partitions must be positive")
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions
