"""The registry of MirrorMaker 2 configuration keys, and how their values are parsed.

Every key MM2 4.3.1 reads from an ``mm2.properties`` file is described here by a :class:`KeySpec`:
its name, type, default, *scope* (where in the file it may appear) and a one-line meaning, plus its
*status* in mirrorlib — ``supported`` (same meaning as MM2), ``changed`` (accepted, with a
difference worth reading), ``not applicable`` (an MM2 worker/Connect setting that has no role in
mirrorlib: accepted and reported, never an error) or ``not supported`` (rejected when set to a
value mirrorlib cannot honour).

Scopes
------
``driver``
    top level only (``clusters``, ``config.providers``).
``flow``
    a replication setting: top level (the default for every flow) or ``A->B.key`` (one flow).
``cluster``
    a client connection/security setting: top level, ``A.key`` (cluster ``A``) or
    ``A.producer.key`` / ``A.consumer.key`` / ``A.admin.key`` (one client role of ``A``).
``worker``
    a setting of MM2's Connect worker, read from the *target* cluster's ``B.key``.

Values are parsed like Kafka's ``ConfigDef``: surrounding whitespace is trimmed; booleans are
``true``/``false`` in any case (anything else is an error, unlike Java's ``Boolean.parseBoolean``);
integers are decimal with an optional sign and must fit the Java type; lists are split on commas
with surrounding whitespace, may be empty, and may not contain empty or duplicate elements.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Final

import attrs

from mirrorlib.errors import ConfigError

__all__ = [
    "CONFIG_PROPERTIES_EXCLUDE_DEFAULT",
    "GROUPS_EXCLUDE_DEFAULT",
    "KEYS",
    "KEY_FAMILIES",
    "SECURITY_PROTOCOLS",
    "TOPICS_EXCLUDE_DEFAULT",
    "WORKER_TOP_LEVEL_PREFIXES",
    "ConfigValue",
    "KeySpec",
    "KeyType",
    "Scope",
    "Status",
    "inline_comment_hint",
    "is_client_connection_key",
    "is_sensitive",
    "is_worker_key",
    "key_spec",
    "mask",
    "masked",
    "masked_repr",
    "parse_list",
    "parse_value",
    "render_markdown_table",
]

ConfigValue = bool | int | float | str | tuple[str, ...] | None
"""A parsed configuration value: the Python type follows the key's :class:`KeyType`."""


class KeyType(enum.Enum):
    """The ``ConfigDef`` type of a key, which decides how its text is parsed."""

    BOOLEAN = "boolean"
    SHORT = "short"
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    STRING = "string"
    PASSWORD = "password"
    LIST = "list"
    CLASS = "class"


class Scope(enum.Enum):
    """Where in an ``mm2.properties`` file a key is read (see the module docstring)."""

    DRIVER = "driver"
    FLOW = "flow"
    CLUSTER = "cluster"
    WORKER = "worker"


class Status(enum.Enum):
    """How mirrorlib treats a key, for the migration documentation."""

    SUPPORTED = "supported"
    CHANGED = "changed"
    NOT_APPLICABLE = "not applicable"
    NOT_SUPPORTED = "not supported"
    EXTENSION = "mirrorlib only"


@attrs.frozen
class KeySpec:
    """One MM2 configuration key.

    ``default`` is the default as MM2 writes it in text (``None``: no default; for ``clusters``
    the key is required). ``choices`` restricts the value (compared case-insensitively when
    ``case_insensitive``); ``minimum`` bounds numbers. ``note`` explains a status other than
    ``supported``.
    """

    name: str
    type: KeyType
    default: str | None
    scope: Scope
    doc: str
    status: Status = Status.SUPPORTED
    note: str = ""
    choices: tuple[str, ...] = ()
    case_insensitive: bool = False
    minimum: int | None = None

    @property
    def attribute(self) -> str:
        """The setting's name in Python: ``.`` and ``-`` become ``_``, and the unit suffix
        ``.ms`` / ``.seconds`` is dropped because durations are in seconds in Python
        (``offset.flush.interval.ms`` → ``offset_flush_interval``). ``FlowConfig``'s properties
        and the runtime's ``FlowSettings`` fields carry this name."""
        return _UNIT_SUFFIX.sub("", self.name.replace(".", "_").replace("-", "_"))

    @property
    def parsed_default(self) -> ConfigValue:
        """The default parsed to its Python type (``None`` when there is no default)."""
        if self.default is None:
            return None
        return parse_value(self, self.default)


_UNIT_SUFFIX: Final = re.compile(r"_(?:ms|seconds)$")

_B = KeyType.BOOLEAN
_S = KeyType.STRING
_L = KeyType.LIST
_LONG = KeyType.LONG
_SHORT = KeyType.SHORT
_INT = KeyType.INT
_CLASS = KeyType.CLASS
_PW = KeyType.PASSWORD

_NA = Status.NOT_APPLICABLE
_CH = Status.CHANGED
_NS = Status.NOT_SUPPORTED

