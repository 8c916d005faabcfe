"""A soak with random faults: replication under kill -9, SIGSTOP, broker and leader faults and
network cuts, verified exactly at the end.

``python -m bench.soak --minutes 30 --mode eos`` (or ``--mode alo``) starts two local clusters
``A`` and ``B`` (three nodes each by default: RF 3, min ISR 2, every client connection through the
network-fault proxy of :mod:`mirrorlib.testing`), a producer and an application consumer group on
``A``, and ``mirrorlib run`` with ``tasks.max=2`` replicating ``A->B``. Every 10-30 s (``--every``)
it injects one fault at random from:

* ``kill-replicator``: kill -9 of the ``mirrorlib run`` process (its workers notice and end), and
  a new one started a few seconds later;
* ``kill-worker``: kill -9 of one worker process (the replicator starts another);
* ``stop-worker``: SIGSTOP of one worker for 5-20 s, then SIGCONT;
* ``restart-node`` / ``kill-node`` / ``freeze-node``: a broker node of ``A`` or ``B`` stopped and
  started, killed -9 and started after a few seconds, or frozen (SIGSTOP) for 5-20 s;
* ``kill-leader`` (three-node clusters): kill -9 of the node leading a copied partition, on the
  source or the target, started again after a few seconds;
* ``cut`` / ``blackhole``: every client connection to ``A`` or ``B`` cut (refused) or silently
  dropped for 5-30 s, then healed.

At the end it stops injecting, lets the replicator catch up and checks, from what the producer saw
acknowledged and what a ``read_committed`` reader finds on ``B``:

* **nothing lost**: every acknowledged record is on ``B``;
* **nothing twice** (``--mode eos``): no record appears twice (``--mode alo`` reports the count);
* **failover skips nothing**: the application group, stopped at a random point, is failed over to
  ``B`` (a dry run of :func:`mirrorlib.runtime.failover.failover`) and the translated offsets are
  checked against the records themselves: each is at or before the first record the group had not
  processed; the re-read records are counted;
* **the replicator stays up**: a ``mirrorlib run`` that ends without being killed by the soak is a
  failure.

It prints the faults and the figures and writes them as JSON (``--out``). Exit code 0 when every
check passed, 1 otherwise. ``run_soak`` is the same as a function (a short run is in CI:
``tests/bench/test_soak.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from bench.procmon import children

log = logging.getLogger("bench.soak")

TOPIC = "soak"
GROUP = "soak-app"
MODES = ("alo", "eos")


@attrs.frozen
class SoakOptions:
    """What a soak run does (see the module documentation)."""

    minutes: float = 30.0
    mode: str = "eos"
    nodes: int = 3
    partitions: int = 4
    rate: int = 300  #: records per second from the producer
    every: tuple[float, float] = (10.0, 30.0)  #: seconds between faults
    seed: int | None = None
    faults: tuple[str, ...] | None = None  #: only these fault kinds (default: all that apply)
    catch_up_timeout: float = 300.0
    work_dir: Path | None = None
    #: faults to apply at least, past ``minutes`` if need be (a slow machine's faults last longer)
    min_faults: int = 0


@attrs.define
class Fault:
    at: float  #: seconds since the soak started
    kind: str
    target: str
    seconds: float = 0.0
    error: str | None = None


# -- the producer and the application group -----------------------------------------------------


class SourceProducer(threading.Thread):
    """Writes ``<seq>`` values at ``rate`` records/s round-robin over the partitions (idempotent,
    ``acks=all``, no delivery timeout to speak of) and remembers every acknowledged value with its
    partition and offset."""

    def __init__(self, conf: dict[str, str], partitions: int, rate: int) -> None:
        super().__init__(name="soak-producer", daemon=True)
        self.producer = Producer(
            {
                **conf,
                "acks": "all",
                "enable.idempotence": "true",
                "linger.ms": "5",
                "message.timeout.ms": "600000",
                "log_level": "0",
            }
        )
        self.partitions = partitions
        self.rate = rate
        self.acked: dict[int, dict[int, bytes]] = {p: {} for p in range(partitions)}
        self.failed = 0
        self.sent = 0
        self._stopping = threading.Event()

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed += 1
            return
        self.acked[msg.partition()][msg.offset()] = msg.value()

    def run(self) -> None:
        start = time.monotonic()
        while not self._stopping.is_set():
            due = int((time.monotonic() - start) * self.rate)
            while self.sent < due and not self._stopping.is_set():
                try:
                    self.producer.produce(
                        TOPIC,
                        value=str(self.sent).encode(),
                        partition=self.sent % self.partitions,
                        on_delivery=self._delivered,
                    )
                except BufferError:
                    self.producer.poll(0.1)
                    continue
                self.sent += 1
            self.producer.poll(0.02)

    def finish(self, timeout: float) -> int:
        """Stop producing and wait for the outstanding acknowledgements; returns how many are
        still outstanding."""
        self._stopping.set()
        if self.ident is not None:  # started
            self.join(10)
        return int(self.producer.flush(timeout))

    @property
    def acked_count(self) -> int:
        return sum(len(p) for p in self.acked.values())


class AppGroup(threading.Thread):
    """An application consumer group on the source: reads ``soak``, commits what it processed at
    random moments; :meth:`finish` stops it at a random point (lagging, as a real application
    caught by a disaster) with a last commit."""

    def __init__(self, conf: dict[str, str], rng: random.Random) -> None:
        super().__init__(name="soak-app", daemon=True)
        self.consumer = Consumer(
            {
                **conf,
                "group.id": GROUP,
                "enable.auto.commit": "false",
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "session.timeout.ms": "10000",
                "log_level": "0",
            }
        )
        self.rng = rng
        self.positions: dict[int, int] = {}
        self.commits = 0
        self.errors: list[str] = []
        self._stopping = threading.Event()
        self._pause = threading.Event()

    def run(self) -> None:
        self.consumer.subscribe([TOPIC])
        next_commit = time.monotonic() + self.rng.uniform(0.5, 3.0)
        while not self._stopping.is_set():
            if self._pause.is_set():
                time.sleep(0.05)
                continue
            msg = self.consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                self.positions[msg.partition()] = msg.offset() + 1
            if time.monotonic() >= next_commit and self.positions:
                self._commit()
                next_commit = time.monotonic() + self.rng.uniform(0.5, 3.0)

    def _commit(self) -> None:
        offsets = [TopicPartition(TOPIC, p, o) for p, o in self.positions.items()]
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
            self.commits += 1
        except Exception as exc:  # a fault in progress: the next commit retries
            self.errors.append(str(exc))

    def finish(self) -> dict[int, int]:
        """Stop at a random point, commit (until it works), leave the group; the committed
        offsets."""
        self._pause.set()
        self._stopping.set()
        self.join(10)
        committed: dict[int, int] = {}
        for _ in range(30):
            try:
                if self.positions:
                    self.consumer.commit(
                        offsets=[TopicPartition(TOPIC, p, o) for p, o in self.positions.items()],
                        asynchronous=False,
                    )
                got = self.consumer.committed(
                    [TopicPartition(TOPIC, p) for p in self.positions], timeout=10
                )
                committed = {tp.partition: tp.offset for tp in got if tp.offset >= 0}
                break
            except Exception as exc:
                self.errors.append(str(exc))
                time.sleep(1)
        self.consumer.close()
        return committed


# -- the replicator ---------------------------------------------------------------------------


class RunProcess:
    """``mirrorlib run`` in a child process, its output appended to one log file."""

    def __init__(self, properties: Path, log_path: Path) -> None:
        self.properties = properties
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.unexpected_exits: list[str] = []

    def start(self) -> None:
        with open(self.log_path, "ab") as out:
            out.write(f"\n=== bench.soak: start #{self.starts + 1}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "mirrorlib", "run", str(self.properties)],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.starts += 1

    def check_alive(self) -> None:
        """Record (and recover from) an exit the soak did not cause."""
        if self.proc is not None and self.proc.poll() is not None:
            self.unexpected_exits.append(
                f"mirrorlib run exited with {self.proc.returncode} (start #{self.starts})"
            )
            self.start()

    def workers(self) -> list[int]:
        return [] if self.proc is None else children(self.proc.pid)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def stop(self, timeout: float = 90.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.unexpected_exits.append(f"mirrorlib run did not stop within {timeout}s")
                self.proc.kill()
                self.proc.wait(30)
        return self.proc.returncode


def properties(clusters: Any, options: SoakOptions) -> dict[str, str]:
    a, b = clusters
    rf = str(min(3, options.nodes))
    props = {
        "clusters": "A, B",
        "A.bootstrap.servers": a.bootstrap_servers,
        "B.bootstrap.servers": b.bootstrap_servers,
        "A->B.enabled": "true",
        "A->B.topics": TOPIC,
        "A->B.groups": GROUP,
        "tasks.max": "2",
        "replication.factor": rf,
        "offset.storage.replication.factor": rf,
        "checkpoints.topic.replication.factor": rf,
        "heartbeats.topic.replication.factor": rf,
        "offset-syncs.topic.replication.factor": rf,
        "offset.flush.interval.ms": "500",
        "refresh.topics.interval.seconds": "5",
        "refresh.groups.interval.seconds": "5",
        "emit.checkpoints.interval.seconds": "2",
        "sync.group.offsets.enabled": "false",
        "sync.topic.acls.enabled": "false",
    }
    if options.mode == "eos":
        props["exactly.once.source.support"] = "enabled"
    return props


# -- faults -----------------------------------------------------------------------------------


class Injector:
    """Chooses and applies the faults; each one undone before the next."""

    def __init__(
        self, clusters: Any, run: RunProcess, rng: random.Random, options: SoakOptions
    ) -> None:
        self.clusters = clusters
        self.run = run
        self.rng = rng
        self.options = options
        self.multi = options.nodes >= 3
        kinds = [
            "kill-replicator", "kill-worker", "stop-worker",
            "restart-node", "kill-node", "freeze-node", "cut", "blackhole",
        ]  # fmt: skip
        if self.multi:
            kinds.append("kill-leader")
        if options.faults is not None:
            unknown = set(options.faults) - set(kinds)
            if unknown:
                raise SystemExit(f"unknown or inapplicable fault kinds: {sorted(unknown)}")
            kinds = list(options.faults)
        self.kinds = kinds

    def _side(self) -> Any:
        return self.rng.choice(list(self.clusters))

    def _node(self, cluster: Any) -> Any:
        return self.rng.choice(list(cluster.nodes))

    def apply(self, kind: str, started: float) -> Fault:
        fault = Fault(at=round(time.monotonic() - started, 1), kind=kind, target="")
        t0 = time.monotonic()
        try:
            self._apply(kind, fault)
        except Exception as exc:  # the fault itself failed (e.g. no worker at that moment)
            fault.error = f"{type(exc).__name__}: {exc}"
        fault.seconds = round(time.monotonic() - t0, 1)
        return fault

    def _apply(self, kind: str, fault: Fault) -> None:
        rng = self.rng
        if kind == "kill-replicator":
            fault.target = "mirrorlib run"
            self.run.kill()
            time.sleep(rng.uniform(1, 5))
            self.run.start()
        elif kind in ("kill-worker", "stop-worker"):
            workers = self.run.workers()
            if not workers:
                raise RuntimeError("no worker process running")
            pid = rng.choice(workers)
            fault.target = f"worker pid {pid}"
            if kind == "kill-worker":
                os.kill(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGSTOP)
                try:
                    time.sleep(rng.uniform(5, 20))
                finally:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGCONT)
        elif kind in ("restart-node", "kill-node", "freeze-node"):
            cluster = self._side()
            node = self._node(cluster)
            fault.target = f"{cluster.alias} node {node.node_id}"
            if kind == "restart-node":
                node.restart()
            elif kind == "kill-node":
                node.kill()
                time.sleep(rng.uniform(2, 8))
                node.start()
            else:
                node.freeze()
                try:
                    time.sleep(rng.uniform(5, 20))
                finally:
                    node.thaw()
        elif kind == "kill-leader":
            cluster = self._side()
            topic = TOPIC if cluster.alias == "A" else f"A.{TOPIC}"
            partition = rng.randrange(self.options.partitions)
            node = cluster.leader(topic, partition)
            fault.target = f"{cluster.alias} leader of {topic}-{partition}: node {node.node_id}"
            node.kill()
            time.sleep(rng.uniform(2, 8))
            node.start()
        elif kind in ("cut", "blackhole"):
            cluster = self._side()
            fault.target = f"link to {cluster.alias}"
            if kind == "cut":
                cluster.link.cut()
            else:
                cluster.link.blackhole()
            try:
                time.sleep(rng.uniform(5, 30))
            finally:
                cluster.link.heal()
        else:  # pragma: no cover - kinds are checked above
            raise ValueError(kind)

    def heal_all(self) -> None:
        """Every node running, every link healed (after an interrupted fault)."""
        for cluster in self.clusters:
            with contextlib.suppress(Exception):
                cluster.link.heal()
            for node in cluster.nodes:
                with contextlib.suppress(Exception):
                    node.thaw()
                if not node.is_running:
                    node.start()


# -- reading the target and checking ------------------------------------------------------------


def read_committed(
    conf: dict[str, str], topic: str, timeout: float = 120.0
) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of ``topic`` a ``read_committed`` reader sees: per partition, (offset, value)
    in order (offsets of a transactionally written topic have gaps: the markers)."""
    consumer = Consumer(
        {
            **conf,
            "group.id": f"soak-reader-{random.getrandbits(32):x}",
            "enable.auto.commit": "false",
            "isolation.level": "read_committed",
            "enable.partition.eof": "true",
            "log_level": "0",
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=30)
        parts = sorted(meta.topics[topic].partitions)
        ends = {}
        for p in parts:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in parts}
        done = {p for p in parts if ends[p] == 0}
        deadline = time.monotonic() + timeout
        while len(done) < len(parts):
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic}: {sorted(set(parts) - done)} not at the end")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                eof = msg.error().code() == KafkaError._PARTITION_EOF
                if eof and msg.offset() >= ends[msg.partition()] - 1:
                    done.add(msg.partition())
                continue
            out[msg.partition()].append((msg.offset(), msg.value()))
            if msg.offset() >= ends[msg.partition()] - 1:
                done.add(msg.partition())
        return out
    finally:
        consumer.close()


