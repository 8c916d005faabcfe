"""A custom replication policy: remote topics keep their name and get a suffix.

MM2's default names the copy of ``orders`` from cluster ``us-east`` ``us-east.orders``. Some teams
prefer the original name first, so topic listings sort by topic: ``orders.from-us-east``.

Subclass :class:`mirrorlib.ReplicationPolicy` and define three methods; everything else
(heartbeats, checkpoints and offset-syncs topic names, internal-topic detection, ``original_topic``)
is derived with MM2's semantics. Use it from ``mm2.properties``::

    replication.policy.class = examples.custom_policy:SuffixReplicationPolicy

(any importable ``module:Class`` path works; ``from_config`` is optional and receives the
``replication.policy.*`` keys). Run ``python examples/custom_policy.py`` to see it name topics.
"""

from __future__ import annotations

from collections.abc import Mapping

from mirrorlib import ReplicationPolicy

MARKER = ".from-"


class SuffixReplicationPolicy(ReplicationPolicy):
    """``orders`` from ``us-east`` becomes ``orders.from-us-east``."""

    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        return f"{topic}{MARKER}{source_cluster_alias}"

    def topic_source(self, topic: str) -> str | None:
        head, sep, alias = topic.rpartition(MARKER)
        return alias if sep and head and alias else None

    def upstream_topic(self, topic: str) -> str | None:
        head, sep, alias = topic.rpartition(MARKER)
        return head if sep and head and alias else None

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> SuffixReplicationPolicy:
        del config  # no settings of its own
        return cls()


def main() -> None:
    from mirrorlib import MirrorConfig

    policy = SuffixReplicationPolicy()
    remote = policy.format_remote_topic("us-east", "orders")
    twice = policy.format_remote_topic("eu-west", remote)
    print(f"orders from us-east          -> {remote}")
    print(f"...then from eu-west         -> {twice}")
    print(f"source of {twice!r}  = {policy.topic_source(twice)}")
    print(f"original topic               = {policy.original_topic(twice)}")
    print(f"checkpoints topic (us-east)  = {policy.checkpoints_topic('us-east')}")
    config = MirrorConfig.from_properties(
        {
            "clusters": "us-east, eu-west",
            "us-east.bootstrap.servers": "localhost:9092",
            "eu-west.bootstrap.servers": "localhost:9093",
            "us-east->eu-west.enabled": "true",
            "replication.policy.class": f"{__name__}:SuffixReplicationPolicy",
        }
    )
    flow = config.flow("us-east", "eu-west")
    print(
        f"flow {flow.name} uses {type(flow.policy).__name__}; replicates "
        f"'orders': {flow.should_replicate_topic('orders')}, "
        f"'{policy.format_remote_topic('eu-west', 'x')}' (a cycle): "
        f"{flow.should_replicate_topic(policy.format_remote_topic('eu-west', 'x'))}"
    )


if __name__ == "__main__":
    main()
