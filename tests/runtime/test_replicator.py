"""The embedded Replicator on real clusters: records, topics, checkpoints, heartbeats, restarts."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import NewPartitions

from mirrorlib import Checkpoint, CodecError, Heartbeat, OffsetSync, Replicator
from mirrorlib.core.status import FlowState
from mirrorlib.testing import ClusterSet
from tests.runtime.conftest import (
    commit_group,
    config,
    decoded,
    end_offsets,
    produce,
    read_all,
    wait_for,
)

# Record timestamps an hour old: recent enough that no retention setting deletes them while a
# test runs (a fixed date in the past would be deleted by time-based retention).
TS0 = (int(time.time()) - 3600) * 1000

pytestmark = pytest.mark.integration


def replicated(replicator: Replicator, prefix: str = "") -> int:
    """Records replicated so far from source topics starting with ``prefix`` (heartbeat topics
    are always replicated too, so tests count their own topics only)."""
    return sum(
        p.record_count
        for s in replicator.status()
        for p in s.partitions
        if p.topic.startswith(prefix) and not p.topic.endswith("heartbeats")
    )


def test_records_keep_key_value_headers_timestamp_and_partition(two_clusters: ClusterSet) -> None:
    a, b = two_clusters
    a.create_topic(
        "basic.orders", 3, config={"retention.ms": "86400000", "max.message.bytes": "200000"}
    )
    records = [
        {
            "key": f"k{i}".encode() if i % 5 else None,
            "value": f"v{i}".encode() if i % 7 else None,
            "partition": i % 3,
            "timestamp": TS0 + i,
            "headers": [("h1", f"x{i}".encode()), ("h2", None), ("h1", b"dup")] if i % 2 else None,
        }
        for i in range(600)
    ]
    produce(a, "basic.orders", records)
    cfg = config(two_clusters, ["A->B"], **{"A->B.topics": "basic\\..*"})
    with Replicator(cfg) as r:
        wait_for("600 records replicated", lambda: replicated(r) >= 600)
        status = r.status()[0]
        assert status.state is FlowState.RUNNING, status.errors
        wait_for("lag reported", lambda: all(p.lag_records == 0 for p in r.status()[0].partitions))
        names = {m.name for m in r.metrics()}
        for name in (
            "record-count",
            "record-age-ms",
            "replication-latency-ms",
            "byte-rate",
            "replication-lag-records",
            "replication-lag-seconds",
        ):
            assert name in names, name
    got = read_all(b, "A.basic.orders")
    assert len(got) == 600
    by_value = {}
    for m in got:
        by_value[(m.partition(), m.timestamp()[1])] = m
    for i, rec in enumerate(records):
        m = by_value[(i % 3, TS0 + i)]
        assert m.key() == rec["key"]
        assert m.value() == rec["value"]
        assert (m.headers() or None) == rec["headers"]
    # remote topic: same partition count, non-default configs copied
    admin = b.admin_client()
    from confluent_kafka.admin import ConfigResource, ResourceType

    cfgs = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "A.basic.orders")])
    entries = next(iter(cfgs.values())).result(30)
    assert entries["retention.ms"].value == "86400000"
    assert entries["max.message.bytes"].value == "200000"
    assert end_offsets(b, "A.basic.orders").keys() == {0, 1, 2}


def test_heartbeats_checkpoints_offset_syncs_and_group_offset_sync(
    two_clusters: ClusterSet,
) -> None:
    a, b = two_clusters
    a.create_topic("cp.events", 2)
    produce(a, "cp.events", [{"value": str(i).encode(), "partition": i % 2} for i in range(400)])
    commit_group(a, "cp-group", "cp.events", {0: 150, 1: 200})
    cfg = config(
        two_clusters,
        ["A->B"],
        **{"A->B.topics": "cp\\..*", "A->B.groups": "cp-.*", "sync.group.offsets.enabled": "true"},
    )
    with Replicator(cfg) as r:
        wait_for("400 records replicated", lambda: replicated(r) >= 400)

        def checkpoints() -> dict[int, Checkpoint]:
            found = {}
            for m in read_all(b, "A.checkpoints.internal"):
                try:  # other tests share this topic (one writes corrupt records on purpose)
                    cp = Checkpoint.decode(m.key(), m.value())
                except CodecError:
                    continue
                if cp.group == "cp-group":
                    found[cp.partition] = cp
            return (
                found
                if len(found) == 2 and all(c.upstream_offset in (150, 200) for c in found.values())
                else {}
            )

        cps = wait_for("checkpoints for both partitions", checkpoints)
        # a single writer, no gaps: exact translation (MM2 would answer the last sync + 1)
        assert cps[0].topic == "A.cp.events"
        assert cps[0].downstream_offset == 150
        assert cps[1].downstream_offset == 200

        def synced() -> dict[int, int] | None:
            c = Consumer({**b.client_config(), "group.id": "cp-group"})
            from confluent_kafka import TopicPartition as KafkaTP

            got = c.committed([KafkaTP("A.cp.events", 0), KafkaTP("A.cp.events", 1)], timeout=10)
            c.close()
            offsets = {tp.partition: tp.offset for tp in got}
            return offsets if offsets == {0: 150, 1: 200} else None

        wait_for("group offsets synced to B", synced)
        hb = decoded(b, "heartbeats", Heartbeat)
        assert any(h.source_cluster_alias == "A" and h.target_cluster_alias == "B" for h in hb)
        syncs = decoded(a, "mm2-offset-syncs.B.internal", OffsetSync)
        assert {s.topic for s in syncs} >= {"cp.events"}
        assert r.status()[0].checkpoints_emitted >= 2


def test_restart_resumes_from_stored_positions(two_clusters: ClusterSet) -> None:
    a, b = two_clusters
    a.create_topic("resume.t", 2)
    produce(a, "resume.t", [{"value": f"a{i}".encode(), "partition": i % 2} for i in range(300)])
    cfg = config(two_clusters, ["A->B"], **{"A->B.topics": "resume\\..*"})
    with Replicator(cfg) as r:
        wait_for("first 300", lambda: replicated(r) >= 300)
    produce(a, "resume.t", [{"value": f"b{i}".encode(), "partition": i % 2} for i in range(200)])
    with Replicator(cfg) as r:
        wait_for("200 more", lambda: replicated(r) >= 200)
        time.sleep(1.0)
        assert replicated(r) == 200  # resumed; nothing copied twice after a graceful stop
    values = sorted(m.value() for m in read_all(b, "A.resume.t"))
    assert values == sorted(
        [f"a{i}".encode() for i in range(300)] + [f"b{i}".encode() for i in range(200)]
    )


def test_new_topics_and_partitions_are_picked_up(two_clusters: ClusterSet) -> None:
    a, b = two_clusters
    a.create_topic("grow.one", 1)
    cfg = config(two_clusters, ["A->B"], **{"A->B.topics": "grow\\..*"})
    with Replicator(cfg) as r:
        wait_for("remote topic created", lambda: "A.grow.one" in b.topic_names())
        admin = a.admin_client()
        admin.create_partitions([NewPartitions("grow.one", 3)])["grow.one"].result(30)
        a.create_topic("grow.two", 2)
        wait_for("partitions grown on B", lambda: len(end_offsets(b, "A.grow.one")) == 3)
        wait_for("new topic created on B", lambda: "A.grow.two" in b.topic_names())
        produce(a, "grow.one", [{"value": b"x", "partition": 2}])
        produce(a, "grow.two", [{"value": b"y", "partition": 1}])
        wait_for("records in new partitions", lambda: replicated(r) >= 2)
    assert [m.value() for m in read_all(b, "A.grow.one") if m.partition() == 2] == [b"x"]
    assert [m.value() for m in read_all(b, "A.grow.two") if m.partition() == 1] == [b"y"]
