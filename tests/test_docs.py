"""Docs stay in sync with the code: generated blocks, links, nav."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from mirrorlib.cli.docs_gen import BEGIN, END, migration_markdown

ROOT = Path(__file__).resolve().parent.parent


def test_migration_page_lists_every_key_from_the_registry() -> None:
    text = (ROOT / "docs" / "migrating-from-mm2.md").read_text(encoding="utf-8")
    block = text[text.index(BEGIN) + len(BEGIN) : text.index(END)]
    assert block == migration_markdown(), (
        "docs/migrating-from-mm2.md is out of date: run `python -m mirrorlib.cli.docs_gen`"
    )
    from mirrorlib.core.config.keys import KEYS

    for name in KEYS:
        assert f"| `{name}` |" in block


def test_relative_links_resolve() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if "://" in target:
                continue
            assert (page.parent / target).exists(), f"{page.name}: broken link {target}"


def test_nav_pages_exist_except_pages_other_engineers_write() -> None:
    nav = re.findall(r":\s*([\w.-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
    missing = [p for p in nav if not (ROOT / "docs" / p).exists()]
    assert set(missing) <= {"replicator.md", "benchmarks.md"}, missing


# The Sphinx roles of the docstrings are rewritten into links at build time by the griffe
# extension in scripts/mkdocs_xref.py. A target that resolves to nothing is rendered as code:
# fine for a stdlib name; anything else is a stale name in a docstring (fix it, or list it here).
UNRESOLVED_OUTSIDE_STDLIB: set[str] = set()


@pytest.fixture(scope="module")
def xref() -> ModuleType:
    """scripts/mkdocs_xref.py, the griffe extension mkdocs.yml loads."""
    pytest.importorskip("griffe")
    spec = importlib.util.spec_from_file_location(
        "mkdocs_xref", ROOT / "scripts" / "mkdocs_xref.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def loaded(xref: ModuleType) -> tuple[Any, Any]:
    """mirrorlib as the docs build loads it: (package, extension)."""
    import griffe

    extension = xref.SphinxCrossRefs()
    package = griffe.load(
        "mirrorlib", search_paths=[str(ROOT / "src")], extensions=griffe.load_extensions(extension)
    )
    return package, extension


def test_no_docstring_keeps_a_sphinx_role(xref: ModuleType, loaded: tuple[Any, Any]) -> None:
    package, _ = loaded
    documented = [obj for obj in xref.documented(package) if obj.docstring]
    assert len(documented) > 100
    raw = [obj.path for obj in documented if xref.ROLE.search(obj.docstring.value)]
    assert raw == []
    links = sum(obj.docstring.value.count("<autoref ") for obj in documented)
    assert links > 200


def test_unresolved_cross_references_do_not_grow(xref: ModuleType, loaded: tuple[Any, Any]) -> None:
    _, extension = loaded
    targets = {
        re.sub(r"\s+", "", xref.ROLE.fullmatch(role)["body"]).lstrip("~!")
        for roles in extension.unresolved.values()
        for role in roles
    }
    stale = {t for t in targets if t.split(".")[0] not in sys.stdlib_module_names}
    assert stale == UNRESOLVED_OUTSIDE_STDLIB, extension.unresolved


@pytest.mark.parametrize(
    ("scope", "text", "expected"),
    [
        # an unqualified method, from a sibling method's docstring
        (
            "runtime.replicator.Replicator.run",
            ":meth:`stop`",
            '<autoref identifier="mirrorlib.runtime.replicator.Replicator.stop" optional>'
            "<code>stop()</code></autoref>",
        ),
        # `~` shows the last component; a public name of the package resolves to its definition
        (
            "runtime.replicator",
            ":class:`~mirrorlib.MirrorConfig`",
            '<autoref identifier="mirrorlib.core.config.mirror.MirrorConfig" optional>'
            "<code>MirrorConfig</code></autoref>",
        ),
        # an explicit title
        (
            "core.policy",
            ":func:`the cycle check <mirrorlib.core.policy.is_cycle>`",
            '<autoref identifier="mirrorlib.core.policy.is_cycle" optional>'
            "<code>the cycle check</code></autoref>",
        ),
        # `!` and unknown targets are code, not links
        ("core.policy", ":class:`!ReplicationPolicy`", "<code>ReplicationPolicy</code>"),
        ("core.retry", ":class:`threading.Event`", "<code>threading.Event</code>"),
    ],
)
def test_roles_resolve_like_sphinx(
    xref: ModuleType, loaded: tuple[Any, Any], scope: str, text: str, expected: str
) -> None:
    package, _ = loaded
    assert xref.rewrite(f"see {text}.", package[scope]) == f"see {expected}."


def test_api_reference_renders_cross_references_as_links(tmp_path: Path) -> None:
    pytest.importorskip("mkdocstrings_handlers.python")
    site = tmp_path / "site"
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)],
        cwd=ROOT,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT / "src")},
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    for page in ("api", "exceptions"):
        html = (site / page / "index.html").read_text(encoding="utf-8")
        raw = re.findall(r":(?:class|meth|func|mod|data|attr|exc|obj|const):`?[^`<]*", html)
        assert raw == [], page
        assert "<autoref" not in html
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    assert 'href="#mirrorlib.runtime.replicator.Replicator.stop"><code>stop()</code></a>' in api
    assert 'href="../exceptions/#mirrorlib.errors.ConfigError"><code>ConfigError</code></a>' in api
