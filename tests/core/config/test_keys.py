"""The key registry: completeness against MM2 4.3.1, ConfigDef parsing, the generated docs."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirrorlib import ConfigError, MirrorConfig
from mirrorlib.core.config.keys import (
    KEY_FAMILIES,
    KEYS,
    KeyType,
    Scope,
    Status,
    is_sensitive,
    key_spec,
    parse_value,
    render_markdown_table,
)

DOC = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"
BEGIN = "<!-- BEGIN KEY TABLE (generated: mirrorlib.core.config.keys.render_markdown_table) -->\n"
END = "<!-- END KEY TABLE -->"

# Every key defined by MirrorConnectorConfig, MirrorSourceConfig, MirrorCheckpointConfig,
# MirrorHeartbeatConfig and MirrorMakerConfig in Kafka 4.3.1 (client ssl/sasl keys aside).
MM2_431_KEYS = [
    "clusters",
    "dedicated.mode.enable.internal.rest",
    "config.providers",
    "enabled",
    "source.cluster.alias",
    "target.cluster.alias",
    "admin.timeout.ms",
    "replication.policy.class",
    "replication.policy.separator",
    "replication.policy.internal.topic.separator.enabled",
    "forwarding.admin.class",
    "metric.reporters",
    "security.protocol",
    "topic.filter.class",
    "offset-syncs.topic.location",
    "emit.offset-syncs.enabled",
    "topics",
    "topics.exclude",
    "config.properties.exclude",
    "config.property.filter.class",
    "consumer.poll.timeout.ms",
    "refresh.topics.enabled",
    "refresh.topics.interval.seconds",
    "sync.topic.configs.enabled",
    "sync.topic.configs.interval.seconds",
    "sync.topic.acls.enabled",
    "sync.topic.acls.interval.seconds",
    "replication.factor",
    "offset-syncs.topic.replication.factor",
    "offset.lag.max",
    "heartbeats.replication.enabled",
    "metric.names.formats",
    "groups",
    "groups.exclude",
    "group.filter.class",
    "refresh.groups.enabled",
    "refresh.groups.interval.seconds",
    "emit.checkpoints.enabled",
    "emit.checkpoints.interval.seconds",
    "sync.group.offsets.enabled",
    "sync.group.offsets.interval.seconds",
    "checkpoints.topic.replication.factor",
    "emit.heartbeats.enabled",
    "emit.heartbeats.interval.seconds",
    "heartbeats.topic.replication.factor",
    "use.defaults.from",
    "tasks.max",
    "bootstrap.servers",
]


def test_registry_covers_mm2_431() -> None:
    missing = [k for k in MM2_431_KEYS if k not in KEYS]
    assert missing == []


@pytest.mark.parametrize(
    ("key", "default"),
    [
        ("topics.exclude", ("mm2.*\\.internal", ".*\\.replica", "__.*")),
        ("groups.exclude", ("console-consumer-.*", "connect-.*", "__.*")),
        ("replication.factor", 2),
        ("offset.lag.max", 100),
        ("emit.checkpoints.interval.seconds", 60),
        ("sync.group.offsets.enabled", False),
        ("emit.heartbeats.interval.seconds", 1),
        ("heartbeats.replication.enabled", True),
        ("offset-syncs.topic.location", "source"),
        ("enabled", False),
        ("tasks.max", 1),
        ("config.providers", ()),
    ],
)
def test_defaults(key: str, default: object) -> None:
    assert KEYS[key].parsed_default == default


def test_every_default_parses_and_every_non_supported_key_explains_itself() -> None:
    for spec in KEYS.values():
        spec.parsed_default  # noqa: B018 - must not raise
        if spec.status is not Status.SUPPORTED and spec.status is not Status.CHANGED:
            assert spec.note, spec.name
        if spec.status is Status.CHANGED:
            assert spec.note, spec.name
        assert spec.doc.endswith("."), spec.name


def test_worker_only_keys_are_not_applicable() -> None:
    for name in ("dedicated.mode.enable.internal.rest", "key.converter", "config.storage.topic"):
        assert KEYS[name].status is Status.NOT_APPLICABLE
    assert KEYS["exactly.once.source.support"].scope is Scope.WORKER


@pytest.mark.parametrize(
    ("type_", "text", "expected"),
    [
        (KeyType.BOOLEAN, " TRUE ", True),
        (KeyType.BOOLEAN, "False", False),
        (KeyType.INT, "+42", 42),
        (KeyType.INT, " -7 ", -7),
        (KeyType.LONG, "9223372036854775807", 2**63 - 1),
        (KeyType.LIST, " a ,b,  c ", ("a", "b", "c")),
        (KeyType.LIST, "", ()),
        (KeyType.STRING, "  x  ", "x"),
    ],
)
def test_configdef_parsing(type_: KeyType, text: str, expected: object) -> None:
    spec = next(s for s in KEYS.values() if s.type is type_ and not s.choices)
    assert parse_value(spec, text) == expected


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("enabled", "yes"),
        ("replication.factor", "2147483648"),
        ("replication.factor", "1_000"),
        ("replication.factor", "٣"),  # not an ASCII digit
        ("replication.factor", "2.0"),
        ("topics", "a,,b"),
        ("topics", "a, a"),
        ("topics", "a,"),
        ("metric.names.formats", "old"),
        ("exactly.once.source.support", "on"),
    ],
)
def test_configdef_rejects(key: str, text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_value(KEYS[key], text, key=f"a->b.{key}", alias="a->b")
    assert info.value.key == f"a->b.{key}"
    assert info.value.alias == "a->b"


def test_case_insensitive_choices() -> None:
    assert parse_value(KEYS["security.protocol"], "sasl_ssl") == "sasl_ssl"
    assert parse_value(KEYS["exactly.once.source.support"], "ENABLED") == "ENABLED"
    with pytest.raises(ConfigError):
        parse_value(KEYS["offset-syncs.topic.location"], "SOURCE")


def test_sensitive_keys() -> None:
    for key in (
        "sasl.jaas.config",
        "B.producer.ssl.key.password",
        "ssl.keystore.key",
        "sasl.oauthbearer.client.secret",
        "ssl.truststore.certificates",
    ):
        assert is_sensitive(key), key
    for key in ("ssl.keystore.location", "ssl.key.location", "bootstrap.servers", "topics"):
        assert not is_sensitive(key), key


def test_docs_key_table_is_up_to_date() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert BEGIN in text and END in text
    table = text.split(BEGIN, 1)[1].split(END, 1)[0]
    assert table == render_markdown_table(), (
        "docs/configuration.md is stale: regenerate the key table with "
        "mirrorlib.core.config.keys.render_markdown_table()"
    )


@pytest.mark.parametrize(
    ("key", "attribute"),
    [
        ("offset.flush.interval.ms", "offset_flush_interval"),
        ("emit.checkpoints.interval.seconds", "emit_checkpoints_interval"),
        ("offset-syncs.topic.replication.factor", "offset_syncs_topic_replication_factor"),
        ("emit.offset-syncs.enabled", "emit_offset_syncs_enabled"),
        ("tasks.max", "tasks_max"),
    ],
)
def test_python_name_of_a_key(key: str, attribute: str) -> None:
    assert KEYS[key].attribute == attribute


# Connect keys newer than MM2's own: plugin versions (KIP-891), Connect's topic creation
# (KIP-158) and the client-override policy with its Allowlist (KIP-458, KIP-1188).
CONNECT_4X_KEYS = {
    "connector.plugin.version": Scope.FLOW,
    "key.converter.plugin.version": Scope.FLOW,
    "value.converter.plugin.version": Scope.FLOW,
    "header.converter.plugin.version": Scope.FLOW,
    "topic.creation.groups": Scope.FLOW,
    "topic.creation.default.replication.factor": Scope.FLOW,
    "topic.creation.default.partitions": Scope.FLOW,
    "topic.creation.enable": Scope.WORKER,
    "connector.client.config.override.policy": Scope.WORKER,
    "connector.client.config.override.allowlist": Scope.WORKER,
}


@pytest.mark.parametrize(("key", "scope"), CONNECT_4X_KEYS.items())
def test_connect_4x_keys_are_classified(key: str, scope: Scope) -> None:
    spec = KEYS[key]
    assert (spec.scope, spec.status) == (scope, Status.NOT_APPLICABLE)
    assert spec.note


@pytest.mark.parametrize(
    ("key", "pattern"),
    [
        ("topic.creation.compacted.include", "topic.creation.<group>.<setting>"),
        ("topic.creation.default.cleanup.policy", "topic.creation.<group>.<setting>"),
        ("topic.creation.enable", "topic.creation.enable"),
        ("connector.plugin.version", "connector.plugin.version"),
    ],
)
def test_key_spec_answers_exact_keys_before_families(key: str, pattern: str) -> None:
    spec = key_spec(key)
    assert spec is not None and spec.name == pattern
    assert key_spec("topic.creationx") is None
    assert all("<" in family.name for family in KEY_FAMILIES)


def test_connect_4x_keys_are_reported_not_applicable_wherever_written() -> None:
    """Top level, per flow and per target cluster: a not-applicable warning with the note, never
    the generic 'unknown key' one."""
    written = {
        "connector.plugin.version": "4.1.0",
        "key.converter.plugin.version": "4.1.0",
        "A->B.value.converter.plugin.version": "4.1.0",
        "B.header.converter.plugin.version": "4.1.0",
        "topic.creation.groups": "compacted",
        "A->B.topic.creation.default.replication.factor": "3",
        "topic.creation.default.partitions": "-1",
        "topic.creation.compacted.include": "orders.*",
        "A->B.topic.creation.compacted.cleanup.policy": "compact",
        "B.topic.creation.enable": "false",
        "connector.client.config.override.policy": "Allowlist",
        "B.connector.client.config.override.policy": "Allowlist",
        "B.connector.client.config.override.allowlist": "linger.ms, batch.size",
        "A->B.connector.client.config.override.allowlist": "linger.ms",
    }
    config = MirrorConfig.from_properties(
        {
            "clusters": "A, B",
            "A.bootstrap.servers": "127.0.0.1:1",
            "B.bootstrap.servers": "127.0.0.1:2",
            "A->B.enabled": "true",
            **written,
        }
    )
    kinds = {w.key: w.kind for w in config.warnings}
    assert {key: kinds.get(key) for key in written} == dict.fromkeys(written, "not-applicable")
    assert config.unknown_keys == ()
    messages = {w.key: w.message for w in config.warnings}
    assert "replication.factor" in messages["topic.creation.compacted.include"]
    assert "A->B.producer.*" in messages["B.connector.client.config.override.allowlist"]
    assert "as bytes" in messages["B.header.converter.plugin.version"]
