"""Throughput of the copy engines on the same data (the figures in docs/spark.md).

    MIRRORLIB_TEST_CLUSTERS="A=host:port,B=host:port" python tests/spark/measure_engines.py \\
        [--records 300000] [--partitions 4] [--engines embedded,spark1,spark2,jvm2,mix2]

Engines: ``embedded`` (mirrorlib.Replicator), ``sparkN`` (mirrorlib.spark backfill on
``local[N]``), ``jvmN`` (Spark's own Kafka source and sink, ``spark-sql-kafka-0-10`` from Maven
Central; no offset syncs possible), ``mixN`` (Spark's Kafka source + mirrorlib's Python sink).
Each run copies the same source topic into a fresh target topic; the time is from the start of
the copy (the Spark session already up) to the last record acknowledged by the target.
Each Spark engine runs in its own child process (one Spark at a time).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTP
from confluent_kafka.admin import AdminClient, NewTopic

VALUE = b"v" * 100


def clusters() -> tuple[str, str]:
    env = dict(x.split("=", 1) for x in os.environ["MIRRORLIB_TEST_CLUSTERS"].split(","))
    return env["A"], env["B"]


def total(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "measure"})
    try:
        md = c.list_topics(topic, timeout=10).topics.get(topic)
        if md is None or md.error is not None:
            return 0
        return sum(c.get_watermark_offsets(KafkaTP(topic, p), timeout=10)[1] for p in md.partitions)
    except KafkaException:  # a topic just created: leaders not elected yet
        return 0
    finally:
        c.close()


def prepare(records: int, partitions: int) -> str:
    a, _ = clusters()
    topic = f"measure{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": a})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": a, "linger.ms": 50, "batch.size": 1_000_000})
    for i in range(records):
        while True:
            try:
                p.produce(topic, VALUE, f"key-{i:010d}".encode(), i % partitions)
                break
            except BufferError:
                p.poll(0.1)
    p.flush(60)
    return topic


def properties(topic: str, alias: str) -> dict[str, str]:
    """One flow ``alias->B`` where ``alias`` is a fresh name for cluster A: every run gets its
    own remote topic, offsets topic and offset-syncs topic (no run resumes another's work)."""
    a, b = clusters()
    return {
        "clusters": f"{alias}, B",
        f"{alias}.bootstrap.servers": a,
        "B.bootstrap.servers": b,
        f"{alias}->B.enabled": "true",
        f"{alias}->B.topics": topic,
        "replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "emit.heartbeats.enabled": "false",
        "emit.checkpoints.enabled": "true",
        "sync.topic.acls.enabled": "false",
        "refresh.topics.interval.seconds": "5",
    }


def fresh_alias() -> str:
    return f"M{uuid.uuid4().hex[:6]}"


class Watch:
    """Polls the target topic: when the first record landed and when the last one did."""

    def __init__(self, bootstrap: str, topic: str, records: int) -> None:
        import threading

        self.first: float | None = None
        self.last: float | None = None
        self._args = (bootstrap, topic, records)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        bootstrap, topic, records = self._args
        while True:
            n = total(bootstrap, topic)
            now = time.monotonic()
            if n and self.first is None:
                self.first = now
            if n >= records:
                self.last = now
                return
            time.sleep(0.05)

    def copy_seconds(self) -> float:
        self._thread.join(600)
        assert self.first is not None and self.last is not None
        return self.last - self.first


def run_embedded(topic: str, records: int) -> dict[str, float]:
    from mirrorlib import MirrorConfig, Replicator

    alias = fresh_alias()
    _, b = clusters()
    r = Replicator(MirrorConfig.from_properties(properties(topic, alias)))
    r.start()
    # wait for the remote topic, then time the copy
    while total(b, f"{alias}.{topic}") == 0:
        time.sleep(0.05)
    t0 = time.monotonic()
    while total(b, f"{alias}.{topic}") < records:
        time.sleep(0.1)
    secs = time.monotonic() - t0
    r.stop()
    return {"seconds": secs, "records_per_s": records / secs}


def run_spark(kind: str, cores: int, topic: str, records: int) -> dict[str, float]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.shuffle.partitions", str(cores))
    )
    if kind in ("jvm", "mix"):
        builder = builder.config(
            "spark.jars.packages",
            "org.apache.spark:spark-sql-kafka-0-10_2.13:"
            + os.environ.get("MEASURE_KAFKA_CONNECTOR", "4.2.0"),
        ).config("spark.jars.ivy", "/tmp/mirrorlib-ivy")
    t_session = time.monotonic()
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    session_s = time.monotonic() - t_session
    a, b = clusters()
    alias = fresh_alias()
    chk = f"/tmp/mirrorlib-measure/{uuid.uuid4().hex}"
    if kind == "spark":
        from mirrorlib import MirrorConfig
        from mirrorlib.spark import SparkReplicator

        job = SparkReplicator(
            MirrorConfig.from_properties(properties(topic, alias)),
            spark,
            checkpoint_location=chk,
            mode="backfill",
            max_records_per_batch=None,
        )
        watch = Watch(b, f"{alias}.{topic}", records)
        t0 = time.monotonic()
        handle = job.start()
        handle.await_termination()
        secs = time.monotonic() - t0
        copied = total(b, f"{alias}.{topic}")
        progress = next(iter(handle.queries.values())).recentProgress
    else:
        remote = f"{alias}.{topic}"
        admin = AdminClient({"bootstrap.servers": b})
        n = len(AdminClient({"bootstrap.servers": a}).list_topics(topic).topics[topic].partitions)
        admin.create_topics([NewTopic(remote, n, 1)])[remote].result(30)
        df = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", a)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("includeHeaders", "true")
            .load()
        )
        if kind == "jvm":
            out = (
                df.selectExpr(
                    f"'{remote}' AS topic", "key", "value", "headers", "partition", "timestamp"
                )
                .writeStream.format("kafka")
                .option("kafka.bootstrap.servers", b)
            )
            out = out.option("kafka.linger.ms", "20").option("kafka.enable.idempotence", "true")
        else:
            from mirrorlib import MirrorConfig
            from mirrorlib.runtime.settings import FlowSettings
            from mirrorlib.spark.source import MirrorDataSource, encode_settings

            spark.dataSource.register(MirrorDataSource)
            cfg = MirrorConfig.from_properties(properties(topic, alias))
            settings = FlowSettings.from_config(cfg, cfg.flow(alias, "B"))
            out = (
                df.selectExpr(
                    "topic",
                    "partition",
                    "offset",
                    "key",
                    "value",
                    "CAST(unix_millis(timestamp) AS BIGINT) AS timestamp",
                    "timestampType",
                    "headers",
                )
                .writeStream.format("mirrorlib")
                .option("flow.secret", encode_settings(settings))
            )
            syncs = settings.offset_syncs_topic
            source_admin = AdminClient({"bootstrap.servers": a})
            try:
                source_admin.create_topics([NewTopic(syncs, 1, 1)])[syncs].result(30)
            except KafkaException:
                pass  # it exists already
        watch = Watch(b, remote, records)
        t0 = time.monotonic()
        q = out.option("checkpointLocation", chk).trigger(availableNow=True).start()
        q.awaitTermination()
        secs = time.monotonic() - t0
        copied = total(b, remote)
        progress = q.recentProgress
    spark.stop()
    batches = [p for p in progress if p["numInputRows"] > 0]
    add_batch = sum(p["durationMs"].get("addBatch", 0) for p in batches) / 1000.0
    copy_s = watch.copy_seconds()
    return {
        "seconds": secs,
        "records_per_s": records / secs,
        "copy_s": copy_s,
        "copy_records_per_s_watched": records / copy_s,
        "batches": len(batches),
        "add_batch_s": add_batch,
        "copy_records_per_s": records / add_batch if add_batch else 0.0,
        "copied": copied,
        "session_start_s": session_s,
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--records", type=int, default=300_000)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--engines", default="embedded,spark1,spark2,jvm2,mix2")
    p.add_argument("--topic")
    p.add_argument("--child")
    args = p.parse_args()
    if args.child:
        kind, cores = args.child[:-1], int(args.child[-1])
        print(json.dumps(run_spark(kind, cores, args.topic, args.records)))
        return
    topic = prepare(args.records, args.partitions)
    print(f"topic {topic}: {args.records} records of 100 B in {args.partitions} partitions")
    print(f"load average: {os.getloadavg()}")
    for engine in args.engines.split(","):
        if engine == "embedded":
            result = run_embedded(topic, args.records)
        else:
            proc = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    engine,
                    "--topic",
                    topic,
                    "--records",
                    str(args.records),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
            if not lines:
                print(engine, "failed:", proc.stderr[-3000:])
                continue
            result = json.loads(lines[-1])
        print(engine, json.dumps({k: round(v, 2) for k, v in result.items()}), flush=True)


if __name__ == "__main__":
    main()
