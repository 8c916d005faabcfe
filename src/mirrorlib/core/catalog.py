"""The set of source topics a flow replicates right now, shared by the flow's threads."""

from __future__ import annotations

import threading
from collections.abc import Mapping

import attrs

__all__ = ["RemoteTopic", "TopicCatalog"]


@attrs.frozen
class RemoteTopic:
    name: str  # the remote topic on the target
    partitions: int  # partitions the remote topic has (records beyond them wait)
    max_message_bytes: int | None = None  # the remote topic's max.message.bytes, when known


class TopicCatalog:
    """Source topic → remote topic, for topics whose remote topic exists on the target.

    The metadata thread publishes a new mapping after creating remote topics and partitions; the
    copier picks it up by comparing :attr:`version`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._topics: dict[str, RemoteTopic] = {}
        self._version = 0
        self.ready = threading.Event()  # set after the first publication

    @property
    def version(self) -> int:
        return self._version

    def publish(self, topics: Mapping[str, RemoteTopic]) -> None:
        with self._lock:
            if dict(topics) != self._topics:
                self._topics = dict(topics)
                self._version += 1
        self.ready.set()

    def snapshot(self) -> tuple[int, dict[str, RemoteTopic]]:
        with self._lock:
            return self._version, dict(self._topics)
