"""Replication factors on a one-broker target: honoured or refused (error in the status, retried),
lowered only with ``replication.factor.lowering.enabled``; ``plan`` says what ``run`` does; and a
clean start logs no warning.

Every test uses its own cluster aliases on the shared clusters, so MM2's internal topics
(``mm2-offsets.<alias>.internal``, ``<alias>.checkpoints.internal``,
``mm2-offset-syncs.<alias>.internal``) are new to it.
"""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path

import javaproperties
import pytest

from mirrorlib import MirrorConfig, Replicator
from mirrorlib.cli import EXIT_OK, main
from mirrorlib.core.plans import SkipReason
from mirrorlib.core.status import FlowState
from mirrorlib.runtime.operations import flow_plan
from mirrorlib.testing import BaseCluster, ClusterSet
from tests.runtime.conftest import FAST, produce, wait_for

pytestmark = pytest.mark.integration

LOWERING = "replication.factor.lowering.enabled"


class Flow:
    """A flow ``<src> -> <dst>`` between the shared clusters under fresh aliases, replicating one
    fresh topic."""

    def __init__(self, two_clusters: ClusterSet, **extra: str) -> None:
        self.a, self.b = two_clusters
        tag = uuid.uuid4().hex[:8]
        self.src, self.dst = f"rf{tag}a", f"rf{tag}b"
        self.topic = f"rf-{tag}.orders"
        self.remote = f"{self.src}.{self.topic}"
        self.offsets_topic = f"mm2-offsets.{self.src}.internal"
        self.checkpoints_topic = f"{self.src}.checkpoints.internal"
        self.offset_syncs_topic = f"mm2-offset-syncs.{self.dst}.internal"
        props = {
            "clusters": f"{self.src}, {self.dst}",
            f"{self.src}.bootstrap.servers": self.a.bootstrap_servers,
            f"{self.dst}.bootstrap.servers": self.b.bootstrap_servers,
            f"{self.dst}.offset.flush.interval.ms": "500",
            f"{self.src}->{self.dst}.enabled": "true",
            f"{self.dst}->{self.src}.emit.heartbeats.enabled": "false",
            **FAST,
            "topics": self.topic.replace(".", "\\."),
            **extra,
        }
        self.props = props
        self.config = MirrorConfig.from_properties(props)
        self.a.create_topic(self.topic, 2)
        produce(self.a, self.topic, [{"value": b"v", "partition": i % 2} for i in range(10)])

    def plan(self) -> str:
        return flow_plan(self.config, self.config.flow(self.src, self.dst)).describe()


def _replicas(cluster: BaseCluster, topic: str) -> set[int] | None:
    """The replica counts of ``topic``'s partitions, ``None`` when it does not exist."""
    meta = cluster.admin_client().list_topics(topic=topic, timeout=10).topics.get(topic)
    if meta is None or meta.error is not None or not meta.partitions:
        return None
    return {len(p.replicas) for p in meta.partitions.values()}


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        f"{r.levelname} {r.name}: {r.getMessage()}"
        for r in caplog.records
        if r.name.startswith("mirrorlib") and r.levelno >= logging.WARNING
    ]


def _errors(replicator: Replicator) -> str:
    return " | ".join(e for s in replicator.status() for e in s.errors)


