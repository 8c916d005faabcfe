"""Checkpoint emission and group offset sync rules (MirrorCheckpointTaskTest cases)."""

from __future__ import annotations

from mirrorlib import (
    Checkpoint,
    DefaultReplicationPolicy,
    OffsetAndMetadata,
    OffsetSync,
    TopicPartition,
)
from mirrorlib.core.checkpointing import (
    CheckpointFields,
    CheckpointLedger,
    CheckpointStore,
    GroupOffsetSync,
    PromptSchedule,
    TargetGroupAction,
    TargetGroups,
    group_offsets_to_sync,
    groups_to_forget,
    is_more_recent,
    next_emission,
    rename_topic,
)
from mirrorlib.core.translate import OffsetTranslator

P = DefaultReplicationPolicy()


def test_renaming_like_mm2() -> None:
    assert rename_topic(P, "source1", "target2", "topic3") == "source1.topic3"
    assert rename_topic(P, "source1", "target2", "target2.topic3") == "topic3"
    assert rename_topic(P, "source1", "target2", "source6.topic7") == "source1.source6.topic7"


def _run(
    translator: OffsetTranslator, store: CheckpointStore, offsets: dict[TopicPartition, int]
) -> list[Checkpoint]:
    """One pass of a fresh ledger over group ``g`` (a task started with ``store`` loaded),
    every written checkpoint acknowledged at once."""
    ledger = CheckpointLedger(
        translator,
        rename=lambda t: rename_topic(P, "source1", "target2", t),
        should_checkpoint_topic=lambda t: not t.startswith("excluded"),
        store=store,
    )
    cps: list[Checkpoint] = []

    def write(
        _key: bytes, _tp: TopicPartition, dtp: TopicPartition, fields: CheckpointFields, *_: object
    ) -> None:
        cps.append(Checkpoint("g", dtp.topic, dtp.partition, *fields))
        ledger.acknowledged("g", dtp, fields)

    ledger.begin().group("g", {tp: OffsetAndMetadata(o, "m") for tp, o in offsets.items()}, write)
    return cps


def test_checkpoint_translation_like_mm2() -> None:
    t = OffsetTranslator()
    t.add(OffsetSync("topic1", 2, 3, 4))
    t.add(OffsetSync("target2.topic5", 6, 7, 8))
    store = CheckpointStore()
    cps = _run(t, store, {TopicPartition("topic1", 2): 10, TopicPartition("target2.topic5", 6): 12})
    assert Checkpoint("g", "source1.topic1", 2, 10, 5, "m") in cps
    assert Checkpoint("g", "topic5", 6, 12, 9, "m") in cps


def test_no_checkpoint_without_sync_or_for_filtered_topics() -> None:
    t = OffsetTranslator()
    t.add(OffsetSync("excluded", 0, 0, 0))
    store = CheckpointStore()
    assert _run(t, store, {TopicPartition("unknown", 0): 5, TopicPartition("excluded", 0): 5}) == []


def test_checkpoints_are_monotonic_unless_upstream_rewinds() -> None:
    t = OffsetTranslator()
    store = CheckpointStore()
    tp = TopicPartition("t", 0)
    t.add(OffsetSync("t", 0, 100, 200))
    assert [c.downstream_offset for c in _run(t, store, {tp: 150})] == [201]
    assert _run(t, store, {tp: 150}) == []  # repeated
    # a restarted store that translates more coarsely must not move the checkpoint back
    t2 = OffsetTranslator()
    t2.add(OffsetSync("t", 0, 10, 20))
    assert _run(t2, store, {tp: 160}) == []  # translates to 21 < 201
    # an upstream rewind of the group is emitted even though it goes back downstream
    assert [c.downstream_offset for c in _run(t2, store, {tp: 12})] == [21]


