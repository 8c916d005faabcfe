"""tasks.max > 1: copier worker processes on real local clusters (placement, status, fence)."""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mirrorlib import Checkpoint, Replicator
from mirrorlib.core.catalog import RemoteTopic, TopicCatalog
from mirrorlib.core.counters import StatsRegistry
from mirrorlib.core.records import OffsetSync
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.status import FlowStatus
from mirrorlib.errors import CodecError
from mirrorlib.runtime.workers.supervisor import DOWN_GRACE_S, Supervisor
from mirrorlib.testing import BaseCluster, ClusterSet
from tests.procs import children
from tests.runtime.conftest import (
    ReplicatorProcess,
    commit_group,
    config,
    decoded,
    end_offsets,
    mm2_properties,
    produce,
    read_all,
    wait_for,
)
from tests.runtime.test_delivery import Load
from tests.runtime.test_failure_paths import SYNCS_TOPIC, offset_syncs_refused

pytestmark = pytest.mark.integration


def records(n: int, partitions: int) -> list[dict[str, object]]:
    return [
        {"value": str(i).encode(), "key": f"k{i}".encode(), "partition": i % partitions}
        for i in range(n)
    ]


def flow_status(replicator: Replicator, name: str) -> FlowStatus:
    (status,) = [s for s in replicator.status() if s.name == name]
    return status


def holds(cluster: BaseCluster, topic: str, count: int) -> bool:
    """Whether ``topic`` holds at least ``count`` records visible to read_committed (False
    while it does not exist yet)."""
    try:
        return len(read_all(cluster, topic, read_committed=True)) >= count
    except KafkaException:
        return False


def test_tasks_max_2_copies_every_record_with_two_busy_workers(two_clusters: ClusterSet) -> None:
    a, b = two_clusters
    topic = "workers.copy"
    a.create_topic(topic, 4)
    produce(a, topic, records(4000, 4))
    cfg = config(two_clusters, ["A->B"], **{"A->B.topics": "workers\\.copy", "tasks.max": "2"})
    with Replicator(cfg) as replicator:
        wait_for("every record on B", lambda: holds(b, f"A.{topic}", 4000), timeout=90)
        status = wait_for(
            "both workers reported every record",
            lambda: (
                (s := flow_status(replicator, "A->B"))
                and len({p.worker for p in s.partitions if p.record_count}) == 2
                and sum(p.record_count for p in s.partitions if not p.internal) >= 4000
                and s
            ),
            timeout=30,
        )
        assert len(status.workers) == 2
        assert {w.slot for w in status.workers} == {0, 1}
        assert all(w.pid and w.pid != os.getpid() and w.partitions for w in status.workers)
        assert sum(w.partitions for w in status.workers) == len(status.partitions)
        assert sum(p.record_count for p in status.partitions if not p.internal) == 4000
        names = {fam.spec.name for _, fams in replicator.flow_metrics() for fam in fams}
        assert {"partition_worker", "worker_partitions", "worker_restarts_total"} <= names
    # per partition, the same records in the same order (offsets differ: the workers write in
    # transactions, whose commit markers take offsets on the target)
    source: dict[int, list[tuple[bytes, bytes]]] = {}
    for m in read_all(a, topic):
        source.setdefault(m.partition(), []).append((m.key(), m.value()))
    target: dict[int, list[tuple[bytes, bytes]]] = {}
    for m in read_all(b, f"A.{topic}", read_committed=True):
        target.setdefault(m.partition(), []).append((m.key(), m.value()))
    assert target == source


