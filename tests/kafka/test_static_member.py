"""A static member fenced by another process with its ``group.instance.id`` is recognised,
whether the error carries its own code or comes out of ``poll`` as ``_FATAL``."""

from __future__ import annotations

from confluent_kafka import KafkaError

from mirrorlib.kafka.static_member import fenced_reason, member_fenced
from tests.runtime.conftest import offline_settings

FENCED_TEXT = KafkaError(KafkaError.FENCED_INSTANCE_ID).str()


def test_a_fenced_member_is_recognised_by_code_or_by_the_fatal_errors_text() -> None:
    assert member_fenced(KafkaError(KafkaError.FENCED_INSTANCE_ID))
    # what librdkafka's consumer returned from poll in the integration test
    fatal = KafkaError(
        KafkaError._FATAL, f"Fatal error: {FENCED_TEXT}: Fatal consumer error: {FENCED_TEXT}"
    )
    assert member_fenced(fatal)
    assert not member_fenced(KafkaError(KafkaError._FATAL, "Fatal error: idempotence"))
    assert not member_fenced(KafkaError(KafkaError._TRANSPORT, FENCED_TEXT))


def test_the_reason_names_the_node_id_and_what_to_do() -> None:
    s = offline_settings(**{"node.id": "n1"})
    reason = fenced_reason(s, KafkaError(KafkaError.FENCED_INSTANCE_ID))
    assert "group.instance.id 'mirrorlib-A->B-n1'" in reason and "node.id 'n1'" in reason
    assert "distinct node.id values" in reason


def test_a_fatal_error_out_of_poll_means_the_consumer_is_dead() -> None:
    """librdkafka hands a fatal error to ``poll`` as ``_FATAL`` with ``fatal()`` false: the copier
    (and a Spark copy task) must still treat the consumer as dead."""
    from mirrorlib.kafka import consumer_dead

    assert consumer_dead(KafkaError(KafkaError._FATAL, f"Fatal error: {FENCED_TEXT}"))
    assert consumer_dead(KafkaError(KafkaError._FENCED, "fenced", fatal=True))
    assert not consumer_dead(KafkaError(KafkaError._TRANSPORT, "broker down"))
