"""Paced producer: ``python -m bench.pacer BOOTSTRAP TOPIC --rate R --seconds S --size B``.

Writes records round-robin over the topic's partitions at a fixed rate (``--rate 0``: as fast as
possible). Each value starts with ``>qqi``: the produce time (``time.time_ns()``), a per-partition
sequence number that equals the record's upstream offset (the topic has one idempotent writer at
a time, and the sequence starts at the partition's end offset), and the rate of the phase; the
rest is filler up to ``--size`` bytes. Prints one JSON line with the count when done.

``--linger-ms`` (paced rates only): how long the producer may hold a record to batch it with the
next ones. The produce time is taken before ``produce()``, so whatever the pacer holds a record
counts in the latency every contender is measured with. At 0 every record goes in its own
request: at 10,000 records/s that costs the pacer about half a core of this 2-core machine and
the source broker 10,000 requests a second.
"""

from __future__ import annotations

import argparse
import json
import struct
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

HEAD = struct.Struct(">qqi")


def decode(value: bytes) -> tuple[int, int, int]:
    """(produce time ns, sequence, phase rate) of a pacer record."""
    send_ns, seq, rate = HEAD.unpack_from(value)
    return send_ns, seq, rate


def _partitions_and_ends(
    meta: Consumer, topic: str, timeout: float = 30.0
) -> tuple[list[int], list[int]]:
    """The topic's partitions and their end offsets (the next sequence numbers), once every
    partition has a leader: right after the topic was created its metadata may list no
    partitions yet (the likely cause of a pacer that failed right after its topic was created in
    the run of 2026-11-25 14:18, whose stderr was not kept)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            md = meta.list_topics(topic, timeout=10).topics.get(topic)
            if (
                md is not None
                and md.error is None
                and md.partitions
                and all(p.leader >= 0 for p in md.partitions.values())
            ):
                parts = sorted(md.partitions)
                ends = [
                    meta.get_watermark_offsets(TopicPartition(topic, q), timeout=10)[1]
                    for q in parts
                ]
                return parts, ends
            problem = f"metadata {md.error if md is not None else 'without the topic'}"
        except KafkaException as exc:
            problem = str(exc)
        if time.monotonic() >= deadline:
            raise SystemExit(f"{topic}: partitions not ready after {timeout:.0f}s ({problem})")
        time.sleep(0.2)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("bootstrap")
    p.add_argument("topic")
    p.add_argument("--rate", type=float, default=1000)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--count", type=int, default=0, help="stop after this many records (0: time)")
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--linger-ms", type=float, default=0.0)
    args = p.parse_args()

    meta = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "bench-pacer-meta"})
    parts, seqs = _partitions_and_ends(meta, args.topic)
    meta.close()
    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": args.linger_ms if args.rate else 5,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    filler = b"x" * max(args.size - HEAD.size, 0)
    rate = int(args.rate)
    n = 0
    start = time.monotonic()
    end = start + args.seconds
    np = len(parts)
    while True:
        now = time.monotonic()
        if args.count and n >= args.count:
            break
        if not args.count and now >= end:
            break
        due = int((now - start) * args.rate) + 1 if args.rate else n + 1000
        if args.count:
            due = min(due, args.count)
        if due <= n:
            producer.poll(0)
            time.sleep(min(0.0005, max(0.0, start + (n + 1) / args.rate - now)))
            continue
        while n < due:
            i = n % np
            value = HEAD.pack(time.time_ns(), seqs[i], rate) + filler
            try:
                producer.produce(args.topic, value, None, parts[i])
            except BufferError:
                producer.poll(0.01)
                continue
            seqs[i] += 1
            n += 1
        producer.poll(0)
    left = producer.flush(60)
    print(json.dumps({"records": n, "seconds": time.monotonic() - start, "unflushed": left}))


if __name__ == "__main__":
    main()
