"""``MirrorConfig`` and ``FlowConfig``: an MM2 configuration, read the way MM2 4.3.1 reads it.

An ``mm2.properties`` file names the clusters and describes replication *flows* between them::

    clusters = primary, backup
    primary.bootstrap.servers = p1:9092          # cluster-level: "<alias>.<key>"
    backup.bootstrap.servers = b1:9092
    primary->backup.enabled = true                # flow-level: "<source>-><target>.<key>"
    primary->backup.topics = orders.*
    replication.factor = 3                        # top level: default for every flow
    backup.producer.linger.ms = 50                # one client role of one cluster

(the comments above are for the reader: Java properties have no inline comments).

**Pairs and flows.** Every ordered pair of distinct clusters is a potential flow. As in MM2, a pair
*runs* (:attr:`MirrorConfig.pairs`) when it is enabled (``A->B.enabled=true``) or emits heartbeats
(``emit.heartbeats.enabled``, default true, overridable per pair); a running pair that is not
enabled only emits heartbeats. :attr:`MirrorConfig.flows` lists the enabled ones.

**Precedence.** A flow setting is ``A->B.key``, else the top-level ``key``, else MM2's default.
A client of cluster ``A`` gets its connection/security settings (``bootstrap.servers``,
``security.protocol``, ``ssl.*``, ``sasl.*``) from ``A.<role>.key``, else ``A.key``, else the
top-level ``key``; other client settings come from ``A.<role>.key`` and the flow's
``A->B.<role>.key`` / ``A->B.source.<role>.key`` exactly as MM2's connectors assemble them (see
:meth:`FlowConfig.source_consumer_config`). All client settings are translated to librdkafka
(:mod:`mirrorlib.core.config.clients`).

Nothing is silently lost: keys that mean nothing to MM2, MM2/Connect keys that do not apply to
mirrorlib, and client settings that librdkafka does not need are listed in
:attr:`MirrorConfig.warnings`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Final, Literal

import attrs

from mirrorlib.core.config.clients import (
    ROLES,
    ClientSettings,
    DroppedSetting,
    Setting,
    translate_client_settings,
)
from mirrorlib.core.config.filters import (
    ConfigPropertyFilter,
    DefaultConfigPropertyFilter,
    DefaultGroupFilter,
    DefaultTopicFilter,
    GroupFilter,
    RegexList,
    TopicFilter,
    load_filter,
)
from mirrorlib.core.config.keys import (
    KEYS,
    WORKER_TOP_LEVEL_PREFIXES,
    ConfigValue,
    KeySpec,
    Scope,
    Status,
    inline_comment_hint,
    is_client_connection_key,
    is_sensitive,
    is_worker_key,
    mask,
    parse_value,
)
from mirrorlib.core.config.properties import (
    ParsedProperties,
    parse_properties,
    read_properties_file,
    resolve_variables,
)
from mirrorlib.core.policy import ReplicationPolicy, is_cycle, load_policy
from mirrorlib.errors import ConfigError

__all__ = ["ConfigWarning", "FlowConfig", "MirrorConfig", "WarningKind"]

WarningKind = Literal["unknown", "not-applicable", "deprecated", "dropped", "ignored", "suspicious"]

_MIRRORLIB: Final = "(mirrorlib)"
_CLIENT_PREFIXES: Final = ("producer.", "consumer.", "admin.")
_FLOW_KEYS: Final = tuple(spec for spec in KEYS.values() if spec.scope is Scope.FLOW)
_DEPRECATED_ALIASES: Final[Mapping[str, str]] = {
    "topics.blacklist": "topics.exclude",
    "groups.blacklist": "groups.exclude",
    "config.properties.blacklist": "config.properties.exclude",
}
_JAVA_TOPIC_FILTERS: Final = (
    "org.apache.kafka.connect.mirror.DefaultTopicFilter",
    "DefaultTopicFilter",
)
_JAVA_GROUP_FILTERS: Final = (
    "org.apache.kafka.connect.mirror.DefaultGroupFilter",
    "DefaultGroupFilter",
)
_JAVA_PROPERTY_FILTERS: Final = (
    "org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter",
    "DefaultConfigPropertyFilter",
)
_FORWARDING_ADMIN: Final = "org.apache.kafka.clients.admin.ForwardingAdmin"
_WORKER_KEYS: Final = (
    "exactly.once.source.support",
    "offset.flush.interval.ms",
    "offset.storage.topic",
    "offset.storage.partitions",
    "offset.storage.replication.factor",
)


@attrs.frozen
class ConfigWarning:
    """Something in the configuration that mirrorlib accepted but does not use as written.

    ``kind``: ``unknown`` (not an MM2 key), ``not-applicable`` (an MM2/Connect setting with no
    role in mirrorlib), ``deprecated`` (an old name, honoured), ``dropped`` (a client setting
    librdkafka does not need), ``ignored`` (an MM2 key in a place where MM2 ignores it too),
    ``suspicious`` (a value that looks like it carries an inline comment).
    """

    key: str
    message: str
    kind: WarningKind
    alias: str | None = None

    def __str__(self) -> str:
        return f"{self.key}: {self.message}"


def _strip(settings: Mapping[str, Setting], prefix: str) -> dict[str, Setting]:
    return {k[len(prefix) :]: v for k, v in settings.items() if k.startswith(prefix)}


def _is_client_prefixed(key: str) -> bool:
    # MM2: key.matches("(^consumer.*|^producer.*|^admin.*)")
    return key.startswith(("consumer", "producer", "admin"))


@attrs.frozen(eq=False)
class FlowConfig:
    """The configuration of the replication flow ``source -> target``.

    Settings are resolved with MM2's precedence (``A->B.key`` > top-level ``key`` > default) and
    parsed to Python types; :meth:`get` answers any registered key, and the properties below
    name the ones the engine uses. Intervals are in seconds, ``None`` when the task is disabled.
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
    def transaction_interval(self) -> float:
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

    def _java_client(self, side: Literal["source", "target"], role: str) -> dict[str, Setting]:
        # MirrorConnectorConfig: "<side>.cluster.*" cut to connection keys, then the flow's
        # "<role>.*", then the cluster's "<side>.<role>.*".
        props = {
            k: v
            for k, v in _strip(self._connector, f"{side}.cluster.").items()
            if is_client_connection_key(k)
        }
        flow_level = _strip(self._connector, f"{role}.")
        flow_level.pop("poll.timeout.ms" if role == "consumer" else "timeout.ms", None)
        props.update(flow_level)
        props.update(_strip(self._connector, f"{side}.{role}."))
        if role == "consumer":
            props["enable.auto.commit"] = Setting("false", _MIRRORLIB)
            props.setdefault("auto.offset.reset", Setting("earliest", _MIRRORLIB))
        return props

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
        java = self._java_client(side, role)
        if label is not None:
            user = java.get("client.id")
            value = label if user is None else f"{user.value}|{label}"
            java["client.id"] = Setting(value, user.origin if user else _MIRRORLIB)
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


