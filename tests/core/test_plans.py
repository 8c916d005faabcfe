"""The pure topic / config / ACL planners (mirrorlib.core.plans), with the rules of MM2's
MirrorSourceConnectorTest and MirrorConnectorsIntegrationBaseTest (testReplicateSourceDefault,
testReplicateTargetDefault) ported to plan values. No broker needed."""

from __future__ import annotations

import pickle
from collections.abc import Callable

import attrs
import pytest

from mirrorlib.core.config import MirrorConfig
from mirrorlib.core.config.filters import DefaultConfigPropertyFilter
from mirrorlib.core.config.keys import CONFIG_PROPERTIES_EXCLUDE_DEFAULT, parse_list
from mirrorlib.core.plans import (
    AclOperation,
    AclPermission,
    AclPlan,
    AclRule,
    AlterTopicConfigs,
    ConfigOp,
    ConfigPlan,
    ConfigSource,
    CreateAcls,
    CreatePartitions,
    CreateTopic,
    FrozenMap,
    PatternType,
    Plan,
    ResourceType,
    SkippedAcl,
    SkippedTopic,
    SkipReason,
    TopicConfigEntry,
    TopicPlan,
    TopicSnapshot,
    comparison_turn,
    plan_acls,
    plan_topic_configs,
    plan_topics,
    should_replicate_acl,
    target_acl_rule,
    target_config,
)
from mirrorlib.core.policy import DefaultReplicationPolicy, IdentityReplicationPolicy

SOURCE, TARGET = "source", "target"
DEFAULT = DefaultReplicationPolicy()
IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"


def flow_rule(**props: str) -> Callable[[str], bool]:
    """The production ``shouldReplicateTopic`` of flow source->target configured with ``props``
    (``__`` in a name stands for ``.``)."""
    config = {
        "clusters": f"{SOURCE}, {TARGET}",
        **{k.replace("__", "."): v for k, v in props.items()},
    }
    return MirrorConfig.from_properties(config).flow(SOURCE, TARGET).should_replicate_topic


def config_filter(**props: str) -> DefaultConfigPropertyFilter:
    """The production config property filter configured with ``props`` (``__`` stands for ``.``)."""
    return DefaultConfigPropertyFilter.from_config(
        {k.replace("__", "."): v for k, v in props.items()}
    )


def everything(topic: str) -> bool:
    return True


def topic(name: str, partitions: int = 1, **configs: TopicConfigEntry | str) -> TopicSnapshot:
    return TopicSnapshot(name, partitions, {k.replace("_", "."): v for k, v in configs.items()})


def topics_plan(sources, targets, **kw) -> TopicPlan:
    kw.setdefault("source_alias", SOURCE)
    kw.setdefault("policy", DEFAULT)
    kw.setdefault("should_replicate", flow_rule())
    kw.setdefault("replication_factor", 2)
    return plan_topics(sources, targets, **kw)


def configs_plan(sources, targets, **kw) -> ConfigPlan:
    kw.setdefault("source_alias", SOURCE)
    kw.setdefault("policy", DEFAULT)
    kw.setdefault("should_replicate", flow_rule())
    return plan_topic_configs(sources, targets, **kw)


def acls_plan(sources, targets=(), **kw) -> AclPlan:
    kw.setdefault("source_alias", SOURCE)
    kw.setdefault("policy", DEFAULT)
    kw.setdefault("should_replicate", everything)
    return plan_acls(sources, targets, **kw)


# -- snapshot values ---------------------------------------------------------------------------


