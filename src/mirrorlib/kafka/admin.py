"""Snapshot a cluster and apply plans to it with confluent-kafka's ``AdminClient``.

:class:`ClusterAdmin` is the I/O edge of :mod:`mirrorlib.core.plans`: it turns what a cluster says
(topics, partition counts, described configs, ACL bindings) into the pure snapshot values (the
conversions themselves are :mod:`mirrorlib.kafka.convert`), and
carries out a :class:`~mirrorlib.core.plans.Plan` (create topics, grow partitions, incrementally alter
configs, create ACLs). It also creates MM2's single-partition compacted internal topics.

Every call has a timeout (the wrapper's ``timeout`` unless given). Kafka errors become
:class:`~mirrorlib.errors.KafkaRequestError` subclasses whose messages name the cluster alias and
the topic; a request that does not finish in time raises
:class:`~mirrorlib.errors.ClusterTimeoutError`.

    admin_a = ClusterAdmin(config.client_config("A", "admin"), alias="A")
    admin_b = ClusterAdmin(config.client_config("B", "admin"), alias="B")
    plan = plan_topics(admin_a.snapshot(), admin_b.list_topics(), source_alias="A", ...)
    admin_b.apply(plan)
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Literal, TypeVar

import attrs
from confluent_kafka import OFFSET_INVALID, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # implicit re-exports
    AclBindingFilter,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclOperation as CkAclOperation,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclPermissionType as CkAclPermissionType,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    ResourcePatternType as CkPatternType,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    ResourceType as CkResourceType,
)

from mirrorlib.core.plans import (
    AclRule,
    AlterTopicConfigs,
    CreateAcls,
    CreatePartitions,
    CreateTopic,
    Plan,
    Step,
    TopicConfigEntry,
    TopicSnapshot,
)
from mirrorlib.core.retry import (
    Backoff,
    BrokerErrorKind,
    attempt_timeout,
    classify_broker_error,
    next_retry,
)
from mirrorlib.errors import (
    AuthorizationError,
    ClusterAuthorizationError,
    ClusterTimeoutError,
    KafkaRequestError,
    PlanApplyError,
    SecurityDisabledError,
    TopicAuthorizationError,
    UnsupportedVersionError,
)
from mirrorlib.kafka import client_conf
from mirrorlib.kafka.convert import EntryConverter, enum_name, from_acl_binding, to_acl_binding

__all__ = [
    "KAFKA_INTERNAL_TOPICS",
    "ApplyResult",
    "BrokerInfo",
    "ClusterAdmin",
    "ClusterDescription",
    "FreshAdmin",
    "Outcome",
    "kafka_error",
    "list_offsets",
]

log = logging.getLogger(__name__)

#: Topics the brokers own; never listed by :meth:`ClusterAdmin.list_topics` (Java's
#: ``listTopics()`` leaves internal topics out too).
KAFKA_INTERNAL_TOPICS: Final = frozenset(
    {"__consumer_offsets", "__transaction_state", "__share_group_state", "__cluster_metadata"}
)

_ERRORS: Final[dict[int, type[KafkaRequestError]]] = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: TopicAuthorizationError,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: ClusterAuthorizationError,
    KafkaError.GROUP_AUTHORIZATION_FAILED: AuthorizationError,
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: AuthorizationError,
    KafkaError.SASL_AUTHENTICATION_FAILED: AuthorizationError,
    KafkaError.SECURITY_DISABLED: SecurityDisabledError,
    KafkaError.UNSUPPORTED_VERSION: UnsupportedVersionError,
    KafkaError._UNSUPPORTED_FEATURE: UnsupportedVersionError,
    KafkaError._TIMED_OUT: ClusterTimeoutError,
    KafkaError.REQUEST_TIMED_OUT: ClusterTimeoutError,
}

_PROBE_NAME: Final = "__mirrorlib_authorizer_probe__"
_UNCHANGED_CREATE: Final = frozenset({KafkaError.TOPIC_ALREADY_EXISTS})
_TOLERATED_COMPACTED: Final = frozenset({
    KafkaError.TOPIC_ALREADY_EXISTS,
    KafkaError.UNSUPPORTED_VERSION,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
})  # fmt: skip


# -- errors --------------------------------------------------------------------------------------


def kafka_error(
    exc: BaseException, *, cluster: str, action: str, resource: str | None = None
) -> KafkaRequestError:
    """A :class:`~mirrorlib.errors.KafkaRequestError` (subclass) for a failed request.

    ``action`` says what was attempted ("create topic A.orders"); the message reads
    ``"<action> on cluster <alias> failed: <reason> (<ERROR_NAME>)"``.
    """
    if isinstance(exc, KafkaRequestError):
        return exc
    if isinstance(exc, (concurrent.futures.TimeoutError, TimeoutError)):
        return ClusterTimeoutError(
            f"{action} on cluster {cluster} timed out", cluster=cluster, resource=resource,
            code="_TIMED_OUT", retriable=True,
        )  # fmt: skip
    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    if isinstance(err, KafkaError):
        cls = _ERRORS.get(err.code(), KafkaRequestError)
        return cls(
            f"{action} on cluster {cluster} failed: {err.str()} ({err.name()})",
            cluster=cluster, resource=resource, code=err.name(), retriable=err.retriable(),
        )  # fmt: skip
    return KafkaRequestError(
        f"{action} on cluster {cluster} failed: {exc}", cluster=cluster, resource=resource
    )


def _code(exc: BaseException) -> int | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        code: int = exc.args[0].code()
        return code
    return None


#: Topics whose DescribeConfigs resource a :class:`ClusterAdmin` keeps for its next describes
#: (building one costs more than describing an unchanged topic; ~0.35 KiB each).
CONFIG_RESOURCES_KEPT: Final = 200_000


# -- results -------------------------------------------------------------------------------------


@attrs.frozen
class BrokerInfo:
    """One broker of a cluster."""

    id: int
    host: str
    port: int
    rack: str | None = None


@attrs.frozen
class ClusterDescription:
    """What ``describeCluster`` says: the cluster id, the controller and the brokers."""

    cluster_id: str | None
    controller_id: int | None
    brokers: tuple[BrokerInfo, ...]


Status = Literal["applied", "unchanged", "failed"]


@attrs.frozen
class Outcome:
    """What happened to one item of a plan step on the target.

    ``subject`` is the topic name (or the ACL rule, as text); ``status`` is ``"applied"``,
    ``"unchanged"`` (the topic already existed / already had the partitions) or ``"failed"``
    (then ``error`` says why).
    """

    step: Step
    subject: str
    status: Status
    error: KafkaRequestError | None = attrs.field(default=None, eq=False)


@attrs.frozen
class ApplyResult:
    """The outcome of :meth:`ClusterAdmin.apply`, item by item, in plan order."""

    cluster: str
    outcomes: tuple[Outcome, ...]

    @property
    def failures(self) -> tuple[Outcome, ...]:
        return tuple(o for o in self.outcomes if o.status == "failed")

    @property
    def ok(self) -> bool:
        return not self.failures

    def raise_for_errors(self) -> None:
        """Raise :class:`~mirrorlib.errors.PlanApplyError` if anything failed.

        Its message lists the failures; ``result`` is this object.
        """
        failures = self.failures
        if failures:
            reasons = "; ".join(str(o.error) for o in failures[:5])
            more = f" (and {len(failures) - 5} more)" if len(failures) > 5 else ""
            raise PlanApplyError(
                f"{len(failures)} of {len(self.outcomes)} plan items failed on cluster "
                f"{self.cluster}: {reasons}{more}",
                self,
            )


# -- retrying with fresh metadata ----------------------------------------------------------------

T = TypeVar("T")

#: First and longest wait between two attempts of a refused request (seconds; see
#: :class:`~mirrorlib.core.retry.Backoff`).
RETRY_BASE: Final = 0.2
RETRY_CAP: Final = 5.0


def _error_of(exc: BaseException) -> tuple[str, bool, bool, str]:
    """``(name, retriable, fatal, text)`` of a failed request's exception."""
    if isinstance(exc, KafkaRequestError):  # without a client exception as its cause
        return exc.code or "UNKNOWN", exc.retriable, False, str(exc)
    if isinstance(exc, (concurrent.futures.TimeoutError, TimeoutError)):
        return "_TIMED_OUT", True, False, "no answer in time"
    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    if isinstance(err, KafkaError):
        return str(err.name()), bool(err.retriable()), bool(err.fatal()), str(err.str())
    return type(exc).__name__, False, False, str(exc)


