"""The replication consumer's ``isolation.level``: ``read_committed`` in every mode unless the
configuration says ``read_uncommitted``, which is honoured (at-least-once) with a warning that
names the setting, however it was written."""

from __future__ import annotations

import pytest

from mirrorlib import ConfigError, MirrorConfig
from mirrorlib.core.config.clients import replication_isolation
from mirrorlib.core.settings import FlowSettings

BASE = {
    "clusters": "a, b",
    "a->b.enabled": "true",
    "a.bootstrap.servers": "localhost:1",
    "b.bootstrap.servers": "localhost:2",
}


def build(**props: str) -> MirrorConfig:
    return MirrorConfig.from_properties({**BASE, **props})


def level(cfg: MirrorConfig) -> str:
    """The level the flow a->b's replication consumer runs with (what every engine asks)."""
    s = FlowSettings.from_config(cfg, cfg.flow("a", "b"))
    return replication_isolation(
        s.source_consumer.get("isolation.level"), exactly_once=s.exactly_once_enabled
    )


def isolation_warnings(cfg: MirrorConfig) -> list[tuple[str, str, str | None, str]]:
    return [(w.key, w.kind, w.alias, w.message) for w in cfg.warnings if "isolation.level" in w.key]


@pytest.mark.parametrize("eos", [False, True])
def test_read_committed_by_default_in_every_mode(eos: bool) -> None:
    cfg = build(**({"b.exactly.once.source.support": "enabled"} if eos else {}))
    assert cfg.flow("a", "b").exactly_once_enabled is eos
    assert level(cfg) == "read_committed"
    assert not isolation_warnings(cfg)
    assert not [w for w in cfg.warnings if w.kind == "downgraded"]


@pytest.mark.parametrize(
    "key",
    [
        "a.consumer.isolation.level",
        "a->b.consumer.isolation.level",
        "a->b.source.consumer.isolation.level",
    ],
)
def test_explicit_read_uncommitted_is_honoured_with_a_warning_naming_the_setting(key: str) -> None:
    cfg = build(**{key: " Read_Uncommitted "})
    assert level(cfg) == "read_uncommitted"
    [(origin, kind, alias, message)] = isolation_warnings(cfg)
    assert (origin, kind, alias) == (key, "downgraded", "a->b")
    assert "records of aborted transactions will be copied to b as committed" in message
    assert "read_uncommitted" in message


def test_read_committed_written_out_is_quiet() -> None:
    cfg = build(**{"a.consumer.isolation.level": "read_committed"})
    assert level(cfg) == "read_committed"
    assert not isolation_warnings(cfg)


def test_top_level_consumer_setting_is_ignored_as_by_mm2() -> None:
    cfg = build(**{"consumer.isolation.level": "read_uncommitted"})
    assert level(cfg) == "read_committed"
    [(_, kind, _, _)] = isolation_warnings(cfg)
    assert kind == "ignored"


def test_exactly_once_ignores_read_uncommitted_and_says_so() -> None:
    cfg = build(
        **{
            "b.exactly.once.source.support": "enabled",
            "a.consumer.isolation.level": "read_uncommitted",
        }
    )
    assert level(cfg) == "read_committed"
    [(origin, kind, alias, message)] = isolation_warnings(cfg)
    assert (origin, kind, alias) == ("a.consumer.isolation.level", "ignored", "a->b")
    assert "exactly-once" in message


def test_a_flow_that_does_not_replicate_gets_no_warning() -> None:
    # b->a only emits heartbeats: b's consumer setting copies nothing
    cfg = build(**{"b.consumer.isolation.level": "read_uncommitted"})
    assert not cfg.flow("b", "a").enabled
    assert not isolation_warnings(cfg)


def test_an_invalid_level_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError, match="read_committed") as info:
        build(**{"a->b.consumer.isolation.level": "committed"})
    assert (info.value.key, info.value.alias, info.value.value) == (
        "a->b.consumer.isolation.level",
        "a->b",
        "committed",
    )


def test_the_rule() -> None:
    assert replication_isolation(None, exactly_once=False) == "read_committed"
    assert replication_isolation("read_uncommitted", exactly_once=False) == "read_uncommitted"
    assert replication_isolation("read_uncommitted", exactly_once=True) == "read_committed"
    assert replication_isolation("READ_COMMITTED", exactly_once=False) == "read_committed"
    with pytest.raises(ConfigError):
        replication_isolation("dirty", exactly_once=False)
