"""Latency at fixed input rates, time to first checkpoint and failover re-reads, per contender."""

from __future__ import annotations

import contextlib
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_END, Consumer, TopicPartition

from bench import kio, stats
from bench.contenders import Contender
from bench.pacer import decode
from bench.procmon import ProcMonitor
from mirrorlib import MirrorClient
from mirrorlib.testing import BaseCluster

PARTITIONS = 4
PRELOAD_PER_PARTITION = 1000
CKPT_COMMIT = 500
RECORD_SIZE = 1024
RATES = (1000, 10000)


def _pacer(bootstrap: str, topic: str, **kw: Any) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.pacer", bootstrap, topic]
    for k, v in kw.items():
        cmd += [f"--{k}", str(v)]
    out = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(
            f"the pacer exited with {out.returncode} ({' '.join(cmd[2:])}): "
            f"{out.stderr.strip()[-600:]}"
        )
    import json

    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


class LatencyReader(threading.Thread):
    """Consumes the remote topic on B from its end; latency = receive time - produce time."""

    def __init__(self, b: BaseCluster, topic: str, partitions: int) -> None:
        super().__init__(daemon=True, name="latency")
        self.consumer = Consumer(
            {"bootstrap.servers": b.bootstrap_servers, "group.id": "bench-lat", "log_level": 3}
        )
        self.consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in range(partitions)])
        self.samples: dict[int, list[tuple[int, float]]] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            # Block only until the first record, then take what is already fetched: a plain
            # consume(n, timeout) waits the whole timeout unless n records arrive, which would
            # add up to that timeout to every measured latency.
            first = self.consumer.poll(0.05)
            if first is None:
                continue
            msgs = [first, *self.consumer.consume(10_000, timeout=0)]
            now = time.time_ns()
            for m in msgs:
                if m.error() is not None:
                    continue
                send_ns, _seq, rate = decode(m.value())
                self.samples.setdefault(rate, []).append((send_ns, (now - send_ns) / 1e6))
        self.consumer.close()

    def summary(self, warmup_s: float = 1.0) -> dict[str, Any]:
        out = {}
        for rate, pairs in sorted(self.samples.items()):
            if rate == 0:
                continue
            first = min(s for s, _ in pairs)
            lat = [ms for s, ms in pairs if s >= first + warmup_s * 1e9]
            out[str(rate)] = stats.latency_summary(lat)
        return out


class CheckpointMark:
    """The checkpoints present on B at one moment: :meth:`capture` takes the end offset of the
    checkpoints topic (one request on a connection opened beforehand), :meth:`read` later reads
    the group's checkpoints below it. Reading the whole topic at the moment of the stop instead
    takes 0.5-4 s on a loaded machine, and checkpoints written meanwhile would count as present
    at the stop."""

    def __init__(self, b: BaseCluster, alias: str, group: str) -> None:
        self.group = group
        self.tp = TopicPartition(f"{alias}.checkpoints.internal", 0)
        self.consumer = Consumer(
            {"bootstrap.servers": b.bootstrap_servers, "group.id": "bench-mark", "log_level": 3}
        )
        self.end: int | None = None
        self.capture_s: float | None = None  # how long capturing took
        with contextlib.suppress(Exception):  # open the connection now, not at the stop
            self.consumer.get_watermark_offsets(self.tp, timeout=10, cached=False)

    def capture(self) -> None:
        began = time.monotonic()
        self.end = int(self.consumer.get_watermark_offsets(self.tp, timeout=10, cached=False)[1])
        self.capture_s = round(time.monotonic() - began, 3)

    def read(self) -> tuple[dict[int, int], dict[int, int]]:
        """(downstream, upstream) offset per partition of the group's last checkpoints."""
        from mirrorlib import Checkpoint, CodecError

        down: dict[int, int] = {}
        up: dict[int, int] = {}
        end = self.end or 0
        if end <= 0:
            return down, up
        self.consumer.assign([TopicPartition(self.tp.topic, 0, 0)])
        deadline = time.monotonic() + 60
        position = 0
        while position < end and time.monotonic() < deadline:
            for m in self.consumer.consume(1000, timeout=0.5):
                if m.error() is not None:
                    continue
                position = m.offset() + 1
                if m.offset() >= end:
                    break
                try:
                    cp = Checkpoint.decode(m.key(), m.value())
                except CodecError:
                    continue
                if cp.group == self.group:
                    down[cp.partition] = cp.downstream_offset
                    up[cp.partition] = cp.upstream_offset
        return down, up

    def close(self) -> None:
        self.consumer.close()


