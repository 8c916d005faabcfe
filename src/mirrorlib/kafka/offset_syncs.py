"""Writing offset syncs: the emitter's due syncs, as MM2's bytes plus the lineage header.

Used by the embedded copier and by the Spark executors alike, so both engines write syncs the
same way: to partition 0 of the offset-syncs topic with an idempotent producer of their own
(``acks=all``, a few milliseconds of linger), each with the lineage header that lets
:class:`~mirrorlib.core.translate.OffsetTranslator` translate exactly. A sync that cannot be queued
or written is reported to the emitter (:meth:`~mirrorlib.core.syncs.OffsetSyncEmitter.mark_failed`)
a second later (:class:`~mirrorlib.core.syncs.FailedSyncs`), so readers never bridge the hole it
leaves and the partition's newest sync is sent again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from mirrorlib.core.syncs import EmittedSync, FailedSyncs, OffsetSyncEmitter
from mirrorlib.kafka import client_conf

__all__ = ["OffsetSyncWriter", "new_sync_producer"]

log = logging.getLogger(__name__)


def new_sync_producer(producer_config: Mapping[str, str]) -> Producer:
    """The producer an :class:`OffsetSyncWriter` writes with (idempotent, ``acks=all``, 5 ms
    linger), for callers that keep one between writers."""
    conf: dict[str, Any] = dict(producer_config)
    conf.update({"enable.idempotence": True, "acks": "all", "linger.ms": 5})
    return Producer(client_conf(conf))


class OffsetSyncWriter:
    """Sends an :class:`OffsetSyncEmitter`'s pending syncs to ``topic``.

    ``on_written`` / ``on_failed`` are called from delivery reports (served by :meth:`poll`).
    ``producer``: a :func:`new_sync_producer` to write with (default: a new one).
    Not thread-safe: call it from the thread that feeds the emitter.
    """

    def __init__(
        self,
        producer_config: Mapping[str, str],
        topic: str,
        emitter: OffsetSyncEmitter,
        *,
        flow: str,
        on_written: Callable[[], None] | None = None,
        on_failed: Callable[[], None] | None = None,
        producer: Producer | None = None,
    ) -> None:
        self._producer = producer if producer is not None else new_sync_producer(producer_config)
        self.topic = topic
        self.emitter = emitter
        self.flow = flow
        self._on_written = on_written
        self._on_failed = on_failed
        self._failed = FailedSyncs()  # reported to the emitter a second later (send)

    def send(self) -> None:
        """Queue every pending sync (call it right after ``emitter.record`` returns True), and
        the partition's newest sync again a second after one was not written."""
        if self._failed:
            self._failed.report(self.emitter, time.monotonic())
        for emitted in self.emitter.take_pending():
            self.write(emitted)

    def write(
        self, emitted: EmittedSync, failed: Callable[[EmittedSync], None] | None = None
    ) -> None:
        """Queue one taken sync (a copier worker's, written by its parent process: ``failed``
        is called instead of this writer's emitter's ``mark_failed`` if it is not written)."""
        headers: list[tuple[str, str | bytes | None]] = list(emitted.headers())
        try:
            self._producer.produce(
                self.topic,
                emitted.sync.encode_value(),
                emitted.sync.encode_key(),
                0,
                headers=headers,
                on_delivery=self._delivered(emitted, failed),
            )
        except (BufferError, KafkaException) as exc:
            log.warning("flow %s: offset sync %s not queued: %s", self.flow, emitted.sync, exc)
            self._not_written(emitted, failed)

    def poll(self) -> None:
        """Serve delivery reports."""
        self._producer.poll(0)

    def flush(self, timeout: float) -> int:
        """Wait for outstanding syncs; returns how many are still unconfirmed."""
        return int(self._producer.flush(timeout))

    def _not_written(
        self, emitted: EmittedSync, failed: Callable[[EmittedSync], None] | None
    ) -> None:
        if failed is None:
            self._failed.add(emitted, time.monotonic())
        else:
            failed(emitted)
        if self._on_failed is not None:
            self._on_failed()

    def _delivered(
        self, emitted: EmittedSync, failed: Callable[[EmittedSync], None] | None = None
    ) -> Callable[[KafkaError | None, Any], None]:
        def done(err: KafkaError | None, _msg: Any) -> None:
            if err is None:
                if self._on_written is not None:
                    self._on_written()
                return
            log.warning(
                "flow %s: offset sync %s was not written: %s", self.flow, emitted.sync, err.str()
            )
            self._not_written(emitted, failed)

        return done
