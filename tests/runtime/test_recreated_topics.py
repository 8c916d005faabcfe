"""Topics deleted and created again (a new topic id): the new incarnation is copied from its
first offset, never skipped, with a warning, counted in the status; a group of the new
incarnation fails over to its records (mirrorlib.core.incarnations)."""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka import KafkaException

from mirrorlib import Checkpoint, Replicator
from mirrorlib.core.status import FlowStatus
from mirrorlib.runtime.operations import select_flows, verify_flow
from mirrorlib.testing import BaseCluster, ClusterSet
from tests.runtime.conftest import commit_group, config, decoded, read_all, wait_for

pytestmark = pytest.mark.integration

WARNING = "was deleted and created again"


def recreate(cluster: BaseCluster, topic: str, partitions: int = 1) -> None:
    """Delete ``topic`` and create it again (a new topic id)."""
    admin = cluster.admin_client()
    admin.delete_topics([topic], operation_timeout=30)[topic].result(35)
    wait_for(f"{topic} deleted", lambda: topic not in cluster.topic_names(), timeout=60)
    deadline = time.monotonic() + 60
    while True:
        try:
            cluster.create_topic(topic, partitions)
            return
        except Exception:  # the deletion may still be going on on the broker
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def flow(r: Replicator) -> FlowStatus:
    (status,) = [f for f in r.status() if (f.source, f.target) == ("A", "B")]
    return status


def values(cluster: BaseCluster, topic: str, *, read_committed: bool) -> list[str]:
    return [m.value().decode() for m in read_all(cluster, topic, read_committed=read_committed)]


def copied(cluster: BaseCluster, topic: str, prefix: str, n: int, *, eos: bool) -> bool:
    try:
        got = {v for v in values(cluster, topic, read_committed=eos) if v.startswith(prefix)}
    except KafkaException:  # the remote topic is not there (yet)
        return False
    return got >= {f"{prefix}{i}" for i in range(n)}


