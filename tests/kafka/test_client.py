"""mirrorlib.kafka.client: MM2's MirrorClient / RemoteClusterUtils in Python.

Unit tests pin MirrorClientTest's naming rules on a fake topic list; integration tests write
checkpoints and heartbeats with mirrorlib's codecs to a real cluster and read them back. Names are
unique per test (the shared test clusters are reused across tests).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pytest
from confluent_kafka import Producer

from mirrorlib.core.policy import (
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    ReplicationPolicy,
)
from mirrorlib.core.records import Checkpoint, Heartbeat, OffsetAndMetadata, TopicPartition
from mirrorlib.errors import ClusterError, ConfigError
from mirrorlib.kafka.client import MirrorClient, split_client_config, translate_offsets
from mirrorlib.testing.cluster import BaseCluster
from mirrorlib.testing.config import free_port

JAVA_IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"


class FakeMirrorClient(MirrorClient):
    """MirrorClientTest's FakeMirrorClient: a fixed topic list, no cluster."""

    def __init__(self, topics: Iterable[str], policy: ReplicationPolicy | None = None) -> None:
        super().__init__({"bootstrap.servers": "127.0.0.1:1"}, policy)
        self._topics = set(topics)

    def list_topics(self, timeout: float | None = None) -> set[str]:
        return set(self._topics)


# -- MirrorClientTest -----------------------------------------------------------------------------


def test_is_heartbeat_topic() -> None:
    client = FakeMirrorClient([])
    for topic in ("heartbeats", "source1.heartbeats", "source2.source1.heartbeats"):
        assert client.replication_policy.is_heartbeats_topic(topic), topic
    for topic in ("heartbeats!", "!heartbeats", "source1heartbeats", "source1-heartbeats"):
        assert not client.replication_policy.is_heartbeats_topic(topic), topic


def test_is_checkpoint_topic() -> None:
    client = FakeMirrorClient([])
    assert client.replication_policy.is_checkpoints_topic("source1.checkpoints.internal")
    for topic in (
        "checkpoints.internal",
        "checkpoints-internal",
        "checkpoints.internal!",
        "!checkpoints.internal",
        "source1checkpointsinternal",
    ):
        assert not client.replication_policy.is_checkpoints_topic(topic), topic


@pytest.mark.parametrize(
    ("topic", "source", "hops"),
    [
        ("topic", "source", -1),
        ("source", "source", -1),
        ("sourcetopic", "source", -1),
        ("source1.topic", "source2", -1),
        ("source1.topic", "source1", 1),
        ("source2.source1.topic", "source2", 1),
        ("source2.source1.topic", "source1", 2),
        ("source3.source2.source1.topic", "source1", 3),
        ("source3.source2.source1.topic", "source4", -1),
    ],
)
def test_count_hops_for_topic(topic: str, source: str, hops: int) -> None:
    assert FakeMirrorClient([]).count_hops_for_topic(topic, source) == hops


def test_heartbeat_topics() -> None:
    client = FakeMirrorClient(
        [
            "topic1",
            "topic2",
            "heartbeats",
            "source1.heartbeats",
            "source2.source1.heartbeats",
            "source3.heartbeats",
        ]
    )
    assert client.heartbeat_topics() == {
        "heartbeats",
        "source1.heartbeats",
        "source2.source1.heartbeats",
        "source3.heartbeats",
    }


def test_checkpoint_topics() -> None:
    client = FakeMirrorClient(
        [
            "topic1",
            "topic2",
            "checkpoints.internal",
            "source1.checkpoints.internal",
            "source2.source1.checkpoints.internal",
            "source3.checkpoints.internal",
        ]
    )
    assert client.checkpoint_topics() == {
        "source1.checkpoints.internal",
        "source2.source1.checkpoints.internal",
        "source3.checkpoints.internal",
    }


def test_replication_hops() -> None:
    client = FakeMirrorClient(
        [
            "topic1",
            "topic2",
            "heartbeats",
            "source1.heartbeats",
            "source1.source2.heartbeats",
            "source3.heartbeats",
        ]
    )
    assert client.replication_hops("source1") == 1
    assert client.replication_hops("source2") == 2
    assert client.replication_hops("source3") == 1
    assert client.replication_hops("source4") == -1


