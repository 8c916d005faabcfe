"""Out-of-process views of replication, read from the clusters: status, plan and verify.

These are behind ``mirrorlib status``, ``mirrorlib plan`` and ``mirrorlib verify``: they need
only the configuration and the clusters — never a running :class:`~mirrorlib.Replicator` — so
they work from any machine, against MM2 as well as mirrorlib. The computations themselves are
pure and live in :mod:`mirrorlib.core.audit` and :mod:`mirrorlib.core.plans`; the reads from the
clusters in :mod:`mirrorlib.kafka` (:mod:`mirrorlib.kafka.offsets` and friends).

* :func:`flow_status` — per flow: state, per-partition lag in records and seconds, heartbeat age,
  the copier workers mirrorlib's nodes report (:mod:`mirrorlib.core.worker_reports`),
  last checkpoint age, errors;
* :func:`flow_plan` — what the flow would create or change on its target right now (topics,
  partitions, configs, ACLs) and which topics it skips and why;
* :func:`verify_flow` — compare every replicated partition's records with the remote copy.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final

import attrs

from mirrorlib.core.audit import (
    FlowHealth,
    PartitionAudit,
    PartitionLag,
    VerifyProgress,
    VerifyReport,
    compare_partition,
    flow_state,
    lag_records,
    lag_seconds,
    stall_limit_s,
)
from mirrorlib.core.config import FlowConfig, MirrorConfig
from mirrorlib.core.config.clients import READ_COMMITTED, replication_isolation
from mirrorlib.core.incarnations import Incarnation, mismatch
from mirrorlib.core.plans import Plan
from mirrorlib.core.worker_reports import WorkerView, view_reports
from mirrorlib.errors import ClusterError, ConfigError, MirrorError
from mirrorlib.kafka import new_admin_client
from mirrorlib.kafka.incarnations import describe_ids
from mirrorlib.kafka.offsets import first_records, list_offsets, read_digests, topic_partitions
from mirrorlib.kafka.probe import check_reachable_all, unreachable

__all__ = ["check_clusters", "flow_plan", "flow_status", "select_flows", "verify_flow"]

log = logging.getLogger(__name__)

#: ``verify`` reads a partition this many offsets at a time…
VERIFY_WINDOW: Final = 50_000
#: …and compares up to this many records (both sides) in memory; a larger partition is compared
#: bucket of digests by bucket, spilled to temporary files (see ``compare_partition``).
VERIFY_HELD_RECORDS: Final = 200_000

Progress = Callable[[VerifyProgress], None]


def select_flows(config: MirrorConfig, spec: str | None = None) -> list[FlowConfig]:
    """The enabled flows, or the one named ``A->B`` by ``spec`` (enabled or not)."""
    if spec is None:
        return list(config.flows)
    if "->" not in spec:
        raise MirrorError(f"--flow must look like SOURCE->TARGET, not {spec!r}")
    source, target = (s.strip() for s in spec.split("->", 1))
    return [config.flow(source, target)]


def _admin_configs(config: MirrorConfig, aliases: Iterable[str]) -> dict[str, dict[str, str]]:
    return {alias: config.client_config(alias, "admin") for alias in dict.fromkeys(aliases)}


def check_clusters(config: MirrorConfig, aliases: Iterable[str], timeout: float) -> None:
    """Return when every cluster of ``aliases`` answers within ``timeout`` seconds (checked in
    parallel); else raise :class:`~mirrorlib.errors.ClusterTimeoutError` naming each cluster
    that did not, with its bootstrap address and the reason."""
    check_reachable_all(_admin_configs(config, aliases), timeout)


# -- status -----------------------------------------------------------------------------------


def _reads_committed(flow: FlowConfig) -> bool:
    """Whether the flow's replication consumer reads the source ``read_committed`` (the rule
    every engine follows): then status and verify compare with what such a reader sees."""
    level = flow.source_consumer_config().get("isolation.level")
    return replication_isolation(level, exactly_once=flow.exactly_once_enabled) == READ_COMMITTED


def _positions(
    config: MirrorConfig,
    flow: FlowConfig,
    timeout: float,
    incarnations: dict[tuple[str, int], Incarnation] | None = None,
) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """The flow's stored positions (next offset to replicate) and when each was stored (ms).

    Read ``read_committed`` whatever the flow's delivery mode: worker processes (``tasks.max``
    > 1) and exactly-once copiers store positions in transactions, and a position of an aborted
    one can be ahead of records that never landed. A transaction left open (a killed worker)
    is waited for, up to :data:`~mirrorlib.kafka.positions.OPEN_TRANSACTION_WAIT` seconds."""
    from mirrorlib.kafka.positions import PositionStore

    store = PositionStore(
        config.client_config(flow.target, "consumer"), flow.offset_storage_topic,
        source_alias=flow.source, target_alias=flow.target,
        partitions=flow.offset_storage_partitions, read_committed=True,
    )  # fmt: skip
    try:
        store.refresh(timeout=timeout)
        if incarnations is not None:  # the topic ids stored with them (verify)
            incarnations.update(store.incarnations())
        return {key: offset + 1 for key, offset in store.all().items()}, store.stored_at()
    finally:
        store.close()


def _newest_timestamp(config: MirrorConfig, alias: str, topic: str, timeout: float) -> int | None:
    from mirrorlib.kafka.topiclog import TopicLog

    newest: int | None = None

    def handle(msg: Any) -> None:
        nonlocal newest
        ts = msg.timestamp()[1]
        if newest is None or ts > newest:
            newest = ts

    reader = TopicLog(config.client_config(alias, "consumer"), topic, alias=alias)
    try:
        reader.read_to_end(handle, timeout=timeout)
    finally:
        reader.close()
    return newest


def _unreachable_health(flow: FlowConfig, errors: tuple[str, ...]) -> FlowHealth:
    state = flow_state(
        errors=errors, heartbeat_age_s=None, heartbeat_interval_s=flow.emit_heartbeats_interval,
        any_position=False,
    )  # fmt: skip
    return FlowHealth(
        source=flow.source, target=flow.target, state=state, partitions=(), heartbeat_age_s=None,
        checkpoint_age_s=None, errors=errors,
    )  # fmt: skip


def flow_status(config: MirrorConfig, flow: FlowConfig, timeout: float = 15.0) -> FlowHealth:
    """The state of ``flow`` read from its clusters (see :mod:`mirrorlib.core.audit` for the
    definitions of lag, heartbeat age and checkpoint age). Unreachable clusters and unreadable
    topics are reported in ``errors``, never raised; a cluster that does not answer within
    ``timeout`` seconds is reported once, naming its bootstrap address."""
    from mirrorlib.kafka.client import MirrorClient

    errors: list[str] = []
    now_ms = int(time.time() * 1000)
    policy = flow.policy
    partitions: list[PartitionLag] = []
    positions: dict[tuple[str, int], int] = {}
    stored_at: dict[tuple[str, int], int] = {}
    down = unreachable(_admin_configs(config, (flow.source, flow.target)), timeout)
    if down:  # nothing more to learn: every read below needs both clusters
        return _unreachable_health(flow, tuple(str(exc) for exc in down.values()))
    try:
        positions, stored_at = _positions(config, flow, timeout)
    except MirrorError as exc:
        errors.append(f"positions ({flow.offset_storage_topic} on {flow.target}): {exc}")
    try:
        source_admin = new_admin_client(config.client_config(flow.source, "admin"))
        counts = topic_partitions(source_admin, flow.source, timeout)
        tps = [
            (t, p) for t, n in sorted(counts.items()) if flow.should_replicate_topic(t)
            for p in range(n)
        ]  # fmt: skip
        # the end a read_committed copier can reach is the last stable offset
        committed = _reads_committed(flow)
        ends = list_offsets(source_admin, flow.source, tps, True, timeout, read_committed=committed)
        lagging = {
            tp: (pos, ends[tp]) for tp, pos in positions.items() if tp in ends and ends[tp] > pos
        }
        stamps = first_records(
            config.client_config(flow.source, "consumer"), lagging, 5.0, read_committed=committed
        )
        for t, p in tps:
            end = ends.get((t, p))
            pos = positions.get((t, p))
            # no record between position and end (a trailing commit marker, an aborted
            # transaction, compacted offsets): nothing is left to copy
            lag = lag_records(pos if (t, p) in stamps and stamps[(t, p)] is None else end, pos)
            stored = stored_at.get((t, p))
            partitions.append(
                PartitionLag(
                    topic=t, partition=p, remote_topic=policy.format_remote_topic(flow.source, t),
                    end_offset=end, position=pos, lag_records=lag,
                    lag_seconds=lag_seconds(lag, stamps.get((t, p)), now_ms),
                    position_age_s=None if stored is None else max(now_ms - stored, 0) / 1000.0,
                    internal=policy.is_heartbeats_topic(t),
                )
            )  # fmt: skip
    except MirrorError as exc:
        errors.append(f"source {flow.source}: {exc}")
    heartbeat_age: float | None = None
    checkpoint_age: float | None = None
    try:
        with MirrorClient(
            config.client_config(flow.target, "consumer"), policy, alias=flow.target,
            timeout=timeout,
        ) as client:  # fmt: skip
            beat = client.heartbeats().get((flow.source, flow.target))
            if beat is not None:
                heartbeat_age = max(now_ms - beat.timestamp, 0) / 1000.0
            if flow.checkpoints_topic in client.checkpoint_topics():
                newest = _newest_timestamp(config, flow.target, flow.checkpoints_topic, timeout)
                if newest is not None:
                    checkpoint_age = max(now_ms - newest, 0) / 1000.0
    except MirrorError as exc:
        errors.append(f"target {flow.target}: {exc}")
    limit = stall_limit_s(flow.offset_flush_interval)
    stuck = [r for r in (p.stalled(limit) for p in partitions) if r is not None]
    stalled = None
    if stuck:
        stalled = stuck[0] + (f" (and {len(stuck) - 1} more partition(s))" if stuck[1:] else "")
    state = flow_state(
        errors=errors, heartbeat_age_s=heartbeat_age,
        heartbeat_interval_s=flow.emit_heartbeats_interval, any_position=bool(positions),
        stalled=stalled is not None,
    )  # fmt: skip
    # after the state: a flow whose workers cannot be read is not unreachable (the error says)
    workers = _workers(config, flow, timeout, now_ms, errors)
    return FlowHealth(
        source=flow.source, target=flow.target, state=state, partitions=tuple(partitions),
        heartbeat_age_s=heartbeat_age, checkpoint_age_s=checkpoint_age, errors=tuple(errors),
        stalled=stalled, position_flush_interval_s=flow.offset_flush_interval,
        workers=workers,
    )  # fmt: skip


def _workers(
    config: MirrorConfig, flow: FlowConfig, timeout: float, now_ms: int, errors: list[str]
) -> tuple[WorkerView, ...]:
    """The flow's copier workers, from the reports its nodes publish on the target (none for
    a flow that mirrorlib never ran: MM2 publishes none)."""
    from mirrorlib.kafka.worker_reports import read_worker_reports

    topic = flow.worker_status_topic
    try:
        reports, problems = read_worker_reports(
            config.client_config(flow.target, "consumer"),
            config.client_config(flow.target, "admin"),
            topic, alias=flow.target, timeout=timeout,
        )  # fmt: skip
    except MirrorError as exc:
        errors.append(f"worker reports ({topic} on {flow.target}): {exc}")
        return ()
    for problem in problems:
        log.warning("%s on %s: skipped a record: %s", topic, flow.target, problem)
    return view_reports((r for r in reports if r.flow == flow.name), now_ms)


# -- plan -------------------------------------------------------------------------------------


def flow_plan(config: MirrorConfig, flow: FlowConfig, timeout: float = 30.0) -> Plan:
    """What ``flow`` would do on its target now: topics and partitions to create, configs to
    change, ACLs to create, and the source topics it skips with the reason. Reads only.

    Raises :class:`~mirrorlib.errors.ClusterError` when a cluster does not answer within
    ``timeout`` seconds (per request), naming it and its bootstrap address."""
    from mirrorlib.core.plans import plan_acls, plan_topic_configs, plan_topics
    from mirrorlib.core.replication_factor import enforce_replication_factor
    from mirrorlib.kafka.admin import ClusterAdmin

    check_clusters(config, (flow.source, flow.target), timeout)
    source = ClusterAdmin(config.client_config(flow.source, "admin"), alias=flow.source,
                          timeout=timeout)  # fmt: skip
    target = ClusterAdmin(config.client_config(flow.target, "admin"), alias=flow.target,
                          timeout=timeout)  # fmt: skip
    policy = flow.policy
    names = sorted(source.list_topics(include_internal=True))
    candidates = [t for t in names if flow.should_replicate_topic(t)]
    snap = source.snapshot(candidates)
    # skipped topics are listed by name only (their configs are not needed)
    from mirrorlib.core.plans import TopicSnapshot

    skipped = {t: TopicSnapshot(t, 1) for t in names if t not in snap}
    target_counts = target.list_topics(include_internal=True)
    topic_plan = plan_topics(
        {**snap, **skipped}, target_counts, source_alias=flow.source, policy=policy,
        should_replicate=flow.should_replicate_topic, replication_factor=flow.replication_factor,
        config_filter=flow.should_replicate_config_property,
        use_defaults_from=flow.should_replicate_source_default, target_alias=flow.target,
    )  # fmt: skip
    # the factor run will use, from the live broker count now (see core.replication_factor)
    plan: Plan = enforce_replication_factor(
        topic_plan, lambda: len(target.describe_cluster().brokers),
        lowering_enabled=flow.replication_factor_lowering_enabled,
        cluster=flow.target,
    )[0]  # fmt: skip
    if flow.sync_topic_configs_interval is not None:
        remotes = [policy.format_remote_topic(flow.source, t) for t in candidates]
        config_plan = plan_topic_configs(
            snap, target.snapshot(remotes), source_alias=flow.source, policy=policy,
            should_replicate=flow.should_replicate_topic,
            config_filter=flow.should_replicate_config_property,
            use_defaults_from=flow.should_replicate_source_default, target_alias=flow.target,
        )  # fmt: skip
        plan = plan + Plan(config_plan.steps)
    if flow.sync_topic_acls_interval is not None:
        try:
            source_acls = source.describe_acls()
            target_acls = target.describe_acls() if source_acls is not None else None
        except ClusterError as exc:
            log.warning("flow %s: cannot read ACLs: %s", flow.name, exc)
            source_acls = target_acls = None
        acl_plan = plan_acls(
            source_acls, target_acls, source_alias=flow.source, policy=policy,
            should_replicate=flow.should_replicate_topic, target_alias=flow.target,
        )  # fmt: skip
        plan = plan + acl_plan
    return plan


# -- verify -----------------------------------------------------------------------------------


def _topics_pattern(topics: str | None) -> re.Pattern[str] | None:
    try:
        return re.compile(topics) if topics else None
    except re.error as exc:
        raise ConfigError(f"invalid topics regex {topics!r}: {exc}", value=topics) from exc


def _checked_admins(config: MirrorConfig, flow: FlowConfig, timeout: float) -> tuple[Any, Any]:
    """Admin clients of the flow's source and target, once both answered within ``timeout``."""
    check_clusters(config, (flow.source, flow.target), timeout)
    return (
        new_admin_client(config.client_config(flow.source, "admin")),
        new_admin_client(config.client_config(flow.target, "admin")),
    )


