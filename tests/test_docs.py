"""Docs stay in sync with the code: generated blocks, links, nav."""

from __future__ import annotations

import re
from pathlib import Path

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
