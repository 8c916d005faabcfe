"""Replication policies: how remote topics are named, and which topics are internal.

A :class:`ReplicationPolicy` answers three questions, and everything else is derived from them with
MirrorMaker 2's semantics:

* :meth:`~ReplicationPolicy.format_remote_topic` — what topic ``t`` from cluster ``A`` is called on
  the target (``A.t`` with the default policy);
* :meth:`~ReplicationPolicy.topic_source` — which cluster a remote topic came from (``None`` for a
  topic that is not remote);
* :meth:`~ReplicationPolicy.upstream_topic` — the topic's name one hop upstream.

The derived methods (:meth:`~ReplicationPolicy.original_topic`, internal topic names and
predicates) follow MM2 4.3's ``ReplicationPolicy`` interface defaults and may be overridden.

Policies are loaded from ``replication.policy.class`` by :func:`load_policy`, which accepts a Python
path (``pkg.module:Class`` or ``pkg.module.Class``) or MM2's Java class name of the two built-ins.
A policy class is built by its :meth:`~ReplicationPolicy.from_config` classmethod, which receives
the flow's configuration (MM2 calls ``Configurable.configure`` with the same keys); the default
builds it with no arguments. Policies must be picklable so that they can travel to Spark executors.
"""

from __future__ import annotations

import abc
import importlib
from collections.abc import Mapping
from typing import Any, Final, Self

from mirrorlib.errors import ConfigError

__all__ = [
    "DefaultReplicationPolicy",
    "IdentityReplicationPolicy",
    "ReplicationPolicy",
    "is_cycle",
    "java_split",
    "load_policy",
]

SEPARATOR_CONFIG: Final = "replication.policy.separator"
INTERNAL_TOPIC_SEPARATOR_ENABLED_CONFIG: Final = (
    "replication.policy.internal.topic.separator.enabled"
)
SOURCE_CLUSTER_ALIAS_CONFIG: Final = "source.cluster.alias"
POLICY_CLASS_CONFIG: Final = "replication.policy.class"

_JAVA_DEFAULT: Final = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
_JAVA_IDENTITY: Final = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"


def java_split(text: str, separator: str) -> list[str]:
    """``text.split(Pattern.quote(separator))`` with Java's semantics.

    Java drops trailing empty strings (``"topic."`` → ``["topic"]``, ``"..."`` → ``[]``), keeps a
    leading one (``".x"`` → ``["", "x"]``) and returns ``[text]`` when the separator is absent.
    """
    if not separator:
        raise ValueError("separator must not be empty")
    parts = text.split(separator)
    if len(parts) == 1:
        return parts  # no match: Java returns the input itself, even when it is ""
    while parts and parts[-1] == "":
        parts.pop()
    return parts


