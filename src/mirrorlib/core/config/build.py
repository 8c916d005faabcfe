"""Building a :class:`~mirrorlib.core.config.mirror.MirrorConfig`: MM2's ``MirrorMakerConfig``
logic, step by step.

From parsed properties to the model: variables resolved, the cluster aliases checked, every
pair's :class:`~mirrorlib.core.config.flow.FlowConfig` resolved with MM2's precedence
(:mod:`mirrorlib.core.config.precedence`) and parsed to Python types, its policy and filters
loaded, unsupported settings rejected, and every key that is not used as written reported as a
:class:`ConfigWarning`. :func:`build` returns the model's fields; ``MirrorConfig``'s constructors
call it (the model imports the builder, not the other way).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal, NamedTuple

import attrs

from mirrorlib.core.config.clients import (
    READ_UNCOMMITTED,
    ROLES,
    DroppedSetting,
    Setting,
    replication_isolation,
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
from mirrorlib.core.config.flow import FlowConfig
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
    key_spec,
    mask,
    parse_value,
)
from mirrorlib.core.config.precedence import (
    MIRRORLIB,
    WORKER_KEYS,
    client_java,
    connector_config,
    flow_client_java,
    flow_of,
    owner,
    worker_values,
)
from mirrorlib.core.config.properties import ParsedProperties, resolve_variables
from mirrorlib.core.policy import ReplicationPolicy, load_policy
from mirrorlib.core.transforms import TransformChain, load_transforms
from mirrorlib.errors import ConfigError

__all__ = ["BuiltConfig", "ConfigWarning", "WarningKind", "build"]

WarningKind = Literal[
    "unknown", "not-applicable", "deprecated", "dropped", "ignored", "suspicious", "downgraded"
]


@attrs.frozen
class ConfigWarning:
    """Something in the configuration that mirrorlib accepted but does not use as written.

    ``kind``: ``unknown`` (not an MM2 key), ``not-applicable`` (an MM2/Connect setting with no
    role in mirrorlib), ``deprecated`` (an old name, honoured), ``dropped`` (a client setting
    librdkafka does not need), ``ignored`` (an MM2 key in a place where MM2 ignores it too),
    ``suspicious`` (a value that looks like it carries an inline comment), ``downgraded`` (a
    guarantee asked for that the flow will not give: ``exactly.once.support=requested`` without
    the target's ``exactly.once.source.support=enabled`` runs at-least-once).
    """

    key: str
    message: str
    kind: WarningKind
    alias: str | None = None

    def __str__(self) -> str:
        return f"{self.key}: {self.message}"


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


class BuiltConfig(NamedTuple):
    """What :func:`build` makes of parsed properties: the fields of a
    :class:`~mirrorlib.core.config.mirror.MirrorConfig`, in its order
    (``MirrorConfig.from_parsed`` is ``MirrorConfig(*build(parsed))``)."""

    clusters: tuple[str, ...]
    warnings: tuple[ConfigWarning, ...]
    values: dict[str, Setting]
    flows: dict[tuple[str, str], FlowConfig]
    pairs: tuple[tuple[str, str], ...]


def build(parsed: ParsedProperties) -> BuiltConfig:
    """The configuration of ``parsed``, validated (raises :class:`ConfigError` when invalid)."""
    return _Builder(parsed).build()


class _Builder:
    """Builds a configuration: MM2's ``MirrorMakerConfig`` logic, step by step."""

    def __init__(self, parsed: ParsedProperties) -> None:
        self.parsed = parsed
        resolved = resolve_variables(parsed.values)
        self.values: dict[str, Setting] = {
            k: Setting(v, k, k in resolved.secret_keys) for k, v in resolved.values.items()
        }
        self.warnings: list[ConfigWarning] = []

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

    def build(self) -> BuiltConfig:
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
                java = client_java(self.values, clusters, alias, role)
                for dropped in translate_client_settings(java, role=role, alias=alias).dropped:
                    self.report_dropped(dropped, alias)
        for source, target in pairs:
            self.check_clients(flows[(source, target)])
        unique = {(w.key, w.message): w for w in reversed(self.warnings)}
        warnings = tuple(reversed(unique.values()))
        return BuiltConfig(clusters, warnings, dict(self.values), flows, tuple(pairs))

    def validate_top_level(self) -> None:
        for key in ("security.protocol",):
            if key in self.values:
                setting = self.values[key]
                parse_value(KEYS[key], setting.value, key=key, secret=setting.secret)

    def parse(self, spec: KeySpec, setting: Setting, flow: str) -> ConfigValue:
        return parse_value(
            spec, setting.value, key=setting.origin, alias=flow, secret=setting.secret
        )

    def flow(self, clusters: tuple[str, ...], source: str, target: str) -> FlowConfig:
        name = f"{source}->{target}"
        connector = connector_config(self.values, clusters, source, target)
        values: dict[str, ConfigValue] = {}
        origins: dict[str, str] = {}
        for spec in _FLOW_KEYS:
            setting = connector.get(spec.name)
            if setting is None or setting.origin == MIRRORLIB:
                values[spec.name] = spec.parsed_default
                continue
            values[spec.name] = self.parse(spec, setting, name)
            origins[spec.name] = setting.origin
        # The deprecated *.blacklist names stand in for *.exclude when it is unset (MM2 3.x).
        for old, new in _DEPRECATED_ALIASES.items():
            if new not in origins and old in origins:
                values[new] = values[old]
                origins[new] = origins[old]
        worker = worker_values(self.values, clusters, source, target)
        originals = {k: v.value for k, v in connector.items()}
        policy = self.policy(originals, connector, name)
        transforms = self.transforms(originals, connector, name)
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
            transforms=transforms,
        )
        self.check_flow(flow, connector)
        return flow

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

    def transforms(
        self, originals: Mapping[str, str], connector: Mapping[str, Setting], flow: str
    ) -> TransformChain | None:
        def origin(key: str) -> str:
            """``key`` as written; a key that is missing, with the prefix of its list's key."""
            if key in connector:
                return connector[key].origin
            head = "predicates" if key.startswith("predicates.") else "transforms"
            listed = connector.get(head)
            return listed.origin[: -len(head)] + key if listed is not None else key

        try:
            return load_transforms(originals, origin=origin)
        except ConfigError as exc:
            raise ConfigError(
                f"{exc} (flow {flow})", key=exc.key, alias=flow, value=exc.value
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

    def check_flow(self, flow: FlowConfig, connector: Mapping[str, Setting]) -> None:
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
        self.check_exactly_once(flow, connector)
        self.check_isolation(flow, connector)

    def check_isolation(self, flow: FlowConfig, connector: Mapping[str, Setting]) -> None:
        """The replication consumer's ``isolation.level``, however the configuration sets it
        (``<source>.consumer.``, ``<source>-><target>.consumer.``,
        ``<source>-><target>.source.consumer.``…; :func:`flow_client_java` resolves it as MM2
        does). mirrorlib reads ``read_committed`` unless told otherwise
        (:func:`~mirrorlib.core.config.clients.replication_isolation`); an explicit
        ``read_uncommitted`` is honoured with a warning naming the setting: the records of
        aborted source transactions are then copied as committed ones (an exactly-once flow
        ignores it, with a warning too). Any other value is refused."""
        setting = flow_client_java(connector, "source", "consumer").get("isolation.level")
        if setting is None or setting.origin == MIRRORLIB:
            return
        try:
            level = replication_isolation(setting.value, exactly_once=False)
        except ConfigError:
            raise ConfigError(
                f"{setting.origin}{self.parsed.where(setting.origin)} (flow {flow.name}): "
                "expected read_committed (mirrorlib's default) or read_uncommitted",
                key=setting.origin,
                alias=flow.name,
                value=setting.value,
            ) from None
        if level != READ_UNCOMMITTED or not flow.enabled:
            return
        if flow.exactly_once_enabled:
            self.warn(
                setting.origin,
                f"ignored by flow {flow.name}: it runs exactly-once, which reads committed "
                f"records only (records of aborted transactions on {flow.source} are not copied)",
                "ignored",
                flow.name,
            )
            return
        self.warn(
            setting.origin,
            f"flow {flow.name} reads {flow.source} read_uncommitted: records of aborted "
            f"transactions will be copied to {flow.target} as committed records (read_committed "
            "consumers of the remote topics will read them). mirrorlib reads read_committed "
            "by default (MM2 does not); remove the setting unless that is what you want",
            "downgraded",
            flow.name,
        )

    def check_exactly_once(self, flow: FlowConfig, connector: Mapping[str, Setting]) -> None:
        """``exactly.once.support`` as Connect validates it: ``required`` needs the target's
        worker to run exactly-once (``<target>.exactly.once.source.support=enabled``, checked for
        a flow that replicates) and a ``read_committed`` source consumer (MirrorSourceConnector's
        ``exactlyOnceSupport``; mirrorlib's default, so only an explicit ``read_uncommitted``
        fails it where MM2 needs the setting written); otherwise the connector is refused. ``requested`` without the
        worker setting runs at-least-once, which Connect does silently; mirrorlib warns when the
        key was set explicitly."""
        key = flow.origin("exactly.once.support") or "exactly.once.support"
        worker_key = f"{flow.target}.exactly.once.source.support"
        worker_missing = flow.enabled and not flow.exactly_once_enabled
        if flow.exactly_once_support == "requested":
            if worker_missing and flow.origin("exactly.once.support") is not None:
                self.warn(
                    key,
                    f"flow {flow.name} runs at-least-once: {worker_key} is "
                    f"{flow.exactly_once_source_support}, not enabled (set it to enabled for "
                    "exactly-once, or exactly.once.support=required to refuse to start without)",
                    "downgraded",
                    flow.name,
                )
            return
        needs = []
        if worker_missing:
            needs.append(
                f"exactly-once support on target {flow.target}: set {worker_key}=enabled (it is "
                f"{flow.exactly_once_source_support}; MM2's worker refuses the connector too)"
            )
        level = flow_client_java(connector, "source", "consumer").get("isolation.level")
        if level is not None and level.value.strip().lower() == READ_UNCOMMITTED:
            needs.append(
                f"the source consumer's isolation.level=read_committed: {level.origin} says "
                "read_uncommitted (remove it: mirrorlib reads read_committed by default)"
            )
        if needs:
            raise ConfigError(
                f"{key}=required (flow {flow.name}) needs " + ", and ".join(needs),
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
        if dropped.origin == MIRRORLIB:
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
            flow = flow_of(clusters, key)
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
            alias = owner(clusters, key)
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
        spec = key_spec(key)
        used_worker_key = spec is not None and spec.scope is Scope.WORKER and key in WORKER_KEYS
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
        spec = key_spec(rest)
        if is_client_connection_key(rest) or rest.startswith(_CLIENT_PREFIXES):
            return  # client settings: checked by translation
        if spec is not None and (spec.scope is Scope.WORKER or is_worker_key(rest)):
            # a worker key, or a connector key that is a worker key too (key.converter*)
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
        spec = key_spec(rest)
        if spec is not None and (spec.scope is Scope.FLOW or spec.status is Status.NOT_APPLICABLE):
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
