"""Unit tests for the pure helpers of mirrorlib.testing (no Java, no Kafka)."""

from __future__ import annotations

import base64
import re
import socket
from pathlib import Path

import javaproperties
import pytest

from mirrorlib.errors import ClusterError, TestClusterError
from mirrorlib.testing import ClusterFactory, JvmOptions, default_aliases
from mirrorlib.testing.cluster import ClusterSet, ExternalCluster, KafkaCluster
from mirrorlib.testing.config import (
    ADMIN_USER,
    BROKER_DEFAULTS,
    BrokerTls,
    broker_properties,
    free_port,
    jaas_config,
    new_cluster_id,
    render_properties,
)
from mirrorlib.testing.external import parse_client_config, parse_external_clusters
from mirrorlib.testing.jars import render_pom


def test_error_is_a_cluster_error() -> None:
    assert issubclass(TestClusterError, ClusterError)


def test_free_ports_are_distinct_and_bindable() -> None:
    ports = [free_port() for _ in range(20)]
    assert len(set(ports)) == 20
    for port in ports[:3]:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_free_port_honours_exclude() -> None:
    port = free_port()
    assert free_port(exclude=frozenset({port})) != port


def test_cluster_id_format() -> None:
    for _ in range(500):
        cid = new_cluster_id()
        assert len(cid) == 22
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", cid)
        assert not cid.startswith("-")
        assert len(base64.urlsafe_b64decode(cid + "==")) == 16
    assert len({new_cluster_id() for _ in range(100)}) == 100


def test_plain_broker_properties() -> None:
    props = broker_properties(client_port=1111, controller_port=2222, log_dir="/x/data")
    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:2222"
    assert props["listeners"] == "CLIENT://127.0.0.1:1111,CONTROLLER://127.0.0.1:2222"
    assert props["listener.security.protocol.map"] == "CLIENT:PLAINTEXT,CONTROLLER:PLAINTEXT"
    assert props["log.dirs"] == "/x/data"
    assert props["auto.create.topics.enable"] == "false"
    assert props["group.initial.rebalance.delay.ms"] == "0"
    assert int(props["log.cleaner.dedupe.buffer.size"]) <= 32 * 1024 * 1024
    assert "authorizer.class.name" not in props
    for key, value in BROKER_DEFAULTS.items():
        assert props[key] == value
    # only loopback
    assert "0.0.0.0" not in render_properties(props)


def test_acl_broker_properties() -> None:
    props = broker_properties(
        client_port=1, controller_port=2, log_dir="d", acl=True, users={"alice": 'p"w'}
    )
    assert props["listener.security.protocol.map"] == (
        "CLIENT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT"
    )
    assert props["authorizer.class.name"].endswith("StandardAuthorizer")
    assert props["super.users"] == f"User:{ADMIN_USER}"
    assert props["allow.everyone.if.no.acl.found"] == "false"
    for listener in ("client", "controller"):
        jaas = props[f"listener.name.{listener}.plain.sasl.jaas.config"]
        assert 'user_admin="admin-secret"' in jaas
        assert 'user_alice="p\\"w"' in jaas
        assert jaas.endswith(";")
    assert props["sasl.mechanism.controller.protocol"] == "PLAIN"


def test_tls_broker_properties() -> None:
    tls = BrokerTls(keystore="/t/broker.p12", truststore="/t/trust.p12", password="pw")
    props = broker_properties(client_port=1, controller_port=2, log_dir="d", tls=tls)
    # the client listener is TLS (the broker reaches itself there too); the controller is not
    assert props["listener.security.protocol.map"] == "CLIENT:SSL,CONTROLLER:PLAINTEXT"
    assert props["inter.broker.listener.name"] == "CLIENT"
    assert props["ssl.keystore.type"] == props["ssl.truststore.type"] == "PKCS12"
    assert props["ssl.keystore.location"] == "/t/broker.p12"
    assert props["ssl.truststore.location"] == "/t/trust.p12"
    assert props["ssl.keystore.password"] == props["ssl.key.password"] == "pw"
    assert props["ssl.client.auth"] == "none"
    assert props["ssl.endpoint.identification.algorithm"] == "https"
    mutual = BrokerTls(keystore="k", truststore="t", password="p", client_auth=True)
    props = broker_properties(client_port=1, controller_port=2, log_dir="d", tls=mutual, acl=True)
    assert props["ssl.client.auth"] == "required"
    assert props["listener.security.protocol.map"] == "CLIENT:SASL_SSL,CONTROLLER:SASL_PLAINTEXT"


