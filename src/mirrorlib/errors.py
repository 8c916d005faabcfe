"""The exception tree.

Every error mirrorlib raises on purpose derives from :class:`MirrorError`, so a caller can catch the
whole family with one ``except``; the embedded engine and the Spark engine raise the same types.
Messages name the culprit: the config key and cluster alias, the topic-partition, the record, or
the cluster that failed. Some classes keep a builtin second base, so that code written against
the builtin keeps working (``except ValueError`` catches a :class:`ConfigError`).

```
MirrorError
├── ConfigError (ValueError)     invalid or unsupported configuration (.key, .alias, .value)
├── CodecError (ValueError)      bytes that are not a valid checkpoint / heartbeat / offset sync
├── DataLossError (RuntimeError) the source no longer holds records a flow must copy
├── RecordRefusedError (RuntimeError) a Spark backfill gave up on a record the target refuses
├── FlowFailedError (RuntimeError) a running flow stopped on an error retrying cannot fix
├── FailoverRefusedError         a failover was refused (active, would skip, empty); .plan says why
├── WorkerProtocolError          a frame between a flow's process and a copier worker is unreadable
└── ClusterError                 a Kafka cluster could not be reached or refused a request
    ├── TestClusterError         a local test cluster (mirrorlib.testing) failed to start/stop
    ├── TopicReadTimeoutError (TimeoutError) an internal topic was not read to its end in time
    ├── PlanApplyError           some steps of a plan failed; .result tells which
    └── KafkaRequestError        a request failed (.cluster, .resource, .code, .retriable)
        ├── ClusterTimeoutError (TimeoutError)
        ├── SecurityDisabledError
        ├── UnsupportedVersionError
        └── AuthorizationError
            ├── TopicAuthorizationError
            └── ClusterAuthorizationError
```
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = [
    "AuthorizationError",
    "ClusterAuthorizationError",
    "ClusterError",
    "ClusterTimeoutError",
    "CodecError",
    "ConfigError",
    "DataLossError",
    "FailoverRefusedError",
    "FlowFailedError",
    "KafkaRequestError",
    "MirrorError",
    "PlanApplyError",
    "RecordRefusedError",
    "SecurityDisabledError",
    "TestClusterError",
    "TopicAuthorizationError",
    "TopicReadTimeoutError",
    "UnsupportedVersionError",
    "WorkerProtocolError",
]


# What two exceptions carry, named by shape: this module is the bottom of the package (every layer
# imports it) and imports nothing from it, so it does not name the classes in core.


class _FlowOutcome(Protocol):
    """A failed flow's status: a ``FlowStatus``, as ``Replicator.status()`` returns."""

    @property
    def name(self) -> str: ...
    @property
    def errors(self) -> tuple[str, ...]: ...


class _RefusedPlan(Protocol):
    """A refused failover's plan: a ``FailoverPlan``, as ``failover()`` returns."""

    @property
    def refused(self) -> str | None: ...
    @property
    def partitions(self) -> tuple[Any, ...]: ...
    @property
    def skipped_total(self) -> int: ...
    def describe(self) -> str: ...
    def to_dict(self) -> dict[str, Any]: ...
    def to_json(self) -> str: ...
    def blocks(self) -> list[Any]: ...


class MirrorError(Exception):
    """Root of every error mirrorlib raises on purpose."""


class WorkerProtocolError(MirrorError):
    """A frame between a flow's process and one of its copier worker processes (``tasks.max`` >
    1) could not be read (:mod:`mirrorlib.core.workerproto`)."""


class ConfigError(MirrorError, ValueError):
    """Invalid or unsupported configuration.

    ``key`` is the offending configuration key as written by the user (with its ``alias.`` or
    ``A->B.`` prefix), ``alias`` the cluster or flow it applies to, ``value`` the offending value.
    """

    def __init__(
        self,
        message: str,
        *,
        key: str | None = None,
        alias: str | None = None,
        value: str | None = None,
    ) -> None:
        super().__init__(message)
        self.key = key
        self.alias = alias
        self.value = value


