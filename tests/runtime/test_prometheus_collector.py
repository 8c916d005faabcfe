"""The Prometheus exposition of a flow's metrics, without a broker."""

from __future__ import annotations

from typing import Any

import pytest

from mirrorlib.core.counters import StatsRegistry
from mirrorlib.core.metrics import Family
from mirrorlib.core.status import FlowState, FlowStatus, WorkerStatus
from mirrorlib.runtime.prometheus import (
    Exposition,
    ReplicatorCollector,
    go_float,
    go_floats,
    start_http_server,
)

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


class ScrapedFlows:
    """Stands in for a Replicator the way it answers a scrape (``StatsRegistry.scrape``); the
    answer is taken by :meth:`take`, so two scrapers see the same one (rates change with time)."""

    def __init__(self, *registries: StatsRegistry) -> None:
        self.registries = registries
        self.take()

    def take(self) -> None:
        self.answer = [stats.scrape() for stats in self.registries]

    def flow_metrics(self) -> list[tuple[Any, list[Family]]]:
        return self.answer


def busy_flow() -> StatsRegistry:
    stats = StatsRegistry("A", 'B"x', stall_after=0.0)  # an alias needing escapes
    stats.state = FlowState.RUNNING
    for i in range(3):
        p = stats.partition(f"t{i}", i, f"A.t{i}")
        p.position, p.end_offset = 5 * i, 10
        p.record_count, p.byte_count, p.lost_records = 123456789 * i, 10**12, i
        p.tail_timestamp_ms = None  # (lag in seconds would change between two scrapes)
        p.latency.record(40.0 * i)
        p.age.record(7.5)
        p.worker = i % 2 if i else None  # tasks.max > 1: t1 and t2 copied by workers 1 and 0
    stats.partition("t9", 0, "A.t9")  # nothing known yet
    stats.workers = (
        WorkerStatus(slot=0, pid=101, partitions=1, records_per_second=12.5, restarts=0),
        WorkerStatus(slot=1, pid=102, partitions=1, records_per_second=0.0, restarts=2),
    )
    stats.checkpoint_latency.record(250.0)
    stats.checkpoints_emitted = 7
    stats.set_error("metadata", "boom")
    return stats


def test_the_direct_exposition_writes_what_prometheus_client_writes() -> None:
    flows: Any = ScrapedFlows(busy_flow(), flow("B", "A"))
    registry = prometheus_client.CollectorRegistry()
    registry.register(ReplicatorCollector(flows))
    exposition = Exposition(flows)
    for _ in range(2):  # the second one from remembered lines
        flows.take()
        expected = prometheus_client.generate_latest(registry).decode()
        assert exposition.render().decode() == expected
    flows.registries[1].partition("orders", 0, "B.orders").record_count += 5
    flows.take()
    assert exposition.render().decode() == prometheus_client.generate_latest(registry).decode()