@pytest.mark.parametrize(
    "policy", [None, IdentityReplicationPolicy(), IdentityReplicationPolicy("primary")]
)
def test_upstream_clusters(policy: ReplicationPolicy | None) -> None:
    client = FakeMirrorClient(
        [
            "topic1",
            "topic2",
            "heartbeats",
            "source1.heartbeats",
            "source1.source2.heartbeats",
            "source3.source4.source5.heartbeats",
        ],
        policy,
    )
    sources = client.upstream_clusters()
    assert sources == {"source1", "source2", "source3", "source4", "source5"}


def test_remote_topics() -> None:
    client = FakeMirrorClient(
        [
            "topic1",
            "topic2",
            "topic3",
            "source1.topic4",
            "source1.source2.topic5",
            "source3.source4.source5.topic6",
            "source1.checkpoints.internal",
            "mm2-offsets.source1.internal",
            "__consumer_offsets",
        ]
    )
    assert client.remote_topics() == {
        "source1.topic4",
        "source1.source2.topic5",
        "source3.source4.source5.topic6",
    }
    assert client.remote_topics("source1") == {"source1.topic4", "source1.source2.topic5"}
    assert client.remote_topics("source3") == {"source3.source4.source5.topic6"}
    assert client.remote_topics("source2") == set()


def test_remote_topics_separator() -> None:
    client = FakeMirrorClient(
        [
            "topic1",
            "topic2",
            "topic3",
            "source1__topic4",
            "source1__source2__topic5",
            "source3__source4__source5__topic6",
            "source1.topic7",
        ],
        DefaultReplicationPolicy("__"),
    )
    assert client.remote_topics() == {
        "source1__topic4",
        "source1__source2__topic5",
        "source3__source4__source5__topic6",
    }
    assert client.remote_topics("source1") == {"source1__topic4", "source1__source2__topic5"}


def test_separator_heartbeats_hops_and_upstream() -> None:
    client = FakeMirrorClient(
        [
            "heartbeats",
            "source1__heartbeats",
            "source2__source1__heartbeats",
            "source3.heartbeats",
            "source1__checkpoints__internal",
        ],
        DefaultReplicationPolicy("__"),
    )
    assert client.heartbeat_topics() == {
        "heartbeats",
        "source1__heartbeats",
        "source2__source1__heartbeats",
    }
    assert client.upstream_clusters() == {"source1", "source2"}
    assert client.replication_hops("source1") == 1
    assert client.replication_hops("source2") == 1
    assert client.replication_hops("source3") == -1
    assert client.checkpoint_topics() == {"source1__checkpoints__internal"}


def test_identity_remote_topics() -> None:
    client = FakeMirrorClient(
        ["topic1", "topic2", "topic3", "heartbeats", "backup.heartbeats"],
        IdentityReplicationPolicy("primary"),
    )
    remote = client.remote_topics()
    assert {"topic1", "topic2", "topic3", "backup.heartbeats"} <= remote
    assert "heartbeats" not in remote
    assert client.upstream_clusters() == {"backup"}
    assert client.replication_hops("backup") == 1
    assert client.remote_topics("primary") == {"topic1", "topic2", "topic3"}


def test_identity_hops_are_cycle_safe() -> None:
    # identity: upstream_topic(t) == t, so a non-heartbeat topic loops onto itself
    client = FakeMirrorClient([], IdentityReplicationPolicy("primary"))
    assert client.count_hops_for_topic("topic1", "primary") == 1
    assert client.count_hops_for_topic("topic1", "other") == -1


class _CyclicPolicy(DefaultReplicationPolicy):
    """A policy whose names form a cycle a -> b -> a (a broken custom policy)."""

    def topic_source(self, topic: str) -> str | None:
        return {"x": "a", "y": "b"}.get(topic)

    def upstream_topic(self, topic: str) -> str | None:
        return {"x": "y", "y": "x"}.get(topic)

    def is_heartbeats_topic(self, topic: str) -> bool:
        return topic in {"x", "y"}


def test_hops_and_upstream_terminate_on_cycles() -> None:
    client = FakeMirrorClient(["x"], _CyclicPolicy())
    assert client.replication_hops("a") == 1
    assert client.replication_hops("b") == 2
    assert client.replication_hops("c") == -1
    assert client.upstream_clusters() == {"a", "b"}


# -- configuration ----------------------------------------------------------------------------------