def test_group_offset_sync_never_rewinds() -> None:
    cps = [
        Checkpoint("g", "A.t", 0, 100, 101),
        Checkpoint("g", "A.t", 1, 50, 51),
        Checkpoint("g", "A.t", 2, 7, 7),
    ]
    # group absent on the target: everything is written
    assert group_offsets_to_sync(cps, None) == {
        TopicPartition("A.t", 0): OffsetAndMetadata(101),
        TopicPartition("A.t", 1): OffsetAndMetadata(51),
        TopicPartition("A.t", 2): OffsetAndMetadata(7),
    }
    target = {
        TopicPartition("A.t", 0): OffsetAndMetadata(150),  # ahead: keep
        TopicPartition("A.t", 1): OffsetAndMetadata(10),  # behind: advance
        TopicPartition("A.t", 2): None,  # null: overwrite
    }
    assert group_offsets_to_sync(cps, target) == {
        TopicPartition("A.t", 1): OffsetAndMetadata(51),
        TopicPartition("A.t", 2): OffsetAndMetadata(7),
    }


def test_next_emission_keeps_a_fixed_rate() -> None:
    # on time (or early): one interval after the previous due time, not after "now"
    assert next_emission(10.0, 1.0, 10.3) == 11.0
    assert next_emission(10.0, 1.0, 9.0) == 11.0
    # a slow cycle skips the slots it missed instead of drifting
    assert next_emission(10.0, 1.0, 11.0) == 12.0
    assert next_emission(10.0, 1.0, 12.5) == 13.0
    assert next_emission(10.0, 60.0, 10.001) == 70.0
    # no interval: due again now
    assert next_emission(10.0, 0.0, 12.5) == 12.5


def test_store_keeps_fields_and_answers_with_checkpoints() -> None:
    store = CheckpointStore()
    a0, a1 = TopicPartition("A.t", 0), TopicPartition("A.t", 1)
    store.add(Checkpoint("g", "A.t", 0, 100, 101, "m"))
    store.put("g", a1, (50, 51, ""))
    store.put("h", a0, (7, 7, "x"))
    assert store.get("g", a0) == Checkpoint("g", "A.t", 0, 100, 101, "m")
    assert store.get("g", TopicPartition("A.t", 9)) is None and store.get("z", a0) is None
    assert store.group("g") == {
        a0: Checkpoint("g", "A.t", 0, 100, 101, "m"),
        a1: Checkpoint("g", "A.t", 1, 50, 51),
    }
    assert store.latest("g") == {a0: (100, 101, "m"), a1: (50, 51, "")}
    assert store.latest("nobody") == {}
    assert store.groups() == ["g", "h"] and len(store) == 3
    # newer: upstream rewind or downstream advance (MM2's checkpointIsMoreRecent)
    latest = store.latest("g")
    assert is_more_recent(latest.get(a0), 90, 95)
    assert is_more_recent(latest.get(a0), 100, 102)
    assert not is_more_recent(latest.get(a0), 120, 101)
    assert is_more_recent(latest.get(TopicPartition("A.t", 5)), 1, 1)
    # the store's offsets to sync are the rule's over its checkpoints
    target = {a0: OffsetAndMetadata(150), a1: None}
    for found in (None, target, {}):
        assert store.offsets_to_sync("g", found) == group_offsets_to_sync(
            store.group("g").values(), found
        )
    assert store.offsets_to_sync("g", target) == {a1: OffsetAndMetadata(51)}


def test_prompt_passes_coalesce_commits_and_space_each_group() -> None:
    sched = PromptSchedule(group_spacing=0.25, pass_spacing=0.125)
    assert not sched and sched.next_due() is None and sched.due(0.0) == set()
    sched.add(["g1", "g2"])
    assert sched.next_due() == float("-inf")  # never passed: due at once
    assert sched.due(10.0) == {"g1", "g2"} and not sched
    # g1 commits again at once: it waits for its group spacing; g3's first commit waits for
    # the pass spacing only
    sched.add(["g1", "g3"])
    assert sched.due(10.0625) == set()
    assert sched.next_due() == 10.125
    assert sched.due(10.125) == {"g3"}
    assert sched.next_due() == 10.25
    assert sched.due(10.25) == {"g1"}
    # a burst of commits (of g2, and g3 again) before the next pass: written in one pass
    sched.add(["g2", "g3"])
    sched.add(["g2"])
    assert sched.due(10.375) == {"g2", "g3"} and sched.due(11.0) == set()


