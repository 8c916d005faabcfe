"""Point the test suite at clusters someone else runs (``MIRRORLIB_TEST_CLUSTERS``)."""

from __future__ import annotations

import os
import re

from mirrorlib.errors import TestClusterError
from mirrorlib.testing.cluster import ExternalCluster

__all__ = ["external_clusters_from_env", "parse_client_config", "parse_external_clusters"]

_ALIAS = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


def parse_external_clusters(
    spec: str, client_extra: dict[str, str] | None = None
) -> list[ExternalCluster]:
    """Parse ``"A=host:9092,B=host:9093"`` (``;`` also separates clusters).

    A comma-separated item without ``=`` continues the previous cluster's bootstrap list, so
    ``"A=h1:9092,h2:9092;B=h3:9092"`` gives A two bootstrap servers.
    """
    entries: list[tuple[str, list[str]]] = []
    for item in re.split(r"[;,]", spec):
        item = item.strip()
        if not item:
            continue
        if "=" in item:
            alias, _, server = item.partition("=")
            alias, server = alias.strip(), server.strip()
            if not _ALIAS.match(alias) or not server:
                raise TestClusterError(f"bad MIRRORLIB_TEST_CLUSTERS entry {item!r} in {spec!r}")
            if alias in {a for a, _ in entries}:
                raise TestClusterError(f"duplicate alias {alias!r} in {spec!r}")
            entries.append((alias, [server]))
        elif entries:
            entries[-1][1].append(item)
        else:
            raise TestClusterError(
                f"MIRRORLIB_TEST_CLUSTERS must look like 'A=host:9092,B=host:9093', got {spec!r}"
            )
    return [ExternalCluster(a, ",".join(servers), client_extra) for a, servers in entries]


def parse_client_config(spec: str) -> dict[str, str]:
    """Parse ``"security.protocol=SASL_SSL;sasl.mechanism=PLAIN"`` (``;``-separated)."""
    conf: dict[str, str] = {}
    for item in spec.split(";"):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise TestClusterError(f"bad MIRRORLIB_TEST_CLIENT_CONFIG entry {item!r}")
        conf[key.strip()] = value.strip()
    return conf


def external_clusters_from_env() -> list[ExternalCluster] | None:
    """The clusters named by ``MIRRORLIB_TEST_CLUSTERS`` or ``None`` if it is unset/empty.

    ``MIRRORLIB_TEST_CLIENT_CONFIG`` adds client settings (``;``-separated ``key=value``) to
    every one of them.
    """
    spec = os.environ.get("MIRRORLIB_TEST_CLUSTERS", "").strip()
    if not spec:
        return None
    extra = parse_client_config(os.environ.get("MIRRORLIB_TEST_CLIENT_CONFIG", ""))
    return parse_external_clusters(spec, extra)
