"""MirrorConfig / FlowConfig: MirrorMakerConfigTest's rules, precedence, typed settings, errors."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from mirrorlib import ConfigError, DefaultReplicationPolicy, IdentityReplicationPolicy
from mirrorlib.core.config import KEYS, FlowConfig, MirrorConfig, Scope


def config(**props: str) -> MirrorConfig:
    return MirrorConfig.from_properties({k.replace("__", "."): v for k, v in props.items()})


def from_map(props: dict[str, str]) -> MirrorConfig:
    return MirrorConfig.from_properties(props)


BASIC = """
clusters = primary, backup
primary.bootstrap.servers = p1:9092
backup.bootstrap.servers = b1:9092
primary->backup.enabled = true
"""


# -- clusters, pairs and flows (MirrorMakerConfigTest) ----------------------------------------------


def test_clusters_in_file_order() -> None:
    cfg = from_map({"clusters": "c, a, b"})
    assert cfg.clusters == ("c", "a", "b")


def test_cluster_pairs_with_default_settings() -> None:
    cfg = from_map({"clusters": "a, b, c"})
    assert len(cfg.pairs) == 6
    assert cfg.flows == ()  # no flow is enabled: heartbeat-only pairs
    assert len(cfg.heartbeat_flows) == 6


def test_empty_cluster_pairs_with_globally_disabled_heartbeats() -> None:
    cfg = from_map({"clusters": "a, b, c", "emit.heartbeats.enabled": "false"})
    assert cfg.pairs == ()


def test_cluster_pairs_with_two_disabled_heartbeats() -> None:
    cfg = from_map(
        {
            "clusters": "a, b, c",
            "a->b.emit.heartbeats.enabled": "false",
            "a->c.emit.heartbeats.enabled": "false",
        }
    )
    assert len(cfg.pairs) == 4


def test_cluster_pairs_with_globally_disabled_heartbeats() -> None:
    cfg = from_map(
        {
            "clusters": "a, b, c, d, e, f",
            "emit.heartbeats.enabled": "false",
            "a->b.enabled": "true",
            "a->c.enabled": "true",
            "a->d.enabled": "true",
            "a->e.enabled": "false",
            "a->f.enabled": "false",
        }
    )
    assert [f.name for f in cfg.pairs] == ["a->b", "a->c", "a->d"]
    assert [f.name for f in cfg.flows] == ["a->b", "a->c", "a->d"]
    assert cfg.heartbeat_flows == ()
    assert "b->a" not in [f.name for f in cfg.pairs]


def test_cluster_pairs_central_local() -> None:
    cfg = from_map(
        {
            "clusters": "central, local_one, local_two, beats_emitter",
            "emit.heartbeats.enabled": "false",
            "central->local_one.enabled": "true",
            "central->local_two.enabled": "true",
            "beats_emitter->central.emit.heartbeats.enabled": "true",
        }
    )
    assert len(cfg.pairs) == 3
    assert [f.name for f in cfg.heartbeat_flows] == ["beats_emitter->central"]


def test_flow_for_any_pair_and_unknown_alias() -> None:
    cfg = MirrorConfig.from_properties(BASIC)
    assert cfg.flow("primary", "backup").enabled
    assert not cfg.flow("backup", "primary").enabled
    with pytest.raises(ConfigError, match="unknown cluster alias 'nope'") as info:
        cfg.flow("primary", "nope")
    assert info.value.alias == "nope"
    with pytest.raises(ConfigError):
        cfg.flow("primary", "primary")


def test_top_level_enabled_applies_to_running_pairs_only() -> None:
    # MM2: a top-level "enabled" reaches every connector, but only A->B.enabled or heartbeats
    # make a pair run.
    cfg = from_map({"clusters": "a, b", "enabled": "true"})
    assert [f.name for f in cfg.flows] == ["a->b", "b->a"]
    cfg = from_map({"clusters": "a, b", "enabled": "true", "emit.heartbeats.enabled": "false"})
    assert cfg.flows == ()


def test_pairs_for_targets() -> None:
    cfg = from_map({"clusters": "a, b, c"})
    assert [f.name for f in cfg.pairs_for_targets(["b"])] == ["a->b", "c->b"]
    assert len(cfg.pairs_for_targets(None)) == 6
    with pytest.raises(ConfigError, match="unknown cluster alias"):
        cfg.pairs_for_targets(["x"])


def test_file(tmp_path: Path) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text(BASIC)
    assert MirrorConfig.from_file(path).clusters == ("primary", "backup")


# -- flow settings and precedence --------------------------------------------------------------------


def test_replication_config_properties_tasks_max() -> None:
    cfg = from_map({"clusters": "a, b", "a->b.tasks.max": "123"})
    assert cfg.flow("a", "b").tasks_max == 123
    assert cfg.flow("b", "a").tasks_max == 1


def test_includes_connector_config_properties() -> None:
    cfg = from_map(
        {
            "clusters": "a, b",
            "tasks.max": "100",
            "topics": "topic-1",
            "groups": "group-2",
            "replication.policy.separator": "__",
            "config.properties.exclude": "property-3",
            "topic.filter.class": "org.apache.kafka.connect.mirror.DefaultTopicFilter",
            "xxx": "yyy",
        }
    )
    flow = cfg.flow("a", "b")
    assert flow.tasks_max == 100
    assert flow.topics == ("topic-1",)
    assert flow.groups == ("group-2",)
    assert flow.config_properties_exclude == ("property-3",)
    assert flow.policy == DefaultReplicationPolicy("__")
    assert "xxx" not in flow.originals
    assert "xxx" in cfg.unknown_keys


def test_includes_topic_filter_properties() -> None:
    cfg = from_map(
        {
            "clusters": "a, b",
            "a->b.topics": "topic1, topic2",
            "a->b.topics.exclude": "topic3",
        }
    )
    flow = cfg.flow("a", "b")
    assert flow.topics == ("topic1", "topic2")
    assert flow.topics_exclude == ("topic3",)
    assert flow.origin("topics") == "a->b.topics"
    assert cfg.flow("b", "a").topics == (".*",)
    assert cfg.flow("b", "a").origin("topics") is None


def test_flow_key_beats_top_level_beats_default() -> None:
    cfg = from_map({"clusters": "a, b, c", "offset.lag.max": "50", "a->b.offset.lag.max": "7"})
    assert cfg.flow("a", "b").offset_lag_max == 7
    assert cfg.flow("a", "c").offset_lag_max == 50
    assert from_map({"clusters": "a, b"}).flow("a", "b").offset_lag_max == 100


def test_defaults() -> None:
    flow = from_map({"clusters": "a, b"}).flow("a", "b")
    assert not flow.enabled
    assert flow.tasks_max == 1
    assert flow.replication_factor == 2
    assert flow.offset_syncs_topic_replication_factor == 3
    assert flow.checkpoints_topic_replication_factor == 3
    assert flow.heartbeats_topic_replication_factor == 3
    assert flow.refresh_topics_interval == 600.0
    assert flow.sync_topic_configs_interval == 600.0
    assert flow.sync_topic_acls_interval == 600.0
    assert flow.refresh_groups_interval == 600.0
    assert flow.emit_checkpoints_interval == 60.0
    assert flow.sync_group_offsets_interval is None
    assert not flow.sync_group_offsets_enabled
    assert flow.emit_heartbeats_interval == 1.0
    assert flow.heartbeats_replication_enabled
    assert flow.emit_offset_syncs_enabled
    assert flow.offset_syncs_topic_location == "source"
    assert flow.consumer_poll_timeout == 1.0
    assert flow.admin_timeout == 60.0
    assert flow.use_defaults_from == "target"
    assert flow.topics_exclude == ("mm2.*\\.internal", ".*\\.replica", "__.*")
    assert flow.groups_exclude == ("console-consumer-.*", "connect-.*", "__.*")
    assert "min.insync.replicas" in flow.config_properties_exclude
    assert flow.exactly_once_source_support == "disabled"
    assert not flow.exactly_once_enabled
    assert flow.offset_flush_interval == 60.0
    assert flow.get("offset.lag.max") == 100
    assert flow.get("replication.policy.separator") == "."


def test_disabled_intervals_and_overrides() -> None:
    flow = from_map(
        {
            "clusters": "a, b",
            "refresh.topics.enabled": "FALSE",
            "a->b.sync.group.offsets.enabled": "True",
            "sync.group.offsets.interval.seconds": "5",
            "emit.checkpoints.interval.seconds": "10",
        }
    ).flow("a", "b")
    assert flow.refresh_topics_interval is None
    assert flow.sync_group_offsets_enabled
    assert flow.sync_group_offsets_interval == 5.0
    assert flow.emit_checkpoints_interval == 10.0


def test_offset_syncs_topic_location() -> None:
    flow = from_map({"clusters": "a, b"}).flow("a", "b")
    assert (flow.offset_syncs_cluster, flow.offset_syncs_topic) == (
        "a",
        "mm2-offset-syncs.b.internal",
    )
    assert flow.checkpoints_topic == "a.checkpoints.internal"
    assert flow.heartbeats_topic == "heartbeats"
    flow = from_map({"clusters": "a, b", "offset-syncs.topic.location": "target"}).flow("a", "b")
    assert (flow.offset_syncs_cluster, flow.offset_syncs_topic) == (
        "b",
        "mm2-offset-syncs.a.internal",
    )
    with pytest.raises(ConfigError, match="source, target"):
        from_map({"clusters": "a, b", "offset-syncs.topic.location": "elsewhere"})


def test_exactly_once_settings() -> None:
    cfg = from_map(
        {
            "clusters": "a, b",
            "b.exactly.once.source.support": "enabled",
            "b.offset.flush.interval.ms": "5000",
        }
    )
    assert cfg.flow("a", "b").exactly_once_enabled
    assert cfg.flow("a", "b").offset_flush_interval == 5.0
    assert cfg.flow("b", "a").exactly_once_source_support == "disabled"
    with pytest.raises(ConfigError, match="isolation.level"):
        from_map(
            {
                "clusters": "a, b",
                "a->b.exactly.once.support": "required",
                "a.consumer.isolation.level": "read_uncommitted",
            }
        )
    ok = from_map({"clusters": "a, b", "a->b.exactly.once.support": "required"})
    assert ok.flow("a", "b").exactly_once_support == "required"


def test_top_level_worker_setting_is_reported_ignored() -> None:
    cfg = from_map({"clusters": "a, b", "exactly.once.source.support": "enabled"})
    assert not cfg.flow("a", "b").exactly_once_enabled
    [warning] = [w for w in cfg.warnings if w.key == "exactly.once.source.support"]
    assert warning.kind == "ignored"


def test_policy_gets_connector_originals() -> None:
    cfg = from_map(
        {
            "clusters": "a, b",
            "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        }
    )
    policy = cfg.flow("a", "b").policy
    assert isinstance(policy, IdentityReplicationPolicy)
    assert policy.source_cluster_alias == "a"
    assert cfg.flow("b", "a").policy == IdentityReplicationPolicy("b")


def test_flow_level_policy_separator() -> None:
    cfg = from_map({"clusters": "a, b", "a->b.replication.policy.separator": "_"})
    assert cfg.flow("a", "b").policy == DefaultReplicationPolicy("_")
    assert cfg.flow("b", "a").policy == DefaultReplicationPolicy(".")


def test_bad_policy_names_the_key() -> None:
    with pytest.raises(ConfigError) as info:
        from_map({"clusters": "a, b", "a->b.replication.policy.class": "com.acme.MyPolicy"})
    assert info.value.key == "a->b.replication.policy.class"
    assert info.value.alias == "a->b"


def test_deprecated_blacklist_keys() -> None:
    cfg = from_map(
        {
            "clusters": "a, b",
            "topics.blacklist": "topic3",
            "a->b.groups.blacklist": "group-7",
            "config.properties.blacklist": "property-3",
        }
    )
    flow = cfg.flow("a", "b")
    assert flow.topics_exclude == ("topic3",)
    assert flow.groups_exclude == ("group-7",)
    assert flow.config_properties_exclude == ("property-3",)
    assert cfg.flow("b", "a").groups_exclude == ("console-consumer-.*", "connect-.*", "__.*")
    kinds = {w.key: w.kind for w in cfg.warnings}
    assert kinds["topics.blacklist"] == "deprecated"
    assert kinds["a->b.groups.blacklist"] == "deprecated"
    both = from_map({"clusters": "a, b", "topics.blacklist": "x", "topics.exclude": "y"})
    assert both.flow("a", "b").topics_exclude == ("y",)


def test_flow_config_pickles() -> None:
    cfg = MirrorConfig.from_properties(BASIC)
    flow = pickle.loads(pickle.dumps(cfg.flow("primary", "backup")))
    assert flow.should_replicate_topic("orders")
    assert flow.source_consumer_config()["bootstrap.servers"] == "p1:9092"


# -- clients (testClientConfigProperties, testWorkerConfigs) -----------------------------------------


def test_client_config_properties(tmp_path: Path) -> None:
    secret = tmp_path / "secret.properties"
    secret.write_text("password=secret2\n")
    cfg = from_map(
        {
            "clusters": "a, b",
            "config.providers": "file",
            "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
            "replication.policy.separator": "__",
            "ssl.key.password": f"${{file:{secret}:password}}",
            "security.protocol": "SSL",
            "a.security.protocol": "PLAINTEXT",
            "a.producer.security.protocol": "SSL",
            "a.bootstrap.servers": "one:9092, two:9092",
            "b.bootstrap.servers": "three:9092",
            "metric.reporters": "FakeMetricsReporter",
            "a.metric.reporters": "FakeMetricsReporter",
            "b->a.metric.reporters": "FakeMetricsReporter",
            "a.xxx": "yyy",
            "xxx": "zzz",
        }
    )
    admin = cfg.client_config("a", "admin")
    assert admin["bootstrap.servers"] == "one:9092,two:9092"
    assert admin["security.protocol"] == "plaintext"
    assert cfg.client_config("a", "producer")["security.protocol"] == "ssl"
    assert cfg.client_config("b", "producer")["security.protocol"] == "ssl"
    assert admin["ssl.key.password"] == "secret2"
    for key in ("xxx", "metric.reporters", "metrics.reporter"):
        assert key not in admin
    assert cfg.flow("a", "b").policy.format_remote_topic("b", "topic1") == "b__topic1"
    assert {"a.xxx", "xxx"} <= set(cfg.unknown_keys)


def test_client_precedence_role_over_cluster_over_top_level() -> None:
    cfg = from_map(
        {
            "clusters": "a, b",
            "a.bootstrap.servers": "a:9092",
            "b.bootstrap.servers": "b:9092",
            "sasl.mechanism": "PLAIN",
            "b.sasl.mechanism": "SCRAM-SHA-256",
            "b.consumer.sasl.mechanism": "SCRAM-SHA-512",
        }
    )
    assert cfg.client_config("a", "consumer")["sasl.mechanism"] == "PLAIN"
    assert cfg.client_config("b", "producer")["sasl.mechanism"] == "SCRAM-SHA-256"
    assert cfg.client_config("b", "consumer")["sasl.mechanism"] == "SCRAM-SHA-512"
    flow = cfg.flow("a", "b")
    assert flow.target_consumer_config()["sasl.mechanism"] == "SCRAM-SHA-512"
    assert flow.target_producer_config()["sasl.mechanism"] == "SCRAM-SHA-256"
    assert flow.source_consumer_config()["sasl.mechanism"] == "PLAIN"


def test_connector_client_assembly() -> None:
    cfg = from_map(
        {
            "clusters": "a, b",
            "a.bootstrap.servers": "a:9092",
            "b.bootstrap.servers": "b:9092",
            "a.consumer.max.poll.records": "10",
            "a->b.consumer.fetch.min.bytes": "5",
            "a->b.consumer.max.poll.records": "99",  # loses to a.consumer.* as in MM2
            "a->b.source.consumer.session.timeout.ms": "7000",
            "a->b.producer.linger.ms": "20",
            "b.producer.client.id": "me",
            "a.consumer.enable.auto.commit": "true",
            "a.consumer.auto.offset.reset": "latest",
        }
    )
    flow = cfg.flow("a", "b")
    consumer = flow.source_consumer_config()
    assert consumer == {
        "bootstrap.servers": "a:9092",
        "fetch.min.bytes": "5",
        "max.poll.records": "10",
        "session.timeout.ms": "7000",
        "enable.auto.commit": "false",
        "auto.offset.reset": "latest",
    }
    producer = flow.target_producer_config(
        flow.client_id_label("MirrorSourceConnector", "replication-producer", 0)
    )
    assert producer["linger.ms"] == "20"
    assert producer["client.id"] == "me|a->b|MirrorSourceConnector-0|replication-producer"
    assert flow.source_admin_config() == {"bootstrap.servers": "a:9092"}
    assert flow.offset_syncs_producer_config()["bootstrap.servers"] == "a:9092"
    assert flow.target_consumer_config()["auto.offset.reset"] == "earliest"


def test_missing_bootstrap_is_reported_when_needed() -> None:
    cfg = from_map({"clusters": "a, b", "a.bootstrap.servers": "a:9092"})
    with pytest.raises(ConfigError, match="b.bootstrap.servers") as info:
        cfg.client_config("b", "producer")
    assert info.value.alias == "b"
    with pytest.raises(ConfigError, match="b.bootstrap.servers"):
        cfg.flow("a", "b").target_producer_config()
    with pytest.raises(ConfigError, match="role"):
        cfg.client_config("a", "streams")


def test_cluster_properties() -> None:
    cfg = from_map({"clusters": "a, b", "a.bootstrap.servers": "x:1", "security.protocol": "SSL"})
    props = cfg.cluster_properties("a")
    assert props["bootstrap.servers"] == "x:1"
    assert props["security.protocol"] == "SSL"
    assert props["consumer.security.protocol"] == "SSL"


def test_aliases_with_dots_use_the_longest_prefix() -> None:
    cfg = from_map(
        {
            "clusters": "us, us.west",
            "us.bootstrap.servers": "us:1",
            "us.west.bootstrap.servers": "west:1",
            "us->us.west.enabled": "true",
        }
    )
    assert cfg.client_config("us", "admin")["bootstrap.servers"] == "us:1"
    assert cfg.client_config("us.west", "admin")["bootstrap.servers"] == "west:1"
    assert [f.name for f in cfg.flows] == ["us->us.west"]
    assert cfg.unknown_keys == ()


# -- warnings and errors -------------------------------------------------------------------------------


def test_not_applicable_and_unknown_keys_are_reported() -> None:
    cfg = MirrorConfig.from_properties(
        BASIC
        + """