def test_a_fixed_rate_cycle_takes_every_waiting_group_and_counts_as_a_pass() -> None:
    sched = PromptSchedule(group_spacing=1.0, pass_spacing=0.0)
    sched.add(["g"])
    assert sched.due(5.0) == {"g"}
    sched.add(["g"])
    assert sched.due(5.5) == set()  # checkpoints on commit off: one pass per interval
    assert sched.take_all(5.6) == {"g"} and not sched
    sched.passed({"g"}, 5.6)
    sched.add(["g"])
    assert sched.due(6.5) == set()
    assert sched.due(6.6) == {"g"}


# -- pruning: groups gone from the source, groups deleted on the target ----------------------------


def test_groups_gone_from_the_source_or_filtered_out_are_forgotten() -> None:
    known = ["stays", "deleted-on-a", "ephemeral-1", "filtered"]
    on_source = {"stays", "filtered", "new-on-a"}
    forget = groups_to_forget(known, on_source, lambda g: g != "filtered")
    assert forget == {"deleted-on-a", "ephemeral-1", "filtered"}
    # a group new on the source is not ours to forget; nothing known, nothing forgotten
    assert groups_to_forget([], on_source, lambda g: True) == set()


def test_store_forgets_groups() -> None:
    store = CheckpointStore()
    for group in ("a", "b", "c"):
        store.add(Checkpoint(group, "A.t", 0, 1, 1))
    store.forget({"a", "c", "never-known"})
    assert store.groups() == ["b"] and len(store) == 1
    assert store.group("a") == {} and store.latest("a") == {}


def test_a_group_absent_on_the_target_is_created_only_if_it_never_existed_there() -> None:
    t = TargetGroups()
    # new on the source, never on the target: created (as MM2 and before)
    assert t.decide("new", "absent") is TargetGroupAction.CREATE
    t.committed("new")
    # it now exists there: updated forward while empty, untouched while active
    assert t.decide("new", "empty") is TargetGroupAction.UPDATE
    assert t.decide("new", "active") is TargetGroupAction.SKIP
    assert t.decide("new", "unknown") is TargetGroupAction.SKIP
    # an operator deleted it on the target: never re-created, reported once
    assert t.decide("new", "absent") is TargetGroupAction.DELETED_NOW
    assert t.decide("new", "absent") is TargetGroupAction.DELETED
    assert t.deleted == {"new"}
    # it appears there again (its consumers started there, say): updated forward again
    assert t.decide("new", "empty") is TargetGroupAction.UPDATE
    assert t.deleted == set()


def test_a_group_seen_on_the_target_but_never_synced_is_not_re_created_either() -> None:
    t = TargetGroups()
    assert t.decide("g", "active") is TargetGroupAction.SKIP  # consumers on the target
    assert t.decide("g", "absent") is TargetGroupAction.DELETED_NOW
    t2 = TargetGroups()
    assert t2.decide("g", "empty") is TargetGroupAction.UPDATE
    assert t2.decide("g", "absent") is TargetGroupAction.DELETED_NOW


def test_forgotten_groups_leave_the_target_memory() -> None:
    t = TargetGroups()
    t.committed("gone")
    t.decide("gone", "absent")
    t.forget({"gone"})
    assert t.deleted == set() and len(t) == 0
    # a group of the same name created later on the source is a new group
    assert t.decide("gone", "absent") is TargetGroupAction.CREATE


