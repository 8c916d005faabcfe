"""One writer per partition among a flow's worker processes: who may still be writing what.

With ``tasks.max`` > 1 a flow copies in worker processes (:mod:`mirrorlib.runtime.workers.supervisor`), each
through a transactional producer of its own slot. A partition moves from one process to another
only when the first can no longer write it. This module is that rule as state and decisions --
no processes, pipes or threads -- so it is unit-tested as it runs:

* a :class:`Writer` is one worker process as the parent knows it: the partitions it was last
  told to copy (:attr:`Writer.sent`) and those it was told to give up but has not confirmed yet;
  it *may hold* both (:meth:`Writer.may_hold`). An assignment is numbered; the worker confirms a
  number once it applied it (its open transaction with the partitions it gave up committed, or,
  for partitions *lost* to another node, aborted);
* a partition is granted to a slot's writer only when no other slot's writer may hold it
  (:meth:`HandoverLedger.grantable`); while the node's share of the group is unconfirmed, no
  writer gets a partition it does not hold already;
* a replaced writer (it stopped answering; a new process of its slot fences its transactional
  id) may hold its partitions until it is reaped;
* a slot whose writer initialised its producer and did not end cleanly may have left a
  transaction open on the target (it is *dirty*) until its transactional id is fenced; while the
  flow stops, the partitions it may have written count as held (:meth:`HandoverLedger.holding`),
  so no other node is given them before the fence.

Not thread-safe: the supervisor serialises the calls.
"""

from __future__ import annotations

import attrs

__all__ = ["Assignment", "HandoverLedger", "Key", "Writer"]

#: A source partition: ``(topic, partition)``.
Key = tuple[str, int]


@attrs.frozen
class Assignment:
    """What a worker process is told: the partitions it copies from now on, numbered
    ``version``, and those of the partitions it gives up that were ``lost`` to another node
    (dropped without committing: their open transaction is aborted)."""

    version: int
    partitions: frozenset[Key]
    lost: frozenset[Key]


class Writer:
    """One worker process of slot :attr:`slot`, as its parent knows it."""

    __slots__ = ("applied", "releasing", "sent", "slot", "stale", "version")

    def __init__(self, slot: int) -> None:
        self.slot = slot
        self.sent: frozenset[Key] = frozenset()  # the last assignment's partitions
        self.version = -1  # the last assignment's number
        self.applied = -1  # the last number the process confirmed
        # partitions given up by assignments not confirmed yet: (version, keys)
        self.releasing: list[tuple[int, frozenset[Key]]] = []
        self.stale = False  # replaced: nothing it says counts any more

    def may_hold(self) -> frozenset[Key]:
        """The partitions this process may be writing."""
        held = set(self.sent)
        for _, keys in self.releasing:
            held |= keys
        return frozenset(held)

    @property
    def initialised(self) -> bool:
        """It confirmed an assignment: its producer is initialised, it may have written."""
        return self.applied >= 0


