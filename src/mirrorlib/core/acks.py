"""Which copied records the target acknowledged: per-partition in-flight bookkeeping, no Kafka client.

The copier produces the records of a source partition in order with an idempotent producer, so
the target acknowledges them in that same order. This module keeps, per source partition, what
was produced and not yet acknowledged, and matches the delivery reports with it a whole run at a
time (the per-record work is two list appends, one on each side):

* :meth:`InFlight.produced` (an alias of ``list.append``) remembers the upstream offset of every
  produced record; :meth:`InFlight.end_run` the source timestamp of the last record of each
  produced run (for ``replication-latency-ms``);
* :attr:`InFlight.on_delivery` is the producer's delivery-report callback of the partition: it
  only queues the report (and tells the copier, once, that the partition has reports to match);
* :meth:`InFlight.take` matches the queued reports with the oldest produced offsets and returns
  an :class:`Acknowledged`: the records that may count as replicated, in order, and the ones the
  target refused.

The rule that protects positions lives in :meth:`InFlight.take`: a record is *acknowledged* only
if every record of its partition before it was, so once a record is refused (its partition is
*blocked* at it) no later record counts until the partition was sent again from there. Whatever
is acknowledged may become the stored position (at-least-once) or go into the open transaction's
positions (exactly-once), and yields the offset syncs (:class:`~mirrorlib.core.syncs.OffsetSyncEmitter`,
a whole run with :meth:`~mirrorlib.core.syncs.OffsetSyncEmitter.record_run` when it is contiguous
on both sides). Writing them is the committers' business (:mod:`mirrorlib.kafka.copier.commit`).

:class:`PartitionProgress` adds what the copier and its committers know of a partition's
replication progress: the last acknowledged upstream offset, the offset it is blocked at, the
last offset produced in the open transaction, and its counters.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Protocol

import attrs

from mirrorlib.core.counters import PartitionStats
from mirrorlib.core.records import TopicPartition
from mirrorlib.core.retry import Backoff
from mirrorlib.core.syncs import OffsetSyncEmitter

__all__ = [
    "PARKING_BACKOFF",
    "Acknowledged",
    "DeliveryReport",
    "InFlight",
    "PartitionProgress",
    "record_syncs",
]

#: ``(base, cap)`` seconds of a blocked partition's retries (:attr:`PartitionProgress.retries`)
PARKING_BACKOFF = (1.0, 60.0)

# `take` compacts the produced offsets once this many were matched (amortised O(1) per record)
_COMPACT_AFTER = 65_536


class DeliveryReport(Protocol):
    """What a delivery report (confluent-kafka's ``Message``) tells: where the target wrote the
    record, or why it did not."""

    def offset(self) -> int: ...

    def error(self) -> object | None: ...


@attrs.frozen
class Acknowledged:
    """The outcome of matching a partition's delivery reports (see :meth:`InFlight.take`)."""

    #: upstream offsets of the acknowledged records, in order
    upstream: list[int]
    #: their delivery reports (downstream offsets), same order
    reports: list[DeliveryReport]
    #: both sides step by one over :attr:`upstream`: a single run for the offset syncs
    contiguous: bool
    #: ``(upstream offset, report)`` of each refused record, in order
    refused: list[tuple[int, DeliveryReport]]
    #: the partition is blocked at this upstream offset (the first refused record), or ``None``
    blocked_at: int | None
    #: source timestamp of the newest produced run now fully acknowledged (0: none, or a refusal)
    tail_timestamp: int

    @property
    def count(self) -> int:
        """How many records were acknowledged."""
        return len(self.upstream)


class InFlight:
    """The records of one source partition produced and not yet acknowledged.

    ``on_first_report(self)`` is called by :attr:`on_delivery` when a report arrives while none
    is queued, so the caller knows which partitions to :meth:`take` from after a poll.
    """

    __slots__ = ("_failed", "_head", "_marks", "_reports", "_sent", "on_delivery", "produced")

    def __init__(self, on_first_report: Callable[[InFlight], None]) -> None:
        self._sent: list[int] = []  # upstream offsets produced, unacknowledged from `_head` on
        self._head = 0
        self._reports: list[DeliveryReport] = []  # delivery reports not yet matched
        self._failed = False  # one of `_reports` carries an error
        # (upstream offset, source timestamp) of the last record of each produced run
        self._marks: deque[tuple[int, int]] = deque()
        reports = self._reports
        append = reports.append

        def on_delivery(err: object | None, msg: DeliveryReport) -> None:  # per record: minimal
            if not reports:
                on_first_report(self)
            append(msg)
            if err is not None:
                self._failed = True

        self.on_delivery: Callable[[object | None, DeliveryReport], None] = on_delivery
        #: remember the upstream offset of a record just produced (per record: ``list.append``)
        self.produced: Callable[[int], None] = self._sent.append

    @property
    def outstanding(self) -> int:
        """Records produced and not yet acknowledged (nor refused)."""
        return len(self._sent) - self._head

    @property
    def has_reports(self) -> bool:
        """Delivery reports are queued, waiting for :meth:`take`."""
        return bool(self._reports)

    def end_run(self, last_offset: int, timestamp: int) -> None:
        """The records produced since the previous call end at ``last_offset``, whose source
        timestamp is ``timestamp``."""
        self._marks.append((last_offset, timestamp))

    def clear(self) -> None:
        """Forget everything in flight (an aborted transaction: it is all produced again)."""
        self._sent.clear()
        self._head = 0
        self._reports.clear()
        self._failed = False
        self._marks.clear()

    def take(self, blocked_at: int | None) -> Acknowledged | None:
        """Match the queued delivery reports with the oldest produced records.

        ``blocked_at`` is the upstream offset the partition is blocked at (a refused record not
        yet sent again), or ``None``: no record at or after it counts as acknowledged. Reports
        beyond what is in flight (of records an aborted transaction forgot) are dropped, oldest
        first. Returns ``None`` when nothing was left to match.
        """
        reports = self._reports
        n = len(reports)
        if not n:
            return None
        outstanding = self.outstanding
        if n > outstanding:
            del reports[: n - outstanding]
            n = len(reports)
            if not n:
                self._failed = False
                return None
        ups = self._take_sent(n)
        taken = reports[:]
        reports.clear()
        failed, self._failed = self._failed, False
        marks = self._marks
        up_last = ups[-1]
        if not failed and blocked_at is None:
            contiguous = (
                up_last - ups[0] == n - 1 and taken[-1].offset() - taken[0].offset() == n - 1
            )
            ts = 0
            while marks and marks[0][0] <= up_last:
                ts = marks.popleft()[1]
            return Acknowledged(ups, taken, contiguous, [], None, ts)
        # the careful path: a report carries an error, or an earlier record was refused
        acked_ups: list[int] = []
        acked: list[DeliveryReport] = []
        refused: list[tuple[int, DeliveryReport]] = []
        blocked = blocked_at
        for upstream, msg in zip(ups, taken, strict=True):
            if msg.error() is not None:
                refused.append((upstream, msg))
                if blocked is None or upstream < blocked:
                    blocked = upstream
            elif blocked is None or upstream < blocked:
                acked_ups.append(upstream)
                acked.append(msg)
            # else: a later record succeeded after an earlier one failed: it is sent again
        while marks and marks[0][0] <= up_last:
            marks.popleft()
        contiguous = bool(acked_ups) and (
            acked_ups[-1] - acked_ups[0] == len(acked_ups) - 1
            and acked[-1].offset() - acked[0].offset() == len(acked) - 1
        )
        return Acknowledged(acked_ups, acked, contiguous, refused, blocked, 0)

    def _take_sent(self, n: int) -> list[int]:
        """The upstream offsets of the next ``n`` matched records, oldest first."""
        head = self._head
        sent = self._sent
        ups = sent[head : head + n]
        head += len(ups)
        if head >= len(sent):
            sent.clear()
            head = 0
        elif head > _COMPACT_AFTER:
            del sent[:head]
            head = 0
        self._head = head
        return ups


class PartitionProgress(InFlight):
    """One source partition's replication progress: what is in flight (:class:`InFlight`),
    what is acknowledged, where it is blocked, and how long to wait before retrying it.

    :attr:`retries` is the back-off of a blocked partition's retries: each refusal in a row
    waits longer, and the first record acknowledged again (by :meth:`take`) starts it over, so
    a partition that recovered and is refused again much later is retried after the base delay,
    not after the delay its earlier refusals had grown to."""

    __slots__ = ("acked", "blocked_at", "key", "origin", "retries", "stats", "tp", "txn_last")

    def __init__(
        self,
        key: tuple[str, int],
        stats: PartitionStats,
        on_first_report: Callable[[InFlight], None],
    ) -> None:
        super().__init__(on_first_report)
        self.key = key
        self.tp = TopicPartition(key[0], key[1])
        self.stats = stats
        self.acked: int | None = None  # last upstream offset acknowledged contiguously
        self.blocked_at: int | None = None  # first upstream offset whose delivery failed
        self.txn_last: int | None = None  # exactly-once: last upstream offset of the open txn
        self.retries = Backoff(base=PARKING_BACKOFF[0], cap=PARKING_BACKOFF[1])
        # first upstream offset matched with a report while nothing was acknowledged (see
        # :meth:`first_unsettled`)
        self.origin: int | None = None

    def take(self, blocked_at: int | None) -> Acknowledged | None:
        """:meth:`InFlight.take`; a record acknowledged resets :attr:`retries`."""
        if self.acked is None and self.origin is None and self.outstanding:
            self.origin = self._sent[self._head]
        acks = super().take(blocked_at)
        if acks is not None and acks.upstream and self.retries.failures:
            self.retries.reset()  # it delivers again: the next refusal starts over
        return acks

    def first_unsettled(self) -> int | None:
        """Where to copy from again when nothing is acknowledged (:attr:`acked` is ``None``) and
        everything since is forgotten (an aborted transaction): the first upstream offset this
        partition produced, or ``None`` when it produced nothing yet. A partition that started
        at the end of its log (``auto.offset.reset=latest``) goes back to where it started, not
        to the beginning of the log."""
        if self.origin is not None:
            return self.origin
        return self._sent[self._head] if self.outstanding else None


def record_syncs(
    emitter: OffsetSyncEmitter,
    tp: TopicPartition,
    acks: Acknowledged,
    on_due: Callable[[], None],
) -> None:
    """Feed acknowledged records to ``emitter`` (a contiguous run at once), calling ``on_due``
    as soon as a sync becomes due: MM2 keeps only the latest due sync per partition, so a burst
    of acknowledgements could replace one before it was written and lose precision."""
    if acks.contiguous:
        emitter.record_run(
            tp, acks.upstream[0], acks.reports[0].offset(), acks.count, on_due=on_due
        )
        return
    record = emitter.record
    for up, report in zip(acks.upstream, acks.reports, strict=True):
        if record(tp, up, report.offset()):
            on_due()
