"""Offset-sync emission (MM2's OffsetSyncWriter / MirrorSourceTask rule) and sync lineage."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorlib.core.records import OffsetSync, TopicPartition
from mirrorlib.core.syncs import (
    LINEAGE_HEADER,
    EmittedSync,
    FailedSyncs,
    OffsetSyncEmitter,
    SyncLineage,
    lineage_from_headers,
)
from mirrorlib.errors import CodecError

TP = TopicPartition("topic", 0)
TP2 = TopicPartition("topic", 1)


def dues(emitter: OffsetSyncEmitter, pairs: list[tuple[int, int]]) -> list[bool]:
    return [emitter.record(TP, up, down) for up, down in pairs]


# -- MM2's PartitionState cases (OffsetSyncWriterTest / MirrorSourceTaskTest) ---------------------


def test_offset_sync_rule_lag_50() -> None:
    # MirrorSourceTaskTest.testOffsetSync on OffsetSyncWriter.PartitionState, which the writer
    # resets after every due sync.
    e = OffsetSyncEmitter(50)
    assert dues(
        e,
        [(0, 100), (2, 102), (3, 152), (4, 153), (5, 154), (6, 203), (7, 204)],
    ) == [True, True, False, True, False, False, True]
    assert e.record(TP, 2, 206) is True  # upstream reset
    assert e.record(TP, 3, 207) is False
    assert e.record(TP, 4, 3) is True  # downstream reset
    assert e.record(TP, 5, 4) is False
    assert e.record(TP, 7, 6) is True  # upstream gap
    assert e.record(TP, 7, 6) is True  # repeated upstream offset is a gap too
    assert e.record(TP, 8, 7) is False
    assert e.record(TP, 10, 57) is True
    assert e.record(TP, 11, 58) is False


def test_zero_offset_lag_syncs_every_record() -> None:
    # testZeroOffsetSync
    e = OffsetSyncEmitter(0)
    pairs = [(0, 100), (2, 102), (3, 153), (4, 154), (5, 155), (6, 207), (2, 208), (3, 209)]
    pairs += [(4, 3), (5, 4), (7, 6), (7, 6), (8, 7), (10, 57), (11, 58)]
    assert all(dues(e, pairs))


def test_with_downstream_gaps_a_commit_marker_makes_the_next_record_due() -> None:
    for gaps in (False, True):
        e = OffsetSyncEmitter(100, sync_downstream_gaps=gaps)
        assert e.record(TP, 0, 0)
        assert not e.record(TP, 1, 1) and not e.record(TP, 2, 2)
        assert e.record(TP, 3, 4) is gaps  # offset 3 on the target is a commit marker
        assert not e.record(TP, 4, 5)


def test_contiguous_stream_syncs_every_101_records() -> None:
    e = OffsetSyncEmitter(100)
    due = [up for up in range(1000) if e.record(TP, up, up)]
    assert due == list(range(0, 1000, 101))


def test_maybe_queue_offset_syncs() -> None:
    # OffsetSyncWriterTest.testMaybeQueueOffsetSyncs
    e = OffsetSyncEmitter(2)
    e.record(TP, 0, 1)
    assert TP not in e.delayed()
    assert TP in e.pending()
    assert e.last_sync_downstream(TP) == 1
    e.record(TP, 1, 2)
    assert TP in e.delayed()
    assert e.last_sync_downstream(TP) == 1


def test_promote_delayed_offset_syncs() -> None:
    # OffsetSyncWriterTest.testPromoteDelayedOffsetSyncs
    e = OffsetSyncEmitter(50)
    e.record(TP, 0, 100)
    e.record(TP, 1, 101)
    e.promote_delayed()
    assert e.delayed() == {}
    assert e.pending() == {TP: OffsetSync("topic", 0, 1, 101)}


def test_due_sync_replaces_pending_and_clears_delayed() -> None:
    e = OffsetSyncEmitter(10)
    e.record(TP, 0, 0)
    e.record(TP, 1, 1)
    assert e.delayed() == {TP: OffsetSync("topic", 0, 1, 1)}
    e.record(TP, 5, 2)  # gap: due
    assert e.delayed() == {}
    assert e.pending() == {TP: OffsetSync("topic", 0, 5, 2)}
    e.record(TP, 6, 3)
    e.record(TP, 7, 4)
    assert e.delayed() == {TP: OffsetSync("topic", 0, 7, 4)}  # latest per partition


def test_take_pending_order_and_limit() -> None:
    e = OffsetSyncEmitter(10)
    e.record(TP, 0, 0)
    e.record(TP2, 0, 0)
    first = e.take_pending(max_count=1)
    assert [x.sync.partition for x in first] == [0]
    assert e.pending() == {TP2: OffsetSync("topic", 1, 0, 0)}
    assert [x.sync.partition for x in e.take_pending()] == [1]
    assert e.take_pending() == []


@pytest.mark.parametrize("gaps", [False, True])
def test_flag_free_rule_matches_mm2_reference(gaps: bool) -> None:
    """MM2's rule; with ``sync_downstream_gaps`` also a sync after a downstream gap."""

    @given(
        lag=st.integers(0, 20),
        pairs=st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=60),
    )
    @settings(max_examples=200, deadline=None)
    def check(lag: int, pairs: list[tuple[int, int]]) -> None:
        e = OffsetSyncEmitter(lag, sync_downstream_gaps=gaps)
        prev_up = prev_down = last = -1
        for up, down in pairs:
            expected = (
                last == -1
                or down - (last + 1) >= lag
                or up - prev_up != 1
                or down < prev_down
                or (gaps and down - prev_down > 1)
            )
            if expected:
                last = down
            prev_up, prev_down = up, down
            assert e.record(TP, up, down) is expected

    check()


