"""Topic, config and ACL synchronisation for one flow ``A->B``, as pure plans.

This module is the *pure core* of MirrorMaker 2's ``MirrorSourceConnector`` housekeeping
(``computeAndCreateTopicPartitions``, ``syncTopicConfigs``, ``syncTopicAcls``): it compares
snapshots of the two clusters and answers *what should be done* on the target, as immutable
plan values. It never talks to Kafka (the I/O edge, :mod:`mirrorlib.kafka.admin`, snapshots
clusters and applies plans), never imports ``confluent_kafka`` and is cheap to test.

Snapshots
    :class:`ConfigValue` (one described topic config entry), :class:`TopicSnapshot` (name,
    partition count, configs) and :class:`AclRule` (one ACL binding), in plain strings/enums
    spelled like Kafka's Java names.

Plans
    :func:`plan_topics` → :class:`TopicPlan` of :class:`CreateTopic` and
    :class:`CreatePartitions` steps (plus :class:`SkippedTopic` notes);
    :func:`plan_topic_configs` → :class:`ConfigPlan` of :class:`AlterTopicConfigs` steps;
    :func:`plan_acls` → :class:`AclPlan` with one :class:`CreateAcls` step (plus
    :class:`SkippedAcl` notes). Plans add up with ``+`` and print with :meth:`Plan.describe`.

MM2 rules kept (``MirrorSourceConnector.java`` 4.3):

* a remote topic is created with the source's partition count, ``replication_factor`` and the
  configs of MM2's ``targetConfig(…, incremental=false)``: non-default entries (or also default
  ones with ``use.defaults.from=source``) that are not read-only, not sensitive, not
  ``STATIC_BROKER_CONFIG`` and pass the config property filter;
* partitions only ever grow (to the source count); topics and partitions are never deleted,
  partitions that exist only on the target never cause anything;
* configs of remote topics already on the target are synced incrementally: for every source
  entry passing the same filters, a default entry with ``use.defaults.from=target`` becomes a
  ``DELETE`` (the target's own default applies), anything else a ``SET``;
* ACLs: only ``TOPIC`` + ``LITERAL`` bindings of replicated topics; ``ALLOW WRITE`` is dropped,
  ``ALLOW ALL`` becomes ``ALLOW READ``, everything else (DENY, ALLOW READ/DESCRIBE/…) is copied;
  the resource is renamed with ``format_remote_topic``; ACLs are never deleted.

Better than MM2:

* config ops that would not change the target (``SET`` to the value the target already has,
  ``DELETE`` of an entry that is not a topic override on the target) are left out, so a stable
  pair of clusters yields an empty plan (MM2 re-sends every entry every 10 minutes);
* ACLs already present on the target are not re-created;
* a literal ``*`` topic ACL is skipped (MM2 turns it into a meaningless literal ``<alias>.*``);
* null config values (which crash MM2's ``configToMap``) are left out;
* two source topics that map to the same remote name (possible with a custom policy) are
  reported as a conflict instead of racing;
* every left-out topic or ACL is reported with a reason.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, Literal, NamedTuple, Self, TypeVar, overload

import attrs

from mirrorlib.core.policy import ReplicationPolicy

__all__ = [
    "CONFIG_PROPERTIES_EXCLUDE_DEFAULT",
    "AclOperation",
    "AclPermission",
    "AclPlan",
    "AclRule",
    "AlterTopicConfigs",
    "ConfigOp",
    "ConfigPlan",
    "ConfigSource",
    "ConfigValue",
    "CreateAcls",
    "CreatePartitions",
    "CreateTopic",
    "DefaultConfigPropertyFilter",
    "DefaultsFrom",
    "FrozenMap",
    "PatternType",
    "Plan",
    "ResourceType",
    "SkipReason",
    "Skipped",
    "SkippedAcl",
    "SkippedTopic",
    "Step",
    "TopicPlan",
    "TopicSnapshot",
    "UseDefaultsFrom",
    "is_cycle",
    "plan_acls",
    "plan_topic_configs",
    "plan_topics",
    "should_replicate_acl",
    "target_acl_rule",
    "target_config",
]

UseDefaultsFrom = Literal["target", "source"]
#: ``"target"`` / ``"source"`` (``use.defaults.from``), or MM2's per-property
#: ``ConfigPropertyFilter.shouldReplicateSourceDefault`` as a callable (property → copy the
#: source's default value?), e.g. ``flow.should_replicate_source_default``.
DefaultsFrom = str | Callable[[str], bool]

K = TypeVar("K")
V = TypeVar("V")


# -- small immutable mapping ----------------------------------------------------------------------


class FrozenMap(Mapping[K, V]):
    """An immutable, hashable, picklable mapping (insertion order kept, equality like ``dict``)."""

    __slots__ = ("_data", "_hash")

    def __init__(self, data: Mapping[K, V] | Iterable[tuple[K, V]] = ()) -> None:
        self._data: dict[K, V] = dict(data)
        self._hash: int | None = None

    def __getitem__(self, key: K) -> V:
        return self._data[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenMap):
            return self._data == other._data
        if isinstance(other, Mapping):
            return self._data == dict(other)
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._data.items()))
        return self._hash

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenMap, (self._data,))


def _tuple_of_str(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _tuple_of_ops(value: Iterable[ConfigOp]) -> tuple[ConfigOp, ...]:
    return tuple(value)


def _tuple_of_rules(value: Iterable[AclRule]) -> tuple[AclRule, ...]:
    return tuple(value)


def _tuple_of_steps(value: Iterable[Step]) -> tuple[Step, ...]:
    return tuple(value)


def _tuple_of_skipped(value: Iterable[Skipped]) -> tuple[Skipped, ...]:
    return tuple(value)


def _frozen_map(value: Mapping[Any, Any] | Iterable[tuple[Any, Any]]) -> FrozenMap[Any, Any]:
    return value if isinstance(value, FrozenMap) else FrozenMap(value)


# -- enums spelled like Kafka's Java names ------------------------------------------------------


class _UpperStrEnum(enum.StrEnum):
    """A ``StrEnum`` whose lookup by value ignores case (``ResourceType("topic")``)."""

    @classmethod
    def _missing_(cls, value: object) -> Any:
        if isinstance(value, str):
            for member in cls:
                if member.value == value.upper():
                    return member
        return None


class ConfigSource(_UpperStrEnum):
    """Where a described config value comes from (Kafka's ``ConfigEntry.ConfigSource``)."""

    UNKNOWN_CONFIG = "UNKNOWN_CONFIG"
    DYNAMIC_TOPIC_CONFIG = "DYNAMIC_TOPIC_CONFIG"
    DYNAMIC_BROKER_LOGGER_CONFIG = "DYNAMIC_BROKER_LOGGER_CONFIG"
    DYNAMIC_BROKER_CONFIG = "DYNAMIC_BROKER_CONFIG"
    DYNAMIC_DEFAULT_BROKER_CONFIG = "DYNAMIC_DEFAULT_BROKER_CONFIG"
    DYNAMIC_CLIENT_METRICS_CONFIG = "DYNAMIC_CLIENT_METRICS_CONFIG"
    DYNAMIC_GROUP_CONFIG = "DYNAMIC_GROUP_CONFIG"
    GROUP_CONFIG = "GROUP_CONFIG"
    STATIC_BROKER_CONFIG = "STATIC_BROKER_CONFIG"
    DEFAULT_CONFIG = "DEFAULT_CONFIG"


class ResourceType(_UpperStrEnum):
    """ACL resource types (Kafka's ``ResourceType``)."""

    UNKNOWN = "UNKNOWN"
    ANY = "ANY"
    TOPIC = "TOPIC"
    GROUP = "GROUP"
    CLUSTER = "CLUSTER"
    TRANSACTIONAL_ID = "TRANSACTIONAL_ID"
    DELEGATION_TOKEN = "DELEGATION_TOKEN"
    USER = "USER"


class PatternType(_UpperStrEnum):
    """ACL resource pattern types (Kafka's ``PatternType``)."""

    UNKNOWN = "UNKNOWN"
    ANY = "ANY"
    MATCH = "MATCH"
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class AclOperation(_UpperStrEnum):
    """ACL operations (Kafka's ``AclOperation``)."""

    UNKNOWN = "UNKNOWN"
    ANY = "ANY"
    ALL = "ALL"
    READ = "READ"
    WRITE = "WRITE"
    CREATE = "CREATE"
    DELETE = "DELETE"
    ALTER = "ALTER"
    DESCRIBE = "DESCRIBE"
    CLUSTER_ACTION = "CLUSTER_ACTION"
    DESCRIBE_CONFIGS = "DESCRIBE_CONFIGS"
    ALTER_CONFIGS = "ALTER_CONFIGS"
    IDEMPOTENT_WRITE = "IDEMPOTENT_WRITE"
    CREATE_TOKENS = "CREATE_TOKENS"
    DESCRIBE_TOKENS = "DESCRIBE_TOKENS"
    TWO_PHASE_COMMIT = "TWO_PHASE_COMMIT"


class AclPermission(_UpperStrEnum):
    """ACL permission types (Kafka's ``AclPermissionType``)."""

    UNKNOWN = "UNKNOWN"
    ANY = "ANY"
    DENY = "DENY"
    ALLOW = "ALLOW"


class SkipReason(enum.StrEnum):
    """Why a source topic or ACL is left out of a plan."""

    #: the topic does not pass the flow's filters (``topics`` / ``topics.exclude``)
    FILTERED = "filtered"
    #: an internal topic (``__…``, ``.…``, MM2's own internal topics), never replicated
    INTERNAL = "internal"
    #: the topic came from the target cluster (replicating it would loop)
    CYCLE = "cycle"
    #: another source topic already maps to the same remote topic name
    CONFLICT = "conflict"
    #: an ACL MM2 never copies: ``ALLOW WRITE`` on the source topic
    EXCLUDED = "excluded"
    #: a ``PREFIXED`` (or other non-``LITERAL``) topic ACL; MM2 syncs literal ones only
    PATTERN = "pattern"
    #: a literal ``*`` topic ACL (MM2 would create a meaningless ``<alias>.*`` literal ACL)
    WILDCARD = "wildcard"


# -- snapshots -----------------------------------------------------------------------------------


@attrs.frozen
class ConfigValue:
    """One described config entry of a topic (Kafka's ``ConfigEntry`` without the name).

    ``is_default`` is Kafka's ``isDefault()`` (the value comes from ``DEFAULT_CONFIG``); a
    topic-level override has ``source == "DYNAMIC_TOPIC_CONFIG"``.
    """

    value: str | None
    is_default: bool = False
    is_sensitive: bool = False
    is_read_only: bool = False
    source: str = attrs.field(default=ConfigSource.UNKNOWN_CONFIG, converter=str)

    @classmethod
    def default(cls, value: str | None) -> Self:
        """A value the topic has because nothing overrides it (``DEFAULT_CONFIG``)."""
        return cls(value, is_default=True, source=ConfigSource.DEFAULT_CONFIG)

    @classmethod
    def override(cls, value: str | None) -> Self:
        """A topic-level override (``DYNAMIC_TOPIC_CONFIG``)."""
        return cls(value, source=ConfigSource.DYNAMIC_TOPIC_CONFIG)

    @property
    def is_topic_override(self) -> bool:
        """Whether an ``incrementalAlterConfigs`` ``DELETE`` on the topic would remove it."""
        return self.source == ConfigSource.DYNAMIC_TOPIC_CONFIG


def _config_values(
    value: Mapping[str, ConfigValue | str | None] | Iterable[tuple[str, ConfigValue | str | None]],
) -> FrozenMap[str, ConfigValue]:
    items = value.items() if isinstance(value, Mapping) else value
    return FrozenMap(
        (k, v if isinstance(v, ConfigValue) else ConfigValue.override(v)) for k, v in items
    )


@attrs.frozen
class TopicSnapshot:
    """A topic as seen on one cluster: its name, partition count and described configs.

    ``configs`` may be empty when they were not described. Plain strings given as config values
    are taken as topic-level overrides.
    """

    name: str
    partitions: int
    configs: FrozenMap[str, ConfigValue] = attrs.field(factory=FrozenMap, converter=_config_values)


@attrs.frozen(order=True)
class AclRule:
    """One ACL binding: a resource pattern and an access control entry (Kafka's ``AclBinding``).

    Enum fields accept their names as strings, in any case.
    """

    resource_type: ResourceType = attrs.field(converter=ResourceType)
    resource_name: str
    pattern_type: PatternType = attrs.field(converter=PatternType)
    principal: str
    host: str
    operation: AclOperation = attrs.field(converter=AclOperation)
    permission: AclPermission = attrs.field(converter=AclPermission)

    @classmethod
    def topic(
        cls,
        name: str,
        principal: str,
        operation: AclOperation | str,
        permission: AclPermission | str = AclPermission.ALLOW,
        *,
        host: str = "*",
        pattern_type: PatternType | str = PatternType.LITERAL,
    ) -> Self:
        """A topic ACL (literal by default)."""
        return cls(
            ResourceType.TOPIC, name, PatternType(pattern_type), principal, host,
            AclOperation(operation), AclPermission(permission),
        )  # fmt: skip

    def __str__(self) -> str:
        return (
            f"{self.permission} {self.operation} on {self.resource_type} "
            f"{self.pattern_type} {self.resource_name!r} for {self.principal} "
            f"from host {self.host}"
        )


# -- plan steps ----------------------------------------------------------------------------------


@attrs.frozen
class CreateTopic:
    """Create the remote topic ``name`` (from ``source_topic``) on the target."""

    name: str
    partitions: int
    replication_factor: int
    configs: FrozenMap[str, str] = attrs.field(factory=FrozenMap, converter=_frozen_map)
    source_topic: str | None = None

    def describe(self) -> list[str]:
        rf = "broker default" if self.replication_factor < 0 else str(self.replication_factor)
        origin = f" from {self.source_topic}" if self.source_topic is not None else ""
        lines = [
            f"create topic {self.name}{origin}: {self.partitions} partition(s), "
            f"replication factor {rf}"
        ]
        lines.extend(f"    {k}={v}" for k, v in sorted(self.configs.items()))
        return lines


@attrs.frozen
class CreatePartitions:
    """Grow the remote topic ``name`` to ``total`` partitions (it has ``current``)."""

    name: str
    total: int
    current: int | None = None
    source_topic: str | None = None

    def describe(self) -> list[str]:
        now = f"{self.current} -> " if self.current is not None else "-> "
        return [f"grow topic {self.name}: {now}{self.total} partitions"]


class ConfigOp(NamedTuple):
    """One incremental config operation: ``(key, "SET" | "DELETE", value)``."""

    key: str
    op: Literal["SET", "DELETE"]
    value: str | None = None

    def describe(self) -> str:
        return f"set {self.key}={self.value}" if self.op == "SET" else f"delete {self.key}"


@attrs.frozen
class AlterTopicConfigs:
    """Incrementally alter the configs of the remote topic ``name``."""

    name: str
    ops: tuple[ConfigOp, ...] = attrs.field(converter=_tuple_of_ops)
    source_topic: str | None = None

    def describe(self) -> list[str]:
        return [f"alter configs of topic {self.name}:", *(f"    {o.describe()}" for o in self.ops)]


@attrs.frozen
class CreateAcls:
    """Create ACL bindings on the target."""

    rules: tuple[AclRule, ...] = attrs.field(converter=_tuple_of_rules)

    def describe(self) -> list[str]:
        return [f"create {len(self.rules)} ACL(s):", *(f"    {r}" for r in self.rules)]


Step = CreateTopic | CreatePartitions | AlterTopicConfigs | CreateAcls


@attrs.frozen
class SkippedTopic:
    """A source topic left out of the plan, and why."""

    name: str
    reason: SkipReason = attrs.field(converter=SkipReason)

    def describe(self) -> str:
        return f"skip topic {self.name} ({self.reason})"


@attrs.frozen
class SkippedAcl:
    """A source topic ACL left out of the plan, and why."""

    rule: AclRule
    reason: SkipReason = attrs.field(converter=SkipReason)

    def describe(self) -> str:
        return f"skip ACL {self.rule} ({self.reason})"


Skipped = SkippedTopic | SkippedAcl


# -- plans ---------------------------------------------------------------------------------------


@attrs.frozen
class Plan:
    """What to do on the target cluster: ``steps`` in order, and what was left out and why.

    A plan is empty (:attr:`is_empty`) when it has no steps; ``skipped`` notes do not count.
    Plans add up with ``+`` (steps and notes concatenated).
    """

    steps: tuple[Step, ...] = attrs.field(default=(), converter=_tuple_of_steps)
    skipped: tuple[Skipped, ...] = attrs.field(default=(), converter=_tuple_of_skipped)

    @property
    def is_empty(self) -> bool:
        return not self.steps

    def __add__(self, other: Plan) -> Plan:
        if not isinstance(other, Plan):
            return NotImplemented
        return Plan(self.steps + other.steps, self.skipped + other.skipped)

    def describe(self, *, skipped: bool = True) -> str:
        """A human-readable, multi-line description (what ``mirrorlib plan`` prints)."""
        lines: list[str] = []
        for step in self.steps:
            lines.extend(step.describe())
        if not lines:
            lines.append("nothing to do")
        if skipped:
            lines.extend(s.describe() for s in self.skipped)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe()

    def _of(self, kind: type[_S]) -> tuple[_S, ...]:
        return tuple(s for s in self.steps if isinstance(s, kind))


_S = TypeVar("_S", CreateTopic, CreatePartitions, AlterTopicConfigs, CreateAcls)


@attrs.frozen
class TopicPlan(Plan):
    """Topics to create and partitions to grow (see :func:`plan_topics`)."""

    @property
    def creates(self) -> tuple[CreateTopic, ...]:
        return self._of(CreateTopic)

    @property
    def grows(self) -> tuple[CreatePartitions, ...]:
        return self._of(CreatePartitions)

    @property
    def skipped_topics(self) -> tuple[SkippedTopic, ...]:
        return tuple(s for s in self.skipped if isinstance(s, SkippedTopic))


@attrs.frozen
class ConfigPlan(Plan):
    """Incremental config changes of remote topics (see :func:`plan_topic_configs`)."""

    @property
    def alters(self) -> tuple[AlterTopicConfigs, ...]:
        return self._of(AlterTopicConfigs)


@attrs.frozen
class AclPlan(Plan):
    """ACLs to create (see :func:`plan_acls`)."""

    @property
    def rules(self) -> tuple[AclRule, ...]:
        return tuple(r for s in self._of(CreateAcls) for r in s.rules)

    @property
    def skipped_acls(self) -> tuple[SkippedAcl, ...]:
        return tuple(s for s in self.skipped if isinstance(s, SkippedAcl))


# -- config property filter ----------------------------------------------------------------------

#: ``config.properties.exclude``'s default in MM2 4.3 (``DefaultConfigPropertyFilter``); regexes.
CONFIG_PROPERTIES_EXCLUDE_DEFAULT: Final[tuple[str, ...]] = (
    "follower.replication.throttled.replicas",
    "leader.replication.throttled.replicas",
    "message.timestamp.difference.max.ms",
    "log.message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms",
    "message.timestamp.type",
    "unclean.leader.election.enable",
    "min.insync.replicas",
)


def _compile_exclude(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    # MirrorUtils.compilePatternList: the regexes joined with "|"; an empty list matches nothing.
    return re.compile("|".join(patterns)) if patterns else None


@attrs.frozen
class DefaultConfigPropertyFilter:
    """MM2's ``DefaultConfigPropertyFilter``: call it with a config name → replicate it?

    ``exclude`` holds regexes (full match, like Java's ``matches()``), default
    :data:`CONFIG_PROPERTIES_EXCLUDE_DEFAULT`. ``use_defaults_from`` is carried along for
    callers that pass it on to :func:`plan_topics` / :func:`plan_topic_configs`.
    """

    exclude: tuple[str, ...] = attrs.field(
        default=CONFIG_PROPERTIES_EXCLUDE_DEFAULT, converter=_tuple_of_str
    )
    use_defaults_from: UseDefaultsFrom = "target"
    _pattern: re.Pattern[str] | None = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if self.use_defaults_from not in ("target", "source"):
            raise ValueError(
                f"use.defaults.from must be 'target' or 'source', not {self.use_defaults_from!r}"
            )
        object.__setattr__(self, "_pattern", _compile_exclude(self.exclude))

    @classmethod
    def from_list(cls, text: str, use_defaults_from: UseDefaultsFrom = "target") -> Self:
        """From a ``config.properties.exclude`` value (comma-separated, blanks trimmed)."""
        text = text.strip()
        items = tuple(re.split(r"\s*,\s*", text)) if text else ()
        return cls(items, use_defaults_from)

    def __call__(self, prop: str) -> bool:
        return self.should_replicate_config_property(prop)

    def should_replicate_config_property(self, prop: str) -> bool:
        return self._pattern is None or self._pattern.fullmatch(prop) is None

    def should_replicate_source_default(self, prop: str) -> bool:
        del prop
        return self.use_defaults_from == "source"


# -- helpers (MM2's small predicates) ------------------------------------------------------------


def is_cycle(policy: ReplicationPolicy, topic: str, target_alias: str) -> bool:
    """MM2's ``isCycle``: did ``topic`` (transitively) come from ``target_alias``?"""
    seen: set[str] = set()
    while topic not in seen:
        seen.add(topic)
        source = policy.topic_source(topic)
        if source is None:
            return False
        if source == target_alias:
            return True
        upstream = policy.upstream_topic(topic)
        if upstream is None or upstream == topic:
            return False
        topic = upstream
    return False


def _source_default_predicate(use_defaults_from: DefaultsFrom) -> Callable[[str], bool]:
    if callable(use_defaults_from):
        return use_defaults_from
    if use_defaults_from not in ("target", "source"):
        raise ValueError(
            f"use.defaults.from must be 'target' or 'source', not {use_defaults_from!r}"
        )
    copy = use_defaults_from == "source"
    return lambda prop: copy


def target_config(
    source_configs: Mapping[str, ConfigValue],
    *,
    config_filter: Callable[[str], bool],
    use_defaults_from: DefaultsFrom = "target",
    incremental: bool = False,
) -> dict[str, ConfigValue]:
    """MM2's ``targetConfig``: the source entries worth carrying to the target.

    Entries that are read-only, sensitive, ``STATIC_BROKER_CONFIG`` or rejected by
    ``config_filter`` are dropped. Default entries are kept when ``incremental`` (they become
    ``DELETE`` or ``SET`` ops) or when ``use_defaults_from == "source"``.
    """
    source_default = _source_default_predicate(use_defaults_from)
    return {
        name: entry
        for name, entry in source_configs.items()
        if (incremental or not entry.is_default or source_default(name))
        and not entry.is_read_only
        and not entry.is_sensitive
        and entry.source != ConfigSource.STATIC_BROKER_CONFIG
        and config_filter(name)
    }


def should_replicate_acl(rule: AclRule) -> bool:
    """MM2's ``shouldReplicateAcl``: everything but ``ALLOW WRITE``."""
    return not (rule.permission == AclPermission.ALLOW and rule.operation == AclOperation.WRITE)


def target_acl_rule(rule: AclRule, *, source_alias: str, policy: ReplicationPolicy) -> AclRule:
    """MM2's ``targetAclBinding``: a literal topic ACL on the remote topic; ALLOW ALL → READ."""
    operation = rule.operation
    if rule.permission == AclPermission.ALLOW and operation == AclOperation.ALL:
        operation = AclOperation.READ
    return attrs.evolve(
        rule,
        resource_type=ResourceType.TOPIC,
        resource_name=policy.format_remote_topic(source_alias, rule.resource_name),
        pattern_type=PatternType.LITERAL,
        operation=operation,
    )


def _skip_reason(policy: ReplicationPolicy, topic: str, target_alias: str | None) -> SkipReason:
    if policy.is_internal_topic(topic):
        return SkipReason.INTERNAL
    if target_alias is not None and is_cycle(policy, topic, target_alias):
        return SkipReason.CYCLE
    return SkipReason.FILTERED


@overload
def _by_name(
    topics: Mapping[str, int] | Iterable[TopicSnapshot] | Mapping[str, TopicSnapshot],
    ints: Literal[True],
) -> dict[str, int]: ...
@overload
def _by_name(
    topics: Iterable[TopicSnapshot] | Mapping[str, TopicSnapshot], ints: Literal[False]
) -> dict[str, TopicSnapshot]: ...
def _by_name(topics: Any, ints: bool) -> Any:  # fmt: skip
    values: Iterable[Any] = topics.values() if isinstance(topics, Mapping) else topics
    if ints:
        if isinstance(topics, Mapping):
            return {
                name: v.partitions if isinstance(v, TopicSnapshot) else int(v)
                for name, v in topics.items()
            }
        return {t.name: t.partitions for t in values}
    return {t.name: t for t in values}


def _remote_names(
    sources: Sequence[str],
    *,
    source_alias: str,
    policy: ReplicationPolicy,
    should_replicate: Callable[[str], bool],
    target_alias: str | None,
) -> tuple[dict[str, str], list[SkippedTopic]]:
    """Replicated source topic → remote name (sorted), and the skipped ones."""
    remote: dict[str, str] = {}
    claimed: set[str] = set()
    skipped: list[SkippedTopic] = []
    for topic in sources:
        if not should_replicate(topic):
            skipped.append(SkippedTopic(topic, _skip_reason(policy, topic, target_alias)))
            continue
        name = policy.format_remote_topic(source_alias, topic)
        if name in claimed:
            skipped.append(SkippedTopic(topic, SkipReason.CONFLICT))
            continue
        claimed.add(name)
        remote[topic] = name
    return remote, skipped


# -- the planners --------------------------------------------------------------------------------


def plan_topics(
    source_topics: Iterable[TopicSnapshot] | Mapping[str, TopicSnapshot],
    target_topics: Iterable[TopicSnapshot] | Mapping[str, TopicSnapshot] | Mapping[str, int],
    *,
    source_alias: str,
    policy: ReplicationPolicy,
    should_replicate: Callable[[str], bool],
    replication_factor: int = 2,
    config_filter: Callable[[str], bool] = DefaultConfigPropertyFilter(),
    use_defaults_from: DefaultsFrom = "target",
    target_alias: str | None = None,
) -> TopicPlan:
    """Remote topics to create and partitions to grow on the target (MM2's
    ``computeAndCreateTopicPartitions``).

    ``source_topics`` need their configs (only those of topics to create are read);
    ``target_topics`` only their partition counts (snapshots or ``{name: partitions}``).
    ``replication_factor`` ``-1`` means the target broker's default. ``target_alias`` only
    refines skip reasons (``cycle`` rather than ``filtered``). Steps are sorted by source topic:
    all creations first, then partition growths.
    """
    sources = _by_name(source_topics, False)
    targets = _by_name(target_topics, True)
    remote, skipped = _remote_names(
        sorted(sources), source_alias=source_alias, policy=policy,
        should_replicate=should_replicate, target_alias=target_alias,
    )  # fmt: skip
    creates: list[Step] = []
    grows: list[Step] = []
    for topic, name in remote.items():
        snapshot = sources[topic]
        have = targets.get(name)
        if have is None:
            configs = target_config(
                snapshot.configs, config_filter=config_filter,
                use_defaults_from=use_defaults_from, incremental=False,
            )  # fmt: skip
            creates.append(
                CreateTopic(
                    name,
                    snapshot.partitions,
                    replication_factor,
                    {k: v.value for k, v in configs.items() if v.value is not None},
                    source_topic=topic,
                )
            )
        elif snapshot.partitions > have:
            grows.append(CreatePartitions(name, snapshot.partitions, have, source_topic=topic))
    return TopicPlan(creates + grows, skipped)


def plan_topic_configs(
    source_topics: Iterable[TopicSnapshot] | Mapping[str, TopicSnapshot],
    target_topics: Iterable[TopicSnapshot] | Mapping[str, TopicSnapshot],
    *,
    source_alias: str,
    policy: ReplicationPolicy,
    should_replicate: Callable[[str], bool],
    config_filter: Callable[[str], bool] = DefaultConfigPropertyFilter(),
    use_defaults_from: DefaultsFrom = "target",
    skip_unchanged: bool = True,
    target_alias: str | None = None,
) -> ConfigPlan:
    """Incremental config changes for remote topics already on the target (MM2's
    ``syncTopicConfigs``).

    For every source entry passing :func:`target_config` (``incremental=True``): a default
    entry whose source default is not copied (``use_defaults_from="target"``, or a predicate
    answering ``False`` — see :data:`DefaultsFrom`) becomes ``DELETE`` (the target's own default
    applies), anything else ``SET`` to the source value. With ``skip_unchanged`` (default; MM2
    always sends everything) an op is left out when the target snapshot shows it would change
    nothing: a ``SET`` to the value the target already has, or a ``DELETE`` of an entry that is
    not a topic-level override there. A target snapshot without configs disables that check for
    its topic. Topics to be created are not covered (creation carries their configs).
    """
    source_default = _source_default_predicate(use_defaults_from)
    sources = _by_name(source_topics, False)
    targets = _by_name(target_topics, False)
    remote, skipped = _remote_names(
        sorted(sources), source_alias=source_alias, policy=policy,
        should_replicate=should_replicate, target_alias=target_alias,
    )  # fmt: skip
    steps: list[Step] = []
    for topic, name in remote.items():
        target = targets.get(name)
        if target is None:
            continue
        entries = target_config(
            sources[topic].configs, config_filter=config_filter,
            use_defaults_from=use_defaults_from, incremental=True,
        )  # fmt: skip
        check = skip_unchanged and bool(target.configs)
        ops: list[ConfigOp] = []
        for key in sorted(entries):
            entry = entries[key]
            have = target.configs.get(key)
            if entry.is_default and not source_default(key):
                if check and (have is None or not have.is_topic_override):
                    continue
                ops.append(ConfigOp(key, "DELETE"))
            else:
                if entry.value is None:
                    continue  # a null value cannot be SET
                if check and have is not None and have.value == entry.value:
                    continue
                ops.append(ConfigOp(key, "SET", entry.value))
        if ops:
            steps.append(AlterTopicConfigs(name, ops, source_topic=topic))
    return ConfigPlan(steps, skipped)


def plan_acls(
    source_acls: Iterable[AclRule] | None,
    target_acls: Iterable[AclRule] | None,
    *,
    source_alias: str,
    policy: ReplicationPolicy,
    should_replicate: Callable[[str], bool],
    target_alias: str | None = None,
) -> AclPlan:
    """Topic ACLs to create on the target (MM2's ``syncTopicAcls``).

    ``source_acls`` ``None`` (no authorizer on the source) gives an empty plan. Only ``TOPIC``
    ``LITERAL`` bindings of replicated topics are considered; ``ALLOW WRITE`` is dropped,
    ``ALLOW ALL`` becomes ``ALLOW READ``, the rest is copied onto the remote topic name. Rules
    already on the target are left out; nothing is ever deleted. Non-topic ACLs are ignored
    silently; left-out topic ACLs are reported in ``skipped``.
    """
    if source_acls is None:
        return AclPlan()
    present = set(target_acls or ())
    rules: list[AclRule] = []
    seen: set[AclRule] = set()
    skipped: list[Skipped] = []
    for rule in sorted(set(source_acls)):
        if rule.resource_type != ResourceType.TOPIC:
            continue
        if rule.pattern_type != PatternType.LITERAL:
            skipped.append(SkippedAcl(rule, SkipReason.PATTERN))
        elif not should_replicate_acl(rule):
            skipped.append(SkippedAcl(rule, SkipReason.EXCLUDED))
        elif rule.resource_name == "*":
            skipped.append(SkippedAcl(rule, SkipReason.WILDCARD))
        elif not should_replicate(rule.resource_name):
            reason = _skip_reason(policy, rule.resource_name, target_alias)
            skipped.append(SkippedAcl(rule, reason))
        else:
            mapped = target_acl_rule(rule, source_alias=source_alias, policy=policy)
            if mapped not in present and mapped not in seen:
                seen.add(mapped)
                rules.append(mapped)
    return AclPlan((CreateAcls(rules),) if rules else (), skipped)
