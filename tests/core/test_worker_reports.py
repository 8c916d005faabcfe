"""The copier workers' reports: record format, staleness, table rows (no broker)."""

from __future__ import annotations

import json

import attrs
import pytest

from mirrorlib.core.audit import FlowHealth, status_json
from mirrorlib.core.config import MirrorConfig
from mirrorlib.core.worker_reports import (
    REPORT_VERSION,
    PartitionLoad,
    SlotInfo,
    WorkerReport,
    WorkerState,
    decode_report,
    decode_report_key,
    departed_holders,
    encode_report,
    expire_after,
    expired_reports,
    newest_reports,
    report_interval,
    report_key,
    silent_after,
    slot_reports,
    view_reports,
    worker_status_topic,
    worker_table,
)
from mirrorlib.errors import CodecError

NOW = 1_700_000_000_000


def report(slot: int = 0, *, node: str = "n1", state: WorkerState = WorkerState.RUNNING,
           age_s: float = 0.0, interval_s: float = 1.0, **kw: object) -> WorkerReport:  # fmt: skip
    values: dict[str, object] = dict(
        flow="A->B", node=node, slot=slot, pid=4242, state=state, restarts=1,
        partitions=(("t", 0), ("t", 2)), records_per_second=1500.0, bytes_per_second=2e6,
        lag_records=12, timestamp_ms=NOW - int(age_s * 1000), interval_s=interval_s,
        tasks_max=2, last_error=None, retry_in_s=None,
    )  # fmt: skip
    values.update(kw)
    return WorkerReport(**values)  # type: ignore[arg-type]


def test_topic_is_mirrorlibs_own_internal_topic_not_connects() -> None:
    assert worker_status_topic("A") == "mm2-mirrorlib-status.A.internal"
    assert worker_status_topic("A") != "mm2-status.A.internal"


@pytest.mark.parametrize("exclude", [None, "nothing"])
def test_no_flow_replicates_the_topic(exclude: str | None) -> None:
    # B->C sees A->B's worker status topic on its source B: the policy's internal-topic rule
    # leaves it alone, even when topics.exclude does not
    props = {"clusters": "A, B, C", "A.bootstrap.servers": "x:1", "B.bootstrap.servers": "y:1",
             "C.bootstrap.servers": "z:1", "A->B.enabled": "true", "B->C.enabled": "true",
             "topics": ".*"}  # fmt: skip
    if exclude is not None:
        props["topics.exclude"] = exclude
    cfg = MirrorConfig.from_properties(props)
    topic = cfg.flow("A", "B").worker_status_topic
    assert topic == worker_status_topic("A")
    onward = cfg.flow("B", "C")
    assert not onward.should_replicate_topic(topic)
    assert onward.should_replicate_topic("orders")
    assert onward.should_replicate_topic("status.A.internal-ish")


def test_a_report_survives_its_record() -> None:
    r = report(last_error="boom", retry_in_s=2.5, lag_records=None, pid=None)
    assert decode_report(encode_report(r)) == r
    with_id = report(transactional_id="mirrorlib-A->B-n1-0")
    assert decode_report(encode_report(with_id)) == with_id
    assert decode_report_key(report_key(*r.key)) == ("A->B", "n1", 0)


def test_the_key_is_the_same_bytes_for_the_same_slot() -> None:
    # compaction keeps one record per slot only if the key is stable
    assert report_key("A->B", "n1", 3) == report_key("A->B", "n1", 3)
    assert report_key("A->B", "n1", 3) != report_key("A->B", "n2", 3)
    assert json.loads(report_key("A->B", "n1", 3)) == {"flow": "A->B", "node": "n1", "slot": 3}


def test_the_value_is_json_with_a_version() -> None:
    value = json.loads(encode_report(report()))
    assert value["version"] == REPORT_VERSION
    assert value["state"] == "running"
    assert value["partitions"] == [["t", 0], ["t", 2]]


def test_unknown_fields_are_ignored_and_newer_versions_refused() -> None:
    value = json.loads(encode_report(report()))
    assert decode_report(json.dumps({**value, "later": 1}).encode()) == report()
    with pytest.raises(CodecError, match="version"):
        decode_report(json.dumps({**value, "version": REPORT_VERSION + 1}).encode())


def test_a_report_written_before_transactional_ids_were_reported_has_none() -> None:
    value = json.loads(encode_report(report(transactional_id="x")))
    del value["transactional_id"]
    assert decode_report(json.dumps(value).encode()).transactional_id is None


