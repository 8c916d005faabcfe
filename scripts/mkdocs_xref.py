"""Griffe extension for the docs build: the Sphinx roles in mirrorlib's docstrings become links.

The docstrings cross-reference with Sphinx roles (``:class:`MirrorConfig```,
``:meth:`~mirrorlib.kafka.client.MirrorClient.remote_topics```, ``:func:``, ``:mod:``, ...).
mkdocstrings' Sphinx parser reads the field lists (``:param:``, ``:returns:``) but leaves inline
roles as text, so this extension rewrites each role, once the package is loaded, into an
mkdocs-autorefs reference to the object's canonical path.

A target is resolved the way Sphinx does: in the scope of the documented object (its members,
then its class's, then its module's, including the names the module imports), then as an
absolute path, then as a public name of the package (``mirrorlib.X``). A ``~`` shows only the
last component; ``text <target>`` sets the text; ``!`` turns the link off.

Resolved references are *optional* autorefs: an object that exists but is not rendered on any
page (a private helper module, say) shows as code instead of failing ``mkdocs build --strict``.
A target that does not resolve at all (a stdlib name, a typo) is rendered as code and recorded
in :attr:`SphinxCrossRefs.unresolved`.

Enabled in mkdocs.yml::

    options:
      extensions:
        - scripts/mkdocs_xref.py:SphinxCrossRefs
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Iterator
from contextlib import suppress
from typing import Any

from griffe import (
    AliasResolutionError,
    CyclicAliasError,
    Extension,
    GriffeLoader,
    Module,
    NameResolutionError,
    Object,
)

log = logging.getLogger("mkdocs.plugins.mirrorlib.xref")

ROLE = re.compile(
    r":(?:py:)?(?P<role>class|meth|func|mod|data|attr|exc|obj|const):`(?P<body>[^`]+)`"
)
"""A Sphinx cross-reference role, as written in a docstring."""

_EXPLICIT_TITLE = re.compile(r"(?P<title>.+?)\s*<(?P<target>[^<>]+)>", re.S)
_CALLABLE_ROLES = frozenset({"meth", "func"})


def resolve(target: str, scope: Object) -> str | None:
    """The canonical path of ``target`` as seen from ``scope``'s docstring, or None."""
    target = target.removesuffix("()").lstrip(".")
    head, dot, rest = target.partition(".")
    candidates = [target, f"{scope.package.path}.{target}"]
    with suppress(NameResolutionError):
        candidates.insert(0, scope.resolve(head) + dot + rest)
    for path in candidates:
        try:
            return str(scope.modules_collection.get_member(path).canonical_path)
        except (KeyError, AliasResolutionError, CyclicAliasError):
            continue
    return None


def rewrite(text: str, scope: Object, unresolved: list[str] | None = None) -> str:
    """``text`` with every Sphinx role replaced by an autorefs link, or by code when its target
    does not resolve (the role is then appended to ``unresolved``)."""

    def replace(match: re.Match[str]) -> str:
        role = match["role"]
        body = re.sub(r"\s+", " ", match["body"]).strip()
        linked = not body.startswith("!")
        body = body.removeprefix("!")
        if explicit := _EXPLICIT_TITLE.fullmatch(body):
            title, target = explicit["title"], explicit["target"].replace(" ", "")
        else:
            target = body.removeprefix("~").replace(" ", "")
            title = target.rsplit(".", 1)[-1] if body.startswith("~") else target
            if role in _CALLABLE_ROLES and not title.endswith(")"):
                title += "()"
        code = f"<code>{html.escape(title)}</code>"
        if not linked:
            return code
        path = resolve(target, scope)
        if path is None:
            if unresolved is not None:
                unresolved.append(match[0])
            return code
        return f'<autoref identifier="{html.escape(path)}" optional>{code}</autoref>'

    return ROLE.sub(replace, text)


def documented(obj: Object) -> Iterator[Object]:
    """``obj`` and every object defined under it (aliases, i.e. imported names, are skipped:
    their docstrings belong to the module that defines them)."""
    yield obj
    for member in obj.members.values():
        if not member.is_alias and isinstance(member, Object):
            yield from documented(member)


class SphinxCrossRefs(Extension):
    """Rewrites the Sphinx roles of every docstring of a loaded package."""

    def __init__(self) -> None:
        super().__init__()
        self.unresolved: dict[str, list[str]] = {}
        """Per object path, the roles whose target did not resolve (rendered as code)."""

    def on_package(self, *, pkg: Module, loader: GriffeLoader, **kwargs: Any) -> None:
        for obj in documented(pkg):
            if obj.docstring is None:
                continue
            missed: list[str] = []
            obj.docstring.value = rewrite(obj.docstring.value, obj, missed)
            if missed:
                self.unresolved[obj.path] = missed
                log.debug("%s: unresolved cross-references rendered as code: %s", obj.path, missed)
