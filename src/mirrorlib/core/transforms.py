"""Record transforms and filters: MM2's ``transforms`` and ``predicates``, as Python classes.

A flow may change or drop the records it copies, between consume and produce. A *transform* is a
subclass of :class:`Transform`; it receives a :class:`TransformRecord` (key, value, headers,
timestamp, and the read-only source topic, partition, offset and remote topic) and returns it
changed (``attrs.evolve``: key, value, headers and timestamp only) or ``None`` to drop it.
The partition and the topic a record goes to stay the replication policy's.

Configured with MM2's keys (``A->B.`` before any of them applies them to one flow only, as for
every flow setting)::

    transforms=dropTombstones,tag
    transforms.dropTombstones.type=org.apache.kafka.connect.transforms.Filter
    transforms.dropTombstones.predicate=isTombstone
    transforms.tag.type=mypkg.transforms:Tag          # a Python path, as replication.policy.class
    transforms.tag.colour=blue                         # the transform's own keys
    predicates=isTombstone
    predicates.isTombstone.type=org.apache.kafka.connect.transforms.predicates.RecordIsTombstone

``transforms.<name>.predicate`` applies the transform only to the records the predicate matches
(``transforms.<name>.negate=true``: only to those it does not match), as in Connect.

MM2's common SMTs work under their Java names with their keys (the record's bytes are what
Connect's ``ByteArrayConverter`` hands them, so only transforms whose meaning carries over to
bytes are here): ``Filter``, the predicates ``TopicNameMatches`` (``pattern``, matched against
the whole *remote* topic name, as MM2's records carry it), ``HasHeaderKey`` (``name``) and
``RecordIsTombstone``, ``InsertHeader`` (``header``, ``value.literal``), ``DropHeaders``
(``headers``), ``HeaderFrom$Key`` and ``HeaderFrom$Value`` (``fields``, ``headers``,
``operation``; on keys or values that are JSON objects). Any other Connect transform, renaming
with ``RegexRouter`` included, is refused with a :class:`~mirrorlib.errors.ConfigError` saying
what to use instead.

A transform that raises stops the record's partition at that record, the error in the flow's
status, and it is retried with back-off: no record is skipped because a transform failed.
A dropped record leaves a gap upstream of the copy, which offset syncs treat like a transaction
marker (:mod:`mirrorlib.core.syncs`): translation stays exact across it.

Pure: no Kafka client. A :class:`TransformChain` pickles as its configuration and is built again
where it is unpickled (a copier worker process).
"""

from __future__ import annotations

import abc
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Final, Self

import attrs

from mirrorlib.core.config.filters import import_by_path, java_regex_to_python
from mirrorlib.errors import ConfigError

__all__ = [
    "DropHeaders",
    "Filter",
    "HasHeaderKey",
    "HeaderFrom",
    "InsertHeader",
    "Predicate",
    "RecordIsTombstone",
    "TopicNameMatches",
    "Transform",
    "TransformChain",
    "TransformRecord",
    "load_transforms",
]

Headers = tuple[tuple[str, bytes | None], ...]


@attrs.frozen
class TransformRecord:
    """A record on its way from source to target.

    ``key``, ``value``, ``headers`` and ``timestamp`` (epoch ms; 0 or less: none) may be changed
    (``attrs.evolve``); ``topic``, ``partition`` and ``offset`` say where it was read on the
    source and ``remote_topic`` where it is written: a transform that changes them fails.
    """

    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int
    topic: str
    partition: int
    offset: int
    remote_topic: str

    def header(self, name: str) -> bytes | None:
        """The value of the last header called ``name`` (``None``: none, or a null value)."""
        found: bytes | None = None
        for key, value in self.headers:
            if key == name:
                found = value
        return found


class Transform(abc.ABC):
    """A record transform (see the module). Subclasses define :meth:`apply`, and
    :meth:`from_config` when they read keys of their own."""

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> Self:
        """Build the transform from its own keys (``transforms.<name>.<key>`` without the
        prefix; ``type``, ``predicate`` and ``negate`` are there too). Raise
        :class:`~mirrorlib.errors.ConfigError` (``key`` the key without prefix) on bad values."""
        del config
        return cls()

    @abc.abstractmethod
    def apply(self, record: TransformRecord) -> TransformRecord | None:
        """The record changed, the same record, or ``None`` to drop it."""


class Predicate(abc.ABC):
    """A condition on records for ``transforms.<name>.predicate`` (MM2's ``predicates``)."""

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> Self:
        """Build the predicate from its own keys (``predicates.<name>.<key>`` without the
        prefix)."""
        del config
        return cls()

    @abc.abstractmethod
    def test(self, record: TransformRecord) -> bool:
        """Whether ``record`` matches."""


