"""Topologies and scale-out: active/active, chains, fan-in, several processes sharing a flow."""

from __future__ import annotations

import time

import pytest

from mirrorlib import Heartbeat, Replicator
from mirrorlib.kafka.client import MirrorClient
from mirrorlib.testing import ClusterSet
from tests.runtime.conftest import config, decoded, produce, read_all, wait_for
from tests.runtime.test_replicator import replicated

pytestmark = pytest.mark.integration


def test_active_active_never_loops(two_clusters: ClusterSet) -> None:
    a, b = two_clusters
    a.create_topic("aa.orders", 1)
    b.create_topic("aa.orders", 1)
    produce(a, "aa.orders", [{"value": b"from-a"}])
    produce(b, "aa.orders", [{"value": b"from-b"}])
    cfg = config(two_clusters, ["A->B", "B->A"], **{"topics": "aa\\..*|.*heartbeats"})
    with Replicator(cfg) as r:
        wait_for("both directions", lambda: replicated(r, "aa") >= 2)
        wait_for(
            "heartbeats both ways",
            lambda: "A.heartbeats" in b.topic_names() and "B.heartbeats" in a.topic_names(),
        )
        import time

        time.sleep(3)  # several refresh cycles: a loop would create A.B.aa.orders etc.
    for cluster in (a, b):
        names = cluster.topic_names()
        assert not any(n.startswith(("A.B.", "B.A.")) for n in names), names
    assert [m.value() for m in read_all(b, "A.aa.orders")] == [b"from-a"]
    assert [m.value() for m in read_all(a, "B.aa.orders")] == [b"from-b"]


def test_chain_traces_heartbeats_across_hops(kafka_clusters) -> None:  # type: ignore[no-untyped-def]
    x, y, z = kafka_clusters(["X", "Y", "Z"])
    x.create_topic("chain.t", 1)
    produce(x, "chain.t", [{"value": b"hop"}])
    cfg = config([x, y, z], ["X->Y", "Y->Z"], **{"topics": "chain\\..*|X\\.chain\\..*"})
    with Replicator(cfg):
        wait_for("two hops", lambda: "Y.X.chain.t" in z.topic_names(), timeout=90)
        wait_for(
            "upstream heartbeats on Z", lambda: "Y.X.heartbeats" in z.topic_names(), timeout=90
        )
        wait_for(
            "the record two hops away",
            lambda: [m.value() for m in read_all(z, "Y.X.chain.t")] == [b"hop"],
        )
        beats = {
            (h.source_cluster_alias, h.target_cluster_alias)
            for h in decoded(z, "Y.X.heartbeats", Heartbeat)
        }
        # X's own heartbeats topic (written by the pairs that target X) travelled X -> Y -> Z
        assert beats and all(target == "X" for _source, target in beats), beats
    with MirrorClient(z.client_config()) as client:
        assert client.replication_hops("Y") == 1
        assert client.replication_hops("X") == 2
        assert {"X", "Y"} <= client.upstream_clusters()


def test_fan_in_keeps_sources_apart(kafka_clusters) -> None:  # type: ignore[no-untyped-def]
    x, y, z = kafka_clusters(["X", "Y", "Z"])
    for c in (x, y):
        c.create_topic("fan.t", 1)
        produce(c, "fan.t", [{"value": c.alias.encode()}])
    cfg = config([x, y, z], ["X->Z", "Y->Z"], **{"topics": "fan\\..*"})
    with Replicator(cfg, clusters=["Z"]) as r:
        assert set(r.flows) >= {"X->Z", "Y->Z"}
        assert all(f.endswith("->Z") for f in r.flows)
        wait_for("both sources", lambda: {"X.fan.t", "Y.fan.t"} <= z.topic_names(), timeout=60)
        wait_for("records", lambda: replicated(r, "fan") >= 2)
    assert [m.value() for m in read_all(z, "X.fan.t")] == [b"X"]
    assert [m.value() for m in read_all(z, "Y.fan.t")] == [b"Y"]


