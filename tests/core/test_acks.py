"""Matching delivery reports with the records in flight, without a broker: reports are queued per
partition and matched with the produced upstream offsets a whole run at a time."""

from __future__ import annotations

import pytest

from mirrorlib.core.acks import DeliveryReport, InFlight, PartitionProgress
from mirrorlib.core.counters import PartitionStats


class Report:
    """A delivery report: the downstream offset, or the refusal."""

    def __init__(self, offset: int, error: object | None = None) -> None:
        self._offset = offset
        self._error = error

    def offset(self) -> int:
        return self._offset

    def error(self) -> object | None:
        return self._error


REFUSED = "Broker: Invalid record"


def progress() -> tuple[PartitionProgress, list[InFlight]]:
    ready: list[InFlight] = []
    return PartitionProgress(("t", 0), PartitionStats("A.t"), ready.append), ready


def produce(part: InFlight, upstream: range | list[int], ts: int = 1_000) -> None:
    for offset in upstream:
        part.produced(offset)
    part.end_run(list(upstream)[-1], ts)


def deliver(part: InFlight, *downstream: int | None) -> None:
    """One report per record, in order; ``None`` is a refusal."""
    for down in downstream:
        if down is None:
            part.on_delivery(REFUSED, Report(-1, REFUSED))
        else:
            part.on_delivery(None, Report(down))


def downs(reports: list[DeliveryReport]) -> list[int]:
    return [r.offset() for r in reports]


def test_a_contiguous_run_is_matched_at_once() -> None:
    part, ready = progress()
    produce(part, range(100, 150))
    deliver(part, *range(1000, 1050))
    assert ready == [part] and part.has_reports  # told once, on the first report
    acks = part.take(None)
    assert acks is not None
    assert acks.upstream == list(range(100, 150)) and downs(acks.reports) == list(range(1000, 1050))
    assert acks.contiguous and acks.count == 50 and not acks.refused and acks.blocked_at is None
    assert acks.tail_timestamp == 1_000
    assert part.outstanding == 0 and not part.has_reports
    assert part.take(None) is None


def test_reports_arriving_in_pieces_are_matched_in_order() -> None:
    part, ready = progress()
    produce(part, range(0, 10))
    produce(part, range(10, 20), ts=2_000)
    deliver(part, *range(5))
    acks = part.take(None)
    assert acks is not None and acks.upstream == [0, 1, 2, 3, 4] and part.outstanding == 15
    assert acks.tail_timestamp == 0  # no produced run is fully acknowledged yet
    deliver(part, *range(5, 20))
    assert ready == [part, part]  # told again: the queue was empty
    acks = part.take(None)
    assert acks is not None and acks.upstream == list(range(5, 20)) and part.outstanding == 0
    assert acks.tail_timestamp == 2_000


def test_gaps_on_either_side_are_not_contiguous() -> None:
    part, _ = progress()
    produce(part, [0, 1, 2, 5, 6])  # compaction gap upstream
    deliver(part, 0, 1, 2, 3, 4)
    acks = part.take(None)
    assert acks is not None and not acks.contiguous and acks.upstream == [0, 1, 2, 5, 6]
    produce(part, [7, 8, 9])
    deliver(part, 5, 7, 8)  # a transaction marker downstream
    acks = part.take(None)
    assert acks is not None and not acks.contiguous and acks.upstream == [7, 8, 9]


def test_a_refused_record_is_never_acknowledged_past() -> None:
    part, _ = progress()
    produce(part, range(0, 10))
    deliver(part, 0, 1, 2, 3, 4, None, 6, 7, 8, 9)
    acks = part.take(None)
    assert acks is not None
    assert acks.upstream == [0, 1, 2, 3, 4] and acks.contiguous
    assert [up for up, _ in acks.refused] == [5] and acks.blocked_at == 5
    assert acks.tail_timestamp == 0 and part.outstanding == 0


def test_successes_after_a_refusal_in_a_later_poll_are_ignored_until_retried() -> None:
    part, _ = progress()
    produce(part, range(0, 4))
    deliver(part, 0, None)
    acks = part.take(None)
    assert acks is not None and acks.upstream == [0] and acks.blocked_at == 1
    deliver(part, 1, 2)
    acks = part.take(acks.blocked_at)  # still blocked at 1
    assert acks is not None and acks.count == 0 and not acks.refused and acks.blocked_at == 1


def test_reports_beyond_what_was_produced_are_ignored() -> None:
    part, _ = progress()
    produce(part, range(0, 2))
    part.clear()  # e.g. an aborted transaction forgot what was in flight
    produce(part, [7])
    deliver(part, 0, 1, 2)
    acks = part.take(None)
    assert acks is not None and acks.upstream == [7] and downs(acks.reports) == [2]
    assert part.outstanding == 0
    deliver(part, 3)  # nothing in flight: nothing to match
    assert part.take(None) is None and not part.has_reports


@pytest.mark.parametrize("count", [1, 3, 70_000])
def test_matching_keeps_the_rest_in_order(count: int) -> None:
    part, _ = progress()
    produce(part, range(count + 5))
    deliver(part, *range(count))
    acks = part.take(None)
    assert acks is not None and acks.upstream == list(range(count))
    assert part.outstanding == 5
    deliver(part, *range(count, count + 5))
    acks = part.take(None)
    assert acks is not None and acks.upstream == list(range(count, count + 5))
    assert part.outstanding == 0


def test_progress_starts_with_nothing_acknowledged() -> None:
    part, _ = progress()
    assert part.key == ("t", 0) and part.tp.topic == "t" and part.tp.partition == 0
    assert part.acked is None and part.blocked_at is None and part.txn_last is None
    assert part.outstanding == 0 and not part.has_reports


def test_retries_grow_while_refused_and_start_over_once_a_record_is_acknowledged() -> None:
    part, _ = progress()
    part.retries.uniform = lambda low, high: high  # the longest delay of each draw
    assert [part.retries.next_delay() for _ in range(3)] == [3.0, 9.0, 27.0]
    # the retry is refused again: no acknowledgement, the back-off keeps growing
    produce(part, [10, 11])
    deliver(part, None, 501)
    acks = part.take(None)
    assert acks is not None and acks.blocked_at == 10 and not acks.upstream
    assert part.retries.failures == 3 and part.retries.next_delay() == 60.0
    # sent again from the blocked record and acknowledged: the next refusal starts over
    produce(part, [10, 11])
    deliver(part, 502, 503)
    acks = part.take(None)
    assert acks is not None and acks.upstream == [10, 11]
    assert part.retries.failures == 0
    assert part.retries.next_delay() == 3.0


def test_with_nothing_acknowledged_an_abort_goes_back_to_the_first_record_produced() -> None:
    """A partition that started at the end of its log (``latest``) and whose first transaction
    aborts copies again from where it started, not from the beginning of the log."""
    part, _ = progress()
    assert part.first_unsettled() is None  # nothing produced: stay where it is
    produce(part, [500, 501, 502])
    assert part.first_unsettled() == 500  # produced, no report yet
    deliver(part, 7, 8, 9)
    assert part.take(None) is not None  # matched (exactly-once: acknowledged on commit only)
    produce(part, [503])
    assert part.first_unsettled() == 500
    part.clear()  # the transaction aborted: everything since is forgotten
    assert part.first_unsettled() == 500
