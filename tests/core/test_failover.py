"""The failover planner (pure): refusals, translation choices, never rewinding, failback."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mirrorlib import Checkpoint, OffsetAndMetadata, OffsetSync, TopicPartition
from mirrorlib.core.failover import (
    FailoverAction,
    plan_failover,
    retry_group_request,
    reverse_translate,
)
from mirrorlib.core.syncs import SyncLineage
from mirrorlib.core.translate import OffsetTranslator

TP = TopicPartition


def _plan(**overrides: Any) -> Any:
    args: dict[str, Any] = dict(
        policy_rename=lambda t: f"A.{t}",
        is_from_target=lambda t: t.startswith("B."),
        upstream_topic=lambda t: t.split(".", 1)[1] if "." in t else None,
        should_replicate=lambda t: not t.startswith("skip"),
        source_state="empty",
        target_state="absent",
        source_offsets={},
        target_offsets={},
        checkpoints={},
        forward=None,
        backward=None,
    )
    args.update(overrides)
    return plan_failover("g", "A", "B", **args)


def exact_translator(topic: str, up: int, down: int, n: int, step: int = 10) -> OffsetTranslator:
    """Syncs of one writer for records up..up+n copied 1:1 to down..down+n (one exact run)."""
    t = OffsetTranslator()
    for seq, i in enumerate(range(0, n + 1, step)):
        t.add(OffsetSync(topic, 0, up + i, down + i), SyncLineage("w", seq))
    return t


def test_refuses_a_group_still_active_on_the_old_cluster() -> None:
    plan = _plan(source_state="active")
    assert plan.refused is not None and "still has active members on A" in plan.refused
    assert "Stop its consumers on A" in plan.refused


def test_refuses_a_group_active_on_the_new_cluster() -> None:
    plan = _plan(target_state="active")
    assert plan.refused is not None and "active members on B" in plan.refused
    assert "REFUSED" in plan.describe()


def test_fresh_translation_is_exact_and_reports_no_re_read() -> None:
    fwd = exact_translator("orders", 0, 0, 100)
    plan = _plan(source_offsets={TP("orders", 0): OffsetAndMetadata(57, "m")}, forward=fwd)
    (p,) = plan.partitions
    assert (p.topic, p.translated, p.re_read, p.action, p.method) == (
        "A.orders",
        57,
        0,
        FailoverAction.COMMIT,
        "offset-syncs",
    )
    assert plan.offsets == {TP("A.orders", 0): OffsetAndMetadata(57, "m")}


def test_checkpoint_used_when_no_sync_covers_and_re_read_counted() -> None:
    fwd = exact_translator("orders", 0, 0, 100)
    fwd.forget("orders", 0)
    cp = Checkpoint("g", "A.orders", 0, 40, 40)
    plan = _plan(
        source_offsets={TP("orders", 0): OffsetAndMetadata(50)},
        checkpoints={TP("A.orders", 0): cp},
        forward=None,
    )
    (p,) = plan.partitions
    assert p.translated == 40 and p.method == "checkpoint" and p.re_read is None
    # with exact syncs known, the re-read of a checkpoint is counted: 50 - 40
    fwd = exact_translator("orders", 0, 0, 100)
    plan = _plan(
        source_offsets={TP("orders", 0): OffsetAndMetadata(50)},
        checkpoints={TP("A.orders", 0): cp},
        forward=fwd,
    )
    assert plan.partitions[0].translated == 50  # fresher than the checkpoint


def test_old_cluster_unreachable_uses_checkpoints() -> None:
    cps = {TP("A.orders", p): Checkpoint("g", "A.orders", p, 10 * p, 10 * p) for p in range(3)}
    plan = _plan(source_offsets=None, source_state="unreachable", checkpoints=cps)
    assert [p.translated for p in plan.partitions] == [0, 10, 20]
    assert all(p.method == "checkpoint" for p in plan.partitions)
    assert plan.refused is None


# -- the group's state on the old cluster: unreachable (a disaster) versus unknown ----------------

#: Errors of a group request that a retry with fresh metadata may clear: the group's coordinator
#: is loading, moved to another broker, is not available yet, or did not answer in time.
RETRIABLE: list[str | None] = ["COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE",
             "REQUEST_TIMED_OUT", "_TIMED_OUT", "NETWORK_EXCEPTION", "_TRANSPORT"]  # fmt: skip
#: Errors a retry does not clear.
FINAL: list[str | None] = ["GROUP_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED", "UNKNOWN_SERVER_ERROR",
         "INVALID_GROUP_ID", None]  # fmt: skip


@pytest.mark.parametrize("code", RETRIABLE)
def test_retriable_coordinator_errors_are_retried(code: str | None) -> None:
    assert retry_group_request(code)


@pytest.mark.parametrize("code", FINAL)
def test_other_group_errors_are_not_retried(code: str | None) -> None:
    assert not retry_group_request(code)


def _offsets_on_a() -> dict[TopicPartition, OffsetAndMetadata]:
    return {TP("orders", 0): OffsetAndMetadata(30)}


@pytest.mark.parametrize("code", RETRIABLE + FINAL)
def test_a_reachable_old_cluster_that_cannot_tell_the_groups_state_refuses(
    code: str | None,
) -> None:
    """Reachable, but the group's state is unknown (a retriable error that outlived its
    retries, an authorization error, a timeout...): the group may still be consuming there."""
    error = f"describing group g failed: Broker: some reason ({code})"
    cps = {TP("A.orders", 0): Checkpoint("g", "A.orders", 0, 20, 20)}
    for offsets in (_offsets_on_a(), None):  # the offsets were read, or could not be either
        plan = _plan(
            source_state="unknown", source_error=error, source_offsets=offsets, checkpoints=cps
        )
        assert plan.refused is not None
        assert "'g'" in plan.refused and "on A is unknown" in plan.refused
        assert error in plan.refused  # names the error
        assert "--force" in plan.refused and "may still be consuming" in plan.refused
        assert not plan.offsets or plan.refused
        forced = _plan(
            source_state="unknown", source_error=error, source_offsets=offsets, checkpoints=cps,
            force=True,
        )  # fmt: skip
        assert forced.refused is None
        assert [p.translated for p in forced.partitions] == [20]
        assert any("forced" in n and error in n for n in forced.notes)


def test_an_unreachable_old_cluster_is_the_disaster_case_and_proceeds() -> None:
    cps = {TP("A.orders", 0): Checkpoint("g", "A.orders", 0, 20, 20)}
    plan = _plan(source_state="unreachable", source_offsets=None, checkpoints=cps)
    assert plan.refused is None and plan.offsets == {TP("A.orders", 0): OffsetAndMetadata(20)}


def test_force_does_not_override_a_group_active_on_either_cluster() -> None:
    for where in ("source_state", "target_state"):
        plan = _plan(force=True, source_offsets=_offsets_on_a(), **{where: "active"})
        assert plan.refused is not None and "active members" in plan.refused


def test_never_rewinds_the_target_group() -> None:
    fwd = exact_translator("orders", 0, 0, 100)
    plan = _plan(
        source_offsets={TP("orders", 0): OffsetAndMetadata(30)},
        forward=fwd,
        target_offsets={TP("A.orders", 0): OffsetAndMetadata(70)},
        target_state="empty",
        allow_skip=True,
    )
    (p,) = plan.partitions
    assert p.action is FailoverAction.KEEP and p.current == 70 and plan.offsets == {}
    assert plan.refused is None


def test_a_group_past_the_translation_skips_records_and_is_refused() -> None:
    fwd = exact_translator("orders", 0, 0, 100)
    args: dict[str, Any] = dict(
        source_offsets={
            TP("orders", 0): OffsetAndMetadata(30),
            TP("orders", 1): OffsetAndMetadata(5),
        },
        forward=fwd,
        checkpoints={TP("A.orders", 1): Checkpoint("g", "A.orders", 1, 5, 5)},
        target_offsets={
            TP("A.orders", 0): OffsetAndMetadata(70),
            TP("A.orders", 1): OffsetAndMetadata(2),
        },
        target_state="empty",
    )
    plan = _plan(**args)
    skipping, moving = plan.partitions
    # exact translation: the group on B is 40 records past where it stopped on A
    assert (skipping.action, skipping.translated, skipping.skipped, skipping.re_read) == (
        FailoverAction.KEEP,
        30,
        40,
        0,
    )
    assert skipping.skipped_exact and "40 record(s) never read" in skipping.reason
    assert (moving.action, moving.skipped) == (FailoverAction.COMMIT, 0)
    assert plan.skipped_total == 40 and plan.skipping == (skipping,)
    assert plan.refused is not None
    for text in ("group 'g'", "on B", "1 partition(s)", "A.orders-0: 40", "--allow-skip"):
        assert text in plan.refused
    assert "A.orders-1" not in plan.refused
    d = plan.to_dict()
    assert d["skipped_total"] == 40 and d["partitions"][0]["skipped"] == 40
    assert "records skipped: 40" in plan.describe() and "REFUSED" in plan.describe()
    allowed = _plan(**args, allow_skip=True)
    assert allowed.refused is None and allowed.skipped_total == 40
    assert allowed.offsets == {TP("A.orders", 1): OffsetAndMetadata(5)}


def test_a_group_past_the_translation_but_not_past_its_re_reads_skips_nothing() -> None:
    # translated from the checkpoint (40); the syncs prove the group's next record sits at 50
    fwd = exact_translator("orders", 0, 0, 100)
    fwd.begin_initial_load(only_last=False)  # translate() answers nothing: the checkpoint is used
    args: dict[str, Any] = dict(
        source_offsets={TP("orders", 0): OffsetAndMetadata(50)},
        checkpoints={TP("A.orders", 0): Checkpoint("g", "A.orders", 0, 40, 40)},
        forward=fwd,
        target_state="empty",
    )
    fresh = _plan(**args)
    assert (fresh.partitions[0].translated, fresh.partitions[0].re_read) == (40, 10)
    plan = _plan(**args, target_offsets={TP("A.orders", 0): OffsetAndMetadata(45)})
    (p,) = plan.partitions
    assert (p.action, p.re_read, p.skipped, plan.refused) == (FailoverAction.KEEP, 5, 0, None)
    plan = _plan(**args, target_offsets={TP("A.orders", 0): OffsetAndMetadata(58)})
    (p,) = plan.partitions
    assert (p.re_read, p.skipped, p.skipped_exact) == (0, 8, True)
    assert plan.refused is not None and "A.orders-0: 8" in plan.refused


def test_skips_counted_from_an_inexact_translation_are_an_upper_bound() -> None:
    cp = Checkpoint("g", "A.orders", 0, 40, 40)
    plan = _plan(
        source_offsets=None,
        source_state="unreachable",
        checkpoints={TP("A.orders", 0): cp},
        target_offsets={TP("A.orders", 0): OffsetAndMetadata(55)},
        target_state="empty",
    )
    (p,) = plan.partitions
    assert (p.skipped, p.skipped_exact, p.re_read) == (15, False, None)
    assert plan.refused is not None and "A.orders-0: up to 15" in plan.refused
    assert "<=15" in plan.describe() and "records skipped: up to 15" in plan.describe()
    assert plan.to_dict()["partitions"][0]["skipped_exact"] is False


def test_a_group_with_nothing_to_move_is_refused_unless_allowed() -> None:
    plan = _plan(source_offsets={}, source_state="absent")
    assert plan.refused is not None
    for text in ("group 'g'", "no committed offsets on A", "absent", "--allow-empty"):
        assert text in plan.refused
    allowed = _plan(source_offsets={}, source_state="absent", allow_empty=True)
    assert allowed.refused is None and allowed.partitions == ()
    assert any("nothing to translate" in n for n in allowed.notes)
    unreachable = _plan(source_offsets=None, source_state="unreachable")
    assert unreachable.refused is not None
    assert (
        "A is unreachable" in unreachable.refused and "no checkpoints on B" in unreachable.refused
    )
    # a group still active is refused for that reason first
    active = _plan(source_offsets={}, source_state="active")
    assert active.refused is not None and "active members on A" in active.refused


def test_rewound_group_below_its_checkpoint_is_skipped() -> None:
    cp = Checkpoint("g", "A.orders", 0, 80, 80)
    plan = _plan(
        source_offsets={TP("orders", 0): OffsetAndMetadata(20)}, checkpoints={TP("A.orders", 0): cp}
    )
    (p,) = plan.partitions
    assert p.action is FailoverAction.SKIP and "rewound" in p.reason


def test_unreplicated_topics_are_ignored_and_unknown_target_partitions_kept() -> None:
    args: dict[str, Any] = dict(
        source_offsets={TP("skip.me", 0): OffsetAndMetadata(5)},
        target_offsets={TP("local", 0): OffsetAndMetadata(9)},
        target_state="empty",
    )
    plan = _plan(**args, allow_empty=True)
    (p,) = plan.partitions
    assert p.topic == "local" and p.action is FailoverAction.KEEP and p.skipped == 0
    assert plan.refused is None
    # nothing the flow replicates: nothing moves, which is refused unless allowed
    refused = _plan(**args).refused
    assert refused is not None and "does not replicate (skip.me)" in refused


def test_failback_translates_backwards_with_the_opposite_flows_syncs() -> None:
    # the group consumed B.orders (a copy of B's orders) on A up to 33; B's orders 100.. -> 0..
    back = exact_translator("orders", 100, 0, 50)
    plan = _plan(source_offsets={TP("B.orders", 0): OffsetAndMetadata(33)}, backward=back)
    (p,) = plan.partitions
    assert (p.topic, p.translated, p.re_read, p.method) == (
        "orders",
        133,
        0,
        "reverse-offset-syncs",
    )


def test_reverse_translate_is_safe_without_runs() -> None:
    t = OffsetTranslator()
    t.add(OffsetSync("t", 0, 10, 5))
    t.add(OffsetSync("t", 0, 30, 9))  # a gap upstream: not exact
    assert reverse_translate(t, "t", 0, 9) == (30, True)  # record 30 not consumed yet
    assert reverse_translate(t, "t", 0, 10) == (31, True)  # right after 30: exact
    assert reverse_translate(t, "t", 0, 12) == (31, False)  # 30 consumed; 31.. unknown
    assert reverse_translate(t, "t", 0, 7) == (11, False)  # only 10 is known consumed
    assert reverse_translate(t, "t", 0, 4) is None
    exact = exact_translator("t", 0, 0, 100)
    assert reverse_translate(exact, "t", 0, 42) == (42, True)
    assert reverse_translate(exact, "t", 0, 101) == (101, True)
    assert reverse_translate(exact, "t", 0, 150) == (101, False)


def test_plan_json_and_describe() -> None:
    fwd = exact_translator("orders", 0, 0, 100)
    plan = _plan(source_offsets={TP("orders", 0): OffsetAndMetadata(57)}, forward=fwd)
    d = plan.to_dict()
    assert d["partitions"][0]["translated"] == 57 and d["re_read_total"] == 0
    assert "A.orders-0" in plan.describe()


# -- many groups at once ----------------------------------------------------------------------


def test_select_groups_named_first_then_matches_sorted_each_once() -> None:
    from mirrorlib.core.failover import select_groups

    candidates = ["orders-2", "billing", "orders-1", "orders-10"]
    assert select_groups(["z", "orders-1", "z"], candidates) == ("z", "orders-1")
    assert select_groups(["z"], candidates, pattern=r"orders-\d") == ("z", "orders-1", "orders-2")
    # fully matched, as MM2's remoteConsumerOffsets(Pattern): "orders" alone matches nothing
    assert select_groups([], candidates, pattern="orders") == ()
    assert select_groups([], candidates, every=True) == (
        "billing", "orders-1", "orders-10", "orders-2",
    )  # fmt: skip
    assert select_groups([], [], every=True) == ()


def test_checkpoints_by_group_splits_the_topic_once_read() -> None:
    from mirrorlib.core.failover import checkpoints_by_group

    cps = {
        ("g1", TP("A.t", 0)): Checkpoint("g1", "A.t", 0, 5, 5),
        ("g2", TP("A.t", 0)): Checkpoint("g2", "A.t", 0, 7, 7),
        ("g1", TP("A.t", 1)): Checkpoint("g1", "A.t", 1, 3, 3),
    }
    split = checkpoints_by_group(cps)
    assert set(split) == {"g1", "g2"}
    assert split["g1"] == {
        TP("A.t", 0): cps[("g1", TP("A.t", 0))],
        TP("A.t", 1): cps[("g1", TP("A.t", 1))],
    }


def _inputs(**overrides: Any) -> Any:
    from mirrorlib.core.failover import GroupInputs

    args: dict[str, Any] = dict(
        source_state="empty", target_state="absent", source_offsets={}, target_offsets={},
        checkpoints={},
    )  # fmt: skip
    args.update(overrides)
    return GroupInputs(**args)


def _plans(inputs: dict[str, Any], **overrides: Any) -> Any:
    from mirrorlib.core.failover import plan_failovers

    args: dict[str, Any] = dict(
        policy_rename=lambda t: f"A.{t}",
        is_from_target=lambda t: t.startswith("B."),
        upstream_topic=lambda t: t.split(".", 1)[1] if "." in t else None,
        should_replicate=lambda t: not t.startswith("skip"),
        forward=exact_translator("t", 0, 100, 50),
        backward=None,
    )
    args.update(overrides)
    return plan_failovers(inputs, "A", "B", **args)


def test_each_group_of_a_batch_is_planned_as_it_would_be_alone() -> None:
    """Same inputs, same plan: the batch only shares the offset syncs and the options."""
    translator = exact_translator("t", 0, 100, 50)
    cases = {
        "ok": _inputs(source_offsets={TP("t", 0): OffsetAndMetadata(20)}),
        "active-on-b": _inputs(
            source_offsets={TP("t", 0): OffsetAndMetadata(20)}, target_state="active"
        ),
        "unknown-on-a": _inputs(source_state="unknown", source_error="GROUP_AUTHORIZATION_FAILED"),
        "nothing": _inputs(),
        "past": _inputs(
            source_offsets={TP("t", 0): OffsetAndMetadata(20)},
            target_state="empty",
            target_offsets={TP("A.t", 0): OffsetAndMetadata(130)},
        ),
    }
    plans = _plans(cases, forward=translator, notes=["shared"])
    assert list(plans) == list(cases)
    for group, got in cases.items():
        alone = plan_failover(
            group, "A", "B", policy_rename=lambda t: f"A.{t}",
            is_from_target=lambda t: t.startswith("B."),
            upstream_topic=lambda t: t.split(".", 1)[1] if "." in t else None,
            should_replicate=lambda t: not t.startswith("skip"),
            source_state=got.source_state, target_state=got.target_state,
            source_offsets=got.source_offsets, target_offsets=got.target_offsets,
            checkpoints=got.checkpoints, forward=translator, backward=None, notes=["shared"],
            source_error=got.source_error,
        )  # fmt: skip
        assert plans[group] == alone, group
    assert plans["ok"].refused is None and plans["ok"].offsets == {
        TP("A.t", 0): OffsetAndMetadata(120)
    }
    assert "active members on B" in (plans["active-on-b"].refused or "")
    assert "unknown" in (plans["unknown-on-a"].refused or "")
    assert "no committed offsets" in (plans["nothing"].refused or "")
    assert "would never read" in (plans["past"].refused or "")
    # the options apply to every group
    forced = _plans(cases, forward=translator, force=True, allow_skip=True, allow_empty=True)
    assert [g for g, p in forced.items() if p.refused] == ["active-on-b"]


def test_batch_result_reports_each_group_and_names_the_failed_ones() -> None:
    from mirrorlib.core.failover import BatchFailover, GroupFailover, GroupOutcome

    plans = _plans({
        "g-ok": _inputs(source_offsets={TP("t", 0): OffsetAndMetadata(20)}),
        "g-active": _inputs(
            source_offsets={TP("t", 0): OffsetAndMetadata(20)}, target_state="active"
        ),
    })  # fmt: skip
    batch = BatchFailover(
        "A", "B",
        (
            GroupFailover("g-ok", GroupOutcome.COMMITTED, plans["g-ok"]),
            GroupFailover("g-active", GroupOutcome.REFUSED, plans["g-active"]),
            GroupFailover("g-broken", GroupOutcome.FAILED, None, "offsets unreadable"),
        ),
        round_trips=9,
    )  # fmt: skip
    assert batch.failed == ("g-active", "g-broken") and batch.succeeded == ("g-ok",)
    assert not batch.all_refused
    assert batch.result("g-active").reason.startswith("group 'g-active' already has active")
    text = batch.describe()
    assert "failover of 3 group(s) from A to B: 1 committed, 1 refused, 1 failed" in text
    assert "REFUSED g-active: group 'g-active' already has active members on B" in text
    assert "FAILED g-broken: offsets unreadable" in text
    assert text.rstrip().endswith("failed: g-active, g-broken")
    data = json.loads(batch.to_json())
    assert data["failed"] == ["g-active", "g-broken"] and data["round_trips"] == 9
    assert data["outcomes"]["committed"] == 1 and data["outcomes"]["refused"] == 1
    by_group = {g["group"]: g for g in data["groups"]}
    assert by_group["g-ok"]["outcome"] == "committed"
    assert by_group["g-ok"]["partitions"][0]["translated"] == 120
    assert by_group["g-active"]["refused"].startswith("group 'g-active'")
    assert by_group["g-broken"] == {"group": "g-broken", "outcome": "failed",
                                    "error": "offsets unreadable"}  # fmt: skip
    only_refused = BatchFailover("A", "B", batch.results[1:2])
    assert only_refused.all_refused and only_refused.succeeded == ()
    dry = BatchFailover("A", "B", (GroupFailover("g-ok", GroupOutcome.PLANNED, plans["g-ok"]),),
                        dry_run=True)  # fmt: skip
    assert dry.failed == () and dry.describe().rstrip().endswith("dry run: nothing committed")
