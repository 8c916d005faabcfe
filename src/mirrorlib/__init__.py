"""mirrorlib: Apache Kafka MirrorMaker 2, as an importable Python library."""

from mirrorlib.errors import ClusterError, CodecError, ConfigError, MirrorError
from mirrorlib.policy import (
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    ReplicationPolicy,
)
from mirrorlib.records import Checkpoint, Heartbeat, OffsetAndMetadata, OffsetSync, TopicPartition
from mirrorlib.translate import OffsetTranslator

__version__ = "0.1.0"

__all__ = [
    "Checkpoint",
    "ClusterError",
    "CodecError",
    "ConfigError",
    "DefaultReplicationPolicy",
    "Heartbeat",
    "IdentityReplicationPolicy",
    "MirrorError",
    "OffsetAndMetadata",
    "OffsetSync",
    "OffsetTranslator",
    "ReplicationPolicy",
    "TopicPartition",
]
