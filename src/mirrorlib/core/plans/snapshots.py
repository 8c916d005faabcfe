"""What a cluster looks like, as plain values: topics with their described configs, and ACLs.

Spelled like Kafka's Java admin API (:class:`ConfigSource`, :class:`ResourceType`, …), so that
:mod:`mirrorlib.kafka.admin` converts confluent-kafka's objects one to one.
"""

from __future__ import annotations

import enum
from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from typing import Any, Self, TypeVar, overload

import attrs

__all__ = [
    "AclOperation",
    "AclPermission",
    "AclRule",
    "ConfigSource",
    "FrozenMap",
    "PatternType",
    "ResourceType",
    "TopicConfigEntry",
    "TopicSnapshot",
]

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")


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

    def __contains__(self, key: object) -> bool:
        return key in self._data

    @overload
    def get(self, key: K, /) -> V | None: ...
    @overload
    def get(self, key: K, /, default: V | T) -> V | T: ...
    def get(self, key: K, /, default: V | T | None = None) -> V | T | None:
        return self._data.get(key, default)

    def keys(self) -> KeysView[K]:
        return self._data.keys()

    def values(self) -> ValuesView[V]:
        return self._data.values()

    def items(self) -> ItemsView[K, V]:
        return self._data.items()

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


# -- snapshots -----------------------------------------------------------------------------------


@attrs.frozen
class TopicConfigEntry:
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
    value: Mapping[str, TopicConfigEntry | str | None]
    | Iterable[tuple[str, TopicConfigEntry | str | None]],
) -> FrozenMap[str, TopicConfigEntry]:
    if isinstance(value, FrozenMap) and all(
        e.__class__ is TopicConfigEntry for e in value.values()
    ):  # already what it becomes (e.g. described configs shared between cycles)
        return value
    items = value.items() if isinstance(value, Mapping) else value
    return FrozenMap(
        (k, v if isinstance(v, TopicConfigEntry) else TopicConfigEntry.override(v))
        for k, v in items
    )


@attrs.frozen
class TopicSnapshot:
    """A topic as seen on one cluster: its name, partition count and described configs.

    ``configs`` may be empty when they were not described. Plain strings given as config values
    are taken as topic-level overrides.
    """

    name: str
    partitions: int
    configs: FrozenMap[str, TopicConfigEntry] = attrs.field(
        factory=FrozenMap, converter=_config_values
    )


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
