"""librdkafka's log lines, routed to the ``mirrorlib.librdkafka`` logger by ``client_conf``."""

from __future__ import annotations

import logging

import pytest

from mirrorlib.kafka import LIBRDKAFKA_LOGGER, client_conf


def test_a_loading_coordinator_is_information_other_warnings_stay(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = client_conf({})["logger"]
    loading = (
        "GETPID [flow|replication-producer#producer-1] [thrd:main]: Failed to acquire "
        "idempotence PID from broker 127.0.0.1:1/1: Broker: Coordinator load in progress: retrying"
    )
    other = "CONFWARN [thrd:app]: Configuration property x is a producer property"
    with caplog.at_level(logging.DEBUG, logger=LIBRDKAFKA_LOGGER.name):
        logger.log(logging.WARNING, "%s", loading)
        logger.log(logging.WARNING, "%s", other)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.INFO, loading),
        (logging.WARNING, other),
    ]
