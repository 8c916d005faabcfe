"""How the copier gets its partitions, and where each starts.

Either a *group subscription* (the flow's consumer group on the source cluster,
cooperative-sticky assignment, the rebalance callbacks assigning and revoking partitions
incrementally; a static member's stale assignment is renewed) or a *direct assignment* (worker
mode: the partitions a supervisor gives the copier through a :class:`DirectAssignment`). An
exactly-once copier given partitions by the group first fences the transactional ids of nodes
that left the group holding them (:class:`~mirrorlib.kafka.fencing.DepartedFence`). A
partition starts at its stored position, else where ``auto.offset.reset`` says; with ``latest``,
where it started in the first client life is kept across client restarts. See
:mod:`mirrorlib.kafka.copier`.

Incarnations (:mod:`mirrorlib.core.incarnations`): when partitions are assigned, the topic IDs
of their source and remote topics are described and compared with the IDs stored with their
positions; a topic deleted and created again (either side) is copied from its first offset,
with a warning. While copying, the IDs are described again every
``refresh.topics.interval.seconds`` (at most every :data:`INCARNATION_CHECK_MAX_S`): a topic
re-created meanwhile has its partitions revoked (their positions stored) and assigned again,
which applies the same rule.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mirrorlib.core.catalog import TopicCatalog
from mirrorlib.core.incarnations import Incarnation, StartKind, resume
from mirrorlib.core.pacing import batch_budget
from mirrorlib.kafka.copier.parts import CopierContext, Part
from mirrorlib.kafka.fencing import DepartedFence
from mirrorlib.kafka.incarnations import PendingIds, TopicIds
from mirrorlib.kafka.positions import PositionStore
from mirrorlib.kafka.static_member import leave_group

__all__ = ["INCARNATION_CHECK_MAX_S", "Assignment", "DirectAssignment"]

# the copier's records: logged under its name
log = logging.getLogger("mirrorlib.kafka.copier")

# seconds between two renewals of a stale static-member assignment
_RESUBSCRIBE_MIN_S = 10.0
#: seconds between two checks of the copied topics' IDs at most (re-created topics)
INCARNATION_CHECK_MAX_S = 30.0


class DirectAssignment:
    """The partitions a worker copier is to copy, set from another thread (see the module).

    :meth:`set` publishes a numbered assignment; the copier applies it on its next round (its
    dropped partitions committed and unassigned first, or, when ``lost``, its open transaction
    aborted) and then calls ``applied(version)``."""

    def __init__(self, applied: Callable[[int], None]) -> None:
        self._lock = threading.Lock()
        self._version = -1
        self._partitions: frozenset[tuple[str, int]] = frozenset()
        self._lost: frozenset[tuple[str, int]] = frozenset()
        self.applied = applied

    def set(
        self,
        version: int,
        partitions: Iterable[tuple[str, int]],
        lost: Iterable[tuple[str, int]] = (),
    ) -> None:
        with self._lock:
            self._version, self._partitions = version, frozenset(partitions)
            self._lost = self._lost | frozenset(lost)  # (until applied: a newer set may follow)

    def wanted(self) -> tuple[int, frozenset[tuple[str, int]]]:
        with self._lock:
            return self._version, self._partitions

    def take_lost(self) -> frozenset[tuple[str, int]]:
        """The partitions said lost since the last call."""
        with self._lock:
            lost, self._lost = self._lost, frozenset()
            return lost


class Assignment:
    """The copier's partitions: follows the catalog (subscription, remote topics) and the group
    or the ``direct`` assignment, adding and removing :class:`~mirrorlib.kafka.copier.parts.Part`\\ s of
    the shared partition map (see the module).

    ``refresh_metadata`` makes the target producer learn the partitions of grown remote topics."""

    def __init__(
        self,
        ctx: CopierContext,
        catalog: TopicCatalog,
        positions: PositionStore,
        direct: DirectAssignment | None,
        *,
        refresh_metadata: Callable[[list[str]], None],
    ) -> None:
        self._ctx = ctx
        self._catalog = catalog
        self._positions = positions
        self.direct = direct
        self._refresh_metadata = refresh_metadata
        self._direct_version = -1  # the assignment version applied
        self._catalog_version = -1
        self._subscribed: list[str] = []
        # auto.offset.reset=latest: where partitions without a stored position started in this
        # copier's first run; a restart of its clients resumes them there (remember_starts)
        self._starts: dict[tuple[str, int], int] = {}
        self._resubscribed = 0.0  # when a stale static assignment was last renewed
        # exactly-once in a group: other nodes that left holding partitions given to this one
        self._departed = DepartedFence(ctx.s) if direct is None and ctx.transactional else None
        # what a rebalance callback raised: librdkafka calls them inside the consumer's poll,
        # where an exception must not escape (raise_callback_error re-raises it after the poll)
        self._callback_error: Exception | None = None
        # topic ids (mirrorlib.core.incarnations): described, and those positions are written with
        self._topic_ids = TopicIds(ctx.s)
        self._bound: dict[str, Incarnation] = {}
        self._ids_checked = time.monotonic()
        self._pending_ids: PendingIds | None = None  # a periodic check's answers to come

    def idle(self) -> bool:
        """Nothing to copy: no partition given (worker mode), or no topic to subscribe to."""
        return not (self._ctx.parts if self.direct is not None else self._subscribed)

    def reset(self) -> None:
        """The clients closed: the next ones subscribe or apply the assignment anew."""
        self._subscribed = []
        self._callback_error = None
        self._catalog_version = -1
        self._direct_version = -1

    def remember_starts(self) -> None:
        """Before the clients close: where each partition without a stored position started
        (``auto.offset.reset=latest``), so that a restart of the clients resumes it there, not at
        the end of the log again, which would skip the records produced meanwhile and never
        committed (an aborted transaction, or positions not flushed yet)."""
        ctx = self._ctx
        if ctx.s.auto_offset_reset != "latest" or ctx.consumer is None:
            return
        fresh = [
            p
            for p in ctx.parts.values()
            if p.key not in self._starts and self._positions.last_replicated(*p.key) is None
        ]
        if not fresh:
            return
        try:
            consumed = ctx.consumer.position([KafkaTopicPartition(*p.key) for p in fresh])
        except KafkaException:
            consumed = []
        at = {(t.topic, t.partition): t.offset for t in consumed if t.offset >= 0}
        for part in fresh:
            unsettled = (part.first_to_copy_again(), at.get(part.key))
            start = min((o for o in unsettled if o is not None), default=None)
            if start is not None:
                self._starts[part.key] = start

    # -- subscription and assignment -------------------------------------------------------------

    def sync_subscription(self) -> None:
        """Follow the catalog: remote topics (names, partitions, ``max.message.bytes``) and,
        unless in worker mode, the subscription."""
        if self._catalog.version == self._catalog_version:
            return
        ctx = self._ctx
        version, topics = self._catalog.snapshot()
        self._catalog_version = version
        grown = [
            rt.name
            for topic, rt in topics.items()
            if (old := ctx.remote_of.get(topic)) is not None and rt.partitions > old.partitions
        ]
        ctx.remote_of = topics
        if grown:
            self._refresh_metadata(grown)
        for part in ctx.parts.values():  # partitions may have grown on the target
            rt = topics.get(part.key[0])
            if rt is not None:
                part.remote = rt.name
                if rt.max_message_bytes != part.max_bytes:
                    part.max_bytes = rt.max_message_bytes
                    part.budget = batch_budget(part.max_bytes, ctx.batch_size)
        if self.direct is not None:
            return  # worker mode: the parent assigns partitions (sync_assignment)
        names = sorted(topics)
        if names == self._subscribed:
            return
        self._subscribed = names
        if names:
            self._subscribe(names)
        else:
            ctx.consumer.unsubscribe()

    def sync_assignment(self) -> None:
        """Worker mode: apply the parent's latest assignment (dropped partitions are committed
        and unassigned first; lost ones are dropped with the open transaction aborted), then
        confirm it."""
        assert self.direct is not None
        parts, consumer = self._ctx.parts, self._ctx.consumer
        version, wanted = self.direct.wanted()
        if version == self._direct_version:
            return
        dropped = set(parts) - wanted
        lost_keys = self.direct.take_lost() & dropped
        lost = [KafkaTopicPartition(t, p) for (t, p) in sorted(lost_keys)]
        if lost:
            self._on_lost(consumer, lost)
        gone = [KafkaTopicPartition(t, p) for (t, p) in sorted(dropped - lost_keys)]
        if gone:
            self._on_revoke(consumer, gone)
        new = [KafkaTopicPartition(t, p) for (t, p) in sorted(wanted - set(parts))]
        if new:
            self._on_assign(consumer, new)
        self._direct_version = version
        self.direct.applied(version)

    def check_static_assignment(self, now: float) -> None:
        """A static member (``group.instance.id``) that rejoins as the group's leader gets its
        previous assignment back without a rebalance, even when its subscription changed
        (librdkafka does not act on the broker's "skip assignment"): partitions of topics it no
        longer subscribes to are held paused (never copied) and the subscription is renewed,
        which makes the group assign again."""
        ctx = self._ctx
        if self.direct is not None or not ctx.s.group_instance_id or not self._subscribed:
            return
        if now - self._resubscribed < _RESUBSCRIBE_MIN_S:
            return
        stale = [t for t in ctx.consumer.assignment() if t.topic not in self._subscribed]
        if not stale:
            return
        self._resubscribed = now
        log.info(
            "flow %s: the group assigned partitions of topics not replicated any more (%s): "
            "subscribing again",
            ctx.s.name,
            sorted({t.topic for t in stale}),
        )
        ctx.consumer.unsubscribe()
        self._subscribe(self._subscribed)

    def leave_group(self, timeout: float) -> None:
        """A clean stop: a static member leaves the flow's group once its partitions are
        revoked (their positions committed), so the processes sharing the flow get them at once
        (:mod:`mirrorlib.kafka.static_member`). Worker mode has no group."""
        ctx = self._ctx
        if self.direct is not None or not ctx.s.group_instance_id or not self._subscribed:
            return
        self._subscribed = []
        leave_group(ctx.consumer, timeout, ctx.s.name, self.raise_callback_error)

    def _subscribe(self, names: list[str]) -> None:
        self._ctx.consumer.subscribe(
            names,
            on_assign=self._guarded(self._on_assign),
            on_revoke=self._guarded(self._on_revoke),
            on_lost=self._guarded(self._on_lost),
        )

    def _guarded(
        self, callback: Callable[[Any, list[Any]], None]
    ) -> Callable[[Any, list[Any]], None]:
        """A rebalance callback for the consumer: what it raises is kept for
        :meth:`raise_callback_error` instead of escaping into librdkafka. (An exception raised in
        a rebalance callback came out of ``poll`` as an object of confluent-kafka's
        ``KafkaError`` type, which no ``except Exception`` catches: a fenced producer's abort on
        a lost partition killed the copier thread, and its consumer, never polled again, went on
        holding partitions in the group.)"""

        def guarded(consumer: Any, partitions: list[Any]) -> None:
            try:
                callback(consumer, partitions)
            except Exception as exc:
                log.debug("flow %s: rebalance callback failed", self._ctx.s.name, exc_info=True)
                if self._callback_error is None:
                    self._callback_error = exc

        return guarded

    def raise_callback_error(self) -> None:
        """Raise what a rebalance callback raised during the consumer's last poll, if anything
        (once)."""
        exc, self._callback_error = self._callback_error, None
        if exc is not None:
            raise exc

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        ctx = self._ctx
        s = ctx.s
        foreign = [t for t in partitions if self.direct is None and t.topic not in self._subscribed]
        if foreign:  # a static member's stale assignment: held paused, never copied
            consumer.incremental_assign(foreign)
            consumer.pause(foreign)
            partitions = [t for t in partitions if t.topic in self._subscribed]
        if not partitions:
            consumer.incremental_assign([])
            return
        if self._departed is not None:  # before their positions are read
            self._departed.before_copying((t.topic, t.partition) for t in partitions)
        started = time.monotonic()
        self._positions.refresh(timeout=s.admin_timeout)
        log.debug("flow %s: positions read in %.2fs", s.name, time.monotonic() - started)
        current = self._describe({t.topic for t in partitions})
        assign = []
        for ktp in partitions:
            key = (ktp.topic, ktp.partition)
            rt = ctx.remote_of.get(ktp.topic)
            remote = (
                rt.name if rt is not None else s.policy.format_remote_topic(s.source, ktp.topic)
            )
            stats = ctx.stats.partition(ktp.topic, ktp.partition, remote)
            part = Part(key, remote, stats, ctx.ready.append)
            part.max_bytes = rt.max_message_bytes if rt is not None else None
            part.budget = batch_budget(part.max_bytes, ctx.batch_size)
            ctx.parts[key] = part
            start = self._start(part, current.get(ktp.topic, Incarnation()))
            ctx.emitter.forget(part.tp)
            if rt is not None and ktp.partition >= rt.partitions:
                part.parked_until = time.monotonic() + 1.0
                stats.error = f"waiting for partition {ktp.partition} of {rt.name} on {s.target}"
            assign.append(KafkaTopicPartition(ktp.topic, ktp.partition, start))
        log.info("flow %s: assigned %s", s.name, [f"{t.topic}-{t.partition}" for t in assign])
        consumer.incremental_assign(assign)
        for ktp in assign:
            part = ctx.parts[(ktp.topic, ktp.partition)]
            if part.parked_until:
                consumer.pause([KafkaTopicPartition(ktp.topic, ktp.partition)])

    # -- incarnations (re-created topics) --------------------------------------------------------

    def _start(self, part: Part, now_ids: Incarnation) -> int:
        """Where a partition just assigned starts (:func:`~mirrorlib.core.incarnations.resume`:
        after its stored position, from its first offset when the source or remote topic is a
        new incarnation, or where ``auto.offset.reset`` says)."""
        ctx = self._ctx
        s, key = ctx.s, part.key
        last = self._positions.last_replicated(*key)
        stored_ids = self._positions.stored_incarnation(*key)
        rule = resume(
            key[0], key[1], stored=last, stored_ids=stored_ids, current=now_ids,
            remote_topic=part.remote,
        )  # fmt: skip
        part.same_log = last is None or (
            stored_ids.source_id is not None and stored_ids.source_id == now_ids.source_id
        )
        if rule.new_incarnation:
            log.warning("flow %s: %s", s.name, rule.warning)
            ctx.stats.new_incarnation(f"{key[0]}-{key[1]}: {rule.warning}")
            part.same_log = True
            return OFFSET_BEGINNING
        if rule.kind is StartKind.STORED:
            assert last is not None
            part.acked = last
            part.stats.position = last + 1
            return last + 1
        if s.auto_offset_reset == "latest":
            return self._starts.get(key, OFFSET_END)
        return OFFSET_BEGINNING

    def _remotes(self, topics: set[str]) -> dict[str, str]:
        """Source topic → its remote topic, for ``topics``."""
        ctx = self._ctx
        s = ctx.s
        remotes = {}
        for topic in topics:
            rt = ctx.remote_of.get(topic)
            remotes[topic] = (
                rt.name if rt is not None else s.policy.format_remote_topic(s.source, topic)
            )
        return remotes

    def _describe(self, topics: set[str]) -> dict[str, Incarnation]:
        """The topic IDs of ``topics`` and their remote topics now (waiting for the answers);
        IDs written with their positions from now on (an ID not described keeps the one
        known)."""
        try:
            current = self._topic_ids.describe(self._remotes(topics))
        except Exception as exc:  # nothing concluded: positions are used as stored
            log.warning("flow %s: topic ids of %s not described: %s", self._ctx.s.name,
                        sorted(topics), exc)  # fmt: skip
            return {}
        self._bind(current)
        return current

    def _bind(self, current: dict[str, Incarnation]) -> None:
        for topic, ids in current.items():
            old = self._bound.get(topic, Incarnation())
            bound = Incarnation(ids.source_id or old.source_id, ids.remote_id or old.remote_id)
            self._bound[topic] = bound
            self._positions.bind(topic, bound)

    def check_incarnations(self, now: float, *, topics: set[str] | None = None) -> bool:
        """Check the copied topics' IDs (every ``refresh.topics.interval.seconds``, at most
        :data:`INCARNATION_CHECK_MAX_S`; ``topics``: these, now, waiting for the answers): the
        partitions of a topic re-created on either side since are revoked (positions stored)
        and assigned again, which copies them from the new log's first offset
        (:meth:`_on_assign`). Returns whether any was.

        The periodic check never blocks the loop: its requests are sent on one round and their
        answers taken on a later one (a cluster that does not answer delays the check, not the
        copying of the partitions it can serve)."""
        ctx = self._ctx
        if topics is not None:
            before = {t: self._bound.get(t, Incarnation()) for t in topics}
            return self._reassign_changed(before, self._describe(topics))
        pending = self._pending_ids
        if pending is None:
            every = min(max(ctx.s.refresh_topics_interval, 1.0), INCARNATION_CHECK_MAX_S)
            if now - self._ids_checked < every or not ctx.parts:
                return False
            self._ids_checked = now
            try:
                self._pending_ids = self._topic_ids.submit(self._remotes({k[0] for k in ctx.parts}))
            except Exception as exc:  # nothing concluded: checked again next time
                log.warning("flow %s: topic ids not described: %s", ctx.s.name, exc)
            return False
        if not pending.done(now):
            return False
        self._pending_ids = None
        copied = {key[0] for key in ctx.parts}  # (some may have been revoked meanwhile)
        current = {t: ids for t, ids in pending.result().items() if t in copied}
        before = {t: self._bound.get(t, Incarnation()) for t in current}
        self._bind(current)
        return self._reassign_changed(before, current)

    def _reassign_changed(
        self, before: dict[str, Incarnation], current: dict[str, Incarnation]
    ) -> bool:
        """Revoke and assign again the partitions of the topics whose IDs differ from
        ``before``; returns whether there were any."""
        ctx = self._ctx
        changed = sorted(
            t
            for t, ids in current.items()
            if _differs(before[t].source_id, ids.source_id)
            or _differs(before[t].remote_id, ids.remote_id)
        )
        if not changed:
            return False
        for topic in changed:
            # positions of the old incarnation are stored with its ids, then compared anew
            self._bound[topic] = before[topic]
            self._positions.bind(topic, before[topic])
        keys = sorted(key for key in ctx.parts if key[0] in changed)
        log.info("flow %s: topics re-created: %s; assigning %s again", ctx.s.name, changed, keys)
        tps = [KafkaTopicPartition(t, p) for t, p in keys]
        self._on_revoke(ctx.consumer, tps)
        self._on_assign(ctx.consumer, tps)
        return True

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        keys = {(t.topic, t.partition) for t in partitions}
        try:
            self._ctx.committer.checkpoint(only=keys)
        finally:
            self._forget(keys)
            consumer.incremental_unassign(partitions)

    def _on_lost(self, consumer: Any, partitions: list[Any]) -> None:
        keys = {(t.topic, t.partition) for t in partitions}
        try:
            self._ctx.committer.lost()
        finally:
            self._forget(keys)
            consumer.incremental_unassign(partitions)

    def _forget(self, keys: set[tuple[str, int]]) -> None:
        ctx = self._ctx
        for key in keys:
            part = ctx.parts.pop(key, None)
            if part is not None:
                ctx.emitter.forget(part.tp)
                ctx.queued.discard(part)
            ctx.stats.drop_partition(*key)
        ctx.committer.forget(keys)


def _differs(old: str | None, new: str | None) -> bool:
    return old is not None and new is not None and old != new
