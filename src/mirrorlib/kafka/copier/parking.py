"""What the copier does when a record cannot be copied, or its source offsets are gone.

A record the target refuses (or that the remote topic's ``max.message.bytes`` would refuse)
*parks* its partition: paused on the source, fetched again from that record after a back-off
(:data:`~mirrorlib.core.acks.PARKING_BACKOFF`, per partition), its error in the status meanwhile.
A batch refused as too large is sent again at once in smaller batches
(:mod:`mirrorlib.core.pacing`); records withdrawn with an aborted transaction are sent again at
once too. A source position the
log no longer holds (offset out of range) is decided by
:func:`~mirrorlib.core.incarnations.out_of_range`: below the log start it is data loss (it fails
the flow or, with ``data.loss.action=continue``, is skipped and counted); past the log end it is
a truncated log (resumed at its new end) or, with no topic id to tell, a re-created topic
(copied again from its start), with a warning. See :mod:`mirrorlib.kafka.copier`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mirrorlib.core.acks import Acknowledged, PartitionProgress
from mirrorlib.core.incarnations import out_of_range
from mirrorlib.errors import DataLossError
from mirrorlib.kafka import consumer_dead
from mirrorlib.kafka.copier.parts import CopierContext, Part
from mirrorlib.kafka.produce import WITHDRAWN, fatal_error, producer_died, smaller_batches
from mirrorlib.kafka.produce import too_large as too_large_reason

__all__ = ["Parking"]

# the copier's records: logged under its name
log = logging.getLogger("mirrorlib.kafka.copier")


class Parking:
    """Parks, retries, resends and rewinds the copier's partitions (see the module).

    ``refresh_metadata`` makes the target producer learn the partitions of remote topics now
    (a produce to a partition it does not know yet is refused locally)."""

    def __init__(
        self, ctx: CopierContext, *, refresh_metadata: Callable[[list[str]], None]
    ) -> None:
        self._ctx = ctx
        self._refresh_metadata = refresh_metadata
        #: describes the topic's IDs again; True when it was re-created (its partitions are
        #: assigned again: mirrorlib.kafka.copier.assignment); set by the copier
        self.recheck: Callable[[str], bool] = lambda _topic: False

    # -- refusals --------------------------------------------------------------------------------

    def refused(self, part: Part, offset: int, exc: KafkaException) -> None:
        """A produce call failed locally: park the partition at the record."""
        ctx = self._ctx
        err = exc.args[0] if exc.args else None
        if (dead := fatal_error(err)) is not None:
            ctx.fatal.setdefault("target", dead)  # (error_cb may have named the cause)
            raise exc
        if isinstance(err, KafkaError) and err.code() == KafkaError._UNKNOWN_PARTITION:
            # the remote topic grew since the producer's metadata: the retry will know
            self._refresh_metadata([part.remote])
        if (
            ctx.committer.in_transaction
            and isinstance(err, KafkaError)
            and err.code() == KafkaError._STATE
        ):
            # the transaction failed (a record of it was refused): no record is taken until it
            # is aborted, which rewinds every partition of it; this one goes on from there
            ctx.committer.refused()
            self.resend(part, offset)
            return
        self.park(part, offset, f"target refused the record: {exc}")

    def too_large(self, part: Part, msg: Any) -> bool:
        """Park the partition at a record the target topic's max.message.bytes would refuse."""
        assert part.max_bytes is not None
        reason = too_large_reason(msg, part.max_bytes, part.remote, self._ctx.s.target)
        if reason is None:
            return False
        offset = msg.offset()
        if part.probe_at == offset:  # a retry: the target decides (a refusal parks it again)
            part.probe_at = None
            return False
        self.park(part, offset, reason)
        return True

    def refusals(self, part: Part, acks: Acknowledged) -> None:
        """Records the target refused: send a batch refused as too large again in smaller
        batches, park the partition at any other refused record. A report that says the
        producer died instead (:func:`producer_died`) raises its error: the copier recreates
        its clients and resumes from the stored positions."""
        ctx = self._ctx
        for _, msg in acks.refused:
            if (dead := producer_died(msg.error(), transactional=ctx.transactional)) is not None:
                # (error_cb may have named the cause; a purged record's report does not)
                dead = ctx.fatal.setdefault("target", dead)
                raise KafkaException(dead)
        part.blocked_at = acks.blocked_at
        ctx.committer.refused()  # exactly-once: the transaction cannot commit any more
        shrunk = withdrawn = False
        for upstream, msg in acks.refused:
            err: Any = msg.error()
            if ctx.transactional and err.code() in WITHDRAWN:
                if not withdrawn:  # not refused: withdrawn with its transaction, sent again
                    self.resend(part, upstream)
                    withdrawn = True
                continue
            if err.code() == KafkaError.MSG_SIZE_TOO_LARGE and (
                shrunk or self._smaller_batches(part, msg)
            ):
                if not shrunk:  # the later records (of the same batch) are sent again too
                    self.resend(part, upstream)
                    shrunk = True
                continue
            self.park(
                part,
                upstream,
                f"record {part.key[0]}-{part.key[1]}@{upstream} was refused by "
                f"{ctx.s.target} ({msg.topic()}): {err.str()}",  # type: ignore[attr-defined]
                from_delivery=True,
            )

    def _smaller_batches(self, part: Part, msg: Any) -> bool:
        """After a ``MSG_SIZE_TOO_LARGE`` refusal of ``msg``: halve the partition's batch
        budget and return True, or return False when ``msg`` was sent alone (a real refusal)."""
        s = self._ctx.s
        budget = smaller_batches(
            log, s.name, s.target, part.key, part.budget, self._ctx.batch_size, msg
        )
        if budget is None:
            return False
        part.budget = budget
        return True

    # -- parking and moving back -----------------------------------------------------------------

    def park(self, part: Part, offset: int, reason: str, *, from_delivery: bool = False) -> None:
        """Stop a partition at ``offset`` and retry it later with back-off."""
        delay = part.retries.next_delay()
        if not part.parked_until:
            log.error(
                "flow %s: %s; partition paused, retrying in %.0fs", self._ctx.s.name, reason, delay
            )
        part.parked_until = time.monotonic() + delay
        part.stats.error = reason
        ktp = KafkaTopicPartition(part.key[0], part.key[1])
        with contextlib.suppress(KafkaException):
            self._ctx.consumer.pause([ktp])
        part.blocked_at = offset if part.blocked_at is None else min(part.blocked_at, offset)
        if self._ctx.committer.in_transaction and from_delivery:
            return  # the commit will fail and abort; positions roll back there
        self.seek(part, part.blocked_at)

    def resend(self, part: Part, offset: int) -> None:
        """Send ``part`` again from ``offset`` as soon as its outstanding reports are in (no
        back-off): a parking that is due at once."""
        part.blocked_at = offset if part.blocked_at is None else min(part.blocked_at, offset)
        part.parked_until = time.monotonic()
        with contextlib.suppress(KafkaException):
            self._ctx.consumer.pause([KafkaTopicPartition(*part.key)])
        if not self._ctx.committer.in_transaction:
            self.seek(part, part.blocked_at)  # (EOS: the failed commit aborts and rewinds)

    def retry_parked(self, now: float) -> None:
        """Resume the parked partitions that are due (and have no delivery report outstanding)
        from the record they were parked at."""
        ctx = self._ctx
        for part in ctx.parts.values():
            if part.parked_until and now >= part.parked_until:
                if part.outstanding:
                    continue  # wait for outstanding delivery reports of this partition
                rt = ctx.remote_of.get(part.key[0])
                if rt is not None and part.key[1] >= rt.partitions:
                    part.parked_until = now + 1.0
                    continue
                part.parked_until = 0.0
                if part.blocked_at is not None:
                    self.seek(part, part.blocked_at)
                part.probe_at = part.blocked_at
                part.blocked_at = None
                part.stats.error = None
                ctx.consumer.resume([KafkaTopicPartition(part.key[0], part.key[1])])

    def rewind(self, part: PartitionProgress) -> None:
        """After an aborted transaction: fetch ``part`` again from its committed position (with
        none yet: from the first record it produced, queued or was blocked at, or, having read
        nothing, from where it is)."""
        assert isinstance(part, Part)
        if self._ctx.consumer is None:
            return  # the clients are closing: the next ones start from the stored positions
        if part.acked is not None:
            self.seek(part, part.acked + 1)
            return
        first = part.first_to_copy_again()
        if first is not None:
            self.seek(part, first)

    def seek(self, part: Part, offset: int) -> None:
        """Move the fetch position of a partition (re-assigning it when a plain seek is refused,
        e.g. after an offset-out-of-range error stopped its fetcher)."""
        consumer = self._ctx.consumer
        ktp = KafkaTopicPartition(part.key[0], part.key[1], offset)
        try:
            consumer.seek(ktp)
        except KafkaException as exc:
            log.debug("seek %s to %s refused (%s); re-assigning", part.key, offset, exc)
            consumer.incremental_unassign([KafkaTopicPartition(part.key[0], part.key[1])])
            consumer.incremental_assign([ktp])
            if part.parked_until:
                consumer.pause([KafkaTopicPartition(part.key[0], part.key[1])])
        self.drop_pending(part)  # records read before `offset` are read again

    def drop_pending(self, part: Part) -> None:
        """Forget the records a paced partition holds (done, or seeked back: they are read
        again) and resume it on the source unless it is parked."""
        ctx = self._ctx
        part.pending.clear()
        ctx.queued.discard(part)
        if part.throttled:
            part.throttled = False
            if not part.parked_until and ctx.parts.get(part.key) is part:
                ctx.consumer.resume([KafkaTopicPartition(*part.key)])

    # -- consume errors, data loss ---------------------------------------------------------------

    def consume_error(self, msg: Any, err: KafkaError) -> None:
        """An error the source consumer returned in place of a record."""
        s = self._ctx.s
        code = err.code()
        if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
            fetched = msg.offset()
            self._on_out_of_range(msg.topic(), msg.partition(), err, fetched or -1)
            return
        if consumer_dead(err):  # the copier recreates its clients
            self._ctx.fatal["source"] = err
            raise KafkaException(err)
        if code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC):
            log.warning("flow %s: source topic %s vanished: %s", s.name, msg.topic(), err.str())
            return
        self._ctx.stats.set_error("source", f"{s.source}: {err.str()}")
        log.warning("flow %s: source consumer error: %s", s.name, err.str())

    def _on_out_of_range(
        self, topic: str | None, partition: int | None, err: KafkaError, fetched: int
    ) -> None:
        """The next offset to copy of a partition is not in the source log any more
        (:func:`~mirrorlib.core.incarnations.out_of_range` says what that means and where
        copying resumes)."""
        if topic is None or partition is None:
            raise KafkaException(err)
        ctx = self._ctx
        s = ctx.s
        key = (topic, partition)
        part = ctx.parts.get(key)
        if part is None:
            return
        if self.recheck(topic):  # re-created: its partitions were assigned again (positions
            ctx.committer.begin()  # stored: exactly-once committed; the copy goes on in a new one)
            return
        # What was read before is settled first: acknowledged records move the position and
        # are not lost; no acknowledgement may come in after the position moved.
        committer = ctx.committer
        if part.outstanding and committer.producer is not None:
            committer.producer.flush(s.admin_timeout)
            committer.drain_acks()
            if ctx.parts.get(key) is not part:
                return
            if part.outstanding:  # the target does not answer: start again from the positions
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "records in flight of "
                                     f"{topic}-{partition} not acknowledged"))  # fmt: skip
        low, high = ctx.consumer.get_watermark_offsets(
            KafkaTopicPartition(topic, partition), timeout=s.admin_timeout
        )
        done = max(-1 if part.acked is None else part.acked, part.txn_last or -1)
        decision = out_of_range(
            topic, partition, next_offset=max(done + 1, fetched), low=low, high=high,
            same_log=part.same_log,
        )  # fmt: skip
        resume = decision.resume
        if decision.lost is not None:
            count = decision.lost_count
            message = (
                f"data loss on {s.source} {topic}-{partition}: {decision.message}; "
                f"{count} record(s) cannot be replicated"
            )
            if s.data_loss_action == "fail":
                raise DataLossError(
                    message + " (flow stopped; set data.loss.action=continue to skip)"
                )
            log.error("%s; continuing at offset %d as data.loss.action=continue", message, resume)
            part.stats.lost_records += count
            part.stats.error = message
        else:
            log.warning("flow %s: %s on %s", s.name, decision.message, s.source)
        part.same_log = True  # positions from here on are in this log
        ctx.emitter.reset(part.tp)  # the next record starts a new chain of offset syncs
        self.seek(part, resume)
        if committer.in_transaction:
            # written with the transaction's records (an abort rewinds to the committed one)
            part.txn_last = resume - 1 if resume > 0 else None
        else:
            part.acked = resume - 1 if resume > 0 else None
        part.stats.position = resume
        committer.moved(part.key)
