"""The embedded replicator: every enabled flow of a :class:`~mirrorlib.MirrorConfig`, in-process.

A :class:`Replicator` drives the flows whose *target* is in ``clusters`` (all by default, like
MM2's ``--clusters``). Each flow A->B runs in background threads:

* metadata: discovers source topics, creates remote topics and partitions, syncs topic configs
  and ACLs (and creates MM2's internal topics);
* copier: copies records with their key, value, headers, timestamp and partition, stores source
  positions and emits offset syncs (with ``tasks.max`` > 1: a supervisor and its copier worker
  processes, :mod:`mirrorlib.runtime.workers.supervisor`);
* checkpoints: translates consumer-group offsets into checkpoints (and syncs group offsets);
* heartbeats: emits heartbeats (also for pairs that only emit heartbeats, as MM2 does).

One broken flow never stops the others: each component retries with back-off and reports its
errors in :meth:`Replicator.status`. A flow that stops on an error retrying cannot fix (data loss
with ``data.loss.action=fail``) is ``FAILED``: :meth:`Replicator.run` then stops every flow and
raises :class:`~mirrorlib.errors.FlowFailedError`, so a supervisor notices.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from mirrorlib.core.config import MirrorConfig
from mirrorlib.core.counters import StatsRegistry
from mirrorlib.core.metrics import Family, Metric
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.status import FlowState, FlowStatus, FlowSummary
from mirrorlib.errors import ConfigError, FlowFailedError
from mirrorlib.runtime.flow import CopierPlane, FlowRunner, stop_flows
from mirrorlib.runtime.signals import stop_on_signals
from mirrorlib.runtime.workers.supervisor import WorkerPlane

__all__ = ["Replicator"]

log = logging.getLogger(__name__)


class Replicator:
    """Runs replication flows inside the calling process.

    ``clusters`` limits the flows to those whose target alias is listed (MM2's ``--clusters``).
    ``connect_timeout``: seconds a cluster has to answer before it is reported unreachable (in
    the log and :meth:`status`); the flow keeps trying. The configuration's
    :attr:`~mirrorlib.MirrorConfig.warnings` are logged as warnings (those about a flow's
    delivery guarantee when it starts).
    """

    def __init__(
        self,
        config: MirrorConfig,
        clusters: Sequence[str] | None = None,
        *,
        connect_timeout: float = 10.0,
    ) -> None:
        if not isinstance(config, MirrorConfig):
            raise TypeError(
                f"Replicator takes a MirrorConfig, not {type(config).__name__}: "
                "Replicator(MirrorConfig.from_file(path)) for an mm2.properties file"
            )
        if isinstance(clusters, str):
            clusters = [clusters]
        known = set(config.clusters)
        if clusters is not None:
            unknown = sorted(set(clusters) - known)
            if unknown:
                raise ConfigError(
                    f"--clusters names unknown cluster alias(es) {', '.join(unknown)}; "
                    f"the config defines: {', '.join(config.clusters)}",
                    key="clusters",
                    value=",".join(unknown),
                )
        self.config = config
        targets = set(clusters) if clusters is not None else known
        self._runners: list[FlowRunner[CopierPlane | WorkerPlane]] = []
        for flow in config.pairs:
            if flow.target not in targets:
                continue
            settings = FlowSettings.from_config(config, flow)
            # tasks.max > 1: copier worker processes (mirrorlib.runtime.workers.supervisor)
            plane = CopierPlane() if settings.tasks_max <= 1 else WorkerPlane()
            runner: FlowRunner[CopierPlane | WorkerPlane] = FlowRunner(
                settings, plane, connect_timeout=connect_timeout
            )
            self._runners.append(runner)
        if not self._runners:
            raise ConfigError(
                "no source->target replication flows: enable one with 'A->B.enabled = true'"
                + (f" targeting {', '.join(sorted(targets))}" if clusters is not None else ""),
                key="clusters",
            )
        for warning in config.warnings:
            if warning.kind != "downgraded":  # those are logged by start(), for its flows
                log.warning("configuration: %s", warning)
        self._stop = threading.Event()
        self._started = False

    @property
    def flows(self) -> tuple[str, ...]:
        return tuple(r.settings.name for r in self._runners)

    @property
    def never_up(self) -> tuple[str, ...]:
        """The flows that never came up: their clusters never answered (or their client
        configuration is invalid), so their internal topics were never created."""
        return tuple(r.settings.name for r in self._runners if not r.came_up.is_set())

    def start(self) -> None:
        """Start every flow in background threads; returns immediately."""
        if self._started:
            return
        self._started = True
        self._stop.clear()
        flows = set(self.flows)
        for warning in self.config.warnings:
            if warning.kind == "downgraded" and warning.alias in flows:
                log.warning("%s", warning)  # e.g. at-least-once although exactly-once was asked
        for runner in self._runners:
            runner.start()
        log.info("mirrorlib replicator started: %s", ", ".join(self.flows))

    def stop(self, timeout: float = 45.0) -> None:
        """Stop every flow, storing positions first; waits up to ``timeout`` seconds (with
        ``tasks.max`` > 1 the workers get 20 s to commit, and the ids of those that did not end
        cleanly are fenced, up to 10 s more, before the last worker reports are written)."""
        if not self._started:
            return
        self._stop.set()
        stop_flows(self._runners, timeout)
        self._started = False
        log.info("mirrorlib replicator stopped")

    def run(self) -> None:
        """Start and block until :meth:`stop` is called, SIGINT/SIGTERM arrives or a flow fails.

        Every flow is then stopped; if one failed, :class:`~mirrorlib.errors.FlowFailedError`
        is raised (see :meth:`raise_for_failure`).
        """
        with stop_on_signals(self._stop) as signals:
            try:
                self.start()
                while not self._stop.wait(0.5):
                    failed = [r for r in self._runners if r.stats.state is FlowState.FAILED]
                    if failed:
                        names = ", ".join(r.settings.name for r in failed)
                        log.error("flow %s failed: stopping every flow", names)
                        break
            finally:
                signals.log(log)
                self.stop()
        self.raise_for_failure()

    def raise_for_failure(self) -> None:
        """Raise :class:`~mirrorlib.errors.FlowFailedError` if a flow failed: it stopped on an
        error that retrying cannot fix (state ``FAILED``, e.g. data loss with
        ``data.loss.action=fail``) and needs an operator. Returns otherwise."""
        failed = tuple(s for s in self.status() if s.state is FlowState.FAILED)
        if failed:
            raise FlowFailedError(
                "; ".join(f"flow {s.name} failed: {'; '.join(s.errors)}" for s in failed), failed
            )

    def status(self) -> tuple[FlowStatus, ...]:
        """The state, errors, lag and counters of every flow run by this process."""
        return tuple(r.stats.snapshot() for r in self._runners)

    def metrics(self) -> list[Metric]:
        """Every metric of every flow, with MM2's names and tags plus replication lag."""
        return [m for r in self._runners for m in r.stats.metrics()]

    def flow_metrics(self) -> list[tuple[FlowSummary, list[Family]]]:
        """Per flow: its state and its metrics following Prometheus' conventions (see
        :data:`mirrorlib.core.metrics.METRICS`), both from one pass over its partitions."""
        return [runner.stats.scrape() for runner in self._runners]

    def flow_stats(self) -> list[StatsRegistry]:
        """The counters of every flow (what :class:`~mirrorlib.runtime.prometheus.Exposition`
        reads incrementally)."""
        return [runner.stats for runner in self._runners]

    def __enter__(self) -> Replicator:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
