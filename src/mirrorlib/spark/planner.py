"""Planning a flow's micro-batches in the driver's Python process.

Spark drives the batches (a query on Spark's built-in ``rate-micro-batch`` source: one row per
trigger, no Python process) and the ``foreachBatch`` function (:mod:`mirrorlib.spark.plane`)
plans each batch here: from the end offsets of the previous batch to the source's end offsets,
within the batch's record budget (:func:`mirrorlib.core.batches.allot`). The plan is written to
``<flow checkpoint>/mirrorlib-plans/<batch id>`` before anything is copied, so a batch that
Spark replays (it did not commit: driver killed, task failed) copies the same ranges again, and
the next batch starts where the last committed one ended.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

from mirrorlib.core import batches, incarnations
from mirrorlib.core.batches import TP, Plan
from mirrorlib.core.incarnations import Incarnation
from mirrorlib.core.settings import FlowSettings
from mirrorlib.kafka.ranges.driver import SourceView

if TYPE_CHECKING:
    from mirrorlib.spark.checkpoint import CheckpointFiles

__all__ = ["BatchPlanner", "PlanLog"]

log = logging.getLogger(__name__)

#: seconds a backfill waits at most for just-created remote topics to be listed by the target
PIN_SETTLE_S = 10.0


class PlanLog:
    """The plans of a flow's batches in its checkpoint directory (``mirrorlib-plans/<id>``)."""

    FOLDER = "mirrorlib-plans"
    #: plans kept behind the newest (older ones are deleted as batches go by)
    KEEP = 10

    def __init__(self, files: CheckpointFiles) -> None:
        self.files = files

    def get(self, batch_id: int) -> Plan | None:
        raw = self.files.read(f"{self.FOLDER}/{batch_id}")
        return None if raw is None else Plan.decode(raw.decode("utf-8"))

    def last_end(self, batch_id: int) -> dict[TP, int] | None:
        """Where batch ``batch_id`` starts: the end offsets of the newest plan before it (Spark
        runs a batch only once the previous one committed), ``None`` for a new query."""
        plan = self.last(batch_id)
        return None if plan is None else dict(plan.end)

    def last(self, batch_id: int) -> Plan | None:
        """The newest plan before batch ``batch_id`` (``None`` for a new query)."""
        ids = [i for i in self.files.ids(self.FOLDER) if i < batch_id]
        return self.get(ids[-1]) if ids else None

    def save(self, batch_id: int, plan: Plan) -> None:
        self.files.write(f"{self.FOLDER}/{batch_id}", plan.encode().encode("utf-8"))
        for old in self.files.ids(self.FOLDER):
            if old < batch_id - self.KEEP:
                self.files.delete(f"{self.FOLDER}/{old}")


