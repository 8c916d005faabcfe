"""Where does the copier wait? One command: ``python -m bench.wait [--variant ...]``.

Starts two local clusters, then per *variant* (a mirrorlib ``src/`` directory and extra
properties) runs ``python -m mirrorlib run`` probed by :mod:`bench.waitprobe` and copies a
ProducerPerformance backlog per cell (record size x partitions), like ``bench.run``'s throughput
phase (the replicator's process tree is SIGSTOPped while a cell is preloaded; with
``tasks.max`` > 1 each worker process is probed too). Per cell it prints and writes
(``bench/results/wait-<date>-<HHMM>.json``) the rate, CPU, the copy thread's time split (waiting
in ``consume()``, consuming, producing, serving delivery reports, matching them) and
librdkafka's view (fetch queue depth, fetch and produce request rates and sizes, round trips,
producer queue, requests in flight, batch sizes).

    flock /work/bench.lock env PYTHONPATH=src:. .venv/bin/python -m bench.wait \\
        --variant before:/path/to/main/src --variant after:src \\
        --variant bigfetch:src:source.consumer.max.partition.fetch.bytes=8388608

A variant is ``NAME:SRC[:KEY=VALUE,...]``; ``source.``/``target.`` in a key stand for the
variant's cluster aliases. Variants run in rotated order per round (``--rounds``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from bench import kio
from bench.contenders import mirrorlib_src
from bench.procmon import (
    ProcMonitor,
    machine_busy_seconds,
    resume_tree,
    suspend_tree,
    tree_cpu_seconds,
)
from bench.waitprobe import worker_path
from mirrorlib.testing import JvmOptions, start_clusters
from mirrorlib.testing.config import render_properties
from mirrorlib.testing.mm2 import mm2_properties

ROOT = Path(__file__).resolve().parent.parent
CELLS = ((100, 1, 300_000), (100, 16, 300_000), (1024, 1, 200_000), (1024, 16, 200_000))
WARMUP = 20_000


def log(msg: str) -> None:
    print(f"[wait {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def parse_variant(text: str) -> tuple[str, Path, dict[str, str]]:
    name, _, rest = text.partition(":")
    src, _, props = rest.partition(":")
    extra = dict(kv.split("=", 1) for kv in props.split(",") if kv)
    return name, mirrorlib_src(src or "src"), extra


def _props(a: Any, b: Any, src: str, tgt: str, pattern: str, extra: Mapping[str, str]) -> str:
    mapped = {
        re.sub(r"^source\.", f"{src}.", re.sub(r"^target\.", f"{tgt}.", k)): v
        for k, v in extra.items()
    }
    return render_properties(
        mm2_properties(
            {src: a.java_client_config(), tgt: b.java_client_config()},
            [f"{src}->{tgt}"],
            topics=pattern,
            groups=pattern,
            tasks_max=1,
            extra=mapped,
        )
    )


# -- analysis (pure) ------------------------------------------------------------------------------


def _at(samples: Sequence[Mapping[str, Any]], t: float, after: bool) -> Mapping[str, Any]:
    if after:
        return next((s for s in samples if s["t"] >= t), samples[-1])
    before = [s for s in samples if s["t"] <= t]
    return before[-1] if before else samples[0]


def _mean(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return round(statistics.fmean(vals), 1) if vals else None


def _client(reports: Sequence[Mapping[str, Any]], req: str) -> dict[str, Any]:
    """Averages of one client's statistics reports in a window, and its request rate/size."""
    if not reports:
        return {}
    brokers = [b for r in reports for b in r["brokers"].values()]
    out: dict[str, Any] = {
        "reports": len(reports),
        "replyq_avg": _mean([r["replyq"] for r in reports]),
        "msg_cnt_avg": _mean([r["msg_cnt"] for r in reports]),
        "msg_size_avg": _mean([r["msg_size"] for r in reports]),
        "fetchq_cnt_avg": _mean([r["partitions"]["fetchq_cnt"] for r in reports]),
        "fetchq_size_avg": _mean([r["partitions"]["fetchq_size"] for r in reports]),
        "msgq_cnt_avg": _mean([r["partitions"]["msgq_cnt"] for r in reports]),
        "xmit_msgq_cnt_avg": _mean([r["partitions"]["xmit_msgq_cnt"] for r in reports]),
        "rtt_avg_ms": _ms(_mean([b["rtt_avg_us"] for b in brokers])),
        "rtt_p99_ms": _ms(_mean([b["rtt_p99_us"] for b in brokers])),
        "int_latency_avg_ms": _ms(_mean([b["int_latency_avg_us"] for b in brokers])),
        "outbuf_latency_avg_ms": _ms(_mean([b["outbuf_latency_avg_us"] for b in brokers])),
        "outbuf_cnt_avg": _mean([b["outbuf_cnt"] for b in brokers]),
        "waitresp_cnt_avg": _mean([b["waitresp_cnt"] for b in brokers]),
        "waitresp_msg_cnt_avg": _mean([b["waitresp_msg_cnt"] for b in brokers]),
        "batchsize_avg": _mean([t["batchsize_avg"] for r in reports for t in r["topics"].values()]),
        "batchcnt_avg": _mean([t["batchcnt_avg"] for r in reports for t in r["topics"].values()]),
    }
    if len(reports) >= 2:
        first, last = reports[0], reports[-1]
        span = last["t"] - first["t"]

        def total(r: Mapping[str, Any], key: str) -> int:
            return sum(int(b[key] or 0) for b in r["brokers"].values())

        n = total(last, req) - total(first, req)
        rx = total(last, "rxbytes") - total(first, "rxbytes")
        tx = total(last, "txbytes") - total(first, "txbytes")
        out["requests_per_s"] = round(n / span, 1) if span > 0 else None
        out["rx_bytes_per_request"] = round(rx / n) if n else None
        out["tx_bytes_per_request"] = round(tx / n) if n else None
    return out