@attrs.frozen(eq=False)
class MirrorConfig:
    """A parsed, validated MM2 configuration. Build it with :meth:`from_properties` or
    :meth:`from_file`."""

    clusters: tuple[str, ...]
    """Cluster aliases, in the order of ``clusters``."""
    warnings: tuple[ConfigWarning, ...]
    """What was accepted but not used as written (see :class:`ConfigWarning`)."""
    _values: Mapping[str, Setting] = attrs.field(repr=False)
    _flows: Mapping[tuple[str, str], FlowConfig] = attrs.field(repr=False)
    _pairs: tuple[tuple[str, str], ...] = attrs.field(repr=False)

    # -- construction -----------------------------------------------------------------------------

    @classmethod
    def from_properties(cls, source: str | Mapping[str, str]) -> MirrorConfig:
        """Read MM2 properties: the text of an ``mm2.properties`` file, or a mapping of keys to
        values (used as given, without escape processing)."""
        if isinstance(source, str):
            return cls.from_parsed(parse_properties(source))
        return cls.from_parsed(ParsedProperties({str(k): str(v) for k, v in source.items()}))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> MirrorConfig:
        """Read an ``mm2.properties`` file."""
        return cls.from_parsed(read_properties_file(path))

    @classmethod
    def from_parsed(cls, parsed: ParsedProperties) -> MirrorConfig:
        """Build from already parsed properties (keeps their line numbers for messages)."""
        return _Builder(parsed).build()

    # -- the contract -----------------------------------------------------------------------------

    @property
    def pairs(self) -> tuple[FlowConfig, ...]:
        """The pairs MM2 runs: enabled (``A->B.enabled=true``) or emitting heartbeats."""
        return tuple(self._flows[p] for p in self._pairs)

    @property
    def flows(self) -> tuple[FlowConfig, ...]:
        """The running pairs that replicate (enabled flows), in ``clusters`` order."""
        return tuple(f for f in self.pairs if f.enabled)

    @property
    def heartbeat_flows(self) -> tuple[FlowConfig, ...]:
        """The running pairs that emit heartbeats into their target."""
        return tuple(f for f in self.pairs if f.emit_heartbeats_enabled)

    def flow(self, source: str, target: str) -> FlowConfig:
        """The flow ``source -> target`` for any two distinct known clusters, running or not."""
        self._check_alias(source)
        self._check_alias(target)
        if source == target:
            raise ConfigError(
                f"a flow needs two different clusters, got {source}->{target}", alias=source
            )
        return self._flows[(source, target)]

    def pairs_for_targets(self, targets: Iterable[str] | None) -> tuple[FlowConfig, ...]:
        """The running pairs a node started with ``--clusters targets`` drives (all when
        ``targets`` is ``None``), as MM2's ``MirrorMaker(config, clusters)``."""
        if targets is None:
            return self.pairs
        wanted = set()
        for alias in targets:
            self._check_alias(alias)
            wanted.add(alias)
        return tuple(f for f in self.pairs if f.target in wanted)

    def client_config(self, alias: str, role: str) -> dict[str, str]:
        """librdkafka settings of a ``role`` client (``producer``, ``consumer``, ``admin``) of
        cluster ``alias``: what MM2's ``MirrorMakerConfig.clientConfig(alias)`` gives, plus the
        cluster's other ``alias.<role>.*`` settings."""
        return self.client_settings(alias, role).as_dict()

    def client_settings(self, alias: str, role: str) -> ClientSettings:
        """Like :meth:`client_config`, with the settings dropped in translation."""
        self._check_alias(alias)
        if role not in ROLES:
            raise ConfigError(
                f"unknown client role {role!r}: expected one of {', '.join(ROLES)}", alias=alias
            )
        java = _Builder.client_java(self._values, self.clusters, alias, role)
        if "bootstrap.servers" not in java:
            raise ConfigError(
                f"cluster {alias} has no bootstrap.servers: set {alias}.bootstrap.servers",
                key=f"{alias}.bootstrap.servers",
                alias=alias,
            )
        return translate_client_settings(java, role=role, alias=alias)

    def cluster_properties(self, alias: str) -> dict[str, str]:
        """MM2's ``clusterProps(alias)``: the cluster's ``alias.*`` keys (prefix stripped) with
        connection keys defaulted from the top level, variables resolved. For ``MirrorClient``."""
        self._check_alias(alias)
        return {
            k: v.value
            for k, v in _Builder.cluster_props(self._values, self.clusters, alias).items()
        }

    def get(self, key: str) -> str | None:
        """The raw (variable-resolved) value of ``key`` as written, or ``None``."""
        setting = self._values.get(key)
        return None if setting is None else setting.value

    @property
    def unknown_keys(self) -> tuple[str, ...]:
        """Keys that are not MM2 keys (also in :attr:`warnings`)."""
        return tuple(dict.fromkeys(w.key for w in self.warnings if w.kind == "unknown"))

    def _check_alias(self, alias: str) -> None:
        if alias not in self.clusters:
            raise ConfigError(
                f"unknown cluster alias {alias!r}: clusters are {', '.join(self.clusters)}",
                key="clusters",
                alias=alias,
            )

    def __repr__(self) -> str:
        flows = ", ".join(f.name for f in self.flows)
        return f"MirrorConfig(clusters={self.clusters!r}, flows=[{flows}])"


