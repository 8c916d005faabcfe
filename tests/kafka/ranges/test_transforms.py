"""Record transforms in the Spark engine's copy tasks (mirrorlib.kafka.ranges.executor), against
real clusters, without Spark: dropped and changed records, ranges that end in dropped records,
and a transform that raises stopping its partition's range at that record."""

from __future__ import annotations

import contextlib

import attrs
import pytest

from mirrorlib import Transform, TransformRecord
from mirrorlib.core.batches import Range
from mirrorlib.core.settings import FlowSettings
from mirrorlib.kafka.ranges.executor import copy_ranges
from mirrorlib.testing import ClusterSet
from tests.kafka._util import unique
from tests.runtime.conftest import config, produce, read_all

pytestmark = pytest.mark.integration

SMT = "org.apache.kafka.connect.transforms."


class Explode(Transform):
    """Fails on the value ``boom``; appends ``!`` to the others."""

    def apply(self, record: TransformRecord) -> TransformRecord | None:
        if record.value == b"boom":
            raise RuntimeError("cannot transform boom")
        return attrs.evolve(record, value=(record.value or b"") + b"!")


def _settings(clusters: ClusterSet, topic: str, **transforms: str) -> FlowSettings:
    a, b = clusters
    b.create_topic(f"A.{topic}", 1)
    cfg = config(clusters, ["A->B"], **{f"A->B.{k}": v for k, v in transforms.items()})
    s = FlowSettings.from_config(cfg, cfg.flow("A", "B"))
    with contextlib.suppress(Exception):  # shared clusters: another test may have created it
        (a if s.offset_syncs_cluster == a.alias else b).create_topic(s.offset_syncs_topic)
    return s


def test_dropped_and_changed_records_and_ranges_ending_in_dropped_ones(
    two_clusters: ClusterSet,
) -> None:
    a, b = two_clusters
    topic = unique("rgsmt")
    a.create_topic(topic, 1)
    # 0-4 records, 5-9 tombstones, 10-14 records with the header "internal", 15-19 records
    produce(
        a,
        topic,
        [{"partition": 0, "key": b"k", "value": f"v{i}".encode()} for i in range(5)]
        + [{"partition": 0, "key": b"k", "value": None} for _ in range(5, 10)]
        + [
            {"partition": 0, "value": f"v{i}".encode(), "headers": [("internal", b"")]}
            for i in range(10, 15)
        ]
        + [{"partition": 0, "value": f"v{i}".encode()} for i in range(15, 20)],
    )
    s = _settings(
        two_clusters,
        topic,
        **{
            "transforms": "tomb,internal,tag",
            "transforms.tomb.type": SMT + "Filter",
            "transforms.tomb.predicate": "isTombstone",
            "transforms.internal.type": SMT + "Filter",
            "transforms.internal.predicate": "isInternal",
            "transforms.tag.type": SMT + "InsertHeader",
            "transforms.tag.header": "origin",
            "transforms.tag.value.literal": "site-a",
            "predicates": "isTombstone,isInternal",
            "predicates.isTombstone.type": SMT + "predicates.RecordIsTombstone",
            "predicates.isInternal.type": SMT + "predicates.HasHeaderKey",
            "predicates.isInternal.name": "internal",
        },
    )
    # ranges that end in dropped records (tombstones, then the header) are done all the same
    first = copy_ranges(s, [Range(topic, 0, 0, 10)], stall_timeout=20)
    (part,) = first.partitions
    assert (part.records, part.copied_to, part.error) == (5, 10, None)
    second = copy_ranges(s, [Range(topic, 0, 10, 15)], stall_timeout=20)
    (part,) = second.partitions
    assert (part.records, part.copied_to, part.error) == (0, 15, None)
    third = copy_ranges(s, [Range(topic, 0, 15, 20)], stall_timeout=20)
    assert third.partitions[0].copied_to == 20
    got = [(m.value(), m.headers()) for m in read_all(b, f"A.{topic}")]
    assert got == [(f"v{i}".encode(), [("origin", b"site-a")]) for i in (*range(5), *range(15, 20))]


def test_a_transform_that_raises_stops_the_range_at_that_record(two_clusters: ClusterSet) -> None:
    a, b = two_clusters
    topic = unique("rgsmt")
    a.create_topic(topic, 1)
    produce(a, topic, [{"partition": 0, "value": v} for v in (b"a", b"b", b"boom", b"c")])
    s = _settings(
        two_clusters,
        topic,
        **{"transforms": "explode", "transforms.explode.type": f"{__name__}:Explode"},
    )
    result = copy_ranges(s, [Range(topic, 0, 0, 4)], stall_timeout=20)
    (part,) = result.partitions
    assert part.parked and part.copied_to == 2 and part.records == 2
    assert part.error is not None and "transform explode failed on" in part.error
    assert "cannot transform boom" in part.error
    assert [m.value() for m in read_all(b, f"A.{topic}")] == [b"a!", b"b!"]
