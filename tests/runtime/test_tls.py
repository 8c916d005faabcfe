"""TLS end to end on real local brokers: replication and failover through SSL listeners (one
cluster with server certificates only, two that require client certificates), configured with
the Java keys an MM2 user writes; clear errors for a wrong CA, an expired client certificate and
a missing file."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

import pytest
from confluent_kafka import Consumer, Producer

from mirrorlib import MirrorClient, MirrorConfig, Replicator
from mirrorlib.errors import ClusterError, ConfigError
from mirrorlib.runtime.failover import failover
from mirrorlib.testing import BaseCluster, CertificateAuthority
from mirrorlib.testing.pytest_plugin import ClusterRequest
from tests.runtime.conftest import end_offsets, mm2_properties, read_all, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.java]

KeystoreType = Literal["PEM", "PKCS12"]


@pytest.fixture
def tls_cluster(kafka_clusters: ClusterRequest) -> BaseCluster:
    """A cluster whose client listener is TLS (server certificate only)."""
    return kafka_clusters(["TLS"], tls=True)[0]


@pytest.fixture
def mtls_clusters(kafka_clusters: ClusterRequest) -> tuple[BaseCluster, BaseCluster]:
    """Two clusters whose brokers require client certificates (mutual TLS)."""
    a, b = kafka_clusters(["MA", "MB"], tls=True, client_auth=True)
    return a, b


def tls_config(
    clusters: Mapping[BaseCluster, KeystoreType], flows: Iterable[str], **extra: str
) -> MirrorConfig:
    """MM2 properties with each cluster's Java TLS keys (``<alias>.ssl.truststore.*``...)."""
    props = mm2_properties(clusters, flows, **extra)
    for cluster, keystore_type in clusters.items():
        for key, value in cluster.java_client_config(keystore_type=keystore_type).items():
            props[f"{cluster.alias}.{key}"] = value
    return MirrorConfig.from_properties(props)


def values(cluster: BaseCluster, topic: str) -> list[bytes]:
    return [m.value() for m in read_all(cluster, topic)]


def test_java_tls_keys_translate_to_the_clusters_pem_files(
    tls_cluster: BaseCluster, mtls_clusters: tuple[BaseCluster, BaseCluster]
) -> None:
    a, b = mtls_clusters
    cfg = tls_config({tls_cluster: "PEM", a: "PEM", b: "PKCS12"}, ["TLS->MB"])
    plain = cfg.client_config("TLS", "consumer")
    assert plain["security.protocol"] == "ssl"
    assert plain["ssl.ca.location"] == tls_cluster.client_config()["ssl.ca.location"]
    assert "ssl.certificate.location" not in plain
    assert a.tls is not None and b.tls is not None
    # Java's PEM keystore: one file with the key and the certificate, read twice by librdkafka
    mutual = cfg.client_config("MA", "admin")
    assert mutual["ssl.ca.location"] == str(a.tls.ca)
    assert (
        mutual["ssl.certificate.location"] == mutual["ssl.key.location"] == str(a.tls.client.bundle)
    )
    pkcs12 = cfg.client_config("MB", "producer")
    assert pkcs12["ssl.keystore.location"] == str(b.tls.client_keystore)
    assert pkcs12["ssl.keystore.password"] == b.tls.password


def test_replicates_between_tls_clusters(
    tls_cluster: BaseCluster, mtls_clusters: tuple[BaseCluster, BaseCluster]
) -> None:
    source, target = tls_cluster, mtls_clusters[1]
    topic = "tls.orders"
    source.create_topic(topic, 2)
    sent = [f"order-{i}".encode() for i in range(200)]
    source.produce(topic, sent)
    cfg = tls_config(
        {source: "PEM", target: "PKCS12"}, ["TLS->MB"], **{"TLS->MB.topics": "tls\\..*"}
    )
    with Replicator(cfg):
        wait_for(
            "records on the target",
            lambda: sum(end_offsets(target, f"TLS.{topic}").values()) >= len(sent),
        )
    assert sorted(values(target, f"TLS.{topic}")) == sorted(values(source, topic)) == sorted(sent)


def _consume_and_commit(cluster: BaseCluster, group: str, topic: str, n: int) -> list[bytes]:
    consumer = Consumer(
        {**cluster.client_config(), "group.id": group, "auto.offset.reset": "earliest",
         "enable.auto.commit": False}
    )  # fmt: skip
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < n and time.monotonic() < deadline:
            got += [m.value() for m in consumer.consume(n - len(got), 0.5) if m.error() is None]
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert len(got) == n
    return got


