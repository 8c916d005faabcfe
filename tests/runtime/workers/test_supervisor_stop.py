"""The worker supervisor's stop (tasks.max > 1), with stand-in worker processes: no Kafka needed.

Every worker is told to stop; one that does not end cleanly (killed after the stop timeout,
crashed) may leave a transaction open on the target, so its slot's transactional id is fenced
before the supervisor reports the slots stopped; a slot whose id cannot be fenced is reported
``abandoned`` with its partitions, for the node that copies them next to fence. Partitions
revoked meanwhile are handed over only once their workers stopped (or were fenced).
"""

from __future__ import annotations

import threading
import time

import pytest

import mirrorlib.runtime.workers.supervisor as workers
from mirrorlib.core.worker_reports import WorkerState
from mirrorlib.errors import MirrorError
from tests.runtime.conftest import wait_for
from tests.runtime.workers.test_supervisor import KEYS, Running, split_evenly


class Fences:
    """A stand-in fence: records the ids, or fails."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.ids: list[str] = []

    def __call__(self, transactional_id: str) -> None:
        self.ids.append(transactional_id)
        if self.fail:
            raise MirrorError(f"fencing the transactional id {transactional_id}: no answer")


def stop(r: Running) -> None:
    r.stop.set()
    r.thread.join(60)
    assert not r.thread.is_alive()


def test_revoked_partitions_are_handed_over_only_after_the_stopping_workers_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A rebalance while the flow stops: the workers are still committing (3 s here), and the
    revocation must not complete before they stopped (another node would copy the partitions
    while they still commit: duplicates for read_committed readers)."""
    monkeypatch.setenv("FAKE_WORKER_STOP_DELAY", "3")
    r = Running(KEYS, fence=Fences())
    r.thread.start()
    try:
        wait_for("two workers", lambda: split_evenly(r), timeout=30)
        r.stop.set()
        began = time.monotonic()
        r.supervisor.await_release(KEYS, r.stop)
        took = time.monotonic() - began
        assert not r.supervisor.holding(KEYS)
        assert took >= 2.5, f"handed over {took:.1f}s into the stop, while the workers commit"
    finally:
        stop(r)


def test_workers_that_stop_cleanly_need_no_fence() -> None:
    fences = Fences()
    r = Running(KEYS, fence=fences)
    r.thread.start()
    wait_for("two workers", lambda: split_evenly(r), timeout=30)
    stop(r)
    assert fences.ids == []
    assert r.supervisor.clean
    infos = r.supervisor.slot_infos()
    assert [i.state for i in infos] == [WorkerState.STOPPED] * 2
    assert all(i.last_error is None for i in infos)


def test_a_worker_killed_at_the_stop_timeout_is_fenced_before_the_slots_are_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FAKE_WORKER_STOP_DELAY", "-1")  # they never stop by themselves
    monkeypatch.setattr(workers, "STOP_TIMEOUT_S", 1.0)
    fences = Fences()
    r = Running(KEYS, fence=fences)
    r.thread.start()
    wait_for("two workers", lambda: split_evenly(r), timeout=30)
    wait_for("every partition copied", lambda: set(r.counts()) == KEYS)  # (the workers write)
    stop(r)
    settings = r.supervisor.s
    assert sorted(fences.ids) == [settings.slot_transactional_id(i) for i in (0, 1)]
    assert r.supervisor.clean
    for info in r.supervisor.slot_infos():
        assert info.state is WorkerState.STOPPED
        assert info.last_error is not None
        assert "killed by signal 9" in info.last_error and "was fenced" in info.last_error


def test_a_killed_worker_whose_id_cannot_be_fenced_is_reported_abandoned_with_its_partitions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FAKE_WORKER_STOP_DELAY", "-1")
    monkeypatch.setattr(workers, "STOP_TIMEOUT_S", 1.0)
    r = Running(KEYS, fence=Fences(fail=True))
    r.thread.start()
    held = {i: frozenset(p) for i, p in enumerate(
        wait_for("two workers", lambda: split_evenly(r) and
                 [i.partitions for i in r.supervisor.slot_infos()], timeout=30)
    )}  # fmt: skip
    wait_for("every partition copied", lambda: set(r.counts()) == KEYS)  # (the workers write)
    released = threading.Event()

    def revoke() -> None:  # a rebalance during the stop: handed over once fenced, or not
        r.supervisor.await_release(KEYS, r.stop)
        released.set()

    stop(r)
    assert not r.supervisor.clean
    infos = r.supervisor.slot_infos()
    assert [i.state for i in infos] == [WorkerState.ABANDONED] * 2
    assert {i.slot: i.partitions for i in infos} == held
    assert all("fencing" in (i.last_error or "") for i in infos)
    threading.Thread(target=revoke, daemon=True).start()
    assert released.wait(5.0)  # (the supervisor stopped: nothing to wait for any more)
