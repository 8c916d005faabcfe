"""Prometheus endpoint for a running :class:`~mirrorlib.Replicator` (extra ``[prometheus]``).

    from mirrorlib.runtime.prometheus import start_http_server
    with Replicator(config) as replicator:
        server = start_http_server(replicator, port=9464)

The metrics follow Prometheus' conventions: counts are counters named ``…_total``, durations are
in seconds, latency and record age are histograms, rates cover the last 30-60 s. Each is
described by :data:`mirrorlib.core.status.METRICS` (name, type, HELP text, labels and the MM2
metric it maps to; the table is in ``docs/replicator.md``), prefixed ``mirrorlib_``. Per flow
there are also ``mirrorlib_flow_up`` (1 while a flow is starting, running, degraded or stalled;
0 when failed or stopped) and ``mirrorlib_flow_errors``.

Scrape cost: a collector builds the metric families from the flows' counters at scrape time, in
one pass over the partitions; nothing is created per partition between scrapes, and histograms
are per remote topic, not per partition.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from mirrorlib.core.status import FlowState, HistogramValue, MetricSpec
from mirrorlib.errors import ConfigError

if TYPE_CHECKING:
    from mirrorlib.runtime.replicator import Replicator

__all__ = ["ReplicatorCollector", "start_http_server"]

_UP = (FlowState.STARTING, FlowState.RUNNING, FlowState.DEGRADED, FlowState.STALLED)


def _require() -> Any:
    try:
        import prometheus_client
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError(
            "the Prometheus endpoint needs prometheus-client: pip install 'mirrorlib[prometheus]'"
        ) from exc
    return prometheus_client


def _family(prefix: str, spec: MetricSpec) -> Any:
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
    )

    name = f"{prefix}_{spec.name}"
    help_text = spec.help + (f" MM2: {spec.mm2}." if spec.mm2 else "")
    labels = list(spec.labels)
    if spec.kind == "counter":
        return CounterMetricFamily(name.removesuffix("_total"), help_text, labels=labels)
    if spec.kind == "histogram":
        return HistogramMetricFamily(name, help_text, labels=labels)
    return GaugeMetricFamily(name, help_text, labels=labels)


class ReplicatorCollector:
    """A prometheus-client collector reading a replicator's counters at scrape time."""

    def __init__(self, replicator: Replicator, prefix: str = "mirrorlib") -> None:
        self.replicator = replicator
        self.prefix = prefix

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        families: dict[str, Any] = {}
        up = GaugeMetricFamily(
            f"{self.prefix}_flow_up",
            "1 while the flow is starting, running, degraded or stalled; 0 when it failed or "
            "was stopped.",
            labels=["source", "target"],
        )
        errors = GaugeMetricFamily(
            f"{self.prefix}_flow_errors",
            "Errors the flow reports now (components, clusters, partitions); see the status.",
            labels=["source", "target"],
        )
        for status, flow_families in self.replicator.flow_metrics():
            for fam in flow_families:
                out = families.get(fam.spec.name)
                if out is None:
                    out = families[fam.spec.name] = _family(self.prefix, fam.spec)
                for labels, value in fam.samples:
                    if isinstance(value, HistogramValue):
                        buckets = [
                            ("+Inf" if le == float("inf") else repr(le), n)
                            for le, n in value.buckets
                        ]
                        out.add_metric(list(labels), buckets, value.sum)
                    else:
                        out.add_metric(list(labels), value)
            flow = [status.source, status.target]
            up.add_metric(flow, 1.0 if status.state in _UP else 0.0)
            errors.add_metric(flow, float(len(status.errors)))
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
