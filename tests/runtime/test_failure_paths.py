"""Failure and shutdown paths on real clusters: a checkpoint that could not be written, a stop
while the target is down, a flow that fails under ``mirrorlib run``."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTP
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from mirrorlib import Checkpoint, MirrorConfig, Replicator
from mirrorlib.core.status import FlowState
from mirrorlib.errors import FlowFailedError
from mirrorlib.testing import BaseCluster, ClusterSet
from tests.runtime.conftest import (
    ReplicatorProcess,
    commit_group,
    config,
    decoded,
    mm2_properties,
    produce,
    wait_for,
)
from tests.runtime.test_replicator import replicated

pytestmark = pytest.mark.integration


def set_topic_config(cluster: BaseCluster, topic: str, key: str, value: str | None) -> None:
    """Set ``key`` on ``topic`` (``None``: back to the broker default)."""
    op = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[ConfigEntry(key, value or "", incremental_operation=op)],
    )
    admin = cluster.admin_client()
    for f in admin.incremental_alter_configs([resource]).values():
        f.result(30)


#: the offset-syncs topic of flow A->B (on the source: MM2's default location)
SYNCS_TOPIC = "mm2-offset-syncs.B.internal"


@contextlib.contextmanager
def offset_syncs_refused(cluster: BaseCluster) -> Iterator[Callable[[], None]]:
    """Make :data:`SYNCS_TOPIC` on ``cluster`` refuse every sync (``max.message.bytes`` 10);
    yields a function that lets it accept them again (done on exit in any case)."""
    with contextlib.suppress(Exception):  # shared clusters: another test may have created it
        cluster.create_topic(SYNCS_TOPIC)

    def accept() -> None:
        set_topic_config(cluster, SYNCS_TOPIC, "max.message.bytes", None)

    set_topic_config(cluster, SYNCS_TOPIC, "max.message.bytes", "10")
    try:
        yield accept
    finally:
        accept()


def committed(cluster: BaseCluster, group: str, topic: str) -> int | None:
    consumer = Consumer({**cluster.client_config(), "group.id": group})
    try:
        [tp] = consumer.committed([KafkaTP(topic, 0)], timeout=10)
    finally:
        consumer.close()
    return tp.offset if tp.offset >= 0 else None


def test_a_checkpoint_is_recorded_only_once_written(two_clusters: ClusterSet) -> None:
    """A checkpoint the target refused is emitted again on a later cycle (the group stays idle),
    and group offset sync never commits from it meanwhile."""
    a, b = two_clusters
    topic, group, checkpoints = "cpfail.t", "cpfail-group", "A.checkpoints.internal"
    a.create_topic(topic, 1)
    produce(a, topic, [{"value": str(i).encode()} for i in range(20)])
    cfg = config(
        two_clusters,
        ["A->B"],
        **{
            "A->B.topics": "cpfail\\..*",
            "A->B.groups": "cpfail-.*",
            "sync.group.offsets.enabled": "true",
        },
    )

    def ours() -> list[Checkpoint]:
        return [cp for cp in decoded(b, checkpoints, Checkpoint) if cp.group == group]

    with Replicator(cfg) as r:
        wait_for("20 replicated", lambda: replicated(r, "cpfail") >= 20)
        # every write to the checkpoints topic now fails (the record is larger than allowed)
        set_topic_config(b, checkpoints, "max.message.bytes", "1")
        try:
            commit_group(a, group, topic, {0: 12})  # idle from now on
            wait_for(
                "the failed checkpoint write reported",
                lambda: any("writing a checkpoint failed" in e for e in r.status()[0].errors),
            )
            time.sleep(3)  # several emit and group-sync cycles
            assert ours() == []
            assert committed(b, group, f"A.{topic}") is None  # nothing synced from it
        finally:
            set_topic_config(b, checkpoints, "max.message.bytes", None)
        [cp] = wait_for("the checkpoint written once writes work again", ours)
        assert (cp.topic, cp.upstream_offset, cp.downstream_offset) == (f"A.{topic}", 12, 12)
        wait_for("group offsets synced", lambda: committed(b, group, f"A.{topic}") == 12)
        wait_for("error cleared", lambda: not r.status()[0].errors)


def test_stop_returns_promptly_while_the_target_is_down(private_kafka_clusters) -> None:  # type: ignore[no-untyped-def]
    """The copier's producer queue is full because the target is down: a stop request ends the
    retry loop at once instead of after the records' delivery timeout (minutes)."""
    a, b = private_kafka_clusters(["A", "B"])
    topic = "down.t"
    a.create_topic(topic, 1)
    produce(a, topic, [{"value": b"x%d" % i} for i in range(10)])
    cfg = config(
        [a, b],
        ["A->B"],
        **{
            "A->B.topics": "down\\..*",
            "admin.timeout.ms": "3000",
            "B.producer.queue.buffering.max.messages": "100",
        },
    )
    r = Replicator(cfg)
    r.start()
    try:
        wait_for("10 replicated", lambda: replicated(r, "down") >= 10)
        b.stop()
        produce(a, topic, [{"value": b"y%d" % i} for i in range(2000)])
        time.sleep(3)  # the copier fills its 100-record queue and waits for room
    finally:
        started = time.monotonic()
        r.stop(timeout=45)
        took = time.monotonic() - started
    # bounded by the graceful close's flushes (admin.timeout.ms, 10 s), not by the delivery
    # timeout of the queued records (message.timeout.ms, 5 minutes)
    assert took < 30, f"stop took {took:.0f}s"