class TestValues:
    def test_config_value_constructors(self) -> None:
        assert TopicConfigEntry("v") == TopicConfigEntry("v", False, False, False, "UNKNOWN_CONFIG")
        d = TopicConfigEntry.default("1")
        assert d.is_default and d.source == ConfigSource.DEFAULT_CONFIG == "DEFAULT_CONFIG"
        o = TopicConfigEntry.override("2")
        assert not o.is_default and o.is_topic_override
        assert not TopicConfigEntry("3", source="DYNAMIC_BROKER_CONFIG").is_topic_override

    def test_topic_snapshot_is_an_immutable_hashable_value(self) -> None:
        a = TopicSnapshot("t", 3, {"retention.ms": "1000"})
        b = TopicSnapshot("t", 3, {"retention.ms": TopicConfigEntry.override("1000")})
        assert a == b and hash(a) == hash(b)
        assert a.configs == {"retention.ms": TopicConfigEntry.override("1000")}
        with pytest.raises(TypeError):
            a.configs["x"] = TopicConfigEntry("y")  # type: ignore[index]
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            a.partitions = 4  # type: ignore[misc]
        assert pickle.loads(pickle.dumps(a)) == a
        assert TopicSnapshot("t", 1).configs == {}

    def test_frozen_map(self) -> None:
        m = FrozenMap({"a": 1, "b": 2})
        assert m == {"b": 2, "a": 1} and m == FrozenMap([("b", 2), ("a", 1)])
        assert hash(m) == hash(FrozenMap({"b": 2, "a": 1}))
        assert list(m) == ["a", "b"] and len(m) == 2 and m["a"] == 1
        assert pickle.loads(pickle.dumps(m)) == m
        assert m != 3
        assert m.get("a") == 1 and m.get("z") is None and m.get("z", 0) == 0
        assert "a" in m and "z" not in m
        assert list(m.keys()) == ["a", "b"] and list(m.values()) == [1, 2]
        assert list(m.items()) == [("a", 1), ("b", 2)]

    def test_a_snapshot_keeps_a_frozen_map_of_entries_as_it_is(self) -> None:
        entries = FrozenMap({"retention.ms": TopicConfigEntry.override("1")})
        assert TopicSnapshot("t", 1, entries).configs is entries  # shared, not copied
        plain = FrozenMap({"retention.ms": "1"})  # values still to be made entries
        assert TopicSnapshot("t", 1, plain).configs == entries

    def test_acl_rule_enums_accept_strings_in_any_case(self) -> None:
        r = AclRule("topic", "t", "literal", "User:a", "*", "read", "allow")
        assert r.resource_type is ResourceType.TOPIC
        assert r.pattern_type is PatternType.LITERAL
        assert r.operation is AclOperation.READ and r.permission is AclPermission.ALLOW
        assert r == AclRule.topic("t", "User:a", "READ")
        assert hash(r) == hash(AclRule.topic("t", "User:a", AclOperation.READ))
        with pytest.raises(ValueError):
            AclRule.topic("t", "User:a", "FLY")
        assert str(r) == "ALLOW READ on TOPIC LITERAL 't' for User:a from host *"


# -- config property filter (MM2's DefaultConfigPropertyFilter) ------------------------------


class TestConfigPropertyFilter:
    def test_planners_default_to_mm2_default_excludes(self) -> None:
        excluded = (
            "follower.replication.throttled.replicas",
            "leader.replication.throttled.replicas",
            "message.timestamp.difference.max.ms",
            "log.message.timestamp.before.max.ms",
            "log.message.timestamp.after.max.ms",
            "message.timestamp.type",
            "unclean.leader.election.enable",
            "min.insync.replicas",
        )
        assert set(parse_list(CONFIG_PROPERTIES_EXCLUDE_DEFAULT)) == set(excluded)
        kept = ("retention.ms", "cleanup.policy", "name-1", "min.insync.replicasX")
        src = [TopicSnapshot("t", 1, {p: "1" for p in excluded + kept})]
        (create,) = topics_plan(src, {}).creates
        assert set(create.configs) == set(kept)
        (alter,) = configs_plan(src, [TopicSnapshot("source.t", 1)]).alters
        assert {op.key for op in alter.ops} == set(kept)

    def test_config_property_filtering(self) -> None:
        # testConfigPropertyFiltering
        configs = {
            "name-1": TopicConfigEntry("value-1"),
            "min.insync.replicas": TopicConfigEntry("2"),
        }
        kept = target_config(
            configs, config_filter=config_filter().should_replicate_config_property
        )
        assert "name-1" in kept
        assert "min.insync.replicas" not in kept


