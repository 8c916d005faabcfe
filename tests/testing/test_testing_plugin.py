"""The pytest plugin in external-cluster mode (no brokers needed)."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

PLUGIN_TESTS = """
import pytest

def test_pair(two_clusters):
    a, b = two_clusters
    assert (a.alias, a.bootstrap_servers) == ("A", "h1:9092")
    assert b.client_config() == {"bootstrap.servers": "h2:9092", "security.protocol": "SSL"}

def test_by_alias(kafka_clusters):
    (b,) = kafka_clusters(["B"])
    assert b.bootstrap_servers == "h2:9092"

def test_too_many(kafka_clusters):
    kafka_clusters(3)

def test_acl(acl_kafka_cluster):
    pass

def test_overrides(kafka_clusters):
    kafka_clusters(2, overrides={"num.partitions": "3"})

def test_three_nodes(kafka_clusters):
    kafka_clusters(1, nodes=3)

def test_private(private_kafka_clusters):
    pass

def test_restart(kafka_cluster):
    from mirrorlib.testing.pytest_plugin import require_managed
    require_managed(kafka_cluster)
"""


def test_external_mode_skips_what_needs_own_clusters(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIRRORLIB_TEST_CLUSTERS", "A=h1:9092,B=h2:9092")
    monkeypatch.setenv("MIRRORLIB_TEST_CLIENT_CONFIG", "security.protocol=SSL")
    pytester.makepyfile(PLUGIN_TESTS)
    installed = any(ep.name == "mirrorlib" for ep in entry_points(group="pytest11"))
    args = [] if installed else ["-p", "mirrorlib.testing.pytest_plugin"]
    result = pytester.runpytest_subprocess(*args, "-rs")
    result.assert_outcomes(passed=2, skipped=6)
    result.stdout.fnmatch_lines(
        [
            "*needs 3 clusters; MIRRORLIB_TEST_CLUSTERS has 2*",
            "*ACL, TLS, multi-node and proxied clusters and broker overrides need clusters "
            "mirrorlib starts itself*",
            "*cluster A is external*",
        ]
    )
