"""Pure helpers of the benchmark harness: statistics, the ratio table and the JSON document.

Nothing here talks to Kafka, so ``tests/bench`` can check it without a broker.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

SCHEMA_VERSION = 1

#: Contender ids, in the order of the table. ``-t2``: the same with ``tasks.max=2``.
MM2_TUNED = "mm2"
MM2_DEFAULTS = "mm2-defaults"
MIRRORLIB = "mirrorlib"
MM2_TUNED_2 = "mm2-t2"
MM2_DEFAULTS_2 = "mm2-defaults-t2"
MIRRORLIB_2 = "mirrorlib-t2"
SPARK_1 = "spark-1"
SPARK_2 = "spark-2"
#: mirrorlib on Spark: contender id -> executor cores (``local[N]``).
SPARKS = {SPARK_1: 1, SPARK_2: 2}
BARE_LOOP = "bare-loop"
#: The bare loop plus a per-record delivery report (the least an at-least-once copier must do).
ACKED_LOOP = "bare-loop-acked"
#: ProducerPerformance writing the same data straight into the target (no consumer at all).
PLAIN_PRODUCER = "producer-into-target"
#: The two loops in two processes, each copying every other partition (``tasks.max=2``'s floor).
BARE_LOOP_2 = "bare-loop-t2"
ACKED_LOOP_2 = "bare-loop-acked-t2"
#: (bare loop, acked loop) per tasks.max
LOOPS = {1: (BARE_LOOP, ACKED_LOOP), 2: (BARE_LOOP_2, ACKED_LOOP_2)}

#: ``tasks.max`` of each replicator contender that takes it (the others run one task).
TASKS_MAX = {
    MM2_TUNED: 1, MM2_DEFAULTS: 1, MIRRORLIB: 1,
    MM2_TUNED_2: 2, MM2_DEFAULTS_2: 2, MIRRORLIB_2: 2,
}  # fmt: skip
#: The contender with ``tasks.max=1`` that each contender is a variant of.
ENGINE = {
    MM2_TUNED_2: MM2_TUNED,
    MM2_DEFAULTS_2: MM2_DEFAULTS,
    MIRRORLIB_2: MIRRORLIB,
}
#: contender ids of (mirrorlib, MM2 same client settings, MM2 defaults) per tasks.max
BY_TASKS = {
    1: (MIRRORLIB, MM2_TUNED, MM2_DEFAULTS),
    2: (MIRRORLIB_2, MM2_TUNED_2, MM2_DEFAULTS_2),
}

LABELS = {
    MM2_TUNED: "MM2 (same client settings)",
    MM2_DEFAULTS: "MM2 (defaults)",
    MIRRORLIB: "mirrorlib embedded",
    MM2_TUNED_2: "MM2 (same client settings), tasks.max=2",
    MM2_DEFAULTS_2: "MM2 (defaults), tasks.max=2",
    MIRRORLIB_2: "mirrorlib embedded, tasks.max=2",
    SPARK_1: "mirrorlib on Spark local[1]",
    SPARK_2: "mirrorlib on Spark local[2]",
    BARE_LOOP: "bare confluent-kafka consume+produce loop",
    ACKED_LOOP: "bare loop + per-record delivery report",
    BARE_LOOP_2: "bare loop in 2 processes (every other partition each)",
    ACKED_LOOP_2: "acked loop in 2 processes (every other partition each)",
    PLAIN_PRODUCER: "plain producer: ProducerPerformance into the target",
}

#: Keys every throughput measurement carries in the JSON file.
THROUGHPUT_KEYS = (
    "contender",
    "record_size",
    "partitions",
    "records",
    "seconds",
    "records_per_s",
    "mb_per_s",
    "cpu_s",
    "cpu_s_per_million",
    "peak_rss_mb",
)
#: Keys every scenario (latency, checkpoint, failover) measurement carries.
SCENARIO_KEYS = (
    "contender",
    "latency_ms",
    "first_checkpoint_s",
    "failover",
    "peak_rss_mb",
)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) with linear interpolation (numpy's default); NaN if empty."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within 0..100, got {q}")
    if not values:
        return math.nan
    data = sorted(values)
    if len(data) == 1:
        return float(data[0])
    pos = (len(data) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = math.ceil(pos)
    if lo == hi:
        return float(data[lo])
    return float(data[lo] + (data[hi] - data[lo]) * (pos - lo))


def latency_summary(samples_ms: Sequence[float]) -> dict[str, float | int]:
    """count, p50, p99, max of latency samples in milliseconds."""
    return {
        "count": len(samples_ms),
        "p50": round(percentile(samples_ms, 50), 3),
        "p99": round(percentile(samples_ms, 99), 3),
        "max": round(max(samples_ms), 3) if samples_ms else math.nan,
    }


def throughput(
    contender: str,
    *,
    record_size: int,
    partitions: int,
    records: int,
    seconds: float,
    cpu_s: float | None,
    peak_rss_mb: float | None,
    **extra: Any,
) -> dict[str, Any]:
    """One throughput measurement: ``records`` of ``record_size`` bytes copied in ``seconds``."""
    if seconds <= 0:
        raise ValueError("seconds must be positive")
    rate = records / seconds
    out: dict[str, Any] = {
        "contender": contender,
        "record_size": record_size,
        "partitions": partitions,
        "records": records,
        "seconds": round(seconds, 3),
        "records_per_s": round(rate, 1),
        "mb_per_s": round(rate * record_size / 1e6, 2),
        "cpu_s": None if cpu_s is None else round(cpu_s, 3),
        "cpu_s_per_million": None if cpu_s is None else round(cpu_s / records * 1e6, 2),
        "peak_rss_mb": None if peak_rss_mb is None else round(peak_rss_mb, 1),
        # the copy process(es): CPU-seconds per wall-second (1.0 = one core busy all along);
        # not for a process whose CPU includes its JVM start (ProducerPerformance)
        "busy": (
            None
            if cpu_s is None or extra.get("cpu_includes_jvm_start")
            else round(cpu_s / seconds, 3)
        ),
    }
    out.update(extra)
    return out


def combine_rounds(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per (contender, record size, partitions) from measurements repeated in rounds:
    the median round by throughput (its time, rate and MB/s), the median CPU per record of all
    rounds, the largest peak RSS, and every round's rate in ``rounds_records_per_s``. Rows that
    were measured once pass through with ``rounds`` = 1."""
    groups: dict[tuple[str, int, int], list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["contender"], r["record_size"], r["partitions"]), []).append(r)
    out = []
    for (cid, _, _), group in groups.items():
        # a Spark job's median is by its copying rate (the per-core figure; its rate to
        # completion includes the job's start-up, reported per job below)
        rate = "copy_records_per_s" if cid in SPARKS else "records_per_s"
        by_rate = sorted(group, key=lambda r: r.get(rate) or 0.0)
        row = dict(by_rate[(len(by_rate) - 1) // 2])  # the lower median: an actual round
        row.pop("round", None)
        if cid in SPARKS:
            row.update(_spark_rounds(group))
        cpus = [r["cpu_s_per_million"] for r in group if r.get("cpu_s_per_million") is not None]
        rss = [r["peak_rss_mb"] for r in group if r.get("peak_rss_mb") is not None]
        row["cpu_s_per_million"] = round(percentile(cpus, 50), 2) if cpus else None
        busy = [r["busy"] for r in group if r.get("busy") is not None]
        row["busy"] = round(percentile(busy, 50), 3) if busy else None
        row["peak_rss_mb"] = max(rss) if rss else None
        row["rounds"] = len(group)
        row["rounds_records_per_s"] = [r["records_per_s"] for r in group]
        row["rounds_cpu_s_per_million"] = [r.get("cpu_s_per_million") for r in group]
        out.append(row)
    return out


def _spark_rounds(group: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What a Spark cell's rounds add to its median job: the median CPU per record while
    copying, every job's copying rate and start-up, and the slowest start-up (the start-up
    target holds for every job, not for the median)."""
    copy_cpu = [r["copy_cpu_s_per_million"] for r in group
                if r.get("copy_cpu_s_per_million") is not None]  # fmt: skip
    startups = [r["startup_s"] for r in group if r.get("startup_s") is not None]
    return {
        "copy_cpu_s_per_million": round(percentile(copy_cpu, 50), 2) if copy_cpu else None,
        "rounds_copy_records_per_s": [r.get("copy_records_per_s") for r in group],
        "rounds_startup_s": [r.get("startup_s") for r in group],
        "startup_s_max": max(startups) if startups else None,
    }


def spark_throughput(
    contender: str,
    *,
    record_size: int,
    partitions: int,
    records: int,
    started: float,
    first: float,
    last: float,
    exited: float | None,
    cpu_at_first: float | None,
    cpu_at_last: float | None,
    peak_rss_mb: float | None,
    **extra: Any,
) -> dict[str, Any]:
    """One Spark backfill job (a fresh process) copying ``records``; times are monotonic seconds:
    ``started`` the process start, ``first`` / ``last`` when the first / last record was seen on
    the target, ``exited`` when the process ended. The row's ``records_per_s`` is to completion
    *including* start-up (like every other contender's "to completion", but from a cold process);
    ``copy_*`` is the copying rate from the first to the last record on the target."""
    if not started <= first <= last:
        raise ValueError("need started <= first <= last")
    copy_s = last - first
    row = throughput(
        contender, record_size=record_size, partitions=partitions, records=records,
        seconds=last - started, cpu_s=cpu_at_last, peak_rss_mb=peak_rss_mb,
    )  # fmt: skip
    copy_rate = records / copy_s if copy_s > 0 else None
    copy_cpu = (
        None if cpu_at_first is None or cpu_at_last is None else max(cpu_at_last - cpu_at_first, 0)
    )
    row.update(
        startup_s=round(first - started, 3),
        copy_s=round(copy_s, 3),
        copy_records_per_s=None if copy_rate is None else round(copy_rate, 1),
        copy_mb_per_s=None if copy_rate is None else round(copy_rate * record_size / 1e6, 2),
        copy_cpu_s_per_million=(None if copy_cpu is None else round(copy_cpu / records * 1e6, 2)),
        job_s=None if exited is None else round(exited - started, 3),
    )
    row.update(extra)
    return row


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, or None when either is missing or b is zero."""
    if a is None or b is None or b == 0 or math.isnan(a) or math.isnan(b):
        return None
    return a / b


def _index(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, int, int], Mapping[str, Any]]:
    return {(r["contender"], r["record_size"], r["partitions"]): r for r in rows}


def ratio_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per cell (record size, partitions) and ``tasks.max``: mirrorlib's throughput and CPU
    against both MM2 baselines with the same ``tasks.max``, the bare loops and the plain
    producer. Ratios > 1 mean mirrorlib is faster (throughput) or uses more CPU (cpu)."""
    idx = _index(rows)
    cells = sorted({(r["record_size"], r["partitions"]) for r in rows})
    out = []
    for size, parts in cells:
        for tasks, (ml_id, mm2_id, mm2d_id) in BY_TASKS.items():
            ml = idx.get((ml_id, size, parts))
            if ml is None:
                continue

            def get(c: str, key: str, size: int = size, parts: int = parts) -> float | None:
                row = idx.get((c, size, parts))
                return None if row is None else row.get(key)

            rate = ml["records_per_s"]
            cpu = ml.get("cpu_s_per_million")
            loop, acked = LOOPS[tasks]
            mm2_cpu = get(mm2_id, "cpu_s_per_million")
            out.append(
                {
                    "record_size": size,
                    "partitions": parts,
                    "tasks_max": tasks,
                    "mirrorlib_records_per_s": rate,
                    "tput_vs_mm2": ratio(rate, get(mm2_id, "records_per_s")),
                    "tput_vs_mm2_defaults": ratio(rate, get(mm2d_id, "records_per_s")),
                    "tput_vs_loop": ratio(rate, get(loop, "records_per_s")),
                    "tput_vs_acked_loop": ratio(rate, get(acked, "records_per_s")),
                    "tput_vs_producer": ratio(rate, get(PLAIN_PRODUCER, "records_per_s")),
                    "mm2_vs_producer": ratio(
                        get(mm2_id, "records_per_s"), get(PLAIN_PRODUCER, "records_per_s")
                    ),
                    "mm2_defaults_vs_producer": ratio(
                        get(mm2d_id, "records_per_s"), get(PLAIN_PRODUCER, "records_per_s")
                    ),
                    "cpu_vs_mm2": ratio(cpu, mm2_cpu),
                    "cpu_vs_mm2_defaults": ratio(cpu, get(mm2d_id, "cpu_s_per_million")),
                    "loop_cpu_vs_mm2": ratio(get(loop, "cpu_s_per_million"), mm2_cpu),
                    "acked_loop_cpu_vs_mm2": ratio(get(acked, "cpu_s_per_million"), mm2_cpu),
                }
            )
    return out


def scaling_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per cell and engine (mirrorlib, MM2 same client settings, MM2 defaults, and the bare and
    acked loops in 1 and 2 processes): the rate and the busy fraction (CPU-s per wall-s of the copy processes) with ``tasks.max`` 1 and 2, and
    the 1 -> 2 speed-up."""
    idx = _index(rows)
    cells = sorted({(r["record_size"], r["partitions"]) for r in rows})
    out = []
    for size, parts in cells:
        engines = [*BY_TASKS[1], *LOOPS[1]]
        for one, two in zip(engines, [*BY_TASKS[2], *LOOPS[2]], strict=True):
            r1, r2 = idx.get((one, size, parts)), idx.get((two, size, parts))
            if r1 is None and r2 is None:
                continue
            rate1 = None if r1 is None else r1["records_per_s"]
            rate2 = None if r2 is None else r2["records_per_s"]
            out.append(
                {
                    "record_size": size,
                    "partitions": parts,
                    "engine": one,
                    "records_per_s_1": rate1,
                    "records_per_s_2": rate2,
                    "busy_1": None if r1 is None else r1.get("busy"),
                    "busy_2": None if r2 is None else r2.get("busy"),
                    "speedup": ratio(rate2, rate1),
                }
            )
    return out


def scaling_table(items: Sequence[Mapping[str, Any]]) -> str:
    return keyed_table(
        items,
        [
            ("record", lambda r: size_label(r["record_size"])),
            ("partitions", "partitions"),
            ("engine", "engine"),
            ("rec/s tasks.max=1", "records_per_s_1"),
            ("rec/s tasks.max=2", "records_per_s_2"),
            ("speed-up 1→2", "speedup"),
            ("busy (CPU-s / s) 1", "busy_1"),
            ("busy (CPU-s / s) 2", "busy_2"),
        ],
    )


def spark_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per cell and Spark contender: both rates, and the copying rate against the embedded
    engine (``mirrorlib``, a warm process: no start-up in its figure) and against ``local[1]``."""
    idx = _index(rows)
    out = []
    for r in sorted(
        (r for r in rows if r["contender"] in SPARKS),
        key=lambda r: (r["record_size"], r["partitions"], SPARKS[r["contender"]]),
    ):
        size, parts = r["record_size"], r["partitions"]
        ml = idx.get((MIRRORLIB, size, parts)) or {}
        one = idx.get((SPARK_1, size, parts)) or {}
        copy = r.get("copy_records_per_s")
        out.append(
            {
                "record_size": size,
                "partitions": parts,
                "contender": r["contender"],
                "cores": SPARKS[r["contender"]],
                "records_per_s": r["records_per_s"],
                "startup_s": r.get("startup_s"),
                "startup_s_max": r.get("startup_s_max", r.get("startup_s")),
                "rounds": r.get("rounds", 1),
                "copy_records_per_s": copy,
                "copy_mb_per_s": r.get("copy_mb_per_s"),
                "cpu_s_per_million": r.get("cpu_s_per_million"),
                "copy_cpu_s_per_million": r.get("copy_cpu_s_per_million"),
                "peak_rss_mb": r.get("peak_rss_mb"),
                "machine_cores": r.get("machine_cores"),
                "brokers_cores": r.get("brokers_cores"),
                "copy_vs_embedded": ratio(copy, ml.get("records_per_s")),
                "copy_vs_local1": (
                    None
                    if r["contender"] == SPARK_1
                    else ratio(copy, one.get("copy_records_per_s"))
                ),
                "cpu_vs_embedded": ratio(
                    r.get("copy_cpu_s_per_million"), ml.get("cpu_s_per_million")
                ),
            }
        )
    return out


def spark_table(items: Sequence[Mapping[str, Any]]) -> str:
    return keyed_table(
        items,
        [
            ("record", lambda r: size_label(r["record_size"])),
            ("partitions", "partitions"),
            ("contender", "contender"),
            ("to completion rec/s (incl. start-up)", "records_per_s"),
            ("jobs", "rounds"),
            ("start-up s (to first record; median job)", "startup_s"),
            ("slowest start-up s", "startup_s_max"),
            ("copying rec/s (median job)", "copy_records_per_s"),
            ("copying MB/s", "copy_mb_per_s"),
            ("copying ÷ embedded", "copy_vs_embedded"),
            ("copying ÷ local[1]", "copy_vs_local1"),
            ("CPU-s / M (whole job)", "cpu_s_per_million"),
            ("CPU-s / M (copying)", "copy_cpu_s_per_million"),
            ("CPU (copying) ÷ embedded", "cpu_vs_embedded"),
            ("machine cores busy (copying)", "machine_cores"),
            ("brokers' cores (copying)", "brokers_cores"),
            ("peak RSS MB", "peak_rss_mb"),
        ],
    )


def fmt(value: Any, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def size_label(size: int) -> str:
    if size >= 1024 and size % 1024 == 0:
        return f"{size // 1024} KiB"
    return f"{size} B"


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(fmt(v) for v in row) + " |")
    return "\n".join(lines)


#: A column of :func:`keyed_table`: its header and the row's key, or a function of the row.
Column = tuple[str, str | Callable[[Mapping[str, Any]], Any]]


def keyed_table(items: Iterable[Mapping[str, Any]], columns: Sequence[Column]) -> str:
    """A Markdown table of ``items``, one column per ``(header, key or function)``."""
    return markdown_table(
        [header for header, _ in columns],
        ([get(r) if callable(get) else r.get(get) for _, get in columns] for r in items),
    )


def throughput_table(rows: Sequence[Mapping[str, Any]]) -> str:
    ordered = sorted(
        rows,
        key=lambda r: (r["record_size"], r["partitions"], _order(r["contender"])),
    )
    return markdown_table(
        [
            "record",
            "partitions",
            "contender",
            "records/s",
            "MB/s",
            "CPU-s / M records",
            "busy (CPU-s / s)",
            "peak RSS MB",
            "rounds: records/s (CPU-s / M)",
        ],
        (
            [
                size_label(r["record_size"]),
                r["partitions"],
                r["contender"],
                r["records_per_s"],
                r["mb_per_s"],
                r.get("cpu_s_per_million"),
                r.get("busy"),
                r.get("peak_rss_mb"),
                _rounds(r),
            ]
            for r in ordered
        ),
    )


def _order(contender: str) -> int:
    order = list(LABELS)
    return order.index(contender) if contender in order else len(order)


def _rounds(row: Mapping[str, Any]) -> str:
    rates = row.get("rounds_records_per_s") or []
    cpus = row.get("rounds_cpu_s_per_million") or [None] * len(rates)
    if len(rates) < 2:
        return "one run"
    return ", ".join(
        f"{rate:,.0f} ({'n/a' if cpu is None else f'{cpu:g}'})"
        for rate, cpu in zip(rates, cpus, strict=True)
    )


def ratio_table(ratios: Sequence[Mapping[str, Any]]) -> str:
    return markdown_table(
        [
            "record",
            "partitions",
            "tasks.max",
            "mirrorlib rec/s",
            "÷ MM2 (same settings)",
            "÷ MM2 defaults",
            "÷ bare loop",
            "÷ acked loop",
            "÷ plain producer",
            "CPU ÷ MM2 (same settings)",
            "CPU ÷ MM2 defaults",
            "bare loop CPU ÷ MM2",
            "acked loop CPU ÷ MM2",
        ],
        (
            [
                size_label(r["record_size"]),
                r["partitions"],
                r.get("tasks_max", 1),
                r["mirrorlib_records_per_s"],
                r["tput_vs_mm2"],
                r["tput_vs_mm2_defaults"],
                r["tput_vs_loop"],
                r.get("tput_vs_acked_loop"),
                r["tput_vs_producer"],
                r["cpu_vs_mm2"],
                r["cpu_vs_mm2_defaults"],
                r.get("loop_cpu_vs_mm2"),
                r.get("acked_loop_cpu_vs_mm2"),
            ]
            for r in ratios
        ),
    )


def scenario_table(scenarios: Sequence[Mapping[str, Any]]) -> str:
    def lat(s: Mapping[str, Any], rate: str, key: str) -> Any:
        return (s.get("latency_ms") or {}).get(rate, {}).get(key)

    def fo(s: Mapping[str, Any], key: str) -> Any:
        return (s.get("failover") or {}).get(key)

    return markdown_table(
        [
            "contender",
            "p50 @1k/s ms",
            "p99 @1k/s ms",
            "p50 @10k/s ms",
            "p99 @10k/s ms",
            "first checkpoint s",
            "re-read (settled)",
            "re-read (immediate)",
            "peak RSS MB",
            "note",
        ],
        (
            [
                s["contender"],
                lat(s, "1000", "p50"),
                lat(s, "1000", "p99"),
                lat(s, "10000", "p50"),
                lat(s, "10000", "p99"),
                s.get("first_checkpoint_s"),
                fo(s, "reread_settled"),
                fo(s, "reread_immediate"),
                s.get("peak_rss_mb"),
                s.get("note") or "",
            ]
            for s in scenarios
        ),
    )


def not_run(contender: str, note: str) -> dict[str, Any]:
    """A scenario row for a contender that did not run the scenario, saying why."""
    return {**{k: None for k in SCENARIO_KEYS}, "contender": contender, "note": note}


#: Throughput targets of issue 12: (record size, goal of mirrorlib ÷ MM2 with the same tasks.max)
THROUGHPUT_GOALS = ((100, 1.2), (1024, 1.2), (10240, 1.5))
#: mirrorlib ÷ the plain producer at 1 KiB, and CPU per record ÷ MM2
PRODUCER_GOAL, CPU_GOAL = 0.9, 0.5


def _worst(items: Sequence[Mapping[str, Any]], key: str, lowest: bool = True) -> float | None:
    vals = [r[key] for r in items if r.get(key) is not None]
    if not vals:
        return None
    return min(vals) if lowest else max(vals)


def targets(
    ratios: Sequence[Mapping[str, Any]], scenarios: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The issue's targets, each with the measured value and whether it is met (None: unknown).

    Throughput and CPU targets are per ``tasks.max`` and judged on the worst cell against MM2
    with the same client settings and the same ``tasks.max``; every such row also carries the
    same figure against MM2 with its defaults (``vs_mm2_defaults``); for the plain producer
    target, both MM2 baselines' own ratio to the plain producer (``mm2``, ``mm2_defaults``); for
    the CPU target, the bare and acked loops' own CPU ÷ MM2 in mirrorlib's worst cell (``loop``,
    ``acked_loop``: what the client costs before any bookkeeping, with as many processes)."""
    out: list[dict[str, Any]] = []

    def add(
        name: str, value: float | None, goal: float, higher_is_better: bool, **extra: Any
    ) -> None:
        met = None if value is None else (value >= goal if higher_is_better else value <= goal)
        out.append({"target": name, "value": value, "goal": goal, "met": met, **extra})

    for tasks in sorted({r.get("tasks_max", 1) for r in ratios}):
        mine = [r for r in ratios if r.get("tasks_max", 1) == tasks]
        for size, goal in THROUGHPUT_GOALS:
            cells = [r for r in mine if r["record_size"] == size]
            if not cells:
                continue
            add(
                f"throughput ÷ MM2, {size_label(size)} (worst cell)", _worst(cells, "tput_vs_mm2"),
                goal, True, tasks_max=tasks,
                vs_mm2_defaults=_worst(cells, "tput_vs_mm2_defaults"),
            )  # fmt: skip
        kib = [r for r in mine if r["record_size"] == 1024]
        if kib:
            add(
                "throughput ÷ plain producer into the target, 1 KiB (worst cell)",
                _worst(kib, "tput_vs_producer"), PRODUCER_GOAL, True, tasks_max=tasks,
                mm2=_worst(kib, "mm2_vs_producer"),
                mm2_defaults=_worst(kib, "mm2_defaults_vs_producer"),
            )  # fmt: skip
        priced = [r for r in mine if r.get("cpu_vs_mm2") is not None]
        worst = max(priced, key=lambda r: r["cpu_vs_mm2"], default={})
        add(
            "CPU per record ÷ MM2 (worst cell)", worst.get("cpu_vs_mm2"),
            CPU_GOAL, False, tasks_max=tasks,
            vs_mm2_defaults=_worst(mine, "cpu_vs_mm2_defaults", lowest=False),
            loop=worst.get("loop_cpu_vs_mm2"), acked_loop=worst.get("acked_loop_cpu_vs_mm2"),
        )  # fmt: skip
    by = {s["contender"]: s for s in scenarios}
    ml = by.get(MIRRORLIB, {})
    mm2 = by.get(MM2_TUNED, {})
    mm2d = by.get(MM2_DEFAULTS, {})
    p99 = (ml.get("latency_ms") or {}).get("10000", {}).get("p99")
    add("latency p99 @10k/s, ms", p99, 50.0, False)
    p99_mm2 = (mm2.get("latency_ms") or {}).get("10000", {}).get("p99")
    p99_mm2d = (mm2d.get("latency_ms") or {}).get("10000", {}).get("p99")
    add(
        "latency p99 @10k/s ÷ MM2", ratio(p99, p99_mm2), 1.0, False,
        vs_mm2_defaults=ratio(p99, p99_mm2d),
    )  # fmt: skip
    rr = (ml.get("failover") or {}).get("reread_settled")
    rr_mm2 = (mm2d.get("failover") or {}).get("reread_settled")
    value = None if rr is None or rr_mm2 is None else float(rr - rr_mm2)
    out.append(
        {
            "target": "re-read after failover - MM2 defaults' (must be < 0)",
            "value": value,
            "goal": 0,
            "met": None if value is None else (rr < rr_mm2 or rr == 0 == rr_mm2),
        }
    )
    return out


def targets_table(items: Sequence[Mapping[str, Any]]) -> str:
    """The targets with both MM2 baselines beside each: ``÷ MM2 defaults`` is the same measure
    against MM2 with its defaults; for the plain-producer target the MM2 columns are the MM2
    contenders' own ratio to the plain producer."""

    def met(m: bool | None) -> str:
        return "?" if m is None else ("met" if m else "**missed**")

    return markdown_table(
        [
            "target",
            "tasks.max",
            "mirrorlib",
            "goal",
            "",
            "same ÷ MM2 defaults",
            "MM2 (same settings) itself",
            "MM2 defaults itself",
            "bare loop itself",
            "acked loop itself",
        ],
        (
            [
                t["target"],
                t.get("tasks_max", ""),
                t["value"],
                t["goal"],
                met(t["met"]),
                t.get("vs_mm2_defaults", ""),
                t.get("mm2", ""),
                t.get("mm2_defaults", ""),
                t.get("loop", ""),
                t.get("acked_loop", ""),
            ]
            for t in items
        ),
    )


def document(
    *,
    machine: Mapping[str, Any],
    versions: Mapping[str, Any],
    settings: Mapping[str, Any],
    throughput_rows: Sequence[Mapping[str, Any]],
    scenarios: Sequence[Mapping[str, Any]],
    notes: Sequence[str] = (),
) -> dict[str, Any]:
    """The JSON document of one run."""
    ratios = ratio_rows(throughput_rows)
    return {
        "schema": SCHEMA_VERSION,
        "machine": dict(machine),
        "versions": dict(versions),
        "settings": dict(settings),
        "throughput": [dict(r) for r in throughput_rows],
        "ratios": ratios,
        "spark": spark_rows(throughput_rows),
        "scaling": scaling_rows(throughput_rows),
        "scenarios": [dict(s) for s in scenarios],
        "targets": targets(ratios, scenarios),
        "notes": list(notes),
    }


def check_document(doc: Mapping[str, Any]) -> list[str]:
    """Problems with the shape of a result document (empty if it is well-formed)."""
    problems = []
    for key in (
        "schema",
        "machine",
        "versions",
        "settings",
        "throughput",
        "ratios",
        "scenarios",
        "targets",
    ):
        if key not in doc:
            problems.append(f"missing key {key!r}")
    for i, row in enumerate(doc.get("throughput", [])):
        missing = [k for k in THROUGHPUT_KEYS if k not in row]
        if missing:
            problems.append(f"throughput[{i}] lacks {missing}")
    for i, row in enumerate(doc.get("scenarios", [])):
        missing = [k for k in SCENARIO_KEYS if k not in row]
        if missing:
            problems.append(f"scenarios[{i}] lacks {missing}")
    return problems