class FailoverGroup(threading.Thread):
    """A consumer group on A that consumes, commits, and stops at a chosen moment.

    At the stop it commits its position, then marks the checkpoints present on B right then
    (``mark``); ``on_stop`` (the old "immediate" measurement) then reads them with
    ``MirrorClient``, which sees the checkpoints written while it reads, too."""

    def __init__(
        self,
        a: BaseCluster,
        topic: str,
        group: str,
        on_stop: Callable[[], dict[int, int]] | None = None,
        mark: CheckpointMark | None = None,
    ) -> None:
        super().__init__(daemon=True, name="failover-group")
        self.on_stop = on_stop
        self.mark = mark
        self.at_read: dict[int, int] = {}
        self.at_read_s: float | None = None  # from the final commit to the end of that read
        self.immediate_error: str | None = None
        self.consumer = Consumer(
            {
                "bootstrap.servers": a.bootstrap_servers,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "log_level": 3,
            }
        )
        self.consumer.subscribe([topic])
        self.stop_at = float("inf")
        self.committed: dict[int, int] = {}
        self.stopped = threading.Event()

    def run(self) -> None:
        last_commit = time.monotonic()
        while time.monotonic() < self.stop_at:
            msgs = self.consumer.consume(1000, timeout=0.05)
            if msgs and time.monotonic() - last_commit > 0.2:
                self.consumer.commit(asynchronous=True)
                last_commit = time.monotonic()
        assignment = self.consumer.assignment()
        positions = self.consumer.position(assignment)
        final = [p for p in positions if p.offset >= 0]
        if final:
            self.consumer.commit(offsets=final, asynchronous=False)
        committed_at = time.monotonic()
        if self.mark is not None:
            self.mark.capture()  # failover at that moment: the checkpoints B holds right then
        self.committed = {p.partition: p.offset for p in final}
        self.consumer.close()
        if self.on_stop is not None:
            try:
                self.at_read = self.on_stop()
            except Exception as exc:  # no checkpoint yet: nothing to fail over to
                self.at_read = {}
                self.immediate_error = f"{type(exc).__name__}: {exc}"
            self.at_read_s = round(time.monotonic() - committed_at, 3)
        self.stopped.set()


def _true_downstream(a: BaseCluster, b: BaseCluster, src: str, dst: str, p: int, up: int) -> int:
    """Downstream offset of the record at upstream offset ``up`` (found by its sequence)."""
    c = Consumer(
        {"bootstrap.servers": a.bootstrap_servers, "group.id": "bench-truth", "log_level": 3}
    )
    try:
        c.assign([TopicPartition(src, p, up)])
        msg = None
        deadline = time.monotonic() + 30
        while msg is None and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                msg = m
        if msg is None:
            raise RuntimeError(f"cannot read {src}-{p}@{up}")
        seq = decode(msg.value())[1]
    finally:
        c.close()
    c = Consumer(
        {"bootstrap.servers": b.bootstrap_servers, "group.id": "bench-truth", "log_level": 3}
    )
    try:
        c.assign([TopicPartition(dst, p, seq)])  # duplicates only push records further down
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for m in c.consume(1000, timeout=0.5):
                if m.error() is None and decode(m.value())[1] == seq:
                    return int(m.offset())
        raise RuntimeError(f"sequence {seq} not found in {dst}-{p}")
    finally:
        c.close()


def _checkpoints_caught_up(
    b: BaseCluster, alias: str, group: str, committed: dict[int, int], topic: str
) -> bool:
    with MirrorClient(b.client_config(), timeout=5) as mc:
        cps = mc.checkpoints(alias, timeout=5)
    ups = {tp.partition: cp.upstream_offset for (g, tp), cp in cps.items() if g == group}
    return all(ups.get(p) == off for p, off in committed.items())


def _translate(b: BaseCluster, alias: str, group: str) -> dict[int, int]:
    with MirrorClient(b.client_config(), timeout=10) as mc:
        offs = mc.remote_consumer_offsets(group, alias, timeout=10)
    return {tp.partition: om.offset for tp, om in offs.items()}


