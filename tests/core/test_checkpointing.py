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
    CheckpointStore,
    PromptSchedule,
    TargetGroupAction,
    TargetGroups,
    checkpoints_for_group,
    group_offsets_to_sync,
    groups_to_forget,
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
    cps = checkpoints_for_group(
        "g",
        {tp: OffsetAndMetadata(o, "m") for tp, o in offsets.items()},
        translate=translator.translate,
        rename=lambda t: rename_topic(P, "source1", "target2", t),
        should_checkpoint_topic=lambda t: not t.startswith("excluded"),
        store=store,
    )
    for cp in cps:
        store.add(cp)
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
    assert store.is_more_recent(Checkpoint("g", "A.t", 0, 90, 95))
    assert store.is_more_recent(Checkpoint("g", "A.t", 0, 100, 102))
    assert not store.is_more_recent(Checkpoint("g", "A.t", 0, 120, 101))
    assert store.is_more_recent(Checkpoint("g", "A.t", 5, 1, 1))
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