def test_a_clean_start_logs_no_warning(
    two_clusters: ClusterSet, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mirrorlib")
    flow = Flow(two_clusters)
    with Replicator(flow.config) as r:
        wait_for(
            "records replicated",
            lambda: sum(p.record_count for s in r.status() for p in s.partitions) >= 10,
        )
        assert r.status()[0].state is FlowState.RUNNING, _errors(r)
    assert _replicas(flow.b, flow.offsets_topic) == {1}
    assert _warnings(caplog) == []


def test_a_factor_above_the_live_brokers_is_refused_not_lowered(
    two_clusters: ClusterSet,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    flow = Flow(two_clusters, **{"replication.factor": "3"})
    plan = flow.plan()
    assert f"skip topic {flow.topic} ({SkipReason.REPLICATION_FACTOR})" in plan
    assert f"create topic {flow.remote}" not in plan
    wanted = (
        f"topic {flow.remote} not created: replication factor 3 is more than the 1 live "
        f"broker(s) of cluster {flow.dst}"
    )
    assert wanted in plan
    path = tmp_path / "mm2.properties"
    path.write_text(javaproperties.dumps(flow.props), encoding="utf-8")
    capsys.readouterr()
    assert main(["plan", str(path), "--json"]) == EXIT_OK
    (shown,) = json.loads(capsys.readouterr().out)
    assert shown["creates"] == {}
    # (A's heartbeats topic, replicated by every flow, is refused too once an earlier test made it)
    (refused,) = [
        s
        for s in shown["skipped"]
        if s["reason"] == "replication factor" and s["topic"] == flow.topic
    ]
    assert refused["topic"] == flow.topic and wanted in refused["detail"]
    with Replicator(flow.config) as r:
        wait_for("the error in the status", lambda: wanted in _errors(r))
        # retried on the next refresh (every second here), still refused, nothing lowered
        wait_for("a retry", lambda: sum(wanted in m for m in caplog.messages) >= 2, timeout=15)
        assert r.status()[0].state is FlowState.DEGRADED
        assert _replicas(flow.b, flow.remote) is None
        assert not any(p.topic == flow.topic for s in r.status() for p in s.partitions)
    assert _replicas(flow.b, flow.remote) is None
    assert any(wanted in m for m in caplog.messages)


@pytest.mark.parametrize(
    ("key", "topic"),
    [
        ("offset.storage.replication.factor", "offsets_topic"),
        ("checkpoints.topic.replication.factor", "checkpoints_topic"),
        ("offset-syncs.topic.replication.factor", "offset_syncs_topic"),
    ],
)
def test_internal_topics_follow_the_same_rule(
    two_clusters: ClusterSet, caplog: pytest.LogCaptureFixture, key: str, topic: str
) -> None:
    flow = Flow(two_clusters, **{key: "2"})
    name = getattr(flow, topic)
    cluster = flow.a if topic == "offset_syncs_topic" else flow.b
    alias = flow.src if topic == "offset_syncs_topic" else flow.dst
    wanted = (
        f"topic {name} not created: replication factor 2 is more than the 1 live broker(s) "
        f"of cluster {alias}"
    )
    with Replicator(flow.config) as r:
        wait_for("the error in the status", lambda: wanted in _errors(r))
        assert r.status()[0].state is FlowState.STARTING
        assert _replicas(cluster, name) is None
        assert _replicas(flow.b, flow.remote) is None  # the flow does not run without it
    assert any(wanted in m for m in caplog.messages)


def test_lowering_when_allowed_uses_the_live_broker_count_with_a_warning(
    two_clusters: ClusterSet, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mirrorlib")
    flow = Flow(
        two_clusters,
        **{
            LOWERING: "true",
            "replication.factor": "3",
            "offset.storage.replication.factor": "3",
            "checkpoints.topic.replication.factor": "3",
            "offset-syncs.topic.replication.factor": "3",
        },
    )
    plan = flow.plan()
    create = f"create topic {flow.remote} from {flow.topic}: 2 partition(s), replication factor 1"
    assert create in plan
    with Replicator(flow.config) as r:
        wait_for("remote topic created", lambda: _replicas(flow.b, flow.remote))
        assert r.status()[0].errors == ()
    for cluster, name, alias in (
        (flow.b, flow.remote, flow.dst),
        (flow.b, flow.offsets_topic, flow.dst),
        (flow.b, flow.checkpoints_topic, flow.dst),
        (flow.a, flow.offset_syncs_topic, flow.src),
    ):
        assert _replicas(cluster, name) == {1}, name
        warning = (
            f"topic {name}: replication factor 3 lowered to 1, the 1 live broker(s) of cluster "
            f"{alias}"
        )
        assert any(warning in w for w in _warnings(caplog)), (warning, _warnings(caplog))