def _required(config: Mapping[str, str], key: str) -> str:
    value = config.get(key, "").strip()
    if not value:
        raise ConfigError(f"{key} is required", key=key)
    return value


def _names(config: Mapping[str, str], key: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in _required(config, key).split(",") if n.strip())
    if not names:
        raise ConfigError(f"{key} must name at least one", key=key)
    return names


# -- MM2's SMTs -------------------------------------------------------------------------------------


class Filter(Transform):
    """Connect's ``Filter``: drops every record it is applied to (give it a predicate)."""

    def apply(self, record: TransformRecord) -> TransformRecord | None:
        del record
        return None


@attrs.frozen
class InsertHeader(Transform):
    """Connect's ``InsertHeader``: adds header ``header`` with ``value.literal`` to every record
    (after the headers it has, even one of the same name). The value is the literal's UTF-8 text
    (what Connect's ``SimpleHeaderConverter`` writes for a string or a number); ``null`` is a
    header with no value."""

    header: str
    value: bytes | None

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> Self:
        header = _required(config, "header")
        if "value.literal" not in config:
            raise ConfigError("value.literal is required", key="value.literal")
        literal = config["value.literal"]
        return cls(header, None if literal == "null" else literal.encode())

    def apply(self, record: TransformRecord) -> TransformRecord | None:
        return attrs.evolve(record, headers=(*record.headers, (self.header, self.value)))


@attrs.frozen
class DropHeaders(Transform):
    """Connect's ``DropHeaders``: removes every header whose name is in ``headers``."""

    headers: frozenset[str]

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> Self:
        return cls(frozenset(_names(config, "headers")))

    def apply(self, record: TransformRecord) -> TransformRecord | None:
        drop = self.headers
        kept = tuple(h for h in record.headers if h[0] not in drop)
        if len(kept) == len(record.headers):
            return record
        return attrs.evolve(record, headers=kept)


def _header_bytes(value: object) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value, separators=(",", ":")).encode()


