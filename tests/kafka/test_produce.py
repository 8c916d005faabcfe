"""Which client errors mean that a copier's producer is dead
(:func:`~mirrorlib.kafka.produce.fatal_error`, :func:`~mirrorlib.kafka.produce.producer_died`):
it is recreated (a Spark task fails), not parked at the record."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirrorlib.core.pacing import record_size
from mirrorlib.kafka.produce import (
    QUEUE_FULL_WAIT_S,
    fatal_error,
    produce_waiting,
    producer_died,
    too_large,
)


@pytest.mark.parametrize(
    "code", [KafkaError._FATAL, KafkaError._FENCED, KafkaError.PRODUCER_FENCED]
)
def test_a_fenced_or_fatal_producer_is_dead(code: int) -> None:
    err = KafkaError(code)
    assert fatal_error(err) is err
    assert fatal_error(KafkaException(err)) is err


def test_an_error_flagged_fatal_is_dead() -> None:
    err = KafkaError(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, fatal=True)
    assert fatal_error(KafkaException(err)) is err


@pytest.mark.parametrize(
    "err",
    [
        KafkaError(KafkaError.MSG_SIZE_TOO_LARGE),
        KafkaError(KafkaError._STATE),
        KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION)),
        KafkaException(),
        BufferError("queue full"),
        None,
    ],
)
def test_a_refusal_or_anything_else_is_not(err: object) -> None:
    assert fatal_error(err) is None


def test_a_purged_record_means_a_dead_producer_unless_it_is_transactional() -> None:
    purged = KafkaError(KafkaError._PURGE_QUEUE)
    assert producer_died(purged, transactional=False) is purged
    assert producer_died(purged, transactional=True) is None  # withdrawn with its transaction
    fatal = KafkaError(KafkaError._FATAL, fatal=True)
    assert producer_died(fatal, transactional=True) is fatal
    refused = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)
    assert producer_died(refused, transactional=False) is None


class _Record:
    def topic(self) -> str:
        return "t"

    def partition(self) -> int:
        return 2

    def offset(self) -> int:
        return 7

    def key(self) -> bytes:
        return b"k"

    def value(self) -> bytes:
        return b"v" * 1000

    def headers(self) -> list[tuple[str, bytes]]:
        return [("h", b"x")]


def test_a_full_queue_is_served_until_the_record_goes_or_a_stop_is_asked() -> None:
    full, served, sent = [2], [], []

    def produce(*args: object) -> None:
        if full[0]:
            full[0] -= 1
            raise BufferError("queue full")
        sent.append(args)

    assert produce_waiting(produce, served.append, "A.t", 2, _Record(), 5, None)
    assert served == [QUEUE_FULL_WAIT_S] * 2
    assert sent == [("A.t", b"v" * 1000, b"k", 2, None, None, 5, [("h", b"x")])]
    stopping = threading.Event()
    stopping.set()
    full[0] = 1
    assert not produce_waiting(produce, served.append, "A.t", 2, _Record(), 0, None, stopping)
    assert len(sent) == 1 and len(served) == 2  # not produced, nothing served


def test_a_record_larger_than_the_limit_on_its_own_is_named_with_its_size() -> None:
    record = _Record()
    assert too_large(record, record_size(record), "A.t", "B") is None
    reason = too_large(record, 500, "A.t", "B")
    assert reason == (
        "record t-2@7 (1003 bytes) is larger than max.message.bytes=500 of A.t on B; "
        "raise it on the target topic to replicate it"
    )
