"""The Prometheus exposition of a flow's metrics, without a broker."""

from __future__ import annotations

from typing import Any

import pytest

from mirrorlib.core.status import Family, FlowState, FlowStatus, StatsRegistry
from mirrorlib.runtime.prometheus import ReplicatorCollector

prometheus_client = pytest.importorskip("prometheus_client")


class Flows:
    """Stands in for a Replicator: only ``flow_metrics`` is read at scrape time."""

    def __init__(self, *registries: StatsRegistry) -> None:
        self.registries = registries

    def flow_metrics(self) -> list[tuple[FlowStatus, list[Family]]]:
        out = []
        for stats in self.registries:
            status = stats.snapshot()
            out.append((status, list(stats.families(status))))
        return out


def scrape(*registries: StatsRegistry) -> str:
    registry = prometheus_client.CollectorRegistry()
    flows: Any = Flows(*registries)
    registry.register(ReplicatorCollector(flows))
    return str(prometheus_client.generate_latest(registry).decode())


def flow(source: str, target: str) -> StatsRegistry:
    stats = StatsRegistry(source, target)
    stats.state = FlowState.RUNNING
    p = stats.partition("orders", 0, f"{source}.orders")
    p.position, p.end_offset, p.record_count, p.byte_count = 10, 12, 10, 100
    p.latency.record(40.0)
    return stats


def test_exposition_types_units_and_help() -> None:
    text = scrape(flow("A", "B"), flow("B", "A"))
    assert "# TYPE mirrorlib_records_total counter" in text
    assert (
        'mirrorlib_records_total{partition="0",source="A",target="B",topic="A.orders"} 10.0' in text
    )
    assert (
        'mirrorlib_records_total{partition="0",source="B",target="A",topic="B.orders"} 10.0' in text
    )
    assert "# TYPE mirrorlib_replication_latency_seconds histogram" in text
    assert (
        'mirrorlib_replication_latency_seconds_bucket{le="0.05",source="A",target="B",'
        'topic="A.orders"} 1.0'
    ) in text
    assert 'le="+Inf"' in text and "mirrorlib_replication_latency_seconds_count" in text
    assert (
        'mirrorlib_replication_lag_records{partition="0",source="A",target="B",topic="A.orders"} 2.0'
        in text
    )
    assert 'mirrorlib_flow_up{source="A",target="B"} 1.0' in text
    assert 'mirrorlib_flow_stalled{source="A",target="B"} 0.0' in text
    assert "# HELP mirrorlib_records_total Records replicated to the target" in text
    assert "MM2: record-count." in text
    # no gauge named like a count, no milliseconds, no lifetime min/max/avg gauges
    assert "_ms" not in text and "_min" not in text and "_avg" not in text
    for line in text.splitlines():
        if line.startswith("# TYPE") and line.endswith(" gauge"):
            assert not line.split()[2].endswith(("_count", "_total")), line
        if line.startswith("# HELP"):
            assert not line.split(" ", 3)[3].startswith("MM2 metric"), line