class _Builder:
    """Builds a :class:`MirrorConfig`: MM2's ``MirrorMakerConfig`` logic, step by step."""

    def __init__(self, parsed: ParsedProperties) -> None:
        self.parsed = parsed
        resolved = resolve_variables(parsed.values)
        self.values: dict[str, Setting] = {
            k: Setting(v, k, k in resolved.secret_keys) for k, v in resolved.values.items()
        }
        self.warnings: list[ConfigWarning] = []

    # -- helpers shared with MirrorConfig ---------------------------------------------------------

    @staticmethod
    def owner(clusters: tuple[str, ...], key: str) -> str | None:
        """The alias whose ``alias.`` prefix ``key`` has (the longest one), or ``None``."""
        best = None
        for alias in clusters:
            if key.startswith(alias + ".") and (best is None or len(alias) > len(best)):
                best = alias
        return best

    @staticmethod
    def flow_of(clusters: tuple[str, ...], key: str) -> tuple[str, str] | None:
        best: tuple[str, str] | None = None
        for source in clusters:
            if not key.startswith(source + "->"):
                continue
            for target in clusters:
                if (
                    source != target
                    and key.startswith(f"{source}->{target}.")
                    and (best is None or len(source) + len(target) > len(best[0]) + len(best[1]))
                ):
                    best = (source, target)
        return best

    @staticmethod
    def cluster_props(
        values: Mapping[str, Setting], clusters: tuple[str, ...], alias: str
    ) -> dict[str, Setting]:
        """MM2's ``clusterProps``: ``alias.*`` stripped; connection keys copied to the
        ``producer.``/``consumer.``/``admin.`` prefixes unless set there; then top-level
        connection keys fill what is still missing."""
        prefix = alias + "."
        props = {
            k[len(prefix) :]: v
            for k, v in values.items()
            if k.startswith(prefix) and _Builder.owner(clusters, k) == alias
        }
        for k, v in list(props.items()):
            if is_client_connection_key(k):
                for role in ROLES:
                    props.setdefault(f"{role}.{k}", v)
        for k, v in values.items():
            if is_client_connection_key(k):
                for role in ROLES:
                    props.setdefault(f"{role}.{k}", v)
                props.setdefault(k, v)
        return props

    @staticmethod
    def client_java(
        values: Mapping[str, Setting], clusters: tuple[str, ...], alias: str, role: str
    ) -> dict[str, Setting]:
        # MirrorClientConfig over originals + clusterProps(alias): connection keys with
        # "<role>." overriding, plus (mirrorlib) the cluster's other "<alias>.<role>." settings.
        merged: dict[str, Setting] = {
            k: v for k, v in values.items() if "->" not in k and _Builder.owner(clusters, k) is None
        }
        merged.update(_Builder.cluster_props(values, clusters, alias))
        java = {k: v for k, v in merged.items() if is_client_connection_key(k)}
        for k, v in _strip(merged, f"{role}.").items():
            if is_client_connection_key(k) or v.origin.startswith(f"{alias}.{role}."):
                java[k] = v
        return java

    # -- building ---------------------------------------------------------------------------------

    def error(self, key: str, message: str, *, alias: str | None = None) -> ConfigError:
        setting = self.values.get(key)
        value = None if setting is None else mask(key, setting.value, secret=setting.secret)
        return ConfigError(
            f"{key}{self.parsed.where(key)}: {message}", key=key, alias=alias, value=value
        )

    def warn(self, key: str, message: str, kind: WarningKind, alias: str | None = None) -> None:
        self.warnings.append(ConfigWarning(key, message, kind, alias))

    def clusters(self) -> tuple[str, ...]:
        if "clusters" not in self.values:
            raise ConfigError(
                "clusters is missing: list the cluster aliases, e.g. clusters = primary, backup",
                key="clusters",
            )
        setting = self.values["clusters"]
        aliases = parse_value(
            KEYS["clusters"], setting.value, key="clusters", secret=setting.secret
        )
        assert isinstance(aliases, tuple)
        if not aliases:
            raise self.error("clusters", "must name at least one cluster alias")
        for alias in aliases:
            if any(ch.isspace() for ch in alias) or "->" in alias:
                raise ConfigError(
                    f"clusters: invalid cluster alias {alias!r} (aliases cannot contain "
                    f"whitespace or '->').{inline_comment_hint(setting.value)}",
                    key="clusters",
                    alias=alias,
                    value=setting.value,
                )
        return aliases

    def build(self) -> MirrorConfig:
        clusters = self.clusters()
        self.validate_top_level()
        self.classify(clusters)
        flows: dict[tuple[str, str], FlowConfig] = {}
        pairs: list[tuple[str, str]] = []
        for source in clusters:
            for target in clusters:
                if source == target:
                    continue
                flow = self.flow(clusters, source, target)
                flows[(source, target)] = flow
                # MM2's clusterPairs: only "A->B.enabled" (not a top-level "enabled") makes a
                # pair run; otherwise it runs when it emits heartbeats.
                explicit = f"{source}->{target}.enabled" in self.values
                if (explicit and flow.enabled) or flow.emit_heartbeats_enabled:
                    pairs.append((source, target))
        for alias in clusters:
            for role in ROLES:
                java = self.client_java(self.values, clusters, alias, role)
                for dropped in translate_client_settings(java, role=role, alias=alias).dropped:
                    self.report_dropped(dropped, alias)
        for source, target in pairs:
            self.check_clients(flows[(source, target)])
        unique = {(w.key, w.message): w for w in reversed(self.warnings)}
        warnings = tuple(reversed(unique.values()))
        return MirrorConfig(clusters, warnings, dict(self.values), flows, tuple(pairs))

    def validate_top_level(self) -> None:
        for key in ("security.protocol",):
            if key in self.values:
                setting = self.values[key]
                parse_value(KEYS[key], setting.value, key=key, secret=setting.secret)

    def connector_config(
        self, clusters: tuple[str, ...], source: str, target: str
    ) -> dict[str, Setting]:
        """MM2's ``connectorBaseConfig(source->target)``."""
        props: dict[str, Setting] = {}
        for key, setting in self.values.items():
            spec = KEYS.get(key)
            wanted = (spec is not None and spec.scope is Scope.FLOW) or is_client_connection_key(
                key
            )
            if wanted and "->" not in key and self.owner(clusters, key) is None:
                props[key] = setting
        for key, setting in self.values.items():
            if key.startswith(("config.providers", "replication.policy")):
                props[key] = setting
        for side, alias in (("source", source), ("target", target)):
            cluster = self.cluster_props(self.values, clusters, alias)
            for key, setting in cluster.items():
                if _is_client_prefixed(key):
                    props[f"{side}.{key}"] = setting
                else:
                    props[f"{side}.cluster.{key}"] = setting
        props.setdefault("source.cluster.alias", Setting(source, _MIRRORLIB))
        props.setdefault("target.cluster.alias", Setting(target, _MIRRORLIB))
        prefix = f"{source}->{target}."
        for key, setting in self.values.items():
            if key.startswith(prefix) and self.flow_of(clusters, key) == (source, target):
                props[key[len(prefix) :]] = setting
        props.setdefault("enabled", Setting("false", _MIRRORLIB))
        return props

    def parse(self, spec: KeySpec, setting: Setting, flow: str) -> ConfigValue:
        return parse_value(
            spec, setting.value, key=setting.origin, alias=flow, secret=setting.secret
        )

    def flow(self, clusters: tuple[str, ...], source: str, target: str) -> FlowConfig:
        name = f"{source}->{target}"
        connector = self.connector_config(clusters, source, target)
        values: dict[str, ConfigValue] = {}
        origins: dict[str, str] = {}
        for spec in _FLOW_KEYS:
            setting = connector.get(spec.name)
            if setting is None or setting.origin == _MIRRORLIB:
                values[spec.name] = spec.parsed_default
                continue
            values[spec.name] = self.parse(spec, setting, name)
            origins[spec.name] = setting.origin
        # The deprecated *.blacklist names stand in for *.exclude when it is unset (MM2 3.x).
        for old, new in _DEPRECATED_ALIASES.items():
            if new not in origins and old in origins:
                values[new] = values[old]
                origins[new] = origins[old]
        worker = self.worker_values(clusters, source, target)
        originals = {k: v.value for k, v in connector.items()}
        policy = self.policy(originals, connector, name)
        flow = FlowConfig(
            source,
            target,
            policy,
            self.topic_filter(values, origins, originals, name),
            self.group_filter(values, origins, originals, name),
            self.property_filter(values, origins, originals, name),
            values,
            origins,
            connector,
            worker,
        )
        self.check_flow(flow)
        return flow

    def worker_values(
        self, clusters: tuple[str, ...], source: str, target: str
    ) -> dict[str, ConfigValue]:
        """The worker keys mirrorlib uses, as MM2's ``workerConfig(source->target)`` resolves
        them: the target's ``B.key``, overridden by a top-level key for the prefixes MM2 copies
        (``offset.storage*``…)."""
        out: dict[str, ConfigValue] = {}
        for name in _WORKER_KEYS:
            spec = KEYS[name]
            setting = self.values.get(f"{target}.{name}")
            if setting is not None and self.owner(clusters, setting.origin) != target:
                setting = None
            if name.startswith(WORKER_TOP_LEVEL_PREFIXES) and name in self.values:
                setting = self.values[name]
            if setting is None:
                out[name] = spec.parsed_default
            else:
                out[name] = parse_value(
                    spec, setting.value, key=setting.origin, alias=target, secret=setting.secret
                )
        if out["offset.storage.topic"] is None:
            out["offset.storage.topic"] = f"mm2-offsets.{source}.internal"
        return out

    def policy(
        self, originals: Mapping[str, str], connector: Mapping[str, Setting], flow: str
    ) -> ReplicationPolicy:
        try:
            return load_policy(originals)
        except ConfigError as exc:
            setting = connector.get("replication.policy.class") or connector.get(
                "replication.policy.separator"
            )
            origin = setting.origin if setting else "replication.policy.class"
            raise ConfigError(
                f"{origin} (flow {flow}): {exc}", key=origin, alias=flow, value=exc.value
            ) from exc

    def regex_list(
        self, values: Mapping[str, ConfigValue], origins: Mapping[str, str], key: str, flow: str
    ) -> RegexList:
        patterns = values[key]
        assert isinstance(patterns, tuple)
        return RegexList.from_patterns(patterns, key=origins.get(key, key), alias=flow)

    def class_setting(
        self, values: Mapping[str, ConfigValue], origins: Mapping[str, str], key: str
    ) -> tuple[str, str]:
        name = values[key]
        assert isinstance(name, str)
        return name, origins.get(key, key)

    def topic_filter(
        self,
        values: Mapping[str, ConfigValue],
        origins: Mapping[str, str],
        originals: Mapping[str, str],
        flow: str,
    ) -> TopicFilter:
        name, key = self.class_setting(values, origins, "topic.filter.class")
        return load_filter(
            name,
            key=key,
            config=originals,
            builtin_names=_JAVA_TOPIC_FILTERS,
            builtin=lambda: DefaultTopicFilter(
                self.regex_list(values, origins, "topics", flow),
                self.regex_list(values, origins, "topics.exclude", flow),
            ),
            protocol=TopicFilter,
        )

    def group_filter(
        self,
        values: Mapping[str, ConfigValue],
        origins: Mapping[str, str],
        originals: Mapping[str, str],
        flow: str,
    ) -> GroupFilter:
        name, key = self.class_setting(values, origins, "group.filter.class")
        return load_filter(
            name,
            key=key,
            config=originals,
            builtin_names=_JAVA_GROUP_FILTERS,
            builtin=lambda: DefaultGroupFilter(
                self.regex_list(values, origins, "groups", flow),
                self.regex_list(values, origins, "groups.exclude", flow),
            ),
            protocol=GroupFilter,
        )

    def property_filter(
        self,
        values: Mapping[str, ConfigValue],
        origins: Mapping[str, str],
        originals: Mapping[str, str],
        flow: str,
    ) -> ConfigPropertyFilter:
        name, key = self.class_setting(values, origins, "config.property.filter.class")
        use_defaults = values["use.defaults.from"]
        assert isinstance(use_defaults, str)
        return load_filter(
            name,
            key=key,
            config=originals,
            builtin_names=_JAVA_PROPERTY_FILTERS,
            builtin=lambda: DefaultConfigPropertyFilter(
                self.regex_list(values, origins, "config.properties.exclude", flow), use_defaults
            ),
            protocol=ConfigPropertyFilter,
        )

    def check_flow(self, flow: FlowConfig) -> None:
        admin = flow.get("forwarding.admin.class")
        if admin not in (_FORWARDING_ADMIN, "ForwardingAdmin"):
            key = flow.origin("forwarding.admin.class") or "forwarding.admin.class"
            raise ConfigError(
                f"{key}={admin!r} (flow {flow.name}): custom ForwardingAdmin classes are Java "
                "code and not supported by mirrorlib; remove the setting.",
                key=key,
                alias=flow.name,
                value=str(admin),
            )
        transforms = flow.get("transforms")
        if isinstance(transforms, tuple) and transforms:
            key = flow.origin("transforms") or "transforms"
            raise ConfigError(
                f"{key} (flow {flow.name}): Connect single message transforms are not "
                "supported; mirrorlib copies records unchanged.",
                key=key,
                alias=flow.name,
                value=", ".join(transforms),
            )
        if flow.exactly_once_support == "required":
            java = flow._java_client("source", "consumer")
            level = java.get("isolation.level")
            if level is None or level.value.strip() != "read_committed":
                key = flow.origin("exactly.once.support") or "exactly.once.support"
                raise ConfigError(
                    f"{key}=required (flow {flow.name}) needs the source consumer's "
                    f"isolation.level=read_committed: set {flow.source}.consumer.isolation.level"
                    "=read_committed",
                    key=key,
                    alias=flow.name,
                    value="required",
                )

    def check_clients(self, flow: FlowConfig) -> None:
        checker = attrs.evolve(flow, require_bootstrap=False)
        for side in ("source", "target"):
            for role in ROLES:
                settings = checker.client_settings(side, role)
                for dropped in settings.dropped:
                    self.report_dropped(dropped, flow.source if side == "source" else flow.target)

    def report_dropped(self, dropped: DroppedSetting, alias: str) -> None:
        if dropped.origin == _MIRRORLIB:
            return
        self.warn(
            dropped.origin,
            f"not passed to librdkafka: {dropped.reason}",
            "unknown" if dropped.unknown else "dropped",
            alias,
        )

    # -- reporting --------------------------------------------------------------------------------

    def classify(self, clusters: tuple[str, ...]) -> None:
        for key, setting in self.values.items():
            if not setting.secret and inline_comment_hint(setting.value) and not is_sensitive(key):
                self.warn(
                    key,
                    f"the value {setting.value!r} contains a '#' or '!' after a blank: Java "
                    "properties have no inline comments, so it is part of the value",
                    "suspicious",
                )
        for key in self.values:
            if key == "clusters" or key.startswith("config.providers"):
                continue
            flow = self.flow_of(clusters, key)
            if flow is not None:
                self.classify_flow_key(key, key[len(f"{flow[0]}->{flow[1]}.") :], flow)
                continue
            head = key.split(".", 1)[0]
            if "->" in head:
                self.warn(
                    key,
                    "names a flow between clusters that are not in clusters; ignored (as by MM2)",
                    "ignored",
                )
                continue
            alias = self.owner(clusters, key)
            if alias is not None:
                self.classify_cluster_key(key, key[len(alias) + 1 :], alias)
                continue
            self.classify_top_key(key)

    def status_warning(self, key: str, spec: KeySpec, alias: str | None) -> None:
        if spec.status is Status.NOT_APPLICABLE:
            self.warn(key, f"not applicable to mirrorlib: {spec.note}", "not-applicable", alias)
        elif spec.name in _DEPRECATED_ALIASES:
            self.warn(
                key,
                f"deprecated (removed in Kafka 4.0); honoured as "
                f"{_DEPRECATED_ALIASES[spec.name]} — rename it",
                "deprecated",
                alias,
            )

    def classify_top_key(self, key: str) -> None:
        spec = KEYS.get(key)
        used_worker_key = spec is not None and spec.scope is Scope.WORKER and key in _WORKER_KEYS
        if used_worker_key and key.startswith(WORKER_TOP_LEVEL_PREFIXES):
            pass  # MM2 copies top-level offset.storage* into every worker config
        elif used_worker_key:
            self.warn(
                key,
                f"ignored at top level (as by MM2): worker settings apply per target "
                f"cluster; write <target>.{key}",
                "ignored",
            )
        elif spec is not None:
            self.status_warning(key, spec, None)
        elif key.startswith("replication.policy") or is_client_connection_key(key):
            pass
        elif is_worker_key(key):
            self.warn(
                key, "a Connect worker setting; not applicable to mirrorlib", "not-applicable"
            )
        elif key.startswith(_CLIENT_PREFIXES):
            self.warn(
                key,
                "top-level client settings are ignored by MM2's flows; write "
                f"<alias>.{key} (or <source>-><target>.{key})",
                "ignored",
            )
        else:
            self.warn(key, "not an MM2 configuration key; ignored", "unknown")

    def classify_cluster_key(self, key: str, rest: str, alias: str) -> None:
        spec = KEYS.get(rest)
        if is_client_connection_key(rest) or rest.startswith(_CLIENT_PREFIXES):
            return  # client settings: checked by translation
        if spec is not None and spec.scope is Scope.WORKER:
            self.status_warning(key, spec, alias)
        elif spec is not None and spec.scope is Scope.FLOW:
            self.warn(
                key,
                f"a flow setting has no effect on a cluster; write {rest} (all flows) "
                f"or {alias}-><target>.{rest}",
                "ignored",
                alias,
            )
        elif is_worker_key(rest):
            self.warn(
                key,
                "a Connect worker setting; not applicable to mirrorlib",
                "not-applicable",
                alias,
            )
        else:
            self.warn(
                key,
                "not a client or MM2 setting; MM2 passes such keys to its Connect "
                "worker only, mirrorlib ignores it",
                "unknown",
                alias,
            )

    def classify_flow_key(self, key: str, rest: str, flow: tuple[str, str]) -> None:
        name = f"{flow[0]}->{flow[1]}"
        spec = KEYS.get(rest)
        if spec is not None and spec.scope is Scope.FLOW:
            self.status_warning(key, spec, name)
        elif rest.startswith(("source.", "target.", *_CLIENT_PREFIXES, "replication.policy")):
            return
        elif is_client_connection_key(rest):
            self.warn(
                key,
                f"has no effect on clients (as in MM2); write {flow[0]}.{rest} or "
                f"{name}.source.cluster.{rest}",
                "ignored",
                name,
            )
        else:
            self.warn(key, "not an MM2 flow setting; ignored", "unknown", name)
