"""The metrics a flow exports: their names, kinds, labels and help, and the values they carry.

Two forms of the same counters (read from :class:`~mirrorlib.core.counters.StatsRegistry`):

* :class:`Metric` — MM2's metric names and tags (``record-count``, ``record-age-ms``,
  ``replication-latency-ms``, ``byte-rate``/``byte-count``, ``checkpoint-latency-ms``; tagged by
  source, target, remote topic and partition) plus what MM2 lacks: replication lag in records
  and seconds, ``lost-records``, and how fresh checkpoints are
  (``checkpoint-commit-age-seconds``, ``checkpoint-sync-age-seconds``; defined in
  :mod:`mirrorlib.runtime.checkpoints`);
* :class:`Family` — the samples of one :class:`MetricSpec`, following Prometheus' conventions
  (counters ``_total``, seconds, histograms as :class:`HistogramValue` over
  :data:`LATENCY_BUCKETS_S`). :data:`METRICS` is the catalog: every family, in the order a flow
  yields them, with the MM2 name each one maps to.

Pure data: what is counted, and how, is :mod:`mirrorlib.core.counters`.
"""

from __future__ import annotations

from typing import Literal

import attrs

__all__ = [
    "LATENCY_BUCKETS_S",
    "METRICS",
    "Family",
    "HistogramValue",
    "Metric",
    "MetricSpec",
]

#: Upper bounds (seconds) of the buckets of the latency and record-age histograms.
LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
)  # fmt: skip


@attrs.frozen
class Metric:
    """One value with MM2's metric name and tags."""

    name: str
    tags: tuple[tuple[str, str], ...]
    value: float


# -- Prometheus-style families ----------------------------------------------------------------


@attrs.frozen
class MetricSpec:
    """A metric as exported to Prometheus (without the ``mirrorlib_`` prefix)."""

    name: str
    kind: Literal["counter", "gauge", "histogram"]
    help: str
    labels: tuple[str, ...]
    mm2: str | None = None  # MM2's metric name this one maps to (None: MM2 has no equivalent)


@attrs.frozen
class HistogramValue:
    """Cumulative bucket counts (``le`` upper bound, count) ending with ``+Inf``, and the sum."""

    buckets: tuple[tuple[float, int], ...]
    sum: float

    @property
    def count(self) -> int:
        return self.buckets[-1][1] if self.buckets else 0


@attrs.frozen
class Family:
    """The samples of one :class:`MetricSpec` now: ``(label values, value)`` pairs."""

    spec: MetricSpec
    samples: tuple[tuple[tuple[str, ...], float | HistogramValue], ...]


_FLOW = ("source", "target")
_TOPIC = (*_FLOW, "topic")
_PARTITION = (*_TOPIC, "partition")
_WORKER = (*_FLOW, "worker")

#: Every metric :meth:`~mirrorlib.core.counters.StatsRegistry.families` yields, in order.
#: Latency and record-age histograms are per remote topic, never per partition: their bucket
#: series would multiply the scrape size by ~20 at 100k partitions. Per partition there are only
#: counters and gauges.
METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("records_total", "counter", "Records replicated to the target and acknowledged "
               "by it, per source partition (topic = remote topic).", _PARTITION, "record-count"),
    MetricSpec("bytes_total", "counter", "Bytes of record values replicated and acknowledged, "
               "per source partition.", _PARTITION, "byte-count"),
    MetricSpec("lost_records_total", "counter", "Source records skipped because the source lost "
               "them before they were replicated (data.loss.action=continue).", _PARTITION,
               "lost-records"),
    MetricSpec("replication_lag_records", "gauge", "Records in the source partition not "
               "replicated yet (end offset minus position); absent while unknown.", _PARTITION),
    MetricSpec("replication_lag_seconds", "gauge", "Age of the newest replicated record while "
               "records are waiting, 0 when caught up; absent while unknown.", _PARTITION),
    MetricSpec("partition_stalled", "gauge", "1 while the partition has records waiting and its "
               "position has not moved for the stall timeout.", _PARTITION),
    MetricSpec("record_rate", "gauge", "Records replicated per second over the last 30-60 s, "
               "per remote topic (per partition: rate(mirrorlib_records_total[1m])).", _TOPIC,
               "record-rate"),
    MetricSpec("byte_rate", "gauge", "Bytes replicated per second over the last 30-60 s, per "
               "remote topic.", _TOPIC, "byte-rate"),
    MetricSpec("replication_latency_seconds", "histogram", "Time from a record's source "
               "timestamp to its acknowledgement by the target, sampled per partition at most "
               "every 100 ms.", _TOPIC, "replication-latency-ms"),
    MetricSpec("record_age_seconds", "histogram", "Age of records (now minus source timestamp) "
               "when they are sent to the target, sampled once per batch and partition.", _TOPIC,
               "record-age-ms"),
    MetricSpec("checkpoint_latency_seconds", "histogram", "Time from a consumer group's commit "
               "on the source to its checkpoint on the target.", _FLOW, "checkpoint-latency-ms"),
    MetricSpec("checkpoints_total", "counter", "Checkpoints written to the target.", _FLOW,
               "checkpoint-count"),
    MetricSpec("offset_syncs_total", "counter", "Offset syncs written.", _FLOW,
               "offset-sync-count"),
    MetricSpec("new_incarnations_total", "counter", "Source partitions copied again from their "
               "first offset because the source or the remote topic was deleted and created "
               "again (a new topic id).", _FLOW, "new-incarnation-count"),
    MetricSpec("stalled_partitions", "gauge", "Partitions of the flow that are stalled.", _FLOW),
    MetricSpec("flow_stalled", "gauge", "1 while the flow is stalled (a stalled partition, or "
               "the target producer cannot get a producer id or reach its coordinator).", _FLOW),
    MetricSpec("partition_worker", "gauge", "The copier worker slot copying the partition "
               "(tasks.max > 1 only).", _PARTITION),
    MetricSpec("worker_partitions", "gauge", "Partitions assigned to a copier worker process "
               "(tasks.max > 1 only).", _WORKER),
    MetricSpec("worker_record_rate", "gauge", "Records per second a copier worker process "
               "replicates (tasks.max > 1 only).", _WORKER),
    MetricSpec("worker_restarts_total", "counter", "Restarts of a copier worker slot's process "
               "(tasks.max > 1 only).", _WORKER),
)  # fmt: skip