def skips(
    rows: list[tuple[int, bytes]], first_unprocessed: bytes | None, translated: int
) -> tuple[int, int, int | None]:
    """For one partition of the target (its ``(offset, value)`` records), a group resuming at
    ``translated`` whose first unprocessed record on the source has the value
    ``first_unprocessed`` (``None``: it had processed everything): how many records it skips,
    how many it reads again, and the target offset of that first record (``None``: none; -1: the
    record is not on the target at all, which counts as one skipped record)."""
    if first_unprocessed is None:
        return 0, sum(1 for off, _ in rows if off >= translated), None
    found = [off for off, value in rows if value == first_unprocessed]
    if not found:
        return 1, 0, -1
    limit = found[0]
    skipped = sum(1 for off, _ in rows if limit <= off < translated)
    re_read = sum(1 for off, _ in rows if translated <= off < limit)
    return skipped, re_read, limit


def check_failover(
    config: Any,
    committed: dict[int, int],
    acked: dict[int, dict[int, bytes]],
    target: dict[int, list[tuple[int, bytes]]],
) -> dict[str, Any]:
    """Fail the group over to ``B`` (dry run) and check each translated offset against the
    records themselves: the group must resume at or before the first record it had not
    processed on ``A`` (else records are skipped); the records between are re-read."""
    from mirrorlib.errors import FailoverRefusedError
    from mirrorlib.runtime.failover import failover

    try:
        plan = failover(config, GROUP, "A", "B", dry_run=True, timeout=60)
        refused = None
    except FailoverRefusedError as exc:
        plan = exc.plan
        refused = str(exc)
    skipped = 0
    re_read = 0
    checked = []
    untranslated: list[dict[str, Any]] = []
    for part in plan.partitions:
        p = part.partition
        c = committed.get(p)
        translated = part.translated
        if c is None:
            continue
        if translated is None:
            untranslated.append({"partition": p, "committed": c, "reason": part.reason})
            continue
        rows = target.get(p, [])
        later = [off for off in acked.get(p, {}) if off >= c]
        first = acked[p][min(later)] if later else None
        part_skipped, part_re_read, limit = skips(rows, first, translated)
        skipped += part_skipped
        re_read += part_re_read
        checked.append(
            {"partition": p, "committed": c, "translated": translated, "first_unprocessed_at": limit}
        )  # fmt: skip
    return {
        "refused": refused,
        "plan_skipped_total": plan.skipped_total,
        "skipped": skipped,
        "re_read": re_read,
        "untranslated": untranslated,
        "partitions": checked,
    }


