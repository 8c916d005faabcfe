"""Converters between confluent-kafka's admin objects and mirrorlib's pure values.

What a cluster says (described config entries, ACL bindings) becomes the values of
:mod:`mirrorlib.core.plans` (:class:`~mirrorlib.core.plans.TopicConfigEntry`,
:class:`~mirrorlib.core.plans.AclRule`), and rules to create become ``AclBinding``\\ s again. No
request is made here: :class:`~mirrorlib.kafka.admin.ClusterAdmin` makes them and converts with
these.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from confluent_kafka.admin import AclBinding  # type: ignore[attr-defined]  # implicit re-exports
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclOperation as CkAclOperation,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclPermissionType as CkAclPermissionType,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    ConfigSource as CkConfigSource,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    ResourcePatternType as CkPatternType,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    ResourceType as CkResourceType,
)

from mirrorlib.core.plans import (
    AclOperation,
    AclPermission,
    AclRule,
    FrozenMap,
    PatternType,
    ResourceType,
    TopicConfigEntry,
)

__all__ = [
    "CONVERTED_ENTRIES_KEPT",
    "EntryConverter",
    "enum_name",
    "from_acl_binding",
    "from_config_entry",
    "to_acl_binding",
]

# librdkafka calls the cluster ACL resource BROKER; Kafka's Java name is CLUSTER.
_CK_RESOURCE_NAMES: Final = {"BROKER": "CLUSTER"}
_RESOURCE_CK_NAMES: Final = {"CLUSTER": "BROKER"}


def _config_source_name(source: Any) -> str:
    # confluent-kafka reports the source as a plain int (librdkafka's enum), or an enum
    name = getattr(source, "name", None)
    if name is None:
        try:
            name = CkConfigSource(int(source)).name
        except (TypeError, ValueError):
            name = "UNKNOWN_CONFIG"
    return str(name)


def from_config_entry(entry: Any) -> TopicConfigEntry:
    """A :class:`~mirrorlib.core.plans.TopicConfigEntry` from a confluent-kafka ``ConfigEntry``."""
    source = _config_source_name(entry.source)
    return TopicConfigEntry(
        entry.value,
        is_default=bool(entry.is_default),
        is_sensitive=bool(entry.is_sensitive),
        is_read_only=bool(entry.is_read_only),
        source=source,
    )


#: Most distinct converted config entries an :class:`EntryConverter` remembers.
CONVERTED_ENTRIES_KEPT: Final = 200_000


class EntryConverter:
    """:func:`from_config_entry` remembering what it converted: entries with the same value
    and flags give the same (frozen, shared) :class:`~mirrorlib.core.plans.TopicConfigEntry`.

    Describing 100,000 topics yields millions of entries but few distinct ones (most are
    defaults); sharing them makes a describe cheap and equal configs compare by identity.
    At most ``kept`` distinct entries are remembered (forgotten all at once past that)."""

    __slots__ = ("_kept", "_known")

    def __init__(self, kept: int = CONVERTED_ENTRIES_KEPT) -> None:
        self._kept = kept
        self._known: dict[tuple[Any, ...], TopicConfigEntry] = {}

    def __call__(self, entry: Any) -> TopicConfigEntry:
        raw = (entry.value, entry.is_default, entry.is_sensitive, entry.is_read_only, entry.source)
        try:
            converted = self._known.get(raw)
        except TypeError:  # an unhashable field: convert without remembering
            return from_config_entry(entry)
        if converted is None:
            if len(self._known) >= self._kept:
                self._known.clear()
            converted = self._known[raw] = from_config_entry(entry)
        return converted

    def entries(
        self,
        described: Mapping[str, Any],
        wanted: frozenset[str] | None = None,
        previous: Mapping[str, TopicConfigEntry] | None = None,
    ) -> Mapping[str, TopicConfigEntry]:
        """Config name → converted entry of one described topic (only ``wanted`` names):
        ``previous`` itself when it holds the same entries (nothing new is made)."""
        if previous is not None and self._same(described, wanted, previous):
            return previous
        return FrozenMap(
            (key, self(e)) for key, e in described.items() if wanted is None or key in wanted
        )

    def _same(
        self,
        described: Mapping[str, Any],
        wanted: frozenset[str] | None,
        previous: Mapping[str, TopicConfigEntry],
    ) -> bool:
        known = self._known
        count = 0
        for key, e in described.items():
            if wanted is not None and key not in wanted:
                continue
            try:
                converted = known.get(
                    (e.value, e.is_default, e.is_sensitive, e.is_read_only, e.source)
                )
            except TypeError:
                return False
            if converted is None or previous.get(key) is not converted:
                return False
            count += 1
        return count == len(previous)


def enum_name(value: Any) -> str:
    """The name of a confluent-kafka enum member (or of an int librdkafka gave instead)."""
    return str(getattr(value, "name", value))


def from_acl_binding(binding: Any) -> AclRule:
    """An :class:`~mirrorlib.core.plans.AclRule` from a ``confluent_kafka.admin.AclBinding``."""
    restype = enum_name(binding.restype)
    restype = _CK_RESOURCE_NAMES.get(restype, restype)

    def known(enum: Any, name: str) -> Any:
        try:
            return enum(name)
        except ValueError:
            return enum("UNKNOWN")

    return AclRule(
        known(ResourceType, restype),
        binding.name,
        known(PatternType, enum_name(binding.resource_pattern_type)),
        binding.principal,
        binding.host,
        known(AclOperation, enum_name(binding.operation)),
        known(AclPermission, enum_name(binding.permission_type)),
    )


def to_acl_binding(rule: AclRule) -> Any:
    """A ``confluent_kafka.admin.AclBinding`` for an :class:`~mirrorlib.core.plans.AclRule`."""
    restype = _RESOURCE_CK_NAMES.get(rule.resource_type.value, rule.resource_type.value)
    return AclBinding(
        CkResourceType[restype],
        rule.resource_name,
        CkPatternType[rule.pattern_type.value],
        rule.principal,
        rule.host,
        CkAclOperation[rule.operation.value],
        CkAclPermissionType[rule.permission.value],
    )
