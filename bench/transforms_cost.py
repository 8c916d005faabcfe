"""What a record filter costs, mirrorlib and the real MM2 side by side (issue 37, item 1).

``flock /work/bench.lock python -m bench.transforms_cost [--rounds 3]``

Starts two local clusters and measures, like ``bench.run``'s throughput phase (a warm replicator
process, SIGSTOPped while a cell's data set is preloaded, timed from the SIGCONT until the
target holds every record), four contenders in rounds, each round in a rotated order:

* ``mirrorlib`` and ``mm2`` (MM2 with mirrorlib's client settings) without transforms;
* ``mirrorlib+filter`` and ``mm2+filter``: the same with MM2's ``Filter`` transform and a
  ``HasHeaderKey`` predicate, set per flow with MM2's keys. ProducerPerformance's records have
  no header, so the predicate is evaluated on every record and none is dropped: every record
  still arrives, and the difference is the cost of passing each record through the filter.

Prints and writes (``bench/results/<date>-<time>-transforms-cost.json``) the median round of
each contender and cell and the ratios: each engine with the filter against itself without it,
and mirrorlib against MM2 with the filter.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from bench import contenders, stats
from bench.contenders import make
from bench.run import ROOT, log, machine_info, throughput_phase, versions, warm_brokers
from mirrorlib.testing import JvmOptions, start_clusters

#: cells: (record size, partitions, records)
MATRIX = [(100, 1, 400_000), (1024, 16, 250_000)]
FILTER = "+filter"
#: MM2's keys for a filter that evaluates a predicate on every record and drops none
FILTER_KEYS = {
    "transforms": "keep",
    "transforms.keep.type": "org.apache.kafka.connect.transforms.Filter",
    "transforms.keep.predicate": "marked",
    "predicates": "marked",
    "predicates.marked.type": "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
    "predicates.marked.name": "bench-drop-me",
}
CONTENDERS = (stats.MIRRORLIB, stats.MIRRORLIB + FILTER, stats.MM2_TUNED, stats.MM2_TUNED + FILTER)


def _ratio(num: Any, den: Any) -> float | None:
    return round(num / den, 3) if num and den else None


def ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per cell: each engine's throughput and CPU per record with the filter ÷ without, and
    mirrorlib's ÷ MM2's with the filter."""
    by = {(r["contender"], r["record_size"], r["partitions"]): r for r in rows}
    out = []
    for size, parts, _ in MATRIX:
        cell: dict[str, Any] = {"record_size": size, "partitions": parts}
        for engine in (stats.MIRRORLIB, stats.MM2_TUNED):
            plain, filtered = by.get((engine, size, parts)), by.get((engine + FILTER, size, parts))
            if plain and filtered:
                cell[f"{engine}_filter_throughput_ratio"] = _ratio(
                    filtered["records_per_s"], plain["records_per_s"]
                )
                cell[f"{engine}_filter_cpu_ratio"] = _ratio(
                    filtered["cpu_s_per_million"], plain["cpu_s_per_million"]
                )
        ml, mm2 = (
            by.get((stats.MIRRORLIB + FILTER, size, parts)),
            by.get((stats.MM2_TUNED + FILTER, size, parts)),
        )
        if ml and mm2:
            cell["filtered_mirrorlib_vs_mm2_throughput"] = _ratio(
                ml["records_per_s"], mm2["records_per_s"]
            )
            cell["filtered_mirrorlib_vs_mm2_cpu"] = _ratio(
                ml["cpu_s_per_million"], mm2["cpu_s_per_million"]
            )
        out.append(cell)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.transforms_cost", description=__doc__)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = p.parse_args(argv)
    run_id = f"t{int(time.time()) % 100000}"
    work = Path(os.environ.get("BENCH_WORK_DIR", f"/tmp/mirrorlib-bench-{run_id}"))
    work.mkdir(parents=True, exist_ok=True)
    rev = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    snap = work / f"mirrorlib-{rev[:10]}"
    snap.mkdir(exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "src/mirrorlib"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(snap)], input=archive, check=True)
    contenders.MIRRORLIB_SRC = str(snap / "src")  # a commit's snapshot, not the tree
    log(f"mirrorlib contender runs commit {rev[:10]}; matrix {MATRIX}")
    raw: list[dict[str, Any]] = []
    machine = machine_info()
    with start_clusters(["A", "B"], jvm=JvmOptions(heap="1g", fast_jit=False)) as (a, b):
        warm_brokers(a, b, f"tc-{run_id}-jit-", work)
        for rnd in range(max(args.rounds, 1)):
            order = CONTENDERS[rnd % len(CONTENDERS) :] + CONTENDERS[: rnd % len(CONTENDERS)]
            for cid in order:
                k = CONTENDERS.index(cid) + 100 * rnd
                engine = cid.removesuffix(FILTER)
                con = make(engine, k, work)
                src, tgt = con.source_alias, con.target_alias
                contenders.EXTRA_FLOW_PROPERTIES = (
                    {f"{src}->{tgt}.{key}": v for key, v in FILTER_KEYS.items()}
                    if cid.endswith(FILTER)
                    else {}
                )
                log(f"throughput: {cid} (round {rnd + 1} of {args.rounds})")
                try:
                    got = throughput_phase(con, a, b, f"tc-{run_id}-{k}-", MATRIX, work, False)
                finally:
                    contenders.EXTRA_FLOW_PROPERTIES = {}
                raw += [dict(r, contender=cid, round=rnd) for r in got]  # (named by variant)
    rows = stats.combine_rounds(raw)
    doc = {
        "kind": "transforms-cost",
        "date": dt.datetime.now().isoformat(timespec="seconds"),
        "mirrorlib_commit": rev,
        "versions": versions(rev),
        "machine": machine,
        "filter": FILTER_KEYS,
        "matrix": MATRIX,
        "rows": rows,
        "ratios": ratios(rows),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{dt.datetime.now().strftime('%Y-%m-%d-%H%M')}-transforms-cost.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    print(stats.throughput_table(rows))
    print(json.dumps(doc["ratios"], indent=2))
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
