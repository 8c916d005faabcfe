"""Topic/group/config-property filters and shouldReplicateTopic (MirrorSourceConnectorTest)."""

from __future__ import annotations

import pytest

from mirrorlib import ConfigError
from mirrorlib.core.config import MirrorConfig
from mirrorlib.core.config.filters import (
    DefaultConfigPropertyFilter,
    DefaultGroupFilter,
    DefaultTopicFilter,
    RegexList,
    java_regex_to_python,
)

IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"


def flow(**extra: str):  # type: ignore[no-untyped-def]
    props = {"clusters": "source, target", **{k.replace("__", "."): v for k, v in extra.items()}}
    return MirrorConfig.from_properties(props).flow("source", "target")


ACCEPT_ALL = {"topics__exclude": ""}  # with topics=.*, the filter accepts everything


def test_replicates_heartbeats_by_default() -> None:
    f = flow()
    assert f.should_replicate_topic("heartbeats")
    assert f.should_replicate_topic("us-west.heartbeats")


def test_replicates_heartbeats_despite_filter() -> None:
    f = flow(topics="nothing-matches-this")
    assert f.should_replicate_topic("heartbeats")
    assert f.should_replicate_topic("us-west.heartbeats")
    g = flow(topics="nothing-matches-this", replication__policy__separator="_")
    assert g.should_replicate_topic("heartbeats")
    assert not g.should_replicate_topic("us-west.heartbeats")  # not a heartbeats topic with "_"
    assert g.should_replicate_topic("us-west_heartbeats")


def test_does_not_replicate_heartbeats_when_disabled() -> None:
    f = flow(heartbeats__replication__enabled="false", topics="orders")
    assert not f.should_replicate_topic("heartbeats")
    assert not f.should_replicate_topic("us-west.heartbeats")


def test_replicates_heartbeats_when_disabled_but_filter_allows() -> None:
    f = flow(heartbeats__replication__enabled="false", **ACCEPT_ALL)
    assert f.should_replicate_topic("heartbeats")
    assert f.should_replicate_topic("us-west.heartbeats")


def test_no_cycles() -> None:
    f = flow(**ACCEPT_ALL)
    for topic in (
        "target.topic1",
        "target.source.topic1",
        "source.target.topic1",
        "target.source.target.topic1",
        "source.target.source.topic1",
    ):
        assert not f.should_replicate_topic(topic), topic
        assert f.is_cycle(topic)
    for topic in ("topic1", "othersource.topic1", "othertarget.topic1", "other.another.topic1"):
        assert f.should_replicate_topic(topic), topic
    # MM2 4.3.1's isCycle only looks for the *target* alias upstream, so a topic named after the
    # source cluster is replicated (to "source.source.topic1").
    assert f.should_replicate_topic("source.topic1")


def test_no_cycles_identity_policy_with_alias() -> None:
    f = flow(replication__policy__class=IDENTITY, **ACCEPT_ALL)
    for topic in (
        "source.topic1",
        "target.topic1",
        "target.source.topic1",
        "source.target.topic1",
        "topic1",
        "othersource.topic1",
        "othertarget.topic1",
        "other.another.topic1",
    ):
        assert f.should_replicate_topic(topic), topic


def test_identity_replication_heartbeat_cycles() -> None:
    f = flow(replication__policy__class=IDENTITY, **ACCEPT_ALL)
    for topic in (
        "target.heartbeats",
        "target.source.heartbeats",
        "source.target.heartbeats",
        "target.source.target.heartbeats",
        "source.target.source.heartbeats",
    ):
        assert not f.should_replicate_topic(topic), topic
    assert f.should_replicate_topic("heartbeats")
    assert f.should_replicate_topic("othersource.heartbeats")


def test_internal_topics_never_replicated() -> None:
    f = flow(**ACCEPT_ALL)
    for topic in (
        "__consumer_offsets",
        ".hidden",
        "mm2-offsets.source.internal",
        "mm2-offset-syncs.target.internal",
        "source.checkpoints.internal",
    ):
        assert not f.should_replicate_topic(topic), topic


def test_default_topic_filter() -> None:
    f = flow()
    assert f.should_replicate_topic("orders")
    assert not f.should_replicate_topic("orders.replica")
    assert not f.should_replicate_topic("mm2-whatever.internal")
    assert not f.should_replicate_topic("__x")
    # 4.3.1's default is mm2.*\.internal, not .*[\-\.]internal: other *.internal topics pass
    assert DefaultTopicFilter.from_config({}).should_replicate_topic("app.internal")


def test_topics_include_and_exclude() -> None:
    f = flow(topics="orders.*, payments", topics__exclude="orders-test")
    assert f.should_replicate_topic("orders-eu")
    assert f.should_replicate_topic("payments")
    assert not f.should_replicate_topic("payments-eu")  # full match only
    assert not f.should_replicate_topic("orders-test")  # exclude wins
    assert not f.should_replicate_topic("xorders")


def test_empty_topics_matches_nothing_but_heartbeats() -> None:
    f = flow(topics="")
    assert not f.should_replicate_topic("orders")
    assert f.should_replicate_topic("heartbeats")