def _incarnations(
    source_admin: Any,
    target_admin: Any,
    audits: list[PartitionAudit],
    stored: Mapping[tuple[str, int], Incarnation],
    timeout: float,
) -> list[PartitionAudit]:
    """``audits`` with the partitions whose topics are other incarnations than their stored
    positions say marked (:func:`~mirrorlib.core.incarnations.mismatch`)."""

    topics = {a.topic for a in audits if (a.topic, a.partition) in stored}
    if not topics:
        return audits
    src = describe_ids(source_admin, topics, timeout)
    dst = describe_ids(target_admin, {a.remote_topic for a in audits}, timeout)
    out = []
    for a in audits:
        ids = stored.get((a.topic, a.partition))
        now = Incarnation(src.get(a.topic), dst.get(a.remote_topic))
        why = None if ids is None else mismatch(a.topic, a.remote_topic, ids, now)
        out.append(a if why is None else attrs.evolve(a, incarnation=why))
    return out


def verify_flow(
    config: MirrorConfig,
    flow: FlowConfig,
    topics: str | None = None,
    *,
    timeout: float = 300.0,
    request_timeout: float = 30.0,
    progress: Progress | None = None,
) -> VerifyReport:
    """Audit ``flow``: for every replicated source partition (of topics fully matching the regex
    ``topics``), compare the source records with the remote partition's records.

    The compared range is everything currently in the source partition and the remote partition;
    records at or past the flow's stored position count as *pending*, not missing (see
    :func:`mirrorlib.core.audit.compare_partition`). ``progress`` receives a
    :class:`~mirrorlib.core.audit.VerifyProgress` after every batch read (offsets read of all
    offsets to read), and a last one with ``finished`` set.

    ``timeout`` bounds the whole audit; every request to a cluster also gives up after
    ``request_timeout`` seconds (or ``timeout``, when shorter). Raises
    :class:`~mirrorlib.errors.ClusterError` when a cluster does not answer, naming it and its
    bootstrap address, and :class:`~mirrorlib.errors.ConfigError` for an invalid ``topics``.
    """
    pattern = _topics_pattern(topics)
    policy = flow.policy
    errors: list[str] = []
    request = min(request_timeout, timeout)
    source_admin, target_admin = _checked_admins(config, flow, request)
    counts = topic_partitions(source_admin, flow.source, request)
    remote_counts = topic_partitions(target_admin, flow.target, request)
    selected = [
        t for t in sorted(counts)
        if flow.should_replicate_topic(t) and (pattern is None or pattern.fullmatch(t))
    ]  # fmt: skip
    stored_ids: dict[tuple[str, int], Incarnation] = {}
    try:
        positions, _ = _positions(config, flow, 2 * request, stored_ids)
    except MirrorError as exc:
        errors.append(f"positions unreadable, unmatched records count as pending: {exc}")
        positions = {}
    tps = [(t, p) for t in selected for p in range(counts[t])]
    remote_tps = [
        (policy.format_remote_topic(flow.source, t), p)
        for t, p in tps
        if p < remote_counts.get(policy.format_remote_topic(flow.source, t), 0)
    ]
    # both sides as the flow's replication consumer reads the source: read_committed (the
    # default), records of aborted transactions are not records to copy, and the ends are the
    # last stable offsets (a transaction still open is not waited for)
    committed = _reads_committed(flow)
    lows = list_offsets(source_admin, flow.source, tps, False, request)
    highs = list_offsets(source_admin, flow.source, tps, True, request, read_committed=committed)
    rlows = list_offsets(target_admin, flow.target, remote_tps, False, request)
    rhighs = list_offsets(
        target_admin, flow.target, remote_tps, True, request, read_committed=committed
    )
    total = sum(highs[tp] - lows[tp] for tp in tps) + sum(
        rhighs[tp] - rlows[tp] for tp in remote_tps
    )
    done = 0

    def tick(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(VerifyProgress(flow.name, done, total))

    audits: list[PartitionAudit] = []
    source_conf = config.client_config(flow.source, "consumer")
    target_conf = config.client_config(flow.target, "consumer")
    deadline = time.monotonic() + timeout

    def windows(
        conf: Mapping[str, Any], topic: str, p: int, low: int, high: int
    ) -> Iterator[tuple[int, bytes]]:
        for start in range(low, high, VERIFY_WINDOW):
            remaining = max(deadline - time.monotonic(), 1.0)
            yield from read_digests(
                conf, topic, p, start, min(start + VERIFY_WINDOW, high),
                read_committed=committed, timeout=remaining, progress=tick,
            )  # fmt: skip

    for t, p in tps:
        remote = policy.format_remote_topic(flow.source, t)
        rlow, rhigh = rlows.get((remote, p), 0), rhighs.get((remote, p), 0)
        source_records = windows(source_conf, t, p, lows[(t, p)], highs[(t, p)])
        remote_records = windows(target_conf, remote, p, rlow, rhigh)
        try:
            audit = compare_partition(
                t, p, remote, source_records, remote_records,
                replicated_up_to=positions.get((t, p)), bucket_records=VERIFY_HELD_RECORDS,
            )  # fmt: skip
        except MirrorError as exc:
            errors.append(f"{t}-{p}: {exc}")
            continue
        audits.append(audit)
    audits = _incarnations(source_admin, target_admin, audits, stored_ids, request)
    if progress is not None:
        progress(VerifyProgress(flow.name, done, total, finished=True))
    return VerifyReport(flow=flow.name, partitions=tuple(audits), errors=tuple(errors))
