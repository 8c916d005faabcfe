"""One flow A->B at run time: the control plane both engines share, around a data plane.

A :class:`FlowRunner` composes what runs in the process that drives a flow, whichever engine
copies its records: the internal topics, the metadata sync (remote topics, partitions, configs,
ACLs: :class:`~mirrorlib.runtime.metadata.MetadataTask`), checkpoints and group offset sync
(:class:`~mirrorlib.runtime.checkpoints.CheckpointTask`), heartbeats
(:class:`~mirrorlib.runtime.heartbeats.HeartbeatTask`), the flow's status
(:class:`~mirrorlib.core.counters.StatsRegistry`) and their threads.

What copies the records is the runner's :class:`DataPlane`: the embedded engine's
:class:`CopierPlane` (a :class:`~mirrorlib.kafka.copier.loop.Copier` thread) or, with
:mod:`mirrorlib.spark`, the flow's Structured Streaming query.

Start-up order: internal topics (retried until the clusters answer), the data plane's
:meth:`~DataPlane.prepare`, heartbeats, metadata, the data plane's :meth:`~DataPlane.start`,
checkpoints. A pair that only emits heartbeats (``A->B.enabled = false``) runs heartbeats only.
Stop order: the data plane's :meth:`~DataPlane.stop`, then every thread of the flow.

Start-up is stop-aware: the wait for the clusters' first answer returns as soon as the flow is
told to stop, and once it is, the start-up starts nothing more. A start-up request that is
already under way (to a cluster that accepts connections and never answers, say) is abandoned
after :data:`STARTUP_ABANDON_S` seconds: its thread ends once the request times out, without
starting anything.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Generic, Protocol, TypeVar

from mirrorlib.core.catalog import TopicCatalog
from mirrorlib.core.counters import StatsRegistry
from mirrorlib.core.retry import Backoff
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.stalls import StallWatch
from mirrorlib.core.status import FlowState
from mirrorlib.errors import ConfigError, MirrorError
from mirrorlib.kafka.copier.loop import Copier
from mirrorlib.kafka.positions import PositionStore
from mirrorlib.kafka.probe import unreachable
from mirrorlib.runtime.checkpoints import CheckpointTask
from mirrorlib.runtime.heartbeats import HeartbeatTask
from mirrorlib.runtime.metadata import MetadataTask
from mirrorlib.runtime.workers.status import WorkerReporter, copier_slot

__all__ = ["CopierPlane", "DataPlane", "FlowRunner", "stop_flows"]

log = logging.getLogger(__name__)

#: how often a flow's stall state is sampled for the log, and how often a lasting stall is
#: logged again (seconds)
STALL_CHECK_S = 5.0
STALL_REMINDER_S = 60.0
#: seconds :meth:`FlowRunner.join` waits for a flow still starting (its ``main`` thread stuck in
#: a start-up request to a cluster that does not answer) before it abandons that thread, which
#: then starts nothing
STARTUP_ABANDON_S = 2.0


class DataPlane(Protocol):
    """What copies the records of one flow, driven by its :class:`FlowRunner`.

    :meth:`prepare` and :meth:`start` are called once per start of an enabled flow only (a
    heartbeats-only pair copies nothing). A data plane reports into ``flow.stats`` and may run
    threads with :meth:`FlowRunner.spawn`; those get the flow's stop event.
    """

    def prepare(self, flow: FlowRunner[Any]) -> None:
        """Called once the internal topics exist, before any component of the flow runs (and
        so before the metadata thread touches ``flow.metadata``). An exception aborts the
        start."""

    def start(self, flow: FlowRunner[Any]) -> None:
        """Start copying; called after the metadata thread started, before the checkpoint
        thread. ``flow.metadata.offsets_topic_partitions`` is known by then. An exception
        aborts the start."""

    def stop(self) -> None:
        """Stop copying; called before the flow's threads are told to stop, possibly more than
        once and whether or not :meth:`start` was called. Must not raise."""


P = TypeVar("P", bound=DataPlane)


class CopierPlane:
    """The embedded engine's data plane: a :class:`~mirrorlib.kafka.copier.loop.Copier` thread
    (``copier``) that consumes from the source, produces to the target and stores positions
    in the flow's offsets topic, and a thread publishing it as worker slot 0 for ``mirrorlib
    status`` (:class:`~mirrorlib.runtime.workers.status.WorkerReporter`)."""

    def __init__(self) -> None:
        self.copier: Copier | None = None
        """The running copier (``None`` until the flow started)."""

    def prepare(self, flow: FlowRunner[Any]) -> None:
        """Nothing to do: the copier waits for the metadata thread's first topic refresh."""

    def start(self, flow: FlowRunner[Any]) -> None:
        s = flow.settings
        positions = PositionStore(
            s.target_consumer,
            s.offset_storage_topic,
            source_alias=s.source,
            target_alias=s.target,
            partitions=flow.metadata.offsets_topic_partitions,
            # always: worker processes (tasks.max > 1, in this or an earlier run) write positions
            # in transactions, and a position of an aborted one must never be resumed from
            read_committed=True,
        )
        self.copier = Copier(s, flow.catalog, flow.stats, positions)
        flow.spawn("copier", self.copier.run)
        reporter = WorkerReporter(s, flow.stats, lambda: copier_slot(flow.stats))
        flow.spawn("worker status", reporter.run)

    def stop(self) -> None:
        """Nothing to do: the copier watches the flow's stop event and stores its positions
        before its thread ends."""


