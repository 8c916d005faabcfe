"""Fencing a transactional id (mirrorlib.kafka.fencing); the real-broker effect is tested with
the worker supervisor (tests/runtime/test_workers.py)."""

from __future__ import annotations

import pytest

from mirrorlib.errors import ClusterTimeoutError, MirrorError
from mirrorlib.kafka.fencing import fence_transactional_id


def test_an_unreachable_coordinator_is_an_error_naming_the_id_and_the_cluster() -> None:
    with pytest.raises(MirrorError, match=r"fencing the transactional id t-0 on cluster B"):
        fence_transactional_id(
            {"bootstrap.servers": "127.0.0.1:1"}, "t-0", cluster="B", timeout=1.0
        )


def test_the_users_producer_settings_cannot_turn_idempotence_off_for_the_fence() -> None:
    # a transactional producer needs idempotence: the user's setting for the record producer
    # (which mirrorlib overrides there too) must not make the fence a configuration error
    with pytest.raises(ClusterTimeoutError, match=r"fencing the transactional id t-1 on cluster B"):
        fence_transactional_id(
            {"bootstrap.servers": "127.0.0.1:1", "enable.idempotence": "false"},
            "t-1",
            cluster="B",
            timeout=1.0,
        )  # (it reached the coordinator's address, not a configuration error)
