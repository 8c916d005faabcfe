"""Faults: data loss at the source, refused records, broker restarts, corrupt internal records,
one broken flow among healthy ones. Each gives a clear status and never loses data silently."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as KafkaTP
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from mirrorlib import Checkpoint, Replicator
from mirrorlib.core.status import FlowState
from mirrorlib.testing import BaseCluster, ClusterSet
from tests.runtime.conftest import commit_group, config, end_offsets, produce, read_all, wait_for
from tests.runtime.test_replicator import replicated

pytestmark = pytest.mark.integration


def values(cluster: BaseCluster, topic: str) -> list[bytes]:
    return [
        m.value()
        for m in sorted(read_all(cluster, topic), key=lambda m: (m.partition(), m.offset()))
    ]


@pytest.mark.parametrize("action", ["fail", "continue"])
def test_source_truncated_past_the_position_is_reported(
    two_clusters: ClusterSet, action: str
) -> None:
    a, b = two_clusters
    topic = f"loss{action}.t"
    a.create_topic(topic, 1)
    produce(a, topic, [{"value": f"{i}".encode()} for i in range(100)])
    cfg = config(
        two_clusters, ["A->B"], **{"A->B.topics": f"loss{action}\\..*", "data.loss.action": action}
    )
    with Replicator(cfg) as r:
        wait_for("100 replicated", lambda: replicated(r, "loss") >= 100)
    produce(a, topic, [{"value": f"{i}".encode()} for i in range(100, 200)])
    admin = a.admin_client()
    futures = admin.delete_records([KafkaTP(topic, 0, 150)])
    for f in futures.values() if isinstance(futures, dict) else [futures]:
        f.result(30)
    with Replicator(cfg) as r:
        if action == "fail":
            status = wait_for(
                "flow failed",
                lambda: next((s for s in r.status() if s.state is FlowState.FAILED), None),
            )
            message = " ".join(status.errors)
            assert "100..149" in message and topic in message and "50 record" in message, message
        else:
            wait_for("records after the gap", lambda: replicated(r, "loss") >= 50)
            part = next(p for p in r.status()[0].partitions if p.topic == topic)
            assert part.lost_records == 50
            assert "100..149" in (part.error or "")
            assert any(m.name == "lost-records" and m.value == 50 for m in r.metrics())
    got = values(b, f"A.{topic}")
    expected = [f"{i}".encode() for i in range(100)]
    if action == "continue":
        expected += [f"{i}".encode() for i in range(150, 200)]
    assert got == expected


def test_record_refused_by_target_blocks_its_partition_until_fixed(
    two_clusters: ClusterSet,
) -> None:
    a, b = two_clusters
    topic = "big.t"
    a.create_topic(topic, 1, config={"max.message.bytes": "2000000"})
    b.create_topic(f"A.{topic}", 1, config={"max.message.bytes": "100000"})
    records = [{"value": b"small-%d" % i} for i in range(10)]
    records.append({"value": b"x" * 300_000})
    records += [{"value": b"after-%d" % i} for i in range(10)]
    produce(a, topic, records)
    cfg = config(
        two_clusters,
        ["A->B"],
        **{"A->B.topics": "big\\..*", "config.properties.exclude": "max\\.message\\.bytes"},
    )
    with Replicator(cfg) as r:

        def stuck() -> str | None:
            part = next((p for p in r.status()[0].partitions if p.topic == topic), None)
            return part.error if part and part.error and "10" in part.error else None

        error = wait_for("partition reports the refused record", stuck)
        assert f"{topic}-0@10" in error and "B" in error, error
        assert r.status()[0].state is FlowState.DEGRADED
        time.sleep(2)
        part = next(p for p in r.status()[0].partitions if p.topic == topic)
        assert part.position is not None and part.position <= 10  # never acknowledged past it
        admin = b.admin_client()
        resource = ConfigResource(
            ResourceType.TOPIC,
            f"A.{topic}",
            incremental_configs=[
                ConfigEntry(
                    "max.message.bytes", "2000000", incremental_operation=AlterConfigOpType.SET
                )
            ],
        )
        for f in admin.incremental_alter_configs([resource]).values():
            f.result(30)
        wait_for(
            "partition resumes", lambda: replicated(r, "big") >= 21 and not stuck(), timeout=90
        )
    got = values(b, f"A.{topic}")
    # every record arrived, in order (records after the refused one may appear twice before it)
    deduped = list(dict.fromkeys(got))
    assert deduped == [rec["value"] for rec in records]


def test_corrupt_internal_records_are_skipped(two_clusters: ClusterSet) -> None:
    a, b = two_clusters
    topic = "corrupt.t"
    a.create_topic(topic, 1)
    produce(a, topic, [{"value": str(i).encode()} for i in range(50)])
    commit_group(a, "corrupt-group", topic, {0: 30})
    cfg = config(
        two_clusters, ["A->B"], **{"A->B.topics": "corrupt\\..*", "A->B.groups": "corrupt-.*"}
    )
    # make sure the internal topics exist, then poison them
    with Replicator(cfg) as r:
        wait_for("50 replicated", lambda: replicated(r, "corrupt") >= 50)
    for cluster, internal in (
        (a, "mm2-offset-syncs.B.internal"),
        (b, "A.checkpoints.internal"),
        (b, "mm2-offsets.A.internal"),
    ):
        p = Producer(cluster.client_config())
        p.produce(internal, b"\xff\xff\xff", b"\x00\x01", partition=0)
        assert p.flush(10) == 0
    commit_group(a, "corrupt-group", topic, {0: 45})
    with Replicator(cfg) as r:

        def checkpoint() -> Checkpoint | None:
            for m in read_all(b, "A.checkpoints.internal"):
                try:
                    cp = Checkpoint.decode(m.key(), m.value())
                except Exception:
                    continue
                if cp.group == "corrupt-group" and cp.upstream_offset == 45:
                    return cp
            return None

        cp = wait_for("checkpoint despite corrupt records", checkpoint)
        assert cp.downstream_offset == 45
        assert r.status()[0].state is FlowState.RUNNING


def test_broker_restarts_lose_nothing(private_kafka_clusters, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    a, b = private_kafka_clusters(["A", "B"])
    topic = "restart.t"
    a.create_topic(topic, 2)
    cfg = config([a, b], ["A->B"], **{"A->B.topics": "restart\\..*"})
    total = 0
    with Replicator(cfg) as r:
        for side in (b, a):
            produce(
                a,
                topic,
                [{"value": str(total + i).encode(), "partition": i % 2} for i in range(500)],
            )
            total += 500
            side.restart()
            produce(
                a,
                topic,
                [{"value": str(total + i).encode(), "partition": i % 2} for i in range(500)],
            )
            total += 500
        wait_for(
            "every record on B",
            lambda: sum(end_offsets(b, f"A.{topic}").values()) >= total,
            timeout=120,
        )
        # errors seen while a broker was down clear once data flows again
        wait_for("flow healthy again", lambda: r.status()[0].state is FlowState.RUNNING, timeout=60)
    got = {int(m.value()) for m in read_all(b, f"A.{topic}")}
    assert got == set(range(total))


def test_one_broken_flow_does_not_stop_the_others(private_kafka_clusters) -> None:  # type: ignore[no-untyped-def]
    a, b, c = private_kafka_clusters(["A", "B", "C"])
    topic = "multi.t"
    a.create_topic(topic, 1)
    cfg = config(
        [a, b, c], ["A->B", "A->C"], **{"topics": "multi\\..*", "admin.timeout.ms": "5000"}
    )
    with Replicator(cfg) as r:
        produce(a, topic, [{"value": b"first"}])
        wait_for(
            "both flows replicate",
            lambda: all(
                any(p.record_count for p in s.partitions if p.topic == topic)
                for s in r.status()
                if s.name in ("A->B", "A->C")
            ),
        )
        c.stop()
        produce(a, topic, [{"value": b"second"}])
        wait_for("A->B keeps going", lambda: len(read_all(b, f"A.{topic}")) == 2)
        # the broken flow says so, the healthy one does not
        broken = wait_for(
            "A->C reports C unreachable",
            lambda: next(
                (s for s in r.status() if s.name == "A->C" and s.state is FlowState.DEGRADED), None
            ),
        )
        assert any("cluster C" in e for e in broken.errors), broken.errors
        by_name = {s.name: s for s in r.status()}
        assert by_name["A->B"].state is FlowState.RUNNING, by_name["A->B"].errors
        c.start()
        wait_for(
            "A->C catches up after C returns",
            lambda: len(read_all(c, f"A.{topic}")) == 2,
            timeout=120,
        )
