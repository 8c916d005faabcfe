"""The one back-off rule (mirrorlib.core.retry): decorrelated jitter, capped, resettable,
stop-aware; and the one rule for retrying a request a broker refused."""

from __future__ import annotations

import random
import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirrorlib.core.retry import (
    ATTEMPT_TIMEOUT,
    NEW_CLIENT_AFTER,
    Backoff,
    BrokerErrorKind,
    RetryStep,
    attempt_timeout,
    classify_broker_error,
    next_retry,
)

bases = st.floats(min_value=0.001, max_value=100.0)
factors = st.floats(min_value=1.0, max_value=1000.0)
failures = st.integers(min_value=1, max_value=60)


def highest(low: float, high: float) -> float:
    return high


def lowest(low: float, high: float) -> float:
    return low


@given(base=bases, factor=factors, seed=st.integers(), n=failures)
def test_every_delay_lies_between_base_and_cap(
    base: float, factor: float, seed: int, n: int
) -> None:
    b = Backoff(base, base * factor, uniform=random.Random(seed).uniform)
    for count in range(1, n + 1):
        delay = b.next_delay()
        assert base <= delay <= base * factor
        assert b.delay == delay and b.failures == count


@given(base=bases, factor=factors, seed=st.integers(), n=failures)
def test_a_delay_is_at_most_three_times_the_previous(
    base: float, factor: float, seed: int, n: int
) -> None:
    b = Backoff(base, base * factor, uniform=random.Random(seed).uniform)
    previous = base
    for _ in range(n):
        delay = b.next_delay()
        assert delay <= 3 * previous * (1 + 1e-9)
        previous = delay


@given(base=bases, factor=factors, n=failures)
def test_upper_bound_grows_exponentially_to_the_cap(base: float, factor: float, n: int) -> None:
    cap = base * factor
    b = Backoff(base, cap, uniform=highest)
    delays = [b.next_delay() for _ in range(n)]
    assert delays == pytest.approx([min(cap, base * 3**k) for k in range(1, n + 1)])
    assert delays == sorted(delays)


@given(base=bases, factor=factors, n=failures)
def test_never_sooner_than_base(base: float, factor: float, n: int) -> None:
    b = Backoff(base, base * factor, uniform=lowest)
    assert {b.next_delay() for _ in range(n)} == {base}


def test_jitter_spreads_retries_that_failed_together() -> None:
    rng = random.Random(7)
    firsts = {Backoff(1.0, 60.0, uniform=rng.uniform).next_delay() for _ in range(50)}
    assert len(firsts) == 50 and min(firsts) >= 1.0 and max(firsts) <= 3.0


@given(base=bases, factor=factors, seed=st.integers(), n=failures)
def test_reset_starts_over(base: float, factor: float, seed: int, n: int) -> None:
    b = Backoff(base, base * factor, uniform=random.Random(seed).uniform)
    for _ in range(n):
        b.next_delay()
    b.reset()
    assert b.delay == 0.0 and b.failures == 0
    assert base <= b.next_delay() <= min(base * factor, 3 * base) * (1 + 1e-9)


def test_default_jitter_is_random() -> None:
    b = Backoff(1.0, 60.0)
    delays = [b.next_delay() for _ in range(20)]
    assert all(1.0 <= d <= 60.0 for d in delays)
    assert len(set(delays)) > 1


@pytest.mark.parametrize(("base", "cap"), [(0.0, 1.0), (-1.0, 1.0), (2.0, 1.0)])
def test_invalid_bounds(base: float, cap: float) -> None:
    with pytest.raises(ValueError, match="back-off"):
        Backoff(base, cap)


def test_wait_returns_at_once_when_stopped() -> None:
    b = Backoff(30.0, 60.0)
    b.next_delay()
    stop = threading.Event()
    stop.set()
    started = time.monotonic()
    assert b.wait(stop) is True
    assert time.monotonic() - started < 1.0


def test_wait_returns_when_stopped_meanwhile() -> None:
    b = Backoff(30.0, 60.0)
    b.next_delay()
    stop = threading.Event()
    timer = threading.Timer(0.05, stop.set)
    timer.start()
    started = time.monotonic()
    try:
        assert b.wait(stop) is True
    finally:
        timer.cancel()
    assert time.monotonic() - started < 5.0


def test_wait_waits_the_current_delay() -> None:
    b = Backoff(0.05, 0.05)
    assert b.wait(threading.Event()) is False  # no failure yet: no delay
    b.next_delay()
    started = time.monotonic()
    assert b.wait(threading.Event()) is False
    assert time.monotonic() - started >= 0.04


# -- the retry rule of refused broker requests (issue 34) ------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "FENCED_LEADER_EPOCH",
        "UNKNOWN_LEADER_EPOCH",
        "NOT_LEADER_FOR_PARTITION",
        "NOT_LEADER_OR_FOLLOWER",
        "LEADER_NOT_AVAILABLE",
        "NOT_COORDINATOR",
        "UNKNOWN_TOPIC_OR_PART",
        "_NOENT",  # ListOffsets: "No leaders found" (a topic created a moment ago)
    ],
)
def test_a_moved_leader_or_coordinator_is_stale_metadata(name: str) -> None:
    assert classify_broker_error(name) is BrokerErrorKind.STALE_METADATA
    # whatever the client says of its retriability (librdkafka's admin futures say False)
    assert classify_broker_error(name, retriable=True) is BrokerErrorKind.STALE_METADATA


