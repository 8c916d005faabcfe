"""The worker status topic's I/O: :class:`WorkerReportWriter` and :func:`read_worker_reports`.

The records, their format and what status makes of them: :mod:`mirrorlib.core.worker_reports`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, Final

from mirrorlib.core.worker_reports import (
    WorkerReport,
    encode_report,
    newest_reports,
    report_key,
)
from mirrorlib.errors import ClusterError
from mirrorlib.kafka import new_producer
from mirrorlib.kafka.admin import ClusterAdmin
from mirrorlib.kafka.topiclog import TopicLog

__all__ = ["WorkerReportWriter", "read_worker_reports"]

log = logging.getLogger(__name__)

#: configs of the topic when a node creates it: its segments roll every 10 minutes, so that
#: compaction keeps what ``mirrorlib status`` reads small (a report every few seconds per slot
#: would otherwise pile up in the active segment for the default 7 days)
TOPIC_CONFIGS: Final = {"segment.ms": "600000", "min.cleanable.dirty.ratio": "0.1"}


class WorkerReportWriter:
    """Writes :class:`~mirrorlib.core.worker_reports.WorkerReport` records to ``topic`` (on the
    cluster ``alias``) once it exists: the flow's metadata task creates it with the internal
    topics (compacted, one partition, ``offset.storage.replication.factor``, :data:`TOPIC_CONFIGS`);
    the writer never creates it, so that a broker's auto-creation cannot make it with another
    factor. Failures are logged (once until a write succeeds again) and returned by
    :meth:`write`, never raised: the reports are for status only."""

    def __init__(
        self,
        producer_config: Mapping[str, str],
        admin_config: Mapping[str, str],
        topic: str,
        *,
        alias: str,
        timeout: float = 10.0,
    ) -> None:
        self.topic = topic
        self.alias = alias
        self.timeout = timeout
        self._admin_config = admin_config
        self._producer = new_producer(producer_config, acks="all", **{"linger.ms": 0})
        self._created = False
        self._error: str | None = None
        self._failing = False

    def _on_delivery(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self._error = str(err)

    def _ensure_topic(self) -> None:
        if self._created:
            return
        admin = ClusterAdmin(self._admin_config, alias=self.alias, timeout=self.timeout)
        if self.topic not in admin.list_topics(include_internal=True):
            raise ClusterError(
                f"{self.topic} does not exist yet (created with the internal topics)"
            )
        self._created = True

    def write(self, reports: Iterable[WorkerReport], *, flush: bool = True) -> str | None:
        """Write ``reports`` (and wait for them when ``flush``); the reason when it failed."""
        return self._send(
            ((report_key(*r.key), encode_report(r), r.timestamp_ms) for r in reports), flush
        )

    def forget(self, reports: Iterable[WorkerReport]) -> str | None:
        """Write the tombstone of each slot of ``reports`` (compaction then removes the slot)
        and wait for them; the reason when it failed."""
        return self._send(((report_key(*r.key), None, None) for r in reports), True)

    def _send(
        self, records: Iterable[tuple[bytes, bytes | None, int | None]], flush: bool
    ) -> str | None:
        self._error = None
        try:
            self._ensure_topic()
            for key, value, timestamp_ms in records:
                self._producer.produce(
                    self.topic, value, key, 0, timestamp=timestamp_ms or 0,
                    on_delivery=self._on_delivery,
                )  # fmt: skip
            self._producer.poll(0)
            if flush and self._producer.flush(self.timeout) > 0:
                self._error = self._error or f"not acknowledged within {self.timeout:.0f}s"
        except (ClusterError, BufferError) as exc:
            self._error = str(exc)
        except Exception as exc:  # KafkaException and friends: reported, retried next time
            self._error = f"{type(exc).__name__}: {exc}"
        if self._error is not None and not self._failing:
            log.warning(
                "cannot write worker reports to %s on cluster %s: %s", self.topic, self.alias,
                self._error,
            )  # fmt: skip
        self._failing = self._error is not None
        return self._error

    def close(self) -> None:
        self._producer.flush(self.timeout)


def read_worker_reports(
    consumer_config: Mapping[str, str],
    admin_config: Mapping[str, str],
    topic: str,
    *,
    alias: str,
    timeout: float,
) -> tuple[list[WorkerReport], list[str]]:
    """The newest report of every slot in ``topic`` on cluster ``alias`` (none when the topic
    does not exist), and a message per record that does not decode (skipped). Raises
    :class:`~mirrorlib.errors.ClusterError` when the cluster does not answer."""
    admin = ClusterAdmin(admin_config, alias=alias, timeout=timeout)
    if topic not in admin.list_topics(include_internal=True):
        return [], []
    records: list[tuple[bytes | None, bytes | None]] = []
    with TopicLog(consumer_config, topic, alias=alias) as reader:
        reader.read_to_end(lambda m: records.append((m.key(), m.value())), timeout=timeout)
    reports, problems = newest_reports(records)
    return list(reports.values()), problems