class FreshAdmin:
    """An ``AdminClient`` whose refused requests are retried with fresh metadata.

    librdkafka's admin client keeps each partition's leader and leader epoch in its metadata
    cache and sends them with ListOffsets; it does not refresh that cache when the broker answers
    FENCED_LEADER_EPOCH (the leader epoch moved on: a broker restarted, a leader moved), so a
    long-lived client fails the same way for ever. :meth:`call` retries by the rule of
    :func:`mirrorlib.core.retry.next_retry`: with a back-off, never past the caller's deadline,
    with fresh metadata (a metadata request for every topic) when it was stale, and with a new
    client when fresh metadata did not help; then it raises a
    :class:`~mirrorlib.errors.KafkaRequestError` naming the cluster, the partition and the
    broker's error. A retriable error that lasted until the deadline also leaves a new client
    for the next call: after a broker restart, a long-lived client's coordinator requests
    (DescribeGroups, OffsetFetch) were measured to time out for minutes, fresh metadata or not,
    while a new client was answered at once.

    ``config``: the client's librdkafka configuration (a new client is made from it);
    ``client``: an existing ``AdminClient`` (without ``config`` or ``new_client`` it is kept,
    and only its metadata is refreshed); ``new_client``: makes a new client instead of
    ``config``. ``base``/``cap``: the back-off's first and longest wait.
    """

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        alias: str,
        client: Any = None,
        new_client: Callable[[], Any] | None = None,
        base: float = RETRY_BASE,
        cap: float = RETRY_CAP,
    ) -> None:
        if new_client is None and config is not None:
            conf = dict(config)
            new_client = lambda: AdminClient(client_conf(conf))  # noqa: E731
        if client is None and new_client is None:
            raise ValueError("FreshAdmin needs a librdkafka config or a client")
        self._new_client = new_client
        self.alias = alias
        self.client: Any = client if client is not None else self._make_client()
        self._base = base
        self._cap = cap
        #: metadata refreshes and client replacements so far (logs and tests)
        self.refreshes = 0
        self.new_clients = 0

    def __repr__(self) -> str:
        return f"<FreshAdmin {self.alias}>"

    def _make_client(self) -> Any:
        assert self._new_client is not None
        return self._new_client()

    def refresh_metadata(self, timeout: float) -> None:
        """Ask for the metadata of every topic (naming a topic could auto-create it): librdkafka
        replaces its cached leaders and leader epochs with the answer. A failure is left to the
        next attempt."""
        self.refreshes += 1
        try:
            self.client.list_topics(timeout=max(timeout, 0.1))
        except KafkaException as exc:
            log.debug("cluster %s: metadata refresh failed: %s", self.alias, exc)

    def renew(self) -> None:
        """Replace the client (keep it, with fresh metadata, when none can be made)."""
        if self._new_client is None:
            self.refresh_metadata(RETRY_CAP)
            return
        self.new_clients += 1
        self.client = self._make_client()

    def call(self, action: str, attempt: Callable[[Any, float], T], *, timeout: float) -> T:
        """``attempt(client, seconds)`` until it returns, retrying what the brokers or
        the client refused (``KafkaException``, a timeout, or a
        :class:`~mirrorlib.errors.KafkaRequestError` whose ``resource`` names the refused part,
        raised from the client's exception) for up to ``timeout`` seconds. ``seconds``: the
        attempt's own timeout (:func:`~mirrorlib.core.retry.attempt_timeout`). ``action`` says
        what is attempted ("list end offsets of mm2-offsets.A.internal") in logs and errors."""
        started = time.monotonic()
        deadline = started + timeout
        backoff = Backoff(self._base, max(self._cap, self._base))
        while True:
            left = deadline - time.monotonic()
            try:
                return attempt(self.client, max(attempt_timeout(backoff.failures, left), 0.001))
            except (KafkaRequestError, KafkaException, concurrent.futures.TimeoutError,
                    TimeoutError) as exc:  # fmt: skip
                refused = isinstance(exc, KafkaRequestError)
                resource = exc.resource if isinstance(exc, KafkaRequestError) else None
                cause = exc.__cause__ if refused and exc.__cause__ is not None else exc
                name, retriable, fatal, text = _error_of(cause)
                kind = classify_broker_error(name, retriable=retriable, fatal=fatal)
                failures = backoff.failures + 1
                step = next_retry(
                    kind, failures=failures, remaining=deadline - time.monotonic(),
                    delay=backoff.next_delay(),
                )  # fmt: skip
                what = f"{action}" + (f" ({resource})" if resource else "")
                if step.give_up:
                    if step.new_client:  # for the caller's next call
                        self.renew()
                    raise self._give_up(what, resource, name, retriable, text, kind, failures,
                                        time.monotonic() - started) from cause  # fmt: skip
                if failures == 1 or (step.new_client and failures == 2):
                    log.info(
                        "cluster %s: %s: %s (%s); retrying%s", self.alias, what, text, name,
                        " with a new admin client" if step.new_client
                        else " with fresh metadata" if step.refresh_metadata else "",
                    )  # fmt: skip
                else:
                    log.debug("cluster %s: %s: %s (%s); attempt %d", self.alias, what, text,
                              name, failures + 1)  # fmt: skip
                time.sleep(step.delay)
                left = deadline - time.monotonic()
                if step.new_client:
                    self.renew()
                elif step.refresh_metadata:
                    self.refresh_metadata(min(max(left, 0.1), RETRY_CAP))

    def _give_up(
        self,
        what: str,
        resource: str | None,
        name: str,
        retriable: bool,
        text: str,
        kind: BrokerErrorKind,
        attempts: int,
        elapsed: float,
    ) -> KafkaRequestError:
        cls = ClusterTimeoutError if name in ("_TIMED_OUT", "REQUEST_TIMED_OUT") else (
            _ERRORS.get(getattr(KafkaError, name, -1), KafkaRequestError)
        )  # fmt: skip
        tried = (
            "" if kind is BrokerErrorKind.PERMANENT
            else f"; still refused after {attempts} attempts in {elapsed:.1f}s"
        )  # fmt: skip
        return cls(
            f"{what} on cluster {self.alias} failed: {text} ({name}){tried}",
            cluster=self.alias, resource=resource, code=name,
            retriable=kind is not BrokerErrorKind.PERMANENT or retriable,
        )  # fmt: skip


