"""Failover and failback on real clusters: nothing lost, refusals, dry runs (the planner itself is
tested in tests/core/test_failover.py)."""

from __future__ import annotations

import random
import threading
import time
from typing import Any, ClassVar

import pytest
from confluent_kafka import Consumer, Producer

from mirrorlib import OffsetAndMetadata, Replicator, TopicPartition
from mirrorlib.runtime.failover import FailoverRefusedError, failover
from mirrorlib.testing import ClusterSet

TP = TopicPartition


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


@pytest.mark.integration
def test_skipping_records_and_an_empty_group_are_refused_unless_allowed(
    two_clusters: ClusterSet,
) -> None:
    from mirrorlib.kafka.groups import GroupAdmin
    from tests.runtime.conftest import commit_group, produce

    a, b = two_clusters
    topic, group = "fo.skip", "fo-skip"
    a.create_topic(topic, 1)
    produce(a, topic, [{"value": str(i).encode()} for i in range(20)])
    cfg = _config(two_clusters, ["A->B"], **{"A->B.topics": "fo\\.skip"})
    with Replicator(cfg):
        _wait("replicated", lambda: _remote_count(b, "A.fo.skip") >= 20)
        _consume_n(a, group, [topic], 10)
    # the group is already at 15 on B: resuming there, it would never read records 10..14
    commit_group(b, group, "A.fo.skip", {0: 15})
    for dry_run in (True, False):
        with pytest.raises(FailoverRefusedError, match="A.fo.skip-0: 5") as refused:
            failover(cfg, group, "A", "B", dry_run=dry_run)
        assert "--allow-skip" in str(refused.value)
        assert refused.value.plan.skipped_total == 5
    plan = failover(cfg, group, "A", "B", allow_skip=True)
    (part,) = plan.partitions
    assert (part.translated, part.current, part.skipped) == (10, 15, 5)
    assert plan.refused is None and plan.offsets == {}
    admin = GroupAdmin(b.client_config(), alias="B")
    assert admin.committed_offsets(group)[TP("A.fo.skip", 0)].offset == 15  # never rewound

    # a mistyped group: nothing to move, refused; allowed, it commits nothing
    with pytest.raises(FailoverRefusedError, match="'fo-nosuch' has no committed offsets on A"):
        failover(cfg, "fo-nosuch", "A", "B")
    plan = failover(cfg, "fo-nosuch", "A", "B", allow_empty=True)
    assert plan.partitions == () and not plan.applied
    assert admin.committed_offsets("fo-nosuch") == {}


@pytest.mark.integration
def test_a_group_whose_state_the_reachable_old_cluster_does_not_tell_is_refused(
    kafka_clusters: Any, two_clusters: ClusterSet, tmp_path: Any, capsys: Any
) -> None:
    """The old cluster answers, but the failover's user may not describe the group there (no
    DESCRIBE ACL): its state is unknown, and it may still be consuming. The failover is refused
    (exit code 5, naming the group, the cluster and the error) unless ``--force``; it used to
    pass as "unreachable" and commit the checkpoints' offsets."""
    import uuid

    import javaproperties

    from mirrorlib import Checkpoint
    from mirrorlib.cli import EXIT_OK, EXIT_REFUSED, main
    from mirrorlib.kafka.groups import GroupAdmin
    from mirrorlib.testing.pytest_plugin import ACL_TEST_USERS
    from tests.runtime.conftest import FAST, commit_group

    (src,) = kafka_clusters(["ACL"], acl=True, users=ACL_TEST_USERS)
    b = two_clusters[1]
    tag = uuid.uuid4().hex[:8]
    topic, group = f"foacl.{tag}", f"fo-acl-{tag}"
    src.create_topic(topic, 1)
    commit_group(src, group, topic, {0: 5})  # as the admin user: the group exists, is empty
    remote = f"ACL.{topic}"
    b.create_topic(remote, 1)
    write_checkpoint(b, "ACL", Checkpoint(group, remote, 0, 5, 5))

    props = {"clusters": "ACL, B", "ACL->B.enabled": "true", **FAST}
    for k, v in src.java_client_config(user="alice").items():  # alice: no ACL on the group
        props[f"ACL.{k}"] = v
    props["B.bootstrap.servers"] = b.bootstrap_servers
    path = tmp_path / "mm2.properties"
    path.write_text(javaproperties.dumps(props), encoding="utf-8")
    argv = ["failover", str(path), "--group", group, "--from", "ACL", "--to", "B"]
    target = GroupAdmin(b.client_config(), alias="B")

    for extra in ([], ["--dry-run"]):
        code = main([*argv, *extra, "--timeout", "10"])
        out, err = capsys.readouterr()
        assert code == EXIT_REFUSED, out + err
        assert f"the state of group '{group}' on ACL is unknown" in err, err
        assert "GROUP_AUTHORIZATION_FAILED" in err and "--force" in err, err
        assert "REFUSED" in out
        assert "alice-secret" not in out + err
    assert target.committed_offsets(group) == {}  # nothing committed

    code = main([*argv, "--force", "--timeout", "10"])
    out, err = capsys.readouterr()
    assert code == EXIT_OK, out + err
    assert "forced" in out and "committed on B" in out
    assert target.committed_offsets(group) == {TP(remote, 0): OffsetAndMetadata(5)}


