"""What the copier's parts share: the copier state of each assigned source partition
(:class:`Part`) and the :class:`CopierContext` (settings, partition map, source consumer...).

The copier (:mod:`mirrorlib.kafka.copier`) owns the clients and the loop; how it gets its
partitions (:mod:`mirrorlib.kafka.copier.assignment`) and what it does with refused records and lost
offsets (:mod:`mirrorlib.kafka.copier.parking`) work on the same partition map through this context.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError

from mirrorlib.core.acks import InFlight, PartitionProgress
from mirrorlib.core.catalog import RemoteTopic
from mirrorlib.core.counters import PartitionStats, StatsRegistry
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.syncs import OffsetSyncEmitter
from mirrorlib.kafka.copier.commit import Committer

__all__ = ["CopierContext", "Part"]


class Part(PartitionProgress):
    """Copier state of one assigned source partition: its progress (in flight, acknowledged,
    blocked; :class:`~mirrorlib.core.acks.PartitionProgress`), remote topic, pacing and parking."""

    __slots__ = (
        "budget",
        "max_bytes",
        "parked_until",
        "pending",
        "probe_at",
        "remote",
        "same_log",
        "sampled_ts",
        "throttled",
    )

    def __init__(
        self,
        key: tuple[str, int],
        remote: str,
        stats: PartitionStats,
        ready: Callable[[InFlight], None],
    ) -> None:
        super().__init__(key, stats, ready)
        self.remote = remote
        self.max_bytes: int | None = None  # the remote topic's max.message.bytes
        # paced (see the copier module): bytes the partition may have in flight, None: any
        self.budget: int | None = None
        self.pending: deque[Any] = deque()  # paced: records consumed, not produced yet
        self.throttled = False  # paced: paused on the source until `pending` is produced
        self.sampled_ts: int | None = None  # tail timestamp at the last latency sample
        self.parked_until = 0.0
        # A retry sends the record it was parked at to the target once, whatever the known
        # max.message.bytes says: the limit may have been raised since it was read (it is cached).
        self.probe_at: int | None = None
        # its position is known to belong to the source log there now (the topic id stored with
        # it is the current one, or this copier started the partition in this incarnation):
        # a position past the log end then means a truncated log (mirrorlib.core.incarnations)
        self.same_log = False

    def first_to_copy_again(self) -> int | None:
        """With nothing acknowledged: the first upstream offset still to be copied — the first
        record produced (:meth:`~mirrorlib.core.acks.PartitionProgress.first_unsettled`),
        queued (paced) or blocked at — or ``None`` when it read nothing yet."""
        unsettled = (
            self.first_unsettled(),
            self.pending[0].offset() if self.pending else None,
            self.blocked_at,
        )
        return min((o for o in unsettled if o is not None), default=None)


class CopierContext:
    """The state a copier shares with its assignment and parking: its settings, status, offset
    sync emitter and committer, the partition map and the queues around it, and the open source
    consumer (``None`` between two client lives). The containers are only ever cleared, never
    replaced: whoever holds them sees the same ones."""

    __slots__ = (
        "batch_size",
        "committer",
        "consumer",
        "emitter",
        "fatal",
        "parts",
        "queued",
        "ready",
        "remote_of",
        "s",
        "stats",
        "transactional",
    )

    def __init__(
        self,
        settings: FlowSettings,
        stats: StatsRegistry,
        emitter: OffsetSyncEmitter,
        *,
        transactional: bool,
    ) -> None:
        self.s = settings
        self.stats = stats
        self.emitter = emitter
        # records and positions go through transactions (exactly-once, or worker mode)
        self.transactional = transactional
        self.parts: dict[tuple[str, int], Part] = {}
        self.ready: list[InFlight] = []  # partitions with delivery reports to match
        self.queued: set[Part] = set()  # paced partitions with records in `pending`
        self.batch_size = 1_000_000  # the replication producer's batch.size
        self.remote_of: dict[str, RemoteTopic] = {}  # the catalog's remote topics
        # fatal errors of the open clients ("source", "target"): they are recreated
        self.fatal: dict[str, KafkaError] = {}
        self.consumer: Any = None
        self.committer: Committer  # set by the copier, which builds it with the partition map