# -- the ledger: what a checkpoint task writes, cycle after cycle ---------------------------------

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


class _Writes:
    """A write callback that records (group, upstream, downstream, fields, moved, sync ms),
    failing while :attr:`fail` is set."""

    def __init__(self) -> None:
        self.seen: list[tuple[TopicPartition, TopicPartition, tuple[int, int, str], bool]] = []
        self.sync_ms: list[int | None] = []
        self.keys: list[bytes] = []
        self.fail = False

    def __call__(
        self,
        key: bytes,
        tp: TopicPartition,
        dtp: TopicPartition,
        fields: tuple[int, int, str],
        moved: bool,
        sync_ms: int | None,
    ) -> None:
        if self.fail:
            raise BufferError("queue full")
        self.keys.append(key)
        self.seen.append((tp, dtp, fields, moved))
        self.sync_ms.append(sync_ms)


def _ledger() -> tuple[OffsetTranslator, CheckpointLedger]:
    t = OffsetTranslator()
    t.add(OffsetSync("t", 0, 100, 200))
    t.add(OffsetSync("t", 1, 10, 10))
    ledger = CheckpointLedger(
        t,
        rename=lambda topic: rename_topic(P, "A", "B", topic),
        should_checkpoint_topic=lambda topic: topic != "skipped",
    )
    return t, ledger


def _offsets(**by_partition: int) -> dict[TopicPartition, OffsetAndMetadata]:
    return {TopicPartition("t", int(p[1:])): OffsetAndMetadata(o) for p, o in by_partition.items()}


def test_the_ledger_writes_checkpoints_with_mm2_keys_and_records_them_once_acknowledged() -> None:
    _t, ledger = _ledger()
    writes = _Writes()
    cycle = ledger.begin({("t", 0): 1234})
    cycle.group("g", _offsets(p0=150, p1=12), writes)
    assert [(dtp, fields, moved) for _tp, dtp, fields, moved in writes.seen] == [
        (TopicPartition("A.t", 0), (150, 201, ""), True),
        (TopicPartition("A.t", 1), (12, 11, ""), True),
    ]
    assert writes.keys[0] == Checkpoint("g", "A.t", 0, 150, 201).encode_key()
    assert writes.sync_ms == [1234, None]
    assert (cycle.pairs, cycle.translated, cycle.produced) == (2, 2, 2)
    assert len(ledger.store) == 0 and ledger.in_flight("g")  # nothing counts before the ack
    for _tp, dtp, fields, _moved in writes.seen:
        ledger.acknowledged("g", dtp, fields)
    assert ledger.store.get("g", TopicPartition("A.t", 0)) == Checkpoint("g", "A.t", 0, 150, 201)
    assert not ledger.in_flight("g")


def test_an_unchanged_pair_is_not_translated_again_until_a_sync_can_change_its_answer() -> None:
    t, ledger = _ledger()
    writes = _Writes()
    ledger.begin().group("g", _offsets(p0=150), writes)
    ledger.acknowledged("g", writes.seen[0][1], writes.seen[0][2])
    again = ledger.begin()
    again.group("g", _offsets(p0=150), writes)
    assert (again.pairs, again.translated, again.produced) == (1, 0, 0)
    # the group's offset was past the newest sync: a new sync may change the answer
    t.add(OffsetSync("t", 0, 300, 400))
    assert ledger.watching([("t", 0)]) == {"g": None}
    retranslated = ledger.begin()
    retranslated.group("g", _offsets(p0=150), writes)
    assert (retranslated.translated, retranslated.produced) == (1, 0)  # same answer: no write
    # now the offset is behind the newest sync: a sync further on cannot change the answer
    t.add(OffsetSync("t", 0, 500, 600))
    skipped = ledger.begin()
    skipped.group("g", _offsets(p0=150), writes)
    assert skipped.translated == 0
    # a new offset is translated and, being more recent, written
    moved = ledger.begin()
    moved.group("g", _offsets(p0=350), writes)
    assert (moved.translated, moved.produced) == (1, 1)
    assert writes.seen[-1][2:] == ((350, 401, ""), True)


