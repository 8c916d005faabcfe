"""Integration tests: real single-node KRaft clusters started by mirrorlib.testing."""

from __future__ import annotations

import os
import time
import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from mirrorlib.errors import TestClusterError
from mirrorlib.testing import BaseCluster, ClusterSet, KafkaCluster, start_clusters
from mirrorlib.testing.pytest_plugin import ClusterRequest, require_managed

pytestmark = [pytest.mark.integration, pytest.mark.java]


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_two_clusters_are_independent(two_clusters: ClusterSet) -> None:
    a, b = two_clusters
    assert a.alias == "A" and b.alias == "B"
    assert a.bootstrap_servers != b.bootstrap_servers
    topic = _name("indep")
    a.create_topic(topic, partitions=3)
    assert topic in a.topic_names()
    assert topic not in b.topic_names()
    a.produce(topic, [f"v{i}".encode() for i in range(10)])
    values = sorted(m.value() for m in a.consume(topic, 10))
    assert values == sorted(f"v{i}".encode() for i in range(10))
    # the readiness probe cleaned up after itself
    assert not [t for t in a.topic_names() if t.startswith("__mirrorlib_probe")]


def test_session_clusters_are_cached(kafka_clusters: ClusterRequest) -> None:
    first = kafka_clusters(2)
    assert kafka_clusters(["A", "B"]) is first
    assert kafka_clusters(2)[0].bootstrap_servers == first["A"].bootstrap_servers


def test_consumer_group_works(kafka_cluster: BaseCluster) -> None:
    topic = _name("grp")
    kafka_cluster.create_topic(topic, partitions=2)
    kafka_cluster.produce(topic, [b"a", b"b"])
    assert len(kafka_cluster.consume(topic, 2, group=_name("g"))) == 2


def test_restart_keeps_data_and_ports(private_kafka_clusters: ClusterRequest) -> None:
    (a,) = private_kafka_clusters(1)
    require_managed(a)
    assert isinstance(a, KafkaCluster)
    topic = _name("restart")
    a.create_topic(topic)
    a.produce(topic, [b"before"])
    servers, pid = a.bootstrap_servers, a.pid
    a.restart()
    assert a.is_running and a.pid != pid
    assert a.bootstrap_servers == servers
    a.produce(topic, [b"after"])
    assert [m.value() for m in a.consume(topic, 2)] == [b"before", b"after"]
    assert "stopping broker (SIGTERM)" in a.log_tail(10_000)


def test_kill_then_start_recovers(private_kafka_clusters: ClusterRequest) -> None:
    a, b = private_kafka_clusters(2)
    assert isinstance(a, KafkaCluster) and isinstance(b, KafkaCluster)
    topic = _name("kill")
    a.create_topic(topic)
    a.produce(topic, [b"x", b"y"])
    pid = a.pid
    assert pid is not None
    a.kill()
    assert not a.is_running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert b.is_running  # the other cluster is untouched
    a.start()
    assert [m.value() for m in a.consume(topic, 2)] == [b"x", b"y"]


def test_acl_cluster_denies_then_allows(acl_kafka_cluster: BaseCluster) -> None:
    cluster = acl_kafka_cluster
    topic = _name("acl")
    cluster.create_topic(topic)  # as the admin super user
    cluster.produce(topic, [b"secret"])
    assert cluster.client_config(user="alice")["sasl.username"] == "alice"
    with pytest.raises(TestClusterError, match="AUTHORIZATION_FAILED"):
        cluster.consume(topic, 1, user="alice", timeout=10)
    with pytest.raises(TestClusterError, match="AUTHORIZATION_FAILED"):
        cluster.produce(topic, [b"nope"], user="alice", timeout=10)
    # wrong password: authentication fails, no messages
    with pytest.raises(TestClusterError):
        _consume_bad_password(cluster, topic)

    admin = cluster.admin_client()
    binding = AclBinding(
        ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
        AclOperation.READ, AclPermissionType.ALLOW,
    )  # fmt: skip
    admin.create_acls([binding])[binding].result(timeout=30)
    deadline = time.monotonic() + 30
    while True:  # ACL propagation through the metadata log is fast but asynchronous
        try:
            messages = cluster.consume(topic, 1, user="alice", timeout=10)
            break
        except TestClusterError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    assert messages[0].value() == b"secret"
    # bob got nothing
    with pytest.raises(TestClusterError, match="AUTHORIZATION_FAILED"):
        cluster.consume(topic, 1, user="bob", timeout=10)
    # alice may read, not write
    with pytest.raises(TestClusterError, match="AUTHORIZATION_FAILED"):
        cluster.produce(topic, [b"nope"], user="alice", timeout=10)


def _consume_bad_password(cluster: BaseCluster, topic: str) -> None:
    from confluent_kafka import Consumer

    conf = cluster.client_config(user="alice", extra={"sasl.password": "wrong"})
    consumer = Consumer({**conf, "group.id": "g", "log_level": "0"})
    try:
        metadata = consumer.list_topics(topic, timeout=5)
        raise AssertionError(f"metadata with a wrong password: {metadata}")
    except Exception as exc:
        raise TestClusterError(str(exc)) from exc
    finally:
        consumer.close()


def test_bad_override_fails_with_log_tail(tmp_path: object) -> None:
    started = time.monotonic()
    with pytest.raises(TestClusterError) as info:
        start_clusters(
            1, overrides={"num.io.threads": "banana"}, work_dir=str(tmp_path), timeout=60
        )
    message = str(info.value)
    assert "Kafka cluster A" in message
    assert "--- last" in message
    assert "banana" in message  # Kafka's own complaint, from the log tail
    assert time.monotonic() - started < 60


def test_broker_runtime_failure_shows_log_tail(tmp_path: object) -> None:
    # passes StorageTool but the broker refuses it at startup
    with pytest.raises(TestClusterError) as info:
        start_clusters(
            1,
            cluster_overrides={"A": {"authorizer.class.name": "no.such.Authorizer"}},
            work_dir=str(tmp_path),
            timeout=60,
        )
    message = str(info.value)
    assert "no.such.Authorizer" in message
    assert "broker exited" in message or "storage format failed" in message


def test_start_clusters_context_manager(tmp_path: object) -> None:
    with start_clusters(["left", "right"], work_dir=str(tmp_path)) as clusters:
        left, right = clusters
        assert clusters.aliases == ("left", "right")
        pids = [c.pid for c in clusters if isinstance(c, KafkaCluster)]
        assert all(pids)
    for pid in pids:
        assert pid is not None
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not left.is_running and not right.is_running  # type: ignore[attr-defined]


def test_tls_cluster_speaks_only_tls(kafka_clusters: ClusterRequest) -> None:
    (cluster,) = kafka_clusters(["TLS"], tls=True)
    topic = _name("tls")
    cluster.create_topic(topic)
    cluster.produce(topic, [b"secret"])
    assert [m.value() for m in cluster.consume(topic, 1)] == [b"secret"]
    plaintext = {"bootstrap.servers": cluster.bootstrap_servers, "log_level": "0"}
    with pytest.raises(KafkaException):
        AdminClient(plaintext).list_topics(timeout=3)
