"""Topic, config and ACL synchronisation for one flow ``A->B``, as pure plans.

This module is the *pure core* of MirrorMaker 2's ``MirrorSourceConnector`` housekeeping
(``computeAndCreateTopicPartitions``, ``syncTopicConfigs``, ``syncTopicAcls``): it compares
snapshots of the two clusters and answers *what should be done* on the target, as immutable
plan values. It never talks to Kafka (the I/O edge, :mod:`mirrorlib.kafka.admin`, snapshots
clusters and applies plans), never imports ``confluent_kafka`` and is cheap to test.

Snapshots (:mod:`~mirrorlib.core.plans.snapshots`)
    :class:`TopicConfigEntry` (one described topic config entry), :class:`TopicSnapshot` (name,
    partition count, configs) and :class:`AclRule` (one ACL binding), in plain strings/enums
    spelled like Kafka's Java names.

Plans (steps and plan types in :mod:`~mirrorlib.core.plans.steps`)
    :func:`plan_topics` (:mod:`~mirrorlib.core.plans.topics`) → :class:`TopicPlan` of
    :class:`CreateTopic` and :class:`CreatePartitions` steps (plus :class:`SkippedTopic` notes);
    :func:`plan_topic_configs` (:mod:`~mirrorlib.core.plans.configs`) → :class:`ConfigPlan` of
    :class:`AlterTopicConfigs` steps; :func:`plan_acls` (:mod:`~mirrorlib.core.plans.acls`) →
    :class:`AclPlan` with one :class:`CreateAcls` step (plus :class:`SkippedAcl` notes). Plans
    add up with ``+`` and print with :meth:`Plan.describe`. Which topics a plan covers, and why
    others are skipped, is :mod:`~mirrorlib.core.plans.selection`.

MM2 rules kept (``MirrorSourceConnector.java`` 4.3):

* a remote topic is created with the source's partition count, ``replication_factor`` and the
  configs of MM2's ``targetConfig(…, incremental=false)``: non-default entries (or also default
  ones with ``use.defaults.from=source``) that are not read-only, not sensitive, not
  ``STATIC_BROKER_CONFIG`` and pass the config property filter (by default MM2's
  :class:`~mirrorlib.core.config.filters.DefaultConfigPropertyFilter`);
* partitions only ever grow (to the source count); topics and partitions are never deleted,
  partitions that exist only on the target never cause anything;
* configs of remote topics already on the target are synced incrementally: for every source
  entry passing the same filters, a default entry with ``use.defaults.from=target`` becomes a
  ``DELETE`` (the target's own default applies), anything else a ``SET``;
* ACLs: only ``TOPIC`` + ``LITERAL`` bindings of replicated topics; ``ALLOW WRITE`` is dropped,
  ``ALLOW ALL`` becomes ``ALLOW READ``, everything else (DENY, ALLOW READ/DESCRIBE/…) is copied;
  the resource is renamed with ``format_remote_topic``; ACLs are never deleted;
* cycles are MM2's ``isCycle`` (:func:`mirrorlib.core.policy.is_cycle`).

Better than MM2:

* config ops that would not change the target (``SET`` to the value the target already has,
  ``DELETE`` of an entry that is not a topic override on the target) are left out, so a stable
  pair of clusters yields an empty plan (MM2 re-sends every entry every 10 minutes);
* ACLs already present on the target are not re-created;
* a literal ``*`` topic ACL is skipped (MM2 turns it into a meaningless literal ``<alias>.*``);
* null config values (which crash MM2's ``configToMap``) are left out;
* two source topics that map to the same remote name (possible with a custom policy) are
  reported as a conflict instead of racing;
* every left-out topic or ACL is reported with a reason.
"""

from mirrorlib.core.plans.acls import plan_acls, should_replicate_acl, target_acl_rule
from mirrorlib.core.plans.configs import (
    DefaultsFrom,
    comparison_turn,
    plan_topic_configs,
    target_config,
)
from mirrorlib.core.plans.snapshots import (
    AclOperation,
    AclPermission,
    AclRule,
    ConfigSource,
    FrozenMap,
    PatternType,
    ResourceType,
    TopicConfigEntry,
    TopicSnapshot,
)
from mirrorlib.core.plans.steps import (
    AclPlan,
    AlterTopicConfigs,
    ConfigOp,
    ConfigPlan,
    CreateAcls,
    CreatePartitions,
    CreateTopic,
    Plan,
    Skipped,
    SkippedAcl,
    SkippedTopic,
    SkipReason,
    Step,
    TopicPlan,
)
from mirrorlib.core.plans.topics import plan_topics

__all__ = [
    "AclOperation",
    "AclPermission",
    "AclPlan",
    "AclRule",
    "AlterTopicConfigs",
    "ConfigOp",
    "ConfigPlan",
    "ConfigSource",
    "CreateAcls",
    "CreatePartitions",
    "CreateTopic",
    "DefaultsFrom",
    "FrozenMap",
    "PatternType",
    "Plan",
    "ResourceType",
    "SkipReason",
    "Skipped",
    "SkippedAcl",
    "SkippedTopic",
    "Step",
    "TopicConfigEntry",
    "TopicPlan",
    "TopicSnapshot",
    "comparison_turn",
    "plan_acls",
    "plan_topic_configs",
    "plan_topics",
    "should_replicate_acl",
    "target_acl_rule",
    "target_config",
]
