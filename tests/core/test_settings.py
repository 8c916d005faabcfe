"""FlowSettings: one name per setting — a field holding a setting is named, and valued, like the
FlowConfig property for it (the key in Python spelling, from the registry)."""

from __future__ import annotations

import attrs
import pytest

from mirrorlib import FlowConfig, MirrorConfig
from mirrorlib.core.config import KEYS, Scope
from mirrorlib.core.settings import NEVER, FlowSettings

#: The Python names of the keys a flow reads (``offset.flush.interval.ms`` → ``offset_flush_interval``).
KEY_NAMES = {spec.attribute for spec in KEYS.values() if spec.scope in (Scope.FLOW, Scope.WORKER)}

#: Fields the runtime derives (they hold no one setting of the configuration).
DERIVED = {
    "should_replicate_config_property",
    "source_consumer",
    "source_admin",
    "target_producer",
    "target_consumer",
    "target_admin",
    "offset_syncs_producer",
    "offset_syncs_consumer",
    "offset_syncs_admin",
    "transactional_id",
    "group_instance_id",
    "copier_group_id",
    "auto_offset_reset",
    "consume_batch",
    "node",
    "record_transforms",
}

BASE = {
    "clusters": "A, B",
    "A.bootstrap.servers": "127.0.0.1:1",
    "B.bootstrap.servers": "127.0.0.1:2",
    "A->B.enabled": "true",
}


def test_derived_fields_are_not_named_like_keys() -> None:
    assert not DERIVED & KEY_NAMES


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {
            "B.offset.flush.interval.ms": "1234",
            "B.exactly.once.source.support": "enabled",
            "B.offset.storage.topic": "progress",
            "admin.timeout.ms": "4321",
            "transaction.boundary.interval.ms": "250",
            "offset-syncs.topic.location": "target",
            "refresh.topics.enabled": "false",
            "refresh.groups.enabled": "false",
            "sync.topic.configs.enabled": "false",
            "sync.group.offsets.enabled": "true",
            "emit.checkpoints.interval.seconds": "7",
            "emit.heartbeats.enabled": "false",
            "offset.lag.max": "3",
            "data.loss.action": "continue",
            "replication.factor.lowering.enabled": "true",
        },
    ],
)
def test_every_setting_has_the_name_and_value_of_its_flow_config_property(
    extra: dict[str, str],
) -> None:
    cfg = MirrorConfig.from_properties({**BASE, **extra})
    flow = cfg.flow("A", "B")
    settings = FlowSettings.from_config(cfg, flow)
    settings_fields = {f.name for f in attrs.fields(FlowSettings)}
    assert settings_fields >= DERIVED
    key_backed = settings_fields & KEY_NAMES
    assert len(key_backed) > 20
    for name in sorted(settings_fields - DERIVED):
        assert hasattr(FlowConfig, name), f"FlowSettings.{name} is not a FlowConfig name"
        expected, actual = getattr(flow, name), getattr(settings, name)
        # the one conversion: a disabled periodic task's interval is NEVER instead of None
        assert actual == expected or (expected is None and actual == NEVER), name


def test_record_producer_is_idempotent_and_keeps_the_users_tuning() -> None:
    props = {
        **BASE,
        "B.producer.linger.ms": "50",
        "B.producer.acks": "1",
        "B.producer.batch.size": "16384",
    }
    cfg = MirrorConfig.from_properties("\n".join(f"{k}={v}" for k, v in props.items()))
    settings = FlowSettings.from_config(cfg, cfg.flow("A", "B"))
    conf = settings.record_producer(linger_ms=5, on_delivery=print)
    assert conf["enable.idempotence"] is True and conf["acks"] == "all"  # never weakened
    assert str(conf["linger.ms"]) == "50" and str(conf["batch.size"]) == "16384"
    assert conf["queue.buffering.max.messages"] == 500_000 and conf["on_delivery"] is print
    assert "on_delivery" not in settings.record_producer(linger_ms=5)