def test_policy_from_config_keys() -> None:
    client = MirrorClient(
        {
            "bootstrap.servers": "127.0.0.1:1",
            "replication.policy.separator": "__",
            "replication.policy.internal.topic.separator.enabled": "false",
        }
    )
    assert client.replication_policy == DefaultReplicationPolicy("__", False)
    identity = MirrorClient(
        {
            "bootstrap.servers": "h:1",
            "replication.policy.class": JAVA_IDENTITY,
            "source.cluster.alias": "primary",
        }
    )
    policy = identity.replication_policy
    assert isinstance(policy, IdentityReplicationPolicy)
    assert policy.source_cluster_alias == "primary"
    explicit = DefaultReplicationPolicy("-")
    assert MirrorClient({"bootstrap.servers": "h:1"}, explicit).replication_policy is explicit


def test_split_client_config_prefixes_and_mm2_keys() -> None:
    policy_keys, admin, consumer = split_client_config(
        {
            "bootstrap.servers": "h:1",
            "security.protocol": "PLAINTEXT",
            "replication.policy.separator": "__",
            "replication.policy.class": JAVA_IDENTITY,
            "source.cluster.alias": "primary",
            "forwarding.admin.class": "org.example.Admin",
            "admin.client.id": "admin-id",
            "consumer.client.id": "consumer-id",
            "consumer.security.protocol": "SSL",
            "consumer.replication.policy.separator": "--",
            "producer.acks": "all",
        }
    )
    assert policy_keys["replication.policy.separator"] == "__"
    assert policy_keys["source.cluster.alias"] == "primary"
    admin.pop("logger")
    consumer.pop("logger")
    assert admin == {
        "bootstrap.servers": "h:1",
        "security.protocol": "PLAINTEXT",
        "client.id": "admin-id",
    }
    assert consumer == {
        "bootstrap.servers": "h:1",
        "security.protocol": "SSL",
        "client.id": "consumer-id",
    }


def test_missing_bootstrap_is_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        MirrorClient({"security.protocol": "PLAINTEXT"})
    assert info.value.key == "bootstrap.servers"
    with pytest.raises(ConfigError) as info:
        MirrorClient({"admin.bootstrap.servers": "h:1"})
    assert info.value.key == "consumer.bootstrap.servers"


def test_invalid_librdkafka_key_is_config_error() -> None:
    with pytest.raises(ConfigError, match="no.such.setting"):
        MirrorClient({"bootstrap.servers": "h:1", "no.such.setting": "1"})


def test_bad_policy_class_is_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        MirrorClient({"bootstrap.servers": "h:1", "replication.policy.class": "com.acme.Policy"})
    assert info.value.key == "replication.policy.class"


def test_closed_client_raises() -> None:
    with MirrorClient({"bootstrap.servers": "127.0.0.1:1"}, alias="Z") as client:
        pass
    with pytest.raises(ClusterError, match="closed"):
        client.list_topics()
    assert "Z" in repr(client)


# -- unreachable cluster: ClusterError within the timeout, never a hang -------------------------


def test_unreachable_cluster_raises_within_timeout() -> None:
    config = {"bootstrap.servers": f"127.0.0.1:{free_port()}"}
    client = MirrorClient(config, alias="gone", timeout=2.0)
    calls: list[Callable[[], object]] = [
        client.list_topics,
        client.heartbeat_topics,
        client.upstream_clusters,
        lambda: client.replication_hops("A"),
        lambda: client.remote_topics("A"),
        lambda: client.remote_consumer_offsets("g", "A", timeout=2.0),
        client.heartbeats,
        lambda: translate_offsets(config, "A", "g", timeout=2.0),
    ]
    for call in calls:
        t0 = time.monotonic()
        with pytest.raises(ClusterError) as info:
            call()
        assert time.monotonic() - t0 < 6.0
        assert "127.0.0.1" in str(info.value)
    with pytest.raises(ClusterError, match="cluster gone"):
        client.checkpoint_topics()


# -- integration: real cluster ------------------------------------------------------------------


def _unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def _produce(
    cluster: BaseCluster, topic: str, records: Iterable[tuple[bytes | None, bytes | None, int]]
) -> None:
    producer = Producer(cluster.client_config(extra={"log_level": "0"}))
    errors: list[Any] = []
    for key, value, partition in records:
        producer.produce(
            topic,
            value=value,
            key=key,
            partition=partition,
            on_delivery=lambda err, _m: errors.append(err) if err else None,
        )
    assert producer.flush(30) == 0
    assert not errors


def _checkpoint(cp: Checkpoint, partition: int = 0) -> tuple[bytes, bytes, int]:
    return cp.encode_key(), cp.encode_value(), partition


