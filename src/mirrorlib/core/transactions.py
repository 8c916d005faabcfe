"""When a busy copier commits its transaction: the boundary, stretched by what a commit costs.

A transactional copier (exactly-once, and every ``tasks.max`` > 1 worker, whose transactions are
its fence) commits as soon as it has caught up with its source, and otherwise once its open
transaction is ``transaction.boundary.interval.ms`` old. Caught up: a round consumed nothing, or
every partition of the open transaction was read up to the end offset of its last fetch while
records keep arriving — then once the transaction is :data:`CAUGHT_UP_MIN_AGE_S` old, so that a
steady trickle of records costs at most ~20 commits a second, not one per round.

While a commit runs nothing is produced: ``commit_transaction`` drains the producer's pipeline,
the positions written into the transaction first need their partition added to it
(``AddPartitionsToTxn``, a round trip to the coordinator), then ``EndTxn`` waits for the
coordinator's log write; the next transaction's first records wait for their partitions to be
added in turn. Measured on a shared 2-core machine
(docs/benchmarks.md, "Where a worker lost time"): 20 to 260 ms per commit, so at one commit per
second a worker with a backlog idled 10 to 25 % of its time.

:class:`TransactionBoundary` keeps that share small: while a backlog lasts a transaction lasts at
least the configured interval, and at least ``1 / COMMIT_SHARE`` times what the recent commits
took (a smoothed mean of the whole commit, the pipeline's drain included), at most
:data:`MAX_STRETCH_S` (or the interval, if longer). A copier that caught up commits at once,
whatever the boundary: latency is unchanged when there is no backlog. Pure: the committer
measures and asks (:mod:`mirrorlib.kafka.copier.commit`).
"""

from __future__ import annotations

__all__ = ["CAUGHT_UP_MIN_AGE_S", "COMMIT_SHARE", "MAX_STRETCH_S", "TransactionBoundary"]

#: the share of a busy copier's time that transaction commits may take
COMMIT_SHARE = 0.05
#: a stretched transaction lasts at most this long (seconds), unless the interval is longer;
#: far below the transactions' timeout (``transaction.timeout.ms``, 60 s by default)
MAX_STRETCH_S = 10.0
#: a copier that has read its transaction's partitions to their end while records keep arriving
#: commits a transaction at least this old (seconds); one whose round consumed nothing commits
#: at once
CAUGHT_UP_MIN_AGE_S = 0.05
# weight of the newest commit in the smoothed commit time
_SMOOTHING = 0.3


class TransactionBoundary:
    """How old the open transaction of a copier with a backlog may get (see the module).

    ``interval``: ``transaction.boundary.interval.ms`` in seconds.
    """

    __slots__ = ("_commit_s", "interval")

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._commit_s: float | None = None  # smoothed seconds per commit (None: none yet)

    @property
    def commit_seconds(self) -> float | None:
        """The smoothed time a commit took, or ``None`` before the first one."""
        return self._commit_s

    @property
    def seconds(self) -> float:
        """The age at which a copier that has not caught up commits its transaction."""
        if self._commit_s is None:
            return self.interval
        stretched = min(self._commit_s / COMMIT_SHARE, MAX_STRETCH_S)
        return max(self.interval, stretched)

    def committed(self, took: float) -> None:
        """A commit took ``took`` seconds (from the positions' write to the coordinator's
        answer)."""
        # one outlier (a stopped process) moves the mean by a bounded step
        took = min(max(took, 0.0), MAX_STRETCH_S * COMMIT_SHARE)
        prev = self._commit_s
        self._commit_s = took if prev is None else prev + _SMOOTHING * (took - prev)

    @staticmethod
    def may_end_caught_up(age: float) -> bool:
        """Whether a transaction ``age`` seconds old commits if the copier read its partitions
        to their end (see :data:`CAUGHT_UP_MIN_AGE_S`)."""
        return age >= CAUGHT_UP_MIN_AGE_S

    def due(self, age: float, *, caught_up: bool) -> bool:
        """Whether a transaction ``age`` seconds old commits now (``caught_up``: the copier's
        last round consumed nothing, or read the partitions to their end when
        :meth:`may_end_caught_up` allowed it)."""
        return caught_up or age >= self.seconds
