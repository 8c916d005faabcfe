"""The copier's bulk acknowledgement, without a broker: delivery reports are queued per partition
and matched with the produced upstream offsets after each poll."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import KafkaError

from mirrorlib import MirrorConfig
from mirrorlib.core.catalog import RemoteTopic, TopicCatalog
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.status import StatsRegistry
from mirrorlib.core.syncs import OffsetSyncEmitter
from mirrorlib.kafka.copier import Copier, _Part

KEY = ("t", 0)


class Msg:
    """What a delivery report carries that the copier reads."""

    def __init__(self, offset: int, error: Any = None, value: bytes = b"v") -> None:
        self._offset = offset
        self._error = error
        self._value = value

    def offset(self) -> int:
        return self._offset

    def error(self) -> Any:
        return self._error

    def topic(self) -> str:
        return "A.t"

    def partition(self) -> int:
        return 0

    def key(self) -> bytes | None:
        return None

    def value(self) -> bytes:
        return self._value

    def headers(self) -> Any:
        return None


class Record(Msg):
    """A consumed source record."""

    def topic(self) -> str:
        return "t"

    def timestamp(self) -> tuple[int, int]:
        return (1, 1_000 + self._offset)


class Err:
    """A refusal of the record itself (by default), or of its batch as too large."""

    def __init__(self, code: int = KafkaError.INVALID_RECORD) -> None:
        self._code = code

    def code(self) -> int:
        return self._code

    def str(self) -> str:
        return "Broker: Message size too large" if self._code == 10 else "Broker: Invalid record"


TOO_LARGE = Err(KafkaError.MSG_SIZE_TOO_LARGE)


class Consumer:
    def __init__(self) -> None:
        self.seeks: list[int] = []
        self.paused = 0
        self.resumed = 0

    def seek(self, ktp: Any) -> None:
        self.seeks.append(ktp.offset)

    def pause(self, _partitions: Any) -> None:
        self.paused += 1

    def resume(self, _partitions: Any) -> None:
        self.resumed += 1


class Producer:
    """Records each produce call's (topic, value, partition)."""

    def __init__(self) -> None:
        self.produced: list[tuple[str, bytes, int]] = []

    def produce(self, topic: str, value: bytes, _key: Any, partition: int, *_rest: Any) -> None:
        self.produced.append((topic, value, partition))


class SyncWriter:
    """Takes every due sync at once, as OffsetSyncWriter does."""

    def __init__(self, emitter: OffsetSyncEmitter) -> None:
        self.emitter = emitter
        self.sent: list[tuple[int, int]] = []

    def send(self) -> None:
        self.sent += [
            (e.sync.upstream_offset, e.sync.downstream_offset) for e in self.emitter.take_pending()
        ]


def make_copier(**extra: str) -> tuple[Copier, _Part, SyncWriter, Consumer]:
    props = {
        "clusters": "A, B",
        "A.bootstrap.servers": "127.0.0.1:1",
        "B.bootstrap.servers": "127.0.0.1:2",
        "A->B.enabled": "true",
        "offset.lag.max": "10",
        **extra,
    }
    cfg = MirrorConfig.from_properties("\n".join(f"{k}={v}" for k, v in props.items()))
    settings = FlowSettings.from_config(cfg, cfg.flow("A", "B"))
    copier = Copier(settings, TopicCatalog(), StatsRegistry("A", "B"), positions=None)  # type: ignore[arg-type]
    consumer = Consumer()
    copier._consumer = consumer
    writer = SyncWriter(copier.emitter)
    copier._syncs = writer  # type: ignore[assignment]
    part = _Part(KEY, "A.t", copier.stats.partition("t", 0, "A.t"), copier._ready.append)
    copier._parts[KEY] = part
    return copier, part, writer, consumer


def send(part: _Part, upstream: range | list[int], ts: int = 1_000) -> None:
    part.sent.extend(upstream)
    part.marks.append((list(upstream)[-1], ts))


