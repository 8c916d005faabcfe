"""The Spark engine on real local clusters, in-process with ``local[2]``."""

from __future__ import annotations

import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

import javaproperties
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewPartitions

from mirrorlib import CodecError, MirrorConfig, OffsetSync, translate_offsets
from mirrorlib.cli import main as cli_main
from mirrorlib.core.syncs import lineage_from_headers
from mirrorlib.testing import ClusterSet
from tests.runtime.conftest import (
    commit_group,
    end_offsets,
    mm2_properties,
    produce,
    read_all,
    wait_for,
)
from tests.spark.conftest import consume_from

# Record timestamps an hour old: recent enough that no retention setting deletes them while a
# test runs (a fixed date in the past would be deleted by time-based retention).
TS0 = (int(time.time()) - 3600) * 1000

pytestmark = [pytest.mark.integration, pytest.mark.spark]


@pytest.fixture
def name() -> str:
    """A fresh topic prefix (the shared clusters outlive a test, and may be external)."""
    return f"sp{uuid.uuid4().hex[:8]}"


def spark_config(clusters: ClusterSet, **extra: str) -> MirrorConfig:
    return MirrorConfig.from_properties(mm2_properties(clusters, ["A->B"], **extra))


def test_records_offset_syncs_checkpoints_and_failover(
    two_clusters: ClusterSet, spark: Any, tmp_path: Path, name: str
) -> None:

    from mirrorlib.spark import SparkReplicator

    a, b = two_clusters
    a.create_topic(f"{name}.orders", 3)
    records = [
        {
            "key": f"k{i}".encode() if i % 5 else None,
            "value": f"{i % 3}:{i}".encode() if i % 7 else None,
            "partition": i % 3,
            "timestamp": TS0 + i,
            "headers": [("h1", f"x{i}".encode()), ("h2", None), ("h1", b"dup")] if i % 2 else None,
        }
        for i in range(600)
    ]
    produce(a, f"{name}.orders", records)
    committed = {0: 77, 1: 150, 2: 0}
    commit_group(a, f"{name}-group", f"{name}.orders", committed)
    cfg = spark_config(two_clusters, **{"A->B.topics": f"{name}\\..*", "A->B.groups": f"{name}-.*"})
    job = SparkReplicator(cfg, spark, checkpoint_location=str(tmp_path / "chk")).start()
    try:
        wait_for(
            "600 records on B",
            lambda: (
                sum(end_offsets(b, f"A.{name}.orders").values()) >= 600
                if f"A.{name}.orders" in b.topic_names()
                else 0
            ),
            timeout=120,
        )
        # continuous: records produced while the query runs are copied too
        produce(
            a,
            f"{name}.orders",
            [{"value": f"late{i}".encode(), "partition": i % 3} for i in range(90)],
        )
        wait_for(
            "690 records on B", lambda: sum(end_offsets(b, f"A.{name}.orders").values()) >= 690
        )

        # offset syncs, written by the executors with the lineage header (the topic is shared
        # with other tests, one of which writes corrupt records on purpose: skip those)
        syncs = []
        for m in read_all(a, "mm2-offset-syncs.B.internal"):
            try:
                syncs.append(
                    (OffsetSync.decode(m.key(), m.value()), lineage_from_headers(m.headers()))
                )
            except CodecError:
                continue
        ours = [(s, lin) for s, lin in syncs if s.topic == f"{name}.orders"]
        assert {s.partition for s, _ in ours} == {0, 1, 2}
        assert all(lin is not None for _, lin in ours)

        # checkpoints from the driver's CheckpointTask: exact translation
        def translated() -> dict[int, int] | None:
            got = translate_offsets(
                {"bootstrap.servers": b.bootstrap_servers}, "A", f"{name}-group"
            )
            offsets = {
                tp.partition: om.offset for tp, om in got.items() if tp.topic == f"A.{name}.orders"
            }
            return offsets if len(offsets) == 3 else None

        offsets = wait_for("checkpoints for sp-group", translated, timeout=90)
        assert offsets == committed, offsets
        status = job.status()[0]
        assert not status.errors, status.errors
        assert status.offset_syncs_emitted >= len(ours)
        assert job.records_copied() >= 690
    finally:
        job.stop()
    assert not job.active

    got = read_all(b, f"A.{name}.orders")
    assert len(got) == 690  # no failure, no replay: every record exactly once
    by_key = {(m.partition(), m.timestamp()[1]): m for m in got}
    for i, rec in enumerate(records):
        m = by_key[(i % 3, TS0 + i)]
        assert m.key() == rec["key"]
        assert m.value() == rec["value"]
        assert (m.headers() or None) == rec["headers"]

    # a consumer failing over to B at the translated offsets misses nothing
    seen = consume_from(b, f"A.{name}.orders", offsets, 690 - sum(committed.values()))
    upstream = read_all(a, f"{name}.orders")
    expected = sorted(
        (m.partition(), m.value() or b"", m.timestamp()[1])
        for m in upstream
        if m.offset() >= committed[m.partition()]
    )
    assert sorted((m.partition(), m.value() or b"", m.timestamp()[1]) for m in seen) == expected


