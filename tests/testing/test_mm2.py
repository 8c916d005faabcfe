"""The real MirrorMaker 2 (mirrorlib.testing.mm2), and mirrorlib reading what it writes.

The integration test runs Java MM2 4.3.1 for one flow between the two shared test clusters and
checks that mirrorlib's failover client, codecs and Connect-offsets format agree with it byte for
byte. MM2's cluster aliases are made unique per run (``mmA<tag>``/``mmB<tag>``) so that its topics
(``mm2-offsets.mmA<tag>.internal``, ``mmA<tag>.checkpoints.internal``, ...) cannot collide with
other tests on the shared clusters; only the ``heartbeats`` topic on B is shared by name.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mirrorlib.core.connect_offsets import SourcePosition, murmur2_partition
from mirrorlib.core.records import Heartbeat, OffsetAndMetadata, OffsetSync, TopicPartition
from mirrorlib.errors import TestClusterError
from mirrorlib.kafka.client import MirrorClient, translate_offsets
from mirrorlib.kafka.topiclog import TopicLog
from mirrorlib.testing.cluster import BaseCluster
from mirrorlib.testing.mm2 import (
    MM2_LOG4J2_PROPERTIES,
    MM2_MAIN_CLASS,
    RealMirrorMaker,
    mm2_properties,
)

# -- unit tests (no Kafka) -----------------------------------------------------------------------


def _mapping_clusters() -> dict[str, dict[str, str]]:
    return {
        "A": {"bootstrap.servers": "127.0.0.1:1"},
        "B": {"bootstrap.servers": "127.0.0.1:2", "security.protocol": "PLAINTEXT"},
    }


def test_mm2_properties_single_node_defaults() -> None:
    props = mm2_properties(_mapping_clusters(), ["A->B"], topics="orders", groups="g1")
    assert props["clusters"] == "A, B"
    assert props["A.bootstrap.servers"] == "127.0.0.1:1"
    assert props["B.security.protocol"] == "PLAINTEXT"
    assert props["A->B.enabled"] == "true"
    assert props["B->A.enabled"] == "false"
    assert props["B->A.emit.heartbeats.enabled"] == "false"
    assert "A->B.emit.heartbeats.enabled" not in props
    for key in (
        "replication.factor",
        "checkpoints.topic.replication.factor",
        "heartbeats.topic.replication.factor",
        "offset-syncs.topic.replication.factor",
        "offset.storage.replication.factor",
        "status.storage.replication.factor",
        "config.storage.replication.factor",
    ):
        assert props[key] == "1", key
    assert props["B.offset.flush.interval.ms"] == "1000"
    assert "A.offset.flush.interval.ms" not in props
    assert props["topics"] == "orders"
    assert props["groups"] == "g1"
    for key in (
        "refresh.topics.interval.seconds",
        "refresh.groups.interval.seconds",
        "emit.checkpoints.interval.seconds",
        "emit.heartbeats.interval.seconds",
    ):
        assert props[key] == "1", key
    assert props["sync.topic.acls.enabled"] == "false"


def test_mm2_properties_aliases_flows_and_extra() -> None:
    props = mm2_properties(
        _mapping_clusters(),
        [("x", "y"), "y->x"],
        aliases=["x", "y"],
        interval_seconds=5,
        offset_flush_interval_ms=2000,
        sync_group_offsets=True,
        extra={"tasks.max": "4", "x->y.offset.lag.max": "0"},
    )
    assert props["clusters"] == "x, y"
    assert props["x.bootstrap.servers"] == "127.0.0.1:1"
    assert props["x->y.enabled"] == props["y->x.enabled"] == "true"
    assert props["x.offset.flush.interval.ms"] == props["y.offset.flush.interval.ms"] == "2000"
    assert props["emit.checkpoints.interval.seconds"] == "5"
    assert props["sync.group.offsets.enabled"] == "true"
    assert props["tasks.max"] == "4"
    assert props["x->y.offset.lag.max"] == "0"
    assert not any(k.startswith(("A.", "B.")) for k in props)


def test_mm2_properties_default_flow_is_first_to_second() -> None:
    props = mm2_properties(_mapping_clusters())
    assert props["A->B.enabled"] == "true"
    assert props["B->A.enabled"] == "false"


@pytest.mark.parametrize(
    ("flows", "aliases"),
    [(["A->C"], None), (["A-B"], None), ([("A", "A")], None), (None, ["x"]), (None, ["x", "x"])],
)
def test_mm2_properties_rejects_bad_input(flows: Any, aliases: Any) -> None:
    with pytest.raises(TestClusterError):
        mm2_properties(_mapping_clusters(), flows, aliases=aliases)


def test_real_mirror_maker_command_and_files(tmp_path: Path) -> None:
    mm2 = RealMirrorMaker({"clusters": "A, B"}, work_dir=tmp_path, clusters=["B"], heap="256m")
    cmd = mm2.command()
    assert cmd[cmd.index(MM2_MAIN_CLASS) + 1] == str(tmp_path / "mm2.properties")
    assert cmd[-2:] == ["--clusters", "B"]
    assert "-Xmx256m" in cmd
    assert f"-Dlog4j2.configurationFile={tmp_path / 'mm2-log4j2.properties'}" in cmd
    assert mm2.properties == {"clusters": "A, B"}
    assert not mm2.is_running and mm2.pid is None and mm2.returncode is None
    mm2.stop()  # idempotent before start
    mm2.kill()
    mm2._write_files()
    assert "clusters" in (tmp_path / "mm2.properties").read_text()
    assert (tmp_path / "mm2-log4j2.properties").read_text() == MM2_LOG4J2_PROPERTIES
    assert "RealMirrorMaker" in repr(mm2)


def test_real_mirror_maker_properties_file(tmp_path: Path) -> None:
    path = tmp_path / "my.properties"
    path.write_text("clusters = A, B\nA.bootstrap.servers = h:1\n")
    mm2 = RealMirrorMaker(path, work_dir=tmp_path / "work")
    assert mm2.properties_path == path
    assert mm2.properties == {"clusters": "A, B", "A.bootstrap.servers": "h:1"}
    missing = RealMirrorMaker(tmp_path / "nope.properties", work_dir=tmp_path / "w2")
    with pytest.raises(TestClusterError, match="not found"):
        missing.start()


def test_wait_until_reports_last_error(tmp_path: Path) -> None:
    mm2 = RealMirrorMaker({}, work_dir=tmp_path)
    assert mm2.wait_until(lambda: 42, timeout=1) == 42

    def boom() -> bool:
        raise ValueError("not yet")

    with pytest.raises(TestClusterError, match="ValueError: not yet"):
        mm2.wait_until(boom, timeout=0.3, interval=0.1, message="boom")


@pytest.mark.java
def test_real_mirror_maker_start_failure_shows_log(tmp_path: Path) -> None:
    # no herders: MirrorMaker's constructor throws and main exits with code 2
    props = {"clusters": "A, B", "A->B.enabled": "false", "B->A.enabled": "false",
             "A->B.emit.heartbeats.enabled": "false", "B->A.emit.heartbeats.enabled": "false",
             "A.bootstrap.servers": "127.0.0.1:1", "B.bootstrap.servers": "127.0.0.1:2"}  # fmt: skip
    mm2 = RealMirrorMaker(props, work_dir=tmp_path, heap="256m")
    with pytest.raises(TestClusterError, match="exited with code") as info:
        mm2.start(timeout=60)
    assert "No source->target replication flows" in str(info.value)
    assert not mm2.is_running
    assert mm2.returncode not in (None, 0)


# -- the real MM2 against two clusters -------------------------------------------------------------


def _strip_nul(offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[Any, Any]:
    return {tp: OffsetAndMetadata(o.offset, o.metadata.rstrip("\x00")) for tp, o in offsets.items()}


class _Pending:
    """A falsy "not yet" result that shows what was seen (for wait_until's timeout message)."""

    def __init__(self, seen: object) -> None:
        self.seen = seen

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"not yet: {self.seen!r}"


def _end_offsets(cluster: BaseCluster, topic: str) -> dict[int, int]:
    consumer = Consumer(
        cluster.client_config(extra={"group.id": "__mirrorlib_probe_ends", "log_level": "0"})
    )
    try:
        md = consumer.list_topics(topic, timeout=10)
        meta = md.topics[topic]
        if meta.error is not None:
            return {}
        return {
            p: consumer.get_watermark_offsets(KafkaTopicPartition(topic, p), timeout=10)[1]
            for p in meta.partitions
        }
    finally:
        consumer.close()


def _read_all(cluster: BaseCluster, topic: str, timeout: float = 30.0) -> list[Any]:
    records: list[Any] = []
    with TopicLog(cluster.client_config(), topic, alias=cluster.alias) as log:
        log.read_to_end(records.append, timeout=timeout)
    return records


def _partition_count(cluster: BaseCluster, topic: str) -> int:
    md = cluster.admin_client().list_topics(topic, timeout=10)
    return len(md.topics[topic].partitions)


@pytest.mark.integration
@pytest.mark.java
def test_real_mm2_replicates_and_mirrorlib_reads_its_state(
    two_clusters: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = two_clusters
    tag = uuid.uuid4().hex[:6]
    src, dst, up = f"mmA{tag}", f"mmB{tag}", f"up{tag}"
    topic, group = f"orders-{tag}", f"group-{tag}"
    remote = f"{src}.{topic}"

    # upstream data, a committed group and a heartbeat topic from a further-upstream cluster
    a.create_topic(topic, partitions=2)
    a.produce(topic, [f"p0-{i}".encode() for i in range(5)], partition=0)
    a.produce(topic, [f"p1-{i}".encode() for i in range(3)], partition=1)
    committer = Consumer(a.client_config(extra={"group.id": group, "log_level": "0"}))
    try:
        committer.commit(
            offsets=[
                KafkaTopicPartition(topic, 0, 5, metadata="meta-0"),  # fully consumed
                KafkaTopicPartition(topic, 1, 1, metadata="meta-1"),  # behind
            ],
            asynchronous=False,
        )
    finally:
        committer.close()
    up_heartbeats = f"{up}.heartbeats"
    a.create_topic(up_heartbeats)
    injected = Heartbeat(up, src, int(time.time() * 1000))
    a.produce(up_heartbeats, [injected.encode_value()], key=injected.encode_key())

    props = mm2_properties(
        [a, b], [f"{src}->{dst}"], aliases=[src, dst], topics=topic, groups=group
    )
    expected = {
        TopicPartition(remote, 0): OffsetAndMetadata(5, "meta-0"),
        TopicPartition(remote, 1): OffsetAndMetadata(1, "meta-1"),
    }
    with (
        RealMirrorMaker(props, work_dir=tmp_path / "mm2") as mm2,
        MirrorClient(b.client_config(), alias="B") as client,
    ):
        # 1. records replicated to mmA<tag>.orders-<tag>, partitions kept
        mm2.wait_until(
            lambda: _end_offsets(b, remote) == {0: 5, 1: 3}, timeout=120, message="replication"
        )
        values = sorted(m.value() for m in b.consume(remote, 8))
        assert values == sorted([f"p0-{i}".encode() for i in range(5)] +
                                [f"p1-{i}".encode() for i in range(3)])  # fmt: skip

        # 2. MM2's checkpoints read by mirrorlib's MirrorClient and translate_offsets
        def checkpoints_arrived() -> Any:
            got = client.remote_consumer_offsets(group, src, timeout=10)
            return True if _strip_nul(got) == expected else _Pending(got)

        mm2.wait_until(checkpoints_arrived, timeout=120, message="checkpoints")
        translated = translate_offsets(b.client_config(), src, group, timeout=10)
        assert translated == client.remote_consumer_offsets(group, src, timeout=10)
        assert _strip_nul(translated) == expected
        # (confluent-kafka-python 2.16 commits metadata with its C string's NUL terminator, and
        # MM2 copies committed metadata into checkpoints byte for byte: "meta-0\x00")
        assert f"{src}.checkpoints.internal" in client.checkpoint_topics()
        assert client.remote_consumer_offsets("no-such-group", src, timeout=10) == {}

        # 3. heartbeats: MM2 emits (src, dst) into B's "heartbeats", and replicated up's topic
        mm2.wait_until(
            lambda: {"heartbeats", f"{src}.{up_heartbeats}"} <= client.heartbeat_topics(),
            timeout=60,
            message="heartbeat topics",
        )

        def both_heartbeats() -> Any:
            seen = client.heartbeats(timeout=20)
            return seen if {(src, dst), (up, src)} <= set(seen) else _Pending(seen)

        beats = mm2.wait_until(both_heartbeats, timeout=60, message="heartbeats")
        assert beats[(up, src)] == injected
        assert abs(beats[(src, dst)].timestamp - time.time() * 1000) < 120_000
        assert {src, up} <= client.upstream_clusters()
        assert client.replication_hops(src) == 1
        assert client.replication_hops(up) == 2
        assert client.replication_hops(dst) == -1
        assert {remote, f"{src}.{up_heartbeats}"} <= client.remote_topics(src)

        # 4. MM2's offset syncs on A decode with mirrorlib's codec
        syncs_topic = f"mm2-offset-syncs.{dst}.internal"

        def syncs_for_topic() -> list[OffsetSync]:
            decoded = [OffsetSync.decode(m.key(), m.value()) for m in _read_all(a, syncs_topic)]
            return [s for s in decoded if s.topic == topic]

        def last_sync() -> Any:
            seen = syncs_for_topic()
            return seen if OffsetSync(topic, 0, 4, 4) in seen else _Pending(seen)

        syncs = mm2.wait_until(
            last_sync, timeout=60, message="offset sync for the last record of partition 0"
        )
        assert OffsetSync(topic, 0, 0, 0) in syncs
        assert OffsetSync(topic, 1, 0, 0) in syncs
        assert all(s.upstream_offset == s.downstream_offset for s in syncs)

        # 5. MM2's Connect offsets (source positions) equal mirrorlib's encoding, byte for byte
        offsets_topic = f"mm2-offsets.{src}.internal"

        def final_positions() -> Any:
            latest: dict[int, Any] = {}
            offsets: dict[int, int | None] = {}
            for m in _read_all(b, offsets_topic):
                pos = SourcePosition.decode(m.key(), m.value())
                if pos is not None and pos.topic == topic:
                    latest[pos.partition] = m
                    offsets[pos.partition] = pos.offset
            return latest if offsets == {0: 4, 1: 2} else _Pending(offsets)

        found = mm2.wait_until(
            final_positions, timeout=60, message="Connect offsets for both partitions"
        )
        num_partitions = _partition_count(b, offsets_topic)
        all_records = _read_all(b, offsets_topic)
    assert mm2.returncode is not None and not mm2.is_running

    with capsys.disabled():
        print(f"\n{offsets_topic}: {num_partitions} partitions")
        for line in sorted({(m.partition(), m.key(), m.value()) for m in all_records}):
            print("  partition {} key={!r} value={!r}".format(*line))
    for partition, last in ((0, 4), (1, 2)):
        msg = found[partition]
        position = SourcePosition(src, topic, partition, last)
        assert msg.key() == position.encode_key(), (msg.key(), position.encode_key())
        assert msg.value() == position.encode_value(), (msg.value(), position.encode_value())
        assert msg.partition() == murmur2_partition(msg.key(), num_partitions)
    # every record MM2 wrote to its offsets topic is where Java's partitioner puts its key
    for m in all_records:
        assert m.partition() == murmur2_partition(m.key(), num_partitions), m.key()
