"""The driver's side of the Spark engine: what to copy, and the positions (confluent-kafka only).

* :class:`SourceView` runs in the driver's long-lived stream-reader process: which source
  partitions are copyable now (the remote topic exists with that partition), their end offsets
  (read with the isolation level of the copy tasks,
  :func:`~mirrorlib.kafka.ranges.executor.source_isolation`) and where new ones start.
* :func:`store_positions` runs in the driver once per batch: the batch's last copied
  offsets, in MM2's offsets topic on the target (:func:`position_producer`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from mirrorlib.core.batches import TP
from mirrorlib.core.connect_offsets import SourcePosition, murmur2_partition
from mirrorlib.core.incarnations import Incarnation, out_of_range, resume
from mirrorlib.core.settings import FlowSettings
from mirrorlib.errors import ClusterTimeoutError
from mirrorlib.kafka import client_conf
from mirrorlib.kafka.admin import ClusterAdmin, kafka_error
from mirrorlib.kafka.incarnations import describe_ids
from mirrorlib.kafka.positions import PositionStore
from mirrorlib.kafka.ranges.executor import source_isolation

__all__ = ["SourceView", "position_producer", "store_positions"]

log = logging.getLogger(__name__)


class SourceView:
    """Source partitions that can be copied now, their end offsets and starting positions."""

    def __init__(self, settings: FlowSettings, offsets_topic_partitions: int) -> None:
        self.s = settings
        self.offsets_topic_partitions = offsets_topic_partitions
        self._source: ClusterAdmin | None = None
        self._target: ClusterAdmin | None = None
        self._positions: PositionStore | None = None
        self._copyable: dict[str, int] = {}
        self._next_refresh = 0.0
        self.missing = 0
        """Source partitions to replicate whose remote partition was not listed (last refresh)."""
        self.events: list[tuple[str, bool]] = []
        """What :meth:`starting_offsets` moved (message, whether a new incarnation), to count."""

    def close(self) -> None:
        if self._positions is not None:
            self._positions.close()
        self._source = self._target = self._positions = None

    def _admins(self) -> tuple[ClusterAdmin, ClusterAdmin]:
        if self._source is None or self._target is None:
            s = self.s
            self._source = ClusterAdmin(s.source_admin, alias=s.source, timeout=s.admin_timeout)
            self._target = ClusterAdmin(s.target_admin, alias=s.target, timeout=s.admin_timeout)
        return self._source, self._target

    def copyable(self, *, force: bool = False) -> dict[str, int]:
        """Source topic → number of its partitions whose remote partition exists on the target.

        Refreshed at most every ``refresh.topics.interval.seconds`` (the driver's metadata task
        creates remote topics and partitions on the same interval)."""
        now = time.monotonic()
        if force or now >= self._next_refresh:
            s = self.s
            source, target = self._admins()
            src = {t: n for t, n in source.list_topics().items() if s.should_replicate_topic(t)}
            tgt = target.list_topics(include_internal=True)
            copyable = {}
            for topic, n in src.items():
                remote = s.policy.format_remote_topic(s.source, topic)
                m = min(n, tgt.get(remote, 0))
                if m > 0:
                    copyable[topic] = m
            self._copyable = copyable
            self.missing = sum(n - copyable.get(t, 0) for t, n in src.items())
            self._next_refresh = now + min(s.refresh_topics_interval, 600.0)
        return dict(self._copyable)

    def settle(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds until the target lists the remote partition of every
        source partition to replicate: remote topics the driver's metadata task has just
        created may not be in the target's metadata yet, and a backfill pins what it sees."""
        deadline = time.monotonic() + timeout
        self.copyable(force=True)
        while self.missing and time.monotonic() < deadline:
            time.sleep(0.2)
            self.copyable(force=True)

    def partitions(self) -> list[TP]:
        return sorted((t, p) for t, n in self.copyable().items() for p in range(n))

    def watermarks(self, tps: Sequence[TP]) -> tuple[dict[TP, int], dict[TP, int]]:
        """``(earliest, latest)`` offsets; ``latest`` is the last stable offset when the source
        is read ``read_committed``."""
        from confluent_kafka import IsolationLevel
        from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

        if not tps:
            return {}, {}
        source, _ = self._admins()
        level = (
            IsolationLevel.READ_COMMITTED
            if source_isolation(self.s) == "read_committed"
            else IsolationLevel.READ_UNCOMMITTED
        )
        timeout = self.s.admin_timeout
        out: list[dict[TP, int]] = []
        for spec in (OffsetSpec.earliest(), OffsetSpec.latest()):  # type: ignore[no-untyped-call]
            refused: dict[TP, Exception] = {}  # retried with fresh metadata until the timeout
            got = source.list_offsets(
                dict.fromkeys(tps, spec), isolation_level=level, timeout=timeout, refused=refused
            )  # fmt: skip
            for (t, p), exc in refused.items():  # e.g. a partition being deleted: skip it now
                log.warning("flow %s: offsets of %s-%d: %s", self.s.name, t, p, exc)
            out.append(got)
        return out[0], out[1]

    def starting_offsets(self, tps: Sequence[TP]) -> dict[TP, int]:
        """Where partitions new to the query start: after the position stored in MM2's offsets
        topic (written by MM2, the embedded engine or an earlier Spark query), otherwise at the
        earliest or latest offset (``auto.offset.reset``)."""
        if not tps:
            return {}
        s = self.s
        if self._positions is None:
            self._positions = PositionStore(
                s.target_consumer,
                s.offset_storage_topic,
                source_alias=s.source,
                target_alias=s.target,
                partitions=self.offsets_topic_partitions,
                # always: worker processes and exactly-once copiers store positions in
                # transactions, and an aborted one can be ahead of records never written
                read_committed=True,
            )
        self._positions.refresh(timeout=s.admin_timeout)
        low, high = self.watermarks(tps)
        ids = self.topic_ids({t for t, _ in tps})
        out = {}
        for tp in tps:
            if tp not in low or tp not in high:
                continue
            stored = self._positions.last_replicated(*tp)
            start = self._start(tp, stored, ids.get(tp[0], Incarnation()), low[tp], high[tp])
            if start is not None:
                out[tp] = start
            elif s.auto_offset_reset == "latest":
                out[tp] = high[tp]
            else:
                out[tp] = low[tp]
        return out

    def _start(
        self, tp: TP, stored: int | None, now: Incarnation, low: int, high: int
    ) -> int | None:
        """A stored position's partition's start (``None``: none stored): after it, or the log's
        first offset for a new incarnation of either topic, or per
        :func:`~mirrorlib.core.incarnations.out_of_range` past the log end."""
        if stored is None or self._positions is None:
            return None
        s = self.s
        before = self._positions.stored_incarnation(*tp)
        remote = s.policy.format_remote_topic(s.source, tp[0])
        rule = resume(tp[0], tp[1], stored=stored, stored_ids=before, current=now,
                      remote_topic=remote)  # fmt: skip
        if rule.new_incarnation:
            log.warning("flow %s: %s", s.name, rule.warning)
            self.events.append((f"{tp[0]}-{tp[1]}: {rule.warning}", True))
            return low
        if stored + 1 > high:
            same = before.source_id is not None and before.source_id == now.source_id
            d = out_of_range(tp[0], tp[1], next_offset=stored + 1, low=low, high=high,
                             same_log=same)  # fmt: skip
            log.warning("flow %s: %s on %s", s.name, d.message, s.source)
            self.events.append((d.message, False))
            return d.resume
        return stored + 1

    def topic_ids(self, topics: set[str]) -> dict[str, Incarnation]:
        """Source topic -> the IDs of it and its remote topic now (those not described:
        ``None``; :mod:`mirrorlib.core.incarnations`)."""
        s = self.s
        source, target = self._admins()
        remotes = {t: s.policy.format_remote_topic(s.source, t) for t in topics}
        timeout = min(s.admin_timeout, 30.0)
        src = describe_ids(source.client, topics, timeout)
        dst = describe_ids(target.client, set(remotes.values()), timeout)
        return {t: Incarnation(src.get(t), dst.get(r)) for t, r in remotes.items()}


