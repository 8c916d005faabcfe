"""Which log a stored position belongs to, and where copying resumes (topic ids)."""

from __future__ import annotations

from mirrorlib.core.batches import Plan
from mirrorlib.core.connect_offsets import SourcePosition
from mirrorlib.core.incarnations import (
    Incarnation,
    StartKind,
    mismatch,
    out_of_range,
    rebase,
    resume,
)

OLD, NEW = Incarnation("src-1", "dst-1"), Incarnation("src-2", "dst-1")


def test_a_new_source_topic_id_is_a_new_incarnation_copied_from_its_first_offset() -> None:
    start = resume("t", 0, stored=999, stored_ids=OLD, current=NEW)
    assert start.kind is StartKind.NEW_SOURCE and start.from_beginning and start.offset is None
    assert start.warning is not None
    assert "src-1 -> src-2" in start.warning and "source topic t" in start.warning


def test_a_new_remote_topic_id_copies_the_source_again() -> None:
    start = resume(
        "t",
        0,
        stored=999,
        stored_ids=OLD,
        current=Incarnation("src-1", "dst-2"),
        remote_topic="A.t",
    )
    assert start.kind is StartKind.NEW_REMOTE and start.from_beginning
    assert start.warning is not None and "remote topic A.t" in start.warning


def test_the_same_ids_or_unknown_ones_resume_after_the_stored_position() -> None:
    for stored_ids, current in [
        (OLD, OLD),
        (Incarnation(), NEW),  # stored by MM2 or an older mirrorlib
        (OLD, Incarnation()),  # not described now (nothing is concluded)
    ]:
        start = resume("t", 0, stored=999, stored_ids=stored_ids, current=current)
        assert start.kind is StartKind.STORED and start.offset == 1000 and start.warning is None
    assert resume("t", 0, stored=None, stored_ids=OLD, current=NEW).kind is StartKind.RESET


def test_below_the_log_start_is_data_loss_of_the_gap() -> None:
    d = out_of_range("t", 0, next_offset=201, low=300, high=400, same_log=True)
    assert (d.resume, d.lost, d.lost_count) == (300, (201, 299), 99)


def test_past_the_end_of_the_same_log_resumes_at_the_new_end_without_loss() -> None:
    d = out_of_range("t", 0, next_offset=1000, low=0, high=600, same_log=True)
    assert (d.resume, d.lost) == (600, None)
    assert "600..999" in d.message


def test_past_the_end_with_nothing_to_tell_copies_the_log_again() -> None:
    d = out_of_range("t", 0, next_offset=1000, low=5, high=600, same_log=False)
    assert (d.resume, d.lost) == (5, None)


def test_positions_keep_their_topic_ids_where_mm2_ignores_them() -> None:
    pos = SourcePosition("A", "t", 0, 41, "src-1", "dst-1")
    value = pos.encode_value()
    assert value == b'{"offset":41,"topic_id":"src-1","remote_topic_id":"dst-1"}'
    assert SourcePosition.decode(pos.encode_key(), value) == pos
    # MM2's value (no ids), and ours without them: byte for byte what MM2 writes
    assert SourcePosition("A", "t", 0, 41).encode_value() == b'{"offset":41}'
    mm2 = SourcePosition.decode(pos.encode_key(), b'{"offset":41}')
    assert mm2 is not None and (mm2.topic_id, mm2.remote_topic_id) == (None, None)


def test_a_running_query_starts_a_recreated_topic_at_its_first_offset() -> None:
    """The Spark engine: the last batch ended at 1,000 of the old ``t``; ``t`` was re-created
    with 3,000 records. The next batch starts at 0, not 1,000 (which would wait for the new log
    to pass 1,000 and skip what is below)."""
    tp = ("t", 0)
    moved = rebase({tp: 1000}, {tp: 0}, {tp: 3000}, {"t": OLD}, {"t": NEW})
    assert moved[tp].offset == 0 and moved[tp].new_incarnation
    assert "src-1 -> src-2" in moved[tp].message
    # the same ids: where the last batch ended; past the end of the same log: the new end
    assert rebase({tp: 1000}, {tp: 0}, {tp: 3000}, {"t": OLD}, {"t": OLD}) == {}
    truncated = rebase({tp: 1000}, {tp: 0}, {tp: 600}, {"t": OLD}, {"t": OLD})[tp]
    assert (truncated.offset, truncated.new_incarnation) == (600, False)
    # no id known before (a checkpoint of an older mirrorlib): copied again from the start
    unknown = rebase({tp: 1000}, {tp: 7}, {tp: 600}, {}, {"t": NEW})[tp]
    assert (unknown.offset, unknown.new_incarnation) == (7, False)


def test_a_plan_keeps_the_topic_ids_it_was_planned_with() -> None:
    plan = Plan({("t", 0): 5}, {("t", 0): 9}, {("t", 0): 9}, {"t": OLD})
    assert Plan.decode(plan.encode()) == plan
    assert Plan.decode('{"start": {}, "end": {}, "latest": {}}').ids == {}  # older plans


def test_verify_names_a_topic_of_another_incarnation() -> None:
    assert mismatch("t", "A.t", OLD, OLD) is None
    assert mismatch("t", "A.t", Incarnation(), NEW) is None  # stored by MM2: nothing to tell
    source = mismatch("t", "A.t", OLD, NEW)
    assert source is not None and "source topic t is a new incarnation" in source
    remote = mismatch("t", "A.t", OLD, Incarnation("src-1", "dst-9"))
    assert remote is not None and "remote topic A.t is a new incarnation" in remote
