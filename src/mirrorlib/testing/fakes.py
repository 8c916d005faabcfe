"""In-memory stand-ins for confluent-kafka's ``AdminClient`` that answer at once.

They let the control plane's own code (``ClusterAdmin``, ``MetadataTask``) run without a broker,
to test its decisions and to measure its CPU cost at scales no local cluster holds (see
``bench/controlplane.py``). Every request is counted in :attr:`FakeAdminClient.calls` (one call is
one round trip to a real cluster).

    admin = ClusterAdmin(alias="A", client=FakeAdminClient({"orders": 3}))
    assert admin.list_topics() == {"orders": 3}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

__all__ = ["FakeAdminClient", "FakeConfigEntry", "FakeFuture"]


class FakeFuture:
    """A future that is already done (with ``value``, or raising ``error``)."""

    __slots__ = ("_error", "_value")

    def __init__(self, value: Any = None, error: BaseException | None = None) -> None:
        self._value = value
        self._error = error

    def result(self, timeout: float | None = None) -> Any:
        if self._error is not None:
            raise self._error
        return self._value


@attrs.frozen
class FakeConfigEntry:
    """What confluent-kafka's ``ConfigEntry`` says about one topic config."""

    name: str
    value: str | None
    is_default: bool = True
    is_sensitive: bool = False
    is_read_only: bool = False
    source: int = 5  # librdkafka's DEFAULT_CONFIG


@attrs.frozen
class _Partition:
    id: int


@attrs.frozen
class _Topic:
    partitions: dict[int, _Partition]
    error: Any = None


@attrs.frozen
class _Metadata:
    topics: dict[str, _Topic]


@attrs.frozen
class _Node:
    id: int
    host: str
    port: int
    rack: str | None = None


@attrs.frozen
class _Cluster:
    cluster_id: str
    controller: _Node
    nodes: list[_Node]
    authorized_operations: list[Any] | None = None


#: Topic configs every fake topic has unless overridden (a few of Kafka's ~30).
DEFAULT_TOPIC_CONFIGS: Mapping[str, str] = {
    "cleanup.policy": "delete",
    "compression.type": "producer",
    "max.message.bytes": "1048588",
    "min.insync.replicas": "1",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
}


class FakeAdminClient:
    """An ``AdminClient`` over in-memory topics (name → partition count) and config overrides.

    Creating topics and partitions and altering configs change that state, as a cluster would.
    ``brokers`` is the broker count ``describe_cluster`` reports.
    """

    def __init__(
        self,
        topics: Mapping[str, int] | None = None,
        *,
        overrides: Mapping[str, Mapping[str, str]] | None = None,
        brokers: int = 3,
    ) -> None:
        self.topics: dict[str, int] = dict(topics or {})
        self.overrides: dict[str, dict[str, str]] = {
            t: dict(c) for t, c in (overrides or {}).items()
        }
        self.brokers = brokers
        self.calls: Counter[str] = Counter()
        self.described: Counter[str] = Counter()  # topic -> times its configs were described
        self._defaults = {k: FakeConfigEntry(k, v) for k, v in DEFAULT_TOPIC_CONFIGS.items()}
        self._metadata: _Metadata | None = None

    @property
    def round_trips(self) -> int:
        """Requests answered so far."""
        return sum(self.calls.values())

    def _changed(self, names: Iterable[str]) -> None:
        if self._metadata is not None:
            for name in names:
                self._metadata.topics[name] = self._topic(self.topics[name])

    @staticmethod
    def _topic(partitions: int) -> _Topic:
        return _Topic({p: _Partition(p) for p in range(partitions)})

    def set_topics(self, topics: Mapping[str, int]) -> None:
        """Replace every topic (as if created and deleted elsewhere)."""
        gone = self.topics.keys() - topics.keys()
        changed = [n for n, p in topics.items() if self.topics.get(n) != p]
        self.topics = dict(topics)
        if self._metadata is not None:
            for name in gone:
                del self._metadata.topics[name]
        self._changed(changed)

    def list_topics(self, timeout: float = -1) -> _Metadata:
        self.calls["list_topics"] += 1
        if self._metadata is None:  # librdkafka keeps its metadata cache too
            self._metadata = _Metadata({n: self._topic(p) for n, p in self.topics.items()})
        return _Metadata(dict(self._metadata.topics))

    def _entries(self, topic: str) -> dict[str, FakeConfigEntry]:
        own = self.overrides.get(topic)
        if not own:
            return self._defaults
        entries = dict(self._defaults)
        for key, value in own.items():
            entries[key] = FakeConfigEntry(key, value, is_default=False, source=1)
        return entries

    def describe_configs(self, resources: Iterable[Any], **_: Any) -> dict[Any, FakeFuture]:
        from confluent_kafka import KafkaError, KafkaException

        self.calls["describe_configs"] += 1
        out = {}
        for r in resources:
            self.described[r.name] += 1
            if r.name in self.topics:
                out[r] = FakeFuture(self._entries(r.name))
            else:
                err = KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
                out[r] = FakeFuture(error=err)
        return out

    def create_topics(self, new_topics: Iterable[Any], **_: Any) -> dict[str, FakeFuture]:
        from confluent_kafka import KafkaError, KafkaException

        self.calls["create_topics"] += 1
        out = {}
        for t in new_topics:
            if t.topic in self.topics:
                err = KafkaException(KafkaError(KafkaError.TOPIC_ALREADY_EXISTS))
                out[t.topic] = FakeFuture(error=err)
                continue
            self.topics[t.topic] = t.num_partitions
            if t.config:
                self.overrides[t.topic] = dict(t.config)
            out[t.topic] = FakeFuture()
        self._changed(out)
        return out

    def create_partitions(self, new: Iterable[Any], **_: Any) -> dict[str, FakeFuture]:
        self.calls["create_partitions"] += 1
        out = {}
        for p in new:
            self.topics[p.topic] = max(self.topics.get(p.topic, 0), p.new_total_count)
            out[p.topic] = FakeFuture()
        self._changed(out)
        return out

    def incremental_alter_configs(
        self, resources: Iterable[Any], **_: Any
    ) -> dict[Any, FakeFuture]:
        self.calls["incremental_alter_configs"] += 1
        out = {}
        for r in resources:
            own = self.overrides.setdefault(r.name, {})
            for entry in r.incremental_configs:
                if entry.value is None:
                    own.pop(entry.name, None)
                else:
                    own[entry.name] = entry.value
            out[r] = FakeFuture()
        return out

    def describe_cluster(self, **_: Any) -> FakeFuture:
        self.calls["describe_cluster"] += 1
        nodes = [_Node(i, "127.0.0.1", 9092 + i) for i in range(self.brokers)]
        return FakeFuture(_Cluster("fake", nodes[0], nodes))
