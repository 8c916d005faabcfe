"""Moving a consumer group from one cluster to another: failover and failback.

:func:`failover` commits, for consumer group ``G``, the offsets at which it should resume on cluster
``to`` after consuming on cluster ``from`` — only when ``G`` has no active members on ``to``, and
never moving one of its committed offsets backwards. It first computes a
:class:`FailoverPlan` (what ``mirrorlib failover --dry-run`` prints): per partition the group's
current offset on ``to``, the translated offset, and how many records the group will read again.

Where the translated offsets come from
--------------------------------------
For a partition of a topic that flow ``from->to`` replicates (``orders`` on ``A`` is
``A.orders`` on ``B``):

* when ``from`` is reachable and the group's final committed offset there is known, that offset is
  translated *now* with the offset syncs of the flow (exact inside verified runs, see
  :mod:`mirrorlib.core.translate`) — fresher than the last checkpoint, which may be a minute old;
* otherwise (``from`` is down: a real disaster) the last checkpoint written by MM2 or mirrorlib
  to ``<from>.checkpoints.internal`` on ``to`` is used (:meth:`MirrorClient.checkpoints`).

For a partition of a topic that came *from* ``to`` (failback: the group consumed ``A.orders`` on
``B`` and returns to ``A``'s ``orders``) there are no checkpoints — neither MM2 nor mirrorlib
replicates ``A.orders`` back to ``A`` — so the group's offset on ``from`` is translated *backwards*
with the offset syncs of the opposite flow ``to->from`` (:func:`reverse_translate`): the largest
upstream offset all of whose predecessors the group has provably consumed.

Safety rules
------------
* a group that still has active members on ``from`` is refused: it is still consuming there, and
  its final position is not known yet;
* a group with active members on ``to`` is refused: Kafka does not let anyone else change an
  active group's offsets, and its members would not see the change;
* a partition whose offset on ``to`` is already at or past the translation is kept: the group is
  never rewound;
* translation never answers past the first record the group still has to read, so no record is
  ever skipped; re-reads are reported (``re_read``) where they can be counted.

The plan is computed by the pure function :func:`plan_failover`; :func:`failover` gathers its
inputs from the clusters and applies it with :class:`~mirrorlib.kafka.groups.GroupAdmin`.
"""

from __future__ import annotations

import bisect
import enum
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from mirrorlib.core.audit import format_table
from mirrorlib.core.checkpointing import rename_topic
from mirrorlib.core.config import FlowConfig, MirrorConfig
from mirrorlib.core.records import Checkpoint, OffsetAndMetadata, OffsetSync, TopicPartition
from mirrorlib.core.translate import OffsetTranslator
from mirrorlib.errors import ClusterError, CodecError, ConfigError, MirrorError

__all__ = [
    "FailoverAction",
    "FailoverPlan",
    "FailoverRefusedError",
    "PartitionFailover",
    "failover",
    "plan_failover",
    "reverse_translate",
]

log = logging.getLogger(__name__)


class FailoverRefusedError(MirrorError):
    """The failover was refused (the group is still active somewhere); ``plan`` tells why."""

    def __init__(self, message: str, plan: FailoverPlan) -> None:
        super().__init__(message)
        self.plan = plan


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


# -- the I/O edge ---------------------------------------------------------------------------


def read_offset_syncs(
    flow: FlowConfig, config: MirrorConfig, timeout: float = 30.0
) -> OffsetTranslator:
    """An :class:`OffsetTranslator` fed with every offset sync of ``flow`` (raises
    :class:`ClusterError` when the offset-syncs topic cannot be read)."""
    from mirrorlib.core.syncs import lineage_from_headers
    from mirrorlib.kafka.topiclog import TopicLog

    translator = OffsetTranslator()
    alias = flow.offset_syncs_cluster
    reader = TopicLog(
        config.client_config(alias, "consumer"), flow.offset_syncs_topic, alias=alias,
        partitions=[0],
    )  # fmt: skip

    def handle(msg: Any) -> None:
        try:
            sync = OffsetSync.decode(msg.key(), msg.value())
        except CodecError:
            return
        translator.add(sync, lineage_from_headers(msg.headers()))

    try:
        reader.read_to_end(handle, timeout=timeout)
    finally:
        reader.close()
    return translator


def _group_state(config: MirrorConfig, alias: str, group: str, timeout: float) -> Any:
    from mirrorlib.kafka.groups import GroupAdmin

    admin = GroupAdmin(config.client_config(alias, "admin"), alias=alias, timeout=timeout)
    return admin, admin.states([group]).get(group)


