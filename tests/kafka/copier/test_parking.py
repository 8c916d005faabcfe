"""What the copier does with a source position outside the log (which client errors mean that
its producer is dead: tests/kafka/test_produce.py)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from confluent_kafka import KafkaError

from mirrorlib import MirrorConfig
from mirrorlib.core.counters import StatsRegistry
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.syncs import OffsetSyncEmitter
from mirrorlib.kafka.copier.commit import PositionCommitter
from mirrorlib.kafka.copier.parking import Parking
from mirrorlib.kafka.copier.parts import CopierContext, Part

# -- a source position outside the log (review finding 7) -----------------------------------------


class _Msg:
    def __init__(self, offset: int) -> None:
        self._offset = offset

    def topic(self) -> str:
        return "t"

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset


class _Report:
    def __init__(self, offset: int) -> None:
        self._offset = offset

    def offset(self) -> int:
        return self._offset

    def error(self) -> None:
        return None


class _Consumer:
    """The source consumer's calls the parking makes; the log holds ``[low, high)``."""

    def __init__(self, low: int, high: int) -> None:
        self.low, self.high = low, high
        self.fetch_from: list[int] = []

    def get_watermark_offsets(self, _tp: object, **_kw: object) -> tuple[int, int]:
        return self.low, self.high

    def seek(self, tp: Any) -> None:
        self.fetch_from.append(tp.offset)

    def pause(self, _tps: object) -> None:
        pass

    def resume(self, _tps: object) -> None:
        pass


class _Producer:
    """Delivery reports are served by ``flush`` (as librdkafka's are)."""

    def __init__(self) -> None:
        self.waiting: list[tuple[Any, int]] = []

    def produce(self, *_a: object, **_kw: object) -> None:
        pass

    def flush(self, _timeout: float = 0) -> int:
        waiting, self.waiting = self.waiting, []
        for callback, down in waiting:
            callback(None, _Report(down))
        return 0

    def poll(self, _timeout: float = 0) -> int:
        return 0


class _Positions:
    topic = "mm2-offsets.A.internal"

    def records(self, positions: list[tuple[str, int, int]]) -> list[tuple[int, bytes, bytes]]:
        return [(0, b"k", str(o).encode()) for _, _, o in positions]

    def remember(self, *_a: object) -> None:
        pass


class _Copier:
    """A copier's partition with a position committer, a parking and a fake consumer."""

    def __init__(self, low: int, high: int, **extra: str) -> None:
        props = {
            "clusters": "A, B",
            "A.bootstrap.servers": "127.0.0.1:1",
            "B.bootstrap.servers": "127.0.0.1:2",
            "A->B.enabled": "true",
            **extra,
        }
        cfg = MirrorConfig.from_properties("\n".join(f"{k}={v}" for k, v in props.items()))
        s = FlowSettings.from_config(cfg, cfg.flow("A", "B"))
        emitter = OffsetSyncEmitter(offset_lag_max=s.offset_lag_max)
        self.ctx = ctx = CopierContext(s, StatsRegistry("A", "B"), emitter, transactional=False)
        self.part = Part(("t", 0), "A.t", ctx.stats.partition("t", 0, "A.t"), ctx.ready.append)
        ctx.parts[self.part.key] = self.part
        ctx.consumer = self.consumer = _Consumer(low, high)
        self.producer = _Producer()
        ctx.committer = PositionCommitter(
            s, _Positions(), emitter, ctx.parts,  # type: ignore[arg-type]
            send_syncs=lambda: None, drain_acks=self.drain, rewind=lambda _p: None,
        )  # fmt: skip
        ctx.committer.open(self.producer)
        self.parking = Parking(ctx, refresh_metadata=lambda _t: None)

    def drain(self) -> None:
        acks = self.part.take(self.part.blocked_at)
        if acks is not None and acks.count:
            self.ctx.committer.acknowledged(self.part, acks)

    def produce(self, first: int, last: int) -> None:
        for up in range(first, last + 1):
            self.part.produced(up)
            self.producer.waiting.append((self.part.on_delivery, 5000 + up))
        self.part.end_run(last, 0)

    def out_of_range(self, fetched: int) -> None:
        err = KafkaError(KafkaError._AUTO_OFFSET_RESET)
        self.parking.consume_error(_Msg(fetched), err)


def test_a_position_past_a_truncated_log_end_resumes_at_the_new_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An unclean leader election truncated the source log below what was copied: nothing is
    lost (the records copied stay on the target) and the new records that get the truncated
    offsets are copied: the partition resumes at the new log end, not at its start."""
    copier = _Copier(0, 600)  # data.loss.action=fail (the default): it is no loss
    copier.part.acked = 999
    copier.part.same_log = True  # the position's topic id is the log's
    with caplog.at_level(logging.WARNING, logger="mirrorlib.kafka.copier"):
        copier.out_of_range(1000)
    assert copier.consumer.fetch_from == [600]
    assert copier.part.acked == 599
    assert copier.part.stats.lost_records == 0
    assert "600..999" in caplog.text


def test_late_acknowledgements_after_a_retention_gap_neither_move_back_nor_count_twice() -> None:
    """Records 101..200 are in flight when retention removes everything below 300: only
    201..299 are lost, and their late acknowledgements do not move the position back below the
    gap (a restart would skip it again and count it twice)."""
    copier = _Copier(300, 400, **{"data.loss.action": "continue"})
    copier.part.acked = 100
    copier.produce(101, 200)
    copier.out_of_range(201)
    copier.producer.flush()  # (the copier's next round serves the reports late)
    copier.drain()
    assert copier.part.stats.lost_records == 99
    assert copier.part.acked == 299
    assert copier.consumer.fetch_from == [300]