# -- lineage -------------------------------------------------------------------------------------


def seqs(taken: list[EmittedSync]) -> list[int]:
    return [x.lineage.sequence for x in taken]


def test_lineage_consecutive_for_contiguous_stream() -> None:
    e = OffsetSyncEmitter(10, writer_id="w")
    taken: list[EmittedSync] = []
    for up in range(50):
        e.record(TP, up, up + 1000)
        taken += e.take_pending()
    assert [x.sync.upstream_offset for x in taken] == [0, 11, 22, 33, 44]
    assert seqs(taken) == [0, 1, 2, 3, 4]
    assert {x.lineage.writer_id for x in taken} == {"w"}


def test_lineage_skips_a_number_across_a_gap() -> None:
    e = OffsetSyncEmitter(100, writer_id="w")
    e.record(TP, 0, 0)
    a = e.take_pending()
    e.record(TP, 1, 1)
    e.record(TP, 3, 2)  # upstream gap: due, chain broken
    b = e.take_pending()
    e.record(TP, 4, 3)
    e.promote_delayed()
    c = e.take_pending()
    # the last record before the gap (1) closes the run 0..1 first, then the gap skips a number
    assert [x.sync.upstream_offset for x in a + b + c] == [0, 1, 3, 4]
    assert seqs(a + b + c) == [0, 1, 3, 4]


def test_an_upstream_gap_sends_the_run_before_it_so_translation_stays_exact() -> None:
    """A transactional source read read_committed: committed records, a commit marker, an
    aborted transaction and its marker, more committed records. Every committed offset on the
    source, markers and aborted offsets included, translates to the first record the group has
    not processed: nothing skipped, nothing re-read."""
    from mirrorlib.core.translate import OffsetTranslator

    e = OffsetSyncEmitter(100, writer_id="w")
    records = [*range(0, 10), *range(22, 32)]  # 10 marker, 11-20 aborted, 21 marker
    taken: list[EmittedSync] = []
    for down, up in enumerate(records):
        if e.record(TP, up, down):
            taken += e.take_pending()
    e.promote_delayed()
    taken += e.take_pending()
    assert [(x.sync.upstream_offset, x.sync.downstream_offset) for x in taken] == [
        (0, 0), (9, 9), (22, 10), (31, 19),
    ]  # fmt: skip
    translator = OffsetTranslator()
    for x in taken:
        translator.add(x.sync, x.lineage)
    copies = dict(zip(records, range(len(records)), strict=True))
    for committed in range(0, 33):
        first_unread = next((up for up in records if up >= committed), None)
        want = len(records) if first_unread is None else copies[first_unread]
        assert translator.translate("topic", 0, committed) == want, committed


