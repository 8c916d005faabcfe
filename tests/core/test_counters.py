"""A flow's live counters and what is read from them (mirrorlib.core.counters): its status,
stalls, rates, histograms, metric families and incremental reads; without a broker."""

from __future__ import annotations

import time

from mirrorlib.core.counters import RATE_WINDOW_S, Histogram, StatsRegistry
from mirrorlib.core.metrics import LATENCY_BUCKETS_S, METRICS, HistogramValue
from mirrorlib.core.status import FlowState
from tests.core.test_stalls import PID_LINE


def running(stall_after: float = 30.0) -> StatsRegistry:
    stats = StatsRegistry("A", "B", internal=lambda t: t == "heartbeats", stall_after=stall_after)
    stats.state = FlowState.RUNNING
    return stats


def test_backlog_without_progress_is_a_stall_until_progress() -> None:
    stats = running(stall_after=0.05)
    p = stats.partition("t", 0, "A.t")
    p.end_offset = 100  # records wait, nothing was replicated
    assert stats.snapshot().stalled is None
    time.sleep(0.1)
    status = stats.snapshot()
    assert status.state is FlowState.STALLED
    assert status.partitions[0].stalled is not None
    assert status.stalled is not None and "t-0: no progress for" in status.stalled
    assert "unknown number of record(s) waiting" in status.stalled
    p.position = 40
    status = stats.snapshot()
    assert status.state is FlowState.RUNNING and status.stalled is None


def test_a_caught_up_partition_that_gets_records_is_not_stalled_at_once() -> None:
    stats = running(stall_after=0.05)
    p = stats.partition("t", 0, "A.t")
    p.position, p.end_offset = 5, 5
    time.sleep(0.1)
    p.end_offset = 5  # seen caught up by the periodic end-offset refresh
    p.end_offset = 9  # then records arrive
    assert stats.snapshot().stalled is None
    time.sleep(0.1)
    assert "with 4 record(s) waiting" in (stats.snapshot().partitions[0].stalled or "")


def test_a_copier_loop_blocked_past_the_stall_timeout_stalls_a_caught_up_flow() -> None:
    # a transaction commit waiting for an unreachable target: the partitions' end offsets are
    # not refreshed, so they look caught up (lag 0) however many records reach the source
    stats = running(stall_after=30.0)
    p = stats.partition("t", 0, "A.t")
    p.position, p.end_offset = 5, 5
    now = time.monotonic()
    stats.loop_at = now - 10
    assert stats.loop_stall(now) is None and stats.snapshot().state is FlowState.RUNNING
    stats.loop_at = now - 31
    assert "copier: blocked for 31s" in (stats.loop_stall(now) or "")
    status = stats.snapshot()
    assert status.state is FlowState.STALLED and "copier: blocked for" in (status.stalled or "")
    stats.loop_at = time.monotonic()  # it came round
    assert stats.snapshot().state is FlowState.RUNNING
    stats.loop_at = None  # no copier loops here (stopped, or waiting to retry)
    assert stats.loop_stall() is None


def test_idempotence_errors_stall_the_flow_until_progress() -> None:
    stats = running()
    p = stats.partition("t", 0, "A.t")
    assert stats.client_problem("target", "cluster B: Broker transport failure") is None
    assert stats.snapshot().stalled is None
    assert stats.client_problem("target", PID_LINE) == PID_LINE
    status = stats.snapshot()
    assert status.state is FlowState.STALLED
    assert status.stalled == f"target: {PID_LINE}"
    time.sleep(0.001)
    p.position = 1
    assert stats.snapshot().stalled is None and stats.snapshot().state is FlowState.RUNNING


def test_failed_flow_stays_failed() -> None:
    stats = running(stall_after=0.0)
    stats.partition("t", 0, "A.t").end_offset = 3
    stats.state = FlowState.FAILED
    time.sleep(0.01)
    assert stats.snapshot().state is FlowState.FAILED


def test_histogram_buckets_are_cumulative_with_le_semantics() -> None:
    h = Histogram()
    for v in (0.005, 0.006, 2.0, 10_000.0):
        h.observe(v)
    value = h.value()
    buckets = dict(value.buckets)
    assert buckets[0.005] == 1  # a value equal to a bound counts in that bucket
    assert buckets[0.01] == 2 and buckets[2.5] == 3 and buckets[3600.0] == 3
    assert value.buckets[-1] == (float("inf"), 4) and value.count == 4
    assert abs(value.sum - 10_002.011) < 1e-9
    assert len(value.buckets) == len(LATENCY_BUCKETS_S) + 1


def test_rates_cover_the_last_window_not_the_lifetime() -> None:
    stats = running()
    p = stats.partition("t", 0, "A.t")
    t0 = p.started
    p.record_count, p.byte_count = 100, 1000
    assert p.rates(t0 + 10) == (10.0, 100.0)
    assert p.rates(t0 + RATE_WINDOW_S + 1) == (100 / 31, 1000 / 31)  # marks this moment
    p.record_count += 30
    record_rate, _ = p.rates(t0 + 2 * RATE_WINDOW_S + 2)  # the window starts at the mark
    assert record_rate == 30 / (RATE_WINDOW_S + 1)


