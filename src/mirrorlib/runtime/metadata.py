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
from collections.abc import Callable, Iterable, Mapping
from typing import Final

from mirrorlib.core.catalog import RemoteTopic, TopicCatalog
from mirrorlib.core.counters import StatsRegistry
from mirrorlib.core.plans import (
    TopicConfigEntry,
    TopicSnapshot,
    comparison_turn,
    plan_acls,
    plan_topic_configs,
    plan_topics,
)
from mirrorlib.core.replication_factor import (
    choose_replication_factor,
    enforce_replication_factor,
    needs_broker_count,
)
from mirrorlib.core.retry import Backoff
from mirrorlib.core.settings import FlowSettings
from mirrorlib.errors import ClusterError, KafkaRequestError
from mirrorlib.kafka.admin import ClusterAdmin
from mirrorlib.kafka.worker_reports import TOPIC_CONFIGS as WORKER_STATUS_TOPIC_CONFIGS

__all__ = [
    "LIMITS_MAX_AGE",
    "LIMITS_REFRESH_BATCH",
    "AdminFactory",
    "MetadataTask",
    "connect_admins",
]

log = logging.getLogger(__name__)


#: Seconds after which a remote topic's cached ``max.message.bytes`` is read again.
LIMITS_MAX_AGE: Final = 3600.0
#: Topic config sync compares every remote topic with its source topic once every this many
#: cycles, a different tenth of them each cycle (besides those whose source configs changed):
#: configs altered on the target are put back within this many
#: ``sync.topic.configs.interval.seconds``.
CONFIGS_FULL_EVERY: Final = 10
#: Most cached ``max.message.bytes`` read again per topic refresh.
LIMITS_REFRESH_BATCH: Final = 1000


def _int_or_none(value: object) -> int | None:
    raw = getattr(value, "value", None)
    try:
        return None if raw is None else int(raw)
    except ValueError:
        return None


#: Makes the (source, target) admin clients of a flow; called again after a failure.
AdminFactory = Callable[[FlowSettings], tuple[ClusterAdmin, ClusterAdmin]]


def connect_admins(s: FlowSettings) -> tuple[ClusterAdmin, ClusterAdmin]:
    """The flow's source and target admin clients (the default :data:`AdminFactory`)."""
    return (
        ClusterAdmin(s.source_admin, alias=s.source, timeout=s.admin_timeout),
        ClusterAdmin(s.target_admin, alias=s.target, timeout=s.admin_timeout),
    )


