"""Consumer-group administration on one cluster (list, read and write committed offsets)."""

from __future__ import annotations

from collections.abc import Mapping
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
from mirrorlib.errors import ClusterError, ClusterTimeoutError
from mirrorlib.kafka import client_conf
from mirrorlib.kafka.tls import failure_reason, tls_failure

__all__ = ["GroupAdmin", "GroupState"]


#: Client-side errors meaning the cluster did not answer (not an answer about the group).
_UNREACHABLE = frozenset(
    {KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN}
)


class GroupState(StrEnum):
    """A consumer group's state on a cluster, reduced to what offset syncing needs."""

    ABSENT = "absent"  # no such group (DEAD, or never existed)
    EMPTY = "empty"  # exists, no members: offsets may be written
    ACTIVE = "active"  # has members (stable or rebalancing): never write its offsets
    UNKNOWN = "unknown"


class GroupAdmin:
    """Group operations against one cluster; every call has a timeout and raises
    :class:`~mirrorlib.errors.ClusterError` naming the cluster."""

    def __init__(self, config: Mapping[str, str], *, alias: str, timeout: float = 30.0) -> None:
        self.alias = alias
        self.timeout = timeout
        self._config = config
        try:
            self._admin = AdminClient(client_conf(config))
        except KafkaException as exc:
            raise ClusterError(f"cluster {alias}: cannot create an admin client: {exc}") from exc

    def _wait(self, future: Any, what: str) -> Any:
        try:
            return future.result(timeout=self.timeout)
        except KafkaException as exc:
            raise ClusterError(
                f"cluster {self.alias}: {what} failed: {failure_reason(self._config, exc)}"
            ) from exc
        except TimeoutError as exc:
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
        result = self._wait(futures[group], f"listing offsets of group {group}")
        out: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp in result.topic_partitions or []:
            if tp.error is not None or tp.offset < 0:
                continue
            out[TopicPartition(tp.topic, tp.partition)] = OffsetAndMetadata(
                tp.offset, tp.metadata or ""
            )
        return out

    def states(self, groups: list[str]) -> dict[str, GroupState]:
        if not groups:
            return {}
        try:
            futures = self._admin.describe_consumer_groups(groups, request_timeout=self.timeout)
        except KafkaException as exc:
            raise ClusterError(f"cluster {self.alias}: describing groups failed: {exc}") from exc
        out: dict[str, GroupState] = {}
        for group, future in futures.items():
            try:
                desc = future.result(timeout=self.timeout)
            except TimeoutError as exc:
                raise self._timed_out(f"describing group {group}", group) from exc
            except KafkaException as exc:
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
            state = desc.state
            if state in (ConsumerGroupState.DEAD,):
                out[group] = GroupState.ABSENT
            elif state == ConsumerGroupState.EMPTY:
                out[group] = GroupState.EMPTY
            elif state == ConsumerGroupState.UNKNOWN:
                out[group] = GroupState.UNKNOWN
            else:
                out[group] = GroupState.ACTIVE
        return out

    def commit_offsets(
        self, group: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None:
        """Write committed offsets for a group that has no active members."""
        if not offsets:
            return
        tps = [
            KafkaTopicPartition(tp.topic, tp.partition, om.offset, om.metadata)
            if om.metadata
            else KafkaTopicPartition(tp.topic, tp.partition, om.offset)
            for tp, om in sorted(offsets.items())
        ]
        futures = self._admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, tps)], request_timeout=self.timeout
        )
        result = self._wait(futures[group], f"committing offsets of group {group}")
        errors = [
            f"{tp.topic}-{tp.partition}: {tp.error}"
            for tp in result.topic_partitions or []
            if tp.error
        ]
        if errors:
            raise ClusterError(
                f"cluster {self.alias}: committing offsets of group {group}: {'; '.join(errors)}"
            )