_CONNECT_NA = "A Kafka Connect setting; mirrorlib does not run on Connect."
_TRANSLATED = "Translated to librdkafka (see 'Client settings')."
_PLUGIN_VERSION_NA = (
    "mirrorlib is not a Connect plugin: the code that runs is the installed mirrorlib package "
    "(pin its version with your package manager)."
)
_CONVERTER_VERSION_NA = (
    "Keys, values and headers are always copied as bytes; there is no converter to version."
)
_TOPIC_CREATION_NA = (
    "Connect's topic creation never applies to MM2's remote topics, which MirrorSourceConnector "
    "creates itself; mirrorlib creates them the same way: the source's partition count, "
    "replication.factor, and the source's topic configs (see config.properties.exclude)."
)
_TRANSFORMS_NOTE = (
    "Connect's Filter, InsertHeader, DropHeaders, HeaderFrom and the predicates "
    "TopicNameMatches, HasHeaderKey and RecordIsTombstone by their Java names; any other "
    "transform is a Python class by path (docs/transforms.md)."
)
_OVERRIDE_POLICY_NA = (
    "A Connect worker policy on connector client overrides; mirrorlib has no Connect worker and "
    "applies every client setting of the file: write them per cluster (A.producer.*) or per "
    "flow (A->B.producer.*)."
)

TOPICS_EXCLUDE_DEFAULT: Final = r"mm2.*\.internal, .*\.replica, __.*"
GROUPS_EXCLUDE_DEFAULT: Final = "console-consumer-.*, connect-.*, __.*"
CONFIG_PROPERTIES_EXCLUDE_DEFAULT: Final = (
    "follower.replication.throttled.replicas, leader.replication.throttled.replicas, "
    "message.timestamp.difference.max.ms, log.message.timestamp.before.max.ms, "
    "log.message.timestamp.after.max.ms, message.timestamp.type, "
    "unclean.leader.election.enable, min.insync.replicas"
)
SECURITY_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _k(
    name: str,
    type_: KeyType,
    default: str | None,
    scope: Scope,
    doc: str,
    status: Status = Status.SUPPORTED,
    note: str = "",
    *,
    choices: tuple[str, ...] = (),
    ci: bool = False,
    minimum: int | None = None,
) -> KeySpec:
    return KeySpec(name, type_, default, scope, doc, status, note, choices, ci, minimum)


_D = Scope.DRIVER
_F = Scope.FLOW
_C = Scope.CLUSTER
_W = Scope.WORKER