def truncate_below_position(clusters: ClusterSet, topic: str) -> dict[str, str]:
    """Replicate 100 records of ``topic``, stop, then delete records 100..149 at the source
    before they were copied; returns the flow's properties (``data.loss.action=fail``)."""
    a, _b = clusters
    a.create_topic(topic, 1)
    produce(a, topic, [{"value": f"{i}".encode()} for i in range(100)])
    props = mm2_properties(
        clusters,
        ["A->B"],
        **{"A->B.topics": topic.replace(".", "\\."), "data.loss.action": "fail"},
    )
    with Replicator(MirrorConfig.from_properties(props)) as r:
        wait_for("100 replicated", lambda: replicated(r, topic) >= 100)
    produce(a, topic, [{"value": f"{i}".encode()} for i in range(100, 200)])
    admin = a.admin_client()
    futures = admin.delete_records([KafkaTP(topic, 0, 150)])
    for f in futures.values() if isinstance(futures, dict) else [futures]:
        f.result(30)
    return props


def test_run_raises_when_a_flow_fails(two_clusters: ClusterSet) -> None:
    props = truncate_below_position(two_clusters, "fatalrun.t")
    replicator = Replicator(MirrorConfig.from_properties(props))
    raised: list[BaseException] = []

    def run() -> None:
        try:
            replicator.run()
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)  # run() returns on its own: no stop() call, no signal
    if thread.is_alive():
        replicator.stop()
        thread.join(60)
        pytest.fail("Replicator.run() still running 60 s after the flow failed")
    [error] = raised
    assert isinstance(error, FlowFailedError), error
    assert [s.name for s in error.statuses] == ["A->B"]
    assert "flow A->B failed" in str(error) and "100..149" in str(error)
    assert [s.state for s in replicator.status()] == [FlowState.FAILED, FlowState.STOPPED]
    with pytest.raises(FlowFailedError):
        replicator.raise_for_failure()


def test_mirrorlib_run_exits_1_when_a_flow_fails(two_clusters: ClusterSet, tmp_path: Path) -> None:
    props = truncate_below_position(two_clusters, "fatalcli.t")
    proc = ReplicatorProcess(props, tmp_path)
    proc.start()
    try:
        code = proc.proc.wait(90)
    finally:
        proc.kill()
    log = proc.log_tail(200)
    assert code == 1, log
    assert "flow A->B failed" in log and "fatalcli.t" in log and "100..149" in log, log


def test_exactly_once_requested_without_target_support_is_logged_as_a_warning(
    two_clusters: ClusterSet, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = config(
        two_clusters,
        ["A->B"],
        **{"A->B.topics": "eosreq\\..*", "exactly.once.support": "requested"},
    )
    with caplog.at_level(logging.WARNING, logger="mirrorlib.runtime.replicator"), Replicator(cfg):
        pass
    [record] = [r for r in caplog.records if "at-least-once" in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert "flow A->B runs at-least-once: B.exactly.once.source.support is disabled" in (
        record.getMessage()
    )
