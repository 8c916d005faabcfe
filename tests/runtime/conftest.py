"""Helpers for replicator integration tests on real local clusters."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mirrorlib import MirrorConfig
from mirrorlib.core.settings import FlowSettings
from mirrorlib.testing import BaseCluster

T = TypeVar("T")

FAST = {
    "replication.factor": "1",
    "offset.storage.replication.factor": "1",
    "checkpoints.topic.replication.factor": "1",
    "heartbeats.topic.replication.factor": "1",
    "offset-syncs.topic.replication.factor": "1",
    "offset.storage.partitions": "5",
    "refresh.topics.interval.seconds": "1",
    "refresh.groups.interval.seconds": "1",
    "emit.checkpoints.interval.seconds": "1",
    "sync.group.offsets.interval.seconds": "1",
    "emit.heartbeats.interval.seconds": "1",
    "sync.topic.configs.interval.seconds": "2",
    "sync.topic.acls.enabled": "false",
}


def mm2_properties(
    clusters: Iterable[BaseCluster], flows: Iterable[str], **extra: str
) -> dict[str, str]:
    """An MM2 properties mapping for ``clusters`` with ``flows`` ("A->B") enabled, fast
    intervals and replication factor 1; ``extra`` keys use ``__`` for ``.`` is NOT applied."""
    clusters = list(clusters)
    props: dict[str, str] = {"clusters": ", ".join(c.alias for c in clusters)}
    for c in clusters:
        props[f"{c.alias}.bootstrap.servers"] = c.bootstrap_servers
        props[f"{c.alias}.offset.flush.interval.ms"] = "500"
    for flow in flows:
        props[f"{flow}.enabled"] = "true"
    props.update(FAST)
    props.update(extra)
    return props


def offline_settings(**extra: str) -> FlowSettings:
    """The settings of flow A->B between two clusters nobody listens on (no broker needed)."""
    cfg = MirrorConfig.from_properties(
        {
            "clusters": "A, B",
            "A.bootstrap.servers": "127.0.0.1:1",
            "B.bootstrap.servers": "127.0.0.1:2",
            "A->B.enabled": "true",
            **extra,
        }
    )
    return FlowSettings.from_config(cfg, cfg.flow("A", "B"))


def config(clusters: Iterable[BaseCluster], flows: Iterable[str], **extra: str) -> MirrorConfig:
    return MirrorConfig.from_properties(mm2_properties(clusters, flows, **extra))


def wait_for(
    what: str, probe: Callable[[], T | None], timeout: float = 60.0, interval: float = 0.3
) -> T:
    """Poll ``probe`` until it returns a truthy value; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def read_all(
    cluster: BaseCluster, topic: str, *, read_committed: bool = False, timeout: float = 30.0
) -> list[Any]:
    """Every record of every partition of ``topic`` up to the current end offsets."""
    consumer = Consumer(
        {
            **cluster.client_config(),
            "group.id": "test-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed" if read_committed else "read_uncommitted",
        }
    )
    try:
        md = consumer.list_topics(topic, timeout=timeout).topics[topic]
        if md.error is not None:
            raise KafkaException(md.error)
        tps = [KafkaTopicPartition(topic, p, OFFSET_BEGINNING) for p in md.partitions]
        ends = {}
        for tp in tps:
            _low, high = consumer.get_watermark_offsets(tp, timeout=timeout)
            ends[tp.partition] = high
        consumer.assign(tps)
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        done = {p for p, e in ends.items() if e == 0}
        while len(done) < len(ends) and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.5):
                if msg.error():
                    continue
                out.append(msg)
                if msg.offset() + 1 >= ends[msg.partition()]:
                    done.add(msg.partition())
            for tp in consumer.position([KafkaTopicPartition(topic, p) for p in ends]):
                if tp.offset >= ends[tp.partition]:
                    done.add(tp.partition)
        return out
    finally:
        consumer.close()


def end_offsets(cluster: BaseCluster, topic: str) -> Mapping[int, int]:
    """End offset per partition; ``{}`` while a just-created topic has no leader yet (callers
    poll with :func:`wait_for`)."""
    consumer = Consumer({**cluster.client_config(), "group.id": "test-ends"})
    try:
        md = consumer.list_topics(topic, timeout=30).topics[topic]
        return {
            p: consumer.get_watermark_offsets(KafkaTopicPartition(topic, p), timeout=30)[1]
            for p in md.partitions
        }
    except KafkaException as exc:
        err = exc.args[0] if exc.args else None
        if getattr(err, "retriable", lambda: False)() or "leader" in str(exc).lower():
            return {}
        raise
    finally:
        consumer.close()


class ReplicatorProcess:
    """``mirrorlib run`` in a child process, for kill -9 tests."""

    def __init__(self, properties: Mapping[str, str], workdir: Any, name: str = "mm") -> None:
        import javaproperties

        self.path = workdir / f"{name}.properties"
        self.path.write_text(javaproperties.dumps(dict(properties)), encoding="utf-8")
        self.log = workdir / f"{name}.log"
        self.proc: Any = None
        self._log_from = 0  # where the current process's output starts in the log

    def _up(self) -> bool:
        """Whether the current process logged that its replicator started."""
        with open(self.log, "rb") as f:
            f.seek(self._log_from)
            return b"mirrorlib replicator started" in f.read()

    def start(self) -> None:
        import subprocess
        import sys

        self._log_from = self.log.stat().st_size if self.log.exists() else 0

        with open(self.log, "a", encoding="utf-8") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "mirrorlib", "run", str(self.path)],
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def stop(self) -> int:
        """SIGTERM once the replicator has started (a stop during start-up is tested in
        tests/cli); its exit code."""
        import signal

        if self.proc is None:
            return 0
        wait_for(
            "the replicator started",
            lambda: self.proc.poll() is not None or self._up(),
            timeout=90,
        )
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return int(self.proc.wait(60))

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(self.log.read_text(encoding="utf-8", errors="replace").splitlines()[-n:])


def decoded(cluster: BaseCluster, topic: str, cls: Any) -> list[Any]:
    """Every record of an MM2 internal topic decoded with ``cls`` (Checkpoint, Heartbeat,
    OffsetSync); records that do not decode are left out (tests share these topics, and one
    writes corrupt records on purpose)."""
    from mirrorlib import CodecError

    out = []
    for m in read_all(cluster, topic):
        try:
            out.append(cls.decode(m.key(), m.value()))
        except CodecError:
            continue
    return out


def produce(cluster: BaseCluster, topic: str, records: list[dict[str, Any]]) -> None:
    """Produce ``records`` (keyword arguments of ``Producer.produce``) and wait for them all."""
    from confluent_kafka import Producer

    producer = Producer({**cluster.client_config(), "enable.idempotence": True, "linger.ms": 5})
    for r in records:
        producer.produce(topic, **r)
    assert producer.flush(30) == 0


def commit_group(cluster: BaseCluster, group: str, topic: str, partitions: dict[int, int]) -> None:
    """Commit ``partitions`` (partition -> offset) for ``group`` on ``cluster``."""
    consumer = Consumer({**cluster.client_config(), "group.id": group, "enable.auto.commit": False})
    consumer.commit(
        offsets=[KafkaTopicPartition(topic, p, o) for p, o in partitions.items()],
        asynchronous=False,
    )
    consumer.close()
