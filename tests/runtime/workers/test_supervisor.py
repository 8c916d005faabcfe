"""The worker supervisor (tasks.max > 1) with stand-in worker processes: no Kafka needed."""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import mirrorlib.runtime.workers.supervisor as workers
from mirrorlib.core.catalog import RemoteTopic, TopicCatalog
from mirrorlib.core.counters import StatsRegistry
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.status import FlowState
from mirrorlib.core.worker_reports import WorkerState
from mirrorlib.runtime.workers.supervisor import Supervisor
from tests.runtime.conftest import offline_settings, wait_for

FAKE = str(Path(__file__).with_name("fake_worker.py"))
KEYS = frozenset({("t", p) for p in range(4)})


def settings() -> FlowSettings:
    return offline_settings(**{"tasks.max": "2", "emit.offset-syncs.enabled": "false"})


def fake_command() -> list[str]:
    return [sys.executable, FAKE]


class Running:
    def __init__(
        self,
        owned: frozenset[tuple[str, int]],
        *,
        command: Callable[[], list[str]] = fake_command,
        recheck: Callable[[], Callable[[], bool]] | None = None,
        fence: Callable[[str], None] | None = None,
    ) -> None:
        self.owned = owned
        self.stats = StatsRegistry("A", "B")
        self.catalog = TopicCatalog()
        self.catalog.publish({"t": RemoteTopic("A.t", 4)})
        self.owned_calls = 0
        self.owned_fails: set[int] = set()  # calls of owned() that raise
        self.supervisor = Supervisor(
            settings(),
            self.stats,
            self.catalog,
            self._owned,
            offsets_topic_partitions=5,
            unresponsive_after=1.0,
            command=command,
            recheck=recheck,
            fence=fence,
        )
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.supervisor.run, args=(self.stop,), daemon=True)

    def _owned(self) -> frozenset[tuple[str, int]]:
        self.owned_calls += 1
        if self.owned_calls in self.owned_fails:
            raise RuntimeError("owned() failed")
        return self.owned

    def counts(self) -> dict[tuple[str, int], int]:
        """partition -> record count in the flow's status."""
        return {(p.topic, p.partition): p.record_count for p in self.stats.snapshot().partitions}

    def rows(self) -> dict[int, tuple[int | None, int, int]]:
        """slot -> (pid, partitions, restarts)."""
        return {w.slot: (w.pid, w.partitions, w.restarts) for w in self.stats.workers}


@pytest.fixture
def running() -> Iterator[Running]:
    r = Running(KEYS)
    r.thread.start()
    yield r
    r.stop.set()
    r.thread.join(30)
    assert not r.thread.is_alive()


def split_evenly(r: Running) -> dict[int, tuple[int | None, int, int]] | None:
    rows = r.rows()
    if len(rows) == 2 and all(pid and n == 2 for pid, n, _ in rows.values()):
        return rows
    return None


def test_partitions_are_split_between_the_workers_and_reported(running: Running) -> None:
    wait_for("two workers with two partitions each", lambda: split_evenly(running), timeout=30)
    wait_for(
        "every partition reported with its worker",
        lambda: (
            {(p.topic, p.partition) for p in running.stats.snapshot().partitions} == KEYS
            and {p.worker for p in running.stats.snapshot().partitions} == {0, 1}
        ),
    )


def test_slot_infos_give_each_workers_own_partitions(running: Running) -> None:
    rows = wait_for("two workers", lambda: split_evenly(running), timeout=30)
    infos = wait_for(
        "both slots running",
        lambda: (i := running.supervisor.slot_infos())
        and all(s.state is WorkerState.RUNNING and len(s.partitions) == 2 for s in i) and i,
        timeout=30,
    )  # fmt: skip
    assert [i.slot for i in infos] == [0, 1]
    assert {i.slot: i.pid for i in infos} == {slot: row[0] for slot, row in rows.items()}
    assert infos[0].partitions | infos[1].partitions == KEYS
    assert not infos[0].partitions & infos[1].partitions


def test_revoked_partitions_are_released_before_await_release_returns(running: Running) -> None:
    wait_for("two workers", lambda: split_evenly(running), timeout=30)
    gone = frozenset({("t", 0), ("t", 1)})
    running.owned = KEYS - gone
    started = time.monotonic()
    running.supervisor.await_release(gone, running.stop)
    assert time.monotonic() - started < 10
    assert not running.supervisor.holding(gone)
    wait_for(
        "the revoked partitions gone from the status",
        lambda: (
            {(p.topic, p.partition) for p in running.stats.snapshot().partitions} == KEYS - gone
        ),
    )