def test_offset_syncs_the_topic_refuses_show_in_the_status_until_written_again(
    two_clusters: ClusterSet, spark: Any, tmp_path: Path, name: str
) -> None:
    """A sync the offset-syncs topic refuses is not counted as emitted: the flow shows an
    ``offset-syncs`` error naming the batch and the topic, and a later batch whose syncs are
    written clears it."""
    from mirrorlib.spark import SparkReplicator
    from tests.runtime.test_failure_paths import SYNCS_TOPIC, offset_syncs_refused

    a, b = two_clusters
    topic = f"{name}.t"
    a.create_topic(topic, 2)
    with offset_syncs_refused(a) as accept:
        produce(a, topic, [{"value": b"%d" % i, "partition": i % 2} for i in range(200)])
        cfg = spark_config(two_clusters, **{"A->B.topics": re.escape(topic)})
        job = SparkReplicator(cfg, spark, checkpoint_location=str(tmp_path / "chk")).start()
        try:
            errors = wait_for(
                "the refused syncs in the status",
                lambda: [e for e in job.status()[0].errors if e.startswith("offset-syncs: ")],
                timeout=120,
            )
            assert SYNCS_TOPIC in errors[0] and "not written" in errors[0], errors
            assert sum(end_offsets(b, f"A.{topic}").values()) == 200
            assert job.status()[0].offset_syncs_emitted == 0
            accept()
            produce(a, topic, [{"value": b"late", "partition": p} for p in (0, 1)])

            def ours() -> set[tuple[int, int]]:
                syncs = (
                    OffsetSync.decode(m.key(), m.value())
                    for m in read_all(a, SYNCS_TOPIC)
                    if m.key() is not None and topic.encode() in m.key()
                )
                return {(s.partition, s.upstream_offset) for s in syncs}

            # the late records' own syncs (the flow's count includes its heartbeats' syncs,
            # which may be written again before the batch with the late records runs)
            wait_for("the late records' syncs", lambda: ours() >= {(0, 100), (1, 100)}, timeout=90)
            wait_for(
                "syncs counted and the error cleared",
                lambda: (st := job.status()[0]).offset_syncs_emitted >= 2 and not st.errors,
                timeout=90,
            )
        finally:
            job.stop()