@pytest.mark.parametrize(
    ("tasks_max", "source_transactions"), [("1", False), ("2", False), ("1", True)]
)
def test_records_trickling_in_become_visible_without_waiting_for_the_transaction_interval(
    two_clusters: ClusterSet, tasks_max: str, source_transactions: bool
) -> None:
    """Records arrive every 10 ms, so (almost) no round of the copier consumes nothing; an
    exactly-once copier (and a worker) that read its transaction's partitions to their end
    commits all the same: a read_committed reader of B sees the records while they keep
    arriving, long before the 60 s ``transaction.boundary.interval.ms``. With the earlier rule
    (commit early only after an empty round) the exactly-once case fails; the workers' case
    passed with it too (their transactions ended every second or so at this rate: the
    benchmark's latency scenario measures them). A source written in transactions ends in a
    commit marker after every record: the copier's position, not its last record, reaches the
    end."""
    a, b = two_clusters
    topic = f"workers.trickle{tasks_max}{'t' if source_transactions else ''}"
    a.create_topic(topic, 2)
    props = {"A->B.topics": re.escape(topic), "tasks.max": tasks_max}
    props["transaction.boundary.interval.ms"] = "60000"
    if tasks_max == "1":
        props["B.exactly.once.source.support"] = "enabled"
    stop = threading.Event()
    sent = [0]

    def trickle() -> None:
        conf = {**a.client_config(), "enable.idempotence": True, "linger.ms": 0}
        if source_transactions:
            conf["transactional.id"] = f"trickle-{topic}"
        producer = Producer(conf)
        if source_transactions:
            producer.init_transactions(30)
        while not stop.is_set():
            if source_transactions:
                producer.begin_transaction()
            producer.produce(topic, str(sent[0]).encode(), partition=sent[0] % 2)
            if source_transactions:
                producer.commit_transaction(30)
            producer.poll(0)
            sent[0] += 1
            time.sleep(0.005 if source_transactions else 0.01)
        producer.flush(30)

    def count(read_committed: bool) -> int:
        try:
            return len(read_all(b, f"A.{topic}", read_committed=read_committed))
        except KafkaException:
            return 0

    thread = threading.Thread(target=trickle, daemon=True)
    with Replicator(config(two_clusters, ["A->B"], **props)):
        thread.start()
        try:
            # the copier's first record (a process that takes over the flow's partitions from
            # an earlier test's static member waits for that member's session timeout)
            wait_for("the first records written", lambda: count(False) > 0, timeout=120)
            before = count(True)
            wait_for(
                "200 more records visible to read_committed while more keep arriving",
                lambda: count(True) >= before + 200,
                timeout=30,
            )
            assert thread.is_alive()
        finally:
            stop.set()
            thread.join(30)
        wait_for("every record visible", lambda: holds(b, f"A.{topic}", sent[0]), timeout=60)
    assert_exactly_once_in_order(read_all(b, f"A.{topic}", read_committed=True), sent[0], 2)


def worker_pids(replicator: Replicator) -> dict[int, int]:
    """slot -> pid of the flow A->B's running workers."""
    return {w.slot: w.pid for w in flow_status(replicator, "A->B").workers if w.pid is not None}


def copied(replicator: Replicator, topic: str) -> int:
    return sum(
        p.record_count for p in flow_status(replicator, "A->B").partitions if p.topic == topic
    )


def assert_exactly_once_in_order(b_records: list[object], sent: int, partitions: int) -> None:
    """Every sent value exactly once, in order within its partition (read_committed)."""
    per_partition: dict[int, list[int]] = {}
    for m in b_records:
        per_partition.setdefault(m.partition(), []).append(int(m.value()))  # type: ignore[attr-defined]
    for p in range(partitions):
        assert per_partition.get(p, []) == list(range(p, sent, partitions)), f"partition {p}"


def test_kill_9_of_workers_loses_nothing_and_read_committed_sees_no_duplicate(
    two_clusters: ClusterSet,
) -> None:
    a, b = two_clusters
    topic = "workers.kill"
    a.create_topic(topic, 4)
    cfg = config(two_clusters, ["A->B"], **{"A->B.topics": "workers\\.kill", "tasks.max": "2"})
    load = Load(a, topic, 4).start()
    rnd = random.Random(7)
    try:
        with Replicator(cfg) as replicator:
            for _ in range(4):
                time.sleep(rnd.uniform(1.5, 3.5))
                pids = wait_for("two workers", lambda: len(worker_pids(replicator)) == 2 and
                                worker_pids(replicator), timeout=60)  # fmt: skip
                victim = pids[rnd.randrange(2)]
                os.kill(victim, signal.SIGKILL)
                wait_for(
                    "the killed worker replaced",
                    lambda v=victim: v not in worker_pids(replicator).values(),
                    timeout=30,
                )
            sent = load.stop()
            wait_for(
                "every record on B (read_committed)",
                lambda: len(read_all(b, f"A.{topic}", read_committed=True)) >= sent,
                timeout=90,
            )
            restarts = [w.restarts for w in flow_status(replicator, "A->B").workers]
            assert sum(restarts) >= 4
    finally:
        load.stop()
    assert_exactly_once_in_order(read_all(b, f"A.{topic}", read_committed=True), sent, 4)
    counts = Counter(int(m.value()) for m in read_all(b, f"A.{topic}"))
    assert not [i for i in range(sent) if counts[i] == 0]


