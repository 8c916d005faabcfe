"""Placing a flow's partitions on its worker slots by load."""

from __future__ import annotations

from mirrorlib.core.placement import UNKNOWN_LOAD, load_of, place


def keys(n: int, topic: str = "t") -> list[tuple[str, int]]:
    return [(topic, p) for p in range(n)]


def test_unknown_loads_balance_counts() -> None:
    loads = dict.fromkeys(keys(6), UNKNOWN_LOAD)
    placement = place(loads, {}, [0, 1])
    assert len(placement.of(0)) == len(placement.of(1)) == 3
    assert not placement.moved


def test_heavy_partitions_are_spread_by_load_not_count() -> None:
    # one partition carries as much as the five others together
    loads = {("t", 0): 500.0, **{("t", p): 100.0 for p in range(1, 6)}}
    placement = place(loads, {}, [0, 1])
    heavy = placement.slots[("t", 0)]
    assert placement.of(heavy) == {("t", 0)}
    assert len(placement.of(1 - heavy)) == 5


def test_partitions_stay_on_their_live_slot() -> None:
    loads = dict.fromkeys(keys(4), 10.0)
    current = {("t", 0): 1, ("t", 1): 1, ("t", 2): 0, ("t", 3): 0}
    assert dict(place(loads, current, [0, 1]).slots) == current


def test_a_dead_slots_partitions_go_to_the_live_ones() -> None:
    loads = dict.fromkeys(keys(4), 10.0)
    current = {("t", 0): 0, ("t", 1): 0, ("t", 2): 1, ("t", 3): 1}
    placement = place(loads, current, [1])
    assert placement.of(1) == set(keys(4))
    assert not placement.moved  # a dead slot's partitions are placed, not moved


def test_gone_partitions_are_dropped_and_new_ones_go_to_the_lighter_slot() -> None:
    current = {("t", 0): 0, ("t", 1): 1, ("old", 0): 1}
    loads = {("t", 0): 50.0, ("t", 1): 10.0, ("t", 2): 10.0}
    placement = place(loads, current, [0, 1])
    assert ("old", 0) not in placement.slots
    assert placement.slots[("t", 2)] == 1


def test_small_imbalance_moves_nothing() -> None:
    loads = {("t", 0): 30.0, ("t", 1): 20.0}
    current = {("t", 0): 0, ("t", 1): 1}
    assert not place(loads, current, [0, 1]).moved


def test_large_imbalance_moves_between_live_slots() -> None:
    loads = dict.fromkeys(keys(4), 100.0)
    current = dict.fromkeys(keys(4), 0)  # slot 1 just came back empty
    placement = place(loads, current, [0, 1])
    assert len(placement.of(0)) == len(placement.of(1)) == 2
    assert {(key, src, dst) for key, src, dst in placement.moved} <= {(k, 0, 1) for k in keys(4)}
    assert len(placement.moved) == 2


def test_no_imbalance_limit_means_no_moves() -> None:
    loads = dict.fromkeys(keys(4), 100.0)
    current = dict.fromkeys(keys(4), 0)
    assert not place(loads, current, [0, 1], imbalance=float("inf")).moved


def test_no_live_slot_places_nothing() -> None:
    assert dict(place({("t", 0): 1.0}, {}, []).slots) == {}


def test_load_counts_pending_bytes_and_rate() -> None:
    assert load_of(None, None) == UNKNOWN_LOAD
    assert load_of(1000.0, 0.0) < load_of(1000.0, 10.0)
    assert load_of(0.0, 0.0) > 0