_SPECS: Final[tuple[KeySpec, ...]] = (
    # --- driver (MirrorMakerConfig) -------------------------------------------------------------
    _k("clusters", _L, None, _D, "Aliases of the Kafka clusters, in order. Required."),
    _k(
        "config.providers",
        _L,
        "",
        _D,
        "Names of config providers resolving ${provider:path:key} variables.",
        _CH,
        "Only Kafka's FileConfigProvider, DirectoryConfigProvider and EnvVarConfigProvider; "
        "a variable naming an unconfigured provider is an error (MM2 leaves it unresolved).",
    ),
    _k(
        "dedicated.mode.enable.internal.rest",
        _B,
        "false",
        _D,
        "Start Connect's internal REST server (multi-node MM2, exactly-once).",
        _NA,
        "mirrorlib nodes need no REST server; multi-node and exactly-once work without it.",
    ),
    _k("listeners", _L, None, _D, "Connect REST listeners.", _NA, _CONNECT_NA),
    _k("rest.advertised.host.name", _S, None, _D, "Connect REST host name.", _NA, _CONNECT_NA),
    _k("rest.advertised.port", _INT, None, _D, "Connect REST port.", _NA, _CONNECT_NA),
    _k("rest.advertised.listener", _S, None, _D, "Connect REST listener.", _NA, _CONNECT_NA),
    # --- common connector keys (MirrorConnectorConfig, Connect's ConnectorConfig) ----------------
    _k(
        "enabled",
        _B,
        "false",
        _F,
        "Whether the flow replicates (A->B.enabled=true turns a flow on).",
    ),
    _k(
        "source.cluster.alias",
        _S,
        None,
        _F,
        "Alias of the flow's source cluster.",
        _CH,
        "Always the flow's source alias; an override is ignored.",
    ),
    _k(
        "target.cluster.alias",
        _S,
        "target",
        _F,
        "Alias of the flow's target cluster.",
        _CH,
        "Always the flow's target alias; an override is ignored.",
    ),
    _k("admin.timeout.ms", _LONG, "60000", _F, "Timeout of administrative requests."),
    _k(
        "replication.policy.class",
        _CLASS,
        "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
        _F,
        "How remote topics are named.",
        _CH,
        "MM2's two built-in policies by Java name, or a Python path 'pkg.module:Class' to a "
        "mirrorlib.ReplicationPolicy subclass.",
    ),
    _k("replication.policy.separator", _S, ".", _F, "Separator in remote topic names."),
    _k(
        "replication.policy.internal.topic.separator.enabled",
        _B,
        "true",
        _F,
        "Use the separator in internal topic names too (KIP-949).",
    ),
    _k(
        "forwarding.admin.class",
        _CLASS,
        "org.apache.kafka.clients.admin.ForwardingAdmin",
        _F,
        "Admin client wrapper for resource management.",
        _NS,
        "Only the default; a custom ForwardingAdmin is Java code.",
    ),
    _k(
        "metric.reporters",
        _L,
        "org.apache.kafka.common.metrics.JmxReporter",
        _F,
        "Java metrics reporters.",
        _NA,
        "mirrorlib reports metrics through its own registry (Prometheus optional).",
    ),
    _k(
        "topic.filter.class",
        _CLASS,
        "org.apache.kafka.connect.mirror.DefaultTopicFilter",
        _F,
        "Selects topics to replicate.",
        _CH,
        "The default, or a Python path to a class with from_config() and should_replicate_topic().",
    ),
    _k(
        "offset-syncs.topic.location",
        _S,
        "source",
        _F,
        "Cluster (source/target) holding the offset-syncs topic.",
        choices=("source", "target"),
    ),
    _k(
        "emit.offset-syncs.enabled",
        _B,
        "true",
        _F,
        "Write offset syncs (needed for checkpoints and group offset sync).",
    ),
    _k(
        "tasks.max",
        _INT,
        "1",
        _F,
        "Maximum parallelism of each connector of the flow.",
        _CH,
        "Per mirrorlib process (node), not cluster-wide as in MM2: 1 copies in a thread of the "
        "process; N > 1 runs N copier worker processes, each writing through a transactional "
        "producer of its own (see the data plane page). Several `mirrorlib run` processes on the "
        "same file share the flow's partitions. `mirrorlib status` lists every worker of every "
        "node with its partitions and rates.",
        minimum=1,
    ),
    _k("tasks.max.enforce", _B, "true", _F, "Connect task-count enforcement.", _NA, _CONNECT_NA),
    _k("name", _S, None, _F, "Connector name.", _NA, _CONNECT_NA),
    _k("connector.class", _CLASS, None, _F, "Connector class.", _NA, _CONNECT_NA),
    _k(
        "key.converter",
        _CLASS,
        None,
        _F,
        "Record key converter.",
        _NA,
        "Keys, values and headers are always copied as bytes.",
    ),
    _k(
        "value.converter",
        _CLASS,
        None,
        _F,
        "Record value converter.",
        _NA,
        "Keys, values and headers are always copied as bytes.",
    ),
    _k(
        "header.converter",
        _CLASS,
        None,
        _F,
        "Record header converter.",
        _NA,
        "Keys, values and headers are always copied as bytes.",
    ),
    _k(
        "transforms",
        _L,
        "",
        _F,
        "Single message transforms, applied in order to each record copied.",
        note=_TRANSFORMS_NOTE,
    ),
    _k("predicates", _L, "", _F, "Predicates for transforms.", note=_TRANSFORMS_NOTE),
    _k("config.action.reload", _S, "restart", _F, "Connect reload action.", _NA, _CONNECT_NA),
    _k("errors.retry.timeout", _LONG, "0", _F, "Connect error retry timeout.", _NA, _CONNECT_NA),
    _k("errors.retry.delay.max.ms", _LONG, "60000", _F, "Connect retry delay.", _NA, _CONNECT_NA),
    _k("errors.tolerance", _S, "none", _F, "Connect error tolerance.", _NA, _CONNECT_NA),
    _k("errors.log.enable", _B, "false", _F, "Connect error logging.", _NA, _CONNECT_NA),
    _k(
        "errors.log.include.messages",
        _B,
        "false",
        _F,
        "Connect error logging.",
        _NA,
        _CONNECT_NA,
    ),
    _k(
        "exactly.once.support",
        _S,
        "requested",
        _F,
        "Whether exactly-once is required of the flow (checked at start).",
        choices=("requested", "required"),
        ci=True,
    ),
    _k(
        "transaction.boundary",
        _S,
        "poll",
        _F,
        "Where Connect commits transactions.",
        _NA,
        "mirrorlib decides its own transaction boundaries.",
        choices=("poll", "interval", "connector"),
        ci=True,
    ),
    _k(
        "transaction.boundary.interval.ms",
        _LONG,
        "1000",
        _F,
        "How often an exactly-once flow commits its transaction (sooner when caught up).",
        _CH,
        "Used by mirrorlib's transactions (exactly-once, and every tasks.max > 1 worker), "
        "default 1000 ms (Connect's default is offset.flush.interval.ms, and MM2 commits per "
        "poll): committed as soon as the copier caught up (a round consumed nothing, or read "
        "the transaction's partitions to the end of their last fetch, then at most every "
        "50 ms), else when this old, or older while commits are slow (so that they take at "
        "most 5 % of a busy copier's time, up to 10 s).",
        minimum=1,
    ),
    _k(
        "data.loss.action",
        _S,
        "fail",
        _F,
        "What a flow does when source records vanished before being copied (retention, "
        "truncation): fail, or continue and report.",
        Status.EXTENSION,
        "MM2 silently skips ahead.",
        choices=("fail", "continue"),
        ci=True,
    ),
    _k(
        "node.id",
        _S,
        None,
        _F,
        "Stable name of this mirrorlib node (default: the host name); part of transactional ids "
        "and of the flow group's static member id.",
        Status.EXTENSION,
        "Give each node on one host its own: a second process with the same one stops the first.",
    ),
    _k("offsets.storage.topic", _S, None, _F, "Per-connector offsets topic.", _NA, _CONNECT_NA),
    _k(
        "metric.names.formats",
        _L,
        "legacy",
        _F,
        "Deprecated MM2 metric name formats.",
        _NA,
        "mirrorlib names metrics its own way.",
        choices=("legacy", "new"),
    ),
    # --- Connect connector keys of Kafka 4.x (KIP-891) and Connect's topic creation (KIP-158) ----
    _k(
        "connector.plugin.version",
        _S,
        None,
        _F,
        "Version of the connector plugin to run (KIP-891).",
        _NA,
        _PLUGIN_VERSION_NA,
    ),
    _k(
        "key.converter.plugin.version",
        _S,
        None,
        _F,
        "Version of the key converter plugin (KIP-891).",
        _NA,
        _CONVERTER_VERSION_NA,
    ),
    _k(
        "value.converter.plugin.version",
        _S,
        None,
        _F,
        "Version of the value converter plugin (KIP-891).",
        _NA,
        _CONVERTER_VERSION_NA,
    ),
    _k(
        "header.converter.plugin.version",
        _S,
        None,
        _F,
        "Version of the header converter plugin (KIP-891).",
        _NA,
        _CONVERTER_VERSION_NA,
    ),
    _k(
        "topic.creation.groups",
        _L,
        "",
        _F,
        "Connect's topic-creation groups for topics a source task writes to (KIP-158).",
        _NA,
        _TOPIC_CREATION_NA,
    ),
    _k(
        "topic.creation.default.replication.factor",
        _INT,
        None,
        _F,
        "Replication factor of topics Connect creates for a source task (KIP-158).",
        _NA,
        _TOPIC_CREATION_NA,
    ),
    _k(
        "topic.creation.default.partitions",
        _INT,
        None,
        _F,
        "Partitions of topics Connect creates for a source task (KIP-158).",
        _NA,
        _TOPIC_CREATION_NA,
    ),
    # --- MirrorSourceConnector ---------------------------------------------------------------
    _k("topics", _L, ".*", _F, "Topics to replicate (names and regexes)."),
    _k(
        "topics.exclude",
        _L,
        TOPICS_EXCLUDE_DEFAULT,
        _F,
        "Topics not to replicate; wins over topics.",
    ),
    _k(
        "config.properties.exclude",
        _L,
        CONFIG_PROPERTIES_EXCLUDE_DEFAULT,
        _F,
        "Topic config properties not to replicate (names and regexes).",
    ),
    _k(
        "config.property.filter.class",
        _CLASS,
        "org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter",
        _F,
        "Selects topic config properties to replicate.",
        _CH,
        "The default, or a Python path to a class with from_config(), "
        "should_replicate_config_property() and should_replicate_source_default().",
    ),
    _k(
        "use.defaults.from",
        _S,
        "target",
        _F,
        "Whose default (source/target) a topic config at its default gets.",
        _CH,
        "Honoured at top level too (MM2 reads it only as A->B.use.defaults.from); values other "
        "than source/target are errors.",
        choices=("source", "target"),
    ),
    _k("consumer.poll.timeout.ms", _LONG, "1000", _F, "Timeout when polling the source."),
    _k("refresh.topics.enabled", _B, "true", _F, "Periodically look for new topics/partitions."),
    _k("refresh.topics.interval.seconds", _LONG, "600", _F, "Topic refresh period."),
    _k("sync.topic.configs.enabled", _B, "true", _F, "Periodically copy topic configs."),
    _k("sync.topic.configs.interval.seconds", _LONG, "600", _F, "Topic config sync period."),
    _k("sync.topic.acls.enabled", _B, "true", _F, "Periodically copy topic ACLs."),
    _k("sync.topic.acls.interval.seconds", _LONG, "600", _F, "Topic ACL sync period."),
    _k("replication.factor", _INT, "2", _F, "Replication factor of new remote topics."),
    _k(
        "replication.factor.lowering.enabled",
        _B,
        "false",
        _F,
        "Lower a replication factor above the live broker count of a cluster to that count when "
        "creating a topic (remote or internal), with a warning.",
        Status.EXTENSION,
        "Off: such a topic is not created, as with MM2 (the error is in the flow's status and "
        "creation is retried). For one-broker development clusters.",
    ),
    _k(
        "offset-syncs.topic.replication.factor",
        _SHORT,
        "3",
        _F,
        "Replication factor of the offset-syncs topic.",
    ),
    _k(
        "offset.lag.max",
        _LONG,
        "100",
        _F,
        "How far (records) a partition may run ahead of its last offset sync.",
    ),
    _k(
        "heartbeats.replication.enabled",
        _B,
        "true",
        _F,
        "Replicate heartbeats topics even when the topic filter excludes them.",
    ),
    _k(
        "topics.blacklist",
        _L,
        None,
        _F,
        "Old name of topics.exclude (removed in Kafka 4.0).",
        _CH,
        "Accepted as topics.exclude (as MM2 3.x did) with a warning; "
        "topics.exclude wins if both are set.",
    ),
    _k(
        "config.properties.blacklist",
        _L,
        None,
        _F,
        "Old name of config.properties.exclude (removed in Kafka 4.0).",
        _CH,
        "Accepted as config.properties.exclude with a warning.",
    ),
    _k(
        "use.incremental.alter.configs",
        _S,
        None,
        _F,
        "Removed in Kafka 4.0 (config sync is always incremental).",
        _NA,
        "Topic configs are always synced incrementally.",
    ),
    _k(
        "add.source.alias.to.metrics",
        _B,
        None,
        _F,
        "Removed in Kafka 4.0.",
        _NA,
        "Metrics always carry the source alias.",
    ),
    # --- MirrorCheckpointConnector ---------------------------------------------------------------
    _k("groups", _L, ".*", _F, "Consumer groups to checkpoint (names and regexes)."),
    _k(
        "groups.exclude",
        _L,
        GROUPS_EXCLUDE_DEFAULT,
        _F,
        "Consumer groups not to checkpoint; wins over groups.",
    ),
    _k(
        "groups.blacklist",
        _L,
        None,
        _F,
        "Old name of groups.exclude (removed in Kafka 4.0).",
        _CH,
        "Accepted as groups.exclude with a warning; groups.exclude wins if both are set.",
    ),
    _k(
        "group.filter.class",
        _CLASS,
        "org.apache.kafka.connect.mirror.DefaultGroupFilter",
        _F,
        "Selects consumer groups to checkpoint.",
        _CH,
        "The default, or a Python path to a class with from_config() and should_replicate_group().",
    ),
    _k("refresh.groups.enabled", _B, "true", _F, "Periodically look for new consumer groups."),
    _k("refresh.groups.interval.seconds", _LONG, "600", _F, "Group refresh period."),
    _k("emit.checkpoints.enabled", _B, "true", _F, "Write checkpoints to the target."),
    _k("emit.checkpoints.interval.seconds", _LONG, "60", _F, "Checkpoint period."),
    _k(
        "emit.checkpoints.on.commit.enabled",
        _B,
        "true",
        _F,
        "Write a group's checkpoints as soon as a commit changes its offsets (read from the "
        "source's __consumer_offsets), besides the fixed-rate cycle.",
        Status.EXTENSION,
        "MM2 only checkpoints every emit.checkpoints.interval.seconds. A group is checkpointed "
        "this way at most every 100 ms; off: only a group that had no checkpoint cycle for a "
        "whole interval is. Needs permission to read __consumer_offsets (else OffsetFetch every "
        "interval, as MM2).",
    ),
    _k(
        "sync.group.offsets.enabled",
        _B,
        "false",
        _F,
        "Commit translated offsets of idle groups on the target.",
    ),
    _k("sync.group.offsets.interval.seconds", _LONG, "60", _F, "Group offset sync period."),
    _k(
        "checkpoints.topic.replication.factor",
        _SHORT,
        "3",
        _F,
        "Replication factor of the checkpoints topic.",
    ),
    # --- MirrorHeartbeatConnector ----------------------------------------------------------------
    _k(
        "emit.heartbeats.enabled",
        _B,
        "true",
        _F,
        "Write heartbeats to the target (also for flows that are not enabled).",
    ),
    _k("emit.heartbeats.interval.seconds", _LONG, "1", _F, "Heartbeat period."),
    _k(
        "heartbeats.topic.replication.factor",
        _SHORT,
        "3",
        _F,
        "Replication factor of the heartbeats topic.",
    ),
    # --- client connection / security (MirrorClientConfig.CLIENT_CONFIG_DEF) ---------------------
    _k("bootstrap.servers", _L, None, _C, "Brokers to bootstrap from."),
    _k(
        "security.protocol",
        _S,
        "PLAINTEXT",
        _C,
        "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.",
        choices=SECURITY_PROTOCOLS,
        ci=True,
    ),
    _k("sasl.mechanism", _S, "GSSAPI", _C, "SASL mechanism."),
    _k(
        "sasl.jaas.config",
        _PW,
        None,
        _C,
        "JAAS login module line.",
        _CH,
        "PLAIN/SCRAM become sasl.username/sasl.password; Kerberos keytab logins become "
        "sasl.kerberos.*; OAuth client credentials become sasl.oauthbearer.*; others are errors.",
    ),
    _k("sasl.kerberos.service.name", _S, None, _C, "Kerberos service name."),
    _k(
        "sasl.kerberos.kinit.cmd",
        _S,
        "/usr/bin/kinit",
        _C,
        "Kerberos kinit path.",
        _CH,
        "librdkafka's setting is a full command line: a Java kinit path becomes librdkafka's "
        "default command run with that binary; a value with arguments is passed unchanged.",
    ),
    _k(
        "sasl.kerberos.min.time.before.relogin",
        _LONG,
        "60000",
        _C,
        "Minimum time between Kerberos re-logins.",
    ),
    _k(
        "sasl.kerberos.ticket.renew.window.factor",
        KeyType.DOUBLE,
        "0.8",
        _C,
        "Java ticket renewal tuning.",
        _NA,
        "Dropped: librdkafka renews with kinit.",
    ),
    _k(
        "sasl.kerberos.ticket.renew.jitter",
        KeyType.DOUBLE,
        "0.05",
        _C,
        "Java ticket renewal tuning.",
        _NA,
        "Dropped: librdkafka renews with kinit.",
    ),
    _k(
        "sasl.login.callback.handler.class",
        _CLASS,
        None,
        _C,
        "Java SASL login handler.",
        _CH,
        "Kafka's OAuthBearerLoginCallbackHandler becomes sasl.oauthbearer.method=oidc; "
        "other handlers are errors.",
    ),
    _k(
        "sasl.client.callback.handler.class",
        _CLASS,
        None,
        _C,
        "Java SASL client handler.",
        _NS,
        "Java code; not portable to librdkafka.",
    ),
    _k(
        "sasl.login.class",
        _CLASS,
        None,
        _C,
        "Java SASL login class.",
        _NS,
        "Java code; not portable to librdkafka.",
    ),
    _k(
        "sasl.oauthbearer.token.endpoint.url",
        _S,
        None,
        _C,
        "OAuth token endpoint (OIDC).",
        note=_TRANSLATED,
    ),
    _k(
        "sasl.oauthbearer.scope.claim.name",
        _S,
        "scope",
        _C,
        "OAuth scope claim.",
        _NA,
        "Dropped: used by Java's unsecured/validating handlers only.",
    ),
    _k("sasl.oauthbearer.sub.claim.name", _S, "sub", _C, "OAuth subject claim."),
    _k(
        "ssl.protocol",
        _S,
        "TLSv1.3",
        _C,
        "Java TLS protocol.",
        _NA,
        "Dropped: librdkafka negotiates the highest TLS version OpenSSL allows.",
    ),
    _k(
        "ssl.enabled.protocols",
        _L,
        "TLSv1.2,TLSv1.3",
        _C,
        "Java TLS versions.",
        _NA,
        "Dropped: librdkafka negotiates the highest TLS version OpenSSL allows.",
    ),
    _k("ssl.provider", _S, None, _C, "Java security provider.", _NA, "Dropped (Java only)."),
    _k(
        "ssl.cipher.suites",
        _L,
        None,
        _C,
        "TLS cipher suites.",
        _CH,
        "Must use OpenSSL names (ECDHE-RSA-AES128-GCM-SHA256), not Java/IANA names.",
    ),
    _k(
        "ssl.keystore.type",
        _S,
        "JKS",
        _C,
        "Keystore format (JKS, PKCS12, PEM).",
        _CH,
        "PKCS12 and PEM only; convert JKS with keytool or use ssl.certificate.location + "
        "ssl.key.location.",
    ),
    _k("ssl.keystore.location", _S, None, _C, "Client keystore file.", note=_TRANSLATED),
    _k("ssl.keystore.password", _PW, None, _C, "Keystore password.", note=_TRANSLATED),
    _k("ssl.key.password", _PW, None, _C, "Private key password.", note=_TRANSLATED),
    _k(
        "ssl.keystore.key",
        _PW,
        None,
        _C,
        "PEM private key (becomes ssl.key.pem).",
        note=_TRANSLATED,
    ),
    _k(
        "ssl.keystore.certificate.chain",
        _PW,
        None,
        _C,
        "PEM certificate chain (becomes ssl.certificate.pem).",
        note=_TRANSLATED,
    ),
    _k(
        "ssl.truststore.type",
        _S,
        "JKS",
        _C,
        "Truststore format (JKS, PKCS12, PEM).",
        _CH,
        "PEM only; for JKS/PKCS12 export the CA certificates and set ssl.ca.location.",
    ),
    _k(
        "ssl.truststore.location",
        _S,
        None,
        _C,
        "Truststore file (PEM: ssl.ca.location).",
        _CH,
        "PEM only; for JKS/PKCS12 set ssl.ca.location to a PEM CA bundle.",
    ),
    _k(
        "ssl.truststore.password",
        _PW,
        None,
        _C,
        "Truststore password.",
        _NA,
        "Dropped: PEM CA files need no password.",
    ),
    _k(
        "ssl.truststore.certificates",
        _PW,
        None,
        _C,
        "PEM CA certificates (becomes ssl.ca.pem).",
        note=_TRANSLATED,
    ),
    _k(
        "ssl.keymanager.algorithm",
        _S,
        "SunX509",
        _C,
        "Java key manager.",
        _NA,
        "Dropped (Java only).",
    ),
    _k(
        "ssl.trustmanager.algorithm",
        _S,
        "PKIX",
        _C,
        "Java trust manager.",
        _NA,
        "Dropped (Java only).",
    ),
    _k(
        "ssl.endpoint.identification.algorithm",
        _S,
        "https",
        _C,
        "Broker host name verification ('https', or empty to disable).",
        note=_TRANSLATED,
    ),
    _k(
        "ssl.secure.random.implementation",
        _S,
        None,
        _C,
        "Java SecureRandom.",
        _NA,
        "Dropped (Java only).",
    ),
    _k(
        "ssl.engine.factory.class",
        _CLASS,
        None,
        _C,
        "Java SSL engine factory.",
        _NS,
        "Java code; not portable to librdkafka.",
    ),
    # --- Connect worker keys read from the target cluster ----------------------------------------
    _k(
        "exactly.once.source.support",
        _S,
        "disabled",
        _W,
        "Exactly-once replication into this target (B.exactly.once.source.support).",
        choices=("disabled", "enabled", "preparing"),
        ci=True,
    ),
    _k(
        "offset.flush.interval.ms",
        _LONG,
        "60000",
        _W,
        "How often replication progress is committed (B.offset.flush.interval.ms).",
    ),
    _k(
        "offset.storage.topic",
        _S,
        None,
        _W,
        "Topic on the target holding replication progress (default mm2-offsets.<source>.internal).",
        _CH,
        "mirrorlib keeps its source offsets there in Connect's format; top-level "
        "offset.storage.* wins over <target>.offset.storage.*, as in MM2.",
    ),
    _k(
        "offset.storage.partitions",
        _INT,
        "25",
        _W,
        "Partitions of the offsets topic when mirrorlib creates it.",
        minimum=1,
    ),
    _k(
        "offset.storage.replication.factor",
        _SHORT,
        "3",
        _W,
        "Replication factor of the offsets topic when mirrorlib creates it.",
    ),
    _k("config.storage.topic", _S, None, _W, "Connect configs topic.", _NA, _CONNECT_NA),
    _k(
        "status.storage.topic",
        _S,
        None,
        _W,
        "Connect status topic.",
        _NA,
        "A Kafka Connect setting; mirrorlib does not run on Connect and leaves "
        "mm2-status.<source>.internal alone: its copier workers report to its own "
        "mm2-mirrorlib-status.<source>.internal on the target, read by `mirrorlib status`.",
    ),
    _k("group.id", _S, None, _W, "Connect worker group.", _NA, _CONNECT_NA),
    _k(
        "topic.creation.enable",
        _B,
        "true",
        _W,
        "Whether Connect creates the topics source tasks write to (KIP-158).",
        _NA,
        _TOPIC_CREATION_NA,
    ),
    _k(
        "connector.client.config.override.policy",
        _S,
        "All",
        _W,
        "Which producer.override.*, consumer.override.* and admin.override.* keys a connector "
        "may set: None, Principal, All or Allowlist (KIP-458, KIP-1188).",
        _NA,
        _OVERRIDE_POLICY_NA,
    ),
    _k(
        "connector.client.config.override.allowlist",
        _L,
        "",
        _W,
        "Client keys a connector may override under the Allowlist policy (KIP-1188).",
        _NA,
        _OVERRIDE_POLICY_NA,
    ),
)