def test_lineage_breaks_when_due_sync_was_overwritten() -> None:
    # The gap sync at up=10 is replaced in pending by a later one before being taken: the taken
    # sync must not chain to the previous one, because a gap lies between them.
    e = OffsetSyncEmitter(0, writer_id="w")
    e.record(TP, 0, 0)
    assert seqs(e.take_pending()) == [0]
    e.record(TP, 10, 1)
    e.record(TP, 11, 2)
    assert seqs(e.take_pending()) == [2]


def test_lineage_breaks_on_downstream_step_that_is_not_forward() -> None:
    e = OffsetSyncEmitter(0, writer_id="w")
    taken: list[EmittedSync] = []
    for up, down in [(0, 5), (1, 5), (2, 6)]:
        e.record(TP, up, down)  # (1, 5) is not due under MM2's rule (down < prev_down fails)
        taken += e.take_pending()
    # ... but the chain is broken: (0,5) and (2,6) must not look contiguous.
    assert [x.sync.upstream_offset for x in taken] == [0, 2]
    assert seqs(taken) == [0, 2]


def test_failed_sync_leaves_a_hole_and_is_resent() -> None:
    e = OffsetSyncEmitter(0, writer_id="w")
    e.record(TP, 0, 0)
    [a] = e.take_pending()
    e.record(TP, 1, 1)
    [b] = e.take_pending()
    e.mark_failed(b)
    [b2] = e.take_pending()
    assert b2.sync == b.sync
    assert (a.lineage.sequence, b.lineage.sequence, b2.lineage.sequence) == (0, 1, 2)
    # A reader that got a and b2 sees 0 then 2: no run is bridged over the lost sync.


def test_failed_sync_promotes_newer_delayed_sync() -> None:
    e = OffsetSyncEmitter(100, writer_id="w")
    e.record(TP, 0, 0)
    [a] = e.take_pending()
    e.record(TP, 1, 1)
    e.mark_failed(a)
    [x] = e.take_pending()
    assert x.sync == OffsetSync("topic", 0, 1, 1)


def test_late_failure_report_does_not_resend_older_sync() -> None:
    e = OffsetSyncEmitter(0, writer_id="w")
    e.record(TP, 0, 0)
    [a] = e.take_pending()
    e.record(TP, 1, 1)
    e.take_pending()
    e.mark_failed(a)
    assert e.take_pending() == []  # re-sending `a` now would look like an upstream rewind


def test_a_failed_sync_is_reported_to_its_emitter_after_the_delay() -> None:
    e = OffsetSyncEmitter(0, writer_id="w")
    e.record(TP, 0, 0)
    [a] = e.take_pending()
    failed = FailedSyncs(delay=1.0)
    failed.add(a, now=10.0)
    assert failed.report(e, now=10.9) == 0 and len(failed) == 1  # held
    assert e.take_pending() == []  # not queued again yet: no write per round trip
    assert failed.report(e, now=11.0) == 1 and len(failed) == 0
    [again] = e.take_pending()
    assert again.sync == a.sync and again.lineage.sequence == a.lineage.sequence + 1


def test_failures_are_reported_in_the_order_they_came() -> None:
    e = OffsetSyncEmitter(0, writer_id="w")
    tp2 = TopicPartition("other", 3)
    e.record(TP, 0, 0)
    e.record(tp2, 5, 7)
    a, b = sorted(e.take_pending(), key=lambda x: x.sync.topic)
    failed = FailedSyncs(delay=0.5)
    failed.add(b, now=1.0)
    failed.add(a, now=1.2)
    assert failed.report(e, now=1.5) == 1  # only b's time has come
    assert [x.sync for x in e.take_pending()] == [b.sync]
    assert failed.report(e, now=2.0) == 1
    assert [x.sync for x in e.take_pending()] == [a.sync]


