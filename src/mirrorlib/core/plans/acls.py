"""Topic ACLs to copy to the target: MM2's ``syncTopicAcls``."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import attrs

from mirrorlib.core.plans.selection import skip_reason
from mirrorlib.core.plans.snapshots import (
    AclOperation,
    AclPermission,
    AclRule,
    PatternType,
    ResourceType,
)
from mirrorlib.core.plans.steps import AclPlan, CreateAcls, Skipped, SkippedAcl, SkipReason
from mirrorlib.core.policy import ReplicationPolicy

__all__ = ["plan_acls", "should_replicate_acl", "target_acl_rule"]


def should_replicate_acl(rule: AclRule) -> bool:
    """MM2's ``shouldReplicateAcl``: everything but ``ALLOW WRITE``."""
    return not (rule.permission == AclPermission.ALLOW and rule.operation == AclOperation.WRITE)


def target_acl_rule(rule: AclRule, *, source_alias: str, policy: ReplicationPolicy) -> AclRule:
    """MM2's ``targetAclBinding``: a literal topic ACL on the remote topic; ALLOW ALL → READ."""
    operation = rule.operation
    if rule.permission == AclPermission.ALLOW and operation == AclOperation.ALL:
        operation = AclOperation.READ
    return attrs.evolve(
        rule,
        resource_type=ResourceType.TOPIC,
        resource_name=policy.format_remote_topic(source_alias, rule.resource_name),
        pattern_type=PatternType.LITERAL,
        operation=operation,
    )


def plan_acls(
    source_acls: Iterable[AclRule] | None,
    target_acls: Iterable[AclRule] | None,
    *,
    source_alias: str,
    policy: ReplicationPolicy,
    should_replicate: Callable[[str], bool],
    target_alias: str | None = None,
) -> AclPlan:
    """Topic ACLs to create on the target (MM2's ``syncTopicAcls``).

    ``source_acls`` ``None`` (no authorizer on the source) gives an empty plan. Only ``TOPIC``
    ``LITERAL`` bindings of replicated topics are considered; ``ALLOW WRITE`` is dropped,
    ``ALLOW ALL`` becomes ``ALLOW READ``, the rest is copied onto the remote topic name. Rules
    already on the target are left out; nothing is ever deleted. Non-topic ACLs are ignored
    silently; left-out topic ACLs are reported in ``skipped``.
    """
    if source_acls is None:
        return AclPlan()
    present = set(target_acls or ())
    rules: list[AclRule] = []
    seen: set[AclRule] = set()
    skipped: list[Skipped] = []
    for rule in sorted(set(source_acls)):
        if rule.resource_type != ResourceType.TOPIC:
            continue
        if rule.pattern_type != PatternType.LITERAL:
            skipped.append(SkippedAcl(rule, SkipReason.PATTERN))
        elif not should_replicate_acl(rule):
            skipped.append(SkippedAcl(rule, SkipReason.EXCLUDED))
        elif rule.resource_name == "*":
            skipped.append(SkippedAcl(rule, SkipReason.WILDCARD))
        elif not should_replicate(rule.resource_name):
            reason = skip_reason(policy, rule.resource_name, target_alias)
            skipped.append(SkippedAcl(rule, reason))
        else:
            mapped = target_acl_rule(rule, source_alias=source_alias, policy=policy)
            if mapped not in present and mapped not in seen:
                seen.add(mapped)
                rules.append(mapped)
    return AclPlan((CreateAcls(rules),) if rules else (), skipped)