def _heartbeat(hb: Heartbeat) -> tuple[bytes, bytes, int]:
    return hb.encode_key(), hb.encode_value(), 0


def _client(cluster: BaseCluster, extra: Mapping[str, str] | None = None) -> MirrorClient:
    return MirrorClient({**cluster.client_config(), **(extra or {})}, alias=cluster.alias)


@pytest.mark.integration
def test_remote_consumer_offsets_last_checkpoint_wins(
    two_clusters: Any, caplog: pytest.LogCaptureFixture
) -> None:
    _, b = two_clusters
    remote = _unique("r")
    topic = f"{remote}.checkpoints.internal"
    b.create_topic(topic, partitions=2)
    group, other = _unique("g"), _unique("g")
    _produce(
        b,
        topic,
        [
            _checkpoint(Checkpoint(group, f"{remote}.orders", 0, 10, 9, "m-old")),
            _checkpoint(Checkpoint(group, f"{remote}.orders", 1, 20, 19)),
            (b"garbage", b"\x00\x01", 0),  # corrupt key and value
            (Checkpoint(group, "x", 0, 1, 1).encode_key(), None, 0),  # tombstone
            (Checkpoint(group, "x", 0, 1, 1).encode_key(), b"\x00", 0),  # truncated value
            _checkpoint(Checkpoint(group, f"{remote}.orders", 0, 15, 14, "m-new")),
            _checkpoint(Checkpoint(other, f"{remote}.orders", 0, 3, 3)),
            _checkpoint(Checkpoint(group, "orders", 2, 7, 6)),  # a topic that came from here
            # partition 1 of the checkpoints topic is never read (MM2 reads partition 0 only)
            _checkpoint(Checkpoint(group, f"{remote}.ignored", 0, 5, 5), partition=1),
        ],
    )
    expected = {
        TopicPartition(f"{remote}.orders", 0): OffsetAndMetadata(14, "m-new"),
        TopicPartition(f"{remote}.orders", 1): OffsetAndMetadata(19, ""),
        TopicPartition("orders", 2): OffsetAndMetadata(6, ""),
    }
    with _client(b) as client, caplog.at_level(logging.WARNING, logger="mirrorlib.kafka.client"):
        assert client.remote_consumer_offsets(group, remote, timeout=30) == expected
        assert client.remote_consumer_offsets(other, remote) == {
            TopicPartition(f"{remote}.orders", 0): OffsetAndMetadata(3, "")
        }
        assert client.remote_consumer_offsets(_unique("nobody"), remote) == {}
        matching = client.remote_consumer_offsets_matching(f"{group}|{other}", remote)
        assert set(matching) == {group, other}
        assert matching[group] == expected
        assert client.remote_consumer_offsets_matching(group[:-1], remote) == {}  # full match
        latest = client.checkpoints(remote)
        assert latest[(group, TopicPartition(f"{remote}.orders", 0))] == Checkpoint(
            group, f"{remote}.orders", 0, 15, 14, "m-new"
        )
        assert topic in client.checkpoint_topics()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("skipping a record" in w and topic in w for w in warnings), warnings
    assert any("skipped 3 corrupt record(s)" in w for w in warnings), warnings
    assert translate_offsets(b.client_config(), remote, group, timeout=30) == expected


@pytest.mark.integration
def test_remote_consumer_offsets_empty_and_missing_topic(two_clusters: Any) -> None:
    _, b = two_clusters
    remote = _unique("r")
    with _client(b) as client:
        with pytest.raises(ClusterError) as info:
            client.remote_consumer_offsets("g", remote, timeout=10)
        message = str(info.value)
        assert f"{remote}.checkpoints.internal" in message
        assert "does not exist" in message
        assert f"cluster {b.alias}" in message and b.bootstrap_servers in message
        b.create_topic(f"{remote}.checkpoints.internal")
        assert client.remote_consumer_offsets("g", remote, timeout=10) == {}


