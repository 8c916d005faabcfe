"""The reachability probe: an unreachable cluster fails within the timeout, named by its alias and
bootstrap address with the reason; an invalid client configuration is a configuration error."""

from __future__ import annotations

import socket
import time

import pytest

from mirrorlib.errors import ClusterTimeoutError, ConfigError
from mirrorlib.kafka.probe import check_reachable, check_reachable_all, unreachable


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_an_unreachable_cluster_is_named_with_its_address_and_reason() -> None:
    port = _closed_port()
    started = time.monotonic()
    with pytest.raises(ClusterTimeoutError) as exc:
        check_reachable({"bootstrap.servers": f"127.0.0.1:{port}"}, "A", 1.0)
    assert time.monotonic() - started < 4.0
    assert str(exc.value).startswith(f"cluster A (127.0.0.1:{port}) is unreachable: no answer")
    assert "Connection refused" in str(exc.value)
    assert exc.value.cluster == "A" and exc.value.retriable


def test_clusters_are_probed_in_parallel_and_every_failure_is_named() -> None:
    a, b = _closed_port(), _closed_port()
    configs = {"A": {"bootstrap.servers": f"127.0.0.1:{a}"},
               "B": {"bootstrap.servers": f"127.0.0.1:{b}"}}  # fmt: skip
    started = time.monotonic()
    assert sorted(unreachable(configs, 1.0)) == ["A", "B"]
    assert time.monotonic() - started < 4.0
    with pytest.raises(ClusterTimeoutError, match=rf"cluster A .*127.0.0.1:{a}.*; cluster B"):
        check_reachable_all(configs, 1.0)
    assert unreachable({}, 1.0) == {}


def test_a_missing_tls_file_is_a_config_error() -> None:
    conf = {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SSL",
            "ssl.ca.location": "/nonexistent/ca.pem"}  # fmt: skip
    with pytest.raises(ConfigError, match="/nonexistent/ca.pem"):
        check_reachable(conf, "A", 1.0)
    with pytest.raises(ConfigError, match="/nonexistent/ca.pem"):
        check_reachable_all({"A": conf, "B": {"bootstrap.servers": "127.0.0.1:1"}}, 1.0)
