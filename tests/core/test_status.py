"""The status model's lag rules (mirrorlib.core.status): unknown is not zero, internal topics
apart, lag in columns; without a broker."""

from __future__ import annotations

from mirrorlib.core.status import FlowState, partition_lags
from tests.core.test_counters import running


def test_lag_is_unknown_until_position_and_end_offset_are_known() -> None:
    stats = running()
    p = stats.partition("t", 0, "A.t")
    status = stats.snapshot()
    assert status.partitions[0].lag_records is None and status.partitions[0].lag_seconds is None
    assert status.lag_records is None and status.unknown_lag_partitions == 1
    p.end_offset = 10
    assert stats.snapshot().lag_records is None
    p.position = 4
    status = stats.snapshot()
    assert status.lag_records == 6 and status.unknown_lag_partitions == 0
    assert status.state is FlowState.RUNNING


def test_no_partition_means_unknown_lag_not_zero() -> None:
    assert running().snapshot().lag_records is None


def test_internal_topics_are_apart_and_not_in_the_lag() -> None:
    stats = running()
    data = stats.partition("t", 0, "A.t")
    beats = stats.partition("heartbeats", 0, "A.heartbeats")
    data.position, data.end_offset = 5, 7
    beats.position, beats.end_offset = 10, 60
    status = stats.snapshot()
    assert [p.topic for p in status.internal_partitions] == ["heartbeats"]
    assert [p.topic for p in status.data_partitions] == ["t"]
    assert status.lag_records == 2


def test_partition_lags_read_columns_with_unknown_as_none() -> None:
    positions = [None, 5, 5, 5, 5, None]
    ends = [None, None, 5, 3, 9, 9]
    tails = [None, 1_000, 1_000, 1_000, 1_000, 1_000]
    lags, seconds, waiting = partition_lags(positions, ends, tails, 3_500)
    assert lags == [None, None, 0, 0, 4, None]
    assert seconds == [None, None, 0.0, 0.0, 2.5, None]
    assert waiting == [False, False, False, False, True, True]
    assert partition_lags([1], [4], [None], 0) == ([3], [None], [True])  # no record yet
    assert partition_lags([1], [4], [9_000], 0) == ([3], [0.0], [True])  # clocks apart: not < 0
