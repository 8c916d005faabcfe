"""Readers of a flow's stored positions read only committed ones (real clusters).

Worker processes (``tasks.max`` > 1) and exactly-once copiers store positions in the offsets
topic inside transactions; a position of an aborted transaction can be ahead of records that
never landed on the target. The Spark engine's start (``SourceView.starting_offsets``),
``mirrorlib status`` (``flow_status``) and ``mirrorlib verify`` (``verify_flow``) must ignore
it, whatever the flow's own delivery mode."""

from __future__ import annotations

import contextlib
import uuid

import pytest
from confluent_kafka import Producer

from mirrorlib.core.batches import Range
from mirrorlib.core.connect_offsets import SourcePosition, murmur2_partition
from mirrorlib.core.settings import FlowSettings
from mirrorlib.kafka.ranges.driver import SourceView, store_positions
from mirrorlib.kafka.ranges.executor import copy_ranges
from mirrorlib.runtime.operations import flow_status, select_flows, verify_flow
from mirrorlib.testing import ClusterSet
from tests.kafka._util import unique
from tests.runtime.conftest import config, produce

pytestmark = pytest.mark.integration

OFFSETS_PARTITIONS = 3


def store_aborted(
    settings: FlowSettings, bootstrap: str, positions: dict[tuple[str, int], int]
) -> None:
    """Write ``positions`` to the flow's offsets topic in a transaction, then abort it (what a
    worker killed or fenced mid-transaction leaves behind, once the broker aborted it)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"aborted-{uuid.uuid4().hex}"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for (topic, partition), offset in positions.items():
        pos = SourcePosition(settings.source, topic, partition, offset)
        key = pos.encode_key()
        producer.produce(
            settings.offset_storage_topic,
            pos.encode_value(),
            key,
            murmur2_partition(key, OFFSETS_PARTITIONS),
        )
    producer.flush(30)
    producer.abort_transaction(30)


def test_every_reader_of_stored_positions_ignores_an_aborted_one(
    two_clusters: ClusterSet,
) -> None:
    a, b = two_clusters
    topic, offsets_topic = unique("cp"), unique("offsets")
    a.create_topic(topic, 2)
    b.create_topic(f"A.{topic}", 2)
    b.create_topic(offsets_topic, OFFSETS_PARTITIONS)
    produce(a, topic, [{"value": b"v%d" % i, "partition": i % 2} for i in range(20)])
    # an at-least-once flow with one task (it reads its own positions plainly before the fix)
    cfg = config(
        two_clusters,
        ["A->B"],
        **{
            "offset.storage.topic": offsets_topic,
            "offset.storage.partitions": str(OFFSETS_PARTITIONS),
            "A->B.topics": topic,
        },
    )
    (flow,) = select_flows(cfg, "A->B")
    s = FlowSettings.from_config(cfg, flow)
    assert not s.exactly_once_enabled
    with contextlib.suppress(Exception):  # shared clusters: another test may have created it
        (a if s.offset_syncs_cluster == a.alias else b).create_topic(s.offset_syncs_topic)
    # committed: offsets 0..3 of partition 0 and 0..1 of partition 1 copied
    copy_ranges(s, [Range(topic, 0, 0, 4), Range(topic, 1, 0, 2)])
    store_positions(s, OFFSETS_PARTITIONS, {(topic, 0): 3, (topic, 1): 1})
    # aborted: a transaction that claimed everything, whose records never landed
    store_aborted(s, b.bootstrap_servers, {(topic, 0): 9, (topic, 1): 9})

    view = SourceView(s, offsets_topic_partitions=OFFSETS_PARTITIONS)
    try:
        start = view.starting_offsets([(topic, 0), (topic, 1)])
    finally:
        view.close()
    assert start == {(topic, 0): 4, (topic, 1): 2}  # the Spark engine's start

    health = flow_status(cfg, flow, timeout=30.0)
    positions = {p.partition: p.position for p in health.partitions if p.topic == topic}
    assert positions == {0: 4, 1: 2}, health.errors
    assert {p.partition: p.lag_records for p in health.partitions if p.topic == topic} == {
        0: 6,
        1: 8,
    }

    report = verify_flow(cfg, flow, topic, timeout=120.0)
    assert not report.errors, report.errors
    audits = {p.partition: p for p in report.partitions}
    # not yet copied, not missing: the committed positions say so
    assert [(audits[p].matched, audits[p].missing, audits[p].pending) for p in (0, 1)] == [
        (4, 0, 6),
        (2, 0, 8),
    ]
