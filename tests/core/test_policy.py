"""Replication policies: MM2's naming rules (ReplicationPolicyTest, MirrorClientTest cases)."""

from __future__ import annotations

import pickle

import pytest

from mirrorlib import (
    ConfigError,
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    ReplicationPolicy,
)
from mirrorlib.core.policy import is_cycle, java_split, load_policy
from tests.fixtures.custom_policy import UpperPrefixPolicy


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a.b.topic", ["a", "b", "topic"]),
        ("topic.", ["topic"]),
        (".x", ["", "x"]),
        ("a..b", ["a", "", "b"]),
        ("...", []),
        ("orders", ["orders"]),
        ("", [""]),
        ("a.", ["a"]),
    ],
)
def test_java_split_semantics(text: str, expected: list[str]) -> None:
    assert java_split(text, ".") == expected


@pytest.mark.parametrize(
    ("topic", "source", "upstream", "original"),
    [
        ("a.b.topic", "a", "b.topic", "topic"),
        ("topic.", None, None, "topic."),
        (".x", "", "x", "x"),
        ("a..b", "a", ".b", "b"),
        ("...", None, None, "..."),
        ("orders", None, None, "orders"),
        ("us-west.orders", "us-west", "orders", "orders"),
    ],
)
def test_default_policy_edge_cases(
    topic: str, source: str | None, upstream: str | None, original: str
) -> None:
    policy = DefaultReplicationPolicy()
    assert policy.topic_source(topic) == source
    assert policy.upstream_topic(topic) == upstream
    assert policy.original_topic(topic) == original


def test_default_policy_names() -> None:
    policy = DefaultReplicationPolicy()
    assert policy.format_remote_topic("A", "orders") == "A.orders"
    assert policy.heartbeats_topic() == "heartbeats"
    assert policy.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert policy.checkpoints_topic("A") == "A.checkpoints.internal"


def test_internal_topics_like_mm2() -> None:
    policy = DefaultReplicationPolicy()
    for topic in (
        "__consumer_offsets",
        ".hidden",
        "mm2-offsets.CLUSTER.internal",
        "mm2-offset-syncs.B.internal",
        "A.checkpoints.internal",
    ):
        assert policy.is_internal_topic(topic), topic
    for topic in ("mm2-offsets_CLUSTER_internal", "orders", "A.orders", "foo.internal"):
        assert not policy.is_internal_topic(topic), topic
    assert policy.is_mm2_internal_topic("mm2-status.A.internal")
    assert policy.is_checkpoints_topic("A.checkpoints.internal")
    assert not policy.is_checkpoints_topic("A.checkpoints")


def test_custom_separator_with_and_without_internal_separator() -> None:
    enabled = DefaultReplicationPolicy("__", True)
    assert enabled.format_remote_topic("A", "t") == "A__t"
    assert enabled.offset_syncs_topic("CLUSTER") == "mm2-offset-syncs__CLUSTER__internal"
    assert enabled.checkpoints_topic("CLUSTER") == "CLUSTER__checkpoints__internal"
    assert enabled.is_checkpoints_topic("CLUSTER__checkpoints__internal")
    assert enabled.is_internal_topic("mm2-offsets__CLUSTER__internal")
    assert enabled.topic_source("A__B__t") == "A"
    assert enabled.original_topic("A__B__t") == "t"
    disabled = DefaultReplicationPolicy("__", False)
    assert disabled.offset_syncs_topic("CLUSTER") == "mm2-offset-syncs.CLUSTER.internal"
    assert disabled.checkpoints_topic("CLUSTER") == "CLUSTER.checkpoints.internal"
    assert disabled.heartbeats_topic() == "heartbeats"


def test_heartbeat_topics_like_mirror_client_test() -> None:
    policy = DefaultReplicationPolicy()
    for topic in ("heartbeats", "source1.heartbeats", "source2.source1.heartbeats"):
        assert policy.is_heartbeats_topic(topic)
    for topic in ("heartbeats!", "source1-heartbeats", "heartbeats.source1", "myheartbeats"):
        assert not policy.is_heartbeats_topic(topic)
    # MM2 quirk kept deliberately: a user topic "x.heartbeats" counts as a heartbeats topic
    assert policy.is_heartbeats_topic("x.heartbeats")
    custom = DefaultReplicationPolicy("__")
    assert custom.is_heartbeats_topic("source1__heartbeats")
    assert not custom.is_heartbeats_topic("source1.heartbeats")


def test_identity_policy() -> None:
    policy = IdentityReplicationPolicy("primary")
    assert policy.format_remote_topic("primary", "orders") == "orders"
    assert policy.format_remote_topic("primary", "heartbeats") == "primary.heartbeats"
    assert policy.topic_source("orders") == "primary"
    assert policy.topic_source("backup.heartbeats") == "backup"
    assert policy.upstream_topic("orders") == "orders"
    assert policy.original_topic("orders") == "orders"
    assert policy.is_heartbeats_topic("backup.heartbeats")
    assert IdentityReplicationPolicy().topic_source("orders") is None


def test_policy_values_compare_and_pickle() -> None:
    assert DefaultReplicationPolicy() == DefaultReplicationPolicy(".", True)
    assert DefaultReplicationPolicy() != DefaultReplicationPolicy("_")
    assert IdentityReplicationPolicy("a") != DefaultReplicationPolicy()
    for policy in (DefaultReplicationPolicy("__", False), IdentityReplicationPolicy("a")):
        assert pickle.loads(pickle.dumps(policy)) == policy
    assert "separator='__'" in repr(DefaultReplicationPolicy("__"))


