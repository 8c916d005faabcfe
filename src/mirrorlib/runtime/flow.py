"""One flow A->B at run time: its components, threads and shared state."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from mirrorlib.core.catalog import TopicCatalog
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.status import FlowState, StatsRegistry
from mirrorlib.kafka.copier import Copier
from mirrorlib.kafka.positions import PositionStore
from mirrorlib.runtime.checkpoints import CheckpointTask
from mirrorlib.runtime.heartbeats import HeartbeatTask
from mirrorlib.runtime.metadata import MetadataTask

__all__ = ["FlowRunner"]

log = logging.getLogger(__name__)


class FlowRunner:
    def __init__(self, settings: FlowSettings) -> None:
        self.settings = settings
        self.stats = StatsRegistry(
            settings.source, settings.target, internal=settings.policy.is_heartbeats_topic
        )
        self.catalog = TopicCatalog()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.metadata = MetadataTask(settings, self.catalog, self.stats)
        self.copier: Copier | None = None
        self.checkpoints: CheckpointTask | None = None
        self.heartbeats = (
            HeartbeatTask(settings, self.stats) if settings.emit_heartbeats_enabled else None
        )

    def _spawn(self, name: str, target: Callable[[threading.Event], None]) -> None:
        def body() -> None:
            try:
                target(self._stop)
            except Exception:
                log.exception("flow %s: %s thread died", self.settings.name, name)
                self.stats.set_error(name, "thread died; see the log")

        thread = threading.Thread(
            target=body, name=f"mirrorlib {self.settings.name} {name}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def start(self) -> None:
        self._stop.clear()
        self._spawn("main", self._main)

    def _main(self, stop: threading.Event) -> None:
        s = self.settings
        # Internal topics first (retried until the clusters answer), then the components.
        if not self.metadata.prepare(stop):
            return
        if not s.enabled:
            self.metadata.release()
        if self.heartbeats is not None:
            self._spawn("heartbeats", self.heartbeats.run)
        if s.enabled:
            self._spawn("metadata", self.metadata.run)
            positions = PositionStore(
                s.target_consumer,
                s.offset_storage_topic,
                source_alias=s.source,
                target_alias=s.target,
                partitions=self.metadata.offsets_topic_partitions,
                read_committed=s.exactly_once_enabled,
            )
            self.copier = Copier(s, self.catalog, self.stats, positions)
            self._spawn("copier", self.copier.run)
            if s.emit_checkpoints_enabled and s.emit_offset_syncs_enabled:
                self.checkpoints = CheckpointTask(s, self.stats)
                self._spawn("checkpoints", self.checkpoints.run)
        if self.stats.state is FlowState.STARTING:
            self.stats.state = FlowState.RUNNING

    def request_stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float) -> None:
        """Wait for every thread of the flow (the main thread first: it may still be spawning
        the others)."""
        deadline = time.monotonic() + timeout
        joined: set[threading.Thread] = set()
        while True:
            pending = [t for t in self._threads if t not in joined]
            if not pending:
                break
            for thread in pending:
                thread.join(max(deadline - time.monotonic(), 0.1))
                joined.add(thread)
        self._threads = [t for t in self._threads if t.is_alive()]
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
