"""Reading ``mm2.properties`` files, and resolving ``${provider:path:key}`` variables.

MM2 reads its configuration with ``java.util.Properties``. The syntax, which
:func:`parse_properties` follows exactly (it is built on the ``javaproperties`` library):

* a key ends at the first unescaped ``=``, ``:`` or whitespace; blanks around the separator are
  skipped, so ``a=b``, ``a : b`` and ``a b`` all set ``a`` to ``b``; trailing blanks of the value
  are kept;
* a line whose first non-blank character is ``#`` or ``!`` is a comment — there are **no inline
  comments**: ``x = true # on`` sets ``x`` to ``true # on``;
* a line ending in an odd number of backslashes continues on the next line (leading blanks of the
  next line are dropped);
* ``\\t``, ``\\n``, ``\\uXXXX``… are escapes; a backslash before any other character keeps the
  character;
* when a key appears twice, the last one wins.

Config providers (KIP-297) replace variables of the form ``${name:path:key}`` or ``${name:key}``
in values, where ``name`` is declared in ``config.providers`` and implemented by the class in
``config.providers.<name>.class``. mirrorlib implements Kafka's three built-ins:

* ``org.apache.kafka.common.config.provider.FileConfigProvider`` — ``key`` from the properties file
  ``path``;
* ``org.apache.kafka.common.config.provider.DirectoryConfigProvider`` — the content of the file
  ``path/key``;
* ``org.apache.kafka.common.config.provider.EnvVarConfigProvider`` — the environment variable
  ``key`` (no ``path``).

Their ``param.allowed.paths`` and ``param.allowlist.pattern`` settings are honoured.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Final

import attrs
import javaproperties

from mirrorlib.core.config.keys import masked, masked_repr
from mirrorlib.errors import ConfigError

__all__ = [
    "DIRECTORY_PROVIDER",
    "ENV_PROVIDER",
    "FILE_PROVIDER",
    "ParsedProperties",
    "ResolvedProperties",
    "parse_properties",
    "read_properties_file",
    "resolve_variables",
]

_LINE_BREAK: Final = re.compile(r"\r\n|\r|\n")


@attrs.frozen
class ParsedProperties:
    """Keys and values of a properties text, in first-appearance order, with line numbers.

    ``lines`` gives the line on which the winning (last) occurrence of each key starts; ``origin``
    names the file, for messages.
    """

    values: Mapping[str, str] = attrs.field(repr=masked_repr)  # secrets masked
    lines: Mapping[str, int] = attrs.field(factory=dict)
    origin: str | None = None

    def where(self, key: str) -> str:
        """``" (file.properties line 12)"`` for messages, or ``""`` when unknown."""
        line = self.lines.get(key)
        if line is None:
            return ""
        return f" ({self.origin or 'line'}{' line' if self.origin else ''} {line})"


def parse_properties(text: str, *, origin: str | None = None) -> ParsedProperties:
    """Parse Java ``.properties`` text (see the module docstring for the syntax)."""
    values: dict[str, str] = {}
    lines: dict[str, int] = {}
    line = 1
    elements: Iterator[javaproperties.PropertiesElement] = javaproperties.parse(text)
    while True:
        try:
            element = next(elements)
        except StopIteration:
            break
        except javaproperties.InvalidUEscapeError as exc:
            where = f"{origin} " if origin else ""
            raise ConfigError(
                f"Malformed \\uXXXX escape in {where}near line {line}: {exc}"
            ) from None
        if isinstance(element, javaproperties.KeyValue):
            values.pop(element.key, None)  # re-insert: last occurrence wins, order of first
            values[element.key] = element.value
            lines[element.key] = line
        line += len(_LINE_BREAK.findall(element.source))
    # Keep first-appearance order for readability of reports, but values of the last occurrence.
    return ParsedProperties(values, lines, origin)


def read_properties_file(path: str | os.PathLike[str]) -> ParsedProperties:
    """Read and parse a properties file.

    The file is read as UTF-8; if it is not valid UTF-8 it is read as ISO-8859-1, the encoding
    Java's ``Properties.load(InputStream)`` uses. ``\\uXXXX`` escapes work either way.
    """
    file = Path(path)
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise ConfigError(f"Cannot read configuration file {str(file)!r}: {exc}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    return parse_properties(text.removeprefix("\ufeff"), origin=str(file))


# -- config providers ------------------------------------------------------------------------------

FILE_PROVIDER: Final = "org.apache.kafka.common.config.provider.FileConfigProvider"
DIRECTORY_PROVIDER: Final = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"
ENV_PROVIDER: Final = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
_PROVIDERS_KEY: Final = "config.providers"

# Kafka's ConfigTransformer.DEFAULT_PATTERN
_VARIABLE: Final = re.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")


@attrs.frozen
class ResolvedProperties:
    """Values with every provider variable replaced; ``secret_keys`` lists the keys whose value
    came (partly) from a provider, which are masked in messages."""

    values: Mapping[str, str]
    secret_keys: frozenset[str]

    def __repr__(self) -> str:  # secrets masked
        shown = masked(self.values, self.secret_keys)
        return f"ResolvedProperties(values={shown!r}, secret_keys={sorted(self.secret_keys)!r})"


_Lookup = Callable[[str, str, str], str]  # (path, key, config key) -> value


def _allowed_paths(params: Mapping[str, str]) -> list[Path] | None:
    raw = params.get("allowed.paths")
    if raw is None or not raw.strip():
        return None
    return [Path(os.path.normpath(p)) for p in re.split(r"\s*,\s*", raw.strip()) if p]


def _check_allowed(path: Path, allowed: list[Path] | None, key: str, provider: str) -> None:
    if allowed is None:
        return
    normal = Path(os.path.normpath(path))
    if not normal.is_absolute() or not any(normal.is_relative_to(a) for a in allowed):
        raise ConfigError(
            f"{key}: path {str(path)!r} is not under the allowed.paths of config provider "
            f"{provider!r}",
            key=key,
        )


def _file_provider(name: str, params: Mapping[str, str]) -> _Lookup:
    allowed = _allowed_paths(params)
    cache: dict[str, Mapping[str, str]] = {}

    def lookup(path: str, item: str, key: str) -> str:
        if not path:
            raise ConfigError(f"{key}: config provider {name!r} needs a file path", key=key)
        _check_allowed(Path(path), allowed, key, name)
        if path not in cache:
            try:
                text = Path(path).read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(
                    f"{key}: config provider {name!r} cannot read {path!r}: {exc}", key=key
                ) from exc
            cache[path] = parse_properties(text, origin=path).values
        data = cache[path]
        if item not in data:
            raise ConfigError(
                f"{key}: config provider {name!r} found no key {item!r} in {path!r}", key=key
            )
        return data[item]

    return lookup


def _directory_provider(name: str, params: Mapping[str, str]) -> _Lookup:
    allowed = _allowed_paths(params)

    def lookup(path: str, item: str, key: str) -> str:
        if not path:
            raise ConfigError(f"{key}: config provider {name!r} needs a directory", key=key)
        file = Path(path) / item
        _check_allowed(file, allowed, key, name)
        if not file.is_file():
            raise ConfigError(
                f"{key}: config provider {name!r} found no file {item!r} in directory {path!r}",
                key=key,
            )
        try:
            return file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"{key}: config provider {name!r} cannot read {str(file)!r}: {exc}", key=key
            ) from exc

    return lookup


def _env_provider(name: str, params: Mapping[str, str]) -> _Lookup:
    pattern_text = params.get("allowlist.pattern", ".*")
    try:
        allow = re.compile(pattern_text)
    except re.error as exc:
        raise ConfigError(
            f"config.providers.{name}.param.allowlist.pattern: invalid regex: {exc}",
            key=f"config.providers.{name}.param.allowlist.pattern",
            value=pattern_text,
        ) from None

    def lookup(path: str, item: str, key: str) -> str:
        if path:
            raise ConfigError(
                f"{key}: config provider {name!r} takes no path; write ${{{name}:{item}}}",
                key=key,
            )
        if not allow.fullmatch(item):
            raise ConfigError(
                f"{key}: environment variable {item!r} is not allowed by "
                f"config.providers.{name}.param.allowlist.pattern",
                key=key,
            )
        if item not in os.environ:
            raise ConfigError(
                f"{key}: environment variable {item!r} (config provider {name!r}) is not set",
                key=key,
            )
        return os.environ[item]

    return lookup


_BUILTINS: Final[Mapping[str, Callable[[str, Mapping[str, str]], _Lookup]]] = {
    FILE_PROVIDER: _file_provider,
    DIRECTORY_PROVIDER: _directory_provider,
    ENV_PROVIDER: _env_provider,
    "FileConfigProvider": _file_provider,
    "DirectoryConfigProvider": _directory_provider,
    "EnvVarConfigProvider": _env_provider,
}


def _providers(values: Mapping[str, str]) -> dict[str, _Lookup]:
    names = [n for n in re.split(r"\s*,\s*", values.get(_PROVIDERS_KEY, "").strip()) if n]
    providers: dict[str, _Lookup] = {}
    for name in names:
        class_key = f"{_PROVIDERS_KEY}.{name}.class"
        class_name = values.get(class_key, "").strip()
        if not class_name:
            raise ConfigError(
                f"{class_key} is missing: config provider {name!r} is listed in "
                f"{_PROVIDERS_KEY} but has no class",
                key=class_key,
            )
        factory = _BUILTINS.get(class_name)
        if factory is None:
            raise ConfigError(
                f"{class_key}={class_name!r} is not supported: mirrorlib implements Kafka's "
                f"built-in providers {FILE_PROVIDER}, {DIRECTORY_PROVIDER} and {ENV_PROVIDER}. "
                "Resolve other secrets before starting mirrorlib (e.g. into environment "
                "variables read with EnvVarConfigProvider).",
                key=class_key,
                value=class_name,
            )
        prefix = f"{_PROVIDERS_KEY}.{name}.param."
        params = {k[len(prefix) :]: v for k, v in values.items() if k.startswith(prefix)}
        providers[name] = factory(name, params)
    return providers


def resolve_variables(values: Mapping[str, str]) -> ResolvedProperties:
    """Replace ``${provider:path:key}`` variables in every value (``config.providers*`` keys
    excepted), as Kafka's ``ConfigTransformer`` does.

    Unlike Kafka, a variable that cannot be resolved — unknown provider name, missing file, key
    or environment variable — is a :class:`ConfigError` naming the key, never left in place.
    """
    providers: dict[str, _Lookup] | None = None
    resolved: dict[str, str] = {}
    secret: set[str] = set()
    for key, value in values.items():
        if key.startswith(_PROVIDERS_KEY) or "${" not in value:
            resolved[key] = value
            continue
        if providers is None:
            providers = _providers(values)
        known = providers

        def substitute(
            match: re.Match[str], key: str = key, known: dict[str, _Lookup] = known
        ) -> str:
            name, path, item = match.group(1), match.group(3) or "", match.group(4)
            lookup = known.get(name)
            if lookup is None:
                declared = ", ".join(known) or "none"
                raise ConfigError(
                    f"{key}: the variable ${{{name}:...}} names config provider {name!r}, which "
                    f"is not declared in {_PROVIDERS_KEY} (declared: {declared}). Declare it, "
                    f"e.g. {_PROVIDERS_KEY}={name} and {_PROVIDERS_KEY}.{name}.class="
                    f"{ENV_PROVIDER}.",
                    key=key,
                )
            return lookup(path, item, key)

        if _VARIABLE.search(value):
            secret.add(key)
        resolved[key] = _VARIABLE.sub(substitute, value)
    return ResolvedProperties(resolved, frozenset(secret))
