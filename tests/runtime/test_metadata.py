"""MetadataTask's topic refresh against in-memory admin clients: what it describes and when."""

from __future__ import annotations

import pytest

from mirrorlib.core.catalog import RemoteTopic, TopicCatalog
from mirrorlib.core.config import MirrorConfig
from mirrorlib.core.counters import StatsRegistry
from mirrorlib.core.plans import comparison_turn
from mirrorlib.core.settings import FlowSettings
from mirrorlib.kafka.admin import ClusterAdmin
from mirrorlib.runtime import metadata
from mirrorlib.runtime.metadata import CONFIGS_FULL_EVERY, MetadataTask
from mirrorlib.testing.fakes import FakeAdminClient


def make_task(
    source: FakeAdminClient, target: FakeAdminClient, **props: str
) -> tuple[MetadataTask, TopicCatalog]:
    cfg = MirrorConfig.from_properties(
        {
            "clusters": "A, B",
            "A.bootstrap.servers": "127.0.0.1:1",
            "B.bootstrap.servers": "127.0.0.1:1",
            "A->B.enabled": "true",
            **props,
        }
    )
    settings = FlowSettings.from_config(cfg, cfg.flow("A", "B"))
    admins = (ClusterAdmin(alias="A", client=source), ClusterAdmin(alias="B", client=target))
    catalog = TopicCatalog()
    task = MetadataTask(settings, catalog, StatsRegistry("A", "B"), connect=lambda _s: admins)
    return task, catalog


def test_creates_remote_topics_with_the_source_configs_and_publishes_them() -> None:
    source = FakeAdminClient(
        {"orders": 3, "clicks": 1}, overrides={"orders": {"retention.ms": "1000"}}
    )
    target = FakeAdminClient(overrides={"A.clicks": {"max.message.bytes": "2048"}})
    task, catalog = make_task(source, target)
    assert task.refresh_topics()
    assert target.topics == {"A.orders": 3, "A.clicks": 1}
    assert target.overrides["A.orders"] == {"retention.ms": "1000"}
    _, published = catalog.snapshot()
    assert published == {
        "clicks": RemoteTopic("A.clicks", 1, 2048),
        "orders": RemoteTopic("A.orders", 3, 1048588),
    }


def test_nothing_is_described_again_while_nothing_changes() -> None:
    source = FakeAdminClient({f"t{i}": 1 for i in range(50)})
    target = FakeAdminClient()
    task, catalog = make_task(source, target)
    task.refresh_topics()
    version = catalog.version
    source.described.clear()
    target.described.clear()
    for _ in range(3):
        assert task.refresh_topics()
    assert not source.described
    assert not target.described
    assert catalog.version == version
    assert source.calls["describe_configs"] == target.calls["describe_configs"] == 1


def test_a_new_topic_costs_one_description_on_each_side() -> None:
    source = FakeAdminClient({f"t{i}": 1 for i in range(50)})
    target = FakeAdminClient()
    task, catalog = make_task(source, target)
    task.refresh_topics()
    source.described.clear()
    target.described.clear()
    source.set_topics({**source.topics, "fresh": 2})
    assert task.refresh_topics()
    assert set(source.described) == {"fresh"}
    assert set(target.described) == {"A.fresh"}
    assert catalog.snapshot()[1]["fresh"] == RemoteTopic("A.fresh", 2, 1048588)


def test_partitions_grow_without_describing_configs() -> None:
    source = FakeAdminClient({"orders": 2})
    target = FakeAdminClient()
    task, catalog = make_task(source, target)
    task.refresh_topics()
    source.described.clear()
    source.set_topics({"orders": 5})
    assert task.refresh_topics()
    assert target.topics == {"A.orders": 5}
    assert not source.described
    assert catalog.snapshot()[1]["orders"].partitions == 5


def test_a_max_message_bytes_changed_by_the_config_sync_is_read_again() -> None:
    source = FakeAdminClient({"orders": 1})
    target = FakeAdminClient()
    task, catalog = make_task(source, target)
    task.refresh_topics()
    source.overrides["orders"] = {"max.message.bytes": "4096"}
    task.sync_topic_configs()
    assert target.overrides["A.orders"] == {"max.message.bytes": "4096"}
    task.refresh_topics()
    assert catalog.snapshot()[1]["orders"].max_message_bytes == 4096


