"""FlowRunner: the control plane both engines share, composed around a data plane."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Any

import pytest

from mirrorlib import MirrorConfig, MirrorError
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.status import FlowState
from mirrorlib.runtime.flow import STARTUP_ABANDON_S, FlowRunner, stop_flows
from mirrorlib.testing import ClusterSet
from tests.runtime.conftest import config, wait_for


class RecordingPlane:
    """A data plane that records what its runner asks of it; its ``start`` runs one thread
    that waits for the flow's stop event and one that dies."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.threads_at_prepare: set[str] = set()
        self.threads_at_start: set[str] = set()
        self.offsets_partitions_at_start: int | None = None
        self.stop_event_set_at_stop: bool | None = None
        self._stop_event: threading.Event | None = None
        self._watching = threading.Event()

    def prepare(self, flow: FlowRunner[Any]) -> None:
        self.calls.append("prepare")
        self.threads_at_prepare = components(flow)

    def start(self, flow: FlowRunner[Any]) -> None:
        self.calls.append("start")
        self.threads_at_start = components(flow)
        self.offsets_partitions_at_start = flow.metadata.offsets_topic_partitions
        flow.spawn("watcher", self._watch)
        flow.spawn("broken", self._die)
        assert self._watching.wait(10)

    def _watch(self, stop: threading.Event) -> None:
        self._stop_event = stop
        self._watching.set()
        stop.wait()

    def _die(self, _stop: threading.Event) -> None:
        raise ValueError("boom")

    def stop(self) -> None:
        self.calls.append("stop")
        if self._stop_event is not None:
            self.stop_event_set_at_stop = self._stop_event.is_set()


def components(flow: FlowRunner[Any]) -> set[str]:
    """The components of ``flow`` that have a live thread (named ``<prefix> <A->B> <name>``)."""
    prefix = f"{flow.thread_prefix} {flow.settings.name} "
    return {
        t.name.removeprefix(prefix)
        for t in threading.enumerate()
        if t.name.startswith(prefix) and t.is_alive()
    }


def fresh_prefix() -> str:
    """A thread prefix of this test alone: threads an earlier test's flow A->B may still be
    ending (the join of a stop is bounded) must not count as this runner's."""
    return f"test-{uuid.uuid4().hex[:8]}"


def unreachable_runner(
    thread_prefix: str = "mirrorlib", connect_timeout: float = 0.5
) -> FlowRunner[RecordingPlane]:
    """A runner for A->B whose clusters never answer (nothing listens on port 1)."""
    cfg = MirrorConfig.from_properties(
        {
            "clusters": "A, B",
            "A.bootstrap.servers": "127.0.0.1:1",
            "B.bootstrap.servers": "127.0.0.1:1",
            "A->B.enabled": "true",
            "admin.timeout.ms": "1000",
        }
    )
    settings = FlowSettings.from_config(cfg, cfg.flow("A", "B"))
    return FlowRunner(
        settings, RecordingPlane(), thread_prefix=thread_prefix, connect_timeout=connect_timeout
    )


# -- without a broker ------------------------------------------------------------------------


def test_background_start_retries_the_clusters_in_a_main_thread_until_stopped() -> None:
    runner = unreachable_runner(thread_prefix="test-engine")
    runner.start()
    assert components(runner) == {"main"}
    wait_for(
        "the unreachable clusters in the status, within the connect timeout",
        lambda: any(
            e.startswith("connection: cluster A (127.0.0.1:1) is unreachable: no answer within")
            and "cluster B (127.0.0.1:1)" in e
            for e in runner.stats.snapshot().errors
        ),
        timeout=5,
    )
    assert runner.stats.snapshot().state is FlowState.STARTING
    assert not runner.came_up.is_set()
    stop_flows([runner], 30)
    assert components(runner) == set()
    assert runner.data_plane.calls == ["stop"]  # never prepared nor started
    assert runner.stats.snapshot().state is FlowState.STOPPED


def test_blocking_start_raises_when_stopped_before_the_internal_topics_exist() -> None:
    runner = unreachable_runner(thread_prefix=fresh_prefix())
    stopper = threading.Timer(0.5, runner.request_stop)
    stopper.start()
    try:
        with pytest.raises(MirrorError, match="stopped before the internal topics were created"):
            runner.start_blocking()
    finally:
        stopper.join()
    runner.join(30)
    assert runner.data_plane.calls == ["stop"]
    assert components(runner) == set()
    assert runner.stats.snapshot().state is FlowState.STOPPED


def test_a_stop_ends_the_wait_for_the_clusters_first_answer_at_once() -> None:
    runner = unreachable_runner(thread_prefix=fresh_prefix(), connect_timeout=60)
    runner.start()
    time.sleep(1.0)  # the clusters have not answered: the probe waits up to 60 s
    began = time.monotonic()
    stop_flows([runner], 30)
    assert time.monotonic() - began < 2.0
    assert components(runner) == set()
    assert runner.stats.snapshot().errors == ()  # stopped, not failed: no timeout reported
    assert runner.stats.snapshot().state is FlowState.STOPPED


def test_a_stopped_flow_starts_no_thread() -> None:
    runner = unreachable_runner(thread_prefix=fresh_prefix())
    runner.request_stop()
    started = threading.Event()
    runner.spawn("late", lambda _stop: started.set())
    runner.join(5)
    assert not started.is_set()
    assert components(runner) == set()


# -- on real clusters ------------------------------------------------------------------------


