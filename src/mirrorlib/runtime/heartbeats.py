"""Heartbeats for a pair A->B (MM2's MirrorHeartbeatConnector/Task).

Every ``emit.heartbeats.interval.seconds`` a :class:`~mirrorlib.core.records.Heartbeat` ``(A, B, now)``
is written to ``heartbeats`` on B, partition 0, with the record timestamp equal to the value's.
Replicated onward as ``B.heartbeats``, ``C.B.heartbeats`` …, they let clients trace which
clusters are upstream and how many hops away, and measure end-to-end replication latency.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from mirrorlib.core.counters import StatsRegistry
from mirrorlib.core.records import Heartbeat
from mirrorlib.core.settings import FlowSettings
from mirrorlib.kafka import new_producer

__all__ = ["HeartbeatTask"]

log = logging.getLogger(__name__)


class HeartbeatTask:
    def __init__(self, settings: FlowSettings, stats: StatsRegistry) -> None:
        self.s = settings
        self.stats = stats

    def run(self, stop: threading.Event) -> None:
        s = self.s
        producer = new_producer(s.target_producer, acks="all", **{"linger.ms": 0})
        topic = s.policy.heartbeats_topic()
        try:
            while not stop.is_set():
                now = int(time.time() * 1000)
                hb = Heartbeat(s.source, s.target, now)
                producer.produce(
                    topic,
                    hb.encode_value(),
                    hb.encode_key(),
                    0,
                    timestamp=now,
                    on_delivery=self._delivered(now),
                )
                producer.poll(0)
                stop.wait(s.emit_heartbeats_interval)
                producer.poll(0)
        finally:
            producer.flush(5.0)

    def _delivered(self, ts: int) -> Any:
        def done(err: Any, _msg: Any) -> None:
            if err is None:
                self.stats.last_heartbeat_ms = ts
                self.stats.set_error("heartbeats", None)
            else:
                self.stats.set_error(
                    "heartbeats", f"writing a heartbeat to {self.s.target} failed: {err}"
                )
                log.warning("flow %s: heartbeat not written: %s", self.s.name, err)

        return done