def test_group_filter_defaults_and_overrides() -> None:
    f = flow()
    assert f.should_replicate_group("app")
    for group in ("console-consumer-123", "connect-x", "__internal"):
        assert not f.should_replicate_group(group)
    h = MirrorConfig.from_properties(
        {
            "clusters": "source, target",
            "source->target.groups": "app-.*",
            "groups.exclude": "app-test",
        }
    ).flow("source", "target")
    assert h.should_replicate_group("app-1")
    assert not h.should_replicate_group("app-test")
    assert not h.should_replicate_group("other")
    assert DefaultGroupFilter.from_config({}).should_replicate_group("g")


def test_config_property_filter() -> None:
    f = flow()
    assert not f.should_replicate_config_property("min.insync.replicas")
    assert not f.should_replicate_config_property("log.message.timestamp.after.max.ms")
    assert f.should_replicate_config_property("retention.ms")
    assert not f.should_replicate_source_default("retention.ms")
    g = MirrorConfig.from_properties(
        {
            "clusters": "source, target",
            "source->target.use.defaults.from": "source",
            "config.properties.exclude": "retention\\..*",
        }
    ).flow("source", "target")
    assert g.should_replicate_source_default("retention.ms")
    assert not g.should_replicate_config_property("retention.bytes")
    assert g.should_replicate_config_property("min.insync.replicas")
    assert DefaultConfigPropertyFilter.from_config({}).should_replicate_config_property("x")


def test_config_property_filter_regex_list() -> None:
    # MirrorSourceConnectorTest.testNewTopicConfigs's exclude list: escaped dots and a regex
    f = DefaultConfigPropertyFilter.from_config(
        {
            "config.properties.exclude": r"follower\.replication\.throttled\.replicas, "
            r"leader\.replication\.throttled\.replicas, message\.timestamp\.difference\.max\.ms, "
            r"message\.timestamp\.type, unclean\.leader\.election\.enable, "
            r"min\.insync\.replicas,exclude_param.*"
        }
    )
    assert not f.should_replicate_config_property("exclude_param.param1")
    assert not f.should_replicate_config_property("min.insync.replicas")
    assert f.should_replicate_config_property("name-1")
    # the default list was replaced
    assert f.should_replicate_config_property("log.message.timestamp.before.max.ms")


def test_config_property_filter_empty_list_excludes_nothing() -> None:
    f = DefaultConfigPropertyFilter.from_config({"config.properties.exclude": "  "})
    assert f.exclude.patterns == ()
    assert f.should_replicate_config_property("min.insync.replicas")


@pytest.mark.parametrize(
    ("patterns", "matches", "misses"),
    [
        (["\\Qa.b\\E"], ["a.b"], ["axb"]),
        (["(?<name>ab)\\k<name>"], ["abab"], ["ab"]),
        (["x", "(?i)abc"], ["ABC", "x"], ["X1"]),
        (["(?i)abc", "def"], ["ABC", "DEF"], []),  # Java: the flag runs to the end
        (["\\p{Alpha}+"], ["abcXYZ"], ["ab1"]),
        (["[\\p{Digit}x]+"], ["12x"], ["a"]),
        (["\\w+"], ["abc_1"], ["é"]),  # Java's \w is ASCII-only
        (["a++"], ["aaa"], ["b"]),  # possessive
        (["(?>a|ab)c"], ["ac"], ["abc"]),  # atomic group
        (["ab\\z"], ["ab"], ["abc"]),
    ],
)
def test_java_regex_translation(patterns: list[str], matches: list[str], misses: list[str]) -> None:
    regex = RegexList.from_patterns(patterns, key="topics")
    for name in matches:
        assert regex.matches(name), (java_regex_to_python(patterns), name)
    for name in misses:
        assert not regex.matches(name), (java_regex_to_python(patterns), name)


@pytest.mark.parametrize(
    "pattern",
    ["\\p{InGreek}", "[a-z&&[^aeiou]]", "\\h+", "a\\Rb", "[a[b]]", "foo(?i)bar", "(?d)x", "(ab"],
)
def test_unsupported_or_invalid_java_regex_is_a_config_error(pattern: str) -> None:
    with pytest.raises(ConfigError) as info:
        RegexList.from_patterns([pattern], key="a->b.topics", alias="a->b")
    assert info.value.key == "a->b.topics"
    assert info.value.alias == "a->b"


def test_empty_list_matches_nothing() -> None:
    assert not RegexList.from_text("", key="topics").matches("")
    assert not RegexList.from_text("  ", key="topics").matches("x")


def test_custom_python_filter() -> None:
    f = flow(topic__filter__class="tests.core.config.plugins:OnlyOdd")
    assert f.should_replicate_topic("t1")
    assert not f.should_replicate_topic("t2")
    assert f.should_replicate_topic("heartbeats")
    with pytest.raises(ConfigError, match="Java class") as info:
        flow(group__filter__class="com.acme.GroupFilter")
    assert info.value.key == "group.filter.class"
    with pytest.raises(ConfigError, match="does not implement"):
        flow(topic__filter__class="tests.core.config.plugins:NotAFilter")