class _FakeAdmin:
    """A GroupAdmin whose describe answers with the next of ``answers`` (shared by every
    instance: each retry makes a new client)."""

    made: ClassVar[list[_FakeAdmin]] = []
    answers: ClassVar[list[tuple[str, str | None]]] = []

    def __init__(self, _config: Any, *, alias: str, timeout: float) -> None:
        self.alias = alias
        _FakeAdmin.made.append(self)

    def describe_state(self, group: str) -> tuple[Any, Any]:
        from mirrorlib.errors import KafkaRequestError
        from mirrorlib.kafka.groups import GroupState

        state, code = _FakeAdmin.answers.pop(0)
        error = (
            None if code is None else KafkaRequestError(f"describing {group}: {code}", code=code)
        )
        return GroupState(state), error


@pytest.mark.parametrize(
    ("answers", "attempts", "state", "code"),
    [
        # a coordinator loading, then moved: retried with a new client each time, then answered
        ([("unknown", "COORDINATOR_LOAD_IN_PROGRESS"), ("unknown", "NOT_COORDINATOR"),
          ("empty", None)], 3, "empty", None),
        # an authorization error: final at once
        ([("unknown", "GROUP_AUTHORIZATION_FAILED")], 1, "unknown", "GROUP_AUTHORIZATION_FAILED"),
    ],
)  # fmt: skip
def test_retriable_errors_of_the_old_cluster_are_retried_with_fresh_clients(
    monkeypatch: pytest.MonkeyPatch,
    answers: list[tuple[str, str | None]],
    attempts: int,
    state: str,
    code: str | None,
) -> None:
    from mirrorlib import MirrorConfig
    from mirrorlib.kafka import groups
    from mirrorlib.runtime import failover as runtime_failover

    monkeypatch.setattr(groups, "GroupAdmin", _FakeAdmin)
    monkeypatch.setattr(runtime_failover.time, "sleep", lambda _s: None)
    _FakeAdmin.made, _FakeAdmin.answers = [], list(answers)
    cfg = MirrorConfig.from_properties(
        {"clusters": "A, B", "A.bootstrap.servers": "127.0.0.1:1",
         "B.bootstrap.servers": "127.0.0.1:2", "A->B.enabled": "true"}
    )  # fmt: skip
    _admin, found, error = runtime_failover._describe_source(cfg, "A", "g", 30.0)
    assert len(_FakeAdmin.made) == attempts  # a new client (fresh metadata) per attempt
    assert str(found) == state
    assert (None if error is None else error.code) == code