class HandoverLedger:
    """Which partitions each writer of a flow's ``slots`` may be writing, which a slot's writer
    may be given, and which slots may hold an open transaction (see the module)."""

    def __init__(self, slots: int) -> None:
        self._current: list[Writer | None] = [None] * slots
        self._stale: list[Writer] = []
        self._dirty = [False] * slots
        self._held: list[frozenset[Key]] = [frozenset()] * slots
        #: the flow stops: dirty slots' partitions count as held (:meth:`holding`)
        self.stopping = False

    # -- writers come and go ----------------------------------------------------------------------

    def start(self, slot: int) -> Writer:
        """A new process of ``slot`` started: it holds nothing yet."""
        writer = Writer(slot)
        self._current[slot] = writer
        return writer

    def writer(self, slot: int) -> Writer | None:
        """The slot's current writer (``None``: no process)."""
        return self._current[slot]

    def replace(self, writer: Writer) -> None:
        """``writer`` stopped answering: a new process of its slot takes over (and fences its
        transactional id); until :meth:`reaped`, it may still hold what it held."""
        writer.stale = True
        if self._current[writer.slot] is writer:
            self._current[writer.slot] = None
        self._stale.append(writer)

    def reaped(self, writer: Writer) -> None:
        """A replaced writer's process is gone."""
        if writer in self._stale:
            self._stale.remove(writer)

    def ended(self, writer: Writer, *, clean: bool) -> None:
        """``writer``'s process exited; ``clean``: it said it ended cleanly and exited with
        status 0 (its last transaction committed or aborted). A process that never initialised
        its producer wrote nothing; one that did and did not end cleanly (killed, crashed, its
        last commit failed) leaves its slot dirty, with what it may have written."""
        slot = writer.slot
        if self._current[slot] is writer:
            self._current[slot] = None
        if not writer.initialised:
            return
        if clean:
            self._dirty[slot] = False
            self._held[slot] = frozenset()
        else:
            self._held[slot] = writer.may_hold()

    def fenced(self, slot: int) -> None:
        """The slot's transactional id was fenced (its open transaction aborted); a process of
        the slot started meanwhile makes it count for nothing."""
        if self._current[slot] is None:
            self._dirty[slot] = False

    def dirty(self, slot: int) -> bool:
        """The slot's transactional id may hold an open transaction."""
        return self._dirty[slot]

    def held(self, slot: int) -> frozenset[Key]:
        """What the slot's last ended process may have written (while :meth:`dirty`)."""
        return self._held[slot]

    # -- assignments ------------------------------------------------------------------------------

    def assign(
        self, writer: Writer, partitions: frozenset[Key], lost: frozenset[Key]
    ) -> Assignment:
        """Tell ``writer`` to copy ``partitions`` from now on; the partitions it gives up
        stay held until it confirms this assignment. ``lost``: partitions lost to another node
        (of those it gives up, dropped without committing)."""
        writer.version += 1
        removed = writer.sent - partitions
        if removed:
            writer.releasing.append((writer.version, removed))
        writer.sent = partitions
        return Assignment(writer.version, partitions, removed & lost)

    def applied(self, writer: Writer, version: int) -> frozenset[Key]:
        """``writer`` confirmed assignments up to ``version``: its producer is initialised (its
        slot is dirty from now on) and it no longer writes what they took away. Returns the
        partitions released for good (given back meanwhile: still held)."""
        self._dirty[writer.slot] = True
        writer.applied = max(writer.applied, version)
        released = [k for v, k in writer.releasing if v <= writer.applied]
        writer.releasing = [(v, k) for v, k in writer.releasing if v > writer.applied]
        return frozenset().union(*released) - writer.sent

    # -- decisions --------------------------------------------------------------------------------

    def grantable(self, slot: int, placed: frozenset[Key], *, confirmed: bool) -> frozenset[Key]:
        """Of ``placed`` (the placement's partitions for ``slot``), those its writer may be
        told to copy now: none that another slot's writer may hold (a replaced one until it is
        reaped: the new writer of its own slot fences it, no other does); and, while this
        node's share is not ``confirmed`` by the group coordinator, none it does not hold
        already."""
        writer = self._current[slot]
        others = frozenset().union(
            *(
                w.may_hold()
                for w in (*self._current, *self._stale)
                if w is not None and w.slot != slot
            )
        )
        wanted = placed - others
        if not confirmed and writer is not None:
            wanted &= writer.sent
        return wanted

    def holding(self, keys: frozenset[Key]) -> frozenset[Key]:
        """Which of ``keys`` a writer may still be writing (a replaced one until reaped), or,
        while the flow stops, a dirty slot without a process may have left in an open
        transaction."""
        held: set[Key] = set()
        for writer in (*self._current, *self._stale):
            if writer is not None:
                held |= writer.may_hold() & keys
        if self.stopping:
            for slot, writer in enumerate(self._current):
                if writer is None and self._dirty[slot]:
                    held |= self._held[slot] & keys
        return frozenset(held)

    def holders(self, keys: frozenset[Key]) -> list[Writer]:
        """The current writers that may hold any of ``keys``."""
        return [w for w in self._current if w is not None and w.may_hold() & keys]
