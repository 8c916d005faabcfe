"""Topic configs for the target: MM2's ``targetConfig`` and ``syncTopicConfigs``.

:func:`target_config` picks the source entries worth carrying over (used when a remote topic is
created, see :func:`~mirrorlib.core.plans.topics.plan_topics`); :func:`plan_topic_configs`
plans incremental changes of remote topics already on the target.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from typing import Final

from mirrorlib.core.config.filters import DefaultConfigPropertyFilter
from mirrorlib.core.plans.selection import Snapshots, remote_names, snapshots_by_name
from mirrorlib.core.plans.snapshots import ConfigSource, TopicConfigEntry
from mirrorlib.core.plans.steps import AlterTopicConfigs, ConfigOp, ConfigPlan, Step
from mirrorlib.core.policy import ReplicationPolicy

__all__ = [
    "MM2_DEFAULT_CONFIG_FILTER",
    "DefaultsFrom",
    "comparison_turn",
    "plan_topic_configs",
    "target_config",
]

#: ``"target"`` / ``"source"`` (``use.defaults.from``), or MM2's per-property
#: ``ConfigPropertyFilter.shouldReplicateSourceDefault`` as a callable (property → copy the
#: source's default value?), e.g. ``flow.should_replicate_source_default``.
DefaultsFrom = str | Callable[[str], bool]

#: The planners' default ``config_filter``: MM2's ``DefaultConfigPropertyFilter`` with
#: ``config.properties.exclude`` at its default (a flow passes its own
#: ``should_replicate_config_property``).
MM2_DEFAULT_CONFIG_FILTER: Final[Callable[[str], bool]] = DefaultConfigPropertyFilter.from_config(
    {}
).should_replicate_config_property


def _source_default_predicate(use_defaults_from: DefaultsFrom) -> Callable[[str], bool]:
    if callable(use_defaults_from):
        return use_defaults_from
    if use_defaults_from not in ("target", "source"):
        raise ValueError(
            f"use.defaults.from must be 'target' or 'source', not {use_defaults_from!r}"
        )
    copy = use_defaults_from == "source"
    return lambda prop: copy


def target_config(
    source_configs: Mapping[str, TopicConfigEntry],
    *,
    config_filter: Callable[[str], bool],
    use_defaults_from: DefaultsFrom = "target",
    incremental: bool = False,
) -> dict[str, TopicConfigEntry]:
    """MM2's ``targetConfig``: the source entries worth carrying to the target.

    Entries that are read-only, sensitive, ``STATIC_BROKER_CONFIG`` or rejected by
    ``config_filter`` are dropped. Default entries are kept when ``incremental`` (they become
    ``DELETE`` or ``SET`` ops) or when ``use_defaults_from == "source"``.
    """
    source_default = _source_default_predicate(use_defaults_from)
    return {
        name: entry
        for name, entry in source_configs.items()
        if (incremental or not entry.is_default or source_default(name))
        and not entry.is_read_only
        and not entry.is_sensitive
        and entry.source != ConfigSource.STATIC_BROKER_CONFIG
        and config_filter(name)
    }


def plan_topic_configs(
    source_topics: Snapshots,
    target_topics: Snapshots,
    *,
    source_alias: str,
    policy: ReplicationPolicy,
    should_replicate: Callable[[str], bool],
    config_filter: Callable[[str], bool] = MM2_DEFAULT_CONFIG_FILTER,
    use_defaults_from: DefaultsFrom = "target",
    skip_unchanged: bool = True,
    target_alias: str | None = None,
) -> ConfigPlan:
    """Incremental config changes for remote topics already on the target (MM2's
    ``syncTopicConfigs``).

    For every source entry passing :func:`target_config` (``incremental=True``): a default
    entry whose source default is not copied (``use_defaults_from="target"``, or a predicate
    answering ``False`` — see :data:`DefaultsFrom`) becomes ``DELETE`` (the target's own default
    applies), anything else ``SET`` to the source value. With ``skip_unchanged`` (default; MM2
    always sends everything) an op is left out when the target snapshot shows it would change
    nothing: a ``SET`` to the value the target already has, or a ``DELETE`` of an entry that is
    not a topic-level override there. A target snapshot without configs disables that check for
    its topic. Topics to be created are not covered (creation carries their configs).
    """
    source_default = _source_default_predicate(use_defaults_from)
    sources = snapshots_by_name(source_topics)
    targets = snapshots_by_name(target_topics)
    remote, skipped = remote_names(
        sorted(sources), source_alias=source_alias, policy=policy,
        should_replicate=should_replicate, target_alias=target_alias,
    )  # fmt: skip
    steps: list[Step] = []
    for topic, name in remote.items():
        target = targets.get(name)
        if target is None:
            continue
        entries = target_config(
            sources[topic].configs, config_filter=config_filter,
            use_defaults_from=use_defaults_from, incremental=True,
        )  # fmt: skip
        check = skip_unchanged and bool(target.configs)
        ops: list[ConfigOp] = []
        for key in sorted(entries):
            entry = entries[key]
            have = target.configs.get(key)
            if entry.is_default and not source_default(key):
                if check and (have is None or not have.is_topic_override):
                    continue
                ops.append(ConfigOp(key, "DELETE"))
            else:
                if entry.value is None:
                    continue  # a null value cannot be SET
                if check and have is not None and have.value == entry.value:
                    continue
                ops.append(ConfigOp(key, "SET", entry.value))
        if ops:
            steps.append(AlterTopicConfigs(name, ops, source_topic=topic))
    return ConfigPlan(steps, skipped)


def comparison_turn(topic: str, cycles: int) -> int:
    """The cycle (``0 <= turn < cycles``) of every ``cycles`` in which a periodic comparison
    of ``topic`` takes place: stable across processes and independent of the other topics, so
    comparing the topics whose turn it is each cycle compares every topic once per ``cycles``
    cycles, about ``1/cycles`` of them at a time."""
    if cycles < 1:
        raise ValueError(f"cycles must be at least 1, not {cycles}")
    return zlib.crc32(topic.encode()) % cycles
