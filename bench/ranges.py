"""The Spark engine's copy task without Spark: a backfill copied by successive tasks in one
process (issue 13: what a batch boundary costs the task itself).

``flock /work/bench.lock python -m bench.ranges [--records N] [--partitions P]
[--variant NAME=TASKS[:KEY=VALUE,...]] [--rounds R]``

Starts two local clusters; per round and variant (alternated) preloads a new topic with
``--records`` records of ``--size`` bytes and copies it A -> B with
:func:`mirrorlib.kafka.ranges.executor.copy_ranges`, the body of a Spark copy task, in ``TASKS``
successive calls (every partition's range cut in ``TASKS`` equal parts, as a backfill's
batches cut it), after one warm-up call that builds the process's task clients. ``KEY=VALUE``
are extra ``mm2.properties`` lines (e.g. ``A.consumer.queued.min.messages=100000``). Records
per second over all calls, and per call its seconds and its wait for the first record
(:attr:`~mirrorlib.kafka.ranges.executor.CopyResult.first_record_s`), go to ``bench/results``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench import kio
from mirrorlib import MirrorConfig
from mirrorlib.core.batches import Range
from mirrorlib.core.settings import FlowSettings
from mirrorlib.kafka.ranges.executor import copy_ranges
from mirrorlib.testing import JvmOptions, mm2_properties, start_clusters

ROOT = Path(__file__).resolve().parent.parent


def _variant(spec: str) -> tuple[str, int, dict[str, str]]:
    name, _, rest = spec.partition("=")
    tasks, _, props = rest.partition(":")
    return name, int(tasks or 1), dict(kv.split("=", 1) for kv in props.split(",") if kv)


def copy_in_tasks(
    settings: FlowSettings, topic: str, ends: dict[int, int], tasks: int
) -> dict[str, Any]:
    """Copy ``topic`` from offset 1 to ``ends`` in ``tasks`` calls (offset 0 is the warm-up's)."""
    copy_ranges(settings, [Range(topic, p, 0, 1) for p in ends])  # clients built
    cpu0, began = os.times(), time.monotonic()
    calls = []
    for i in range(tasks):
        work = [
            Range(topic, p, max(1, end * i // tasks), end * (i + 1) // tasks)
            for p, end in sorted(ends.items())
        ]
        res = copy_ranges(settings, work)
        calls.append(
            {
                "records": res.records,
                "seconds": round(res.seconds, 3),
                "first_record_s": None
                if res.first_record_s is None
                else round(res.first_record_s, 3),
            }
        )
    seconds = time.monotonic() - began
    cpu1 = os.times()
    records = sum(c["records"] for c in calls)
    return {
        "records": records,
        "seconds": round(seconds, 3),
        "records_per_s": round(records / seconds),
        "cpu_s": round(cpu1.user + cpu1.system - cpu0.user - cpu0.system, 2),
        "calls": calls,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.ranges")
    p.add_argument("--records", type=int, default=1_600_000)
    p.add_argument("--size", type=int, default=100)
    p.add_argument("--partitions", type=int, default=16)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--variant", action="append", default=[], help="NAME=TASKS[:KEY=VALUE,...]")
    p.add_argument("--out", default=str(ROOT / "bench/results"))
    args = p.parse_args(argv)
    variants = [_variant(v) for v in args.variant] or [_variant("one=1"), _variant("four=4")]
    stamp = time.strftime("%Y-%m-%d-%H%M", time.gmtime())
    work = Path(f"/tmp/bench-ranges-{stamp}")
    work.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    with start_clusters(["A", "B"], jvm=JvmOptions(heap="1g", fast_jit=False)) as (a, b):
        clients = {"A": a.java_client_config(), "B": b.java_client_config()}
        ob = kio.Offsets(a.bootstrap_servers)
        for k in range(args.rounds):
            for name, tasks, props in variants:
                topic = f"ranges-{name}-{k}".replace("_", "-")
                kio.create_topics(a.bootstrap_servers, {topic: args.partitions})
                kio.create_topics(b.bootstrap_servers, {f"A.{topic}": args.partitions})
                kio.producer_performance(work, a.bootstrap_servers, topic, args.records, args.size)
                cfg = MirrorConfig.from_properties(
                    mm2_properties(clients, ["A->B"], topics=topic) | props
                )
                (flow,) = cfg.pairs_for_targets(["B"])
                settings = FlowSettings.from_config(cfg, flow)
                with contextlib.suppress(Exception):  # created by an earlier round
                    kio.create_topics(a.bootstrap_servers, {settings.offset_syncs_topic: 1})
                row = {"variant": name, "round": k, "tasks": tasks, "props": props}
                row |= copy_in_tasks(settings, topic, ob.end_offsets(topic), tasks)
                print(json.dumps(row), flush=True)
                rows.append(row)
        ob.close()
    doc = {
        "what": "copy_ranges (a Spark copy task's body) in one process: a backfill in TASKS "
        "successive calls, after a warm-up call",
        "records": args.records,
        "record_size": args.size,
        "partitions": args.partitions,
        "rows": rows,
    }
    path = Path(args.out) / f"{stamp}-ranges.json"
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