class CodecError(MirrorError, ValueError):
    """Bytes that do not decode as the expected MM2 internal record."""


class DataLossError(MirrorError, RuntimeError):
    """The source no longer holds records a flow must copy (retention, a deleted and recreated
    topic). Raised when ``data.loss.action`` is ``fail``, by the embedded copier (which stops the
    flow) and by the Spark engine's read tasks; the message names the partition and the lost
    offset range."""


class RecordRefusedError(MirrorError, RuntimeError):
    """The target kept refusing a record (larger than the remote topic's ``max.message.bytes``,
    or another permanent delivery error) until a run that must end gave up on its partition: a
    Spark backfill. The message names the partitions and the offsets they stopped at."""


class FlowFailedError(MirrorError, RuntimeError):
    """A running flow stopped on an error that retrying cannot fix (its state is ``FAILED``), such
    as data loss with ``data.loss.action=fail``. Raised by :meth:`Replicator.run
    <mirrorlib.Replicator.run>` (after stopping every flow) and :meth:`Replicator.raise_for_failure
    <mirrorlib.Replicator.raise_for_failure>`; ``statuses`` holds the failed flows' status, whose
    ``errors`` say why."""

    def __init__(self, message: str, statuses: tuple[_FlowOutcome, ...]) -> None:
        super().__init__(message)
        self.statuses = statuses


class FailoverRefusedError(MirrorError):
    """The failover was refused (the group is still active somewhere, would skip records, or
    has nothing to move); ``plan`` tells why."""

    def __init__(self, message: str, plan: _RefusedPlan) -> None:
        super().__init__(message)
        self.plan = plan


class ClusterError(MirrorError):
    """A Kafka cluster could not be reached, or refused a request."""


class TopicReadTimeoutError(ClusterError, TimeoutError):
    """Reading one of MM2's internal topics to its end did not finish in time, for example
    because a transaction left open on it (by a killed worker) had not ended yet; the message
    names the partitions and how far they were read."""


class TestClusterError(ClusterError):
    """A local test cluster from :mod:`mirrorlib.testing` failed to start, stop or resolve jars."""

    __test__ = False  # not a pytest test class


# -- Kafka request errors (mirrorlib.kafka) -------------------------------------------------------


class KafkaRequestError(ClusterError):
    """A request to a Kafka cluster failed.

    ``cluster`` is the alias of the cluster, ``resource`` the topic (or other resource) the
    request was about, ``code`` Kafka's error name (e.g. ``"TOPIC_AUTHORIZATION_FAILED"``) and
    ``retriable`` whether Kafka says retrying may help.
    """

    def __init__(
        self,
        message: str,
        *,
        cluster: str | None = None,
        resource: str | None = None,
        code: str | None = None,
        retriable: bool = False,
    ) -> None:
        super().__init__(message)
        self.cluster = cluster
        self.resource = resource
        self.code = code
        self.retriable = retriable


class ClusterTimeoutError(KafkaRequestError, TimeoutError):
    """A Kafka request did not complete within its timeout (also a builtin ``TimeoutError``)."""


class AuthorizationError(KafkaRequestError):
    """The cluster refused a request for lack of permission (an ACL is missing)."""


class TopicAuthorizationError(AuthorizationError):
    """Not authorized on a topic (Kafka's ``TOPIC_AUTHORIZATION_FAILED``)."""


class ClusterAuthorizationError(AuthorizationError):
    """Not authorized on the cluster resource (Kafka's ``CLUSTER_AUTHORIZATION_FAILED``)."""


class SecurityDisabledError(KafkaRequestError):
    """The cluster has no authorizer, so it has no ACLs (Kafka's ``SECURITY_DISABLED``)."""


class UnsupportedVersionError(KafkaRequestError):
    """The cluster does not support a needed API (e.g. ``IncrementalAlterConfigs``)."""


class PlanApplyError(ClusterError):
    """Some steps of a plan failed; ``result`` tells which (and which succeeded)."""

    def __init__(self, message: str, result: object) -> None:
        super().__init__(message)
        self.result = result
