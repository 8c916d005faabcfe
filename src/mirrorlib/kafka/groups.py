"""Consumer-group administration on one cluster (list, read and write committed offsets)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any

from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
)
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from mirrorlib.core.records import OffsetAndMetadata, TopicPartition
from mirrorlib.core.retry import BrokerErrorKind, classify_broker_error
from mirrorlib.errors import ClusterError, ClusterTimeoutError, KafkaRequestError
from mirrorlib.kafka import client_conf
from mirrorlib.kafka.admin import kafka_error
from mirrorlib.kafka.tls import failure_reason, tls_failure

__all__ = ["IN_FLIGHT", "GroupAdmin", "GroupState"]

#: Requests :meth:`GroupAdmin.committed_offsets_many` and ``commit_offsets_many`` keep in flight.
IN_FLIGHT = 500


#: Client-side errors meaning the cluster did not answer (not an answer about the group).
_UNREACHABLE = frozenset(
    {KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN}
)


def _offsets(result: Any) -> dict[TopicPartition, OffsetAndMetadata]:
    out: dict[TopicPartition, OffsetAndMetadata] = {}
    for tp in result.topic_partitions or []:
        if tp.error is not None or tp.offset < 0:
            continue
        out[TopicPartition(tp.topic, tp.partition)] = OffsetAndMetadata(
            tp.offset, tp.metadata or ""
        )
    return out


class GroupState(StrEnum):
    """A consumer group's state on a cluster, reduced to what offset syncing needs."""

    ABSENT = "absent"  # no such group (DEAD, or never existed)
    EMPTY = "empty"  # exists, no members: offsets may be written
    ACTIVE = "active"  # has members (stable or rebalancing): never write its offsets
    UNKNOWN = "unknown"


def _state_of(desc: Any) -> GroupState:
    """The :class:`GroupState` of a ``ConsumerGroupDescription``. A state this client does not
    know (a newer group protocol's) with members is active: never written into."""
    state = desc.state
    if state == ConsumerGroupState.DEAD:
        return GroupState.ABSENT
    if state == ConsumerGroupState.EMPTY:
        return GroupState.EMPTY
    if state == ConsumerGroupState.UNKNOWN:
        return GroupState.ACTIVE if getattr(desc, "members", None) else GroupState.UNKNOWN
    return GroupState.ACTIVE


def _retriable(exc: BaseException) -> bool:
    """Whether a failed group request may succeed with another client (a timeout, a moved or
    loading coordinator: :func:`~mirrorlib.core.retry.classify_broker_error`)."""
    if isinstance(exc, TimeoutError):
        return True
    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    if not isinstance(err, KafkaError):
        return False
    kind = classify_broker_error(err.name(), retriable=err.retriable(), fatal=err.fatal())
    return kind is not BrokerErrorKind.PERMANENT


