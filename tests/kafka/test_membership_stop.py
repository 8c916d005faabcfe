"""A node's share of a flow (``tasks.max`` > 1) at a clean stop: it leaves the flow's group once
its workers stopped, unless one of them may have left a transaction open that could not be
fenced (then the group gives its partitions away after the session timeout, to a node that
fences it first). No broker needed: the consumer is a stand-in."""

from __future__ import annotations

import threading

import pytest

from mirrorlib.core.catalog import TopicCatalog
from mirrorlib.kafka import membership
from mirrorlib.kafka.membership import GroupShare
from tests.runtime.conftest import offline_settings


@pytest.mark.parametrize("clean", [True, False])
def test_a_stopped_node_leaves_the_group_only_when_nothing_is_left_open(
    monkeypatch: pytest.MonkeyPatch, clean: bool
) -> None:
    left: list[object] = []
    monkeypatch.setattr(membership, "leave_group", lambda consumer, *_: left.append(consumer))
    share = GroupShare(offline_settings(**{"tasks.max": "2"}), TopicCatalog())
    share.workers_stopped = threading.Event()
    share.workers_stopped.set()
    share.workers_clean = lambda: clean
    stop = threading.Event()
    stop.set()
    share._stop = stop  # (what run() sets)
    consumer = object()
    share._leave(consumer, ["t"])
    assert left == ([consumer] if clean else [])