def _ms(us: float | None) -> float | None:
    return None if us is None else round(us / 1000, 2)


def analyse(
    samples: Sequence[Mapping[str, Any]], t0: float, t1: float, records: int
) -> dict[str, Any]:
    """Where the copy thread spent the window ``t0..t1`` (resume to the last record on the
    target), from the probe's cumulative samples."""
    s0, s1 = _at(samples, t0, after=False), _at(samples, t1, after=True)
    wall = t1 - t0
    span = max(s1["t"] - t0, wall)  # the probe's window (its last sample is a little later)

    def d(key: str, sub: str | None = None) -> float:
        a, b = (s0[key], s1[key]) if sub is None else (s0[key][sub], s1[key][sub])
        return float(b) - float(a)

    timers = {k: d("wall", k) for k in s1["wall"]}
    calls = {k: int(d("calls", k)) for k in s1["calls"]}
    hist = {k: s1["batch_hist"].get(k, 0) - s0["batch_hist"].get(k, 0) for k in s1["batch_hist"]}
    copy_net = timers["copy"] - timers["copy_blocked"]
    txn = timers.get("commit_txn", 0.0) + timers.get("begin_txn", 0.0)
    known = (
        timers["consume_empty"] + timers["consume_records"] + timers["copy"]
        + timers["producer_poll"] + timers["drain_acks"] + txn
    )  # fmt: skip
    share = {
        "waiting_in_consume": timers["consume_empty"] / span,
        "consume_with_records": timers["consume_records"] / span,
        "produce_calls": copy_net / span,
        "blocked_producer_queue_full": timers["copy_blocked"] / span,
        "producer_poll_delivery_reports": timers["producer_poll"] / span,
        "drain_acks": timers["drain_acks"] / span,
        "transactions": txn / span,
        "rest_of_loop": max(span - known, 0.0) / span,
    }
    sched = [b - a for a, b in zip(s0["copy_thread_sched"], s1["copy_thread_sched"], strict=True)]
    threads = {
        k: round((v - s0["threads_cpu"].get(k, 0.0)) / span, 3)
        for k, v in s1["threads_cpu"].items()
        if v - s0["threads_cpu"].get(k, 0.0) > 0.005 * span
    }
    waits = [
        (round(start - t0, 3), round(took, 3))
        for s in samples
        for start, took, n in s["consume_calls"]
        if n == 0 and t0 - 1 <= start <= t1 and took > 0.001
    ]
    reports = [r for s in samples for r in s["stats"] if t0 <= r["t"] <= t1 + 0.5]
    consumed = d("records_consumed")
    batches = d("batches")
    return {
        "records_per_s": round(records / wall),
        "seconds": round(wall, 3),
        "process_cpu_s": round(d("process_cpu"), 3),
        "cpu_s_per_million": round(d("process_cpu") / records * 1e6, 2),
        "process_busy": round(d("process_cpu") / span, 3),
        "copy_thread_busy": round(d("copy_thread_cpu") / span, 3),
        "copy_thread_on_cpu": round(sched[0] / span, 3),
        "copy_thread_run_queue": round(sched[1] / span, 3),
        # neither on a CPU nor waiting for one: sleeping in a call (poll/consume timeouts)
        "copy_thread_blocked": round(max(1 - (sched[0] + sched[1]) / span, 0.0), 3),
        "threads_cores": threads,
        "time_share": {k: round(v, 3) for k, v in share.items()},
        "empty_consume_calls": waits,  # (seconds after t0, seconds waited)
        "calls": calls,
        "consumed_per_batch": round(consumed / batches) if batches else None,
        "batch_sizes": hist,
        "delivery_events": int(d("delivery_events")),
        "consumer": _client([r for r in reports if r["role"] == "consumer"], "fetch_req"),
        "producer": _client([r for r in reports if r["role"] == "producer"], "produce_req"),
    }


