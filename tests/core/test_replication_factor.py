"""The replication factor rule: honoured, refused, or lowered only when the user opted in."""

from __future__ import annotations

import pytest

from mirrorlib.core.plans import (
    CreatePartitions,
    CreateTopic,
    SkippedTopic,
    SkipReason,
    TopicPlan,
)
from mirrorlib.core.replication_factor import (
    LOWERING_KEY,
    choose_replication_factor,
    enforce_replication_factor,
)


@pytest.mark.parametrize("lowering", [False, True])
@pytest.mark.parametrize(("wanted", "brokers"), [(1, 1), (2, 3), (3, 3), (1, 0)])
def test_a_factor_the_brokers_can_hold_is_used_as_it_is(
    wanted: int, brokers: int, lowering: bool
) -> None:
    choice = choose_replication_factor(wanted, brokers, lowering_enabled=lowering)
    assert choice.factor == wanted
    assert not choice.refused and not choice.lowered


@pytest.mark.parametrize("lowering", [False, True])
@pytest.mark.parametrize("brokers", [0, 1, 5])
def test_the_broker_default_is_passed_through(brokers: int, lowering: bool) -> None:
    choice = choose_replication_factor(-1, brokers, lowering_enabled=lowering)
    assert choice.factor == -1
    assert not choice.lowered


def test_too_few_brokers_refuse_the_topic_by_default() -> None:
    choice = choose_replication_factor(3, 1, lowering_enabled=False)
    assert choice.refused and choice.factor is None
    text = choice.explain("A.orders", "B")
    assert "A.orders" in text and "replication factor 3" in text and "1 live broker" in text
    assert "cluster B" in text and f"{LOWERING_KEY}=true" in text


def test_lowering_uses_the_live_broker_count_when_allowed() -> None:
    choice = choose_replication_factor(3, 2, lowering_enabled=True)
    assert choice.factor == 2 and choice.lowered and not choice.refused
    assert "A.orders" in choice.explain("A.orders", "B")
    assert "lowered to 2" in choice.explain("A.orders", "B")


def test_no_live_broker_refuses_even_with_lowering() -> None:
    assert choose_replication_factor(2, 0, lowering_enabled=True).refused


def _plan() -> TopicPlan:
    return TopicPlan(
        [
            CreateTopic("A.orders", 4, 3, {"retention.ms": "1"}, source_topic="orders"),
            CreateTopic("A.logs", 1, -1, source_topic="logs"),
            CreatePartitions("A.users", 6, 3, source_topic="users"),
        ],
        [SkippedTopic("__consumer_offsets", SkipReason.INTERNAL)],
    )


def test_enforce_moves_refused_creations_to_skipped_with_the_reason() -> None:
    plan, choices = enforce_replication_factor(
        _plan(), lambda: 1, lowering_enabled=False, cluster="B"
    )
    assert [getattr(s, "name", None) for s in plan.steps] == ["A.logs", "A.users"]
    assert plan.creates == (CreateTopic("A.logs", 1, -1, source_topic="logs"),)
    refused = [s for s in plan.skipped_topics if s.reason is SkipReason.REPLICATION_FACTOR]
    assert [s.name for s in refused] == ["orders"]
    assert refused[0].detail == choices["A.orders"].explain("A.orders", "B")
    assert "replication factor 3" in plan.describe()
    assert choices["A.orders"].refused and not choices["A.logs"].refused


def test_enforce_lowers_when_allowed() -> None:
    plan, choices = enforce_replication_factor(
        _plan(), lambda: 1, lowering_enabled=True, cluster="B"
    )
    assert plan.creates[0] == CreateTopic(
        "A.orders", 4, 1, {"retention.ms": "1"}, source_topic="orders"
    )
    assert choices["A.orders"].lowered
    assert "replication factor 1" in plan.describe()
    assert len(plan.skipped) == 1


def test_enforce_asks_for_the_broker_count_only_when_it_matters() -> None:
    calls: list[int] = []

    def brokers() -> int:
        calls.append(1)
        return 3

    plan = TopicPlan([CreateTopic("A.x", 1, 1), CreateTopic("A.y", 1, -1)])
    assert enforce_replication_factor(plan, brokers, lowering_enabled=False, cluster="B")[0] == plan
    assert not calls
    plan = TopicPlan([CreateTopic("A.x", 1, 3), CreateTopic("A.y", 1, 2)])
    assert enforce_replication_factor(plan, brokers, lowering_enabled=False, cluster="B")[0] == plan
    assert calls == [1]