def test_a_contiguous_run_is_acknowledged_at_once_with_every_due_sync() -> None:
    copier, part, writer, _ = make_copier()
    send(part, range(100, 150))
    for i in range(50):
        part.dr(None, Msg(1000 + i))
    assert copier._ready == [part]
    copier._drain_acks()
    assert part.acked == 149 and part.stats.position == 150
    assert part.stats.record_count == 50 and part.outstanding == 0 and not part.acks
    assert part.stats.tail_timestamp_ms == 1_000
    assert KEY in copier._dirty
    # offset.lag.max=10: the first record, then every 11 records (as one record() per record)
    assert writer.sent == [(100, 1000), (111, 1011), (122, 1022), (133, 1033), (144, 1044)]
    copier.emitter.promote_delayed()
    writer.send()
    assert writer.sent[-1] == (149, 1049)


def test_reports_arriving_in_pieces_are_matched_in_order() -> None:
    copier, part, _, _ = make_copier()
    send(part, range(0, 10))
    send(part, range(10, 20), ts=2_000)
    for i in range(5):
        part.dr(None, Msg(i))
    copier._drain_acks()
    assert part.acked == 4 and part.outstanding == 15
    assert part.stats.tail_timestamp_ms is None  # no produced run is fully acknowledged yet
    for i in range(5, 20):
        part.dr(None, Msg(i))
    copier._drain_acks()
    assert part.acked == 19 and part.outstanding == 0
    assert part.stats.tail_timestamp_ms == 2_000


def test_gaps_on_either_side_fall_back_to_one_record_at_a_time() -> None:
    copier, part, writer, _ = make_copier()
    send(part, [0, 1, 2, 5, 6])  # compaction gap upstream
    for down in (0, 1, 2, 3, 4):
        part.dr(None, Msg(down))
    copier._drain_acks()
    assert part.acked == 6
    # the upstream gap makes the record at 5 due (MM2's rule), as one record() each would
    assert writer.sent == [(0, 0), (5, 3)]
    send(part, [7, 8, 9])
    for down in (5, 7, 8):  # a transaction marker downstream
        part.dr(None, Msg(down))
    copier._drain_acks()
    assert part.acked == 9


def test_a_refused_record_is_never_acknowledged_past() -> None:
    copier, part, writer, consumer = make_copier()
    send(part, range(0, 10))
    for i in range(10):
        part.dr(Err() if i == 5 else None, Msg(i if i != 5 else -1, Err() if i == 5 else None))
    copier._drain_acks()
    assert part.acked == 4 and part.stats.position == 5
    assert part.blocked_at == 5 and part.parked_until > 0
    assert consumer.seeks == [5] and consumer.paused == 1
    assert "@5 was refused" in (part.stats.error or "")
    assert part.budget is None  # not a batch-size problem: batches stay as they are
    assert part.stats.record_count == 5  # the successes after the refused record do not count
    assert all(up < 5 for up, _ in writer.sent)
    assert not part.failed and part.outstanding == 0


def test_a_batch_refused_as_too_large_is_sent_again_in_smaller_batches_at_once() -> None:
    copier, part, _, consumer = make_copier()
    send(part, range(0, 10))
    for _ in range(10):
        part.dr(TOO_LARGE, Msg(-1, TOO_LARGE, b"x" * 3_000))
    copier._drain_acks()
    assert part.budget == 500_000  # half the producer's batch.size
    assert part.blocked_at == 0 and consumer.seeks == [0] and consumer.paused == 1
    assert part.stats.error is None  # nothing is wrong with the records
    copier._retry_parked(part.parked_until)  # due at once, no back-off
    assert not part.parked_until and part.blocked_at is None and consumer.resumed == 1


def test_a_record_refused_as_too_large_when_sent_alone_stops_its_partition() -> None:
    copier, part, _, consumer = make_copier()
    part.budget = 2_000
    send(part, [7])
    part.dr(TOO_LARGE, Msg(-1, TOO_LARGE, b"x" * 3_000))
    copier._drain_acks()
    assert part.budget == 2_000 and part.blocked_at == 7 and consumer.seeks == [7]
    assert "@7 was refused" in (part.stats.error or "")
    copier._retry_parked(time.monotonic())
    assert part.parked_until  # retried with back-off, as any refused record


