"""Which source topics a plan covers, under which remote names, and why the others are left out.

Shared by the topic, config and ACL planners; the replication rule itself (filters, internal
topics, cycles) is the caller's ``should_replicate`` (a flow's ``should_replicate_topic``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from mirrorlib.core.plans.snapshots import TopicSnapshot
from mirrorlib.core.plans.steps import SkippedTopic, SkipReason
from mirrorlib.core.policy import ReplicationPolicy, is_cycle

__all__ = ["Snapshots", "partition_counts", "remote_names", "skip_reason", "snapshots_by_name"]

#: Topic snapshots, as an iterable or by name.
Snapshots = Iterable[TopicSnapshot] | Mapping[str, TopicSnapshot]


def snapshots_by_name(topics: Snapshots) -> dict[str, TopicSnapshot]:
    """Topic name → snapshot."""
    values = topics.values() if isinstance(topics, Mapping) else topics
    return {t.name: t for t in values}


def partition_counts(topics: Snapshots | Mapping[str, int]) -> dict[str, int]:
    """Topic name → partition count, from snapshots or from ``{name: partitions}``."""
    if isinstance(topics, Mapping):
        return {
            name: v.partitions if isinstance(v, TopicSnapshot) else int(v)
            for name, v in topics.items()
        }
    return {t.name: t.partitions for t in topics}


def skip_reason(policy: ReplicationPolicy, topic: str, target_alias: str | None) -> SkipReason:
    """Why ``should_replicate`` refused ``topic``: internal, a cycle (when the target alias is
    known), else the flow's filters."""
    if policy.is_internal_topic(topic):
        return SkipReason.INTERNAL
    if target_alias is not None and is_cycle(policy, topic, target_alias):
        return SkipReason.CYCLE
    return SkipReason.FILTERED


def remote_names(
    sources: Sequence[str],
    *,
    source_alias: str,
    policy: ReplicationPolicy,
    should_replicate: Callable[[str], bool],
    target_alias: str | None,
) -> tuple[dict[str, str], list[SkippedTopic]]:
    """Replicated source topic → remote name (in the order of ``sources``), and the skipped
    ones; a source topic whose remote name another one already claimed is a conflict."""
    remote: dict[str, str] = {}
    claimed: set[str] = set()
    skipped: list[SkippedTopic] = []
    for topic in sources:
        if not should_replicate(topic):
            skipped.append(SkippedTopic(topic, skip_reason(policy, topic, target_alias)))
            continue
        name = policy.format_remote_topic(source_alias, topic)
        if name in claimed:
            skipped.append(SkippedTopic(topic, SkipReason.CONFLICT))
            continue
        claimed.add(name)
        remote[topic] = name
    return remote, skipped
