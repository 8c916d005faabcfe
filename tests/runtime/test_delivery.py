"""Delivery guarantees under kill -9: at-least-once by default, exactly-once when enabled.

Each runs with the in-process copier (``tasks.max=1``) and with two copier worker processes
(``tasks.max=2``), where a kill -9 of the parent also ends its workers."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer

from mirrorlib.testing import BaseCluster, ClusterSet
from tests.runtime.conftest import (
    ReplicatorProcess,
    end_offsets,
    mm2_properties,
    read_all,
    wait_for,
)

pytestmark = pytest.mark.integration


class Load:
    """Produces numbered records into a topic on a background thread until stopped."""

    def __init__(
        self, cluster: BaseCluster, topic: str, partitions: int, *, transactional: bool = False
    ) -> None:
        self.cluster = cluster
        self.topic = topic
        self.partitions = partitions
        self.sent = 0
        self.transactional = transactional
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        conf = {**self.cluster.client_config(), "enable.idempotence": True, "linger.ms": 5}
        if self.transactional:
            conf["transactional.id"] = f"load-{self.topic}"
        producer = Producer(conf)
        if self.transactional:
            producer.init_transactions(30)
        i = 0
        while not self._stop.is_set():
            if self.transactional:
                producer.begin_transaction()
            for _ in range(200):
                producer.produce(self.topic, str(i).encode(), partition=i % self.partitions)
                i += 1
            if self.transactional:
                producer.commit_transaction(30)
            else:
                producer.flush(30)
            self.sent = i
            time.sleep(0.1)
        producer.flush(30)

    def start(self) -> Load:
        self._thread.start()
        return self

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(60)
        return self.sent


def assert_each_once(counts: Counter[int], sent: int) -> None:
    """Every value 0..sent-1 seen exactly once by ``read_committed`` (``counts``: value -> times)."""
    missing = [i for i in range(sent) if counts[i] == 0]
    dupes = {i: c for i, c in counts.items() if c > 1}
    assert not missing, f"{len(missing)} records lost, e.g. {missing[:10]}"
    assert not dupes, (
        f"{len(dupes)} records seen more than once by read_committed, e.g. {list(dupes.items())[:10]}"
    )


def kill_loop(proc: ReplicatorProcess, rounds: int, seed: int) -> None:
    rnd = random.Random(seed)
    proc.start()
    for _ in range(rounds):
        time.sleep(rnd.uniform(1.5, 4.0))
        proc.kill()
        proc.start()


@pytest.mark.parametrize("tasks", [1, 2])
def test_at_least_once_under_kill_9(two_clusters: ClusterSet, tmp_path: Path, tasks: int) -> None:
    a, b = two_clusters
    topic = f"alo.kill{tasks}"
    a.create_topic(topic, 4)
    props = mm2_properties(
        two_clusters, ["A->B"], **{"A->B.topics": f"alo\\.kill{tasks}", "tasks.max": str(tasks)}
    )
    proc = ReplicatorProcess(props, tmp_path, name=f"alo{tasks}")
    load = Load(a, topic, 4).start()
    try:
        kill_loop(proc, rounds=6, seed=1)
        sent = load.stop()
        # every sent value visible to read_committed (with tasks.max > 1 the workers write in
        # transactions: end offsets also count commit markers and aborted records)
        wait_for(
            "every record on B",
            lambda: (
                f"A.{topic}" in b.topic_names()  # (not yet created: a busy machine is slower)
                and len({int(m.value()) for m in read_all(b, f"A.{topic}", read_committed=True)})
                >= sent
            ),
            timeout=90,
        )
        assert proc.stop() == 0, proc.log_tail()
    finally:
        load.stop()
        proc.kill()
    counts = Counter(int(m.value()) for m in read_all(b, f"A.{topic}", read_committed=True))
    missing = [i for i in range(sent) if counts[i] == 0]
    assert not missing, f"{len(missing)} records lost, e.g. {missing[:10]}"
    duplicates = sum(c - 1 for c in counts.values())
    print(
        f"at-least-once, tasks.max={tasks}: {sent} records, {duplicates} duplicates after 6 kill -9"
    )


@pytest.mark.parametrize("tasks", [1, 2])
def test_exactly_once_under_kill_9(two_clusters: ClusterSet, tmp_path: Path, tasks: int) -> None:
    a, b = two_clusters
    topic = f"eos.kill{tasks}"
    a.create_topic(topic, 4)
    props = mm2_properties(
        two_clusters,
        ["A->B"],
        **{
            "A->B.topics": f"eos\\.kill{tasks}",
            "tasks.max": str(tasks),
            "B.exactly.once.source.support": "enabled",
            "A.consumer.isolation.level": "read_committed",
            "transaction.boundary.interval.ms": "300",
        },
    )
    proc = ReplicatorProcess(props, tmp_path, name=f"eos{tasks}")
    load = Load(a, topic, 4, transactional=True).start()
    try:
        kill_loop(proc, rounds=8, seed=2)
        sent = load.stop()

        def all_there() -> bool:
            if f"A.{topic}" not in b.topic_names():  # (not yet created: a busy machine is slower)
                return False
            values = {int(m.value()) for m in read_all(b, f"A.{topic}", read_committed=True)}
            return len(values) >= sent

        wait_for("every record on B (read_committed)", all_there, timeout=120)
        assert proc.stop() == 0, proc.log_tail()
    finally:
        load.stop()
        proc.kill()
    counts = Counter(int(m.value()) for m in read_all(b, f"A.{topic}", read_committed=True))
    # the target really was written transactionally: commit markers take offsets too
    assert sum(end_offsets(b, f"A.{topic}").values()) > sum(counts.values())
    assert_each_once(counts, sent)
