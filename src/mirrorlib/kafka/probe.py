"""Is a cluster there? One metadata request, answered within a timeout or failed with a message
that names the cluster alias and its bootstrap address.

The commands and the replicator ask this first, so that an unreachable cluster fails (or is
reported) once, quickly and clearly, instead of through whichever request happened to be the
first to time out.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from mirrorlib.errors import ClusterTimeoutError, ConfigError, MirrorError
from mirrorlib.kafka import client_conf
from mirrorlib.kafka.tls import tls_failure

#: seconds of each metadata request of a stop-aware probe: how soon a stop is noticed
PROBE_SLICE_S = 0.5
_NO_ANSWER_YET = frozenset({KafkaError._TIMED_OUT, KafkaError._TRANSPORT})

__all__ = ["check_reachable", "check_reachable_all", "describe_cluster", "unreachable"]


def describe_cluster(alias: str, config: Mapping[str, Any]) -> str:
    """``"cluster A (host:9092)"``: the alias and the bootstrap address, for messages."""
    bootstrap = str(config.get("bootstrap.servers") or "").strip() or "no bootstrap.servers"
    return f"cluster {alias} ({bootstrap})"


def _new_admin(config: Mapping[str, Any], alias: str, errors: list[str]) -> AdminClient:
    lock = threading.Lock()

    def on_error(err: KafkaError) -> None:
        with lock:
            errors.append(err.str())

    # librdkafka's own log lines would repeat what the error says (one line per attempt)
    conf = client_conf(config, error_cb=on_error, log_level=0)
    try:
        return AdminClient(conf)
    except KafkaException as exc:  # librdkafka rejects the configuration itself
        err = exc.args[0] if exc.args else exc
        reason = err.str() if isinstance(err, KafkaError) else str(err)
        raise ConfigError(
            f"{describe_cluster(alias, config)}: invalid client configuration: {reason}",
            alias=alias,
        ) from exc


def _reason(errors: list[str]) -> str | None:
    """The first connection failure librdkafka reported (``Connect to ... failed: Connection
    refused``, ``Failed to resolve 'host:9092'``), without its timing details."""
    for error in errors:
        if "brokers are down" not in error:
            return error.split(" (after", 1)[0]
    return errors[0] if errors else None


def _ask_metadata(admin: AdminClient, timeout: float, stop: threading.Event | None) -> None:
    """Return once the cluster answered a metadata request (raise when it did not within
    ``timeout`` seconds); with ``stop``, ask in slices and also return once ``stop`` is set."""
    if stop is None:
        admin.list_topics(timeout=timeout)
        return
    deadline = time.monotonic() + timeout
    while not stop.is_set():
        left = deadline - time.monotonic()
        try:
            admin.list_topics(timeout=max(min(left, PROBE_SLICE_S), 0.01))
            return
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            # no answer yet: a short request times out, or fails while no broker is connected
            waiting = isinstance(err, KafkaError) and err.code() in _NO_ANSWER_YET
            if left <= PROBE_SLICE_S or not waiting:
                raise


def check_reachable(
    config: Mapping[str, Any], alias: str, timeout: float, *, stop: threading.Event | None = None
) -> None:
    """Return when the cluster reached with librdkafka ``config`` answers a metadata request
    within ``timeout`` seconds; else raise :class:`~mirrorlib.errors.ClusterTimeoutError` naming
    ``alias`` and the bootstrap address, with the reason (connection refused, name not
    resolved, TLS handshake failed...).

    With ``stop``, the probe asks in slices of :data:`PROBE_SLICE_S` seconds and also returns,
    without an answer, as soon as ``stop`` is set: the caller checks ``stop``.

    Raises :class:`~mirrorlib.errors.ConfigError` when the configuration cannot make a client
    (a TLS file that does not exist, a SASL mechanism librdkafka lacks).
    """
    errors: list[str] = []
    admin = _new_admin(config, alias, errors)
    try:
        _ask_metadata(admin, timeout, stop)
        return
    except KafkaException as exc:
        err = exc.args[0] if exc.args else None
        code = err.name() if isinstance(err, KafkaError) else None
        admin.poll(0)  # delivers the error callbacks: why the connections failed
        reason = (
            tls_failure(config)
            or _reason(errors)
            or (err.str() if isinstance(err, KafkaError) else str(exc))
        )
    raise ClusterTimeoutError(
        f"{describe_cluster(alias, config)} is unreachable: no answer within {timeout:g}s "
        f"({reason})",
        cluster=alias, code=code, retriable=True,
    )  # fmt: skip


def unreachable(
    configs: Mapping[str, Mapping[str, Any]],
    timeout: float,
    *,
    stop: threading.Event | None = None,
) -> dict[str, MirrorError]:
    """:func:`check_reachable` for every cluster of ``configs`` (alias to librdkafka config), in
    parallel (so within about ``timeout`` seconds): the error of each cluster that failed.

    With ``stop``, returns soon after ``stop`` is set, without the clusters that had not
    answered by then: the caller checks ``stop`` before trusting an empty answer."""
    if not configs:
        return {}
    with ThreadPoolExecutor(max_workers=len(configs)) as pool:
        futures = {
            alias: pool.submit(check_reachable, conf, alias, timeout, stop=stop)
            for alias, conf in configs.items()
        }
    failures: dict[str, MirrorError] = {}
    for alias, future in futures.items():
        error = future.exception()
        if isinstance(error, MirrorError):
            failures[alias] = error
        elif error is not None:
            raise error
    return failures


def check_reachable_all(configs: Mapping[str, Mapping[str, Any]], timeout: float) -> None:
    """Raise unless every cluster of ``configs`` answers within ``timeout`` seconds (see
    :func:`unreachable`): a :class:`~mirrorlib.errors.ConfigError` first, else one
    :class:`~mirrorlib.errors.ClusterTimeoutError` naming every cluster that failed."""
    errors = list(unreachable(configs, timeout).values())
    for error in errors:
        if not isinstance(error, ClusterTimeoutError):
            raise error
    if len(errors) == 1:
        raise errors[0]
    if errors:
        first = errors[0]
        assert isinstance(first, ClusterTimeoutError)
        raise ClusterTimeoutError(
            "; ".join(str(e) for e in errors), cluster=first.cluster, code=first.code,
            retriable=True,
        )  # fmt: skip
