"""Checkpoints and group offset sync for a flow A->B (MM2's MirrorCheckpointConnector/Task).

The task follows two topics continuously: the offset-syncs topic (every sync goes to an
:class:`~mirrorlib.core.translate.OffsetTranslator`, read in batches of 10,000 without waiting
while a backlog exists) and A's ``__consumer_offsets`` (read ``read_committed``; every commit of a
group that passes the group filter goes to a :class:`~mirrorlib.core.group_commits.CommitTable`).
Translated offsets are written as :class:`~mirrorlib.core.records.Checkpoint` records to
``<A>.checkpoints.internal`` on B:

* **on commit** (``emit.checkpoints.on.commit.enabled``, the default): the loop waits on
  ``__consumer_offsets``, and a group whose commit changed its offsets is translated and written
  in a *prompt pass* right away -- tens of milliseconds after the commit. A
  :class:`~mirrorlib.core.checkpointing.PromptSchedule` bounds the write rate: a group gets a
  prompt pass at most every :data:`~mirrorlib.core.checkpointing.PROMPT_GROUP_SPACING` seconds
  and passes run at most every :data:`~mirrorlib.core.checkpointing.PROMPT_PASS_SPACING` seconds,
  so a burst of commits is written together. Turned off, only a group that had no cycle in the
  last ``emit.checkpoints.interval.seconds`` (``I``) gets a prompt pass;
* **at a fixed rate** of ``I``: every group with a new commit not yet written, and every
  (group, partition) whose partition got new offset syncs (its translation may improve), is
  translated again; so are the groups of failed writes.

So a commit is on B within one pass of being read (at most ``I`` plus one cycle with checkpoints
on commit turned off, or in OffsetFetch mode). Each cycle and pass first reads the offset syncs to
their end (one ListOffsets), so a commit is translated with every sync written before it was
seen. A (group, partition) whose
committed offset did not change, and whose partition got no sync that could change its answer
(:meth:`~mirrorlib.core.translate.OffsetTranslator.stamp`), is skipped: a cycle costs what changed,
not the number of groups.

Every decision -- which pairs to translate, which checkpoints to write, what group offset sync
commits -- is made by :class:`~mirrorlib.core.checkpointing.CheckpointLedger` and
:class:`~mirrorlib.core.checkpointing.GroupOffsetSync` in the pure core (where it is unit-tested);
this module reads the topics and the groups, and writes what they decide.

Without permission to read ``__consumer_offsets`` (or when reading it fails), the task falls back
to MM2's way: every ``I``, the committed offsets of every listed group are read with OffsetFetch,
one request per group (confluent-kafka cannot batch groups) but up to
:data:`~mirrorlib.kafka.groups.IN_FLIGHT` of them at a time; a commit then waits up to ``I`` to be
read. The metrics ``checkpoint-commit-age-seconds`` and ``checkpoint-sync-age-seconds`` measure
freshness (see :meth:`_Cycle.done`). Existing checkpoints are loaded first, so a restarted replicator
never moves a checkpoint backwards (except after an upstream rewind of the group, as in MM2). A
checkpoint counts as emitted only once B acknowledged it: one whose write failed is emitted again
on the next cycle, even for an idle group. With ``sync.group.offsets.enabled`` the offsets of
written checkpoints are also committed to the group on B while it has no active members there,
and never rewind it; only groups with new checkpoints since their last sync are looked at (all of
them every tenth interval). A group is created on B only if it never existed there: one an
operator deleted on B is left alone (:class:`~mirrorlib.core.checkpointing.GroupOffsetSync`).

The state of a group gone from the source -- deleted, or its offsets expired (no longer in
``__consumer_offsets``, or no longer listed in OffsetFetch mode) -- or no longer passing the group
filter is forgotten (:func:`~mirrorlib.core.checkpointing.groups_to_forget`): its checkpoints
are no longer synced, and memory does not grow with every ephemeral group ever seen.
:meth:`CheckpointTask.forget_gone_groups` runs before every fixed-rate cycle and group offset
sync.

Entry points for driving the task without a broker (benchmarks): :meth:`CheckpointTask.take_syncs`
(offset-sync records), :meth:`CheckpointTask.take_checkpoints` (checkpoint records, as read at
start-up), :meth:`CheckpointTask.take_commits` (``__consumer_offsets`` records) and
:meth:`CheckpointTask.emit_checkpoints` (one checkpoint cycle).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Protocol

import attrs

from mirrorlib.core.checkpointing import (
    PROMPT_GROUP_SPACING,
    PROMPT_PASS_SPACING,
    CheckpointFields,
    CheckpointLedger,
    CheckpointPass,
    CheckpointStore,
    GroupOffsetSync,
    PromptSchedule,
    TargetGroupAction,
    groups_to_forget,
    next_emission,
    rename_topic,
)
from mirrorlib.core.counters import StatsRegistry
from mirrorlib.core.group_commits import CONSUMER_OFFSETS_TOPIC, CommitTable
from mirrorlib.core.records import Checkpoint, OffsetAndMetadata, TopicPartition
from mirrorlib.core.retry import Backoff
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.translate import OffsetTranslator
from mirrorlib.errors import ClusterError, CodecError
from mirrorlib.kafka import new_producer
from mirrorlib.kafka.groups import GroupAdmin
from mirrorlib.kafka.offset_syncs import OffsetSyncReader
from mirrorlib.kafka.topiclog import Record, SkippedRecords, TopicLog

__all__ = ["CheckpointTask", "CycleResult", "OffsetReader"]

log = logging.getLogger(__name__)

#: Longest wait for new records between two tasks of the loop (also bounds stop latency).
_FOLLOW_WAIT: Final = 0.1
#: Records taken from a consumer at a time; a full batch means "behind": read on, no wait.
_SYNC_BATCH: Final = 10_000

#: A checkpoint's (upstream offset, downstream offset, metadata).
_Fields = CheckpointFields
#: Entries per written checkpoint in :attr:`_Cycle._sent`: group, upstream and downstream
#: partitions, fields, and what its metrics are computed from (commit time, newest sync time;
#: see :meth:`_Cycle.done`).
_SENT_WIDTH: Final = 6


class OffsetReader(Protocol):
    """Reads committed offsets of many groups (:class:`~mirrorlib.kafka.groups.GroupAdmin`)."""

    def committed_offsets_many(
        self, groups: Iterable[str]
    ) -> Mapping[str, Mapping[TopicPartition, OffsetAndMetadata] | Exception]: ...


@attrs.frozen
class CycleResult:
    """What one checkpoint cycle did: groups and (group, partition) pairs looked at, pairs
    translated (the others were unchanged), checkpoints produced, and groups whose offsets were
    read with OffsetFetch (0 when following ``__consumer_offsets``)."""

    groups: int
    pairs: int
    translated: int
    produced: int
    fetched: int


class CheckpointTask:
    """Emits checkpoints (and syncs group offsets) for one flow; run :meth:`run` in a thread.

    The translator, the commit table and the :class:`~mirrorlib.core.checkpointing.
    CheckpointLedger` (which decides what to write) survive a restart of the task's loop (after
    an error), so a restart re-reads only what was written since.
    """

    def __init__(self, settings: FlowSettings, stats: StatsRegistry) -> None:
        self.s = settings
        self.stats = stats
        self.translator = OffsetTranslator()
        self.commits = CommitTable(settings.should_replicate_group)
        self.ledger = CheckpointLedger(
            self.translator,
            rename=self._rename,
            should_checkpoint_topic=settings.should_replicate_topic,
        )
        self.groups: list[str] = []
        self.initialized = threading.Event()
        where = f"flow {settings.name}"
        # The offset syncs read, into the translator; it also tells which partitions got new
        # syncs since the last fixed-rate cycle, and the newest sync's time per partition.
        self.syncs = OffsetSyncReader(self.translator, where=where)
        self._skipped_commits = SkippedRecords("a group commit", where)
        self._skipped_checkpoints = SkippedRecords("a checkpoint", where)
        # Per group, OffsetFetch mode: wall time (ms) of the previous read and its offsets.
        self._previous_read: dict[str, tuple[int, dict[TopicPartition, OffsetAndMetadata]]] = {}
        # Groups with commits waiting for a prompt pass, and when each may have one.
        on_commit = settings.emit_checkpoints_on_commit_enabled
        self.prompt = PromptSchedule(
            PROMPT_GROUP_SPACING if on_commit else settings.emit_checkpoints_interval,
            PROMPT_PASS_SPACING if on_commit else 0.0,
        )
        # Groups whose checkpoint write failed: translated again by the next fixed-rate cycle.
        self._retry: set[str] = set()
        # Group offset sync: what it wrote or found per group on the target, and which groups
        # existed there (to never re-create one an operator deleted).
        self.group_sync = GroupOffsetSync()
        # OffsetFetch mode: whether the source's groups were listed (self.groups is known).
        self._groups_listed = False
        self.following_commits = False
        # Next offset to read per partition of the offset-syncs topic and __consumer_offsets.
        self._syncs_next: dict[int, int] = {}
        self._commits_next: dict[int, int] = {}
        self._pass_wanted = threading.Event()
        self._pass_done = threading.Event()

    @property
    def store(self) -> CheckpointStore:
        """The acknowledged checkpoints (the ledger's store)."""
        return self.ledger.store

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

    # -- intake ----------------------------------------------------------------------------------

    @property
    def corrupt_records(self) -> int:
        """Records of the three topics read that were skipped because they do not decode."""
        return (
            self.syncs.skipped.count + self._skipped_commits.count + self._skipped_checkpoints.count
        )

    def take_syncs(self, records: Iterable[Record]) -> int:
        """Take in offset-sync records (``confluent_kafka.Message``-like: ``key()``, ``value()``,
        ``headers()``, ``timestamp()``) in topic order; returns how many. Corrupt ones are
        counted and skipped (:class:`~mirrorlib.kafka.offset_syncs.OffsetSyncReader`)."""
        return self.syncs.take(records)

    def take_commits(self, records: Iterable[Record]) -> int:
        """Take in ``__consumer_offsets`` records (``key()``, ``value()``) in partition order;
        returns how many changed a replicated group's offsets. Corrupt ones are counted and
        skipped (:class:`~mirrorlib.kafka.topiclog.SkippedRecords`)."""
        add, skipped = self.commits.add_record, self._skipped_commits
        changed = 0
        for msg in records:  # (no generator: this runs per record while following commits)
            try:
                changed += add(msg.key(), msg.value())
            except CodecError as exc:
                skipped.skip(msg, exc)
        return changed

    def take_checkpoints(self, records: Iterable[Record]) -> int:
        """Take in checkpoint records (``key()``, ``value()``) of the checkpoints topic, as
        the start-up read does (the checkpoints this task emitted before); returns how many
        were kept (the replicated groups'). Corrupt ones are counted and skipped."""
        decode, add = Checkpoint.decode, self.ledger.store.add
        should_replicate, skipped = self.s.should_replicate_group, self._skipped_checkpoints
        kept = 0
        for msg in records:  # (no generator: the start-up read takes one record at a time)
            try:
                cp = decode(msg.key(), msg.value())
            except CodecError as exc:
                skipped.skip(msg, exc)
                continue
            if should_replicate(cp.group):
                add(cp)
                kept += 1
        return kept

    def _on_checkpoint(self, msg: Any) -> None:
        self.take_checkpoints((msg,))

    # -- the loop --------------------------------------------------------------------------------

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

    def _open_commits(self) -> TopicLog | None:
        """Follow the source's ``__consumer_offsets``, read to its end; ``None`` (OffsetFetch
        mode) when it cannot be read."""
        s = self.s
        commits_log = TopicLog(
            s.source_consumer,
            CONSUMER_OFFSETS_TOPIC,
            alias=s.source,
            read_committed=True,
            start=self._commits_next,
        )
        try:
            commits_log.read_to_end(
                self._commit_handler, timeout=max(s.admin_timeout, 120.0),
                batch=_SYNC_BATCH,
            )  # fmt: skip
        except ClusterError as exc:
            commits_log.close()
            log.info(
                "flow %s: cannot follow %s on %s (%s); reading group offsets with OffsetFetch "
                "every emit interval",
                s.name,
                CONSUMER_OFFSETS_TOPIC,
                s.source,
                exc,
            )
            return None
        return commits_log

    def _run(self, stop: threading.Event) -> None:
        s = self.s
        source_groups = GroupAdmin(s.source_admin, alias=s.source, timeout=s.admin_timeout)
        target_groups = GroupAdmin(s.target_admin, alias=s.target, timeout=s.admin_timeout)
        producer = new_producer(
            s.target_producer, acks="all", **{"enable.idempotence": True, "linger.ms": 0}
        )
        # The previous loop's producer is gone: its unreported checkpoints are written again
        # (in OffsetFetch mode every group is read and translated again anyway).
        dropped = self.ledger.drop_in_flight()
        if self.following_commits:
            self._retry |= dropped
        if not self.initialized.is_set():  # a restarted loop keeps what it knew
            with TopicLog(
                s.target_consumer, s.checkpoints_topic, alias=s.target, partitions=[0]
            ) as cps_log:
                cps_log.read_to_end(self._on_checkpoint, timeout=s.admin_timeout)
        # A restarted loop continues where the previous one stopped reading (its syncs and
        # commits are in memory); only a new task reads both topics from the beginning.
        syncs_log = TopicLog(
            s.offset_syncs_consumer,
            s.offset_syncs_topic,
            alias=s.offset_syncs_cluster,
            partitions=[0],
            start=self._syncs_next,
        )
        commits_log: TopicLog | None = None
        try:
            syncs_log.read_to_end(
                self._sync_handler, timeout=max(s.admin_timeout, 120.0),
                batch=_SYNC_BATCH,
            )  # fmt: skip
            commits_log = self._open_commits()
            self.following_commits = commits_log is not None
            self.initialized.set()
            self.stats.set_error("checkpoints", None)
            self._loop(stop, producer, syncs_log, commits_log, source_groups, target_groups)
        finally:
            syncs_log.close()
            if commits_log is not None:
                commits_log.close()
            producer.flush(10.0)

    def _loop(
        self,
        stop: threading.Event,
        producer: Any,
        syncs_log: TopicLog,
        commits_log: TopicLog | None,
        source_groups: GroupAdmin,
        target_groups: GroupAdmin,
    ) -> None:
        s = self.s
        now = time.monotonic()
        next_groups = now
        next_emit = now + min(s.emit_checkpoints_interval, 1.0)
        next_sync = now + s.sync_group_offsets_interval
        catch_up = self._catch_up(syncs_log)
        while not stop.is_set():
            now = time.monotonic()
            final = self._pass_wanted.is_set()
            if final:  # everything is due now, with every commit read so far
                self._pass_wanted.clear()
                next_groups = next_emit = next_sync = now
                if commits_log is not None:
                    commits_log.read_to_end(
                        self._commit_handler, timeout=max(s.admin_timeout, 60.0),
                        batch=_SYNC_BATCH,
                    )  # fmt: skip
            if commits_log is None and now >= next_groups:
                self.list_groups(source_groups.list_groups)
                next_groups = now + s.refresh_groups_interval
            if now >= next_emit:
                self.forget_gone_groups()
                self.emit_checkpoints(
                    producer, source=None if commits_log else source_groups, catch_up=catch_up
                )
                next_emit = next_emission(next_emit, s.emit_checkpoints_interval, time.monotonic())
            elif commits_log is not None and (self.commits.has_changed() or self.prompt):
                self.emit_checkpoints(producer, catch_up=catch_up, prompt=True)
            if s.sync_group_offsets_enabled and now >= next_sync:
                self.sync_group_offsets(target_groups)
                next_sync = now + s.sync_group_offsets_interval
            if final:
                self._pass_done.set()
            producer.poll(0)
            # Follow the commits (waking on the first one) and the syncs until the next due
            # task; no wait while behind.
            due = min(next_emit, next_sync if s.sync_group_offsets_enabled else next_emit)
            prompt_due = self.prompt.next_due()
            if prompt_due is not None:
                due = min(due, prompt_due)
            wait = min(max(due - time.monotonic(), 0.0), _FOLLOW_WAIT)
            if commits_log is not None:
                self._follow_commits(commits_log, wait)
                wait = 0.0
            taken = syncs_log.poll_batch(self._sync_batch, timeout=wait, batch=_SYNC_BATCH)
            while taken >= _SYNC_BATCH and not stop.is_set():  # a backlog: take it all in
                taken = syncs_log.poll_batch(self._sync_batch, timeout=0, batch=_SYNC_BATCH)

    def _follow_commits(self, commits_log: TopicLog, wait: float) -> None:
        """Take in the commits that arrive within ``wait`` seconds: return on the first one (a
        batch-sized ``consume`` would wait out its timeout) with what arrived with it."""
        if commits_log.poll(self._commit_handler, timeout=wait, batch=1):
            while commits_log.poll(self._commit_handler, timeout=0, batch=_SYNC_BATCH) >= (
                _SYNC_BATCH
            ):
                pass  # a backlog: take it all in

    def _commit_handler(self, msg: Any) -> None:
        self.take_commits((msg,))
        self._commits_next[msg.partition()] = msg.offset() + 1

    def _sync_handler(self, msg: Any) -> None:
        self.take_syncs((msg,))
        self._syncs_next[msg.partition()] = msg.offset() + 1

    def _sync_batch(self, records: list[Any]) -> None:
        self.take_syncs(records)
        last = records[-1]
        self._syncs_next[last.partition()] = last.offset() + 1

    def _catch_up(self, syncs_log: TopicLog) -> Callable[[], None]:
        """Reads every offset sync written so far (bounded by one emit interval), so offsets
        just read from the source are translated with the syncs that existed when they were
        read."""
        s = self.s
        timeout = max(min(s.emit_checkpoints_interval, s.admin_timeout), 1.0)

        def catch_up() -> None:
            try:
                syncs_log.read_to_end(self._sync_handler, timeout=timeout, batch=_SYNC_BATCH)
            except ClusterError as exc:  # translate with what was read; the next cycle catches up
                log.warning(
                    "flow %s: offset syncs not caught up before checkpoints: %s", s.name, exc
                )

        return catch_up

    # -- one cycle -------------------------------------------------------------------------------

    def emit_checkpoints(
        self,
        producer: Any,
        *,
        source: OffsetReader | None = None,
        catch_up: Callable[[], None] | None = None,
        prompt: bool = False,
    ) -> CycleResult:
        """One checkpoint cycle; returns what it did.

        ``source``: read the committed offsets of :attr:`groups` from it (OffsetFetch mode);
        ``None``: use the offsets taken in with :meth:`take_commits`. ``catch_up`` is called
        after the offsets are known and before they are translated (the loop reads the offset
        syncs to their end). ``prompt``: a prompt pass, only the groups with new commits that
        :attr:`prompt` lets pass now (the others wait for a later pass or the next fixed-rate
        cycle); otherwise a fixed-rate cycle: every group with new commits, every pair whose
        partition got new syncs, and the groups whose checkpoint write failed. ``producer`` is a ``confluent_kafka.Producer``
        (``produce``, ``flush``, and ``poll`` while its queue is full); checkpoints are recorded
        on their delivery reports. A cycle cut short (a write that fails, or a queue still full
        after ``admin.timeout.ms``) raises; its groups not written yet are emitted again on the
        next cycle.
        """
        s = self.s
        now_mono = time.monotonic()
        read_ms = int(time.time() * 1000)
        todo: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        committed_after: dict[str, Callable[[TopicPartition], int | None]] = {}
        fetched = 0
        if source is not None:
            results = source.committed_offsets_many(self.groups)
            fetched = len(results)
            for group, offsets in results.items():
                if isinstance(offsets, Exception):
                    log.warning(
                        "flow %s: cannot read offsets of group %s: %s", s.name, group, offsets
                    )
                    continue
                current = dict(offsets)
                todo[group] = current
                previous = self._previous_read.get(group)
                self._previous_read[group] = (read_ms, current)
                committed_after[group] = _changed_since(previous, current)
        else:
            changed = self.commits.take_changed()
            if prompt:
                self.prompt.add(changed)
                changed = self.prompt.due(now_mono)
            else:
                changed |= self.prompt.take_all(now_mono)
                changed |= self._retry
                self._retry = set()
            for group in changed:
                todo[group] = self.commits.offsets(group)
                committed_after[group] = _commit_time(self.commits, group)
        if not prompt:
            self._add_synced_pairs(todo, committed_after)
            self.prompt.passed(todo, now_mono)
        if not todo:
            return CycleResult(0, 0, 0, 0, fetched)
        if catch_up is not None:
            catch_up()
        cycle = _Cycle(self, self.ledger.begin(self.syncs.sync_ms), producer, read_ms)
        self._write_groups(cycle, todo, committed_after, retry=source is None)
        pairs, translated, produced = cycle.pairs, cycle.translated, cycle.produced
        if produced:
            producer.flush(s.admin_timeout)
        cycle.close()
        return CycleResult(len(todo), pairs, translated, produced, fetched)

    def _write_groups(
        self,
        cycle: _Cycle,
        todo: Mapping[str, Mapping[TopicPartition, OffsetAndMetadata]],
        committed_after: Mapping[str, Callable[[TopicPartition], int | None]],
        *,
        retry: bool,
    ) -> None:
        """Write the checkpoints of every group of ``todo``. ``retry``: the groups were taken
        from the commits followed (:meth:`take_commits`), so a cycle cut short hands the groups
        it has not written yet to the next cycle (otherwise the next read of the source's
        offsets brings them)."""
        try:
            for group, offsets in todo.items():
                cycle.group(group, offsets, committed_after[group])
        except BaseException:
            if retry:
                groups = list(todo)
                self._retry.update(groups[groups.index(cycle.current) :])
            raise

    def _add_synced_pairs(
        self,
        todo: dict[str, dict[TopicPartition, OffsetAndMetadata]],
        committed_after: dict[str, Callable[[TopicPartition], int | None]],
    ) -> None:
        """Add the pairs on partitions that got new syncs since the last fixed-rate cycle."""
        for group in self.ledger.watching(self.syncs.take_touched()):
            if group in todo:
                continue
            offsets = (
                self.commits.offsets(group)
                if self.following_commits
                else dict(self._previous_read.get(group, (0, {}))[1])
            )
            if offsets:
                todo[group] = offsets
                committed_after[group] = _never

    # -- forgetting groups gone from the source ---------------------------------------------------

    def list_groups(self, list_source: Callable[[], Iterable[str]]) -> None:
        """OffsetFetch mode: take the source's groups from ``list_source`` (a listing of the
        groups there, e.g. :meth:`GroupAdmin.list_groups`) into :attr:`groups`, those the
        group filter admits."""
        self.groups = [g for g in list_source() if self.s.should_replicate_group(g)]
        self._groups_listed = True

    def forget_gone_groups(self) -> set[str]:
        """Forget the state (checkpoints, translation memory, sync memory) of the groups gone
        from the source or no longer passing the group filter
        (:func:`~mirrorlib.core.checkpointing.groups_to_forget`); returns them. The source's
        groups are those with committed offsets in its ``__consumer_offsets`` when following
        it, else the last group listing (nothing is forgotten before the first one). A group
        with checkpoints still waiting for their acknowledgement is kept until they are
        acknowledged."""
        if self.following_commits:
            on_source: set[str] = set(self.commits)
        elif self._groups_listed:
            on_source = set(self.groups)
        else:
            return set()
        ledger = self.ledger
        known = ledger.groups() | self._previous_read.keys() | self.group_sync.groups()
        gone = {
            g
            for g in groups_to_forget(known, on_source, self.s.should_replicate_group)
            if not ledger.in_flight(g)
        }
        if not gone:
            return gone
        for group in gone:
            self._previous_read.pop(group, None)
        self._retry -= gone
        ledger.forget(gone)
        self.group_sync.forget(gone)
        log.info(
            "flow %s: forgot the checkpoint state of %d group(s) gone from %s or filtered out",
            self.s.name, len(gone), self.s.source,
        )  # fmt: skip
        return gone

    # -- group offset sync -----------------------------------------------------------------------

    def sync_group_offsets(self, target_groups: GroupAdmin) -> int:
        """Commit the written checkpoints' offsets to the groups on the target that have no
        active members there (never rewinding them); returns how many groups were committed.
        Only groups with checkpoints newer than their last sync are looked at, all of them every
        tenth call. A group absent on the target is created only if it never existed there
        (:class:`~mirrorlib.core.checkpointing.GroupOffsetSync`); the groups gone from the source
        are forgotten first (:meth:`forget_gone_groups`). Describes, reads and commits many
        groups per round trip."""
        s = self.s
        self.forget_gone_groups()
        sync, store = self.group_sync, self.ledger.store
        wanted = sync.wanted(store)
        if not wanted:
            return 0
        try:
            states = target_groups.states(sorted(wanted))
        except Exception as exc:
            log.warning("flow %s: cannot describe groups on %s: %s", s.name, s.target, exc)
            return 0
        actions = sync.decide(wanted, states)
        for group, action in actions.items():
            if action is TargetGroupAction.DELETED_NOW:
                log.warning(
                    "flow %s: group %s was deleted on %s (it existed there): offset sync "
                    "leaves it alone and does not re-create it; it is synced again once it "
                    "exists there again", s.name, group, s.target,
                )  # fmt: skip
        # active (or unknown) on the target: never touch them
        idle = [
            g
            for g, a in actions.items()
            if a in (TargetGroupAction.CREATE, TargetGroupAction.UPDATE)
        ]
        empty = [g for g in idle if actions[g] is TargetGroupAction.UPDATE]
        current: Mapping[str, Mapping[TopicPartition, OffsetAndMetadata] | Exception] = (
            target_groups.committed_offsets_many(empty) if empty else {}
        )
        commits: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        for group in idle:
            found = current.get(group)
            if isinstance(found, Exception):
                log.warning(
                    "flow %s: syncing offsets of group %s to %s failed: %s",
                    s.name, group, s.target, found,
                )  # fmt: skip
                continue
            offsets = sync.offsets(store, group, wanted[group], found)
            if offsets:
                commits[group] = offsets
        done = 0
        for group, err in target_groups.commit_offsets_many(commits).items():
            if err is not None:
                sync.failed(group)
                log.warning(
                    "flow %s: syncing offsets of group %s to %s failed: %s",
                    s.name, group, s.target, err,
                )  # fmt: skip
                continue
            done += 1
            sync.committed(group)
            log.info(
                "flow %s: synced %d offsets of group %s to %s",
                s.name, len(commits[group]), group, s.target,
            )  # fmt: skip
        return done


class _Cycle:
    """One checkpoint cycle's writes: a :class:`~mirrorlib.core.checkpointing.CheckpointPass`
    decides group by group (:meth:`group`) which checkpoints to write; this produces them and
    hands the target's answers back to the ledger.

    The checkpoints of a cycle are written with one delivery callback (:meth:`done`), which
    takes their reports in the order they were written: librdkafka reports the messages of a
    partition in order, and all checkpoints go to partition 0. A checkpoint is recorded (in the
    store, metrics) only when acknowledged.

    A cycle may write a checkpoint for each of hundreds of thousands of pairs, so what a written
    checkpoint needs until its report is appended flat to :attr:`_sent` (no tuple or value per
    checkpoint that would survive into the old generations and trigger full collections over
    the task's large state).
    """

    __slots__ = (
        "_acked",
        "_clear",
        "_closed",
        "_commit_ages",
        "_committed_after",
        "_group",
        "_latencies",
        "_pass",
        "_producer",
        "_read_ms",
        "_sent",
        "_sync_ages",
        "_task",
    )

    def __init__(
        self, task: CheckpointTask, decide: CheckpointPass, producer: Any, read_ms: int
    ) -> None:
        self._task = task
        self._pass = decide
        self._producer = producer
        self._read_ms = read_ms
        # _SENT_WIDTH entries per checkpoint, in the order written
        self._sent: list[Any] = []
        self._acked = 0
        self._clear = True  # whether an acknowledgement should clear the task's error
        self._group = ""  # the group being written
        self._committed_after: Callable[[TopicPartition], int | None] = _never
        # the acknowledged checkpoints' metric values, recorded in bulk by :meth:`close`
        self._latencies: list[float] = []
        self._commit_ages: list[float] = []
        self._sync_ages: list[float] = []
        self._closed = False

    @property
    def pairs(self) -> int:
        return self._pass.pairs

    @property
    def translated(self) -> int:
        return self._pass.translated

    @property
    def produced(self) -> int:
        return self._pass.produced

    def group(
        self,
        group: str,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        committed_after: Callable[[TopicPartition], int | None],
    ) -> None:
        """Write the checkpoints of ``group`` that the ledger decides on
        (:meth:`~mirrorlib.core.checkpointing.CheckpointPass.group`). ``committed_after``: when
        the offset of a pair that moved was committed at the latest (for the metrics)."""
        self._group = group
        self._committed_after = committed_after
        self._pass.group(group, offsets, self._write)

    def _write(
        self,
        key: bytes,
        tp: TopicPartition,
        dtp: TopicPartition,
        fields: _Fields,
        moved: bool,
        sync_ms: int | None,
    ) -> None:
        offset, down, metadata = fields
        value = Checkpoint.value_bytes(offset, down, metadata)
        deadline = None
        while True:
            try:
                self._producer.produce(
                    self._task.s.checkpoints_topic,
                    value,
                    key,
                    0,
                    timestamp=self._read_ms,
                    on_delivery=self.done,
                )
                break
            except BufferError:  # queue full: serve delivery reports, then retry
                now = time.monotonic()
                if deadline is None:
                    deadline = now + self._task.s.admin_timeout
                elif now >= deadline:
                    raise
                self._producer.poll(0.05)
        committed_after_ms = self._committed_after(tp) if moved else None
        self._sent += (self._group, tp, dtp, fields, committed_after_ms, sync_ms)

    @property
    def current(self) -> str:
        """The group being written (the last one :meth:`group` was called for)."""
        return self._group

    def done(self, err: Any, _msg: Any) -> None:
        """The delivery report of the next checkpoint written: only an acknowledged checkpoint
        is recorded, so a failed write is emitted again on the next cycle and group offset sync
        never commits from it. Records the checkpoint's metrics, at its acknowledgement ``now``:

        * ``checkpoint-latency-ms`` (MM2's): ``now - read_ms``, ``read_ms`` being the time the
          group's committed offsets were read (the checkpoint record's timestamp);
        * ``checkpoint-commit-age-seconds``: ``now - committed_after_ms``: commit -> checkpoint
          written. Following ``__consumer_offsets``, ``committed_after_ms`` is the coordinator's
          commit timestamp, so this is the checkpoint latency itself. With OffsetFetch it is the
          previous read of the group's offsets, at which the partition's committed offset was
          still different: the commit happened after it, so this bounds the latency from above.
          Only for checkpoints whose offset changed;
        * ``checkpoint-sync-age-seconds``: ``read_ms - sync_ms``, ``sync_ms`` being the record
          timestamp (the writer's produce time) of the newest offset sync of the partition the
          translator had read: how far the syncs used trail the offsets they translate.
        """
        start = self._acked * _SENT_WIDTH
        self._acked += 1
        sent = self._sent
        group, tp, dtp, fields = sent[start], sent[start + 1], sent[start + 2], sent[start + 3]
        committed_after_ms, sync_ms = sent[start + 4], sent[start + 5]
        task = self._task
        stats = task.stats
        if err is not None:
            # translate the pair again on the next cycle, changed or not
            task.ledger.failed(group, tp, dtp, fields)
            if task.following_commits:
                task._retry.add(group)
            stats.set_error("checkpoints", f"writing a checkpoint failed: {err}")
            self._clear = True
            return
        task.ledger.acknowledged(group, dtp, fields)
        if self._clear:
            stats.set_error("checkpoints", None)
            self._clear = False
        now = int(time.time() * 1000)
        read_ms = self._read_ms
        self._latencies.append(now - read_ms)
        # (conditionals rather than max(): this runs once per checkpoint)
        if committed_after_ms is not None:
            age = now - committed_after_ms
            self._commit_ages.append(age / 1000 if age > 0 else 0.0)
        if sync_ms is not None:
            age = read_ms - sync_ms
            self._sync_ages.append(age / 1000 if age > 0 else 0.0)
        if self._closed:  # a report after the cycle's flush gave up waiting
            self.close()

    def close(self) -> None:
        """Record the metrics of the checkpoints acknowledged so far (once per cycle, after its
        flush, rather than three histogram updates in every delivery report); later reports
        record their own."""
        self._closed = True
        stats = self._task.stats
        if self._latencies:
            stats.checkpoints_emitted += len(self._latencies)
            stats.last_checkpoint_ms = self._read_ms + int(self._latencies[-1])
        for window, values in (
            (stats.checkpoint_latency, self._latencies),
            (stats.checkpoint_commit_age, self._commit_ages),
            (stats.checkpoint_sync_age, self._sync_ages),
        ):
            window.record_many(values)
            values.clear()


def _never(_tp: TopicPartition) -> int | None:
    return None


def _changed_since(
    previous: tuple[int, Mapping[TopicPartition, OffsetAndMetadata]] | None,
    current: Mapping[TopicPartition, OffsetAndMetadata],
) -> Callable[[TopicPartition], int | None]:
    """OffsetFetch mode: the previous read's time for partitions whose offset changed since."""

    def committed_after(tp: TopicPartition) -> int | None:
        if previous is None:
            return None
        before = previous[1].get(tp)
        now = current.get(tp)
        return previous[0] if before is None or now is None or before.offset != now.offset else None

    return committed_after


def _commit_time(commits: CommitTable, group: str) -> Callable[[TopicPartition], int | None]:
    """``__consumer_offsets`` mode: the commit timestamp of the pair's offset."""
    return commits.commit_times(group).get