@pytest.mark.parametrize(
    "name", ["REQUEST_TIMED_OUT", "_TIMED_OUT", "_TRANSPORT", "COORDINATOR_LOAD_IN_PROGRESS"]
)
def test_timeouts_and_brokers_down_are_transient(name: str) -> None:
    assert classify_broker_error(name) is BrokerErrorKind.TRANSIENT


@pytest.mark.parametrize(
    "name", ["TOPIC_AUTHORIZATION_FAILED", "INVALID_REQUEST", "UNSUPPORTED_VERSION", "_FATAL"]
)
def test_what_a_retry_cannot_change_is_permanent(name: str) -> None:
    assert classify_broker_error(name) is BrokerErrorKind.PERMANENT


def test_the_clients_word_counts_for_unknown_names_and_fatal_wins() -> None:
    assert classify_broker_error("SOMETHING_NEW", retriable=True) is BrokerErrorKind.TRANSIENT
    assert classify_broker_error("SOMETHING_NEW") is BrokerErrorKind.PERMANENT
    assert (
        classify_broker_error("FENCED_LEADER_EPOCH", retriable=True, fatal=True)
        is BrokerErrorKind.PERMANENT
    )


def test_stale_metadata_is_refreshed_first_then_the_client_replaced() -> None:
    stale = BrokerErrorKind.STALE_METADATA
    first = next_retry(stale, failures=1, remaining=30.0, delay=0.2)
    assert first == RetryStep(give_up=False, delay=0.2, refresh_metadata=True, new_client=False)
    for n in range(NEW_CLIENT_AFTER, NEW_CLIENT_AFTER + 5):
        step = next_retry(stale, failures=n, remaining=30.0, delay=1.0)
        assert step.new_client and step.refresh_metadata and not step.give_up


def test_a_transient_error_is_retried_as_it_is_then_with_a_new_client() -> None:
    """A long-lived admin client's DescribeGroups timed out for minutes after a broker restart,
    fresh metadata or not; a new client was answered at once."""
    step = next_retry(BrokerErrorKind.TRANSIENT, failures=1, remaining=30.0, delay=2.0)
    assert step == RetryStep(give_up=False, delay=2.0)
    step = next_retry(BrokerErrorKind.TRANSIENT, failures=NEW_CLIENT_AFTER, remaining=30.0,
                      delay=2.0)  # fmt: skip
    assert step == RetryStep(give_up=False, delay=2.0, refresh_metadata=True, new_client=True)


@given(failures=st.integers(min_value=0, max_value=10_000),
       remaining=st.floats(min_value=-10.0, max_value=1e6))  # fmt: skip
def test_an_attempt_gets_a_growing_timeout_within_the_deadline(
    failures: int, remaining: float
) -> None:
    timeout = attempt_timeout(failures, remaining)
    assert 0.0 <= timeout <= max(remaining, 0.0)
    assert timeout <= attempt_timeout(failures + 1, remaining)
    if remaining >= 1e5:
        assert timeout == min(ATTEMPT_TIMEOUT * 2.0 ** min(failures, 16), remaining)


def test_the_first_attempt_leaves_time_to_ask_a_new_leader() -> None:
    assert attempt_timeout(0, 30.0) == ATTEMPT_TIMEOUT < 30.0 / 3


def test_permanent_errors_give_up_at_once_and_keep_the_client() -> None:
    step = next_retry(BrokerErrorKind.PERMANENT, failures=1, remaining=30.0, delay=0.2)
    assert step == RetryStep(give_up=True)


@given(
    kind=st.sampled_from([BrokerErrorKind.STALE_METADATA, BrokerErrorKind.TRANSIENT]),
    failures=st.integers(min_value=1, max_value=1000),
    remaining=st.floats(min_value=-10.0, max_value=100.0),
    delay=st.floats(min_value=0.001, max_value=60.0),
)
def test_a_retry_never_waits_past_the_deadline_and_stops_once_it_passed(
    kind: BrokerErrorKind, failures: int, remaining: float, delay: float
) -> None:
    step = next_retry(kind, failures=failures, remaining=remaining, delay=delay)
    if remaining <= 0:
        # given up, and the next call starts with a new client
        assert step.give_up and step.new_client
    else:
        assert not step.give_up
        assert 0 <= step.delay <= min(delay, remaining)


def test_a_retry_loop_under_the_rule_ends_by_the_deadline_without_busy_looping() -> None:
    """Driven with a fake clock: a stale epoch that never clears ends in a give-up at the
    deadline, after a bounded number of attempts spaced by at least the back-off base."""
    clock = 0.0
    deadline = 30.0
    backoff = Backoff(0.2, 5.0, uniform=highest)
    attempts = 0
    while True:
        attempts += 1  # an attempt, failing with FENCED_LEADER_EPOCH
        kind = classify_broker_error("FENCED_LEADER_EPOCH")
        step = next_retry(
            kind, failures=backoff.failures + 1, remaining=deadline - clock,
            delay=backoff.next_delay(),
        )  # fmt: skip
        if step.give_up:
            break
        clock += step.delay
    assert clock == pytest.approx(deadline)
    assert attempts <= deadline / 0.2 + 2
    assert attempts < 15  # backed off, not a retry every base interval


def test_failures_count_from_one() -> None:
    with pytest.raises(ValueError):
        next_retry(BrokerErrorKind.TRANSIENT, failures=0, remaining=1.0, delay=1.0)
