"""Planning of the Spark engine: checkpoint offsets, batch budgets, load-based task packing."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from mirrorlib.core.batches import (
    Plan,
    Range,
    allot,
    decode_offsets,
    decode_owed,
    encode_offsets,
    encode_owed,
    pack,
    ranges,
    record_bytes,
    settle,
)


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


def test_allot_with_tasks_keeps_a_hot_partition_to_one_task_share() -> None:
    start = {("t", p): 0 for p in range(4)}
    available = {("t", 0): 100_000, ("t", 1): 100, ("t", 2): 100, ("t", 3): 100}
    end = allot(start, available, 1000, tasks=2)
    # one task's share (500) for the hot partition, the cold ones drain completely: the two
    # tasks copy about the same, instead of 700 against 300
    assert end == {("t", 0): 500, ("t", 1): 100, ("t", 2): 100, ("t", 3): 100}
    # alone, a hot partition takes the whole budget (only one task can write it anyway)
    assert allot({("t", 0): 0}, {("t", 0): 10_000}, 1000, tasks=2) == {("t", 0): 1000}


@given(
    st.dictionaries(
        st.tuples(st.sampled_from("abc"), st.integers(0, 5)),
        st.tuples(st.integers(0, 1000), st.integers(0, 1000)),
        max_size=12,
    ),
    st.integers(1, 3000),
    st.integers(1, 6),
)
def test_allot_with_tasks_properties(
    parts: dict[tuple[str, int], tuple[int, int]], budget: int, tasks: int
) -> None:
    start = {tp: s for tp, (s, _) in parts.items()}
    available = {tp: s + n for tp, (s, n) in parts.items()}
    end = allot(start, available, budget, tasks)
    taken = {tp: end[tp] - start[tp] for tp in start}
    pending = [tp for tp in start if available[tp] > start[tp]]
    assert all(0 <= taken[tp] <= available[tp] - start[tp] for tp in start)
    assert sum(taken.values()) <= budget
    total = sum(available[tp] - start[tp] for tp in start)
    if len(pending) > 1 and total > budget:  # (what fits in the budget is taken whole)
        cap = -(-budget // min(tasks, len(pending)))
        assert all(t <= cap for t in taken.values())
    if tasks == 1:
        assert sum(taken.values()) == min(budget, total)


def test_pack_balances_by_bytes_when_record_sizes_differ() -> None:
    big = Range("t", 0, 0, 100)  # 100 records of 10 KB
    small = [Range("t", p, 0, 400) for p in range(1, 4)]  # 400 records of 100 B each
    sizes = {("t", 0): 10_000.0, ("t", 1): 100.0, ("t", 2): 100.0, ("t", 3): 100.0}
    groups = pack([big, *small], 2, record_bytes(sizes))
    assert [big] in groups  # 1 MB alone; by records it would share a task with 400 more
    by_count = pack([big, *small], 2)
    assert [big] not in by_count


def test_record_bytes_counts_unmeasured_partitions_at_the_mean() -> None:
    load = record_bytes({("t", 0): 10.0, ("t", 1): 30.0})
    assert load(Range("t", 0, 0, 5)) == 50.0
    assert load(Range("u", 7, 0, 5)) == 100.0  # mean 20
    assert record_bytes({})(Range("t", 0, 0, 5)) == 5.0


def test_settle_merges_what_a_parked_partition_owes() -> None:
    owed = {("t", 0): Range("t", 0, 40, 100)}
    planned = [Range("t", 0, 100, 150), Range("t", 1, 0, 10)]
    # back-off not over: the planned range is owed too, nothing of it copied
    work, left = settle(planned, owed, lambda tp: False)
    assert work == [Range("t", 1, 0, 10)]
    assert left == {("t", 0): Range("t", 0, 40, 150)}
    # due: everything owed, in one range (one writer per partition)
    work, left = settle(planned, left, lambda tp: True)
    assert work == [Range("t", 0, 40, 150), Range("t", 1, 0, 10)]
    assert left == {}
    # due with nothing planned in the batch: the owed range alone
    work, left = settle([], owed, lambda tp: True)
    assert work == [Range("t", 0, 40, 100)] and left == {}
    assert settle(planned, {}, lambda tp: False) == (sorted(planned), {})


def test_owed_round_trip() -> None:
    owed = {("b", 1): Range("b", 1, 5, 9), ("a", 0): Range("a", 0, 0, 3)}
    encoded = encode_owed(owed)
    assert encoded == [["a", 0, 0, 3], ["b", 1, 5, 9]]
    assert decode_owed(json.loads(json.dumps(encoded))) == owed
    assert decode_owed(None) == {}


def test_a_plan_round_trips_as_stable_json() -> None:
    plan = Plan({("t", 1): 5, ("t", 0): 0}, {("t", 1): 9, ("t", 0): 0}, {("t", 1): 20, ("t", 0): 0})
    text = plan.encode()
    assert Plan.decode(text) == plan
    assert Plan.decode(text).encode() == text
    assert json.loads(text)["end"] == {"t": {"0": 0, "1": 9}}
    assert plan.ranges == [Range("t", 1, 5, 9)]  # only partitions with records to copy
    assert Plan.decode('{"start": {}, "end": {}}') == Plan({}, {})
