"""The Prometheus endpoint exposes a running replicator's metrics."""

from __future__ import annotations

import socket
import urllib.request

import pytest

from mirrorlib import Replicator
from mirrorlib.prometheus import start_http_server
from mirrorlib.testing import ClusterSet
from tests.runtime.conftest import config, wait_for
from tests.runtime.test_replicator import produce, replicated

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_metrics_endpoint(two_clusters: ClusterSet) -> None:
    a, _b = two_clusters
    a.create_topic("prom.t", 1)
    produce(a, "prom.t", [{"value": b"x"} for _ in range(10)])
    with Replicator(config(two_clusters, ["A->B"], **{"A->B.topics": "prom\\..*"})) as r:
        wait_for("replicated", lambda: replicated(r, "prom") >= 10)
        port = free_port()
        server = start_http_server(r, port)
        try:

            def scrape() -> str | None:
                text = (
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)
                    .read()
                    .decode()
                )
                return text if "mirrorlib_replication_lag_records" in text else None

            text = wait_for("lag metric", scrape)
        finally:
            server.shutdown()
    assert (
        'mirrorlib_record_count{partition="0",source="A",target="B",topic="A.prom.t"} 10.0' in text
    )
    assert 'mirrorlib_flow_up{source="A",target="B"} 1.0' in text
    assert "mirrorlib_replication_latency_ms_max" in text
