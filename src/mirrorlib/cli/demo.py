"""``mirrorlib demo``: disaster recovery end to end, locally.

1. starts two local Kafka clusters, ``A`` (primary) and ``B`` (standby);
2. produces orders to ``orders`` on ``A``;
3. replicates ``A->B`` with an embedded :class:`~mirrorlib.Replicator` (``orders`` becomes
   ``A.orders`` on ``B``, with checkpoints for consumer groups);
4. a consumer group ``billing`` reads part of the orders on ``A`` and stops (``A`` "fails");
5. :func:`mirrorlib.runtime.failover.failover` moves the group's offsets to ``B``;
6. the group resumes on ``B`` and the demo shows that it starts right after the last record it
   processed on ``A`` — nothing lost, nothing re-read.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mirrorlib.core.config import MirrorConfig
    from mirrorlib.core.failover import FailoverPlan

__all__ = ["consume_and_commit", "run_demo"]


def _say(text: str = "") -> None:
    print(text, flush=True)


def _wait(what: str, probe: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise RuntimeError(f"demo: timed out waiting for {what}")
        time.sleep(0.3)


def consume_and_commit(
    bootstrap_conf: dict[str, Any],
    group: str,
    topic: str,
    limit: int,
    timeout: float = 30.0,
    idle: float | None = None,
) -> list[Any]:
    from mirrorlib.kafka import new_consumer

    consumer = new_consumer(
        {
            **bootstrap_conf,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    quiet_since = time.monotonic()
    try:
        while len(got) < limit and time.monotonic() < deadline:
            for msg in consumer.consume(min(100, limit - len(got)), timeout=0.5):
                if msg.error() is None:
                    got.append(msg)
                    quiet_since = time.monotonic()
            if idle is not None and got and time.monotonic() - quiet_since > idle:
                break
        if got:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


def run_demo(
    records: int = 300,
    *,
    clusters: Sequence[Any] | None = None,
    topic: str = "orders",
    group: str = "billing",
    stop_primary: bool = True,
) -> dict[str, Any]:
    """Run the demo, printing a narrative; returns what happened (for tests).

    Takes well under a minute once Kafka's jars are cached. ``clusters`` (two started
    :mod:`mirrorlib.testing` clusters ``A`` and ``B``) replaces starting new ones; with
    ``stop_primary=False`` cluster ``A`` stays up (the failover then translates with the offset
    syncs instead of the checkpoints).
    """
    import logging

    from mirrorlib.testing import start_clusters

    logging.getLogger("mirrorlib.librdkafka").setLevel(logging.ERROR)
    logging.getLogger("mirrorlib.kafka.client.librdkafka").setLevel(logging.ERROR)
    started = time.monotonic()
    _say("mirrorlib demo: disaster recovery for a consumer group, on two local Kafka clusters")
    _say()
    _say("1. starting clusters A (primary) and B (standby) ...")
    with contextlib.ExitStack() as stack:
        if clusters is None:
            a, b = stack.enter_context(start_clusters(["A", "B"]))
        else:
            a, b = clusters[0], clusters[1]
        _say(f"   A at {a.bootstrap_servers}, B at {b.bootstrap_servers} "
             f"({time.monotonic() - started:.0f}s)")  # fmt: skip
        _produce_orders(a, topic, records)
        config = _demo_config(a, b, topic)
        seen = _replicate_and_consume(config, a, b, topic, group, records)
        plan = _fail_over(config, a, group, stop_primary=stop_primary)
        resumed = _resume_on_b(b, topic, group, records, seen)
        values = {m.value() for m in seen}
        again = sum(1 for m in resumed if m.value() in values)
        total = len(values | {m.value() for m in resumed})
        _say(f"   {len(resumed)} records read on B; re-read: {again}; "
             f"orders processed overall: {total} of {records}")  # fmt: skip
        _say()
        verdict = "nothing lost" if total == records else "SOMETHING WAS LOST"
        _say(f"done in {time.monotonic() - started:.0f}s: {verdict}, {again} re-read.")
        return {"plan": plan, "processed": total, "re_read": again, "records": records}
    raise AssertionError("unreachable")  # pragma: no cover


def _produce_orders(a: Any, topic: str, records: int) -> None:
    """Step 2: ``records`` orders to ``topic`` (3 partitions) on cluster ``a``."""
    from mirrorlib.kafka import new_producer

    a.create_topic(topic, 3)
    producer = new_producer(a.client_config())
    for i in range(records):
        producer.produce(topic, key=f"customer-{i % 17}", value=f"order #{i}",
                         partition=i % 3)  # fmt: skip
    producer.flush(30)
    del producer
    _say(f"2. produced {records} orders to 'orders' on A (3 partitions)")


def _demo_config(a: Any, b: Any, topic: str) -> MirrorConfig:
    """Flow ``A->B`` of ``topic``, sized for single-broker clusters and quick checkpoints."""
    from mirrorlib import MirrorConfig

    return MirrorConfig.from_properties(
        {
            "clusters": "A, B",
            "A.bootstrap.servers": a.bootstrap_servers,
            "B.bootstrap.servers": b.bootstrap_servers,
            "A->B.enabled": "true",
            "A->B.topics": topic.replace(".", "\\."),
            "replication.factor": "1",
            "checkpoints.topic.replication.factor": "1",
            "heartbeats.topic.replication.factor": "1",
            "offset-syncs.topic.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "offset.storage.partitions": "1",
            "emit.checkpoints.interval.seconds": "1",
            "refresh.groups.interval.seconds": "1",
            "B.offset.flush.interval.ms": "500",
        }
    )


def _replicate_and_consume(
    config: MirrorConfig, a: Any, b: Any, topic: str, group: str, records: int
) -> list[Any]:
    """Steps 3 and 4: replicate everything, let ``group`` process half of it on ``a`` and wait
    for its checkpoints on ``b``. Returns the records the group processed."""
    from mirrorlib import Replicator

    _say("3. replicating A->B with an embedded Replicator (the same mm2.properties keys) ...")
    with Replicator(config) as replicator:

        def copied() -> bool:
            status = replicator.status()[0]
            return sum(p.record_count for p in status.partitions
                       if p.topic == topic) >= records  # fmt: skip

        _wait("replication", copied)
        _say(f"   {topic!r} on A is now 'A.{topic}' on B: {records} records copied")

        seen = consume_and_commit(a.client_config(), group, topic, records // 2)
        last = {m.partition(): m.offset() for m in seen}
        _say(f"4. consumer group {group!r} processed {len(seen)} orders on A and committed; "
             "then A 'fails'")  # fmt: skip
        for p in sorted(last):
            _say(f"   partition {p}: last processed offset {last[p]}")
        committed = {p: o + 1 for p, o in last.items()}
        _wait("checkpoints", lambda: _checkpointed(b, group) == committed, timeout=30)
        _say("   mirrorlib has written checkpoints for the group on B (A.checkpoints.internal)")
    return seen


def _fail_over(config: MirrorConfig, a: Any, group: str, *, stop_primary: bool) -> FailoverPlan:
    """Step 5: (stop ``a`` and) move ``group`` to cluster B."""
    from mirrorlib.runtime.failover import failover

    if stop_primary:
        _say("5. cluster A goes down (stopped for real) ...")
        a.stop()
    else:
        _say("5. (cluster A stays up in this run)")
    source = "the checkpoints on B" if stop_primary else "the offset syncs of A->B"
    _say(f"   failover: mirrorlib translates the group's offsets with {source}")
    _say("   and commits them there (only because the group is not active on B)")
    plan = failover(config, group, "A", "B", timeout=5.0)
    for line in plan.describe().splitlines():
        _say("   " + line)
    return plan


def _resume_on_b(b: Any, topic: str, group: str, records: int, seen: list[Any]) -> list[Any]:
    """Step 6: ``group`` consumes the copy on ``b``; shows where each partition resumed compared
    with what it processed on A (``seen``). Returns the records it read."""
    _say(f"6. {group!r} resumes on B (topic A.{topic}) from the committed offsets:")
    resumed = consume_and_commit(b.client_config(), group, f"A.{topic}", records, idle=2.0)
    first: dict[int, Any] = {}
    for m in resumed:
        first.setdefault(m.partition(), m)
    for p in range(3):
        on_a = _value_at(seen, p)
        done_a = f"processed up to {on_a!r}" if on_a else "processed nothing"
        if p in first:
            m = first[p]
            _say(f"   partition {p}: on A it {done_a}; on B it resumes at offset "
                 f"{m.offset()} with {m.value().decode()!r}")  # fmt: skip
        else:
            _say(f"   partition {p}: on A it {done_a}; nothing left to read on B")
    return resumed


def _value_at(seen: list[Any], partition: int) -> str:
    mine = [m for m in seen if m.partition() == partition]
    return "" if not mine else str(mine[-1].value().decode())


def _checkpointed(cluster: Any, group: str) -> dict[int, int]:
    """Upstream offsets of the group's checkpoints on ``cluster``, per partition."""
    from mirrorlib.kafka.client import MirrorClient

    try:
        with MirrorClient(cluster.client_config(), alias=cluster.alias, timeout=10) as client:
            return {
                tp.partition: cp.upstream_offset
                for (g, tp), cp in client.checkpoints("A", timeout=10).items()
                if g == group
            }
    except Exception:
        return {}
