"""Planning of the Spark engine: checkpoint offsets, batch budgets, load-based task packing."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from mirrorlib.core.batches import Range, allot, decode_offsets, encode_offsets, pack, ranges


def test_offsets_round_trip_with_a_stable_order() -> None:
    offsets = {("b", 10): 5, ("a", 2): 7, ("b", 9): 1, ("a", 10): 0}
    encoded = encode_offsets(offsets)
    assert json.dumps(encoded) == '{"a": {"2": 7, "10": 0}, "b": {"9": 1, "10": 5}}'
    assert decode_offsets(json.loads(json.dumps(encoded))) == offsets
    assert json.dumps(encode_offsets(dict(reversed(list(offsets.items()))))) == json.dumps(encoded)
    assert decode_offsets(None) == {} and decode_offsets({}) == {}


def test_allot_without_budget_takes_everything_and_new_partitions_wait() -> None:
    start = {("t", 0): 10, ("t", 1): 0}
    available = {("t", 0): 50, ("t", 1): 0, ("t", 2): 7}
    end = allot(start, available, None)
    # the new partition enters at its starting position, nothing to copy in this batch
    assert end == {("t", 0): 50, ("t", 1): 0, ("t", 2): 7}
    assert ranges(start, end) == [Range("t", 0, 10, 50)]


def test_allot_shares_the_budget_max_min_fairly() -> None:
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 0}
    available = {("t", 0): 5, ("t", 1): 1000, ("t", 2): 1000}
    end = allot(start, available, 105)
    assert end == {("t", 0): 5, ("t", 1): 50, ("t", 2): 50}
    assert sum(end[tp] - start[tp] for tp in start) == 105


def test_a_vanished_partition_keeps_its_position() -> None:
    assert allot({("gone", 0): 42}, {}, None) == {("gone", 0): 42}


@given(
    st.dictionaries(
        st.tuples(st.sampled_from("abc"), st.integers(0, 5)),
        st.tuples(st.integers(0, 1000), st.integers(0, 1000)),
        max_size=12,
    ),
    st.one_of(st.none(), st.integers(0, 3000)),
)
def test_allot_properties(
    parts: dict[tuple[str, int], tuple[int, int]], budget: int | None
) -> None:
    start = {tp: s for tp, (s, _) in parts.items()}
    available = {tp: s + n for tp, (s, n) in parts.items()}
    end = allot(start, available, budget)
    taken = [end[tp] - start[tp] for tp in start]
    assert all(0 <= t <= available[tp] - start[tp] for t, tp in zip(taken, start, strict=True))
    total = sum(available[tp] - start[tp] for tp in start)
    assert sum(taken) == (total if budget is None else min(budget, total))


def test_pack_balances_by_pending_records_not_by_count() -> None:
    hot = Range("t", 0, 0, 900)
    cold = [Range("t", p, 0, 100) for p in range(1, 10)]
    groups = pack([hot, *cold], 2)
    loads = sorted(sum(r.size for r in g) for g in groups)
    assert loads == [900, 900]  # the hot partition alone on one task, the nine others together
    assert [hot] in groups
    # by count it would have been five and five: 900+400 against 500


@given(
    st.lists(st.integers(1, 10_000), min_size=0, max_size=40),
    st.integers(1, 8),
)
def test_pack_properties(sizes: list[int], tasks: int) -> None:
    work = [Range("t", p, 0, n) for p, n in enumerate(sizes)]
    groups = pack(work, tasks)
    assert len(groups) <= tasks
    flat = sorted(r for g in groups for r in g)
    assert flat == sorted(work)  # every range exactly once, never split
    if groups:
        loads = [sum(r.size for r in g) for g in groups]
        # LPT bound: no task carries more than the average plus the largest single range
        assert max(loads) <= sum(sizes) / tasks + max(sizes)