def test_a_retriable_error_that_persists_ends_as_unknown_within_the_retry_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mirrorlib import MirrorConfig
    from mirrorlib.kafka import groups
    from mirrorlib.runtime import failover as runtime_failover

    clock = [0.0]
    monkeypatch.setattr(groups, "GroupAdmin", _FakeAdmin)
    monkeypatch.setattr(runtime_failover.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(
        runtime_failover.time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s)
    )
    _FakeAdmin.made, _FakeAdmin.answers = [], [("unknown", "NOT_COORDINATOR")] * 1000
    cfg = MirrorConfig.from_properties(
        {"clusters": "A, B", "A.bootstrap.servers": "127.0.0.1:1",
         "B.bootstrap.servers": "127.0.0.1:2", "A->B.enabled": "true"}
    )  # fmt: skip
    _admin, found, error = runtime_failover._describe_source(cfg, "A", "g", 30.0)
    assert str(found) == "unknown" and error is not None and error.code == "NOT_COORDINATOR"
    assert 2 < len(_FakeAdmin.made) < 100
    assert clock[0] <= runtime_failover.SOURCE_RETRY_S


@pytest.mark.integration
def test_an_old_cluster_that_does_not_answer_at_all_fails_over_with_the_checkpoints(
    two_clusters: ClusterSet, tmp_path: Any, capsys: Any
) -> None:
    """The disaster case: nothing answers on the old cluster (no broker listens there). The
    failover proceeds with the checkpoints on the new cluster, and says so."""
    import uuid

    import javaproperties

    from mirrorlib import Checkpoint
    from mirrorlib.cli import EXIT_OK, main
    from mirrorlib.kafka.groups import GroupAdmin
    from tests.runtime.conftest import FAST

    b = two_clusters[1]
    tag = uuid.uuid4().hex[:8]
    group, remote = f"fo-down-{tag}", f"DOWN.fodown.{tag}"
    b.create_topic(remote, 1)
    write_checkpoint(b, "DOWN", Checkpoint(group, remote, 0, 7, 7))
    props = {"clusters": "DOWN, B", "DOWN->B.enabled": "true", **FAST,
             "DOWN.bootstrap.servers": "127.0.0.1:1", "B.bootstrap.servers": b.bootstrap_servers}  # fmt: skip
    path = tmp_path / "mm2.properties"
    path.write_text(javaproperties.dumps(props), encoding="utf-8")
    # 10 s: the checkpoints topic was created a moment ago, and its leader must be found in time
    code = main(["failover", str(path), "--group", group, "--from", "DOWN", "--to", "B",
                 "--timeout", "10"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == EXIT_OK, out + err
    assert "DOWN is unreachable" in out and "committed on B" in out
    target = GroupAdmin(b.client_config(), alias="B")
    assert target.committed_offsets(group) == {TP(remote, 0): OffsetAndMetadata(7)}


def test_a_group_active_on_the_old_cluster_stays_active_when_its_offsets_are_unreadable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Active there, even if its offsets cannot be read: refused, and --force does not
    override it (only an unknown state is forced)."""
    from mirrorlib import MirrorConfig
    from mirrorlib.errors import ClusterError
    from mirrorlib.kafka import groups
    from mirrorlib.runtime import failover as runtime_failover

    class Unreadable(_FakeAdmin):
        def committed_offsets(self, group: str) -> Any:
            raise ClusterError(f"cluster A: listing offsets of group {group} failed: boom")

    monkeypatch.setattr(groups, "GroupAdmin", Unreadable)
    _FakeAdmin.made, _FakeAdmin.answers = [], [("active", None)]
    cfg = MirrorConfig.from_properties(
        {"clusters": "A, B", "A.bootstrap.servers": "127.0.0.1:1",
         "B.bootstrap.servers": "127.0.0.1:2", "A->B.enabled": "true"}
    )  # fmt: skip
    notes: list[str] = []
    state, offsets, why = runtime_failover._source_group(cfg, cfg.flow("A", "B"), "g", 30, notes)
    assert (state, offsets, why, notes) == ("active", None, None, [])


def write_checkpoint(cluster: Any, source_alias: str, checkpoint: Any) -> None:
    """Write ``checkpoint`` to ``<source_alias>.checkpoints.internal`` on ``cluster`` (created
    compacted if missing; another test of the session may create it meanwhile)."""
    from tests.runtime.conftest import produce

    topic = f"{source_alias}.checkpoints.internal"
    if topic not in cluster.topic_names():
        try:
            cluster.create_topic(topic, 1, config={"cleanup.policy": "compact"})
        except Exception:  # created meanwhile by another test of the session
            pass
    produce(cluster, topic, [{"key": checkpoint.encode_key(), "value": checkpoint.encode_value()}])
