"""MM2's precedence rules: which written key sets a cluster's, a client's or a flow's setting.

Pure functions over the variable-resolved settings (``key -> Setting``, the origin being the key as
written), shared by the model (:mod:`mirrorlib.core.config.mirror`,
:mod:`mirrorlib.core.config.flow`) and the builder (:mod:`mirrorlib.core.config.build`). Each
follows one method of MM2 4.3.1's ``MirrorMakerConfig`` / ``MirrorConnectorConfig``:

* :func:`owner` / :func:`flow_of` — which cluster (``A.key``) or flow (``A->B.key``) a key
  belongs to (the longest alias wins);
* :func:`cluster_props` — ``clusterProps(alias)``;
* :func:`client_java` — a cluster's client (``MirrorClientConfig``);
* :func:`connector_config` — ``connectorBaseConfig(source->target)``;
* :func:`flow_client_java` — a flow's client, assembled from the connector configuration;
* :func:`worker_values` — the worker keys of ``workerConfig(source->target)`` mirrorlib uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

from mirrorlib.core.config.clients import ROLES, Setting
from mirrorlib.core.config.keys import (
    KEYS,
    WORKER_TOP_LEVEL_PREFIXES,
    ConfigValue,
    Scope,
    is_client_connection_key,
    parse_value,
)

__all__ = [
    "MIRRORLIB",
    "WORKER_KEYS",
    "client_java",
    "cluster_props",
    "connector_config",
    "flow_client_java",
    "flow_of",
    "owner",
    "strip",
    "worker_values",
]

MIRRORLIB: Final = "(mirrorlib)"
"""The origin of a setting mirrorlib supplies (a default MM2 would supply too)."""

WORKER_KEYS: Final = (
    "exactly.once.source.support",
    "offset.flush.interval.ms",
    "offset.storage.topic",
    "offset.storage.partitions",
    "offset.storage.replication.factor",
)
"""The worker keys mirrorlib uses, read from the target cluster (``B.key``)."""


def strip(settings: Mapping[str, Setting], prefix: str) -> dict[str, Setting]:
    """The settings whose key starts with ``prefix``, with the prefix removed."""
    return {k[len(prefix) :]: v for k, v in settings.items() if k.startswith(prefix)}


def _is_client_prefixed(key: str) -> bool:
    # MM2: key.matches("(^consumer.*|^producer.*|^admin.*)")
    return key.startswith(("consumer", "producer", "admin"))


def owner(clusters: tuple[str, ...], key: str) -> str | None:
    """The alias whose ``alias.`` prefix ``key`` has (the longest one), or ``None``."""
    best = None
    for alias in clusters:
        if key.startswith(alias + ".") and (best is None or len(alias) > len(best)):
            best = alias
    return best


def flow_of(clusters: tuple[str, ...], key: str) -> tuple[str, str] | None:
    """The flow ``(source, target)`` whose ``source->target.`` prefix ``key`` has (the longest
    pair of aliases), or ``None``."""
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
        if k.startswith(prefix) and owner(clusters, k) == alias
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


def client_java(
    values: Mapping[str, Setting], clusters: tuple[str, ...], alias: str, role: str
) -> dict[str, Setting]:
    """The Java settings of a ``role`` client of cluster ``alias``."""
    # MirrorClientConfig over originals + clusterProps(alias): connection keys with
    # "<role>." overriding, plus (mirrorlib) the cluster's other "<alias>.<role>." settings.
    merged: dict[str, Setting] = {
        k: v for k, v in values.items() if "->" not in k and owner(clusters, k) is None
    }
    merged.update(cluster_props(values, clusters, alias))
    java = {k: v for k, v in merged.items() if is_client_connection_key(k)}
    for k, v in strip(merged, f"{role}.").items():
        if is_client_connection_key(k) or v.origin.startswith(f"{alias}.{role}."):
            java[k] = v
    return java


def connector_config(
    values: Mapping[str, Setting], clusters: tuple[str, ...], source: str, target: str
) -> dict[str, Setting]:
    """MM2's ``connectorBaseConfig(source->target)``."""
    props: dict[str, Setting] = {}
    for key, setting in values.items():
        spec = KEYS.get(key)
        wanted = (spec is not None and spec.scope is Scope.FLOW) or is_client_connection_key(key)
        if wanted and "->" not in key and owner(clusters, key) is None:
            props[key] = setting
    for key, setting in values.items():
        if key.startswith(("config.providers", "replication.policy")):
            props[key] = setting
        elif key.startswith(("transforms.", "predicates.")) and "->" not in key:
            props[key] = setting  # a transform's own keys (mirrorlib.core.transforms)
    for side, alias in (("source", source), ("target", target)):
        cluster = cluster_props(values, clusters, alias)
        for key, setting in cluster.items():
            if _is_client_prefixed(key):
                props[f"{side}.{key}"] = setting
            else:
                props[f"{side}.cluster.{key}"] = setting
    props.setdefault("source.cluster.alias", Setting(source, MIRRORLIB))
    props.setdefault("target.cluster.alias", Setting(target, MIRRORLIB))
    prefix = f"{source}->{target}."
    for key, setting in values.items():
        if key.startswith(prefix) and flow_of(clusters, key) == (source, target):
            props[key[len(prefix) :]] = setting
    props.setdefault("enabled", Setting("false", MIRRORLIB))
    return props


def flow_client_java(
    connector: Mapping[str, Setting], side: Literal["source", "target"], role: str
) -> dict[str, Setting]:
    """The Java settings of a flow's ``role`` client on its ``side`` cluster, from the flow's
    connector configuration (:func:`connector_config`)."""
    # MirrorConnectorConfig: "<side>.cluster.*" cut to connection keys, then the flow's
    # "<role>.*", then the cluster's "<side>.<role>.*".
    props = {
        k: v for k, v in strip(connector, f"{side}.cluster.").items() if is_client_connection_key(k)
    }
    flow_level = strip(connector, f"{role}.")
    flow_level.pop("poll.timeout.ms" if role == "consumer" else "timeout.ms", None)
    props.update(flow_level)
    props.update(strip(connector, f"{side}.{role}."))
    if role == "consumer":
        props["enable.auto.commit"] = Setting("false", MIRRORLIB)
        props.setdefault("auto.offset.reset", Setting("earliest", MIRRORLIB))
    return props


def worker_values(
    values: Mapping[str, Setting], clusters: tuple[str, ...], source: str, target: str
) -> dict[str, ConfigValue]:
    """The worker keys mirrorlib uses, as MM2's ``workerConfig(source->target)`` resolves
    them: the target's ``B.key``, overridden by a top-level key for the prefixes MM2 copies
    (``offset.storage*``…)."""
    out: dict[str, ConfigValue] = {}
    for name in WORKER_KEYS:
        spec = KEYS[name]
        setting = values.get(f"{target}.{name}")
        if setting is not None and owner(clusters, setting.origin) != target:
            setting = None
        if name.startswith(WORKER_TOP_LEVEL_PREFIXES) and name in values:
            setting = values[name]
        if setting is None:
            out[name] = spec.parsed_default
        else:
            out[name] = parse_value(
                spec, setting.value, key=setting.origin, alias=target, secret=setting.secret
            )
    if out["offset.storage.topic"] is None:
        out["offset.storage.topic"] = f"mm2-offsets.{source}.internal"
    return out
