"""Fencing a transactional id whose producer is gone, as Kafka Connect fences a task's zombies
(KIP-618: ``Admin.fenceProducers``, which initialises the task's transactional ids).

Initialising a transactional id makes its coordinator bump the id's producer epoch and abort
the transaction the id left open. Until then an open transaction of a killed producer holds
the last stable offset of every partition it wrote: a ``read_committed`` reader of those
partitions (consumers of the remote topics; a worker reading positions, if the transaction
wrote some) sees nothing past it until the broker aborts it after ``transaction.timeout.ms``
(60 s by default) plus its check interval (10 s by default).

Two fences use it. A copier worker supervisor (``tasks.max`` > 1) fences a slot of its own
whose process died and could not be restarted, and, when its flow stops, every slot whose
process did not end cleanly, killed after the stop timeout or crashed
(:mod:`mirrorlib.runtime.workers.supervisor`).
:class:`DepartedFence` fences *other nodes* of a flow: when the group gives a node partitions
that a node which left without a clean stop (killed, stopped, cut off from the source's
group coordinator for longer than the session timeout) held, the leaving node may have an open
transaction over them, and, if it is only stopped, it may wake up and *commit* it: records the
new holder copies again and a position older or newer than the new holder's, i.e. duplicates
for ``read_committed`` readers and interleaved writers of one partition. The new holder fences
the transactional ids of those slots, found in the flow's worker reports
(:func:`~mirrorlib.core.worker_reports.departed_holders`), before it reads the partitions'
positions: the open transaction is aborted, and the old producer can write nothing more A
node that stopped but could not fence a slot of its own reports it ``abandoned`` (with its
partitions), which counts here like any report that is not ``stopped``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import KafkaException, Producer

from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.worker_reports import WorkerReport, departed_holders
from mirrorlib.errors import MirrorError
from mirrorlib.kafka import client_conf
from mirrorlib.kafka.admin import kafka_error
from mirrorlib.kafka.worker_reports import read_worker_reports

__all__ = ["FENCE_TIMEOUT_S", "DepartedFence", "fence_transactional_id"]

log = logging.getLogger(__name__)

#: seconds a fence waits at most for the target (the flow's ``admin.timeout.ms`` if lower)
FENCE_TIMEOUT_S = 10.0
#: fences :class:`DepartedFence` runs at once (a node of ``tasks.max=16`` leaving: 16 ids)
MAX_PARALLEL_FENCES = 16


def fence_transactional_id(
    producer_config: Mapping[str, str], transactional_id: str, *, cluster: str, timeout: float
) -> None:
    """Fence ``transactional_id`` on ``cluster`` (the producer configuration's cluster): its
    open transaction is aborted and a producer still holding its old epoch can neither write
    nor commit. Raises a :class:`~mirrorlib.errors.KafkaRequestError` naming the id when the
    coordinator does not answer within ``timeout`` seconds."""
    action = f"fencing the transactional id {transactional_id}"
    conf = client_conf(
        producer_config, **{"transactional.id": transactional_id, "enable.idempotence": True}
    )
    try:
        producer = Producer(conf)
    except KafkaException as exc:  # (a setting librdkafka refuses for a transactional producer)
        raise kafka_error(exc, cluster=cluster, action=action) from exc
    try:
        producer.init_transactions(timeout)
    except KafkaException as exc:
        raise kafka_error(exc, cluster=cluster, action=action) from exc
    finally:
        # (not close(): on a transactional producer it tries to abort a transaction, and warns
        # after a failed initialisation; nothing is queued, so dropping it ends it at once)
        del producer


class DepartedFence:
    """Fences the transactional ids of other nodes' slots that left the flow's group without a
    clean stop while holding partitions this node is given (see the module), all at once (each
    waits for the coordinator, up to its timeout). Each slot is fenced once per report (a slot
    that reports again and leaves again is fenced again)."""

    def __init__(self, settings: FlowSettings) -> None:
        self.s = settings
        self._fenced: set[tuple[str, int]] = set()  # (transactional id, its report's time)

    def before_copying(self, partitions: Iterable[tuple[str, int]]) -> list[str]:
        """Fence the departed holders of ``partitions`` (just given to this node); returns the
        ids fenced. The worker reports cannot be read, or a fence fails: logged, and copying
        goes on (as before fencing existed: the broker aborts the transaction after its
        timeout)."""
        s = self.s
        timeout = min(s.admin_timeout, FENCE_TIMEOUT_S)
        try:
            reports, _ = read_worker_reports(
                s.target_consumer, s.target_admin, s.worker_status_topic, alias=s.target,
                timeout=timeout,
            )  # fmt: skip
        except MirrorError as exc:
            log.warning(
                "flow %s: cannot read %s to fence nodes that left the group: %s",
                s.name, s.worker_status_topic, exc,
            )  # fmt: skip
            return []
        now_ms = int(time.time() * 1000)
        wanted = frozenset(partitions)
        due = []
        for r in departed_holders(reports, wanted, flow=s.name, node=s.node, now_ms=now_ms):
            assert r.transactional_id is not None
            if (r.transactional_id, r.timestamp_ms) not in self._fenced:
                self._fenced.add((r.transactional_id, r.timestamp_ms))
                due.append(r)
        if not due:
            return []

        def fence(r: WorkerReport) -> MirrorError | None:
            assert r.transactional_id is not None
            try:
                fence_transactional_id(
                    s.target_producer, r.transactional_id, cluster=s.target, timeout=timeout
                )
            except MirrorError as exc:
                return exc
            return None

        # at once: each fence waits for a round trip to the coordinator, or for the timeout
        with ThreadPoolExecutor(min(len(due), MAX_PARALLEL_FENCES), "fence") as pool:
            outcomes = list(pool.map(fence, due))
        fenced: list[str] = []
        for r, failed in zip(due, outcomes, strict=True):
            held = ", ".join(f"{t}-{p}" for t, p in sorted(wanted.intersection(r.partitions)))
            silent = (now_ms - r.timestamp_ms) / 1000.0
            if failed is not None:
                log.warning(
                    "flow %s: node %s (slot %d) held %s and has not reported for %.0fs; "
                    "could not fence its transactional id: %s",
                    s.name, r.node, r.slot, held, silent, failed,
                )  # fmt: skip
                continue
            assert r.transactional_id is not None
            fenced.append(r.transactional_id)
            log.info(
                "flow %s: node %s (slot %d) held %s and has not reported for %.0fs: fenced "
                "its transactional id %s (its open transaction aborted; it can write nothing "
                "more)",
                s.name, r.node, r.slot, held, silent, r.transactional_id,
            )  # fmt: skip
        return fenced
