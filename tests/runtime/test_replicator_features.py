"""More of MM2's behaviour through the Replicator: transactional and compacted sources, topic
config sync, offset-sync placement, ACL sync over SASL with Java-style (JAAS) client settings."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
)

from mirrorlib import MirrorConfig, OffsetSync, Replicator
from mirrorlib.testing import ClusterSet
from tests.runtime.conftest import FAST, config, decoded, produce, read_all, wait_for
from tests.runtime.test_replicator import replicated

pytestmark = pytest.mark.integration


def topic_config(cluster, topic: str) -> dict[str, str]:  # type: ignore[no-untyped-def]
    admin = cluster.admin_client()
    entries = next(
        iter(admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values())
    ).result(30)
    return {k: v.value for k, v in entries.items()}


def test_transactional_source_read_committed_skips_aborted(two_clusters: ClusterSet) -> None:
    a, b = two_clusters
    topic = "txsrc.t"
    a.create_topic(topic, 1)
    producer = Producer({**a.client_config(), "transactional.id": "txsrc-writer"})
    producer.init_transactions(30)
    for i, commit in enumerate([True, False, True]):
        producer.begin_transaction()
        for j in range(10):
            producer.produce(topic, f"{i}-{j}".encode(), partition=0)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    cfg = config(
        two_clusters, ["A->B"],
        **{"A->B.topics": "txsrc\\..*", "A.consumer.isolation.level": "read_committed"},
    )  # fmt: skip
    with Replicator(cfg) as r:
        wait_for("committed records", lambda: replicated(r, "txsrc") >= 20)
        wait_for(
            "caught up",
            lambda: all(p.lag_records == 0 for p in r.status()[0].partitions if p.topic == topic),
        )
    got = [m.value().decode() for m in read_all(b, f"A.{topic}")]
    assert got == [f"{i}-{j}" for i in (0, 2) for j in range(10)]
    # upstream offsets have gaps (markers, aborted records): offset syncs record them
    syncs = decoded(a, "mm2-offset-syncs.B.internal", OffsetSync)
    assert any(s.topic == topic and s.upstream_offset > s.downstream_offset for s in syncs)


def test_compacted_source_with_offset_gaps(two_clusters: ClusterSet) -> None:
    a, b = two_clusters
    topic = "compact.t"
    a.create_topic(topic, 1, config={"cleanup.policy": "compact"})
    produce(a, topic, [{"key": f"k{i % 5}".encode(), "value": str(i).encode()} for i in range(50)])
    produce(a, topic, [{"key": b"k0", "value": None}])  # a tombstone
    with Replicator(config(two_clusters, ["A->B"], **{"A->B.topics": "compact\\..*"})) as r:
        wait_for("replicated", lambda: replicated(r, "compact") >= 51)
    got = read_all(b, f"A.{topic}")
    assert got[-1].key() == b"k0" and got[-1].value() is None
    assert topic_config(b, f"A.{topic}")["cleanup.policy"] == "compact"


def test_topic_config_changes_are_synced(two_clusters: ClusterSet) -> None:
    a, b = two_clusters
    topic = "cfgsync.t"
    a.create_topic(topic, 1, config={"retention.ms": "3600000"})
    with Replicator(config(two_clusters, ["A->B"], **{"A->B.topics": "cfgsync\\..*"})):
        wait_for("remote topic", lambda: f"A.{topic}" in b.topic_names())
        assert topic_config(b, f"A.{topic}")["retention.ms"] == "3600000"
        admin = a.admin_client()
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
            ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("min.insync.replicas", "1", incremental_operation=AlterConfigOpType.SET),
        ])  # fmt: skip
        for f in admin.incremental_alter_configs([resource]).values():
            f.result(30)
        wait_for(
            "new retention on B", lambda: topic_config(b, f"A.{topic}")["retention.ms"] == "7200000"
        )


def test_offset_syncs_on_target_and_disabled(two_clusters: ClusterSet) -> None:
    a, b = two_clusters
    a.create_topic("synctarget.t", 1)
    produce(a, "synctarget.t", [{"value": b"x"} for _ in range(5)])
    cfg = config(
        two_clusters,
        ["A->B"],
        **{"A->B.topics": "synctarget\\..*", "offset-syncs.topic.location": "target"},
    )
    with Replicator(cfg) as r:
        wait_for("replicated", lambda: replicated(r, "synctarget") >= 5)

        def syncs() -> list[OffsetSync]:
            if "mm2-offset-syncs.A.internal" not in b.topic_names():
                return []
            found = decoded(b, "mm2-offset-syncs.A.internal", OffsetSync)
            return [s for s in found if s.topic == "synctarget.t"]

        wait_for("offset syncs on the target", syncs)
    a.create_topic("nosync.t", 1)
    produce(a, "nosync.t", [{"value": b"x"} for _ in range(5)])
    cfg = config(
        two_clusters, ["A->B"],
        **{"A->B.topics": "nosync\\..*", "emit.offset-syncs.enabled": "false", "emit.checkpoints.enabled": "false"},
    )  # fmt: skip
    with Replicator(cfg) as r:
        wait_for("replicated", lambda: replicated(r, "nosync") >= 5)
        assert r.status()[0].offset_syncs_emitted == 0
    written = decoded(a, "mm2-offset-syncs.B.internal", OffsetSync)
    assert not [s for s in written if s.topic == "nosync.t"]


def test_acl_sync_over_sasl_with_jaas_settings(kafka_clusters) -> None:  # type: ignore[no-untyped-def]
    users = {"alice": "alice-secret"}
    src, dst = kafka_clusters(["SA", "SB"], acl=True, users=users)
    topic = "secure.t"
    src.create_topic(topic, 1)
    admin = src.admin_client()
    bindings = [
        AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.ALL, AclPermissionType.ALLOW),
        AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW),
    ]  # fmt: skip
    for f in admin.create_acls(bindings).values():
        f.result(30)
    props = {"clusters": "SA, SB", "SA->SB.enabled": "true", "SA->SB.topics": "secure\\..*", **FAST,
             "sync.topic.acls.enabled": "true", "sync.topic.acls.interval.seconds": "1"}  # fmt: skip
    for c in (src, dst):
        for k, v in c.java_client_config().items():  # Java-style: sasl.jaas.config
            props[f"{c.alias}.{k}"] = v
    with Replicator(MirrorConfig.from_properties(props)):

        def remote_acls() -> list[AclBinding]:
            from confluent_kafka.admin import AclBindingFilter

            flt = AclBindingFilter(
                ResourceType.TOPIC,
                f"SA.{topic}",
                ResourcePatternType.LITERAL,
                None,
                None,
                AclOperation.ANY,
                AclPermissionType.ANY,
            )
            dst_admin = dst.admin_client()
            return list(dst_admin.describe_acls(flt).result(30))

        acls = wait_for("ACLs on the remote topic", remote_acls)
    # ALLOW ALL became ALLOW READ; ALLOW WRITE was not copied
    assert [(x.principal, x.operation, x.permission_type) for x in acls] == [
        ("User:alice", AclOperation.READ, AclPermissionType.ALLOW)
    ]