class ReplicationPolicy(abc.ABC):
    """Names remote topics and recognises internal topics. Subclass it and define three methods."""

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> Self:
        """Build the policy from a flow's configuration (keys as in MM2's properties).

        Override this to read your own keys; the default calls the class with no arguments.
        """
        del config
        return cls()

    # -- the three questions ---------------------------------------------------------------------

    @abc.abstractmethod
    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        """The name on the target of ``topic`` replicated from ``source_cluster_alias``."""

    @abc.abstractmethod
    def topic_source(self, topic: str) -> str | None:
        """The alias of the cluster ``topic`` was replicated from, or ``None`` if not remote."""

    @abc.abstractmethod
    def upstream_topic(self, topic: str) -> str | None:
        """The name of ``topic`` one hop upstream, or ``None`` if it is not a remote topic."""

    # -- derived, with MM2's interface defaults ---------------------------------------------------

    def original_topic(self, topic: str) -> str:
        """The topic's name on the cluster it was first produced to (``A.B.t`` → ``t``)."""
        seen = {topic}
        current = topic
        while True:
            upstream = self.upstream_topic(current)
            if upstream is None or upstream == current or upstream in seen:
                return current
            seen.add(upstream)
            current = upstream

    def heartbeats_topic(self) -> str:
        """The heartbeats topic: ``heartbeats``."""
        return "heartbeats"

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        """The offset-syncs topic for ``cluster_alias``: ``mm2-offset-syncs.<alias>.internal``."""
        return f"mm2-offset-syncs.{cluster_alias}.internal"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        """The checkpoints topic for source ``cluster_alias``: ``<alias>.checkpoints.internal``."""
        return f"{cluster_alias}.checkpoints.internal"

    def is_heartbeats_topic(self, topic: str) -> bool:
        """True for ``heartbeats`` and its remote copies (``A.heartbeats``, ``B.A.heartbeats``)."""
        return self.heartbeats_topic() == self.original_topic(topic)

    def is_checkpoints_topic(self, topic: str) -> bool:
        return topic.endswith(".checkpoints.internal")

    def is_mm2_internal_topic(self, topic: str) -> bool:
        """MM2's own topics: ``mm2…<sep>internal`` (offset syncs, Connect stores), checkpoints."""
        return (
            topic.startswith("mm2") and topic.endswith(".internal")
        ) or self.is_checkpoints_topic(topic)

    def is_internal_topic(self, topic: str) -> bool:
        """Topics that are never replicated: MM2's own, and Kafka's (``__…`` or ``.…``)."""
        return self.is_mm2_internal_topic(topic) or topic.startswith("__") or topic.startswith(".")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class DefaultReplicationPolicy(ReplicationPolicy):
    """MM2's default: topic ``t`` from cluster ``A`` becomes ``A<separator>t``.

    With ``internal_topic_separator_enabled`` (the default) the separator is also used in internal
    topic names (``mm2-offset-syncs__B__internal`` for separator ``__``); when false they keep
    dots, which is how MM2 before 3.1 named them (KIP-949).
    """

    def __init__(self, separator: str = ".", internal_topic_separator_enabled: bool = True) -> None:
        if not isinstance(separator, str) or not separator:
            raise ConfigError(
                f"{SEPARATOR_CONFIG} must be a non-empty string, got {separator!r}",
                key=SEPARATOR_CONFIG,
                value=str(separator),
            )
        self._separator = separator
        self._internal_topic_separator_enabled = bool(internal_topic_separator_enabled)

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> Self:
        # As in MM2, the internal-separator flag is read only when a separator is configured.
        if SEPARATOR_CONFIG not in config:
            return cls()
        separator = config[SEPARATOR_CONFIG]
        flag = config.get(INTERNAL_TOPIC_SEPARATOR_ENABLED_CONFIG)
        enabled = True if flag is None else flag.strip().lower() == "true"
        return cls(separator, enabled)

    @property
    def separator(self) -> str:
        return self._separator

    @property
    def internal_topic_separator_enabled(self) -> bool:
        return self._internal_topic_separator_enabled

    def _internal_separator(self) -> str:
        return self._separator if self._internal_topic_separator_enabled else "."

    def _internal_suffix(self) -> str:
        return self._internal_separator() + "internal"

    def _checkpoints_suffix(self) -> str:
        return self._internal_separator() + "checkpoints" + self._internal_suffix()

    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        return source_cluster_alias + self._separator + topic

    def topic_source(self, topic: str) -> str | None:
        parts = java_split(topic, self._separator)
        return parts[0] if len(parts) >= 2 else None

    def upstream_topic(self, topic: str) -> str | None:
        source = self.topic_source(topic)
        if source is None:
            return None
        return topic[len(source) + len(self._separator) :]

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        return (
            "mm2-offset-syncs"
            + self._internal_separator()
            + cluster_alias
            + self._internal_suffix()
        )

    def checkpoints_topic(self, cluster_alias: str) -> str:
        return cluster_alias + self._checkpoints_suffix()

    def is_checkpoints_topic(self, topic: str) -> bool:
        return topic.endswith(self._checkpoints_suffix())

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return (
            topic.startswith("mm2") and topic.endswith(self._internal_suffix())
        ) or self.is_checkpoints_topic(topic)

    def _key(self) -> tuple[Any, ...]:
        return (type(self), self._separator, self._internal_topic_separator_enabled)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DefaultReplicationPolicy):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(separator={self._separator!r}, "
            f"internal_topic_separator_enabled={self._internal_topic_separator_enabled})"
        )


class IdentityReplicationPolicy(DefaultReplicationPolicy):
    """Keeps topic names unchanged on the target (``t`` stays ``t``), as MM2's identity policy.

    Heartbeat topics (any name ending in ``heartbeats``) are still prefixed (``A.heartbeats``) so
    that replication paths stay traceable. Because names carry no origin, ``topic_source`` answers
    ``source_cluster_alias`` (when configured) for every other topic, and — as in MM2 — cycles
    cannot be detected: do not use it for active/active replication of the same topics.
    """

    def __init__(
        self,
        source_cluster_alias: str | None = None,
        separator: str = ".",
        internal_topic_separator_enabled: bool = True,
    ) -> None:
        super().__init__(separator, internal_topic_separator_enabled)
        self._source_cluster_alias = source_cluster_alias

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> Self:
        base = DefaultReplicationPolicy.from_config(config)
        return cls(
            config.get(SOURCE_CLUSTER_ALIAS_CONFIG),
            base.separator,
            base.internal_topic_separator_enabled,
        )

    @property
    def source_cluster_alias(self) -> str | None:
        return self._source_cluster_alias

    def _looks_like_heartbeat(self, topic: str) -> bool:
        return topic.endswith(self.heartbeats_topic())

    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        if self._looks_like_heartbeat(topic):
            return super().format_remote_topic(source_cluster_alias, topic)
        return topic

    def topic_source(self, topic: str) -> str | None:
        if self._looks_like_heartbeat(topic):
            return super().topic_source(topic)
        return self._source_cluster_alias

    def upstream_topic(self, topic: str) -> str | None:
        if self._looks_like_heartbeat(topic):
            return super().upstream_topic(topic)
        return topic

    def _key(self) -> tuple[Any, ...]:
        return (*super()._key(), self._source_cluster_alias)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(source_cluster_alias={self._source_cluster_alias!r}, "
            f"separator={self.separator!r}, "
            f"internal_topic_separator_enabled={self.internal_topic_separator_enabled})"
        )


