"""A real stall: the target broker frozen (SIGSTOP) while records wait. The stall is logged while it
lasts and shown in the status; once the broker runs again the flow recovers by itself and every
record arrives (at-least-once: duplicates allowed, nothing missing)."""

from __future__ import annotations

import logging
import os
import re
import signal
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from mirrorlib import Replicator
from mirrorlib.core.status import STALL_AFTER_S, FlowState, FlowStatus
from mirrorlib.runtime.flow import STALL_CHECK_S
from mirrorlib.testing import KafkaCluster
from tests.runtime.conftest import config, produce, read_all, wait_for
from tests.runtime.test_replicator import replicated

pytestmark = pytest.mark.integration


@contextmanager
def frozen(cluster: KafkaCluster) -> Iterator[None]:
    """The broker process stopped (SIGSTOP: its sockets stay open, nothing answers), always
    continued (SIGCONT) on the way out."""
    pid = cluster.pid
    assert pid is not None, "the broker is not running"
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def test_a_frozen_target_is_a_visible_stall_that_ends_by_itself(  # type: ignore[no-untyped-def]
    private_kafka_clusters, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mirrorlib.runtime.flow")
    a, b = private_kafka_clusters(["A", "B"])
    topic = "frozen.t"
    a.create_topic(topic, 2)
    cfg = config([a, b], ["A->B"], **{"A->B.topics": "frozen\\..*"})
    batch = 1000

    def send(first: int) -> None:
        produce(
            a, topic, [{"value": str(first + i).encode(), "partition": i % 2} for i in range(batch)]
        )

    with Replicator(cfg) as r:

        def flow() -> FlowStatus:
            return next(s for s in r.status() if s.name == "A->B")

        send(0)
        wait_for("the first records replicated", lambda: replicated(r, "frozen") >= batch)
        with frozen(b):
            send(batch)  # records waiting, and a target that answers nothing
            # both partitions of the topic stalled (the flow's reason names the first stalled
            # partition by name: the heartbeats replicated from A can cross the threshold first)
            status = wait_for(
                "the flow reported stalled with the topic's partitions",
                lambda: (
                    (s := flow()).state is FlowState.STALLED
                    and all(p.stalled for p in s.partitions if p.topic == topic)
                    and s
                ),
                timeout=STALL_AFTER_S + 30,
            )
            assert status.stalled is not None
            assert re.search(rf"{re.escape(topic)}-[01]: no progress", status.stalled), status
            mine = [p for p in status.partitions if p.topic == topic]
            assert len(mine) == 2 and all("no progress" in (p.stalled or "") for p in mine)
            # the copier's loop goes on coming round (its periodic checks of the target, such
            # as the topic IDs', do not wait for an answer)
            assert "copier: blocked" not in status.stalled, status
            wait_for(
                "the stall in the log while it lasts",
                lambda: any("flow A->B stalled: " in m for m in caplog.messages),
                timeout=STALL_CHECK_S + 5,
            )
            assert replicated(r, "frozen") < 2 * batch
        assert not any("moving again" in m for m in caplog.messages)
        wait_for(
            "every record replicated after the broker runs again",
            lambda: replicated(r, "frozen") >= 2 * batch,
            timeout=60,
        )
        wait_for(
            "the end of the stall in the log",
            lambda: any("flow A->B: moving again after" in m for m in caplog.messages),
            timeout=STALL_CHECK_S + 5,
        )
        assert flow().state is FlowState.RUNNING, flow()
    got = {int(m.value()) for m in read_all(b, f"A.{topic}")}
    assert got == set(range(2 * batch))
