"""Back-off between retries: exponential, capped, jittered, resettable, and stop-aware.

The one retry rule of every component that tries again after a failure (the copier's restarts and
its parked partitions, the checkpoint task, the creation of the internal topics). A
:class:`Backoff` uses *decorrelated jitter* (Marc Brooker, "Exponential Backoff And Jitter",
AWS Architecture Blog, 2015)::

    delay = min(cap, uniform(base, 3 * previous delay))      # the first previous delay is base

so every delay lies in ``[base, cap]`` (a retry never comes sooner than ``base``), its upper bound
triples with each failure until ``cap``, and components that failed together (the partitions of a
topic the target refuses, the flows of a cluster that went away) spread their retries out instead
of retrying in lockstep. :meth:`Backoff.reset` starts over after a success.

Waiting is the caller's: :meth:`Backoff.wait` waits the current delay on a stop event and returns
as soon as the event is set; a loop that must not block (the copier parks a partition *until* a
time) adds :meth:`Backoff.next_delay` to its clock instead.

A request a broker refused is retried by one rule too: :func:`classify_broker_error` sorts a
Kafka error (by its name) into :class:`BrokerErrorKind` — the client's metadata is stale (the
partition's leader or its leader epoch moved: FENCED_LEADER_EPOCH after a broker restart), the
error is transient (a timeout, a broker down), or retrying cannot help — and
:func:`next_retry` says what to do after a failed attempt: give up (a permanent error, or the
caller's deadline passed), or wait a back-off delay (never past the deadline) and try again,
with fresh metadata when it was stale, and with a new client when fresh metadata did not help
(librdkafka's admin client keeps a partition's leader epoch in its metadata cache and sends it
again: it must be refreshed, or the client replaced) or when the deadline passed on a
retriable error (a long-lived admin client's coordinator requests can time out for good after
a broker restart, while a new client is answered at once).
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable
from typing import Final, Protocol

import attrs

__all__ = [
    "ATTEMPT_TIMEOUT",
    "NEW_CLIENT_AFTER",
    "STALE_METADATA_ERRORS",
    "TRANSIENT_ERRORS",
    "Backoff",
    "BrokerErrorKind",
    "RetryStep",
    "StopEvent",
    "attempt_timeout",
    "classify_broker_error",
    "next_retry",
]


class StopEvent(Protocol):
    """What :meth:`Backoff.wait` needs of a stop signal (:class:`threading.Event` has it)."""

    def wait(self, timeout: float | None = None) -> bool: ...


def _check_base(instance: Backoff, attribute: attrs.Attribute[float], value: float) -> None:
    if not value > 0:
        raise ValueError(f"back-off base must be positive, not {value!r}")


def _check_cap(instance: Backoff, attribute: attrs.Attribute[float], value: float) -> None:
    if not value >= instance.base:
        raise ValueError(f"back-off cap {value!r} is less than its base {instance.base!r}")


@attrs.define
class Backoff:
    """Delays between the attempts of one retried thing, in seconds (see the module docstring).

    ``uniform(a, b)`` draws the jitter (default :func:`random.uniform`; tests pass their own).
    """

    base: float = attrs.field(validator=_check_base)
    cap: float = attrs.field(validator=_check_cap)
    uniform: Callable[[float, float], float] = attrs.field(
        default=random.uniform, repr=False, eq=False
    )
    #: the delay :meth:`next_delay` returned last; ``0.0`` before a failure or after a reset
    delay: float = attrs.field(default=0.0, init=False)
    #: failures since the start or the last :meth:`reset`
    failures: int = attrs.field(default=0, init=False)

    def next_delay(self) -> float:
        """Count a failure and return how long to wait before the next attempt."""
        previous = self.delay or self.base
        self.delay = min(self.cap, max(self.base, self.uniform(self.base, 3.0 * previous)))
        self.failures += 1
        return self.delay

    def reset(self) -> None:
        """Start over (after a success): the next delay is drawn from ``[base, 3 * base]``."""
        self.delay = 0.0
        self.failures = 0

    def wait(self, stop: StopEvent) -> bool:
        """Wait the current :attr:`delay`, or less if ``stop`` is set meanwhile (at once if it
        already is). Returns whether ``stop`` is set."""
        return stop.wait(self.delay)


# -- retriable broker errors -----------------------------------------------------------------------


class BrokerErrorKind(enum.Enum):
    """What a broker's (or the client's) error says about retrying the request."""

    #: the client's metadata is out of date (leader, leader epoch, coordinator): retry with
    #: fresh metadata
    STALE_METADATA = "stale metadata"
    #: a passing condition (a timeout, a broker down or loading): retry after a back-off
    TRANSIENT = "transient"
    #: retrying cannot help (not authorized, invalid request, fatal client error): fail now
    PERMANENT = "permanent"


#: Errors that mean the client's view of the cluster is stale: Kafka's
#: ``InvalidMetadataException`` family (the Java admin client unmaps the partition and looks its
#: leader up again) and the coordinator errors (the coordinator moved). librdkafka's names.
STALE_METADATA_ERRORS: Final = frozenset({
    "FENCED_LEADER_EPOCH",
    "UNKNOWN_LEADER_EPOCH",
    "NOT_LEADER_FOR_PARTITION",  # NOT_LEADER_OR_FOLLOWER in Kafka's Java names
    "NOT_LEADER_OR_FOLLOWER",
    "LEADER_NOT_AVAILABLE",
    "REPLICA_NOT_AVAILABLE",
    "KAFKA_STORAGE_ERROR",
    "OFFSET_NOT_AVAILABLE",
    "UNKNOWN_TOPIC_OR_PART",
    "NOT_COORDINATOR",
    "COORDINATOR_NOT_AVAILABLE",
    "_UNKNOWN_PARTITION",
    "_WAIT_COORD",
    "_OUTDATED",
    # librdkafka's admin ListOffsets answers offset -1001 (OFFSET_INVALID) without an error when
    # the leader it asked went down (seen on three-node clusters); the edge names it so
    "_NO_OFFSET",
    # librdkafka's admin ListOffsets of a partition without a leader in the client's metadata
    # ("No leaders found"): a topic created a moment ago, or a leader being elected
    "_NOENT",
})  # fmt: skip

#: Errors of a passing condition, retried as they are after a back-off.
TRANSIENT_ERRORS: Final = frozenset({
    "REQUEST_TIMED_OUT",
    "_TIMED_OUT",
    "_TRANSPORT",
    "_ALL_BROKERS_DOWN",
    "_RESOLVE",
    "NETWORK_EXCEPTION",
    "COORDINATOR_LOAD_IN_PROGRESS",
    "NOT_ENOUGH_REPLICAS",
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    "NOT_CONTROLLER",
    "THROTTLING_QUOTA_EXCEEDED",
    "_WAIT_CACHE",
})  # fmt: skip

#: Consecutive failures after which the client is replaced: the first retry of a stale-metadata
#: error refreshes the metadata of the client that failed (and a transient error is retried as
#: it is); the retries after the next failures start with a new client.
NEW_CLIENT_AFTER: Final = 2

#: The first attempt's own timeout (seconds); it doubles with each failed attempt, never past the
#: caller's deadline (:func:`attempt_timeout`).
ATTEMPT_TIMEOUT: Final = 5.0


def classify_broker_error(
    name: str, *, retriable: bool = False, fatal: bool = False
) -> BrokerErrorKind:
    """Sort a Kafka error by its name (``KafkaError.name()``, e.g. ``"FENCED_LEADER_EPOCH"``).

    ``retriable``/``fatal``: what the client said of the error. A fatal error is permanent
    whatever its name; an unnamed error the client calls retriable is transient."""
    if fatal:
        return BrokerErrorKind.PERMANENT
    if name in STALE_METADATA_ERRORS:
        return BrokerErrorKind.STALE_METADATA
    if name in TRANSIENT_ERRORS or retriable:
        return BrokerErrorKind.TRANSIENT
    return BrokerErrorKind.PERMANENT


@attrs.frozen
class RetryStep:
    """What to do after a failed attempt (:func:`next_retry`)."""

    #: stop and raise: retrying cannot help, or the deadline has passed
    give_up: bool
    #: seconds to wait before the next attempt (never past the deadline)
    delay: float = 0.0
    #: fetch fresh metadata before the next attempt
    refresh_metadata: bool = False
    #: replace the client before the next attempt (implies fresh metadata), or, when giving
    #: up, before the caller's next call
    new_client: bool = False


def next_retry(
    kind: BrokerErrorKind, *, failures: int, remaining: float, delay: float
) -> RetryStep:
    """The step after the ``failures``-th consecutive failed attempt of one request.

    ``remaining``: seconds left until the caller's deadline; ``delay``: the back-off delay drawn
    for this failure (:meth:`Backoff.next_delay`). A permanent error gives up at once, any other
    error when the deadline has passed; otherwise the wait is the delay cut to the deadline, so
    the last attempt is made just before it. Stale metadata is refreshed before the first retry
    (a transient error is retried as it is), and from the :data:`NEW_CLIENT_AFTER`-th
    consecutive failure on the client is replaced; a retriable error that outlived the deadline
    replaces the client too, for the next call."""
    if failures < 1:
        raise ValueError(f"failures counts the failed attempts, not {failures!r}")
    if kind is BrokerErrorKind.PERMANENT:
        return RetryStep(give_up=True)
    if remaining <= 0:
        # the next call starts with a new client: a long-lived librdkafka admin client can stay
        # stuck after a broker restart (coordinator requests time out until it is replaced)
        return RetryStep(give_up=True, new_client=True)
    renew = failures >= NEW_CLIENT_AFTER
    return RetryStep(
        give_up=False,
        delay=max(min(delay, remaining), 0.0),
        refresh_metadata=renew or kind is BrokerErrorKind.STALE_METADATA,
        new_client=renew,
    )


def attempt_timeout(failures: int, remaining: float) -> float:
    """How long the attempt after ``failures`` failed ones may take: :data:`ATTEMPT_TIMEOUT`,
    doubled with each failure, cut to the ``remaining`` seconds of the caller's deadline. A
    request sent to a leader that just went down waits out its whole timeout (librdkafka waits
    for the broker to come back): a first attempt of its own leaves time to ask the new leader,
    and a slow cluster still gets longer and longer attempts."""
    return max(min(ATTEMPT_TIMEOUT * 2.0 ** min(failures, 16), remaining), 0.0)
