"""The Spark driver's Kafka I/O (mirrorlib.kafka.ranges.driver) on real clusters: storing the
engine's positions (``store_positions``) and reading where to start (``SourceView``)."""

from __future__ import annotations

import time

import pytest

from mirrorlib.core.settings import FlowSettings
from mirrorlib.errors import KafkaRequestError
from mirrorlib.kafka.ranges.driver import SourceView, store_positions
from mirrorlib.testing import ClusterSet
from tests.kafka._util import unique
from tests.runtime.conftest import config, produce

pytestmark = pytest.mark.integration

TS0 = (int(time.time()) - 3600) * 1000


def test_positions_the_target_refuses_raise_naming_the_topic(two_clusters: ClusterSet) -> None:
    """The target refuses the records (its offsets topic takes nothing above 10 bytes): the
    call raises, naming the topic and the broker's error, instead of returning as if stored."""
    b = two_clusters["B"]
    offsets_topic = unique("offsets")
    b.create_topic(offsets_topic, 3, config={"max.message.bytes": "10"})
    cfg = config(two_clusters, ["A->B"], **{"offset.storage.topic": offsets_topic})
    (flow,) = cfg.pairs_for_targets(["B"])
    s = FlowSettings.from_config(cfg, flow)
    with pytest.raises(KafkaRequestError) as refused:
        store_positions(s, 3, {("t", 0): 3, ("t", 1): 1})
    assert refused.value.resource == offsets_topic
    assert offsets_topic in str(refused.value) and "on cluster B" in str(refused.value)
    assert refused.value.code == "MSG_SIZE_TOO_LARGE", refused.value


def test_stored_positions_are_where_a_new_query_starts(
    two_clusters: ClusterSet,
) -> None:
    a, b = two_clusters
    topic, offsets_topic = unique("rg"), unique("offsets")
    a.create_topic(topic, 2)
    b.create_topic(f"A.{topic}", 2)
    b.create_topic(offsets_topic, 3)
    produce(a, topic, [{"value": b"v", "partition": p, "timestamp": TS0} for p in (0, 1)] * 5)
    cfg = config(two_clusters, ["A->B"], **{"offset.storage.topic": offsets_topic})
    (flow,) = cfg.pairs_for_targets(["B"])
    s = FlowSettings.from_config(cfg, flow)
    assert s.offset_storage_topic == offsets_topic
    store_positions(s, 3, {(topic, 0): 3, (topic, 1): 1})
    view = SourceView(s, offsets_topic_partitions=3)
    try:
        assert view.starting_offsets([(topic, 0), (topic, 1)]) == {(topic, 0): 4, (topic, 1): 2}
    finally:
        view.close()


def test_the_source_view_waits_for_remote_partitions_a_backfill_would_pin(
    two_clusters: ClusterSet,
) -> None:
    a, b = two_clusters
    topic = unique("rg")
    a.create_topic(topic, 2)
    cfg = config(two_clusters, ["A->B"], **{"A->B.topics": topic})
    (flow,) = cfg.pairs_for_targets(["B"])
    view = SourceView(FlowSettings.from_config(cfg, flow), offsets_topic_partitions=25)
    try:
        # (other source topics of the shared clusters may count too: heartbeats topics are
        # replicated whatever `topics` says)
        started = time.monotonic()
        view.settle(1.0)  # no remote topic: gives up after the timeout
        assert view.missing >= 2
        assert time.monotonic() - started >= 1.0
        assert topic not in view.copyable()
        b.create_topic(f"A.{topic}", 2)
        view.settle(10.0)
        assert view.copyable(force=True).get(topic) == 2
        assert [tp for tp in view.partitions() if tp[0] == topic] == [(topic, 0), (topic, 1)]
    finally:
        view.close()
