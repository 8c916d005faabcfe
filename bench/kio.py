"""Small Kafka helpers for the harness: topics, end offsets, ProducerPerformance."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorlib.testing import java_executable, kafka_classpath

PRODUCER_PERFORMANCE = "org.apache.kafka.tools.ProducerPerformance"
#: Producer settings of the preload and of the plain producer (same as mirrorlib's producer).
PRODUCER_PROPS = {
    "acks": "all",
    "enable.idempotence": "true",
    "linger.ms": "5",
    "batch.size": "1000000",
    "max.request.size": "1048576",
}
TOOLS_LOG4J2 = """\
status = warn
appender.err.type = Console
appender.err.name = ERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = ERR
"""


def create_topics(bootstrap: str, topics: Mapping[str, int], timeout: float = 30) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    futures = admin.create_topics(
        [NewTopic(t, num_partitions=p, replication_factor=1) for t, p in topics.items()],
        operation_timeout=timeout,
    )
    for f in futures.values():
        f.result(timeout)


def delete_topics(bootstrap: str, pattern: str, timeout: float = 30) -> int:
    """Delete every topic fully matching ``pattern``; returns how many."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    names = [t for t in admin.list_topics(timeout=timeout).topics if re.fullmatch(pattern, t)]
    if names:
        for f in admin.delete_topics(names, operation_timeout=timeout).values():
            with contextlib.suppress(Exception):  # already gone
                f.result(timeout)
    return len(names)


class Offsets:
    """Reads end offsets of topics on one cluster."""

    def __init__(self, bootstrap: str) -> None:
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "bench-offsets", "log_level": 3}
        )
        self._parts: dict[str, list[int]] = {}

    def partitions(self, topic: str) -> list[int]:
        parts = self._parts.get(topic)
        if parts is None:
            md = self.consumer.list_topics(topic, timeout=10).topics.get(topic)
            if md is None or md.error is not None or not md.partitions:
                return []
            parts = self._parts[topic] = sorted(md.partitions)
        return parts

    def end_offsets(self, topic: str) -> dict[int, int]:
        return {
            p: self.consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in self.partitions(topic)
        }

    def total(self, topic: str) -> int:
        return sum(self.end_offsets(topic).values())

    def wait_total(
        self,
        topic: str,
        n: int,
        timeout: float,
        interval: float = 0.02,
        check: Callable[[], None] | None = None,
    ) -> float | None:
        """Poll until the end offsets of ``topic`` sum to ``n``; the monotonic time, or None.
        ``check`` is called every half second (e.g. raises when the replicator died)."""
        deadline = time.monotonic() + timeout
        checked = time.monotonic()
        while time.monotonic() < deadline:
            if check is not None and time.monotonic() - checked > 0.5:
                check()
                checked = time.monotonic()
            try:
                if self.total(topic) >= n:
                    return time.monotonic()
            except Exception:
                self._parts.pop(topic, None)
            time.sleep(interval)
        return None

    def close(self) -> None:
        self.consumer.close()


def tools_log4j(work: Path) -> Path:
    path = work / "tools-log4j2.properties"
    if not path.exists():
        path.write_text(TOOLS_LOG4J2)
    return path


def producer_performance(
    work: Path,
    bootstrap: str,
    topic: str,
    records: int,
    size: int,
    props: Mapping[str, str] = PRODUCER_PROPS,
) -> dict[str, Any]:
    """Run ProducerPerformance to completion: its summary line parsed, plus the command, the wall
    time, and the CPU seconds and peak RSS of its JVM (JVM start included)."""
    cmd = [
        java_executable(), "-Xms256m", "-Xmx512m", "-XX:+UseG1GC",
        f"-Dlog4j2.configurationFile={tools_log4j(work)}",
        "-cp", kafka_classpath(), PRODUCER_PERFORMANCE,
        "--topic", topic, "--num-records", str(records), "--record-size", str(size),
        "--throughput", "-1", "--bootstrap-server", bootstrap,
        "--command-property", *[f"{k}={v}" for k, v in props.items()],
    ]  # fmt: skip
    started = time.monotonic()
    log = work / f"producer-performance-{topic}.log"
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    # wait4 gives the JVM's own CPU time and peak RSS (the process is gone afterwards)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - started
    output = log.read_text()
    if proc.returncode != 0:
        raise RuntimeError(f"ProducerPerformance failed ({proc.returncode}):\n{output[-3000:]}")
    result = parse_producer_performance(output)
    result.update(
        wall_s=round(wall, 3),
        cpu_s=round(usage.ru_utime + usage.ru_stime, 3),
        peak_rss_mb=round(usage.ru_maxrss * 1024 / 1e6, 1),
        command=" ".join(cmd[cmd.index(PRODUCER_PERFORMANCE) :]),
    )
    return result


_SUMMARY = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency(?:, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th)?"
)


def parse_producer_performance(output: str) -> dict[str, Any]:
    """The final summary line of ProducerPerformance (the last matching line)."""
    found = None
    for line in output.splitlines():
        m = _SUMMARY.search(line)
        if m:
            found = m
    if found is None:
        raise ValueError(f"no ProducerPerformance summary in output:\n{output[-2000:]}")
    g = found.groups()
    return {
        "records": int(g[0]),
        "records_per_s": float(g[1]),
        "mb_per_s": float(g[2]),
        "avg_latency_ms": float(g[3]),
        "max_latency_ms": float(g[4]),
        "p99_latency_ms": None if g[7] is None else float(g[7]),
    }


def all_partitions(consumer: Consumer, topics: Iterable[str]) -> list[TopicPartition]:
    md = consumer.list_topics(timeout=10)
    return [TopicPartition(t, p) for t in topics for p in sorted(md.topics[t].partitions)]