_POSITION_PRODUCERS: dict[str, Any] = {}


def position_producer(settings: FlowSettings) -> Any:
    """The producer of the flow's positions (:func:`store_positions`), kept for the process:
    built on the first call, which the driver makes when its query starts, so the producer
    connects and gets its idempotence id while the first batch copies (built by the first
    batch's :func:`store_positions` instead, that batch waited 0.5 s for it)."""
    key = f"{settings.name}|{settings.offset_storage_topic}"
    producer = _POSITION_PRODUCERS.get(key)
    if producer is None:
        conf = client_conf(
            settings.target_producer, acks="all", **{"enable.idempotence": True, "linger.ms": 0}
        )
        producer = _POSITION_PRODUCERS[key] = Producer(conf)
    return producer


def store_positions(
    settings: FlowSettings,
    partitions: int,
    last: Mapping[TP, int],
    ids: Mapping[str, Incarnation] | None = None,
) -> None:
    """Store the last copied upstream offset of each source partition in MM2's offsets topic on
    the target (``partitions`` is the topic's partition count), as the embedded copier does.
    One producer per flow is kept for the process (:func:`position_producer`). Raises
    :class:`~mirrorlib.errors.ClusterTimeoutError` when the records are not acknowledged within
    the admin timeout, and the :class:`~mirrorlib.errors.KafkaRequestError` of the target's
    refusal (e.g. :class:`~mirrorlib.errors.TopicAuthorizationError`, naming the topic) when it
    refused any (a producer failed for good is replaced at the next call)."""
    producer = position_producer(settings)
    refused: list[KafkaError] = []

    def delivered(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            refused.append(err)

    for (topic, partition), offset in sorted(last.items()):
        inc = (ids or {}).get(topic, Incarnation())  # (mirrorlib.core.incarnations)
        pos = SourcePosition(
            settings.source, topic, partition, offset, inc.source_id, inc.remote_id
        )
        k = pos.encode_key()
        producer.produce(
            settings.offset_storage_topic, pos.encode_value(), k, murmur2_partition(k, partitions),
            on_delivery=delivered,
        )  # fmt: skip
    left = producer.flush(settings.admin_timeout)
    if refused:
        topic = settings.offset_storage_topic
        if any(err.fatal() for err in refused):
            _POSITION_PRODUCERS.pop(f"{settings.name}|{topic}", None)
        raise kafka_error(
            KafkaException(refused[0]), cluster=settings.target, resource=topic,
            action=f"storing {len(refused)} position record(s) in {topic}",
        )  # fmt: skip
    if left:
        raise ClusterTimeoutError(
            f"flow {settings.name}: {left} position record(s) not acknowledged by "
            f"{settings.target}", cluster=settings.target, resource=settings.offset_storage_topic,
            code="_TIMED_OUT", retriable=True,
        )  # fmt: skip