def test_a_stopped_worker_is_replaced_and_fenced(two_clusters: ClusterSet) -> None:
    """SIGSTOP a worker mid-copy: its slot gets a new process (same transactional id: the stale
    one is fenced) and copying goes on; after SIGCONT the stale process writes nothing more:
    read_committed sees every source record exactly once and in order."""
    a, b = two_clusters
    topic = "workers.fence"
    a.create_topic(topic, 4)
    group = "fence-app"
    cfg = config(
        two_clusters,
        ["A->B"],
        **{"A->B.topics": "workers\\.fence", "A->B.groups": "fence-.*", "tasks.max": "2"},
    )
    load = Load(a, topic, 4).start()
    try:
        with Replicator(cfg) as replicator:
            pids = wait_for(
                "two workers copying",
                lambda: (
                    len(worker_pids(replicator)) == 2
                    and copied(replicator, topic) > 1000
                    and worker_pids(replicator)
                ),
                timeout=60,
            )
            stale = pids[0]
            os.kill(stale, signal.SIGSTOP)
            try:
                stopped_at = time.monotonic()
                wait_for(
                    "slot 0 replaced",
                    lambda: worker_pids(replicator).get(0) not in (None, stale),
                    timeout=60,
                )
                replaced_after = time.monotonic() - stopped_at
                before = copied(replicator, topic)
                wait_for("copying goes on", lambda: copied(replicator, topic) > before + 1000)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(stale, signal.SIGCONT)
            print(f"stopped worker replaced after {replaced_after:.1f}s")
            (slot0,) = [w for w in flow_status(replicator, "A->B").workers if w.slot == 0]
            assert slot0.restarts >= 1 and "unresponsive" in (slot0.last_error or "")
            time.sleep(2)  # the stale process, if it were alive, would write now
            sent = load.stop()
            # a consumer group of A that read everything copied around the move fails over
            committed = dict(end_offsets(a, topic))
            commit_group(a, group, topic, committed)
            wait_for(
                "every record on B (read_committed)",
                lambda: len(read_all(b, f"A.{topic}", read_committed=True)) >= sent,
                timeout=90,
            )

            def checkpoints() -> dict[int, Checkpoint]:
                ours = [
                    cp
                    for cp in decoded(b, "A.checkpoints.internal", Checkpoint)
                    if cp.group == group and cp.upstream_offset == committed.get(cp.partition)
                ]
                return {cp.partition: cp for cp in ours}

            translated = wait_for("the group's checkpoints", lambda: len(checkpoints()) == 4 and
                                  checkpoints(), timeout=60)  # fmt: skip
    finally:
        load.stop()
    on_b = read_all(b, f"A.{topic}", read_committed=True)
    assert_exactly_once_in_order(on_b, sent, 4)
    # skips nothing: no record the group had not read on A lies before its translated offset
    for m in on_b:
        source_offset = int(m.value()) // 4
        cp = translated[m.partition()]
        if source_offset >= cp.upstream_offset:
            assert m.offset() >= cp.downstream_offset, (m.partition(), source_offset, cp)


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.parametrize("tasks", [1, 2])
def test_a_restarted_process_copies_again_within_seconds(
    two_clusters: ClusterSet, tmp_path: Path, tasks: int
) -> None:
    """kill -9, restart: static group membership gives the partitions back at once (not after
    the 45 s session timeout)."""
    a, b = two_clusters
    topic = f"workers.resume{tasks}"
    a.create_topic(topic, 4)
    props = mm2_properties(
        two_clusters,
        ["A->B"],
        **{
            "A->B.topics": f"workers\\.resume{tasks}",
            "tasks.max": str(tasks),
            "node.id": f"resume-{tasks}",
        },
    )
    proc = ReplicatorProcess(props, tmp_path, name=f"resume{tasks}")
    load = Load(a, topic, 4).start()
    try:
        proc.start()
        wait_for("copying", lambda: sum(end_offsets(b, f"A.{topic}").values()) > 1000, timeout=90)
        workers = children(proc.proc.pid)
        assert len(workers) == (tasks if tasks > 1 else 0)
        proc.kill()
        # the killed parent's workers end by themselves (stdin closed), none is left behind
        wait_for("the workers gone", lambda: not any(alive(p) for p in workers), timeout=30)
        restarted = time.monotonic()
        proc.start()
        # after the restart, records produced since the kill must appear on B
        mark = load.sent
        wait_for(
            "copying after the restart",
            lambda: sum(end_offsets(b, f"A.{topic}").values()) > mark + 200,
            timeout=60,
            interval=0.2,
        )
        resumed = time.monotonic() - restarted
        print(f"tasks.max={tasks}: copying again {resumed:.1f}s after the restart")
        assert resumed < 20, proc.log_tail()
        load.stop()
        assert proc.stop() == 0, proc.log_tail()
    finally:
        load.stop()
        proc.kill()


