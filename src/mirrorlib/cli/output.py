"""How the command line writes: reports, live status and progress.

On a terminal, with `rich <https://rich.readthedocs.io>`_ installed (the ``cli`` extra:
``pip install 'mirrorlib[cli]'``), reports are drawn as tables, ``status --watch`` redraws in
place (``rich.live``) and ``verify`` shows a progress bar with rate and time left. Otherwise —
output piped or redirected, ``TERM=dumb``, or ``rich`` not installed — everything is plain,
stable text: the reports' ``describe()`` (see :mod:`mirrorlib.core.report`), progress as one
line on stderr now and then, and each ``--watch`` refresh printed after the previous one.
Machine-readable ``--json`` output never comes through here.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from mirrorlib.core.report import Block, Table, render_plain

if TYPE_CHECKING:
    from mirrorlib.core.audit import VerifyProgress

__all__ = ["PLAIN_PROGRESS_EVERY_S", "Output", "rich_available", "status_header"]

PLAIN_PROGRESS_EVERY_S = 1.0
"""How often plain progress prints a line (seconds); the last report always prints."""

# line prefixes drawn in a style of their own on a terminal (the text stays the same)
_STYLES = (
    ("REFUSED", "bold red"),
    ("PROBLEMS FOUND", "bold red"),
    ("  error:", "red"),
    ("note:", "yellow"),
    ("skip ", "dim"),
    ("  internal topics", "dim"),
    ("committed on", "bold green"),
    ("dry run:", "bold yellow"),
)


def rich_available() -> bool:
    """Whether ``rich`` can be imported (the ``cli`` extra is installed)."""
    return importlib.util.find_spec("rich") is not None


def _terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"


class Output:
    """Writes reports to ``out`` and progress to ``err``: with ``rich`` when ``fancy`` (default:
    ``rich`` installed and ``out`` a terminal), else plain text."""

    def __init__(
        self,
        *,
        out: TextIO | None = None,
        err: TextIO | None = None,
        fancy: bool | None = None,
    ) -> None:
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.fancy = (rich_available() and _terminal(self.out)) if fancy is None else fancy
        self._console: Any = None
        self._err_console: Any = None
        if self.fancy:
            from rich.console import Console

            self._console = Console(file=self.out, highlight=False)
            self._err_console = Console(file=self.err, highlight=False)

    # -- reports ----------------------------------------------------------------------------

    def report(self, *sections: Sequence[Block]) -> None:
        """Reports one after the other: lines and tables (each one's first line is its
        headline)."""
        sections = tuple(blocks for blocks in sections if blocks)
        if self._console is None:
            for blocks in sections:
                print(render_plain(blocks), file=self.out, flush=True)
        else:
            self._console.print(_renderable(sections))

    def line(self, text: str) -> None:
        """A line of its own (styled like a report line on a terminal)."""
        self.report([text])

    @contextlib.contextmanager
    def activity(self, what: str) -> Iterator[None]:
        """Something that takes a moment: a spinner on a terminal, else one line on stderr."""
        if self._err_console is None:
            print(what, file=self.err, flush=True)
            yield
            return
        with self._err_console.status(what):
            yield

    # -- progress -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def progress(self) -> Iterator[Callable[[VerifyProgress], None]]:
        """A callback for :class:`~mirrorlib.core.audit.VerifyProgress` reports: a bar per flow
        with count, percentage, rate and time left on a terminal; else a line on stderr at most
        every :data:`PLAIN_PROGRESS_EVERY_S` and for the last report."""
        if self._err_console is None or not _terminal(self.err):
            last = 0.0

            def plain(p: VerifyProgress) -> None:
                nonlocal last
                now = time.monotonic()
                if p.finished or now - last >= PLAIN_PROGRESS_EVERY_S:
                    last = now
                    print(str(p), file=self.err, flush=True)

            yield plain
            return
        with _progress_bar(self._err_console) as bar:
            tasks: dict[str, Any] = {}

            def fancy(p: VerifyProgress) -> None:
                if p.flow not in tasks:
                    tasks[p.flow] = bar.add_task(f"verify {p.flow}", total=p.total)
                bar.update(tasks[p.flow], completed=p.done, total=p.total)

            yield fancy

    # -- live ---------------------------------------------------------------------------------

    def watch(
        self,
        frame: Callable[[], Sequence[Sequence[Block]]],
        every: float | None,
        *,
        activity: str,
    ) -> None:
        """Show ``frame()`` once (``every`` ``None``), or every ``every`` seconds until Ctrl-C:
        redrawn in place on a terminal, else printed one after the other."""
        if self._console is None or every is None:
            while True:
                with self.activity(activity):
                    sections = frame()
                self.report(*sections)
                if every is None:
                    return
                try:
                    time.sleep(every)
                except KeyboardInterrupt:
                    return
        from rich.live import Live

        with Live(console=self._console, auto_refresh=False) as live:
            try:
                while True:
                    live.update(_renderable(frame()), refresh=True)
                    time.sleep(every)
            except KeyboardInterrupt:
                return


def _style(line: str) -> str:
    return next((style for prefix, style in _STYLES if prefix in line[: len(prefix) + 40]), "")


def _renderable(sections: Sequence[Sequence[Block]]) -> Any:
    """``sections`` as one ``rich`` renderable: headlines bold, tables as tables."""
    from rich import box
    from rich.console import Group
    from rich.padding import Padding
    from rich.table import Table as RichTable
    from rich.text import Text

    parts: list[Any] = []
    for i, block in ((i, b) for blocks in sections for i, b in enumerate(blocks)):
        if isinstance(block, Table):
            table = RichTable(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
            for c, name in enumerate(block.header):
                numeric = all(_numeric(row[c]) for row in block.rows)
                table.add_column(name, justify="right" if numeric else "left", no_wrap=c == 0)
            for row in block.rows:
                table.add_row(*row)
            parts.append(Padding(table, (0, 0, 0, 2)))
        else:
            style = _style(block) or ("bold" if i == 0 else "")
            parts.append(Text(block, style=style))
    return Group(*parts)


def _numeric(cell: str) -> bool:
    return cell in {"-", "?"} or cell.lstrip("<=").replace(".", "", 1).isdigit()


def _progress_bar(console: Any) -> Any:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TaskProgressColumn,
        TextColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class RateColumn(ProgressColumn):
        """Records read per second."""

        def render(self, task: Any) -> Text:
            speed = task.finished_speed or task.speed
            return Text("" if speed is None else f"{speed:,.0f} records/s", style="cyan")

    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        TaskProgressColumn(), RateColumn(), TimeRemainingColumn(),
        console=console, transient=False,
    )  # fmt: skip


def status_header(flows: int) -> str:
    """The first line of each ``mirrorlib status`` report."""
    return f"{time.strftime('%Y-%m-%d %H:%M:%S')} — {flows} flow(s)"