def test_tls_cluster_client_settings_are_known_before_start(tmp_path: object) -> None:
    cluster = KafkaCluster("T", str(tmp_path), tls=True, client_auth=True)
    assert cluster.tls is not None and not cluster.tls.ca.exists()  # made at start
    tls = cluster.tls.directory
    assert cluster.client_config() == {
        "bootstrap.servers": cluster.bootstrap_servers,
        "security.protocol": "SSL",
        "ssl.ca.location": str(tls / "ca.pem"),
        "ssl.certificate.location": str(tls / "client.pem"),
        "ssl.key.location": str(tls / "client.key"),
    }
    assert cluster.java_client_config() == {
        "bootstrap.servers": cluster.bootstrap_servers,
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls / "ca.pem"),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tls / "client-bundle.pem"),
    }
    pkcs12 = cluster.java_client_config(keystore_type="PKCS12")
    assert pkcs12["ssl.keystore.location"] == str(tls / "client.p12")
    assert pkcs12["ssl.keystore.password"] == cluster.tls.password
    assert cluster.server_properties()["ssl.keystore.location"] == str(tls / "broker.p12")
    one_way = KafkaCluster("U", str(tmp_path), tls=True)
    assert "ssl.certificate.location" not in one_way.client_config()
    assert "ssl.keystore.location" not in one_way.java_client_config()
    assert one_way.server_properties()["ssl.client.auth"] == "none"
    sasl = KafkaCluster("V", str(tmp_path), tls=True, acl=True)
    assert sasl.client_config()["security.protocol"] == "SASL_SSL"
    assert sasl.client_config()["sasl.username"] == ADMIN_USER
    with pytest.raises(TestClusterError, match="client_auth=True needs tls=True"):
        KafkaCluster("W", str(tmp_path), client_auth=True)


def test_overrides_win() -> None:
    props = broker_properties(
        client_port=1, controller_port=2, log_dir="d", overrides={"num.partitions": "7", "x": "y"}
    )
    assert props["num.partitions"] == "7"
    assert props["x"] == "y"


def test_users_need_acl_and_admin_is_reserved() -> None:
    with pytest.raises(TestClusterError, match="acl=True"):
        broker_properties(client_port=1, controller_port=2, log_dir="d", users={"a": "b"})
    with pytest.raises(TestClusterError, match="reserved"):
        broker_properties(
            client_port=1, controller_port=2, log_dir="d", acl=True, users={"admin": "x"}
        )


def test_render_properties_round_trips() -> None:
    props = broker_properties(
        client_port=1, controller_port=2, log_dir="/a b/c:d", acl=True, users={"u": "p=;:#!"}
    )
    text = render_properties(props)
    assert javaproperties.loads(text) == props
    assert not text.startswith("#")  # no timestamp comment


def test_jaas_config() -> None:
    assert jaas_config("u", "p") == (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" '
        'password="p";'
    )


def test_jvm_options(monkeypatch: pytest.MonkeyPatch) -> None:
    args = JvmOptions().args()
    assert "-Xmx512m" in args and "-Xms512m" in args
    assert "-XX:TieredStopAtLevel=1" in args
    assert "-XX:TieredStopAtLevel=1" not in JvmOptions(fast_jit=False).args()
    assert JvmOptions(extra=("-Dx=1",)).args()[-1] == "-Dx=1"
    monkeypatch.setenv("MIRRORLIB_KAFKA_FAST_JIT", "0")
    monkeypatch.setenv("MIRRORLIB_KAFKA_JVM_OPTS", "-Da=1 '-Db=2 3'")
    opts = JvmOptions.from_env()
    assert opts == JvmOptions(fast_jit=False, extra=("-Da=1", "-Db=2 3"))


def test_default_aliases() -> None:
    assert default_aliases(3) == ("A", "B", "C")
    assert default_aliases(27)[-1] == "C26"
    with pytest.raises(TestClusterError):
        default_aliases(0)


def test_parse_external_clusters() -> None:
    a, b = parse_external_clusters("A=h1:9092,h2:9092, B=h3:9093", {"security.protocol": "SSL"})
    assert (a.alias, a.bootstrap_servers) == ("A", "h1:9092,h2:9092")
    assert (b.alias, b.bootstrap_servers) == ("B", "h3:9093")
    assert b.client_config() == {"bootstrap.servers": "h3:9093", "security.protocol": "SSL"}
    assert not a.managed
    assert [c.alias for c in parse_external_clusters("x=h:1;y=h:2")] == ["x", "y"]
    for bad in ("h:9092", "A=", "A=h:1,A=h:2", "=h:1"):
        with pytest.raises(TestClusterError):
            parse_external_clusters(bad)


def test_parse_client_config() -> None:
    assert parse_client_config("a=1; b = x=y ;") == {"a": "1", "b": "x=y"}
    with pytest.raises(TestClusterError):
        parse_client_config("novalue")


