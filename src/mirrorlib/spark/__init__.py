"""Run a :class:`~mirrorlib.MirrorConfig`'s flows on Apache Spark (extra ``mirrorlib[spark]``).

The records of every enabled flow A->B are copied by a Structured Streaming query: the driver
plans each micro-batch's offset ranges (kept in Spark's checkpoint location), and executor
tasks copy those ranges themselves with confluent-kafka, from the source straight to
the target (no record becomes a Spark row; :mod:`mirrorlib.spark.plane`). The metadata work
runs on the driver, with the embedded
engine's own :class:`~mirrorlib.runtime.flow.FlowRunner` (the query is its data plane): topic
creation, config and ACL sync
(:class:`~mirrorlib.runtime.metadata.MetadataTask`), checkpoints and group offset sync
(:class:`~mirrorlib.runtime.checkpoints.CheckpointTask`) and heartbeats. Offset syncs are written
by the executors exactly as the embedded copier writes them. See ``docs/spark.md``.

.. code-block:: python

    from mirrorlib import MirrorConfig
    from mirrorlib.spark import SparkReplicator

    job = SparkReplicator(MirrorConfig.from_file("mm2.properties"),
                          checkpoint_location="/data/mirrorlib-chk").start()
    job.await_termination()

Delivery is **at-least-once**: a batch that did not commit (driver or executor killed, task
failed) is replayed by Spark with the same source offsets, so its records may be written twice;
no record is skipped.

pyspark is imported only inside this package, when a replicator starts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any, Literal

from mirrorlib.core import batches
from mirrorlib.core.config import MirrorConfig
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.status import FlowStatus
from mirrorlib.errors import ConfigError
from mirrorlib.runtime.flow import FlowRunner, stop_flows
from mirrorlib.runtime.signals import stop_on_signals
from mirrorlib.spark.plane import StreamingQuery, flow_directory, start_workers

__all__ = [
    "DEFAULT_MAX_RECORDS_PER_BATCH",
    "SparkReplication",
    "SparkReplicator",
    "flow_directory",
]

log = logging.getLogger(__name__)

Mode = Literal["continuous", "backfill"]

#: Default cap on the records one micro-batch copies (shared max-min fairly by partitions).
DEFAULT_MAX_RECORDS_PER_BATCH = 500_000


def _require_pyspark() -> Any:
    try:
        import pyspark
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "mirrorlib.spark needs PySpark 4 and pyarrow: pip install 'mirrorlib[spark]'"
        ) from exc
    return pyspark


class SparkReplication:
    """A running :class:`SparkReplicator`: one streaming query per enabled flow, plus the
    driver-side metadata, checkpoint and heartbeat threads."""

    def __init__(self, flows: list[FlowRunner[StreamingQuery]]) -> None:
        self._flows = flows
        self.queries: dict[str, Any] = {
            f.settings.name: f.data_plane.query for f in flows if f.data_plane.query is not None
        }
        """Flow name (``A->B``) → ``pyspark.sql.streaming.StreamingQuery``."""
        self._stopped = False
        self._lock = threading.Lock()

    @property
    def flows(self) -> tuple[str, ...]:
        return tuple(self.queries)

    @property
    def active(self) -> bool:
        """Whether any flow's query is still running."""
        return any(q.isActive for q in self.queries.values())

    def await_termination(self, timeout: float | None = None) -> bool:
        """Wait until every query ended (a backfill finished, :meth:`stop`, or a failure);
        ``False`` if ``timeout`` seconds passed first. Re-raises a query's failure. When all
        queries ended, the driver-side threads are stopped too."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for query in self.queries.values():
            if deadline is None:
                query.awaitTermination()
            else:
                left = deadline - time.monotonic()
                ended = left > 0 and query.awaitTermination(max(left, 0.001))
                if not ended and query.isActive:
                    return False
        failures = [e for e in (q.exception() for q in self.queries.values()) if e is not None]
        if not failures:
            self._final_checkpoints()
        self._stop_flows(30.0)
        if failures:
            raise failures[0]
        return True

    def _final_checkpoints(self) -> None:
        """Every query ended by itself (a backfill finished): one last checkpoint pass per
        flow, so checkpoints and group offsets cover the last records copied (the driver threads
        stop next). Skipped once :meth:`stop` was called."""
        for flow in self._flows:
            task = flow.checkpoints
            if task is None or self._stopped:
                continue
            timeout = max(flow.settings.admin_timeout, 30.0)
            if task.final_pass(timeout):
                log.info("flow %s: final checkpoint pass done", flow.settings.name)
            else:
                log.warning(
                    "flow %s: the final checkpoint pass did not end within %.0fs",
                    flow.settings.name,
                    timeout,
                )

    def stop(self, timeout: float = 60.0) -> None:
        """Stop every query (an unfinished batch is replayed on restart) and the driver-side
        threads."""
        self._stop_flows(timeout)

    def _stop_flows(self, timeout: float) -> None:
        """Stop each flow's query (if still running), then its driver-side threads; once."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        stop_flows(self._flows, timeout)

    def status(self) -> tuple[FlowStatus, ...]:
        """The state, errors, record counts and lag (records and seconds, as of each
        partition's last copy) of every pair, as the embedded engine reports them."""
        return tuple(f.stats.snapshot() for f in self._flows)

    def progress(self) -> dict[str, Any]:
        """Flow name → the query's last progress (a dict, ``None`` before the first batch).
        Spark's progress shows the batches of the driving ``rate-micro-batch`` source; the
        offsets mirrorlib planned are in :meth:`plans`."""
        return {name: q.lastProgress for name, q in self.queries.items()}

    def plans(self) -> dict[str, list[dict[str, Any]]]:
        """Flow name → the plans of its last batches (up to 100, oldest first), each
        ``{"batchId", "startOffset", "endOffset", "latestOffset"}`` with offsets as
        ``{topic: {partition: next upstream offset}}``: ``latestOffset`` holds the source's end
        offsets seen when the batch was planned (a backfill's: pinned at its start), so
        ``latestOffset - endOffset`` is the lag in records the batch leaves."""
        out: dict[str, list[dict[str, Any]]] = {}
        for flow in self._flows:
            copy = flow.data_plane.batches
            out[flow.settings.name] = [
                {
                    "batchId": batch_id,
                    "startOffset": batches.encode_offsets(plan.start),
                    "endOffset": batches.encode_offsets(plan.end),
                    "latestOffset": batches.encode_offsets(plan.latest),
                }
                for batch_id, plan in (copy.plans if copy is not None else ())
            ]
        return out

    def records_copied(self) -> int:
        """Records the copy tasks of every flow wrote since the start (acknowledged by the
        target)."""
        return sum(f.data_plane.batches.records for f in self._flows if f.data_plane.batches)

    def __enter__(self) -> SparkReplication:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class SparkReplicator:
    """Replicates the flows of ``config`` with Spark Structured Streaming.

    * ``spark``: the session to use; by default one is created (``master`` if given, else what
      ``spark-submit`` or ``spark.master`` says, else ``local[*]``), with ``PYSPARK_PYTHON``
      defaulting to the running interpreter and, when it launches the JVM, the settings of
      :func:`mirrorlib.spark.session.session_defaults`.
    * ``checkpoint_location``: Spark's checkpoint root (any Hadoop file system URI); each flow
      uses ``<checkpoint_location>/<A>-to-<B>``. Restarting with the same location resumes
      every flow where its last committed batch ended.
    * ``mode``: ``"continuous"`` runs micro-batches every ``trigger_interval`` until stopped;
      ``"backfill"`` copies everything up to the end offsets seen when the query starts, then
      stops (``Trigger.AvailableNow``).
    * ``clusters``: only flows whose target is listed (MM2's ``--clusters``).
    * ``max_records_per_batch``: records per micro-batch (``None``: no cap).
    * ``tasks``: write tasks per batch (default: Spark's default parallelism, i.e. the
      executors' cores); partitions are packed into them by pending records.
    """

    def __init__(
        self,
        config: MirrorConfig,
        spark: Any = None,
        *,
        checkpoint_location: str,
        mode: Mode = "continuous",
        clusters: Sequence[str] | None = None,
        trigger_interval: str = "1 second",
        max_records_per_batch: int | None = DEFAULT_MAX_RECORDS_PER_BATCH,
        tasks: int | None = None,
        master: str | None = None,
    ) -> None:
        if mode not in ("continuous", "backfill"):
            raise ConfigError(f"mode must be 'continuous' or 'backfill', got {mode!r}", value=mode)
        if not checkpoint_location:
            raise ConfigError("checkpoint_location is required")
        if isinstance(clusters, str):
            clusters = [clusters]
        pairs = config.pairs_for_targets(clusters)
        self.settings = [FlowSettings.from_config(config, f) for f in pairs]
        if not any(s.enabled for s in self.settings):
            raise ConfigError(
                "no source->target replication flows: enable one with 'A->B.enabled = true'",
                key="clusters",
            )
        running = {s.name for s in self.settings if s.enabled}
        for warning in config.warnings:
            if warning.kind == "downgraded" and warning.alias in running:
                log.warning("%s", warning)  # e.g. read_uncommitted: aborted records copied
        for s in self.settings:
            if s.enabled and s.exactly_once_enabled:
                log.warning(
                    "flow %s: exactly.once.source.support is ignored on Spark: delivery is "
                    "at-least-once (Spark replays unfinished batches)",
                    s.name,
                )
        self.config = config
        self.spark = spark
        self.checkpoint_location = checkpoint_location
        self.mode: Mode = mode
        self.trigger_interval = trigger_interval
        self.max_records_per_batch = max_records_per_batch
        self.tasks = tasks
        self.master = master
        self._handle: SparkReplication | None = None
        self._stop = threading.Event()
        self._launched = False  # whether this replicator launched the session (and its JVM)

    @property
    def flows(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.settings if s.enabled)

    def _session(self) -> Any:
        if self.spark is not None:
            return self.spark
        _require_pyspark()
        from mirrorlib.spark.session import launch_session

        self.spark = launch_session(self.master)
        self._launched = True
        return self.spark

    def start(self) -> SparkReplication:
        """Prepare every flow on the driver and start its streaming query; returns at once."""
        if self._handle is not None:
            return self._handle
        spark = self._session()
        log.info("start-up: Spark session ready")
        tasks = self.tasks or max(int(spark.sparkContext.defaultParallelism), 1)
        # while the driver prepares the flows and plans their first batches, the executors
        # start the Python workers of the first copy tasks
        start_workers(spark, tasks)
        flows = [
            FlowRunner(
                s,
                StreamingQuery(
                    spark,
                    checkpoint_location=self.checkpoint_location,
                    mode=self.mode,
                    trigger_interval=self.trigger_interval,
                    max_records_per_batch=self.max_records_per_batch,
                    tasks=tasks,
                ),
                thread_prefix="mirrorlib-spark",
            )
            for s in self.settings
        ]
        try:
            for flow in flows:
                flow.start_blocking()
        except BaseException:
            stop_flows(flows, 10.0)
            raise
        self._handle = SparkReplication(flows)
        return self._handle

    def run(self) -> None:
        """Start and block until the queries end (backfill done), :meth:`stop` or
        SIGINT/SIGTERM. Re-raises a query's failure."""
        with stop_on_signals(self._stop) as signals:
            handle = self.start()
            try:
                while not self._stop.is_set():
                    if handle.await_termination(0.5):
                        return
            except Exception as exc:
                if not self._stop.is_set():
                    raise
                # e.g. the JVM got the same signal and shut Spark down under the query: the
                # unfinished batch is replayed on the next start, as after any stop
                log.warning("a query ended with an error while stopping: %s", exc)
            finally:
                signals.log(log)
                handle.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._handle is not None:
            self._handle.stop()

    def close(self, timeout: float = 60.0) -> None:
        """Stop the flows and, if this replicator launched the Spark session, the session too,
        waiting up to ``timeout`` seconds for its JVM to exit (the first session writes the
        driver's class-data-sharing archive as its JVM exits: see
        :mod:`mirrorlib.spark.session`). A session passed in is left running."""
        self.stop()
        if self._launched and self.spark is not None:
            from mirrorlib.spark.session import stop_session

            self._launched = False
            stop_session(self.spark, timeout)
            self.spark = None
