"""The driver's ``foreachBatch`` function (``CopyBatches``) without Spark or Kafka: Spark's job
and the copy tasks, the planner and the position store are stand-ins, the checkpoint directory
is in memory; what Spark does to the function (run batch after batch, replay the batch that
did not commit in a new driver) is done by the test."""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

import mirrorlib.spark.plane as plane
from mirrorlib.core.batches import TP, Plan, Range
from mirrorlib.core.counters import StatsRegistry
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.status import FlowState
from mirrorlib.core.worker_reports import WorkerState
from mirrorlib.errors import KafkaRequestError, TopicAuthorizationError
from mirrorlib.kafka.ranges.executor import CopyResult, PartitionResult
from mirrorlib.spark.plane import CopyBatches, ParkedLog, driver_slot
from mirrorlib.spark.planner import PlanLog
from tests.runtime.conftest import offline_settings
from tests.spark.test_planner import MemoryFiles

A: TP = ("t", 0)
B: TP = ("t", 1)


class Clock:
    """The driver's ``time`` module, with a monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


class Target:
    """The copy tasks and the target: every record of a range lands, unless the target
    refuses a record of its partition (``refuse``: partition → offset), which parks it."""

    def __init__(self) -> None:
        self.refuse: dict[TP, int] = {}
        self.landed: set[tuple[TP, int]] = set()

    def copy(self, group: Sequence[Range]) -> CopyResult:
        out = CopyResult("task")
        for r in group:
            tp = (r.topic, r.partition)
            stop = self.refuse.get(tp, r.end)
            upto = r.end if not r.start <= stop < r.end else stop
            self.landed.update((tp, o) for o in range(r.start, upto))
            out.partitions.append(
                PartitionResult(
                    r.topic,
                    r.partition,
                    r.start,
                    r.end,
                    upto,
                    records=upto - r.start,
                    error=None if upto == r.end else f"refused {tp}@{upto}",
                )
            )
        return out


class Job:
    def __init__(self, groups: Sequence[Sequence[Range]], target: Target) -> None:
        self.groups, self.target = groups, target

    def mapPartitions(self, _body: Any) -> Job:
        return self

    def collect(self) -> list[CopyResult]:
        return [self.target.copy(g) for g in self.groups]


class Context:
    def __init__(self, target: Target) -> None:
        self.target = target

    def setJobDescription(self, _text: str | None) -> None:
        pass

    def parallelize(self, groups: Sequence[Sequence[Range]], _n: int) -> Job:
        return Job(groups, self.target)


class Planner:
    """Plans every partition up to the source's end offsets (``ends``), from offset 0."""

    def __init__(self) -> None:
        self.ends: dict[TP, int] = {A: 0, B: 0}

    def initial(self) -> dict[TP, int]:
        return dict.fromkeys(self.ends, 0)

    def plan(self, begin: Mapping[TP, int], _before: Any = None) -> Plan:
        return Plan(begin, self.ends, self.ends)

    def take_events(self) -> list[tuple[str, bool]]:
        return []

    def pin(self) -> None:
        pass

    def close(self) -> None:
        pass


class Stores:
    """The position store: what each call stored, or the error ``fail`` says to raise."""

    def __init__(self) -> None:
        self.stored: list[dict[TP, int]] = []
        self.fail: Callable[[], Exception] | None = None

    def __call__(
        self, _s: FlowSettings, _partitions: int, last: Mapping[TP, int], _ids: Any = None
    ) -> None:
        if self.fail is not None:
            raise self.fail()
        self.stored.append(dict(last))


class Driver:
    """A driver process: the flow's ``CopyBatches`` over the checkpoint directory ``files``."""

    def __init__(self, files: MemoryFiles, target: Target, planner: Planner) -> None:
        self.settings = offline_settings()
        self.stats = StatsRegistry("A", "B")
        self.stats.state = FlowState.RUNNING
        flow = types.SimpleNamespace(
            settings=self.settings,
            stats=self.stats,
            metadata=types.SimpleNamespace(offsets_topic_partitions=25),
            catalog=types.SimpleNamespace(snapshot=lambda: (0, {})),
        )
        spark = types.SimpleNamespace(sparkContext=Context(target))
        self.batches = CopyBatches(flow, spark, 1, files, planner)  # type: ignore[arg-type]

    def run(self, batch_id: int) -> None:
        self.batches(None, batch_id)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(plane, "time", fake)
    return fake


@pytest.fixture
def stores(monkeypatch: pytest.MonkeyPatch) -> Stores:
    fake = Stores()
    monkeypatch.setattr(plane, "store_positions", fake)
    monkeypatch.setattr(plane, "position_producer", lambda _s: None)
    monkeypatch.setattr(plane, "SourceView", NoView)  # (the lag in the status: not measured)
    return fake


class NoView:
    def __init__(self, *_args: Any) -> None:
        pass

    def watermarks(self, _tps: Any) -> tuple[dict[TP, int], dict[TP, int]]:
        return {}, {}

    def close(self) -> None:
        pass


