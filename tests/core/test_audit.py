"""Pure parts of verify and status (mirrorlib.core.audit)."""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from mirrorlib.core.audit import (
    FlowHealth,
    PartitionLag,
    VerifyReport,
    compare_partition,
    flow_state,
    lag_records,
    lag_seconds,
    record_digest,
    stall_limit_s,
)


def d(i: int) -> bytes:
    return record_digest(f"k{i}".encode(), f"v{i}".encode(), [("h", b"x")], 1000 + i)


def test_digest_covers_every_field() -> None:
    base = record_digest(b"k", b"v", [("h", b"1")], 5)
    assert base != record_digest(b"k", b"v", [("h", b"1")], 6)
    assert base != record_digest(b"k", b"w", [("h", b"1")], 5)
    assert base != record_digest(b"K", b"v", [("h", b"1")], 5)
    assert base != record_digest(b"k", b"v", [("h", b"2")], 5)
    assert base != record_digest(b"k", b"v", [("g", b"1")], 5)
    assert base != record_digest(b"k", b"v", [("h", b"1"), ("h", b"1")], 5)
    assert record_digest(None, b"v", None, 5) != record_digest(b"", b"v", None, 5)
    assert record_digest(b"k", None, None, 5) != record_digest(b"k", b"", None, 5)
    assert record_digest(b"k", b"v", None, 5) == record_digest(b"k", b"v", [], 5)
    # field boundaries are unambiguous
    assert record_digest(b"ab", b"c", None, 1) != record_digest(b"a", b"bc", None, 1)
    assert len(base) == 16


def test_identical_copy_is_ok() -> None:
    src = [(i, d(i)) for i in range(10)]
    dst = [(i + 100, d(i)) for i in range(10)]
    a = compare_partition("t", 0, "A.t", src, dst, replicated_up_to=10)
    assert a.ok and a.matched == 10 and a.missing == a.extra == a.duplicated == a.pending == 0


def test_missing_duplicated_extra_pending_truncated() -> None:
    src = [(i, d(i)) for i in range(5, 20)]  # source truncated: offsets 0-4 gone
    dst = [(i, d(i)) for i in range(0, 15) if i != 8]  # 0-4 copied before truncation; 8 lost
    dst.append((15, d(10)))  # a duplicate of 10
    dst.append((16, b"x" * 16))  # something foreign
    a = compare_partition("t", 0, "A.t", src, dst, replicated_up_to=15)
    assert a.missing == 1 and a.missing_offsets == (8,)
    assert a.duplicated == 1
    assert a.extra == 1 and a.extra_offsets == (16,)
    assert a.pending == 5  # 15..19 not replicated yet
    assert a.truncated == 5
    assert not a.ok


def test_no_position_means_pending_not_missing() -> None:
    a = compare_partition("t", 0, "A.t", [(0, d(0))], [], replicated_up_to=None)
    assert a.pending == 1 and a.missing == 0 and a.ok


def test_identical_records_are_counted_as_a_multiset() -> None:
    same = d(1)
    src = [(0, same), (1, same)]
    assert compare_partition("t", 0, "r", src, [(0, same)], replicated_up_to=2).missing == 1
    assert compare_partition("t", 0, "r", src, [(0, same)] * 3, replicated_up_to=2).duplicated == 1


def test_report_describe_and_json() -> None:
    a = compare_partition("t", 0, "A.t", [(0, d(0)), (1, d(1))], [(0, d(0))], replicated_up_to=2)
    report = VerifyReport("A->B", (a,))
    assert not report.ok
    text = report.describe()
    assert "PROBLEMS FOUND" in text and "missing source offsets 1" in text
    assert report.to_dict()["totals"]["missing"] == 1


def test_lag_definitions() -> None:
    assert lag_records(100, 90) == 10
    assert lag_records(100, 120) == 0
    assert lag_records(None, 3) is None and lag_records(3, None) is None
    assert lag_seconds(0, None, 10_000) == 0.0
    assert lag_seconds(5, 4_000, 10_000) == 6.0
    assert lag_seconds(5, None, 10_000) is None
    assert lag_seconds(None, 1, 2) is None


def test_flow_state() -> None:
    assert (
        flow_state(errors=["x"], heartbeat_age_s=1, heartbeat_interval_s=1, any_position=True)
        == "unreachable"
    )
    assert (
        flow_state(errors=[], heartbeat_age_s=None, heartbeat_interval_s=1, any_position=False)
        == "not started"
    )
    assert (
        flow_state(errors=[], heartbeat_age_s=None, heartbeat_interval_s=None, any_position=True)
        == "idle"
    )
    assert (
        flow_state(errors=[], heartbeat_age_s=2, heartbeat_interval_s=1, any_position=True)
        == "running"
    )
    assert (
        flow_state(errors=[], heartbeat_age_s=60, heartbeat_interval_s=1, any_position=True)
        == "stalled"
    )


def test_flow_health_table() -> None:
    h = FlowHealth(
        "A",
        "B",
        "running",
        (PartitionLag("t", 0, "A.t", 10, 7, 3, 1.5), PartitionLag("t", 1, "A.t", 5, 5, 0, 0.0)),
        heartbeat_age_s=0.4,
        checkpoint_age_s=2.0,
    )
    assert h.lag_records == 3 and h.lag_seconds == 1.5
    text = h.describe()
    assert text.startswith("A->B: running  lag 3 record(s) / 1.5s")
    assert "t-0" in text and "A.t" in text
    assert h.to_dict()["partitions"][0]["lag_records"] == 3


