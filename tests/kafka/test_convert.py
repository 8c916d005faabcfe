"""Converters between confluent_kafka admin objects and mirrorlib.core.plans values
(mirrorlib.kafka.convert), and the error mapping of mirrorlib.kafka.admin (no broker)."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ConfigEntry,
    ConfigSource,
    ResourcePatternType,
    ResourceType,
)

from mirrorlib.core.plans import AclRule, TopicConfigEntry
from mirrorlib.errors import (
    ClusterTimeoutError,
    KafkaRequestError,
    SecurityDisabledError,
    TopicAuthorizationError,
)
from mirrorlib.kafka.admin import kafka_error
from mirrorlib.kafka.convert import (
    EntryConverter,
    from_acl_binding,
    from_config_entry,
    to_acl_binding,
)


def test_config_entry_sources_as_ints_or_enums() -> None:
    assert from_config_entry(
        ConfigEntry("retention.ms", "1", source=1)
    ) == TopicConfigEntry.override("1")
    entry = ConfigEntry("segment.bytes", "2", source=ConfigSource.DEFAULT_CONFIG, is_default=True)
    assert from_config_entry(entry) == TopicConfigEntry.default("2")
    entry = ConfigEntry("x", None, source=99, is_sensitive=True, is_read_only=True)
    assert from_config_entry(entry) == TopicConfigEntry(None, False, True, True, "UNKNOWN_CONFIG")


def test_entry_converter_converts_like_from_config_entry_and_shares_equal_entries() -> None:
    convert = EntryConverter()
    raw = [
        ConfigEntry("retention.ms", "1", source=1),
        ConfigEntry("segment.bytes", "2", source=ConfigSource.DEFAULT_CONFIG, is_default=True),
        ConfigEntry("x", None, source=99, is_sensitive=True, is_read_only=True),
    ]
    for entry in raw:
        assert convert(entry) == from_config_entry(entry)
    again = ConfigEntry("retention.ms", "1", source=1)
    assert convert(again) is convert(raw[0])
    assert convert(ConfigEntry("retention.ms", "2", source=1)) == TopicConfigEntry.override("2")


def test_entry_converter_forgets_past_its_bound() -> None:
    convert = EntryConverter(kept=2)
    for value in "abcde":
        assert convert(ConfigEntry("k", value, source=1)) == TopicConfigEntry.override(value)


def test_entry_converter_gives_back_the_previous_mapping_when_nothing_changed() -> None:
    convert = EntryConverter()

    def described(retention: str) -> dict[str, ConfigEntry]:
        return {
            "retention.ms": ConfigEntry("retention.ms", retention, source=1),
            "segment.bytes": ConfigEntry("segment.bytes", "2", source=5, is_default=True),
        }

    first = convert.entries(described("1"))
    assert first == {
        "retention.ms": TopicConfigEntry.override("1"),
        "segment.bytes": TopicConfigEntry.default("2"),
    }
    assert convert.entries(described("1"), previous=first) is first
    changed = convert.entries(described("5"), previous=first)
    assert changed == {**first, "retention.ms": TopicConfigEntry.override("5")}
    fewer = {"retention.ms": first["retention.ms"]}
    assert convert.entries(described("1"), previous=fewer) == first  # an entry more: new
    wanted = frozenset({"segment.bytes"})
    only = convert.entries(described("1"), wanted)
    assert only == {"segment.bytes": TopicConfigEntry.default("2")}
    assert convert.entries(described("9"), wanted, previous=only) is only


@pytest.mark.parametrize(
    "rule",
    [
        AclRule.topic("t", "User:a", "READ"),
        AclRule.topic("t", "User:a", "ALL", "DENY", host="10.0.0.1", pattern_type="PREFIXED"),
        AclRule("GROUP", "g", "LITERAL", "User:a", "*", "DESCRIBE", "ALLOW"),
        AclRule("CLUSTER", "kafka-cluster", "LITERAL", "User:a", "*", "ALTER", "ALLOW"),
    ],
)
def test_acl_round_trip(rule: AclRule) -> None:
    assert from_acl_binding(to_acl_binding(rule)) == rule


def test_acl_binding_conversion() -> None:
    binding = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                         "User:a", "*", AclOperation.ALTER, AclPermissionType.ALLOW)  # fmt: skip
    assert from_acl_binding(binding).resource_type == "CLUSTER"


def test_kafka_error_mapping() -> None:
    from confluent_kafka import KafkaError, KafkaException

    def err(code: int) -> KafkaRequestError:
        return kafka_error(KafkaException(KafkaError(code)), cluster="B", action="create topic x",
                           resource="x")  # fmt: skip

    e = err(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    assert isinstance(e, TopicAuthorizationError)
    assert (e.cluster, e.resource, e.code) == ("B", "x", "TOPIC_AUTHORIZATION_FAILED")
    assert str(e).startswith("create topic x on cluster B failed: ")
    assert isinstance(err(KafkaError.SECURITY_DISABLED), SecurityDisabledError)
    assert isinstance(err(KafkaError._TIMED_OUT), ClusterTimeoutError)
    assert type(err(KafkaError.INVALID_CONFIG)) is KafkaRequestError
    import concurrent.futures

    t = kafka_error(concurrent.futures.TimeoutError(), cluster="B", action="list topics")
    assert isinstance(t, ClusterTimeoutError) and "cluster B timed out" in str(t)