def test_mark_failed_from_other_writer_is_ignored() -> None:
    e = OffsetSyncEmitter(0, writer_id="w")
    e.record(TP, 0, 0)
    e.take_pending()
    e.mark_failed(EmittedSync(OffsetSync("topic", 0, 0, 0), SyncLineage("other", 0)))
    assert e.take_pending() == []


def test_reset_breaks_chain_and_makes_next_record_due() -> None:
    e = OffsetSyncEmitter(100, writer_id="w")
    e.record(TP, 0, 0)
    taken = e.take_pending()
    e.record(TP, 1, 1)
    e.reset(TP)
    assert e.delayed() == {TP: OffsetSync("topic", 0, 1, 1)}
    assert e.record(TP, 2, 2) is True
    taken += e.take_pending()
    assert seqs(taken) == [0, 2]


def test_reset_keeps_queued_presync_apart_from_postreset_syncs() -> None:
    e = OffsetSyncEmitter(0, writer_id="w")
    e.record(TP, 0, 0)
    e.reset(TP)
    taken = e.take_pending()  # pre-reset sync
    e.record(TP, 1, 1)
    taken += e.take_pending()
    assert seqs(taken)[1] != seqs(taken)[0] + 1


def test_forget_drops_state_and_never_reuses_sequences() -> None:
    e = OffsetSyncEmitter(0, writer_id="w")
    taken: list[EmittedSync] = []
    for up in range(3):
        e.record(TP, up, up)
        taken += e.take_pending()
    e.record(TP, 3, 3)
    e.forget(TP)
    assert e.pending() == {} and e.delayed() == {} and e.partitions() == []
    e.record(TP, 4, 4)
    taken += e.take_pending()
    assert seqs(taken) == [0, 1, 2, 4]


def test_writer_ids_are_random_per_emitter() -> None:
    assert OffsetSyncEmitter().writer_id != OffsetSyncEmitter().writer_id
    assert len(OffsetSyncEmitter(5)) == 0
    assert OffsetSyncEmitter(5).offset_lag_max == 5
    with pytest.raises(TypeError):
        OffsetSyncEmitter(True)


def test_emitted_sync_headers() -> None:
    e = OffsetSyncEmitter(0, writer_id="w1")
    e.record(TP, 7, 9)
    [x] = e.take_pending()
    assert x.topic_partition == TP
    assert lineage_from_headers(x.headers()) == SyncLineage("w1", 0)


# -- header codec --------------------------------------------------------------------------------


def test_lineage_header_roundtrip() -> None:
    lin = SyncLineage("writer-é", 2**63 - 1)
    name, value = lin.to_header()
    assert name == LINEAGE_HEADER == "mirrorlib.lineage"
    assert value == b"\x00" + (2**63 - 1).to_bytes(8, "big") + "writer-é".encode()
    assert SyncLineage.from_header(value) == lin
    assert SyncLineage.from_header(bytearray(value)) == lin


@pytest.mark.parametrize(
    "value",
    [
        None,
        b"",
        b"\x00" + bytes(8),
        b"\x01" + bytes(8) + b"w",
        b"\x00" + bytes(8) + b"\xff",
        b"\x00\x80" + bytes(7) + b"w",
    ],
)
def test_lineage_header_malformed(value: bytes | None) -> None:
    with pytest.raises(CodecError):
        SyncLineage.from_header(value)
    assert lineage_from_headers([(LINEAGE_HEADER, value)]) is None


def test_lineage_validation() -> None:
    for bad_writer in ["", "x" * 256, "\ud800"]:
        with pytest.raises(CodecError):
            SyncLineage(bad_writer, 0)
    for bad_seq in [-1, 2**63, True]:
        with pytest.raises(CodecError):
            SyncLineage("w", bad_seq)
    with pytest.raises(CodecError):
        SyncLineage.from_header("text")  # type: ignore[arg-type]


