"""A consumer application that fails over to the standby cluster.

The application consumes ``orders`` on the primary cluster with consumer group ``billing``. When
the primary is lost, the operator (or the application itself) moves the group to the standby:

1. stop consuming on the primary (the group must not be active there);
2. ``mirrorlib.runtime.failover.failover(config, "billing", "primary", "standby")`` — or the command
   ``mirrorlib failover --group billing --from primary --to standby mm2.properties`` — commits the
   translated offsets on the standby (never rewinding the group there);
3. consume the remote topic ``primary.orders`` on the standby with the same group id: the consumer
   starts from the committed offsets, so nothing is lost and (with exact translation) nothing is
   read twice.

Run it: ``python examples/failover_client.py mm2.properties --group billing --topic orders``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from confluent_kafka import Consumer

from mirrorlib import MirrorConfig
from mirrorlib.errors import FailoverRefusedError
from mirrorlib.runtime.failover import failover


def resume_on(
    config: MirrorConfig, group: str, topic: str, source: str, target: str, idle: float = 3.0
) -> list[Any]:
    """Fail ``group`` over from ``source`` to ``target`` and consume the remote copy of ``topic``
    there until nothing new arrives for ``idle`` seconds; returns the records read."""
    try:
        plan = failover(config, group, source, target)
    except FailoverRefusedError as exc:
        print(exc.plan.describe())
        raise
    print(plan.describe())
    remote = config.flow(source, target).policy.format_remote_topic(source, topic)
    consumer = Consumer(
        {
            **config.client_config(target, "consumer"),
            "group.id": group,
            "auto.offset.reset": "earliest",  # partitions the group never consumed
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([remote])
    records: list[Any] = []
    last = time.monotonic()
    try:
        while time.monotonic() - last < idle:
            batch = [m for m in consumer.consume(500, timeout=0.5) if m.error() is None]
            records.extend(batch)  # process the records here
            if batch:
                consumer.commit(asynchronous=False)
                last = time.monotonic()
    finally:
        consumer.close()
    starts: dict[int, int] = {}
    for msg in records:
        starts.setdefault(msg.partition(), msg.offset())
    for partition, offset in sorted(starts.items()):
        print(f"{remote}-{partition}: resumed at offset {offset}")
    print(f"read {len(records)} record(s) on {target}")
    return records


def main(argv: list[str] | None = None) -> list[Any]:
    parser = argparse.ArgumentParser(description="fail a consumer group over and resume it")
    parser.add_argument("config", help="mm2.properties")
    parser.add_argument("--group", default="billing")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--from", dest="source", default="primary")
    parser.add_argument("--to", dest="target", default="standby")
    args = parser.parse_args(argv)
    config = MirrorConfig.from_file(args.config)
    return resume_on(config, args.group, args.topic, args.source, args.target)


if __name__ == "__main__":
    main()
