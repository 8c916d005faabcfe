"""Fencing a transactional id (mirrorlib.kafka.fencing); the real-broker effect is tested with
the worker supervisor (tests/runtime/test_workers.py)."""

from __future__ import annotations

import pytest

from mirrorlib.errors import MirrorError
from mirrorlib.kafka.fencing import fence_transactional_id


def test_an_unreachable_coordinator_is_an_error_naming_the_id_and_the_cluster() -> None:
    with pytest.raises(MirrorError, match=r"fencing the transactional id t-0 on cluster B"):
        fence_transactional_id(
            {"bootstrap.servers": "127.0.0.1:1"}, "t-0", cluster="B", timeout=1.0
        )