_FAMILIES: Final[tuple[KeySpec, ...]] = (
    _k(
        "transforms.<name>.<key>",
        _S,
        None,
        _F,
        "A transform's class (type), predicate, negate and its own keys.",
        note=_TRANSFORMS_NOTE,
    ),
    _k(
        "predicates.<name>.<key>",
        _S,
        None,
        _F,
        "A predicate's class (type) and its own keys.",
        note=_TRANSFORMS_NOTE,
    ),
    _k(
        "topic.creation.<group>.<setting>",
        _S,
        None,
        _F,
        "A topic-creation group's include, exclude, replication.factor, partitions or topic "
        "config (KIP-158).",
        _NA,
        _TOPIC_CREATION_NA,
    ),
)

KEYS: Final[Mapping[str, KeySpec]] = {spec.name: spec for spec in _SPECS}
"""Every registered key by name."""

KEY_FAMILIES: Final[tuple[KeySpec, ...]] = _FAMILIES
"""Keys registered by pattern: the name holds ``<placeholders>``, and a key matches when it starts
with the text before the first one (``topic.creation.<group>.<setting>`` matches
``topic.creation.compacted.include``). :func:`key_spec` answers them after the exact keys."""

_WORKER_PREFIXES: Final = (
    "offset.storage.",
    "config.storage.",
    "status.storage.",
    "key.converter.",
    "value.converter.",
    "header.converter.",
    "task.",
    "worker.",
    "rest.",
    "listeners.",
    "admin.listeners",
    "scheduled.rebalance.",
    "connect.protocol",
    "plugin.",
    "exactly.once.source.support",
    "inter.worker.",
)