def test_a_killed_worker_is_restarted_and_gets_its_partitions_back(running: Running) -> None:
    rows = wait_for("two workers", lambda: split_evenly(running), timeout=30)
    pid = rows[1][0]
    assert pid is not None
    os.kill(pid, 9)
    states = set()

    def restarted() -> bool:
        info = running.supervisor.slot_infos()[1]
        states.add(info.state)
        row = running.rows().get(1)
        return bool(row and row[0] not in (None, pid) and row[1] == 2 and row[2] == 1)

    wait_for("slot 1 restarted with its partitions", restarted, timeout=30, interval=0.05)
    # between the two processes the slot was restarting, with its back-off
    assert WorkerState.RESTARTING in states


def test_a_workers_blocked_loop_shows_the_flow_stalled_until_the_process_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "stalled"
    monkeypatch.setenv("FAKE_WORKER_STALLED", str(marker))
    r = Running(KEYS)
    r.thread.start()
    try:
        flow = wait_for(
            "the flow stalled by worker 1",
            lambda: (s := r.stats.snapshot()).state is FlowState.STALLED and s,
            timeout=30,
        )
        assert flow.stalled is not None
        assert "worker 1: copier: blocked for 31s" in flow.stalled, flow.stalled
        assert not any("blocked" in e for e in flow.errors), flow.errors  # a stall, not an error
        os.kill(int(marker.read_text()), 9)
        wait_for(
            "the stall gone with the process (its replacement reports no stall)",
            lambda: (s := r.stats.snapshot()).stalled is None and s.state is not FlowState.STALLED,
            timeout=30,
        )
    finally:
        r.stop.set()
        r.thread.join(30)


def test_a_silent_worker_is_replaced_and_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "silent"
    monkeypatch.setenv("FAKE_WORKER_SILENT", str(marker))
    r = Running(KEYS)
    r.thread.start()
    try:
        wait_for("the silent worker started", marker.exists, timeout=30)
        silent = int(wait_for("its pid", marker.read_text, timeout=10))
        wait_for(
            "slot 0 replaced",
            lambda: (row := r.rows().get(0)) and row[0] not in (None, silent) and row[1] == 2,
            timeout=30,
        )
        (slot0,) = [w for w in r.stats.workers if w.slot == 0]
        assert slot0.restarts == 1 and "unresponsive" in (slot0.last_error or "")
        wait_for("the silent process killed", lambda: not Path(f"/proc/{silent}").exists()
                 or "Z" in Path(f"/proc/{silent}/stat").read_text().split()[2], timeout=10)  # fmt: skip
    finally:
        r.stop.set()
        r.thread.join(30)


def stopped(r: Running) -> None:
    r.stop.set()
    r.thread.join(30)
    assert not r.thread.is_alive()


def test_a_partition_moved_between_live_workers_is_counted_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # each process reports one record per partition for each time it was given the partition:
    # a partition's count is the number of holdings the workers reported (their own log), however
    # long a release takes to confirm and however briefly a partition stayed
    log = tmp_path / "holdings"
    monkeypatch.setenv("FAKE_WORKER_LOG", str(log))
    monkeypatch.setenv("FAKE_WORKER_SLOW_APPLY", "1.0")
    monkeypatch.setattr(workers, "DOWN_GRACE_S", 0.0)  # a dead slot's partitions move at once
    monkeypatch.setattr(workers, "REBALANCE_S", 0.5)
    r = Running(KEYS)

    def holdings() -> dict[tuple[str, int], list[tuple[int, int]]]:
        """partition -> (slot, pid) of each holding reported, in order."""
        held: dict[tuple[str, int], list[tuple[int, int]]] = {k: [] for k in KEYS}
        for line in log.read_text().splitlines() if log.exists() else ():
            slot, pid, topic, partition, _ = line.split()
            held[(topic, int(partition))].append((int(slot), int(pid)))
        return held

    def moved_between_live_slots(killed: int) -> bool:
        return any(
            any(a[0] == 0 and b[0] == 1 and b[1] != killed for a, b in itertools.pairwise(h))
            for h in holdings().values()
        )

    r.thread.start()
    try:
        rows = wait_for("two workers", lambda: split_evenly(r), timeout=30)
        wait_for("every partition reported", lambda: set(r.counts()) == KEYS)
        pid = rows[1][0]
        assert pid is not None
        os.kill(pid, 9)  # slot 0 takes slot 1's partitions, then gives some back when it is up
        wait_for(
            "a partition moved from live slot 0 to slot 1",
            lambda: moved_between_live_slots(pid),
            timeout=30,
        )
        last: list[object] = []

        def counted_once() -> bool:
            held, counts = holdings(), r.counts()
            last[:] = [held, counts]
            return {k: len(v) for k, v in held.items()} == counts

        def check(what: str) -> None:
            try:
                wait_for(what, counted_once, timeout=15)
            except AssertionError as exc:
                raise AssertionError(f"{exc}: holdings, counts = {last}") from None

        check("each partition counted once per holding")
        time.sleep(1.0)  # later reports do not count a holding again (a move may still come)
        check("still counted once per holding")
    finally:
        stopped(r)


