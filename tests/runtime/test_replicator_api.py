"""The Replicator's constructor: what it accepts, and what it says about what it does not."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from mirrorlib import MirrorConfig, Replicator


@pytest.mark.parametrize("config", ["mm2.properties", {"clusters": "A, B"}, None])
def test_replicator_takes_a_mirror_config(config: Any) -> None:
    with pytest.raises(TypeError, match=r"Replicator takes a MirrorConfig, not .*from_file"):
        Replicator(config)


def test_replicator_logs_the_configuration_warnings(caplog: pytest.LogCaptureFixture) -> None:
    config = MirrorConfig.from_properties(
        "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:1\n"
        "A->B.enabled = true\nreplicaton.factor = 3\nA->C.enabled = true\n"
    )
    with caplog.at_level(logging.WARNING, logger="mirrorlib"):
        replicator = Replicator(config)
    assert replicator.never_up == ("A->B", "B->A")  # never started
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "configuration: replicaton.factor: not an MM2 configuration key; ignored" in logged
    assert any(m.startswith("configuration: A->C.enabled: names a flow") for m in logged)
