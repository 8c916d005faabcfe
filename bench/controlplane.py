"""Control-plane benchmark: the runtime's own metadata, checkpoint and metrics code at scale.

No broker: the code runs against in-memory clients that answer at once
(:class:`mirrorlib.testing.fakes.FakeAdminClient` behind ``ClusterAdmin`` for the metadata task;
small fakes of the group admin, producer and offset-syncs log for the checkpoint task), so the
numbers are CPU costs in this process, before any network time. Round trips are the calls the
fakes answered.

    flock /work/bench.lock python -m bench.controlplane [--sizes 1000,10000,100000] [--quick]

What is measured, at each size P (partitions):

* **metadata refresh** — ``MetadataTask.refresh_topics`` with P single-partition source topics:
  the first cycle (creates every remote topic), a cycle with nothing changed, a cycle with one
  new topic (CPU-s, round trips);
* **topic config sync** — ``MetadataTask.sync_topic_configs`` over P source topics whose remote
  topics exist (every tenth with an override): the first cycle (compares every remote topic),
  a round of ``CONFIGS_FULL_EVERY`` cycles with nothing changed (each compares the remote topics
  whose turn it is: the worst and the mean), one where one topic's configs changed (CPU-s,
  round trips);
* **checkpoint cycle** — ``CheckpointTask.emit_checkpoints`` for P/10 groups x 20 partitions
  (10,000 x 20 at P = 100k) over 200 partitions with 1,000 offset syncs each: a cycle where
  every offset changed and one where none did (CPU-s, round trips), with the commits learnt from
  ``__consumer_offsets`` and with OffsetFetch (the fallback), then group offset sync
  (``CheckpointTask.sync_group_offsets``, round trips);
* **offset-sync intake** — records decoded and added to the translator by
  ``CheckpointTask.take_syncs`` (syncs per CPU-second);
* **translator memory** — RSS growth of an ``OffsetTranslator`` fed 20 syncs per partition;
* **start-up replay** — a new checkpoint task reading its internal topics: ``REPLAY_SYNCS``
  offset syncs per partition through ``CheckpointTask.take_syncs`` and P/10 groups x 20
  checkpoints through ``CheckpointTask.take_checkpoints`` (CPU-s, records per CPU-second);
* **scrape** — ``Exposition.render`` (what ``/metrics`` serves) and, for comparison,
  prometheus-client's ``generate_latest`` over ``ReplicatorCollector`` with P partitions in P/10
  topics (CPU-s, bytes, objects alive while the scrape's families are held);
* **verify** — peak traced memory of ``compare_partition`` over 10·P records per side, as
  ``verify`` runs it (read by offset windows, spilled past ``VERIFY_HELD_RECORDS``).

The checkpoint task is driven through its public entry points with duck-typed fakes that count
round trips (concurrent requests, up to ``IN_FLIGHT``, count as one). Results:
``bench/results/controlplane-<time>.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from mirrorlib.core.catalog import TopicCatalog
from mirrorlib.core.config import MirrorConfig
from mirrorlib.core.counters import StatsRegistry
from mirrorlib.core.records import Checkpoint, OffsetAndMetadata, OffsetSync, TopicPartition
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.translate import OffsetTranslator
from mirrorlib.kafka.admin import ClusterAdmin
from mirrorlib.runtime.checkpoints import CheckpointTask
from mirrorlib.runtime.metadata import CONFIGS_FULL_EVERY, MetadataTask
from mirrorlib.runtime.operations import VERIFY_HELD_RECORDS
from mirrorlib.testing.fakes import FakeAdminClient

RESULTS = Path(__file__).parent / "results"
GROUP_PARTITIONS = 20  # partitions each group commits
SYNC_PARTITIONS = 200  # partitions the groups' offsets are in (10 topics x 20)
SYNCS_PER_PARTITION = 1_000
REPLAY_SYNCS = 5  # offset syncs per partition in the replayed offset-syncs topic


def settings(**props: str) -> FlowSettings:
    cfg = MirrorConfig.from_properties(
        {
            "clusters": "A, B",
            "A.bootstrap.servers": "127.0.0.1:1",
            "B.bootstrap.servers": "127.0.0.1:1",
            "A->B.enabled": "true",
            "A->B.sync.group.offsets.enabled": "true",
            **props,
        }
    )
    return FlowSettings.from_config(cfg, cfg.flow("A", "B"))


def cpu(fn: Callable[[], Any]) -> tuple[float, Any]:
    """CPU seconds of this process spent in ``fn()``, and its result."""
    gc.collect()
    start = time.process_time()
    out = fn()
    return time.process_time() - start, out


class GcTime:
    """CPU seconds spent in the garbage collector (all generations) while in the block, and
    the number of full (generation-2) collections."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.full = 0
        self._start = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.process_time()
        else:
            self.seconds += time.process_time() - self._start
            self.full += info["generation"] == 2

    def __enter__(self) -> GcTime:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *_: object) -> None:
        gc.callbacks.remove(self._callback)


