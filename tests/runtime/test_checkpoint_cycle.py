"""One checkpoint cycle without a broker: unchanged pairs are skipped, changes are translated."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from mirrorlib.core.config import MirrorConfig
from mirrorlib.core.counters import StatsRegistry
from mirrorlib.core.records import Checkpoint, OffsetAndMetadata, OffsetSync, TopicPartition
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.syncs import SyncLineage
from mirrorlib.runtime.checkpoints import CheckpointTask

TP = TopicPartition("t", 0)


class _Msg:
    def __init__(self, key: bytes, value: bytes, headers: Any = None) -> None:
        self._key, self._value, self._headers = key, value, headers

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes:
        return self._value

    def headers(self) -> Any:
        return self._headers

    def timestamp(self) -> tuple[int, int]:
        return (1, 1000)


class _Producer:
    def __init__(self) -> None:
        self.written: list[Checkpoint] = []
        self._reports: list[Any] = []
        self.fail = False

    def produce(self, _topic: str, value: bytes, key: bytes, _p: int, **kw: Any) -> None:
        self.written.append(Checkpoint.decode(key, value))
        self._reports.append(kw["on_delivery"])

    def flush(self, _timeout: float) -> int:
        reports, self._reports = self._reports, []
        for report in reports:
            report("failed" if self.fail else None, None)
        return 0


class _Source:
    def __init__(self) -> None:
        self.offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}

    def committed_offsets_many(
        self, groups: Iterable[str]
    ) -> Mapping[str, Mapping[TopicPartition, OffsetAndMetadata] | Exception]:
        return {g: dict(self.offsets.get(g, {})) for g in groups}


def _task(extra: str = "") -> CheckpointTask:
    props = "clusters=A,B A.bootstrap.servers=a:1 B.bootstrap.servers=b:1 A->B.enabled=true"
    props += f" {extra}" if extra else ""
    cfg = MirrorConfig.from_properties(
        dict(kv.split("=", 1) for kv in (props + " A->B.topics=.* A->B.groups=.*").split())
    )
    flow = next(f for f in cfg.flows if f.source == "A")
    return CheckpointTask(FlowSettings.from_config(cfg, flow), StatsRegistry("A", "B"))


def _sync(up: int, down: int, seq: int) -> _Msg:
    s = OffsetSync("t", 0, up, down)
    return _Msg(s.encode_key(), s.encode_value(), [SyncLineage("w", seq).to_header()])


def test_unchanged_pairs_are_skipped_and_changes_translated() -> None:
    task, producer, source = _task(), _Producer(), _Source()
    task.take_syncs([_sync(0, 0, 0), _sync(100, 100, 1)])
    task.groups = ["g"]
    source.offsets["g"] = {TP: OffsetAndMetadata(50)}
    first = task.emit_checkpoints(producer, source=source)
    assert (first.translated, first.produced) == (1, 1)
    assert producer.written[-1].downstream_offset == 50  # exact: inside the run
    again = task.emit_checkpoints(producer, source=source)
    assert (again.pairs, again.translated, again.produced) == (1, 0, 0)
    # a commit past the newest sync: newest + 1 until a sync covers it
    source.offsets["g"] = {TP: OffsetAndMetadata(150)}
    assert task.emit_checkpoints(producer, source=source).produced == 1
    assert producer.written[-1].downstream_offset == 101
    task.take_syncs([_sync(200, 200, 2)])  # covers 150: translated again, exactly
    assert task.emit_checkpoints(producer, source=source).produced == 1
    assert producer.written[-1].downstream_offset == 150
    task.take_syncs([_sync(300, 300, 3)])  # 150 is below the newest sync: nothing new
    assert task.emit_checkpoints(producer, source=source).translated == 0


def test_a_failed_write_is_translated_again() -> None:
    task, producer, source = _task(), _Producer(), _Source()
    task.take_syncs([_sync(0, 0, 0), _sync(100, 100, 1)])
    task.groups = ["g"]
    source.offsets["g"] = {TP: OffsetAndMetadata(50)}
    producer.fail = True
    assert task.emit_checkpoints(producer, source=source).produced == 1
    assert len(task.store) == 0
    producer.fail = False
    assert task.emit_checkpoints(producer, source=source).produced == 1
    assert len(task.store) == 1


def _commit_record(offset: int) -> _Msg:
    k = struct.pack(">hh", 1, 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 0)
    v = struct.pack(">hqih", 3, offset, -1, 0) + struct.pack(">q", 1000)
    return _Msg(k, v)


def test_commits_from_consumer_offsets_are_emitted_promptly_with_a_spacing() -> None:
    task, producer = _task(), _Producer()
    task.take_syncs([_sync(0, 0, 0), _sync(100, 100, 1)])
    assert task.take_commits([_commit_record(40)]) == 1
    assert task.emit_checkpoints(producer, prompt=True).produced == 1
    assert task.take_commits([_commit_record(60)]) == 1
    # the group had a pass less than the spacing ago: it waits
    assert task.emit_checkpoints(producer, prompt=True).produced == 0
    assert task.prompt
    due = task.prompt.next_due()
    assert due is not None
    time.sleep(max(due - time.monotonic(), 0.0))
    assert task.emit_checkpoints(producer, prompt=True).produced == 1
    # a commit that does not change the translated offset writes nothing
    assert task.take_commits([_commit_record(150)]) == 1
    time.sleep(0.2)
    assert task.emit_checkpoints(producer, prompt=True).produced == 1  # newest sync + 1
    assert task.take_commits([_commit_record(170)]) == 1
    time.sleep(0.2)
    assert task.emit_checkpoints(producer, prompt=True).produced == 0
    assert [cp.downstream_offset for cp in producer.written] == [40, 60, 101]


def test_without_checkpoints_on_commit_a_group_waits_for_the_fixed_rate_cycle() -> None:
    task, producer = _task("emit.checkpoints.on.commit.enabled=false"), _Producer()
    task.take_syncs([_sync(0, 0, 0), _sync(100, 100, 1)])
    assert task.take_commits([_commit_record(40)]) == 1
    assert task.emit_checkpoints(producer, prompt=True).produced == 1  # idle group: at once
    assert task.take_commits([_commit_record(60)]) == 1
    # the group had a cycle less than an interval ago: it waits for the fixed-rate cycle
    assert task.emit_checkpoints(producer, prompt=True).produced == 0
    assert task.emit_checkpoints(producer).produced == 1
    assert [cp.downstream_offset for cp in producer.written] == [40, 60]


def test_a_failed_write_following_commits_is_emitted_again_for_an_idle_group() -> None:
    task, producer = _task(), _Producer()
    task.following_commits = True
    task.take_syncs([_sync(0, 0, 0), _sync(100, 100, 1)])
    task.take_commits([_commit_record(40)])
    producer.fail = True
    assert task.emit_checkpoints(producer).produced == 1
    producer.fail = False
    assert task.emit_checkpoints(producer).produced == 1  # no new commit, no new sync
    assert len(task.store) == 1


def _group_commit(group: str, offset: int) -> _Msg:
    g = group.encode()
    k = struct.pack(">hh", 1, len(g)) + g + struct.pack(">h", 1) + b"t" + struct.pack(">i", 0)
    v = struct.pack(">hqih", 3, offset, -1, 0) + struct.pack(">q", 1000)
    return _Msg(k, v)


class _BoundedProducer(_Producer):
    """Like librdkafka's producer: ``produce`` raises BufferError while ``limit`` messages await
    their delivery reports (``queue.buffering.max.messages``); ``poll`` serves the reports.
    ``refuse_after``: the write that raises a KafkaException-like error instead (once)."""

    def __init__(self, limit: int, refuse_after: int | None = None) -> None:
        super().__init__()
        self.limit, self.refuse_after, self.full = limit, refuse_after, 0

    def produce(self, topic: str, value: bytes, key: bytes, p: int, **kw: Any) -> None:
        if self.refuse_after is not None and len(self.written) == self.refuse_after:
            self.refuse_after = None
            raise RuntimeError("Local: Unknown topic")
        if len(self._reports) >= self.limit:
            self.full += 1
            raise BufferError("Local: Queue full")
        super().produce(topic, value, key, p, **kw)

    def poll(self, _timeout: float) -> int:
        return self.flush(_timeout)


def test_a_cycle_longer_than_the_producers_queue_writes_every_group() -> None:
    task, producer = _task(), _BoundedProducer(limit=10)
    task.following_commits = True
    task.take_syncs([_sync(0, 0, 0), _sync(100, 100, 1)])
    groups = [f"g{i:02d}" for i in range(50)]
    task.take_commits([_group_commit(g, 40) for g in groups])
    assert task.emit_checkpoints(producer).produced == 50
    assert producer.full > 0  # the queue did fill up
    assert sorted(cp.group for cp in producer.written) == groups
    assert len(task.store) == 50


def test_a_cycle_cut_short_writes_the_remaining_groups_on_the_next_cycle() -> None:
    task, producer = _task(), _BoundedProducer(limit=100, refuse_after=20)
    task.following_commits = True
    task.take_syncs([_sync(0, 0, 0), _sync(100, 100, 1)])
    groups = [f"g{i:02d}" for i in range(50)]
    task.take_commits([_group_commit(g, 40) for g in groups])
    with pytest.raises(RuntimeError):
        task.emit_checkpoints(producer)
    producer.flush(1.0)
    assert len(task.store) == 20
    # no new commit, no new sync: the groups not written (the failed one too) are written now
    assert task.emit_checkpoints(producer).produced == 30
    assert sorted(cp.group for cp in producer.written) == groups
    assert len(task.store) == 50


class _LogMsg(_Msg):
    def topic(self) -> str:
        return "A.checkpoints.internal"

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return 7


def test_checkpoints_read_at_start_up_are_kept_for_replicated_groups_only() -> None:
    task = _task("A->B.groups.exclude=skip.*")
    kept = Checkpoint("g", "A.t", 0, 150, 140, "m")
    records = [
        _LogMsg(kept.encode_key(), kept.encode_value()),
        _LogMsg(Checkpoint("skip-me", "A.t", 0, 1, 1, "").encode_key(), kept.encode_value()),
        _LogMsg(kept.encode_key(), b"\x00"),  # corrupt: counted and skipped
    ]
    assert task.take_checkpoints(records) == 1
    assert task.store.get("g", TopicPartition("A.t", 0)) == kept
    assert task.store.get("skip-me", TopicPartition("A.t", 0)) is None
    assert task.corrupt_records == 1


# -- forgetting groups gone from the source; never re-creating a group deleted on the target -----


def _tombstone(group: str) -> _Msg:
    deleted = _group_commit(group, 0)
    return _Msg(deleted.key(), None)  # type: ignore[arg-type]


def _following(groups: list[str]) -> tuple[CheckpointTask, _Producer]:
    task, producer = _task(), _Producer()
    task.following_commits = True
    task.take_syncs([_sync(0, 0, 0), _sync(100, 100, 1)])
    task.take_commits([_group_commit(g, 40) for g in groups])
    assert task.emit_checkpoints(producer).produced == len(groups)
    return task, producer


def test_the_state_of_a_group_deleted_on_the_source_is_forgotten() -> None:
    task, producer = _following(["stays", "gone"])
    assert task.store.groups() == ["gone", "stays"]
    assert task.forget_gone_groups() == set()
    task.take_commits([_tombstone("gone")])  # deleted (or expired) on the source
    task.emit_checkpoints(producer)  # the cycle that takes the change in
    assert task.forget_gone_groups() == {"gone"}
    assert task.store.groups() == ["stays"]
    assert task.forget_gone_groups() == set()
    # committing again later, it is a new group: checkpointed afresh
    task.take_commits([_group_commit("gone", 30)])
    assert task.emit_checkpoints(producer).produced == 1
    assert task.store.get("gone", TopicPartition("A.t", 0)) == Checkpoint("gone", "A.t", 0, 30, 30)


def test_a_group_is_forgotten_only_once_its_checkpoints_are_acknowledged() -> None:
    task, _ = _following(["gone"])
    task.take_commits([_group_commit("gone", 50)])

    class Unacknowledged(_Producer):
        def flush(self, _timeout: float) -> int:
            return 1  # the reports are still to come

    late = Unacknowledged()
    assert task.emit_checkpoints(late).produced == 1
    task.take_commits([_tombstone("gone")])
    assert task.forget_gone_groups() == set()  # its checkpoint is in flight
    _Producer.flush(late, 1.0)  # the acknowledgement
    assert task.forget_gone_groups() == {"gone"} and task.store.groups() == []


def test_offset_fetch_mode_forgets_groups_no_longer_listed() -> None:
    task, producer, source = _task(), _Producer(), _Source()
    task.take_syncs([_sync(0, 0, 0), _sync(100, 100, 1)])
    for g in ("stays", "gone"):
        source.offsets[g] = {TP: OffsetAndMetadata(40)}
    task.groups = ["stays", "gone"]
    assert task.emit_checkpoints(producer, source=source).produced == 2
    assert task.forget_gone_groups() == set()  # the groups were never listed: nothing known
    task.list_groups(lambda: ["stays", "new"])
    assert task.forget_gone_groups() == {"gone"} and task.store.groups() == ["stays"]


class _Target:
    """Group offset sync's view of the target (GroupAdmin's batch calls)."""

    def __init__(self) -> None:
        self.offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        self.active: set[str] = set()

    def states(self, groups: list[str]) -> dict[str, str]:
        return {
            g: "active" if g in self.active else "empty" if g in self.offsets else "absent"
            for g in groups
        }

    def committed_offsets_many(
        self, groups: Iterable[str]
    ) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
        return {g: dict(self.offsets.get(g, {})) for g in groups}

    def commit_offsets_many(
        self, offsets: Mapping[str, Mapping[TopicPartition, OffsetAndMetadata]]
    ) -> dict[str, None]:
        for g, o in offsets.items():
            self.offsets.setdefault(g, {}).update(o)
        return {g: None for g in offsets}


def test_offset_sync_never_re_creates_a_group_deleted_on_the_target() -> None:
    task, producer = _following(["deleted", "new"])
    target = _Target()
    remote = TopicPartition("A.t", 0)
    assert task.sync_group_offsets(target) == 2  # type: ignore[arg-type]
    assert target.offsets["deleted"] == {remote: OffsetAndMetadata(40)}
    del target.offsets["deleted"]  # an operator deletes it on the target
    task.take_commits([_group_commit("deleted", 60), _group_commit("new", 60)])
    assert task.emit_checkpoints(producer).produced == 2
    for _ in range(12):  # a full round included
        task.sync_group_offsets(target)  # type: ignore[arg-type]
    assert "deleted" not in target.offsets  # left alone
    assert target.offsets["new"] == {remote: OffsetAndMetadata(60)}  # still synced
    # it exists on the target again (its consumers committed there): synced forward again
    target.offsets["deleted"] = {remote: OffsetAndMetadata(50)}
    for _ in range(10):
        task.sync_group_offsets(target)  # type: ignore[arg-type]
    assert target.offsets["deleted"] == {remote: OffsetAndMetadata(60)}