def test_external_cluster_cannot_restart_or_kill() -> None:
    cluster = ExternalCluster("A", "h:1")
    with pytest.raises(TestClusterError, match="not started by mirrorlib"):
        cluster.restart()
    with pytest.raises(TestClusterError, match="not started by mirrorlib"):
        cluster.kill()
    cluster.stop()  # no-op


def test_kafka_cluster_construction_is_lazy(tmp_path: object) -> None:
    cluster = KafkaCluster("A", str(tmp_path), acl=True, users={"alice": "s"})
    assert not cluster.is_running
    assert cluster.bootstrap_servers == f"127.0.0.1:{cluster.port}"
    assert cluster.port != cluster.controller_port
    assert cluster.client_config(user="alice") == {
        "bootstrap.servers": cluster.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "s",
    }
    assert cluster.client_config()["sasl.username"] == "admin"
    assert "alice" in cluster.java_client_config("alice")["sasl.jaas.config"]
    with pytest.raises(TestClusterError, match="no user 'mallory'"):
        cluster.client_config(user="mallory")
    assert cluster.log_tail() == ""
    plain = KafkaCluster("B", str(tmp_path))
    with pytest.raises(TestClusterError):
        plain.client_config(user="alice")
    assert plain.admin_client_config(extra={"a": "b"})["a"] == "b"


def test_cluster_set_indexing() -> None:
    clusters = ClusterSet([ExternalCluster("A", "h:1"), ExternalCluster("B", "h:2")])
    assert clusters["B"] is clusters[1]
    assert clusters.aliases == ("A", "B")
    a, _b = clusters
    assert a.alias == "A"
    with pytest.raises(KeyError):
        clusters["C"]


def test_render_pom(tmp_path: object) -> None:
    pom = render_pom("9.9.9", "2.0.0", tmp_path)  # type: ignore[arg-type]
    assert "<kafka.version>9.9.9</kafka.version>" in pom
    assert "<log4j2.version>2.0.0</log4j2.version>" in pom
    assert f"<kafka.lib.dir>{tmp_path}</kafka.lib.dir>" in pom
    for artifact in ("kafka_2.13", "connect-mirror", "kafka-tools", "log4j-slf4j-impl"):
        assert f"<artifactId>{artifact}</artifactId>" in pom
    assert "@" not in pom.split("-->", 1)[1]


def test_a_misspelt_cluster_option_is_a_type_error(tmp_path: Path) -> None:
    with ClusterFactory(tmp_path) as factory:
        with pytest.raises(TypeError, match="tsl"):
            factory.create(1, tsl=True)  # type: ignore[call-arg]
        assert factory.create(1, acl=False)[0].alias == "A"  # nothing started yet


def test_multi_node_broker_properties() -> None:
    props = broker_properties(
        client_port=1,
        controller_port=12,
        log_dir="d",
        node_id=2,
        voters={1: 11, 2: 12, 3: 13},
        internal_port=22,
        advertised_port=31,
        acl=True,
    )
    assert props["controller.quorum.voters"] == ("1@127.0.0.1:11,2@127.0.0.1:12,3@127.0.0.1:13")
    assert props["listeners"] == (
        "CLIENT://127.0.0.1:1,CONTROLLER://127.0.0.1:12,INTERNAL://127.0.0.1:22"
    )
    # clients are told the proxy's port; brokers talk to each other past it
    assert props["advertised.listeners"].startswith("CLIENT://127.0.0.1:31,")
    assert props["inter.broker.listener.name"] == "INTERNAL"
    assert "INTERNAL:SASL_PLAINTEXT" in props["listener.security.protocol.map"]
    assert "listener.name.internal.plain.sasl.jaas.config" in props
    assert props["min.insync.replicas"] == "2"
    assert props["offsets.topic.replication.factor"] == "3"
    assert props["transaction.state.log.min.isr"] == "2"
    with pytest.raises(TestClusterError, match="not in"):
        broker_properties(client_port=1, controller_port=9, log_dir="d", voters={1: 11})


def test_replication_defaults_follow_the_node_count() -> None:
    from mirrorlib.testing.config import replication_defaults

    assert replication_defaults(2)["default.replication.factor"] == "2"
    assert replication_defaults(2)["min.insync.replicas"] == "1"
    assert replication_defaults(5)["default.replication.factor"] == "3"
    assert replication_defaults(5)["min.insync.replicas"] == "2"
    single = broker_properties(client_port=1, controller_port=2, log_dir="d")
    assert single["inter.broker.listener.name"] == "CLIENT"
    assert single["min.insync.replicas"] == "1"
    assert "INTERNAL" not in single["listeners"]