# -- topic creation and partitions --------------------------------------------------------------


class TestPlanTopics:
    def test_new_topic_gets_source_partitions_and_filtered_configs(self) -> None:
        # testNewTopicConfigs
        f = config_filter(config__properties__exclude=r"min\.insync\.replicas, exclude_param.*")
        src = TopicSnapshot("testtopic", 3, {
            "name-1": TopicConfigEntry("value-1"),
            "exclude_param.param1": TopicConfigEntry("value-param1"),
            "min.insync.replicas": TopicConfigEntry("2"),
        })  # fmt: skip
        plan = topics_plan(
            [src], {}, config_filter=f.should_replicate_config_property, replication_factor=3
        )
        assert plan.steps == (
            CreateTopic("source.testtopic", 3, 3, {"name-1": "value-1"}, source_topic="testtopic"),
        )
        assert plan.creates == plan.steps and plan.grows == ()

    def test_refresh_creates_missing_topic_until_it_exists(self) -> None:
        # testRefreshTopicPartitions
        src = [topic("topic", 1, cleanup_policy=TopicConfigEntry("compact"),
                     segment_bytes=TopicConfigEntry("100"))]  # fmt: skip
        expected = CreateTopic(
            "source.topic", 1, 2, {"cleanup.policy": "compact", "segment.bytes": "100"},
            source_topic="topic",
        )  # fmt: skip
        assert topics_plan(src, {}).steps == (expected,)
        # the target topic was not created: the next plan asks again
        assert topics_plan(src, {}).steps == (expected,)
        # once it exists nothing is left to do
        assert topics_plan(src, {"source.topic": 1}).is_empty

    def test_topic_only_on_target_causes_nothing(self) -> None:
        # testRefreshTopicPartitionsTopicOnTargetFirst
        assert topics_plan([], [topic("source.topic", 1)]).is_empty
        assert topics_plan([], {"source.topic": 4}).is_empty

    def test_creation_config_rules(self) -> None:
        configs = {
            "retention.ms": TopicConfigEntry.override("1000"),
            "segment.bytes": TopicConfigEntry.default("1073741824"),
            "cleanup.policy": TopicConfigEntry("delete", source="DYNAMIC_DEFAULT_BROKER_CONFIG"),
            "compression.type": TopicConfigEntry("gzip", source="DYNAMIC_BROKER_CONFIG"),
            "max.message.bytes": TopicConfigEntry("100", source="STATIC_BROKER_CONFIG"),
            "secret.thing": TopicConfigEntry(
                None, is_sensitive=True, source="DYNAMIC_TOPIC_CONFIG"
            ),
            "remote.storage": TopicConfigEntry(
                "x", is_read_only=True, source="DYNAMIC_TOPIC_CONFIG"
            ),
            "null.value": TopicConfigEntry(None, source="DYNAMIC_TOPIC_CONFIG"),
            "min.insync.replicas": TopicConfigEntry.override("2"),
        }
        src = [TopicSnapshot("t", 2, configs)]
        (create,) = topics_plan(src, {}).creates
        assert create.configs == {
            "retention.ms": "1000",
            "cleanup.policy": "delete",
            "compression.type": "gzip",
        }
        # use.defaults.from=source also carries the source's default values
        (create,) = topics_plan(src, {}, use_defaults_from="source").creates
        assert create.configs == {
            "retention.ms": "1000",
            "segment.bytes": "1073741824",
            "cleanup.policy": "delete",
            "compression.type": "gzip",
        }

    def test_partitions_grow_never_shrink(self) -> None:
        src = [topic("a", 5), topic("b", 3), topic("c", 4)]
        plan = topics_plan(src, {"source.a": 3, "source.b": 5, "source.c": 4})
        assert plan.steps == (CreatePartitions("source.a", 5, 3, source_topic="a"),)
        assert plan.grows == plan.steps

    def test_never_deletes(self) -> None:
        plan = topics_plan([topic("kept", 1)], {"source.kept": 1, "source.gone": 7, "other": 1})
        assert plan.is_empty and plan.skipped == ()

    def test_steps_sorted_creations_first(self) -> None:
        src = [topic("z", 2), topic("b", 1), topic("a", 1), topic("y", 3)]
        plan = topics_plan(src, {"source.z": 1, "source.y": 1})
        assert [type(s).__name__ + ":" + s.name for s in plan.steps] == [
            "CreateTopic:source.a", "CreateTopic:source.b",
            "CreatePartitions:source.y", "CreatePartitions:source.z",
        ]  # fmt: skip

    def test_skip_reasons(self) -> None:
        src = [topic(n) for n in (
            "orders", "__consumer_offsets", "mm2-offset-syncs.target.internal",
            "source.checkpoints.internal", "target.orders", "other.target.orders", "x.replica",
            "heartbeats", "other.heartbeats", "target.heartbeats", "source.orders",
        )]  # fmt: skip
        plan = topics_plan(src, {}, target_alias=TARGET)
        assert {c.source_topic for c in plan.creates} == {
            "orders",
            "heartbeats",
            "other.heartbeats",
            "source.orders",
        }
        assert set(plan.skipped_topics) == {
            SkippedTopic("__consumer_offsets", SkipReason.INTERNAL),
            SkippedTopic("mm2-offset-syncs.target.internal", SkipReason.INTERNAL),
            SkippedTopic("source.checkpoints.internal", SkipReason.INTERNAL),
            SkippedTopic("target.orders", SkipReason.CYCLE),
            SkippedTopic("other.target.orders", SkipReason.CYCLE),
            SkippedTopic("target.heartbeats", SkipReason.CYCLE),
            SkippedTopic("x.replica", SkipReason.FILTERED),
        }
        # without target_alias a cycle is reported as filtered
        plan = topics_plan([topic("target.orders")], {})
        assert plan.skipped == (SkippedTopic("target.orders", "filtered"),)

    def test_heartbeats_replicated_despite_filter(self) -> None:
        # testReplicatesHeartbeatsDespiteFilter / heartbeats.replication.enabled=false
        src = [topic("heartbeats"), topic("us-west.heartbeats"), topic("t")]
        plan = topics_plan(src, {}, should_replicate=flow_rule(topics=""))
        assert {c.name for c in plan.creates} == {"source.heartbeats", "source.us-west.heartbeats"}
        plan = topics_plan(
            src, {}, should_replicate=flow_rule(topics="", heartbeats__replication__enabled="false")
        )
        assert plan.is_empty and len(plan.skipped) == 3

    def test_identity_policy(self) -> None:
        # testIdentityReplication: same names (heartbeats still get the prefix); heartbeats
        # from the target are not sent back
        policy = IdentityReplicationPolicy()
        src = [topic("t", 2), topic("target.t"), topic("heartbeats"), topic("target.heartbeats")]
        accept = flow_rule(replication__policy__class=IDENTITY)
        plan = topics_plan(
            src, {"t": 1}, policy=policy, should_replicate=accept,
            target_alias=TARGET,
        )  # fmt: skip
        assert plan.steps == (
            CreateTopic("source.heartbeats", 1, 2, {}, source_topic="heartbeats"),
            CreateTopic("target.t", 1, 2, {}, source_topic="target.t"),
            CreatePartitions("t", 2, 1, source_topic="t"),
        )
        assert plan.skipped == (SkippedTopic("target.heartbeats", SkipReason.CYCLE),)

    def test_remote_name_conflict(self) -> None:
        class Lossy(DefaultReplicationPolicy):
            def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
                return super().format_remote_topic(source_cluster_alias, topic.lower())

        plan = topics_plan([topic("T"), topic("t")], {}, policy=Lossy())
        assert [c.source_topic for c in plan.creates] == ["T"]
        assert plan.skipped == (SkippedTopic("t", SkipReason.CONFLICT),)

    def test_broker_default_replication_factor(self) -> None:
        (create,) = topics_plan([topic("t")], {}, replication_factor=-1).creates
        assert create.replication_factor == -1
        assert "replication factor broker default" in create.describe()[0]

    def test_custom_separator(self) -> None:
        policy = DefaultReplicationPolicy(separator="__")
        (create,) = topics_plan(
            [topic("t")],
            {},
            policy=policy,
            should_replicate=flow_rule(replication__policy__separator="__"),
        ).creates
        assert create.name == "source__t"


