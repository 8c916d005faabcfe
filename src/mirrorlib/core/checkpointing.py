"""Checkpoint and group-offset-sync decisions, as pure functions (MM2's MirrorCheckpointTask).

* :func:`rename_topic` — the downstream name of an upstream topic in a checkpoint: a topic that
  came *from* the target maps back to its original name (``B.t`` → ``t`` for flow A->B);
  anything else is formatted as a remote topic (``t`` → ``A.t``).
* :class:`CheckpointStore` — the last checkpoint per (group, downstream partition); loaded from the
  checkpoints topic at start so a restarted replicator never emits a checkpoint that goes
  backwards.
* :func:`checkpoints_for_group` — translate a group's upstream offsets; keep only those that are
  more recent than the stored checkpoint (first, upstream rewind, or downstream advance).
* :func:`group_offsets_to_sync` — which translated offsets may be written to the target group:
  only for groups that are empty or absent there, only forward (never rewinds a target group).
* :func:`groups_to_forget` — the groups whose state a checkpoint task drops: gone from the
  source (deleted, or their offsets expired) or no longer passing the group filter.
* :class:`TargetGroups` — what group offset sync may do to a group on the target: create it only
  if it never existed there (a group an operator deleted is never re-created), update it
  forward while it is empty, never touch it while active or unknown.
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

__all__ = [
    "PROMPT_GROUP_SPACING",
    "PROMPT_PASS_SPACING",
    "CheckpointFields",
    "CheckpointStore",
    "PromptSchedule",
    "TargetGroupAction",
    "TargetGroups",
    "checkpoints_for_group",
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

    def is_more_recent(self, checkpoint: Checkpoint) -> bool:
        """MM2's checkpointIsMoreRecent: first for the partition, an upstream rewind, or a
        strictly advancing downstream offset."""
        last = self._by_group.get(checkpoint.group, _EMPTY).get(checkpoint.topic_partition)
        return is_more_recent(last, checkpoint.upstream_offset, checkpoint.downstream_offset)


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


def checkpoints_for_group(
    group: str,
    upstream_offsets: Mapping[TopicPartition, OffsetAndMetadata | None],
    *,
    translate: Callable[[str, int, int], int | None],
    rename: Callable[[str], str],
    should_checkpoint_topic: Callable[[str], bool],
    store: CheckpointStore,
) -> list[Checkpoint]:
    """New checkpoints for ``group`` given its committed offsets on the source cluster.

    Partitions whose topic the flow does not replicate, without an offset, or whose offset cannot
    be translated safely (no offset sync, or older than the kept history) get none.
    """
    out: list[Checkpoint] = []
    for tp, om in sorted(upstream_offsets.items(), key=lambda kv: kv[0]):
        if om is None or om.offset < 0 or not should_checkpoint_topic(tp.topic):
            continue
        downstream = translate(tp.topic, tp.partition, om.offset)
        if downstream is None or downstream < 0:
            continue
        cp = Checkpoint(group, rename(tp.topic), tp.partition, om.offset, downstream, om.metadata)
        if store.is_more_recent(cp):
            out.append(cp)
    return out


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