dedicated.mode.enable.internal.rest = true
key.converter = org.apache.kafka.connect.converters.ByteArrayConverter
config.storage.replication.factor = 1
backup.status.storage.replication.factor = 1
primary->backup.errors.tolerance = all
primary->backup.bogus = 1
primary.topics = x
ghost->backup.enabled = true
producer.linger.ms = 5
primary->backup.security.protocol = SSL
"""
    )
    kinds = {w.key: w.kind for w in cfg.warnings}
    assert kinds["dedicated.mode.enable.internal.rest"] == "not-applicable"
    assert kinds["key.converter"] == "not-applicable"
    assert kinds["config.storage.replication.factor"] == "not-applicable"
    assert kinds["backup.status.storage.replication.factor"] == "not-applicable"
    assert kinds["primary->backup.errors.tolerance"] == "not-applicable"
    assert kinds["primary->backup.bogus"] == "unknown"
    assert kinds["primary.topics"] == "ignored"
    assert kinds["ghost->backup.enabled"] == "ignored"
    assert kinds["producer.linger.ms"] == "ignored"
    assert kinds["primary->backup.security.protocol"] == "ignored"
    assert "primary->backup.bogus" in cfg.unknown_keys
    assert all(str(w).startswith(w.key) for w in cfg.warnings)


def test_clusters_missing_or_empty() -> None:
    with pytest.raises(ConfigError, match="clusters is missing") as info:
        from_map({"a.bootstrap.servers": "x"})
    assert info.value.key == "clusters"
    with pytest.raises(ConfigError, match="at least one") as info:
        from_map({"clusters": "  "})
    assert info.value.key == "clusters"
    with pytest.raises(ConfigError, match="duplicated"):
        from_map({"clusters": "a, a"})
    with pytest.raises(ConfigError, match="empty"):
        from_map({"clusters": "a,,b"})


def test_inline_comment_in_clusters() -> None:
    with pytest.raises(ConfigError, match="inline comments"):
        MirrorConfig.from_properties("clusters = a, b # primary and backup\n")


def test_bad_boolean_with_inline_comment_hint() -> None:
    text = BASIC + "primary->backup.sync.group.offsets.enabled = true # disabled by default\n"
    with pytest.raises(ConfigError) as info:
        MirrorConfig.from_properties(text)
    err = info.value
    assert err.key == "primary->backup.sync.group.offsets.enabled"
    assert err.alias == "primary->backup"
    assert err.value == "true # disabled by default"
    assert "true or false" in str(err)
    assert "inline comments" in str(err)


@pytest.mark.parametrize("value", ["yes", "1", "on", "tru"])
def test_booleans_follow_configdef(value: str) -> None:
    with pytest.raises(ConfigError, match="true or false"):
        from_map({"clusters": "a, b", "a->b.enabled": value})


def test_bad_int() -> None:
    with pytest.raises(ConfigError, match="whole number") as info:
        from_map({"clusters": "a, b", "replication.factor": "three"})
    assert info.value.key == "replication.factor"
    assert info.value.value == "three"
    with pytest.raises(ConfigError, match="out of range"):
        from_map({"clusters": "a, b", "offset-syncs.topic.replication.factor": "40000"})
    with pytest.raises(ConfigError, match="at least 1"):
        from_map({"clusters": "a, b", "tasks.max": "0"})
    assert (
        from_map({"clusters": "a, b", "offset.lag.max": " +5 "}).flow("a", "b").offset_lag_max == 5
    )


def test_bad_regex_names_the_key() -> None:
    with pytest.raises(ConfigError) as info:
        from_map({"clusters": "a, b", "a->b.topics": "orders[.*"})
    assert info.value.key == "a->b.topics"
    assert "regular expression" in str(info.value)
    with pytest.raises(ConfigError, match=r"\\p\{InGreek\}") as info:
        from_map({"clusters": "a, b", "groups.exclude": r"\p{InGreek}+"})
    assert info.value.key == "groups.exclude"


def test_invalid_security_protocol() -> None:
    with pytest.raises(ConfigError, match="security.protocol"):
        from_map({"clusters": "a, b, c", "security.protocol": "abc"})
    with pytest.raises(ConfigError) as info:
        from_map({"clusters": "a, b", "a.bootstrap.servers": "x", "a.security.protocol": "TLS"})
    assert info.value.key == "a.security.protocol"
    lower = from_map({"clusters": "a", "a.bootstrap.servers": "x", "security.protocol": "sasl_ssl"})
    assert lower.client_config("a", "admin")["security.protocol"] == "sasl_ssl"


def test_unsupported_connect_features_are_errors() -> None:
    with pytest.raises(ConfigError, match="ForwardingAdmin"):
        from_map({"clusters": "a, b", "forwarding.admin.class": "com.acme.Admin"})
    with pytest.raises(ConfigError, match="transforms"):
        from_map({"clusters": "a, b", "a->b.transforms": "x"})


def test_secrets_are_masked_in_errors() -> None:
    with pytest.raises(ConfigError) as info:
        from_map(
            {
                "clusters": "a, b",
                "a.bootstrap.servers": "x",
                "a.producer.ssl.truststore.location": "/etc/ts.jks",
                "a.producer.ssl.truststore.password": "hunter2",
            }
        )
    assert "hunter2" not in str(info.value)
    assert info.value.key == "a.producer.ssl.truststore.location"


def test_offset_storage_worker_settings() -> None:
    cfg = from_map(
        {
            "clusters": "a, b",
            "offset.storage.replication.factor": "123",
            "b.offset.storage.replication.factor": "7",  # top level wins, as in MM2
            "b.offset.storage.topic": "my-offsets",
            "b.offset.storage.partitions": "5",
        }
    )
    ab, ba = cfg.flow("a", "b"), cfg.flow("b", "a")
    assert (ab.offset_storage_topic, ab.offset_storage_partitions) == ("my-offsets", 5)
    assert ab.offset_storage_replication_factor == 123
    assert ba.offset_storage_topic == "mm2-offsets.b.internal"
    assert ba.offset_storage_partitions == 25
    assert ab.get("offset.storage.topic") == "my-offsets"
    assert not [w for w in cfg.warnings if "offset.storage" in w.key]


def test_mirrorlib_only_keys() -> None:
    cfg = from_map(
        {
            "clusters": "a, b",
            "data.loss.action": "CONTINUE",
            "a->b.node.id": "n1",
            "transaction.boundary.interval.ms": "250",
        }
    )
    ab = cfg.flow("a", "b")
    assert (ab.data_loss_action, ab.node_id, ab.transaction_boundary_interval) == (
        "continue",
        "n1",
        0.25,
    )
    ba = cfg.flow("b", "a")
    assert (ba.node_id, ba.data_loss_action, ab.get("data.loss.action")) == (  # top level
        None,
        "continue",
        "CONTINUE",
    )
    assert cfg.warnings == ()
    with pytest.raises(ConfigError, match="fail, continue"):
        from_map({"clusters": "a, b", "data.loss.action": "ignore"})


def test_inline_comment_in_a_string_value_is_flagged() -> None:
    cfg = MirrorConfig.from_properties(BASIC + "replication.policy.separator = _ # underscore\n")
    [warning] = [w for w in cfg.warnings if w.kind == "suspicious"]
    assert warning.key == "replication.policy.separator"
    assert "inline comments" in warning.message


# -- one name per setting ---------------------------------------------------------------------------

#: FlowConfig properties that are not one key's value.
DERIVED_PROPERTIES = {
    "name",
    "originals",
    "exactly_once_enabled",
    "offset_syncs_cluster",
    "offset_syncs_topic",
    "checkpoints_topic",
    "heartbeats_topic",
    "worker_status_topic",
    "record_transforms",  # built from transforms, predicates and their transforms.<name>.* keys
}


def test_flow_config_properties_are_named_after_their_keys() -> None:
    """Each property answering a key is the key in Python spelling (``KeySpec.attribute``) and
    answers that key's value, in seconds for a duration (``None``: the task is disabled)."""
    specs = {s.attribute: s for s in KEYS.values() if s.scope in (Scope.FLOW, Scope.WORKER)}
    properties = {
        name
        for name, member in vars(FlowConfig).items()
        if isinstance(member, property) and not name.startswith("_")
    }
    assert properties - DERIVED_PROPERTIES <= specs.keys()
    flow = from_map(
        {
            "clusters": "a, b",
            "a->b.enabled": "true",
            "b.offset.flush.interval.ms": "1234",
            "admin.timeout.ms": "4321",
            "refresh.groups.enabled": "false",
            "emit.checkpoints.interval.seconds": "7",
            "exactly.once.support": "requested",
        }
    ).flow("a", "b")
    answered = properties - DERIVED_PROPERTIES
    assert len(answered) > 30
    for name in answered:
        spec = specs[name]
        raw = flow.get(spec.name)
        value = getattr(flow, name)
        if spec.name.endswith(".ms"):
            assert isinstance(raw, int) and value == raw / 1000.0, name
        elif spec.name.endswith(".seconds"):
            assert value in (raw, None), name
        else:
            assert value == raw, name
    assert (flow.refresh_groups_interval, flow.emit_checkpoints_interval) == (None, 7.0)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ({"clusters": ["A", "B"]}, "the value of 'clusters' must be a string as in a properties "
         "file, not list, e.g. 'clusters': 'A, B'"),
        ({"clusters": "A, B", 3: "x"}, "property keys must be strings, not int"),
        ({"clusters": "A, B", "tasks.max": None}, "the value of 'tasks.max' must be a string"),
        (Path("mm2.properties"), "not PosixPath; read a file with MirrorConfig.from_file(path)"),
        (b"clusters = A", "not bytes"),
    ],
)  # fmt: skip
def test_from_properties_rejects_what_is_not_properties(source: Any, message: str) -> None:
    with pytest.raises(TypeError) as exc:
        MirrorConfig.from_properties(source)
    assert message in str(exc.value)