def with_gc_time(collected: GcTime, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, its garbage collections added to ``collected`` (called inside
    :func:`cpu`, so that the ``gc.collect()`` before the measurement is not counted)."""
    with collected:
        return fn(*args, **kwargs)


# -- metadata ------------------------------------------------------------------------------------


def bench_metadata(size: int) -> dict[str, Any]:
    source = FakeAdminClient({f"topic-{i}": 1 for i in range(size)})
    target = FakeAdminClient()
    admins = (ClusterAdmin(alias="A", client=source), ClusterAdmin(alias="B", client=target))
    task = MetadataTask(
        settings(), TopicCatalog(), StatsRegistry("A", "B"), connect=lambda _s: admins
    )

    def trips() -> int:
        return source.round_trips + target.round_trips

    out: dict[str, Any] = {}
    for name, change in (
        ("first", None),
        ("unchanged", None),
        ("one_new_topic", lambda: source.set_topics({**source.topics, "fresh": 1})),
    ):
        if change is not None:
            change()
        before = trips()
        seconds, ok = cpu(task.refresh_topics)
        out[name] = {"cpu_s": round(seconds, 4), "round_trips": trips() - before, "ok": ok}
    return out


def bench_configs(size: int) -> dict[str, Any]:
    """``MetadataTask.sync_topic_configs`` over P source topics whose remote topics exist."""
    source = FakeAdminClient({f"topic-{i}": 1 for i in range(size)})
    target = FakeAdminClient({f"A.topic-{i}": 1 for i in range(size)})
    for i in range(0, size, 10):  # every tenth topic has an override, already synced
        source.overrides[f"topic-{i}"] = {"retention.ms": "86400000"}
        target.overrides[f"A.topic-{i}"] = {"retention.ms": "86400000"}
    admins = (ClusterAdmin(alias="A", client=source), ClusterAdmin(alias="B", client=target))
    task = MetadataTask(
        settings(), TopicCatalog(), StatsRegistry("A", "B"), connect=lambda _s: admins
    )

    def trips() -> int:
        return source.round_trips + target.round_trips

    def change_one() -> None:
        source.overrides["topic-1"] = {"retention.ms": "1000"}

    def cycle() -> dict[str, Any]:
        before = trips()
        seconds, _ = cpu(task.sync_topic_configs)
        return {"cpu_s": round(seconds, 4), "round_trips": trips() - before}

    out: dict[str, Any] = {"full": cycle()}  # the first: every remote topic is compared
    # a round of cycles with nothing changed: each compares the tenth of the topics whose turn
    # it is (every remote topic once per round)
    rounds = [cycle() for _ in range(CONFIGS_FULL_EVERY)]
    out["unchanged"] = max(rounds, key=lambda r: r["cpu_s"])
    out["unchanged_mean_cpu_s"] = round(sum(r["cpu_s"] for r in rounds) / len(rounds), 4)
    change_one()
    out["one_changed"] = cycle()
    assert target.overrides["A.topic-1"] == {"retention.ms": "1000"}
    return out


# -- checkpoints ---------------------------------------------------------------------------------


class FakeGroups:
    """``GroupAdmin`` as the checkpoint task uses it, answering from memory. ``requests`` counts
    the requests a broker would get; ``round_trips`` the waits for them (a batch of up to
    ``IN_FLIGHT`` concurrent requests is one)."""

    def __init__(self, offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]]) -> None:
        self.offsets = offsets
        self.requests = 0
        self.round_trips = 0

    def _trip(self, requests: int) -> None:
        from mirrorlib.kafka.groups import IN_FLIGHT

        self.requests += requests
        self.round_trips += -(-requests // IN_FLIGHT) if requests else 0

    def list_groups(self) -> list[str]:
        self._trip(1)
        return list(self.offsets)

    def committed_offsets_many(
        self, groups: Iterable[str]
    ) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
        wanted = list(groups)
        self._trip(len(wanted))
        return {g: dict(self.offsets.get(g, {})) for g in wanted}

    def states(self, groups: list[str]) -> dict[str, Any]:
        from mirrorlib.kafka.groups import GroupState

        self._trip(1)
        return {g: GroupState.EMPTY for g in groups}

    def commit_offsets_many(
        self, offsets: Mapping[str, Mapping[TopicPartition, Any]]
    ) -> dict[str, None]:
        self._trip(len(offsets))
        for group, committed in offsets.items():
            self.offsets[group] = {tp: OffsetAndMetadata(om.offset) for tp, om in committed.items()}
        return dict.fromkeys(offsets)


class FakeProducer:
    """Acknowledges every record at the next flush (one flush: one round trip)."""

    def __init__(self) -> None:
        self.pending: list[Callable[[Any, Any], None]] = []
        self.records = 0
        self.flushes = 0

    def produce(self, *_: Any, on_delivery: Callable[[Any, Any], None], **__: Any) -> None:
        self.records += 1
        self.pending.append(on_delivery)

    def flush(self, *_: Any) -> int:
        self.flushes += 1
        pending, self.pending = self.pending, []
        for done in pending:
            done(None, None)
        return 0


class SyncRecord:
    """A consumer record of the offset-syncs topic, as ``CheckpointTask.take_syncs`` reads it."""

    __slots__ = ("_key", "_offset", "_value")

    def __init__(self, sync: OffsetSync, offset: int) -> None:
        self._key, self._value, self._offset = sync.encode_key(), sync.encode_value(), offset

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes:
        return self._value

    def headers(self) -> None:
        return None

    def timestamp(self) -> tuple[int, int]:
        return (1, 1_700_000_000_000)

    def topic(self) -> str:
        return "mm2-offset-syncs.B.internal"

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset


def sync_partitions() -> list[tuple[str, int]]:
    return [(f"t{i // 20}", i % 20) for i in range(SYNC_PARTITIONS)]


def sync_records(per_partition: int) -> Iterator[SyncRecord]:
    """``per_partition`` syncs of every sync partition, interleaved as a copier writes them."""
    parts = sync_partitions()
    n = 0
    for k in range(per_partition):
        for topic, partition in parts:
            yield SyncRecord(OffsetSync(topic, partition, k * 100, k * 100), n)
            n += 1


def bench_checkpoints(size: int) -> dict[str, Any]:
    """One checkpoint cycle (``CheckpointTask.emit_checkpoints``) in both ways of learning the
    groups' commits: from ``__consumer_offsets`` (``take_commits``; here fed with
    ``CheckpointTask.commits.put``) and by OffsetFetch (the fallback); then group offset sync."""
    groups = max(size // 10, 1)
    parts = sync_partitions()
    top = SYNCS_PER_PARTITION * 100

    def committed(shift: int) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
        return {
            f"group-{g}": {
                TopicPartition(*parts[(g + j) % len(parts)]): OffsetAndMetadata(
                    top - 1 - ((g + j + shift) % 5000)
                )
                for j in range(GROUP_PARTITIONS)
            }
            for g in range(groups)
        }

    out: dict[str, Any] = {"groups": groups, "pairs": groups * GROUP_PARTITIONS}
    records = list(sync_records(SYNCS_PER_PARTITION))
    for mode in ("commits", "offset_fetch"):
        task = CheckpointTask(settings(), StatsRegistry("A", "B"))
        task.take_syncs(records)
        source, producer = FakeGroups(committed(0)), FakeProducer()
        task.groups = list(source.offsets)
        for name, shift in (("all_changed", 0), ("unchanged", None), ("all_changed_again", 7)):
            if shift is not None:
                source.offsets = committed(shift)
                if mode == "commits":
                    for group, offsets in source.offsets.items():
                        for tp, om in offsets.items():
                            task.commits.put(group, tp, om, 1_700_000_000_000)
            trips, flushes = source.round_trips, producer.flushes
            reader = source if mode == "offset_fetch" else None
            collected = GcTime()
            seconds, result = cpu(
                partial(with_gc_time, collected, task.emit_checkpoints, producer, source=reader)
            )
            out[f"{mode}_{name}"] = {
                "cpu_s": round(seconds, 3),
                "gc_s": round(collected.seconds, 3),
                "full_collections": collected.full,
                "round_trips": source.round_trips - trips + producer.flushes - flushes,
                "translated": result.translated,
                "produced": result.produced,
            }
        if mode == "commits":
            target = FakeGroups({})
            seconds, _ = cpu(partial(task.sync_group_offsets, target))
            out["group_sync"] = {
                "cpu_s": round(seconds, 3),
                "round_trips": target.round_trips,
                "requests": target.requests,
            }
    return out


def bench_intake(count: int) -> dict[str, Any]:
    task = CheckpointTask(settings(), StatsRegistry("A", "B"))
    records = list(sync_records(max(count // SYNC_PARTITIONS, 1)))
    seconds, taken = cpu(lambda: task.take_syncs(records))
    return {"syncs": taken, "cpu_s": round(seconds, 3), "syncs_per_s": int(taken / seconds)}


class LogRecord(SyncRecord):
    """A consumer record of an internal topic, from its key and value bytes."""

    def __init__(self, key: bytes, value: bytes, offset: int) -> None:
        self._key, self._value, self._offset = key, value, offset


def bench_replay(size: int) -> dict[str, Any]:
    """Start-up replay, as a new checkpoint task reads its internal topics before its first
    cycle: the offset-syncs topic (``REPLAY_SYNCS`` syncs of each of P partitions, interleaved;
    the topic is compacted by partition, so this is what it holds between two compactions)
    through ``take_syncs`` in batches of ``_SYNC_BATCH``, and the checkpoints topic (P/10
    groups x 20 partitions) through ``take_checkpoints``, record by record as ``read_to_end``
    delivers it. The records are built beforehand (not timed)."""
    task = CheckpointTask(settings(), StatsRegistry("A", "B"))
    syncs: list[SyncRecord] = []
    for k in range(REPLAY_SYNCS):
        for p in range(size):
            sync = OffsetSync(f"t{p // 10}", p % 10, k * 100, k * 100)
            syncs.append(LogRecord(sync.encode_key(), sync.encode_value(), len(syncs)))
    batch = 10_000  # what poll_batch / read_to_end hand over at most (_SYNC_BATCH)

    def take_all_syncs() -> int:
        return sum(task.take_syncs(syncs[i : i + batch]) for i in range(0, len(syncs), batch))

    gc.collect()
    sync_s, taken = cpu(take_all_syncs)
    syncs.clear()
    checkpoints: list[SyncRecord] = []
    for g in range(max(size // 10, 1)):
        for p in range(GROUP_PARTITIONS):
            cp = Checkpoint(f"group-{g}", f"B.t{p}", p % 10, 1000 + g, 990 + g, "")
            checkpoints.append(LogRecord(cp.encode_key(), cp.encode_value(), len(checkpoints)))
    gc.collect()
    cp_s, kept = cpu(lambda: sum(task.take_checkpoints((r,)) for r in checkpoints))
    return {
        "syncs": taken,
        "syncs_cpu_s": round(sync_s, 3),
        "syncs_per_s": int(taken / sync_s),
        "checkpoints": kept,
        "checkpoints_cpu_s": round(cp_s, 3),
        "checkpoints_per_s": int(kept / cp_s),
    }


def bench_translator(size: int, per_partition: int = 20) -> dict[str, Any]:
    syncs = [OffsetSync(f"t{p // 10}", p % 10, 0, 0) for p in range(size)]
    gc.collect()
    tracemalloc.start()
    try:
        translator = OffsetTranslator()
        for k in range(per_partition):
            for s in syncs:
                translator.add(OffsetSync(s.topic, s.partition, k * 100, k * 100))
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del translator
    return {"partitions": size, "syncs": size * per_partition, "mib": round(held / 2**20, 1)}


# -- scrape --------------------------------------------------------------------------------------


def bench_scrape(size: int) -> dict[str, Any]:
    """Scrapes of P partitions in P/10 topics: caught up and idle (nothing changed, rates
    settled at 0), then with records waiting in 2 of 3 partitions and nothing moving (their lag
    in seconds grows: those samples change), then after every partition moved."""
    from mirrorlib.runtime.prometheus import Exposition, ReplicatorCollector

    stats = StatsRegistry("A", "B")
    now_ms = int(time.time() * 1000)
    parts = []
    for i in range(size):
        p = stats.partition(f"t{i // 10}", i % 10, f"A.t{i // 10}")
        p.position, p.end_offset = 1000 + i, 1000 + i
        p.record_count, p.byte_count, p.tail_timestamp_ms = 1000 + i, 10**6 + i, now_ms - 500
        p.latency.record(40.0 + i % 100)
        p.age.record(20.0 + i % 50)
        parts.append(p)

    class Flows:
        def flow_stats(self) -> list[StatsRegistry]:
            return [stats]

    class Scraped:
        def flow_metrics(self) -> list[Any]:
            return [stats.scrape()]

    exposition = Exposition(Flows())  # type: ignore[arg-type]
    clock = time.monotonic()  # scrapes a minute apart: the rates of idle partitions settle at 0
    first, text = cpu(lambda: exposition.render(clock + 60))
    exposition.render(clock + 120)
    idle, _ = cpu(lambda: exposition.render(clock + 180))
    for i, p in enumerate(parts):
        p.end_offset = 1000 + i + (i % 3)
    exposition.render(clock + 240)
    lagging, _ = cpu(lambda: exposition.render(clock + 300))
    reader = stats.cursor()  # the same reads without writing text: the cursor's share
    reader.read(clock + 300)

    def move_all() -> None:  # what a busy flow does between two scrapes
        for k, p in enumerate(parts):
            p.record_count += 10
            p.byte_count += 1000
            p.position = (p.position or 0) + 10
            p.end_offset = p.position + k % 3
            if k % 10 == 0:
                p.latency.record(50.0)
                p.age.record(30.0)

    move_all()
    changed, _ = cpu(lambda: exposition.render(clock + 360))
    cursor_changed, _ = cpu(lambda: reader.read(clock + 360))
    gc.collect()
    blocks = sys.getallocatedblocks()
    held = stats.scrape()  # what one full (prometheus-client) scrape holds before it is written
    objects = sys.getallocatedblocks() - blocks
    del held
    full = Exposition(Scraped())  # type: ignore[arg-type]
    full.render()
    seconds, _ = cpu(full.render)
    out: dict[str, Any] = {
        "partitions": size,
        "first_cpu_s": round(first, 3),
        "unchanged_cpu_s": round(idle, 3),
        "lagging_cpu_s": round(lagging, 3),
        "all_changed_cpu_s": round(changed, 3),
        "all_changed_cursor_cpu_s": round(cursor_changed, 3),
        "full_render_cpu_s": round(seconds, 3),
        "bytes": len(text),
        "objects_held": objects,
    }
    try:
        import prometheus_client
    except ImportError:
        return out
    registry = prometheus_client.CollectorRegistry()
    registry.register(ReplicatorCollector(Scraped()))  # type: ignore[arg-type]
    seconds, _ = cpu(lambda: prometheus_client.generate_latest(registry))
    out["prometheus_client_cpu_s"] = round(seconds, 3)
    return out


# -- verify --------------------------------------------------------------------------------------


def bench_verify(records: int) -> dict[str, Any]:
    from mirrorlib.core.audit import compare_partition

    def side() -> Iterator[tuple[int, bytes]]:
        return ((o, o.to_bytes(16, "little")) for o in range(records))

    tracemalloc.start()
    try:
        seconds, audit = cpu(
            lambda: compare_partition(
                "t",
                0,
                "A.t",
                side(),
                side(),
                replicated_up_to=records,
                bucket_records=VERIFY_HELD_RECORDS,
            )
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert audit.ok and audit.matched == records
    return {
        "records_per_side": records,
        "peak_mib": round(peak / 2**20, 1),
        "cpu_s": round(seconds, 2),
    }


# -- report --------------------------------------------------------------------------------------


def markdown(results: dict[str, Any]) -> str:
    rows = ["| what | " + " | ".join(f"{s:,}" for s in results["sizes"]) + " |"]
    rows.append("|---|" + "---|" * len(results["sizes"]))

    def row(label: str, section: str, fmt: Callable[[dict[str, Any]], str]) -> None:
        if section not in results:
            return
        cells = [fmt(results[section][str(s)]) for s in results["sizes"]]
        rows.append(f"| {label} | " + " | ".join(cells) + " |")

    row(
        "metadata refresh, first (creates all) — CPU-s / round trips",
        "metadata",
        lambda r: f"{r['first']['cpu_s']} / {r['first']['round_trips']}",
    )
    row(
        "metadata refresh, nothing changed",
        "metadata",
        lambda r: f"{r['unchanged']['cpu_s']} / {r['unchanged']['round_trips']}",
    )
    row(
        "metadata refresh, one new topic",
        "metadata",
        lambda r: f"{r['one_new_topic']['cpu_s']} / {r['one_new_topic']['round_trips']}",
    )
    row(
        "topic config sync, first cycle (every remote compared, once) — CPU-s / round trips",
        "configs",
        lambda r: f"{r['full']['cpu_s']} / {r['full']['round_trips']}",
    )
    row(
        f"topic config sync, nothing changed (worst of {CONFIGS_FULL_EVERY} cycles, each "
        f"comparing its 1/{CONFIGS_FULL_EVERY}; mean) / one topic's configs changed",
        "configs",
        lambda r: (
            f"{r['unchanged']['cpu_s']} / {r['unchanged']['round_trips']} "
            f"(mean {r.get('unchanged_mean_cpu_s', '?')}); "
            f"{r['one_changed']['cpu_s']} / {r['one_changed']['round_trips']}"
        ),
    )
    row(
        "checkpoint cycle (groups x 20), all offsets changed, commits from `__consumer_offsets` — CPU-s / round trips",
        "checkpoints",
        lambda r: (
            f"{r['commits_all_changed_again']['cpu_s']} / "
            f"{r['commits_all_changed_again']['round_trips']} ({r['groups']:,} groups; GC "
            f"{r['commits_all_changed_again'].get('gc_s', '-')} CPU-s)"
        ),
    )
    row(
        "checkpoint cycle, nothing changed, commits from `__consumer_offsets`",
        "checkpoints",
        lambda r: f"{r['commits_unchanged']['cpu_s']} / {r['commits_unchanged']['round_trips']}",
    )
    row(
        "checkpoint cycle (groups x 20), all offsets changed, OffsetFetch fallback — CPU-s / round trips",
        "checkpoints",
        lambda r: (
            f"{r['offset_fetch_all_changed_again']['cpu_s']} / "
            f"{r['offset_fetch_all_changed_again']['round_trips']} ({r['groups']:,} groups; GC "
            f"{r['offset_fetch_all_changed_again'].get('gc_s', '-')} CPU-s)"
        ),
    )
    row(
        "checkpoint cycle, nothing changed, OffsetFetch fallback",
        "checkpoints",
        lambda r: (
            f"{r['offset_fetch_unchanged']['cpu_s']} / {r['offset_fetch_unchanged']['round_trips']}"
        ),
    )
    row(
        "group offset sync — round trips",
        "checkpoints",
        lambda r: (
            f"{r['group_sync']['round_trips']} for {r['group_sync']['requests']:,} requests "
            f"({r['group_sync']['cpu_s']} CPU-s)"
        ),
    )
    row("translator, 20 syncs/partition — MiB (traced)", "translator", lambda r: f"{r['mib']}")
    row(
        f"start-up replay: offset syncs ({REPLAY_SYNCS} per partition) — CPU-s (syncs/s)",
        "replay",
        lambda r: f"{r['syncs_cpu_s']} ({r['syncs_per_s']:,}/s)",
    )
    row(
        "start-up replay: checkpoints (groups x 20) — CPU-s (checkpoints/s)",
        "replay",
        lambda r: f"{r['checkpoints_cpu_s']} ({r['checkpoints']:,}; {r['checkpoints_per_s']:,}/s)",
    )
    row(
        "scrape (`/metrics`, Exposition): idle / 2 of 3 lagging, none moving / every partition"
        " moved — CPU-s",
        "scrape",
        lambda r: f"{r['unchanged_cpu_s']} / {r['lagging_cpu_s']} / {r['all_changed_cpu_s']}",
    )
    row(
        "scrape, every partition moved: of which reading the changes (`MetricsCursor.read`)"
        " — CPU-s",
        "scrape",
        lambda r: f"{r.get('all_changed_cursor_cpu_s', '-')}",
    )
    row(
        "scrape, first / written in full (`flow_metrics`) — CPU-s",
        "scrape",
        lambda r: f"{r['first_cpu_s']} / {r['full_render_cpu_s']}",
    )
    row(
        "scrape via prometheus-client (ReplicatorCollector) — CPU-s",
        "scrape",
        lambda r: f"{r.get('prometheus_client_cpu_s', '-')}",
    )
    row(
        "scrape size — MB / objects held",
        "scrape",
        lambda r: f"{r['bytes'] / 1e6:.1f} / {r['objects_held']:,}",
    )
    row(
        "verify, 10·P records per side — peak MiB",
        "verify",
        lambda r: f"{r['peak_mib']} ({r['cpu_s']} CPU-s)",
    )
    intake = results.get("intake")
    text = (
        f"Control plane, {results['when']} (commit {results['commit']}; CPU-s of this process, "
        f"fakes answer at once; machine shared, timings noisy)\n\n" + "\n".join(rows) + "\n"
    )
    if intake is not None:
        text += (
            f"\nOffset-sync intake (`take_syncs`: decode + translator): {intake['syncs_per_s']:,} "
            f"syncs per CPU-second ({intake['syncs']:,} syncs).\n"
        )
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.controlplane", description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,100000", help="partition counts")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated parts to run (e.g. scrape,configs); all if empty",
    )
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    only = {s for s in args.only.split(",") if s}
    commit = os.popen("git rev-parse --short HEAD 2>/dev/null").read().strip() or "?"
    results: dict[str, Any] = {
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit,
        "sizes": sizes,
    }
    for name, fn in (
        ("metadata", bench_metadata),
        ("configs", bench_configs),
        ("checkpoints", bench_checkpoints),
        ("translator", bench_translator),
        ("replay", bench_replay),
        ("scrape", bench_scrape),
        ("verify", lambda s: bench_verify(10 * s)),
    ):
        if only and name not in only:
            continue
        results[name] = {}
        for size in sizes:
            print(f"{name} {size:,} ...", file=sys.stderr, flush=True)
            results[name][str(size)] = fn(size)
    if not only or "intake" in only:
        results["intake"] = bench_intake(200_000)
    text = markdown(results)
    print(text)
    if not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y-%m-%d-%H%M")
        (RESULTS / f"controlplane-{stamp}.json").write_text(json.dumps(results, indent=2) + "\n")
        (RESULTS / f"controlplane-{stamp}.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
