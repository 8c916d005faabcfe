"""TopicLog against a real local cluster: reading ``read_committed`` to the end waits for a
transaction still open on the topic instead of stopping at the last stable offset."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer

from mirrorlib.errors import TopicReadTimeoutError
from mirrorlib.kafka.topiclog import Record, TopicLog
from mirrorlib.testing import BaseCluster
from mirrorlib.testing.pytest_plugin import ClusterRequest
from tests.kafka._util import unique

pytestmark = pytest.mark.integration


def test_read_committed_waits_for_an_open_transaction_and_returns_what_was_committed_after_it(
    kafka_cluster: BaseCluster,
) -> None:
    topic = unique("txlog")
    kafka_cluster.create_topic(topic, 1)
    bootstrap = {"bootstrap.servers": kafka_cluster.bootstrap_servers}
    # a transaction left open (a killed worker's), then records committed after it began
    open_tx = Producer({**bootstrap, "transactional.id": f"{topic}-open"})
    open_tx.init_transactions(30)
    open_tx.begin_transaction()
    open_tx.produce(topic, b"open", partition=0)
    open_tx.flush(30)
    later = Producer({**bootstrap, "transactional.id": f"{topic}-later"})
    later.init_transactions(30)
    later.begin_transaction()
    for i in range(3):
        later.produce(topic, b"later-%d" % i, partition=0)
    later.commit_transaction(30)

    got: list[bytes] = []

    def take(msg: Record) -> None:
        got.append(msg.value())

    with TopicLog(bootstrap, topic, alias="A", read_committed=True) as reader:
        # the open transaction holds the read: it times out, naming the partition, rather than
        # returning without the records committed after the transaction began
        with pytest.raises(TopicReadTimeoutError, match=r"0: 0/5.*transactions still open"):
            reader.read_to_end(take, timeout=3)
        assert got == []
        # the transaction ends (aborted here) while the read waits: the read returns the later
        # records, never the aborted one
        aborter = threading.Timer(2.0, lambda: open_tx.abort_transaction(30))
        aborter.start()
        try:
            assert reader.read_to_end(take, timeout=60) == 3
        finally:
            aborter.join()
    assert got == [b"later-0", b"later-1", b"later-2"]


def test_end_offsets_of_a_reader_that_lived_across_a_broker_restart(
    private_kafka_clusters: ClusterRequest,
) -> None:
    """A restart moves every partition's leader epoch on: the reader's cached epoch is stale and
    the broker answers FENCED_LEADER_EPOCH. The reader must come back with fresh metadata, not
    fail (or loop) until the process dies."""
    (cluster,) = private_kafka_clusters(1)
    topic = unique("restart")
    cluster.create_topic(topic, 2)
    cluster.produce(topic, [b"before-%d" % i for i in range(5)])
    bootstrap = {"bootstrap.servers": cluster.bootstrap_servers}
    with TopicLog(bootstrap, topic, alias="A") as reader:
        assert sum(reader.end_offsets(timeout=30).values()) == 5
        cluster.restart()
        cluster.produce(topic, [b"after-%d" % i for i in range(3)])
        started = time.monotonic()
        assert sum(reader.end_offsets(timeout=60).values()) == 8
        assert time.monotonic() - started < 30
        got: list[bytes] = []
        assert reader.read_to_end(lambda m: got.append(m.value()), timeout=60) == 8