def test_flow_health_unknown_lag_is_not_zero() -> None:
    unreachable = FlowHealth("A", "B", "unreachable", (), None, None, errors=("source A: down",))
    assert unreachable.lag_records is None and unreachable.lag_seconds is None
    assert "A->B: unreachable  lag unknown  no position stored  no heartbeat" in (
        unreachable.describe()
    )
    assert unreachable.to_dict()["lag_records"] is None
    fresh = FlowHealth(
        "A", "B", "running",
        (PartitionLag("t", 0, "A.t", 10, None, None, None),
         PartitionLag("t", 1, "A.t", 5, 2, 3, 4.0, position_age_s=1.0)),
        heartbeat_age_s=0.5, checkpoint_age_s=None, position_flush_interval_s=60.0,
    )  # fmt: skip
    assert fresh.lag_records == 3 and fresh.unknown_lag_partitions == 1
    text = fresh.describe()
    assert "lag 3 record(s) / 4.0s (+1 partition(s) unknown)" in text
    assert "positions stored 1.0s ago (every 60s)" in text
    assert "t-0        A.t     10   -         ?    ?      -" in text


def test_flow_health_shows_internal_topics_apart() -> None:
    h = FlowHealth(
        "A", "B", "running",
        (PartitionLag("heartbeats", 0, "A.heartbeats", 90, 40, 50, 50.0, internal=True),
         PartitionLag("t", 0, "A.t", 5, 5, 0, 0.0)),
        heartbeat_age_s=0.4, checkpoint_age_s=None,
    )  # fmt: skip
    assert h.lag_records == 0 and h.lag_seconds == 0.0  # heartbeats are not counted
    lines = h.describe().splitlines()
    apart = next(i for i, line in enumerate(lines) if "internal topics" in line)
    assert any(line.lstrip().startswith("t-0") for line in lines[:apart])
    assert any(line.lstrip().startswith("heartbeats-0") for line in lines[apart:])


def test_stalled_partition_needs_old_records_and_an_old_position() -> None:
    limit = stall_limit_s(60.0)
    assert limit == 150.0
    old = PartitionLag("t", 0, "A.t", 100, 40, 60, 500.0, position_age_s=400.0)
    assert old.stalled(limit) == "t-0: no position stored for 400s with 60 record(s) waiting"
    # records that just arrived on a partition idle for long: not stalled (yet)
    assert attrs.evolve(old, lag_seconds=2.0).stalled(limit) is None
    assert attrs.evolve(old, position_age_s=30.0).stalled(limit) is None
    assert attrs.evolve(old, lag_records=0, lag_seconds=0.0).stalled(limit) is None
    assert attrs.evolve(old, position_age_s=None).stalled(limit) is None
    assert flow_state(errors=[], heartbeat_age_s=1, heartbeat_interval_s=1, any_position=True,
                      stalled=True) == "stalled"  # fmt: skip
    h = FlowHealth("A", "B", "stalled", (old,), 1.0, None, stalled=old.stalled(limit))
    assert h.describe().startswith("A->B: stalled: t-0: no position stored for 400s")


def test_flow_health_table_limit_keeps_most_lag_and_unknown_first() -> None:
    parts = tuple(PartitionLag("t", i, "A.t", 10, 10 - i, i, 1.0) for i in range(5))
    unknown = PartitionLag("u", 0, "A.u", 3, None, None, None)
    h = FlowHealth("A", "B", "running", (*parts, unknown), 1.0, None)
    text = h.describe(limit=2)
    assert "u-0" in text and "t-4" in text and "t-3" not in text
    assert "... 4 more partition(s)" in text


def messy_copy(n: int, seed: int) -> tuple[list[tuple[int, bytes]], list[tuple[int, bytes]]]:
    """A source partition and a copy with every kind of difference: copies deleted from the
    source (truncated), lost and pending records, duplicates, foreign records, equal records."""
    import random

    rng = random.Random(seed)
    source = [(o, d(o % (n // 3)) if o % 7 == 0 else d(o)) for o in range(5, n)]
    remote: list[tuple[int, bytes]] = [(o, d(-1 - o)) for o in range(5)]  # truncated
    for offset, digest in source[: n - 40]:
        roll = rng.random()
        if roll < 0.02:
            continue  # lost (or pending past the position)
        remote.append((len(remote), digest))
        if roll > 0.98:
            remote.append((len(remote), digest))  # duplicate
        if 0.5 < roll < 0.51:
            remote.append((len(remote), d(10**6 + offset)))  # extra
    return source, remote


def test_a_spilled_comparison_finds_the_same() -> None:
    for seed in range(3):
        source, remote = messy_copy(3000, seed)
        for position in (None, 2000):
            whole = compare_partition("t", 0, "A.t", source, remote, replicated_up_to=position)
            spilled = compare_partition(
                "t", 0, "A.t", iter(source), iter(remote), replicated_up_to=position,
                bucket_records=100,
            )  # fmt: skip
            assert spilled == whole
        assert whole.missing and whole.duplicated and whole.extra and whole.truncated


def test_comparing_a_large_partition_holds_a_bounded_number_of_records() -> None:
    import tracemalloc

    n = 60_000

    def records() -> Iterator[tuple[int, bytes]]:
        return ((o, o.to_bytes(16, "little")) for o in range(n))

    def peak(bucket_records: int | None) -> int:
        tracemalloc.start()
        try:
            audit = compare_partition(
                "t", 0, "A.t", records(), records(), replicated_up_to=n,
                bucket_records=bucket_records,
            )  # fmt: skip
            assert audit.matched == n and audit.ok
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    held = peak(None)  # every record of both sides at once: ~12 MB
    spilled = peak(2_000)  # a bucket of digests at a time, and the files' write buffers
    assert spilled < 5 * 2**20 < held, (spilled, held)
