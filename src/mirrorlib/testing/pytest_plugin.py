"""pytest fixtures for real Kafka clusters (registered through the ``pytest11`` entry point).

Fixtures:

``kafka_clusters`` (session)
    A factory: ``kafka_clusters(2)`` / ``kafka_clusters(["src", "dst"], acl=True, users=...)``
    returns a :class:`~mirrorlib.testing.ClusterSet` of started clusters. Clusters are cached
    per configuration for the whole session (so tests sharing them must use unique topic and
    group names) and stopped at session end. A cached cluster found dead is started again.
``private_kafka_clusters`` (function)
    Same signature; fresh clusters only for this test, stopped after it. Use it for tests that
    restart, kill or reconfigure brokers. Skips when running against external clusters.
``kafka_cluster`` / ``two_clusters``
    One shared cluster ``A`` / the shared pair ``A``, ``B``.
``acl_kafka_cluster``
    A shared ACL-enforcing cluster with users ``alice`` and ``bob`` (passwords
    ``alice-secret`` / ``bob-secret``) besides the ``admin`` super user.

TLS clusters: ``kafka_clusters(["TA", "TB"], tls=True)``, with ``client_auth=True`` for brokers
that require client certificates; ``cluster.client_config()`` has the PEM file settings.
Three-node clusters: ``kafka_clusters(["S3", "T3"], nodes=3)``; behind a network-fault proxy:
``kafka_clusters(["PA", "PB"], proxy=True)`` (``cluster.link``; a cached proxied cluster is
handed out with its link reset).

``MIRRORLIB_TEST_CLUSTERS="A=host:9092,B=host:9093"`` points all of this at existing clusters
instead: ``kafka_clusters`` hands those out (by alias, or the first ``n``), and everything that
needs a cluster of its own (restart/kill via ``private_kafka_clusters``, ACLs, broker
overrides) is skipped with the reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol, Unpack

import pytest

from mirrorlib.errors import TestClusterError
from mirrorlib.testing.cluster import (
    BaseCluster,
    ClusterFactory,
    ClusterOptions,
    ClusterSet,
    ExternalCluster,
    KafkaCluster,
    _aliases,
    check_options,
)
from mirrorlib.testing.external import external_clusters_from_env

__all__ = [
    "ACL_TEST_USERS",
    "ClusterRequest",
    "acl_kafka_cluster",
    "kafka_cluster",
    "kafka_clusters",
    "private_kafka_clusters",
    "require_managed",
    "two_clusters",
]

#: Users of the shared ``acl_kafka_cluster`` fixture.
ACL_TEST_USERS: Mapping[str, str] = {"alice": "alice-secret", "bob": "bob-secret"}


class ClusterRequest(Protocol):
    """The signature of the ``kafka_clusters`` / ``private_kafka_clusters`` factories."""

    def __call__(
        self, n_or_aliases: int | Iterable[str] = 2, **options: Unpack[ClusterOptions]
    ) -> ClusterSet: ...


def _start_timeout() -> float:
    return float(os.environ.get("MIRRORLIB_TEST_START_TIMEOUT", "180"))


def require_managed(*clusters: BaseCluster) -> None:
    """Skip the test unless every cluster was started by mirrorlib (restart/kill possible)."""
    for cluster in clusters:
        if not cluster.managed:
            pytest.skip(
                f"cluster {cluster.alias} is external (MIRRORLIB_TEST_CLUSTERS); this test "
                "needs a cluster mirrorlib starts itself (restart/kill/ACL/broker overrides)"
            )


def _external(
    externals: list[ExternalCluster], n_or_aliases: int | Iterable[str], options: ClusterOptions
) -> ClusterSet:
    if any(v for k, v in check_options(options).items() if k != "nodes") or (
        options.get("nodes", 1) != 1
    ):
        pytest.skip(
            "MIRRORLIB_TEST_CLUSTERS is set: ACL, TLS, multi-node and proxied clusters and "
            "broker overrides need clusters mirrorlib starts itself"
        )
    by_alias = {c.alias: c for c in externals}
    if isinstance(n_or_aliases, int):
        if n_or_aliases > len(externals):
            pytest.skip(
                f"test needs {n_or_aliases} clusters; MIRRORLIB_TEST_CLUSTERS has {len(externals)}"
            )
        return ClusterSet(externals[:n_or_aliases])
    aliases = _aliases(n_or_aliases)
    missing = [a for a in aliases if a not in by_alias]
    if missing:
        pytest.skip(f"MIRRORLIB_TEST_CLUSTERS has no cluster(s) {missing}")
    return ClusterSet(by_alias[a] for a in aliases)


def _key(n_or_aliases: int | Iterable[str], options: ClusterOptions) -> tuple[Any, ...]:
    cluster_overrides = options.get("cluster_overrides") or {}
    return (
        _aliases(n_or_aliases),
        options.get("acl", False),
        tuple(sorted((options.get("users") or {}).items())),
        (options.get("tls", False), options.get("client_auth", False)),
        tuple(sorted((options.get("overrides") or {}).items())),
        tuple(sorted((a, tuple(sorted(o.items()))) for a, o in cluster_overrides.items())),
        options.get("nodes", 1),
        options.get("proxy", False),
    )


class _SessionClusters:
    """The session-scoped, caching implementation behind ``kafka_clusters``."""

    def __init__(self, factory: ClusterFactory | None, externals: list[ExternalCluster] | None):
        self._factory = factory
        self._externals = externals
        self._cache: dict[tuple[Any, ...], ClusterSet | TestClusterError] = {}

    def __call__(
        self, n_or_aliases: int | Iterable[str] = 2, **options: Unpack[ClusterOptions]
    ) -> ClusterSet:
        if not isinstance(n_or_aliases, int):
            n_or_aliases = tuple(n_or_aliases)
        if self._externals is not None:
            return _external(self._externals, n_or_aliases, options)
        assert self._factory is not None
        key = _key(n_or_aliases, check_options(options))
        cached = self._cache.get(key)
        if isinstance(cached, TestClusterError):
            # do not spend another startup timeout on a configuration that already failed
            raise TestClusterError(f"cluster start failed earlier in this session: {cached}")
        if cached is not None:
            for cluster in cached:
                if not cluster.managed:
                    continue
                try:
                    # no-op unless a test left it (or some of its nodes) dead or frozen
                    cluster.start(_start_timeout())
                    if isinstance(cluster, KafkaCluster) and cluster.proxy:
                        cluster.link.reset()  # a plain link again, whatever the last test did
                except TestClusterError as exc:
                    self._cache[key] = exc
                    raise
            return cached
        try:
            clusters = self._factory.start(n_or_aliases, timeout=_start_timeout(), **options)
        except TestClusterError as exc:
            self._cache[key] = exc
            raise
        self._cache[key] = clusters
        return clusters


@pytest.fixture(scope="session")
def kafka_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterRequest]:
    """Session-wide factory of started, cached clusters: ``kafka_clusters(2)``."""
    externals = external_clusters_from_env()
    if externals is not None:
        yield _SessionClusters(None, externals)
        return
    factory = ClusterFactory(
        tmp_path_factory.mktemp("kafka"), startup_timeout=_start_timeout(), keep_work_dir=True
    )
    try:
        yield _SessionClusters(factory, None)
    finally:
        factory.close()


@pytest.fixture
def private_kafka_clusters(tmp_path: Any) -> Iterator[ClusterRequest]:
    """Function-scoped factory: clusters only for this test (restart/kill them freely)."""
    if external_clusters_from_env() is not None:
        pytest.skip(
            "MIRRORLIB_TEST_CLUSTERS is set: this test needs clusters mirrorlib starts itself "
            "(it restarts, kills or reconfigures brokers)"
        )
    factory = ClusterFactory(
        tmp_path / "kafka", startup_timeout=_start_timeout(), keep_work_dir=True
    )

    def request(
        n_or_aliases: int | Iterable[str] = 2, **options: Unpack[ClusterOptions]
    ) -> ClusterSet:
        return factory.start(n_or_aliases, timeout=_start_timeout(), **options)

    try:
        yield request
    finally:
        factory.close()


@pytest.fixture
def kafka_cluster(kafka_clusters: ClusterRequest) -> BaseCluster:
    """The shared cluster ``A`` (the same one as ``two_clusters[0]``)."""
    return kafka_clusters(["A", "B"])[0]


@pytest.fixture
def two_clusters(kafka_clusters: ClusterRequest) -> ClusterSet:
    """The shared clusters ``A`` and ``B`` (independent of each other)."""
    return kafka_clusters(["A", "B"])


@pytest.fixture
def acl_kafka_cluster(kafka_clusters: ClusterRequest) -> BaseCluster:
    """A shared ACL-enforcing SASL/PLAIN cluster with users ``alice`` and ``bob``."""
    return kafka_clusters(["ACL"], acl=True, users=ACL_TEST_USERS)[0]
