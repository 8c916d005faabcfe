"""Failover and failback: the pure planner, reverse translation, and real clusters."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from mirrorlib import Checkpoint, OffsetAndMetadata, OffsetSync, Replicator, TopicPartition
from mirrorlib.core.syncs import SyncLineage
from mirrorlib.core.translate import OffsetTranslator
from mirrorlib.runtime.failover import (
    FailoverAction,
    FailoverRefusedError,
    failover,
    plan_failover,
    reverse_translate,
)
from mirrorlib.testing import ClusterSet

TP = TopicPartition


def _plan(**overrides: Any) -> Any:
    args: dict[str, Any] = dict(
        policy_rename=lambda t: f"A.{t}",
        is_from_target=lambda t: t.startswith("B."),
        upstream_topic=lambda t: t.split(".", 1)[1] if "." in t else None,
        should_replicate=lambda t: not t.startswith("skip"),
        source_state="empty",
        target_state="absent",
        source_offsets={},
        target_offsets={},
        checkpoints={},
        forward=None,
        backward=None,
    )
    args.update(overrides)
    return plan_failover("g", "A", "B", **args)


def exact_translator(topic: str, up: int, down: int, n: int, step: int = 10) -> OffsetTranslator:
    """Syncs of one writer for records up..up+n copied 1:1 to down..down+n (one exact run)."""
    t = OffsetTranslator()
    for seq, i in enumerate(range(0, n + 1, step)):
        t.add(OffsetSync(topic, 0, up + i, down + i), SyncLineage("w", seq))
    return t


# -- pure -----------------------------------------------------------------------------------


def test_refuses_a_group_still_active_on_the_old_cluster() -> None:
    plan = _plan(source_state="active")
    assert plan.refused is not None and "still has active members on A" in plan.refused
    assert "Stop its consumers on A" in plan.refused


def test_refuses_a_group_active_on_the_new_cluster() -> None:
    plan = _plan(target_state="active")
    assert plan.refused is not None and "active members on B" in plan.refused
    assert "REFUSED" in plan.describe()


def test_fresh_translation_is_exact_and_reports_no_re_read() -> None:
    fwd = exact_translator("orders", 0, 0, 100)
    plan = _plan(source_offsets={TP("orders", 0): OffsetAndMetadata(57, "m")}, forward=fwd)
    (p,) = plan.partitions
    assert (p.topic, p.translated, p.re_read, p.action, p.method) == (
        "A.orders",
        57,
        0,
        FailoverAction.COMMIT,
        "offset-syncs",
    )
    assert plan.offsets == {TP("A.orders", 0): OffsetAndMetadata(57, "m")}


def test_checkpoint_used_when_no_sync_covers_and_re_read_counted() -> None:
    fwd = exact_translator("orders", 0, 0, 100)
    fwd.forget("orders", 0)
    cp = Checkpoint("g", "A.orders", 0, 40, 40)
    plan = _plan(
        source_offsets={TP("orders", 0): OffsetAndMetadata(50)},
        checkpoints={TP("A.orders", 0): cp},
        forward=None,
    )
    (p,) = plan.partitions
    assert p.translated == 40 and p.method == "checkpoint" and p.re_read is None
    # with exact syncs known, the re-read of a checkpoint is counted: 50 - 40
    fwd = exact_translator("orders", 0, 0, 100)
    plan = _plan(
        source_offsets={TP("orders", 0): OffsetAndMetadata(50)},
        checkpoints={TP("A.orders", 0): cp},
        forward=fwd,
    )
    assert plan.partitions[0].translated == 50  # fresher than the checkpoint


def test_old_cluster_unreachable_uses_checkpoints() -> None:
    cps = {TP("A.orders", p): Checkpoint("g", "A.orders", p, 10 * p, 10 * p) for p in range(3)}
    plan = _plan(source_offsets=None, source_state="unreachable", checkpoints=cps)
    assert [p.translated for p in plan.partitions] == [0, 10, 20]
    assert all(p.method == "checkpoint" for p in plan.partitions)
    assert plan.refused is None


def test_never_rewinds_the_target_group() -> None:
    fwd = exact_translator("orders", 0, 0, 100)
    plan = _plan(
        source_offsets={TP("orders", 0): OffsetAndMetadata(30)},
        forward=fwd,
        target_offsets={TP("A.orders", 0): OffsetAndMetadata(70)},
        target_state="empty",
    )
    (p,) = plan.partitions
    assert p.action is FailoverAction.KEEP and p.current == 70 and plan.offsets == {}


def test_rewound_group_below_its_checkpoint_is_skipped() -> None:
    cp = Checkpoint("g", "A.orders", 0, 80, 80)
    plan = _plan(
        source_offsets={TP("orders", 0): OffsetAndMetadata(20)}, checkpoints={TP("A.orders", 0): cp}
    )
    (p,) = plan.partitions
    assert p.action is FailoverAction.SKIP and "rewound" in p.reason


def test_unreplicated_topics_are_ignored_and_unknown_target_partitions_kept() -> None:
    plan = _plan(
        source_offsets={TP("skip.me", 0): OffsetAndMetadata(5)},
        target_offsets={TP("local", 0): OffsetAndMetadata(9)},
        target_state="empty",
    )
    (p,) = plan.partitions
    assert p.topic == "local" and p.action is FailoverAction.KEEP


def test_failback_translates_backwards_with_the_opposite_flows_syncs() -> None:
    # the group consumed B.orders (a copy of B's orders) on A up to 33; B's orders 100.. -> 0..
    back = exact_translator("orders", 100, 0, 50)
    plan = _plan(source_offsets={TP("B.orders", 0): OffsetAndMetadata(33)}, backward=back)
    (p,) = plan.partitions
    assert (p.topic, p.translated, p.re_read, p.method) == (
        "orders",
        133,
        0,
        "reverse-offset-syncs",
    )


def test_reverse_translate_is_safe_without_runs() -> None:
    t = OffsetTranslator()
    t.add(OffsetSync("t", 0, 10, 5))
    t.add(OffsetSync("t", 0, 30, 9))  # a gap upstream: not exact
    assert reverse_translate(t, "t", 0, 9) == (30, True)  # record 30 not consumed yet
    assert reverse_translate(t, "t", 0, 10) == (31, True)  # right after 30: exact
    assert reverse_translate(t, "t", 0, 12) == (31, False)  # 30 consumed; 31.. unknown
    assert reverse_translate(t, "t", 0, 7) == (11, False)  # only 10 is known consumed
    assert reverse_translate(t, "t", 0, 4) is None
    exact = exact_translator("t", 0, 0, 100)
    assert reverse_translate(exact, "t", 0, 42) == (42, True)
    assert reverse_translate(exact, "t", 0, 101) == (101, True)
    assert reverse_translate(exact, "t", 0, 150) == (101, False)


def test_plan_json_and_describe() -> None:
    fwd = exact_translator("orders", 0, 0, 100)
    plan = _plan(source_offsets={TP("orders", 0): OffsetAndMetadata(57)}, forward=fwd)
    d = plan.to_dict()
    assert d["partitions"][0]["translated"] == 57 and d["re_read_total"] == 0
    assert "A.orders-0" in plan.describe()


# -- real clusters ----------------------------------------------------------------------------


def _config(clusters: ClusterSet, flows: list[str], **extra: str) -> Any:
    from tests.runtime.conftest import config

    return config(clusters, flows, **extra)


def _consume_n(
    cluster: Any, group: str, topics: list[str], n: int, timeout: float = 30
) -> list[Any]:
    """Consume exactly ``n`` records (in order per partition) and commit their positions."""
    c = Consumer(
        {
            **cluster.client_config(),
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe(topics)
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < n and time.monotonic() < deadline:
            for m in c.consume(n - len(got), timeout=0.5):
                if m.error() is None:
                    got.append(m)
        if got:
            c.commit(asynchronous=False)
    finally:
        c.close()
    assert len(got) == n, f"consumed {len(got)} of {n}"
    return got


def _drain(cluster: Any, group: str, topics: list[str], idle: float = 4.0) -> list[Any]:
    """Consume from the group's committed offsets until nothing arrives for ``idle`` seconds."""
    c = Consumer(
        {
            **cluster.client_config(),
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe(topics)
    got: list[Any] = []
    last = time.monotonic()
    try:
        while time.monotonic() - last < idle:
            for m in c.consume(500, timeout=0.5):
                if m.error() is None:
                    got.append(m)
                    last = time.monotonic()
    finally:
        c.close()
    return got


def _wait(what: str, probe: Any, timeout: float = 60) -> Any:
    from tests.runtime.conftest import wait_for

    return wait_for(what, probe, timeout)


def _remote_count(cluster: Any, topic: str) -> int:
    from tests.runtime.conftest import end_offsets

    try:
        return sum(end_offsets(cluster, topic).values())
    except Exception:
        return 0


@pytest.mark.integration
def test_failover_at_a_random_moment_loses_nothing(two_clusters: ClusterSet) -> None:
    a, b = two_clusters
    topic, group = "fo.random", "fo-random"
    a.create_topic(topic, 3)
    cfg = _config(two_clusters, ["A->B"], **{"A->B.topics": "fo\\.random", "A->B.groups": "fo-.*"})
    produced: list[bytes] = []
    stop_producing = threading.Event()

    def produce() -> None:
        p = Producer({**a.client_config(), "linger.ms": 5})
        i = 0
        while not stop_producing.is_set():
            v = f"rec-{i}".encode()
            p.produce(topic, value=v, key=str(i % 11).encode())
            produced.append(v)
            i += 1
            if i % 50 == 0:
                p.flush(10)
                time.sleep(0.02)
        assert p.flush(30) == 0

    processed_a: dict[bytes, int] = {}
    committed_a: dict[int, int] = {}
    stop_at = random.uniform(2.0, 6.0)
    print(f"\nconsumer on A stops after {stop_at:.2f}s")

    def consume_on_a() -> None:
        c = Consumer(
            {
                **a.client_config(),
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        c.subscribe([topic])
        end = time.monotonic() + stop_at
        n = 0
        while time.monotonic() < end:
            for m in c.consume(20, timeout=0.2):
                if m.error() is None:
                    processed_a[m.value()] = m.partition()
                    n += 1
                    if n % 13 == 0:  # commits now and then; the tail is processed, uncommitted
                        c.commit(message=m, asynchronous=False)
                        committed_a[m.partition()] = m.offset() + 1
        c.close()  # a "crash": no final commit

    with Replicator(cfg):
        producer = threading.Thread(target=produce)
        producer.start()
        time.sleep(0.5)
        consumer = threading.Thread(target=consume_on_a)
        consumer.start()
        consumer.join()
        stop_producing.set()
        producer.join()
        _wait("everything replicated", lambda: _remote_count(b, "A.fo.random") >= len(produced))
        plan = failover(cfg, group, "A", "B")
    assert plan.applied and plan.refused is None
    print(plan.describe())
    resumed = _drain(b, group, ["A.fo.random"])
    seen_b = {m.value() for m in resumed}
    lost = set(produced) - set(processed_a) - seen_b
    assert not lost, f"{len(lost)} record(s) lost"
    re_read: dict[int, int] = {p: 0 for p in range(3)}
    for m in resumed:
        if m.value() in processed_a:
            re_read[m.partition()] += 1
    # records processed on A after its last commit are re-read by any at-least-once consumer;
    # what the translation adds on top must be what the plan predicted
    for p in plan.partitions:
        uncommitted = sum(
            1 for v, part in processed_a.items() if part == p.partition
        ) - committed_a.get(p.partition, 0)
        print(
            f"partition {p.partition}: re-read {re_read[p.partition]} record(s) "
            f"({uncommitted} processed after the last commit on A, "
            f"{p.re_read} from the translation)"
        )
        if p.re_read is not None:
            assert re_read[p.partition] == uncommitted + p.re_read
    print(
        f"records produced {len(produced)}, processed on A {len(processed_a)}, "
        f"read on B {len(resumed)}, re-read per partition {re_read}"
    )


@pytest.mark.integration
def test_refused_while_active_and_dry_run_commits_nothing(two_clusters: ClusterSet) -> None:
    a, b = two_clusters
    topic, group = "fo.active", "fo-active"
    a.create_topic(topic, 1)
    p = Producer(a.client_config())
    for i in range(20):
        p.produce(topic, value=str(i).encode())
    p.flush(10)
    cfg = _config(two_clusters, ["A->B"], **{"A->B.topics": "fo\\.active"})
    with Replicator(cfg):
        _wait("replicated", lambda: _remote_count(b, "A.fo.active") >= 20)
        _consume_n(a, group, [topic], 10)
        # still consuming on A: refused, with the explanation
        c = Consumer(
            {
                **a.client_config(),
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        c.subscribe([topic])
        _wait("consumer joined", lambda: c.consume(1, timeout=0.5) or c.assignment())
        with pytest.raises(FailoverRefusedError, match="still has active members on A"):
            failover(cfg, group, "A", "B")
        c.close()
        plan = failover(cfg, group, "A", "B", dry_run=True)
        assert not plan.applied and plan.offsets == {TP("A.fo.active", 0): OffsetAndMetadata(10)}
        from mirrorlib.kafka.groups import GroupAdmin

        admin = GroupAdmin(b.client_config(), alias="B")
        assert admin.committed_offsets(group) == {}
        # active on B: refused too
        cb = Consumer(
            {
                **b.client_config(),
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        cb.subscribe(["A.fo.active"])
        _wait("consumer joined on B", lambda: cb.consume(1, timeout=0.5) or cb.assignment())
        with pytest.raises(FailoverRefusedError, match="active members on B"):
            failover(cfg, group, "A", "B")
        cb.close()


@pytest.mark.integration
def test_failback_loses_nothing_and_re_reads_nothing(two_clusters: ClusterSet) -> None:
    """A->B failover, production and consumption on B, then back to A (runbook in
    docs/failover.md): replicate in both directions, `failover --from B --to A`."""
    a, b = two_clusters
    topic, group = "fb.orders", "fb-group"
    a.create_topic(topic, 2)
    b.create_topic(topic, 2)
    cfg = _config(two_clusters, ["A->B", "B->A"], **{"topics": "fb\\.orders", "groups": "fb-.*"})

    def produce(cluster: Any, start: int, n: int) -> list[bytes]:
        p = Producer(cluster.client_config())
        values = [f"{cluster.alias}-{i}".encode() for i in range(start, start + n)]
        for i, v in enumerate(values):
            p.produce(topic, value=v, partition=i % 2)
        assert p.flush(10) == 0
        return values

    with Replicator(cfg):
        on_a = produce(a, 0, 100)
        _wait("A->B copy", lambda: _remote_count(b, "A.fb.orders") >= 100)
        first = _consume_n(a, group, [topic], 60)
        plan = failover(cfg, group, "A", "B")
        assert plan.applied and plan.re_read_total == 0, plan.describe()
        # on B: producers now write to B's fb.orders, the group reads both topics
        on_b = produce(b, 0, 50)
        second = _consume_n(b, group, ["A.fb.orders", topic], 60)
        _wait("B->A copy", lambda: _remote_count(a, "B.fb.orders") >= 50)
        back = failover(cfg, group, "B", "A")
        print("\n" + back.describe())
    assert back.applied
    methods = {p.topic: p.method for p in back.partitions}
    assert methods == {"fb.orders": "reverse-offset-syncs", "B.fb.orders": "offset-syncs"}
    third = _drain(a, group, [topic, "B.fb.orders"])
    values = [m.value() for m in first + second + third]
    assert set(values) == set(on_a) | set(on_b), "records lost"
    re_read = len(values) - len(set(values))
    print(f"failback re-read {re_read} record(s)")
    assert re_read == 0
