"""``MirrorConfig``: an MM2 configuration, read the way MM2 4.3.1 reads it; each of its flows is a
:class:`~mirrorlib.core.config.flow.FlowConfig`.

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
(:mod:`mirrorlib.core.config.clients`). The precedence rules live in
:mod:`mirrorlib.core.config.precedence`; :mod:`mirrorlib.core.config.build` builds this model from
parsed properties (this module imports the builder; the builder imports only ``FlowConfig``).

Nothing is silently lost: keys that mean nothing to MM2, MM2/Connect keys that do not apply to
mirrorlib, and client settings that librdkafka does not need are listed in
:attr:`MirrorConfig.warnings`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

import attrs

from mirrorlib.core.config.build import ConfigWarning, build
from mirrorlib.core.config.clients import ROLES, ClientSettings, Setting, translate_client_settings
from mirrorlib.core.config.flow import FlowConfig
from mirrorlib.core.config.precedence import client_java, cluster_props
from mirrorlib.core.config.properties import (
    ParsedProperties,
    parse_properties,
    read_properties_file,
)
from mirrorlib.errors import ConfigError

__all__ = ["MirrorConfig"]


def _property_value(key: object, value: object) -> str:
    """A mapping value as the string a properties file would hold."""
    if not isinstance(key, str):
        raise TypeError(f"property keys must be strings, not {type(key).__name__} ({key!r})")
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    hint = ""
    if isinstance(value, list | tuple | set | frozenset):
        hint = f", e.g. {key!r}: {', '.join(map(str, value))!r}"
    raise TypeError(
        f"the value of {key!r} must be a string as in a properties file, not "
        f"{type(value).__name__}{hint}"
    )


def _reject_path(text: str) -> None:
    """Raise :class:`ConfigError` when ``text`` given as properties text is a file name."""
    line = text.strip()
    if not line or "\n" in line or "=" in line:
        return
    if line.endswith(".properties") or os.path.isfile(line):
        raise ConfigError(
            f"MirrorConfig.from_properties got {line!r}, which looks like a file name: it takes "
            "the text of the file; read a file with MirrorConfig.from_file(path)",
            value=line,
        )


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
        values (used as given, without escape processing).

        Values are strings as in the file (numbers and booleans are accepted and written out);
        a list value (``{"clusters": ["A", "B"]}``) raises ``TypeError``, as does a path:
        read files with :meth:`from_file`. Text that is only a file name raises
        :class:`ConfigError` saying so.
        """
        if isinstance(source, str):
            _reject_path(source)
            return cls.from_parsed(parse_properties(source))
        if not isinstance(source, Mapping):
            raise TypeError(
                f"MirrorConfig.from_properties takes the text of a properties file or a mapping "
                f"of keys to values, not {type(source).__name__}; read a file with "
                "MirrorConfig.from_file(path)"
            )
        return cls.from_parsed(ParsedProperties({k: _property_value(k, v) for k, v in
                                                 source.items()}))  # fmt: skip

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> MirrorConfig:
        """Read an ``mm2.properties`` file."""
        if not isinstance(path, str | os.PathLike):
            raise TypeError(
                f"MirrorConfig.from_file takes a path, not {type(path).__name__}; for properties "
                "text or a mapping use MirrorConfig.from_properties"
            )
        return cls.from_parsed(read_properties_file(path))

    @classmethod
    def from_parsed(cls, parsed: ParsedProperties) -> MirrorConfig:
        """Build from already parsed properties (keeps their line numbers for messages)."""
        return cls(*build(parsed))

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
        java = client_java(self._values, self.clusters, alias, role)
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
        return {k: v.value for k, v in cluster_props(self._values, self.clusters, alias).items()}

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
