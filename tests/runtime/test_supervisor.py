"""The worker supervisor (tasks.max > 1) with stand-in worker processes: no Kafka needed."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mirrorlib import MirrorConfig
from mirrorlib.core.catalog import RemoteTopic, TopicCatalog
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.status import StatsRegistry
from mirrorlib.core.worker_reports import WorkerState
from mirrorlib.runtime.workers import Supervisor
from tests.runtime.conftest import wait_for

FAKE = str(Path(__file__).with_name("fake_worker.py"))
KEYS = frozenset({("t", p) for p in range(4)})


def settings() -> FlowSettings:
    cfg = MirrorConfig.from_properties(
        {
            "clusters": "A, B",
            "A.bootstrap.servers": "127.0.0.1:1",
            "B.bootstrap.servers": "127.0.0.1:2",
            "A->B.enabled": "true",
            "tasks.max": "2",
            "emit.offset-syncs.enabled": "false",
        }
    )
    return FlowSettings.from_config(cfg, cfg.flow("A", "B"))


class Running:
    def __init__(self, owned: frozenset[tuple[str, int]]) -> None:
        self.owned = owned
        self.stats = StatsRegistry("A", "B")
        catalog = TopicCatalog()
        catalog.publish({"t": RemoteTopic("A.t", 4)})
        self.supervisor = Supervisor(
            settings(),
            self.stats,
            catalog,
            lambda: self.owned,
            offsets_topic_partitions=5,
            unresponsive_after=1.0,
            command=lambda: [sys.executable, FAKE],
        )
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.supervisor.run, args=(self.stop,), daemon=True)

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
