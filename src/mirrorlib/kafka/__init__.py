"""The I/O edge: confluent-kafka clients behind small interfaces (admin, groups, topic logs).

Only modules of this package (and the test bed :mod:`mirrorlib.testing`) import
``confluent_kafka``; the runtime composes them. Every client mirrorlib creates sends librdkafka's
own log lines to the Python logger ``mirrorlib.librdkafka`` (instead of stderr), via
:func:`client_conf`; :func:`new_producer`, :func:`new_consumer` and :func:`new_admin_client`
create clients that way.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient

__all__ = [
    "LIBRDKAFKA_LOGGER",
    "client_conf",
    "client_log",
    "consumer_dead",
    "new_admin_client",
    "new_consumer",
    "new_producer",
]

LIBRDKAFKA_LOGGER = logging.getLogger("mirrorlib.librdkafka")


class _LibrdkafkaLog:
    """Receives librdkafka's log lines (``logger.log(level, fmt, *args)``).

    Connection failures are transient and librdkafka retries them itself, so they are logged
    as warnings, and an identical line is repeated at most once every 30 seconds: a broker that
    is down for a minute gives a handful of lines, not thousands. A coordinator that is still
    loading (a fresh cluster's first idempotent producer, a coordinator that moved) is a normal
    step that librdkafka retries, so it is only information in the log. ``on_warning`` receives
    every line of level warning or above first (e.g. to notice a producer that cannot write).
    """

    def __init__(
        self,
        logger: logging.Logger,
        every: float = 30.0,
        on_warning: Callable[[str], None] | None = None,
    ) -> None:
        self._logger = logger
        self._on_warning = on_warning
        self._every = every
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()

    def log(self, level: int, msg: str, *args: Any) -> None:
        text = msg % args if args else msg
        if self._on_warning is not None and level >= logging.WARNING:
            self._on_warning(text)
        if level >= logging.ERROR and (
            "Connect to" in text or "Disconnected" in text or "FAIL" in text
        ):
            level = logging.WARNING
        elif level == logging.WARNING and "Coordinator load in progress" in text:
            level = logging.INFO
        if not self._logger.isEnabledFor(level):
            return
        # the broker address and client name make the key; timing details are left out
        key = text.split(" (after", 1)[0]
        now = time.monotonic()
        with self._lock:
            if now - self._last.get(key, -self._every) < self._every:
                return
            self._last[key] = now
            if len(self._last) > 10_000:
                self._last.clear()
        self._logger.log(level, "%s", text)


_LOG = _LibrdkafkaLog(LIBRDKAFKA_LOGGER)


def consumer_dead(err: KafkaError) -> bool:
    """Whether an error a consumer returned from ``poll``/``consume`` means the consumer is dead:
    librdkafka hands a fatal error to the application as ``_FATAL``, whose ``fatal()`` is false
    there (seen with a static member fenced by another: the copier kept the dead consumer)."""
    return bool(err.fatal()) or err.code() == KafkaError._FATAL


def client_log(on_warning: Callable[[str], None]) -> Any:
    """A ``logger`` for a client configuration: librdkafka's lines go to ``mirrorlib.librdkafka``
    as with :func:`client_conf`, and those of level warning or above also to ``on_warning``
    (called from the thread that polls the client)."""
    return _LibrdkafkaLog(LIBRDKAFKA_LOGGER, on_warning=on_warning)


def client_conf(config: Mapping[str, Any], **overrides: Any) -> dict[str, Any]:
    """A librdkafka configuration dict with ``overrides`` applied and logging routed to Python.

    Raises :class:`~mirrorlib.errors.ConfigError` naming the key and the file when a TLS file
    setting (``ssl.ca.location``...) points to nothing.
    """
    from mirrorlib.kafka.tls import check_tls_files

    conf: dict[str, Any] = dict(config)
    conf.update(overrides)
    check_tls_files(conf)
    conf.setdefault("logger", _LOG)
    return conf


def new_producer(config: Mapping[str, Any], **overrides: Any) -> Producer:
    """A confluent-kafka ``Producer`` configured by :func:`client_conf`."""
    return Producer(client_conf(config, **overrides))


def new_consumer(config: Mapping[str, Any], **overrides: Any) -> Consumer:
    """A confluent-kafka ``Consumer`` configured by :func:`client_conf`."""
    return Consumer(client_conf(config, **overrides))


def new_admin_client(config: Mapping[str, Any], **overrides: Any) -> AdminClient:
    """A confluent-kafka ``AdminClient`` configured by :func:`client_conf`."""
    return AdminClient(client_conf(config, **overrides))
