"""The one back-off rule (mirrorlib.core.retry): decorrelated jitter, capped, resettable,
stop-aware."""

from __future__ import annotations

import random
import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirrorlib.core.retry import Backoff

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
