"""Moving a consumer group from one cluster to another: failover and failback.

:func:`failover` commits, for consumer group ``G``, the offsets at which it should resume on cluster
``to`` after consuming on cluster ``from`` — only when ``G`` has no active members on ``to``, and
never moving one of its committed offsets backwards. It first computes a
:class:`FailoverPlan` (what ``mirrorlib failover --dry-run`` prints): per partition the group's
current offset on ``to``, the translated offset, and how many records the group will read again.

Where the translated offsets come from
--------------------------------------
For a partition of a topic that flow ``from->to`` replicates (``orders`` on ``A`` is
``A.orders`` on ``B``):

* when ``from`` is reachable and the group's final committed offset there is known, that offset is
  translated *now* with the offset syncs of the flow (exact inside verified runs, see
  :mod:`mirrorlib.core.translate`) — fresher than the last checkpoint, which may be a minute old;
* otherwise (``from`` is down: a real disaster) the last checkpoint written by MM2 or mirrorlib
  to ``<from>.checkpoints.internal`` on ``to`` is used (:meth:`MirrorClient.checkpoints`).

For a partition of a topic that came *from* ``to`` (failback: the group consumed ``A.orders`` on
``B`` and returns to ``A``'s ``orders``) there are no checkpoints — neither MM2 nor mirrorlib
replicates ``A.orders`` back to ``A`` — so the group's offset on ``from`` is translated *backwards*
with the offset syncs of the opposite flow ``to->from``
(:func:`~mirrorlib.core.failover.reverse_translate`): the largest upstream offset all of whose
predecessors the group has provably consumed.

Safety rules
------------
* a group that still has active members on ``from`` is refused: it is still consuming there, and
  its final position is not known yet;
* so is a group whose state on ``from`` is *unknown* although ``from`` answers (describing the
  group failed: an authorization error, a coordinator still loading or moved after a few
  retries with fresh metadata, a request that timed out), unless ``force`` (``--force``): it may
  be consuming there. Only a ``from`` that does not answer at all (the disaster case) lets the
  failover proceed without the group's state, with the checkpoints;
* a group with active members on ``to`` is refused: Kafka does not let anyone else change an
  active group's offsets, and its members would not see the change;
* a partition whose offset on ``to`` is already at or past the translation is kept: the group is
  never rewound. When it is *past* the first record the group has not processed, the records in
  between would never be read: they are counted (``skipped``) and the failover is refused unless
  ``allow_skip`` (``--allow-skip``);
* a group with nothing to translate (no committed offsets on ``from`` for replicated topics, or
  ``from`` unreachable and no checkpoints: a mistyped group name, say) is refused unless
  ``allow_empty`` (``--allow-empty``);
* translation never answers past the first record the group still has to read, so the offsets
  committed skip no record; re-reads are reported (``re_read``) where they can be counted.

These rules rest on premises listed under "Premises" in ``docs/failover.md``.

The plan is computed by the pure function :func:`~mirrorlib.core.failover.plan_failover`
(:mod:`mirrorlib.core.failover`, re-exported here); :func:`failover` gathers its inputs from the
clusters and applies it with :class:`~mirrorlib.kafka.groups.GroupAdmin`.

Many groups at once
-------------------
:func:`failover_groups` moves many groups (named, matching a regex, or every group with
checkpoints) with the same rules, group by group, but reads what they need together: the
checkpoints topic and each offset-syncs topic once, the groups' states and committed offsets on
each cluster in batches (:data:`~mirrorlib.kafka.groups.IN_FLIGHT` requests in flight). Each group
is planned as it would be alone; a refused group does not stop the others. It returns a
:class:`~mirrorlib.core.failover.BatchFailover` with each group's result and raises only when
the new cluster does not answer.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import attrs

from mirrorlib.core.checkpointing import rename_topic
from mirrorlib.core.config import FlowConfig, MirrorConfig
from mirrorlib.core.failover import (
    BatchFailover,
    FailoverAction,
    FailoverPlan,
    GroupFailover,
    GroupInputs,
    GroupOutcome,
    PartitionFailover,
    checkpoints_by_group,
    plan_failover,
    plan_failovers,
    retry_group_request,
    reverse_translate,
    select_groups,
)
from mirrorlib.core.records import Checkpoint, OffsetAndMetadata, TopicPartition
from mirrorlib.core.retry import Backoff
from mirrorlib.core.translate import OffsetTranslator
from mirrorlib.errors import (
    ClusterError,
    ConfigError,
    FailoverRefusedError,
    MirrorError,
)

__all__ = [
    "BatchFailover",
    "FailoverAction",
    "FailoverPlan",
    "FailoverRefusedError",
    "GroupFailover",
    "GroupOutcome",
    "PartitionFailover",
    "failover",
    "failover_groups",
    "plan_failover",
    "read_offset_syncs",
    "reverse_translate",
]

log = logging.getLogger(__name__)

#: Seconds (at most, and within the request timeout) a group request on the old cluster that
#: failed with a retriable error (:func:`~mirrorlib.core.failover.retry_group_request`) is
#: retried, each time with a new client (fresh metadata), before the group's state counts as
#: unknown.
SOURCE_RETRY_S: Final = 10.0


def read_offset_syncs(
    flow: FlowConfig, config: MirrorConfig, timeout: float = 30.0
) -> OffsetTranslator:
    """An :class:`OffsetTranslator` fed with every offset sync of ``flow`` (raises
    :class:`ClusterError` when the offset-syncs topic cannot be read)."""
    from mirrorlib.kafka.offset_syncs import read_offset_syncs as read

    alias = flow.offset_syncs_cluster
    return read(
        config.client_config(alias, "consumer"), flow.offset_syncs_topic, alias=alias,
        timeout=timeout,
    )  # fmt: skip


def _group_state(config: MirrorConfig, alias: str, group: str, timeout: float) -> Any:
    from mirrorlib.kafka.groups import GroupAdmin

    admin = GroupAdmin(config.client_config(alias, "admin"), alias=alias, timeout=timeout)
    return admin, admin.states([group]).get(group)


def failover(
    config: MirrorConfig,
    group: str,
    from_alias: str,
    to_alias: str,
    *,
    dry_run: bool = False,
    allow_skip: bool = False,
    allow_empty: bool = False,
    force: bool = False,
    timeout: float = 30.0,
) -> FailoverPlan:
    """Move consumer group ``group`` from cluster ``from_alias`` to ``to_alias``.

    Computes the :class:`FailoverPlan` from the clusters (see the module documentation) and,
    unless ``dry_run``, commits its offsets on ``to_alias``. Returns the plan (``applied`` tells
    whether offsets were committed).

    Raises :class:`FailoverRefusedError` (carrying the plan) when the group is still active on
    either cluster; when ``from_alias`` answers but the group's state there is unknown (see the
    module documentation), unless ``force``; when it would skip records on ``to_alias`` (its offsets there are past the
    translation), unless ``allow_skip``; and when it has nothing to translate (no committed
    offsets on ``from_alias``), unless ``allow_empty``. A dry run raises it too, so that it tells
    whether the failover would go through. Raises :class:`~mirrorlib.errors.ClusterError` when
    ``to_alias`` does not answer within ``timeout`` seconds (naming its bootstrap address), :class:`~mirrorlib.errors.ConfigError` for unknown aliases.

    The old cluster may be unreachable (a real disaster): the checkpoints on ``to_alias`` are
    then used, and the plan says so.
    """
    from mirrorlib.kafka.groups import GroupState
    from mirrorlib.kafka.probe import unreachable

    _check_aliases(config, from_alias, to_alias)
    flow = config.flow(from_alias, to_alias)
    notes: list[str] = []
    # both clusters at once: the new one must answer, the old one may be gone (a disaster)
    down = unreachable(
        {alias: config.client_config(alias, "admin") for alias in (to_alias, from_alias)}, timeout
    )
    if to_alias in down:
        raise down[to_alias]
    target_admin, target_state = _group_state(config, to_alias, group, timeout)
    target_offsets = (
        target_admin.committed_offsets(group)
        if target_state in (GroupState.EMPTY, GroupState.ACTIVE)
        else {}
    )
    source_state, source_offsets, source_error = _source_group(
        config, flow, group, timeout, notes, down.get(from_alias)
    )
    checkpoints = _group_checkpoints(config, flow, group, timeout, notes)
    forward, backward = _offset_syncs(config, flow, source_offsets, timeout, notes)
    plan = plan_failover(
        group, from_alias, to_alias,
        **_topic_rules(flow),
        source_state=str(source_state or "unknown"),
        target_state=str(target_state or "unknown"),
        source_offsets=source_offsets,
        target_offsets=target_offsets,
        checkpoints=checkpoints,
        forward=forward,
        backward=backward,
        notes=notes,
        allow_skip=allow_skip,
        allow_empty=allow_empty,
        source_error=source_error,
        force=force,
    )  # fmt: skip
    if plan.refused is not None:
        raise FailoverRefusedError(plan.refused, plan)
    if dry_run or not plan.offsets:
        return plan
    return _apply(plan, target_admin)


def _topic_rules(flow: FlowConfig) -> dict[str, Any]:
    """The flow's topic rules the planner takes (``policy_rename``, ``is_from_target``,
    ``upstream_topic``, ``should_replicate``: see :func:`plan_failover`)."""
    policy, from_alias, to_alias = flow.policy, flow.source, flow.target
    return {
        "policy_rename": lambda t: rename_topic(policy, from_alias, to_alias, t),
        "is_from_target": lambda t: policy.topic_source(t) == to_alias,
        "upstream_topic": policy.upstream_topic,
        "should_replicate": flow.should_replicate_topic,
    }


def _check_aliases(config: MirrorConfig, from_alias: str, to_alias: str) -> None:
    for alias in (from_alias, to_alias):
        if alias not in config.clusters:
            raise ConfigError(
                f"unknown cluster alias {alias!r}; the config defines: "
                f"{', '.join(config.clusters)}", key="clusters", value=alias,
            )  # fmt: skip
    if from_alias == to_alias:
        raise ConfigError("--from and --to must name different clusters", value=from_alias)


def _source_group(
    config: MirrorConfig,
    flow: FlowConfig,
    group: str,
    timeout: float,
    notes: list[str],
    known_error: MirrorError | None = None,
) -> tuple[str, dict[TopicPartition, OffsetAndMetadata] | None, str | None]:
    """The group's state, committed offsets and, for an unknown state, why, on the source of
    ``flow`` (the old cluster).

    ``("unreachable", None, None)`` and a note when the cluster does not answer at all
    (``known_error``: it is already known not to, and why), also when it stopped answering
    while the group was looked up. ``"unknown"`` when it answers but describing the group
    failed (after retries of retriable errors) -- the offsets are then still read, and are
    ``None`` if that fails too. Offsets that cannot be read from a group whose state is known
    make the state unknown as well: the group's position there is not known."""
    from mirrorlib.kafka.groups import GroupState

    from_alias, to_alias = flow.source, flow.target
    if known_error is not None:
        return _unreachable(from_alias, to_alias, known_error, notes)
    admin, state, error = _describe_source(config, from_alias, group, timeout)
    why = None if error is None else str(error)
    offsets: dict[TopicPartition, OffsetAndMetadata] | None = None
    try:
        offsets = admin.committed_offsets(group)
    except ClusterError as exc:
        why = why or str(exc)
    if why is None or (error is None and state is GroupState.ACTIVE):
        return str(state), offsets, None  # (active: refused whatever its offsets, even forced)
    # a failure: the cluster stopped answering (the disaster case after all), or it answers
    # but not about the group
    from mirrorlib.kafka.probe import check_reachable

    try:
        check_reachable(config.client_config(from_alias, "admin"), from_alias, timeout)
    except ClusterError as exc:
        return _unreachable(from_alias, to_alias, exc, notes)
    return "unknown", offsets, why


