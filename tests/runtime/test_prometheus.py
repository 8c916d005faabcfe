"""The Prometheus endpoint exposes a running replicator's metrics."""

from __future__ import annotations

import socket
import urllib.request

import pytest

from mirrorlib import Replicator
from mirrorlib.runtime.prometheus import start_http_server
from mirrorlib.testing import ClusterSet
from tests.runtime.conftest import config, produce, wait_for
from tests.runtime.test_replicator import replicated

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
        'mirrorlib_records_total{partition="0",source="A",target="B",topic="A.prom.t"} 10.0' in text
    )
    assert "# TYPE mirrorlib_records_total counter" in text
    assert "# HELP mirrorlib_records_total Records replicated" in text
    assert 'mirrorlib_flow_up{source="A",target="B"} 1.0' in text
    assert "# TYPE mirrorlib_replication_latency_seconds histogram" in text
    assert (
        'mirrorlib_replication_latency_seconds_bucket{le="+Inf",source="A",target="B",'
        'topic="A.prom.t"}'
    ) in text
    assert "# TYPE mirrorlib_checkpoint_latency_seconds histogram" in text
    assert "# TYPE mirrorlib_record_rate gauge" in text
    assert "_ms" not in text and "mirrorlib_record_count" not in text


def test_run_command_serves_metrics(two_clusters: ClusterSet, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.runtime.conftest import ReplicatorProcess, mm2_properties

    a, _b = two_clusters
    a.create_topic("promcli.t", 1)
    produce(a, "promcli.t", [{"value": b"x"} for _ in range(3)])
    port = free_port()
    proc = ReplicatorProcess(
        mm2_properties(two_clusters, ["A->B"], **{"A->B.topics": "promcli\\..*"}), tmp_path
    )
    import subprocess
    import sys

    with open(proc.log, "a", encoding="utf-8") as out:
        proc.proc = subprocess.Popen(
            [sys.executable, "-m", "mirrorlib", "run", str(proc.path), "--metrics-port", str(port)],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:

        def scrape() -> str | None:
            try:
                text = (
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)
                    .read()
                    .decode()
                )
            except OSError:
                return None
            return (
                text
                if 'mirrorlib_records_total{partition="0",source="A",target="B",topic="A.promcli.t"} 3.0'
                in text
                else None
            )

        wait_for("metrics of the run command", scrape, timeout=90)
    finally:
        assert proc.stop() == 0, proc.log_tail()
