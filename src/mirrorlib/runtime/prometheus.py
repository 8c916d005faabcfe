"""Prometheus endpoint for a running :class:`~mirrorlib.Replicator` (extra ``[prometheus]``).

    from mirrorlib.runtime.prometheus import start_http_server
    with Replicator(config) as replicator:
        server = start_http_server(replicator, port=9464)

Every metric of :meth:`Replicator.metrics` is exposed as a gauge named
``mirrorlib_<name>`` (dashes become underscores: ``mirrorlib_record_count``,
``mirrorlib_replication_lag_records`` …) with the metric's tags as labels (``source``,
``target``, ``topic``, ``partition``), plus ``mirrorlib_flow_up`` (1 while a flow is running or
degraded, 0 when failed or stopped) and ``mirrorlib_flow_errors`` per flow.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from mirrorlib.errors import ConfigError

if TYPE_CHECKING:
    from mirrorlib.runtime.replicator import Replicator

__all__ = ["ReplicatorCollector", "start_http_server"]


def _require() -> Any:
    try:
        import prometheus_client
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError(
            "the Prometheus endpoint needs prometheus-client: pip install 'mirrorlib[prometheus]'"
        ) from exc
    return prometheus_client


class ReplicatorCollector:
    """A prometheus-client collector reading a replicator's metrics at scrape time."""

    def __init__(self, replicator: Replicator, prefix: str = "mirrorlib") -> None:
        self.replicator = replicator
        self.prefix = prefix

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        families: dict[str, Any] = {}
        for metric in self.replicator.metrics():
            name = f"{self.prefix}_{metric.name.replace('-', '_')}"
            labels = [k for k, _ in metric.tags]
            family = families.get(name)
            if family is None:
                family = families[name] = GaugeMetricFamily(
                    name, f"MM2 metric {metric.name}", labels=labels
                )
            family.add_metric([v for _, v in metric.tags], float(metric.value))
        up = GaugeMetricFamily(
            f"{self.prefix}_flow_up", "1 while the flow runs", labels=["source", "target"]
        )
        errors = GaugeMetricFamily(
            f"{self.prefix}_flow_errors", "errors the flow reports now", labels=["source", "target"]
        )
        for status in self.replicator.status():
            running = status.state.value in ("running", "degraded", "starting")
            up.add_metric([status.source, status.target], 1.0 if running else 0.0)
            errors.add_metric([status.source, status.target], float(len(status.errors)))
        yield from families.values()
        yield up
        yield errors


def start_http_server(
    replicator: Replicator, port: int = 9464, addr: str = "127.0.0.1", *, registry: Any = None
) -> Any:
    """Serve ``/metrics`` for ``replicator`` on ``addr:port`` in a background thread.

    Returns the server (call ``.shutdown()`` to stop it). A fresh registry is used unless one
    is given, so the process's default metrics are not mixed in.
    """
    prometheus_client = _require()
    if registry is None:
        registry = prometheus_client.CollectorRegistry()
    registry.register(ReplicatorCollector(replicator))
    server, _thread = prometheus_client.start_http_server(port, addr=addr, registry=registry)
    return server
