"""The messages and frames between a flow's parent process and its copier workers."""

from __future__ import annotations

import attrs
import pytest

from mirrorlib.core.counters import StatsRegistry
from mirrorlib.core.records import OffsetSync
from mirrorlib.core.syncs import EmittedSync, SyncLineage
from mirrorlib.core.workerproto import (
    DEFAULT_SESSION_TIMEOUT_S,
    FRAME_HEADER_SIZE,
    MAX_FRAME,
    REPORT_INTERVAL_S,
    Assign,
    Keepalive,
    PartitionReport,
    ReportMerger,
    Syncs,
    SyncsFailed,
    WorkerProtocolError,
    decode_frame,
    encode_frame,
    frame_size,
    parent_silence_limit,
    report_of,
)
from tests.runtime.conftest import offline_settings


def test_a_frame_is_its_length_then_its_message() -> None:
    message = Assign(3, frozenset({("t", 0), ("t", 1)}))
    frame = encode_frame(message)
    header, body = frame[:FRAME_HEADER_SIZE], frame[FRAME_HEADER_SIZE:]
    assert frame_size(header) == len(body)
    assert decode_frame(body) == message


@pytest.mark.parametrize("kind", [Syncs, SyncsFailed])
def test_offset_syncs_cross_a_frame_whole(kind: type[Syncs] | type[SyncsFailed]) -> None:
    syncs = tuple(
        EmittedSync(OffsetSync(f"t{p}", p, 100 * n, 90 * n + p), SyncLineage(f"w{p % 2}", n))
        for p in range(3)
        for n in (0, 1, 2**62)
    )
    message = kind(syncs)
    decoded = decode_frame(encode_frame(message)[FRAME_HEADER_SIZE:])
    assert type(decoded) is kind
    assert decoded == message
    assert decode_frame(encode_frame(kind(()))[FRAME_HEADER_SIZE:]) == kind(())


def test_a_corrupt_length_is_refused() -> None:
    with pytest.raises(WorkerProtocolError):
        frame_size((MAX_FRAME + 1).to_bytes(FRAME_HEADER_SIZE, "big"))


def report(records: int, nbytes: int, position: int) -> PartitionReport:
    return PartitionReport("t", 0, "A.t", records, nbytes, position, 100, 5, 0, None, (7.0,), ())


def test_merged_counters_never_go_back_when_a_worker_restarts() -> None:
    registry = StatsRegistry("A", "B")
    stats = registry.partition("t", 0, "A.t")
    first = ReportMerger()
    first.apply(report(10, 100, 10), stats)
    first.apply(report(25, 250, 25), stats)
    assert (stats.record_count, stats.byte_count, stats.position) == (25, 250, 25)
    second = ReportMerger()  # the slot's next process counts from 0 again
    second.apply(report(5, 50, 30), stats)
    assert (stats.record_count, stats.byte_count, stats.position) == (30, 300, 30)
    assert stats.end_offset == 100 and stats.age.count == 3


def test_a_forgotten_partition_counts_anew() -> None:
    registry = StatsRegistry("A", "B")
    stats = registry.partition("t", 0, "A.t")
    merger = ReportMerger()
    merger.apply(report(10, 100, 10), stats)
    merger.forget(("t", 0))
    merger.apply(report(3, 30, 13), stats)
    assert stats.record_count == 13


def test_a_partition_given_to_the_same_process_again_counts_anew() -> None:
    # the process dropped the partition and was given it back before the parent saw the drop:
    # its counters start from 0 again, in a new holding
    registry = StatsRegistry("A", "B")
    stats = registry.partition("t", 0, "A.t")
    merger = ReportMerger()
    merger.apply(attrs.evolve(report(10, 100, 10), holding=1), stats)
    merger.apply(attrs.evolve(report(3, 30, 13), holding=2), stats)
    merger.apply(attrs.evolve(report(5, 50, 15), holding=2), stats)
    assert (stats.record_count, stats.byte_count) == (15, 150)


def test_report_of_copies_the_counters() -> None:
    registry = StatsRegistry("A", "B")
    stats = registry.partition("t", 1, "A.t")
    stats.record_count, stats.position = 4, 9
    r = report_of("t", 1, stats)
    assert (r.topic, r.partition, r.remote_topic, r.record_count, r.position) == (
        "t",
        1,
        "A.t",
        4,
        9,
    )


def test_a_worker_leaves_a_silent_parent_before_the_group_moves_its_partitions() -> None:
    assert parent_silence_limit(offline_settings()) == DEFAULT_SESSION_TIMEOUT_S * 2 / 3
    short = offline_settings(**{"A->B.source.consumer.session.timeout.ms": "9000"})
    assert parent_silence_limit(short) == 6.0
    tiny = offline_settings(**{"A->B.source.consumer.session.timeout.ms": "1500"})
    assert parent_silence_limit(tiny) == 6 * REPORT_INTERVAL_S  # not below the heartbeats'
    assert decode_frame(encode_frame(Keepalive())[FRAME_HEADER_SIZE:]) == Keepalive()
