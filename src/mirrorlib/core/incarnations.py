"""Incarnations of a topic: which log a stored position belongs to, and where copying resumes.

A topic deleted and created again under the same name is a new log: its offsets start again at
0 and say nothing about the old one's. Kafka tells them apart by the *topic ID* (KIP-516), a
UUID given to a topic when it is created. mirrorlib calls each log of a topic name an
*incarnation* and stores, with every source position, the ID of the source topic it was read
from and of the remote topic it was written to (:class:`Incarnation`;
:mod:`mirrorlib.core.connect_offsets` keeps them in the position's value, where MM2 ignores
them).

The rules (used by both engines; no Kafka client here):

* :func:`resume` -- where a partition starts, given its stored position and the IDs it was
  stored with and the topics' current IDs:

  - a **new source incarnation** (the source topic's ID differs from the stored one): from the
    new log's first offset, never at the old position (which would skip the new records below
    it), with a warning naming the topic and both IDs;
  - a **new remote incarnation** (the remote topic was deleted and created again on the target,
    so the records copied into the old one are gone): the source is copied again from its first
    offset, so that the target is complete again, with a warning;
  - otherwise after the stored position (a position stored without IDs -- by MM2 or an earlier
    mirrorlib -- is taken as it is; :func:`out_of_range` then decides on the evidence), or, with
    none, where ``auto.offset.reset`` says.

* :func:`out_of_range` -- the source log no longer holds the next offset to copy:

  - below the log start: retention removed records before they were copied: **data loss**, the
    lost range is reported (``data.loss.action``);
  - past the log end, in a log known to be the same incarnation (same topic ID): the log was
    truncated (an unclean leader election): the records copied from the truncated offsets are
    gone from the source, and the offsets will be given to new records, so copying resumes at
    the new log end, with a warning stating the range; nothing is lost;
  - past the log end with no stored ID to tell: the topic was truncated or deleted and created
    again; copying starts again at the log's first offset (records copied before may be copied
    twice, none is skipped), with a warning.

* :func:`rebase` -- the same for a running Spark query, whose batches follow each other without
  stored positions: the topic IDs seen when each batch was planned are kept with its plan.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping

import attrs

__all__ = [
    "Incarnation",
    "Moved",
    "OutOfRange",
    "Start",
    "StartKind",
    "mismatch",
    "out_of_range",
    "rebase",
    "resume",
]


@attrs.frozen
class Incarnation:
    """The topic IDs (Kafka's base64 text) of a source topic and its remote topic; ``None``:
    not known (not stored, or not described)."""

    source_id: str | None = None
    remote_id: str | None = None


class StartKind(enum.Enum):
    STORED = "stored"  # after the stored position
    RESET = "reset"  # no stored position: auto.offset.reset
    NEW_SOURCE = "new-source-incarnation"  # the source topic was re-created: from its start
    NEW_REMOTE = "new-remote-incarnation"  # the remote topic was re-created: source from start


@attrs.frozen
class Start:
    """Where a partition starts: ``offset`` (the next upstream offset to copy), or, when
    ``None``, at the log's first offset (``from_beginning``) or where ``auto.offset.reset``
    says. ``warning`` is to be logged (a new incarnation), ``None`` when nothing happened."""

    kind: StartKind
    offset: int | None = None
    warning: str | None = None

    @property
    def from_beginning(self) -> bool:
        return self.kind in (StartKind.NEW_SOURCE, StartKind.NEW_REMOTE)

    @property
    def new_incarnation(self) -> bool:
        return self.from_beginning


def resume(
    topic: str,
    partition: int,
    *,
    stored: int | None,
    stored_ids: Incarnation,
    current: Incarnation,
    remote_topic: str = "",
) -> Start:
    """Where partition ``topic``-``partition`` starts (see the module): ``stored`` is the last
    replicated upstream offset stored, with the IDs it was stored with; ``current`` the topics'
    IDs now (``None`` where they could not be described: then nothing is concluded)."""
    if stored is None:
        return Start(StartKind.RESET)
    old, new = stored_ids.source_id, current.source_id
    if old is not None and new is not None and old != new:
        return Start(
            StartKind.NEW_SOURCE,
            warning=(
                f"source topic {topic} was deleted and created again (topic id {old} -> {new}): "
                f"partition {partition} is a new incarnation; copying it from its first offset, "
                f"not at the old position {stored + 1}"
            ),
        )
    old_r, new_r = stored_ids.remote_id, current.remote_id
    if old_r is not None and new_r is not None and old_r != new_r:
        where = remote_topic or "the remote topic"
        return Start(
            StartKind.NEW_REMOTE,
            warning=(
                f"remote topic {where} was deleted and created again on the target (topic id "
                f"{old_r} -> {new_r}): copying {topic}-{partition} again from its first offset "
                f"(was at {stored + 1}) so that the target holds it again"
            ),
        )
    return Start(StartKind.STORED, stored + 1)


@attrs.frozen
class OutOfRange:
    """What to do when the next offset to copy is outside the source log: resume at
    ``resume``; ``lost`` is the inclusive range of offsets lost (data loss: retention removed
    them before they were copied), ``None`` when nothing is lost; ``message`` says what
    happened."""

    resume: int
    lost: tuple[int, int] | None
    message: str

    @property
    def lost_count(self) -> int:
        return 0 if self.lost is None else max(self.lost[1] - self.lost[0] + 1, 0)


def out_of_range(
    topic: str, partition: int, *, next_offset: int, low: int, high: int, same_log: bool
) -> OutOfRange:
    """The next offset to copy, ``next_offset``, is not in the log ``[low, high)`` (see the
    module). ``same_log``: the position is known to belong to the log now there (its stored
    topic ID is the current one, or this process started it in this incarnation)."""
    tp = f"{topic}-{partition}"
    if next_offset < low:
        return OutOfRange(
            low,
            (next_offset, low - 1),
            f"retention removed offsets {next_offset}..{low - 1} of {tp} before they were "
            "replicated",
        )
    if next_offset > high and same_log:
        return OutOfRange(
            high,
            None,
            f"the log of {tp} ends at {high} but offsets up to {next_offset - 1} were "
            f"replicated: offsets {high}..{next_offset - 1} were truncated on the source (an "
            f"unclean leader election?); the records copied from them stay on the target, and "
            f"copying resumes at the new log end {high} (new records get those offsets)",
        )
    if next_offset > high:
        return OutOfRange(
            low,
            None,
            f"the log of {tp} ends at {high} but the stored position is {next_offset}, and no "
            f"topic id was stored with it to tell a truncated log from a re-created topic: "
            f"copying the partition again from its first offset {low} (records copied before "
            f"may be copied twice, none is skipped)",
        )
    return OutOfRange(next_offset, None, f"offset {next_offset} of {tp} is in the log again")


def _differs(old: str | None, new: str | None) -> bool:
    return old is not None and new is not None and old != new


@attrs.frozen
class Moved:
    """A partition whose next batch does not start where the last one ended: ``offset`` is
    where it starts; ``new_incarnation`` when the source or remote topic was re-created (else
    the source log was truncated below it); ``message`` is to be logged."""

    offset: int
    new_incarnation: bool
    message: str


def rebase(
    begin: Mapping[tuple[str, int], int],
    low: Mapping[tuple[str, int], int],
    high: Mapping[tuple[str, int], int],
    before: Mapping[str, Incarnation],
    now: Mapping[str, Incarnation],
    remote_of: Callable[[str], str] = lambda t: t,
) -> dict[tuple[str, int], Moved]:
    """The partitions of a running Spark query whose next batch must not start at ``begin``
    (where the last batch ended): their topic is a new incarnation on either side since the
    last batch was planned (``before``: the ids then; ``now``: the ids now) -- copied from the
    new log's first offset ``low`` --, or ``begin`` is past the log end ``high`` (decided by
    :func:`out_of_range`; an id unknown before means it cannot tell a truncated log from a
    re-created one). A ``begin`` below the log start is left to the copy task (data loss)."""
    out: dict[tuple[str, int], Moved] = {}
    for tp, b in sorted(begin.items()):
        if tp not in low or tp not in high:
            continue
        topic, partition = tp
        old, new = before.get(topic, Incarnation()), now.get(topic, Incarnation())
        if _differs(old.source_id, new.source_id) or _differs(old.remote_id, new.remote_id):
            start = resume(
                topic, partition, stored=b - 1, stored_ids=old, current=new,
                remote_topic=remote_of(topic),
            )  # fmt: skip
            out[tp] = Moved(low[tp], True, start.warning or "")
        elif b > high[tp]:
            same = old.source_id is not None and old.source_id == new.source_id
            d = out_of_range(topic, partition, next_offset=b, low=low[tp], high=high[tp],
                             same_log=same)  # fmt: skip
            out[tp] = Moved(d.resume, False, d.message)
    return out


def mismatch(
    topic: str, remote_topic: str, stored: Incarnation, current: Incarnation
) -> str | None:
    """What ``mirrorlib verify`` says of a partition whose stored position was written for
    other incarnations of its topics than the ones there now (``None``: the same, or not
    known): the remote topic does not hold the current source topic's records (yet)."""
    if _differs(stored.source_id, current.source_id):
        return (
            f"source topic {topic} is a new incarnation (topic id {current.source_id}; the "
            f"position on the target was stored for {stored.source_id}): {remote_topic} holds "
            "the old one's records until the replicator copies the new one"
        )
    if _differs(stored.remote_id, current.remote_id):
        return (
            f"remote topic {remote_topic} is a new incarnation (topic id {current.remote_id}; "
            f"the position was stored for {stored.remote_id}): the records copied into the old "
            "one are gone until the replicator copies the source again"
        )
    return None
