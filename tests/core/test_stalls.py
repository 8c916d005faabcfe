"""StallWatch: a stall is logged when it begins, reminded while it lasts, and its end is logged."""

from __future__ import annotations

import pytest

from mirrorlib.core.stalls import StallNotice, StallWatch


def test_a_healthy_flow_logs_nothing() -> None:
    watch = StallWatch("A->B", repeat=60)
    assert [watch.observe(None, t) for t in range(0, 300, 5)] == [None] * 60
    assert watch.stalled_since is None


def test_a_stall_is_told_at_once_reminded_while_it_lasts_and_its_end_told() -> None:
    watch = StallWatch("A->B", repeat=60)
    told = {t: watch.observe("target: cannot acquire idempotence PID", t) for t in range(100, 260, 5)}
    notices = {t: n for t, n in told.items() if n is not None}
    assert list(notices) == [100, 160, 220]
    assert notices[100] == StallNotice(True, "flow A->B stalled: target: cannot acquire idempotence PID")
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
