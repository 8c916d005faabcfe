"""Integration tests: three-node clusters and clusters behind the network-fault proxy."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient

from mirrorlib.testing import BaseCluster, KafkaCluster
from mirrorlib.testing.pytest_plugin import ClusterRequest, require_managed

pytestmark = [pytest.mark.integration, pytest.mark.java]


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# the same three-node proxied pair as tests/runtime/test_production_faults.py (one start for both)
@pytest.fixture
def three(kafka_clusters: ClusterRequest) -> KafkaCluster:
    cluster = kafka_clusters(["S3", "T3"], nodes=3, proxy=True)[0]
    assert isinstance(cluster, KafkaCluster)
    return cluster


@pytest.fixture
def proxied(kafka_clusters: ClusterRequest) -> KafkaCluster:
    cluster = kafka_clusters(["S3", "T3"], nodes=3, proxy=True)[1]
    assert isinstance(cluster, KafkaCluster)
    return cluster


def _acks_all_producer(cluster: KafkaCluster, **extra: str) -> Producer:
    return Producer(cluster.client_config(extra={"acks": "all", "log_level": "0", **extra}))


def _send(producer: Producer, topic: str, values: list[bytes], timeout: float = 60.0) -> None:
    errors: list[object] = []
    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=lambda e, _m: errors.append(e))
    assert producer.flush(timeout) == 0
    assert errors == [None] * len(values), errors[:3]


def test_three_nodes_rf3_min_isr_2_and_internal_topics(three: KafkaCluster) -> None:
    assert [n.node_id for n in three.nodes] == [1, 2, 3]
    assert len(set(three.pids)) == 3 and three.is_running
    assert len(three.bootstrap_servers.split(",")) == 3
    props = three.node(2).server_properties()
    assert props["controller.quorum.voters"].count("@") == 3
    assert props["inter.broker.listener.name"] == "INTERNAL"
    assert props["min.insync.replicas"] == "2" and props["default.replication.factor"] == "3"
    admin = three.admin_client()
    md = admin.list_topics(timeout=30)
    assert len(md.brokers) == 3
    offsets = md.topics["__consumer_offsets"].partitions[0]
    assert len(offsets.replicas) == 3
    topic = _name("rf3")
    three.create_topic(topic, 2)
    assert three.isr(topic, 0) == (1, 2, 3)


def test_leader_killed_new_leader_elected_and_back_in_isr(three: KafkaCluster) -> None:
    topic = _name("lead")
    three.create_topic(topic, 1)
    producer = _acks_all_producer(three, **{"enable.idempotence": "true"})
    _send(producer, topic, [b"%d" % i for i in range(50)])
    old = three.leader(topic)
    old.kill()
    assert not old.is_running
    # acks=all with min ISR 2 goes on with two nodes (the producer retries to the new leader)
    _send(producer, topic, [b"%d" % i for i in range(50, 100)])
    new = three.leader(topic)
    assert new is not old and new.is_running
    assert old.node_id not in three.isr(topic)
    old.start()
    three.wait_in_sync(topic)
    assert three.isr(topic) == (1, 2, 3)
    values = [m.value() for m in three.consume(topic, 100)]
    assert values == [b"%d" % i for i in range(100)]


def test_freeze_and_thaw(three: KafkaCluster) -> None:
    topic = _name("frz")
    three.create_topic(topic, 1)
    node = three.leader(topic)
    node.freeze()
    try:
        assert node.is_frozen and node.is_running
        # the controller fences the hung node after its session (4.5 s) and moves leadership
        deadline = time.monotonic() + 60
        while three.leader(topic) is node:
            assert time.monotonic() < deadline, "leadership never left the frozen node"
            time.sleep(0.5)
        three.produce(topic, [b"while-frozen"])
    finally:
        node.thaw()
    assert not node.is_frozen
    three.wait_in_sync(topic)
    # the whole cluster frozen: nothing answers; thawed: works again
    three.freeze()
    try:
        assert all(n.is_frozen for n in three.nodes)
        conf: dict[str, str | int | float | bool] = {**three.admin_client_config(), "log_level": 0}
        admin = AdminClient(conf)
        with pytest.raises(KafkaException):
            admin.describe_cluster(request_timeout=2).result(timeout=5)
    finally:
        three.thaw()
    three.produce(topic, [b"after-thaw"])
    assert [m.value() for m in three.consume(topic, 2)] == [b"while-frozen", b"after-thaw"]


def test_single_node_cluster_freezes_and_thaws(kafka_cluster: BaseCluster) -> None:
    a = kafka_cluster
    require_managed(a)
    assert isinstance(a, KafkaCluster) and len(a.nodes) == 1
    assert a.node(1).work_dir == a.work_dir  # single-node layout unchanged
    a.freeze()
    try:
        assert a.node(1).is_frozen
        conf: dict[str, str | int | float | bool] = {**a.admin_client_config(), "log_level": 0}
        admin = AdminClient(conf)
        with pytest.raises(KafkaException):
            admin.describe_cluster(request_timeout=2).result(timeout=5)
    finally:
        a.thaw()
    topic = _name("f1")
    a.create_topic(topic)
    a.produce(topic, [b"ok"])


def test_proxy_adds_rtt_cuts_and_heals(proxied: KafkaCluster) -> None:
    props = proxied.server_properties()
    assert f":{proxied.nodes[0].proxy_port}," in props["advertised.listeners"]
    assert proxied.bootstrap_servers != proxied.direct_bootstrap_servers
    topic = _name("px")
    proxied.create_topic(topic)
    producer = _acks_all_producer(proxied, **{"linger.ms": "0"})

    def produce_ms() -> float:
        start = time.monotonic()
        _send(producer, topic, [b"x"])
        return (time.monotonic() - start) * 1000

    produce_ms()  # connections up
    base = min(produce_ms() for _ in range(5))
    proxied.link.set_latency(50)
    delayed = min(produce_ms() for _ in range(5))
    # one produce round trip through the link: 2 x 50 ms more
    assert 100 <= delayed < base + 100 + 80, (base, delayed)
    proxied.link.set_latency(0)

    proxied.link.cut()
    failed = _acks_all_producer(proxied, **{"message.timeout.ms": "3000"})
    errors: list[object] = []
    failed.produce(topic, b"cut", on_delivery=lambda e, _m: errors.append(e))
    failed.flush(10)
    assert errors and errors[0] is not None, errors  # timed out: the link is down
    # the brokers themselves are fine: a client past the proxy still works
    direct = Producer(proxied.direct_client_config(extra={"acks": "all", "log_level": "0"}))
    _send(direct, topic, [b"direct"])
    proxied.link.heal()
    _send(producer, topic, [b"healed"])  # the old producer reconnects by itself
    values = [m.value() for m in proxied.consume(topic, 13)]
    assert values == [b"x"] * 11 + [b"direct", b"healed"]
    assert proxied.link.stats().reset >= 1
