"""Producing a copied record off the fast path: the slow path both copy engines share.

The per-record hot loops (the embedded copier's, :mod:`mirrorlib.kafka.copier.loop`, and a Spark
copy task's, :mod:`mirrorlib.kafka.ranges.executor`) call the producer themselves and come here
only when that is not enough:

* :func:`produce_waiting` -- produce one record with back-pressure: while librdkafka's local
  queue is full (``BufferError``), serve delivery reports and try again;
* :func:`fatal_error`, :func:`producer_died` -- whether an error of a produce call or of a
  delivery report means the producer itself died, rather than the target refusing the record;
* :func:`too_large` -- why a record larger than the remote topic's ``max.message.bytes`` on its
  own is not sent;
* :func:`smaller_batches` -- the halved batch budget after a ``MSG_SIZE_TOO_LARGE`` refusal
  (:func:`mirrorlib.core.pacing.halved_budget`), with its warning.

What each engine then does (park and retry the partition, recreate the clients, fail the task)
stays with the engine.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from mirrorlib.core.pacing import RECORD_OVERHEAD, halved_budget, record_size

__all__ = [
    "QUEUE_FULL_WAIT_S",
    "WITHDRAWN",
    "fatal_error",
    "produce_waiting",
    "producer_died",
    "smaller_batches",
    "too_large",
]

#: seconds delivery reports are served for while the producer's local queue is full
QUEUE_FULL_WAIT_S = 0.05

# errors of a produce call or delivery report that mean the producer itself is dead (fenced by
# another transactional producer, or a fatal idempotence error such as OUT_OF_ORDER_SEQUENCE)
_PRODUCER_DEAD = frozenset({KafkaError._FATAL, KafkaError._FENCED, KafkaError.PRODUCER_FENCED})
#: errors of a delivery report that mean the record was withdrawn by the producer itself (its
#: transaction failed and is aborted), not refused by the target
WITHDRAWN = frozenset({KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT})


def produce_waiting(
    produce: Any,
    serve: Callable[[float], object],
    remote: str,
    partition: int,
    msg: Any,
    ts: int,
    on_delivery: Any,
    stopping: threading.Event | None = None,
) -> bool:
    """Produce the consumed record ``msg`` (timestamp ``ts``) to ``remote``, ``partition``; while
    the producer's local queue is full, ``serve`` its delivery reports (``poll``) and try again.
    Returns False, the record not produced, when ``stopping`` is set meanwhile (the target may
    be down for minutes). A ``KafkaException`` of the produce call is the caller's."""
    while True:
        try:
            # positional: topic, value, key, partition, callback, on_delivery, timestamp, headers
            produce(
                remote, msg.value(), msg.key(), partition, on_delivery, None, ts if ts > 0 else 0,
                msg.headers(),
            )  # fmt: skip
            return True
        except BufferError:  # queue full: serve delivery reports, then retry
            if stopping is not None and stopping.is_set():
                return False
            serve(QUEUE_FULL_WAIT_S)


def fatal_error(err: object) -> KafkaError | None:
    """``err`` (a ``KafkaError``, or a ``KafkaException`` carrying one) if it is fatal
    to its client, else ``None``."""
    if isinstance(err, KafkaException):
        err = err.args[0] if err.args else None
    if isinstance(err, KafkaError) and (err.fatal() or err.code() in _PRODUCER_DEAD):
        return err
    return None


def producer_died(err: object, *, transactional: bool) -> KafkaError | None:
    """The error of a delivery report if it means the producer died rather than the target
    refused the record: a fatal error, or, for a producer that is not transactional (which never
    purges its own queues), a record purged from them, as librdkafka does when its producer
    dies."""
    if (dead := fatal_error(err)) is not None:
        return dead
    if not transactional and isinstance(err, KafkaError) and err.code() in WITHDRAWN:
        return err
    return None


def too_large(msg: Any, max_bytes: int, remote: str, target: str) -> str | None:
    """Why ``msg`` is not sent to ``remote`` on ``target``, if it is larger on its own than the
    topic's ``max_bytes`` (:func:`~mirrorlib.core.pacing.record_size`); else ``None``."""
    size = record_size(msg)
    if size <= max_bytes:
        return None
    return (
        f"record {msg.topic()}-{msg.partition()}@{msg.offset()} ({size - RECORD_OVERHEAD} bytes) "
        f"is larger than max.message.bytes={max_bytes} of {remote} on {target}; "
        "raise it on the target topic to replicate it"
    )


def smaller_batches(
    log: logging.Logger,
    flow: str,
    target: str,
    tp: tuple[str, int],
    budget: int | None,
    batch_size: int,
    refused: Any,
) -> int | None:
    """After ``target`` refused a batch holding ``refused`` as too large: the partition's new
    batch budget, half the current one, warned on ``log``; ``None`` when ``refused`` was sent
    alone (the record itself is too large: a real refusal)."""
    halved = halved_budget(budget, batch_size, refused)
    if halved is not None:
        log.warning(
            "flow %s: %s refused a batch of %s-%d as too large; sending batches of at most "
            "%d bytes", flow, target, *tp, halved,
        )  # fmt: skip
    return halved