def run_scenario(
    contender: Contender,
    a: BaseCluster,
    b: BaseCluster,
    prefix: str,
    seconds: float,
    rng: random.Random,
    pacer_linger_ms: float = 0.0,
) -> dict[str, Any]:
    topic = f"{prefix}s"
    remote = contender.remote(topic)
    kio.create_topics(a.bootstrap_servers, {topic: PARTITIONS})
    _pacer(
        a.bootstrap_servers,
        topic,
        rate=0,
        count=PARTITIONS * PRELOAD_PER_PARTITION,
        size=RECORD_SIZE,
    )
    ckpt_group = f"{prefix}ckpt"
    c = Consumer({"bootstrap.servers": a.bootstrap_servers, "group.id": ckpt_group, "log_level": 3})
    c.commit(
        offsets=[TopicPartition(topic, p, CKPT_COMMIT) for p in range(PARTITIONS)],
        asynchronous=False,
    )
    c.close()
    result: dict[str, Any] = {"contender": contender.id}
    started = time.monotonic()
    contender.start(a, b, [topic], prefix + ".*")
    mon = ProcMonitor(contender.pid)
    offsets_b = kio.Offsets(b.bootstrap_servers)
    try:
        first_ckpt = None
        if contender.checkpoints:
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                try:
                    if _translate(b, contender.source_alias, ckpt_group):
                        first_ckpt = time.monotonic() - started
                        break
                except Exception:
                    pass
                time.sleep(0.2)
        result["first_checkpoint_s"] = None if first_ckpt is None else round(first_ckpt, 2)
        if (
            offsets_b.wait_total(
                remote, PARTITIONS * PRELOAD_PER_PARTITION, 180, check=contender.alive_or_raise
            )
            is None
        ):
            raise RuntimeError(f"{contender.id}: preloaded scenario records never arrived")
        reader = LatencyReader(b, remote, PARTITIONS)
        reader.start()
        group = (
            FailoverGroup(
                a,
                topic,
                f"{prefix}fo",
                on_stop=lambda: _translate(b, contender.source_alias, f"{prefix}fo"),
                mark=CheckpointMark(b, contender.source_alias, f"{prefix}fo"),
            )
            if contender.checkpoints
            else None
        )
        if group is not None:
            group.start()
        time.sleep(1.0)
        for rate in RATES:
            if group is not None and rate == RATES[-1]:
                group.stop_at = time.monotonic() + rng.uniform(2.0, max(seconds - 1.0, 2.5))
            _pacer(
                a.bootstrap_servers,
                topic,
                rate=rate,
                seconds=seconds,
                size=RECORD_SIZE,
                **{"linger-ms": pacer_linger_ms},
            )
        total_a = kio.Offsets(a.bootstrap_servers)
        n = total_a.total(topic)
        total_a.close()
        offsets_b.wait_total(remote, n, 120)
        time.sleep(0.5)
        reader.stop.set()
        reader.join(10)
        result["latency_ms"] = reader.summary()
        if group is not None:
            group.stopped.wait(60)
            alias = contender.source_alias
            mark = group.mark
            assert mark is not None
            imm, imm_up = mark.read()
            mark.close()
            fo: dict[str, Any] = {
                "committed": group.committed,
                # the checkpoints present at the stop: what they translate, how long marking took
                "immediate_checkpointed_upstream": imm_up,
                "immediate_mark_s": mark.capture_s,
                # the previous measurement: MirrorClient read after the stop (sees later ones)
                "translated_at_read": group.at_read,
                "at_read_s": group.at_read_s,
            }
            if group.immediate_error:
                fo["immediate_error"] = group.immediate_error
            deadline = time.monotonic() + 30
            caught_up = False
            while time.monotonic() < deadline:
                try:
                    if _checkpoints_caught_up(b, alias, f"{prefix}fo", group.committed, topic):
                        caught_up = True
                        break
                except Exception:
                    pass
                time.sleep(0.5)
            settled = _translate(b, alias, f"{prefix}fo")
            truth = {
                p: _true_downstream(a, b, topic, remote, p, up) for p, up in group.committed.items()
            }
            fo.update(
                checkpoints_caught_up=caught_up,
                translated_settled=settled,
                translated_immediate=imm,
                true_downstream=truth,
                reread_settled=sum(truth[p] - settled.get(p, 0) for p in truth),
                reread_immediate=sum(truth[p] - imm.get(p, 0) for p in truth),
                reread_at_read=sum(truth[p] - group.at_read.get(p, 0) for p in truth),
                skipped=sum(max(settled.get(p, 0) - truth[p], 0) for p in truth),
            )
            result["failover"] = fo
        else:
            result["failover"] = None
        result["peak_rss_mb"] = round(mon.peak_mb(), 1)
        result["cpu_s_total"] = round(mon.cpu(), 2)
    finally:
        mon.close()
        offsets_b.close()
        contender.stop()
    return result


__all__ = ["run_scenario"]
