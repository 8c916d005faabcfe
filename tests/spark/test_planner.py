"""The plans of a flow's batches in its checkpoint location (no Spark, no Kafka)."""

from __future__ import annotations

from mirrorlib.core.batches import Plan
from mirrorlib.spark.planner import PlanLog


class MemoryFiles:
    """A flow's checkpoint directory in memory (what ``CheckpointFiles`` does on Hadoop)."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def ids(self, folder: str) -> list[int]:
        names = [k.split("/", 1)[1] for k in self.data if k.startswith(f"{folder}/")]
        return sorted(int(n) for n in names if n.isdigit())

    def read(self, name: str) -> bytes | None:
        return self.data.get(name)

    def write(self, name: str, data: bytes) -> None:
        self.data[name] = data

    def delete(self, name: str) -> None:
        del self.data[name]


def plan(start: int, end: int) -> Plan:
    return Plan({("t", 0): start}, {("t", 0): end}, {("t", 0): 100})


def test_a_new_query_has_no_start_and_a_replayed_batch_gets_its_plan_back() -> None:
    log = PlanLog(MemoryFiles())  # type: ignore[arg-type]
    assert log.last_end(0) is None and log.get(0) is None
    log.save(0, plan(0, 10))
    log.save(1, plan(10, 25))
    assert log.get(1) == plan(10, 25)  # Spark replays batch 1: the same ranges
    assert log.last_end(1) == {("t", 0): 10}  # batch 1 starts where batch 0 ended
    assert log.last_end(2) == {("t", 0): 25}
    assert log.last_end(7) == {("t", 0): 25}  # the newest plan before the batch


def test_old_plans_are_deleted() -> None:
    files = MemoryFiles()
    log = PlanLog(files)  # type: ignore[arg-type]
    for batch in range(30):
        log.save(batch, plan(batch, batch + 1))
    assert files.ids(PlanLog.FOLDER) == list(range(30 - PlanLog.KEEP - 1, 30))
    assert log.last_end(30) == {("t", 0): 30}
