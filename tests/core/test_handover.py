"""The one-writer-per-partition rule of a flow's worker processes (``core.handover``)."""

from __future__ import annotations

from mirrorlib.core.handover import Assignment, HandoverLedger

P0, P1, P2 = ("t", 0), ("t", 1), ("t", 2)
ALL = frozenset({P0, P1, P2})
NONE: frozenset[tuple[str, int]] = frozenset()


def test_a_partition_given_up_stays_held_until_the_writer_confirms_the_assignment() -> None:
    ledger = HandoverLedger(2)
    w0 = ledger.start(0)
    assert ledger.assign(w0, frozenset({P0, P1}), NONE) == Assignment(0, frozenset({P0, P1}), NONE)
    assert ledger.applied(w0, 0) == NONE
    assert ledger.assign(w0, frozenset({P0}), NONE) == Assignment(1, frozenset({P0}), NONE)
    assert w0.may_hold() == {P0, P1}  # P1 given up, not confirmed yet
    assert ledger.holding(ALL) == {P0, P1}
    assert ledger.applied(w0, 1) == {P1}
    assert w0.may_hold() == {P0} and ledger.holding(ALL) == {P0}


def test_a_partition_given_back_before_the_release_was_confirmed_is_not_released() -> None:
    ledger = HandoverLedger(1)
    w0 = ledger.start(0)
    ledger.assign(w0, frozenset({P0, P1}), NONE)
    ledger.assign(w0, frozenset({P0}), NONE)
    ledger.assign(w0, frozenset({P0, P1}), NONE)
    assert ledger.applied(w0, 2) == NONE  # P1 never left it


def test_only_lost_partitions_among_those_given_up_are_dropped_without_committing() -> None:
    ledger = HandoverLedger(1)
    w0 = ledger.start(0)
    ledger.assign(w0, frozenset({P0, P1}), NONE)
    lost = frozenset({P1, P2})  # P2 was never this writer's
    assert ledger.assign(w0, frozenset({P0}), lost).lost == {P1}


def test_no_slot_is_given_what_another_slots_writer_may_hold() -> None:
    ledger = HandoverLedger(2)
    w0, w1 = ledger.start(0), ledger.start(1)
    ledger.assign(w0, frozenset({P0, P1}), NONE)
    ledger.assign(w1, NONE, NONE)
    assert ledger.grantable(1, ALL, confirmed=True) == {P2}
    ledger.assign(w0, frozenset({P0}), NONE)  # the placement moves P1 to slot 1
    assert ledger.grantable(1, frozenset({P1, P2}), confirmed=True) == {P2}  # not confirmed yet
    ledger.applied(w0, 1)
    assert ledger.grantable(1, frozenset({P1, P2}), confirmed=True) == {P1, P2}
    # a slot's own holdings never block it
    assert ledger.grantable(0, frozenset({P0}), confirmed=True) == {P0}


def test_while_the_share_is_unconfirmed_a_writer_gets_nothing_it_does_not_hold() -> None:
    ledger = HandoverLedger(1)
    w0 = ledger.start(0)
    ledger.assign(w0, frozenset({P0}), NONE)
    assert ledger.grantable(0, ALL, confirmed=False) == {P0}
    assert ledger.grantable(0, frozenset({P1}), confirmed=False) == NONE  # and may give up


def test_a_replaced_writer_holds_its_partitions_until_it_is_reaped() -> None:
    ledger = HandoverLedger(2)
    old = ledger.start(0)
    ledger.assign(old, frozenset({P0}), NONE)
    ledger.applied(old, 0)
    ledger.replace(old)
    assert old.stale and ledger.writer(0) is None
    new = ledger.start(0)
    assert ledger.holding(ALL) == {P0}
    # the new writer of its slot fences it: it may be given P0 at once; no other slot may
    assert ledger.grantable(0, frozenset({P0}), confirmed=True) == {P0}
    ledger.start(1)
    assert ledger.grantable(1, frozenset({P0}), confirmed=True) == NONE
    ledger.reaped(old)
    assert ledger.grantable(1, frozenset({P0}), confirmed=True) == {P0}
    assert ledger.holding(ALL) == NONE and new.may_hold() == NONE


def test_a_writer_that_did_not_end_cleanly_leaves_its_slot_dirty_until_fenced() -> None:
    ledger = HandoverLedger(3)
    never, clean, killed = ledger.start(0), ledger.start(1), ledger.start(2)
    for writer in (never, clean, killed):
        ledger.assign(writer, frozenset({(f"t{writer.slot}", 0)}), NONE)
    ledger.applied(clean, 0)
    ledger.applied(killed, 0)
    assert [ledger.dirty(s) for s in range(3)] == [False, True, True]
    ledger.ended(never, clean=False)  # never initialised its producer: wrote nothing
    ledger.ended(clean, clean=True)
    ledger.ended(killed, clean=False)
    assert [ledger.dirty(s) for s in range(3)] == [False, False, True]
    assert ledger.held(2) == {("t2", 0)} and ledger.held(1) == NONE
    everything = frozenset({("t0", 0), ("t1", 0), ("t2", 0)})
    assert ledger.holding(everything) == NONE  # not stopping: the partitions may move
    ledger.stopping = True
    assert ledger.holding(everything) == {("t2", 0)}  # stopping: not before the fence
    ledger.fenced(2)
    assert not ledger.dirty(2) and ledger.holding(everything) == NONE


def test_a_fence_that_ends_after_a_new_process_started_counts_for_nothing() -> None:
    ledger = HandoverLedger(1)
    w = ledger.start(0)
    ledger.assign(w, frozenset({P0}), NONE)
    ledger.applied(w, 0)
    ledger.ended(w, clean=False)
    ledger.start(0)
    ledger.fenced(0)
    assert ledger.dirty(0)


def test_holders_are_the_current_writers_that_may_hold_a_partition() -> None:
    ledger = HandoverLedger(2)
    w0, w1 = ledger.start(0), ledger.start(1)
    ledger.assign(w0, frozenset({P0}), NONE)
    ledger.assign(w1, frozenset({P1}), NONE)
    assert ledger.holders(frozenset({P1, P2})) == [w1]