def key_spec(name: str) -> KeySpec | None:
    """The registered spec of ``name`` (an exact key, else a :data:`KEY_FAMILIES` pattern it
    matches), or ``None``."""
    spec = KEYS.get(name)
    if spec is not None:
        return spec
    for family in _FAMILIES:
        if name.startswith(family.name.split("<", 1)[0]):
            return family
    return None


WORKER_TOP_LEVEL_PREFIXES: Final = (
    "offset.storage",
    "config.storage",
    "status.storage",
    "key.converter",
    "value.converter",
    "header.converter",
    "task",
    "worker",
)
"""Top-level keys MM2 copies into every worker config (``MirrorMakerConfig.workerConfig``)."""


def is_worker_key(name: str) -> bool:
    """True for Connect worker keys MM2 accepts with a prefix match (``offset.storage*``…)."""
    return (name in KEYS and KEYS[name].scope is Scope.WORKER) or name.startswith(_WORKER_PREFIXES)


def is_client_connection_key(name: str) -> bool:
    """True for MM2's client connection keys (``bootstrap.servers``, ``security.protocol``,
    ``ssl.*``, ``sasl.*``), which MM2 copies from the top level and ``A.`` into every client."""
    return (
        name in ("bootstrap.servers", "security.protocol")
        or name.startswith("ssl.")
        or name.startswith("sasl.")
    )


