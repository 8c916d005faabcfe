"""The one policy for internal-topic records that do not decode (``SkippedRecords``,
``decoded``) and the offset-sync reader that every reader of the offset-syncs topic uses."""

from __future__ import annotations

import logging

import pytest

from mirrorlib import Checkpoint, OffsetSync
from mirrorlib.core.syncs import SyncLineage
from mirrorlib.core.translate import OffsetTranslator
from mirrorlib.kafka.offset_syncs import OffsetSyncReader
from mirrorlib.kafka.topiclog import MAX_CORRUPT_WARNINGS, SkippedRecords, decoded


class _Msg:
    """A ``confluent_kafka.Message`` as a reader sees it."""

    def __init__(
        self,
        key: bytes | None,
        value: bytes | None,
        offset: int,
        headers: list[tuple[str, bytes | None]] | None = None,
        timestamp: int = -1,
    ) -> None:
        self._key, self._value, self._offset = key, value, offset
        self._headers, self._timestamp = headers, timestamp

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return self._headers

    def timestamp(self) -> tuple[int, int]:
        return (1, self._timestamp)

    def topic(self) -> str:
        return "A.checkpoints.internal"

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset


def test_records_that_do_not_decode_are_skipped_counted_and_told_a_few_times(
    caplog: pytest.LogCaptureFixture,
) -> None:
    good = Checkpoint("g", "A.t", 0, 10, 9)
    msgs = [_Msg(good.encode_key(), good.encode_value(), 0)]
    msgs += [_Msg(b"garbage", b"\x00", n) for n in range(1, 13)]
    skipped = SkippedRecords("a checkpoint", "flow A->B")
    with caplog.at_level(logging.WARNING):
        assert list(decoded(msgs, Checkpoint.decode, skipped)) == [good]
        skipped.summary("A.checkpoints.internal", len(msgs))
    lines = [r.getMessage() for r in caplog.records]
    one_by_one = [line for line in lines if "skipping a record" in line]
    assert len(one_by_one) == MAX_CORRUPT_WARNINGS
    assert "flow A->B: skipping a record of A.checkpoints.internal-0 at offset 1 that is not a " \
        "checkpoint" in one_by_one[0]  # fmt: skip
    assert any("further ones are skipped and counted" in line for line in lines)
    assert lines[-1] == "flow A->B: skipped 12 corrupt record(s) of 13 in A.checkpoints.internal"
    assert skipped.count == 12


def test_nothing_skipped_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    skipped = SkippedRecords("a heartbeat", "cluster B")
    with caplog.at_level(logging.WARNING):
        skipped.summary("heartbeats")
    assert caplog.records == []


def test_the_offset_sync_reader_feeds_the_translator_with_lineage_and_skips_corrupt_ones() -> None:
    translator = OffsetTranslator()
    reader = OffsetSyncReader(translator, where="flow A->B")
    lineage: list[tuple[str, bytes | None]] = [SyncLineage("writer-1", 0).to_header()]
    first, second = OffsetSync("t", 0, 100, 200), OffsetSync("t", 0, 150, 250)
    msgs = [
        _Msg(first.encode_key(), first.encode_value(), 0, lineage, timestamp=1_000),
        _Msg(b"garbage", b"\x00", 1),
        _Msg(second.encode_key(), second.encode_value(), 2, timestamp=2_000),
    ]
    assert reader.take(msgs) == 2
    assert reader.skipped.count == 1
    assert reader.sync_ms == {("t", 0): 2_000}
    assert reader.take_touched() == {("t", 0)} and reader.take_touched() == set()
    # the same answers as an OffsetTranslator fed value by value
    expected = OffsetTranslator()
    expected.add(first, SyncLineage("writer-1", 0))
    expected.add(second)
    for offset in (99, 100, 120, 150, 160):
        assert translator.translate("t", 0, offset) == expected.translate("t", 0, offset)
