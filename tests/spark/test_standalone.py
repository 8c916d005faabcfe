"""The Spark engine on a real Spark standalone cluster: a master and two workers as separate
processes, a flow submitted with ``spark-submit`` in client mode (``python -m mirrorlib.spark``'s
application file). Exact records and a failover that loses nothing; then a worker killed in the
middle of a batch loses nothing either (its tasks are run again on the other worker)."""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections import Counter
from pathlib import Path

import javaproperties
import pytest

from mirrorlib import translate_offsets
from mirrorlib.testing import ClusterSet
from tests.runtime.conftest import (
    commit_group,
    end_offsets,
    mm2_properties,
    produce,
    read_all,
    wait_for,
)
from tests.spark.conftest import StandaloneCluster, consume_from

pytestmark = [pytest.mark.integration, pytest.mark.spark]

TS0 = (int(time.time()) - 3600) * 1000
APP = str(Path(__file__).resolve().parents[2] / "src" / "mirrorlib" / "spark" / "__main__.py")


def test_a_flow_on_a_standalone_cluster_survives_a_killed_worker(
    two_clusters: ClusterSet, standalone: StandaloneCluster, tmp_path: Path
) -> None:
    a, b = two_clusters
    name = f"sa{uuid.uuid4().hex[:8]}"
    exact, backlog = f"{name}.exact", f"{name}.backlog"
    a.create_topic(exact, 3)
    a.create_topic(backlog, 4)
    records = [
        {
            "key": f"k{i}".encode() if i % 5 else None,
            "value": f"{i}".encode(),
            "partition": i % 3,
            "timestamp": TS0 + i,
            "headers": [("h", f"x{i}".encode())] if i % 2 else None,
        }
        for i in range(300)
    ]
    produce(a, exact, records)
    committed = {0: 40, 1: 100, 2: 0}
    commit_group(a, f"{name}-group", exact, committed)
    props = mm2_properties(
        two_clusters, ["A->B"], **{"A->B.topics": f"{name}\\..*", "A->B.groups": f"{name}-.*"}
    )
    config = tmp_path / "mm2.properties"
    config.write_text(javaproperties.dumps(props), encoding="utf-8")
    log = tmp_path / "driver.log"
    args = [APP, str(config), "--checkpoint-location", str(tmp_path / "chk")]
    args += ["--trigger-interval", "0 seconds", "--max-records-per-batch", "4000", "--tasks", "2"]
    driver = standalone.submit(args, log)

    def tail() -> str:
        return log.read_text(errors="replace")[-6000:] + "\n" + standalone.logs()[-4000:]

    try:
        wait_for(
            "the exact topic on B",
            lambda: (
                f"A.{exact}" in b.topic_names()
                and sum(end_offsets(b, f"A.{exact}").values()) >= 300
            ),
            timeout=240,
        )

        observed: list[dict[int, int]] = []

        def translated() -> dict[int, int] | None:
            got = translate_offsets(
                {"bootstrap.servers": b.bootstrap_servers}, "A", f"{name}-group"
            )
            offsets = {
                tp.partition: om.offset for tp, om in got.items() if tp.topic == f"A.{exact}"
            }
            if len(offsets) == 3:
                observed.append(offsets)
            return offsets if offsets == committed else None

        # An early checkpoint may translate with the syncs written so far (below the commit:
        # re-reading, never skipping); the next ones reach the committed offsets exactly.
        offsets = wait_for("checkpoints of the group at its commits", translated, timeout=120)
        assert all(o[p] <= committed[p] for o in observed for p in o), observed

        # a backlog copied over several batches; one worker dies while a batch runs
        total = 40_000
        produce(a, backlog, [{"value": f"{i}".encode(), "partition": i % 4} for i in range(total)])

        def copying() -> bool:
            got = (
                sum(end_offsets(b, f"A.{backlog}").values())
                if f"A.{backlog}" in b.topic_names()
                else 0
            )
            return 0 < got < total // 2

        wait_for("the backlog half copied", copying, timeout=240, interval=0.05)
        standalone.kill_worker(0)
        wait_for(
            "the whole backlog on B",
            lambda: len({m.value() for m in read_all(b, f"A.{backlog}")}) == total,
            timeout=300,
            interval=3.0,
        )
    except BaseException:
        print(tail())
        raise
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGTERM)
            try:
                driver.wait(90)
            except Exception:
                os.killpg(driver.pid, signal.SIGKILL)
                driver.wait(30)

    # exact copy: every field, each record once
    got = read_all(b, f"A.{exact}")
    assert len(got) == 300
    by_ts = {m.timestamp()[1]: m for m in got}
    for i, rec in enumerate(records):
        m = by_ts[TS0 + i]
        assert (m.partition(), m.key(), m.value()) == (rec["partition"], rec["key"], rec["value"])
        assert (m.headers() or None) == rec["headers"]

    # a consumer failing over to B at the translated offsets misses nothing
    seen = consume_from(b, f"A.{exact}", offsets, 300 - sum(committed.values()))
    expected = sorted(
        (r["partition"], r["value"]) for i, r in enumerate(records) if i // 3 >= committed[i % 3]
    )
    assert sorted((m.partition(), m.value()) for m in seen) == expected

    # the killed worker lost nothing: every backlog record is on B (at-least-once)
    values = Counter(m.value() for m in read_all(b, f"A.{backlog}"))
    assert set(values) == {f"{i}".encode() for i in range(total)}
