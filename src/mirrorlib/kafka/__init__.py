"""The I/O edge: confluent-kafka clients behind small interfaces (admin, groups, topic logs).

Every client mirrorlib creates sends librdkafka's own log lines to the Python logger
``mirrorlib.librdkafka`` (instead of stderr), via :func:`client_conf`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

__all__ = ["LIBRDKAFKA_LOGGER", "client_conf"]

LIBRDKAFKA_LOGGER = logging.getLogger("mirrorlib.librdkafka")


def client_conf(config: Mapping[str, Any], **overrides: Any) -> dict[str, Any]:
    """A librdkafka configuration dict with ``overrides`` applied and logging routed to Python."""
    conf: dict[str, Any] = dict(config)
    conf.update(overrides)
    conf.setdefault("logger", LIBRDKAFKA_LOGGER)
    return conf
