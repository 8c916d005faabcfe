"""Topics, partitions, topic configs and ACLs of a flow A->B (MM2's MirrorSourceConnector).

At start, MM2's internal topics are created where MM2 puts them (idempotently): the offsets topic
(``mm2-offsets.<A>.internal``) and ``heartbeats`` on B, the checkpoints topic on B and the
offset-syncs topic on its configured cluster. Then, every ``refresh.topics.interval.seconds``
(first run immediately), source topics are discovered through the flow's filters and remote
topics are created with the source's partition count and configs, and grown when the source
grows — never shrunk or deleted. Topic configs and ACLs are synced on their own intervals,
as computed by :mod:`mirrorlib.core.plans`.

Replication factors follow :mod:`mirrorlib.core.replication_factor`: a factor above the live broker
count of the cluster (read each time, never remembered) leaves the topic uncreated — the error is
in the flow's status and the log, and creation is tried again — unless
``replication.factor.lowering.enabled`` allows lowering it, with a warning naming the topic.
"""

from __future__ import annotations

import logging
import threading
import time

from mirrorlib.core.catalog import RemoteTopic, TopicCatalog
from mirrorlib.core.plans import plan_acls, plan_topic_configs, plan_topics
from mirrorlib.core.replication_factor import (
    choose_replication_factor,
    enforce_replication_factor,
    needs_broker_count,
)
from mirrorlib.core.retry import Backoff
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.status import StatsRegistry
from mirrorlib.errors import ClusterError, KafkaRequestError
from mirrorlib.kafka.admin import ClusterAdmin

__all__ = ["MetadataTask"]

log = logging.getLogger(__name__)


def _int_or_none(value: object) -> int | None:
    raw = getattr(value, "value", None)
    try:
        return None if raw is None else int(raw)
    except ValueError:
        return None