def run_soak(options: SoakOptions, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """One soak run (see the module documentation); the results as a JSON-ready dict with
    ``ok``."""
    from mirrorlib import MirrorConfig
    from mirrorlib.testing import start_clusters

    if options.mode not in MODES:
        raise SystemExit(f"--mode must be one of {MODES}")
    seed = options.seed if options.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    work = Path(options.work_dir or tempfile.mkdtemp(prefix="mirrorlib-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    echo(f"soak: {options.minutes} min, mode {options.mode}, {options.nodes}-node clusters, "
         f"seed {seed}, work dir {work}")  # fmt: skip
    faults: list[Fault] = []
    result: dict[str, Any] = {
        "options": {**attrs.asdict(options), "work_dir": str(work)},
        "seed": seed,
    }
    with start_clusters(
        ["A", "B"], work_dir=work / "clusters", nodes=options.nodes, proxy=True, timeout=300
    ) as clusters:
        a, b = clusters
        a.create_topic(TOPIC, options.partitions)
        import javaproperties

        props_path = work / "soak.properties"
        props = properties(clusters, options)
        props_path.write_text(javaproperties.dumps(props), encoding="utf-8")
        config = MirrorConfig.from_properties(props)
        run = RunProcess(props_path, work / "mirrorlib-run.log")
        # the producer, the application and the checks reach the brokers past the proxy: the
        # network faults are between the replicator and the clusters
        producer = SourceProducer(a.direct_client_config(), options.partitions, options.rate)
        app = AppGroup(a.direct_client_config(), rng)
        injector = Injector(clusters, run, rng, options)
        try:
            run.start()
            producer.start()
            app.start()
            started = time.monotonic()
            end = started + options.minutes * 60
            try:
                time.sleep(min(10.0, options.minutes * 6))
                while time.monotonic() < end or len(faults) < options.min_faults:
                    run.check_alive()
                    kind = rng.choice(injector.kinds)
                    fault = injector.apply(kind, started)
                    faults.append(fault)
                    echo(f"  {fault.at:7.1f}s {fault.kind:16} {fault.target} ({fault.seconds}s)"
                         + (f" -- {fault.error}" if fault.error else ""))  # fmt: skip
                    pause = rng.uniform(*options.every) - fault.seconds
                    now = time.monotonic()
                    if now < end:
                        _sleep_checking(run, max(1.0, min(pause, end - now)))
                    elif len(faults) < options.min_faults:  # (past the end: the usual pause)
                        _sleep_checking(run, max(1.0, pause))
            finally:
                injector.heal_all()
            faults_done = time.monotonic()
            run.check_alive()
            committed = app.finish()
            outstanding = producer.finish(120)
            echo(f"soak: faults done; {producer.acked_count} records acknowledged "
                 f"({outstanding} outstanding, {producer.failed} failed); catching up")  # fmt: skip
            acked_values = {v for part in producer.acked.values() for v in part.values()}
            remote = f"A.{TOPIC}"
            target: dict[int, list[tuple[int, bytes]]] = {}
            caught_up_at: float | None = None
            deadline = time.monotonic() + options.catch_up_timeout
            while time.monotonic() < deadline:
                run.check_alive()
                with contextlib.suppress(Exception):
                    target = read_committed(b.direct_client_config(), remote, timeout=60)
                    if acked_values <= {v for rows in target.values() for _, v in rows}:
                        caught_up_at = time.monotonic()
                        break
                time.sleep(5)
            failover_check = check_failover(config, committed, producer.acked, target)
            exit_code = run.stop()
            counts = Counter(v for rows in target.values() for _, v in rows)
            lost = sorted(acked_values - set(counts), key=int)
            duplicates = sum(n - 1 for n in counts.values() if n > 1)
            result.update(
                {
                    "faults": [attrs.asdict(f) for f in faults],
                    "fault_counts": dict(Counter(f.kind for f in faults)),
                    "produced": producer.sent,
                    "acked": producer.acked_count,
                    "producer_failed": producer.failed,
                    "target_records": sum(counts.values()),
                    "lost": len(lost),
                    "lost_sample": [v.decode() for v in lost[:20]],
                    "duplicates": duplicates,
                    "catch_up_seconds": None
                    if caught_up_at is None
                    else round(caught_up_at - faults_done, 1),
                    "group_commits": app.commits,
                    "group_committed": committed,
                    "failover": failover_check,
                    "replicator_starts": run.starts,
                    "replicator_unexpected_exits": run.unexpected_exits,
                    "replicator_exit_code": exit_code,
                }
            )
        finally:
            run.kill()  # an exception (or KeyboardInterrupt) must not leave it running
            producer.finish(1)

    problems = []
    if lost:
        problems.append(f"{len(lost)} acknowledged record(s) missing on B")
    if options.mode == "eos" and duplicates:
        problems.append(f"{duplicates} duplicate record(s) on B under exactly-once")
    if failover_check["skipped"] or failover_check["plan_skipped_total"]:
        problems.append(f"the group's failover would skip records: {failover_check}")
    if failover_check["untranslated"]:
        problems.append(f"partitions without a translation: {failover_check['untranslated']}")
    if failover_check["refused"]:
        problems.append(f"the group's failover was refused: {failover_check['refused']}")
    if run.unexpected_exits:
        problems.append(f"the replicator ended by itself: {run.unexpected_exits}")
    if exit_code not in (0, None):
        problems.append(f"mirrorlib run exited with {exit_code} at the end")
    result["problems"] = problems
    result["ok"] = not problems
    echo(summary(result))
    return result


def _sleep_checking(run: RunProcess, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        run.check_alive()
        time.sleep(min(1.0, max(0.0, end - time.monotonic())))


def summary(result: dict[str, Any]) -> str:
    opts = result["options"]
    fo = result.get("failover", {})
    lines = [
        f"soak {opts['minutes']} min, mode {opts['mode']}, {opts['nodes']}-node clusters, "
        f"seed {result['seed']}: {'OK' if result['ok'] else 'FAILED'}",
        f"  faults: {len(result.get('faults', []))} "
        + ", ".join(f"{k} {n}" for k, n in sorted(result.get("fault_counts", {}).items())),
        f"  records: {result.get('acked')} acknowledged, {result.get('target_records')} on the "
        f"target, lost {result.get('lost')}, duplicates {result.get('duplicates')}",
        f"  failover: skipped {fo.get('skipped')}, re-read {fo.get('re_read')}"
        + (f", refused: {fo['refused']}" if fo.get("refused") else ""),
        f"  replicator: {result.get('replicator_starts')} starts, "
        f"{len(result.get('replicator_unexpected_exits', []))} unexpected exits",
    ]
    lines += [f"  PROBLEM: {p}" for p in result.get("problems", [])]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.soak", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--mode", choices=MODES, default="eos")
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rate", type=int, default=300, help="records per second")
    parser.add_argument(
        "--every", type=float, nargs=2, default=(10.0, 30.0), metavar=("MIN", "MAX")
    )
    parser.add_argument("--seed", type=int)
    parser.add_argument("--faults", help="comma-separated fault kinds (default: all)")
    parser.add_argument("--work-dir", type=Path)
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    options = SoakOptions(
        minutes=args.minutes, mode=args.mode, nodes=args.nodes, partitions=args.partitions,
        rate=args.rate, every=tuple(args.every), seed=args.seed,
        faults=None if not args.faults else tuple(args.faults.split(",")),
        work_dir=args.work_dir,
    )  # fmt: skip
    result = run_soak(options)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
