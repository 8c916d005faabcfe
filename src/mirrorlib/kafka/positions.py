"""Durable source positions of a flow, stored where MM2 stores them.

Positions live in the Connect offsets topic ``mm2-offsets.<source>.internal`` on the target
cluster, in MM2's exact record format (:mod:`mirrorlib.core.connect_offsets`), so MM2 and mirrorlib
can take over from each other. Each record holds the last replicated upstream offset of one
source partition; the latest record per key wins. A position also holds the IDs of the source
and remote topics it belongs to (:mod:`mirrorlib.core.incarnations`): the IDs the copier
binds to a topic (:meth:`~PositionStore.bind`) are written with each of its positions.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from mirrorlib.core.connect_offsets import SourcePosition, murmur2_partition
from mirrorlib.core.incarnations import Incarnation
from mirrorlib.kafka.topiclog import SkippedRecords, TopicLog, decoded

__all__ = ["OPEN_TRANSACTION_WAIT", "PositionStore"]

log = logging.getLogger(__name__)

#: Seconds a ``read_committed`` refresh waits at least for a transaction left open on the
#: offsets topic to end: the producers' ``transaction.timeout.ms`` (60 s by default), after which
#: the broker aborts it, plus the broker's check for expired transactions (every 10 s by
#: default, ``transaction.abort.timed.out.transaction.cleanup.interval.ms``) and a margin.
OPEN_TRANSACTION_WAIT = 80.0


class PositionStore:
    """Reads and writes one flow's positions in the target's Connect offsets topic."""

    def __init__(
        self,
        consumer_config: Mapping[str, str],
        topic: str,
        *,
        source_alias: str,
        target_alias: str,
        partitions: int,
        read_committed: bool,
    ) -> None:
        self.topic = topic
        self.source_alias = source_alias
        self.target_alias = target_alias
        self.num_partitions = partitions
        self._log = TopicLog(
            consumer_config, topic, alias=target_alias, read_committed=read_committed
        )
        self._read_committed = read_committed
        self._lock = threading.Lock()
        self._positions: dict[tuple[str, int], int] = {}
        self._stored_at: dict[tuple[str, int], int] = {}  # record timestamps (ms)
        self._ids: dict[tuple[str, int], Incarnation] = {}  # the topic ids stored with each
        self._bound: dict[str, Incarnation] = {}  # the topic ids written with new positions
        self._skipped = SkippedRecords("a source position", f"cluster {target_alias}")

    @property
    def corrupt_records(self) -> int:
        """Records of the offsets topic skipped because they do not decode."""
        return self._skipped.count

    def _handle(self, msg: Any) -> None:
        for pos in decoded((msg,), SourcePosition.decode, self._skipped):
            self._take(pos, msg.timestamp()[1])

    def _take(self, pos: SourcePosition | None, stored_at: int) -> None:
        if pos is None or pos.cluster != self.source_alias:
            return
        key = (pos.topic, pos.partition)
        if pos.offset is None or pos.offset < 0:
            self._positions.pop(key, None)
            self._stored_at.pop(key, None)
            self._ids.pop(key, None)
        else:
            self._positions[key] = pos.offset
            self._stored_at[key] = stored_at
            self._ids[key] = Incarnation(pos.topic_id, pos.remote_topic_id)

    def refresh(self, timeout: float = 60.0) -> None:
        """Catch up with the offsets topic (other processes may have written to it).

        Read ``read_committed``, it waits for a transaction left open on the topic (by a killed
        worker) to end, so it takes at least :data:`OPEN_TRANSACTION_WAIT` seconds before it
        gives up (:class:`~mirrorlib.errors.TopicReadTimeoutError`)."""
        if self._read_committed:
            timeout = max(timeout, OPEN_TRANSACTION_WAIT)
        with self._lock:
            self._log.read_to_end(self._handle, timeout=timeout)

    def last_replicated(self, topic: str, partition: int) -> int | None:
        """The last replicated upstream offset of a source partition, or ``None``."""
        with self._lock:
            return self._positions.get((topic, partition))

    def stored_incarnation(self, topic: str, partition: int) -> Incarnation:
        """The topic IDs stored with the position of a source partition (none known: both
        ``None``)."""
        with self._lock:
            return self._ids.get((topic, partition), Incarnation())

    def incarnations(self) -> dict[tuple[str, int], Incarnation]:
        with self._lock:
            return dict(self._ids)

    def bind(self, topic: str, ids: Incarnation) -> None:
        """The topic IDs of ``topic`` (source) and its remote topic now: written with every
        position of it from now on."""
        with self._lock:
            self._bound[topic] = ids

    def all(self) -> dict[tuple[str, int], int]:
        with self._lock:
            return dict(self._positions)

    def stored_at(self) -> dict[tuple[str, int], int]:
        """When each position was stored: its record's timestamp (ms since the epoch)."""
        with self._lock:
            return dict(self._stored_at)

    def records(
        self, positions: Iterable[tuple[str, int, int]]
    ) -> list[tuple[int, bytes, bytes | None]]:
        """``(partition, key, value)`` of the offsets-topic records that store ``positions``
        (``(topic, partition, last_replicated_offset)``), partitioned as Connect would."""
        out = []
        for topic, partition, offset in positions:
            ids = self._bound.get(topic, Incarnation())
            pos = SourcePosition(
                self.source_alias, topic, partition, offset, ids.source_id, ids.remote_id
            )
            key = pos.encode_key()
            out.append((murmur2_partition(key, self.num_partitions), key, pos.encode_value()))
        return out

    def remember(self, topic: str, partition: int, offset: int) -> None:
        """Record a position this process has just written (so reads stay consistent)."""
        with self._lock:
            self._positions[(topic, partition)] = offset
            self._stored_at[(topic, partition)] = int(time.time() * 1000)
            self._ids[(topic, partition)] = self._bound.get(topic, Incarnation())

    def close(self) -> None:
        self._log.close()