def test_a_stopped_worker_is_replaced_while_topics_fill_its_pipe() -> None:
    r = Running(KEYS)
    r.thread.start()
    try:
        rows = wait_for("two workers", lambda: split_evenly(r), timeout=30)
        wait_for("both reporting", lambda: all(i.state is WorkerState.RUNNING
                                               for i in r.supervisor.slot_infos()))  # fmt: skip
        pid = rows[0][0]
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        try:
            for n in range(5):  # each catalog over 64 KiB: the stopped worker's pipe fills
                topics = {f"topic-{n}-{i:04d}": RemoteTopic(f"A.topic-{n}-{i:04d}", 1)
                          for i in range(1500)}  # fmt: skip
                r.catalog.publish({"t": RemoteTopic("A.t", 4), **topics})
                time.sleep(0.2)
            wait_for(
                "the stopped worker replaced",
                lambda: (row := r.rows().get(0)) and row[0] not in (None, pid) and row[1] == 2,
                timeout=20,
            )
        finally:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    finally:
        stopped(r)


def test_the_last_reports_of_stopping_workers_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_WORKER_FINAL_REPORTS", "50")
    r = Running(KEYS)
    r.thread.start()
    wait_for("two workers", lambda: split_evenly(r), timeout=30)
    wait_for("every partition reported", lambda: set(r.counts()) == KEYS)
    stopped(r)
    assert r.counts() == dict.fromkeys(KEYS, 50)


def test_a_failing_round_of_the_supervisor_is_retried_and_the_workers_run_on() -> None:
    r = Running(KEYS)
    r.thread.start()
    try:
        rows = wait_for("two workers", lambda: split_evenly(r), timeout=30)
        r.owned_fails = {r.owned_calls + 1}
        wait_for(
            "the failure in the status",
            lambda: any("owned() failed" in e for e in r.stats.errors()),
            timeout=10,
            interval=0.02,
        )
        wait_for(
            "the error cleared",
            lambda: not any("owned() failed" in e for e in r.stats.errors()),
            timeout=15,
            interval=0.05,
        )
        assert r.thread.is_alive()
        assert split_evenly(r) == rows  # the same processes
    finally:
        stopped(r)


