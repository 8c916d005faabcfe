"""Where the copier waits: in-process probes for ``bench.wait`` (loaded in the replicator process).

:func:`install` wraps, from the outside, what the copy thread calls once per batch or per loop
round (never per record): the source consumer's ``consume``/``poll``, the target producer's
``poll``/``flush``, :meth:`Copier._copy` (the produce calls of a batch) and
:meth:`Copier._drain_acks` (matching delivery reports). It also turns on librdkafka's statistics
(``statistics.interval.ms``) for the copier's two clients and keeps a small extract of each JSON
report. A background thread appends cumulative counters to a JSON-lines file every
``interval`` seconds; ``bench.wait`` slices them by time (``time.monotonic`` is system-wide on
Linux, so the parent's clock is the child's).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

STATS_INTERVAL_MS = 500

#: cumulative timers of the copy thread: wall seconds and call counts
TIMERS = (
    "consume_empty",  # consume()/poll() calls that returned no record: waiting
    "consume_records",  # consume()/poll() calls that returned records
    "copy",  # Copier._copy: the produce calls of consumed batches (includes copy_blocked)
    "copy_blocked",  # producer.poll() inside _copy: the producer queue was full
    "producer_poll",  # producer.poll() in the loop (serves delivery reports)
    "drain_acks",  # Copier._drain_acks: matching delivery reports with produced records
    "flush",  # producer.flush()
    "commit_txn",  # producer.commit_transaction() (tasks.max > 1 workers, exactly-once)
    "begin_txn",  # producer.begin_transaction()
    "suspended",  # calls over 1 s (only a SIGSTOP, the harness's preload, makes them)
)


class Probe:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.wall = dict.fromkeys(TIMERS, 0.0)
        self.calls = dict.fromkeys(TIMERS, 0)
        self.records_consumed = 0
        self.batches = 0
        self.batch_hist: dict[str, int] = {}
        self.delivery_events = 0
        self.copy_thread_cpu = 0.0  # thread_time() of the copy thread at its last consume call
        # /proc/thread-self/schedstat of the copy thread at its last consume call: seconds on a
        # CPU, seconds runnable but waiting for a CPU (run queue), time slices
        self.copy_thread_sched = (0.0, 0.0, 0)
        self.in_copy = False
        self.copy_tid = 0
        self.stats: list[dict[str, Any]] = []
        # (monotonic start, seconds, records) of every consume()/poll() call since the last sample
        self.consume_calls: list[tuple[float, float, int]] = []

    def add(self, timer: str, seconds: float) -> None:
        if seconds > 1.0 and timer != "flush":
            timer = "suspended"
        self.wall[timer] += seconds
        self.calls[timer] += 1

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            stats, self.stats = self.stats, []
            calls, self.consume_calls = self.consume_calls, []
        t = os.times()
        return {
            "t": time.monotonic(),
            "wall": dict(self.wall),
            "calls": dict(self.calls),
            "records_consumed": self.records_consumed,
            "batches": self.batches,
            "batch_hist": dict(self.batch_hist),
            "delivery_events": self.delivery_events,
            "copy_thread_cpu": self.copy_thread_cpu,
            "process_cpu": t.user + t.system,
            "copy_thread_sched": self.copy_thread_sched,
            "threads_cpu": threads_cpu(self.copy_tid),
            "stats": stats,
            "consume_calls": calls,
        }


PROBE = Probe()


def schedstat() -> tuple[float, float, int]:
    """The calling thread's (on-CPU seconds, run-queue wait seconds, time slices)."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            on, wait, slices = f.read().split()
    except (OSError, ValueError):
        return (0.0, 0.0, 0)
    return (int(on) / 1e9, int(wait) / 1e9, int(slices))


_TICK = os.sysconf("SC_CLK_TCK")