def list_offsets(
    admin: FreshAdmin,
    request: Mapping[tuple[str, int], Any],
    *,
    timeout: float,
    isolation_level: Any = None,
    action: str = "list offsets",
    refused: dict[tuple[str, int], Exception] | None = None,
) -> dict[tuple[str, int], int]:
    """The offset of each ``(topic, partition)`` for its ``OffsetSpec`` (earliest, latest, a
    time), by :meth:`FreshAdmin.call`: the partitions a broker refused are asked again (only
    they) with fresh metadata until ``timeout``; then a
    :class:`~mirrorlib.errors.KafkaRequestError` names the first refused partition — or, with
    ``refused`` (a dict), the partitions still refused are put there with their errors and the
    others' offsets returned."""
    pending = dict(request)
    got: dict[tuple[str, int], int] = {}
    errors: dict[tuple[str, int], BaseException] = {}
    if not pending:
        return got

    def attempt(client: Any, remaining: float) -> dict[tuple[str, int], int]:
        kwargs: dict[str, Any] = {"request_timeout": remaining}
        if isolation_level is not None:
            kwargs["isolation_level"] = isolation_level
        futures = client.list_offsets(
            {KafkaTopicPartition(t, p): spec for (t, p), spec in pending.items()}, **kwargs
        )
        errors.clear()
        for ktp, future in futures.items():
            key = (ktp.topic, ktp.partition)
            try:
                offset = int(future.result(timeout=remaining + 5.0).offset)
            except (KafkaException, concurrent.futures.TimeoutError, TimeoutError) as exc:
                errors[key] = exc
                continue
            if offset == OFFSET_INVALID:  # no error, no offset: the leader asked went down
                errors[key] = KafkaRequestError(
                    "no offset in the answer (its leader went down?)", cluster=admin.alias,
                    resource=f"{key[0]}-{key[1]}", code="_NO_OFFSET", retriable=True,
                )  # fmt: skip
                continue
            got[key] = offset
            pending.pop(key, None)
        if errors:  # the partitions still pending are asked again
            key, cause = next(iter(errors.items()))
            part = f"{key[0]}-{key[1]}"
            raise KafkaRequestError(part, cluster=admin.alias, resource=part) from cause
        return got

    try:
        return admin.call(action, attempt, timeout=timeout)
    except KafkaRequestError as exc:
        if refused is None or not errors:
            raise
        for (t, p), cause in errors.items():
            refused[(t, p)] = kafka_error(
                cause, cluster=admin.alias, action=f"{action} ({t}-{p})", resource=f"{t}-{p}"
            ) if cause is not exc.__cause__ else exc  # fmt: skip
        return got


