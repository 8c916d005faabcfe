"""``exactly.once.support`` against the target's ``exactly.once.source.support``, as Connect
validates it: ``required`` without worker support is refused, ``requested`` runs at-least-once
(with a warning when the key was set explicitly)."""

from __future__ import annotations

import pytest

from mirrorlib import ConfigError, MirrorConfig

READ_COMMITTED = {"a.consumer.isolation.level": "read_committed"}


def build(**props: str) -> MirrorConfig:
    return MirrorConfig.from_properties({"clusters": "a, b", "a->b.enabled": "true", **props})


@pytest.mark.parametrize("support", [None, "disabled", "preparing"])
def test_required_without_target_support_is_refused(support: str | None) -> None:
    props = {"a->b.exactly.once.support": "required", **READ_COMMITTED}
    if support is not None:
        props["b.exactly.once.source.support"] = support
    with pytest.raises(ConfigError) as info:
        build(**props)
    message = str(info.value)
    assert "a->b.exactly.once.support=required (flow a->b)" in message
    assert "set b.exactly.once.source.support=enabled" in message
    assert f"it is {support or 'disabled'}" in message
    assert "isolation.level" not in message
    assert (info.value.key, info.value.alias, info.value.value) == (
        "a->b.exactly.once.support",
        "a->b",
        "required",
    )


def test_required_with_target_support_and_read_committed_runs_exactly_once() -> None:
    cfg = build(
        **{"a->b.exactly.once.support": "required", "b.exactly.once.source.support": "enabled"},
        **READ_COMMITTED,
    )
    flow = cfg.flow("a", "b")
    assert flow.exactly_once_support == "required" and flow.exactly_once_enabled
    assert not [w for w in cfg.warnings if w.kind == "downgraded"]


def test_required_names_every_missing_piece() -> None:
    # read_committed is mirrorlib's default (MM2 needs it written): only read_uncommitted fails
    with pytest.raises(ConfigError) as info:
        build(
            **{"exactly.once.support": "required", "a.consumer.isolation.level": "read_uncommitted"}
        )
    message = str(info.value)
    assert "b.exactly.once.source.support=enabled" in message
    assert "a.consumer.isolation.level says read_uncommitted" in message
    only_isolation = {
        "exactly.once.support": "required",
        "b.exactly.once.source.support": "enabled",
        "a->b.source.consumer.isolation.level": "read_uncommitted",
    }
    with pytest.raises(ConfigError, match="isolation.level") as info:
        build(**only_isolation)
    assert "exactly.once.source.support" not in str(info.value)
    assert "a->b.source.consumer.isolation.level" in str(info.value)


def test_required_needs_no_isolation_setting() -> None:
    cfg = build(**{"exactly.once.support": "required", "b.exactly.once.source.support": "enabled"})
    assert cfg.flow("a", "b").exactly_once_enabled


def test_required_is_checked_only_for_flows_that_replicate() -> None:
    # b->a only emits heartbeats: a's worker setting does not matter (b's does)
    cfg = build(
        **{
            "exactly.once.support": "required",
            "b.exactly.once.source.support": "enabled",
            "b.consumer.isolation.level": "read_committed",
        },
        **READ_COMMITTED,
    )
    assert not cfg.flow("b", "a").enabled
    assert not cfg.flow("b", "a").exactly_once_enabled


def test_requested_without_target_support_runs_at_least_once_with_a_warning() -> None:
    cfg = build(**{"a->b.exactly.once.support": "requested"})
    [warning] = [w for w in cfg.warnings if w.kind == "downgraded"]
    assert (warning.key, warning.alias) == ("a->b.exactly.once.support", "a->b")
    assert "flow a->b runs at-least-once" in warning.message
    assert "b.exactly.once.source.support is disabled" in warning.message
    assert not cfg.flow("a", "b").exactly_once_enabled


@pytest.mark.parametrize(
    "props",
    [
        {},  # the default "requested" asks for nothing in particular
        {"exactly.once.support": "requested", "b.exactly.once.source.support": "enabled"},
        {"b->a.exactly.once.support": "requested"},  # b->a does not replicate
    ],
)
def test_no_warning_when_nothing_is_downgraded(props: dict[str, str]) -> None:
    assert not [w for w in build(**props).warnings if w.kind == "downgraded"]
