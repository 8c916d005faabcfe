"""``python -m mirrorlib.demo``: MM2's internal records and naming on two live local clusters."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer

from mirrorlib import Checkpoint, DefaultReplicationPolicy, Heartbeat, OffsetSync
from mirrorlib.testing import start_clusters


def main() -> None:
    policy = DefaultReplicationPolicy()
    print("starting two local Kafka clusters (A and B) ...")
    started = time.monotonic()
    with start_clusters(["A", "B"]) as (a, b):
        print(
            f"  A at {a.bootstrap_servers}, B at {b.bootstrap_servers} ({time.monotonic() - started:.1f}s)"
        )
        remote = policy.format_remote_topic("A", "orders")
        print(f"topic 'orders' on A is replicated to B as {remote!r}")
        records: list[tuple[str, Checkpoint | Heartbeat | OffsetSync]] = [
            (policy.heartbeats_topic(), Heartbeat("A", "B", int(time.time() * 1000))),
            (policy.checkpoints_topic("A"), Checkpoint("payments", remote, 0, 100, 95)),
            (policy.offset_syncs_topic("A"), OffsetSync("orders", 0, 100, 95)),
        ]
        producer = Producer(b.client_config())
        for topic, record in records:
            b.create_topic(topic, config={"cleanup.policy": "compact"})
            producer.produce(topic, record.encode_value(), record.encode_key(), 0)
        producer.flush(10)
        consumer = Consumer(
            {**b.client_config(), "group.id": "demo", "auto.offset.reset": "earliest"}
        )
        consumer.subscribe([t for t, _ in records])
        decoders: dict[str, type[Checkpoint | Heartbeat | OffsetSync]] = {
            t: type(r) for t, r in records
        }
        seen = 0
        deadline = time.monotonic() + 30
        while seen < len(records) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            decoded = decoders[str(msg.topic())].decode(msg.key(), msg.value())
            print(
                f"  B/{msg.topic()}: {decoded}  (key {len(msg.key() or b'')} B, value {len(msg.value() or b'')} B)"
            )
            seen += 1
        consumer.close()
    print("done: clusters stopped")


if __name__ == "__main__":
    main()
