"""Making the copier's progress durable: source positions (and, exactly-once, the records).

The copier (:mod:`mirrorlib.kafka.copier`) moves records; a *committer* decides when what it
moved counts. It receives every acknowledged run of a partition
(:class:`~mirrorlib.core.acks.Acknowledged`) and turns it into stored positions and offset syncs,
in one of two ways, chosen once per flow:

* :class:`PositionCommitter` (**at-least-once**). An acknowledged record moves its partition's
  position at once (in memory) and queues its offset syncs; every ``offset.flush.interval`` (and
  when partitions are revoked, and on a clean stop) the positions of the partitions that moved
  are written to the Connect offsets topic. A crash replays at most what was copied since the
  last flush.
* :class:`TransactionCommitter` (**exactly-once**). Records are produced inside a transaction
  (:meth:`~Committer.begin`); as soon as the copier has caught up with its source (a round that
  consumed nothing, or read the transaction's partitions to the end offsets of their last
  fetch: :meth:`~Committer.wants_caught_up`), and otherwise every
  ``transaction.boundary.interval`` (longer when commits are slow:
  :class:`~mirrorlib.core.transactions.TransactionBoundary`), the positions of what was
  produced are written into the same transaction, which is then committed: records and positions
  become visible together, or neither does. Offset syncs of a transaction are queued only once it
  committed; an aborted transaction rewinds its partitions to their committed positions.

Like MM2's ``MirrorSourceTask``, which stays small because Connect's ``WorkerSourceTask`` owns
delivery and offset commits, the copier's consume -> produce loop only calls :meth:`~Committer.tick`
on each round; both committers share the :class:`Committer` interface.
"""

from __future__ import annotations

import functools
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from mirrorlib.core.acks import Acknowledged, PartitionProgress, record_syncs
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.syncs import OffsetSyncEmitter
from mirrorlib.core.transactions import TransactionBoundary
from mirrorlib.kafka.positions import PositionStore

__all__ = ["Committer", "PositionCommitter", "TransactionCommitter", "committer_for"]

log = logging.getLogger(__name__)

Key = tuple[str, int]


class Committer(ABC):
    """Turns acknowledged records into stored positions and offset syncs (see the module).

    ``parts`` is the copier's live map of assigned partitions; ``send_syncs`` sends the due
    offset syncs; ``drain_acks`` matches the delivery reports served so far (the copier's);
    ``rewind(part)`` moves a partition back to its stored position (the copier seeks its
    consumer there) when what was produced since does not count (an aborted transaction).
    :attr:`producer` is the target's record producer while the copier's clients are open.
    """

    #: records are produced inside a transaction that is open now
    in_transaction = False

    def __init__(
        self,
        settings: FlowSettings,
        positions: PositionStore,
        emitter: OffsetSyncEmitter,
        parts: Mapping[Key, PartitionProgress],
        *,
        send_syncs: Callable[[], None],
        drain_acks: Callable[[], None],
        rewind: Callable[[PartitionProgress], None],
    ) -> None:
        self.s = settings
        self.positions = positions
        self.emitter = emitter
        self.parts = parts
        self.send_syncs = send_syncs
        self.drain_acks = drain_acks
        self.rewind = rewind
        self.producer: Any = None
        self._last_flush = time.monotonic()
        self._reset()

    def _reset(self) -> None:  # noqa: B027 (a hook)
        """Forget what was not made durable (at start and when the clients close)."""

    def open(self, producer: Any) -> None:
        """The copier opened its clients: ``producer`` writes records and positions (exactly-once:
        its transactions are initialised)."""
        self.producer = producer

    def close(self) -> None:
        """The copier closed its clients: whatever was not committed is forgotten (its records
        are copied again from the stored positions)."""
        self.producer = None
        self._reset()

    def begin(self) -> None:  # noqa: B027 (a hook)
        """Records are about to be produced (exactly-once: open a transaction if none is)."""

    @abstractmethod
    def acknowledged(self, part: PartitionProgress, acks: Acknowledged) -> None:
        """Take the acknowledged records of ``part`` (``acks.count`` > 0) into account."""

    def wants_caught_up(self, now: float) -> bool:
        """Whether the copier should check, on a round that consumed records, if it read every
        partition of the open transaction to its end (:meth:`tick` commits then); checking
        costs a call per partition, so only a transaction that would commit asks."""
        del now
        return False

    def transaction_partitions(self) -> list[Key]:
        """The partitions written in the open transaction (none outside one)."""
        return []

    @abstractmethod
    def tick(self, now: float, *, caught_up: bool = False) -> None:
        """Called on every round of the copier's loop (``now``: :func:`time.monotonic`;
        ``caught_up``: the copier has caught up with its source: the round consumed nothing, or
        read every partition of the open transaction to its end)."""

    @abstractmethod
    def checkpoint(self, *, only: set[Key] | None = None, final: bool = False) -> None:
        """Make the progress durable now (``only`` these partitions: they are being revoked;
        ``final``: the copier stops)."""

    def lost(self) -> None:  # noqa: B027 (a hook)
        """Partitions were lost to another process (not revoked cleanly)."""

    def moved(self, key: Key) -> None:  # noqa: B027 (a hook)
        """The position of ``key`` was moved by the copier (skipped over lost records)."""

    def forget(self, keys: set[Key]) -> None:  # noqa: B027 (a hook)
        """The partitions ``keys`` are no longer assigned."""

    def refused(self) -> None:  # noqa: B027 (a hook)
        """The target refused a record produced in the open transaction (or refused to take one
        because the transaction failed): it cannot commit (exactly-once: it is aborted on the
        next :meth:`tick`, which rewinds its partitions)."""

    def _produce_positions(self, positions: list[tuple[str, int, int]]) -> None:
        """Queue position records; a refused one marks its partition as moved again (so the
        next flush retries it) instead of disappearing."""
        encoded = self.positions.records(positions)
        for (topic, partition, _), (target_partition, k, v) in zip(positions, encoded, strict=True):
            report = self._position_report((topic, partition))
            deadline: float | None = None
            while True:
                try:
                    self.producer.produce(
                        self.positions.topic, v, k, target_partition, on_delivery=report
                    )
                    break
                except BufferError:  # the producer's queue is full of records: serve reports
                    now = time.monotonic()
                    if deadline is None:
                        deadline = now + self.s.admin_timeout
                    elif now >= deadline:  # (the target does not take them: the commit fails)
                        raise
                    self.producer.poll(0.05)

    def _position_report(self, key: Key) -> Callable[[KafkaError | None, Any], None]:
        def done(err: KafkaError | None, _msg: Any) -> None:
            if err is not None:
                log.warning(
                    "flow %s: position of %s-%d not written to %s: %s",
                    self.s.name,
                    key[0],
                    key[1],
                    self.positions.topic,
                    err.str(),
                )
                if key in self.parts:
                    self.moved(key)

        return done