def test_from_properties_given_a_file_name_says_to_use_from_file(tmp_path: Path) -> None:
    for name in ("mm2.properties", str(tmp_path / "config.txt")):
        Path(tmp_path / "config.txt").write_text("clusters = A\n", encoding="utf-8")
        with pytest.raises(ConfigError, match=r"looks like a file name.*from_file\(path\)"):
            MirrorConfig.from_properties(name)
    with pytest.raises(TypeError, match="takes a path, not dict"):
        MirrorConfig.from_file({"clusters": "A"})  # type: ignore[arg-type]


def test_from_properties_writes_numbers_and_booleans_as_properties() -> None:
    config = MirrorConfig.from_properties(
        {"clusters": "A, B", "A->B.enabled": True, "tasks.max": 3,
         "A.bootstrap.servers": "a:9092", "B.bootstrap.servers": "b:9092"}
    )  # fmt: skip
    flow = config.flow("A", "B")
    assert flow.enabled and flow.tasks_max == 3


def test_tasks_max_above_one_is_honoured_without_a_warning() -> None:
    base = {"clusters": "A, B", "A.bootstrap.servers": "a:9092", "B.bootstrap.servers": "b:9092"}
    config = MirrorConfig.from_properties({**base, "A->B.enabled": "true", "A->B.tasks.max": "16"})
    assert config.flow("A", "B").tasks_max == 16
    assert not [w for w in config.warnings if "tasks.max" in w.key]


def test_tls_store_types_used_for_translation_are_not_warned_about() -> None:
    """``ssl.*store.type`` tell how to translate the stores: used, not dropped (a warning on
    every command for a standard MM2 TLS configuration would teach users to ignore warnings)."""
    cfg = MirrorConfig.from_properties(
        {
            "clusters": "A, B",
            "A.bootstrap.servers": "a:9093",
            "B.bootstrap.servers": "b:9093",
            "A->B.enabled": "true",
            "A.security.protocol": "SSL",
            "A.ssl.truststore.type": "PEM",
            "A.ssl.truststore.location": "/certs/ca.pem",
            "A.ssl.keystore.type": "PKCS12",
            "A.ssl.keystore.location": "/certs/client.p12",
            "A.ssl.keystore.password": "secret",
        }
    )
    assert [str(w) for w in cfg.warnings if "ssl." in w.key] == []