def test_new_topics_partitions_and_a_user_policy(
    two_clusters: ClusterSet, spark: Any, tmp_path: Path, name: str
) -> None:
    from pyspark import cloudpickle

    import tests.fixtures.custom_policy as custom
    from mirrorlib.spark import SparkReplicator

    # a policy from the user's own module (shipped to executors by value here; in production
    # the module is installed on the workers or passed with --py-files)
    cloudpickle.register_pickle_by_value(custom)
    a, b = two_clusters
    a.create_topic(f"{name}.one", 1)
    produce(a, f"{name}.one", [{"value": b"first", "partition": 0}])
    cfg = spark_config(
        two_clusters,
        **{
            "A->B.topics": f"{name}\\..*",
            "replication.policy.class": "tests.fixtures.custom_policy.UpperPrefixPolicy",
        },
    )
    job = SparkReplicator(cfg, spark, checkpoint_location=str(tmp_path / "chk")).start()
    try:
        wait_for("first record", lambda: f"A__{name}.one" in b.topic_names()
                 and sum(end_offsets(b, f"A__{name}.one").values()) == 1, timeout=120)  # fmt: skip
        admin = a.admin_client()
        admin.create_partitions([NewPartitions(f"{name}.one", 3)])[f"{name}.one"].result(30)
        a.create_topic(f"{name}.two", 2)
        produce(a, f"{name}.one", [{"value": b"x", "partition": 2}])
        produce(a, f"{name}.two", [{"value": b"y", "partition": 1}])
        wait_for("partitions grown on B", lambda: len(end_offsets(b, f"A__{name}.one")) == 3)
        wait_for("new topic on B", lambda: f"A__{name}.two" in b.topic_names())
        wait_for(
            "records in the new partitions",
            lambda: (
                end_offsets(b, f"A__{name}.one").get(2) == 1
                and end_offsets(b, f"A__{name}.two").get(1) == 1
            ),
            timeout=90,
        )
    finally:
        job.stop()
        cloudpickle.unregister_pickle_by_value(custom)
    assert [m.value() for m in read_all(b, f"A__{name}.one") if m.partition() == 2] == [b"x"]
    assert [m.value() for m in read_all(b, f"A__{name}.two")] == [b"y"]


def test_backfill_stops_at_the_offsets_seen_at_start(
    two_clusters: ClusterSet, spark: Any, tmp_path: Path, name: str
) -> None:
    import threading

    from mirrorlib.spark import SparkReplicator

    a, b = two_clusters
    a.create_topic(f"{name}.t", 2)
    produce(a, f"{name}.t", [{"value": f"{i}".encode(), "partition": i % 2} for i in range(3000)])
    stop = threading.Event()

    def more() -> None:  # keeps writing while the backfill runs
        producer = Producer(a.client_config())
        i = 0
        while not stop.is_set():
            producer.produce(f"{name}.t", f"more{i}".encode(), partition=i % 2)
            i += 1
            if i % 50 == 0:
                producer.flush(10)
                time.sleep(0.05)
        producer.flush(10)

    loader = threading.Thread(target=more, daemon=True)
    cfg = spark_config(two_clusters, **{"A->B.topics": f"{name}\\..*"})
    job = SparkReplicator(
        cfg,
        spark,
        checkpoint_location=str(tmp_path / "chk"),
        mode="backfill",
        max_records_per_batch=1000,
    )
    loader.start()
    try:
        handle = job.start()
        assert handle.await_termination(timeout=240), "the backfill did not finish"
    finally:
        stop.set()
        loader.join(30)
        job.stop()
    copied = end_offsets(b, f"A.{name}.t")
    source = end_offsets(a, f"{name}.t")
    assert sum(copied.values()) >= 3000
    assert all(copied[p] <= source[p] for p in source)
    assert sum(source.values()) > sum(copied.values())  # newer records were left alone
    sources = handle.plans()["A->B"]
    batches = [src for src in sources if src["startOffset"] != src["endOffset"]]
    assert len(batches) >= 3  # max_records_per_batch=1000 split the backlog
    # the plans show the lag: the source's end offsets (pinned by the backfill) against the
    # batch's; none is left after the last batch
    assert batches[0]["latestOffset"] != batches[0]["endOffset"]
    assert sources[-1]["latestOffset"] == sources[-1]["endOffset"]
    # what was copied is an exact prefix of every partition
    got = read_all(b, f"A.{name}.t")
    upstream = {(m.partition(), m.offset()): m.value() for m in read_all(a, f"{name}.t")}
    for p in copied:
        values = [m.value() for m in sorted(got, key=lambda m: m.offset()) if m.partition() == p]
        assert values == [upstream[(p, o)] for o in range(copied[p])]


