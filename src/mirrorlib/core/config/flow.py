"""``FlowConfig``: the configuration of one replication flow ``source -> target``.

A flow setting is ``A->B.key``, else the top-level ``key``, else MM2's default; a flow's clients
get their settings exactly as MM2's connectors assemble them (see
:meth:`FlowConfig.source_consumer_config`), translated to librdkafka
(:mod:`mirrorlib.core.config.clients`). :mod:`mirrorlib.core.config.build` resolves each pair's
settings with MM2's precedence (:mod:`mirrorlib.core.config.precedence`) and makes its
``FlowConfig``; :class:`~mirrorlib.core.config.mirror.MirrorConfig` holds them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import attrs

from mirrorlib.core.config.clients import ROLES, ClientSettings, Setting, translate_client_settings
from mirrorlib.core.config.filters import ConfigPropertyFilter, GroupFilter, TopicFilter
from mirrorlib.core.config.keys import ConfigValue
from mirrorlib.core.config.precedence import MIRRORLIB, flow_client_java
from mirrorlib.core.policy import ReplicationPolicy, is_cycle
from mirrorlib.core.transforms import TransformChain
from mirrorlib.core.worker_reports import worker_status_topic
from mirrorlib.errors import ConfigError

__all__ = ["FlowConfig"]


@attrs.frozen(eq=False)
class FlowConfig:
    """The configuration of the replication flow ``source -> target``.

    Settings are resolved with MM2's precedence (``A->B.key`` > top-level ``key`` > default) and
    parsed to Python types; :meth:`get` answers any registered key, and the properties below
    name the ones the engine uses, each after its key in Python spelling
    (:attr:`KeySpec.attribute <mirrorlib.core.config.keys.KeySpec.attribute>`:
    ``offset.flush.interval.ms`` → ``offset_flush_interval``). Durations are in seconds;
    intervals are ``None`` when the task is disabled.
    """

    source: str
    target: str
    policy: ReplicationPolicy
    topic_filter: TopicFilter
    group_filter: GroupFilter
    config_property_filter: ConfigPropertyFilter
    _values: Mapping[str, ConfigValue] = attrs.field(repr=False)
    _origins: Mapping[str, str] = attrs.field(repr=False)
    _connector: Mapping[str, Setting] = attrs.field(repr=False)
    _worker: Mapping[str, ConfigValue] = attrs.field(repr=False)
    _require_bootstrap: bool = attrs.field(default=True, repr=False)
    _transforms: TransformChain | None = attrs.field(default=None, repr=False)

    # -- identity ---------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """``"source->target"``, MM2's name of the flow (and its key prefix)."""
        return f"{self.source}->{self.target}"

    @property
    def enabled(self) -> bool:
        """Whether the flow replicates (``A->B.enabled``; a top-level ``enabled`` applies to
        every running pair, as in MM2). A running pair that is not enabled emits heartbeats."""
        return self._bool("enabled")

    # -- generic access ---------------------------------------------------------------------------

    def get(self, key: str) -> ConfigValue:
        """The parsed value of flow key ``key`` (its default when unset).

        Worker keys read from the target cluster (``exactly.once.source.support``,
        ``offset.flush.interval.ms``) are answered too. Raises :class:`ConfigError` for a key
        that is not a registered flow or worker key.
        """
        if key in self._values:
            return self._values[key]
        if key in self._worker:
            return self._worker[key]
        raise ConfigError(f"{key!r} is not an MM2 flow setting", key=key, alias=self.name)

    def origin(self, key: str) -> str | None:
        """The key as the user wrote it that set ``key`` (``A->B.topics`` or ``topics``), or
        ``None`` when the default applies."""
        return self._origins.get(key)

    @property
    def originals(self) -> Mapping[str, str]:
        """The flow's connector configuration as MM2 builds it (``connectorBaseConfig``), with
        variables resolved: the mapping custom policies and filters receive."""
        return {k: v.value for k, v in self._connector.items()}

    def _bool(self, key: str) -> bool:
        value = self.get(key)
        assert isinstance(value, bool)
        return value

    def _int(self, key: str) -> int:
        value = self.get(key)
        assert isinstance(value, int) and not isinstance(value, bool)
        return value

    def _str(self, key: str) -> str:
        value = self.get(key)
        assert isinstance(value, str)
        return value

    def _list(self, key: str) -> tuple[str, ...]:
        value = self.get(key)
        assert isinstance(value, tuple)
        return value

    def _interval(self, enabled_key: str, seconds_key: str) -> float | None:
        return float(self._int(seconds_key)) if self._bool(enabled_key) else None

    # -- typed settings ---------------------------------------------------------------------------

    @property
    def record_transforms(self) -> TransformChain | None:
        """``transforms`` (with ``predicates``): the record transforms of the flow, built from
        their ``transforms.<name>.*`` keys (:mod:`mirrorlib.core.transforms`), or ``None``."""
        return self._transforms

    @property
    def tasks_max(self) -> int:
        """``tasks.max``: upper bound on the flow's parallelism (default 1)."""
        return self._int("tasks.max")

    @property
    def topics(self) -> tuple[str, ...]:
        """``topics``: regexes of topics to replicate (default ``.*``)."""
        return self._list("topics")

    @property
    def topics_exclude(self) -> tuple[str, ...]:
        """``topics.exclude`` (or the deprecated ``topics.blacklist``)."""
        return self._list("topics.exclude")

    @property
    def groups(self) -> tuple[str, ...]:
        """``groups``: regexes of consumer groups to checkpoint (default ``.*``)."""
        return self._list("groups")

    @property
    def groups_exclude(self) -> tuple[str, ...]:
        """``groups.exclude`` (or the deprecated ``groups.blacklist``)."""
        return self._list("groups.exclude")

    @property
    def config_properties_exclude(self) -> tuple[str, ...]:
        """``config.properties.exclude``: topic config properties never copied."""
        return self._list("config.properties.exclude")

    @property
    def use_defaults_from(self) -> str:
        """``use.defaults.from``: ``target`` (default) or ``source``."""
        return self._str("use.defaults.from")

    @property
    def replication_factor(self) -> int:
        """``replication.factor`` of new remote topics (default 2)."""
        return self._int("replication.factor")

    @property
    def replication_factor_lowering_enabled(self) -> bool:
        """``replication.factor.lowering.enabled`` (mirrorlib only, default false): whether a
        replication factor above the live broker count of a cluster is lowered to that count
        when a topic is created, instead of the topic not being created."""
        return self._bool("replication.factor.lowering.enabled")

    @property
    def offset_syncs_topic_replication_factor(self) -> int:
        return self._int("offset-syncs.topic.replication.factor")

    @property
    def checkpoints_topic_replication_factor(self) -> int:
        return self._int("checkpoints.topic.replication.factor")

    @property
    def heartbeats_topic_replication_factor(self) -> int:
        return self._int("heartbeats.topic.replication.factor")

    @property
    def offset_lag_max(self) -> int:
        """``offset.lag.max``: records a partition may advance past its last offset sync."""
        return self._int("offset.lag.max")

    @property
    def consumer_poll_timeout(self) -> float:
        """``consumer.poll.timeout.ms`` in seconds."""
        return self._int("consumer.poll.timeout.ms") / 1000.0

    @property
    def admin_timeout(self) -> float:
        """``admin.timeout.ms`` in seconds."""
        return self._int("admin.timeout.ms") / 1000.0

    @property
    def refresh_topics_interval(self) -> float | None:
        return self._interval("refresh.topics.enabled", "refresh.topics.interval.seconds")

    @property
    def sync_topic_configs_interval(self) -> float | None:
        return self._interval("sync.topic.configs.enabled", "sync.topic.configs.interval.seconds")

    @property
    def sync_topic_acls_interval(self) -> float | None:
        return self._interval("sync.topic.acls.enabled", "sync.topic.acls.interval.seconds")

    @property
    def refresh_groups_interval(self) -> float | None:
        return self._interval("refresh.groups.enabled", "refresh.groups.interval.seconds")

    @property
    def emit_checkpoints_enabled(self) -> bool:
        return self._bool("emit.checkpoints.enabled")

    @property
    def emit_checkpoints_interval(self) -> float | None:
        return self._interval("emit.checkpoints.enabled", "emit.checkpoints.interval.seconds")

    @property
    def emit_checkpoints_on_commit_enabled(self) -> bool:
        """``emit.checkpoints.on.commit.enabled`` (mirrorlib only, default true): whether a
        group's checkpoints are written as soon as a commit read from the source's
        ``__consumer_offsets`` changes its offsets, besides the fixed-rate cycle."""
        return self._bool("emit.checkpoints.on.commit.enabled")

    @property
    def sync_group_offsets_enabled(self) -> bool:
        return self._bool("sync.group.offsets.enabled")

    @property
    def sync_group_offsets_interval(self) -> float | None:
        return self._interval("sync.group.offsets.enabled", "sync.group.offsets.interval.seconds")

    @property
    def emit_heartbeats_enabled(self) -> bool:
        return self._bool("emit.heartbeats.enabled")

    @property
    def emit_heartbeats_interval(self) -> float | None:
        return self._interval("emit.heartbeats.enabled", "emit.heartbeats.interval.seconds")

    @property
    def heartbeats_replication_enabled(self) -> bool:
        return self._bool("heartbeats.replication.enabled")

    @property
    def emit_offset_syncs_enabled(self) -> bool:
        return self._bool("emit.offset-syncs.enabled")

    @property
    def offset_syncs_topic_location(self) -> Literal["source", "target"]:
        return "target" if self._str("offset-syncs.topic.location") == "target" else "source"

    @property
    def exactly_once_support(self) -> str:
        """Connector-level ``exactly.once.support``: ``requested`` or ``required``."""
        return self._str("exactly.once.support").lower()

    @property
    def exactly_once_source_support(self) -> str:
        """``<target>.exactly.once.source.support``: ``disabled``, ``enabled`` or
        ``preparing`` — whether replication into the target is transactional."""
        value = self._worker["exactly.once.source.support"]
        assert isinstance(value, str)
        return value.lower()

    @property
    def exactly_once_enabled(self) -> bool:
        """True when ``<target>.exactly.once.source.support=enabled``."""
        return self.exactly_once_source_support == "enabled"

    @property
    def offset_flush_interval(self) -> float:
        """``<target>.offset.flush.interval.ms`` in seconds: how often progress is committed."""
        value = self._worker["offset.flush.interval.ms"]
        assert isinstance(value, int)
        return value / 1000.0

    @property
    def offset_storage_topic(self) -> str:
        """Topic on the target holding the flow's replication progress (Connect's offsets
        format): ``offset.storage.topic``, default ``mm2-offsets.<source>.internal``."""
        value = self._worker["offset.storage.topic"]
        assert isinstance(value, str)
        return value

    @property
    def offset_storage_partitions(self) -> int:
        value = self._worker["offset.storage.partitions"]
        assert isinstance(value, int)
        return value

    @property
    def offset_storage_replication_factor(self) -> int:
        value = self._worker["offset.storage.replication.factor"]
        assert isinstance(value, int)
        return value

    @property
    def transaction_boundary_interval(self) -> float:
        """``transaction.boundary.interval.ms`` in seconds (exactly-once commit period)."""
        return self._int("transaction.boundary.interval.ms") / 1000.0

    @property
    def data_loss_action(self) -> Literal["fail", "continue"]:
        """``data.loss.action`` (mirrorlib only): ``fail`` (default) or ``continue``."""
        return "continue" if self._str("data.loss.action").lower() == "continue" else "fail"

    @property
    def node_id(self) -> str | None:
        """``node.id`` (mirrorlib only), or ``None`` when unset."""
        value = self.get("node.id")
        return value if isinstance(value, str) else None

    # -- derived names ----------------------------------------------------------------------------

    @property
    def offset_syncs_cluster(self) -> str:
        """Alias of the cluster holding this flow's offset-syncs topic."""
        return self.source if self.offset_syncs_topic_location == "source" else self.target

    @property
    def offset_syncs_topic(self) -> str:
        """``mm2-offset-syncs.<target>.internal`` on the source (default location), or
        ``mm2-offset-syncs.<source>.internal`` on the target."""
        other = self.target if self.offset_syncs_topic_location == "source" else self.source
        return self.policy.offset_syncs_topic(other)

    @property
    def checkpoints_topic(self) -> str:
        """``<source>.checkpoints.internal``, on the target."""
        return self.policy.checkpoints_topic(self.source)

    @property
    def heartbeats_topic(self) -> str:
        return self.policy.heartbeats_topic()

    @property
    def worker_status_topic(self) -> str:
        """``mm2-mirrorlib-status.<source>.internal``, on the target: the flow's copier workers'
        reports, read by ``mirrorlib status`` (see :mod:`mirrorlib.core.worker_reports`)."""
        return worker_status_topic(self.source)

    # -- filters ----------------------------------------------------------------------------------

    def is_cycle(self, topic: str) -> bool:
        """MM2's ``isCycle``: whether ``topic`` came (possibly over several hops) from the
        target, so replicating it would send it home (:func:`mirrorlib.core.policy.is_cycle`)."""
        return is_cycle(self.policy, topic, self.target)

    def should_replicate_topic(self, topic: str) -> bool:
        """MM2's ``shouldReplicateTopic``: the topic filter accepts it (or it is a heartbeats
        topic and ``heartbeats.replication.enabled``), it is not internal, and not a cycle."""
        return (
            (
                self.topic_filter.should_replicate_topic(topic)
                or (self.heartbeats_replication_enabled and self.policy.is_heartbeats_topic(topic))
            )
            and not self.policy.is_internal_topic(topic)
            and not self.is_cycle(topic)
        )

    def should_replicate_group(self, group: str) -> bool:
        """The group filter (``groups`` minus ``groups.exclude``)."""
        return self.group_filter.should_replicate_group(group)

    def should_replicate_config_property(self, prop: str) -> bool:
        """Whether topic config property ``prop`` is copied (``config.properties.exclude``)."""
        return self.config_property_filter.should_replicate_config_property(prop)

    def should_replicate_source_default(self, prop: str) -> bool:
        """Whether a source property at its default is copied (``use.defaults.from=source``)."""
        return self.config_property_filter.should_replicate_source_default(prop)

    # -- clients ----------------------------------------------------------------------------------

    def client_id_label(self, connector: str, role: str, task: int | None = None) -> str:
        """MM2's client id suffix ``S->T|<connector>[-task]|<role>`` (KAFKA-14838), e.g.
        ``client_id_label("MirrorSourceConnector", "replication-consumer", 0)``."""
        suffix = "" if task is None else f"-{task}"
        return f"{self.name}|{connector}{suffix}|{role}"

    def client_settings(
        self, side: Literal["source", "target"], role: str, *, label: str | None = None
    ) -> ClientSettings:
        """The translated settings of the ``role`` client on the flow's ``side`` cluster,
        assembled like MM2's ``MirrorConnectorConfig``, with what was dropped and why.

        ``label`` (see :meth:`client_id_label`) is appended to the user's ``client.id`` as MM2
        does (``user-id|label``).
        """
        if role not in ROLES:
            raise ConfigError(f"unknown client role {role!r}: expected one of {', '.join(ROLES)}")
        alias = self.source if side == "source" else self.target
        java = flow_client_java(self._connector, side, role)
        if label is not None:
            user = java.get("client.id")
            value = label if user is None else f"{user.value}|{label}"
            java["client.id"] = Setting(value, user.origin if user else MIRRORLIB)
        if self._require_bootstrap and "bootstrap.servers" not in java:
            raise ConfigError(
                f"cluster {alias} has no bootstrap.servers: set {alias}.bootstrap.servers",
                key=f"{alias}.bootstrap.servers",
                alias=alias,
            )
        return translate_client_settings(java, role=role, alias=alias)

    def source_consumer_config(self, label: str | None = None) -> dict[str, str]:
        """The replication consumer (and offset-syncs consumer when the topic is on the source):
        ``enable.auto.commit=false`` and ``auto.offset.reset=earliest`` unless set."""
        return self.client_settings("source", "consumer", label=label).as_dict()

    def source_producer_config(self, label: str | None = None) -> dict[str, str]:
        """The offset-syncs producer when the offset-syncs topic is on the source."""
        return self.client_settings("source", "producer", label=label).as_dict()

    def source_admin_config(self, label: str | None = None) -> dict[str, str]:
        return self.client_settings("source", "admin", label=label).as_dict()

    def target_producer_config(self, label: str | None = None) -> dict[str, str]:
        """The replication producer (and checkpoint/heartbeat producer)."""
        return self.client_settings("target", "producer", label=label).as_dict()

    def target_consumer_config(self, label: str | None = None) -> dict[str, str]:
        return self.client_settings("target", "consumer", label=label).as_dict()

    def target_admin_config(self, label: str | None = None) -> dict[str, str]:
        return self.client_settings("target", "admin", label=label).as_dict()

    def offset_syncs_producer_config(self, label: str | None = None) -> dict[str, str]:
        """The producer of the offset-syncs topic, on whichever cluster holds it."""
        return self.client_settings(
            self.offset_syncs_topic_location, "producer", label=label
        ).as_dict()

    def offset_syncs_consumer_config(self, label: str | None = None) -> dict[str, str]:
        """The consumer of the offset-syncs topic, on whichever cluster holds it."""
        return self.client_settings(
            self.offset_syncs_topic_location, "consumer", label=label
        ).as_dict()

    def offset_syncs_admin_config(self, label: str | None = None) -> dict[str, str]:
        return self.client_settings(
            self.offset_syncs_topic_location, "admin", label=label
        ).as_dict()

    def __repr__(self) -> str:
        return f"FlowConfig({self.name}, enabled={self.enabled})"
