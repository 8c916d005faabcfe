"""The ceiling: a bare confluent-kafka (librdkafka) consume-and-produce loop.

``python -m bench.bareloop SOURCE TARGET PREFIX TOPIC...`` copies every partition of the topics
from the beginning to ``PREFIX + topic`` on the target, same partition, key, value, headers and
timestamp, with the producer settings mirrorlib uses (idempotent, acks=all, linger.ms=5,
batch.size=1000000). No positions, no offset syncs, no delivery bookkeeping: what no replicator
built on the same client can beat. Stops on SIGTERM.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def main() -> None:
    source, target, prefix, *topics = sys.argv[1:]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    consumer = Consumer(
        {
            "bootstrap.servers": source,
            "group.id": "bench-bareloop",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": target,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 500_000,
            "queue.buffering.max.kbytes": 1_048_576,
        }
    )
    meta = consumer.list_topics(timeout=10)
    # the target has auto.create.topics.enable=false: create the copies, same partition counts
    admin = AdminClient({"bootstrap.servers": target})
    new = [NewTopic(prefix + t, len(meta.topics[t].partitions), 1) for t in topics]
    for future in admin.create_topics(new).values():
        with contextlib.suppress(KafkaException):  # already there
            future.result(30)
    consumer.assign(
        [
            TopicPartition(t, p, OFFSET_BEGINNING)
            for t in topics
            for p in sorted(meta.topics[t].partitions)
        ]
    )
    produce = producer.produce
    while not stop.is_set():
        # block only until the first record, then drain what is already fetched: consume(n, t)
        # alone waits the whole timeout unless n records arrive (a 100 ms latency floor)
        first = consumer.poll(0.1)
        if first is None:
            producer.poll(0)
            continue
        for msg in [first, *consumer.consume(9_999, timeout=0)]:
            if msg.error() is not None:
                continue
            ts = msg.timestamp()[1]
            args = (prefix + msg.topic(), msg.value(), msg.key(), msg.partition())
            while True:
                try:
                    produce(*args, timestamp=ts if ts > 0 else 0, headers=msg.headers())
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.poll(0)
    producer.flush(10)
    consumer.close()


if __name__ == "__main__":
    main()