# -- parsing ------------------------------------------------------------------------------------

_COMMA: Final = re.compile(r"\s*,\s*")
_INTEGER: Final = re.compile(r"[+-]?[0-9]+")
_DOUBLE: Final = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[dDfF]?")
_RANGES: Final[Mapping[KeyType, tuple[int, int]]] = {
    KeyType.SHORT: (-(2**15), 2**15 - 1),
    KeyType.INT: (-(2**31), 2**31 - 1),
    KeyType.LONG: (-(2**63), 2**63 - 1),
}
_SENSITIVE_WORDS: Final = (
    "password",
    "secret",
    "jaas",
    "keystore.key",
    "certificate.chain",
    "truststore.certificates",
    ".pem",
    "private.key",
    "token",
    "user.info",  # basic.auth.user.info (user:password)
    "oauthbearer.config",  # librdkafka's sasl.oauthbearer.config (may hold a client secret)
)


def is_sensitive(key: str) -> bool:
    """True when ``key`` holds a secret whose value must never appear in messages or logs."""
    lowered = key.lower()
    if lowered.endswith(("ssl.key.location", "ssl.keystore.location")):
        return False
    return any(word in lowered for word in _SENSITIVE_WORDS)


def mask(key: str, value: str | None, *, secret: bool = False) -> str | None:
    """``value`` as it may be shown for ``key``: ``[hidden]`` for secrets."""
    if value is None:
        return None
    return "[hidden]" if secret or is_sensitive(key) else value


