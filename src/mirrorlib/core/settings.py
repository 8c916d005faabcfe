"""Everything a running flow needs, resolved once from the configuration.

:class:`FlowSettings` is the only place where the runtime reads :class:`~mirrorlib.FlowConfig`,
so the components below it take plain values: librdkafka client configurations, topic names,
intervals in seconds and flags.

**One name per setting.** A field that holds a setting has the name of the
:class:`~mirrorlib.FlowConfig` property for it, which is its key in Python spelling
(:attr:`~mirrorlib.core.config.keys.KeySpec.attribute`: ``offset.flush.interval.ms`` →
``offset_flush_interval``), with the same value and unit (durations in seconds). The one
conversion happens here: a periodic task that is disabled has the interval :data:`NEVER` where
``FlowConfig`` answers ``None`` (it still runs once at start, or not at all when its ``*_enabled``
flag is false), so schedulers need no ``None`` branch; ``sync_topic_configs_interval`` and
``sync_topic_acls_interval`` keep ``None``: those syncs do not run at all when disabled. The
other fields are derived (client configurations, the transactional id, ...) and carry
descriptive names. ``tests/runtime/test_settings.py`` pins the rule.

``FlowSettings`` is a copy rather than the ``FlowConfig`` itself because its values are read on
hot paths (per record; a ``FlowConfig`` property parses nothing but looks its key up on every
access), because it is pickled to Spark executors, and because the derived values are computed
once per flow.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs

from mirrorlib.core.config import FlowConfig, MirrorConfig
from mirrorlib.core.config.keys import masked_repr
from mirrorlib.core.policy import ReplicationPolicy
from mirrorlib.core.transforms import TransformChain

__all__ = ["NEVER", "FlowSettings"]

#: The replication consumer's fetch defaults (:meth:`FlowSettings.record_consumer`).
_FETCH_QUEUE_BACKOFF_MS = 10
_PARTITION_FETCH_BYTES = 8 * 1024 * 1024
_PARTITION_FETCH_KEYS = frozenset({"max.partition.fetch.bytes", "fetch.message.max.bytes"})
_FETCH_MAX_BYTES = 16 * 1024 * 1024
#: A copy task's consumer (:meth:`FlowSettings.range_consumer`): its prefetch, in messages,
#: and how long the broker may hold its fetch of a partition at the log's end.
_RANGE_QUEUED_MESSAGES = 20_000
_RANGE_FETCH_WAIT_MS = 20

NEVER = 10.0**9
"""The interval, in seconds, of a periodic task that is disabled: it never comes due again."""


@attrs.frozen
class FlowSettings:
    source: str
    target: str
    enabled: bool
    policy: ReplicationPolicy
    should_replicate_topic: Callable[[str], bool]
    should_replicate_group: Callable[[str], bool]
    should_replicate_config_property: Callable[[str], bool]
    # clients (librdkafka); their secrets are masked in the repr (keys.masked_repr)
    source_consumer: Mapping[str, str] = attrs.field(repr=masked_repr)
    source_admin: Mapping[str, str] = attrs.field(repr=masked_repr)
    target_producer: Mapping[str, str] = attrs.field(repr=masked_repr)
    target_consumer: Mapping[str, str] = attrs.field(repr=masked_repr)
    target_admin: Mapping[str, str] = attrs.field(repr=masked_repr)
    offset_syncs_producer: Mapping[str, str] = attrs.field(repr=masked_repr)
    offset_syncs_consumer: Mapping[str, str] = attrs.field(repr=masked_repr)
    offset_syncs_admin: Mapping[str, str] = attrs.field(repr=masked_repr)
    # topics
    offset_storage_topic: str
    offset_storage_partitions: int
    offset_storage_replication_factor: int
    offset_syncs_topic: str
    offset_syncs_cluster: str
    offset_syncs_topic_replication_factor: int
    checkpoints_topic: str
    checkpoints_topic_replication_factor: int
    worker_status_topic: str
    heartbeats_topic_replication_factor: int
    replication_factor: int
    replication_factor_lowering_enabled: bool
    use_defaults_from: Literal["source", "target"]
    # behaviour
    emit_offset_syncs_enabled: bool
    offset_lag_max: int
    emit_checkpoints_enabled: bool
    emit_checkpoints_interval: float
    emit_checkpoints_on_commit_enabled: bool
    refresh_groups_interval: float
    sync_group_offsets_enabled: bool
    sync_group_offsets_interval: float
    emit_heartbeats_enabled: bool
    emit_heartbeats_interval: float
    refresh_topics_interval: float
    sync_topic_configs_interval: float | None
    sync_topic_acls_interval: float | None
    offset_flush_interval: float
    exactly_once_enabled: bool
    transaction_boundary_interval: float
    transactional_id: str
    copier_group_id: str
    auto_offset_reset: Literal["earliest", "latest"]
    data_loss_action: Literal["fail", "continue"]
    admin_timeout: float
    consume_batch: int = 10_000
    tasks_max: int = 1
    # the copier group's static member id (from node.id, by default the host name); None: no
    # group (a copier worker process: its parent assigns its partitions)
    group_instance_id: str | None = None
    # this node's name: node.id, or the host name
    node: str = ""
    # the flow's record transforms (None: records are copied unchanged); pickled as their keys
    record_transforms: TransformChain | None = None

    def slot_transactional_id(self, slot: int) -> str | None:
        """The transactional id of this node's copier slot ``slot`` (``None``: it does not write
        in transactions): ``<transactional_id>-<slot>`` for a worker process (``tasks.max`` > 1,
        whatever the delivery mode), ``<transactional_id>`` for the in-process copier of an
        exactly-once flow."""
        if self.tasks_max > 1:
            return f"{self.transactional_id}-{slot}"
        return self.transactional_id if self.exactly_once_enabled else None

    def record_consumer(self) -> dict[str, Any]:
        """librdkafka configuration of the consumer that reads the records to replicate: the
        configuration's, with fetch settings that keep a backlog flowing unless it sets them.

        librdkafka compares ``queued.min.messages`` and ``queued.max.messages.kbytes``, meant
        per partition, with the consumer's whole queue (the partitions' queues forward to it),
        and a partition over them is not fetched for ``fetch.queue.backoff.ms`` (1 s by
        default): with a backlog of small records the copier drained the queue in a fraction of
        that second and then waited for the fetcher (see docs/benchmarks.md, "Where the copier
        waited"). A short back-off re-checks the queue soon. The consumer has one fetch request
        in flight per broker, so a partition's backlog arrives at most
        ``max.partition.fetch.bytes`` per round trip: 8 MiB instead of 1 MiB needs an eighth
        of the round trips (the queue stays bounded by ``queued.max.messages.kbytes``). A whole
        fetch response is at most ``fetch.max.bytes``: 16 MiB instead of librdkafka's 50 MiB,
        which many partitions of large records filled (22-48 MB per response at 10 KiB x 16
        partitions): the copier waited for few, huge responses, and a second one pushed the
        queue over its 64 MiB, stopping the fetches until it drained (docs/benchmarks.md,
        "Large records: the fetch response size, and the producer")."""
        conf: dict[str, Any] = dict(self.source_consumer)
        conf.setdefault("fetch.queue.backoff.ms", _FETCH_QUEUE_BACKOFF_MS)
        if not _PARTITION_FETCH_KEYS & conf.keys():  # (aliases: the user's must not be overridden)
            conf["max.partition.fetch.bytes"] = _PARTITION_FETCH_BYTES
        if "fetch.max.bytes" not in conf:  # (librdkafka: at least message.max.bytes)
            conf["fetch.max.bytes"] = max(_FETCH_MAX_BYTES, int(conf.get("message.max.bytes", 0)))
        return conf

    def range_consumer(self) -> dict[str, Any]:
        """librdkafka configuration of a copy task's consumer (the Spark engine), which reads
        fixed offset ranges and is unassigned when its task ends: :meth:`record_consumer`
        with a shorter prefetch, ``queued.min.messages`` = 20,000, and
        ``fetch.wait.max.ms`` = 20, unless the configuration sets them.

        The consumer fetches ahead of a range's end, and a later task of the same clients
        waits for what its fetches left behind: with librdkafka's 100,000 messages the stale
        prefetch (up to the whole next batch of small records) was fetched and dropped, and a
        fetch that overshot to the log's end was held by the broker for ``fetch.wait.max.ms``
        (500 ms by default) before the next task's first fetch could go out (one fetch in
        flight per broker). A backfill of 1,600,000 x 100 B x 16 partitions in four tasks of
        one process copied 155,000-183,000 records/s with both defaults, 185,000-203,000 with
        the shorter prefetch alone (a last task still waiting 0.46-0.49 s in two of three
        rounds), 201,000-204,000 with both settings, and 213,000-225,000 in one task
        (docs/benchmarks.md, "Larger backfills"). 20,000 messages
        are 0.1 s of copying small records at full speed; larger records reach
        ``queued.max.messages.kbytes`` first. The fetch wait only applies to a fetch with
        nothing to return: a task's ranges are planned up to offsets the log holds, and a
        partition whose range is read is paused."""
        conf = self.record_consumer()
        conf.setdefault("queued.min.messages", _RANGE_QUEUED_MESSAGES)
        conf.setdefault("fetch.wait.max.ms", _RANGE_FETCH_WAIT_MS)
        return conf

    def record_producer(self, *, linger_ms: int, **overrides: Any) -> dict[str, Any]:
        """librdkafka configuration of the producer that writes replicated records to the
        target: idempotent with ``acks=all`` (always), throughput-sized batches and queues unless
        the configuration sets them, then ``overrides`` (callbacks, transactional id)."""
        conf: dict[str, Any] = dict(self.target_producer)
        conf.update({"enable.idempotence": True, "acks": "all"})
        conf.setdefault("linger.ms", linger_ms)
        conf.setdefault("batch.size", 1_000_000)
        conf.setdefault("queue.buffering.max.messages", 500_000)
        conf.setdefault("queue.buffering.max.kbytes", 1_048_576)
        conf.update(overrides)
        return conf

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"

    @classmethod
    def from_config(cls, config: MirrorConfig, flow: FlowConfig) -> FlowSettings:
        del config  # everything is resolved per flow
        # The node id keeps the transactional id stable across restarts of the same node, so a
        # restarted node fences its previous incarnation. Several nodes on one host need their own.
        node = flow.node_id or socket.gethostname()
        consumer = flow.source_consumer_config(
            flow.client_id_label("MirrorSourceConnector", "replication-consumer")
        )
        reset = consumer.get("auto.offset.reset", "earliest").lower()
        reset_mode: Literal["earliest", "latest"] = (
            "latest" if reset in ("latest", "largest", "end") else "earliest"
        )

        def interval(value: float | None) -> float:
            return NEVER if value is None else value

        return cls(
            source=flow.source,
            target=flow.target,
            enabled=flow.enabled,
            policy=flow.policy,
            should_replicate_topic=flow.should_replicate_topic,
            should_replicate_group=flow.should_replicate_group,
            should_replicate_config_property=flow.should_replicate_config_property,
            source_consumer=consumer,
            source_admin=flow.source_admin_config(
                flow.client_id_label("MirrorSourceConnector", "source-admin")
            ),
            target_producer=flow.target_producer_config(
                flow.client_id_label("MirrorSourceConnector", "replication-producer")
            ),
            target_consumer=flow.target_consumer_config(
                flow.client_id_label("MirrorCheckpointConnector", "target-consumer")
            ),
            target_admin=flow.target_admin_config(
                flow.client_id_label("MirrorSourceConnector", "target-admin")
            ),
            offset_syncs_producer=flow.offset_syncs_producer_config(
                flow.client_id_label("MirrorSourceConnector", "offset-syncs-producer")
            ),
            offset_syncs_consumer=flow.offset_syncs_consumer_config(
                flow.client_id_label("MirrorCheckpointConnector", "offset-syncs-consumer")
            ),
            offset_syncs_admin=flow.offset_syncs_admin_config(
                flow.client_id_label("MirrorSourceConnector", "offset-syncs-admin")
            ),
            offset_storage_topic=flow.offset_storage_topic,
            offset_storage_partitions=flow.offset_storage_partitions,
            offset_storage_replication_factor=flow.offset_storage_replication_factor,
            offset_syncs_topic=flow.offset_syncs_topic,
            offset_syncs_cluster=flow.offset_syncs_cluster,
            offset_syncs_topic_replication_factor=flow.offset_syncs_topic_replication_factor,
            checkpoints_topic=flow.checkpoints_topic,
            checkpoints_topic_replication_factor=flow.checkpoints_topic_replication_factor,
            worker_status_topic=flow.worker_status_topic,
            heartbeats_topic_replication_factor=flow.heartbeats_topic_replication_factor,
            replication_factor=flow.replication_factor,
            replication_factor_lowering_enabled=flow.replication_factor_lowering_enabled,
            use_defaults_from="source" if flow.use_defaults_from == "source" else "target",
            emit_offset_syncs_enabled=flow.emit_offset_syncs_enabled,
            offset_lag_max=flow.offset_lag_max,
            emit_checkpoints_enabled=flow.emit_checkpoints_enabled,
            emit_checkpoints_interval=interval(flow.emit_checkpoints_interval),
            emit_checkpoints_on_commit_enabled=flow.emit_checkpoints_on_commit_enabled,
            refresh_groups_interval=interval(flow.refresh_groups_interval),
            sync_group_offsets_enabled=flow.sync_group_offsets_enabled,
            sync_group_offsets_interval=interval(flow.sync_group_offsets_interval),
            emit_heartbeats_enabled=flow.emit_heartbeats_enabled,
            emit_heartbeats_interval=interval(flow.emit_heartbeats_interval),
            refresh_topics_interval=interval(flow.refresh_topics_interval),
            sync_topic_configs_interval=flow.sync_topic_configs_interval,
            sync_topic_acls_interval=flow.sync_topic_acls_interval,
            offset_flush_interval=flow.offset_flush_interval,
            exactly_once_enabled=flow.exactly_once_enabled,
            transaction_boundary_interval=flow.transaction_boundary_interval,
            transactional_id=f"mirrorlib-{flow.name}-{node}",
            copier_group_id=f"mirrorlib-{flow.name}",
            auto_offset_reset=reset_mode,
            data_loss_action=flow.data_loss_action,
            admin_timeout=flow.admin_timeout,
            tasks_max=flow.tasks_max,
            group_instance_id=f"mirrorlib-{flow.name}-{node}",
            node=node,
            record_transforms=flow.record_transforms,
        )