class MetadataTask:
    """Creates internal and remote topics and syncs configs and ACLs for one flow.

    ``connect`` makes its admin clients (default :func:`connect_admins`; a benchmark or test
    passes clients that answer from memory)."""

    def __init__(
        self,
        settings: FlowSettings,
        catalog: TopicCatalog,
        stats: StatsRegistry,
        *,
        connect: AdminFactory = connect_admins,
    ) -> None:
        self.s = settings
        self.catalog = catalog
        self.stats = stats
        self.offsets_topic_partitions = settings.offset_storage_partitions
        self._connect = connect
        self._source: ClusterAdmin | None = None
        self._target: ClusterAdmin | None = None
        # what the last topic refresh saw and published (skips the work when nothing changed)
        self._last_counts: tuple[dict[str, int], dict[str, int]] | None = None
        self._published: dict[str, RemoteTopic] = {}
        self._problems: list[str] = []
        self._remote_of: dict[str, str | None] = {}  # source topic -> remote (None: filtered)
        self._replicable: dict[str, str] = {}  # the same, without the filtered topics
        self._limits: dict[str, int | None] = {}  # remote topic -> max.message.bytes
        self._limits_read: dict[str, float] = {}  # remote topic -> monotonic time it was read
        # topic config sync: source topic -> its configs the remote topic was last found or
        # made to agree with; a cycle compares every remote only every CONFIGS_FULL_EVERY
        self._configs_synced: dict[str, Mapping[str, TopicConfigEntry]] = {}
        self._configs_cycles = 0
        # source topic -> its cycle of every CONFIGS_FULL_EVERY (None: not replicated)
        self._configs_turns: dict[str, int | None] = {}

    # -- admin clients -------------------------------------------------------------------------

    def _admins(self) -> tuple[ClusterAdmin, ClusterAdmin]:
        if self._source is None or self._target is None:
            self._source, self._target = self._connect(self.s)
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
        # admin, topic, factor, partitions, configs
        wanted: list[tuple[ClusterAdmin, str, int, int, Mapping[str, str] | None]] = []
        if s.emit_heartbeats_enabled:
            wanted.append(
                (target, s.policy.heartbeats_topic(), s.heartbeats_topic_replication_factor, 1,
                 None)
            )  # fmt: skip
        if s.enabled:
            wanted.append(
                (target, s.offset_storage_topic, s.offset_storage_replication_factor,
                 s.offset_storage_partitions, None)
            )  # fmt: skip
            # the copier workers' reports: created like the offsets topic (same factor)
            wanted.append(
                (target, s.worker_status_topic, s.offset_storage_replication_factor, 1,
                 WORKER_STATUS_TOPIC_CONFIGS)
            )  # fmt: skip
            if s.emit_checkpoints_enabled and s.emit_offset_syncs_enabled:
                wanted.append(
                    (target, s.checkpoints_topic, s.checkpoints_topic_replication_factor, 1, None)
                )
            if s.emit_offset_syncs_enabled:
                syncs_admin = source if s.offset_syncs_cluster == s.source else target
                wanted.append(
                    (syncs_admin, s.offset_syncs_topic, s.offset_syncs_topic_replication_factor,
                     1, None)
                )  # fmt: skip
        listed: dict[str, dict[str, int]] = {}
        for admin, topic, factor, partitions, configs in wanted:
            existing = listed.get(admin.alias)
            if existing is None:
                existing = listed[admin.alias] = admin.list_topics(include_internal=True)
            count: int | None = existing.get(topic)
            if count is None and admin.create_compacted_topic(
                topic, self._rf(admin, topic, factor), partitions=partitions, configs=configs
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
        ``False`` when some could not be created or grown (the flow's status says why).

        Per-topic work is done only for what changed: source configs are described only for
        topics whose remote topic is missing (creation carries them), nothing is planned when
        every remote topic exists with enough partitions, and ``max.message.bytes`` of remote
        topics comes from a cache (see :meth:`_message_limits`)."""
        source, target = self._admins()
        source_counts = source.list_topics()
        target_counts = target.list_topics(include_internal=True)
        if (
            not self._problems
            and (source_counts, target_counts) == self._last_counts
            and not self._limits_due()
        ):
            self.catalog.publish(self._published)
            return True
        remote_of = self._remote_names(source_counts)
        candidates = {t: n for t, n in source_counts.items() if t in remote_of}
        if any(target_counts.get(remote_of[t], 0) < n for t, n in candidates.items()):
            target_counts = self._create_remote_topics(
                source, target, candidates, remote_of, target_counts
            )
        else:
            self.stats.set_error("topics", None)
            self._problems = []
        remotes = {
            topic: remote_of[topic] for topic in candidates if remote_of[topic] in target_counts
        }
        limits = self._message_limits(target, remotes.values())
        self._published = {
            topic: RemoteTopic(remote, target_counts[remote], limits.get(remote))
            for topic, remote in sorted(remotes.items())
        }
        self._last_counts = (source_counts, target_counts)
        self.catalog.publish(self._published)
        return not self._problems

    def _remote_names(self, source_counts: Mapping[str, int]) -> dict[str, str]:
        """Replicable source topic → remote topic name, remembered between cycles (the filters
        and the policy do not change while the flow runs)."""
        s = self.s
        known, replicable = self._remote_of, self._replicable
        if known.keys() != source_counts.keys():
            for gone in known.keys() - source_counts.keys():
                del known[gone]
                replicable.pop(gone, None)
            for topic in source_counts.keys() - known.keys():
                remote = None
                if s.should_replicate_topic(topic):
                    remote = replicable[topic] = s.policy.format_remote_topic(s.source, topic)
                known[topic] = remote
        return replicable

    def _create_remote_topics(
        self,
        source: ClusterAdmin,
        target: ClusterAdmin,
        candidates: Mapping[str, int],
        remote_of: Mapping[str, str],
        target_counts: dict[str, int],
    ) -> dict[str, int]:
        """Plan and apply the creations and partition growths; the target's topics after it."""
        s = self.s
        # with distinct remote names (no conflict to report), only the topics that need a
        # creation or a growth are planned
        planned = (
            [t for t, n in candidates.items() if target_counts.get(remote_of[t], 0) < n]
            if len(set(remote_of.values())) == len(remote_of)
            else list(candidates)
        )
        missing = {t for t in planned if remote_of[t] not in target_counts}
        described = source.describe_configs(missing)
        source_snap = {
            t: TopicSnapshot(t, candidates[t], described.get(t, {}))
            for t in planned
            if t in described or t not in missing  # a topic that vanished is left out
        }
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
        self._problems = problems
        return target_counts

    def _limits_due(self) -> bool:
        """Whether some cached ``max.message.bytes`` is due to be read again."""
        return bool(self._limits_read) and (
            time.monotonic() - min(self._limits_read.values()) >= LIMITS_MAX_AGE
        )

    def _message_limits(
        self, target: ClusterAdmin, remotes: Iterable[str]
    ) -> dict[str, int | None]:
        """``max.message.bytes`` of the ``remotes`` (remote topic → bytes, ``None`` unknown).

        Described once when a remote topic first appears, then again after the config sync
        changed it and when older than :data:`LIMITS_MAX_AGE` (at most
        :data:`LIMITS_REFRESH_BATCH` of the oldest per cycle, so the cost of a cycle does not
        grow with the topic count): a stale limit only costs a refused batch, which the copier
        splits and sends again."""
        wanted = set(remotes)
        read = self._limits_read
        for gone in read.keys() - wanted:
            del read[gone]
            self._limits.pop(gone, None)
        now = time.monotonic()
        todo = wanted - read.keys()
        if self._limits_due():
            stale = sorted((at, name) for name, at in read.items() if now - at >= LIMITS_MAX_AGE)
            todo.update(name for _, name in stale[:LIMITS_REFRESH_BATCH])
        if todo:
            described = target.describe_configs(todo, keys=("max.message.bytes",))
            for name in todo:
                read[name] = now
                cfg = described.get(name)
                entry = None if cfg is None else cfg.get("max.message.bytes")
                self._limits[name] = None if entry is None else _int_or_none(entry)
        return self._limits

    def sync_topic_configs(self) -> None:
        """Make the remote topics' configs follow their source topics' (MM2's
        ``syncTopicConfigs``: the same properties are synced and excluded).

        Every source topic's configs are described each cycle (one request; the entries are
        converted once and shared, so unchanged configs compare cheaply); remote topics are
        described and compared only for the source topics whose configs changed since their
        remote was last found or made to agree, or were not seen before — and each cycle for
        the tenth of the topics whose turn it is (:func:`~mirrorlib.core.plans.comparison_turn`),
        so every one is compared each :data:`CONFIGS_FULL_EVERY` cycles, which also puts back
        configs altered on the target (MM2 writes every remote topic's configs every cycle)."""
        s = self.s
        source, target = self._admins()
        counts = source.list_topics()
        turns = self._configs_turns
        for gone in [t for t in turns if t not in counts]:
            del turns[gone]
        for fresh in [t for t in counts if t not in turns]:
            replicated = s.should_replicate_topic(fresh)
            turns[fresh] = comparison_turn(fresh, CONFIGS_FULL_EVERY) if replicated else None
        candidates = [t for t in counts if turns[t] is not None]
        synced = self._configs_synced
        described = source.describe_configs(candidates, previous=synced)
        turn = self._configs_cycles % CONFIGS_FULL_EVERY
        self._configs_cycles += 1
        for gone in [t for t in synced if t not in described]:
            del synced[gone]
        changed = [
            TopicSnapshot(name, counts[name], configs)
            for name, configs in described.items()
            if turns[name] == turn
            or ((last := synced.get(name)) is not configs and last != configs)
        ]
        if not changed:
            return
        remotes = {s.policy.format_remote_topic(s.source, t.name): t for t in changed}
        # the remotes' configs only (a snapshot would list every topic of the target; the
        # config plan reads no partition count): remotes that do not exist are left out
        targets = {
            remote: TopicSnapshot(remote, remotes[remote].partitions, configs)
            for remote, configs in target.describe_configs(remotes).items()
        }
        plan = plan_topic_configs(
            changed,
            targets.values(),
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
            for step in plan.alters:  # read a changed max.message.bytes again on the next refresh
                if any(op.key == "max.message.bytes" for op in step.ops):
                    self._limits_read.pop(step.name, None)
                    self._last_counts = None
        for remote in targets:  # applied (apply raises otherwise) or already the same
            name = remotes[remote].name
            synced[name] = described[name]

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