def test_fails_a_group_over_through_mutual_tls(
    mtls_clusters: tuple[BaseCluster, BaseCluster],
) -> None:
    a, b = mtls_clusters
    topic, group = "mtls.fo", "mtls-fo"
    a.create_topic(topic, 1)
    producer = Producer(a.client_config())
    for i in range(50):
        producer.produce(topic, f"r{i}".encode())
    assert producer.flush(30) == 0
    cfg = tls_config(
        {a: "PEM", b: "PKCS12"}, ["MA->MB"],
        **{"MA->MB.topics": "mtls\\..*", "MA->MB.groups": "mtls-.*"},
    )  # fmt: skip
    first = _consume_and_commit(a, group, topic, 20)
    with Replicator(cfg):
        wait_for("replicated", lambda: sum(end_offsets(b, f"MA.{topic}").values()) >= 50)
        with MirrorClient(cfg.client_config("MB", "consumer"), alias="MB") as client:
            assert "MA.checkpoints.internal" in client.checkpoint_topics()
            # the group's position is translated (its checkpoint written) before failing over:
            # right after the copy, the offset syncs that translate it may not be written yet
            wait_for(
                "the group's checkpoint",
                lambda: client.remote_consumer_offsets(group, "MA"),
                timeout=60,
            )
        plan = failover(cfg, group, "MA", "MB")
    assert plan.applied
    rest = _consume_and_commit(b, group, f"MA.{topic}", 30)
    assert first + rest == [f"r{i}".encode() for i in range(50)]


def _bounded(seconds: float) -> float:
    return time.monotonic() + seconds


def test_wrong_ca_names_the_cluster_and_the_file(tls_cluster: BaseCluster, tmp_path: Path) -> None:
    other_ca = CertificateAuthority(tmp_path / "other-ca").create()
    conf = tls_cluster.client_config(extra={"ssl.ca.location": str(other_ca.certificate)})
    deadline = _bounded(30)
    with (
        MirrorClient(conf, alias="TLS", timeout=5) as client,
        pytest.raises(ClusterError) as caught,
    ):
        client.list_topics()
    assert time.monotonic() < deadline
    message = str(caught.value)
    print(message)
    assert "\n" not in message
    assert "cluster TLS" in message and str(other_ca.certificate) in message
    assert "could not be verified" in message


def test_expired_client_certificate_names_the_cluster_and_the_file(
    mtls_clusters: tuple[BaseCluster, BaseCluster],
) -> None:
    _, b = mtls_clusters
    assert b.tls is not None
    expired = b.tls.authority.issue(
        "expired-client",
        not_before=dt.datetime(2020, 1, 1, tzinfo=dt.UTC),
        not_after=dt.datetime(2020, 1, 2, tzinfo=dt.UTC),
    )
    conf = b.client_config(
        extra={
            "ssl.certificate.location": str(expired.certificate),
            "ssl.key.location": str(expired.key),
        }
    )
    deadline = _bounded(30)
    with MirrorClient(conf, alias="MB", timeout=5) as client, pytest.raises(ClusterError) as caught:
        client.checkpoints("MA", timeout=5)
    assert time.monotonic() < deadline
    message = str(caught.value)
    print(message)
    assert "cluster MB" in message and str(expired.certificate) in message
    assert "expired on 2020-01-02" in message


def test_failover_to_a_cluster_with_a_wrong_ca_fails_naming_both(
    mtls_clusters: tuple[BaseCluster, BaseCluster], tmp_path: Path
) -> None:
    a, b = mtls_clusters
    other_ca = CertificateAuthority(tmp_path / "other-ca").create()
    props = mm2_properties([a, b], ["MA->MB"])
    for cluster in (a, b):
        for key, value in cluster.java_client_config().items():
            props[f"{cluster.alias}.{key}"] = value
    props["MB.ssl.truststore.location"] = str(other_ca.certificate)
    deadline = _bounded(30)
    with pytest.raises(ClusterError, match=r"cluster MB.*other-ca/ca\.pem") as caught:
        failover(MirrorConfig.from_properties(props), "tls-nobody", "MA", "MB", timeout=5)
    print(caught.value)
    assert time.monotonic() < deadline


def test_missing_ca_file_is_a_config_error(tls_cluster: BaseCluster, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "ca.pem"
    conf = tls_cluster.client_config(extra={"ssl.ca.location": str(missing)})
    with pytest.raises(ConfigError, match=r"ssl\.ca\.location.*nowhere/ca\.pem.*cluster TLS") as e:
        MirrorClient(conf, alias="TLS")
    assert e.value.key == "ssl.ca.location" and e.value.value == str(missing)