@pytest.mark.integration
def test_components_start_around_the_data_plane_and_stop_after_it(
    two_clusters: ClusterSet,
) -> None:
    cfg = config(two_clusters, ["A->B"], **{"A->B.topics": "flowrunner\\..*"})
    runner = FlowRunner(
        FlowSettings.from_config(cfg, cfg.flow("A", "B")),
        RecordingPlane(),
        thread_prefix=fresh_prefix(),
    )
    plane = runner.data_plane
    try:
        runner.start_blocking()
        assert plane.calls == ["prepare", "start"]
        assert plane.threads_at_prepare == set()  # nothing runs yet, not even heartbeats
        assert plane.threads_at_start == {"heartbeats", "metadata"}
        assert plane.offsets_partitions_at_start == 5  # offset.storage.partitions
        assert components(runner) >= {"heartbeats", "metadata", "checkpoints", "watcher"}
        wait_for(
            "the dead thread in the status",
            lambda: "broken: thread died; see the log" in runner.stats.snapshot().errors,
            timeout=10,
        )
        assert runner.stats.snapshot().state is FlowState.DEGRADED
        wait_for("a heartbeat", lambda: runner.stats.last_heartbeat_ms, timeout=30)
    finally:
        runner.request_stop()
        runner.join(30)
    assert plane.calls == ["prepare", "start", "stop"]
    assert plane.stop_event_set_at_stop is False  # the data plane stops first
    assert components(runner) == set()
    assert runner.stats.snapshot().state is FlowState.STOPPED


@pytest.mark.integration
def test_a_heartbeats_only_pair_runs_no_data_plane(two_clusters: ClusterSet) -> None:
    cfg = config(two_clusters, [])
    runner = FlowRunner(
        FlowSettings.from_config(cfg, cfg.flow("A", "B")),
        RecordingPlane(),
        thread_prefix=fresh_prefix(),
    )
    try:
        runner.start_blocking()
        assert components(runner) == {"heartbeats"}
        assert runner.stats.snapshot().state is FlowState.RUNNING
        wait_for("a heartbeat", lambda: runner.stats.last_heartbeat_ms, timeout=30)
    finally:
        stop_flows([runner], 30)
    assert runner.data_plane.calls == ["stop"]
    assert runner.stats.snapshot().state is FlowState.STOPPED


class StallingPlane:
    """A data plane whose target producer "cannot write" (as librdkafka reports a producer stuck
    acquiring its idempotence PID) until :attr:`moving` is set, then makes progress."""

    def __init__(self) -> None:
        self.moving = threading.Event()

    def prepare(self, flow: FlowRunner[Any]) -> None:
        pass

    def start(self, flow: FlowRunner[Any]) -> None:
        stats = flow.stats
        part = stats.partition("stalling.orders", 0, "A.stalling.orders")
        part.position, part.end_offset = 0, 100  # records waiting
        stats.client_problem(
            "target", "Failed to acquire idempotence PID from broker: Coordinator load in progress"
        )

        def copy(stop: threading.Event) -> None:
            while not self.moving.is_set() and not stop.is_set():
                stop.wait(0.1)
            part.position = 100

        flow.spawn("copy", copy)

    def stop(self) -> None:
        pass


@pytest.mark.integration
def test_a_stall_is_logged_while_it_lasts_and_its_end_too(
    two_clusters: ClusterSet, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mirrorlib.runtime.flow")
    cfg = config(two_clusters, ["A->B"], **{"A->B.topics": "stalling\\..*"})
    plane = StallingPlane()
    runner = FlowRunner(FlowSettings.from_config(cfg, cfg.flow("A", "B")), plane)
    runner.start()
    try:
        wait_for(
            "the stall in the log",
            lambda: any("flow A->B stalled: target:" in m for m in caplog.messages),
            timeout=30,
        )
        assert runner.stats.snapshot().state is FlowState.STALLED
        assert not any("moving again" in m for m in caplog.messages)
        plane.moving.set()
        wait_for(
            "the end of the stall in the log",
            lambda: any("flow A->B: moving again after" in m for m in caplog.messages),
            timeout=30,
        )
        assert runner.stats.snapshot().state is not FlowState.STALLED
    finally:
        stop_flows([runner], timeout=30)


class StuckPlane:
    """A data plane whose :meth:`prepare` hangs (like a start-up request to a cluster that
    accepts connections and never answers) until :attr:`release` is set."""

    def __init__(self) -> None:
        self.preparing = threading.Event()
        self.release = threading.Event()
        self.started = False

    def prepare(self, flow: FlowRunner[Any]) -> None:
        self.preparing.set()
        self.release.wait(60)

    def start(self, flow: FlowRunner[Any]) -> None:
        self.started = True

    def stop(self) -> None:
        pass


@pytest.mark.integration
def test_a_stuck_start_up_is_abandoned_by_a_stop_and_starts_nothing_afterwards(
    two_clusters: ClusterSet,
) -> None:
    cfg = config(two_clusters, ["A->B"], **{"A->B.topics": "stuck\\..*"})
    plane = StuckPlane()
    runner = FlowRunner(
        FlowSettings.from_config(cfg, cfg.flow("A", "B")), plane, thread_prefix=fresh_prefix()
    )
    runner.start()
    try:
        assert plane.preparing.wait(60)
        began = time.monotonic()
        stop_flows([runner], 30)
        assert time.monotonic() - began < STARTUP_ABANDON_S + 2.0
        assert runner.stats.snapshot().state is FlowState.STOPPED
    finally:
        plane.release.set()
    wait_for("the abandoned start-up to end", lambda: not components(runner), timeout=10)
    assert not plane.started  # nothing started after the stop: no heartbeats, no copier
