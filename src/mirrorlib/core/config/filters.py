"""MM2's topic, group and topic-config-property filters.

MM2 configures its filters with *regex lists*: ``topics = orders.*, payments`` is split on commas
(with surrounding whitespace), the pieces are joined with ``|`` and the result must match the whole
name (Java's ``Matcher.matches()``). An empty list matches nothing. Exclusion wins over inclusion.

The regexes are Java regexes. :func:`java_regex_to_python` converts the Java-only syntax that has a
faithful Python equivalent (``\\Q…\\E`` quoting, ``(?<name>…)`` groups, ``\\z``, inline flags in
the middle of a list, a few POSIX ``\\p{…}`` classes); anything else Java-only raises
:class:`~mirrorlib.errors.ConfigError` naming the key, never a crash or a silently different
match. Patterns are compiled with ``re.ASCII``, since Java's ``\\w``, ``\\d``, ``\\s``, ``\\b`` and
case-insensitive matching are ASCII-only by default.

Custom filter classes (MM2's ``topic.filter.class`` and friends) may be given as Python paths
``pkg.module:Class``; the class is built with ``Class.from_config(config)`` when it has that
classmethod (``config`` is the flow's connector configuration, with MM2's key names), else
``Class()``, and must have the methods of :class:`TopicFilter`, :class:`GroupFilter` or
:class:`ConfigPropertyFilter`.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Final, Protocol, TypeVar, cast, runtime_checkable

import attrs

from mirrorlib.core.config.keys import (
    CONFIG_PROPERTIES_EXCLUDE_DEFAULT,
    GROUPS_EXCLUDE_DEFAULT,
    TOPICS_EXCLUDE_DEFAULT,
    parse_list,
)
from mirrorlib.errors import ConfigError

__all__ = [
    "ConfigPropertyFilter",
    "DefaultConfigPropertyFilter",
    "DefaultGroupFilter",
    "DefaultTopicFilter",
    "GroupFilter",
    "RegexList",
    "TopicFilter",
    "import_by_path",
    "java_regex_to_python",
    "load_filter",
]


@runtime_checkable
class TopicFilter(Protocol):
    """Selects topics to replicate (MM2's ``TopicFilter``)."""

    def should_replicate_topic(self, topic: str) -> bool: ...


@runtime_checkable
class GroupFilter(Protocol):
    """Selects consumer groups to checkpoint (MM2's ``GroupFilter``)."""

    def should_replicate_group(self, group: str) -> bool: ...


@runtime_checkable
class ConfigPropertyFilter(Protocol):
    """Selects topic config properties to copy (MM2's ``ConfigPropertyFilter``)."""

    def should_replicate_config_property(self, prop: str) -> bool: ...

    def should_replicate_source_default(self, prop: str) -> bool: ...


# -- Java regex → Python -------------------------------------------------------------------------

_POSIX: Final[Mapping[str, str]] = {
    "Lower": "a-z",
    "Upper": "A-Z",
    "ASCII": "\\x00-\\x7f",
    "Alpha": "a-zA-Z",
    "Digit": "0-9",
    "Alnum": "a-zA-Z0-9",
    "Punct": "!-/:-@\\[-`{-~",
    "Graph": "!-~",
    "Print": " -~",
    "Blank": " \\t",
    "Cntrl": "\\x00-\\x1f\\x7f",
    "XDigit": "0-9a-fA-F",
    "Space": " \\t\\n\\x0b\\f\\r",
    "javaLowerCase": "a-z",
    "javaUpperCase": "A-Z",
    "IsAlphabetic": "a-zA-Z",
    "IsDigit": "0-9",
    "L": "a-zA-Z",
    "IsLatin": "a-zA-Z",
}
_JAVA_FLAGS: Final[Mapping[str, str]] = {"i": "i", "m": "m", "s": "s", "x": "x", "u": ""}
_LEADING_FLAGS: Final = re.compile(r"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?\)")


def _python_flags(flags: str) -> str:
    out = []
    for flag in flags:
        if flag not in _JAVA_FLAGS:
            raise ValueError(f"the inline flag {flag!r} has no Python equivalent")
        out.append(_JAVA_FLAGS[flag])
    return "".join(out)


def _scope_flags(elements: Sequence[str]) -> str:
    """Join list elements with ``|``; an element starting with Java inline flags ``(?i)`` turns
    them on for the rest of the joined pattern, as in Java (Python needs a scoped group)."""
    for index, element in enumerate(elements):
        match = _LEADING_FLAGS.match(element)
        if match is not None and (match.group(1) or match.group(2)):
            on = _python_flags(match.group(1) or "")
            off = _python_flags(match.group(2) or "")
            rest = [element[match.end() :], *elements[index + 1 :]]
            head = "|".join(elements[:index])
            flags = on + (f"-{off}" if off else "")
            scoped = f"(?{flags}:{_scope_flags(rest)})" if flags else _scope_flags(rest)
            return f"{head}|{scoped}" if index else scoped
    return "|".join(elements)


def _translate(pattern: str) -> str:
    """Rewrite the Java-only constructs of ``pattern``, one construct at a time."""
    out: list[str] = []
    i = 0
    class_start: int | None = None  # inside a character class: where its members start
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            text, i = _escape(pattern, i, in_class=class_start is not None)
        elif class_start is not None:
            _check_class_member(pattern, i)
            if c == "]" and i > class_start:
                class_start = None
            text, i = c, i + 1
        elif c == "[":
            class_start = _class_members_start(pattern, i)
            text, i = pattern[i:class_start], class_start
        elif pattern.startswith("(?<", i) and not pattern.startswith(("(?<=", "(?<!"), i):
            text, i = "(?P<", i + 3  # a named group
        else:
            text, i = c, i + 1
        out.append(text)
    return "".join(out)


_JAVA_ESCAPES: Final[Mapping[str, str]] = {"z": "\\Z", "Z": "(?=\\n?\\Z)", "e": "\\x1b"}
"""Java escapes whose Python equivalent is spelled differently."""
_PYTHON_LETTER_ESCAPES: Final = "abdDfnrsStwWBxu0AuUN"
_NO_PYTHON_ESCAPES: Final = "hHRXGKcvV"


def _escape(pattern: str, i: int, *, in_class: bool) -> tuple[str, int]:
    """The escape starting with the backslash at ``i``: its Python text and the index after it."""
    if i + 1 >= len(pattern):
        raise ValueError("the pattern ends with a lone backslash")
    d = pattern[i + 1]
    if d == "Q":
        return _quoted(pattern, i)
    if d in "pP":
        return _character_property(pattern, i, in_class=in_class)
    if d in _JAVA_ESCAPES:
        return _JAVA_ESCAPES[d], i + 2
    if d == "k" and pattern.startswith("<", i + 2):
        return _named_back_reference(pattern, i)
    if d in _NO_PYTHON_ESCAPES or (d.isalpha() and d not in _PYTHON_LETTER_ESCAPES):
        raise ValueError(f"the Java escape \\{d} has no Python 're' equivalent")
    return pattern[i : i + 2], i + 2


def _quoted(pattern: str, i: int) -> tuple[str, int]:
    """``\\Q…\\E`` (or ``\\Q…`` to the end): the text between, escaped."""
    end = pattern.find("\\E", i + 2)
    literal = pattern[i + 2 :] if end < 0 else pattern[i + 2 : end]
    return "".join(re.escape(ch) for ch in literal), len(pattern) if end < 0 else end + 2


def _character_property(pattern: str, i: int, *, in_class: bool) -> tuple[str, int]:
    """``\\p{Name}``, ``\\pL`` or a negated ``\\P…``: the class of its POSIX members."""
    negated = pattern[i + 1] == "P"
    match = re.match(r"\{(?:Is)?([A-Za-z_]+)\}|([A-Za-z])", pattern[i + 2 :])
    name = (match.group(1) or match.group(2)) if match else None
    body = _POSIX.get(name or "") or _POSIX.get(f"Is{name}" if name else "")
    if match is None or body is None or (in_class and negated):
        shown = pattern[i : i + 2 + (match.end() if match else 0)]
        raise ValueError(f"the Java character property {shown} has no Python 're' equivalent")
    text = body if in_class else f"[{'^' if negated else ''}{body}]"
    return text, i + 2 + match.end()


def _named_back_reference(pattern: str, i: int) -> tuple[str, int]:
    """``\\k<name>``: Python's ``(?P=name)``."""
    end = pattern.find(">", i + 3)
    if end < 0:
        raise ValueError("unterminated \\k<name> back-reference")
    return f"(?P={pattern[i + 3 : end]})", end + 1


def _check_class_member(pattern: str, i: int) -> None:
    """Reject the Java character-class syntax Python reads differently."""
    if pattern[i] == "[":
        raise ValueError("Java character-class union '[a[b]]' is not supported")
    if pattern.startswith("&&", i):
        raise ValueError("Java character-class intersection '&&' is not supported")


def _class_members_start(pattern: str, i: int) -> int:
    """Where the members of the character class opened at ``i`` start: after ``[``, an optional
    ``^`` and a leading ``]`` (a literal there)."""
    j = i + 1
    if pattern.startswith("^", j):
        j += 1
    if pattern.startswith("]", j):
        j += 1
    return j


def java_regex_to_python(elements: Sequence[str]) -> str:
    """The Python regex equivalent to MM2's ``String.join("|", elements)`` Java regex.

    Raises ``ValueError`` for Java syntax with no faithful Python equivalent.
    """
    return _translate(_scope_flags(elements))


@attrs.frozen
class RegexList:
    """A compiled MM2 regex list. ``patterns`` are the list elements as written."""

    patterns: tuple[str, ...]
    regex: re.Pattern[str] | None = attrs.field(eq=False, repr=False)

    @classmethod
    def from_text(cls, text: str, *, key: str, alias: str | None = None) -> RegexList:
        """Parse and compile a list value such as ``"orders.*, payments"``."""
        return cls.from_patterns(parse_list(text), key=key, alias=alias)

    @classmethod
    def from_patterns(
        cls, patterns: Sequence[str], *, key: str, alias: str | None = None
    ) -> RegexList:
        """Compile list elements; ``key``/``alias`` name the setting in errors."""
        patterns = tuple(patterns)
        if not patterns:
            return cls((), None)
        where = f" (flow {alias})" if alias else ""
        shown = ", ".join(patterns)
        try:
            source = java_regex_to_python(patterns)
        except ValueError as exc:
            raise ConfigError(
                f"{key}={shown!r}{where}: {exc}. Rewrite the regex without it.",
                key=key,
                alias=alias,
                value=shown,
            ) from None
        try:
            regex = re.compile(source, re.ASCII)
        except re.error as exc:
            hint = ""
            if "global flags not at the start" in str(exc):
                hint = " Put inline flags such as (?i) at the start of a list element."
            raise ConfigError(
                f"{key}={shown!r}{where}: invalid regular expression: {exc}.{hint}",
                key=key,
                alias=alias,
                value=shown,
            ) from None
        return cls(patterns, regex)

    def matches(self, name: str) -> bool:
        """True when ``name`` fully matches one of the patterns (never for an empty list)."""
        return self.regex is not None and self.regex.fullmatch(name) is not None


def _regex_list(config: Mapping[str, str], key: str, default: str) -> RegexList:
    return RegexList.from_text(config.get(key, default), key=key)


@attrs.frozen
class DefaultTopicFilter:
    """MM2's ``DefaultTopicFilter``: ``topics`` (default ``.*``) minus ``topics.exclude``
    (default ``mm2.*\\.internal, .*\\.replica, __.*``)."""

    include: RegexList
    exclude: RegexList

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> DefaultTopicFilter:
        return cls(
            _regex_list(config, "topics", ".*"),
            _regex_list(config, "topics.exclude", TOPICS_EXCLUDE_DEFAULT),
        )

    def should_replicate_topic(self, topic: str) -> bool:
        return self.include.matches(topic) and not self.exclude.matches(topic)


@attrs.frozen
class DefaultGroupFilter:
    """MM2's ``DefaultGroupFilter``: ``groups`` (default ``.*``) minus ``groups.exclude``
    (default ``console-consumer-.*, connect-.*, __.*``)."""

    include: RegexList
    exclude: RegexList

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> DefaultGroupFilter:
        return cls(
            _regex_list(config, "groups", ".*"),
            _regex_list(config, "groups.exclude", GROUPS_EXCLUDE_DEFAULT),
        )

    def should_replicate_group(self, group: str) -> bool:
        return self.include.matches(group) and not self.exclude.matches(group)


@attrs.frozen
class DefaultConfigPropertyFilter:
    """MM2's ``DefaultConfigPropertyFilter``: copies every topic config property except those
    matching ``config.properties.exclude``; a property at its default on the source is copied
    only with ``use.defaults.from=source`` (else the target's own default applies)."""

    exclude: RegexList
    use_defaults_from: str = "target"

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> DefaultConfigPropertyFilter:
        return cls(
            _regex_list(config, "config.properties.exclude", CONFIG_PROPERTIES_EXCLUDE_DEFAULT),
            config.get("use.defaults.from", "target").strip(),
        )

    def should_replicate_config_property(self, prop: str) -> bool:
        return not self.exclude.matches(prop)

    def should_replicate_source_default(self, prop: str) -> bool:
        del prop
        return self.use_defaults_from == "source"


_T = TypeVar("_T")


def import_by_path(name: str, key: str) -> object:
    """The object a Python path names (``pkg.module:Class`` or ``pkg.module.Class``), or a
    :class:`ConfigError` naming ``key`` when it cannot be imported."""
    module_name, _, attr = name.partition(":") if ":" in name else name.rpartition(".")
    try:
        obj: object = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(f"{key}={name!r}: cannot import it: {exc}", key=key, value=name) from exc
    return obj


def load_filter(
    class_name: str,
    *,
    key: str,
    config: Mapping[str, str],
    builtin_names: Sequence[str],
    builtin: Callable[[], _T],
    protocol: type,
) -> _T:
    """Build the filter named by ``class_name``: ``builtin()`` for MM2's default (by Java or
    simple name), else the Python class at ``pkg.module:Class`` built from ``config``.

    The result must implement ``protocol``; every failure is a :class:`ConfigError` naming ``key``.
    """
    name = class_name.strip()
    if name in builtin_names:
        return builtin()
    if name.startswith(("org.apache.", "com.", "io.")) or ("." not in name and ":" not in name):
        raise ConfigError(
            f"{key}={name!r} is a Java class mirrorlib cannot load: use the default "
            f"({builtin_names[0]}) or a Python path 'pkg.module:Class'.",
            key=key,
            value=name,
        )
    obj = import_by_path(name, key)
    if not isinstance(obj, type):
        raise ConfigError(f"{key}={name!r} is not a class", key=key, value=name)
    try:
        factory = getattr(obj, "from_config", None)
        instance = factory(config) if callable(factory) else obj()
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(
            f"{key}={name!r}: building the filter failed: {type(exc).__name__}: {exc}",
            key=key,
            value=name,
        ) from exc
    if not isinstance(instance, protocol):
        raise ConfigError(
            f"{key}={name!r} does not implement {protocol.__name__}", key=key, value=name
        )
    return cast(_T, instance)