def test_cached_limits_are_read_again_when_old(monkeypatch: pytest.MonkeyPatch) -> None:
    source = FakeAdminClient({"orders": 1})
    target = FakeAdminClient()
    task, catalog = make_task(source, target)
    task.refresh_topics()
    target.overrides["A.orders"] = {"max.message.bytes": "512"}  # changed by an operator
    task.refresh_topics()
    assert catalog.snapshot()[1]["orders"].max_message_bytes == 1048588  # cached
    clock = metadata.time.monotonic() + metadata.LIMITS_MAX_AGE + 1
    monkeypatch.setattr(metadata.time, "monotonic", lambda: clock)
    task.refresh_topics()
    assert catalog.snapshot()[1]["orders"].max_message_bytes == 512


def test_filtered_topics_are_neither_created_nor_described() -> None:
    source = FakeAdminClient({"orders": 1, "secret": 1})
    target = FakeAdminClient()
    task, catalog = make_task(source, target, **{"A->B.topics.exclude": "secret"})
    task.refresh_topics()
    assert set(target.topics) == {"A.orders"}
    assert "secret" not in source.described
    assert set(catalog.snapshot()[1]) == {"orders"}


def test_topics_that_could_not_be_created_are_tried_again() -> None:
    source = FakeAdminClient({"orders": 1})
    target = FakeAdminClient(brokers=1)
    task, catalog = make_task(source, target, **{"replication.factor": "3"})
    assert not task.refresh_topics()  # 3 replicas on 1 broker: refused
    assert not target.topics
    assert not task.refresh_topics()  # nothing changed, but still refused
    target.brokers = 3
    assert task.refresh_topics()
    assert target.topics == {"A.orders": 1}
    assert set(catalog.snapshot()[1]) == {"orders"}


def test_config_sync_describes_only_remote_topics_whose_source_configs_changed() -> None:
    source = FakeAdminClient({"orders": 1, "payments": 1})
    target = FakeAdminClient()
    task, _ = make_task(source, target)
    task.refresh_topics()
    task.sync_topic_configs()  # the first cycle compares every remote topic
    turn = 1  # the second cycle's: only the topics of this turn are compared
    due = {
        f"A.{t}" for t in ("orders", "payments") if comparison_turn(t, CONFIGS_FULL_EVERY) == turn
    }
    target.described.clear()
    task.sync_topic_configs()
    assert set(target.described) == due
    source.overrides["orders"] = {"retention.ms": "1000"}
    target.described.clear()
    task.sync_topic_configs()
    turn = 2
    due = {f"A.{t}" for t in ("payments",) if comparison_turn(t, CONFIGS_FULL_EVERY) == turn}
    assert set(target.described) == {"A.orders"} | due
    assert target.overrides["A.orders"] == {"retention.ms": "1000"}
    assert "A.payments" not in target.overrides


def test_config_sync_puts_back_configs_altered_on_the_target() -> None:
    source = FakeAdminClient({"orders": 1})
    target = FakeAdminClient()
    task, _ = make_task(source, target)
    source.overrides["orders"] = {"retention.ms": "1000"}
    task.refresh_topics()
    task.sync_topic_configs()
    target.overrides["A.orders"] = {"retention.ms": "5"}  # changed by an operator
    for _ in range(metadata.CONFIGS_FULL_EVERY):
        task.sync_topic_configs()
    assert target.overrides["A.orders"] == {"retention.ms": "1000"}


def test_config_sync_compares_every_remote_topic_once_per_full_round() -> None:
    names = [f"t{i}" for i in range(200)]
    source = FakeAdminClient(dict.fromkeys(names, 1))
    target = FakeAdminClient()
    task, _ = make_task(source, target)
    task.refresh_topics()
    task.sync_topic_configs()  # the first cycle compares every remote topic
    target.described.clear()
    per_cycle = []
    for _ in range(CONFIGS_FULL_EVERY):
        before = sum(target.described.values())
        task.sync_topic_configs()
        per_cycle.append(sum(target.described.values()) - before)
    assert target.described == dict.fromkeys((f"A.{n}" for n in names), 1)
    assert max(per_cycle) < len(names) / 2  # a share each cycle, not all at once
