"""The failover planner, pure: which offsets a consumer group moving between clusters resumes at.

:func:`plan_failover` computes a :class:`FailoverPlan` from plain inputs (committed offsets, group
states, checkpoints, offset syncs); :func:`reverse_translate` and :func:`exact_position` are its
translation helpers. The rules are described in :mod:`mirrorlib.runtime.failover`, which gathers
the inputs from the clusters and applies the plan.

Many groups at once: :func:`select_groups` says which groups a batch moves,
:func:`plan_failovers` plans each of them from inputs read for all of them together
(:class:`GroupInputs`), and :class:`BatchFailover` holds the result of each group
(:class:`GroupFailover`).
"""

from __future__ import annotations

import bisect
import enum
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

import attrs

from mirrorlib.core.records import Checkpoint, OffsetAndMetadata, TopicPartition
from mirrorlib.core.report import Block, Table, render_plain
from mirrorlib.core.translate import OffsetTranslator

__all__ = [
    "BatchFailover",
    "FailoverAction",
    "FailoverPlan",
    "GroupFailover",
    "GroupInputs",
    "GroupOutcome",
    "PartitionFailover",
    "checkpoints_by_group",
    "exact_position",
    "plan_failover",
    "plan_failovers",
    "retry_group_request",
    "reverse_translate",
    "select_groups",
]

#: Kafka errors of a group request (DescribeGroups, OffsetFetch) that a retry with fresh metadata
#: may clear: the group's coordinator is loading the group, moved to another broker, is not
#: available yet, or the request did not get an answer in time. Any other error (an
#: authorization error, say) is final.
RETRIABLE_GROUP_ERRORS: Final = frozenset({
    "COORDINATOR_LOAD_IN_PROGRESS",
    "NOT_COORDINATOR",
    "COORDINATOR_NOT_AVAILABLE",
    "REQUEST_TIMED_OUT",
    "_TIMED_OUT",
    "NETWORK_EXCEPTION",
    "_TRANSPORT",
})  # fmt: skip


def retry_group_request(code: str | None) -> bool:
    """Whether a group request that failed with Kafka's error ``code`` (its name, e.g.
    ``"NOT_COORDINATOR"``; ``None``: not a Kafka error) is worth retrying with fresh metadata
    (:data:`RETRIABLE_GROUP_ERRORS`)."""
    return code in RETRIABLE_GROUP_ERRORS


class FailoverAction(enum.StrEnum):
    """What happens to one partition."""

    COMMIT = "commit"  # the translated offset is committed on the new cluster
    KEEP = "keep"  # the group is already at or past the translation there: never rewound
    # (when past it, the records in between are never read: ``PartitionFailover.skipped``)
    SKIP = "skip"  # no safe translation: nothing is written (the reason says why)


@attrs.frozen
class PartitionFailover:
    """The plan for one partition of the new cluster.

    ``topic`` names the topic on the new cluster (``A.orders`` on ``B``), ``source_topic`` the
    topic the group consumed on the old cluster (``orders`` on ``A``). ``current`` is the group's
    committed offset on the new cluster (``None``: none), ``translated`` where it should resume,
    ``source_offset`` its committed offset on the old cluster (``None``: unknown or unreachable).
    ``re_read`` counts the records the group will read a second time (``None``: cannot be
    counted, e.g. the old cluster is unreachable or the translation is not exact). ``method``
    says where ``translated`` comes from: ``"offset-syncs"``, ``"checkpoint"`` or
    ``"reverse-offset-syncs"``.

    ``skipped`` counts the records the group will *never read*: when its committed offset on the
    new cluster (``current``) is past the first record it has not processed, the action is
    ``keep`` (a group is never rewound) and it resumes at ``current``. The count is ``current``
    minus the offset of that first record: ``translated + re_read`` when ``re_read`` is known
    (then the count is exact), else ``translated`` (then it is an upper bound: some of those
    records may be ones the group already processed on the old cluster). Like ``re_read`` it
    counts offsets of the new cluster's partition, so a transaction marker among them counts
    as a record. It is 0 for every other partition.
    """

    topic: str
    partition: int
    source_topic: str | None
    source_offset: int | None
    current: int | None
    translated: int | None
    re_read: int | None
    action: FailoverAction
    method: str
    reason: str = ""
    metadata: str = ""
    skipped: int = 0

    @property
    def skipped_exact(self) -> bool:
        """Whether ``skipped`` is exact (else an upper bound, see the class documentation)."""
        return self.skipped == 0 or self.re_read is not None

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "source_topic": self.source_topic,
            "source_offset": self.source_offset,
            "current": self.current,
            "translated": self.translated,
            "re_read": self.re_read,
            "skipped": self.skipped,
            "skipped_exact": self.skipped_exact,
            "action": str(self.action),
            "method": self.method,
            "reason": self.reason,
        }


