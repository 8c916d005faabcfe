"""Reading topic IDs (KIP-516), which tell a topic's incarnations apart
(:mod:`mirrorlib.core.incarnations`).

:class:`TopicIds` describes the source topics of a flow and their remote topics on the target
(``DescribeTopics``, one request per cluster for any number of topics). A topic that cannot be
described (deleted right now, not authorized, a timeout) has no ID in the answer: nothing is
concluded for it, and the caller keeps what it knew.

:meth:`TopicIds.submit` sends the requests and returns at once (:class:`PendingIds`): a copier
checks its topics' IDs periodically without its loop waiting for a cluster that does not answer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from typing import Any

import attrs
from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient

from mirrorlib.core.incarnations import Incarnation
from mirrorlib.core.settings import FlowSettings
from mirrorlib.kafka import client_conf

__all__ = ["PendingIds", "TopicIds", "describe_ids"]

log = logging.getLogger(__name__)


def describe_ids(client: Any, topics: Iterable[str], timeout: float) -> dict[str, str]:
    """Topic name → its topic ID (Kafka's base64 text) for the ``topics`` that could be
    described through the admin client ``client``."""
    return _collect(_submit(client, topics, timeout), timeout + 5.0)


def _submit(client: Any, topics: Iterable[str], timeout: float) -> dict[str, Future[Any]]:
    """The ``DescribeTopics`` request for ``topics``: topic name → its answer to come (none
    when the request could not be sent)."""
    names = sorted(set(topics))
    if not names:
        return {}
    try:
        futures: dict[str, Future[Any]] = client.describe_topics(
            TopicCollection(names), request_timeout=timeout
        )
    except KafkaException as exc:
        log.debug("describing topics %s failed: %s", names, exc)
        return {}
    return futures


def _collect(futures: Mapping[str, Future[Any]], wait: float | None) -> dict[str, str]:
    """Topic name → topic ID from the answers ``futures`` (``wait``: seconds to wait for each;
    ``None``: only those that came)."""
    out: dict[str, str] = {}
    for name, future in futures.items():
        if wait is None and not future.done():
            continue
        try:
            desc = future.result(wait)
        except Exception as exc:  # unknown topic (deleted now), not authorized, timeout
            log.debug("topic %s not described: %s", name, exc)
            continue
        topic_id = getattr(desc, "topic_id", None)
        if topic_id is not None:
            out[name] = str(topic_id)
    return out


@attrs.define
class PendingIds:
    """The answers to come of :meth:`TopicIds.submit`: :meth:`done` once every answer came or
    the requests' time is up; :meth:`result` never waits (an answer not come is no ID)."""

    remotes: Mapping[str, str]
    source: Mapping[str, Future[Any]]
    target: Mapping[str, Future[Any]]
    deadline: float  # monotonic

    def done(self, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        futures = [*self.source.values(), *self.target.values()]
        return now >= self.deadline or all(f.done() for f in futures)

    def result(self) -> dict[str, Incarnation]:
        """Source topic → its :class:`~mirrorlib.core.incarnations.Incarnation` as answered."""
        src, dst = _collect(self.source, None), _collect(self.target, None)
        return {t: Incarnation(src.get(t), dst.get(r)) for t, r in self.remotes.items()}


class TopicIds:
    """The topic IDs of a flow's source topics and of their remote topics (admin clients on
    both clusters, opened on first use)."""

    def __init__(self, settings: FlowSettings) -> None:
        self.s = settings
        self._source: Any = None
        self._target: Any = None

    def _clients(self) -> tuple[Any, Any]:
        if self._source is None or self._target is None:
            self._source = AdminClient(client_conf(self.s.source_admin))
            self._target = AdminClient(client_conf(self.s.target_admin))
        return self._source, self._target

    def describe(self, remotes: Mapping[str, str]) -> dict[str, Incarnation]:
        """Source topic → its :class:`~mirrorlib.core.incarnations.Incarnation` now, for the
        source topics of ``remotes`` (source topic → remote topic); an ID that could not be
        described is ``None``. Waits for the answers (at most the request timeout)."""
        pending = self.submit(remotes)
        for future in [*pending.source.values(), *pending.target.values()]:
            remaining = pending.deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                future.exception(remaining)
            except Exception:  # (a timeout: result() leaves the ID out)
                break
        return pending.result()

    def submit(self, remotes: Mapping[str, str]) -> PendingIds:
        """Send the requests for the source topics of ``remotes`` (source topic → remote
        topic) and return at once."""
        timeout = min(self.s.admin_timeout, 30.0)
        deadline = time.monotonic() + timeout + 5.0
        if not remotes:
            return PendingIds({}, {}, {}, deadline)
        source, target = self._clients()
        return PendingIds(
            dict(remotes),
            _submit(source, remotes, timeout),
            _submit(target, set(remotes.values()), timeout),
            deadline,
        )

    def close(self) -> None:
        self._source = self._target = None