def test_families_follow_prometheus_conventions() -> None:
    stats = running()
    p = stats.partition("t", 0, "A.t")
    p.position, p.end_offset, p.record_count, p.byte_count = 3, 3, 3, 30
    p.latency.record(20.0)  # ms, as the copier records it
    p.age.record(1500.0)
    stats.checkpoint_latency.record(250.0)
    families = {f.spec.name: f for f in stats.families()}
    assert list(families) == [s.name for s in METRICS]
    for spec in METRICS:
        assert spec.name.endswith("_total") == (spec.kind == "counter"), spec.name
        assert "_ms" not in spec.name and spec.help and spec.labels[:2] == ("source", "target")
    assert families["records_total"].samples == ((("A", "B", "A.t", "0"), 3.0),)
    assert families["replication_lag_records"].samples == ((("A", "B", "A.t", "0"), 0.0),)
    ((labels, latency),) = families["replication_latency_seconds"].samples
    assert labels == ("A", "B", "A.t")  # per topic, not per partition
    assert isinstance(latency, HistogramValue) and latency.count == 1
    assert dict(latency.buckets)[0.025] == 1 and dict(latency.buckets)[0.01] == 0
    ((_, age),) = families["record_age_seconds"].samples
    assert isinstance(age, HistogramValue) and dict(age.buckets)[2.5] == 1
    ((_, checkpoint),) = families["checkpoint_latency_seconds"].samples
    assert isinstance(checkpoint, HistogramValue) and checkpoint.sum == 0.25
    assert families["flow_stalled"].samples == ((("A", "B"), 0.0),)


def test_unknown_lag_is_absent_from_metrics_not_zero() -> None:
    stats = running()
    stats.partition("t", 0, "A.t")
    families = {f.spec.name: f for f in stats.families()}
    assert families["replication_lag_records"].samples == ()
    assert families["records_total"].samples == ((("A", "B", "A.t", "0"), 0.0),)
    names = {m.name for m in stats.metrics()}
    assert "record-count" in names and "replication-lag-records" not in names


def test_a_cursor_reads_only_the_partitions_that_changed() -> None:
    stats = running()
    quiet, busy = stats.partition("t", 0, "A.t"), stats.partition("t", 1, "A.t")
    for p in (quiet, busy):
        p.position, p.end_offset = 5, 5  # caught up: nothing changes with time
    cursor = stats.cursor()
    now = quiet.started + 100
    _, first = cursor.read(now)
    records = next(d for d in first if d.spec.name == "records_total")
    assert records.keys == (("t", 0), ("t", 1)) and len(records.changed) == 2
    cursor.read(now + 100)  # the rates settle at 0
    _, idle = cursor.read(now + 200)
    assert all(not d.changed for d in idle if "partition" in d.spec.labels)
    busy.record_count += 3
    _, moved = cursor.read(now + 210)
    records = next(d for d in moved if d.spec.name == "records_total")
    assert records.keys is None and records.changed == [(("t", 1), ("A", "B", "A.t", "1"), 3.0)]
    rate = next(d for d in moved if d.spec.name == "record_rate")
    # the idle partition's rate window restarts a window before the previous read
    assert rate.changed == [("A.t", ("A", "B", "A.t"), 3 / (RATE_WINDOW_S + 10))]


def test_a_cursor_gives_only_the_samples_of_waiting_partitions_that_change_with_time() -> None:
    stats = running(stall_after=30.0)
    p = stats.partition("t", 0, "A.t")
    p.position, p.end_offset, p.tail_timestamp_ms = 5, 9, int(time.time() * 1000) - 1_000
    cursor = stats.cursor()
    _, first = cursor.read(p.progress_at + 1)
    given = {d.spec.name: d.changed for d in first if d.changed}
    assert given["replication_lag_records"] == [(("t", 0), ("A", "B", "A.t", "0"), 4.0)]
    assert given["partition_stalled"] == [(("t", 0), ("A", "B", "A.t", "0"), 0.0)]
    summary, later = cursor.read(p.progress_at + 31)  # nothing written meanwhile: stalled now
    given = {d.spec.name: d.changed for d in later if d.changed and "partition" in d.spec.labels}
    assert set(given) <= {"replication_lag_seconds", "partition_stalled"}
    assert given["partition_stalled"] == [(("t", 0), ("A", "B", "A.t", "0"), 1.0)]
    assert summary.stalled_partitions == 1 and summary.state is FlowState.STALLED
    stats.drop_partition("t", 0)
    again = stats.partition("t", 0, "A.t")  # new counters at the same key: every sample anew
    again.position, again.end_offset = 9, 9
    summary, fresh = cursor.read(p.progress_at + 32)
    records = next(d for d in fresh if d.spec.name == "records_total")
    assert records.keys == (("t", 0),) and records.changed == [
        (("t", 0), ("A", "B", "A.t", "0"), 0.0)
    ]
    assert summary.stalled_partitions == 0