def _unreachable(
    from_alias: str, to_alias: str, error: MirrorError, notes: list[str]
) -> tuple[str, None, None]:
    reason = str(error) or type(error).__name__
    notes.append(f"{from_alias} is unreachable ({reason}); using the checkpoints on {to_alias}")
    return "unreachable", None, None


def _describe_source(
    config: MirrorConfig, alias: str, group: str, timeout: float
) -> tuple[Any, Any, Any]:
    """``(admin, state, error)`` of ``group`` on cluster ``alias``: a request that failed with a
    retriable error is retried, each time with a new client (fresh metadata), for up to
    :data:`SOURCE_RETRY_S` seconds (within ``timeout``)."""
    from mirrorlib.kafka.groups import GroupAdmin

    deadline = time.monotonic() + min(timeout, SOURCE_RETRY_S)
    backoff = Backoff(base=0.2, cap=2.0)
    while True:
        admin = GroupAdmin(config.client_config(alias, "admin"), alias=alias, timeout=timeout)
        state, error = admin.describe_state(group)
        if error is None or not retry_group_request(error.code):
            return admin, state, error
        delay = backoff.next_delay()
        if time.monotonic() + delay >= deadline:
            return admin, state, error
        log.info("describing group %s on %s failed (%s); retrying in %.1fs with fresh metadata",
                 group, alias, error, delay)  # fmt: skip
        time.sleep(delay)


