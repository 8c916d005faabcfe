"""A slot its node reported ``abandoned`` at its stop (its worker did not end cleanly, and the
node could not fence it) is fenced by the node given its partitions: the transaction it left
open on the target is aborted, and ``read_committed`` readers of the target read on at once
instead of after the broker's transaction timeout."""

from __future__ import annotations

import contextlib
import time

import attrs
import pytest
from confluent_kafka import KafkaException, Producer

from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.worker_reports import WorkerReport, WorkerState
from mirrorlib.kafka.fencing import DepartedFence
from mirrorlib.kafka.worker_reports import WorkerReportWriter
from mirrorlib.testing import ClusterSet
from tests.runtime.conftest import config
from tests.runtime.workers.test_worker_signals import read_committed_reaches, written

pytestmark = pytest.mark.integration


def test_an_abandoned_slots_open_transaction_is_aborted_by_the_next_holder(
    two_clusters: ClusterSet,
) -> None:
    _, b = two_clusters
    topic = "abandoned.slot"
    remote = f"A.{topic}"
    with contextlib.suppress(KafkaException):
        b.create_topic(remote, 2)
    cfg = config(two_clusters, ["A->B"], **{"tasks.max": "2"})
    settings = attrs.evolve(FlowSettings.from_config(cfg, cfg.flow("A", "B")), node="here")
    tid = "mirrorlib-A->B-abandoned-0"
    # the abandoned worker: a transaction with records on B, left open (the process died)
    producer = Producer({**b.client_config(), "transactional.id": tid})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(remote, str(i).encode(), partition=i % 2)
    assert producer.flush(30) == 0
    del producer  # (dropped with its transaction open, as by a SIGKILL)
    ends = written(b, remote)
    with pytest.raises(AssertionError, match="a transaction was left open"):
        read_committed_reaches(b, remote, ends)
    # its node's last report: abandoned, with the partitions, silent by now
    report = WorkerReport(
        flow=settings.name, node="abandoned", slot=0, pid=None, state=WorkerState.ABANDONED,
        restarts=0, partitions=((topic, 0), (topic, 1)), records_per_second=0.0,
        bytes_per_second=0.0, lag_records=None, timestamp_ms=int(time.time() * 1000) - 30_000,
        interval_s=1.0, tasks_max=2, last_error="fencing failed", transactional_id=tid,
    )  # fmt: skip
    with contextlib.suppress(KafkaException):  # (the internal topics' job; other tests ran it)
        b.create_topic(settings.worker_status_topic, 1)
    writer = WorkerReportWriter(
        settings.target_producer, settings.target_admin, settings.worker_status_topic, alias="B"
    )
    assert writer.write([report]) is None
    writer.close()
    assert DepartedFence(settings).before_copying([(topic, 0)]) == [tid]
    took = read_committed_reaches(b, remote, ends)
    print(f"read_committed read past the abandoned transaction {took:.1f}s after the fence")