@pytest.mark.parametrize("mode", ["at-least-once", "exactly-once", "workers"])
def test_a_source_topic_recreated_while_stopped_is_copied_from_its_first_offset(
    two_clusters: ClusterSet, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The measured case: ``t`` copied to offset 1,000, the replicator stopped, ``t`` deleted
    and created again with 3,000 records, the replicator started again: every record of the new
    topic reaches the target (none of 0..999 skipped), a warning names the topic and both ids,
    the status counts it, and a group of the new topic fails over to its records."""
    a, b = two_clusters
    eos = mode != "at-least-once"  # (worker processes write transactions in any mode)
    topic = f"recreated-{mode[:3]}"
    remote = f"A.{topic}"
    a.create_topic(topic, 1)
    a.produce(topic, [f"old-{i}" for i in range(1000)])
    extra = {"A->B.topics": topic}
    if mode == "exactly-once":
        extra["B.exactly.once.source.support"] = "enabled"
    if mode == "workers":
        extra["tasks.max"] = "2"
    cfg = config(two_clusters, ["A->B"], **extra)
    with Replicator(cfg):
        wait_for("the old topic copied", lambda: copied(b, remote, "old-", 1000, eos=eos))
    recreate(a, topic)
    a.produce(topic, [f"new-{i}" for i in range(3000)])
    group = f"g-{topic}"
    with caplog.at_level(logging.WARNING), Replicator(cfg) as r:
        wait_for(
            "every record of the new topic copied",
            lambda: copied(b, remote, "new-", 3000, eos=eos),
            timeout=90,
        )
        if mode != "workers":  # (a worker process logs to its own stderr)
            assert WARNING in caplog.text and f"source topic {topic}" in caplog.text
        # (worker processes report every few seconds)
        status = wait_for("the status to count it", lambda: flow(r).new_incarnations and flow(r))
        assert status.new_incarnations == 1, status.incarnation_events
        assert any(f"source topic {topic} {WARNING}" in e for e in status.incarnation_events)
        # a group of the new incarnation at 2,000 fails over to new-2000 (not into the old
        # incarnation's records, not past its own)
        commit_group(a, group, topic, {0: 2000})
        on_b = read_all(b, remote, read_committed=eos)

        def checkpoint() -> Checkpoint | None:
            found = [
                c for c in decoded(b, "A.checkpoints.internal", Checkpoint) if c.group == group
            ]
            return found[-1] if found else None

        cp = wait_for("the group's checkpoint", checkpoint, timeout=60)
    at = {m.offset(): m.value().decode() for m in on_b}
    first_new = min(o for o, v in at.items() if v.startswith("new-"))
    assert first_new <= cp.downstream_offset, (cp, at.get(cp.downstream_offset))
    value = at.get(cp.downstream_offset)
    assert value is not None and value.startswith("new-"), (cp, value)
    assert int(value.split("-")[1]) <= 2000, (cp, value)


def test_a_source_topic_recreated_while_running_is_copied_from_its_first_offset(
    two_clusters: ClusterSet, caplog: pytest.LogCaptureFixture
) -> None:
    a, b = two_clusters
    topic, remote = "recreated-live", "A.recreated-live"
    a.create_topic(topic, 1)
    a.produce(topic, [f"old-{i}" for i in range(500)])
    cfg = config(two_clusters, ["A->B"], **{"A->B.topics": topic})
    with caplog.at_level(logging.WARNING), Replicator(cfg) as r:
        wait_for("the old topic copied", lambda: copied(b, remote, "old-", 500, eos=False))
        recreate(a, topic)
        a.produce(topic, [f"new-{i}" for i in range(1500)])
        wait_for(
            "every record of the new topic copied",
            lambda: copied(b, remote, "new-", 1500, eos=False),
            timeout=90,
        )
        wait_for("the status to count it", lambda: flow(r).new_incarnations >= 1)
    assert WARNING in caplog.text


def test_a_remote_topic_recreated_on_the_target_is_filled_again(
    two_clusters: ClusterSet, caplog: pytest.LogCaptureFixture
) -> None:
    """The remote topic deleted (and created again) on the target while the replicator was
    stopped: the source is copied again from its first offset, so the target is complete."""
    a, b = two_clusters
    topic, remote = "recreated-remote", "A.recreated-remote"
    a.create_topic(topic, 1)
    a.produce(topic, [f"r-{i}" for i in range(800)])
    cfg = config(two_clusters, ["A->B"], **{"A->B.topics": topic})
    with Replicator(cfg):
        wait_for("the topic copied", lambda: copied(b, remote, "r-", 800, eos=False))
    recreate(b, remote)
    (flow_cfg,) = select_flows(cfg, "A->B")
    report = verify_flow(cfg, flow_cfg, topic, timeout=120)
    (audit,) = report.partitions
    assert not report.ok and audit.incarnation is not None, report.describe()
    assert f"remote topic {remote} is a new incarnation" in audit.incarnation
    assert audit.incarnation in report.describe()
    with caplog.at_level(logging.WARNING), Replicator(cfg) as r:
        wait_for(
            "the remote topic filled again",
            lambda: copied(b, remote, "r-", 800, eos=False),
            timeout=90,
        )
        assert flow(r).new_incarnations == 1
    assert f"remote topic {remote} {WARNING}" in caplog.text
    (audit,) = verify_flow(cfg, flow_cfg, topic, timeout=120).partitions
    assert audit.incarnation is None and audit.ok, audit


def test_a_remote_topic_deleted_while_running_is_created_and_filled_again(
    two_clusters: ClusterSet,
) -> None:
    """An operator deletes the remote topic while the replicator runs: the replicator creates it
    again (a new topic id) and copies the source into it from its first offset."""
    a, b = two_clusters
    topic, remote = "recreated-remote-live", "A.recreated-remote-live"
    a.create_topic(topic, 1)
    a.produce(topic, [f"rl-{i}" for i in range(600)])
    cfg = config(two_clusters, ["A->B"], **{"A->B.topics": topic})
    with Replicator(cfg) as r:
        wait_for("the topic copied", lambda: copied(b, remote, "rl-", 600, eos=False))
        admin = b.admin_client()
        admin.delete_topics([remote], operation_timeout=30)[remote].result(35)
        a.produce(topic, [f"rl-{i}" for i in range(600, 700)])
        wait_for(
            "the remote topic created and filled again",
            lambda: copied(b, remote, "rl-", 700, eos=False),
            timeout=120,
        )
        wait_for("the status to count it", lambda: flow(r).new_incarnations >= 1)
