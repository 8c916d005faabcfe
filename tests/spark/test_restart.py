"""Kill the Spark driver (``python -m mirrorlib.spark``) in the middle of a batch, restart it from
the checkpoint location, and count: at-least-once, every record is on the target."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import javaproperties
import pytest

from mirrorlib.testing import ClusterSet
from tests.runtime.conftest import end_offsets, mm2_properties, read_all, wait_for
from tests.runtime.test_delivery import Load
from tests.spark.conftest import require_spark

pytestmark = [pytest.mark.integration, pytest.mark.spark]


class SparkDriver:
    """``python -m mirrorlib.spark`` in its own process group (the JVM and Python workers are
    its children), so a kill takes the whole driver down at once."""

    def __init__(self, properties: dict[str, str], workdir: Path) -> None:
        self.config = workdir / "mm2.properties"
        self.config.write_text(javaproperties.dumps(properties), encoding="utf-8")
        self.checkpoints = workdir / "chk"
        self.log = workdir / "driver.log"
        self.proc: Any = None

    def start(self) -> None:
        env = {
            **os.environ,
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
        command = [sys.executable, "-m", "mirrorlib.spark", str(self.config)]
        command += ["--checkpoint-location", str(self.checkpoints), "--master", "local[2]"]
        command += ["--trigger-interval", "0 seconds", "--max-records-per-batch", "3000"]
        with open(self.log, "a", encoding="utf-8") as out:
            self.proc = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    def batches(self) -> tuple[int, int]:
        """(planned, committed) batch counts in the flow's checkpoint."""
        flow = self.checkpoints / "A-to-B"

        def count(sub: str) -> int:
            d = flow / sub
            return len([p for p in d.iterdir() if p.name.isdigit()]) if d.is_dir() else 0

        return count("offsets"), count("commits")

    def committed_end(self, topic: str) -> int:
        """Upstream records of ``topic`` covered by the last committed batch."""
        flow = self.checkpoints / "A-to-B"
        last = max(int(p.name) for p in (flow / "commits").iterdir() if p.name.isdigit())
        plan = json.loads((flow / "mirrorlib-plans" / str(last)).read_text())
        return sum(plan["end"].get(topic, {}).values())

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # the Python driver stops its queries first
            try:
                return int(self.proc.wait(90))
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(30)
                return -9
        return int(self.proc.returncode)

    def tail(self, n: int = 60) -> str:
        lines = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        return "\n".join(line for line in lines if not line.lstrip().startswith("at "))[-8000:]


def test_kill_the_driver_mid_batch_and_restart_from_the_checkpoint(
    two_clusters: ClusterSet, tmp_path: Path
) -> None:
    require_spark()
    a, b = two_clusters
    topic = f"spkill{uuid.uuid4().hex[:8]}"
    a.create_topic(topic, 3)
    props = mm2_properties(two_clusters, ["A->B"], **{"A->B.topics": topic})
    driver = SparkDriver(props, tmp_path)
    load = Load(a, topic, 3).start()
    driver.start()
    try:
        # wait until records are flowing, then for a batch that is planned but not committed
        wait_for(
            "records on B",
            lambda: f"A.{topic}" in b.topic_names() and sum(end_offsets(b, f"A.{topic}").values()),
            timeout=180,
        )

        def mid_batch() -> bool:
            # a batch is planned but not committed, and some of its records are already on B
            planned, committed = driver.batches()
            if not (planned > committed >= 2):
                return False
            done = driver.committed_end(topic)
            return sum(end_offsets(b, f"A.{topic}").values()) > done

        wait_for("a batch half written", mid_batch, timeout=120, interval=0.02)
        driver.kill()
        planned, committed = driver.batches()
        assert planned > committed, (planned, committed)
        written = sum(end_offsets(b, f"A.{topic}").values())
        time.sleep(2.0)
        driver.start()  # same checkpoint location: the unfinished batch is replayed
        wait_for("batches after the restart", lambda: driver.batches()[1] > committed + 1, 180)
        sent = load.stop()
        wait_for(
            "every record on B",
            lambda: (
                sum(end_offsets(b, f"A.{topic}").values()) >= sent
                and len({m.value() for m in read_all(b, f"A.{topic}")}) == sent
            ),
            timeout=180,
            interval=2.0,
        )
    except BaseException:
        print(driver.tail())
        raise
    finally:
        load.stop()
        code = driver.stop()
    assert code == 0, driver.tail()
    values = Counter(m.value() for m in read_all(b, f"A.{topic}"))
    assert set(values) == {str(i).encode() for i in range(sent)}  # nothing lost
    duplicates = sum(n - 1 for n in values.values())
    # at-least-once: the replayed batch wrote again what the killed attempt had written
    print(f"{sent} records, {duplicates} duplicates after the kill")
    assert 0 < duplicates <= written
