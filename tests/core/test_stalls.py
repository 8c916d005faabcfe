"""StallWatch: a stall is logged when it begins, reminded while it lasts, and its end is logged."""

from __future__ import annotations

import pytest

from mirrorlib.core.stalls import (
    STUCK_PRODUCER_S,
    SilenceGauge,
    StallNotice,
    StallWatch,
    StuckProducer,
    WatchdogClock,
    stall_reason,
)

PID_LINE = (
    "[thrd:main]: Failed to acquire idempotence PID from broker localhost:9092/1: "
    "Coordinator load in progress: retrying"
)


def test_a_healthy_flow_logs_nothing() -> None:
    watch = StallWatch("A->B", repeat=60)
    assert [watch.observe(None, t) for t in range(0, 300, 5)] == [None] * 60
    assert watch.stalled_since is None


def test_a_stall_is_told_at_once_reminded_while_it_lasts_and_its_end_told() -> None:
    watch = StallWatch("A->B", repeat=60)
    told = {
        t: watch.observe("target: cannot acquire idempotence PID", t) for t in range(100, 260, 5)
    }
    notices = {t: n for t, n in told.items() if n is not None}
    assert list(notices) == [100, 160, 220]
    assert notices[100] == StallNotice(
        True, "flow A->B stalled: target: cannot acquire idempotence PID"
    )
    assert notices[160].stalled and "still stalled after 60s" in notices[160].message
    assert watch.stalled_since == 100
    end = watch.observe(None, 262)
    assert end == StallNotice(False, "flow A->B: moving again after 162s stalled")
    assert watch.stalled_since is None
    assert watch.observe(None, 270) is None


def test_a_new_stall_after_recovery_is_told_again() -> None:
    watch = StallWatch("A->B", repeat=60)
    assert watch.observe("x", 0) is not None
    assert watch.observe(None, 10) is not None
    notice = watch.observe("y", 11)
    assert notice is not None and notice.message == "flow A->B stalled: y"


def test_repeat_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        StallWatch("A->B", repeat=0)


# -- StuckProducer: when the copier recreates a target producer that cannot write ----------------


def test_a_problem_with_records_waiting_and_none_acknowledged_is_stuck_after_a_while() -> None:
    stuck = StuckProducer(after=60)
    stuck.problem(100)
    stuck.problem(130)  # repeated reports do not move the start
    assert not stuck.stuck(159, waiting=True)
    assert stuck.stuck(160, waiting=True)


def test_an_acknowledgement_proves_the_producer_writes() -> None:
    stuck = StuckProducer(after=60)
    stuck.problem(100)
    stuck.moved()
    assert not stuck.stuck(1000, waiting=True)
    stuck.problem(1000)  # a new problem starts a new clock
    assert not stuck.stuck(1059, waiting=True)
    assert stuck.stuck(1060, waiting=True)


def test_an_idle_producer_is_never_stuck_and_its_old_problems_are_forgotten() -> None:
    stuck = StuckProducer(after=60)
    stuck.problem(100)  # e.g. "coordinator load in progress" once, then the producer id came
    assert not stuck.stuck(500, waiting=False)
    assert not stuck.stuck(501, waiting=True)  # records sent at last: the clock did not run
    assert not StuckProducer(after=60).stuck(10_000, waiting=True)  # no problem reported


def test_by_default_a_coordinator_loading_for_half_a_minute_is_waited_for() -> None:
    stuck = StuckProducer()  # 33 s of "coordinator load in progress" seen on fresh clusters
    stuck.problem(0)
    assert not stuck.stuck(33, waiting=True)
    assert stuck.stuck(STUCK_PRODUCER_S, waiting=True)


def test_after_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        StuckProducer(after=0)


def test_a_watchdog_that_runs_holds_the_whole_silence_against_a_peer() -> None:
    clock = WatchdogClock(pause=1.0)
    for i in range(13):  # a round every 0.5 s
        clock.tick(i * 0.5)
    assert clock.silent(0.0, 6.1) == pytest.approx(6.1)


def test_the_time_a_watchdog_was_paused_is_not_held_against_a_peer() -> None:
    clock = WatchdogClock(pause=1.0)
    clock.tick(10.0)
    clock.tick(10.1)
    clock.tick(25.0)  # stopped for ~15 s, like the peer
    assert clock.silent(10.05, 25.0) == 0.0
    clock.tick(25.1)
    assert clock.silent(10.05, 31.5) == pytest.approx(6.5)  # silent since the watchdog woke
    assert clock.silent(30.0, 31.5) == pytest.approx(1.5)  # heard after the pause: as is


def test_a_watchdog_clock_needs_a_positive_pause() -> None:
    with pytest.raises(ValueError, match="positive"):
        WatchdogClock(pause=0)


def test_a_silence_gauge_says_how_long_a_stopped_sender_sent_nothing() -> None:
    gauge = SilenceGauge(window=60.0)
    assert gauge.longest(5.0) == 0.0  # nothing sent yet
    for i in range(10):  # a keepalive every 0.5 s
        gauge.tick(i * 0.5)
    assert gauge.longest(4.6) == pytest.approx(0.5)
    # stopped at 4.5 s for 20 s: the silence going on counts before the next send ...
    assert gauge.longest(24.5) == pytest.approx(20.0)
    gauge.tick(24.5)
    gauge.tick(25.0)
    # ... and after it, for the window
    assert gauge.longest(25.2) == pytest.approx(20.0)
    assert gauge.longest(84.4) == pytest.approx(59.4)  # nothing sent since 25.0
    for i in range(1, 200):
        gauge.tick(25.0 + i * 0.5)
    assert gauge.longest(124.6) == pytest.approx(0.5)  # the long gap is out of the window


def test_a_silence_gauge_keeps_the_longest_gap_of_its_window() -> None:
    gauge = SilenceGauge(window=60.0)
    gauge.tick(0.0)
    gauge.tick(10.0)  # 10 s
    gauge.tick(13.0)  # 3 s: the 10 s gap stays
    assert gauge.longest(13.5) == pytest.approx(10.0)
    gauge.tick(80.0)  # 67 s, and the 10 s gap is out of the window
    gauge.tick(81.0)
    assert gauge.longest(81.5) == pytest.approx(67.0)


def test_a_silence_gauge_needs_a_positive_window() -> None:
    with pytest.raises(ValueError, match="positive"):
        SilenceGauge(window=0)


def test_stall_reason_recognises_producer_id_and_coordinator_problems() -> None:
    assert stall_reason(PID_LINE) == PID_LINE
    assert stall_reason("COORDINATOR_NOT_AVAILABLE") is not None
    assert stall_reason("Fatal idempotent producer error: x") is not None
    assert stall_reason("localhost:9092/1: Connect to ipv4#127.0.0.1:9092 failed") is None