def test_a_finished_backfill_ends_with_a_checkpoint_pass_and_no_lag(
    two_clusters: ClusterSet,
    spark: Any,
    tmp_path: Path,
    name: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Checkpoints are emitted every hour here: only the final pass, when the backfill ends,
    can translate the group's offsets with the last offset syncs."""
    from mirrorlib.spark import SparkReplicator

    a, b = two_clusters
    a.create_topic(f"{name}.t", 2)
    produce(a, f"{name}.t", [{"value": f"{i}".encode(), "partition": i % 2} for i in range(2000)])
    consumed = {0: 1000, 1: 1000}  # the group read everything
    commit_group(a, f"{name}-group", f"{name}.t", consumed)
    a.create_topic(f"{name}.idle", 2)
    props = mm2_properties(
        two_clusters,
        ["A->B"],
        **{
            "A->B.topics": f"{name}\\..*",
            "A->B.groups": f"{name}-.*",
            "A->B.emit.checkpoints.interval.seconds": "3600",
        },
    )
    cfg = MirrorConfig.from_properties(props)
    job = SparkReplicator(
        cfg,
        spark,
        checkpoint_location=str(tmp_path / "chk"),
        mode="backfill",
        max_records_per_batch=500,
    )
    try:
        handle = job.start()
        assert handle.await_termination(timeout=240), "the backfill did not finish"
    finally:
        job.stop()
    got = translate_offsets({"bootstrap.servers": b.bootstrap_servers}, "A", f"{name}-group")
    assert {tp.partition: om.offset for tp, om in got.items()} == consumed
    # the lag: none left, the empty topic's partitions included (known, not unknown)
    partitions = [p for p in handle.status()[0].partitions if p.topic.startswith(name)]
    lags = {(p.topic, p.partition): (p.lag_records, p.lag_seconds) for p in partitions}
    tps = [(f"{name}.{t}", p) for t in ("idle", "t") for p in (0, 1)]
    assert lags == dict.fromkeys(tps, (0, 0.0))
    # mirrorlib status reads the positions the driver stored on B
    path = tmp_path / "mm2.properties"
    path.write_text(javaproperties.dumps(props), encoding="utf-8")
    assert cli_main(["status", str(path), "--json", "--timeout", "10"]) in (0, 1)
    flow = json.loads(capsys.readouterr().out)["flows"][0]
    copied = {(p["topic"], p["partition"]): p["lag_records"] for p in flow["partitions"]}
    assert {tp: copied.get(tp) for tp in tps[2:]} == dict.fromkeys(tps[2:], 0)


def a_refused_record(
    clusters: ClusterSet, name: str, big: str
) -> tuple[list[dict[str, Any]], MirrorConfig]:
    """Topic ``big`` on A with 21 records, the 11th too large for its remote topic on B (whose
    limit is not synced from the source's); the records, and a config copying ``name``'s topics."""
    a, b = clusters
    a.create_topic(big, 1, config={"max.message.bytes": "2000000"})
    b.create_topic(f"A.{big}", 1, config={"max.message.bytes": "100000"})
    records: list[dict[str, Any]] = [{"value": b"small-%d" % i} for i in range(10)]
    records.append({"value": b"x" * 300_000})
    records += [{"value": b"after-%d" % i} for i in range(10)]
    produce(a, big, records)
    cfg = spark_config(
        clusters,
        **{"A->B.topics": f"{name}\\..*", "config.properties.exclude": "max\\.message\\.bytes"},
    )
    return records, cfg


def test_small_max_message_bytes_and_a_refused_record_parks_its_partition(
    two_clusters: ClusterSet, spark: Any, tmp_path: Path, name: str
) -> None:
    from mirrorlib.spark import SparkReplicator
    from tests.runtime.test_failure_paths import set_topic_config

    a, b = two_clusters
    small, big = f"{name}.small", f"{name}.big"
    # a backlog of 1 KiB records (written in batches of up to 1 MB) into a remote topic that
    # takes batches of 20 kB at most
    a.create_topic(small, 2)
    b.create_topic(f"A.{small}", 2, config={"max.message.bytes": "20000"})
    produce(
        a, small, [{"value": b"%05d" % i + b"v" * 1019, "partition": i % 2} for i in range(3000)]
    )
    records, cfg = a_refused_record(two_clusters, name, big)
    job = SparkReplicator(cfg, spark, checkpoint_location=str(tmp_path / "chk")).start()
    try:
        wait_for(
            "the small-limit backlog on B",
            lambda: (
                f"A.{small}" in b.topic_names()
                and sum(end_offsets(b, f"A.{small}").values()) >= 3000
            ),
            timeout=180,
        )

        def parked() -> str | None:
            part = next((p for p in job.status()[0].partitions if p.topic == big), None)
            return part.error if part and part.error else None

        error = wait_for("the refused record parks its partition", parked, timeout=120)
        assert f"{big}-0@10" in error, error
        assert job.active  # the query did not fail
        assert sum(end_offsets(b, f"A.{big}").values()) == 10  # nothing after it
        set_topic_config(b, f"A.{big}", "max.message.bytes", "2000000")
        wait_for(
            "the parked partition copied",
            lambda: sum(end_offsets(b, f"A.{big}").values()) >= 21 and not parked(),
            timeout=120,
        )
    finally:
        job.stop()
    values = [m.value() for m in sorted(read_all(b, f"A.{big}"), key=lambda m: m.offset())]
    assert list(dict.fromkeys(values)) == [r["value"] for r in records]
    got = sorted(m.value()[:5] for m in read_all(b, f"A.{small}"))
    assert got == sorted(b"%05d" % i for i in range(3000))  # every record exactly once


def test_a_backfill_with_a_record_the_target_keeps_refusing_fails_naming_the_partition(
    two_clusters: ClusterSet, spark: Any, tmp_path: Path, name: str
) -> None:
    """The refused record parks its partition; the backfill does not report success while
    the partition still owes records: it retries with back-off, then fails naming it."""
    from mirrorlib.errors import RecordRefusedError
    from mirrorlib.spark import SparkReplicator

    b = two_clusters[1]
    big = f"{name}.big"
    _, cfg = a_refused_record(two_clusters, name, big)
    job = SparkReplicator(cfg, spark, checkpoint_location=str(tmp_path / "chk"), mode="backfill")
    try:
        handle = job.start()
        with pytest.raises(Exception, match=rf"{big}-0@10") as failed:
            handle.await_termination(timeout=300)
    finally:
        job.stop()
    assert RecordRefusedError.__name__ in str(failed.value)
    assert sum(end_offsets(b, f"A.{big}").values()) == 10  # nothing from the refused one on


def test_a_checkpoint_location_of_the_earlier_engine_is_refused_by_name(
    two_clusters: ClusterSet, spark: Any, tmp_path: Path, name: str
) -> None:
    """A checkpoint the earlier engine wrote (its Python data source kept ``{topic: {partition:
    offset}}`` as the source's offsets) is refused with a ConfigError naming the location, not
    a JVM stack trace from a query Spark cannot resume."""
    from mirrorlib import ConfigError
    from mirrorlib.spark import SparkReplicator

    a, _ = two_clusters
    a.create_topic(f"{name}.t", 1)
    old = tmp_path / "chk" / "A-to-B" / "offsets"
    old.mkdir(parents=True)
    (old / "0").write_text(
        'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}\n'
        + json.dumps({f"{name}.t": {"0": 5}})
        + "\n"
    )
    cfg = spark_config(two_clusters, **{"A->B.topics": f"{name}\\..*"})
    with pytest.raises(ConfigError, match="earlier mirrorlib") as caught:
        SparkReplicator(cfg, spark, checkpoint_location=str(tmp_path / "chk")).start()
    assert str(tmp_path / "chk" / "A-to-B") in str(caught.value)