@pytest.mark.integration
def test_custom_separator_checkpoints_and_heartbeats(two_clusters: Any) -> None:
    _, b = two_clusters
    remote, up = _unique("r"), _unique("u")
    extra = {"replication.policy.separator": "__"}
    b.create_topic(f"{remote}__checkpoints__internal")
    b.create_topic(f"{remote}__{up}__heartbeats")
    b.create_topic(f"{remote}__orders")
    group = _unique("g")
    _produce(
        b,
        f"{remote}__checkpoints__internal",
        [_checkpoint(Checkpoint(group, f"{remote}__orders", 0, 8, 8))],
    )
    with _client(b, extra) as client:
        assert client.remote_consumer_offsets(group, remote) == {
            TopicPartition(f"{remote}__orders", 0): OffsetAndMetadata(8)
        }
        assert f"{remote}__checkpoints__internal" in client.checkpoint_topics()
        assert f"{remote}__{up}__heartbeats" in client.heartbeat_topics()
        assert {remote, up} <= client.upstream_clusters()
        assert client.replication_hops(remote) == 1
        assert client.replication_hops(up) == 2
        assert client.remote_topics(remote) >= {f"{remote}__orders", f"{remote}__{up}__heartbeats"}
    # with the flag off the internal topics keep dots
    dotted = {**extra, "replication.policy.internal.topic.separator.enabled": "false"}
    b.create_topic(f"{remote}.checkpoints.internal")
    _produce(
        b,
        f"{remote}.checkpoints.internal",
        [_checkpoint(Checkpoint(group, f"{remote}__orders", 0, 9, 9))],
    )
    assert translate_offsets({**b.client_config(), **dotted}, remote, group) == {
        TopicPartition(f"{remote}__orders", 0): OffsetAndMetadata(9)
    }


@pytest.mark.integration
def test_heartbeat_topics_hops_upstream_and_heartbeats(
    two_clusters: Any, caplog: pytest.LogCaptureFixture
) -> None:
    _, b = two_clusters
    u, v, w, x = (_unique(p) for p in "uvwx")
    for topic in (f"{u}.heartbeats", f"{v}.{u}.heartbeats", f"{w}.{x}.heartbeats", f"{u}.orders"):
        b.create_topic(topic)
    now = int(time.time() * 1000)
    _produce(
        b,
        f"{u}.heartbeats",
        [
            _heartbeat(Heartbeat(u, "B", now - 5000)),
            _heartbeat(Heartbeat(u, "B", now)),
            (b"junk", b"junk", 0),
            _heartbeat(Heartbeat(x, u, now - 100)),
        ],
    )
    _produce(b, f"{w}.{x}.heartbeats", [_heartbeat(Heartbeat(x, w, now - 1000))])
    _produce(b, f"{v}.{u}.heartbeats", [_heartbeat(Heartbeat(x, u, now - 50))])
    with _client(b) as client, caplog.at_level(logging.WARNING, logger="mirrorlib.kafka.client"):
        topics = client.heartbeat_topics()
        assert {f"{u}.heartbeats", f"{v}.{u}.heartbeats", f"{w}.{x}.heartbeats"} <= topics
        assert f"{u}.orders" not in topics
        assert {u, v, w, x} <= client.upstream_clusters()
        assert client.replication_hops(u) == 1  # u.heartbeats beats v.u.heartbeats (2)
        assert client.replication_hops(v) == 1
        assert client.replication_hops(w) == 1
        assert client.replication_hops(x) == 2
        assert client.replication_hops(_unique("none")) == -1
        assert client.remote_topics(u) == {f"{u}.heartbeats", f"{u}.orders"}
        assert {f"{u}.orders", f"{v}.{u}.heartbeats"} <= client.remote_topics()
        beats = client.heartbeats(timeout=30)
        assert beats[(u, "B")] == Heartbeat(u, "B", now)
        assert beats[(x, w)] == Heartbeat(x, w, now - 1000)
        assert beats[(x, u)] == Heartbeat(x, u, now - 50)  # newest over two topics
    assert any("not a heartbeat" in r.getMessage() for r in caplog.records)


@pytest.mark.integration
def test_identity_policy_on_a_real_cluster(two_clusters: Any) -> None:
    _, b = two_clusters
    plain, backup = _unique("plain"), _unique("backup")
    b.create_topic(plain)
    b.create_topic(f"{backup}.heartbeats")
    config = {
        **b.client_config(),
        "replication.policy.class": JAVA_IDENTITY,
        "source.cluster.alias": "primary",
    }
    with MirrorClient(config) as client:
        assert isinstance(client.replication_policy, IdentityReplicationPolicy)
        remote = client.remote_topics()
        assert {plain, f"{backup}.heartbeats"} <= remote
        assert plain in client.remote_topics("primary")
        assert backup in client.upstream_clusters()
        assert client.replication_hops(backup) == 1
        assert "heartbeats" not in remote
