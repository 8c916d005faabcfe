"""A process's share of a flow's partitions, for its copier worker processes (``tasks.max`` > 1).

With worker processes, no consumer of the flow's group copies anything: :class:`GroupShare` is a
member of the flow's consumer group on the source (``mirrorlib-<A>-><B>``, cooperative-sticky,
static with ``group.instance.id``) that subscribes to the flow's topics, keeps every partition
it is given paused (it fetches nothing) and only serves rebalances; :meth:`GroupShare.owned` is
what the group gives this process now. A revoked partition is handed back only once
``await_release`` returned (the supervisor's workers committed and dropped it). Partitions a
node that left the group without a clean stop held are owned only once its workers'
transactional ids are fenced (:class:`~mirrorlib.kafka.fencing.DepartedFence`).

A static member that rejoins as the group's leader gets its previous assignment back without a
rebalance, even when its subscription changed (librdkafka does not act on the broker's "skip
assignment"); partitions of topics it no longer subscribes to are not owned, and the
subscription is renewed, which makes the group assign again.

**After a pause.** A process stopped (SIGSTOP, a hung host) for longer than the group's session
timeout is no longer a member when it runs again, but its consumer learns that only at its next
heartbeat, and until then :meth:`GroupShare.owned` still answers the old share, which another
node now copies. Its workers left meanwhile (they exit when their parent is silent), and a new
worker process of a slot initialises the slot's transactional id anew, which undoes the other
node's fence. So the supervisor asks :meth:`GroupShare.recheck` when its workers left because
it was silent (or were fenced, or it saw its own pause), and gives no worker a partition it
does not hold until the group coordinator itself listed this process as a member of a stable
group holding it (``DescribeGroups``, :meth:`GroupShare.confirmed`); the share shrinks to
what the coordinator listed. Partitions the consumer reports *lost* (its session ended) are
dropped by their workers without committing: their open transaction is aborted, as the
in-process copier does.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_END, Consumer, ConsumerGroupState, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mirrorlib.core.catalog import TopicCatalog
from mirrorlib.core.settings import FlowSettings
from mirrorlib.errors import ClusterError
from mirrorlib.kafka import client_conf
from mirrorlib.kafka.admin import FreshAdmin
from mirrorlib.kafka.fencing import FENCE_TIMEOUT_S, DepartedFence
from mirrorlib.kafka.static_member import fenced_reason, leave_group, member_fenced

__all__ = ["GroupShare"]

log = logging.getLogger(__name__)

Key = tuple[str, int]

#: seconds between two renewals of a stale static assignment
_RESUBSCRIBE_MIN_S = 10.0
#: seconds between two questions to the group coordinator while a recheck is pending
RECHECK_INTERVAL_S = 1.0
#: on a clean stop, seconds to wait for the workers to stop before leaving the group (they get
#: 20 s to commit and exit: ``mirrorlib.runtime.workers.STOP_TIMEOUT_S``)
LEAVE_WAIT_S = 30.0


class GroupShare:
    """This process's share of the flow's partitions: a static member of the copier group that
    fetches nothing (see the module)."""

    def __init__(self, settings: FlowSettings, catalog: TopicCatalog) -> None:
        self.s = settings
        self.catalog = catalog
        self._lock = threading.Lock()
        self._owned: frozenset[Key] = frozenset()
        #: called with revoked partitions and the stop event; returns once nothing writes them
        self.await_release: Callable[[frozenset[Key], threading.Event], None] | None = None
        #: called with lost partitions (the group session ended) before they leave
        #: :meth:`owned`: their workers are to drop them without committing
        self.lose: Callable[[frozenset[Key]], None] | None = None
        #: set once this node's workers stopped (a clean stop): then, and only then, the
        #: member leaves the group, so other nodes get its partitions at once
        #: (:mod:`mirrorlib.kafka.static_member`); without it, they wait for its session timeout
        self.workers_stopped: threading.Event | None = None
        #: once :attr:`workers_stopped`: whether no worker left a transaction open that could
        #: not be fenced; if one may have, the member does not leave: the other nodes get its
        #: partitions after the session timeout, when its slots' last reports are silent, and
        #: fence them (:class:`~mirrorlib.kafka.fencing.DepartedFence`)
        self.workers_clean: Callable[[], bool] | None = None
        #: called with the reason when another process joined the group as this node
        self.on_fenced: Callable[[str], None] | None = None
        self._stop = threading.Event()
        self._subscribed: list[str] = []
        self._departed = DepartedFence(settings)  # (workers always write in transactions)
        self._asked = 0  # rechecks asked for (tickets)
        self._answered = 0  # the newest ticket the coordinator answered
        self._admin: Any = None
        self._said_unconfirmed = False  # the "no new partitions until" line, once per doubt

    def owned(self) -> frozenset[Key]:
        with self._lock:
            return self._owned

    def recheck(self) -> int:
        """Ask the group coordinator whether this process still holds its share (see the
        module); returns a ticket for :meth:`confirmed`. Thread-safe."""
        with self._lock:
            self._asked += 1
            return self._asked

    def confirmed(self, ticket: int) -> bool:
        """Whether, since :meth:`recheck` gave ``ticket``, the group coordinator listed this
        process as a member of the stable group (and :meth:`owned` kept only what it holds
        there). Thread-safe."""
        with self._lock:
            return self._answered >= ticket

    def run(self, stop: threading.Event) -> None:
        self._stop = stop
        s = self.s
        conf: dict[str, Any] = dict(s.source_consumer)
        conf.update(
            {
                "group.id": s.copier_group_id,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "partition.assignment.strategy": "cooperative-sticky",
                "enable.partition.eof": False,
                "topic.metadata.refresh.interval.ms": int(
                    min(max(s.refresh_topics_interval, 1.0), 300.0) * 1000
                ),
            }
        )
        if s.group_instance_id:
            conf["group.instance.id"] = s.group_instance_id
        consumer = Consumer(client_conf(conf))
        subscribed: list[str] = []
        self._subscribed = subscribed
        version = -1
        resubscribed = 0.0
        next_check = 0.0
        try:
            while not stop.is_set():
                if self.catalog.version != version:
                    version, topics = self.catalog.snapshot()
                    names = sorted(topics)
                    if names != subscribed:
                        subscribed = self._subscribed = names
                        if names:
                            self._subscribe(consumer, names)
                        else:
                            consumer.unsubscribe()
                if not subscribed:
                    stop.wait(0.2)
                    continue
                msg = consumer.poll(0.2)  # serves rebalances; every partition is paused
                err = msg.error() if msg is not None else None
                if err is not None and member_fenced(err):
                    self._fenced(err)
                    return
                now = time.monotonic()
                if now - resubscribed >= _RESUBSCRIBE_MIN_S and any(
                    t.topic not in subscribed for t in consumer.assignment()
                ):
                    # a static leader's stale assignment (see the module)
                    resubscribed = now
                    log.info("flow %s: stale group assignment: subscribing again", s.name)
                    consumer.unsubscribe()
                    self._subscribe(consumer, subscribed)
                with self._lock:
                    asked = self._asked
                if asked > self._answered and now >= next_check:
                    next_check = now + RECHECK_INTERVAL_S
                    if self._ask_coordinator(consumer):
                        with self._lock:
                            self._answered = asked
        finally:
            self._leave(consumer, subscribed)
            with self._lock:
                self._owned = frozenset()
            consumer.close()

    def _fenced(self, err: Any) -> None:
        """Another process joined the flow's group with this node's ``group.instance.id``: this
        node owns nothing any more (its workers drop their partitions) and its flow fails,
        saying why (see ``mirrorlib.kafka.copier.loop.Copier``, which does the same with
        ``tasks.max`` = 1)."""
        with self._lock:
            self._owned = frozenset()
        message = fenced_reason(self.s, err)
        log.error("flow %s stopped: %s", self.s.name, message)
        if self.on_fenced is not None:
            self.on_fenced(message)

    def _leave(self, consumer: Any, subscribed: list[str]) -> None:
        """A clean stop: once the workers stopped (committed and exited), leave the group.
        Not before: another node would copy the partitions while a worker still commits."""
        stopped = self.workers_stopped
        if not (self._stop.is_set() and subscribed and stopped is not None):
            return
        if not stopped.wait(LEAVE_WAIT_S):
            log.warning(
                "flow %s: the workers did not stop within %.0fs: not leaving the flow's group "
                "(other nodes get this node's partitions after its session timeout)",
                self.s.name,
                LEAVE_WAIT_S,
            )
            return
        if self.workers_clean is not None and not self.workers_clean():
            log.warning(
                "flow %s: a worker did not end cleanly and its transactional id could not be "
                "fenced: not leaving the flow's group (the node that gets its partitions after "
                "the session timeout fences it)",
                self.s.name,
            )
            return
        try:
            leave_group(consumer, min(self.s.admin_timeout, 10.0), self.s.name)
        except Exception as exc:  # closing goes on; the group's session ends the membership
            log.warning("flow %s: leaving the flow's group failed: %s", self.s.name, exc)

    def _ask_coordinator(self, consumer: Any) -> bool:
        """Describe the flow's group: when it is stable and lists this process (its static
        instance id, else its member id), keep of :meth:`owned` only what the coordinator
        assigned it and answer True; else (a rebalance going on, not a member (yet), no
        answer) False, to ask again later."""
        s = self.s
        timeout = min(s.admin_timeout, FENCE_TIMEOUT_S)
        gid = s.copier_group_id
        try:
            if self._admin is None:  # retried with fresh metadata / a new client (issue 34)
                self._admin = FreshAdmin(s.source_admin, alias=s.source)
            group = self._admin.call(f"describe group {gid}", lambda admin, left: (
                admin.describe_consumer_groups([gid], request_timeout=left)[gid].result(left)
            ), timeout=timeout)  # fmt: skip
        except (ClusterError, KafkaException, TimeoutError) as exc:
            log.warning(
                "flow %s: cannot describe group %s on %s to confirm this process's share: %s",
                s.name, s.copier_group_id, s.source, exc,
            )  # fmt: skip
            return False
        member_id = consumer.memberid()
        ours = [
            m
            for m in group.members
            if (m.group_instance_id == s.group_instance_id if s.group_instance_id
                else m.member_id == member_id)
        ]  # fmt: skip
        if group.state != ConsumerGroupState.STABLE or not ours:
            (log.debug if self._said_unconfirmed else log.info)(
                "flow %s: group %s is %s and %s this process: its workers get no new "
                "partitions until it does",
                s.name, s.copier_group_id, group.state.name.lower(),
                "lists" if ours else "does not list",
            )  # fmt: skip
            self._said_unconfirmed = True
            return False
        self._said_unconfirmed = False
        held = frozenset(
            (tp.topic, tp.partition) for m in ours for tp in m.assignment.topic_partitions
        )
        with self._lock:
            dropped = self._owned - held
            self._owned = self._owned & held
        log.info(
            "flow %s: the group coordinator confirms this process's share%s",
            s.name,
            f" without {sorted(dropped)}" if dropped else "",
        )
        return True

    def _subscribe(self, consumer: Any, names: list[str]) -> None:
        consumer.subscribe(
            names, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        ktps = [KafkaTopicPartition(t.topic, t.partition, OFFSET_END) for t in partitions]
        consumer.incremental_assign(ktps)
        if ktps:
            consumer.pause(ktps)
        ours = {(t.topic, t.partition) for t in partitions if t.topic in self._subscribed}
        if ours:  # before the workers get them (and read their positions)
            self._departed.before_copying(ours)
        with self._lock:
            self._owned = self._owned | ours
        log.info(
            "flow %s: this process copies %s",
            self.s.name,
            [f"{t.topic}-{t.partition}" for t in partitions],
        )

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        keys = frozenset((t.topic, t.partition) for t in partitions)
        if keys and not self._stop.is_set():  # (at a stop: all of them, once the workers ended)
            log.info(
                "flow %s: the group takes %s from this process: handed over once the workers "
                "released them",
                self.s.name, sorted(f"{t}-{p}" for t, p in keys),
            )  # fmt: skip
        with self._lock:
            self._owned = self._owned - keys
        self._await_release(keys)
        consumer.incremental_unassign(partitions)

    def _on_lost(self, consumer: Any, partitions: list[Any]) -> None:
        keys = frozenset((t.topic, t.partition) for t in partitions)
        log.warning(
            "flow %s: this process lost %s (its group session ended): its workers drop them "
            "without committing",
            self.s.name, sorted(f"{t}-{p}" for t, p in keys),
        )  # fmt: skip
        if self.lose is not None and keys:
            self.lose(keys)
        self._on_revoke(consumer, partitions)

    def _await_release(self, keys: frozenset[Key]) -> None:
        if self.await_release is not None and keys:
            self.await_release(keys, self._stop)
