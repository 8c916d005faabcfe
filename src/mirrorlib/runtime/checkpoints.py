"""Checkpoints and group offset sync for a flow A->B (MM2's MirrorCheckpointConnector/Task).

Every ``emit.checkpoints.interval.seconds``, at a fixed rate, the committed offsets of each
consumer group on A that passes the group filter are read, the offset-syncs topic is read to its
end, and the offsets are translated to B's offsets with an
:class:`~mirrorlib.core.translate.OffsetTranslator` fed from the offset syncs, and written as
:class:`~mirrorlib.core.records.Checkpoint` records to ``<A>.checkpoints.internal`` on B. Between
emissions the task keeps following the offset-syncs topic. So a commit is on B within one interval
plus one emission cycle, translated with every sync written before its group was read (the
metrics ``checkpoint-commit-age-seconds`` and ``checkpoint-sync-age-seconds`` measure both; see
:class:`_Ages`). Existing
checkpoints are loaded first, so a restarted replicator never moves a checkpoint backwards
(except after an upstream rewind of the group, as in MM2). A checkpoint counts as emitted only
once B acknowledged it: one whose write failed is emitted again on the next cycle, even for an
idle group. With ``sync.group.offsets.enabled`` the offsets of written checkpoints are also
committed to the group on B while it has no active members there, and never rewind it.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Final

import attrs

from mirrorlib.core.checkpointing import (
    CheckpointStore,
    checkpoints_for_group,
    group_offsets_to_sync,
    next_emission,
    rename_topic,
)
from mirrorlib.core.records import Checkpoint, OffsetAndMetadata, OffsetSync, TopicPartition
from mirrorlib.core.retry import Backoff
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.status import StatsRegistry
from mirrorlib.core.syncs import lineage_from_headers
from mirrorlib.core.translate import OffsetTranslator
from mirrorlib.errors import ClusterError, CodecError
from mirrorlib.kafka import new_producer
from mirrorlib.kafka.groups import GroupAdmin, GroupState
from mirrorlib.kafka.topiclog import TopicLog

__all__ = ["CheckpointTask"]

log = logging.getLogger(__name__)

#: Longest wait for new offset syncs between two tasks of the loop (also bounds stop latency).
_FOLLOW_WAIT: Final = 0.2
#: Offset syncs taken from the consumer at a time.
_SYNC_BATCH: Final = 10_000


@attrs.frozen
class _Ages:
    """What a checkpoint's latency metrics are computed from, at its acknowledgement ``ack``
    (wall-clock milliseconds):

    * ``checkpoint-latency-ms`` (MM2's): ``ack - read_ms``, ``read_ms`` being the time the
      group's committed offsets were read (the checkpoint record's timestamp);
    * ``checkpoint-commit-age-seconds``: ``ack - committed_after_ms``, where
      ``committed_after_ms`` is the previous read of the group's offsets, at which the
      partition's committed offset was still different: the commit happened after it, so this
      bounds how long the commit took to reach the target as a checkpoint. Only for checkpoints
      whose offset changed between two reads;
    * ``checkpoint-sync-age-seconds``: ``read_ms - sync_ms``, ``sync_ms`` being the record
      timestamp (the writer's produce time) of the newest offset sync of the partition the
      translator had read: how far the syncs used trail the offsets they translate.
    """

    read_ms: int
    committed_after_ms: int | None
    sync_ms: int | None


class CheckpointTask:
    """Emits checkpoints (and syncs group offsets) for one flow; run :meth:`run` in a thread."""

    def __init__(self, settings: FlowSettings, stats: StatsRegistry) -> None:
        self.s = settings
        self.stats = stats
        self.translator = OffsetTranslator()
        self.store = CheckpointStore()  # acknowledged checkpoints only
        self._in_flight: dict[tuple[str, TopicPartition], Checkpoint] = {}
        self.groups: list[str] = []
        self.corrupt_records = 0
        self.initialized = threading.Event()
        # Record timestamp (ms) of the newest offset sync read, per upstream partition.
        self._sync_ms: dict[tuple[str, int], int] = {}
        # Per group: wall time (ms) of the previous read of its committed offsets, and what they
        # were then (a checkpoint whose offset changed since was committed after that read).
        self._previous_read: dict[str, tuple[int, dict[TopicPartition, int]]] = {}
        self._pass_wanted = threading.Event()
        self._pass_done = threading.Event()

    def final_pass(self, timeout: float) -> bool:
        """Run every task of the loop now, once: refresh the groups, emit their checkpoints
        with every offset sync written so far, and sync group offsets (when enabled). For a
        bounded copy that just ended (a Spark backfill), whose last offset syncs would otherwise
        wait for the next emission, possibly never coming. ``False`` when the pass did not end
        within ``timeout`` seconds (the task is not running, or failed)."""
        self._pass_done.clear()
        self._pass_wanted.set()
        return self._pass_done.wait(timeout)

    def _rename(self, topic: str) -> str:
        return rename_topic(self.s.policy, self.s.source, self.s.target, topic)

    def _on_sync(self, msg: Any) -> None:
        try:
            sync = OffsetSync.decode(msg.key(), msg.value())
        except CodecError as exc:
            self.corrupt_records += 1
            log.warning(
                "flow %s: skipping corrupt offset sync at %s-%d@%d: %s",
                self.s.name,
                msg.topic(),
                msg.partition(),
                msg.offset(),
                exc,
            )
            return
        lineage = lineage_from_headers(msg.headers())
        log.debug("flow %s: offset sync %s (lineage %s)", self.s.name, sync, lineage)
        self.translator.add(sync, lineage)
        _kind, ts = msg.timestamp()
        if ts > 0:  # the writer's produce time (-1: not available)
            self._sync_ms[(sync.topic, sync.partition)] = ts

    def _on_checkpoint(self, msg: Any) -> None:
        try:
            cp = Checkpoint.decode(msg.key(), msg.value())
        except CodecError as exc:
            self.corrupt_records += 1
            log.warning(
                "flow %s: skipping corrupt checkpoint at %s@%d: %s",
                self.s.name,
                msg.topic(),
                msg.offset(),
                exc,
            )
            return
        if self.s.should_replicate_group(cp.group):
            self.store.add(cp)

    def run(self, stop: threading.Event) -> None:
        s = self.s
        backoff = Backoff(base=1.0, cap=60.0)
        while not stop.is_set():
            try:
                self._run(stop)
                return
            except Exception as exc:
                delay = backoff.next_delay()
                self.stats.set_error("checkpoints", f"{type(exc).__name__}: {exc}")
                log.exception("flow %s: checkpoint task failed; retrying in %.0fs", s.name, delay)
                backoff.wait(stop)

    def _run(self, stop: threading.Event) -> None:
        s = self.s
        source_groups = GroupAdmin(s.source_admin, alias=s.source, timeout=s.admin_timeout)
        target_groups = GroupAdmin(s.target_admin, alias=s.target, timeout=s.admin_timeout)
        producer = new_producer(
            s.target_producer, acks="all", **{"enable.idempotence": True, "linger.ms": 0}
        )
        self.store = CheckpointStore()
        self._in_flight.clear()
        self.translator = OffsetTranslator()
        with TopicLog(
            s.target_consumer, s.checkpoints_topic, alias=s.target, partitions=[0]
        ) as cps_log:
            cps_log.read_to_end(self._on_checkpoint, timeout=s.admin_timeout)
        syncs_log = TopicLog(
            s.offset_syncs_consumer,
            s.offset_syncs_topic,
            alias=s.offset_syncs_cluster,
            partitions=[0],
        )
        try:
            syncs_log.read_to_end(self._on_sync, timeout=max(s.admin_timeout, 120.0))
            self.initialized.set()
            self.stats.set_error("checkpoints", None)
            now = time.monotonic()
            next_groups = now
            next_emit = now + min(s.emit_checkpoints_interval, 1.0)
            next_sync = now + s.sync_group_offsets_interval
            while not stop.is_set():
                now = time.monotonic()
                final = self._pass_wanted.is_set()
                if final:  # everything is due now
                    self._pass_wanted.clear()
                    next_groups = next_emit = next_sync = now
                if now >= next_groups:
                    self.groups = [
                        g for g in source_groups.list_groups() if s.should_replicate_group(g)
                    ]
                    next_groups = now + s.refresh_groups_interval
                if now >= next_emit:
                    self._emit(source_groups, producer, syncs_log)
                    next_emit = next_emission(
                        next_emit, s.emit_checkpoints_interval, time.monotonic()
                    )
                if s.sync_group_offsets_enabled and now >= next_sync:
                    self._sync_group_offsets(target_groups)
                    next_sync = now + s.sync_group_offsets_interval
                if final:
                    self._pass_done.set()
                # Follow the offset syncs until the next due task: the translator stays current
                # between emissions, so catching up before each one reads only the last moment.
                due = min(next_groups, next_emit)
                if s.sync_group_offsets_enabled:
                    due = min(due, next_sync)
                wait = min(max(due - time.monotonic(), 0.0), _FOLLOW_WAIT)
                syncs_log.poll(self._on_sync, timeout=wait, batch=_SYNC_BATCH)
        finally:
            syncs_log.close()
            producer.flush(10.0)

    def _catch_up_syncs(self, syncs_log: TopicLog) -> None:
        """Read every offset sync written so far (bounded by one emit interval), so offsets just
        read from the source are translated with the syncs that existed when they were read."""
        s = self.s
        timeout = max(min(s.emit_checkpoints_interval, s.admin_timeout), 1.0)
        try:
            syncs_log.read_to_end(self._on_sync, timeout=timeout, batch=_SYNC_BATCH)
        except ClusterError as exc:  # translate with what was read; the next cycle catches up
            log.warning("flow %s: offset syncs not caught up before checkpoints: %s", s.name, exc)

    def _emit(self, source_groups: GroupAdmin, producer: Any, syncs_log: TopicLog) -> None:
        s = self.s
        read: list[tuple[str, int, dict[TopicPartition, OffsetAndMetadata]]] = []
        for group in self.groups:
            timestamp = int(time.time() * 1000)
            try:
                read.append((group, timestamp, source_groups.committed_offsets(group)))
            except Exception as exc:
                log.warning("flow %s: cannot read offsets of group %s: %s", s.name, group, exc)
        if not read:
            return
        self._catch_up_syncs(syncs_log)
        emitted = 0
        for group, timestamp, offsets in read:
            previous = self._previous_read.get(group)
            upstream_topic = {self._rename(tp.topic): tp.topic for tp in offsets}
            self._previous_read[group] = (timestamp, {tp: om.offset for tp, om in offsets.items()})
            cps = checkpoints_for_group(
                group,
                offsets,
                translate=self.translator.translate,
                rename=self._rename,
                should_checkpoint_topic=s.should_replicate_topic,
                store=self.store,
            )
            log.debug("flow %s: group %s offsets %s -> checkpoints %s", s.name, group, offsets, cps)
            for cp in cps:
                key = (cp.group, cp.topic_partition)
                if self._in_flight.get(key) == cp:
                    continue  # still waiting for its delivery report
                self._in_flight[key] = cp
                upstream_tp = TopicPartition(upstream_topic[cp.topic], cp.partition)
                committed_after = (
                    previous[0]
                    if previous is not None and previous[1].get(upstream_tp) != cp.upstream_offset
                    else None
                )
                ages = _Ages(
                    read_ms=timestamp,
                    committed_after_ms=committed_after,
                    sync_ms=self._sync_ms.get((upstream_tp.topic, upstream_tp.partition)),
                )
                producer.produce(
                    s.checkpoints_topic,
                    cp.encode_value(),
                    cp.encode_key(),
                    0,
                    timestamp=timestamp,
                    on_delivery=self._delivered(cp, ages),
                )
                emitted += 1
        if emitted:
            producer.flush(s.admin_timeout)

    def _delivered(self, cp: Checkpoint, ages: _Ages) -> Any:
        """The delivery report of ``cp``: only an acknowledged checkpoint is recorded, so a failed
        write is emitted again on the next cycle and group offset sync never commits from it.
        Records the checkpoint's latency metrics (see :class:`_Ages`)."""

        def done(err: Any, _msg: Any) -> None:
            key = (cp.group, cp.topic_partition)
            if self._in_flight.get(key) == cp:
                del self._in_flight[key]
            if err is not None:
                self.stats.set_error("checkpoints", f"writing a checkpoint failed: {err}")
                return
            self.store.add(cp)
            self.stats.set_error("checkpoints", None)
            now = int(time.time() * 1000)
            self.stats.checkpoints_emitted += 1
            self.stats.last_checkpoint_ms = now
            self.stats.checkpoint_latency.record(now - ages.read_ms)
            if ages.committed_after_ms is not None:
                self.stats.checkpoint_commit_age.record((now - ages.committed_after_ms) / 1000)
            if ages.sync_ms is not None:
                self.stats.checkpoint_sync_age.record(max(ages.read_ms - ages.sync_ms, 0) / 1000)

        return done

    def _sync_group_offsets(self, target_groups: GroupAdmin) -> None:
        s = self.s
        groups = self.store.groups()
        try:
            states = target_groups.states(groups)
        except Exception as exc:
            log.warning("flow %s: cannot describe groups on %s: %s", s.name, s.target, exc)
            return
        for group in groups:
            state = states.get(group, GroupState.UNKNOWN)
            if state not in (GroupState.ABSENT, GroupState.EMPTY):
                continue  # active (or unknown) on the target: never touch it
            try:
                current = (
                    None if state is GroupState.ABSENT else target_groups.committed_offsets(group)
                )
                offsets = group_offsets_to_sync(self.store.group(group).values(), current)
                if offsets:
                    target_groups.commit_offsets(group, offsets)
                    log.info(
                        "flow %s: synced %d offsets of group %s to %s",
                        s.name,
                        len(offsets),
                        group,
                        s.target,
                    )
            except Exception as exc:
                log.warning(
                    "flow %s: syncing offsets of group %s to %s failed: %s",
                    s.name,
                    group,
                    s.target,
                    exc,
                )