def failover(
    config: MirrorConfig,
    group: str,
    from_alias: str,
    to_alias: str,
    *,
    dry_run: bool = False,
    timeout: float = 30.0,
) -> FailoverPlan:
    """Move consumer group ``group`` from cluster ``from_alias`` to ``to_alias``.

    Computes the :class:`FailoverPlan` from the clusters (see the module documentation) and,
    unless ``dry_run``, commits its offsets on ``to_alias``. Returns the plan (``applied`` tells
    whether offsets were committed). Raises :class:`FailoverRefusedError` (carrying the plan) when the
    group is still active on either cluster, :class:`~mirrorlib.errors.ClusterError` when
    ``to_alias`` cannot be reached, :class:`~mirrorlib.errors.ConfigError` for unknown aliases.

    The old cluster may be unreachable (a real disaster): the checkpoints on ``to_alias`` are
    then used, and the plan says so.
    """
    from confluent_kafka import KafkaException

    from mirrorlib.kafka.client import MirrorClient
    from mirrorlib.kafka.groups import GroupState

    for alias in (from_alias, to_alias):
        if alias not in config.clusters:
            raise ConfigError(
                f"unknown cluster alias {alias!r}; the config defines: "
                f"{', '.join(config.clusters)}", key="clusters", value=alias,
            )  # fmt: skip
    if from_alias == to_alias:
        raise ConfigError("--from and --to must name different clusters", value=from_alias)
    flow = config.flow(from_alias, to_alias)
    back = config.flow(to_alias, from_alias)
    policy = flow.policy
    notes: list[str] = []

    target_admin, target_state = _group_state(config, to_alias, group, timeout)
    target_offsets = (
        target_admin.committed_offsets(group)
        if target_state in (GroupState.EMPTY, GroupState.ACTIVE)
        else {}
    )
    source_offsets: dict[TopicPartition, OffsetAndMetadata] | None
    try:
        source_admin, source_state = _group_state(config, from_alias, group, timeout)
        source_offsets = source_admin.committed_offsets(group)
    except (ClusterError, KafkaException, TimeoutError) as exc:
        source_state, source_offsets = "unreachable", None
        reason = str(exc) or type(exc).__name__
        notes.append(f"{from_alias} is unreachable ({reason}); using the checkpoints on {to_alias}")

    checkpoints: dict[TopicPartition, Checkpoint] = {}
    try:
        with MirrorClient(
            config.client_config(to_alias, "consumer"), policy, alias=to_alias, timeout=timeout
        ) as client:
            for (g, tp), cp in client.checkpoints(from_alias, timeout=timeout).items():
                if g == group:
                    checkpoints[tp] = cp
    except ClusterError as exc:
        notes.append(f"no checkpoints of {from_alias} readable on {to_alias}: {exc}")

    forward: OffsetTranslator | None = None
    backward: OffsetTranslator | None = None
    if source_offsets:
        topics = set(tp.topic for tp in source_offsets)
        if any(flow.should_replicate_topic(t) for t in topics) and flow.emit_offset_syncs_enabled:
            try:
                forward = read_offset_syncs(flow, config, timeout)
            except ClusterError as exc:
                notes.append(f"offset syncs of {flow.name} unreadable ({exc}); using checkpoints")
        if any(policy.topic_source(t) == to_alias for t in topics):
            try:
                backward = read_offset_syncs(back, config, timeout)
            except ClusterError as exc:
                notes.append(f"offset syncs of {back.name} unreadable: {exc}")

    plan = plan_failover(
        group, from_alias, to_alias,
        policy_rename=lambda t: rename_topic(policy, from_alias, to_alias, t),
        is_from_target=lambda t: policy.topic_source(t) == to_alias,
        upstream_topic=policy.upstream_topic,
        should_replicate=flow.should_replicate_topic,
        source_state=str(source_state or "unknown"),
        target_state=str(target_state or "unknown"),
        source_offsets=source_offsets,
        target_offsets=target_offsets,
        checkpoints=checkpoints,
        forward=forward,
        backward=backward,
        notes=notes,
    )  # fmt: skip
    if plan.refused is not None:
        raise FailoverRefusedError(plan.refused, plan)
    if dry_run or not plan.offsets:
        return plan
    # the group may have started consuming since we looked: check again right before writing
    state = target_admin.states([group]).get(group)
    if state == GroupState.ACTIVE:
        refused = attrs.evolve(
            plan, target_state=str(state),
            refused=f"group {group!r} became active on {to_alias} during the failover",
        )  # fmt: skip
        raise FailoverRefusedError(str(refused.refused), refused)
    target_admin.commit_offsets(group, plan.offsets)
    log.info("failover of group %s from %s to %s: committed %d offset(s)", group, from_alias,
             to_alias, len(plan.offsets))  # fmt: skip
    return attrs.evolve(plan, applied=True)