class BatchPlanner:
    """Plans the batches of one flow (the driver's admin clients on the source and the target
    stay open between batches)."""

    def __init__(
        self,
        settings: FlowSettings,
        offsets_topic_partitions: int,
        *,
        tasks: int,
        max_records: int | None,
    ) -> None:
        self.settings = settings
        self.offsets_topic_partitions = offsets_topic_partitions
        self.tasks = max(tasks, 1)
        self.max_records = max_records if max_records and max_records > 0 else None
        self.pinned: dict[TP, int] | None = None
        """A backfill's end: the source's end offsets when it started (``None``: continuous)."""
        self._view: SourceView | None = None
        self._initial: dict[TP, int] | None = None
        self._preparing: threading.Thread | None = None
        self._events: list[tuple[str, bool]] = []  # see take_events

    def prepare(self, *, initial: bool, pin: bool) -> None:
        """Compute in the background, while Spark starts the query, what the first batch needs:
        the initial offsets of a new query, a backfill's pinned end offsets. The first
        :meth:`initial` or :meth:`pin` waits for it (and computes it itself if that failed)."""

        def run() -> None:
            try:
                if pin:
                    self._pin()
                if initial:
                    self._initial = self._initial_offsets()
            except Exception as exc:  # the first batch tries again
                log.debug("flow %s: preparing the first batch: %s", self.settings.name, exc)

        name = f"mirrorlib-spark-plan-{self.settings.source}-{self.settings.target}"
        self._preparing = threading.Thread(target=run, name=name, daemon=True)
        self._preparing.start()

    def _prepared(self) -> None:
        if self._preparing is not None:
            self._preparing.join()
            self._preparing = None

    @property
    def view(self) -> SourceView:
        if self._view is None:
            self._view = SourceView(self.settings, self.offsets_topic_partitions)
        return self._view

    def initial(self) -> dict[TP, int]:
        """Where a new query starts each copyable partition (see
        :meth:`~mirrorlib.kafka.ranges.driver.SourceView.starting_offsets`)."""
        self._prepared()
        if self._initial is not None:
            start, self._initial = self._initial, None
            return start
        return self._initial_offsets()

    def _initial_offsets(self) -> dict[TP, int]:
        view = self.view
        start = view.starting_offsets(view.partitions())
        log.info("flow %s: initial offsets for %d partitions", self.settings.name, len(start))
        return start

    def pin(self) -> None:
        """A backfill copies up to the end offsets of every copyable partition seen now (or
        when :meth:`prepare` ran)."""
        self._prepared()
        if self.pinned is None:
            self._pin()

    def _pin(self) -> None:
        view = self.view
        view.settle(min(self.settings.admin_timeout, PIN_SETTLE_S))
        if view.missing:
            log.warning(
                "flow %s: %d source partition(s) have no remote partition yet: the backfill "
                "leaves them out", self.settings.name, view.missing,
            )  # fmt: skip
        _, high = view.watermarks(view.partitions())
        self.pinned = high
        log.info(
            "flow %s: backfill up to the end offsets of %d partitions (%d records in the logs)",
            self.settings.name,
            len(high),
            sum(high.values()),
        )

    def take_events(self) -> list[tuple[str, bool]]:
        """Partitions that did not start where they were (message, whether a new incarnation)
        since the last call (:mod:`mirrorlib.core.incarnations`)."""
        events, self._events = self._events, []
        if self._view is not None:
            events += self._view.events
            self._view.events = []
        return events

    def plan(
        self, begin: Mapping[TP, int], before: Mapping[str, Incarnation] | None = None
    ) -> Plan:
        """The next batch from ``begin``: every partition up to the source's end offsets (a
        backfill's pinned ones), within the record budget; partitions discovered since enter
        at their starting offsets (copied from the next batch). ``before``: the topic IDs of
        the previous batch's plan; a topic re-created since, or a log now ending below
        ``begin``, starts elsewhere (:func:`~mirrorlib.core.incarnations.rebase`)."""
        view = self.view
        ids: dict[str, Incarnation] = dict(before or {})
        if self.pinned is not None:
            tps = sorted(self.pinned)
            available = {tp: self.pinned[tp] for tp in tps if tp in begin}
        else:
            tps = view.partitions()
            low, high = view.watermarks([tp for tp in tps if tp in begin])
            available = {tp: high[tp] for tp in tps if tp in high}
            now = view.topic_ids({t for t, _ in tps})
            if before is not None:
                begin = self._rebase(begin, low, high, before, now)
            for t, i in now.items():
                old = ids.get(t, Incarnation())
                ids[t] = Incarnation(i.source_id or old.source_id, i.remote_id or old.remote_id)
        new = [tp for tp in tps if tp not in begin]
        if new:
            starts = view.starting_offsets(new)
            if self.pinned is not None:
                pinned = self.pinned
                starts = {tp: min(o, pinned[tp]) for tp, o in starts.items()}
            available.update(starts)
            log.info("flow %s: new partitions %s", self.settings.name, sorted(starts))
        end = batches.allot(begin, available, self.max_records, self.tasks)
        return Plan(begin, end, available, ids)

    def _rebase(
        self,
        begin: Mapping[TP, int],
        low: Mapping[TP, int],
        high: Mapping[TP, int],
        before: Mapping[str, Incarnation],
        now: Mapping[str, Incarnation],
    ) -> dict[TP, int]:
        s = self.settings
        moved = incarnations.rebase(
            begin, low, high, before, now, lambda t: s.policy.format_remote_topic(s.source, t)
        )
        out = dict(begin)
        for tp, m in moved.items():
            log.warning("flow %s: %s", s.name, m.message)
            self._events.append((f"{tp[0]}-{tp[1]}: {m.message}", m.new_incarnation))
            out[tp] = m.offset
        return out

    def close(self) -> None:
        self._prepared()
        if self._view is not None:
            self._view.close()
            self._view = None
