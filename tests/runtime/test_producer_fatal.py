"""A fatal error of the copier's producer recreates its clients: copying resumes from the stored
positions, with nothing lost (and, exactly-once, nothing duplicated)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

import mirrorlib.kafka.copier.loop
from mirrorlib import MirrorConfig, Replicator
from mirrorlib.core.settings import FlowSettings
from mirrorlib.testing import BaseCluster, ClusterSet
from tests.kafka.librdkafka_hooks import provoke_fatal_error
from tests.runtime.conftest import config, produce, read_all, wait_for

pytestmark = pytest.mark.integration

FATAL = "fatal error of the producer to B"


class Errors:
    """Collects the flow's status errors on a background thread (a restart's error is cleared
    as soon as the new clients are open)."""

    def __init__(self, replicator: Replicator) -> None:
        self.seen: list[str] = []
        self._r = replicator
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.seen += [e for s in self._r.status() for e in s.errors]

    def stop(self) -> list[str]:
        self._stop.set()
        self._thread.join(5)
        return self.seen


@pytest.fixture
def record_producers(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Producer]]:
    """The record producers the copier creates, in order."""
    created: list[Producer] = []

    class Recorded(Producer):  # type: ignore[misc]
        def __init__(self, conf: dict[str, Any]) -> None:
            super().__init__(conf)
            created.append(self)

    monkeypatch.setattr(mirrorlib.kafka.copier.loop, "Producer", Recorded)
    yield created


def counts(target: BaseCluster, topic: str) -> Counter[int]:
    """How often each value of ``topic`` is on the target (``read_committed``)."""
    try:
        records = read_all(target, f"A.{topic}", read_committed=True)
    except KafkaException:  # the remote topic is not created yet
        return Counter()
    return Counter(int(m.value()) for m in records)


def run(
    clusters: ClusterSet,
    topic: str,
    cfg: MirrorConfig,
    fail: Callable[[], None],
    until: Callable[[], bool] | None = None,
) -> tuple[Counter[int], list[str]]:
    """Replicate 0..199 of ``topic``, calling ``fail()`` once the first 100 arrived (and, with
    ``until``, replicating until it holds too); returns the target's records and the status
    errors seen after ``fail()``."""
    a, b = clusters
    a.create_topic(topic, 2)
    produce(a, topic, [{"value": b"%d" % i, "partition": i % 2} for i in range(100)])
    with Replicator(cfg) as r:
        wait_for("the first 100 records on B", lambda: len(counts(b, topic)) >= 100)
        errors = Errors(r)
        fail()
        produce(a, topic, [{"value": b"%d" % i, "partition": i % 2} for i in range(100, 200)])
        # resumes within seconds: the first restart waits the back-off's base, 1 s
        wait_for(
            "every record on B after the fatal error", lambda: len(counts(b, topic)) >= 200, 30
        )
        if until is not None:
            wait_for("the condition of the test", until, 30)
        seen = errors.stop()
    return counts(b, topic), seen


def test_a_fenced_exactly_once_producer_is_recreated(two_clusters: ClusterSet) -> None:
    topic = "fenced.t"
    cfg = config(
        two_clusters,
        ["A->B"],
        **{
            "A->B.topics": "fenced\\..*",
            "B.exactly.once.source.support": "enabled",
            "transaction.boundary.interval.ms": "300",
        },
    )
    settings = FlowSettings.from_config(cfg, cfg.flow("A", "B"))

    def fence() -> None:  # a second producer with the copier's transactional.id fences it
        _, b = two_clusters
        rival = Producer({**b.client_config(), "transactional.id": settings.transactional_id})
        rival.init_transactions(30)

    got, seen = run(two_clusters, topic, cfg, fence)
    # Named as fenced when the commit or a delivery report finds it; when a produce call finds
    # it first, the exception carries librdkafka's generic fatal error (seen in about one run of
    # five), and the copier restarts all the same.
    assert any(FATAL in e and ("FENCED" in e or "Fatal error" in e) for e in seen), seen
    assert sorted(got) == list(range(200))
    dupes = {i: c for i, c in got.items() if c > 1}
    assert not dupes, f"read_committed sees duplicates: {dupes}"


def test_a_fatal_idempotence_error_recreates_the_producer(
    two_clusters: ClusterSet, record_producers: list[Producer]
) -> None:
    topic = "fatal.t"
    cfg = config(two_clusters, ["A->B"], **{"A->B.topics": "fatal\\..*"})

    def fail() -> None:
        provoke_fatal_error(record_producers[-1], KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER)

    got, seen = run(two_clusters, topic, cfg, fail)
    assert any(f"{FATAL}: OUT_OF_ORDER_SEQUENCE_NUMBER" in e for e in seen), seen
    assert len(record_producers) >= 2  # a new producer replaced the dead one
    missing = [i for i in range(200) if got[i] == 0]
    assert not missing, f"{len(missing)} records lost, e.g. {missing[:10]}"


def test_a_fatal_error_with_records_in_flight_loses_nothing(
    two_clusters: ClusterSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The producer dies right after the last record is handed to it, with records not yet
    acknowledged: they are copied again by the new producer (at-least-once from the stored
    positions), and no partition is reported as refusing records."""
    created: list[Producer] = []

    class DiesInFlight(Producer):  # type: ignore[misc]
        def __init__(self, conf: dict[str, Any]) -> None:
            super().__init__(conf)
            created.append(self)

        def produce(self, *args: Any, **kwargs: Any) -> None:
            super().produce(*args, **kwargs)
            value = args[1] if len(args) > 1 else kwargs.get("value")
            if value == b"199" and len(created) == 1:  # the last record; the first producer
                provoke_fatal_error(self, KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER)

    monkeypatch.setattr(mirrorlib.kafka.copier.loop, "Producer", DiesInFlight)
    topic = "inflight.t"
    cfg = config(two_clusters, ["A->B"], **{"A->B.topics": "inflight\\..*"})
    # a new producer replaces the dead one (on a busy machine the records in flight may all
    # have arrived before the fatal error: the replacement comes after the back-off anyway)
    got, seen = run(two_clusters, topic, cfg, lambda: None, until=lambda: len(created) >= 2)
    assert len(created) >= 2
    missing = [i for i in range(200) if got[i] == 0]
    assert not missing, f"{len(missing)} records lost, e.g. {missing[:10]}"
    assert not [e for e in seen if "refused" in e], seen