def test_a_checkpoint_in_flight_is_not_written_twice_and_a_failed_one_is_written_again() -> None:
    _t, ledger = _ledger()
    writes = _Writes()
    ledger.begin().group("g", _offsets(p0=150), writes)
    tp, dtp, fields, _ = writes.seen[0]
    # translated again (say: a fixed-rate cycle after a memo loss) while still in flight
    ledger.failed("other", tp, dtp, fields)  # another group's failure changes nothing here
    ledger.begin().group("g", _offsets(p0=150), writes)
    assert len(writes.seen) == 1
    ledger.failed("g", tp, dtp, fields)  # the target refused it
    retry = ledger.begin()
    retry.group("g", _offsets(p0=150), writes)  # unchanged, but written again
    assert retry.produced == 1 and writes.seen[-1][2] == fields
    ledger.acknowledged("g", dtp, fields)
    assert ledger.store.get("g", dtp) == Checkpoint("g", "A.t", 0, 150, 201)


def test_the_report_of_an_older_write_leaves_a_later_one_in_flight() -> None:
    _t, ledger = _ledger()
    writes = _Writes()
    ledger.begin().group("g", _offsets(p0=150), writes)
    ledger.begin().group("g", _offsets(p0=160), writes)
    (_, dtp, first, _), (_, _, second, _) = writes.seen
    ledger.acknowledged("g", dtp, first)
    assert ledger.in_flight("g")  # the write of 160 still waits
    ledger.acknowledged("g", dtp, second)
    assert not ledger.in_flight("g")
    assert ledger.store.get("g", dtp) == Checkpoint("g", "A.t", 0, 160, 201)


def test_a_write_that_raises_leaves_the_pair_unwritten_and_ends_the_pass() -> None:
    _t, ledger = _ledger()
    writes = _Writes()
    writes.fail = True
    cycle = ledger.begin()
    try:
        cycle.group("g", _offsets(p0=150, p1=12), writes)
    except BufferError:
        pass
    else:
        raise AssertionError("the write's error must end the pass")
    assert not ledger.in_flight("g")
    writes.fail = False
    again = ledger.begin()
    again.group("g", _offsets(p0=150, p1=12), writes)
    assert again.produced == 2  # both pairs: the failed one and the one never reached


def test_checkpoints_whose_producer_is_gone_are_written_again() -> None:
    _t, ledger = _ledger()
    writes = _Writes()
    ledger.begin().group("g", _offsets(p0=150), writes)
    ledger.begin().group("idle", _offsets(p1=12), writes)
    ledger.acknowledged("idle", writes.seen[1][1], writes.seen[1][2])
    assert ledger.drop_in_flight() == {"g"}
    assert not ledger.in_flight("g")
    again = ledger.begin()
    again.group("g", _offsets(p0=150), writes)
    again.group("idle", _offsets(p1=12), writes)
    assert again.produced == 1 and writes.seen[-1][1] == TopicPartition("A.t", 0)


def test_a_topic_not_checkpointed_or_without_syncs_gets_none_but_is_watched() -> None:
    _t, ledger = _ledger()
    writes = _Writes()
    cycle = ledger.begin()
    skipped = TopicPartition("skipped", 0)
    cycle.group("g", {skipped: OffsetAndMetadata(5), TopicPartition("new", 0): OffsetAndMetadata(5)},
                writes)  # fmt: skip
    assert writes.seen == [] and cycle.translated == 2
    assert ledger.watching([("new", 0), ("skipped", 0)]) == {"g": None}