def test_the_metrics_endpoint_serves_the_exposition() -> None:
    import urllib.request

    flows: Any = ScrapedFlows(flow("A", "B"))
    server = start_http_server(flows, port=0)
    try:
        port = server.server_address[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            assert answer.headers["Content-Type"].startswith("text/plain")
            text = answer.read().decode()
    finally:
        server.shutdown()
        server.server_close()
    assert 'mirrorlib_flow_up{source="A",target="B"} 1.0' in text


class CountedFlows:
    """Stands in for a Replicator read incrementally (``flow_stats``); ``flow_metrics`` answers
    for the same moment ``now`` (rates and stalls depend on it)."""

    def __init__(self, *registries: StatsRegistry) -> None:
        self.registries = list(registries)
        self.now = 0.0

    def flow_stats(self) -> list[StatsRegistry]:
        return self.registries

    def flow_metrics(self) -> list[tuple[Any, list[Family]]]:
        return [stats.scrape(self.now) for stats in self.registries]


def test_an_incremental_scrape_writes_what_prometheus_client_writes() -> None:
    import time

    flows = CountedFlows(busy_flow(), flow("B", "A"))
    registry = prometheus_client.CollectorRegistry()
    registry.register(ReplicatorCollector(flows))
    exposition = Exposition(flows)

    def same() -> None:
        flows.now = time.monotonic()
        assert exposition.render(flows.now).decode() == (
            prometheus_client.generate_latest(registry).decode()
        )

    same()
    same()  # nothing changed
    busy, other = flows.registries
    other.partition("orders", 0, "B.orders").record_count += 5
    busy.partition("t1", 1, "A.t1").position = 10  # caught up: no longer stalled
    busy.partition("t2", 2, "A.t2").latency.record(3.0)
    same()
    busy.partition("t5", 0, "A.t5").end_offset = 4  # a new partition in a new topic
    busy.drop_partition("t0", 0)
    busy.checkpoints_emitted += 1
    same()
    busy.partition("t0", 0, "A.t0").record_count = 1  # back again: written after the others
    flows.registries.append(flow("C", "A"))
    same()
    busy.partition("t1", 1, "A.t1").worker = 0  # moved between workers
    busy.partition("t2", 2, "A.t2").worker = None  # back in the process
    busy.partition("t5", 0, "A.t5").worker = 2
    busy.workers = (
        WorkerStatus(slot=0, pid=101, partitions=2, records_per_second=3.0, restarts=0),
        WorkerStatus(slot=2, pid=None, partitions=1, records_per_second=0.0, restarts=1),
    )
    same()
    busy.workers = ()
    same()
    flows.registries.pop(0)
    same()


def test_go_float_writes_what_prometheus_client_writes() -> None:
    import random

    from prometheus_client.utils import floatToGoString

    rng = random.Random(7)
    values: list[float] = [0.0, -0.0, 1.0, 999_999.0, 1e6, 1_234_567.0, 1e16, 1e22, 0.1, -5.5]
    values += [float("inf"), float("-inf"), float("nan"), -1e7, 123456.789, 5e-324]
    values += [rng.uniform(-1e9, 1e9) for _ in range(2000)]
    values += [float(rng.randrange(10**15)) for _ in range(2000)]
    values += [rng.random() for _ in range(500)]
    for value in values:
        assert go_float(value) == floatToGoString(value), value
    for count in (0, 7, 999_999, 1_000_000, 10**13):
        assert go_float(count) == floatToGoString(count)
    counts = [0, 7, 999_999, 1_000_000, 10**13]
    assert go_floats([*values, *counts]) == [floatToGoString(v) for v in [*values, *counts]]


def test_go_floats_of_a_column_below_a_million_or_of_counters_above() -> None:
    from prometheus_client.utils import floatToGoString

    small = [float(i) / 7 for i in range(-5000, 5000)]
    large = [float(10**6 + i * 7919) for i in range(5000)] + [1e15 + 0.5, 9_999_999_999_999_998.0]
    for column in (small, large, [*large, float("nan")], []):
        assert go_floats(column) == [floatToGoString(v) for v in column]


def test_a_scrape_leaves_the_garbage_collector_as_it_found_it() -> None:
    import gc

    stats = StatsRegistry("A", "B")
    stats.partition("t", 0, "A.t").record_count = 3
    exposition = Exposition(CountedFlows(stats))
    assert gc.isenabled()
    assert b"mirrorlib_records_total" in exposition.render()
    assert gc.isenabled()
    gc.disable()
    try:
        exposition.render()
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("seed", range(6))
def test_incremental_scrapes_of_random_stats_write_what_prometheus_client_writes(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    import random
    import time

    from mirrorlib.core import counters

    rng = random.Random(seed)
    wall = [1_700_000_000.0]
    monkeypatch.setattr(counters.time, "time", lambda: wall[0])  # lag in seconds: one clock
    stats = StatsRegistry("A", "B", stall_after=rng.choice([0.0, 30.0]))
    stats.state = FlowState.RUNNING
    flows = CountedFlows(stats)
    registry = prometheus_client.CollectorRegistry()
    registry.register(ReplicatorCollector(flows))
    exposition = Exposition(flows)
    keys = [(f"t{rng.randrange(6)}", rng.randrange(4)) for _ in range(40)]
    clock = time.monotonic()
    for _ in range(25):
        for topic, partition in rng.sample(keys, rng.randrange(len(keys))):
            if rng.random() < 0.05:
                stats.drop_partition(topic, partition)
                continue
            p = stats.partition(topic, partition, f"A.{topic}")
            if rng.random() < 0.6:
                p.record_count += rng.randrange(1000)
                p.byte_count += rng.randrange(10**9)
                p.position = (p.position or 0) + rng.randrange(100)
            if rng.random() < 0.5:
                p.end_offset = (p.position or 0) + rng.choice([0, 0, 3, 50])
            if rng.random() < 0.3:
                p.tail_timestamp_ms = rng.choice([None, int(wall[0] * 1000) - rng.randrange(9000)])
            if rng.random() < 0.1:
                p.lost_records += 1
            if rng.random() < 0.1:
                p.error = rng.choice([None, "fenced"])
            if rng.random() < 0.1:
                p.worker = rng.choice([None, 0, 1])
            if rng.random() < 0.3:
                p.latency.record(rng.uniform(1, 5000))
                p.age.record(rng.uniform(1, 5000))
        if rng.random() < 0.2:
            stats.checkpoints_emitted += 1
        clock += rng.choice([0.0, 0.5, 10.0, 40.0])
        wall[0] += rng.choice([0.0, 0.25, 3.0])
        flows.now = clock
        expected = prometheus_client.generate_latest(registry).decode()
        assert same_but_rates(exposition.render(clock).decode(), expected)


def same_but_rates(text: str, expected: str) -> bool:
    """The same text, except that a topic's rate (a sum of its partitions' rates) may differ in
    its last digits: the incremental read adds the partitions in another order."""
    lines, wanted = text.splitlines(), expected.splitlines()
    assert len(lines) == len(wanted)
    for line, want in zip(lines, wanted, strict=True):
        if line != want:
            name, value = line.rsplit(" ", 1)
            want_name, want_value = want.rsplit(" ", 1)
            assert name == want_name and name.split("{")[0].endswith("_rate"), (line, want)
            assert float(value) == pytest.approx(float(want_value), rel=1e-9), (line, want)
    return True