def is_cycle(policy: ReplicationPolicy, topic: str, target_alias: str) -> bool:
    """MM2's ``MirrorSourceConnector.isCycle``: whether ``topic`` came (possibly over several
    hops) from the cluster ``target_alias``, so that replicating it there would send it home.

    Follows :meth:`~ReplicationPolicy.topic_source` and :meth:`~ReplicationPolicy.upstream_topic`
    hop by hop like MM2's recursion: a topic without a source is no cycle, one whose source is
    ``target_alias`` is; an upstream topic that is ``None`` or the topic itself (the identity
    policy) ends the search. Unlike MM2, a custom policy whose upstream topics loop ends the search
    too, instead of recursing forever.
    """
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


_JAVA_BUILTINS: Final[Mapping[str, type[ReplicationPolicy]]] = {
    _JAVA_DEFAULT: DefaultReplicationPolicy,
    _JAVA_IDENTITY: IdentityReplicationPolicy,
    "DefaultReplicationPolicy": DefaultReplicationPolicy,
    "IdentityReplicationPolicy": IdentityReplicationPolicy,
}


def resolve_policy_class(name: str, *, key: str = POLICY_CLASS_CONFIG) -> type[ReplicationPolicy]:
    """The policy class named by ``name``: MM2's Java name of a built-in, or a Python path.

    Raises :class:`~mirrorlib.errors.ConfigError` naming ``key`` when it cannot be imported or is
    not a :class:`ReplicationPolicy` subclass.
    """
    name = name.strip()
    if name in _JAVA_BUILTINS:
        return _JAVA_BUILTINS[name]
    if name.startswith("org.apache.kafka.") or ("." not in name and ":" not in name):
        raise ConfigError(
            f"{key}={name!r} is not a policy mirrorlib can load: use a Python path "
            f"('pkg.module:Class' or 'pkg.module.Class') or one of MM2's built-ins "
            f"({_JAVA_DEFAULT}, {_JAVA_IDENTITY}). A custom Java policy must be ported to a "
            f"Python subclass of mirrorlib.ReplicationPolicy.",
            key=key,
            value=name,
        )
    module_name, _, attr = name.partition(":") if ":" in name else name.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(
            f"{key}={name!r}: cannot import module {module_name!r}: {exc}. Java classes cannot be "
            f"loaded: port a custom policy to a Python subclass of mirrorlib.ReplicationPolicy.",
            key=key,
            value=name,
        ) from exc
    obj: object = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(
                f"{key}={name!r}: module {module_name!r} has no attribute {attr!r}",
                key=key,
                value=name,
            ) from None
    if not (isinstance(obj, type) and issubclass(obj, ReplicationPolicy)):
        raise ConfigError(
            f"{key}={name!r} is not a subclass of mirrorlib.ReplicationPolicy", key=key, value=name
        )
    if getattr(obj, "__abstractmethods__", None):
        missing = ", ".join(sorted(obj.__abstractmethods__))
        raise ConfigError(
            f"{key}={name!r} does not define the abstract methods: {missing}", key=key, value=name
        )
    return obj


def load_policy(config: Mapping[str, str], *, key: str = POLICY_CLASS_CONFIG) -> ReplicationPolicy:
    """Build the replication policy described by ``config`` (``replication.policy.class`` and the
    keys the policy reads). Without ``replication.policy.class``, the default policy."""
    name = config.get(key)
    cls = DefaultReplicationPolicy if name is None else resolve_policy_class(name, key=key)
    try:
        return cls.from_config(config)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(
            f"{key}={name!r}: building the policy failed: {type(exc).__name__}: {exc}",
            key=key,
            value=name,
        ) from exc