class MetadataTask:
    def __init__(self, settings: FlowSettings, catalog: TopicCatalog, stats: StatsRegistry) -> None:
        self.s = settings
        self.catalog = catalog
        self.stats = stats
        self.offsets_topic_partitions = settings.offset_storage_partitions
        self._source: ClusterAdmin | None = None
        self._target: ClusterAdmin | None = None

    # -- admin clients -------------------------------------------------------------------------

    def _admins(self) -> tuple[ClusterAdmin, ClusterAdmin]:
        if self._source is None or self._target is None:
            s = self.s
            self._source = ClusterAdmin(s.source_admin, alias=s.source, timeout=s.admin_timeout)
            self._target = ClusterAdmin(s.target_admin, alias=s.target, timeout=s.admin_timeout)
        return self._source, self._target

    def _rf(self, admin: ClusterAdmin, topic: str, wanted: int) -> int:
        """The factor to create internal ``topic`` with; raises when it must not be created."""
        if not needs_broker_count(wanted):
            return wanted
        choice = choose_replication_factor(
            wanted,
            len(admin.describe_cluster().brokers),
            lowering_enabled=self.s.replication_factor_lowering_enabled,
        )
        if choice.factor is None:
            raise KafkaRequestError(
                choice.explain(topic, admin.alias),
                cluster=admin.alias, resource=topic, code="INVALID_REPLICATION_FACTOR",
                retriable=True,
            )  # fmt: skip
        if choice.lowered:
            log.warning("flow %s: %s", self.s.name, choice.explain(topic, admin.alias))
        return choice.factor

    # -- start -------------------------------------------------------------------------------

    def prepare(self, stop: threading.Event) -> bool:
        """Create the internal topics; retries until it succeeds or ``stop`` is set."""
        backoff = Backoff(base=1.0, cap=30.0)
        while not stop.is_set():
            try:
                self._create_internal_topics()
                self.stats.set_error("metadata", None)
                return True
            except Exception as exc:
                delay = backoff.next_delay()
                self.stats.set_error(
                    "metadata", f"creating internal topics: {exc} (retrying in {delay:.0f}s)"
                )
                log.warning(
                    "flow %s: creating internal topics failed: %s; retrying in %.0fs",
                    self.s.name,
                    exc,
                    delay,
                )
                self._source = self._target = None
                backoff.wait(stop)
        return False

    def _create_internal_topics(self) -> None:
        s = self.s
        source, target = self._admins()
        wanted: list[tuple[ClusterAdmin, str, int, int]] = []  # admin, topic, factor, partitions
        if s.emit_heartbeats_enabled:
            wanted.append(
                (target, s.policy.heartbeats_topic(), s.heartbeats_topic_replication_factor, 1)
            )
        if s.enabled:
            wanted.append(
                (target, s.offset_storage_topic, s.offset_storage_replication_factor,
                 s.offset_storage_partitions)
            )  # fmt: skip
            if s.emit_checkpoints_enabled and s.emit_offset_syncs_enabled:
                wanted.append(
                    (target, s.checkpoints_topic, s.checkpoints_topic_replication_factor, 1)
                )
            if s.emit_offset_syncs_enabled:
                syncs_admin = source if s.offset_syncs_cluster == s.source else target
                wanted.append(
                    (syncs_admin, s.offset_syncs_topic, s.offset_syncs_topic_replication_factor, 1)
                )
        listed: dict[str, dict[str, int]] = {}
        for admin, topic, factor, partitions in wanted:
            existing = listed.get(admin.alias)
            if existing is None:
                existing = listed[admin.alias] = admin.list_topics(include_internal=True)
            count: int | None = existing.get(topic)
            if count is None and admin.create_compacted_topic(
                topic, self._rf(admin, topic, factor), partitions=partitions
            ):
                count = partitions
            # else not created: created meanwhile, or the cluster would not say (not authorized,
            # unsupported): assumed to exist, as MM2 does; only the offsets topic's size matters
            if topic == s.offset_storage_topic and admin is target:
                self.offsets_topic_partitions = (
                    self._await_topic(admin, topic) if count is None else count
                )

    def _await_topic(self, admin: ClusterAdmin, topic: str, wait: float = 5.0) -> int:
        """The partition count of ``topic`` once the cluster's metadata shows it."""
        deadline = time.monotonic() + wait
        while True:
            counts = admin.list_topics(include_internal=True)
            if topic in counts:
                return counts[topic]
            if time.monotonic() >= deadline:
                raise ClusterError(
                    f"topic {topic} does not exist on cluster {admin.alias} and could not be "
                    f"created"
                )
            time.sleep(0.2)

    # -- periodic work -------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        try:
            self._run(stop)
        finally:
            self.release()

    def release(self) -> None:
        """Drop the admin clients (their background threads end with them)."""
        self._source = self._target = None

    def _run(self, stop: threading.Event) -> None:
        s = self.s
        next_topics = next_configs = next_acls = 0.0
        while not stop.is_set():
            now = time.monotonic()
            try:
                if now >= next_topics:
                    done = self.refresh_topics()
                    next_topics = now + (
                        s.refresh_topics_interval if done else min(s.refresh_topics_interval, 30.0)
                    )
                if s.sync_topic_configs_interval is not None and now >= next_configs:
                    self.sync_topic_configs()
                    next_configs = now + s.sync_topic_configs_interval
                if s.sync_topic_acls_interval is not None and now >= next_acls:
                    self.sync_topic_acls()
                    next_acls = now + s.sync_topic_acls_interval
                self.stats.set_error("metadata", None)
            except Exception as exc:  # logged, reported in the status, retried
                self.stats.set_error("metadata", f"{type(exc).__name__}: {exc}")
                log.warning("flow %s: metadata sync failed: %s", s.name, exc)
                self._source = self._target = None
                stop.wait(5.0)
                next_topics = min(next_topics, time.monotonic() + 5.0)
                continue
            stop.wait(1.0)

    def refresh_topics(self) -> bool:
        """Create missing remote topics and partitions, then publish the replicable topics.
        ``False`` when some could not be created or grown (the flow's status says why)."""
        s = self.s
        source, target = self._admins()
        source_counts = source.list_topics()
        candidates = [t for t in source_counts if s.should_replicate_topic(t)]
        source_snap = source.snapshot(candidates)
        target_counts = target.list_topics(include_internal=True)
        plan = plan_topics(
            source_snap,
            target_counts,
            source_alias=s.source,
            policy=s.policy,
            should_replicate=s.should_replicate_topic,
            replication_factor=s.replication_factor,
            config_filter=s.should_replicate_config_property,
            use_defaults_from=s.use_defaults_from,
            target_alias=s.target,
        )
        plan, choices = enforce_replication_factor(
            plan, lambda: len(target.describe_cluster().brokers),
            lowering_enabled=s.replication_factor_lowering_enabled, cluster=s.target,
        )  # fmt: skip
        problems: list[str] = []
        for topic, choice in choices.items():
            if choice.refused:
                problems.append(choice.explain(topic, s.target))
                log.error("flow %s: %s", s.name, problems[-1])
            elif choice.lowered:
                log.warning("flow %s: %s", s.name, choice.explain(topic, s.target))
        if not plan.is_empty:
            log.info("flow %s: %s", s.name, plan.describe(skipped=False))
            result = target.apply(plan, raise_errors=False)
            for failure in result.failures:
                problems.append(str(failure.error or f"{failure.subject} failed"))
                log.warning("flow %s: %s", s.name, problems[-1])
            target_counts = target.list_topics(include_internal=True)
        self.stats.set_error("topics", "; ".join(problems) or None)
        remotes = {
            topic: s.policy.format_remote_topic(s.source, topic)
            for topic in source_snap
            if s.policy.format_remote_topic(s.source, topic) in target_counts
        }
        limits = {
            name: _int_or_none(cfg.get("max.message.bytes"))
            for name, cfg in target.describe_configs(remotes.values()).items()
        }
        published = {
            topic: RemoteTopic(remote, target_counts[remote], limits.get(remote))
            for topic, remote in sorted(remotes.items())
        }
        self.catalog.publish(published)
        return not problems

    def sync_topic_configs(self) -> None:
        s = self.s
        source, target = self._admins()
        candidates = [t for t in source.list_topics() if s.should_replicate_topic(t)]
        remotes = [s.policy.format_remote_topic(s.source, t) for t in candidates]
        plan = plan_topic_configs(
            source.snapshot(candidates),
            target.snapshot(remotes),
            source_alias=s.source,
            policy=s.policy,
            should_replicate=s.should_replicate_topic,
            config_filter=s.should_replicate_config_property,
            use_defaults_from=s.use_defaults_from,
            target_alias=s.target,
        )
        if not plan.is_empty:
            log.info("flow %s: %s", s.name, plan.describe(skipped=False))
            target.apply(plan)

    def sync_topic_acls(self) -> None:
        s = self.s
        source, target = self._admins()
        source_acls = source.describe_acls()
        if source_acls is None:
            return  # no authorizer on the source: logged once by describe_acls
        try:
            target_acls = target.describe_acls()
        except ClusterError as exc:
            log.warning("flow %s: cannot read ACLs of %s: %s", s.name, s.target, exc)
            return
        plan = plan_acls(
            source_acls,
            target_acls or [],
            source_alias=s.source,
            policy=s.policy,
            should_replicate=s.should_replicate_topic,
            target_alias=s.target,
        )
        if not plan.is_empty:
            log.info("flow %s: %s", s.name, plan.describe(skipped=False))
            target.apply(plan)