def test_lineage_from_headers() -> None:
    lin = SyncLineage("w", 3)
    assert lineage_from_headers(None) is None
    assert lineage_from_headers([]) is None
    assert lineage_from_headers([("other", b"x")]) is None
    assert lineage_from_headers([("other", b"x"), lin.to_header()]) == lin
    later = SyncLineage("w", 4).to_header()
    assert lineage_from_headers([lin.to_header(), later]) == SyncLineage("w", 4)


@given(st.binary(max_size=40))
@settings(max_examples=300)
def test_lineage_decoder_only_raises_codec_error(data: bytes) -> None:
    try:
        lin = SyncLineage.from_header(data)
    except CodecError:
        return
    assert SyncLineage.from_header(lin.encode()) == lin


@given(st.text(min_size=1, max_size=50), st.integers(0, 2**63 - 1))
def test_lineage_roundtrip_property(writer: str, seq: int) -> None:
    try:
        lin = SyncLineage(writer, seq)
    except CodecError:
        return  # unencodable writer id (lone surrogate)
    assert SyncLineage.from_header(lin.to_header()[1]) == lin


# -- record_run: a run of consecutive acknowledgements at once --------------------------------------


def _replay(
    emitter: OffsetSyncEmitter, runs: list[tuple[int, int, int]], *, bulk: bool
) -> list[tuple[int, int, int]]:
    """Feed runs (upstream, downstream, count) and take every due sync at once (as the copier
    does); return the taken syncs as (upstream, downstream, sequence), then promote and take."""
    taken: list[tuple[int, int, int]] = []

    def take() -> None:
        taken.extend(
            (e.sync.upstream_offset, e.sync.downstream_offset, e.lineage.sequence)
            for e in emitter.take_pending()
        )

    for up, down, count in runs:
        if bulk:
            emitter.record_run(TP, up, down, count, on_due=take)
        else:
            for i in range(count):
                if emitter.record(TP, up + i, down + i):
                    take()
    emitter.promote_delayed()
    take()
    return taken


@settings(max_examples=300, deadline=None)
@given(
    lag=st.integers(0, 12),
    runs=st.lists(
        st.tuples(st.integers(-3, 40), st.integers(-3, 40), st.integers(0, 60)), max_size=8
    ),
    gaps=st.booleans(),
)
def test_record_run_equals_one_record_per_offset(
    lag: int, runs: list[tuple[int, int, int]], gaps: bool
) -> None:
    # consecutive runs may continue each other, leave gaps, or rewind on either side
    absolute: list[tuple[int, int, int]] = []
    up = down = 0
    for dup, ddown, count in runs:
        up, down = max(up + dup, 0), max(down + ddown, 0)
        absolute.append((up, down, count))
        up, down = up + count, down + count
    writer = "w"
    one = OffsetSyncEmitter(lag, writer_id=writer, sync_downstream_gaps=gaps)
    bulk = OffsetSyncEmitter(lag, writer_id=writer, sync_downstream_gaps=gaps)
    assert _replay(bulk, absolute, bulk=True) == _replay(one, absolute, bulk=False)


def test_record_run_counts_due_syncs_and_sends_each() -> None:
    e = OffsetSyncEmitter(100, writer_id="w")
    sent: list[int] = []
    due = e.record_run(
        TP, 0, 0, 1000, on_due=lambda: sent.extend(x.sync.upstream_offset for x in e.take_pending())
    )
    # the first record, then every 101 records (downstream 101 past the last sync + 1)
    assert sent == [0, 101, 202, 303, 404, 505, 606, 707, 808, 909]
    assert due == len(sent)
    e.promote_delayed()
    assert [x.sync.upstream_offset for x in e.take_pending()] == [999]
    assert e.record_run(TP, 1000, 1000, 0) == 0