def test_a_paced_partition_sends_batches_within_its_budget_one_at_a_time() -> None:
    copier, part, _, consumer = make_copier()
    producer = Producer()
    copier._producer = producer
    copier.catalog.publish({"t": RemoteTopic("A.t", 1, 20_000)})
    copier._sync_subscription = lambda: None  # type: ignore[method-assign]
    copier._remote_of = copier.catalog.snapshot()[1]
    part.max_bytes, part.budget = 20_000, copier._budget(20_000)
    assert part.budget == 20_000 and copier._budget(1_048_588) is None
    copier._copy([Record(i, value=b"%05d" % i * 900) for i in range(40)])  # 4.5 KB each
    copier._send_queued()
    batches = []
    while producer.produced:
        batch = producer.produced[:]
        producer.produced.clear()
        batches.append(batch)
        assert sum(len(v) + 96 for _, v, _ in batch) <= 20_000
        copier._send_queued()
        assert not producer.produced  # nothing more until the batch is acknowledged
        for i in range(len(batch)):
            part.dr(None, Msg(i))
        copier._drain_acks()
        copier._send_queued()
    values = [v for batch in batches for _, v, _ in batch]
    assert values == [b"%05d" % i * 900 for i in range(40)] and len(batches) == 10
    assert part.acked == 39 and consumer.paused == 1 and consumer.resumed == 1
    assert not part.pending and not copier._queued


def test_successes_after_a_refusal_in_a_later_poll_are_ignored_until_retried() -> None:
    copier, part, _, _ = make_copier()
    send(part, range(0, 4))
    part.dr(None, Msg(0))
    part.dr(Err(), Msg(-1, Err()))
    copier._drain_acks()
    part.dr(None, Msg(1))
    part.dr(None, Msg(2))
    copier._drain_acks()
    assert part.acked == 0 and part.blocked_at == 1


def test_reports_of_a_revoked_partition_are_dropped() -> None:
    copier, part, writer, _ = make_copier()
    send(part, range(0, 3))
    copier._forget({KEY})
    for i in range(3):
        part.dr(None, Msg(i))
    copier._drain_acks()
    assert part.acked is None and not part.acks and not writer.sent
    assert KEY not in copier._dirty


def test_reports_beyond_what_was_produced_are_ignored() -> None:
    copier, part, _, _ = make_copier()
    send(part, range(0, 2))
    part.clear_inflight()  # e.g. an aborted transaction forgot what was in flight
    send(part, [7])
    part.dr(None, Msg(0))
    part.dr(None, Msg(1))
    part.dr(None, Msg(2))
    copier._drain_acks()
    assert part.acked == 7 and part.outstanding == 0


@pytest.mark.parametrize("count", [1, 3, 70_000])
def test_take_sent_keeps_the_rest_in_order(count: int) -> None:
    _, part, _, _ = make_copier()
    part.sent.extend(range(count + 5))
    assert part.take_sent(count) == list(range(count))
    assert part.outstanding == 5
    assert part.take_sent(5) == list(range(count, count + 5))
    assert part.outstanding == 0 and part.sent == []


def test_exactly_once_collects_runs_for_the_commit() -> None:
    copier, part, _, _ = make_copier(**{"B.exactly.once.source.support": "enabled"})
    send(part, range(0, 5))
    for i in range(5):
        part.dr(None, Msg(i))
    copier._drain_acks()
    assert copier._txn_syncs == [(part, 0, 0, 5)]
    assert part.acked is None  # positions move only when the transaction commits


def test_record_producer_is_idempotent_and_keeps_the_users_tuning() -> None:
    copier, _, _, _ = make_copier(
        **{"B.producer.linger.ms": "50", "B.producer.acks": "1", "B.producer.batch.size": "16384"}
    )
    conf = copier.s.record_producer(linger_ms=5, on_delivery=print)
    assert conf["enable.idempotence"] is True and conf["acks"] == "all"  # never weakened
    assert str(conf["linger.ms"]) == "50" and str(conf["batch.size"]) == "16384"
    assert conf["queue.buffering.max.messages"] == 500_000 and conf["on_delivery"] is print
    assert "on_delivery" not in copier.s.record_producer(linger_ms=5)