def test_a_failed_replacement_keeps_the_slots_partitions_for_the_grace_period(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "silent"
    monkeypatch.setenv("FAKE_WORKER_SILENT", str(marker))
    failing_until = [float("inf")]

    def command() -> list[str]:
        if marker.exists() and time.monotonic() < failing_until[0]:
            failing_until[0] = min(failing_until[0], time.monotonic() + 3.0)
            return [str(tmp_path / "no-such-program")]
        return fake_command()

    r = Running(KEYS, command=command)
    r.thread.start()
    try:
        wait_for("the silent worker started", marker.exists, timeout=30)
        wait_for("slot 0 unresponsive", lambda: failing_until[0] < float("inf"), timeout=30,
                 interval=0.02)  # fmt: skip
        most = 0
        while time.monotonic() < failing_until[0]:
            row = r.rows().get(1)
            most = max(most, row[1] if row else 0)
            time.sleep(0.02)
        assert most == 2  # slot 1 never took slot 0's partitions within the grace period
        wait_for("slot 0 back", lambda: split_evenly(r), timeout=30)
    finally:
        stopped(r)


def test_a_worker_failed_on_data_loss_keeps_its_partitions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "failed"
    monkeypatch.setenv("FAKE_WORKER_FAIL", str(marker))
    monkeypatch.setattr(workers, "DOWN_GRACE_S", 0.2)
    r = Running(KEYS)
    r.thread.start()
    try:
        wait_for("the flow failed", lambda: r.stats.state is FlowState.FAILED, timeout=30)
        wait_for("slot 0 failed", lambda: r.supervisor.slot_infos()[0].state
                 is WorkerState.FAILED, timeout=10)  # fmt: skip
        time.sleep(1.5)
        infos = r.supervisor.slot_infos()
        assert infos[0].state is WorkerState.FAILED
        assert len(infos[1].partitions) == 2  # slot 0's two are copied by no other worker
    finally:
        stopped(r)


def test_a_down_slots_partitions_move_while_its_transactional_id_is_fenced(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The fence of a down slot runs beside the supervisor's loop: its partitions move at once
    (its process is dead), and the slot starts no process until the fence is done (the fence
    would fence it). The target here does not answer: the fence gives up after
    FENCE_TIMEOUT_S."""
    monkeypatch.setattr(workers, "DOWN_GRACE_S", 0.0)  # a dead slot's partitions move at once
    monkeypatch.setattr(workers, "REBALANCE_S", 0.5)
    r = Running(KEYS)
    r.thread.start()
    try:
        with caplog.at_level(logging.INFO, logger="mirrorlib.runtime.workers.supervisor"):
            rows = wait_for("two workers", lambda: split_evenly(r), timeout=30)
            pid = rows[1][0]
            assert pid is not None
            os.kill(pid, signal.SIGKILL)

            def gave_up() -> bool:
                return any("could not fence" in m for m in caplog.messages)

            wait_for("slot 0 copies every partition", lambda: r.rows()[0][1] == 4, timeout=30)
            assert not gave_up(), "the partitions waited for the fence"
            assert r.rows()[1][0] is None  # slot 1 does not start while its id is fenced
            wait_for("the fence gave up", gave_up, timeout=workers.FENCE_TIMEOUT_S + 10)
            wait_for("slot 1 back, with partitions", lambda: split_evenly(r), timeout=30)
    finally:
        stopped(r)


def test_after_a_worker_left_its_silent_parent_no_worker_gets_partitions_until_the_share_is_confirmed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that exits because its parent sent it nothing (the parent was stopped past its
    workers' patience, so maybe past its group session) makes the supervisor ask for the group
    coordinator's word on the share: until it comes no worker gets a partition it does not
    hold, neither the slot's next process nor (past the grace period) the other slot."""
    marker = tmp_path / "left"
    monkeypatch.setenv("FAKE_WORKER_PARENT_SILENT", str(marker))
    monkeypatch.setattr(workers, "DOWN_GRACE_S", 0.5)
    monkeypatch.setattr(workers, "REBALANCE_S", 0.5)
    asked: list[int] = []
    confirmed = threading.Event()

    def recheck() -> Callable[[], bool]:
        asked.append(1)
        return confirmed.is_set

    r = Running(KEYS, recheck=recheck)
    r.thread.start()
    try:
        wait_for("slot 1's first process left", marker.exists, timeout=30)
        left = int(wait_for("its pid", marker.read_text, timeout=10))
        wait_for("the share rechecked", lambda: asked, timeout=10)
        wait_for("slot 1 running again", lambda: (row := r.rows().get(1)) and row[0]
                 not in (None, left), timeout=30)  # fmt: skip
        deadline = time.monotonic() + 3.0  # restart back-off, grace and rebalance all passed
        while time.monotonic() < deadline:
            rows = r.rows()
            assert rows[1][1] == 0, rows  # the new process got nothing
            assert rows[0][1] <= 2, rows  # and slot 0 nothing more
            time.sleep(0.05)
        confirmed.set()
        wait_for("the partitions given again", lambda: split_evenly(r), timeout=30)
    finally:
        stopped(r)


def test_without_a_pause_a_restarted_worker_does_not_wait_for_the_coordinator() -> None:
    """A worker killed for another reason (here SIGKILL) is restarted with its partitions
    without a recheck (the coordinator here never answers): only a pause of this process can
    have ended its group session."""
    asked: list[int] = []

    def recheck() -> Callable[[], bool]:
        asked.append(1)
        return lambda: False

    r = Running(KEYS, recheck=recheck)
    r.thread.start()
    try:
        rows = wait_for("two workers", lambda: split_evenly(r), timeout=30)
        pid = rows[0][0]
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        wait_for("slot 0 restarted with its partitions", lambda: (row := r.rows().get(0))
                 and row[0] not in (None, pid) and row[1] == 2, timeout=30)  # fmt: skip
        assert not asked
    finally:
        stopped(r)
