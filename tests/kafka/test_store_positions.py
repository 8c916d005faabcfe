"""Storing the Spark engine's positions (``store_positions``) on real clusters."""

from __future__ import annotations

import pytest

from mirrorlib.core.settings import FlowSettings
from mirrorlib.errors import KafkaRequestError
from mirrorlib.kafka.ranges import store_positions
from mirrorlib.testing import ClusterSet
from tests.kafka._util import unique
from tests.runtime.conftest import config

pytestmark = pytest.mark.integration


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
