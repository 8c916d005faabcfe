"""Checkpoint and group-offset-sync decisions, as pure functions (MM2's MirrorCheckpointTask).

* :func:`rename_topic` — the downstream name of an upstream topic in a checkpoint: a topic that
  came *from* the target maps back to its original name (``B.t`` → ``t`` for flow A->B);
  anything else is formatted as a remote topic (``t`` → ``A.t``).
* :class:`CheckpointStore` — the last checkpoint per (group, downstream partition); loaded from the
  checkpoints topic at start so a restarted replicator never emits a checkpoint that goes
  backwards.
* :class:`CheckpointLedger` — what a checkpoint task knows per (group, partition), and the rule
  that decides which checkpoints to write: translate a group's upstream offsets; keep only those
  more recent than the stored checkpoint (first, upstream rewind, or downstream advance) and not
  already in flight; skip the pairs that cannot have changed. A :class:`CheckpointPass` is one
  cycle of it; the runtime only reads and writes.
* :func:`group_offsets_to_sync` — which translated offsets may be written to the target group:
  only for groups that are empty or absent there, only forward (never rewinds a target group).
* :func:`groups_to_forget` — the groups whose state a checkpoint task drops: gone from the
  source (deleted, or their offsets expired) or no longer passing the group filter.
* :class:`TargetGroups` — what group offset sync may do to a group on the target: create it only
  if it never existed there (a group an operator deleted is never re-created), update it
  forward while it is empty, never touch it while active or unknown.
* :class:`GroupOffsetSync` — one group offset sync round after another: which groups to look at,
  what to do with each, what to commit.
* :func:`next_emission` — when checkpoints are due next: at a fixed rate, so a commit waits at
  most one ``emit.checkpoints.interval.seconds`` for the read of its group's offsets.
* :class:`PromptSchedule` — when a group whose commit was just read gets its checkpoints written
  at once (a *prompt pass*) instead of at the next fixed-rate cycle: at most once per group
  spacing per group, and passes at most once per pass spacing (a burst of commits is coalesced).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Collection, Container, Iterable, Mapping
from types import MappingProxyType
from typing import Final

from mirrorlib.core.policy import ReplicationPolicy
from mirrorlib.core.records import Checkpoint, OffsetAndMetadata, TopicPartition
from mirrorlib.core.translate import OffsetTranslator

__all__ = [
    "FULL_SYNC_EVERY",
    "PROMPT_GROUP_SPACING",
    "PROMPT_PASS_SPACING",
    "CheckpointFields",
    "CheckpointLedger",
    "CheckpointPass",
    "CheckpointStore",
    "GroupOffsetSync",
    "PromptSchedule",
    "TargetGroupAction",
    "TargetGroups",
    "WriteCheckpoint",
    "group_offsets_to_sync",
    "groups_to_forget",
    "is_more_recent",
    "next_emission",
    "rename_topic",
]


def next_emission(due: float, interval: float, now: float) -> float:
    """The next due time of checkpoints last due at ``due``, at a fixed rate of ``interval``
    seconds: the first ``due + k * interval`` (``k >= 1``) after ``now``. A cycle that took
    longer than the interval skips the slots it missed instead of shifting all later ones, and
    ``interval <= 0`` means "again now"."""
    if interval <= 0:
        return now
    missed = max(int((now - due) // interval), 0)
    return due + (missed + 1) * interval


#: Prompt checkpoints: a group's checkpoints are written at most this often (seconds) by prompt
#: passes, however often it commits (its fixed-rate cycle comes on top).
PROMPT_GROUP_SPACING: Final = 0.1
#: Prompt checkpoints: at most one prompt pass per this many seconds; commits read meanwhile wait
#: for the next pass together.
PROMPT_PASS_SPACING: Final = 0.05


class PromptSchedule:
    """Which groups with newly read commits get a prompt checkpoint pass, and when.

    :meth:`add` the groups whose commits changed; :meth:`due` takes the groups whose pass may run
    now: a group passes at most once per ``group_spacing`` seconds (counting the fixed-rate
    cycles that covered it, :meth:`passed`), and passes run at most once per ``pass_spacing``
    seconds, so commits read in a burst are written together and the write rate per group is
    bounded whatever the commit rate. :meth:`take_all` hands every waiting group to a fixed-rate
    cycle. With ``group_spacing`` = the emit interval, only a group that had no cycle for a whole
    interval passes promptly (checkpoints on commit turned off). Times are monotonic seconds.
    """

    def __init__(self, group_spacing: float, pass_spacing: float) -> None:
        self.group_spacing = group_spacing
        self.pass_spacing = pass_spacing
        self._waiting: dict[str, float] = {}  # group -> earliest time of its pass
        self._passed: dict[str, float] = {}  # group -> time of its last pass or cycle
        self._next_pass = -math.inf

    def add(self, groups: Iterable[str]) -> None:
        """Groups whose committed offsets changed."""
        waiting, passed, spacing = self._waiting, self._passed, self.group_spacing
        for group in groups:
            if group not in waiting:
                waiting[group] = passed.get(group, -math.inf) + spacing

    def __bool__(self) -> bool:
        """Whether a group is waiting for a pass."""
        return bool(self._waiting)

    def next_due(self) -> float | None:
        """When the next pass may run (``None``: no group is waiting)."""
        if not self._waiting:
            return None
        return max(min(self._waiting.values()), self._next_pass)

    def due(self, now: float) -> set[str]:
        """The groups whose pass runs now (forgotten as waiting, recorded as passed at
        ``now``); empty before the pass spacing since the previous pass has elapsed."""
        if now < self._next_pass or not self._waiting:
            return set()
        ready = {group for group, at in self._waiting.items() if at <= now}
        if ready:
            self._next_pass = now + self.pass_spacing
            self.passed(ready, now)
        return ready

    def take_all(self, now: float) -> set[str]:
        """Every waiting group, for a fixed-rate cycle at ``now`` (which the caller records
        with :meth:`passed`); forgets passes older than the group spacing."""
        waiting, self._waiting = self._waiting, {}
        horizon = now - self.group_spacing
        self._passed = {g: at for g, at in self._passed.items() if at > horizon}
        return set(waiting)

    def passed(self, groups: Iterable[str], now: float) -> None:
        """Record that ``groups`` were translated at ``now`` (a pass or a fixed-rate cycle)."""
        waiting, passed = self._waiting, self._passed
        for group in groups:
            passed[group] = now
            waiting.pop(group, None)


def rename_topic(policy: ReplicationPolicy, source: str, target: str, topic: str) -> str:
    """The topic name a checkpoint for upstream ``topic`` carries (MM2's renameTopicPartition)."""
    if policy.topic_source(topic) == target:
        return policy.original_topic(topic)
    return policy.format_remote_topic(source, topic)


#: A stored checkpoint's ``(upstream_offset, downstream_offset, metadata)``.
CheckpointFields = tuple[int, int, str]


class CheckpointStore:
    """The latest checkpoint per group and downstream topic-partition.

    Kept as :data:`CheckpointFields` tuples, not :class:`Checkpoint` values: a flow holds one per
    (group, partition), hundreds of thousands, replaced on every cycle. A tuple of ints and a
    string is cheap to build and is untracked by Python's garbage collector after its first
    collection, so a large store adds nothing to the collections a checkpoint cycle triggers.
    """

    def __init__(self) -> None:
        self._by_group: dict[str, dict[TopicPartition, CheckpointFields]] = {}

    def add(self, checkpoint: Checkpoint, tp: TopicPartition | None = None) -> None:
        """Record ``checkpoint`` (``tp``: its ``topic_partition``, if the caller has it)."""
        fields = (checkpoint.upstream_offset, checkpoint.downstream_offset, checkpoint.metadata)
        self.put(checkpoint.group, checkpoint.topic_partition if tp is None else tp, fields)

    def put(self, group: str, tp: TopicPartition, fields: CheckpointFields) -> None:
        """Record the checkpoint ``fields`` of ``group`` for downstream partition ``tp``."""
        by_tp = self._by_group.get(group)
        if by_tp is None:
            by_tp = self._by_group[group] = {}
        by_tp[tp] = fields

    def latest(self, group: str) -> Mapping[TopicPartition, CheckpointFields]:
        """The group's checkpoint fields per downstream partition, as a live read-only view (no
        copy: for a caller that looks many of them up)."""
        return self._by_group.get(group, _EMPTY)

    def get(self, group: str, tp: TopicPartition) -> Checkpoint | None:
        found = self._by_group.get(group, _EMPTY).get(tp)
        return None if found is None else Checkpoint(group, tp.topic, tp.partition, *found)

    def group(self, group: str) -> dict[TopicPartition, Checkpoint]:
        return {
            tp: Checkpoint(group, tp.topic, tp.partition, *fields)
            for tp, fields in self._by_group.get(group, _EMPTY).items()
        }

    def groups(self) -> list[str]:
        return sorted(self._by_group)

    def offsets_to_sync(
        self,
        group: str,
        target_offsets: Mapping[TopicPartition, OffsetAndMetadata | None] | None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """:func:`group_offsets_to_sync` of ``group``'s stored checkpoints."""
        return _offsets_to_sync(
            ((tp, down, metadata) for tp, (_up, down, metadata) in self.latest(group).items()),
            target_offsets,
        )

    def forget(self, groups: Iterable[str]) -> None:
        """Drop every checkpoint of ``groups`` (see :func:`groups_to_forget`)."""
        by_group = self._by_group
        for group in groups:
            by_group.pop(group, None)

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_group.values())


_EMPTY: Mapping[TopicPartition, CheckpointFields] = MappingProxyType({})


def is_more_recent(
    last: CheckpointFields | None, upstream_offset: int, downstream_offset: int
) -> bool:
    """MM2's checkpointIsMoreRecent for a new checkpoint ``(upstream_offset,
    downstream_offset)`` of a partition whose last one has the fields ``last``: the first for
    the partition, an upstream rewind, or a strictly advancing downstream offset."""
    if last is None or upstream_offset < last[0]:
        return True
    return downstream_offset > last[1]


#: Writes one checkpoint the ledger decided on (:meth:`CheckpointPass.group`): its key bytes,
#: the upstream and downstream partitions, its fields, whether the group's offset on the
#: partition moved since it was last translated, and the record timestamp (ms) of the newest
#: offset sync of the upstream partition (``None``: unknown). Raising means "not written".
WriteCheckpoint = Callable[
    [bytes, TopicPartition, TopicPartition, CheckpointFields, bool, "int | None"], None
]

#: What a pass knows of an upstream partition: the translator's stamp, the downstream
#: partition (``None``: not checkpointed), its key bytes, the newest sync's time, and the
#: translator's answers for the partition's offsets so far in the pass.
_Part = tuple[
    tuple[int, int] | None, TopicPartition | None, bytes, int | None, dict[int, int | None]
]


class CheckpointLedger:
    """What a checkpoint task knows per (group, upstream partition), and the rule that says
    which checkpoints to write (MM2's MirrorCheckpointTask): translate the group's committed
    offset with the :class:`~mirrorlib.core.translate.OffsetTranslator`, and write a checkpoint
    when the translation is more recent than the group's last acknowledged one
    (:func:`is_more_recent`) and is not already waiting for its acknowledgement.

    Two memories make a cycle cost what changed, not the number of groups:

    * the *memo*: per (group, partition), the offset translated and the translator's
      :meth:`~mirrorlib.core.translate.OffsetTranslator.stamp` of then. A pair whose offset did
      not change and whose partition got no sync that can change its answer is skipped;
    * the *in-flight table*: per (group, downstream partition), the checkpoint written and not
      yet acknowledged, so it is not written twice. :meth:`acknowledged` moves it into
      :attr:`store`; :meth:`failed` forgets it (and the memo of the pair), so the pair is
      translated and written again on the group's next cycle.

    A checkpoint counts only once acknowledged: :attr:`store` holds acknowledged checkpoints
    only, and group offset sync commits from it. The runtime reads and writes
    (:mod:`mirrorlib.runtime.checkpoints`); every decision is here.
    """

    def __init__(
        self,
        translator: OffsetTranslator,
        *,
        rename: Callable[[str], str],
        should_checkpoint_topic: Callable[[str], bool],
        store: CheckpointStore | None = None,
    ) -> None:
        self.translator = translator
        #: The acknowledged checkpoints (``store``: loaded elsewhere, e.g. from the checkpoints
        #: topic of an earlier run).
        self.store = CheckpointStore() if store is None else store
        self._rename = rename
        self._should_checkpoint = should_checkpoint_topic
        # Per group: checkpoints written and not yet acknowledged, per downstream partition.
        self._in_flight: dict[str, dict[TopicPartition, CheckpointFields]] = {}
        # Per group, per upstream partition translated: (offset, generation, newest up) of then.
        self._memo: dict[str, dict[TopicPartition, tuple[int, int, int]]] = {}
        # Per upstream partition: its downstream partition and key bytes, built once, so every
        # pass looks the store and in-flight tables up with the very key objects they hold
        # (a dict compares identical keys without calling TopicPartition.__eq__).
        self._downstream: dict[TopicPartition, tuple[TopicPartition, bytes]] = {}
        # Groups with a committed offset on each upstream partition (to re-translate on syncs).
        self._groups_of: dict[tuple[str, int], set[str]] = {}

    def begin(self, sync_ms: Mapping[tuple[str, int], int] | None = None) -> CheckpointPass:
        """A pass over groups (one checkpoint cycle). ``sync_ms``: the record timestamp (ms)
        of the newest offset sync read per upstream partition, handed to the writes."""
        return CheckpointPass(self, sync_ms if sync_ms is not None else _NO_SYNC_MS)

    def acknowledged(self, group: str, dtp: TopicPartition, fields: CheckpointFields) -> None:
        """The target acknowledged ``group``'s checkpoint ``fields`` for ``dtp``: it is the
        group's latest (a later write of the partition still in flight stays in flight)."""
        self._land(group, dtp, fields)
        self.store.put(group, dtp, fields)

    def failed(
        self, group: str, tp: TopicPartition, dtp: TopicPartition, fields: CheckpointFields
    ) -> None:
        """``group``'s checkpoint ``fields`` for ``dtp`` (upstream ``tp``) was not written or
        not acknowledged: neither in flight nor memoised, so the pair is translated and written
        again on the group's next cycle, changed or not."""
        self._land(group, dtp, fields)
        memo = self._memo.get(group)
        if memo is not None:
            memo.pop(tp, None)

    def _land(self, group: str, dtp: TopicPartition, fields: CheckpointFields) -> None:
        flying = self._in_flight.get(group)
        if flying is not None and flying.get(dtp) == fields:
            del flying[dtp]

    def in_flight(self, group: str) -> bool:
        """Whether a checkpoint of ``group`` waits for its acknowledgement."""
        return bool(self._in_flight.get(group))

    def drop_in_flight(self) -> set[str]:
        """Forget every checkpoint waiting for its acknowledgement: their producer is gone and
        no report will come. Returns the groups that had one; their memo is dropped too, so
        their next cycle translates every pair again and writes what the store lacks."""
        groups = {group for group, flying in self._in_flight.items() if flying}
        self._in_flight.clear()
        for group in groups:
            self._memo.pop(group, None)
        return groups

    def watching(self, partitions: Iterable[tuple[str, int]]) -> dict[str, None]:
        """The groups with a committed offset translated on any of ``partitions`` (upstream
        ``(topic, partition)``), in first-seen order: their translation may improve with the
        partitions' new syncs."""
        groups_of = self._groups_of
        found: dict[str, None] = {}
        for key in partitions:
            for group in groups_of.get(key, ()):
                found[group] = None
        return found

    def groups(self) -> set[str]:
        """The groups the ledger holds anything for."""
        return set(self.store.groups()) | self._memo.keys() | self._in_flight.keys()

    def forget(self, groups: Collection[str]) -> None:
        """Drop everything known of ``groups`` (see :func:`groups_to_forget`)."""
        for table in (self._memo, self._in_flight):
            for group in groups:
                table.pop(group, None)
        self.store.forget(groups)
        for key in list(self._groups_of):
            watchers = self._groups_of[key]
            watchers.difference_update(groups)
            if not watchers:
                del self._groups_of[key]

    def _watch(self, tp: TopicPartition, group: str) -> None:
        key = (tp.topic, tp.partition)
        watchers = self._groups_of.get(key)
        if watchers is None:
            watchers = self._groups_of[key] = set()
        watchers.add(group)


_NO_SYNC_MS: Mapping[tuple[str, int], int] = MappingProxyType({})


class CheckpointPass:
    """One pass of a :class:`CheckpointLedger` over groups (:meth:`group`), with what the
    groups share computed once per upstream partition (the translator's stamp, the downstream
    partition and its key bytes, the newest sync's time) and per (partition, offset) (the
    translation). Counts the pairs looked at, translated and written.

    A pass may decide a checkpoint for each of hundreds of thousands of pairs, so the per-pair
    path builds no object the garbage collector keeps tracking beyond the fields tuple (ints
    and a string, untracked after one collection), shared by the in-flight table and, once
    acknowledged, the store.
    """

    __slots__ = ("_ledger", "_parts", "_sync_ms", "pairs", "produced", "translated")

    def __init__(self, ledger: CheckpointLedger, sync_ms: Mapping[tuple[str, int], int]) -> None:
        self._ledger = ledger
        self._sync_ms = sync_ms
        self._parts: dict[TopicPartition, _Part] = {}
        self.pairs = self.translated = self.produced = 0

    def _partition(self, tp: TopicPartition) -> _Part:
        ledger = self._ledger
        stamp = ledger.translator.stamp(tp.topic, tp.partition)
        if not ledger._should_checkpoint(tp.topic):
            found: _Part = (stamp, None, b"", None, {})
        else:
            downstream = ledger._downstream.get(tp)
            if downstream is None:
                topic = ledger._rename(tp.topic)
                downstream = ledger._downstream[tp] = (
                    TopicPartition(topic, tp.partition),
                    Checkpoint.key_suffix(topic, tp.partition),
                )
            dtp, suffix = downstream
            found = (stamp, dtp, suffix, self._sync_ms.get((tp.topic, tp.partition)), {})
        self._parts[tp] = found
        return found

    def group(  # noqa: PLR0912 - the per-pair hot loop, kept whole (no per-pair calls)
        self,
        group: str,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        write: WriteCheckpoint,
    ) -> None:
        """Decide ``group``'s checkpoints from its committed ``offsets`` and ``write`` each.

        A pair is translated when it is worth it -- a new offset, or new syncs that can change
        the answer (:meth:`~mirrorlib.core.translate.OffsetTranslator.stamp`) -- and written
        when its topic is checkpointed, its offset translates safely, the translation is more
        recent than the group's last acknowledged checkpoint (:func:`is_more_recent`) and the
        same checkpoint is not in flight already. A write that raises leaves the pair
        unwritten (:meth:`CheckpointLedger.failed`) and ends the pass."""
        ledger = self._ledger
        memo = ledger._memo.get(group)
        if memo is None:
            memo = ledger._memo[group] = {}
        flying = ledger._in_flight.get(group)
        if flying is None:
            flying = ledger._in_flight[group] = {}
        latest = ledger.store.latest(group)
        parts, translate = self._parts, ledger.translator.translate
        prefix = Checkpoint.key_prefix(group)
        translated = produced = 0
        for tp, om in offsets.items():
            part = parts.get(tp)
            if part is None:
                part = self._partition(tp)
            stamp, dtp, suffix, sync_ms, answers = part
            offset = om.offset
            before = memo.get(tp)
            if stamp is None:
                before = None  # no sync yet: nothing to translate, but never memoised
            else:
                generation, newest = stamp
                if (
                    before is not None
                    and before[0] == offset
                    and before[1] == generation
                    and (offset <= before[2] or newest == before[2])
                ):
                    continue
                memo[tp] = (offset, generation, newest)
            translated += 1
            if before is None:
                ledger._watch(tp, group)
            if dtp is None or stamp is None or offset < 0:
                continue
            down = answers.get(offset, -1)
            if down == -1:
                down = answers[offset] = translate(tp.topic, tp.partition, offset)
            if down is None or down < 0 or not is_more_recent(latest.get(dtp), offset, down):
                continue
            fields = (offset, down, om.metadata)
            if flying.get(dtp) == fields:
                continue  # still waiting for its acknowledgement
            flying[dtp] = fields
            try:
                write(prefix + suffix, tp, dtp, fields, before is None or before[0] != offset,
                      sync_ms)  # fmt: skip
            except BaseException:
                ledger.failed(group, tp, dtp, fields)
                raise
            produced += 1
        self.pairs += len(offsets)
        self.translated += translated
        self.produced += produced


def group_offsets_to_sync(
    checkpoints: Iterable[Checkpoint],
    target_offsets: Mapping[TopicPartition, OffsetAndMetadata | None] | None,
) -> dict[TopicPartition, OffsetAndMetadata]:
    """Offsets to commit for a group on the target, from its latest checkpoints.

    ``target_offsets`` is the group's committed offsets on the target when the group is empty
    there, or ``None`` when it does not exist. (Call it only for those two cases: never for a group
    with active members.) A partition is written when the target has no offset (or a null one)
    for it, or when the checkpoint is strictly ahead: the target group is never rewound.
    """
    return _offsets_to_sync(
        ((cp.topic_partition, cp.downstream_offset, cp.metadata) for cp in checkpoints),
        target_offsets,
    )


def _offsets_to_sync(
    checkpoints: Iterable[tuple[TopicPartition, int, str]],
    target_offsets: Mapping[TopicPartition, OffsetAndMetadata | None] | None,
) -> dict[TopicPartition, OffsetAndMetadata]:
    result: dict[TopicPartition, OffsetAndMetadata] = {}
    for tp, downstream_offset, metadata in checkpoints:
        current = None if target_offsets is None else target_offsets.get(tp)
        if current is not None and current.offset >= 0 and current.offset >= downstream_offset:
            continue
        result[tp] = OffsetAndMetadata(downstream_offset, metadata)
    return result


# -- what a checkpoint task forgets, and what offset sync may do on the target ------------------


def groups_to_forget(
    known: Iterable[str], on_source: Container[str], should_replicate: Callable[[str], bool]
) -> set[str]:
    """The groups of ``known`` (those a checkpoint task holds state for) to forget: no longer on
    the source (``on_source``: the groups that exist there, or have committed offsets -- a
    group deleted there, or whose offsets all expired, is gone), or no longer passing the
    flow's group filter. Their checkpoints are no longer synced to the target either; a group
    of the same name that commits again later is a new group."""
    return {g for g in known if g not in on_source or not should_replicate(g)}


class TargetGroupAction(enum.Enum):
    """What group offset sync does to a group on the target (:meth:`TargetGroups.decide`)."""

    CREATE = "create"  # absent, and never seen there: commit its offsets (creating it)
    UPDATE = "update"  # empty: commit the offsets strictly ahead of its own (never rewinds)
    SKIP = "skip"  # active (its members own its offsets) or unknown: never touched
    DELETED_NOW = "deleted-now"  # absent although it existed there: deleted; never re-created
    DELETED = "deleted"  # still absent after that: still left alone


class TargetGroups:
    """What group offset sync knows of the groups on the target, to tell a group that never
    existed there (created, like MM2 does) from one an operator deleted (never re-created with
    offsets the operator threw away, which MM2 does).

    A group counts as having existed on the target once offset sync committed into it, or
    found it there (empty or active). A group absent afterwards was deleted (or its offsets
    expired there): it is left alone until it appears again (its consumers start there, or
    someone commits for it), when it is updated forward again. The memory lasts as long as the
    checkpoint task: after a restart, a group deleted on the target while the source group
    still has checkpoints is created again, once. :meth:`forget` drops the groups the
    checkpoint task forgets (:func:`groups_to_forget`).
    """

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._deleted: set[str] = set()

    @property
    def deleted(self) -> set[str]:
        """The groups found deleted on the target (and not back since)."""
        return set(self._deleted)

    def decide(self, group: str, state: str) -> TargetGroupAction:
        """The action for ``group``, whose state on the target is ``state`` (``"absent"``,
        ``"empty"``, ``"active"`` or ``"unknown"``); records what the state tells."""
        if state in ("empty", "active"):
            self._seen.add(group)
            self._deleted.discard(group)
            return TargetGroupAction.UPDATE if state == "empty" else TargetGroupAction.SKIP
        if state != "absent":
            return TargetGroupAction.SKIP
        if group in self._deleted:
            return TargetGroupAction.DELETED
        if group in self._seen:
            self._seen.discard(group)
            self._deleted.add(group)
            return TargetGroupAction.DELETED_NOW
        return TargetGroupAction.CREATE

    def committed(self, group: str) -> None:
        """Offset sync committed ``group``'s offsets on the target: it exists there now."""
        self._seen.add(group)
        self._deleted.discard(group)

    def forget(self, groups: Collection[str]) -> None:
        """Drop what is known of ``groups``."""
        self._seen.difference_update(groups)
        self._deleted.difference_update(groups)

    def __len__(self) -> int:
        return len(self._seen) + len(self._deleted)


#: Every this many group offset sync rounds, every group is looked at, changed or not.
FULL_SYNC_EVERY: Final = 10


class GroupOffsetSync:
    """What group offset sync (``sync.group.offsets.enabled``) commits to the groups on the
    target, round by round: the downstream offsets of a group's acknowledged checkpoints,
    into a group with no active members there, never rewinding it, and never re-creating a
    group an operator deleted there (:class:`TargetGroups`).

    A round: :meth:`wanted` (the groups worth looking at: those whose checkpoints changed
    since their last sync, every group each :data:`FULL_SYNC_EVERY`-th round), then the
    runtime describes them on the target and :meth:`decide` says what to do with each; for
    the groups to create or update, the runtime reads the offsets of the empty ones and
    :meth:`offsets` says what to commit; :meth:`committed` or :meth:`failed` record the result.
    """

    def __init__(self, full_every: int = FULL_SYNC_EVERY) -> None:
        self.target = TargetGroups()
        self._full_every = full_every
        self._rounds = 0
        # Per group: the downstream offsets last written or found on the target.
        self._synced: dict[str, dict[TopicPartition, int]] = {}

    def wanted(self, store: CheckpointStore) -> dict[str, dict[TopicPartition, int]]:
        """This round's groups and the downstream offsets of their checkpoints."""
        full = self._rounds % self._full_every == 0
        self._rounds += 1
        wanted: dict[str, dict[TopicPartition, int]] = {}
        for group in store.groups():
            cps = {tp: down for tp, (_up, down, _md) in store.latest(group).items()}
            if full or cps != self._synced.get(group):
                wanted[group] = cps
        return wanted

    def decide(
        self, wanted: Mapping[str, Mapping[TopicPartition, int]], states: Mapping[str, str]
    ) -> dict[str, TargetGroupAction]:
        """The action per group of ``wanted``, given its state on the target (``states``:
        ``"absent"``, ``"empty"``, ``"active"``, ``"unknown"``; a group missing is unknown).
        A group found deleted is looked at again in full rounds only."""
        actions = {g: self.target.decide(g, states.get(g, "unknown")) for g in wanted}
        for group, action in actions.items():
            if action in (TargetGroupAction.DELETED_NOW, TargetGroupAction.DELETED):
                self._synced[group] = dict(wanted[group])
        return actions

    def offsets(
        self,
        store: CheckpointStore,
        group: str,
        wanted: Mapping[TopicPartition, int],
        found: Mapping[TopicPartition, OffsetAndMetadata | None] | None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The offsets to commit for ``group`` (to create or update), given its committed
        offsets on the target (``found``; ``None``: absent there): :func:`group_offsets_to_sync`
        of its stored checkpoints. Records the partitions that are in sync after the commit."""
        offsets = store.offsets_to_sync(group, found)
        known = {tp: om.offset for tp, om in (found or {}).items() if om is not None}
        self._synced[group] = {
            tp: down for tp, down in wanted.items() if tp in offsets or known.get(tp, -1) >= down
        }
        return offsets

    def committed(self, group: str) -> None:
        """The commit of ``group``'s offsets on the target succeeded."""
        self.target.committed(group)

    def failed(self, group: str) -> None:
        """The commit of ``group``'s offsets on the target failed: looked at next round."""
        self._synced.pop(group, None)

    def groups(self) -> set[str]:
        """The groups group offset sync holds anything for."""
        return set(self._synced)

    def forget(self, groups: Collection[str]) -> None:
        """Drop what is known of ``groups``."""
        for group in groups:
            self._synced.pop(group, None)
        self.target.forget(groups)
