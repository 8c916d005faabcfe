"""Batch failover against one failover per group, at 1,000 groups (issue 37, item 4).

``flock /work/bench.lock python -m bench.failover_many [--groups 1000] [--singles-budget 75]``

Starts two local clusters; commits offsets for ``--groups`` consumer groups on A (4 partitions
of one topic each, all different), replicates A -> B with a :class:`~mirrorlib.Replicator`
until B holds a checkpoint of every group, then stops it, and commits offset 0 for every group
on B (so that both sides below find the same thing: an empty group behind the translation).
Then, with nothing else running:

* **batch** — :func:`mirrorlib.runtime.failover.failover_groups` with ``all_groups=True``:
  every group planned and committed on B;
* the groups' offsets on B are set back to 0 (as before the batch), and
* **single** — :func:`mirrorlib.runtime.failover.failover` once per group, in turn, until every
  group was failed over or ``--singles-budget`` seconds passed (then the time of all of them is
  extrapolated from the mean of those run, and the result says so).

Round trips are counted the same way for both, by wrapping the calls that send requests:
probing the clusters, describing groups (one call, however many groups, counts once), reading
committed offsets and committing them (one per :data:`~mirrorlib.kafka.groups.IN_FLIGHT` groups
sent together, one per group alone), reading the checkpoints topic and an offset-syncs topic
(one each). Both sides commit the same offsets (checked). Result:
``bench/results/<time>-failover-many.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

import mirrorlib.kafka.offset_syncs as offset_syncs_module
import mirrorlib.kafka.probe as probe_module
from mirrorlib import DefaultReplicationPolicy, MirrorConfig, Replicator, TopicPartition
from mirrorlib.core.records import OffsetAndMetadata
from mirrorlib.errors import ClusterError
from mirrorlib.kafka.client import MirrorClient
from mirrorlib.kafka.groups import IN_FLIGHT, GroupAdmin
from mirrorlib.runtime.failover import failover, failover_groups
from mirrorlib.testing import JvmOptions, mm2_properties, start_clusters

ROOT = Path(__file__).resolve().parent.parent
TOPIC = "fo-many"
PARTITIONS = 4

TRIPS: Counter[str] = Counter()


def _count(owner: Any, name: str, waves: Callable[..., int] = lambda *a, **k: 1) -> None:
    """Wrap ``owner.name`` so that each call adds ``waves(*args)`` round trips under ``name``."""
    original = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        TRIPS[name] += waves(*args, **kwargs)
        return original(*args, **kwargs)

    setattr(owner, name, counted)


def _instrument() -> None:
    many = lambda self, items, *a, **k: math.ceil(len(list(items)) / IN_FLIGHT)  # noqa: E731
    _count(probe_module, "unreachable")  # (check_reachable only on failure paths)
    _count(GroupAdmin, "states")
    _count(GroupAdmin, "describe_state")
    _count(GroupAdmin, "list_groups")
    _count(GroupAdmin, "committed_offsets")
    _count(GroupAdmin, "commit_offsets")
    _count(GroupAdmin, "committed_offsets_many", many)
    _count(GroupAdmin, "commit_offsets_many", many)
    _count(MirrorClient, "checkpoints")
    _count(offset_syncs_module, "read_offset_syncs")


def _offsets(i: int) -> dict[TopicPartition, OffsetAndMetadata]:
    return {TopicPartition(TOPIC, p): OffsetAndMetadata(1 + (i * 7 + p * 13) % 900)
            for p in range(PARTITIONS)}  # fmt: skip


def _reset(admin: GroupAdmin, groups: list[str]) -> None:
    """Every group at offset 0 on B (before each side: both find the groups there, empty,
    behind the translation, and commit)."""
    zero = {TopicPartition(f"A.{TOPIC}", p): OffsetAndMetadata(0) for p in range(PARTITIONS)}
    failed = admin.commit_offsets_many(dict.fromkeys(groups, zero))
    assert not any(failed.values()), failed


def _on_b(admin: GroupAdmin, groups: list[str]) -> dict[str, dict[TopicPartition, int]]:
    read = admin.committed_offsets_many(groups)
    out: dict[str, dict[TopicPartition, int]] = {}
    for group, got in read.items():
        assert not isinstance(got, ClusterError), got
        out[group] = {tp: om.offset for tp, om in got.items()}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--groups", type=int, default=1000)
    p.add_argument("--singles-budget", type=float, default=75.0,
                   help="seconds the one-group failovers may take in all")  # fmt: skip
    p.add_argument("--out", default=str(ROOT / "bench/results"))
    args = p.parse_args(argv)
    groups = [f"fo-many-{i:04d}" for i in range(args.groups)]
    stamp = time.strftime("%Y-%m-%d-%H%M", time.gmtime())
    started = time.monotonic()
    with start_clusters(["A", "B"], jvm=JvmOptions(heap="1g", fast_jit=False)) as (a, b):
        a.create_topic(TOPIC, PARTITIONS)
        producer = Producer({**a.client_config(), "linger.ms": 20})
        for i in range(4000):
            producer.produce(TOPIC, value=b"x" * 100, partition=i % PARTITIONS)
        assert producer.flush(30) == 0
        GroupAdmin(a.client_config(), alias="A").commit_offsets_many(
            {g: _offsets(i) for i, g in enumerate(groups)}
        )
        props = mm2_properties(
            {"A": a.java_client_config(), "B": b.java_client_config()}, ["A->B"],
            topics=TOPIC, groups="fo-many-.*",
        )  # fmt: skip
        cfg = MirrorConfig.from_properties(props)
        setup_start = time.monotonic()
        with Replicator(cfg):
            deadline = time.monotonic() + 120
            while True:
                try:
                    with MirrorClient(b.client_config(), DefaultReplicationPolicy()) as client:
                        seen = {g for g, _ in client.checkpoints("A", timeout=10)}
                except ClusterError:
                    seen = set()
                if seen >= set(groups) or time.monotonic() > deadline:
                    break
                time.sleep(1)
        assert seen >= set(groups), f"{len(set(groups) - seen)} group(s) without checkpoints"
        setup_s = time.monotonic() - setup_start
        print(f"setup: {len(groups)} groups checkpointed in {setup_s:.1f}s", flush=True)

        admin_b = GroupAdmin(b.client_config(), alias="B")
        _reset(admin_b, groups)
        _instrument()
        TRIPS.clear()
        t0 = time.monotonic()
        batch = failover_groups(cfg, [], "A", "B", all_groups=True, timeout=30)
        batch_s = time.monotonic() - t0
        batch_trips = dict(TRIPS)
        assert batch.failed == (), batch.failed
        assert len(batch.results) == len(groups)
        after_batch = _on_b(admin_b, groups)
        print(f"batch: {len(groups)} groups in {batch_s:.2f}s, {sum(batch_trips.values())} "
              f"round trips (its own count: {batch.round_trips})", flush=True)  # fmt: skip

        _reset(admin_b, groups)
        TRIPS.clear()
        singles: list[float] = []
        t0 = time.monotonic()
        for group in groups:
            s0 = time.monotonic()
            plan = failover(cfg, group, "A", "B", timeout=30)
            singles.append(time.monotonic() - s0)
            assert plan.applied, plan.describe()
            if time.monotonic() - t0 > args.singles_budget:
                break
        single_trips = dict(TRIPS)
        measured = len(singles)
        after_singles = _on_b(admin_b, groups[:measured])
        assert all(after_singles[g] == after_batch[g] for g in groups[:measured])
    mean = sum(singles) / measured
    single_total = mean * len(groups)
    trips_per_group = sum(single_trips.values()) / measured
    doc = {
        "what": "batch failover (failover_groups, all groups with checkpoints) against one "
        "failover() per group, A -> B on local clusters, offsets committed by both",
        "groups": len(groups),
        "partitions_per_group": PARTITIONS,
        "setup_s": round(setup_s, 1),
        "batch": {
            "seconds": round(batch_s, 3),
            "round_trips": sum(batch_trips.values()),
            "by_call": batch_trips,
            "counted_by_batch": batch.round_trips,
        },
        "single": {
            "measured_groups": measured,
            "extrapolated": measured < len(groups),
            "seconds_measured": round(sum(singles), 3),
            "seconds_per_group_mean": round(mean, 4),
            "seconds_per_group_max": round(max(singles), 4),
            "seconds_for_all_groups": round(single_total, 1),
            "round_trips_per_group": round(trips_per_group, 2),
            "round_trips_for_all_groups": round(trips_per_group * len(groups)),
            "by_call": single_trips,
        },
        "ratio_time": round(single_total / batch_s, 1),
        "ratio_round_trips": round(trips_per_group * len(groups) / sum(batch_trips.values()), 1),
        "same_offsets_committed": True,
        "wall_s": round(time.monotonic() - started, 1),
    }
    print(json.dumps(doc, indent=1), flush=True)
    path = Path(args.out) / f"{stamp}-failover-many.json"
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
