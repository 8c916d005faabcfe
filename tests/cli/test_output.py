"""The command line's rendering: plain text off a terminal, rich tables and progress on one."""

from __future__ import annotations

import io

import pytest

from mirrorlib.cli.output import Output, rich_available
from mirrorlib.core.audit import FlowHealth, PartitionLag, VerifyProgress
from mirrorlib.core.report import Table, human_duration, render_plain


def _health() -> FlowHealth:
    return FlowHealth(
        "A", "B", "running",
        (PartitionLag("orders", 0, "A.orders", 10, 7, 3, 1.5, position_age_s=86.5),),
        heartbeat_age_s=0.4, checkpoint_age_s=3725.0,
    )  # fmt: skip


def test_human_duration() -> None:
    assert human_duration(0.04) == "0.0s"
    assert human_duration(4.25) == "4.2s"
    assert human_duration(60) == "1 min"
    assert human_duration(86.5) == "1 min 26 s"
    assert human_duration(3725) == "1 h 2 min"
    assert human_duration(7200) == "2 h"
    assert human_duration(90_000) == "1 d 1 h"
    assert human_duration(-3) == "0.0s"


def test_reports_use_human_durations() -> None:
    text = _health().describe()
    assert "checkpoint 1 h 2 min ago" in text and "1 min 26 s ago" in text


def test_render_plain_aligns_tables() -> None:
    table = Table(("a", "bb"), (("xxx", "1"), ("y", "22")))
    assert render_plain(["head", table]) == "head\n  a    bb\n  xxx  1\n  y    22"


def test_plain_output_off_a_terminal_is_the_describe_text() -> None:
    out, err = io.StringIO(), io.StringIO()
    output = Output(out=out, err=err)
    assert not output.fancy  # a StringIO is no terminal
    output.report(_health().blocks(), [], ["dry run: nothing committed"])
    assert out.getvalue() == _health().describe() + "\ndry run: nothing committed\n"


def test_plain_watch_once_prints_activity_on_stderr() -> None:
    out, err = io.StringIO(), io.StringIO()
    Output(out=out, err=err).watch(lambda: [["x"]], None, activity="reading ...")
    assert out.getvalue() == "x\n" and err.getvalue() == "reading ...\n"


def test_verify_progress_counts_and_percent() -> None:
    assert str(VerifyProgress("A->B", 0, 1441)) == "verify A->B: 0/1441 records read (0%)"
    assert VerifyProgress("A->B", 1441, 1441, finished=True).percent == 100.0
    assert VerifyProgress("A->B", 0, 0).percent == 100.0


def test_plain_progress_is_throttled_but_prints_the_last_report() -> None:
    err = io.StringIO()
    with Output(out=io.StringIO(), err=err).progress() as progress:
        for done in range(0, 1001, 100):
            progress(VerifyProgress("A->B", done, 1000))
        progress(VerifyProgress("A->B", 1000, 1000, finished=True))
    lines = err.getvalue().splitlines()
    assert lines[0] == "verify A->B: 0/1000 records read (0%)"
    assert lines[-1] == "verify A->B: 1000/1000 records read (100%)"
    assert len(lines) == 2  # within a second: the first and the last only


@pytest.mark.skipif(not rich_available(), reason="needs the cli extra (rich)")
def test_rich_output_draws_tables_and_keeps_the_text() -> None:
    out = io.StringIO()
    Output(out=out, err=io.StringIO(), fancy=True).report(_health().blocks())
    text = out.getvalue()
    assert text.startswith("A->B: running  lag 3 record(s) / 1.5s")
    header = next(line for line in text.splitlines() if "partition" in line)
    assert "remote" in header and "stored" in header
    assert "orders-0" in text and "1 min 26 s ago" in text
    assert "\x1b[" not in text  # not a terminal: no escape codes


@pytest.mark.skipif(not rich_available(), reason="needs the cli extra (rich)")
def test_rich_progress_on_a_terminal_shows_count_and_rate() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    err = Tty()
    output = Output(out=Tty(), err=err, fancy=True)
    with output.progress() as progress:
        progress(VerifyProgress("A->B", 500, 1000))
        progress(VerifyProgress("A->B", 1000, 1000, finished=True))
    assert "verify A->B" in err.getvalue() and "1000/1000" in err.getvalue()
