"""A source topic written by a transactional producer: committed and aborted transactions
interleaved with plain records, replicated with the default settings (at-least-once), exactly-once
and ``tasks.max=2``. Readers of the target see the committed records only, once and in order
(``read_committed`` and ``read_uncommitted`` alike); status shows no lag although each partition
ends with a commit marker; ``verify`` finds no difference; a consumer group whose committed offsets
point at markers, into and after aborted ranges fails over skipping nothing and re-reading
nothing."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mirrorlib import MirrorConfig, Replicator
from mirrorlib.runtime.failover import FailoverRefusedError, failover
from mirrorlib.runtime.operations import flow_status, verify_flow
from mirrorlib.testing import BaseCluster, ClusterSet
from tests.runtime.conftest import config, read_all, wait_for

pytestmark = pytest.mark.integration

PARTITIONS = 2

# The source log of each partition (offsets): plain records, transactions committed (c) and
# aborted (a) with their markers (M), and a commit marker at the very end.
#   0-4 plain | 5-14 c1, 15 M | 16-25 a1, 26 M | 27-36 c2, 37 M | 38-47 a2, 48 M |
#   49-53 plain | 54-63 c3, 64 M  (end offset 65)
PHASES: tuple[tuple[str, str, int], ...] = (
    ("n0", "plain", 5),
    ("c1", "commit", 10),
    ("a1", "abort", 10),
    ("c2", "commit", 10),
    ("a2", "abort", 10),
    ("n1", "plain", 5),
    ("c3", "commit", 10),
)
END = 65

# Committed offsets of the groups on the source, (partition 0, partition 1): at and after
# commit markers, inside, at and after aborted ranges, at the trailing marker and the end.
GROUPS: tuple[tuple[int, int], ...] = (
    (0, 5),
    (15, 16),
    (20, 26),
    (27, 37),
    (49, 64),
    (END, 60),
)


def write_source(a: BaseCluster, topic: str) -> list[str]:
    """Write :data:`PHASES` to every partition of ``topic``; the committed values in order."""
    a.create_topic(topic, PARTITIONS)
    plain = Producer({**a.client_config(), "enable.idempotence": True})
    txn = Producer({**a.client_config(), "transactional.id": f"{topic}-writer"})
    txn.init_transactions(30)
    committed: list[str] = []
    for name, kind, n in PHASES:
        if kind != "plain":
            txn.begin_transaction()
        for i in range(n):
            for p in range(PARTITIONS):
                (plain if kind == "plain" else txn).produce(
                    topic, f"{name}-{i}".encode(), partition=p
                )
        if kind == "plain":
            assert plain.flush(30) == 0
        elif kind == "commit":
            txn.commit_transaction(30)
        else:
            assert txn.flush(30) == 0  # the records reach the log before the abort
            txn.abort_transaction(30)
        if kind != "abort":
            committed += [f"{name}-{i}" for i in range(n)]
    check = Consumer({**a.client_config(), "group.id": "tx-layout"})
    try:
        for p in range(PARTITIONS):
            ends = check.get_watermark_offsets(KafkaTopicPartition(topic, p), timeout=30)
            assert ends == (0, END), f"{topic}-{p}: {ends}, not the layout of PHASES"
    finally:
        check.close()
    return committed


def count(cluster: BaseCluster, topic: str) -> int:
    """Records of ``topic`` a ``read_committed`` reader sees (0 while it does not exist)."""
    if topic not in cluster.topic_names():
        return 0
    return len(read_all(cluster, topic, read_committed=True))


def wait_empty(what: str, probe: Any, timeout: float = 60.0) -> None:
    """Wait until ``probe()`` returns nothing; fail with what it returned last."""
    last: list[Any] = []

    def empty() -> bool:
        last[:] = probe()
        return not last

    try:
        wait_for(what, empty, timeout)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {last}") from None


def by_partition(records: list[Any]) -> dict[int, list[tuple[int, str]]]:
    out: dict[int, list[tuple[int, str]]] = {p: [] for p in range(PARTITIONS)}
    for m in records:
        out[m.partition()].append((m.offset(), m.value().decode()))
    return out


def commit_group(a: BaseCluster, group: str, topic: str, offsets: tuple[int, ...]) -> None:
    c = Consumer({**a.client_config(), "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(
            offsets=[KafkaTopicPartition(topic, p, o) for p, o in enumerate(offsets)],
            asynchronous=False,
        )
    finally:
        c.close()


def read_from(b: BaseCluster, topic: str, partition: int, offset: int) -> list[str]:
    """The values a ``read_committed`` reader of ``topic``-``partition`` gets from ``offset``."""
    c = Consumer(
        {**b.client_config(), "group.id": "tx-reader", "isolation.level": "read_committed"}
    )
    try:
        _, end = c.get_watermark_offsets(KafkaTopicPartition(topic, partition), timeout=30)
        if offset >= end:
            return []
        c.assign([KafkaTopicPartition(topic, partition, offset)])
        got: list[str] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            got += [m.value().decode() for m in c.consume(500, timeout=0.2) if m.error() is None]
            if c.position([KafkaTopicPartition(topic, partition)])[0].offset >= end:
                return got
        raise AssertionError(f"{topic}-{partition}: not read to {end} from {offset}: {got}")
    finally:
        c.close()


def expected_translation(
    source: list[tuple[int, str]], target: list[tuple[int, str]], committed: int
) -> int | None:
    """The target offset a group that committed ``committed`` on the source must resume at:
    that of the copy of its first unprocessed record (``None``: it processed everything)."""
    up = dict((v, o) for o, v in source)
    for offset, value in target:
        if up[value] >= committed:
            return offset
    return None


@pytest.fixture
def tx_source(
    two_clusters: ClusterSet, request: pytest.FixtureRequest
) -> Iterator[tuple[str, list[str]]]:
    a, _ = two_clusters
    topic = f"txs.{request.node.callspec.id}"
    yield topic, write_source(a, topic)


MODES = {
    "alo": {},
    "eos": {"B.exactly.once.source.support": "enabled"},
    "tasks2": {"tasks.max": "2"},
}


@pytest.mark.parametrize("mode", list(MODES))
def test_only_committed_records_are_copied_and_the_group_fails_over_exactly(
    two_clusters: ClusterSet, tx_source: tuple[str, list[str]], mode: str
) -> None:
    a, b = two_clusters
    topic, committed = tx_source
    remote = f"A.{topic}"
    groups = [f"txs-{mode}-g{i}" for i in range(len(GROUPS))]
    for group, offsets in zip(groups, GROUPS, strict=True):
        commit_group(a, group, topic, offsets)
    cfg = config(
        two_clusters, ["A->B"],
        **{"A->B.topics": topic.replace(".", "\\."), "A->B.groups": f"txs-{mode}-.*"},
        **MODES[mode],
    )  # fmt: skip
    flow = cfg.flow("A", "B")
    with Replicator(cfg) as r:
        wait_for(
            "every committed record on B",
            lambda: count(b, remote) >= len(committed) * PARTITIONS,
            timeout=120,
        )

        def caught_up() -> bool:
            mine = [p for p in r.status()[0].partitions if p.topic == topic]
            return len(mine) == PARTITIONS and all(p.lag_records == 0 for p in mine)

        wait_for("no lag in the replicator's status", caught_up)
        source = by_partition(read_all(a, topic, read_committed=True))
        for readers_committed in (True, False):
            on_b = by_partition(read_all(b, remote, read_committed=readers_committed))
            for p in range(PARTITIONS):
                assert [v for _, v in on_b[p]] == committed, (p, readers_committed)
        wait_empty(
            "no lag in `mirrorlib status` (positions stored on B)",
            lambda: [
                (p.partition, p.position, p.end_offset, p.lag_records)
                for p in flow_status(cfg, flow).partitions
                if p.topic == topic and p.lag_records != 0
            ],
        )
        target = by_partition(read_all(b, remote, read_committed=True))

        report = verify_flow(cfg, flow, topic.replace(".", "\\."))
        totals = report.totals()
        assert report.ok, report.describe()
        assert (totals["missing"], totals["duplicated"], totals["extra"]) == (0, 0, 0), totals
        assert totals["matched"] == len(committed) * PARTITIONS, totals

        # every group: its translated offsets are those of its first unprocessed record
        expected = {
            group: {
                p: expected_translation(source[p], target[p], offsets[p]) for p in range(PARTITIONS)
            }
            for group, offsets in zip(groups, GROUPS, strict=True)
        }

        seen: dict[str, Any] = {}

        def exact(group: str) -> Any:
            try:
                plan = failover(cfg, group, "A", "B", dry_run=True)
            except FailoverRefusedError as exc:
                seen[group] = exc
                return None
            seen[group] = plan.describe()
            got = {x.partition: x.translated for x in plan.partitions if x.topic == remote}
            want = expected[group]
            ok = all(
                got.get(p) == want[p]
                if want[p] is not None
                else got.get(p) is not None and got[p] > target[p][-1][0]
                for p in range(PARTITIONS)
            )
            return plan if ok else None

        # the newest syncs (the last records) are written last: once the group at the end
        # translates exactly, every sync is there
        last = groups[-1]
        try:
            wait_for(f"{last} translated exactly", lambda: exact(last), timeout=60)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nlast plan: {seen.get(last)}") from None
        for group, offsets in zip(groups, GROUPS, strict=True):
            plan = failover(cfg, group, "A", "B")
            print(
                f"{mode} {group} committed {offsets}: "
                + ", ".join(
                    f"p{x.partition} -> {x.translated} (re-read {x.re_read}, skipped {x.skipped})"
                    for x in plan.partitions
                )
            )
            assert plan.applied and plan.skipped_total == 0
            got = {x.partition: x.translated for x in plan.partitions}
            for p, want in expected[group].items():
                if want is None:  # everything processed: at or past the last copy's end
                    assert got[p] is not None and got[p] > target[p][-1][0], (group, p, got)
                else:
                    assert got[p] == want, (group, p, got, expected[group], plan.describe())
            for x in plan.partitions:
                assert x.translated is not None
                resumed = read_from(b, remote, x.partition, x.translated)
                first = offsets[x.partition]
                unprocessed = [v for o, v in source[x.partition] if o >= first]
                assert resumed == unprocessed, (group, x.partition)


def test_read_uncommitted_is_honoured_with_a_warning(
    two_clusters: ClusterSet, caplog: pytest.LogCaptureFixture
) -> None:
    a, b = two_clusters
    topic = "txs.dirty"
    committed = write_source(a, topic)
    cfg: MirrorConfig = config(
        two_clusters, ["A->B"],
        **{"A->B.topics": "txs\\.dirty", "A.consumer.isolation.level": "read_uncommitted"},
    )  # fmt: skip
    every = sum(n for _, _, n in PHASES)
    with caplog.at_level(logging.WARNING), Replicator(cfg):
        wait_for(
            "every record on B, aborted ones included",
            lambda: count(b, f"A.{topic}") >= every * PARTITIONS,
            timeout=120,
        )
    warned = [
        r.getMessage() for r in caplog.records if "A.consumer.isolation.level" in r.getMessage()
    ]
    assert warned, "no warning names A.consumer.isolation.level"
    assert "records of aborted transactions will be copied to B as committed" in warned[0]
    assert len(committed) < every


def test_an_open_source_transaction_is_not_lag(two_clusters: ClusterSet) -> None:
    """Records of a source transaction still open are not copyable yet (read_committed): the
    replicator's status and `mirrorlib status` show no lag for them (the end is the last stable
    offset), so a producer that keeps its transactions open for long does not make the flow look
    stalled; once committed they are copied."""
    a, b = two_clusters
    topic = "txs.open"
    a.create_topic(topic, 1)
    plain = Producer(a.client_config())
    for i in range(5):
        plain.produce(topic, f"p-{i}".encode(), partition=0)
    assert plain.flush(30) == 0
    txn = Producer({**a.client_config(), "transactional.id": f"{topic}-writer"})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(7):
        txn.produce(topic, f"t-{i}".encode(), partition=0)
    assert txn.flush(30) == 0  # in the log, not committed
    cfg = config(two_clusters, ["A->B"], **{"A->B.topics": "txs\\.open"})
    try:
        with Replicator(cfg) as r:
            wait_for("the committed records on B", lambda: count(b, f"A.{topic}") >= 5)
            wait_empty(
                "no lag in the replicator's status while the transaction is open",
                lambda: [
                    (p.position, p.end_offset, p.lag_records)
                    for p in r.status()[0].partitions
                    if p.topic == topic and p.lag_records != 0
                ],
            )
            wait_empty(
                "no lag in `mirrorlib status` while the transaction is open",
                lambda: [
                    (p.position, p.end_offset, p.lag_records)
                    for p in flow_status(cfg, cfg.flow("A", "B")).partitions
                    if p.topic == topic and p.lag_records != 0
                ],
            )
            assert count(b, f"A.{topic}") == 5
            txn.commit_transaction(30)
            wait_for("the transaction's records on B", lambda: count(b, f"A.{topic}") >= 12)
        got = [m.value().decode() for m in read_all(b, f"A.{topic}")]
        assert got == [f"p-{i}" for i in range(5)] + [f"t-{i}" for i in range(7)]
    finally:
        with contextlib.suppress(Exception):
            txn.abort_transaction(5)