def test_departed_holders_are_other_nodes_silent_slots_holding_the_partitions() -> None:
    tid = {"transactional_id": "mirrorlib-A->B-n2-0"}
    silent = report(node="n2", age_s=10.0, **tid)  # silent after 5 s (three 1 s intervals, 5 s)
    assert departed_holders([silent], [("t", 2)], flow="A->B", node="n1", now_ms=NOW) == [silent]
    kept = [
        report(node="n2", age_s=2.0, **tid),  # still reporting: it released them itself
        report(node="n1", age_s=10.0, **tid),  # this node's earlier life: its own init fences
        report(node="n2", age_s=10.0, state=WorkerState.STOPPED, **tid),  # a clean stop commits
        report(node="n2", age_s=10.0),  # at-least-once, in-process copier: no transactions
        report(node="n2", age_s=10.0, partitions=(("t", 1),), **tid),  # other partitions
        report(node="n2", age_s=10.0, flow="B->A", **tid),  # another flow
    ]
    assert departed_holders(kept, [("t", 2)], flow="A->B", node="n1", now_ms=NOW) == []
    failed = report(node="n2", age_s=10.0, state=WorkerState.FAILED, **tid)
    assert departed_holders([failed], [("t", 0)], flow="A->B", node="n1", now_ms=NOW) == [failed]


def test_slot_reports_name_each_slots_transactional_id() -> None:
    slots = [
        SlotInfo(0, 10, WorkerState.RUNNING, frozenset()),
        SlotInfo(1, 11, WorkerState.RUNNING, frozenset()),
    ]
    r0, r1 = slot_reports(slots, {}, flow="A->B", node="n1", tasks_max=2, timestamp_ms=NOW,
                          interval_s=1.0, transactional_id=lambda slot: f"tid-{slot}")  # fmt: skip
    assert (r0.transactional_id, r1.transactional_id) == ("tid-0", "tid-1")
    [plain] = slot_reports(slots[:1], {}, flow="A->B", node="n1", tasks_max=1, timestamp_ms=NOW,
                           interval_s=1.0)  # fmt: skip
    assert plain.transactional_id is None


@pytest.mark.parametrize("value", [b"", b"[]", b"{}", b'{"version": 1, "flow": "A->B"}', b"\xff"])
def test_garbage_is_a_codec_error(value: bytes) -> None:
    with pytest.raises(CodecError):
        decode_report(value)


def test_newest_report_per_slot_tombstones_remove_and_garbage_is_skipped() -> None:
    old, new, other = report(0, restarts=0), report(0, restarts=5), report(1)
    records = [
        (report_key(*old.key), encode_report(old)),
        (report_key(*other.key), encode_report(other)),
        (b"not json", b"{}"),
        (report_key(*new.key), encode_report(new)),
        (report_key(*other.key), None),
    ]
    reports, problems = newest_reports(records)
    assert list(reports.values()) == [new]
    assert len(problems) == 1


def test_the_report_interval_follows_the_flush_interval_within_bounds() -> None:
    assert report_interval(60.0) == 10.0
    assert report_interval(5.0) == 5.0
    assert report_interval(0.1) == 1.0


def test_a_report_older_than_three_intervals_is_silent_and_knows_nothing() -> None:
    assert silent_after(10.0) == 30.0
    assert silent_after(0.5) == 5.0
    fresh, stale = view_reports([report(0, age_s=2.0), report(1, age_s=31.0, interval_s=10.0)],
                                NOW)  # fmt: skip
    assert not fresh.silent and fresh.state == "running" and fresh.lag_records == 12
    assert stale.silent and stale.state == "silent"
    # never running or 0 when nothing is known
    assert stale.records_per_second is None and stale.bytes_per_second is None
    assert stale.lag_records is None
    d = stale.to_dict()
    assert d["state"] == "silent" and d["reported_state"] == "running" and d["silent"] is True
    assert d["lag_records"] is None and d["records_per_second"] is None
    assert d["partitions"] == ["t-0", "t-2"]


def test_a_stopped_slot_is_quiet_not_silent() -> None:
    [view] = view_reports([report(state=WorkerState.STOPPED, age_s=59.0)], NOW)
    assert not view.silent and view.state == "stopped"


def test_a_report_older_than_ten_intervals_expires_whatever_its_state() -> None:
    assert expire_after(10.0) == 100.0
    assert expire_after(1.0) == 60.0  # at least a minute
    kept = [
        report(0, age_s=99.0, interval_s=10.0),  # silent, not expired yet
        report(1, state=WorkerState.STOPPED, age_s=59.0),
    ]
    gone = [
        report(2, age_s=101.0, interval_s=10.0),  # a node that never came back
        report(3, state=WorkerState.STOPPED, age_s=61.0),  # a clean stop, long ago
        report(4, state=WorkerState.FAILED, age_s=3600.0),
    ]
    assert expired_reports(kept + gone, NOW) == gone
    views = view_reports(kept + gone, NOW)
    assert [v.report.slot for v in views] == [0, 1]
    assert views[0].silent


