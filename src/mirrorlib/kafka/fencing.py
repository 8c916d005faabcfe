"""Fencing a transactional id whose producer is gone, as Kafka Connect fences a task's zombies
(KIP-618: ``Admin.fenceProducers``, which initialises the task's transactional ids).

Initialising a transactional id makes its coordinator bump the id's producer epoch and abort
the transaction the id left open. Until then an open transaction of a killed producer holds
the last stable offset of every partition it wrote: a ``read_committed`` reader of those
partitions (consumers of the remote topics; a worker reading positions, if the transaction
wrote some) sees nothing past it until the broker aborts it after ``transaction.timeout.ms``
(60 s by default) plus its check interval (10 s by default).
"""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka import KafkaException, Producer

from mirrorlib.kafka import client_conf
from mirrorlib.kafka.admin import kafka_error

__all__ = ["fence_transactional_id"]


def fence_transactional_id(
    producer_config: Mapping[str, str], transactional_id: str, *, cluster: str, timeout: float
) -> None:
    """Fence ``transactional_id`` on ``cluster`` (the producer configuration's cluster): its
    open transaction is aborted and a producer still holding its old epoch can neither write
    nor commit. Raises a :class:`~mirrorlib.errors.KafkaRequestError` naming the id when the
    coordinator does not answer within ``timeout`` seconds."""
    action = f"fencing the transactional id {transactional_id}"
    conf = client_conf(
        producer_config, **{"transactional.id": transactional_id, "enable.idempotence": True}
    )
    try:
        producer = Producer(conf)
    except KafkaException as exc:  # (a setting librdkafka refuses for a transactional producer)
        raise kafka_error(exc, cluster=cluster, action=action) from exc
    try:
        producer.init_transactions(timeout)
    except KafkaException as exc:
        raise kafka_error(exc, cluster=cluster, action=action) from exc
    finally:
        # (not close(): on a transactional producer it tries to abort a transaction, and warns
        # after a failed initialisation; nothing is queued, so dropping it ends it at once)
        del producer
