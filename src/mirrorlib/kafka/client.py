"""Client-side failover helpers: MM2's ``MirrorClient`` and ``RemoteClusterUtils``.

A :class:`MirrorClient` talks to one cluster (the *local* one, usually a replication target) and
answers the questions a consumer application asks when it fails over:

* which clusters replicate into this one, and over how many hops
  (:meth:`~MirrorClient.upstream_clusters`, :meth:`~MirrorClient.replication_hops`), worked out
  from the names of the heartbeat topics (``heartbeats``, ``A.heartbeats``, ``B.A.heartbeats``);
* which topics are remote copies (:meth:`~MirrorClient.remote_topics`);
* where a consumer group of a remote cluster should resume on this cluster
  (:meth:`~MirrorClient.remote_consumer_offsets`, or the module-level :func:`translate_offsets`),
  read from the checkpoints topic ``<remote>.checkpoints.internal`` that MM2 — or mirrorlib —
  writes on this cluster.

The semantics are those of MM2 4.3's ``MirrorClient``, and the records are read with mirrorlib's
byte-compatible codecs, so checkpoints written by Java MM2 and by mirrorlib are interchangeable.

Differences from the Java client, all on the side of failing loudly:

* every Kafka call has a timeout, and a cluster that cannot be reached, a missing checkpoints
  topic, or a checkpoints topic that cannot be read to its end within the timeout raises
  :class:`~mirrorlib.errors.ClusterError` naming the cluster (MM2 returns whatever it read so far);
* the configuration is a librdkafka one: every key except MM2's own (``replication.policy.*``,
  ``source.cluster.alias``, ``forwarding.admin.class``) reaches the clients, where MM2 keeps only
  the bootstrap, security, SSL and SASL settings;
* librdkafka's own log lines (such as "Connection refused" while a cluster is down) go to the
  Python logger ``mirrorlib.kafka.client.librdkafka`` instead of stderr, unless ``logger`` is set.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, Final, Self

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from mirrorlib.core.policy import ReplicationPolicy, load_policy
from mirrorlib.core.records import Checkpoint, Heartbeat, OffsetAndMetadata, TopicPartition
from mirrorlib.errors import ClusterError, ConfigError
from mirrorlib.kafka.tls import check_tls_files, failure_reason
from mirrorlib.kafka.topiclog import Record, SkippedRecords, TopicLog, decoded

__all__ = ["MirrorClient", "translate_offsets"]

log = logging.getLogger(__name__)
#: librdkafka's own log lines (e.g. "Connection refused") go here instead of stderr.
librdkafka_log = logging.getLogger(__name__ + ".librdkafka")

#: Keys of MM2's ``MirrorClientConfig`` that configure the client itself, not the Kafka clients.
MM2_CLIENT_KEYS: Final = frozenset(
    {
        "replication.policy.class",
        "replication.policy.separator",
        "replication.policy.internal.topic.separator.enabled",
        "source.cluster.alias",
        "forwarding.admin.class",
    }
)
ADMIN_PREFIX: Final = "admin."
CONSUMER_PREFIX: Final = "consumer."
PRODUCER_PREFIX: Final = "producer."
_CLIENT_PREFIXES: Final = (ADMIN_PREFIX, CONSUMER_PREFIX, PRODUCER_PREFIX)

GroupOffsets = dict[TopicPartition, OffsetAndMetadata]


def _is_mm2_key(key: str) -> bool:
    return key in MM2_CLIENT_KEYS or key.startswith("replication.policy.")


def split_client_config(
    config: Mapping[str, Any],
) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
    """Split a MirrorClient configuration into (policy keys, admin config, consumer config).

    Like MM2's ``MirrorClientConfig``: un-prefixed keys apply to both clients, ``admin.X`` /
    ``consumer.X`` override ``X`` for that client only, ``producer.X`` is ignored (the client
    never produces), and MM2's own keys are removed from the client configurations. The policy
    keys are every un-prefixed key (a custom policy may read its own), as strings.
    """
    base: dict[str, Any] = {}
    policy_keys: dict[str, str] = {}
    prefixed: dict[str, dict[str, Any]] = {ADMIN_PREFIX: {}, CONSUMER_PREFIX: {}}
    for key, value in config.items():
        if not isinstance(key, str):
            raise ConfigError(f"configuration keys must be strings, got {key!r}", key=str(key))
        prefix = next((p for p in _CLIENT_PREFIXES if key.startswith(p)), None)
        if prefix is None:
            policy_keys[key] = value if isinstance(value, str) else str(value)
            if not _is_mm2_key(key):
                base[key] = value
        elif prefix != PRODUCER_PREFIX:
            name = key[len(prefix) :]
            if name and not _is_mm2_key(name):
                prefixed[prefix][name] = value
    admin = {"logger": librdkafka_log, **base, **prefixed[ADMIN_PREFIX]}
    consumer = {"logger": librdkafka_log, **base, **prefixed[CONSUMER_PREFIX]}
    for conf, prefix in ((admin, ADMIN_PREFIX), (consumer, CONSUMER_PREFIX)):
        if not str(conf.get("bootstrap.servers", "")).strip():
            raise ConfigError(
                "bootstrap.servers is required (the local cluster's brokers)",
                key="bootstrap.servers" if prefix == ADMIN_PREFIX else prefix + "bootstrap.servers",
            )
    return policy_keys, admin, consumer


class MirrorClient:
    """Reads MM2's internal topics (heartbeats, checkpoints) on one cluster.

    ``config`` is the librdkafka configuration of the *local* cluster (``bootstrap.servers`` and
    security settings). Like MM2's ``MirrorClientConfig`` it may also carry
    ``replication.policy.class`` / ``replication.policy.separator`` /
    ``replication.policy.internal.topic.separator.enabled`` (and ``source.cluster.alias`` for the
    identity policy), from which the policy is built when ``policy`` is ``None``; and
    ``admin.``/``consumer.``-prefixed settings for one of the two internal clients only.

    ``alias`` names the cluster in errors (default: its bootstrap servers). ``timeout`` (seconds)
    bounds every call that takes no ``timeout`` of its own.

    Use it as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        config: Mapping[str, str],
        policy: ReplicationPolicy | None = None,
        *,
        alias: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        policy_keys, admin_conf, consumer_conf = split_client_config(config)
        self._policy = policy if policy is not None else load_policy(policy_keys)
        self._consumer_config = consumer_conf
        self._bootstrap = str(admin_conf["bootstrap.servers"])
        self.alias = alias or self._bootstrap
        self.timeout = float(timeout)
        check_tls_files(admin_conf, alias=self.alias)
        check_tls_files(consumer_conf, alias=self.alias)
        try:
            self._admin: AdminClient | None = AdminClient(admin_conf)
        except (KafkaException, TypeError, ValueError) as exc:
            raise ConfigError(
                f"invalid client configuration for cluster {self.alias}: {exc}"
            ) from exc

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def replication_policy(self) -> ReplicationPolicy:
        """The policy used to interpret topic names."""
        return self._policy

    def close(self) -> None:
        """Release the internal admin client. Idempotent."""
        self._admin = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MirrorClient({self.alias!r}, policy={self._policy!r})"

    # -- topics ---------------------------------------------------------------------------------

    def _where(self) -> str:
        if self.alias == self._bootstrap:
            return f"cluster {self._bootstrap}"
        return f"cluster {self.alias} ({self._bootstrap})"

    def list_topics(self, timeout: float | None = None) -> set[str]:
        """Names of the topics on the local cluster.

        Raises :class:`ClusterError` when the cluster does not answer within ``timeout``.
        """
        admin = self._admin
        if admin is None:
            raise ClusterError(f"MirrorClient for {self._where()} is closed")
        wait = self.timeout if timeout is None else timeout
        try:
            metadata = admin.list_topics(timeout=max(wait, 0.001))
        except KafkaException as exc:
            raise ClusterError(
                f"{self._where()}: cannot list topics within {wait:g}s: "
                f"{failure_reason(self._consumer_config, exc)}"
            ) from exc
        return {name for name, meta in metadata.topics.items() if meta.error is None}

    def heartbeat_topics(self, timeout: float | None = None) -> set[str]:
        """Heartbeat topics on this cluster (``heartbeats``, ``A.heartbeats``, ...)."""
        return {t for t in self.list_topics(timeout) if self._policy.is_heartbeats_topic(t)}

    def checkpoint_topics(self, timeout: float | None = None) -> set[str]:
        """Checkpoint topics on this cluster (``<alias>.checkpoints.internal``)."""
        return {t for t in self.list_topics(timeout) if self._policy.is_checkpoints_topic(t)}

    def upstream_clusters(self, timeout: float | None = None) -> set[str]:
        """Clusters that replicate into this one, directly or over several hops, as seen from
        the heartbeat topics."""
        sources: set[str] = set()
        for topic in self.heartbeat_topics(timeout):
            sources |= self._all_sources(topic)
        return sources

    def replication_hops(self, upstream_cluster_alias: str, timeout: float | None = None) -> int:
        """The smallest number of hops from ``upstream_cluster_alias`` to this cluster (for
        A->B->C, 2 from A to C), or -1 when it does not replicate into this cluster."""
        hops = [
            h
            for h in (
                self.count_hops_for_topic(t, upstream_cluster_alias)
                for t in self.heartbeat_topics(timeout)
            )
            if h != -1
        ]
        return min(hops, default=-1)

    def remote_topics(
        self, source_cluster_alias: str | None = None, timeout: float | None = None
    ) -> set[str]:
        """Remote (replicated) topics on this cluster, excluding internal topics; with
        ``source_cluster_alias``, only those replicated directly from that cluster."""
        topics = {t for t in self.list_topics(timeout) if self.is_remote_topic(t)}
        if source_cluster_alias is None:
            return topics
        return {t for t in topics if self._policy.topic_source(t) == source_cluster_alias}

    # -- naming rules (MirrorClient's package-private helpers) ------------------------------------

    def is_remote_topic(self, topic: str) -> bool:
        """Not internal, and the policy knows which cluster it came from."""
        return (
            not self._policy.is_internal_topic(topic)
            and self._policy.topic_source(topic) is not None
        )

    def count_hops_for_topic(self, topic: str, source_cluster_alias: str) -> int:
        """Hops from ``source_cluster_alias`` along ``topic``'s name, or -1 (cycle-safe)."""
        hops = 0
        visited: set[str] = set()
        current: str | None = topic
        while current is not None:
            hops += 1
            source = self._policy.topic_source(current)
            if source is None:
                return -1
            if source == source_cluster_alias:
                return hops
            if source in visited:
                # identity-like policies cannot prevent cycles: we would never get there
                return -1
            visited.add(source)
            current = self._policy.upstream_topic(current)
        return -1

    def _all_sources(self, topic: str) -> set[str]:
        sources: set[str] = set()
        current: str | None = topic
        source = self._policy.topic_source(topic)
        while source is not None and source not in sources and current is not None:
            sources.add(source)
            current = self._policy.upstream_topic(current)
            source = None if current is None else self._policy.topic_source(current)
        return sources

    # -- reading internal topics ----------------------------------------------------------------

    def _check_topic(self, topic: str, deadline: float) -> int:
        """Fail unless ``topic`` exists; return its partition count."""
        admin = self._admin
        if admin is None:
            raise ClusterError(f"MirrorClient for {self._where()} is closed")
        wait = max(deadline - time.monotonic(), 0.001)
        try:
            # all topics: a metadata request naming the topic may auto-create it (librdkafka's
            # admin client is a producer handle, and brokers default to auto.create.topics)
            metadata = admin.list_topics(timeout=wait)
        except KafkaException as exc:
            raise ClusterError(
                f"{self._where()}: cannot read metadata of {topic} within {wait:.1f}s: "
                f"{failure_reason(self._consumer_config, exc)}"
            ) from exc
        meta = metadata.topics.get(topic)
        if meta is None or meta.error is not None or not meta.partitions:
            reason = f" ({meta.error})" if meta is not None and meta.error is not None else ""
            raise ClusterError(f"{self._where()}: topic {topic} does not exist{reason}")
        return len(meta.partitions)

    def _read(
        self,
        topic: str,
        handle: Callable[[Record], None],
        timeout: float,
        partitions: list[int] | None,
    ) -> int:
        deadline = time.monotonic() + timeout
        self._check_topic(topic, deadline)
        try:
            reader = TopicLog(self._consumer_config, topic, alias=self.alias, partitions=partitions)
        except (KafkaException, TypeError, ValueError) as exc:
            raise ConfigError(f"invalid consumer configuration for {self._where()}: {exc}") from exc
        try:
            remaining = max(deadline - time.monotonic(), 0.001)
            return reader.read_to_end(handle, timeout=remaining)
        except ClusterError as exc:
            raise ClusterError(f"{self._where()}: {exc}") from exc
        except KafkaException as exc:
            raise ClusterError(f"{self._where()}: reading {topic} failed: {exc.args[0]}") from exc
        finally:
            reader.close()

    def remote_consumer_offsets(
        self, group_id: str, remote_cluster_alias: str, timeout: float = 30.0
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Where consumer group ``group_id`` of cluster ``remote_cluster_alias`` should resume on
        this cluster: the downstream offsets of the last checkpoint per partition.

        Reads ``policy.checkpoints_topic(remote_cluster_alias)`` partition 0 from the beginning
        to its current end. Keys name topics on this cluster (the remote topic names). Corrupt
        records are skipped with a logged warning. Raises :class:`ClusterError` when the cluster
        cannot be reached, the topic does not exist, or reading does not finish within
        ``timeout`` seconds.
        """
        groups = self._checkpoints(remote_cluster_alias, lambda g: g == group_id, timeout)
        return groups.get(group_id, {})

    def remote_consumer_offsets_matching(
        self, group_pattern: str | re.Pattern[str], remote_cluster_alias: str, timeout: float = 30.0
    ) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
        """:meth:`remote_consumer_offsets` for every group whose id fully matches
        ``group_pattern`` (MM2's ``remoteConsumerOffsets(Pattern, ...)``), keyed by group."""
        pattern = re.compile(group_pattern) if isinstance(group_pattern, str) else group_pattern
        return self._checkpoints(
            remote_cluster_alias, lambda g: pattern.fullmatch(g) is not None, timeout
        )

    def remote_consumer_offsets_many(
        self, group_ids: Iterable[str], remote_cluster_alias: str, timeout: float = 30.0
    ) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
        """:meth:`remote_consumer_offsets` of many groups, reading the checkpoints topic once (the
        shape of MM2 4.3's batch ``RemoteClusterUtils.translateOffsets``, KIP-1239): every group
        asked for is a key, with ``{}`` when it has no checkpoint."""
        wanted = set(group_ids)
        found = self._checkpoints(remote_cluster_alias, wanted.__contains__, timeout)
        return {group: found.get(group, {}) for group in sorted(wanted)}

    def checkpoints(
        self, remote_cluster_alias: str, timeout: float = 30.0
    ) -> dict[tuple[str, TopicPartition], Checkpoint]:
        """The latest :class:`Checkpoint` per (group, local topic-partition) in the checkpoints
        topic of ``remote_cluster_alias``."""
        latest: dict[tuple[str, TopicPartition], Checkpoint] = {}

        def keep(cp: Checkpoint) -> None:
            latest[(cp.group, cp.topic_partition)] = cp

        self._scan_checkpoints(remote_cluster_alias, keep, timeout)
        return latest

    def _checkpoints(
        self, remote_cluster_alias: str, accept: Callable[[str], bool], timeout: float
    ) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
        offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}

        def keep(cp: Checkpoint) -> None:
            if accept(cp.group):
                offsets.setdefault(cp.group, {})[cp.topic_partition] = cp.offset_and_metadata

        self._scan_checkpoints(remote_cluster_alias, keep, timeout)
        return offsets

    def _scan_checkpoints(
        self, remote_cluster_alias: str, keep: Callable[[Checkpoint], None], timeout: float
    ) -> None:
        topic = self._policy.checkpoints_topic(remote_cluster_alias)
        skipped = SkippedRecords("a checkpoint", self._where())

        def handle(msg: Record) -> None:
            for checkpoint in decoded((msg,), Checkpoint.decode, skipped):
                keep(checkpoint)

        count = self._read(topic, handle, timeout, partitions=[0])
        skipped.summary(topic, count)
        log.debug("%s: read %d checkpoint record(s) from %s", self._where(), count, topic)

    def heartbeats(self, timeout: float | None = None) -> dict[tuple[str, str], Heartbeat]:
        """The newest heartbeat (by its timestamp) per (source alias, target alias) found in the
        heartbeat topics of this cluster — local ones and those replicated from upstream.

        ``now_ms - heartbeat.timestamp`` tells how fresh each replication flow on the path is.
        Corrupt records are skipped with a logged warning.
        """
        wait = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
        latest: dict[tuple[str, str], Heartbeat] = {}
        for topic in sorted(self.heartbeat_topics(wait)):
            skipped = SkippedRecords("a heartbeat", self._where())

            def handle(msg: Record, skipped: SkippedRecords = skipped) -> None:
                for beat in decoded((msg,), Heartbeat.decode, skipped):
                    key = (beat.source_cluster_alias, beat.target_cluster_alias)
                    old = latest.get(key)
                    if old is None or beat.timestamp >= old.timestamp:
                        latest[key] = beat

            self._read(topic, handle, max(deadline - time.monotonic(), 0.001), partitions=None)
            skipped.summary(topic)
        return latest


def translate_offsets(
    config: Mapping[str, str],
    remote_cluster_alias: str,
    group_id: str,
    timeout: float = 30.0,
) -> dict[TopicPartition, OffsetAndMetadata]:
    """Where consumer group ``group_id`` of cluster ``remote_cluster_alias`` should resume on the
    cluster ``config`` points at (MM2's ``RemoteClusterUtils.translateOffsets``, same argument
    order). See :meth:`MirrorClient.remote_consumer_offsets`."""
    with MirrorClient(config, timeout=timeout) as client:
        return client.remote_consumer_offsets(group_id, remote_cluster_alias, timeout=timeout)
