"""One command for the whole benchmark: ``.venv/bin/python -m bench.run [--full]``.

Starts two local clusters (``mirrorlib.testing``), then for each contender in turn, on fresh
topics: replicates a fixed ProducerPerformance data set per matrix cell (record size x
partitions) and measures throughput, CPU and memory of the replicator process alone; then runs
the latency / first-checkpoint / failover scenario. Writes ``bench/results/<date>.json``, a PNG
chart, a Markdown summary, and (``--docs``) the results section of ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import confluent_kafka

import mirrorlib
from bench import contenders, kio, stats
from bench.contenders import Contender, make
from bench.procmon import MachineWindow, ProcMonitor
from bench.scenario import run_scenario
from bench.wait import parse_cells
from mirrorlib.testing import (
    KAFKA_VERSION,
    BaseCluster,
    JvmOptions,
    java_executable,
    start_clusters,
)

ROOT = Path(__file__).resolve().parent.parent
# Sized so that the fastest contender needs a few seconds per cell (shorter cells were dominated
# by noise on a shared 2-core machine), and the whole default run stays under half an hour.
DEFAULT_MATRIX = [(100, 400_000), (1024, 250_000), (10240, 100_000)]
PARTITIONS = (1, 16)
WARMUP = (1024, 20_000)
REPLICATORS = (
    stats.MM2_TUNED, stats.MM2_DEFAULTS, stats.MIRRORLIB,
    stats.MM2_TUNED_2, stats.MM2_DEFAULTS_2, stats.MIRRORLIB_2,
    stats.SPARK_1, stats.SPARK_2, stats.BARE_LOOP, stats.ACKED_LOOP,
    stats.BARE_LOOP_2, stats.ACKED_LOOP_2,
)  # fmt: skip
#: Contenders that do not run the latency / first-checkpoint / failover scenario: MM2's and the
#: loops' tasks.max=2 change how the copy scales, not what the scenario measures. mirrorlib's
#: does run it: its workers write in transactions (their fence), which read_committed readers
#: see only when they commit (1 s and more of latency before the caught-up commit, 2026-11-25).
NO_SCENARIO = (
    stats.MM2_TUNED_2, stats.MM2_DEFAULTS_2, stats.BARE_LOOP_2,
    stats.ACKED_LOOP_2,
)  # fmt: skip
#: The Spark contender that also runs the latency / checkpoint / failover scenario.
SCENARIO_SPARK = stats.SPARK_2
SPARK_SCENARIO_NOTE = (
    "continuous micro-batches (trigger 1 s): latency is bound by the batch, not comparable to a "
    "record-at-a-time copier; first checkpoint includes the Spark start"
)
SPARK_SCENARIO_SKIPPED = "not run: same engine as spark-2 (only the throughput phase is per core)"
DOC_START = "<!-- bench-results:start -->"
DOC_END = "<!-- bench-results:end -->"


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def cell_name(size: int, parts: int) -> str:
    return f"{size}b-p{parts}"


# -- machine --------------------------------------------------------------------------------------


def machine_info() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(mem, 1),
        "kernel": platform.release(),
        "os": platform.platform(),
        "loadavg_start": os.getloadavg(),
    }


def other_processes() -> list[str]:
    """The busiest processes not started by this run (what else shared the machine)."""
    me = os.getpid()
    out = subprocess.run(
        ["ps", "-eo", "pid,ppid,pcpu,etimes,args", "--sort=-pcpu"],
        check=False,
        capture_output=True,
        text=True,
    ).stdout.splitlines()[1:]
    busy = []
    for line in out:
        parts = line.split(None, 4)
        if len(parts) < 5 or int(parts[0]) == me or int(parts[1]) == me:
            continue
        if float(parts[2]) >= 5.0:
            busy.append(f"{parts[2]}% {parts[4][:120]}")
    return busy[:8]


def versions(rev: str) -> dict[str, Any]:
    java = subprocess.run(
        [java_executable(), "-version"], check=False, capture_output=True, text=True
    ).stderr
    return {
        "mirrorlib": mirrorlib.__version__,
        "mirrorlib_commit": rev[:10],  # what the mirrorlib contender ran
        "kafka": KAFKA_VERSION,
        "python": platform.python_version(),
        "confluent_kafka": confluent_kafka.__version__,
        "librdkafka": confluent_kafka.libversion()[0],
        "java": java.splitlines()[0] if java else "unknown",
    }


# -- throughput -----------------------------------------------------------------------------------


def broker_pids(*clusters: Any) -> list[int]:
    """The broker processes of the local clusters (their JVMs' pids)."""
    return [pid for c in clusters if (pid := getattr(c, "pid", None))]


def drop_topics(a: Any, b: Any, prefix: str) -> None:
    """Delete a contender's (or the warm-up's) topics: ``prefix...`` on A, their copies on B."""
    kio.delete_topics(a.bootstrap_servers, re.escape(prefix) + ".*")
    kio.delete_topics(b.bootstrap_servers, ".*" + re.escape(prefix) + ".*")


def warm_brokers(a: Any, b: Any, prefix: str, work: Path) -> None:
    """Copy a discarded data set from A to B with the bare loop before anything is measured.

    Producing alone leaves the brokers' fetch and replication paths cold: in runs before this
    existed, the contender measured first ran against brokers that were still compiling them
    (its preloads ran at half the rate of later ones). Before 10 KiB records were part of it,
    10 KiB cells measured in the first minutes ran at half the rate of later ones, for every
    contender alike (``bench/results/2026-11-23-1446.json``: 10k-16k records/s rising to 24k-32k)."""
    n = 1_000_000 if not os.environ.get("BENCH_SHORT_WARMUP") else 100_000
    counts = {100: n, 1024: n // 4, 10240: n // 25}
    topics = {f"{prefix}warm-{size}": 16 if size == 10240 else 4 for size in counts}
    kio.create_topics(a.bootstrap_servers, topics)
    for t in topics:
        size = int(t.rsplit("-", 1)[1])
        kio.producer_performance(work, a.bootstrap_servers, t, counts[size], size)
    loop = make(stats.BARE_LOOP, 999, work)
    loop.start(a, b, list(topics), prefix + ".*")
    ob = kio.Offsets(b.bootstrap_servers)
    try:
        for t in topics:
            size = int(t.rsplit("-", 1)[1])
            if ob.wait_total(loop.remote(t), counts[size], 300, check=loop.alive_or_raise) is None:
                raise RuntimeError("broker warm-up copy did not complete")
    finally:
        ob.close()
        loop.stop()
        drop_topics(a, b, prefix)
    log(
        f"brokers warmed: {n:,} x 100 B, {n // 4:,} x 1 KiB and {n // 25:,} x 10 KiB copied"
        " A -> B and discarded"
    )


def throughput_phase(
    contender: Contender,
    a: Any,
    b: Any,
    prefix: str,
    matrix: list[tuple[int, int, int]],
    work: Path,
    profile: bool,
) -> list[dict[str, Any]]:
    """Replicate every cell with one (warm) replicator process: the process is SIGSTOPped while
    a cell's data set is preloaded, then SIGCONTed; time and CPU run from the SIGCONT until the
    target holds every record."""
    warm = f"{prefix}warm"
    topics = {warm: 4, **{f"{prefix}{cell_name(s, p)}": p for s, p, _ in matrix}}
    kio.create_topics(a.bootstrap_servers, topics)
    kio.producer_performance(work, a.bootstrap_servers, warm, WARMUP[1], WARMUP[0])
    contender.start(a, b, list(topics), prefix + ".*")
    mon = ProcMonitor(contender.pid)
    ob = kio.Offsets(b.bootstrap_servers)
    rows = []
    spy = None
    try:
        if (
            ob.wait_total(contender.remote(warm), WARMUP[1], 240, check=contender.alive_or_raise)
            is None
        ):
            raise RuntimeError(f"{contender.id}: warm-up data never arrived on the target")
        deadline = time.monotonic() + 120
        for t, n in topics.items():
            while len(ob.partitions(contender.remote(t))) != n:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{contender.id}: remote topic of {t} not created")
                ob._parts.pop(contender.remote(t), None)
                time.sleep(0.2)
        time.sleep(3.0)  # let task assignment settle (MM2 reconfigures tasks after discovery)
        log(f"{contender.id}: warm (start + {WARMUP[1]} warm-up records), measuring")
        if profile:
            spy = subprocess.Popen(
                [str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(contender.pid), "--rate", "200", "--format", "raw",
                 "--nonblocking", "-o", str(work / "py-spy-mirrorlib.txt")],
                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
            )  # fmt: skip
        for size, parts, n in matrix:
            topic = f"{prefix}{cell_name(size, parts)}"
            contender.suspend()
            try:
                pre = kio.producer_performance(work, a.bootstrap_servers, topic, n, size)
            finally:
                contender.resume()
            t0 = time.monotonic()
            cpu0 = mon.cpu()
            mon.reset_window()
            window = MachineWindow(broker_pids(a, b))
            t1 = ob.wait_total(
                contender.remote(topic),
                n,
                max(300.0, n * size / 2e6),
                check=contender.alive_or_raise,
            )
            if t1 is None:
                raise RuntimeError(f"{contender.id}: {topic} not complete on the target")
            cpu1 = mon.cpu()
            row = stats.throughput(
                contender.id, record_size=size, partitions=parts, records=n, seconds=t1 - t0,
                cpu_s=cpu1 - cpu0, peak_rss_mb=mon.window_peak_mb(),
                preload_records_per_s=pre["records_per_s"], **window.cores(),
            )  # fmt: skip
            rows.append(row)
            log(
                f"{contender.id} {cell_name(size, parts)}: {row['records_per_s']:,.0f} rec/s "
                f"{row['mb_per_s']} MB/s, {row['cpu_s_per_million']} CPU-s/M, "
                f"{row['peak_rss_mb']} MB"
            )
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            try:
                spy.wait(60)
            except subprocess.TimeoutExpired:
                spy.kill()
        mon.close()
        ob.close()
        contender.stop()
        drop_topics(a, b, prefix)
    return rows


def spark_jobs_line(doc: dict[str, Any]) -> str:
    """How many jobs each Spark cell ran (runs before 2026-11-25's ran one)."""
    jobs = max((r.get("rounds", 1) for r in doc.get("spark") or []), default=0)
    if jobs <= 1:
        return "Spark jobs once" if jobs else "no Spark contender"
    return f"Spark: {jobs} fresh jobs per cell, the median job by copying rate"


def spark_prepare_line(doc: dict[str, Any]) -> str:
    """What the run did about the Spark driver's class-data archive, for the results page."""
    if "spark_prepare" not in doc["settings"]:  # runs before bench.run prepared it
        return ""
    prepared = doc["settings"]["spark_prepare"]
    if prepared is None:
        return (
            "The driver's class-data archive was not prepared before the jobs "
            "(`--no-spark-prepare`): the first job maps one only if an earlier job on this "
            "machine wrote it, else it writes it (a fresh installation's first job)."
        )
    return (
        "Before the first Spark job, `python -m mirrorlib.spark --prepare` (as docs/spark.md "
        "advises where drivers start from a fresh file system) took "
        f"{prepared['seconds']:g} s, exit status {prepared['status']}: "
        f"{prepared['output'] or 'no output'}. Every job's start-up is that of a job that maps "
        "the archive."
    )


def spark_throughput_phase(
    contender: contenders.Spark,
    a: Any,
    b: Any,
    prefix: str,
    matrix: list[tuple[int, int, int]],
    work: Path,
    notes: list[str],
) -> list[dict[str, Any]]:
    """Per cell, a fresh ``python -m mirrorlib.spark ... --backfill`` process copies the
    preloaded topic: the clock and the CPU counter of its process tree (driver, JVM, Python
    workers) start with the process. Records the time of the first and of the last record on the
    target, so the row has both "to completion including start-up" and the copying rate."""
    rows = []
    topics = {f"{prefix}{cell_name(s, p)}": p for s, p, _ in matrix}
    kio.create_topics(a.bootstrap_servers, topics)
    ob = kio.Offsets(b.bootstrap_servers)
    try:
        for size, parts, n in matrix:
            topic = f"{prefix}{cell_name(size, parts)}"
            pre = kio.producer_performance(work, a.bootstrap_servers, topic, n, size)
            try:
                row = _spark_cell(contender, a, b, ob, topic, size, parts, n)
            except Exception as exc:  # keep the other cells' and contenders' figures
                log(f"{contender.id} {cell_name(size, parts)} failed: {exc}")
                notes.append(f"{contender.id} {cell_name(size, parts)} failed: {exc}"[:400])
                continue
            row["preload_records_per_s"] = pre["records_per_s"]
            rows.append(row)
    finally:
        ob.close()
        contender.stop()
        drop_topics(a, b, prefix)
    return rows


def _spark_cell(
    contender: contenders.Spark, a: Any, b: Any, ob: kio.Offsets, topic: str, size: int,
    parts: int, n: int,
) -> dict[str, Any]:  # fmt: skip
    """One backfill job on a preloaded topic (see spark_throughput_phase)."""
    remote = contender.remote(topic)
    started = time.monotonic()
    contender.start(a, b, [topic], topic, backfill=True)  # names: [a-z0-9-]
    mon = ProcMonitor(contender.pid, interval=0.05)
    try:
        first = ob.wait_total(remote, 1, 300, interval=0.02, check=contender.alive_or_raise)
        if first is None:
            raise RuntimeError(f"{contender.id}: no record of {topic} on the target")
        cpu_first = mon.cpu()
        window = MachineWindow(broker_pids(a, b))
        last = ob.wait_total(
            remote, n, max(300.0, n * size / 2e6), interval=0.02,
            check=contender.alive_or_raise,
        )  # fmt: skip
        if last is None:
            raise RuntimeError(f"{contender.id}: {topic} not complete on the target")
        cpu_last = mon.cpu()
        cores = window.cores()  # while copying: first to last record
        peak = mon.peak_mb()
        status = contender.wait(120)
        exited = time.monotonic() if status is not None else None
        if status not in (0, None):
            log(f"{contender.id}: backfill exited with {status} (see {contender.log})")
    finally:
        mon.close()
        contender.stop()
    row = stats.spark_throughput(
        contender.id, record_size=size, partitions=parts, records=n, started=started,
        first=first, last=last, exited=exited, cpu_at_first=cpu_first,
        cpu_at_last=cpu_last, peak_rss_mb=peak, exit_status=status, **cores,
    )  # fmt: skip
    log(
        f"{contender.id} {cell_name(size, parts)}: {row['records_per_s']:,.0f} rec/s to "
        f"completion (start-up {row['startup_s']} s), copying "
        f"{row['copy_records_per_s'] or 0:,.0f} rec/s, {row['cpu_s_per_million']} "
        f"CPU-s/M ({row['copy_cpu_s_per_million']} copying), {row['peak_rss_mb']} MB, "
        f"job {row['job_s']} s"
    )
    return row


def plain_producer(
    a: Any, b: Any, prefix: str, matrix: list[tuple[int, int, int]], work: Path
) -> list[dict[str, Any]]:
    """The same data written by ProducerPerformance straight into the target (no consumer: a
    reference, not a ceiling; a copier reading from a separate source cluster can beat it)."""
    rows = []
    kio.create_topics(b.bootstrap_servers, {f"{prefix}{cell_name(s, p)}": p for s, p, _ in matrix})
    for size, parts, n in matrix:
        res = kio.producer_performance(
            work, b.bootstrap_servers, f"{prefix}{cell_name(size, parts)}", n, size
        )
        row = stats.throughput(
            stats.PLAIN_PRODUCER, record_size=size, partitions=parts, records=n,
            seconds=n / res["records_per_s"], cpu_s=res["cpu_s"], peak_rss_mb=res["peak_rss_mb"],
            cpu_includes_jvm_start=True,
        )  # fmt: skip
        rows.append(row)
        log(f"{stats.PLAIN_PRODUCER} {cell_name(size, parts)}: {row['records_per_s']:,.0f} rec/s")
    kio.delete_topics(b.bootstrap_servers, re.escape(prefix) + ".*")
    return rows


# -- profile summary ------------------------------------------------------------------------------


def summarize_pyspy(path: Path, top: int = 25) -> dict[str, Any]:
    """Self and inclusive sample shares per function from py-spy's raw (collapsed) output."""
    self_n: dict[str, int] = {}
    incl_n: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [f.strip() for f in stack.split(";")]
        total += n
        leaf = frames[-1]
        self_n[leaf] = self_n.get(leaf, 0) + n
        for f in set(frames):
            incl_n[f] = incl_n.get(f, 0) + n

    def share(d: dict[str, int]) -> list[tuple[str, float]]:
        return [
            (k, round(100 * v / total, 1))
            for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:top]
        ]

    return {"samples": total, "self_pct": share(self_n), "inclusive_pct": share(incl_n)}


# -- output ---------------------------------------------------------------------------------------


def chart(doc: dict[str, Any], path: Path) -> bool:
    """Draw the results chart; False (and a log line) without matplotlib (the ``bench`` extra)."""
    try:
        import matplotlib
    except ImportError:
        log("no chart: matplotlib is not installed (pip install -e '.[bench]')")
        return False

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = doc["throughput"]
    cells = sorted({(r["record_size"], r["partitions"]) for r in rows})
    contenders = [c for c in stats.LABELS if any(r["contender"] == c for r in rows)]
    idx = {(r["contender"], r["record_size"], r["partitions"]): r for r in rows}
    fig, axes = plt.subplots(1, 3, figsize=(17, 5.2))
    width = 0.8 / max(len(contenders), 1)
    xs = range(len(cells))
    labels = [f"{stats.size_label(s)}\n{p} part." for s, p in cells]
    for ax, key, title in (
        (axes[0], "mb_per_s", "throughput, MB/s (higher is better)"),
        (axes[1], "cpu_s_per_million", "CPU-seconds per million records (lower is better)"),
    ):
        for i, c in enumerate(contenders):
            k = "copy_mb_per_s" if c in stats.SPARKS and key == "mb_per_s" else key
            vals = [(idx.get((c, s, p)) or {}).get(k) or 0 for s, p in cells]
            label = f"{c} (copying, start-up excluded)" if c in stats.SPARKS else c
            ax.bar([x + i * width for x in xs], vals, width, label=label)
        ax.set_xticks([x + width * (len(contenders) - 1) / 2 for x in xs], labels)
        ax.set_title(title)
        if key == "cpu_s_per_million":
            ax.set_yscale("log")
    axes[0].legend(fontsize=8)
    sc = [s for s in doc["scenarios"] if s.get("latency_ms")]
    for j, rate in enumerate(("1000", "10000")):
        vals = [(s["latency_ms"].get(rate) or {}).get("p99") or 0 for s in sc]
        axes[2].bar([i + j * 0.4 for i in range(len(sc))], vals, 0.4, label=f"p99 @ {rate} rec/s")
    axes[2].set_xticks([i + 0.2 for i in range(len(sc))], [s["contender"] for s in sc], fontsize=8)
    axes[2].set_title("end-to-end latency p99, ms (lower is better)")
    axes[2].set_yscale("log")
    axes[2].legend(fontsize=8)
    fig.suptitle(
        f"mirrorlib vs MirrorMaker 2 — {doc['settings']['date']} — {doc['machine']['cores']} cores"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def markdown(doc: dict[str, Any], png: str) -> str:
    m, v, s = doc["machine"], doc["versions"], doc["settings"]
    lines = [
        f"Run of {s['date']} (`{s['command']}`), {s['elapsed_s']:.0f} s in total.",
        "",
        f"* Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB, Linux {m['kernel']}; "
        f"load average at start {', '.join(f'{x:.2f}' for x in m['loadavg_start'])}, "
        f"at end {', '.join(f'{x:.2f}' for x in m.get('loadavg_end', []))}.",
        f"* Also running at start: {'; '.join(m.get('other_processes_start') or ['nothing busy'])}.",
        f"* Also running at end: {'; '.join(m.get('other_processes_end') or ['nothing busy'])}.",
        f"* Versions: mirrorlib {v['mirrorlib']} ({v['mirrorlib_commit']}), Kafka {v['kafka']} "
        f"(brokers, MM2, ProducerPerformance), {v['java']}, Python {v['python']}, "
        f"confluent-kafka {v['confluent_kafka']} / librdkafka {v['librdkafka']}.",
        f"* Matrix: {', '.join(f'{n:,} x {stats.size_label(sz)}' for sz, n in s['sizes'])}; "
        f"partitions {', '.join(map(str, s['partitions']))}. Scenario: {s['scenario']}.",
        f"* Rounds: {s.get('rounds', 1)} per warm contender, rotated order, median per cell "
        f"({spark_jobs_line(doc)}).",
        "",
        "### Ratios (mirrorlib ÷ other; throughput > 1 = mirrorlib faster, CPU < 1 = mirrorlib cheaper)",
        "",
        stats.ratio_table(doc["ratios"]),
        "",
        "### Targets",
        "",
        "Throughput and CPU targets are judged per `tasks.max` on the worst cell against MM2 "
        "with the same client settings and the same `tasks.max`; *same ÷ MM2 defaults* is the "
        "same figure against MM2 with its defaults. For the plain-producer target the two MM2 "
        "columns are the MM2 contenders' own ratio to the plain producer.",
        "",
        stats.targets_table(doc["targets"]),
        "",
        "### Scaling: tasks.max 1 → 2",
        "",
        "*busy*: CPU-seconds of the copy process tree (every worker process included) per "
        "second of the cell, from /proc; 2.0 would be both cores of this machine.",
        "",
        stats.scaling_table(doc.get("scaling") or []),
        "",
        "### Throughput to completion, per contender",
        "",
        stats.throughput_table(doc["throughput"]),
        "",
        "### mirrorlib on Spark: backfill jobs, 1 and 2 executor cores",
        "",
        "Each cell is a fresh `python -m mirrorlib.spark ... --backfill --master local[N]` "
        "process per round (its driver, JVM and Python workers measured together); the other "
        "contenders are warm processes. *To completion* runs from the process start to the last "
        "record on the target (this is the figure in the tables above); *copying* from the "
        "first to the last record on the target. The row is the cell's median job by copying "
        "rate (CPU: the median of the jobs), with the slowest job's start-up beside it. "
        "*÷ embedded* compares the copying rate with `mirrorlib` (embedded, warm, its median "
        "round) on the same cell.",
        "",
        spark_prepare_line(doc) if doc.get("spark") else "",
        "",
        stats.spark_table(doc.get("spark") or []),
        "",
        "### Latency, first checkpoint, failover",
        "",
        stats.scenario_table(doc["scenarios"]),
        "",
        f"![chart]({png})",
    ]
    if doc.get("notes"):
        lines += ["", "Notes from the run:", ""] + [f"* {n}" for n in doc["notes"]]
    return "\n".join(lines) + "\n"


def update_docs(md: str, docs: Path) -> None:
    text = docs.read_text() if docs.exists() else f"# Benchmarks\n\n{DOC_START}\n{DOC_END}\n"
    if DOC_START not in text:
        text += f"\n{DOC_START}\n{DOC_END}\n"
    head, _, rest = text.partition(DOC_START)
    _, _, tail = rest.partition(DOC_END)
    docs.write_text(f"{head}{DOC_START}\n{md}{DOC_END}{tail}")


#: Discarded bare-loop scenarios before the measured ones. Right after the broker warm-up the
#: brokers' C2 compiler threads still took 0.3-0.7 of the two cores through the first scenarios
#: (the latency phases' small requests are new code paths), and the first one or two scenarios
#: of a run measured 2-5x the latency of later ones, whatever the contender
#: (``bench.run --no-throughput``, 2026-11-25: the bare loop's p50 at 1,000 records/s 31 ms as
#: the first contender, 6-10 ms as the third or fourth).
WARM_SCENARIOS = 2


def warm_scenarios(
    a: BaseCluster, b: BaseCluster, run_id: str, work: Path, seconds: float, linger_ms: float
) -> None:
    for i in range(WARM_SCENARIOS):
        con = make(stats.BARE_LOOP, 990 + i, work)
        res = run_scenario(
            con, a, b, f"scn-{run_id}-warm{i}-", seconds, random.Random(i),
            pacer_linger_ms=linger_ms,
        )  # fmt: skip
        log(f"scenario warm-up {i + 1} (bare loop, discarded): {json.dumps(res.get('latency_ms'))}")


# -- main -----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    p.add_argument("--full", action="store_true", help="5x larger data sets, 30 s latency phases")
    p.add_argument("--quick", action="store_true", help="tiny smoke run (not for results)")
    p.add_argument(
        "--cells",
        default="",
        help="only these throughput cells, SIZExPARTITIONS:RECORDS,... (e.g. 100x1:400000)",
    )
    p.add_argument("--contenders", default=",".join((*REPLICATORS, stats.PLAIN_PRODUCER)))
    p.add_argument("--no-scenarios", action="store_true")
    p.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="measure every contender's throughput this many times, interleaved (the tables "
        "show the median; a Spark contender runs a fresh job per cell each time)",
    )
    p.add_argument("--no-throughput", action="store_true")
    p.add_argument(
        "--pacer-linger-ms",
        type=float,
        default=0.0,
        help="the latency phases' source producer may batch records this long (0: one request "
        "per record); the records' produce time is taken before it, so it counts in the latency",
    )
    p.add_argument(
        "--profile", action="store_true", help="py-spy the mirrorlib process (skews its figures)"
    )
    p.add_argument(
        "--docs", action="store_true", help="rewrite the results section of docs/benchmarks.md"
    )
    p.add_argument(
        "--no-spark-prepare",
        action="store_true",
        help="do not write the Spark driver's class-data archive before the first Spark job "
        "(measures a fresh installation's first job if the machine has none)",
    )
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    p.add_argument("--seed", type=int, default=None)
    p.add_argument(
        "--mirrorlib-rev", default="HEAD", help="git revision the mirrorlib contender runs"
    )
    p.add_argument(
        "--mirrorlib-src",
        default="",
        help="run the mirrorlib contender from this src/ directory instead (patch experiments)",
    )
    args = p.parse_args(argv)

    began = time.monotonic()
    date = dt.datetime.now().strftime("%Y-%m-%d")
    started_at = dt.datetime.now().strftime("%H%M")
    run_id = f"b{int(time.time()) % 100000}"
    seed = args.seed if args.seed is not None else int(time.time())
    rng = random.Random(seed)
    factor = 5 if args.full else 1
    if args.quick:
        sizes = [(1024, 5_000)]
        parts: tuple[int, ...] = (1, 4)
    else:
        sizes = [(s, n * factor) for s, n in DEFAULT_MATRIX]
        parts = PARTITIONS
    matrix = [(s, p_, n) for s, n in sizes for p_ in parts]
    if args.cells:
        matrix = [(s, p_, n) for s, p_, n in parse_cells(args.cells)]
        sizes = sorted({(s, n) for s, _, n in matrix})
        parts = tuple(sorted({p_ for _, p_, _ in matrix}))
    scenario_seconds = 30.0 if args.full else (4.0 if args.quick else 10.0)
    wanted = [c.strip() for c in args.contenders.split(",") if c.strip()]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(os.environ.get("BENCH_WORK_DIR", f"/tmp/mirrorlib-bench-{run_id}"))
    work.mkdir(parents=True, exist_ok=True)

    # The mirrorlib contender runs a snapshot of a commit, not the (possibly half-edited) tree.
    rev = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", args.mirrorlib_rev],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    snap = work / f"mirrorlib-{rev[:10]}"
    if args.mirrorlib_src:  # e.g. a snapshot with a proposed patch applied
        snap = contenders.mirrorlib_src(args.mirrorlib_src).parent
        rev = f"{rev}+{snap.name}"
    elif not snap.exists():
        snap.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", rev, "src/mirrorlib"],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(snap)], input=archive, check=True)
    contenders.MIRRORLIB_SRC = str(snap / "src")
    log(f"mirrorlib contender runs commit {rev[:10]} from {snap}")

    spark_prepare = None
    if any(c in stats.SPARKS for c in wanted) and not args.no_spark_prepare:
        # before the brokers start: the JVM writing the archive does not share the machine
        spark_prepare = contenders.prepare_spark_archive()
        log(f"spark driver archive: {spark_prepare}")
    machine = machine_info()
    machine["other_processes_start"] = other_processes()
    notes: list[str] = []
    rows: list[dict[str, Any]] = []
    raw_rows: list[dict[str, Any]] = []
    scenarios: list[dict[str, Any]] = []
    contender_settings: dict[str, Any] = {}
    log(f"run {run_id}, work dir {work}, matrix {matrix}")
    with start_clusters(["A", "B"], jvm=JvmOptions(heap="1g", fast_jit=False)) as (a, b):
        log(f"clusters up: A {a.bootstrap_servers}, B {b.bootstrap_servers}; warming the brokers")
        for c in (a, b):  # discard a first run: JIT-warm the brokers and the tools' code paths
            kio.create_topics(c.bootstrap_servers, {f"{run_id}-jit": 4})
            kio.producer_performance(work, c.bootstrap_servers, f"{run_id}-jit", 100_000, 1024)
        if not args.quick:
            warm_brokers(a, b, f"bench-{run_id}-jit-", work)
        if not args.no_throughput:
            # Contenders run in rounds, each round in a rotated order, so that a slow or a fast
            # spell of the machine does not land on one contender (a Spark contender runs a
            # fresh job per cell in every round).
            for rnd in range(max(args.rounds, 1)):
                order = wanted[rnd % len(wanted) :] + wanted[: rnd % len(wanted)]
                for cid in order:
                    k = wanted.index(cid) + 100 * rnd
                    prefix = f"bench-{run_id}-{k}-"
                    if cid == stats.PLAIN_PRODUCER:
                        got = plain_producer(a, b, prefix, matrix, work)
                        raw_rows += [dict(r, round=rnd) for r in got]
                        continue
                    con = make(cid, k, work)
                    if isinstance(con, contenders.Spark):
                        log(f"throughput: {cid} (a backfill job per cell)")
                        got = spark_throughput_phase(con, a, b, prefix, matrix, work, notes)
                        raw_rows += [dict(r, round=rnd) for r in got]
                        contender_settings[cid] = con.settings
                        continue
                    log(f"throughput: {cid} (round {rnd + 1} of {args.rounds})")
                    got = throughput_phase(
                        con, a, b, prefix, matrix, work,
                        profile=args.profile and cid == stats.MIRRORLIB and rnd == 0,
                    )  # fmt: skip
                    raw_rows += [dict(r, round=rnd) for r in got]
                    contender_settings[cid] = con.settings
            rows = stats.combine_rounds(raw_rows)
        if not args.no_scenarios:
            if not args.quick:
                try:
                    warm_scenarios(a, b, run_id, work, scenario_seconds, args.pacer_linger_ms)
                except Exception as exc:  # keep the throughput phase's figures
                    log(f"scenario warm-up failed: {exc}")
                    notes.append(f"the discarded warm-up scenarios failed: {exc}"[:400])
            for k, cid in enumerate(wanted):
                if cid == stats.PLAIN_PRODUCER or cid in NO_SCENARIO:
                    continue
                if cid in stats.SPARKS and cid != SCENARIO_SPARK:
                    scenarios.append(stats.not_run(cid, SPARK_SCENARIO_SKIPPED))
                    continue
                con = make(cid, 50 + k, work)
                log(f"scenario: {cid}")
                try:
                    res = run_scenario(
                        con, a, b, f"scn-{run_id}-{k}-", scenario_seconds, rng,
                        pacer_linger_ms=args.pacer_linger_ms,
                    )  # fmt: skip
                except Exception as exc:  # keep the other figures (a run takes an hour)
                    log(f"scenario {cid} failed: {exc}")
                    scenarios.append(stats.not_run(cid, f"failed: {exc}"[:200]))
                    continue
                log(
                    f"scenario {cid}: {json.dumps({x: res.get(x) for x in ('latency_ms', 'first_checkpoint_s')})}"
                )
                if res.get("failover"):
                    log(
                        f"failover {cid}: re-read settled {res['failover']['reread_settled']}, immediate {res['failover']['reread_immediate']}"
                    )
                if cid in stats.SPARKS:
                    res["note"] = SPARK_SCENARIO_NOTE
                elif cid in (stats.BARE_LOOP, stats.ACKED_LOOP):
                    res["note"] = "no offset syncs or checkpoints: n/a"
                scenarios.append(res)
                contender_settings.setdefault(cid, con.settings)
    if any(c in stats.SPARKS for c in wanted) and not (snap / "src/mirrorlib/spark").exists():
        notes.append("mirrorlib.spark is not in the contender's commit: no Spark rows.")
    machine["loadavg_end"] = os.getloadavg()
    machine["other_processes_end"] = other_processes()
    settings = {
        "date": date,
        "run_id": run_id,
        "seed": seed,
        "command": "python -m bench.run " + " ".join(argv if argv is not None else sys.argv[1:]),
        "elapsed_s": round(time.monotonic() - began, 1),
        "sizes": sizes,
        "partitions": list(parts),
        "warmup": {
            "brokers": "100,000 x 1 KiB produced per cluster, then 1,000,000 x 100 B, "
            "250,000 x 1 KiB and 40,000 x 10 KiB copied A -> B by the bare loop, discarded",
            "replicators": f"{WARMUP[1]:,} x {stats.size_label(WARMUP[0])}, discarded",
        },
        "preload_producer_props": kio.PRODUCER_PROPS,
        "scenario": (
            f"{scenario_seconds:g} s at 1,000 then 10,000 records/s of {1024} B on 4 partitions "
            "(first second of each rate discarded), failover group stopped at a random moment "
            "of the 10k/s phase"
        ),
        "pacer_linger_ms": args.pacer_linger_ms,
        "contenders": contender_settings,
        "broker_jvm": "-Xms1g -Xmx1g, G1, C1+C2 (no TieredStopAtLevel)",
    }
    settings["mirrorlib_contender_commit"] = rev
    settings["spark_prepare"] = spark_prepare
    settings["rounds"] = args.rounds
    settings["throughput_rounds"] = raw_rows
    doc = stats.document(
        machine=machine, versions=versions(rev), settings=settings, throughput_rows=rows,
        scenarios=scenarios, notes=notes,
    )  # fmt: skip
    stem = f"{date}-{started_at}" + "".join(
        f"-{flag}" for flag in ("quick", "full", "profile") if getattr(args, flag)
    )
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=2) + "\n")
    charted = bool(rows) and chart(doc, out / f"{stem}.png")
    md = markdown(doc, f"{stem}.png")
    (out / f"{stem}.md").write_text(md)
    if args.profile and (work / "py-spy-mirrorlib.txt").exists():
        prof = summarize_pyspy(work / "py-spy-mirrorlib.txt")
        (out / f"{stem}-pyspy.json").write_text(json.dumps(prof, indent=2) + "\n")
        log(f"py-spy profile summary in {out / f'{stem}-pyspy.json'}")
    if args.docs:
        if charted:  # the docs site cannot link outside docs/: the chart is copied next to the page
            shutil.copyfile(out / f"{stem}.png", ROOT / "docs" / "benchmarks.png")
        update_docs(markdown(doc, "benchmarks.png"), ROOT / "docs" / "benchmarks.md")
    print(md)
    log(f"done in {time.monotonic() - began:.0f}s: {out / stem}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
