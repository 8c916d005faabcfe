"""Replacing the real MirrorMaker 2 with mirrorlib on the same clusters, and back.

mirrorlib uses MM2's internal topics with MM2's bytes: its stored positions (the Connect offsets
topic), checkpoints and offset syncs. So MM2 can write first, mirrorlib continue without
re-copying or losing anything, and MM2 take over again.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from mirrorlib import MirrorConfig, Replicator, translate_offsets
from mirrorlib.testing import ClusterSet
from mirrorlib.testing.mm2 import RealMirrorMaker, mm2_properties
from tests.runtime.conftest import commit_group, end_offsets, produce, read_all, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.java]


def test_mm2_then_mirrorlib_then_mm2(two_clusters: ClusterSet, tmp_path: Path) -> None:
    a, b = two_clusters
    topic = "handoff.t"
    remote = f"HA.{topic}"
    a.create_topic(topic, 2)
    props = mm2_properties(
        two_clusters, ["HA->HB"], aliases=["HA", "HB"], topics="handoff\\..*", groups="handoff-.*",
        extra={"emit.checkpoints.interval.seconds": "1", "HB.offset.flush.interval.ms": "500"},
    )  # fmt: skip
    b_conf = {"bootstrap.servers": b.bootstrap_servers}

    def total_on_b() -> int:
        return sum(end_offsets(b, remote).values()) if remote in b.topic_names() else 0

    def checkpoint_for(offset: int) -> bool:
        try:
            got = translate_offsets(b_conf, "HA", "handoff-group", timeout=10)
        except Exception:
            return False
        return (
            any(o.offset > 0 for o in got.values())
            and sum(1 for tp, o in got.items() if tp.topic == remote) == 2
            and offset >= 0
        )

    # 1. the real MM2 replicates the first 400 records and checkpoints a group
    produce(a, topic, [{"value": str(i).encode(), "partition": i % 2} for i in range(400)])
    commit_group(a, "handoff-group", topic, {0: 100, 1: 100})
    with RealMirrorMaker(props, work_dir=tmp_path / "mm2-1") as mm2:
        mm2.wait_until(lambda: total_on_b() >= 400, timeout=120, message="MM2 replicated 400")
        mm2.wait_until(lambda: checkpoint_for(100), timeout=60, message="MM2 checkpoints")
    mm2_checkpoints = translate_offsets(b_conf, "HA", "handoff-group")

    # 2. mirrorlib continues from MM2's positions with the same config
    produce(a, topic, [{"value": str(i).encode(), "partition": i % 2} for i in range(400, 700)])
    commit_group(a, "handoff-group", topic, {0: 300, 1: 300})
    config = MirrorConfig.from_properties(props)
    with Replicator(config) as r:
        wait_for("mirrorlib replicated the rest", lambda: total_on_b() >= 700, timeout=90)
        import time

        time.sleep(2)
        # resumed at MM2's stored positions: nothing MM2 had replicated was copied again
        assert total_on_b() == 700, (total_on_b(), r.status())

        def advanced() -> dict | None:
            got = translate_offsets(b_conf, "HA", "handoff-group", timeout=10)
            return got if all(o.offset >= 300 for o in got.values()) and len(got) == 2 else None

        after = wait_for("mirrorlib checkpoints continue MM2's", advanced, timeout=60)
        for tp, before in mm2_checkpoints.items():
            assert after[tp].offset >= before.offset  # never backwards across the handoff

    # 3. MM2 takes over again from mirrorlib's positions
    produce(a, topic, [{"value": str(i).encode(), "partition": i % 2} for i in range(700, 800)])
    with RealMirrorMaker(props, work_dir=tmp_path / "mm2-2") as mm2:
        mm2.wait_until(
            lambda: total_on_b() >= 800, timeout=120, message="MM2 replicated the last 100"
        )
        import time

        time.sleep(3)
    counts = Counter(int(m.value()) for m in read_all(b, remote))
    assert set(counts) == set(range(800)), "records lost across the handoffs"
    duplicates = sum(c - 1 for c in counts.values())
    assert duplicates == 0, f"{duplicates} records copied twice across graceful handoffs"
