"""A running flow publishes its copier workers' state for ``mirrorlib status`` (any machine).

:class:`WorkerReporter` runs in a thread of the flow: every
:func:`~mirrorlib.core.worker_reports.report_interval` seconds (the offset flush interval,
between 1 and 10 s) it writes one :class:`~mirrorlib.core.worker_reports.WorkerReport` per
worker slot of this node to the flow's worker status topic on the target, and a last one per slot
when the flow stops: ``stopped``, or, for a worker process that did not end cleanly and whose
transactional id could not be fenced, ``abandoned`` with the partitions it may have left a
transaction open on (the node that copies them next fences it). With worker processes, that
last report waits until the supervisor stopped them (``done``); if it does not in time, none is
written, and the last live report goes silent, which also gets the slots fenced by the next
holder of their partitions. The slots come from ``slots()``: the worker supervisor's
(:meth:`~mirrorlib.runtime.workers.supervisor.Supervisor.slot_infos`, ``tasks.max`` > 1) or the
in-process copier's one slot (:func:`copier_slot`); their rates and lag from the flow's
counters.

At its start and then once per :func:`~mirrorlib.core.worker_reports.expire_after` its
interval, the reporter also reads the topic and writes the tombstone of every expired report
of any node (:func:`~mirrorlib.core.worker_reports.expired_reports`): the rows of a node that
never came back, and the ``stopped`` rows of a clean stop, leave the compacted topic.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence

from mirrorlib.core.counters import StatsRegistry
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.status import FlowState
from mirrorlib.core.worker_reports import (
    PartitionLoad,
    SlotInfo,
    WorkerReport,
    WorkerState,
    expire_after,
    expired_reports,
    report_interval,
    slot_reports,
)
from mirrorlib.errors import MirrorError
from mirrorlib.kafka.worker_reports import WorkerReportWriter, read_worker_reports

__all__ = ["WorkerReporter", "copier_slot", "partition_loads"]

log = logging.getLogger(__name__)

Key = tuple[str, int]


def partition_loads(stats: StatsRegistry, now: float | None = None) -> dict[Key, PartitionLoad]:
    """Recent rates and lag of every partition the flow's counters know (lag ``None`` until
    both position and end offset are known)."""
    now = time.monotonic() if now is None else now
    loads = {}
    for key, st in stats.partitions().items():
        records, nbytes = st.rates(now)
        position, end = st.position, st.end_offset
        lag = None if position is None or end is None else max(end - position, 0)
        loads[key] = PartitionLoad(records, nbytes, lag)
    return loads


def copier_slot(stats: StatsRegistry) -> tuple[SlotInfo, ...]:
    """The in-process copier (``tasks.max = 1``) as slot 0 of this process."""
    state = {
        FlowState.FAILED: WorkerState.FAILED,
        FlowState.STARTING: WorkerState.STARTING,
        FlowState.STOPPED: WorkerState.STOPPED,
    }.get(stats.state, WorkerState.RUNNING)
    return (
        SlotInfo(slot=0, pid=os.getpid(), state=state, partitions=frozenset(stats.partitions())),
    )


class WorkerReporter:
    """Publishes this node's worker slots of one flow (see the module)."""

    def __init__(
        self,
        settings: FlowSettings,
        stats: StatsRegistry,
        slots: Callable[[], Sequence[SlotInfo]],
        *,
        done: threading.Event | None = None,
        done_within: float = 0.0,
    ) -> None:
        self.s = settings
        self.done = done
        self.done_within = done_within
        self.stats = stats
        self.slots = slots
        self.interval = report_interval(settings.offset_flush_interval)
        self.last: list[WorkerReport] = []
        """The reports written last (empty before the first)."""

    def reports(self) -> list[WorkerReport]:
        """This node's slots now."""
        return slot_reports(
            self.slots(), partition_loads(self.stats), flow=self.s.name, node=self.s.node,
            tasks_max=self.s.tasks_max, timestamp_ms=int(time.time() * 1000),
            interval_s=self.interval, transactional_id=self.s.slot_transactional_id,
        )  # fmt: skip

    def run(self, stop: threading.Event) -> None:
        s = self.s
        writer = WorkerReportWriter(
            s.target_producer, s.target_admin, s.worker_status_topic, alias=s.target,
            timeout=max(self.interval, 5.0),
        )  # fmt: skip
        sweep_at = time.monotonic()  # the first sweep once the first reports are written
        try:
            while not stop.is_set():
                self.last = self.reports()
                if writer.write(self.last) is None and time.monotonic() >= sweep_at:
                    self.forget_expired(writer)
                    sweep_at = time.monotonic() + expire_after(self.interval)
                stop.wait(self.interval)
            if self.done is not None and not self.done.wait(self.done_within):
                log.warning(
                    "flow %s: the workers did not stop within %.0fs: no last report (the last "
                    "one goes silent, and the node given their partitions fences them)",
                    s.name, self.done_within,
                )  # fmt: skip
                return
            now_ms = int(time.time() * 1000)
            writer.write([r.stopped(now_ms) for r in self.reports() or self.last])
        finally:
            writer.close()

    def forget_expired(self, writer: WorkerReportWriter) -> list[WorkerReport]:
        """Tombstone the expired reports of the flow's topic (any node's) with ``writer``; the
        reports tombstoned (none when the topic cannot be read: logged, tried next time)."""
        s = self.s
        try:
            reports, _ = read_worker_reports(
                s.target_consumer, s.target_admin, s.worker_status_topic, alias=s.target,
                timeout=max(self.interval, 5.0),
            )  # fmt: skip
        except MirrorError as exc:
            log.info("cannot read %s to forget expired worker reports: %s", s.worker_status_topic,
                     exc)  # fmt: skip
            return []
        expired = expired_reports(reports, int(time.time() * 1000))
        if not expired or writer.forget(expired) is not None:
            return []
        log.info(
            "%s: forgot %d expired worker report(s): %s", s.worker_status_topic, len(expired),
            ", ".join(f"{r.flow} {r.node} slot {r.slot} ({r.state.value})" for r in expired),
        )  # fmt: skip
        return expired