# -- the admin wrapper ---------------------------------------------------------------------------


class ClusterAdmin:
    """A small, typed wrapper around ``confluent_kafka.admin.AdminClient`` for one cluster.

    ``config`` is librdkafka configuration (e.g. ``MirrorConfig.client_config(alias, "admin")``),
    ``alias`` names the cluster in errors and logs, ``timeout`` (seconds) bounds every call
    unless the call is given its own. ``client`` injects an existing ``AdminClient``.
    """

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        alias: str,
        timeout: float = 30.0,
        client: Any = None,
    ) -> None:
        if client is None:
            if config is None:
                raise ValueError("ClusterAdmin needs a librdkafka config or a client")
            client = AdminClient(client_conf(config))
        self.alias = alias
        self.timeout = timeout
        # its client is replaced when a request needs a new one (see FreshAdmin)
        self._fresh = FreshAdmin(config, alias=alias, client=client)
        self._no_authorizer_logged = False
        self._convert = EntryConverter()  # described config entries, shared across describes
        self._resources: dict[str, Any] = {}  # topic -> its ConfigResource (describes only)

    def __repr__(self) -> str:
        return f"<ClusterAdmin {self.alias}>"

    @property
    def client(self) -> Any:
        """The ``AdminClient`` (a new one after :class:`FreshAdmin` replaced it)."""
        return self._fresh.client

    @client.setter
    def client(self, client: Any) -> None:
        self._fresh.client = client

    def close(self) -> None:
        """Release the client (AdminClient has no explicit close; dropping it is enough)."""
        self.client = None

    def __enter__(self) -> ClusterAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers ---------------------------------------------------------------------------

    def _timeout(self, timeout: float | None) -> float:
        return self.timeout if timeout is None else timeout

    def _error(
        self, exc: BaseException, action: str, resource: str | None = None
    ) -> KafkaRequestError:
        return kafka_error(exc, cluster=self.alias, action=action, resource=resource)

    def _call(self, action: str, fn: Callable[[], Any], resource: str | None = None) -> Any:
        try:
            return fn()
        except (KafkaException, concurrent.futures.TimeoutError, TimeoutError) as exc:
            raise self._error(exc, action, resource) from exc

    @staticmethod
    def _wait(future: Any, timeout: float) -> Any:
        # the request itself carries ``timeout``; allow a little slack for the response
        return future.result(timeout=timeout + 5.0)

    # -- reading -----------------------------------------------------------------------------

    def list_offsets(
        self,
        request: Mapping[tuple[str, int], Any],
        *,
        isolation_level: Any = None,
        timeout: float | None = None,
        refused: dict[tuple[str, int], Exception] | None = None,
    ) -> dict[tuple[str, int], int]:
        """``(topic, partition)`` → offset for its ``OffsetSpec``, retried with fresh metadata
        (see :func:`list_offsets`; ``refused``: collect the partitions still refused instead of
        raising)."""
        return list_offsets(
            self._fresh, request, timeout=self._timeout(timeout),
            isolation_level=isolation_level, refused=refused,
        )  # fmt: skip

    def list_topics(
        self, *, include_internal: bool = False, timeout: float | None = None
    ) -> dict[str, int]:
        """Topic names → partition counts. Broker-owned topics (``__consumer_offsets``…) are
        left out unless ``include_internal``; topics the metadata reports with an error and no
        partitions (e.g. not authorized) are left out too."""
        t = self._timeout(timeout)
        metadata = self._call("list topics", lambda: self.client.list_topics(timeout=t))
        out: dict[str, int] = {}
        for name, info in metadata.topics.items():
            if not include_internal and name in KAFKA_INTERNAL_TOPICS:
                continue
            if info.error is not None and not info.partitions:
                log.debug("cluster %s: topic %s not listed: %s", self.alias, name, info.error)
                continue
            out[name] = len(info.partitions)
        return out

    def describe_configs(
        self,
        topics: Iterable[str],
        *,
        keys: Iterable[str] | None = None,
        timeout: float | None = None,
        previous: Mapping[str, Mapping[str, TopicConfigEntry]] | None = None,
    ) -> dict[str, Mapping[str, TopicConfigEntry]]:
        """Topic → config name → :class:`~mirrorlib.core.plans.TopicConfigEntry` (every entry
        Kafka describes, or only those named in ``keys``). Topics that no longer exist are left
        out. A topic whose entries are those of its mapping in ``previous`` (an earlier answer)
        gets that very mapping back: nothing new is made for it, and it compares by identity."""
        wanted = None if keys is None else frozenset(keys)
        names = sorted(set(topics))
        if not names:
            return {}
        t = self._timeout(timeout)
        resources = self._topic_resources(names)
        futures = self._call(
            "describe configs",
            lambda: self.client.describe_configs(resources, request_timeout=t),
        )
        out: dict[str, Mapping[str, TopicConfigEntry]] = {}
        convert = self._convert
        before = previous or {}
        for resource, future in futures.items():
            name = resource.name
            try:
                entries = self._wait(future, t)
            except (KafkaException, concurrent.futures.TimeoutError) as exc:
                if _code(exc) == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    log.debug("cluster %s: topic %s vanished before describe", self.alias, name)
                    continue
                raise self._error(exc, f"describe configs of topic {name}", name) from exc
            out[name] = convert.entries(entries, wanted, before.get(name))
        return out

    def _topic_resources(self, names: list[str]) -> list[Any]:
        """A describe's ``ConfigResource`` of each topic: kept between describes (the config
        sync describes every topic each cycle), at most :data:`CONFIG_RESOURCES_KEPT`."""
        kept = self._resources
        resources = list(map(kept.get, names))
        new = [i for i, resource in enumerate(resources) if resource is None]
        if len(kept) + len(new) > CONFIG_RESOURCES_KEPT:
            kept.clear()
        for i in new:
            resources[i] = kept[names[i]] = ConfigResource(CkResourceType.TOPIC, names[i])
        return resources

    def snapshot(
        self,
        topics: Iterable[str] | None = None,
        *,
        configs: bool = True,
        timeout: float | None = None,
    ) -> dict[str, TopicSnapshot]:
        """Topic → :class:`~mirrorlib.core.plans.TopicSnapshot` for ``topics`` (default: every
        listed topic), with described configs unless ``configs=False``. Topics that do not
        exist are left out."""
        counts = self.list_topics(timeout=timeout)
        names = sorted(counts if topics is None else set(topics) & set(counts))
        described = self.describe_configs(names, timeout=timeout) if configs else {}
        return {
            n: TopicSnapshot(n, counts[n], described.get(n, {}))
            for n in names
            if not configs or n in described
        }

    def describe_acls(self, *, timeout: float | None = None) -> list[AclRule] | None:
        """Every topic ACL binding (any pattern type) as :class:`~mirrorlib.core.plans.AclRule`.

        Returns ``None`` when the cluster has no authorizer (``SECURITY_DISABLED``): the
        first time this is logged at INFO with a hint to disable ACL sync, later at DEBUG
        (as MM2 does). Other failures raise.

        librdkafka (2.x) drops the error of a ``DescribeAcls`` answer and hands out an empty
        list instead (for ``SECURITY_DISABLED`` and for ``CLUSTER_AUTHORIZATION_FAILED``
        alike). So an empty answer is checked: ``describeCluster`` tells whether the caller may
        ``DESCRIBE`` the cluster (else :class:`~mirrorlib.errors.ClusterAuthorizationError`),
        and a ``DeleteAcls`` request whose filter matches no ACL (it deletes nothing) is
        answered with ``SECURITY_DISABLED`` when there is no authorizer.
        """
        t = self._timeout(timeout)
        any_filter: Any = AclBindingFilter  # its stub wants str where None means "any"
        acl_filter = any_filter(
            CkResourceType.TOPIC, None, CkPatternType.ANY, None, None,
            CkAclOperation.ANY, CkAclPermissionType.ANY,
        )  # fmt: skip
        try:
            bindings = self._wait(self.client.describe_acls(acl_filter, request_timeout=t), t)
            if not bindings:
                self._probe_authorizer(t)
        except ClusterAuthorizationError:
            raise
        except (KafkaException, concurrent.futures.TimeoutError) as exc:
            error = self._error(exc, "describe ACLs")
            if isinstance(error, SecurityDisabledError):
                if not self._no_authorizer_logged:
                    self._no_authorizer_logged = True
                    log.info(
                        "No ACL authorizer is configured on cluster %s, so no topic ACL syncing "
                        "will take place. Consider disabling topic ACL syncing by setting "
                        "sync.topic.acls.enabled to 'false'.",
                        self.alias,
                    )
                else:
                    log.debug("cluster %s still has no ACL authorizer; skipping", self.alias)
                return None
            raise error from exc
        return [from_acl_binding(b) for b in bindings]

    def _probe_authorizer(self, timeout: float) -> None:
        """Raise if ACLs cannot be described: no authorizer, or not authorized."""
        result = self._wait(
            self.client.describe_cluster(
                request_timeout=timeout, include_authorized_operations=True
            ),
            timeout,
        )
        # requested explicitly, so "none" (librdkafka: None) means no operation is allowed
        # (brokers since Kafka 2.3, KIP-430, answer it)
        allowed = {enum_name(op) for op in (result.authorized_operations or ())}
        if not allowed & {"DESCRIBE", "ALL"}:
            raise ClusterAuthorizationError(
                f"describe ACLs on cluster {self.alias} failed: not authorized to DESCRIBE the "
                f"cluster (CLUSTER_AUTHORIZATION_FAILED)",
                cluster=self.alias, code="CLUSTER_AUTHORIZATION_FAILED",
            )  # fmt: skip
        probe = AclBindingFilter(
            CkResourceType.TOPIC, _PROBE_NAME, CkPatternType.LITERAL, f"User:{_PROBE_NAME}",
            "127.0.0.255", CkAclOperation.READ, CkAclPermissionType.DENY,
        )  # fmt: skip
        futures = self.client.delete_acls([probe], request_timeout=timeout)
        try:
            for future in futures.values():
                self._wait(future, timeout)
        except KafkaException as exc:
            if _code(exc) == KafkaError.SECURITY_DISABLED:
                raise
            # anything else (e.g. not authorized to alter ACLs) means an authorizer is there
            log.debug("cluster %s: authorizer probe answered %s", self.alias, exc)

    def describe_cluster(self, *, timeout: float | None = None) -> ClusterDescription:
        """The cluster id, controller and brokers."""
        t = self._timeout(timeout)
        result = self._call(
            "describe cluster",
            lambda: self._wait(self.client.describe_cluster(request_timeout=t), t),
        )
        controller = getattr(result, "controller", None)
        return ClusterDescription(
            cluster_id=result.cluster_id,
            controller_id=None if controller is None else controller.id,
            brokers=tuple(
                BrokerInfo(n.id, n.host, n.port, getattr(n, "rack", None))
                for n in sorted(result.nodes, key=lambda n: n.id)
            ),
        )

    # -- writing -----------------------------------------------------------------------------

    def create_compacted_topic(
        self,
        name: str,
        replication_factor: int = -1,
        *,
        partitions: int = 1,
        configs: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> bool:
        """Create a compacted topic (MM2's ``createSinglePartitionCompactedTopic``).

        Idempotent, like MM2: returns ``True`` when created, ``False`` when it already exists
        or the cluster refuses to say (unsupported API, not authorized to create: the topic
        is assumed to exist or to be auto-created). Invalid configuration (e.g. a replication
        factor above the broker count) and timeouts raise.
        """
        t = self._timeout(timeout)
        topic = NewTopic(
            name, num_partitions=partitions, replication_factor=replication_factor,
            config={**(configs or {}), "cleanup.policy": "compact"},
        )  # fmt: skip
        action = f"create topic {name}"
        try:
            futures = self.client.create_topics([topic], request_timeout=t, operation_timeout=t)
            self._wait(futures[name], t)
        except (KafkaException, concurrent.futures.TimeoutError) as exc:
            code = _code(exc)
            if code in _TOLERATED_COMPACTED:
                log.debug("cluster %s: not creating topic %s: %s", self.alias, name, exc)
                return False
            raise self._error(exc, action, name) from exc
        log.info("Created topic %s on cluster %s", name, self.alias)
        return True

    def apply(
        self, plan: Plan | Sequence[Step], *, timeout: float | None = None,
        raise_errors: bool = True,
    ) -> ApplyResult:  # fmt: skip
        """Carry out a plan's steps on this (target) cluster, batched by kind, in plan order.

        * topics are created (a topic that already exists is ``"unchanged"``);
        * partitions are grown (``INVALID_PARTITIONS`` — e.g. already grown — is swallowed as
          MM2 does, ``"unchanged"``);
        * configs are altered with ``incrementalAlterConfigs``;
        * ACLs are created (creating an existing ACL is a no-op in Kafka).

        Every item is attempted even if others fail. With ``raise_errors`` (default) a
        :class:`~mirrorlib.errors.PlanApplyError` is raised at the end if anything failed;
        otherwise inspect :attr:`ApplyResult.failures`.
        """
        steps = plan.steps if isinstance(plan, Plan) else tuple(plan)
        t = self._timeout(timeout)
        outcomes: list[Outcome] = []
        creates = [s for s in steps if isinstance(s, CreateTopic)]
        grows = [s for s in steps if isinstance(s, CreatePartitions)]
        alters = [s for s in steps if isinstance(s, AlterTopicConfigs)]
        acls = [s for s in steps if isinstance(s, CreateAcls)]
        if creates:
            outcomes += self._create_topics(creates, t)
        if grows:
            outcomes += self._create_partitions(grows, t)
        if alters:
            outcomes += self._alter_configs(alters, t)
        if acls:
            outcomes += self._create_acls(acls, t)
        result = ApplyResult(self.alias, tuple(outcomes))
        if raise_errors:
            result.raise_for_errors()
        return result

    def _collect(
        self,
        action: str,
        items: Sequence[tuple[Step, str, Any]],
        timeout: float,
        unchanged: frozenset[int] = frozenset(),
    ) -> list[Outcome]:
        """Wait for every (step, subject, future) and turn it into an Outcome."""
        outcomes: list[Outcome] = []
        for step, subject, future in items:
            try:
                self._wait(future, timeout)
            except (KafkaException, concurrent.futures.TimeoutError) as exc:
                if _code(exc) in unchanged:
                    outcomes.append(Outcome(step, subject, "unchanged"))
                    continue
                error = self._error(exc, f"{action} {subject}", subject)
                log.warning("%s", error)
                outcomes.append(Outcome(step, subject, "failed", error))
                continue
            outcomes.append(Outcome(step, subject, "applied"))
        return outcomes

    def _failed_request(
        self, action: str, items: Sequence[tuple[Step, str]], exc: BaseException
    ) -> list[Outcome]:
        outcomes = []
        for step, subject in items:
            error = self._error(exc, f"{action} {subject}", subject)
            outcomes.append(Outcome(step, subject, "failed", error))
        log.warning("%s", outcomes[0].error if outcomes else exc)
        return outcomes

    def _create_topics(self, steps: Sequence[CreateTopic], timeout: float) -> list[Outcome]:
        new = [
            NewTopic(s.name, num_partitions=s.partitions,
                     replication_factor=s.replication_factor, config=dict(s.configs))
            for s in steps
        ]  # fmt: skip
        try:
            futures = self.client.create_topics(
                new, request_timeout=timeout, operation_timeout=timeout
            )
        except KafkaException as exc:
            return self._failed_request("create topic", [(s, s.name) for s in steps], exc)
        outcomes = self._collect(
            "create topic", [(s, s.name, futures[s.name]) for s in steps], timeout,
            _UNCHANGED_CREATE,
        )  # fmt: skip
        for o in outcomes:
            if o.status == "applied":
                step = o.step
                assert isinstance(step, CreateTopic)
                log.info("Created remote topic %s with %d partitions on cluster %s",
                         step.name, step.partitions, self.alias)  # fmt: skip
        return outcomes

    def _create_partitions(
        self, steps: Sequence[CreatePartitions], timeout: float
    ) -> list[Outcome]:
        new = [NewPartitions(s.name, s.total) for s in steps]
        try:
            futures = self.client.create_partitions(
                new, request_timeout=timeout, operation_timeout=timeout
            )
        except KafkaException as exc:
            return self._failed_request("create partitions of", [(s, s.name) for s in steps], exc)
        outcomes = self._collect(
            "create partitions of", [(s, s.name, futures[s.name]) for s in steps], timeout,
            frozenset({KafkaError.INVALID_PARTITIONS}),
        )  # fmt: skip
        for o in outcomes:
            if o.status == "applied":
                step = o.step
                assert isinstance(step, CreatePartitions)
                log.info("Increased size of %s to %d partitions on cluster %s",
                         step.name, step.total, self.alias)  # fmt: skip
        return outcomes

    def _alter_configs(self, steps: Sequence[AlterTopicConfigs], timeout: float) -> list[Outcome]:
        resources = []
        for s in steps:
            entries = [
                ConfigEntry(
                    op.key, op.value if op.op == "SET" else None,
                    incremental_operation=(
                        AlterConfigOpType.SET if op.op == "SET" else AlterConfigOpType.DELETE
                    ),
                )
                for op in s.ops
            ]  # fmt: skip
            resources.append(
                ConfigResource(CkResourceType.TOPIC, s.name, incremental_configs=entries)
            )
        try:
            futures = self.client.incremental_alter_configs(resources, request_timeout=timeout)
        except KafkaException as exc:
            return self._failed_request("alter configs of topic", [(s, s.name) for s in steps],
                                        exc)  # fmt: skip
        by_name = {r.name: f for r, f in futures.items()}
        return self._collect(
            "alter configs of topic", [(s, s.name, by_name[s.name]) for s in steps], timeout
        )

    def _create_acls(self, steps: Sequence[CreateAcls], timeout: float) -> list[Outcome]:
        items = [(s, r, to_acl_binding(r)) for s in steps for r in s.rules]
        bindings = list({b: None for _, _, b in items})
        try:
            futures = self.client.create_acls(bindings, request_timeout=timeout)
        except KafkaException as exc:
            return self._failed_request("create ACL", [(s, str(r)) for s, r, _ in items], exc)
        return self._collect("create ACL", [(s, str(r), futures[b]) for s, r, b in items], timeout)
