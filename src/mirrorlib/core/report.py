"""Readable reports as data: lines and tables, and durations for people.

The ``describe()`` methods of :class:`~mirrorlib.core.audit.FlowHealth`,
:class:`~mirrorlib.core.audit.VerifyReport` and :class:`~mirrorlib.core.failover.FailoverPlan`
are built from :data:`Block` lists (their ``blocks()``): :func:`render_plain` turns them into the
stable plain text they return, and the command line (:mod:`mirrorlib.cli.output`) draws the same
blocks as terminal tables when it writes to one. One report, two renderings, nothing computed
twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs

__all__ = ["Block", "Table", "format_table", "human_duration", "render_plain"]


@attrs.frozen
class Table:
    """Rows of cells under a header; rendered plain as left-aligned, indented columns."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def lines(self, indent: str = "  ") -> list[str]:
        return format_table([self.header, *self.rows], indent)


Block = str | Table
"""One part of a report: a line of text, or a :class:`Table`."""


def render_plain(blocks: Iterable[Block]) -> str:
    """The plain-text rendering of ``blocks``: lines as they are, tables as aligned columns."""
    lines: list[str] = []
    for block in blocks:
        if isinstance(block, Table):
            lines.extend(block.lines())
        else:
            lines.append(block)
    return "\n".join(lines)


def format_table(rows: Sequence[tuple[str, ...]], indent: str = "  ") -> list[str]:
    """Left-aligned columns; the first row is the header."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        indent + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def human_duration(seconds: float) -> str:
    """``seconds`` for people: ``4.2s`` under a minute, then ``1 min 26 s``, ``2 h 5 min``,
    ``3 d 4 h`` (whole units, rounded down; negative durations count as 0)."""
    seconds = max(seconds, 0.0)
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"
