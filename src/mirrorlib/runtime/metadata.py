"""Topics, partitions, topic configs and ACLs of a flow A->B (MM2's MirrorSourceConnector).

At start, MM2's internal topics are created where MM2 puts them (idempotently): the offsets topic
(``mm2-offsets.<A>.internal``) and ``heartbeats`` on B, the checkpoints topic on B and the
offset-syncs topic on its configured cluster. Then, every ``refresh.topics.interval.seconds``
(first run immediately), source topics are discovered through the flow's filters and remote
topics are created with the source's partition count and configs, and grown when the source
grows — never shrunk or deleted. Topic configs and ACLs are synced on their own intervals,
as computed by :mod:`mirrorlib.core.plans`.

Replication factors larger than the target's broker count are lowered to the broker count with
a warning (MM2 fails instead), so single-broker development clusters work with MM2's defaults.
"""

from __future__ import annotations

import logging
import threading
import time

from mirrorlib.core.catalog import RemoteTopic, TopicCatalog
from mirrorlib.core.plans import plan_acls, plan_topic_configs, plan_topics
from mirrorlib.core.retry import Backoff
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.status import StatsRegistry
from mirrorlib.errors import ClusterError
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
        self._brokers: dict[str, int] = {}

    # -- admin clients -------------------------------------------------------------------------

    def _admins(self) -> tuple[ClusterAdmin, ClusterAdmin]:
        if self._source is None or self._target is None:
            s = self.s
            self._source = ClusterAdmin(s.source_admin, alias=s.source, timeout=s.admin_timeout)
            self._target = ClusterAdmin(s.target_admin, alias=s.target, timeout=s.admin_timeout)
        return self._source, self._target

    def _rf(self, admin: ClusterAdmin, wanted: int, what: str) -> int:
        if wanted <= 0:
            return wanted  # -1: the broker's default
        brokers = self._brokers.get(admin.alias)
        if brokers is None:
            brokers = self._brokers[admin.alias] = max(len(admin.describe_cluster().brokers), 1)
        if wanted > brokers:
            log.warning(
                "flow %s: %s replication factor %d is more than the %d broker(s) of cluster %s; using %d",
                self.s.name,
                what,
                wanted,
                brokers,
                admin.alias,
                brokers,
            )
            return brokers
        return wanted

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
        if s.emit_heartbeats_enabled:
            target.create_compacted_topic(
                s.policy.heartbeats_topic(),
                self._rf(target, s.heartbeats_topic_replication_factor, "heartbeats topic"),
            )
        if not s.enabled:
            return
        target.create_compacted_topic(
            s.offset_storage_topic,
            self._rf(target, s.offset_storage_replication_factor, "offsets topic"),
            partitions=s.offset_storage_partitions,
        )
        self.offsets_topic_partitions = target.list_topics(include_internal=True)[
            s.offset_storage_topic
        ]
        if s.emit_checkpoints_enabled and s.emit_offset_syncs_enabled:
            target.create_compacted_topic(
                s.checkpoints_topic,
                self._rf(target, s.checkpoints_topic_replication_factor, "checkpoints topic"),
            )
        if s.emit_offset_syncs_enabled:
            syncs_admin = source if s.offset_syncs_cluster == s.source else target
            syncs_admin.create_compacted_topic(
                s.offset_syncs_topic,
                self._rf(
                    syncs_admin, s.offset_syncs_topic_replication_factor, "offset-syncs topic"
                ),
            )

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
                    self.refresh_topics()
                    next_topics = now + s.refresh_topics_interval
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

    def refresh_topics(self) -> None:
        """Create missing remote topics and partitions, then publish the replicable topics."""
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
            replication_factor=self._rf(target, s.replication_factor, "remote topic"),
            config_filter=s.should_replicate_config_property,
            use_defaults_from=s.use_defaults_from,
            target_alias=s.target,
        )
        if not plan.is_empty:
            log.info("flow %s: %s", s.name, plan.describe(skipped=False))
            result = target.apply(plan, raise_errors=False)
            for failure in result.failures:
                log.warning("flow %s: %s", s.name, failure)
            target_counts = target.list_topics(include_internal=True)
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
