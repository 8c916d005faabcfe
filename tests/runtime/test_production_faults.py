"""Production faults on three-node clusters (RF 3, min ISR 2) on both sides, through the
network-fault proxy: leaders of the copied partitions killed -9 and restarted on the target and
on the source while records flow; the link to the target, and to the source, cut for a minute.

What must hold: nothing lost; nothing twice for ``read_committed`` readers under exactly-once;
the replicator stays up (and shows a stall while a link is down); a consumer group failed over
afterwards skips nothing. One pair of clusters serves the whole module (``kafka_clusters``)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from mirrorlib import MirrorConfig, Replicator
from mirrorlib.core.status import STALL_AFTER_S, FlowState, FlowStatus
from mirrorlib.runtime.failover import failover
from mirrorlib.testing import KafkaCluster
from mirrorlib.testing.pytest_plugin import ClusterRequest
from tests.runtime.conftest import mm2_properties, read_all, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.java]

#: How long a link stays cut: past the source group's session (45 s), the target's transaction
#: timeout (60 s) and a stall report (STALL_AFTER_S).
CUT_S = 60.0

#: The replicator's own topics with RF 3 on three-node clusters.
RF3 = {
    "replication.factor": "3",
    "offset.storage.replication.factor": "3",
    "checkpoints.topic.replication.factor": "3",
    "heartbeats.topic.replication.factor": "3",
    "offset-syncs.topic.replication.factor": "3",
}


@pytest.fixture
def clusters(kafka_clusters: ClusterRequest) -> tuple[KafkaCluster, KafkaCluster]:
    s, t = kafka_clusters(["S3", "T3"], nodes=3, proxy=True)
    assert isinstance(s, KafkaCluster) and isinstance(t, KafkaCluster)
    return s, t


def _config(s: KafkaCluster, t: KafkaCluster, topic: str, *, eos: bool, tasks: int) -> MirrorConfig:
    extra = {
        **RF3,
        "S3->T3.topics": topic.replace(".", "\\."),
        "S3->T3.groups": f"{topic}-.*",
        "tasks.max": str(tasks),
    }
    if eos:
        extra["T3.exactly.once.source.support"] = "enabled"
        extra["S3.consumer.isolation.level"] = "read_committed"
        extra["transaction.boundary.interval.ms"] = "300"
    return MirrorConfig.from_properties(mm2_properties([s, t], ["S3->T3"], **extra))


class Load:
    """Numbered records into ``topic`` (idempotent, ``acks=all``) from a background thread, past
    the proxy (the source's producers are not what a cut of the replicator's link touches)."""

    def __init__(self, cluster: KafkaCluster, topic: str, partitions: int) -> None:
        self.cluster, self.topic, self.partitions = cluster, topic, partitions
        self.sent = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        producer = Producer(
            self.cluster.direct_client_config(
                extra={"enable.idempotence": "true", "linger.ms": "5", "log_level": "0"}
            )
        )
        i = 0
        while not self._stop.is_set():
            for _ in range(100):
                producer.produce(
                    self.topic,
                    str(i).encode(),
                    partition=i % self.partitions,
                    on_delivery=self._delivered,
                )
                i += 1
            if producer.flush(120) != 0:
                self.errors.append("flush timed out")
            self.sent = i
            time.sleep(0.1)

    def _delivered(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))

    def start(self) -> Load:
        self._thread.start()
        return self

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(180)
        assert not self._thread.is_alive(), "the load did not stop"
        assert not self.errors, self.errors[:5]
        return self.sent


@pytest.fixture
def load_factory() -> Iterator[Any]:
    loads: list[Load] = []

    def make(cluster: KafkaCluster, topic: str, partitions: int) -> Load:
        loads.append(Load(cluster, topic, partitions).start())
        return loads[-1]

    yield make
    for load in loads:
        load._stop.set()


def _flow(r: Replicator) -> FlowStatus:
    return next(s for s in r.status() if s.name == "S3->T3")


def _counts(t: KafkaCluster, remote: str) -> Counter[int]:
    return Counter(int(m.value()) for m in read_all(t, remote, read_committed=True, timeout=60))


def _all_arrived(t: KafkaCluster, remote: str, sent: int, timeout: float = 240) -> Counter[int]:
    def probe() -> Counter[int] | None:
        counts = _counts(t, remote)
        return counts if len(counts) >= sent else None

    return wait_for(
        f"all {sent} records in {remote} (read_committed)", probe, timeout=timeout, interval=2
    )


def _check(counts: Counter[int], sent: int, *, eos: bool) -> None:
    missing = [i for i in range(sent) if counts[i] == 0]
    assert not missing, f"{len(missing)} records lost, e.g. {missing[:10]}"
    dupes = {i: c for i, c in counts.items() if c > 1}
    if eos:
        assert not dupes, f"{len(dupes)} records twice (read_committed), e.g. {list(dupes)[:10]}"
    print(f"{sent} records, {sum(c - 1 for c in counts.values())} duplicates")


def _consume_on_source(s: KafkaCluster, group: str, topic: str, n: int) -> set[bytes]:
    """The group reads ``n`` records on the source and commits them (then "crashes")."""
    c = Consumer(
        s.direct_client_config(
            extra={
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": "false",
                "log_level": "0",
            }
        )
    )
    c.subscribe([topic])
    got: set[bytes] = set()
    deadline = time.monotonic() + 60
    try:
        while len(got) < n and time.monotonic() < deadline:
            for m in c.consume(min(100, n - len(got)), timeout=0.5):
                if m.error() is None:
                    got.add(m.value() or b"")
        c.commit(asynchronous=False)
    finally:
        c.close()
    assert len(got) == n, f"the group read {len(got)} of {n}"
    return got


def _drain(t: KafkaCluster, group: str, topic: str, idle: float = 5.0) -> set[bytes]:
    c = Consumer(
        t.client_config(
            extra={
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": "false",
                "isolation.level": "read_committed",
            }
        )
    )
    c.subscribe([topic])
    got: set[bytes] = set()
    last = time.monotonic()
    try:
        while time.monotonic() - last < idle:
            for m in c.consume(500, timeout=0.5):
                if m.error() is None:
                    got.add(m.value() or b"")
                    last = time.monotonic()
    finally:
        c.close()
    return got


def _kill_and_restart_leaders(
    leaders: list[tuple[KafkaCluster, str]], r: Replicator, what: str
) -> None:
    """kill -9 the leader of partition 0 of each (cluster, topic) at once, wait for new ones
    while records flow, restart the nodes and wait until they are back in every ISR."""
    nodes = [(cluster, topic, cluster.leader(topic, 0)) for cluster, topic in leaders]
    before = _copied(r)
    for _, _, node in nodes:
        node.kill()
    for cluster, topic, node in nodes:
        wait_for(
            f"a new leader of {topic}-0 on {cluster.alias}",
            lambda c=cluster, t=topic, n=node: c.leader(t, 0) is not n,
            timeout=60,
        )
    # records go on flowing with a node down (acks=all, min ISR 2)
    _wait_copying(r, before, f"with the old leaders down ({what})")
    for _, _, node in nodes:
        node.start()
    for cluster, topic, _ in nodes:
        cluster.wait_in_sync(topic, timeout=120)
    assert _flow(r).state is not FlowState.FAILED, _flow(r)


def _copied(r: Replicator) -> int:
    return sum(p.record_count for p in _flow(r).partitions)


def _wait_copying(r: Replicator, before: int, what: str) -> None:
    wait_for(f"records copied {what}", lambda: _copied(r) > before + 500, timeout=120)


def _add_partitions(cluster: KafkaCluster, topic: str, total: int) -> None:
    from confluent_kafka.cimpl import NewPartitions

    admin = cluster.admin_client()  # kept until the futures resolve
    futures = admin.create_partitions([NewPartitions(topic, total)], request_timeout=60)
    for future in futures.values():
        future.result(60)


@pytest.mark.parametrize(("mode", "tasks"), [("alo", 1), ("eos", 2)])
def test_leaders_killed_on_target_and_source(
    clusters: tuple[KafkaCluster, KafkaCluster], load_factory: Any, mode: str, tasks: int
) -> None:
    s, t = clusters
    eos = mode == "eos"
    topic, group = f"pf.lead.{mode}", f"pf.lead.{mode}-app"
    remote = f"S3.{topic}"
    s.create_topic(topic, 4)
    load = load_factory(s, topic, 4)
    cfg = _config(s, t, topic, eos=eos, tasks=tasks)
    with Replicator(cfg) as r:
        wait_for("records copied", lambda: remote in t.topic_names() and _counts(t, remote))
        consumed = _consume_on_source(s, group, topic, 1000)
        if eos:
            # one side after the other: both at once fenced an exactly-once worker in one run
            # (INVALID_PRODUCER_EPOCH from the target's new leader; the worker restarted)
            _kill_and_restart_leaders([(t, remote)], r, "target")
            _kill_and_restart_leaders([(s, topic)], r, "source")
        else:
            # the leaders of the copied partition on the target and on the source, at once
            _kill_and_restart_leaders([(t, remote), (s, topic)], r, "target and source")
        # the replicator's stored positions on the target: their leader moves too, then a
        # rebalance (new source partitions) makes the copier read them again (librdkafka #4620:
        # a long-lived client's ListOffsets kept the old leader epoch, FENCED_LEADER_EPOCH)
        _kill_and_restart_leaders([(t, "mm2-offsets.S3.internal")], r, "target positions")
        before = _copied(r)
        _add_partitions(s, topic, 6)
        _wait_copying(r, before, "after the rebalance that read the positions again")
        sent = load.stop()
        counts = _all_arrived(t, remote, sent)
        flow = _flow(r)
        assert flow.state in (FlowState.RUNNING, FlowState.DEGRADED), flow
        # a leader move is routine: the copier workers retry it, none of them ends over it
        restarted = [(w.slot, w.restarts, w.last_error) for w in flow.workers if w.restarts]
        assert not restarted, f"copier workers restarted after leader moves: {restarted}"

        def plan_ready() -> bool:
            # the group's checkpoint has caught up with its commit before the failover
            plan = failover(cfg, group, "S3", "T3", dry_run=True)
            return plan.refused is None and plan.skipped_total == 0

        wait_for("a failover plan that skips nothing", plan_ready, timeout=90, interval=2)
    _check(counts, sent, eos=eos)
    plan = failover(cfg, group, "S3", "T3")
    assert plan.applied and plan.refused is None and plan.skipped_total == 0, plan.describe()
    resumed = _drain(t, group, remote)
    lost = {str(i).encode() for i in range(sent)} - consumed - resumed
    assert not lost, f"the failed-over group skipped {len(lost)} record(s), e.g. {sorted(lost)[:5]}"


@pytest.mark.parametrize("side", ["target", "source"])
def test_exactly_once_through_a_cut_link(
    clusters: tuple[KafkaCluster, KafkaCluster], load_factory: Any, side: str
) -> None:
    s, t = clusters
    cut = t if side == "target" else s
    topic = f"pf.cut.{side}"
    remote = f"S3.{topic}"
    s.create_topic(topic, 2)
    load = load_factory(s, topic, 2)
    with Replicator(_config(s, t, topic, eos=True, tasks=1)) as r:
        wait_for("records copied", lambda: remote in t.topic_names() and _counts(t, remote))
        cut.link.cut()
        try:
            started = time.monotonic()
            seen: list[FlowStatus] = []

            def stall_shown() -> FlowStatus | None:
                seen.append(_flow(r))
                print(f"{time.monotonic() - started:5.1f}s {seen[-1]}")
                return (
                    seen[-1] if seen[-1].state in (FlowState.STALLED, FlowState.DEGRADED) else None
                )

            try:
                stalled = wait_for(
                    f"the stall in the status while the link to the {side} is cut",
                    stall_shown,
                    timeout=STALL_AFTER_S + 25,
                    interval=2.0,
                )
            except AssertionError as exc:
                raise AssertionError(
                    f"{exc}; the last status: {seen[-1] if seen else None}"
                ) from None
            print(f"status after {time.monotonic() - started:.0f}s of the cut: {stalled}")
            time.sleep(max(0.0, CUT_S - (time.monotonic() - started)))
            during = _flow(r)
            assert during.state in (FlowState.STALLED, FlowState.DEGRADED), during
        finally:
            cut.link.heal()
        sent = load.stop()
        counts = _all_arrived(t, remote, sent)
        wait_for(
            "the flow running again by itself",
            lambda: _flow(r).state is FlowState.RUNNING,
            timeout=60,
        )
    _check(counts, sent, eos=True)