def test_a_replayed_batch_finds_what_parked_partitions_owe_after_batches_that_changed_nothing(
    clock: Clock, stores: Stores
) -> None:
    """A parks; batches go by with nothing new (the state written once); B parks in batch 5
    and the driver dies before Spark commits it: the new driver's replay of batch 5 still owes
    A's range, and copies it once the target takes it."""
    files, target, planner = MemoryFiles(), Target(), Planner()
    first = Driver(files, target, planner)
    planner.ends = {A: 21, B: 0}
    target.refuse = {A: 10}
    first.run(0)
    assert first.batches.owed == {A: Range("t", 0, 10, 21)}
    for batch in range(1, 5):  # A keeps being refused; nothing else comes
        clock.now += 100.0
        first.run(batch)
    planner.ends = {A: 21, B: 8}
    target.refuse = {A: 10, B: 3}
    first.run(5)  # ... and the driver is killed before Spark commits batch 5

    target.refuse = {}  # the target takes everything now
    second = Driver(files, target, planner)
    second.run(5)  # Spark replays batch 5 with its plan
    assert not second.batches.owed
    second.run(6)
    assert {o for tp, o in target.landed if tp == A} == set(range(21))
    assert {o for tp, o in target.landed if tp == B} == set(range(8))


def test_a_restart_finds_what_the_replay_left_owed_not_what_the_killed_run_did(
    clock: Clock, stores: Stores
) -> None:
    """The killed run of batch 1 copied A's owed range and kept "nothing owed"; its replay is
    refused again (the same range owed as before the batch, so nothing changed): the
    checkpoint must say what the replay left owed, not the killed run's state."""
    files, target, planner = MemoryFiles(), Target(), Planner()
    first = Driver(files, target, planner)
    planner.ends = {A: 21, B: 0}
    target.refuse = {A: 10}
    first.run(0)
    clock.now += 100.0  # A's back-off is over
    target.refuse = {}
    first.run(1)  # copies A's owed range ... and the driver is killed before the commit
    assert not first.batches.owed

    target.refuse = {A: 10}
    second = Driver(files, target, planner)
    second.run(1)  # the replay is refused again
    assert second.batches.owed == {A: Range("t", 0, 10, 21)}
    clock.now += 0.1  # A's back-off is not over: batch 2 changes nothing
    second.run(2)  # ... and this driver is killed after Spark committed batch 2

    third = Driver(files, target, planner)
    third.run(3)
    assert third.batches.owed == {A: Range("t", 0, 10, 21)}


def test_the_parked_state_is_written_when_it_changes_and_old_files_go(
    clock: Clock, stores: Stores
) -> None:
    files, target, planner = MemoryFiles(), Target(), Planner()
    driver = Driver(files, target, planner)
    planner.ends = {A: 21, B: 0}
    target.refuse = {A: 10}
    for batch in range(30):
        clock.now += 0.1  # within A's back-off: nothing changes
        driver.run(batch)
    # the first batch of a driver writes its state; later ones only when it changes
    assert files.ids(ParkedLog.FOLDER) == [0]
    assert len(files.ids(PlanLog.FOLDER)) <= PlanLog.KEEP + 1


def refused() -> Exception:
    return TopicAuthorizationError(
        "storing 1 position record(s) in mm2-offsets.A.internal on cluster B failed: Broker: "
        "Topic authorization failed (TOPIC_AUTHORIZATION_FAILED)",
        cluster="B",
        resource="mm2-offsets.A.internal",
        code="TOPIC_AUTHORIZATION_FAILED",
    )


def test_positions_not_stored_show_in_the_status_and_are_stored_with_the_next_batch(
    clock: Clock, stores: Stores
) -> None:
    files, target, planner = MemoryFiles(), Target(), Planner()
    driver = Driver(files, target, planner)
    planner.ends = {A: 10, B: 5}
    stores.fail = refused
    driver.run(0)
    status = driver.stats.snapshot()
    assert status.state is FlowState.DEGRADED
    (error,) = status.errors
    assert error.startswith("positions: not stored in mm2-offsets.A.internal on B")
    assert "TOPIC_AUTHORIZATION_FAILED" in error
    (slot,) = driver_slot(driver.stats)  # what `mirrorlib status` shows of the driver
    assert slot.state is WorkerState.RUNNING and slot.last_error == error

    stores.fail = None
    planner.ends = {A: 12, B: 5}  # only A copies in batch 1: B's position is still owed
    clock.now += 1.0
    driver.run(1)
    assert stores.stored == [{A: 11, B: 4}]
    status = driver.stats.snapshot()
    assert status.state is FlowState.RUNNING and not status.errors
    assert driver_slot(driver.stats)[0].last_error is None


def test_positions_that_cannot_be_stored_for_long_fail_the_flow_naming_the_topic(
    clock: Clock, stores: Stores
) -> None:
    files, target, planner = MemoryFiles(), Target(), Planner()
    driver = Driver(files, target, planner)
    stores.fail = refused
    for batch in range(plane.POSITION_FAILURES + 1):
        planner.ends = {A: 10 * (batch + 1), B: 0}
        clock.now += plane.POSITION_FAILURE_S / plane.POSITION_FAILURES
        if batch < plane.POSITION_FAILURES:  # not yet: fewer batches or seconds
            driver.run(batch)
            assert driver.stats.snapshot().state is FlowState.DEGRADED
            continue
        with pytest.raises(KafkaRequestError) as failed:
            driver.run(batch)
    message = str(failed.value)
    assert "flow A->B failed: positions not stored in mm2-offsets.A.internal on B" in message
    assert "TOPIC_AUTHORIZATION_FAILED" in message
    assert failed.value.resource == "mm2-offsets.A.internal"
    assert driver.stats.snapshot().state is FlowState.FAILED
    (slot,) = driver_slot(driver.stats)
    assert slot.state is WorkerState.FAILED and "TOPIC_AUTHORIZATION_FAILED" in str(slot.last_error)