@attrs.frozen
class HeaderFrom(Transform):
    """Connect's ``HeaderFrom$Key`` / ``HeaderFrom$Value``: copies (``operation=copy``) or moves
    (``move``) the fields ``fields`` of the key or value into the headers ``headers`` (same
    order). Connect reads the fields of a map or struct; mirrorlib copies bytes, so here the key
    or value must be a JSON object (UTF-8), as Connect's ``JsonConverter`` would hand it: a
    string field becomes its UTF-8 text, a missing or null field a header with no value, any
    other its JSON text. ``move`` writes the object again without the fields (compact JSON). A
    record whose key or value is not a JSON object fails (its partition stops), as in Connect."""

    of_key: bool
    fields: tuple[str, ...]
    headers: tuple[str, ...]
    move: bool

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> Self:
        raise ConfigError(  # (built by _header_from, which knows Key from Value)
            "use HeaderFrom$Key or HeaderFrom$Value", key="type"
        )

    def apply(self, record: TransformRecord) -> TransformRecord | None:
        raw = record.key if self.of_key else record.value
        side = "key" if self.of_key else "value"
        try:
            obj = json.loads(raw) if raw is not None else None
        except (ValueError, UnicodeDecodeError) as exc:
            raise ValueError(f"HeaderFrom: the record's {side} is not JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise ValueError(f"HeaderFrom: the record's {side} is not a JSON object")
        added = tuple(
            (header, _header_bytes(obj.get(field)))
            for field, header in zip(self.fields, self.headers, strict=True)
        )
        headers = (*record.headers, *added)
        if not self.move:
            return attrs.evolve(record, headers=headers)
        for field in self.fields:
            obj.pop(field, None)
        data = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
        if self.of_key:
            return attrs.evolve(record, key=data, headers=headers)
        return attrs.evolve(record, value=data, headers=headers)


def _header_from(of_key: bool) -> Callable[[Mapping[str, str]], Transform]:
    def build(config: Mapping[str, str]) -> Transform:
        fields, headers = _names(config, "fields"), _names(config, "headers")
        if len(fields) != len(headers):
            raise ConfigError(
                "headers must have as many elements as fields "
                f"({len(headers)} headers, {len(fields)} fields)",
                key="headers",
            )
        operation = _required(config, "operation")
        if operation not in ("move", "copy"):
            raise ConfigError(f"operation={operation!r} must be 'move' or 'copy'", key="operation")
        return HeaderFrom(of_key, fields, headers, operation == "move")

    return build


@attrs.frozen
class TopicNameMatches(Predicate):
    """Connect's ``TopicNameMatches``: the whole remote topic name (the topic of MM2's record)
    matches ``pattern``, a Java regex read as the topic filters read theirs."""

    pattern: re.Pattern[str]

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> Self:
        pattern = _required(config, "pattern")
        try:  # a Java regex, read as the topic filters read theirs
            return cls(re.compile(java_regex_to_python([pattern]), re.ASCII))
        except (ValueError, re.error) as exc:
            raise ConfigError(
                f"pattern={pattern!r} is not a regular expression mirrorlib can read: {exc}",
                key="pattern",
            ) from None

    def test(self, record: TransformRecord) -> bool:
        return self.pattern.fullmatch(record.remote_topic) is not None


@attrs.frozen
class HasHeaderKey(Predicate):
    """Connect's ``HasHeaderKey``: the record has a header called ``name``."""

    name: str

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> Self:
        return cls(_required(config, "name"))

    def test(self, record: TransformRecord) -> bool:
        name = self.name
        return any(h[0] == name for h in record.headers)


class RecordIsTombstone(Predicate):
    """Connect's ``RecordIsTombstone``: the record's value is null."""

    def test(self, record: TransformRecord) -> bool:
        return record.value is None


_CONNECT: Final = "org.apache.kafka.connect.transforms."
_PREDICATES_PKG: Final = _CONNECT + "predicates."

_BUILTIN_TRANSFORMS: Final[Mapping[str, Callable[[Mapping[str, str]], Transform]]] = {
    "Filter": Filter.from_config,
    "InsertHeader": InsertHeader.from_config,
    "DropHeaders": DropHeaders.from_config,
    "HeaderFrom$Key": _header_from(True),
    "HeaderFrom$Value": _header_from(False),
}
_BUILTIN_PREDICATES: Final[Mapping[str, Callable[[Mapping[str, str]], Predicate]]] = {
    "TopicNameMatches": TopicNameMatches.from_config,
    "HasHeaderKey": HasHeaderKey.from_config,
    "RecordIsTombstone": RecordIsTombstone.from_config,
}
_RENAMING: Final = ("RegexRouter", "TimestampRouter")
_PYTHON_TRANSFORM: Final = (
    "write a Python transform (a subclass of mirrorlib.Transform) and name it by its Python "
    "path ('pkg.module:Class')"
)


def _builtin_name(name: str, package: str) -> str | None:
    """The simple name of a Connect class (``Filter`` for ``org…transforms.Filter``), or ``None``
    for a Python path."""
    if name.startswith(package):
        return name[len(package) :]
    if "." not in name and ":" not in name:
        return name
    return None


def _java_refused(name: str, key: str, what: str) -> ConfigError:
    simple = name.rsplit(".", 1)[-1]
    if simple in _RENAMING:
        advice = (
            "renaming topics is the replication policy's job: write a Python subclass of "
            "mirrorlib.ReplicationPolicy and name it in replication.policy.class"
        )
    else:
        advice = _PYTHON_TRANSFORM
    return ConfigError(
        f"{key}={name!r}: {what} is Java code mirrorlib cannot run; {advice}. Supported "
        f"Connect classes: {', '.join(_BUILTIN_TRANSFORMS)} and the predicates "
        f"{', '.join(_BUILTIN_PREDICATES)}.",
        key=key,
        value=name,
    )


def _build(
    name: str,
    config: Mapping[str, str],
    *,
    key: str,
    builtins: Mapping[str, Callable[[Mapping[str, str]], Any]],
    package: str,
    base: type[Transform] | type[Predicate],
) -> Any:
    simple = _builtin_name(name, package)
    if simple is not None and simple in builtins:
        return builtins[simple](config)
    if simple is not None or name.startswith(("org.apache.", "io.", "com.")):
        raise _java_refused(name, key, "this transform" if base is Transform else "this predicate")
    obj = import_by_path(name, key)
    if not (isinstance(obj, type) and issubclass(obj, base)):
        raise ConfigError(
            f"{key}={name!r} is not a subclass of mirrorlib.{base.__name__}", key=key, value=name
        )
    abstract: frozenset[str] = getattr(obj, "__abstractmethods__", frozenset())
    if abstract:
        missing = ", ".join(sorted(abstract))
        raise ConfigError(
            f"{key}={name!r} does not define the abstract methods: {missing}", key=key, value=name
        )
    return obj.from_config(config)


@attrs.frozen
class TransformStage:
    """One transform of a chain, with its predicate."""

    name: str
    transform: Transform
    predicate: Predicate | None = None
    negate: bool = False


@attrs.frozen(eq=False)
class TransformChain:
    """A flow's transforms, applied in order (see the module); built by :func:`load_transforms`.

    Pickles as ``config`` (the keys it was built from) and is built again when unpickled; two
    chains are equal when they were built from the same keys (a hashable value, as the flow's
    settings that hold it).
    """

    stages: tuple[TransformStage, ...]
    config: Mapping[str, str] = attrs.field(repr=False)

    def apply(self, record: TransformRecord) -> TransformRecord | None:
        """``record`` after every stage, or ``None`` when one dropped it. An exception of a
        transform or predicate propagates, naming the stage (``ValueError``)."""
        for stage in self.stages:
            predicate = stage.predicate
            try:
                if predicate is not None and predicate.test(record) == stage.negate:
                    continue
                out = stage.transform.apply(record)
            except Exception as exc:
                raise ValueError(
                    f"transform {stage.name} failed on {record.topic}-{record.partition}"
                    f"@{record.offset}: {type(exc).__name__}: {exc}"
                ) from exc
            if out is None:
                return None
            if out is not record and (
                out.topic != record.topic
                or out.partition != record.partition
                or out.offset != record.offset
                or out.remote_topic != record.remote_topic
            ):
                raise ValueError(
                    f"transform {stage.name} changed the topic, partition or offset of "
                    f"{record.topic}-{record.partition}@{record.offset}: a transform may change "
                    "key, value, headers and timestamp only (topics are the replication policy's)"
                )
            record = out
        return record

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TransformChain):
            return NotImplemented
        return dict(self.config) == dict(other.config)

    def __hash__(self) -> int:
        return hash(frozenset(self.config.items()))

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return (_rebuild, (dict(self.config),))


