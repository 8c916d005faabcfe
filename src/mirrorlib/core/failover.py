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
        rows = [("partition", "source", "current", "translated", "re-read", "action", "via")]
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
        )
        lines.extend(f"note: {n}" for n in self.notes)
        if self.refused:
            lines.append(f"REFUSED: {self.refused}")
        elif self.applied:
            lines.append(f"committed on {self.to_alias}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe()


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
) -> FailoverPlan:
    """Compute the failover plan from plain inputs (no I/O).

    ``policy_rename`` maps a topic of the old cluster to its name on the new one (MM2's checkpoint
    renaming); ``is_from_target`` tells whether a topic of the old cluster came from the new one
    (failback); ``upstream_topic`` gives its name there. ``source_offsets`` is ``None`` when the old
    cluster is unreachable. ``checkpoints`` are the group's latest checkpoints keyed by the
    partition on the new cluster. ``forward`` holds the offset syncs of flow from->to (``None``
    when unreadable), ``backward`` those of flow to->from.
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
        if translated is None:
            action, why = FailoverAction.SKIP, reason or "no safe translation"
        elif current is not None and current >= translated:
            action = FailoverAction.KEEP
            why = "already at or past the translation; never rewound"
            re_read = None if re_read is None else max(re_read - (current - translated), 0)
        else:
            action, why = FailoverAction.COMMIT, reason
        return PartitionFailover(
            topic=tp.topic, partition=tp.partition, source_topic=source_topic,
            source_offset=source_offset, current=current, translated=translated,
            re_read=re_read, action=action, method=method, reason=why, metadata=metadata,
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
    if refused is None and not partitions:
        notes.append(
            f"nothing to translate: group {group!r} has no committed offsets on {from_alias} "
            f"for replicated topics and no checkpoints on {to_alias}"
        )
    return FailoverPlan(
        group=group, from_alias=from_alias, to_alias=to_alias, partitions=partitions,
        source_state=source_state, target_state=target_state, refused=refused,
        notes=tuple(notes),
    )  # fmt: skip