# -- topic config sync ------------------------------------------------------------------------


class TestPlanTopicConfigs:
    def test_incremental_ops_target_defaults(self) -> None:
        src = [TopicSnapshot("t", 1, {
            "retention.ms": TopicConfigEntry.override("1000"),
            "segment.bytes": TopicConfigEntry.default("1073741824"),
            "min.insync.replicas": TopicConfigEntry.override("2"),
            "max.message.bytes": TopicConfigEntry("9", source="STATIC_BROKER_CONFIG"),
            "secret": TopicConfigEntry(None, is_sensitive=True),
            "ro": TopicConfigEntry("x", is_read_only=True),
        })]  # fmt: skip
        plan = configs_plan(src, [TopicSnapshot("source.t", 1)])  # target configs unknown
        assert plan.steps == (
            AlterTopicConfigs(
                "source.t",
                (ConfigOp("retention.ms", "SET", "1000"), ConfigOp("segment.bytes", "DELETE")),
                source_topic="t",
            ),
        )
        assert plan.alters == plan.steps

    def test_incremental_ops_source_defaults(self) -> None:
        src = [topic("t", retention_ms=TopicConfigEntry.override("1000"),
                     segment_bytes=TopicConfigEntry.default("1073741824"))]  # fmt: skip
        plan = configs_plan(src, [TopicSnapshot("source.t", 1)], use_defaults_from="source")
        (alter,) = plan.alters
        assert alter.ops == (
            ConfigOp("retention.ms", "SET", "1000"),
            ConfigOp("segment.bytes", "SET", "1073741824"),
        )

    def test_use_defaults_from_predicate(self) -> None:
        # MM2's ConfigPropertyFilter.shouldReplicateSourceDefault is per property
        src = [topic("t", 1, retention_ms=TopicConfigEntry.default("1"),
                     segment_bytes=TopicConfigEntry.default("2"))]  # fmt: skip
        plan = configs_plan(src, [TopicSnapshot("source.t", 1)],
                            use_defaults_from=lambda p: p == "retention.ms")  # fmt: skip
        assert plan.alters[0].ops == (
            ConfigOp("retention.ms", "SET", "1"),
            ConfigOp("segment.bytes", "DELETE"),
        )
        f = config_filter(use__defaults__from="source")
        (create,) = topics_plan(
            src, {}, use_defaults_from=f.should_replicate_source_default
        ).creates
        assert create.configs == {"retention.ms": "1", "segment.bytes": "2"}
        with pytest.raises(ValueError, match="use.defaults.from"):
            configs_plan(src, [], use_defaults_from="both")

    def test_replicate_target_default(self) -> None:
        # MirrorConnectorsIntegrationBaseTest.testReplicateTargetDefault
        target = [topic("source.t", 1, retention_bytes=TopicConfigEntry.default("-1"))]
        src = [topic("t", 1, retention_bytes=TopicConfigEntry.override("1000"))]
        (alter,) = configs_plan(src, target).alters
        assert alter.ops == (ConfigOp("retention.bytes", "SET", "1000"),)
        # the source override is removed: the target goes back to its own default
        target = [topic("source.t", 1, retention_bytes=TopicConfigEntry.override("1000"))]
        src = [topic("t", 1, retention_bytes=TopicConfigEntry.default("-1"))]
        (alter,) = configs_plan(src, target).alters
        assert alter.ops == (ConfigOp("retention.bytes", "DELETE"),)
        # and once it has, nothing is left to do
        target = [topic("source.t", 1, retention_bytes=TopicConfigEntry.default("-1"))]
        assert configs_plan(src, target).is_empty

    def test_replicate_source_default(self) -> None:
        # MirrorConnectorsIntegrationBaseTest.testReplicateSourceDefault: the target's own
        # overrides become the source's defaults, except excluded properties
        f = config_filter(
            config__properties__exclude="delete.retention.ms", use__defaults__from="source"
        )
        src = [topic("t", 1, retention_bytes=TopicConfigEntry.default("-1"),
                     delete_retention_ms=TopicConfigEntry.default("86400000"))]  # fmt: skip
        target = [topic("source.t", 1, retention_bytes=TopicConfigEntry.override("2000"),
                        delete_retention_ms=TopicConfigEntry.override("2000"))]  # fmt: skip
        plan = configs_plan(
            src, target, config_filter=f.should_replicate_config_property,
            use_defaults_from=f.should_replicate_source_default,
        )  # fmt: skip
        (alter,) = plan.alters
        assert alter.ops == (ConfigOp("retention.bytes", "SET", "-1"),)

    def test_stable_state_is_empty_and_mm2_parity_resends(self) -> None:
        src = [topic("t", 1, retention_ms=TopicConfigEntry.override("1000"),
                     segment_bytes=TopicConfigEntry.default("1073741824"),
                     cleanup_policy=TopicConfigEntry.default("delete"))]  # fmt: skip
        target = [topic("source.t", 1, retention_ms=TopicConfigEntry.override("1000"),
                        segment_bytes=TopicConfigEntry.default("1073741824"),
                        cleanup_policy=TopicConfigEntry("delete", source="DYNAMIC_BROKER_CONFIG"))]  # fmt: skip
        assert configs_plan(src, target).is_empty
        # MM2 sends everything again every time
        (alter,) = configs_plan(src, target, skip_unchanged=False).alters
        assert alter.ops == (
            ConfigOp("cleanup.policy", "DELETE"),
            ConfigOp("retention.ms", "SET", "1000"),
            ConfigOp("segment.bytes", "DELETE"),
        )

    def test_set_when_target_value_differs_even_if_default(self) -> None:
        src = [topic("t", 1, retention_ms=TopicConfigEntry.override("1000"))]
        target = [topic("source.t", 1, retention_ms=TopicConfigEntry.default("604800000"))]
        (alter,) = configs_plan(src, target).alters
        assert alter.ops == (ConfigOp("retention.ms", "SET", "1000"),)

    def test_only_topics_present_on_target_and_replicated(self) -> None:
        src = [topic("a", retention_ms="1"), topic("b", retention_ms="1"),
               topic("__x", retention_ms="1")]  # fmt: skip
        target = [topic("source.a"), topic("source.__x"), topic("source.zzz")]
        plan = configs_plan(src, target)
        assert [a.name for a in plan.alters] == ["source.a"]
        assert plan.skipped == (SkippedTopic("__x", SkipReason.INTERNAL),)

    def test_excluded_configs_never_synced(self) -> None:
        src = [topic("t", 1, **{k.replace(".", "_"): TopicConfigEntry.override("1")
                                for k in parse_list(CONFIG_PROPERTIES_EXCLUDE_DEFAULT)})]  # fmt: skip
        assert configs_plan(src, [TopicSnapshot("source.t", 1)]).is_empty