def _group_checkpoints(
    config: MirrorConfig, flow: FlowConfig, group: str, timeout: float, notes: list[str]
) -> dict[TopicPartition, Checkpoint]:
    """The group's latest checkpoints of ``flow`` on its target, by partition there (none, and
    a note, when they cannot be read)."""
    return _all_checkpoints(config, flow, timeout, notes).get(group, {})


def _offset_syncs(
    config: MirrorConfig,
    flow: FlowConfig,
    source_offsets: Mapping[TopicPartition, OffsetAndMetadata] | None,
    timeout: float,
    notes: list[str],
) -> tuple[OffsetTranslator | None, OffsetTranslator | None]:
    """The offset syncs of ``flow`` (forward) and of the opposite flow (backward), each read only
    when the group's committed offsets need it (``None``, and a note, when unreadable)."""
    forward: OffsetTranslator | None = None
    backward: OffsetTranslator | None = None
    if not source_offsets:
        return forward, backward
    topics = set(tp.topic for tp in source_offsets)
    if any(flow.should_replicate_topic(t) for t in topics) and flow.emit_offset_syncs_enabled:
        try:
            forward = read_offset_syncs(flow, config, timeout)
        except ClusterError as exc:
            notes.append(f"offset syncs of {flow.name} unreadable ({exc}); using checkpoints")
    if any(flow.policy.topic_source(t) == flow.target for t in topics):
        back = config.flow(flow.target, flow.source)
        try:
            backward = read_offset_syncs(back, config, timeout)
        except ClusterError as exc:
            notes.append(f"offset syncs of {back.name} unreadable: {exc}")
    return forward, backward


