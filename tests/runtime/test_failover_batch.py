"""Failing over many groups at once on real clusters: named groups, a regex, every group with
checkpoints, one group refused while the others move (the planning itself is tested in
tests/core/test_failover.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer

from mirrorlib import DefaultReplicationPolicy, MirrorConfig, Replicator, TopicPartition
from mirrorlib.core.failover import GroupOutcome
from mirrorlib.errors import ClusterError
from mirrorlib.kafka.client import MirrorClient
from mirrorlib.kafka.groups import GroupAdmin
from mirrorlib.runtime.failover import failover_groups
from mirrorlib.testing import ClusterSet

TOPIC = "fb20.orders"
GROUPS = [f"fb20-g{i:02d}" for i in range(20)]
BUSY = "fb20-busy"
LATE = "fb20-late"  # committed on A after the flow stopped: no checkpoint
# a separator of its own: this module's checkpoints topic (A-b-checkpoints-b-internal) holds
# only its own groups, so "every group with checkpoints" is exactly them on the shared clusters
# (not "_": Kafka refuses A_checkpoints_internal where A.checkpoints.internal exists, as names
# that differ only in "." and "_" collide)
SEPARATOR = "-b-"


def _offsets(i: int) -> dict[int, int]:
    return {0: 10 + i, 1: 5 + 2 * i}


@pytest.fixture(scope="module")
def batch(kafka_clusters: Any) -> Iterator[tuple[ClusterSet, MirrorConfig]]:
    """21 groups committed on A (``BUSY`` among them), replicated and checkpointed to B."""
    from tests.runtime.conftest import commit_group, config, produce, wait_for

    clusters = kafka_clusters(["A", "B"])
    a, b = clusters
    a.create_topic(TOPIC, 2)
    produce(a, TOPIC, [{"value": f"v{i}".encode(), "partition": i % 2} for i in range(200)])
    for i, group in enumerate([*GROUPS, BUSY]):
        commit_group(a, group, TOPIC, _offsets(i))
    cfg = config(
        clusters, ["A->B"],
        **{
            "A->B.topics": "fb20\\..*", "A->B.groups": "fb20-.*",
            "replication.policy.separator": SEPARATOR,
            "emit.checkpoints.interval.seconds": "1",
        },
    )  # fmt: skip
    policy = DefaultReplicationPolicy(separator=SEPARATOR)

    def checkpointed() -> bool:
        with MirrorClient(b.client_config(), policy) as client:
            try:
                groups = {g for g, _ in client.checkpoints("A", timeout=10)}
            except ClusterError:  # the checkpoints topic is not created yet
                return False
        return groups >= {*GROUPS, BUSY}

    with Replicator(cfg):
        wait_for("checkpoints of every group", checkpointed, 90)
    commit_group(a, LATE, TOPIC, {0: 40, 1: 41})
    yield clusters, cfg


def _on_b(clusters: ClusterSet, group: str) -> dict[TopicPartition, int]:
    admin = GroupAdmin(clusters[1].client_config(), alias="B")
    return {tp: om.offset for tp, om in admin.committed_offsets(group).items()}


def _expected(i: int) -> dict[TopicPartition, int]:
    return {TopicPartition(f"A{SEPARATOR}{TOPIC}", p): o for p, o in _offsets(i).items()}


@pytest.mark.integration
def test_named_groups_fail_over_together_each_with_its_result(
    batch: tuple[ClusterSet, MirrorConfig],
) -> None:
    clusters, cfg = batch
    named = GROUPS[:3]
    result = failover_groups(cfg, named, "A", "B")
    print("\n" + result.describe())
    assert [r.group for r in result.results] == named
    assert all(
        r.outcome in (GroupOutcome.COMMITTED, GroupOutcome.UNCHANGED) for r in result.results
    )
    assert result.failed == ()
    for i, group in enumerate(named):
        assert _on_b(clusters, group) == _expected(i), group
        plan = result.result(group).plan
        assert plan is not None and plan.re_read_total == 0
    # a bounded number of request waves, whatever the number of groups
    assert result.round_trips <= 12
    # the checkpoints of many groups in one read (KIP-1239's batch translateOffsets)
    policy = DefaultReplicationPolicy(separator=SEPARATOR)
    with MirrorClient(clusters[1].client_config(), policy) as client:
        many = client.remote_consumer_offsets_many([*named, "fb20-nosuch"], "A")
    assert many["fb20-nosuch"] == {}
    for i, group in enumerate(named):
        assert {tp: om.offset for tp, om in many[group].items()} == _expected(i)


@pytest.mark.integration
def test_a_regex_selects_checkpointed_and_listed_groups_and_a_dry_run_commits_nothing(
    batch: tuple[ClusterSet, MirrorConfig],
) -> None:
    clusters, cfg = batch
    result = failover_groups(cfg, [], "A", "B", pattern=r"fb20-(g1\d|late)", dry_run=True)
    print("\n" + result.describe())
    assert [r.group for r in result.results] == sorted([*GROUPS[10:], LATE])
    assert {r.outcome for r in result.results} == {GroupOutcome.PLANNED}
    late = result.result(LATE).plan
    assert late is not None
    # no checkpoint for it: translated now with the offset syncs
    assert {p.method for p in late.partitions} == {"offset-syncs"}
    remote = f"A{SEPARATOR}{TOPIC}"
    translated = {tp.partition: om.offset for tp, om in late.offsets.items() if tp.topic == remote}
    assert set(translated) == {0, 1}
    assert 0 < translated[0] <= 40 and 0 < translated[1] <= 41  # never past the committed
    assert _on_b(clusters, GROUPS[15]) == {} and _on_b(clusters, LATE) == {}


@pytest.mark.integration
def test_every_checkpointed_group_moves_but_one_active_on_the_target_is_refused(
    batch: tuple[ClusterSet, MirrorConfig],
) -> None:
    from tests.runtime.conftest import wait_for

    clusters, cfg = batch
    b = clusters[1]
    busy = Consumer({**b.client_config(), "group.id": BUSY, "enable.auto.commit": False})
    busy.subscribe([f"A{SEPARATOR}{TOPIC}"])
    try:
        wait_for("member on B", lambda: busy.consume(1, timeout=0.5) or busy.assignment())
        result = failover_groups(cfg, [], "A", "B", all_groups=True)
    finally:
        busy.close()
    print("\n" + result.describe())
    # every group with checkpoints, and only those (LATE has none)
    assert [r.group for r in result.results] == sorted([*GROUPS, BUSY])
    assert result.failed == (BUSY,)
    refused = result.result(BUSY)
    assert refused.outcome is GroupOutcome.REFUSED
    assert "already has active members on B" in refused.reason
    assert set(result.succeeded) == set(GROUPS)
    for i, group in enumerate(GROUPS):
        assert _on_b(clusters, group) == _expected(i), group
    assert "REFUSED fb20-busy" in result.describe()
    assert result.to_dict()["failed"] == [BUSY]
