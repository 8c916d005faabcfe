"""Leaving a flow's consumer group as a *static* member (``group.instance.id``) on a clean stop.

The copier consumers of a flow (``tasks.max`` = 1) and the group members of processes with worker
processes (``tasks.max`` > 1) join the flow's group as static members, so that a process killed
and restarted under the same ``node.id`` gets its partitions back at once instead of after the
group's session timeout. But librdkafka sends no LeaveGroup when a static member *closes*
(KIP-345: a static member that goes away is expected back), so a process that stopped for good
would keep its partitions from the processes sharing the flow until its session timed out (45 s
by default). It does send one when the member unsubscribes before closing: :func:`leave_group`
does that on a clean stop, after the partitions were revoked (their callbacks ran: positions
committed, workers released), so the group gives them to the other processes at once. A
process killed (``kill -9``) cannot leave: its partitions wait for its restart, or for the
session timeout.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError

from mirrorlib.core.settings import FlowSettings

__all__ = ["fenced_reason", "leave_group", "member_fenced"]

log = logging.getLogger(__name__)

#: After the partitions were revoked, polls that serve the LeaveGroup librdkafka sends once the
#: revocation is done (it is sent from its own thread; a close that came first would skip it).
_AFTER_REVOKE_S = 0.3


def leave_group(
    consumer: Any, timeout: float, flow: str, after_poll: Callable[[], None] | None = None
) -> None:
    """Unsubscribe ``consumer`` (a subscribed static member of ``flow``'s group) and serve the
    revocation of its partitions (fetching paused: a record fetched meanwhile is dropped, never
    copied, so never committed), up to ``timeout`` seconds; ``after_poll`` runs after every poll
    (e.g. to raise what a rebalance callback kept). If the revocation does not end in time it
    says so (the group then waits for the session timeout); the caller closes the consumer
    afterwards either way."""
    assigned = consumer.assignment()
    if assigned:
        consumer.pause(assigned)
    consumer.unsubscribe()
    deadline = time.monotonic() + timeout
    while consumer.assignment():
        if time.monotonic() >= deadline:
            log.warning(
                "flow %s: the revocation of this process's partitions did not end within %.0fs: "
                "the flow's group gives them to other processes after its session timeout",
                flow,
                timeout,
            )
            return
        consumer.poll(0.05)  # serves the revocation (callbacks run here); records are dropped
        if after_poll is not None:
            after_poll()
    # give librdkafka's thread the moment it needs to send the LeaveGroup
    settle = min(deadline, time.monotonic() + _AFTER_REVOKE_S)
    while time.monotonic() < settle:
        consumer.poll(0.05)


#: librdkafka's description of a static member fenced by another with its ``group.instance.id``
#: (a fatal error: it comes out of ``poll`` as ``_FATAL`` with this text, not with its code)
_MEMBER_FENCED = KafkaError(KafkaError.FENCED_INSTANCE_ID).str()


def member_fenced(err: KafkaError) -> bool:
    """Whether a consumer died because another process joined its group with its
    ``group.instance.id`` (a second process with the same ``node.id``, or this process's
    replacement while it was paused)."""
    code = err.code()
    return code == KafkaError.FENCED_INSTANCE_ID or (
        code == KafkaError._FATAL and _MEMBER_FENCED in err.str()
    )


def fenced_reason(s: FlowSettings, err: KafkaError) -> str:
    """Why a fenced member's process stops copying its flow (for the log and the status).
    It must not rejoin: it would fence the other process in turn, and the two would take the
    partitions from each other by turns."""
    return (
        f"another process joined the flow's group on {s.source} as this node "
        f"(group.instance.id {s.group_instance_id!r}, from node.id {s.node!r}): this process "
        f"stops copying the flow. Processes sharing a flow need distinct node.id values "
        f"({err.str()})"
    )