def _apply(plan: FailoverPlan, target_admin: Any) -> FailoverPlan:
    """Commit the plan's offsets on the new cluster, unless the group became active there."""
    from mirrorlib.kafka.groups import GroupState

    group, to_alias = plan.group, plan.to_alias
    # the group may have started consuming since we looked: check again right before writing
    state = target_admin.states([group]).get(group)
    if state == GroupState.ACTIVE:
        refused = attrs.evolve(
            plan, target_state=str(state),
            refused=f"group {group!r} became active on {to_alias} during the failover",
        )  # fmt: skip
        raise FailoverRefusedError(str(refused.refused), refused)
    target_admin.commit_offsets(group, plan.offsets)
    log.info("failover of group %s from %s to %s: committed %d offset(s)", group,
             plan.from_alias, to_alias, len(plan.offsets))  # fmt: skip
    return attrs.evolve(plan, applied=True)


# -- many groups --------------------------------------------------------------------------------


class _Trips:
    """Counts request waves (requests sent together count once)."""

    def __init__(self) -> None:
        self.count = 0

    def add(self, n: int = 1) -> None:
        self.count += n


def _chunks(items: Sequence[str], size: int) -> list[Sequence[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def failover_groups(
    config: MirrorConfig,
    groups: Iterable[str],
    from_alias: str,
    to_alias: str,
    *,
    pattern: str | re.Pattern[str] | None = None,
    all_groups: bool = False,
    dry_run: bool = False,
    allow_skip: bool = False,
    allow_empty: bool = False,
    force: bool = False,
    timeout: float = 30.0,
) -> BatchFailover:
    """Move many consumer groups from cluster ``from_alias`` to ``to_alias``: ``groups`` (named),
    plus the groups that fully match ``pattern`` among those with checkpoints of the flow on
    ``to_alias`` and those ``from_alias`` lists that the flow's groups filter accepts; with
    ``all_groups``, every group with checkpoints.

    Each group is planned and refused as :func:`failover` would plan it alone (same options),
    but what the groups need is read together, in a number of round trips that does not grow
    with the number of groups (it grows by one per :data:`~mirrorlib.kafka.groups.IN_FLIGHT`
    groups). The plans are then applied group by group: a group refused, or whose commit fails,
    does not stop the others. Returns the :class:`BatchFailover` (each group's
    :class:`GroupFailover`: ``committed``, ``planned`` in a dry run, ``unchanged``,
    ``refused`` or ``failed``); refusals are results, not exceptions.

    Raises :class:`~mirrorlib.errors.ClusterError` when ``to_alias`` does not answer within
    ``timeout`` seconds, :class:`~mirrorlib.errors.ConfigError` for unknown aliases or an
    invalid ``pattern``.
    """
    from mirrorlib.kafka.groups import GroupAdmin
    from mirrorlib.kafka.probe import unreachable

    _check_aliases(config, from_alias, to_alias)
    regex = _regex(pattern)
    flow = config.flow(from_alias, to_alias)
    trips = _Trips()
    notes: list[str] = []
    down = unreachable(
        {alias: config.client_config(alias, "admin") for alias in (to_alias, from_alias)}, timeout
    )
    trips.add()
    if to_alias in down:
        raise down[to_alias]
    source_down = down.get(from_alias)
    source_admin = None
    if source_down is None:
        source_admin = GroupAdmin(
            config.client_config(from_alias, "admin"), alias=from_alias, timeout=timeout
        )
    checkpoints = _all_checkpoints(config, flow, timeout, notes)
    trips.add()
    selected = _select(flow, list(groups), regex, all_groups, checkpoints, source_admin, notes,
                       trips)  # fmt: skip
    if not selected:
        notes.append("no group selected")
        return BatchFailover(from_alias, to_alias, (), dry_run, trips.count, tuple(notes))
    target_admin = GroupAdmin(
        config.client_config(to_alias, "admin"), alias=to_alias, timeout=timeout
    )
    target_states, target_offsets = _target_groups(target_admin, selected, trips)
    sources = _source_groups(config, flow, selected, source_admin, source_down, timeout, notes,
                             trips)  # fmt: skip
    every_offset: dict[TopicPartition, OffsetAndMetadata] = {}
    for _, offsets, _ in sources.values():
        every_offset.update(offsets or {})
    forward, backward = _offset_syncs(config, flow, every_offset, timeout, notes)
    trips.add(int(forward is not None) + int(backward is not None))

    inputs: dict[str, GroupInputs] = {}
    failed: dict[str, str] = {}
    for group in selected:
        offsets_on_target = target_offsets.get(group, {})
        if isinstance(offsets_on_target, ClusterError):
            failed[group] = f"committed offsets on {to_alias} unreadable: {offsets_on_target}"
            continue
        state, offsets, error = sources[group]
        inputs[group] = GroupInputs(
            source_state=state, target_state=str(target_states.get(group) or "unknown"),
            source_offsets=offsets, target_offsets=offsets_on_target,
            checkpoints=checkpoints.get(group, {}), source_error=error,
        )  # fmt: skip
    plans = plan_failovers(
        inputs, from_alias, to_alias,
        **_topic_rules(flow),
        forward=forward, backward=backward, notes=notes,
        allow_skip=allow_skip, allow_empty=allow_empty, force=force,
    )  # fmt: skip
    results = _sort_plans(plans, failed, dry_run)
    results.update(_commit_many(plans, results, target_admin, trips))
    return BatchFailover(
        from_alias, to_alias, tuple(results[g] for g in selected), dry_run, trips.count,
        tuple(notes),
    )  # fmt: skip


def _regex(pattern: str | re.Pattern[str] | None) -> re.Pattern[str] | None:
    if not isinstance(pattern, str):
        return pattern
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ConfigError(f"invalid group regex {pattern!r}: {exc}", value=pattern) from exc


def _select(
    flow: FlowConfig,
    named: list[str],
    regex: re.Pattern[str] | None,
    all_groups: bool,
    checkpoints: Mapping[str, Any],
    source_admin: Any,
    notes: list[str],
    trips: _Trips,
) -> tuple[str, ...]:
    """The groups of the batch (:func:`~mirrorlib.core.failover.select_groups`); the old
    cluster's groups are listed only for a regex."""
    candidates = set(checkpoints)
    if regex is not None and not all_groups and source_admin is not None:
        try:
            listed = source_admin.list_groups()
            candidates |= {g for g in listed if flow.should_replicate_group(g)}
        except ClusterError as exc:
            notes.append(f"groups of {flow.source} not listed ({exc}); matched the checkpointed")
        trips.add()
    return select_groups(named, candidates, pattern=regex, every=all_groups)


def _target_groups(
    admin: Any, groups: Sequence[str], trips: _Trips
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The groups' states on the new cluster, and the committed offsets of those that exist
    there (or the error reading them), in batches."""
    from mirrorlib.kafka.groups import IN_FLIGHT

    states: dict[str, Any] = {}
    for chunk in _chunks(groups, IN_FLIGHT):
        states.update(admin.states(list(chunk)))
        trips.add()
    readable = [g for g in groups if str(states.get(g)) in ("empty", "active")]
    offsets = admin.committed_offsets_many(readable)
    trips.add(len(_chunks(readable, IN_FLIGHT)))
    return states, offsets


def _all_checkpoints(
    config: MirrorConfig, flow: FlowConfig, timeout: float, notes: list[str]
) -> dict[str, dict[TopicPartition, Checkpoint]]:
    """Every group's latest checkpoints of ``flow`` on its target, read once (none, and a note,
    when they cannot be read)."""
    from mirrorlib.kafka.client import MirrorClient

    from_alias, to_alias = flow.source, flow.target
    try:
        with MirrorClient(
            config.client_config(to_alias, "consumer"), flow.policy, alias=to_alias,
            timeout=timeout,
        ) as client:  # fmt: skip
            return checkpoints_by_group(client.checkpoints(from_alias, timeout=timeout))
    except ClusterError as exc:
        notes.append(f"no checkpoints of {from_alias} readable on {to_alias}: {exc}")
    return {}


_SourceGroup = tuple[str, dict[TopicPartition, OffsetAndMetadata] | None, str | None]


def _source_groups(
    config: MirrorConfig,
    flow: FlowConfig,
    groups: Sequence[str],
    admin: Any,
    known_error: MirrorError | None,
    timeout: float,
    notes: list[str],
    trips: _Trips,
) -> dict[str, _SourceGroup]:
    """:func:`_source_group` for many groups: states and committed offsets in batches; a group
    whose state came back unknown is described again alone, with :func:`_describe_source`'s
    retries."""
    from mirrorlib.kafka.groups import IN_FLIGHT, GroupState
    from mirrorlib.kafka.probe import check_reachable

    from_alias, to_alias = flow.source, flow.target
    if known_error is not None or admin is None:
        gone = known_error or ClusterError(f"cluster {from_alias}: unreachable")
        _unreachable(from_alias, to_alias, gone, notes)
        return dict.fromkeys(groups, ("unreachable", None, None))
    states: dict[str, Any] = {}
    try:
        for chunk in _chunks(groups, IN_FLIGHT):
            states.update(admin.states(list(chunk)))
            trips.add()
        offsets: dict[str, Any] = admin.committed_offsets_many(groups)
        trips.add(len(_chunks(groups, IN_FLIGHT)))
    except ClusterError as exc:
        try:
            check_reachable(config.client_config(from_alias, "admin"), from_alias, timeout)
        except ClusterError as down:
            _unreachable(from_alias, to_alias, down, notes)
            return dict.fromkeys(groups, ("unreachable", None, None))
        return dict.fromkeys(groups, ("unknown", None, str(exc)))
    out: dict[str, _SourceGroup] = {}
    for group in groups:
        state: Any = states.get(group, GroupState.UNKNOWN)
        error: str | None = None
        if state is GroupState.UNKNOWN:
            _, state, described = _describe_source(config, from_alias, group, timeout)
            trips.add()
            error = None if described is None else str(described)
        read: Any = offsets.get(group)
        why = error or (str(read) if isinstance(read, ClusterError) else None)
        got = None if isinstance(read, ClusterError) else read
        if why is None or (error is None and state is GroupState.ACTIVE):
            out[group] = (str(state), got, None)
        else:
            out[group] = ("unknown", got, why)
    return out


def _sort_plans(
    plans: Mapping[str, FailoverPlan], failed: Mapping[str, str], dry_run: bool
) -> dict[str, GroupFailover]:
    """The result of each group that will not be committed: failed before planning, refused,
    nothing to commit, or a dry run."""
    results = {
        group: GroupFailover(group, GroupOutcome.FAILED, None, error)
        for group, error in failed.items()
    }
    for group, plan in plans.items():
        if plan.refused is not None:
            results[group] = GroupFailover(group, GroupOutcome.REFUSED, plan)
        elif not plan.offsets:
            results[group] = GroupFailover(group, GroupOutcome.UNCHANGED, plan)
        elif dry_run:
            results[group] = GroupFailover(group, GroupOutcome.PLANNED, plan)
    return results


def _commit_many(
    plans: Mapping[str, FailoverPlan],
    decided: Mapping[str, GroupFailover],
    target_admin: Any,
    trips: _Trips,
) -> dict[str, GroupFailover]:
    """Commit the plans not ``decided`` yet on the new cluster, each group its own request and
    result, after checking again, in one batch, that none of them became active there."""
    from mirrorlib.kafka.groups import IN_FLIGHT, GroupState

    to_commit = {g: p for g, p in plans.items() if g not in decided}
    results: dict[str, GroupFailover] = {}
    states: dict[str, Any] = {}
    try:
        for chunk in _chunks(list(to_commit), IN_FLIGHT):
            states.update(target_admin.states(list(chunk)))
            trips.add()
    except ClusterError as exc:
        why = f"state on {target_admin.alias} unknown: {exc}"
        return {g: GroupFailover(g, GroupOutcome.FAILED, p, why) for g, p in to_commit.items()}
    for group, plan in list(to_commit.items()):
        if states.get(group) == GroupState.ACTIVE:
            del to_commit[group]
            refused = attrs.evolve(
                plan, target_state=str(GroupState.ACTIVE),
                refused=f"group {group!r} became active on {plan.to_alias} during the failover",
            )  # fmt: skip
            results[group] = GroupFailover(group, GroupOutcome.REFUSED, refused)
    committed = target_admin.commit_offsets_many({g: p.offsets for g, p in to_commit.items()})
    trips.add(len(_chunks(list(to_commit), IN_FLIGHT)))
    for group, plan in to_commit.items():
        error = committed.get(group)
        if error is None:
            applied = attrs.evolve(plan, applied=True)
            results[group] = GroupFailover(group, GroupOutcome.COMMITTED, applied)
        else:
            results[group] = GroupFailover(group, GroupOutcome.FAILED, plan, str(error))
    if to_commit:
        done = sum(r.outcome is GroupOutcome.COMMITTED for r in results.values())
        log.info("failover: committed the offsets of %d of %d group(s) on %s", done,
                 len(to_commit), target_admin.alias)  # fmt: skip
    return results