# -- ACL sync ---------------------------------------------------------------------------------


class TestPlanAcls:
    def test_acl_filtering(self) -> None:
        # testAclFiltering
        assert not should_replicate_acl(AclRule.topic("test_topic", "kafka", "WRITE", "ALLOW"))
        assert should_replicate_acl(AclRule.topic("test_topic", "kafka", "ALL", "ALLOW"))
        assert should_replicate_acl(AclRule.topic("test_topic", "kafka", "WRITE", "DENY"))

    def test_acl_transformation(self) -> None:
        # testAclTransformation
        allow_all = AclRule.topic("test_topic", "kafka", "ALL", "ALLOW", host="")
        mapped = target_acl_rule(allow_all, source_alias=SOURCE, policy=DEFAULT)
        assert mapped.resource_name == "source.test_topic"
        assert mapped.operation is AclOperation.READ
        assert mapped.permission is AclPermission.ALLOW
        assert (mapped.principal, mapped.host) == ("kafka", "")
        deny_all = AclRule.topic("test_topic", "kafka", "ALL", "DENY")
        mapped = target_acl_rule(deny_all, source_alias=SOURCE, policy=DEFAULT)
        assert mapped.operation is AclOperation.ALL
        assert mapped.permission is AclPermission.DENY

    def test_plan(self) -> None:
        src = [
            AclRule.topic("t", "User:w", "WRITE", "ALLOW"),
            AclRule.topic("t", "User:all", "ALL", "ALLOW", host="10.0.0.1"),
            AclRule.topic("t", "User:r", "READ", "ALLOW"),
            AclRule.topic("t", "User:d", "DESCRIBE", "ALLOW"),
            AclRule.topic("t", "User:x", "ALL", "DENY"),
            AclRule.topic("t", "User:x", "WRITE", "DENY"),
            AclRule.topic("t", "User:p", "READ", "ALLOW", pattern_type="PREFIXED"),
            AclRule("GROUP", "g", "LITERAL", "User:r", "*", "READ", "ALLOW"),
            AclRule("CLUSTER", "kafka-cluster", "LITERAL", "User:r", "*", "ALTER", "ALLOW"),
        ]
        plan = acls_plan(src)
        assert set(plan.rules) == {
            AclRule.topic("source.t", "User:all", "READ", "ALLOW", host="10.0.0.1"),
            AclRule.topic("source.t", "User:r", "READ", "ALLOW"),
            AclRule.topic("source.t", "User:d", "DESCRIBE", "ALLOW"),
            AclRule.topic("source.t", "User:x", "ALL", "DENY"),
            AclRule.topic("source.t", "User:x", "WRITE", "DENY"),
        }
        assert len(plan.steps) == 1 and isinstance(plan.steps[0], CreateAcls)
        assert set(plan.skipped_acls) == {
            SkippedAcl(src[0], SkipReason.EXCLUDED),
            SkippedAcl(src[6], SkipReason.PATTERN),
        }

    def test_only_replicated_topics_and_already_present_skipped(self) -> None:
        src = [
            AclRule.topic("t", "User:a", "READ"),
            AclRule.topic("u", "User:a", "READ"),
            AclRule.topic("target.t", "User:a", "READ"),
            AclRule.topic("__consumer_offsets", "User:a", "READ"),
        ]
        present = [AclRule.topic("source.u", "User:a", "READ")]
        plan = acls_plan(src, present, should_replicate=flow_rule(),
                         target_alias=TARGET)  # fmt: skip
        assert plan.rules == (AclRule.topic("source.t", "User:a", "READ"),)
        assert set(plan.skipped) == {
            SkippedAcl(src[2], SkipReason.CYCLE),
            SkippedAcl(src[3], SkipReason.INTERNAL),
        }
        # once created on the target, nothing is left to do
        assert acls_plan(src, [*present, *plan.rules],
                         should_replicate=flow_rule()).is_empty  # fmt: skip

    def test_duplicates_collapse(self) -> None:
        # ALLOW ALL and ALLOW READ for the same principal both become ALLOW READ
        src = [AclRule.topic("t", "User:a", "ALL"), AclRule.topic("t", "User:a", "READ")]
        assert acls_plan(src).rules == (AclRule.topic("source.t", "User:a", "READ"),)

    def test_wildcard_literal_skipped(self) -> None:
        rule = AclRule.topic("*", "User:a", "READ")
        plan = acls_plan([rule])
        assert plan.is_empty and plan.skipped == (SkippedAcl(rule, SkipReason.WILDCARD),)

    def test_no_authorizer_on_source(self) -> None:
        plan = acls_plan(None, None)
        assert plan.is_empty and plan.skipped == ()

    def test_never_deletes(self) -> None:
        assert acls_plan([], [AclRule.topic("source.t", "User:a", "READ")]).is_empty