class FlowRunner(Generic[P]):
    """Runs one flow: its control-plane components and ``data_plane``, each in its own thread.

    Threads are named ``"<thread_prefix> <A->B> <component>"``. A thread that dies of an
    exception is logged and reported in the status as ``"<component>: thread died; see the
    log"``; the flow's other threads go on. ``connect_timeout``: seconds a cluster has to answer
    before it is reported unreachable (in the log and :attr:`stats`; the flow keeps trying).
    """

    def __init__(
        self,
        settings: FlowSettings,
        data_plane: P,
        *,
        thread_prefix: str = "mirrorlib",
        connect_timeout: float = 10.0,
    ) -> None:
        self.settings = settings
        self.connect_timeout = connect_timeout
        #: set once both clusters answered and the internal topics exist
        self.came_up = threading.Event()
        self.data_plane = data_plane
        self.thread_prefix = thread_prefix
        self.stats = StatsRegistry(
            settings.source, settings.target, internal=settings.policy.is_heartbeats_topic
        )
        self.catalog = TopicCatalog()
        self.metadata = MetadataTask(settings, self.catalog, self.stats)
        self.checkpoints: CheckpointTask | None = None
        self.heartbeats = (
            HeartbeatTask(settings, self.stats) if settings.emit_heartbeats_enabled else None
        )
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._main: threading.Thread | None = None
        self._spawning = threading.Lock()

    def spawn(self, name: str, target: Callable[[threading.Event], object]) -> None:
        """Run ``target(stop_event)`` in a daemon thread of this flow, joined by :meth:`join`
        (what it returns is ignored). Once the flow is told to stop, does nothing (a start-up
        that was under way then starts no thread)."""

        with self._spawning:
            stop = self._stop
            if stop.is_set():
                log.debug("flow %s: stopping, %s thread not started", self.settings.name, name)
                return

            def body() -> None:
                try:
                    target(stop)
                except Exception:
                    log.exception("flow %s: %s thread died", self.settings.name, name)
                    self.stats.set_error(name, "thread died; see the log")

            thread = threading.Thread(
                target=body, name=f"{self.thread_prefix} {self.settings.name} {name}", daemon=True
            )
            self._threads.append(thread)
            thread.start()
        if name == "main":
            self._main = thread

    def _new_run(self) -> threading.Event:
        """A fresh stop event for a new start: a start-up abandoned by an earlier stop keeps
        its own event, set, and never runs on."""
        with self._spawning:
            self._stop = threading.Event()
            return self._stop

    def start(self) -> None:
        """Start the flow in the background and return at once: a ``main`` thread creates the
        internal topics, retrying until the clusters answer, then starts the components."""
        self._new_run()
        self.spawn("main", self._start_components)

    def start_blocking(self) -> None:
        """Start the flow in the calling thread: returns once every component runs. Blocks
        while the internal topics cannot be created; raises :class:`~mirrorlib.MirrorError` if
        :meth:`request_stop` comes first, and whatever the data plane's hooks raise."""
        if not self._start_components(self._new_run()):
            raise MirrorError(
                f"flow {self.settings.name}: stopped before the internal topics were created"
            )

    def _start_components(self, stop: threading.Event) -> bool:
        s = self.settings
        if not self._await_clusters(stop) or not self.metadata.prepare(stop):
            return False
        self.came_up.set()
        if stop.is_set():  # told to stop while the internal topics were created
            return True
        if s.enabled:
            self.data_plane.prepare(self)
        else:
            self.metadata.release()
        if stop.is_set():
            return True
        if self.heartbeats is not None:
            self.spawn("heartbeats", self.heartbeats.run)
        if s.enabled and not stop.is_set():
            self.spawn("metadata", self.metadata.run)
            self.data_plane.start(self)
            if s.emit_checkpoints_enabled and s.emit_offset_syncs_enabled:
                self.checkpoints = CheckpointTask(s, self.stats)
                self.spawn("checkpoints", self.checkpoints.run)
            self.spawn("watchdog", self._watch_stalls)
        if self.stats.state is FlowState.STARTING:
            self.stats.state = FlowState.RUNNING
        return True

    def _watch_stalls(self, stop: threading.Event) -> None:
        """Log a stall while it lasts: when it begins, every minute it goes on, and when the
        flow moves again (the status shows it too; see :mod:`mirrorlib.core.stalls`)."""
        watch = StallWatch(self.settings.name, repeat=STALL_REMINDER_S)
        while not stop.wait(STALL_CHECK_S):
            notice = watch.observe(self.stats.snapshot().stalled, time.monotonic())
            if notice is not None:
                log.log(logging.WARNING if notice.stalled else logging.INFO, "%s", notice.message)

    def _await_clusters(self, stop: threading.Event) -> bool:
        """Wait until both clusters answer, reporting each failed attempt (naming the cluster
        and its bootstrap address) in the log and the status; ``False`` when stopped first or
        when the client configuration is invalid (the flow fails)."""
        s = self.settings
        backoff = Backoff(base=1.0, cap=30.0)
        while not stop.is_set():
            configs = {s.source: s.source_admin, s.target: s.target_admin}
            down = unreachable(configs, self.connect_timeout, stop=stop)
            if stop.is_set():
                break
            if not down:
                self.stats.set_error("connection", None)
                return True
            message = "; ".join(str(exc) for exc in down.values())
            if any(isinstance(exc, ConfigError) for exc in down.values()):
                log.error("flow %s: %s", s.name, message)
                self.stats.set_error("connection", message)
                self.stats.state = FlowState.FAILED
                return False
            delay = backoff.next_delay()
            # the status first: whoever reads the log line (and stops the flow) finds the error
            self.stats.set_error("connection", f"{message} (retrying in {delay:.0f}s)")
            log.warning("flow %s: %s; retrying in %.0fs", s.name, message, delay)
            backoff.wait(stop)
        return False

    def request_stop(self) -> None:
        """Stop the data plane, then tell every thread of the flow to stop; :meth:`join` waits
        for them."""
        self.data_plane.stop()
        self._stop.set()

    def join(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for every thread of the flow (the main thread first: it
        may still be spawning the others; if it is still starting the flow, at most
        :data:`STARTUP_ABANDON_S` seconds); the flow is then ``STOPPED`` unless it ``FAILED``."""
        deadline = time.monotonic() + timeout
        if self._main is not None:
            self._main.join(min(timeout, STARTUP_ABANDON_S))
            if self._main.is_alive():
                log.warning(
                    "flow %s: stopped while starting; abandoning its start-up request (its "
                    "thread ends when the request times out, and starts nothing)",
                    self.settings.name,
                )
        with self._spawning:  # once stopped, no thread is added
            threads = [t for t in self._threads if t is not self._main]
        for thread in threads:
            thread.join(max(deadline - time.monotonic(), 0.1))
        self._threads = [t for t in threads if t.is_alive()]
        if self._threads:
            log.warning(
                "flow %s: %d thread(s) still running after %.0fs: %s",
                self.settings.name,
                len(self._threads),
                timeout,
                ", ".join(t.name for t in self._threads),
            )
        if self.stats.state is not FlowState.FAILED:
            self.stats.state = FlowState.STOPPED


def stop_flows(flows: Iterable[FlowRunner[Any]], timeout: float) -> None:
    """Stop ``flows``: every one is asked to stop first (so they stop together), then each
    is given up to ``timeout`` seconds to end its threads."""
    flows = list(flows)
    for flow in flows:
        flow.request_stop()
    for flow in flows:
        flow.join(timeout)
