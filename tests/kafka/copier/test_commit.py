"""The committers without a broker: acknowledged records become positions and offset syncs, written
every flush (at-least-once) or with the transaction that holds them (exactly-once)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirrorlib import MirrorConfig
from mirrorlib.core.acks import Acknowledged, InFlight, PartitionProgress
from mirrorlib.core.counters import PartitionStats
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.syncs import OffsetSyncEmitter
from mirrorlib.core.transactions import CAUGHT_UP_MIN_AGE_S, COMMIT_SHARE
from mirrorlib.kafka.copier.commit import (
    Committer,
    PositionCommitter,
    TransactionCommitter,
    committer_for,
)

KEY = ("t", 0)


class Report:
    def __init__(self, offset: int, error: object | None = None) -> None:
        self._offset, self._error = offset, error

    def offset(self) -> int:
        return self._offset

    def error(self) -> object | None:
        return self._error


class Refusal:
    def str(self) -> str:
        return "Broker: Not enough replicas"


class Positions:
    """What a committer uses of a PositionStore."""

    topic = "mm2-offsets.A.internal"

    def __init__(self) -> None:
        self.remembered: dict[tuple[str, int], int] = {}

    def records(self, positions: list[tuple[str, int, int]]) -> list[tuple[int, bytes, bytes]]:
        return [(0, f"{t}-{p}".encode(), str(o).encode()) for t, p, o in positions]

    def remember(self, topic: str, partition: int, offset: int) -> None:
        self.remembered[(topic, partition)] = offset


class Producer:
    """Keeps the position records produced and their delivery callbacks; a commit takes
    ``commit_s`` seconds."""

    def __init__(self) -> None:
        self.produced: list[tuple[str, bytes, Any]] = []
        self.calls: list[str] = []
        self.commit_s = 0.0
        self.refuse: KafkaError | None = None  # produce raises it
        self.full = 0  # polls until the queue takes a record again (produce: BufferError)
        self.polls = 0

    def produce(self, topic: str, value: bytes, key: bytes, partition: int, **kw: Any) -> None:
        if self.refuse is not None:
            raise KafkaException(self.refuse)
        if self.full:
            raise BufferError("Local: Queue full")
        self.produced.append((topic, value, kw["on_delivery"]))

    def flush(self, _timeout: float) -> int:
        self.calls.append("flush")
        return 0

    def poll(self, _timeout: float) -> int:
        self.polls += 1
        self.full = max(self.full - 1, 0)
        return 0

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def commit_transaction(self, _timeout: float) -> None:
        time.sleep(self.commit_s)
        self.calls.append("commit")

    def abort_transaction(self, _timeout: float) -> None:
        self.calls.append("abort")


class Flow:
    """A committer with its partition, emitter, sync sender and rewinds."""

    def __init__(self, **extra: str) -> None:
        props = {
            "clusters": "A, B",
            "A.bootstrap.servers": "127.0.0.1:1",
            "B.bootstrap.servers": "127.0.0.1:2",
            "A->B.enabled": "true",
            "offset.lag.max": "10",
            **extra,
        }
        cfg = MirrorConfig.from_properties("\n".join(f"{k}={v}" for k, v in props.items()))
        self.settings = FlowSettings.from_config(cfg, cfg.flow("A", "B"))
        self.emitter = OffsetSyncEmitter(offset_lag_max=self.settings.offset_lag_max)
        self.part = PartitionProgress(KEY, PartitionStats("A.t"), lambda _: None)
        self.parts = {KEY: self.part}
        self.positions = Positions()
        self.sent: list[tuple[int, int]] = []
        self.rewound: list[PartitionProgress] = []
        self.drained = 0
        self.committer: Committer = committer_for(self.settings)(
            self.settings,
            self.positions,  # type: ignore[arg-type]
            self.emitter,
            self.parts,
            send_syncs=self.send_syncs,
            drain_acks=self.drain,
            rewind=self.rewound.append,
        )
        self.producer = Producer()
        self.committer.open(self.producer)

    def send_syncs(self) -> None:  # takes every due sync at once, as OffsetSyncWriter does
        self.sent += [
            (e.sync.upstream_offset, e.sync.downstream_offset) for e in self.emitter.take_pending()
        ]

    def drain(self) -> None:
        self.drained += 1

    def acknowledge(self, upstream: list[int], downstream: list[int]) -> Acknowledged:
        part: InFlight = self.part
        for up in upstream:
            part.produced(up)
        for down in downstream:
            part.on_delivery(None, Report(down))
        acks = part.take(None)
        assert acks is not None
        self.committer.acknowledged(self.part, acks)
        return acks


def test_the_flow_picks_its_committer() -> None:
    assert isinstance(Flow().committer, PositionCommitter)
    eos = Flow(**{"B.exactly.once.source.support": "enabled"}).committer
    assert isinstance(eos, TransactionCommitter)


def test_an_acknowledged_run_moves_the_position_and_sends_every_due_sync() -> None:
    flow = Flow()
    flow.acknowledge(list(range(100, 150)), list(range(1000, 1050)))
    committer = flow.committer
    assert isinstance(committer, PositionCommitter)
    assert flow.part.acked == 149 and flow.part.stats.position == 150
    assert flow.part.stats.record_count == 50  # counted when acknowledged
    assert committer.unwritten == {KEY}
    # offset.lag.max=10: the first record, then every 11 records (as one record() per record)
    assert flow.sent == [(100, 1000), (111, 1011), (122, 1022), (133, 1033), (144, 1044)]
    flow.emitter.promote_delayed()
    flow.send_syncs()
    assert flow.sent[-1] == (149, 1049)


def test_gaps_are_recorded_one_record_at_a_time() -> None:
    flow = Flow()
    flow.acknowledge([0, 1, 2, 5, 6], [0, 1, 2, 3, 4])  # compaction gap upstream
    assert flow.part.acked == 6
    # the upstream gap makes the record at 5 due (MM2's rule), as one record() each would, and
    # the record before the gap closes the run first (mirrorlib.core.syncs)
    assert flow.sent == [(0, 0), (2, 2), (5, 3)]


def test_positions_are_written_every_flush_and_a_refused_one_again() -> None:
    flow = Flow()
    committer = flow.committer
    assert isinstance(committer, PositionCommitter)
    flow.acknowledge([0, 1, 2], [0, 1, 2])
    committer.tick(0.0)  # the flush interval has not passed
    assert not flow.producer.produced
    committer.checkpoint()
    assert flow.drained == 1  # the delivery reports served by the flush are matched first
    [(topic, value, report)] = flow.producer.produced
    assert topic == "mm2-offsets.A.internal" and value == b"2"
    assert flow.positions.remembered == {KEY: 2} and committer.unwritten == frozenset()
    report(Refusal(), None)  # the position was not written
    assert committer.unwritten == {KEY}
    committer.forget({KEY})
    assert committer.unwritten == frozenset()


@pytest.mark.parametrize("mode", ["at-least-once", "exactly-once"])
def test_a_position_waits_for_room_in_a_full_producer_queue(mode: str) -> None:
    """The record producer's queue is full of records (a small ``queue.buffering.max.messages``,
    or a backlog): a position record waits, serving delivery reports, instead of failing the
    copier (which then restarted and copied the records again)."""
    extra = {"B.exactly.once.source.support": "enabled"} if mode == "exactly-once" else {}
    flow = Flow(**extra)
    committer = flow.committer
    committer.begin()
    flow.part.txn_last = 2
    flow.acknowledge([0, 1, 2], [0, 1, 2])
    flow.producer.full = 3
    committer.checkpoint()
    assert flow.producer.polls >= 3
    [(topic, value, _)] = flow.producer.produced
    assert topic == "mm2-offsets.A.internal" and value == b"2"


def test_a_producer_queue_that_stays_full_fails_the_position_write_after_the_admin_timeout() -> (
    None
):
    flow = Flow(**{"admin.timeout.ms": "200"})
    flow.acknowledge([0, 1, 2], [0, 1, 2])
    flow.producer.full = 10**9
    started = time.monotonic()
    with pytest.raises(BufferError):
        flow.committer.checkpoint()
    assert 0.2 <= time.monotonic() - started < 5


def test_nothing_is_written_while_the_clients_are_closed() -> None:
    flow = Flow()
    flow.acknowledge([0], [0])
    flow.committer.close()
    flow.committer.checkpoint(final=True)
    assert not flow.producer.produced and not flow.producer.calls


def test_exactly_once_moves_positions_and_syncs_only_when_the_transaction_commits() -> None:
    flow = Flow(**{"B.exactly.once.source.support": "enabled"})
    committer = flow.committer
    assert isinstance(committer, TransactionCommitter)
    committer.begin()
    committer.begin()  # one transaction at a time
    assert committer.in_transaction and flow.producer.calls == ["begin"]
    flow.part.txn_last = 4
    flow.acknowledge([0, 1, 2, 3, 4], [0, 1, 2, 3, 4])
    assert committer.pending_syncs == [(flow.part, 0, 0, 5)]
    assert flow.part.acked is None and not flow.sent  # nothing counts before the commit
    assert flow.part.stats.record_count == 0
    committer.checkpoint()
    assert flow.part.stats.record_count == 5
    assert flow.producer.calls == ["begin", "commit"] and not committer.in_transaction
    [(_, value, _)] = flow.producer.produced  # the position went into the transaction
    assert value == b"4" and flow.positions.remembered == {KEY: 4}
    assert flow.part.acked == 4 and flow.part.stats.position == 5 and flow.part.txn_last is None
    # the first record's sync, and the newest record's at the commit (the next transaction's
    # first record follows a commit marker on the target: its sync is due, see core.syncs)
    assert flow.sent == [(0, 0), (4, 4)] and not committer.pending_syncs


@pytest.mark.parametrize("how", ["abort", "lost"])
def test_an_aborted_transaction_rewinds_every_partition(how: str) -> None:
    flow = Flow(**{"B.exactly.once.source.support": "enabled"})
    committer = flow.committer
    assert isinstance(committer, TransactionCommitter)
    committer.begin()
    flow.part.txn_last = 1
    flow.part.produced(2)  # still in flight
    flow.acknowledge([0, 1], [0, 1])
    if how == "abort":
        committer.abort()
    else:
        committer.lost()
    assert flow.producer.calls == ["begin", "abort"] and not committer.in_transaction
    assert flow.rewound == [flow.part] and flow.part.outstanding == 0
    assert flow.part.txn_last is None and flow.part.acked is None and not committer.pending_syncs
    assert flow.part.stats.record_count == 0  # an aborted transaction's records do not count
    committer.lost()  # no transaction open: nothing to abort
    assert flow.producer.calls == ["begin", "abort"]


def test_a_transaction_holding_a_refused_record_is_aborted_at_once() -> None:
    flow = Flow(**{"B.exactly.once.source.support": "enabled"})
    committer = flow.committer
    committer.begin()
    flow.part.txn_last = 1
    committer.refused()
    committer.tick(time.monotonic())  # young, with a backlog: still, it cannot commit
    assert flow.producer.calls == ["begin", "abort"] and not committer.in_transaction
    assert flow.rewound == [flow.part] and flow.drained >= 1  # refusals taken in first
    committer.begin()
    flow.part.txn_last = 2
    committer.tick(time.monotonic(), caught_up=True)  # the next transaction commits
    assert flow.producer.calls == ["begin", "abort", "begin", "commit"]


def test_a_transaction_that_failed_before_its_refusal_was_reported_is_aborted() -> None:
    """A record refused by the target fails the transaction at once: producing the positions
    into it is refused (``_STATE``) even when that delivery report was not served yet."""
    flow = Flow(**{"B.exactly.once.source.support": "enabled"})
    committer = flow.committer
    assert isinstance(committer, TransactionCommitter)
    committer.begin()
    flow.part.txn_last = 1
    flow.producer.refuse = KafkaError(KafkaError._STATE)
    committer.commit()
    assert flow.producer.calls == ["begin", "abort"] and not committer.in_transaction
    assert flow.rewound == [flow.part] and flow.positions.remembered == {}
    committer.begin()
    flow.producer.refuse = KafkaError(KafkaError._FATAL, fatal=True)  # a dead producer
    flow.part.txn_last = 1
    with pytest.raises(KafkaException):
        committer.commit()


def test_a_busy_copier_commits_at_the_interval_or_later_when_commits_are_slow() -> None:
    flow = Flow(**{"B.exactly.once.source.support": "enabled"})
    committer = flow.committer
    assert isinstance(committer, TransactionCommitter)
    interval = flow.settings.transaction_boundary_interval
    committer.begin()
    start = time.monotonic()
    committer.tick(start + interval / 2)  # a backlog, younger than the interval
    assert committer.in_transaction
    flow.producer.commit_s = 0.1  # a slow coordinator: 0.1 s per commit
    committer.tick(start + interval)
    assert flow.producer.calls == ["begin", "commit"]
    # commits may take COMMIT_SHARE of a busy copier's time: the next transaction lasts longer
    assert committer.boundary.seconds >= 0.1 / COMMIT_SHARE > interval
    committer.begin()
    start = time.monotonic()
    committer.tick(start + interval)
    assert committer.in_transaction
    committer.tick(start + interval, caught_up=True)  # caught up: at once, whatever the boundary
    assert not committer.in_transaction


def test_only_an_open_transaction_old_enough_asks_whether_the_copier_read_to_the_end() -> None:
    flow = Flow(**{"B.exactly.once.source.support": "enabled"})
    committer = flow.committer
    now = time.monotonic()
    assert not committer.wants_caught_up(now) and committer.transaction_partitions() == []
    committer.begin()
    start = time.monotonic()
    assert not committer.wants_caught_up(start)  # too young: no check, no commit
    assert committer.wants_caught_up(start + CAUGHT_UP_MIN_AGE_S)
    flow.part.txn_last = 3
    assert committer.transaction_partitions() == [KEY]
    committer.refused()
    assert not committer.wants_caught_up(start + 1.0)  # it is aborted anyway


def test_at_least_once_never_asks_whether_the_copier_read_to_the_end() -> None:
    flow = Flow()
    assert isinstance(flow.committer, PositionCommitter)
    assert not flow.committer.wants_caught_up(time.monotonic() + 10.0)
    assert flow.committer.transaction_partitions() == []


def test_an_acknowledgement_below_a_moved_position_does_not_move_it_back() -> None:
    """The copier moved the position past a gap (retention removed offsets before they were
    read) while records before it were in flight: their late acknowledgement counts the records
    but leaves the position after the gap (a restart would find the gap again and count it
    twice)."""
    flow = Flow()
    part = flow.part
    for up in range(101, 201):
        part.produced(up)
    part.acked = 299  # moved past the gap 201..299
    for down in range(1000, 1100):
        part.on_delivery(None, Report(down))
    acks = part.take(None)
    assert acks is not None
    flow.committer.acknowledged(part, acks)
    assert part.acked == 299
    assert part.stats.record_count == 100