# -- plans as values --------------------------------------------------------------------------


class TestPlanValues:
    def test_describe(self) -> None:
        plan = (
            topics_plan(
                [topic("a", 2, retention_ms="1000", cleanup_policy="compact"), topic("b", 4),
                 topic("__x")],
                {"source.b": 3},
            )
            + configs_plan([topic("b", 4, retention_ms="5", segment_bytes=TopicConfigEntry.default("1"))],
                           [topic("source.b", 3, segment_bytes=TopicConfigEntry.override("2"))])
            + acls_plan([AclRule.topic("a", "User:x", "ALL"),
                         AclRule.topic("a", "User:x", "WRITE")])
        )  # fmt: skip
        assert type(plan) is Plan
        assert plan.describe() == "\n".join([
            "create topic source.a from a: 2 partition(s), replication factor 2",
            "    cleanup.policy=compact",
            "    retention.ms=1000",
            "grow topic source.b: 3 -> 4 partitions",
            "alter configs of topic source.b:",
            "    set retention.ms=5",
            "    delete segment.bytes",
            "create 1 ACL(s):",
            "    ALLOW READ on TOPIC LITERAL 'source.a' for User:x from host *",
            "skip topic __x (internal)",
            "skip ACL ALLOW WRITE on TOPIC LITERAL 'a' for User:x from host * (excluded)",
        ])  # fmt: skip
        assert str(plan) == plan.describe()
        assert "skip" not in plan.describe(skipped=False)

    def test_empty(self) -> None:
        assert Plan().is_empty and Plan().describe() == "nothing to do"
        p = TopicPlan((), (SkippedTopic("__x", "internal"),))
        assert p.is_empty
        assert p.describe() == "nothing to do\nskip topic __x (internal)"

    def test_plans_are_hashable_picklable_values(self) -> None:
        plan = topics_plan([topic("a", 2, retention_ms="1000"), topic("b", 4)], {"source.b": 3})
        again = topics_plan([topic("b", 4), topic("a", 2, retention_ms="1000")], {"source.b": 3})
        assert plan == again and hash(plan) == hash(again)
        assert pickle.loads(pickle.dumps(plan)) == plan
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            plan.steps = ()  # type: ignore[misc]

    def test_config_op_is_a_tuple(self) -> None:
        key, op, value = ConfigOp("k", "SET", "v")
        assert (key, op, value) == ("k", "SET", "v")
        assert ConfigOp("k", "DELETE") == ("k", "DELETE", None)


def test_plans_is_pure() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('confluent_kafka', 'pyspark'):\n"
        "            raise ImportError('pure core imported ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import mirrorlib.core.plans\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_comparison_turns_are_stable_and_spread() -> None:
    names = [f"topic-{i}" for i in range(10_000)]
    turns = [comparison_turn(n, 10) for n in names]
    assert turns == [comparison_turn(n, 10) for n in names]
    assert {t: turns.count(t) for t in range(10)}.keys() == set(range(10))
    assert all(800 < turns.count(t) < 1200 for t in range(10))
    assert comparison_turn("x", 1) == 0
    with pytest.raises(ValueError):
        comparison_turn("x", 0)