def masked(values: Mapping[str, Any], secret_keys: Collection[str] = ()) -> dict[str, Any]:
    """``values`` as they may be shown (a repr, a message): the value of every secret key
    (:func:`is_sensitive`, or one of ``secret_keys``) replaced by ``[hidden]``."""
    return {
        key: "[hidden]" if key in secret_keys or is_sensitive(str(key)) else value
        for key, value in values.items()
    }


def masked_repr(values: Mapping[str, Any]) -> str:
    """``repr`` of :func:`masked` ``values`` (an ``attrs`` field's ``repr``)."""
    return repr(masked(values))


def inline_comment_hint(value: str) -> str:
    """A hint for values that look like they carry an inline comment (``true # off``).

    Java properties have no inline comments: ``#`` and ``!`` start a comment only as the first
    non-blank character of a line, so the comment text becomes part of the value.
    """
    if re.search(r"\s[#!]", value) or value.lstrip().startswith(("#", "!")):
        return (
            " Hint: Java properties files have no inline comments — '#' or '!' starts a comment "
            "only at the beginning of a line, so the text after it is part of the value. Move the "
            "comment to its own line."
        )
    return ""


def parse_list(value: str) -> tuple[str, ...]:
    """A ``ConfigDef`` LIST: trimmed, ``""`` is empty, else split on ``\\s*,\\s*``."""
    trimmed = value.strip()
    if not trimmed:
        return ()
    return tuple(_COMMA.split(trimmed))