class PositionCommitter(Committer):
    """At-least-once: positions move on acknowledgement and are written every
    ``offset.flush.interval`` (see the module)."""

    _moved: set[Key]  # partitions whose position was not written since

    def _reset(self) -> None:
        self._moved = set()

    @property
    def unwritten(self) -> frozenset[Key]:
        """Partitions whose position moved since it was last written."""
        return frozenset(self._moved)

    def acknowledged(self, part: PartitionProgress, acks: Acknowledged) -> None:
        up_last = acks.upstream[-1]
        part.stats.record_count += acks.count
        if part.acked is not None and up_last <= part.acked:
            return  # acknowledged after the position moved past it (a skipped gap): stays
        part.acked = up_last
        part.stats.position = up_last + 1
        self._moved.add(part.key)
        if self.s.emit_offset_syncs_enabled:
            record_syncs(self.emitter, part.tp, acks, self.send_syncs)

    def tick(self, now: float, *, caught_up: bool = False) -> None:
        del caught_up  # the records are visible already; positions follow the interval
        if now - self._last_flush >= self.s.offset_flush_interval:
            self.checkpoint()

    def checkpoint(self, *, only: set[Key] | None = None, final: bool = False) -> None:
        producer = self.producer
        if producer is None:
            return
        producer.flush(self.s.admin_timeout if (only or final) else 0)
        self.drain_acks()
        keys = self._moved if only is None else (self._moved & only)
        records = []
        for key in list(keys):
            part = self.parts.get(key)
            if part is not None and part.acked is not None:
                records.append((key[0], key[1], part.acked))
            self._moved.discard(key)
        self._produce_positions(records)
        for topic, partition, offset in records:
            self.positions.remember(topic, partition, offset)
        if records and (only or final):
            producer.flush(self.s.admin_timeout)
        self.emitter.promote_delayed()
        self.send_syncs()
        self._last_flush = time.monotonic()

    def moved(self, key: Key) -> None:
        self._moved.add(key)

    def forget(self, keys: set[Key]) -> None:
        self._moved -= keys