def test_the_workers_of_a_stopped_parent_exit_before_its_partitions_move(
    two_clusters: ClusterSet, tmp_path: Path
) -> None:
    """``mirrorlib run`` with ``tasks.max=2`` is SIGSTOPped under load: its workers hear nothing
    from it for two thirds of the group's session timeout (6 s of 9) and exit without
    committing, writing nothing more, before the group could give the partitions to another
    node. SIGCONT: the parent starts new workers and copies on; nothing is lost."""
    a, b = two_clusters
    topic = "workers.silent"
    a.create_topic(topic, 4)
    props = mm2_properties(
        two_clusters,
        ["A->B"],
        **{
            "A->B.topics": "workers\\.silent",
            "tasks.max": "2",
            "node.id": "silent",
            "A->B.source.consumer.session.timeout.ms": "9000",
        },
    )
    proc = ReplicatorProcess(props, tmp_path, name="silent")
    load = Load(a, topic, 4).start()
    stopped = False
    try:
        proc.start()
        wait_for("copying", lambda: sum(end_offsets(b, f"A.{topic}").values()) > 1000, timeout=90)
        workers = children(proc.proc.pid)
        assert len(workers) == 2
        os.kill(proc.proc.pid, signal.SIGSTOP)
        stopped = True
        began = time.monotonic()
        wait_for("the workers gone", lambda: not any(alive(p) for p in workers), timeout=30)
        left = time.monotonic() - began
        print(f"the workers exited {left:.1f}s after their parent stopped")
        # (9 s: the session timeout, after which the group may give the partitions away)
        assert left < 9.0, f"the workers outlived the parent's group membership: {left:.1f}s"
        assert proc.log.read_text().count("has sent nothing for") == 2, proc.log_tail()
        written = sum(end_offsets(b, f"A.{topic}").values())
        time.sleep(2.0)
        assert sum(end_offsets(b, f"A.{topic}").values()) == written  # nobody writes
        os.kill(proc.proc.pid, signal.SIGCONT)
        stopped = False
        wait_for(
            "two new workers",
            lambda: len([p for p in children(proc.proc.pid) if alive(p) and p not in workers]) == 2,
            timeout=60,
        )
        # the slots' status names the parent's own silence and the limit
        said = re.findall(r"this process sent it nothing for (\d+)s \(stopped or starved; "
                          r"a worker leaves after 6s\)", proc.log.read_text())  # fmt: skip
        assert len(said) == 2, proc.log_tail()
        assert all(int(s) >= 6 for s in said), said
        mark = load.sent
        wait_for(
            "copying again",
            lambda: sum(end_offsets(b, f"A.{topic}").values()) > mark + 200,
            timeout=90,
        )
        load.stop()
        sent = load.sent
        wait_for(
            "every record copied",
            lambda: len({int(m.value()) for m in read_all(b, f"A.{topic}")}) >= sent,
            timeout=90,
            interval=1.0,
        )
        assert proc.stop() == 0, proc.log_tail()
        values = {int(m.value()) for m in read_all(b, f"A.{topic}")}
        assert values == set(range(sent))  # at-least-once: nothing lost
    finally:
        if stopped:
            os.kill(proc.proc.pid, signal.SIGCONT)
        load.stop()
        proc.kill()