@attrs.frozen
class FailoverPlan:
    """What a failover of ``group`` from ``from_alias`` to ``to_alias`` does (or did).

    ``refused`` is ``None`` when the plan may be applied, else the explanation. ``applied`` is
    true once the offsets were committed. ``notes`` are informational (e.g. the old cluster was
    unreachable, so checkpoints were used).
    """

    group: str
    from_alias: str
    to_alias: str
    partitions: tuple[PartitionFailover, ...]
    source_state: str
    target_state: str
    refused: str | None = None
    notes: tuple[str, ...] = ()
    applied: bool = False

    @property
    def offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """The offsets to commit on the new cluster (partitions whose action is ``commit``)."""
        return {
            p.topic_partition: OffsetAndMetadata(p.translated, p.metadata)
            for p in self.partitions
            if p.action is FailoverAction.COMMIT and p.translated is not None
        }

    @property
    def re_read_total(self) -> int | None:
        """Records re-read over all partitions that move, or ``None`` if any is unknown."""
        counts = [p.re_read for p in self.partitions if p.action is not FailoverAction.SKIP]
        if any(c is None for c in counts):
            return None
        return sum(c for c in counts if c is not None)

    @property
    def skipped_total(self) -> int:
        """Records the group will never read, over all partitions (see
        :attr:`PartitionFailover.skipped`; an upper bound where a partition's count is)."""
        return sum(p.skipped for p in self.partitions)

    @property
    def skipping(self) -> tuple[PartitionFailover, ...]:
        """The partitions where the group will skip records (``skipped > 0``)."""
        return tuple(p for p in self.partitions if p.skipped > 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "from": self.from_alias,
            "to": self.to_alias,
            "source_state": self.source_state,
            "target_state": self.target_state,
            "refused": self.refused,
            "applied": self.applied,
            "notes": list(self.notes),
            "re_read_total": self.re_read_total,
            "skipped_total": self.skipped_total,
            "partitions": [p.to_dict() for p in self.partitions],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def describe(self) -> str:
        """A readable table (what ``mirrorlib failover`` prints): :meth:`blocks` rendered."""
        return render_plain(self.blocks())

    def blocks(self) -> list[Block]:
        """Headline, a table of partitions, totals, notes and the verdict."""

        def cell(value: int | str | None) -> str:
            return "-" if value is None else str(value)

        head = (
            f"failover of group {self.group!r} from {self.from_alias} to {self.to_alias} "
            f"(group is {self.source_state} on {self.from_alias}, "
            f"{self.target_state} on {self.to_alias})"
        )
        rows = []
        for p in self.partitions:
            src = "-" if p.source_topic is None else f"{p.source_topic}-{p.partition}"
            if p.source_offset is not None:
                src += f"@{p.source_offset}"
            action = str(p.action) + (f" ({p.reason})" if p.reason else "")
            rows.append(
                (
                    f"{p.topic}-{p.partition}",
                    src,
                    cell(p.current),
                    cell(p.translated),
                    cell(p.re_read),
                    _skipped_cell(p),
                    action,
                    p.method,
                )
            )
        header = ("partition", "source", "current", "translated", "re-read", "skipped", "action",
                  "via")  # fmt: skip
        out: list[Block] = [head, Table(header, tuple(rows)) if rows else "  no partitions"]
        total = self.re_read_total
        moving = len(self.offsets)
        out.append(
            f"{moving} partition(s) to commit; records re-read: "
            + (str(total) if total is not None else "unknown for some partitions")
            + f"; records skipped: {_skipped_text(self.skipping, self.skipped_total)}"
        )
        out.extend(f"note: {n}" for n in self.notes)
        if self.refused:
            out.append(f"REFUSED: {self.refused}")
        elif self.applied:
            out.append(f"committed on {self.to_alias}")
        return out

    def __str__(self) -> str:
        return self.describe()


def _skipped_cell(p: PartitionFailover) -> str:
    return str(p.skipped) if p.skipped_exact else f"<={p.skipped}"


def _skipped_text(partitions: Iterable[PartitionFailover], total: int) -> str:
    """``total``, prefixed with "up to" when one of the counts is an upper bound."""
    exact = all(p.skipped_exact for p in partitions)
    return str(total) if exact else f"up to {total}"


# -- pure translation helpers -----------------------------------------------------------------


def reverse_translate(
    translator: OffsetTranslator, topic: str, partition: int, downstream_offset: int
) -> tuple[int, bool] | None:
    """Where a group that consumed the *remote* copy up to ``downstream_offset`` should resume on
    the *upstream* topic ``topic``: ``(upstream offset, exact)``, or ``None`` when the offset syncs
    kept in ``translator`` (fed with the syncs of flow upstream->downstream) cannot tell.

    A sync ``(U, D)`` with ``D < downstream_offset`` proves that the group consumed upstream record
    ``U`` and, records being copied in order, every upstream record before it: resuming at ``U+1``
    skips nothing. Inside a verified run the mapping is exact in both directions.
    """
    best: int | None = None
    exact = False
    for sync in translator.history(topic, partition):
        if sync.downstream_offset > downstream_offset:
            continue
        gap = downstream_offset - sync.downstream_offset
        candidate = sync.upstream_offset + (0 if gap == 0 else 1)
        if best is None or candidate > best or (candidate == best and gap <= 1):
            best, exact = candidate, gap <= 1 or (exact and candidate == best)
    runs = translator.runs(topic, partition)
    starts = [r.downstream_start for r in runs]
    i = bisect.bisect_right(starts, downstream_offset) - 1
    if i >= 0:
        run = runs[i]
        length = run.upstream_end - run.upstream_start
        if downstream_offset <= run.downstream_start + length + 1:
            # inside the run, or right after its last record: exact
            candidate = run.upstream_start + (downstream_offset - run.downstream_start)
            run_exact = True
        else:
            candidate = run.upstream_end + 1
            run_exact = False
        if best is None or candidate > best or (candidate == best and run_exact):
            best, exact = candidate, run_exact or (exact and candidate == best)
    if best is None:
        return None
    return best, exact


def exact_position(
    translator: OffsetTranslator, topic: str, partition: int, upstream: int
) -> int | None:
    """The downstream offset at which the copies of upstream records ``>= upstream`` start, when
    the offset syncs prove it: ``upstream`` is inside a verified run, or the record just before it
    (``upstream - 1``) has a sync or ends a run. ``None`` otherwise."""
    for run in translator.runs(topic, partition):
        found = run.translate(upstream)
        if found is not None:
            return found
        before = run.translate(upstream - 1)
        if before is not None:
            return before + 1
    for sync in translator.history(topic, partition):
        if sync.upstream_offset == upstream:
            return sync.downstream_offset
        if sync.upstream_offset == upstream - 1:
            return sync.downstream_offset + 1
    return None


# -- the pure planner -----------------------------------------------------------------------


def plan_failover(
    group: str,
    from_alias: str,
    to_alias: str,
    *,
    policy_rename: Callable[[str], str],
    is_from_target: Callable[[str], bool],
    upstream_topic: Callable[[str], str | None],
    should_replicate: Callable[[str], bool],
    source_state: str,
    target_state: str,
    source_offsets: Mapping[TopicPartition, OffsetAndMetadata] | None,
    target_offsets: Mapping[TopicPartition, OffsetAndMetadata],
    checkpoints: Mapping[TopicPartition, Checkpoint],
    forward: OffsetTranslator | None,
    backward: OffsetTranslator | None,
    notes: Iterable[str] = (),
    allow_skip: bool = False,
    allow_empty: bool = False,
    source_error: str | None = None,
    force: bool = False,
) -> FailoverPlan:
    """Compute the failover plan from plain inputs (no I/O).

    ``policy_rename`` maps a topic of the old cluster to its name on the new one (MM2's checkpoint
    renaming); ``is_from_target`` tells whether a topic of the old cluster came from the new one
    (failback); ``upstream_topic`` gives its name there. ``source_state`` is the group's state on
    the old cluster: ``"active"``, ``"empty"``, ``"absent"``, ``"unreachable"`` (the cluster does
    not answer at all: a disaster, the failover proceeds with the checkpoints) or ``"unknown"``
    (the cluster answers, but not about the group: ``source_error`` says why).
    ``source_offsets`` is ``None`` when the group's offsets there could not be read. ``checkpoints`` are the group's latest checkpoints keyed by the
    partition on the new cluster. ``forward`` holds the offset syncs of flow from->to (``None``
    when unreadable), ``backward`` those of flow to->from.

    Besides a group active on either cluster, or whose state on the old cluster is unknown
    although that cluster answers (it may still be consuming there) unless ``force``, the plan
    is refused when the group would skip
    records on the new cluster (:attr:`PartitionFailover.skipped`), unless ``allow_skip``, and
    when nothing translates — no committed offsets on the old cluster for topics the flow
    replicates, or, with the old cluster unreachable, no checkpoints — unless ``allow_empty``
    (a mistyped group name would otherwise "fail over" successfully).
    """
    notes = list(notes)
    refused = _active_group(group, from_alias, to_alias, source_state, target_state)
    if refused is None and source_state == "unknown":
        why = source_error or "its state was not reported"
        if force:
            notes.append(
                f"forced: the state of group {group!r} on {from_alias} is unknown ({why}); "
                f"its consumers there are assumed stopped"
            )
        else:
            refused = _unknown_on_source(group, from_alias, why)
    translation = _Translation(
        from_alias=from_alias, to_alias=to_alias, policy_rename=policy_rename,
        is_from_target=is_from_target, upstream_topic=upstream_topic,
        should_replicate=should_replicate, checkpoints=checkpoints, forward=forward,
        backward=backward,
    )  # fmt: skip
    resumes = (
        translation.of_checkpoints()  # the old cluster is unreachable: all we have
        if source_offsets is None
        else translation.of_offsets(source_offsets)
    )
    current = {tp: om.offset for tp, om in target_offsets.items() if om.offset >= 0}
    by_target = {tp: _decide(tp, current.get(tp), resume) for tp, resume in resumes.items()}
    # partitions the group has on the new cluster that nothing translates: shown, untouched
    for tp in current.keys() - by_target.keys():
        by_target[tp] = _untranslated(tp, current[tp], from_alias)
    partitions = tuple(by_target[tp] for tp in sorted(by_target))
    if refused is None and not resumes:
        if allow_empty:
            notes.append(
                f"nothing to translate: group {group!r} has no committed offsets on {from_alias} "
                f"for replicated topics and no checkpoints on {to_alias}"
            )
        else:
            refused = _nothing_to_move(group, from_alias, to_alias, source_state, source_offsets)
    skipping = [p for p in partitions if p.skipped > 0]
    if refused is None and skipping and not allow_skip:
        refused = _would_skip(group, to_alias, skipping)
    return FailoverPlan(
        group=group, from_alias=from_alias, to_alias=to_alias, partitions=partitions,
        source_state=source_state, target_state=target_state, refused=refused,
        notes=tuple(notes),
    )  # fmt: skip


@attrs.frozen
class _Resume:
    """Where the group should resume on one partition of the new cluster, as the old cluster's
    offsets translate (``translated`` ``None``: no safe translation, ``reason`` says why) —
    before the group's own offset on the new cluster is taken into account (:func:`_decide`)."""

    source_topic: str | None
    source_offset: int | None
    translated: int | None
    re_read: int | None
    method: str
    reason: str
    metadata: str


@attrs.frozen
class _Translation:
    """Translates a group's offsets from the old cluster to the new one, partition by partition
    (the arguments of :func:`plan_failover` of the same names)."""

    from_alias: str
    to_alias: str
    policy_rename: Callable[[str], str]
    is_from_target: Callable[[str], bool]
    upstream_topic: Callable[[str], str | None]
    should_replicate: Callable[[str], bool]
    checkpoints: Mapping[TopicPartition, Checkpoint]
    forward: OffsetTranslator | None
    backward: OffsetTranslator | None

    def of_offsets(
        self, source_offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> dict[TopicPartition, _Resume]:
        """The group's committed offsets on the old cluster, by partition of the new one."""
        resumes: dict[TopicPartition, _Resume] = {}
        for src_tp, om in sorted(source_offsets.items()):
            if om.offset < 0:
                continue
            if self.is_from_target(src_tp.topic):
                found = self._failback(src_tp, om)
            elif self.should_replicate(src_tp.topic):
                found = self._forward(src_tp, om)
            else:
                found = None
            if found is not None:
                tp, resume = found
                resumes[tp] = resume
        return resumes

    def of_checkpoints(self) -> dict[TopicPartition, _Resume]:
        """The group's checkpoints, when its offsets on the old cluster are unknown."""
        return {
            tp: _Resume(None, None, cp.downstream_offset, None, "checkpoint", "", cp.metadata)
            for tp, cp in sorted(self.checkpoints.items())
        }

    def _failback(
        self, src_tp: TopicPartition, om: OffsetAndMetadata
    ) -> tuple[TopicPartition, _Resume] | None:
        """The group consumed a remote copy of a topic of the new cluster: translate backwards."""
        original = self.upstream_topic(src_tp.topic)
        if original is None:
            return None
        tp = TopicPartition(original, src_tp.partition)
        answer = None if self.backward is None else reverse_translate(
            self.backward, original, src_tp.partition, om.offset
        )  # fmt: skip
        method = "reverse-offset-syncs"
        if answer is None:
            reason = f"no offset syncs of {self.to_alias}->{self.from_alias} cover this offset"
            return tp, _Resume(src_tp.topic, om.offset, None, None, method, reason, om.metadata)
        translated, exact = answer
        re_read = 0 if exact else None
        return tp, _Resume(src_tp.topic, om.offset, translated, re_read, method, "", om.metadata)

    def _forward(
        self, src_tp: TopicPartition, om: OffsetAndMetadata
    ) -> tuple[TopicPartition, _Resume]:
        """A replicated topic: the offset syncs translate the offset now, else the checkpoint."""
        topic, partition, offset = src_tp.topic, src_tp.partition, om.offset
        tp = TopicPartition(self.policy_rename(topic), partition)
        forward = self.forward
        fresh = None if forward is None else forward.translate(topic, partition, offset)
        cp = self.checkpoints.get(tp)
        if fresh is not None:
            start, method, metadata = fresh, "offset-syncs", om.metadata
        elif cp is not None and cp.upstream_offset <= offset:
            start, method, metadata = cp.downstream_offset, "checkpoint", cp.metadata
        elif cp is not None:
            reason = (
                f"the group was rewound on {self.from_alias} to {offset}, before its last "
                f"checkpoint ({cp.upstream_offset}), and no offset sync covers it"
            )
            return tp, _Resume(topic, offset, None, None, "checkpoint", reason, om.metadata)
        else:
            reason = f"no checkpoint and no offset sync covers offset {offset} of {src_tp}"
            return tp, _Resume(topic, offset, None, None, "offset-syncs", reason, om.metadata)
        pos = None if forward is None else exact_position(forward, topic, partition, offset)
        re_read = None if pos is None else max(pos - start, 0)
        return tp, _Resume(topic, offset, start, re_read, method, "", metadata)


def _decide(tp: TopicPartition, current: int | None, resume: _Resume) -> PartitionFailover:
    """The plan for partition ``tp``, whose committed offset on the new cluster is ``current``:
    commit the translation, or keep ``current`` (never rewound), or skip (no translation)."""
    translated, re_read = resume.translated, resume.re_read
    skipped = 0
    if translated is None:
        action, why = FailoverAction.SKIP, resume.reason or "no safe translation"
    elif current is not None and current >= translated:
        action = FailoverAction.KEEP
        # the first record the group has not processed (a lower bound if re_read is unknown)
        first_unread = translated if re_read is None else translated + re_read
        skipped = max(current - first_unread, 0)
        re_read = None if re_read is None else max(first_unread - current, 0)
        if skipped:
            count = f"{skipped}" if re_read is not None else f"up to {skipped}"
            why = f"past the translation: {count} record(s) never read; never rewound"
        else:
            why = "already at or past the translation; never rewound"
    else:
        action, why = FailoverAction.COMMIT, resume.reason
    return PartitionFailover(
        topic=tp.topic, partition=tp.partition, source_topic=resume.source_topic,
        source_offset=resume.source_offset, current=current, translated=translated,
        re_read=re_read, action=action, method=resume.method, reason=why,
        metadata=resume.metadata, skipped=skipped,
    )  # fmt: skip


def _untranslated(tp: TopicPartition, current: int, from_alias: str) -> PartitionFailover:
    """A partition the group has on the new cluster that nothing translates: left as it is."""
    return PartitionFailover(
        topic=tp.topic, partition=tp.partition, source_topic=None, source_offset=None,
        current=current, translated=None, re_read=None, action=FailoverAction.KEEP, method="-",
        reason=f"not translated from {from_alias}; left as it is",
    )  # fmt: skip


def _active_group(
    group: str, from_alias: str, to_alias: str, source_state: str, target_state: str
) -> str | None:
    """Why the group's state on either cluster forbids the failover (``None``: it does not)."""
    if source_state == "active":
        return (
            f"group {group!r} still has active members on {from_alias}: it is still consuming "
            f"there, so its final position is not known. Stop its consumers on {from_alias} "
            f"(or wait for their session to time out) and run the failover again."
        )
    if target_state == "active":
        return (
            f"group {group!r} already has active members on {to_alias}: offsets of an active "
            f"group cannot be changed (its members would not see them) and mirrorlib never "
            f"rewinds a consuming group. Stop its consumers on {to_alias} first."
        )
    if target_state == "unknown":
        return f"the state of group {group!r} on {to_alias} is unknown; retry later"
    return None


def _unknown_on_source(group: str, from_alias: str, why: str) -> str:
    """Why a failover is refused when the old cluster answers but not about the group."""
    return (
        f"the state of group {group!r} on {from_alias} is unknown: {from_alias} answers, but "
        f"{why}. The group may still be consuming there, so its final position is not known. "
        f"Fix the cause (e.g. grant the failover's user DESCRIBE and READ on the group) or "
        f"retry later; if you are sure its consumers on {from_alias} are stopped, pass --force "
        f"(force=True)."
    )


def _nothing_to_move(
    group: str,
    from_alias: str,
    to_alias: str,
    source_state: str,
    source_offsets: Mapping[TopicPartition, OffsetAndMetadata] | None,
) -> str:
    """Why a plan that translates nothing is refused, and how to proceed anyway."""
    override = "or pass --allow-empty (allow_empty=True) if there is nothing to move"
    if source_offsets is None:
        return (
            f"{from_alias} is unreachable and group {group!r} has no checkpoints on {to_alias}: "
            f"nothing to translate. Check the group name and that flow {from_alias}->{to_alias} "
            f"emits checkpoints for it (its groups filter), {override}."
        )
    topics = sorted({tp.topic for tp, om in source_offsets.items() if om.offset >= 0})
    if not topics:
        return (
            f"group {group!r} has no committed offsets on {from_alias} (the group is "
            f"{source_state} there): nothing to move. Check the group name, {override}."
        )
    return (
        f"group {group!r} has committed offsets on {from_alias} only for topics that flow "
        f"{from_alias}->{to_alias} does not replicate ({', '.join(topics)}): nothing to move. "
        f"Check the group name and the flow's topics filter, {override}."
    )


def _would_skip(group: str, to_alias: str, skipping: list[PartitionFailover]) -> str:
    """Why a plan in which the group would skip records is refused, and how to proceed."""
    counts = ", ".join(
        f"{p.topic}-{p.partition}: {_skipped_text([p], p.skipped)}" for p in skipping
    )
    total = _skipped_text(skipping, sum(p.skipped for p in skipping))
    return (
        f"group {group!r} is already past the translated offset on {to_alias} in "
        f"{len(skipping)} partition(s) and would never read {total} record(s) there ({counts}); "
        f"mirrorlib never rewinds a group. If the group consumed them on {to_alias} (a failover "
        f"run again after its consumers moved on) or skipping them is intended, pass "
        f"--allow-skip (allow_skip=True); otherwise delete the group's offsets on {to_alias} "
        f"(kafka-consumer-groups.sh --delete-offsets) and run the failover again."
    )


# -- many groups at once ----------------------------------------------------------------------


def select_groups(
    named: Sequence[str],
    candidates: Iterable[str],
    *,
    pattern: str | re.Pattern[str] | None = None,
    every: bool = False,
) -> tuple[str, ...]:
    """The groups a batch failover moves: ``named`` in the order given (each once), then the
    ``candidates`` (the groups with checkpoints, and those the old cluster lists) that fully match
    ``pattern``, or all of them when ``every``, sorted."""
    chosen = dict.fromkeys(named)
    regex = re.compile(pattern) if isinstance(pattern, str) else pattern
    if regex is not None or every:
        for group in sorted(set(candidates)):
            if every or (regex is not None and regex.fullmatch(group) is not None):
                chosen.setdefault(group)
    return tuple(chosen)


def checkpoints_by_group(
    checkpoints: Mapping[tuple[str, TopicPartition], Checkpoint],
) -> dict[str, dict[TopicPartition, Checkpoint]]:
    """The latest checkpoints (keyed by group and partition, as
    :meth:`~mirrorlib.kafka.client.MirrorClient.checkpoints` answers) split by group."""
    out: dict[str, dict[TopicPartition, Checkpoint]] = {}
    for (group, tp), cp in checkpoints.items():
        out.setdefault(group, {})[tp] = cp
    return out


@attrs.frozen
class GroupInputs:
    """What was read about one group for a batch failover: the arguments of
    :func:`plan_failover` of the same names."""

    source_state: str
    target_state: str
    source_offsets: Mapping[TopicPartition, OffsetAndMetadata] | None
    target_offsets: Mapping[TopicPartition, OffsetAndMetadata]
    checkpoints: Mapping[TopicPartition, Checkpoint]
    source_error: str | None = None
    notes: tuple[str, ...] = ()


def plan_failovers(
    inputs: Mapping[str, GroupInputs],
    from_alias: str,
    to_alias: str,
    *,
    policy_rename: Callable[[str], str],
    is_from_target: Callable[[str], bool],
    upstream_topic: Callable[[str], str | None],
    should_replicate: Callable[[str], bool],
    forward: OffsetTranslator | None,
    backward: OffsetTranslator | None,
    notes: Iterable[str] = (),
    allow_skip: bool = False,
    allow_empty: bool = False,
    force: bool = False,
) -> dict[str, FailoverPlan]:
    """:func:`plan_failover` for each group of ``inputs``, with the offset syncs and the options
    they share: each group is planned (and refused) exactly as it would be alone."""
    shared = tuple(notes)
    plans: dict[str, FailoverPlan] = {}
    for group, got in inputs.items():
        plans[group] = plan_failover(
            group, from_alias, to_alias,
            policy_rename=policy_rename, is_from_target=is_from_target,
            upstream_topic=upstream_topic, should_replicate=should_replicate,
            source_state=got.source_state, target_state=got.target_state,
            source_offsets=got.source_offsets, target_offsets=got.target_offsets,
            checkpoints=got.checkpoints, forward=forward, backward=backward,
            notes=(*shared, *got.notes), allow_skip=allow_skip, allow_empty=allow_empty,
            source_error=got.source_error, force=force,
        )  # fmt: skip
    return plans


class GroupOutcome(enum.StrEnum):
    """What a batch failover did with one group."""

    COMMITTED = "committed"  # its offsets were committed on the new cluster
    PLANNED = "planned"  # a dry run: it would be failed over (nothing committed)
    UNCHANGED = "unchanged"  # not refused, but nothing to commit (every partition kept)
    REFUSED = "refused"  # its plan was refused (the plan says why)
    FAILED = "failed"  # reading or committing its offsets failed (the error says why)


@attrs.frozen
class GroupFailover:
    """The result of one group of a batch failover: its plan (``None`` when it could not be
    planned) and what happened (``error``: why it failed)."""

    group: str
    outcome: GroupOutcome
    plan: FailoverPlan | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the group was failed over (or would be, in a dry run)."""
        return self.outcome not in (GroupOutcome.REFUSED, GroupOutcome.FAILED)

    @property
    def reason(self) -> str:
        """Why the group was refused or failed (``""`` when it was not)."""
        if self.error is not None:
            return self.error
        if self.plan is not None and self.plan.refused is not None:
            return self.plan.refused
        return ""

    def to_dict(self) -> dict[str, Any]:
        plan = {} if self.plan is None else self.plan.to_dict()
        return {**plan, "group": self.group, "outcome": str(self.outcome), "error": self.error}


@attrs.frozen
class BatchFailover:
    """What a failover of many groups from ``from_alias`` to ``to_alias`` did, group by group
    (in the order they were selected). ``round_trips`` counts the request waves the batch sent
    (requests sent together, answered in parallel, count once)."""

    from_alias: str
    to_alias: str
    results: tuple[GroupFailover, ...]
    dry_run: bool = False
    round_trips: int = 0
    notes: tuple[str, ...] = ()

    @property
    def failed(self) -> tuple[str, ...]:
        """The groups that were refused or failed."""
        return tuple(r.group for r in self.results if not r.ok)

    @property
    def succeeded(self) -> tuple[str, ...]:
        """The groups failed over (or that would be, in a dry run)."""
        return tuple(r.group for r in self.results if r.ok)

    @property
    def all_refused(self) -> bool:
        """Whether every group that did not succeed was refused (none failed with an error)."""
        return all(r.outcome is not GroupOutcome.FAILED for r in self.results if not r.ok)

    def result(self, group: str) -> GroupFailover:
        """The result of ``group`` (``KeyError`` if it was not in the batch)."""
        for r in self.results:
            if r.group == group:
                return r
        raise KeyError(group)

    def to_dict(self) -> dict[str, Any]:
        counts = {str(o): 0 for o in GroupOutcome}
        for r in self.results:
            counts[str(r.outcome)] += 1
        return {
            "from": self.from_alias,
            "to": self.to_alias,
            "dry_run": self.dry_run,
            "outcomes": counts,
            "failed": list(self.failed),
            "round_trips": self.round_trips,
            "notes": list(self.notes),
            "groups": [r.to_dict() for r in self.results],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def describe(self) -> str:
        """A readable summary (what ``mirrorlib failover`` prints for many groups)."""
        return render_plain(self.blocks())

    def blocks(self) -> list[Block]:
        """Headline, one row per group, shared notes, then why each failed group failed."""
        counts: dict[str, int] = {}
        for r in self.results:
            counts[str(r.outcome)] = counts.get(str(r.outcome), 0) + 1
        summary = ", ".join(f"{n} {o}" for o, n in counts.items()) or "no group"
        out: list[Block] = [
            f"failover of {len(self.results)} group(s) from {self.from_alias} to "
            f"{self.to_alias}: {summary}"
        ]
        rows = []
        for r in self.results:
            plan = r.plan
            if plan is None:
                rows.append((r.group, str(r.outcome), "-", "-", "-", "-", "-"))
                continue
            total = plan.re_read_total
            rows.append((
                r.group, str(r.outcome), f"{plan.source_state}/{plan.target_state}",
                str(len(plan.partitions)), str(len(plan.offsets)) if r.ok else "-",
                "-" if total is None else str(total),
                _skipped_text(plan.skipping, plan.skipped_total),
            ))  # fmt: skip
        if rows:
            header = ("group", "outcome", "state (from/to)", "partitions", "to commit",
                      "re-read", "skipped")  # fmt: skip
            out.append(Table(header, tuple(rows)))
        out.extend(f"note: {n}" for n in self.notes)
        for r in self.results:
            if not r.ok:
                out.append(f"{str(r.outcome).upper()} {r.group}: {r.reason}")
        if self.failed:
            out.append(f"failed: {', '.join(self.failed)}")
        elif self.dry_run:
            out.append("dry run: nothing committed")
        return out

    def __str__(self) -> str:
        return self.describe()
