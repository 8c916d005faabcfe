"""A real Apache Kafka test bed: local single-node KRaft clusters from Maven Central jars.

``mirrorlib.testing`` resolves the Kafka jars of a pinned release (:data:`KAFKA_VERSION`) from
Maven Central into a per-user cache, starts independent clusters of combined broker+controller
nodes (one by default, ``nodes=3`` for RF 3 / min ISR 2 with per-node kill, freeze and restart)
on free 127.0.0.1 ports, optionally behind a network-fault proxy (``proxy=True``: latency,
bandwidth caps, cuts, black holes), waits for real readiness and stops them cleanly. It is
what mirrorlib's own integration tests run on, and a pytest plugin (``mirrorlib.testing.
pytest_plugin``, registered automatically) exposes it as fixtures. See ``docs/testing.md``.

    from mirrorlib.testing import start_clusters

    with start_clusters(2) as (a, b):
        a.create_topic("orders")
        a.produce("orders", [b"hello"])
        assert "orders" not in b.topic_names()
"""

from __future__ import annotations

from mirrorlib.errors import TestClusterError
from mirrorlib.testing.cluster import (
    BaseCluster,
    ClusterFactory,
    ClusterOptions,
    ClusterSet,
    ExternalCluster,
    KafkaCluster,
    KafkaNode,
    default_aliases,
    start_clusters,
)
from mirrorlib.testing.config import ADMIN_PASSWORD, ADMIN_USER, JvmOptions
from mirrorlib.testing.external import external_clusters_from_env, parse_external_clusters
from mirrorlib.testing.jars import (
    KAFKA_VERSION,
    cache_dir,
    java_executable,
    kafka_classpath,
    kafka_lib_dir,
    resolve_kafka_jars,
)
from mirrorlib.testing.mm2 import RealMirrorMaker, mm2_properties
from mirrorlib.testing.proxy import LinkState, LinkStats, NetworkLink
from mirrorlib.testing.tls import TLS_PASSWORD, Certificate, CertificateAuthority, TlsFiles

__all__ = [
    "ADMIN_PASSWORD",
    "ADMIN_USER",
    "KAFKA_VERSION",
    "TLS_PASSWORD",
    "BaseCluster",
    "Certificate",
    "CertificateAuthority",
    "ClusterFactory",
    "ClusterOptions",
    "ClusterSet",
    "ExternalCluster",
    "JvmOptions",
    "KafkaCluster",
    "KafkaNode",
    "LinkState",
    "LinkStats",
    "NetworkLink",
    "RealMirrorMaker",
    "TestClusterError",
    "TlsFiles",
    "cache_dir",
    "default_aliases",
    "external_clusters_from_env",
    "java_executable",
    "kafka_classpath",
    "kafka_lib_dir",
    "mm2_properties",
    "parse_external_clusters",
    "resolve_kafka_jars",
    "start_clusters",
]
