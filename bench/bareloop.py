"""A bare confluent-kafka (librdkafka) consume-and-produce loop: what the client alone costs.

``python -m bench.bareloop SOURCE TARGET PREFIX TOPIC... [--acked]`` copies every partition of
the topics from the beginning to ``PREFIX + topic`` on the target, same partition, key, value,
headers and timestamp, with the producer settings mirrorlib uses (idempotent, acks=all,
linger.ms=5, batch.size=1000000) and mirrorlib's consumer fetch default
(``fetch.queue.backoff.ms=10``). No positions, no offset syncs, no delivery bookkeeping: what the
client itself costs. It is a reference, not a ceiling (a copier that batches differently can beat
it). Stops on SIGTERM.

``--acked`` adds the one thing an at-least-once replicator cannot leave out: a delivery report
per record (confluent-kafka builds a ``Message`` for each and calls back into Python), which
here only remembers the newest acknowledged offset per partition. The gap between the two loops
is the price of knowing what was delivered with this client; the gap between the acked loop and
mirrorlib is mirrorlib's own bookkeeping.

``--processes N`` runs N loops in N child processes, child ``i`` copying the partitions ``p``
with ``p % N == i`` (each a ``--slot i/N`` of the same command): the client's cost with as many
processes as ``tasks.max=N`` copies in. The parent only waits (and passes SIGTERM on).
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def _option(args: list[str], name: str) -> str | None:
    """The value after ``name`` in ``args`` (both removed), or ``None``."""
    if name not in args:
        return None
    at = args.index(name)
    value = args[at + 1]
    del args[at : at + 2]
    return value


def _run_processes(count: int, args: list[str]) -> None:
    """Create the copies once (two children creating them at once raced in one run: one child's
    records never arrived), then run one child per slot; a child that ends ends the others."""
    source, target, prefix, *topics = [a for a in args if a != "--acked"]
    _create_copies(source, target, prefix, topics)
    children = [
        subprocess.Popen([sys.executable, "-m", "bench.bareloop", *args, "--slot", f"{i}/{count}"])
        for i in range(count)
    ]
    stopping: list[
        int
    ] = []  # (a handler calling Event.set() can deadlock: mirrorlib.runtime.signals)
    signal.signal(signal.SIGTERM, lambda signum, _frame: stopping.append(signum))
    code = 0
    while not stopping:
        time.sleep(0.2)
        ended = [child.returncode for child in children if child.poll() is not None]
        if ended:
            code = ended[0] or 1
            print(f"bareloop: a child ended with {ended[0]}; stopping the others", file=sys.stderr)
            break
    for child in children:
        with contextlib.suppress(ProcessLookupError):
            child.terminate()
    for child in children:
        child.wait(30)
    sys.exit(code)


def _create_copies(source: str, target: str, prefix: str, topics: list[str]) -> None:
    """The target has auto.create.topics.enable=false: create the copies, same partition
    counts (a copy that is already there is left as it is)."""
    consumer = Consumer({"bootstrap.servers": source, "group.id": "bench-bareloop"})
    meta = consumer.list_topics(timeout=10)
    consumer.close()
    admin = AdminClient({"bootstrap.servers": target})
    new = [NewTopic(prefix + t, len(meta.topics[t].partitions), 1) for t in topics]
    for future in admin.create_topics(new).values():
        with contextlib.suppress(KafkaException):  # already there
            future.result(30)


def _report_error(err: Any) -> None:
    print(f"bareloop: client error: {err}", file=sys.stderr, flush=True)


def main() -> None:
    args = sys.argv[1:]
    processes = _option(args, "--processes")
    if processes is not None and int(processes) > 1:
        _run_processes(int(processes), args)
        return
    slot, slots = (int(x) for x in (_option(args, "--slot") or "0/1").split("/"))
    acked = "--acked" in args
    source, target, prefix, *topics = [a for a in args if a != "--acked"]
    delivered: dict[int, int] = {}

    failed = [0]

    def on_delivery(err: object, msg: Any) -> None:
        if err is None:
            delivered[msg.partition()] = msg.offset()
        else:
            failed[0] += 1
            if failed[0] <= 10:
                print(f"bareloop: not delivered: {err}", file=sys.stderr, flush=True)

    stop: list[int] = []  # (see above)
    signal.signal(signal.SIGTERM, lambda signum, _frame: stop.append(signum))
    consumer = Consumer(
        {
            "bootstrap.servers": source,
            "group.id": "bench-bareloop",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "fetch.queue.backoff.ms": 10,  # mirrorlib's default (FlowSettings.record_consumer)
            "error_cb": _report_error,
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
            "error_cb": _report_error,
            **({"on_delivery": on_delivery} if acked else {}),
        }
    )
    if slots == 1:
        _create_copies(source, target, prefix, topics)  # else the parent did
    meta = consumer.list_topics(timeout=10)
    consumer.assign(
        [
            TopicPartition(t, p, OFFSET_BEGINNING)
            for t in topics
            for p in sorted(meta.topics[t].partitions)
            if p % slots == slot
        ]
    )
    produce = producer.produce
    while not stop:
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