def supervised_flow(clusters: ClusterSet, topic: str, node: str, **extra: str) -> FlowSettings:
    """The settings of flow A->B copying ``topic`` (created with 4 partitions, and its remote
    topic) with ``tasks.max=2`` on node ``node``, for a :class:`Supervisor` run by the test; the
    flow's internal topics exist."""
    a, b = clusters
    a.create_topic(topic, 4)
    b.create_topic(f"A.{topic}", 4)
    props = {"A->B.topics": re.escape(topic), "tasks.max": "2", "node.id": node, **extra}
    cfg = config(clusters, ["A->B"], **props)
    s = FlowSettings.from_config(cfg, cfg.flow("A", "B"))
    with contextlib.suppress(KafkaException):  # shared clusters: an earlier test created them
        b.create_topic(s.offset_storage_topic, s.offset_storage_partitions)
    with contextlib.suppress(KafkaException):
        (a if s.offset_syncs_cluster == "A" else b).create_topic(s.offset_syncs_topic)
    return s


def test_a_down_slots_open_transaction_is_fenced_when_its_partitions_move(
    two_clusters: ClusterSet, tmp_path: Path
) -> None:
    """A worker is killed mid-transaction and its slot cannot start again: after the grace
    period its partitions move to the other worker. The dead worker's open transaction holds
    the last stable offset of the remote partitions it wrote until it ends, so a
    ``read_committed`` reader on B sees nothing the new worker copies until the broker aborts
    it (``transaction.timeout.ms``, 60 s, and its check, every 10 s) -- unless the supervisor
    fences the slot's transactional id as its partitions move, as it does. Then read_committed
    sees every record once, in order."""
    a, b = two_clusters
    topic = "workers.fence-down"
    s = supervised_flow(two_clusters, topic, "fence-down")
    keys = frozenset((topic, p) for p in range(4))
    catalog = TopicCatalog()
    catalog.publish({topic: RemoteTopic(f"A.{topic}", 4)})
    stats = StatsRegistry("A", "B")
    down_until = [0.0]

    def command() -> list[str]:  # a slot's process cannot start until down_until
        if time.monotonic() < down_until[0]:
            return [str(tmp_path / "no-such-program")]
        return [sys.executable, "-m", "mirrorlib.runtime.workers.child"]

    offsets_partitions = len(end_offsets(b, s.offset_storage_topic))  # (as the metadata reads)
    supervisor = Supervisor(
        s, stats, catalog, lambda: keys,
        offsets_topic_partitions=offsets_partitions, command=command,
    )  # fmt: skip
    stop = threading.Event()
    thread = threading.Thread(target=supervisor.run, args=(stop,), daemon=True)
    load = Load(a, topic, 4).start()
    reader = Consumer(
        {**b.client_config(), "group.id": "fence-down", "isolation.level": "read_committed"}
    )
    reader.assign([KafkaTopicPartition(f"A.{topic}", p, OFFSET_BEGINNING) for p in range(4)])
    visible: dict[int, int] = {}  # partition -> the highest value read_committed sees

    def seen_since(mark: int, partitions: list[int]) -> bool:
        for m in reader.consume(1000, timeout=0.1):
            if m.error() is None:
                visible[m.partition()] = max(visible.get(m.partition(), -1), int(m.value()))
        return all(visible.get(p, -1) >= mark for p in partitions)

    def both_copying() -> dict[int, frozenset[tuple[str, int]]] | None:
        held = {i.slot: i.partitions for i in supervisor.slot_infos() if i.pid is not None}
        if len(held) == 2 and all(held.values()) and seen_since(0, list(range(4))):
            return held
        return None

    thread.start()
    try:
        held = wait_for("both workers copying", both_copying, timeout=90)
        (victim,) = [i for i in supervisor.slot_infos() if i.slot == 0]
        moved = sorted(p for _, p in held[0])
        down_until[0] = time.monotonic() + 120.0
        assert victim.pid is not None
        mark = load.sent
        os.kill(victim.pid, signal.SIGKILL)
        killed = time.monotonic()
        wait_for(
            "records of slot 0's partitions sent after the kill visible on B (read_committed)",
            lambda: seen_since(mark, moved),
            timeout=120,
            interval=0.0,
        )
        resumed = time.monotonic() - killed
        print(f"slot 0's partitions visible again {resumed:.1f}s after the kill")
        slot1 = next(i for i in supervisor.slot_infos() if i.slot == 1)
        assert {p for _, p in slot1.partitions} == set(range(4))
        # the grace period, then the fence and the move: not the transaction timeout (60 s)
        assert resumed < DOWN_GRACE_S + 15, resumed
        sent = load.stop()
        wait_for(
            "every record on B (read_committed)",
            lambda: len(read_all(b, f"A.{topic}", read_committed=True)) >= sent,
            timeout=60,
        )
    finally:
        load.stop()
        reader.close()
        stop.set()
        thread.join(60)
    assert_exactly_once_in_order(read_all(b, f"A.{topic}", read_committed=True), sent, 4)