def test_forgotten_groups_leave_the_ledger() -> None:
    _t, ledger = _ledger()
    writes = _Writes()
    ledger.begin().group("gone", _offsets(p0=150), writes)
    ledger.begin().group("stays", _offsets(p0=150), writes)
    for _tp, dtp, fields, _ in writes.seen[:1]:
        ledger.acknowledged("gone", dtp, fields)
    assert ledger.groups() == {"gone", "stays"}
    ledger.forget({"gone"})
    assert ledger.groups() == {"stays"}
    assert ledger.watching([("t", 0)]) == {"stays": None}
    assert ledger.store.groups() == []


def test_group_offset_sync_looks_at_changed_groups_and_all_of_them_every_full_round() -> None:
    store = CheckpointStore()
    store.add(Checkpoint("g", "A.t", 0, 100, 101))
    store.add(Checkpoint("h", "A.t", 0, 5, 5))
    sync = GroupOffsetSync(full_every=3)
    wanted = sync.wanted(store)  # round 0: full
    assert set(wanted) == {"g", "h"}
    actions = sync.decide(wanted, {"g": "absent", "h": "active"})
    assert actions == {"g": TargetGroupAction.CREATE, "h": TargetGroupAction.SKIP}
    assert sync.offsets(store, "g", wanted["g"], None) == {
        TopicPartition("A.t", 0): OffsetAndMetadata(101)
    }
    sync.committed("g")
    # round 1: g is in sync; h was never synced (active): looked at again
    assert set(sync.wanted(store)) == {"h"}
    store.add(Checkpoint("g", "A.t", 0, 110, 111))
    assert set(sync.wanted(store)) == {"g", "h"}  # round 2: g changed
    assert set(sync.wanted(store)) == {"g", "h"}  # round 3: full


def test_group_offset_sync_never_rewinds_and_retries_a_failed_commit() -> None:
    store = CheckpointStore()
    store.add(Checkpoint("g", "A.t", 0, 100, 101))
    store.add(Checkpoint("g", "A.t", 1, 50, 51))
    sync = GroupOffsetSync(full_every=100)
    wanted = sync.wanted(store)
    assert sync.decide(wanted, {"g": "empty"}) == {"g": TargetGroupAction.UPDATE}
    found = {
        TopicPartition("A.t", 0): OffsetAndMetadata(150),  # ahead on the target: kept
        TopicPartition("A.t", 1): OffsetAndMetadata(10),
    }
    assert sync.offsets(store, "g", wanted["g"], found) == {
        TopicPartition("A.t", 1): OffsetAndMetadata(51)
    }
    sync.failed("g")
    assert set(sync.wanted(store)) == {"g"}  # looked at again although unchanged
    sync.offsets(store, "g", wanted["g"], found)
    sync.committed("g")
    assert sync.wanted(store) == {}


def test_group_offset_sync_leaves_a_deleted_group_alone_until_a_full_round() -> None:
    store = CheckpointStore()
    store.add(Checkpoint("g", "A.t", 0, 100, 101))
    sync = GroupOffsetSync(full_every=2)
    wanted = sync.wanted(store)
    sync.decide(wanted, {"g": "empty"})
    sync.offsets(store, "g", wanted["g"], {})
    sync.committed("g")
    wanted = sync.wanted(store)  # round 1, not full: g in sync
    assert wanted == {}
    store.add(Checkpoint("g", "A.t", 0, 120, 121))
    wanted = sync.wanted(store)  # round 2 (full)
    assert sync.decide(wanted, {"g": "absent"}) == {"g": TargetGroupAction.DELETED_NOW}
    assert sync.wanted(store) == {}  # round 3: left alone
    wanted = sync.wanted(store)  # round 4: full
    assert sync.decide(wanted, {"g": "absent"}) == {"g": TargetGroupAction.DELETED}
    assert sync.decide(wanted, {}) == {"g": TargetGroupAction.SKIP}  # unknown
    sync.forget({"g"})
    assert sync.groups() == set() and len(sync.target) == 0
