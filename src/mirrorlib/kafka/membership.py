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
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_END, Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mirrorlib.core.catalog import TopicCatalog
from mirrorlib.core.settings import FlowSettings
from mirrorlib.kafka import client_conf
from mirrorlib.kafka.fencing import DepartedFence

__all__ = ["GroupShare"]

log = logging.getLogger(__name__)

Key = tuple[str, int]

#: seconds between two renewals of a stale static assignment
_RESUBSCRIBE_MIN_S = 10.0


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
        self._stop = threading.Event()
        self._subscribed: list[str] = []
        self._departed = DepartedFence(settings)  # (workers always write in transactions)

    def owned(self) -> frozenset[Key]:
        with self._lock:
            return self._owned

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
                consumer.poll(0.2)  # serves rebalances; every partition is paused
                now = time.monotonic()
                if now - resubscribed >= _RESUBSCRIBE_MIN_S and any(
                    t.topic not in subscribed for t in consumer.assignment()
                ):
                    # a static leader's stale assignment (see the module)
                    resubscribed = now
                    log.info("flow %s: stale group assignment: subscribing again", s.name)
                    consumer.unsubscribe()
                    self._subscribe(consumer, subscribed)
        finally:
            with self._lock:
                self._owned = frozenset()
            consumer.close()

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
        with self._lock:
            self._owned = self._owned - keys
        self._await_release(keys)
        consumer.incremental_unassign(partitions)

    def _on_lost(self, consumer: Any, partitions: list[Any]) -> None:
        self._on_revoke(consumer, partitions)

    def _await_release(self, keys: frozenset[Key]) -> None:
        if self.await_release is not None and keys:
            self.await_release(keys, self._stop)