def written_to(cluster: BaseCluster, topic: str, partition: int) -> int:
    """The high watermark of ``topic``'s ``partition``: records written, committed or not (a
    ``read_committed`` consumer's watermarks stop at the last stable offset)."""
    consumer = Consumer(
        {**cluster.client_config(), "group.id": "test-written", "isolation.level":
         "read_uncommitted"}
    )  # fmt: skip
    try:
        return int(consumer.get_watermark_offsets(KafkaTopicPartition(topic, partition), 10)[1])
    finally:
        consumer.close()


def committed_in(cluster: BaseCluster, topic: str, partition: int) -> int:
    """How many records of ``topic``'s ``partition`` a ``read_committed`` reader sees now (it
    reads to the partition's last stable offset)."""
    reader = Consumer(
        {
            **cluster.client_config(),
            "group.id": "test-committed-in",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    try:
        reader.assign([KafkaTopicPartition(topic, partition, OFFSET_BEGINNING)])
        seen = 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for m in reader.consume(1000, timeout=0.5):
                if m.error() is None:
                    seen += 1
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    return seen
        raise AssertionError(f"{topic}-{partition}: no end reached in 30 s")
    finally:
        reader.close()


def test_partitions_lost_by_this_process_are_dropped_without_committing(
    two_clusters: ClusterSet,
) -> None:
    """This process's group session ended (the consumer reports the partitions *lost*): another
    node copies them now, so the worker holding them must not commit what its open transaction
    copied of them (duplicates for ``read_committed`` readers, and two writers of a partition).
    It aborts the transaction instead: nothing of the lost partition becomes visible, and its
    other partition is copied again from its committed position. Given back later, every record
    is on B once, in order. (With a commit on loss, as for a revocation, the lost partition's
    records become visible.)"""
    a, b = two_clusters
    topic = "workers.lost"
    s = supervised_flow(
        two_clusters,
        topic,
        "lost",
        **{
            "transaction.boundary.interval.ms": "60000",  # one open transaction per worker
            # a record (its own batch) per partition and fetch, a fetch every 10 ms or so (~40
            # records a second here): worker 0 is still copying the backlog when it loses the
            # partition, its transaction open (no round consumes nothing, none reaches the end)
            "A->B.source.consumer.max.partition.fetch.bytes": "1",
            "A->B.source.consumer.fetch.min.bytes": "100000000",
            "A->B.source.consumer.fetch.wait.max.ms": "10",
        },
    )
    sent = 1_000  # a backlog: a worker copying it never reads to the end of its fetches
    producer = Producer({**a.client_config(), "linger.ms": 0, "batch.num.messages": 1})
    for i in range(sent):
        while True:
            try:
                producer.produce(topic, str(i).encode(), partition=i % 4)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(60) == 0
    keys = frozenset((topic, p) for p in range(4))
    owned = [keys]
    catalog = TopicCatalog()
    catalog.publish({topic: RemoteTopic(f"A.{topic}", 4)})
    supervisor = Supervisor(
        s, StatsRegistry("A", "B"), catalog, lambda: owned[0],
        offsets_topic_partitions=len(end_offsets(b, s.offset_storage_topic)),
    )  # fmt: skip
    stop = threading.Event()
    thread = threading.Thread(target=supervisor.run, args=(stop,), daemon=True)
    remote = f"A.{topic}"
    thread.start()
    try:
        held = wait_for(
            "both workers holding partitions",
            lambda: len(h := {i.slot: i.partitions for i in supervisor.slot_infos()
                              if i.pid is not None and i.partitions}) == 2 and h,
            timeout=90,
        )  # fmt: skip
        lost = frozenset(sorted(held[0])[:1])  # one of worker 0's two partitions
        ((_, partition),) = lost
        wait_for(
            "worker 0 writing the partition (uncommitted)",
            lambda: written_to(b, remote, partition) > 0,
            timeout=60,
            interval=0.02,
        )
        supervisor.lose(lost)
        owned[0] = keys - lost
        supervisor.await_release(lost, stop)
        assert not supervisor.holding(lost)
        written = written_to(b, remote, partition)
        assert written > 0
        assert committed_in(b, remote, partition) == 0, (
            f"the lost partition's records were committed ({written} written)"
        )
        owned[0] = keys  # given back: copied again from its committed position
        wait_for(
            "every record on B (read_committed)",
            lambda: sum(committed_in(b, remote, p) for p in range(4)) >= sent,
            timeout=180,
            interval=1.0,
        )
    finally:
        stop.set()
        thread.join(60)
    assert_exactly_once_in_order(read_all(b, remote, read_committed=True), sent, 4)


@pytest.mark.parametrize("tasks_max", ["1", "2"])
def test_an_offset_sync_not_written_is_sent_again_a_second_later(
    two_clusters: ClusterSet, tasks_max: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A sync the offset-syncs topic refused goes back to the emitter that numbered it (with
    tasks.max > 1 the parent writes the workers' syncs and sends the failure back to the
    worker), which queues the partition's newest sync again a second later: readers re-anchor
    without waiting for another record, and a topic that keeps refusing costs a write per
    second, not one per round trip."""
    a, b = two_clusters
    topic = f"workers.syncfail{tasks_max}"
    a.create_topic(topic, 1)
    syncs_topic = SYNCS_TOPIC
    with offset_syncs_refused(a) as accept:
        produce(a, topic, records(300, 1))
        cfg = config(
            two_clusters, ["A->B"], **{"A->B.topics": re.escape(topic), "tasks.max": tasks_max}
        )
        with Replicator(cfg) as replicator:
            wait_for("every record on B", lambda: holds(b, f"A.{topic}", 300), timeout=90)
            wait_for(
                "the workers' last commit (every record counted)",
                lambda: copied(replicator, topic) >= 300,
                timeout=30,
            )
            caplog.clear()
            time.sleep(3.0)  # the newest sync is refused, and sent again, every second
            assert newest_sync(a, syncs_topic, topic) is None
            refused = [
                r
                for r in caplog.records
                if "was not written" in r.getMessage() and f"{topic}-0" in r.getMessage()
            ]
            assert 1 <= len(refused) <= 6, [r.getMessage() for r in refused]
            accept()
            # no record more: only a sync sent again can say where upstream 299 went
            _, down = wait_for(
                "the partition's newest sync, written after all",
                lambda: (s := newest_sync(a, syncs_topic, topic)) and s[0] == 299 and s,
                timeout=30,
            )
            last = read_all(b, f"A.{topic}", read_committed=True)[-1]
            assert (int(last.value()), last.offset()) == (299, down)


def newest_sync(cluster: BaseCluster, syncs_topic: str, topic: str) -> tuple[int, int] | None:
    """(upstream, downstream) of the newest offset sync of ``topic``-0 in ``syncs_topic``."""
    found = None
    for m in read_all(cluster, syncs_topic):
        try:
            sync = OffsetSync.decode(m.key(), m.value())
        except CodecError:  # shared clusters: other tests write malformed syncs on purpose
            continue
        if (sync.topic, sync.partition) == (topic, 0):
            found = (sync.upstream_offset, sync.downstream_offset)
    return found
