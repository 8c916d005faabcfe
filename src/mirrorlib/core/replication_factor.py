"""The replication factor a new topic is created with: one rule for remote and internal topics.

MM2 passes the configured factor to ``CreateTopics`` as it is; a cluster with fewer live brokers
refuses it (``INVALID_REPLICATION_FACTOR``), MM2 logs that and tries again later. mirrorlib keeps
that rule and checks it before asking, so that the error names the topic, the factor wanted and
the live broker count, and so that ``plan`` shows what ``run`` will do:

* a factor the cluster's live brokers can hold is used as it is;
* ``-1`` (the broker's ``default.replication.factor``, KIP-464) and other values below 1 are passed
  through for the broker to judge — never lowered;
* a factor above the live broker count refuses the creation (the topic is not created; the caller
  reports it and tries again), unless the user opted in to lowering with
  ``replication.factor.lowering.enabled=true`` (mirrorlib only, off by default: meant for one-broker
  development clusters), in which case the live broker count at that moment is used.

The live broker count is read each time a topic is about to be created, never remembered: a broker
that is restarting when the flow starts must not lower a factor for good.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import attrs

from mirrorlib.core.plans import CreateTopic, SkippedTopic, SkipReason, Step, TopicPlan

__all__ = [
    "LOWERING_KEY",
    "ReplicationFactorChoice",
    "choose_replication_factor",
    "enforce_replication_factor",
    "needs_broker_count",
]

LOWERING_KEY: Final = "replication.factor.lowering.enabled"
"""The setting that allows lowering a replication factor to the live broker count."""


@attrs.frozen
class ReplicationFactorChoice:
    """The factor a new topic gets: ``factor`` is ``None`` when the topic must not be created."""

    wanted: int
    live_brokers: int
    factor: int | None

    @property
    def refused(self) -> bool:
        return self.factor is None

    @property
    def lowered(self) -> bool:
        return self.factor is not None and self.factor != self.wanted

    def explain(self, topic: str, cluster: str) -> str:
        """One line for the log, the flow's status or a plan, naming ``topic`` on ``cluster``."""
        brokers = f"the {self.live_brokers} live broker(s) of cluster {cluster}"
        if self.factor is None:
            return (
                f"topic {topic} not created: replication factor {self.wanted} is more than "
                f"{brokers} (set {LOWERING_KEY}=true to allow lowering it)"
            )
        if self.lowered:
            return (
                f"topic {topic}: replication factor {self.wanted} lowered to {self.factor}, "
                f"{brokers} ({LOWERING_KEY}=true)"
            )
        return f"topic {topic}: replication factor {self.factor}"


def needs_broker_count(wanted: int) -> bool:
    """Whether the live broker count matters for ``wanted`` (one broker holds factor 1, and
    ``-1`` is the broker's own default)."""
    return wanted > 1


def choose_replication_factor(
    wanted: int, live_brokers: int, *, lowering_enabled: bool
) -> ReplicationFactorChoice:
    """The factor to create a topic with, given the cluster's live broker count now."""
    if wanted <= live_brokers or not needs_broker_count(wanted):
        return ReplicationFactorChoice(wanted, live_brokers, wanted)
    if lowering_enabled and live_brokers >= 1:
        return ReplicationFactorChoice(wanted, live_brokers, live_brokers)
    return ReplicationFactorChoice(wanted, live_brokers, None)


def enforce_replication_factor(
    plan: TopicPlan, live_brokers: Callable[[], int], *, lowering_enabled: bool, cluster: str
) -> tuple[TopicPlan, dict[str, ReplicationFactorChoice]]:
    """``plan`` with :func:`choose_replication_factor` applied to its topic creations.

    ``live_brokers`` answers the live broker count of the target ``cluster`` now; it is called
    once, and only when a creation's factor depends on it. A creation keeps its place with the
    chosen factor, or, when refused, becomes a :class:`~mirrorlib.core.plans.SkippedTopic`
    (reason ``replication factor``) explaining why. Also returns the choice made for every topic
    to create, by remote topic name.
    """
    steps: list[Step] = []
    skipped = list(plan.skipped)
    choices: dict[str, ReplicationFactorChoice] = {}
    live: int | None = None
    for step in plan.steps:
        if not isinstance(step, CreateTopic):
            steps.append(step)
            continue
        if live is None and needs_broker_count(step.replication_factor):
            live = live_brokers()
        choice = choose_replication_factor(
            step.replication_factor, live or 0, lowering_enabled=lowering_enabled
        )
        choices[step.name] = choice
        if choice.factor is None:
            reason = SkipReason.REPLICATION_FACTOR
            name = step.source_topic or step.name
            skipped.append(SkippedTopic(name, reason, choice.explain(step.name, cluster)))
        else:
            steps.append(attrs.evolve(step, replication_factor=choice.factor))
    return TopicPlan(steps, skipped), choices
