"""mirrorlib: Apache Kafka MirrorMaker 2, as an importable Python library.

The pure core (policies, records, offset translation, configuration) imports no Kafka client;
the runtime names (:class:`Replicator`, :class:`MirrorClient`, :func:`translate_offsets`) are
loaded on first use, so ``import mirrorlib.core.policy`` stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from mirrorlib.core.config import FlowConfig, MirrorConfig
from mirrorlib.core.policy import (
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    ReplicationPolicy,
)
from mirrorlib.core.records import (
    Checkpoint,
    Heartbeat,
    OffsetAndMetadata,
    OffsetSync,
    TopicPartition,
)
from mirrorlib.core.transforms import Predicate, Transform, TransformRecord
from mirrorlib.core.translate import OffsetTranslator
from mirrorlib.errors import ClusterError, CodecError, ConfigError, MirrorError

if TYPE_CHECKING:
    from mirrorlib.kafka.client import MirrorClient, translate_offsets
    from mirrorlib.runtime.replicator import Replicator

__version__ = "0.1.0"

__all__ = [
    "Checkpoint",
    "ClusterError",
    "CodecError",
    "ConfigError",
    "DefaultReplicationPolicy",
    "FlowConfig",
    "Heartbeat",
    "IdentityReplicationPolicy",
    "MirrorClient",
    "MirrorConfig",
    "MirrorError",
    "OffsetAndMetadata",
    "OffsetSync",
    "OffsetTranslator",
    "Predicate",
    "ReplicationPolicy",
    "Replicator",
    "TopicPartition",
    "Transform",
    "TransformRecord",
    "translate_offsets",
]

_LAZY = {
    "MirrorClient": "mirrorlib.kafka.client",
    "Replicator": "mirrorlib.runtime.replicator",
    "translate_offsets": "mirrorlib.kafka.client",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mirrorlib' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
