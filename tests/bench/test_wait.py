"""The wait instrumentation's pure parts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.wait import CELLS, parse_cells, worker_rows
from bench.waitprobe import TIMERS, worker_path


def test_cells_parse_from_size_partitions_and_count() -> None:
    assert parse_cells("10240x16:40000, 10240x1:40000") == ((10240, 16, 40000), (10240, 1, 40000))
    assert parse_cells("") == ()
    assert CELLS and all(len(c) == 3 for c in CELLS)


def _sample(t: float, consumed: int, commit_s: float, cpu: float) -> dict[str, Any]:
    wall = dict.fromkeys(TIMERS, 0.0)
    wall["commit_txn"] = commit_s
    wall["consume_empty"] = commit_s / 2
    return {
        "t": t, "wall": wall, "calls": dict.fromkeys(TIMERS, 0), "records_consumed": consumed,
        "batches": consumed // 1000, "batch_hist": {}, "delivery_events": consumed,
        "copy_thread_cpu": cpu, "process_cpu": cpu * 1.2, "copy_thread_sched": [cpu, cpu / 2, 10],
        "threads_cpu": {"copy": cpu}, "stats": [], "consume_calls": [],
    }  # fmt: skip


def test_each_worker_is_analysed_from_its_own_probe(tmp_path: Path) -> None:
    out = tmp_path / "probe.jsonl"
    path = worker_path(out, 4242)
    assert path.parent == tmp_path and path != out
    samples = [_sample(10.0, 0, 0.0, 0.0), _sample(12.0, 100_000, 0.2, 0.8)]
    path.write_text("".join(json.dumps(s) + "\n" for s in samples))
    rows = worker_rows(out, [4242, 4343], 10.0, 12.0)  # 4343 wrote no probe: left out
    assert [r["pid"] for r in rows] == [4242]
    row = rows[0]
    assert row["records"] == 100_000 and row["records_per_s"] == 50_000
    assert row["time_share"]["transactions"] == 0.1  # 0.2 s of commits in 2 s
    assert row["copy_thread_on_cpu"] == 0.4 and row["copy_thread_run_queue"] == 0.2
