"""Generated documentation blocks (``python -m mirrorlib.cli.docs_gen`` rewrites them in ``docs/``).

* ``docs/migrating-from-mm2.md``: every MM2 key grouped by its status in mirrorlib, from
  :data:`mirrorlib.core.config.keys.KEYS` and
  :data:`~mirrorlib.core.config.keys.KEY_FAMILIES`. A test keeps the page in sync with the registry.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mirrorlib.core.config.keys import KEY_FAMILIES, KEYS, Status, render_markdown_table

__all__ = ["BEGIN", "END", "migration_markdown", "replace_block"]

BEGIN = "<!-- BEGIN MM2 KEYS (generated: python -m mirrorlib.cli.docs_gen) -->\n"
END = "<!-- END MM2 KEYS -->"

_TITLES = {
    Status.SUPPORTED: ("Supported", "Same meaning as in MM2."),
    Status.CHANGED: ("Changed", "Accepted; the note says what differs."),
    Status.NOT_SUPPORTED: (
        "Not supported",
        "Rejected when set to anything but the default; the note says why.",
    ),
    Status.NOT_APPLICABLE: (
        "Not applicable",
        "MM2 or Kafka Connect settings with no role in mirrorlib: accepted and reported in "
        "`config.warnings`, never an error.",
    ),
    Status.EXTENSION: ("mirrorlib only", "Additions MM2 does not have (MM2 ignores them)."),
}


def migration_markdown() -> str:
    """Every key of the registry, one table per status, with counts."""
    out: list[str] = []
    every = (*KEYS.values(), *KEY_FAMILIES)
    counts = {s: sum(1 for k in every if k.status is s) for s in _TITLES}
    out.append(
        "| Status | Keys |\n|---|---|\n"
        + "".join(f"| {_TITLES[s][0]} | {n} |\n" for s, n in counts.items())
    )
    for status, (title, meaning) in _TITLES.items():
        specs = [k for k in every if k.status is status]
        if not specs:
            continue
        out.append(f"### {title} ({len(specs)})\n\n{meaning}\n\n{render_markdown_table(specs)}")
    return "\n".join(out)


def replace_block(text: str, block: str) -> str:
    start = text.index(BEGIN) + len(BEGIN)
    end = text.index(END)
    return text[:start] + block + text[end:]


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else Path.cwd()
    page = root / "docs" / "migrating-from-mm2.md"
    page.write_text(replace_block(page.read_text(encoding="utf-8"), migration_markdown()),
                    encoding="utf-8")  # fmt: skip
    print(f"rewrote {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