def summarize(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per variant and cell, the median over rounds of what says whether the loop waited."""
    groups: dict[tuple[str, int, int], list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["variant"], r["record_size"], r["partitions"]), []).append(r)

    def med(items: Sequence[Mapping[str, Any]], *path: str) -> float | None:
        vals = []
        for r in items:
            v: Any = r
            for p in path:
                v = (v or {}).get(p)
            if v is not None:
                vals.append(float(v))
        return round(statistics.median(vals), 3) if vals else None

    for items in groups.values():
        for r in items:  # rows of runs before the field existed
            if "copy_thread_blocked" not in r and "copy_thread_run_queue" in r:
                blocked = 1 - r["copy_thread_on_cpu"] - r["copy_thread_run_queue"]
                r = cast(dict[str, Any], r)
                r["copy_thread_blocked"] = round(max(blocked, 0.0), 3)
    out = []
    for (variant, size, parts), items in groups.items():
        out.append(
            {
                "variant": variant,
                "record_size": size,
                "partitions": parts,
                "rounds": len(items),
                "records_per_s": [r["records_per_s"] for r in items],
                "records_per_s_median": med(items, "records_per_s"),
                "cpu_s_per_million": med(items, "cpu_s_per_million"),
                "process_busy": med(items, "process_busy"),
                "copy_thread_on_cpu": med(items, "copy_thread_on_cpu"),
                "copy_thread_run_queue": med(items, "copy_thread_run_queue"),
                "copy_thread_blocked": med(items, "copy_thread_blocked"),
                "waiting_in_consume": med(items, "time_share", "waiting_in_consume"),
                "consumer_queue_msgs": med(items, "consumer", "fetchq_cnt_avg"),
                "fetches_per_s": med(items, "consumer", "requests_per_s"),
                "bytes_per_fetch": med(items, "consumer", "rx_bytes_per_request"),
                "producer_queue_msgs": med(items, "producer", "msg_cnt_avg"),
                "producer_int_latency_ms": med(items, "producer", "int_latency_avg_ms"),
                "produce_in_flight": med(items, "producer", "waitresp_cnt_avg"),
                "machine_cores_busy": med(items, "cores", "machine"),
                "peak_rss_mb": med(items, "peak_rss_mb"),
            }
        )
    return out


def summary_line(name: str, cell: str, r: Mapping[str, Any]) -> str:
    sh, c, p = r["time_share"], r["consumer"], r["producer"]
    return (
        f"{name:>12} {cell:>9}: {r['records_per_s']:>8,} rec/s {r['cpu_s_per_million']:>6} CPU-s/M"
        f" busy {r['process_busy']:.2f} (thread {r['copy_thread_on_cpu']:.2f},"
        f" run-queue {r['copy_thread_run_queue']:.2f}) cores {r.get('cores')}"
        f" | wait {sh['waiting_in_consume']:.2f} consume {sh['consume_with_records']:.2f}"
        f" produce {sh['produce_calls']:.2f} full {sh['blocked_producer_queue_full']:.2f}"
        f" dr {sh['producer_poll_delivery_reports']:.2f} acks {sh['drain_acks']:.2f}"
        f" txn {sh.get('transactions', 0.0):.2f} ({r['calls'].get('commit_txn', 0)} commits)"
        f" | batch {r['consumed_per_batch']} | fetchq {c.get('fetchq_cnt_avg')}"
        f" fetch/s {c.get('requests_per_s')} B/fetch {c.get('rx_bytes_per_request')}"
        f" rtt {c.get('rtt_avg_ms')} | prodq {p.get('msg_cnt_avg')} produce/s"
        f" {p.get('requests_per_s')} B/req {p.get('tx_bytes_per_request')}"
        f" inflight {p.get('waitresp_cnt_avg')} batch {p.get('batchsize_avg')} B"
        f" rtt {p.get('rtt_avg_ms')}"
    )


def machine_row(
    before: Mapping[str, float], after: Mapping[str, float], wall: float
) -> dict[str, float]:
    """Cores used per second of the window, by process group."""
    return {k: round((after[k] - before[k]) / wall, 2) for k in before}


# -- measuring ------------------------------------------------------------------------------------


def _samples(path: Path) -> list[dict[str, Any]]:
    """A probe's JSON-lines samples (:func:`bench.waitprobe.report_to`)."""
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def worker_rows(out: Path, pids: Sequence[int], t0: float, t1: float) -> list[dict[str, Any]]:
    """:func:`analyse` of each worker process's own probe (``tasks.max`` > 1), its rate and CPU
    per record counted from the records it consumed in the window."""
    rows = []
    for pid in pids:
        path = worker_path(out, pid)
        if not path.exists():
            continue
        samples = _samples(path)
        s0, s1 = _at(samples, t0, after=False), _at(samples, t1, after=True)
        consumed = s1["records_consumed"] - s0["records_consumed"]
        row = analyse(samples, t0, t1, max(consumed, 1))
        row.update(pid=pid, records=consumed)
        rows.append(row)
    return rows


def parse_cells(text: str) -> tuple[tuple[int, int, int], ...]:
    """``SIZExPARTITIONS:RECORDS,...`` (e.g. ``10240x16:40000``) as cells."""
    cells = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        shape, _, count = item.partition(":")
        size, _, parts = shape.partition("x")
        cells.append((int(size), int(parts), int(count)))
    return tuple(cells)


def run_variant(
    a: Any,
    b: Any,
    k: int,
    name: str,
    src: Path,
    extra: Mapping[str, str],
    work: Path,
    shapes: tuple[tuple[int, int, int], ...] = CELLS,
) -> list[dict[str, Any]]:
    prefix = f"wait{k}-"
    cells = {f"{prefix}{s}b-p{p}": (s, p, n) for s, p, n in shapes}
    warm = f"{prefix}warm"
    kio.create_topics(a.bootstrap_servers, {warm: 4, **{t: p for t, (_, p, _) in cells.items()}})
    kio.producer_performance(work, a.bootstrap_servers, warm, WARMUP, 1024)
    src_alias, tgt_alias = f"S{k}", f"T{k}"
    props = work / f"{prefix}mm2.properties"
    props.write_text(_props(a, b, src_alias, tgt_alias, re.escape(prefix) + ".*", extra))
    out = work / f"{prefix}probe.jsonl"
    log_path = work / f"{prefix}child.log"
    env = {**os.environ, "PYTHONPATH": f"{src}:{ROOT}"}
    with log_path.open("wb") as child_log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bench.waitprobe", str(out), str(props)],
            stdout=child_log, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    ob = kio.Offsets(b.bootstrap_servers)
    mon = ProcMonitor(proc.pid)
    rows = []

    def cpu_now() -> dict[str, float]:
        return {
            "machine": machine_busy_seconds(),
            "copier": tree_cpu_seconds(proc.pid),
            "broker_source": tree_cpu_seconds(a.pid),
            "broker_target": tree_cpu_seconds(b.pid),
        }

    def alive() -> None:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited: {log_path.read_text()[-2000:]}")

    try:
        if ob.wait_total(f"{src_alias}.{warm}", WARMUP, 240, check=alive) is None:
            raise RuntimeError(f"{name}: warm-up never arrived")
        for t in cells:
            while len(ob.partitions(f"{src_alias}.{t}")) != cells[t][1]:
                ob._parts.pop(f"{src_alias}.{t}", None)
                time.sleep(0.2)
        time.sleep(2.0)
        for topic, (size, parts, n) in cells.items():
            tree = suspend_tree(proc.pid)  # while the backlog is written (and the workers)
            try:
                kio.producer_performance(work, a.bootstrap_servers, topic, n, size)
            finally:
                resume_tree(tree)
            t0 = time.monotonic()
            mon.reset_window()
            before = cpu_now()
            t1 = ob.wait_total(f"{src_alias}.{topic}", n, 300, check=alive)
            if t1 is None:
                raise RuntimeError(f"{name}: {topic} incomplete")
            after = cpu_now()
            time.sleep(0.3)  # the probe's next samples
            row = analyse(_samples(out), t0, t1, n)
            row.update(variant=name, record_size=size, partitions=parts, records=n)
            row["cores"] = machine_row(before, after, t1 - t0)
            row["peak_rss_mb"] = round(mon.window_peak_mb(), 1)
            row["workers"] = worker_rows(out, tree[1:], t0, t1)
            rows.append(row)
            log(summary_line(name, f"{size}B-p{parts}", row))
            for w in row["workers"]:
                log(summary_line(f"worker {w['pid']}", f"{size}B-p{parts}", w))
    finally:
        mon.close()
        ob.close()
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        kio.delete_topics(a.bootstrap_servers, re.escape(prefix) + ".*")
        kio.delete_topics(b.bootstrap_servers, ".*" + re.escape(prefix) + ".*")
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.wait", description=__doc__)
    p.add_argument("--variant", action="append", default=[], help="NAME:SRC[:KEY=VALUE,...]")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument(
        "--cells",
        default="",
        help="SIZExPARTITIONS:RECORDS,... (default: 100 B and 1 KiB on 1 and 16 partitions)",
    )
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    p.add_argument("--summarize", metavar="JSON", help="print the medians of an earlier run")
    args = p.parse_args(argv)
    if args.summarize:
        for item in summarize(json.loads(Path(args.summarize).read_text())["rows"]):
            print(json.dumps(item))
        return 0
    variants = [parse_variant(v) for v in args.variant] or [("HEAD", ROOT / "src", {})]
    work = Path(f"/tmp/mirrorlib-wait-{int(time.time())}")
    work.mkdir(parents=True)
    rows: list[dict[str, Any]] = []
    with start_clusters(["A", "B"], jvm=JvmOptions(heap="1g", fast_jit=False)) as (a, b):
        for c in (a, b):  # JIT-warm the brokers' produce path
            kio.create_topics(c.bootstrap_servers, {"jit": 4})
            kio.producer_performance(work, c.bootstrap_servers, "jit", 200_000, 1024)
        k = 0
        for rnd in range(args.rounds):
            order = variants[rnd % len(variants) :] + variants[: rnd % len(variants)]
            for name, src, extra in order:
                k += 1
                log(f"round {rnd + 1}: {name} ({src}, {extra})")
                got = run_variant(a, b, k, name, src, extra, work, parse_cells(args.cells) or CELLS)
                rows += [dict(r, round=rnd) for r in got]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"wait-{dt.datetime.now().strftime('%Y-%m-%d-%H%M')}.json"
    doc = {
        "variants": [[n, str(s), e] for n, s, e in variants],
        "summary": summarize(rows),
        "rows": rows,
    }
    path.write_text(json.dumps(doc, indent=1))
    for r in rows:
        cell = f"{r['record_size']}B-p{r['partitions']}"
        print(summary_line(r["variant"], cell, r))
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