def test_processes_share_partitions_and_take_over(two_clusters: ClusterSet) -> None:
    """Two nodes share a flow's partitions; when one stops cleanly it leaves the flow's group
    (a static member, which librdkafka's close alone would not make leave), so the other takes
    its partitions over at once, not after the group's 45 s session timeout."""
    a, b = two_clusters
    topic = "share.t"
    a.create_topic(topic, 6)
    first, second = (
        Replicator(config(two_clusters, ["A->B"], **{"A->B.topics": "share\\..*", "node.id": n}))
        for n in ("share-1", "share-2")
    )
    first.start()
    second.start()
    try:

        def owned(r: Replicator) -> set[int]:
            return {p.partition for p in r.status()[0].partitions if p.topic == topic}

        wait_for(
            "both processes own partitions",
            lambda: owned(first) and owned(second) and len(owned(first) | owned(second)) == 6,
            timeout=90,
        )
        assert not owned(first) & owned(second)
        produce(a, topic, [{"value": str(i).encode(), "partition": i % 6} for i in range(600)])
        wait_for(
            "600 replicated",
            lambda: replicated(first, "share") + replicated(second, "share") >= 600,
        )
        time.sleep(2)
        # steady state: no record copied twice
        assert replicated(first, "share") + replicated(second, "share") == 600
        second.stop()
        stopped = time.monotonic()
        wait_for("first takes over every partition", lambda: len(owned(first)) == 6, timeout=90)
        taken_over = time.monotonic() - stopped
        print(f"taken over {taken_over:.1f}s after the other node's clean stop")
        assert taken_over < 20, "the stopped node did not leave the group (session timeout: 45 s)"
        produce(a, topic, [{"value": str(i).encode(), "partition": i % 6} for i in range(600, 900)])
        wait_for(
            "all 900 on B",
            lambda: len({m.value() for m in read_all(b, f"A.{topic}")}) == 900,
            timeout=90,
        )
    finally:
        first.stop()
        second.stop()


@pytest.mark.parametrize("tasks", [1, 2])
def test_a_second_process_with_the_same_node_id_stops_the_first_saying_why(
    two_clusters: ClusterSet, tasks: int
) -> None:
    """Two processes share a flow under one ``node.id`` (by default the host name): the group
    fences the first as the second joins with the same ``group.instance.id``. The first must not
    rejoin (it would fence the second, and the two would take turns): its flow fails, naming
    ``node.id``, while the second copies every record."""
    a, b = two_clusters
    topic = f"samenode{tasks}.t"
    a.create_topic(topic, 4)
    cfg = config(
        two_clusters,
        ["A->B"],
        **{"A->B.topics": f"samenode{tasks}\\..*", "tasks.max": str(tasks), "node.id": "same"},
    )
    first, second = Replicator(cfg), Replicator(cfg)
    first.start()
    try:
        wait_for(
            "the first owns the partitions",
            lambda: len([p for p in first.status()[0].partitions if p.topic == topic]) == 4,
            timeout=60,
        )
        second.start()
        wait_for(
            "the first stops, naming node.id",
            lambda: first.status()[0].state.value == "failed",
            timeout=60,
        )
        errors = " ".join(first.status()[0].errors)
        assert "node.id 'same'" in errors and "distinct node.id" in errors, errors
        produce(a, topic, [{"value": str(i).encode(), "partition": i % 4} for i in range(400)])
        wait_for(
            "every record on B",
            lambda: len({m.value() for m in read_all(b, f"A.{topic}")}) == 400,
            timeout=90,
        )
        time.sleep(3)  # the first stays out: the second is not fenced in turn
        assert second.status()[0].state.value == "running", second.status()[0].errors
        assert first.status()[0].state.value == "failed"
    finally:
        first.stop()
        second.stop()