def test_record_consumer_refetches_soon_unless_the_user_says_otherwise() -> None:
    cfg = MirrorConfig.from_properties("\n".join(f"{k}={v}" for k, v in BASE.items()))
    conf = FlowSettings.from_config(cfg, cfg.flow("A", "B")).record_consumer()
    assert conf["fetch.queue.backoff.ms"] == 10
    assert conf["max.partition.fetch.bytes"] == 8 * 1024 * 1024
    assert conf["fetch.max.bytes"] == 16 * 1024 * 1024
    assert conf["bootstrap.servers"] == "127.0.0.1:1"
    for key in ("max.partition.fetch.bytes", "fetch.message.max.bytes"):  # librdkafka aliases
        props = {**BASE, "A.consumer.fetch.queue.backoff.ms": "500", f"A.consumer.{key}": "2048"}
        cfg = MirrorConfig.from_properties("\n".join(f"{k}={v}" for k, v in props.items()))
        conf = FlowSettings.from_config(cfg, cfg.flow("A", "B")).record_consumer()
        assert str(conf["fetch.queue.backoff.ms"]) == "500"  # the user's explicit setting wins
        fetch = {
            k: str(v) for k, v in conf.items() if k.endswith("fetch.bytes") or "message.max" in k
        }
        assert fetch == {key: "2048"}, fetch  # and no alias of it is added after it


def test_a_copy_tasks_consumer_prefetches_less_unless_the_user_says_otherwise() -> None:
    cfg = MirrorConfig.from_properties("\n".join(f"{k}={v}" for k, v in BASE.items()))
    settings = FlowSettings.from_config(cfg, cfg.flow("A", "B"))
    conf = settings.range_consumer()
    own = {"queued.min.messages": 20_000, "fetch.wait.max.ms": 20}
    assert {k: conf[k] for k in own} == own
    assert not own.keys() & settings.record_consumer().keys()  # the embedded engine's
    assert {k: v for k, v in conf.items() if k not in own} == settings.record_consumer()
    props = {
        **BASE,
        "A.consumer.queued.min.messages": "100000",
        "A.consumer.fetch.wait.max.ms": "500",
    }
    cfg = MirrorConfig.from_properties("\n".join(f"{k}={v}" for k, v in props.items()))
    conf = FlowSettings.from_config(cfg, cfg.flow("A", "B")).range_consumer()
    assert {k: str(conf[k]) for k in own} == {
        "queued.min.messages": "100000",
        "fetch.wait.max.ms": "500",
    }


def test_record_consumer_fetch_response_limit_yields_to_the_user() -> None:
    for extra, expected in (
        ({"A.consumer.fetch.max.bytes": "4000000"}, "4000000"),  # the user's setting wins
        ({"A.consumer.message.max.bytes": "20000000"}, "20000000"),  # librdkafka: >= this
    ):
        props = {**BASE, **extra}
        cfg = MirrorConfig.from_properties("\n".join(f"{k}={v}" for k, v in props.items()))
        conf = FlowSettings.from_config(cfg, cfg.flow("A", "B")).record_consumer()
        assert str(conf["fetch.max.bytes"]) == expected


@pytest.mark.parametrize(
    ("extra", "ids"),
    [
        ({}, [None, None]),  # at-least-once, in-process copier: no transactions
        ({"B.exactly.once.source.support": "enabled"}, ["mirrorlib-A->B-n1"] * 2),
        ({"tasks.max": "2"}, ["mirrorlib-A->B-n1-0", "mirrorlib-A->B-n1-1"]),  # workers: always
    ],
)
def test_each_copier_slot_has_its_transactional_id(extra: dict[str, str], ids: list[str]) -> None:
    props = {**BASE, "node.id": "n1", **extra}
    cfg = MirrorConfig.from_properties("\n".join(f"{k}={v}" for k, v in props.items()))
    settings = FlowSettings.from_config(cfg, cfg.flow("A", "B"))
    assert [settings.slot_transactional_id(slot) for slot in (0, 1)] == ids