def test_stopped_keeps_failed_and_drops_partitions_and_rates() -> None:
    stopped = report().stopped(NOW + 5)
    assert stopped.state is WorkerState.STOPPED and stopped.partitions == ()
    assert stopped.records_per_second == 0.0 and stopped.lag_records is None
    assert stopped.timestamp_ms == NOW + 5
    assert report(state=WorkerState.FAILED).stopped(NOW).state is WorkerState.FAILED


def test_slot_reports_sum_their_partitions_and_unknown_lag_stays_unknown() -> None:
    loads = {
        ("t", 0): PartitionLoad(10.0, 100.0, 5),
        ("t", 1): PartitionLoad(20.0, 200.0, 7),
        ("t", 2): PartitionLoad(30.0, 300.0, None),
    }
    slots = [
        SlotInfo(1, 11, WorkerState.RUNNING, frozenset({("t", 2)})),
        SlotInfo(0, 10, WorkerState.RUNNING, frozenset({("t", 1), ("t", 0)}), restarts=2),
        SlotInfo(2, None, WorkerState.RESTARTING, frozenset(), retry_in_s=3.0),
        SlotInfo(3, 13, WorkerState.STARTING, frozenset({("t", 9)})),  # no counters yet
    ]
    r0, r1, r2, r3 = slot_reports(
        slots, loads, flow="A->B", node="n1", tasks_max=4, timestamp_ms=NOW, interval_s=1.0
    )
    assert (r0.slot, r0.partitions, r0.lag_records, r0.restarts) == (0, (("t", 0), ("t", 1)), 12, 2)
    assert (r0.records_per_second, r0.bytes_per_second) == (30.0, 300.0)
    assert r1.lag_records is None
    assert r2.state is WorkerState.RESTARTING and r2.lag_records is None and r2.retry_in_s == 3.0
    assert r2.records_per_second == 0.0
    [idle] = slot_reports([SlotInfo(0, 1, WorkerState.RUNNING, frozenset())], loads, flow="A->B",
                          node="n1", tasks_max=2, timestamp_ms=NOW, interval_s=1.0)  # fmt: skip
    assert idle.lag_records == 0  # a running worker without partitions has nothing to copy
    assert r3.lag_records is None and r3.records_per_second == 0.0


def test_the_table_has_a_row_per_worker() -> None:
    views = view_reports(
        [
            report(0, partitions=tuple(("t", p) for p in range(6))),
            report(1, age_s=60.0),
            report(0, node="n2", state=WorkerState.RESTARTING, pid=None, retry_in_s=4.0),
        ],
        NOW,
    )
    table = worker_table(views)
    assert table.header[:4] == ("node", "slot", "pid", "state")
    assert [row[:4] for row in table.rows] == [
        ("n1", "0", "4242", "running"),
        ("n1", "1", "4242", "silent (was running)"),
        ("n2", "0", "-", "restarting (in 4s)"),
    ]
    assert table.rows[0][5] == "6: t-0, t-1, t-2, t-3 ..."
    assert table.rows[0][6:9] == ("1,500 rec/s", "2,000,000 B/s", "12")
    assert table.rows[1][6:9] == ("?", "?", "?")


def test_status_shows_and_serialises_the_workers() -> None:
    views = view_reports([report(0), report(1, age_s=60.0)], NOW)
    health = FlowHealth("A", "B", "running", (), 1.0, 2.0, workers=views)
    assert health.silent_workers == 1
    text = health.describe()
    assert "workers (2 on 1 node(s), 1 silent):" in text
    assert "silent (was running)" in text
    [flow] = json.loads(status_json([health]))["flows"]
    assert [w["slot"] for w in flow["workers"]] == [0, 1]
    assert [w["state"] for w in flow["workers"]] == ["running", "silent"]
    # a flow nobody reports workers for (MM2, or never run) shows no table
    bare = attrs.evolve(health, workers=())
    assert "workers" not in bare.describe()
    assert json.loads(status_json([bare]))["flows"][0]["workers"] == []


def test_an_abandoned_slot_keeps_its_partitions_is_fenced_once_silent_and_decodes() -> None:
    """A slot whose worker did not end cleanly and whose id its node could not fence at stop:
    its last report keeps the partitions it may have left a transaction open on, and the next
    holder of those partitions fences it once the report is silent."""
    tid = {"transactional_id": "mirrorlib-A->B-n2-0"}
    abandoned = report(node="n2", state=WorkerState.ABANDONED, **tid).stopped(NOW)
    assert abandoned.state is WorkerState.ABANDONED
    assert abandoned.partitions == (("t", 0), ("t", 2)) and abandoned.records_per_second == 0.0
    assert decode_report(encode_report(abandoned)) == abandoned
    silent = attrs.evolve(abandoned, timestamp_ms=NOW - 10_000)
    assert departed_holders([silent], [("t", 2)], flow="A->B", node="n1", now_ms=NOW) == [silent]
    (view,) = view_reports([silent], NOW)
    assert view.state == "abandoned" and not view.silent