def test_empty_separator_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="replication.policy.separator"):
        DefaultReplicationPolicy("")


def test_subclass_defines_three_methods_and_gets_the_rest() -> None:
    policy = UpperPrefixPolicy()
    assert policy.format_remote_topic("east", "orders") == "EAST__orders"
    assert policy.topic_source("EAST__orders") == "east"
    assert policy.original_topic("WEST__EAST__orders") == "orders"
    assert policy.is_heartbeats_topic("EAST__heartbeats")
    assert policy.checkpoints_topic("east") == "east.checkpoints.internal"
    with pytest.raises(TypeError):
        ReplicationPolicy()  # type: ignore[abstract]


def test_original_topic_terminates_on_a_looping_policy() -> None:
    class Looping(ReplicationPolicy):
        def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
            return topic

        def topic_source(self, topic: str) -> str | None:
            return "x"

        def upstream_topic(self, topic: str) -> str | None:
            return {"a": "b", "b": "a"}[topic]

    assert Looping().original_topic("a") in {"a", "b"}


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({}, DefaultReplicationPolicy()),
        (
            {
                "replication.policy.class": "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
            },
            DefaultReplicationPolicy(),
        ),
        (
            {
                "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
                "source.cluster.alias": "A",
            },
            IdentityReplicationPolicy("A"),
        ),
        (
            {"replication.policy.separator": "_"},
            DefaultReplicationPolicy("_"),
        ),
        (
            {
                "replication.policy.separator": "_",
                "replication.policy.internal.topic.separator.enabled": "false",
            },
            DefaultReplicationPolicy("_", False),
        ),
        (  # MM2 reads the flag only when a separator is configured
            {"replication.policy.internal.topic.separator.enabled": "false"},
            DefaultReplicationPolicy(".", True),
        ),
        (
            {"replication.policy.class": "mirrorlib.core.policy:IdentityReplicationPolicy"},
            IdentityReplicationPolicy(),
        ),
    ],
)
def test_load_policy(config: dict[str, str], expected: ReplicationPolicy) -> None:
    assert load_policy(config) == expected


def test_load_user_policy_by_python_path() -> None:
    for name in (
        "tests.fixtures.custom_policy:UpperPrefixPolicy",
        "tests.fixtures.custom_policy.UpperPrefixPolicy",
    ):
        policy = load_policy({"replication.policy.class": name, "upper.prefix.marker": "--"})
        assert isinstance(policy, UpperPrefixPolicy)
        assert policy.format_remote_topic("a", "t") == "A--t"


@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("com.example.MyJavaPolicy", "cannot import.*Java classes cannot be loaded"),
        ("org.apache.kafka.connect.mirror.Unknown", "ported to a Python subclass"),
        ("no_such_module_xyz:Policy", "cannot import module"),
        ("tests.fixtures.custom_policy:Missing", "has no attribute"),
        ("tests.fixtures.custom_policy:NotAPolicy", "not a subclass"),
        ("mirrorlib.core.policy:ReplicationPolicy", "abstract methods"),
    ],
)
def test_load_policy_errors_name_the_key(name: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        load_policy({"replication.policy.class": name})
    assert info.value.key == "replication.policy.class"
    assert "replication.policy.class" in str(info.value)


# -- isCycle (MirrorSourceConnectorTest) ----------------------------------------------------------


@pytest.mark.parametrize(
    ("topic", "cycle"),
    [
        ("target.topic1", True),
        ("target.source.topic1", True),
        ("source.target.topic1", True),
        ("target.source.target.topic1", True),
        ("source.target.source.topic1", True),
        ("topic1", False),
        ("source.topic1", False),  # only the *target* alias is looked for upstream
        ("othersource.topic1", False),
        ("other.another.topic1", False),
    ],
)
def test_is_cycle_default_policy(topic: str, cycle: bool) -> None:
    # testNoCycles
    assert is_cycle(DefaultReplicationPolicy(), topic, "target") is cycle


def test_is_cycle_identity_policy_only_sees_heartbeats() -> None:
    # testIdentityReplication: remote names equal the source names, so only heartbeats topics
    # (which keep the prefix) can be seen to come from the target
    policy = IdentityReplicationPolicy()
    for topic in ("target.topic1", "target.source.topic1", "topic1", "heartbeats"):
        assert not is_cycle(policy, topic, "target"), topic
    for topic in ("target.heartbeats", "target.source.heartbeats", "source.target.heartbeats"):
        assert is_cycle(policy, topic, "target"), topic


def test_is_cycle_with_null_upstream_topic() -> None:
    # testIsCycleWithNullUpstreamTopic
    class Custom(DefaultReplicationPolicy):
        def upstream_topic(self, topic: str) -> str | None:
            return None

    assert not is_cycle(Custom(), ".b", "target")
    assert not is_cycle(Custom(), "x.b", "target")
    assert is_cycle(Custom(), "target.b", "target")


def test_is_cycle_terminates_on_a_looping_policy() -> None:
    class Loop(DefaultReplicationPolicy):
        def upstream_topic(self, topic: str) -> str | None:
            return "x.a" if topic == "x.b" else "x.b"

    assert not is_cycle(Loop(), "x.b", "target")
