"""Remote topics to create and partitions to grow: MM2's ``computeAndCreateTopicPartitions``."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from mirrorlib.core.plans.configs import MM2_DEFAULT_CONFIG_FILTER, DefaultsFrom, target_config
from mirrorlib.core.plans.selection import (
    Snapshots,
    partition_counts,
    remote_names,
    snapshots_by_name,
)
from mirrorlib.core.plans.steps import CreatePartitions, CreateTopic, Step, TopicPlan
from mirrorlib.core.policy import ReplicationPolicy

__all__ = ["plan_topics"]


def plan_topics(
    source_topics: Snapshots,
    target_topics: Snapshots | Mapping[str, int],
    *,
    source_alias: str,
    policy: ReplicationPolicy,
    should_replicate: Callable[[str], bool],
    replication_factor: int = 2,
    config_filter: Callable[[str], bool] = MM2_DEFAULT_CONFIG_FILTER,
    use_defaults_from: DefaultsFrom = "target",
    target_alias: str | None = None,
) -> TopicPlan:
    """Remote topics to create and partitions to grow on the target (MM2's
    ``computeAndCreateTopicPartitions``).

    ``source_topics`` need their configs (only those of topics to create are read);
    ``target_topics`` only their partition counts (snapshots or ``{name: partitions}``).
    ``replication_factor`` ``-1`` means the target broker's default. ``target_alias`` only
    refines skip reasons (``cycle`` rather than ``filtered``). Steps are sorted by source topic:
    all creations first, then partition growths.
    """
    sources = snapshots_by_name(source_topics)
    targets = partition_counts(target_topics)
    remote, skipped = remote_names(
        sorted(sources), source_alias=source_alias, policy=policy,
        should_replicate=should_replicate, target_alias=target_alias,
    )  # fmt: skip
    creates: list[Step] = []
    grows: list[Step] = []
    for topic, name in remote.items():
        snapshot = sources[topic]
        have = targets.get(name)
        if have is None:
            configs = target_config(
                snapshot.configs, config_filter=config_filter,
                use_defaults_from=use_defaults_from, incremental=False,
            )  # fmt: skip
            creates.append(
                CreateTopic(
                    name,
                    snapshot.partitions,
                    replication_factor,
                    {k: v.value for k, v in configs.items() if v.value is not None},
                    source_topic=topic,
                )
            )
        elif snapshot.partitions > have:
            grows.append(CreatePartitions(name, snapshot.partitions, have, source_topic=topic))
    return TopicPlan(creates + grows, skipped)
