"""Custom filter classes for the tests (loaded by Python path)."""

from __future__ import annotations

from collections.abc import Mapping


class OnlyOdd:
    """A topic filter accepting names ending in an odd digit."""

    def __init__(self, source: str) -> None:
        self.source = source

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> OnlyOdd:
        return cls(config["source.cluster.alias"])

    def should_replicate_topic(self, topic: str) -> bool:
        return topic[-1:] in "13579" and topic[-1:] != ""


class NotAFilter:
    """Has none of the filter methods."""
