"""Reading topic IDs (KIP-516), which tell a topic's incarnations apart
(:mod:`mirrorlib.core.incarnations`).

:class:`TopicIds` describes the source topics of a flow and their remote topics on the target
(``DescribeTopics``, one request per cluster for any number of topics). A topic that cannot be
described (deleted right now, not authorized, a timeout) has no ID in the answer: nothing is
concluded for it, and the caller keeps what it knew.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient

from mirrorlib.core.incarnations import Incarnation
from mirrorlib.core.settings import FlowSettings
from mirrorlib.kafka import client_conf

__all__ = ["TopicIds", "describe_ids"]

log = logging.getLogger(__name__)


def describe_ids(client: Any, topics: Iterable[str], timeout: float) -> dict[str, str]:
    """Topic name → its topic ID (Kafka's base64 text) for the ``topics`` that could be
    described through the admin client ``client``."""
    names = sorted(set(topics))
    if not names:
        return {}
    try:
        futures = client.describe_topics(TopicCollection(names), request_timeout=timeout)
    except KafkaException as exc:
        log.debug("describing topics %s failed: %s", names, exc)
        return {}
    out: dict[str, str] = {}
    for name, future in futures.items():
        try:
            desc = future.result(timeout + 5.0)
        except Exception as exc:  # unknown topic (deleted now), not authorized, timeout
            log.debug("topic %s not described: %s", name, exc)
            continue
        topic_id = getattr(desc, "topic_id", None)
        if topic_id is not None:
            out[name] = str(topic_id)
    return out


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
        described is ``None``."""
        if not remotes:
            return {}
        source, target = self._clients()
        timeout = min(self.s.admin_timeout, 30.0)
        src = describe_ids(source, remotes, timeout)
        dst = describe_ids(target, set(remotes.values()), timeout)
        return {t: Incarnation(src.get(t), dst.get(r)) for t, r in remotes.items()}

    def close(self) -> None:
        self._source = self._target = None