def threads_cpu(copy_tid: int) -> dict[str, float]:
    """CPU seconds of this process's threads, by thread name (librdkafka's are ``rdk:...``; the
    copy thread is ``copy``)."""
    out: dict[str, float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                raw = f.read()
        except OSError:
            continue
        name = raw[raw.index("(") + 1 : raw.rindex(")")]
        name = name.split("/")[0] if name.startswith("rdk:") else name
        name = "copy" if int(tid) == copy_tid else name
        fields = raw[raw.rindex(")") + 2 :].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / _TICK
    return out


def _bucket(n: int) -> str:
    for edge in (1, 10, 100, 1000, 5000, 9999):
        if n <= edge:
            return f"<={edge}"
    return ">=10000"


def extract(role: str, raw: str) -> dict[str, Any]:
    """The part of a librdkafka statistics report that says where records wait."""
    doc = json.loads(raw)
    brokers: dict[str, Any] = {}
    for name, b in (doc.get("brokers") or {}).items():
        if b.get("nodeid", -1) < 0:
            continue  # the bootstrap connection
        req = b.get("req") or {}
        brokers[name] = {
            "rtt_avg_us": (b.get("rtt") or {}).get("avg"),
            "rtt_p99_us": (b.get("rtt") or {}).get("p99"),
            "int_latency_avg_us": (b.get("int_latency") or {}).get("avg"),
            "outbuf_latency_avg_us": (b.get("outbuf_latency") or {}).get("avg"),
            "outbuf_cnt": b.get("outbuf_cnt"),
            "outbuf_msg_cnt": b.get("outbuf_msg_cnt"),
            "waitresp_cnt": b.get("waitresp_cnt"),
            "waitresp_msg_cnt": b.get("waitresp_msg_cnt"),
            "tx": b.get("tx"),
            "txbytes": b.get("txbytes"),
            "rx": b.get("rx"),
            "rxbytes": b.get("rxbytes"),
            "fetch_req": req.get("Fetch", 0),
            "produce_req": req.get("Produce", 0),
        }
    parts = {"fetchq_cnt": 0, "fetchq_size": 0, "msgq_cnt": 0, "xmit_msgq_cnt": 0, "n": 0}
    topics = {}
    for tname, topic in (doc.get("topics") or {}).items():
        topics[tname] = {
            "batchsize_avg": (topic.get("batchsize") or {}).get("avg"),
            "batchcnt_avg": (topic.get("batchcnt") or {}).get("avg"),
        }
        for pid, p in (topic.get("partitions") or {}).items():
            if pid == "-1":
                continue
            parts["n"] += 1
            for k in ("msgq_cnt", "xmit_msgq_cnt"):
                parts[k] += int(p.get(k) or 0)
            # a partition's fetch queue forwards to the consumer's queue, and librdkafka reports
            # the length of the queue it forwards to: the same figure for every partition
            for k in ("fetchq_cnt", "fetchq_size"):
                parts[k] = max(parts[k], int(p.get(k) or 0))
    return {
        "role": role,
        "t": time.monotonic(),
        "replyq": doc.get("replyq"),
        "msg_cnt": doc.get("msg_cnt"),
        "msg_size": doc.get("msg_size"),
        "brokers": brokers,
        "partitions": parts,
        "topics": topics,
    }


def _stats_cb(role: str) -> Any:
    def on_stats(raw: str) -> None:
        try:
            item = extract(role, raw)
        except ValueError:
            return
        with PROBE.lock:
            PROBE.stats.append(item)

    return on_stats


def install() -> None:
    """Wrap the copier's clients and batch-level methods (call before the copier starts)."""
    from confluent_kafka import Consumer, Producer

    from mirrorlib.kafka.copier import loop as copier

    probe = PROBE
    clock = time.perf_counter

    def with_stats(conf: dict[str, Any], role: str) -> dict[str, Any]:
        conf = dict(conf)
        conf.setdefault("statistics.interval.ms", STATS_INTERVAL_MS)
        conf["stats_cb"] = _stats_cb(role)
        return conf

    class ProbedConsumer(Consumer):  # type: ignore[misc]
        def __init__(self, conf: dict[str, Any]) -> None:
            super().__init__(with_stats(conf, "consumer"))

        def _timed(self, got: list[Any], started: float) -> None:
            took = clock() - started
            n = len(got)
            probe.add("consume_records" if n else "consume_empty", took)
            if n:
                probe.records_consumed += n
            with probe.lock:
                probe.consume_calls.append((time.monotonic() - took, took, n))
            probe.copy_thread_cpu = time.thread_time()
            probe.copy_thread_sched = schedstat()
            probe.copy_tid = threading.get_native_id()

        def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
            started = clock()
            got: list[Any] = super().consume(num_messages, timeout)
            self._timed(got, started)
            return got

        def poll(self, timeout: float = -1) -> Any:
            started = clock()
            msg = super().poll(timeout)
            self._timed([] if msg is None else [msg], started)
            return msg

    class ProbedProducer(Producer):  # type: ignore[misc]
        def __init__(self, conf: dict[str, Any]) -> None:
            super().__init__(with_stats(conf, "producer"))

        def poll(self, timeout: float = -1) -> int:
            started = clock()
            n: int = super().poll(timeout)
            probe.add("copy_blocked" if probe.in_copy else "producer_poll", clock() - started)
            probe.delivery_events += n
            return n

        def flush(self, timeout: float = -1) -> int:
            started = clock()
            left: int = super().flush(timeout)
            probe.add("flush", clock() - started)
            return left

        def commit_transaction(self, *args: Any) -> None:
            started = clock()
            try:
                super().commit_transaction(*args)
            finally:
                probe.add("commit_txn", clock() - started)

        def begin_transaction(self) -> None:
            started = clock()
            try:
                super().begin_transaction()
            finally:
                probe.add("begin_txn", clock() - started)

    copy, drain = copier.Copier._copy, copier.Copier._drain_acks

    def timed_copy(self: Any, msgs: list[Any]) -> None:
        started = clock()
        probe.in_copy = True
        try:
            copy(self, msgs)
        finally:
            probe.in_copy = False
            probe.add("copy", clock() - started)
            probe.batches += 1
            key = _bucket(len(msgs))
            probe.batch_hist[key] = probe.batch_hist.get(key, 0) + 1

    def timed_drain(self: Any) -> None:
        started = clock()
        try:
            drain(self)
        finally:
            probe.add("drain_acks", clock() - started)

    copier.Consumer = ProbedConsumer  # type: ignore[misc]
    copier.Producer = ProbedProducer  # type: ignore[misc]
    copier.Copier._copy = timed_copy  # type: ignore[method-assign]
    copier.Copier._drain_acks = timed_drain  # type: ignore[method-assign]


def report_to(path: Path, interval: float = 0.25) -> threading.Thread:
    """Append :meth:`Probe.snapshot` to ``path`` every ``interval`` seconds (daemon thread)."""

    def run() -> None:
        with path.open("a") as out:
            while True:
                out.write(json.dumps(PROBE.snapshot()) + "\n")
                out.flush()
                time.sleep(interval)

    thread = threading.Thread(target=run, name="waitprobe", daemon=True)
    thread.start()
    return thread


def worker_path(out: Path, pid: int) -> Path:
    """Where the probe of worker process ``pid`` of the replicator probed into ``out`` writes."""
    return out.with_name(f"{out.stem}-w{pid}{out.suffix}")


def main(argv: list[str]) -> int:
    """``python -m bench.waitprobe OUT.jsonl mm2.properties``: the replicator, probed; with
    ``tasks.max`` > 1 its worker processes are ``python -m bench.waitprobe --worker OUT.jsonl``,
    probed into :func:`worker_path`."""
    if argv[0] == "--worker":
        install()
        report_to(worker_path(Path(argv[1]), os.getpid()))
        from mirrorlib.runtime.workers import child

        return child.main()
    out, props = argv
    install()
    report_to(Path(out))
    from mirrorlib.cli import main as cli
    from mirrorlib.runtime.workers.supervisor import Supervisor

    command = [sys.executable, "-m", "bench.waitprobe", "--worker", str(Path(out).resolve())]
    defaults = Supervisor.__init__.__kwdefaults__ or {}
    defaults["command"] = lambda: list(command)
    Supervisor.__init__.__kwdefaults__ = defaults
    return int(cli(["--log-level", "WARNING", "run", props]) or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
