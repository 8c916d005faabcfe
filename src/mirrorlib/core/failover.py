"""The failover planner, pure: which offsets a consumer group moving between clusters resumes at.

:func:`plan_failover` computes a :class:`FailoverPlan` from plain inputs (committed offsets, group
states, checkpoints, offset syncs); :func:`reverse_translate` and :func:`exact_position` are its
translation helpers. The rules are described in :mod:`mirrorlib.runtime.failover`, which gathers
the inputs from the clusters and applies the plan.
"""

from __future__ import annotations

import bisect
import enum
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from mirrorlib.core.audit import format_table
from mirrorlib.core.records import Checkpoint, OffsetAndMetadata, TopicPartition
from mirrorlib.core.translate import OffsetTranslator

__all__ = [
    "FailoverAction",
    "FailoverPlan",
    "PartitionFailover",
    "exact_position",
    "plan_failover",
    "reverse_translate",
]


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
        """A readable table (what ``mirrorlib failover`` prints)."""

        def cell(value: int | str | None) -> str:
            return "-" if value is None else str(value)

        head = (
            f"failover of group {self.group!r} from {self.from_alias} to {self.to_alias} "
            f"(group is {self.source_state} on {self.from_alias}, "
            f"{self.target_state} on {self.to_alias})"
        )
        rows = [
            ("partition", "source", "current", "translated", "re-read", "skipped", "action", "via")
        ]
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
        lines = [head, *format_table(rows)] if self.partitions else [head, "  no partitions"]
        total = self.re_read_total
        moving = len(self.offsets)
        lines.append(
            f"{moving} partition(s) to commit; records re-read: "
            + (str(total) if total is not None else "unknown for some partitions")
            + f"; records skipped: {_skipped_text(self.skipping, self.skipped_total)}"
        )
        lines.extend(f"note: {n}" for n in self.notes)
        if self.refused:
            lines.append(f"REFUSED: {self.refused}")
        elif self.applied:
            lines.append(f"committed on {self.to_alias}")
        return "\n".join(lines)

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
) -> FailoverPlan:
    """Compute the failover plan from plain inputs (no I/O).

    ``policy_rename`` maps a topic of the old cluster to its name on the new one (MM2's checkpoint
    renaming); ``is_from_target`` tells whether a topic of the old cluster came from the new one
    (failback); ``upstream_topic`` gives its name there. ``source_offsets`` is ``None`` when the old
    cluster is unreachable. ``checkpoints`` are the group's latest checkpoints keyed by the
    partition on the new cluster. ``forward`` holds the offset syncs of flow from->to (``None``
    when unreadable), ``backward`` those of flow to->from.

    Besides a group active on either cluster, the plan is refused when the group would skip
    records on the new cluster (:attr:`PartitionFailover.skipped`), unless ``allow_skip``, and
    when nothing translates — no committed offsets on the old cluster for topics the flow
    replicates, or, with the old cluster unreachable, no checkpoints — unless ``allow_empty``
    (a mistyped group name would otherwise "fail over" successfully).
    """
    notes = list(notes)
    refused: str | None = None
    if source_state == "active":
        refused = (
            f"group {group!r} still has active members on {from_alias}: it is still consuming "
            f"there, so its final position is not known. Stop its consumers on {from_alias} "
            f"(or wait for their session to time out) and run the failover again."
        )
    elif target_state == "active":
        refused = (
            f"group {group!r} already has active members on {to_alias}: offsets of an active "
            f"group cannot be changed (its members would not see them) and mirrorlib never "
            f"rewinds a consuming group. Stop its consumers on {to_alias} first."
        )
    elif target_state == "unknown":
        refused = f"the state of group {group!r} on {to_alias} is unknown; retry later"

    by_target: dict[TopicPartition, PartitionFailover] = {}

    def current_of(tp: TopicPartition) -> int | None:
        om = target_offsets.get(tp)
        return None if om is None or om.offset < 0 else om.offset

    def decide(
        tp: TopicPartition,
        source_topic: str | None,
        source_offset: int | None,
        translated: int | None,
        re_read: int | None,
        method: str,
        reason: str,
        metadata: str,
    ) -> PartitionFailover:
        current = current_of(tp)
        skipped = 0
        if translated is None:
            action, why = FailoverAction.SKIP, reason or "no safe translation"
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
            action, why = FailoverAction.COMMIT, reason
        return PartitionFailover(
            topic=tp.topic, partition=tp.partition, source_topic=source_topic,
            source_offset=source_offset, current=current, translated=translated,
            re_read=re_read, action=action, method=method, reason=why, metadata=metadata,
            skipped=skipped,
        )  # fmt: skip

    handled_sources: set[TopicPartition] = set()
    for src_tp, om in sorted((source_offsets or {}).items()):
        if om.offset < 0:
            continue
        topic = src_tp.topic
        if is_from_target(topic):
            # failback: the group consumed a remote copy of a topic of the new cluster
            original = upstream_topic(topic)
            if original is None:
                continue
            tp = TopicPartition(original, src_tp.partition)
            answer = None if backward is None else reverse_translate(
                backward, original, src_tp.partition, om.offset
            )  # fmt: skip
            translated = None if answer is None else answer[0]
            exact = answer is not None and answer[1]
            by_target[tp] = decide(
                tp, topic, om.offset, translated, 0 if exact else None, "reverse-offset-syncs",
                "" if answer is not None else "no offset syncs of "
                f"{to_alias}->{from_alias} cover this offset", om.metadata,
            )  # fmt: skip
            handled_sources.add(src_tp)
            continue
        if not should_replicate(topic):
            continue
        tp = TopicPartition(policy_rename(topic), src_tp.partition)
        fresh = None if forward is None else forward.translate(topic, src_tp.partition, om.offset)
        cp = checkpoints.get(tp)
        if fresh is not None:
            pos = exact_position(forward, topic, src_tp.partition, om.offset) if forward else None
            re_read = None if pos is None else max(pos - fresh, 0)
            by_target[tp] = decide(tp, topic, om.offset, fresh, re_read, "offset-syncs", "",
                                   om.metadata)  # fmt: skip
        elif cp is not None and cp.upstream_offset <= om.offset:
            pos = exact_position(forward, topic, src_tp.partition, om.offset) if forward else None
            re_read = None if pos is None else max(pos - cp.downstream_offset, 0)
            by_target[tp] = decide(tp, topic, om.offset, cp.downstream_offset, re_read,
                                   "checkpoint", "", cp.metadata)  # fmt: skip
        elif cp is not None:
            by_target[tp] = decide(
                tp, topic, om.offset, None, None, "checkpoint",
                f"the group was rewound on {from_alias} to {om.offset}, before its last "
                f"checkpoint ({cp.upstream_offset}), and no offset sync covers it", om.metadata,
            )  # fmt: skip
        else:
            by_target[tp] = decide(
                tp, topic, om.offset, None, None, "offset-syncs",
                f"no checkpoint and no offset sync covers offset {om.offset} of "
                f"{topic}-{src_tp.partition}", om.metadata,
            )  # fmt: skip
        handled_sources.add(src_tp)
    if source_offsets is None:
        # the old cluster is unreachable: the checkpoints are all we have
        for tp, cp in sorted(checkpoints.items()):
            pos = None
            by_target[tp] = decide(tp, None, None, cp.downstream_offset, pos, "checkpoint", "",
                                   cp.metadata)  # fmt: skip
    translated_any = bool(by_target)
    # partitions the group has on the new cluster that nothing translates: shown, untouched
    for tp in sorted(target_offsets):
        if tp not in by_target and current_of(tp) is not None:
            by_target[tp] = PartitionFailover(
                topic=tp.topic, partition=tp.partition, source_topic=None, source_offset=None,
                current=current_of(tp), translated=None, re_read=None,
                action=FailoverAction.KEEP, method="-", reason="not translated from "
                f"{from_alias}; left as it is",
            )  # fmt: skip
    partitions = tuple(by_target[tp] for tp in sorted(by_target))
    if refused is None and not translated_any:
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