class TransactionCommitter(Committer):
    """Exactly-once: records and their positions in one transaction, committed when the copier
    caught up and every ``transaction.boundary.interval`` (stretched while commits are slow;
    see the module).
    """

    _started: float  # when the open transaction began (time.monotonic)
    _doomed: bool  # a record of the open transaction was refused: it is to be aborted
    # (partition, first upstream, first downstream, count) acknowledged in the open transaction
    _runs: list[tuple[PartitionProgress, int, int, int]]

    def _reset(self) -> None:  # the open transaction is aborted by the next producer's init
        self.in_transaction = False
        self._doomed = False
        self._started = 0.0
        self._runs = []

    @functools.cached_property
    def boundary(self) -> TransactionBoundary:
        """How old the open transaction of a copier with a backlog gets (kept across client
        restarts)."""
        return TransactionBoundary(self.s.transaction_boundary_interval)

    @property
    def pending_syncs(self) -> list[tuple[PartitionProgress, int, int, int]]:
        """Runs ``(partition, upstream, downstream, count)`` acknowledged in the open
        transaction: their offset syncs are recorded when it commits."""
        return list(self._runs)

    def begin(self) -> None:
        if not self.in_transaction:
            self.producer.begin_transaction()
            self.in_transaction = True
            self._started = time.monotonic()

    def acknowledged(self, part: PartitionProgress, acks: Acknowledged) -> None:
        if acks.contiguous:
            self._runs.append((part, acks.upstream[0], acks.reports[0].offset(), acks.count))
        else:
            self._runs.extend(
                (part, up, msg.offset(), 1)
                for up, msg in zip(acks.upstream, acks.reports, strict=True)
            )

    def wants_caught_up(self, now: float) -> bool:
        return (
            self.in_transaction
            and not self._doomed
            and self.boundary.may_end_caught_up(now - self._started)
        )

    def transaction_partitions(self) -> list[Key]:
        return [key for key, p in self.parts.items() if p.txn_last is not None]

    def tick(self, now: float, *, caught_up: bool = False) -> None:
        """Commit the open transaction at once when the copier caught up, or when it is as old
        as the :attr:`boundary` says (``transaction.boundary.interval``, stretched while commits
        are slow): its records become visible to ``read_committed`` consumers as soon as the
        backlog is copied, not up to an interval later, and a busy copier spends a bounded share
        of its time committing (nothing is produced during a commit). A transaction holding a
        refused record is aborted at once (:meth:`refused`)."""
        if self.in_transaction and (
            self._doomed or self.boundary.due(now - self._started, caught_up=caught_up)
        ):
            self.commit()

    def checkpoint(self, *, only: set[Key] | None = None, final: bool = False) -> None:
        if self.producer is not None and self.in_transaction:
            self.commit()

    def lost(self) -> None:
        if self.in_transaction:
            self.abort()

    def refused(self) -> None:
        if self.in_transaction:
            self._doomed = True

    def commit(self) -> None:
        """Write the positions of what the open transaction holds into it and commit it; abort
        it instead when it holds a refused record, or when the commit failed in a way that
        requires it (a record refused by the target, whose delivery report was not served yet,
        makes the transaction refuse the positions: ``_STATE``)."""
        if self._doomed:
            self.abort()
            return
        records = [
            (p.key[0], p.key[1], p.txn_last) for p in self.parts.values() if p.txn_last is not None
        ]
        began = time.monotonic()
        try:
            self._produce_positions(records)
            self.producer.commit_transaction(self.s.admin_timeout)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            log.warning("flow %s: transaction commit failed: %s", self.s.name, exc)
            if isinstance(err, KafkaError) and _requires_abort(err):
                self.abort()
                return
            raise
        self.boundary.committed(time.monotonic() - began)
        self.in_transaction = False
        for topic, partition, offset in records:
            self.positions.remember(topic, partition, offset)
        for part in self.parts.values():
            if part.txn_last is not None:
                part.acked = part.txn_last
                part.stats.position = part.txn_last + 1
                part.txn_last = None
        self.drain_acks()  # the commit served the transaction's last delivery reports
        for part, _, _, count in self._runs:
            part.stats.record_count += count  # copied now (an aborted transaction's are not)
        if self.s.emit_offset_syncs_enabled:
            for part, up, down, count in self._runs:
                if self.parts.get(part.key) is part:
                    self.emitter.record_run(part.tp, up, down, count, on_due=self.send_syncs)
        self._runs.clear()
        # the newest record of each partition of the transaction gets its sync now: with the
        # sync due after the next commit marker (mirrorlib.core.syncs), readers translate every
        # offset exactly, the records on both sides of a marker included
        self.emitter.promote_delayed()
        self.send_syncs()

    def abort(self) -> None:
        """Abort the open transaction: every partition goes back to its committed position (the
        refused records are taken into account first: their partitions are parked)."""
        self.producer.poll(0)
        self.drain_acks()
        try:
            self.producer.abort_transaction(self.s.admin_timeout)
        finally:
            self.producer.poll(0)  # the purged records' reports: forgotten with them below
            self.in_transaction = False
            self._doomed = False
            self._runs.clear()
            for part in self.parts.values():
                part.txn_last = None
                self.rewind(part)  # (to a blocked_at before the first record produced, too)
                part.blocked_at = None
            for part in self.parts.values():
                part.clear()


def _requires_abort(err: KafkaError) -> bool:
    """The transaction failed and is to be aborted: said by a failed commit, or a transaction
    in that state refused the positions (``_STATE``; not a fatal error: that kills the
    producer)."""
    if err.txn_requires_abort():
        return True
    return err.code() == KafkaError._STATE and not err.fatal()


def committer_for(settings: FlowSettings) -> type[Committer]:
    """The committer of a flow: :class:`TransactionCommitter` when exactly-once is enabled on
    the target, :class:`PositionCommitter` otherwise."""
    return TransactionCommitter if settings.exactly_once_enabled else PositionCommitter
