"""Everything a running flow needs, resolved once from the configuration.

:class:`FlowSettings` is the only place where the runtime reads :class:`~mirrorlib.FlowConfig`,
so the components below it take plain values: librdkafka client configurations, topic names,
intervals in seconds and flags.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs

from mirrorlib.core.config import FlowConfig, MirrorConfig
from mirrorlib.core.policy import ReplicationPolicy

__all__ = ["FlowSettings"]

_NEVER = 10.0**9  # "disabled" intervals


@attrs.frozen
class FlowSettings:
    source: str
    target: str
    enabled: bool
    policy: ReplicationPolicy
    should_replicate_topic: Callable[[str], bool]
    should_replicate_group: Callable[[str], bool]
    should_replicate_config_property: Callable[[str], bool]
    # clients (librdkafka)
    source_consumer: Mapping[str, str]
    source_admin: Mapping[str, str]
    target_producer: Mapping[str, str]
    target_consumer: Mapping[str, str]
    target_admin: Mapping[str, str]
    offset_syncs_producer: Mapping[str, str]
    offset_syncs_consumer: Mapping[str, str]
    offset_syncs_admin: Mapping[str, str]
    # topics
    offsets_topic: str
    offsets_topic_partitions: int
    offsets_topic_replication_factor: int
    offset_syncs_topic: str
    offset_syncs_alias: str
    offset_syncs_replication_factor: int
    checkpoints_topic: str
    checkpoints_replication_factor: int
    heartbeats_replication_factor: int
    replication_factor: int
    replication_factor_explicit: bool
    use_defaults_from: Literal["source", "target"]
    # behaviour
    emit_offset_syncs: bool
    offset_lag_max: int
    emit_checkpoints: bool
    emit_checkpoints_interval_s: float
    refresh_groups_interval_s: float
    sync_group_offsets_enabled: bool
    sync_group_offsets_interval_s: float
    emit_heartbeats: bool
    emit_heartbeats_interval_s: float
    refresh_topics_interval_s: float
    sync_topic_configs_interval_s: float | None
    sync_topic_acls_interval_s: float | None
    flush_interval_s: float
    exactly_once: bool
    transaction_interval_s: float
    transactional_id: str
    copier_group_id: str
    auto_offset_reset: Literal["earliest", "latest"]
    data_loss_action: Literal["fail", "continue"]
    admin_timeout_s: float
    consume_batch: int = 10_000

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
            return _NEVER if value is None else value

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
            offsets_topic=flow.offset_storage_topic,
            offsets_topic_partitions=flow.offset_storage_partitions,
            offsets_topic_replication_factor=flow.offset_storage_replication_factor,
            offset_syncs_topic=flow.offset_syncs_topic,
            offset_syncs_alias=flow.offset_syncs_cluster,
            offset_syncs_replication_factor=flow.offset_syncs_topic_replication_factor,
            checkpoints_topic=flow.checkpoints_topic,
            checkpoints_replication_factor=flow.checkpoints_topic_replication_factor,
            heartbeats_replication_factor=flow.heartbeats_topic_replication_factor,
            replication_factor=flow.replication_factor,
            replication_factor_explicit=flow.origin("replication.factor") is not None,
            use_defaults_from="source" if flow.use_defaults_from == "source" else "target",
            emit_offset_syncs=flow.emit_offset_syncs_enabled,
            offset_lag_max=flow.offset_lag_max,
            emit_checkpoints=flow.emit_checkpoints_enabled
            and flow.emit_checkpoints_interval is not None,
            emit_checkpoints_interval_s=interval(flow.emit_checkpoints_interval),
            refresh_groups_interval_s=interval(flow.refresh_groups_interval),
            sync_group_offsets_enabled=flow.sync_group_offsets_enabled
            and flow.sync_group_offsets_interval is not None,
            sync_group_offsets_interval_s=interval(flow.sync_group_offsets_interval),
            emit_heartbeats=flow.emit_heartbeats_enabled
            and flow.emit_heartbeats_interval is not None,
            emit_heartbeats_interval_s=interval(flow.emit_heartbeats_interval),
            refresh_topics_interval_s=interval(flow.refresh_topics_interval),
            sync_topic_configs_interval_s=flow.sync_topic_configs_interval,
            sync_topic_acls_interval_s=flow.sync_topic_acls_interval,
            flush_interval_s=flow.offset_flush_interval,
            exactly_once=flow.exactly_once_enabled,
            transaction_interval_s=flow.transaction_interval,
            transactional_id=f"mirrorlib-{flow.name}-{node}",
            copier_group_id=f"mirrorlib-{flow.name}",
            auto_offset_reset=reset_mode,
            data_loss_action=flow.data_loss_action,
            admin_timeout_s=flow.admin_timeout,
        )
