"""When a busy copier commits its transaction: the configured interval, stretched by slow commits."""

from __future__ import annotations

import pytest

from mirrorlib.core.transactions import (
    CAUGHT_UP_MIN_AGE_S,
    COMMIT_SHARE,
    MAX_STRETCH_S,
    TransactionBoundary,
)


def test_before_any_commit_the_interval_is_the_boundary() -> None:
    boundary = TransactionBoundary(1.0)
    assert boundary.commit_seconds is None and boundary.seconds == 1.0
    assert not boundary.due(0.99, caught_up=False)
    assert boundary.due(1.0, caught_up=False)


def test_a_copier_that_caught_up_commits_at_once() -> None:
    boundary = TransactionBoundary(1.0)
    boundary.committed(0.4)
    assert boundary.due(0.0, caught_up=True)


def test_reading_to_the_end_while_records_arrive_ends_transactions_of_a_minimum_age() -> None:
    """No round is empty while records keep arriving; reading the partitions to their end
    counts as caught up once the transaction is old enough (a bounded number of commits)."""
    assert not TransactionBoundary.may_end_caught_up(0.0)
    assert not TransactionBoundary.may_end_caught_up(CAUGHT_UP_MIN_AGE_S * 0.99)
    assert TransactionBoundary.may_end_caught_up(CAUGHT_UP_MIN_AGE_S)
    assert TransactionBoundary(1.0).seconds > CAUGHT_UP_MIN_AGE_S


def test_fast_commits_keep_the_interval() -> None:
    boundary = TransactionBoundary(1.0)
    boundary.committed(0.01)
    assert boundary.seconds == 1.0


def test_slow_commits_stretch_transactions_so_commits_take_a_bounded_share() -> None:
    boundary = TransactionBoundary(1.0)
    boundary.committed(0.2)
    assert boundary.seconds == pytest.approx(0.2 / COMMIT_SHARE)
    assert not boundary.due(1.0, caught_up=False)
    assert boundary.due(0.2 / COMMIT_SHARE, caught_up=False)


def test_the_stretch_is_smoothed_and_follows_faster_commits_back() -> None:
    boundary = TransactionBoundary(1.0)
    boundary.committed(0.2)
    boundary.committed(0.0)
    first = boundary.seconds
    assert 1.0 < first < 0.2 / COMMIT_SHARE  # one fast commit moves it part of the way
    for _ in range(30):
        boundary.committed(0.0)
    assert boundary.seconds == 1.0


def test_the_stretch_is_capped_and_an_outlier_moves_it_a_bounded_step() -> None:
    boundary = TransactionBoundary(1.0)
    boundary.committed(60.0)  # e.g. the process was stopped during the commit
    assert boundary.seconds == MAX_STRETCH_S
    boundary.committed(0.0)
    assert boundary.seconds < MAX_STRETCH_S


def test_a_longer_interval_wins_over_the_stretch() -> None:
    boundary = TransactionBoundary(30.0)
    boundary.committed(5.0)
    assert boundary.seconds == 30.0