class GroupAdmin:
    """Group operations against one cluster; every call has a timeout and raises
    :class:`~mirrorlib.errors.ClusterError` naming the cluster.

    A request that failed for a retriable reason (a timeout, a coordinator moved or loading)
    leaves a new admin client for the next call: after a broker restart, a long-lived client's
    OffsetFetch and DescribeGroups requests were measured to time out for minutes while a new
    client was answered at once (``tests/kafka/test_groups.py``). The failed call itself is not
    retried here: callers poll (the checkpoint task) or retry within their own budget
    (failover)."""

    def __init__(self, config: Mapping[str, str], *, alias: str, timeout: float = 30.0) -> None:
        self.alias = alias
        self.timeout = timeout
        self._config = config
        self._stale = False
        #: How many times the client was replaced after a retriable failure.
        self.new_clients = 0
        self._client = self._new_client()

    def _new_client(self) -> Any:
        try:
            return AdminClient(client_conf(self._config))
        except KafkaException as exc:
            raise ClusterError(
                f"cluster {self.alias}: cannot create an admin client: {exc}"
            ) from exc

    @property
    def _admin(self) -> Any:
        """The client for the next request: a new one after a retriable failure."""
        if self._stale:
            self._stale = False
            self._client = self._new_client()
            self.new_clients += 1
        return self._client

    def _failed(self, exc: BaseException) -> None:
        if _retriable(exc):
            self._stale = True

    def _wait(self, future: Any, what: str) -> Any:
        try:
            return future.result(timeout=self.timeout)
        except KafkaException as exc:
            self._failed(exc)
            raise ClusterError(
                f"cluster {self.alias}: {what} failed: {failure_reason(self._config, exc)}"
            ) from exc
        except TimeoutError as exc:
            self._failed(exc)
            raise self._timed_out(what) from exc

    def _timed_out(self, what: str, resource: str | None = None) -> ClusterTimeoutError:
        why = tls_failure(self._config)
        return ClusterTimeoutError(
            f"cluster {self.alias}: {what} timed out after {self.timeout}s"
            + (f": {why}" if why else ""),
            cluster=self.alias, resource=resource, code="_TIMED_OUT", retriable=True,
        )  # fmt: skip

    def list_groups(self) -> list[str]:
        result = self._wait(
            self._admin.list_consumer_groups(request_timeout=self.timeout), "listing groups"
        )
        return sorted(g.group_id for g in result.valid)

    def committed_offsets(self, group: str) -> dict[TopicPartition, OffsetAndMetadata]:
        futures = self._admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=self.timeout
        )
        return _offsets(self._wait(futures[group], f"listing offsets of group {group}"))

    def committed_offsets_many(
        self, groups: Iterable[str]
    ) -> dict[str, dict[TopicPartition, OffsetAndMetadata] | ClusterError]:
        """:meth:`committed_offsets` of many groups, with up to :data:`IN_FLIGHT` requests
        outstanding at a time (confluent-kafka's ``list_consumer_group_offsets`` takes one group
        per request). A group whose read failed maps to the error instead."""
        out: dict[str, dict[TopicPartition, OffsetAndMetadata] | ClusterError] = {}
        pending = list(groups)
        for start in range(0, len(pending), IN_FLIGHT):
            chunk = pending[start : start + IN_FLIGHT]
            futures = {
                g: self._admin.list_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(g)], request_timeout=self.timeout
                )[g]
                for g in chunk
            }
            for group, future in futures.items():
                try:
                    result = self._wait(future, f"listing offsets of group {group}")
                except ClusterError as exc:
                    out[group] = exc
                    continue
                out[group] = _offsets(result)
        return out

    def commit_offsets_many(
        self, offsets: Mapping[str, Mapping[TopicPartition, OffsetAndMetadata]]
    ) -> dict[str, ClusterError | None]:
        """:meth:`commit_offsets` for many groups, up to :data:`IN_FLIGHT` requests outstanding
        at a time; maps each group to ``None`` or the error of its commit."""
        out: dict[str, ClusterError | None] = {}
        items = [(g, o) for g, o in offsets.items() if o]
        for start in range(0, len(items), IN_FLIGHT):
            futures = {g: self._commit_future(g, o) for g, o in items[start : start + IN_FLIGHT]}
            for group, future in futures.items():
                try:
                    self._check_commit(
                        group, self._wait(future, f"committing offsets of group {group}")
                    )
                    out[group] = None
                except ClusterError as exc:
                    out[group] = exc
        return out

    def states(self, groups: list[str]) -> dict[str, GroupState]:
        if not groups:
            return {}
        try:
            futures = self._admin.describe_consumer_groups(groups, request_timeout=self.timeout)
        except KafkaException as exc:
            self._failed(exc)
            raise ClusterError(f"cluster {self.alias}: describing groups failed: {exc}") from exc
        out: dict[str, GroupState] = {}
        for group, future in futures.items():
            try:
                desc = future.result(timeout=self.timeout)
            except TimeoutError as exc:
                self._failed(exc)
                raise self._timed_out(f"describing group {group}", group) from exc
            except KafkaException as exc:
                self._failed(exc)
                err = exc.args[0] if exc.args else None
                code = err.code() if isinstance(err, KafkaError) else None
                if code in _UNREACHABLE:  # the cluster did not answer, as on a timeout
                    raise ClusterError(
                        f"cluster {self.alias}: describing group {group} failed: "
                        f"{failure_reason(self._config, exc)}"
                    ) from exc
                out[group] = (
                    GroupState.ABSENT
                    if code == KafkaError.GROUP_ID_NOT_FOUND
                    else GroupState.UNKNOWN
                )
                continue
            out[group] = _state_of(desc)
        return out

    def describe_state(self, group: str) -> tuple[GroupState, KafkaRequestError | None]:
        """``group``'s state, with the error that made it :attr:`GroupState.UNKNOWN` (whose
        ``code`` names Kafka's error: ``GROUP_AUTHORIZATION_FAILED``, ``NOT_COORDINATOR``,
        ``_TIMED_OUT``...), ``None`` when the cluster answered about the group. Never raises
        for a failed request: the caller decides what an unknown state means."""
        what = f"describing group {group}"
        try:
            future = self._admin.describe_consumer_groups([group], request_timeout=self.timeout)
            desc = future[group].result(timeout=self.timeout)
        except (KafkaException, TimeoutError) as exc:
            err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
            if isinstance(err, KafkaError) and err.code() == KafkaError.GROUP_ID_NOT_FOUND:
                return GroupState.ABSENT, None
            self._failed(exc)
            error = kafka_error(exc, cluster=self.alias, action=what, resource=group)
            if isinstance(exc, TimeoutError):
                error = self._timed_out(what, group)
            return GroupState.UNKNOWN, error
        state = _state_of(desc)
        if state is GroupState.UNKNOWN:
            return state, KafkaRequestError(
                f"{what} on cluster {self.alias}: the cluster reported the state "
                f"{desc.state!r}, which this client cannot interpret",
                cluster=self.alias, resource=group,
            )  # fmt: skip
        return state, None

    def commit_offsets(
        self, group: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None:
        """Write committed offsets for a group that has no active members."""
        if not offsets:
            return
        future = self._commit_future(group, offsets)
        self._check_commit(group, self._wait(future, f"committing offsets of group {group}"))

    def _commit_future(
        self, group: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> Any:
        tps = [
            KafkaTopicPartition(tp.topic, tp.partition, om.offset, om.metadata)
            if om.metadata
            else KafkaTopicPartition(tp.topic, tp.partition, om.offset)
            for tp, om in sorted(offsets.items())
        ]
        return self._admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, tps)], request_timeout=self.timeout
        )[group]

    def _check_commit(self, group: str, result: Any) -> None:
        errors = [
            f"{tp.topic}-{tp.partition}: {tp.error}"
            for tp in result.topic_partitions or []
            if tp.error
        ]
        if errors:
            raise ClusterError(
                f"cluster {self.alias}: committing offsets of group {group}: {'; '.join(errors)}"
            )
