"""Every script in examples/ runs (the integration ones on real clusters)."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import javaproperties
import pytest
from confluent_kafka import Consumer, Producer

from mirrorlib.testing import ClusterSet

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name: str) -> ModuleType:
    if str(EXAMPLES.parent) not in sys.path:
        sys.path.insert(0, str(EXAMPLES.parent))
    return importlib.import_module(f"examples.{name}")


def test_custom_policy(capsys: pytest.CaptureFixture[str]) -> None:
    module = load("custom_policy")
    module.main()
    out = capsys.readouterr().out
    assert "orders.from-us-east" in out and "original topic               = orders" in out
    policy = module.SuffixReplicationPolicy()
    assert policy.topic_source("orders") is None
    assert policy.upstream_topic("a.from-x") == "a"
    assert policy.is_checkpoints_topic("x.checkpoints.internal")
    from mirrorlib import MirrorConfig

    cfg = MirrorConfig.from_properties(
        {
            "clusters": "A, B",
            "A.bootstrap.servers": "h:1",
            "B.bootstrap.servers": "h:2",
            "replication.policy.class": "examples.custom_policy:SuffixReplicationPolicy",
        }
    )
    assert cfg.flow("A", "B").policy.format_remote_topic("A", "t") == "t.from-A"


def test_record_transforms(capsys: pytest.CaptureFixture[str]) -> None:
    module = load("record_transforms")
    tagged, dropped, untouched = module.main()
    assert dropped is None  # the tombstone
    assert tagged.value == b'{"order": 1, "card": "***"}'
    assert tagged.headers == (("origin", b"us-east"),)
    assert untouched.value == b"not json"
    assert untouched.headers == (("trace", b"t"), ("origin", b"us-east"))
    assert "offset 1: value=None -> dropped" in capsys.readouterr().out


def _produce(cluster: Any, topic: str, n: int) -> None:
    p = Producer(cluster.client_config())
    for i in range(n):
        p.produce(topic, value=f"{topic}-{i}".encode(), partition=i % 2)
    assert p.flush(10) == 0


def _run_embedded_service(
    clusters: ClusterSet, topic: str, partitions: int, records: int, *args: str
) -> Any:
    """Run examples/embedded_service.py from A to B on ``topic`` (created with ``partitions``
    and ``records`` records first) with the extra ``args``; its final report."""
    a, b = clusters
    a.create_topic(topic, partitions)
    _produce(a, topic, records)
    module = load("embedded_service")
    return module.main(
        ["--source", a.bootstrap_servers, "--target", b.bootstrap_servers,
         "--topics", re.escape(topic), "--report-every", "2", *args]
    )  # fmt: skip


@pytest.mark.integration
def test_embedded_service(two_clusters: ClusterSet, capsys: pytest.CaptureFixture[str]) -> None:
    report = _run_embedded_service(two_clusters, "ex.service", 2, 50, "--seconds", "12")
    assert report["healthy"], report
    assert report["flows"][0]["replicated"] >= 50
    assert report["flows"][0]["workers"] == []  # tasks.max=1: the copier is a thread
    assert '"flow": "primary->standby"' in capsys.readouterr().out


@pytest.mark.integration
def test_embedded_service_with_two_worker_processes(
    two_clusters: ClusterSet, capsys: pytest.CaptureFixture[str]
) -> None:
    report = _run_embedded_service(
        two_clusters, "ex.workers", 4, 80, "--seconds", "20", "--tasks", "2"
    )
    flow = report["flows"][0]
    assert report["healthy"], report
    assert flow["replicated"] >= 80, flow
    workers = flow["workers"]
    assert [w["slot"] for w in workers] == [0, 1], workers
    assert sum(w["partitions"] for w in workers) >= 4, workers  # the data topic's, at least
    assert all(w["pid"] for w in workers), workers


@pytest.mark.integration
def test_failover_client(two_clusters: ClusterSet, tmp_path: Path) -> None:
    from mirrorlib import Replicator
    from tests.runtime.conftest import config, end_offsets, mm2_properties, wait_for

    a, b = two_clusters
    a.create_topic("ex.orders", 2)
    _produce(a, "ex.orders", 80)
    props = mm2_properties(two_clusters, ["A->B"], **{"A->B.topics": "ex\\.orders"})
    path = tmp_path / "mm2.properties"
    path.write_text(javaproperties.dumps(props), encoding="utf-8")
    c = Consumer(
        {
            **a.client_config(),
            "group.id": "ex-billing",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe(["ex.orders"])
    seen: list[bytes] = []
    while len(seen) < 30:
        seen += [m.value() for m in c.consume(30 - len(seen), timeout=1) if m.error() is None]
    c.commit(asynchronous=False)
    c.close()
    with Replicator(config(two_clusters, ["A->B"], **{"A->B.topics": "ex\\.orders"})):
        wait_for("copied", lambda: sum(end_offsets(b, "A.ex.orders").values()) >= 80)
    module = load("failover_client")
    records = module.main(
        [str(path), "--group", "ex-billing", "--topic", "ex.orders", "--from", "A", "--to", "B"]
    )
    values = [m.value() for m in records]
    assert len(values) == 50 and not set(values) & set(seen)
    assert set(values) | set(seen) == {f"ex.orders-{i}".encode() for i in range(80)}
