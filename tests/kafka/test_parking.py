"""Which client errors mean that the copier's producer is dead
(:func:`~mirrorlib.kafka.parking.fatal_error`): it is recreated, not parked at the record."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirrorlib.kafka.parking import fatal_error, producer_died


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