def _rebuild(config: dict[str, str]) -> TransformChain:
    chain = load_transforms(config)
    assert chain is not None
    return chain


def _list(config: Mapping[str, str], key: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in config.get(key, "").split(",") if n.strip())


def _sub(config: Mapping[str, str], prefix: str) -> dict[str, str]:
    return {k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)}


def load_transforms(
    config: Mapping[str, str], *, origin: Callable[[str], str] | None = None
) -> TransformChain | None:
    """The transforms ``config`` (a flow's connector configuration: ``transforms``,
    ``transforms.<name>.*``, ``predicates``, ``predicates.<name>.*``) describes, or ``None``
    without any. ``origin`` maps a key to the key as the user wrote it (``A->B.transforms…``)
    for error messages. Every mistake is a :class:`~mirrorlib.errors.ConfigError` naming it."""

    def written(key: str) -> str:
        return origin(key) if origin is not None else key

    names = _list(config, "transforms")
    if not names:
        return None
    used = {
        k: v
        for k, v in config.items()
        if k in ("transforms", "predicates") or k.startswith(("transforms.", "predicates."))
    }
    predicates: dict[str, Predicate] = {}
    for pname in _list(config, "predicates"):
        predicates[pname] = _stage_part(
            config, f"predicates.{pname}.", written, _BUILTIN_PREDICATES, _PREDICATES_PKG, Predicate
        )
    stages: list[TransformStage] = []
    for tname in names:
        prefix = f"transforms.{tname}."
        transform = _stage_part(config, prefix, written, _BUILTIN_TRANSFORMS, _CONNECT, Transform)
        predicate: Predicate | None = None
        negate = False
        pname = config.get(prefix + "predicate", "").strip()
        if pname:
            if pname not in predicates:
                key = written(prefix + "predicate")
                raise ConfigError(
                    f"{key}={pname!r} is not a predicate named in predicates "
                    f"({', '.join(predicates) or 'none'})",
                    key=key,
                    value=pname,
                )
            predicate = predicates[pname]
            raw = config.get(prefix + "negate", "false").strip().lower()
            if raw not in ("true", "false"):
                key = written(prefix + "negate")
                raise ConfigError(f"{key}={raw!r} must be true or false", key=key, value=raw)
            negate = raw == "true"
        stages.append(TransformStage(tname, transform, predicate, negate))
    return TransformChain(tuple(stages), used)


def _stage_part(
    config: Mapping[str, str],
    prefix: str,
    written: Callable[[str], str],
    builtins: Mapping[str, Callable[[Mapping[str, str]], Any]],
    package: str,
    base: type[Transform] | type[Predicate],
) -> Any:
    type_key = prefix + "type"
    class_name = config.get(type_key, "").strip()
    if not class_name:
        key = written(type_key)
        raise ConfigError(f"{key} is required (the class of {prefix[:-1]})", key=key)
    own = _sub(config, prefix)
    try:
        return _build(
            class_name, own, key=written(type_key), builtins=builtins, package=package, base=base
        )
    except ConfigError as exc:
        if exc.key is None or exc.key == written(type_key):
            raise
        key = written(prefix + exc.key)  # a key of the class's own, without its prefix
        raise ConfigError(f"{key}: {exc}", key=key, value=own.get(exc.key)) from exc
    except Exception as exc:
        key = written(type_key)
        raise ConfigError(
            f"{key}={class_name!r}: building it failed: {type(exc).__name__}: {exc}",
            key=key,
            value=class_name,
        ) from exc