def _error(
    spec: KeySpec, value: str, why: str, key: str | None, alias: str | None, secret: bool
) -> ConfigError:
    shown_key = key or spec.name
    shown = mask(shown_key, value, secret=secret or spec.type is KeyType.PASSWORD)
    where = f" (cluster/flow {alias})" if alias else ""
    return ConfigError(
        f"Invalid value {shown!r} for configuration {shown_key}{where}: {why}."
        + ("" if shown == "[hidden]" else inline_comment_hint(value)),
        key=shown_key,
        alias=alias,
        value=shown,
    )


def parse_value(
    spec: KeySpec,
    value: str,
    *,
    key: str | None = None,
    alias: str | None = None,
    secret: bool = False,
) -> ConfigValue:
    """Parse ``value`` for ``spec`` with ``ConfigDef`` semantics, or raise :class:`ConfigError`.

    ``key`` is the key as the user wrote it (``A->B.offset.lag.max``) and ``alias`` the cluster
    or flow, both for the error message; ``secret`` masks the value in it.
    """
    try:
        return _PARSERS[spec.type](spec, value)
    except ValueError as exc:
        raise _error(spec, value, str(exc), key, alias, secret) from None


# Each parser takes the raw text and raises ``ValueError(why)`` for an invalid value.


def _parse_boolean(spec: KeySpec, value: str) -> bool:
    del spec
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError("expected true or false")
    return lowered == "true"


def _parse_integer(spec: KeySpec, value: str) -> int:
    trimmed, kind = value.strip(), spec.type
    if not _INTEGER.fullmatch(trimmed):
        raise ValueError(f"expected a whole number ({kind.value})")
    number = int(trimmed)
    low, high = _RANGES[kind]
    if not low <= number <= high:
        raise ValueError(f"out of range for a Java {kind.value}")
    if spec.minimum is not None and number < spec.minimum:
        raise ValueError(f"must be at least {spec.minimum}")
    return number


def _parse_double(spec: KeySpec, value: str) -> float:
    del spec
    trimmed = value.strip()
    if not _DOUBLE.fullmatch(trimmed):
        raise ValueError("expected a number")
    return float(trimmed.rstrip("dDfF"))


def _parse_list_value(spec: KeySpec, value: str) -> tuple[str, ...]:
    items = parse_list(value)
    if any(not item for item in items):
        raise ValueError("list elements must not be empty")
    if len(set(items)) != len(items):
        raise ValueError("list elements must not be duplicated")
    if spec.choices and any(item not in spec.choices for item in items):
        raise ValueError(f"elements must be one of {', '.join(spec.choices)}")
    return items


def _parse_password(spec: KeySpec, value: str) -> str:
    del spec
    return value  # as written, not trimmed


def _parse_string(spec: KeySpec, value: str) -> str:
    trimmed = value.strip()
    if not spec.choices:
        return trimmed
    if spec.case_insensitive:
        ok = trimmed.upper() in (c.upper() for c in spec.choices)
    else:
        ok = trimmed in spec.choices
    if not ok:
        how = " (case insensitive)" if spec.case_insensitive else ""
        raise ValueError(f"must be one of{how}: {', '.join(spec.choices)}")
    return trimmed


_PARSERS: Final[Mapping[KeyType, Callable[[KeySpec, str], ConfigValue]]] = {
    KeyType.BOOLEAN: _parse_boolean,
    KeyType.SHORT: _parse_integer,
    KeyType.INT: _parse_integer,
    KeyType.LONG: _parse_integer,
    KeyType.DOUBLE: _parse_double,
    KeyType.LIST: _parse_list_value,
    KeyType.PASSWORD: _parse_password,
    KeyType.STRING: _parse_string,
    KeyType.CLASS: _parse_string,
}
"""How the text of a value of each ``ConfigDef`` type is parsed."""


# -- documentation ------------------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown_table(specs: Iterable[KeySpec] | None = None) -> str:
    """The registry as a Markdown table (the key reference in ``docs/configuration.md``)."""
    rows = [
        "| Key | Scope | Type | Default | Status | Meaning |",
        "|---|---|---|---|---|---|",
    ]
    for spec in specs if specs is not None else (*_SPECS, *_FAMILIES):
        default = (
            "(required)"
            if spec.name == "clusters"
            else ("" if spec.default is None else f"`{spec.default}`" if spec.default else '`""`')
        )
        meaning = spec.doc + (f" *{spec.note}*" if spec.note else "")
        rows.append(
            f"| `{spec.name}` | {spec.scope.value} | {spec.type.value} | {_cell(default)} | "
            f"{spec.status.value} | {_cell(meaning)} |"
        )
    return "\n".join(rows) + "\n"
