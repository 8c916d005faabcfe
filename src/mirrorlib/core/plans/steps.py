"""What to do on the target cluster: plan steps, notes on what was left out, and plans.

A :class:`Plan` is an ordered tuple of steps (:class:`CreateTopic`, :class:`CreatePartitions`,
:class:`AlterTopicConfigs`, :class:`CreateAcls`) plus :class:`SkippedTopic` / :class:`SkippedAcl`
notes; plans add up with ``+`` and print with :meth:`Plan.describe`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any, Literal, NamedTuple, TypeVar

import attrs

from mirrorlib.core.plans.snapshots import AclRule, FrozenMap

__all__ = [
    "AclPlan",
    "AlterTopicConfigs",
    "ConfigOp",
    "ConfigPlan",
    "CreateAcls",
    "CreatePartitions",
    "CreateTopic",
    "Plan",
    "SkipReason",
    "Skipped",
    "SkippedAcl",
    "SkippedTopic",
    "Step",
    "TopicPlan",
]


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
    #: the remote topic's replication factor is above the target's live broker count
    REPLICATION_FACTOR = "replication factor"


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
    detail: str = ""

    def describe(self) -> str:
        detail = f": {self.detail}" if self.detail else ""
        return f"skip topic {self.name} ({self.reason}){detail}"


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
