"""``tasks.max`` > 1: a flow copies in worker processes, one writer per partition, fenced.

:class:`WorkerPlane` is the data plane of a flow with ``tasks.max = N > 1``: instead of the
in-process copier thread (:class:`~mirrorlib.runtime.flow.CopierPlane`), a :class:`Supervisor`
runs N copier worker OS processes (``python -m mirrorlib.runtime.workers.child``; threads would share
one GIL), numbered *slots* 0..N-1, each copying a disjoint set of the flow's partitions. The
parent keeps the control plane (metadata, checkpoints, heartbeats, status) and writes the
workers' offset syncs.

**Sharing with other processes.** The partitions this process copies are its share of the
flow's consumer group on the source (``mirrorlib-<A>-><B>``), exactly as with one copier: a
*membership* consumer subscribes to the flow's topics, keeps every partition paused (it fetches
nothing) and only serves rebalances. It is a static member (``group.instance.id`` =
``mirrorlib-<A>-><B>-<node>``), so a restarted process gets its partitions back at once instead
of after the group's session timeout. A partition revoked from this process is released by its
worker (committed, unassigned) before the revocation completes; a *lost* one (the session
ended) is dropped without committing (the worker's open transaction is aborted). After this
process did not run for longer than its workers wait for it, or a worker left or was fenced,
no worker gets a partition it does not hold until the group coordinator confirmed the share
(``Supervisor(recheck=...)``, :mod:`mirrorlib.kafka.membership`).

**Placement.** By load, not count (:mod:`mirrorlib.core.placement`): pending bytes and recent
rate, from the flow's counters. Placed when partitions come or go and when a slot stays down
longer than :data:`DOWN_GRACE_S`; moved between live workers only when the imbalance is large
(at most every :data:`REBALANCE_S`), and then release-confirm-then-assign.

**The fence: one writer per target partition.** Every worker writes records *and* positions
through a transactional producer with ``transactional.id = mirrorlib-<A>-><B>-<node>-<slot>``
(the exactly-once committer, whichever the delivery mode). A partition is given to a slot only
when no other slot may still write it: the slot holding it confirmed the release (its
transaction with the partition's last records and position committed, the partition
unassigned), or that slot's process is dead (reaped: a dead producer can neither write nor
commit). When a slot has been down for :data:`DOWN_GRACE_S` its partitions move, and its
transactional id is fenced meanwhile, in the background (:mod:`mirrorlib.kafka.fencing`): the
transaction its dead process left open is aborted at once, instead of hiding what the next
worker copies to those partitions from ``read_committed`` readers until the broker's
transaction timeout (the slot starts no process until the fence is done: the fence would fence
it). A worker that stops
reporting for ``unresponsive_after`` seconds (stopped, stuck) is replaced: a new process for
the same slot starts with the same transactional id, whose initialisation bumps the producer
epoch, so the stale process can no longer write or commit
anything (its open transaction is aborted), and the stale process is sent ``SIGKILL``. A
worker whose producer is fenced or dies exits (it never initialises its id again, which would
fence the legitimate process), and so does a worker whose parent is gone. Offset syncs reach
the offset-syncs topic only through the parent, which reads nothing from a process it replaced.

**Stopping.** Workers run in a session of their own: a terminal's Ctrl-C (SIGINT to its
foreground process group) reaches the parent only, which stops its flows. The supervisor then
sends every worker :class:`~mirrorlib.core.workerproto.Stop`; a worker also stops on a SIGTERM
or SIGINT of its own (systemd signals a whole control group), in both cases committing (or
aborting) its open transaction and saying so (``Exit(clean=True)``). Workers still running
after :data:`STOP_TIMEOUT_S` are killed. A slot whose process initialised its producer and did
not end cleanly (killed, crashed, its last commit failed) may have left a transaction open on
the target: its transactional id is fenced before the supervisor reports the slots stopped
(:attr:`Supervisor.clean`, :meth:`Supervisor.slot_infos`); a slot whose id cannot be fenced is
reported ``abandoned`` with the partitions it held, never ``stopped``, and the node does not
leave the group, so the node given those partitions after the session timeout fences it
(:class:`~mirrorlib.kafka.fencing.DepartedFence`). A revocation that comes during the stop
completes only once the workers stopped (or were fenced): another node must not copy a
partition while a worker of this one may still commit it.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from mirrorlib.core.catalog import TopicCatalog
from mirrorlib.core.counters import StatsRegistry
from mirrorlib.core.handover import HandoverLedger, Writer
from mirrorlib.core.placement import load_of, place
from mirrorlib.core.retry import Backoff
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.stalls import SilenceGauge, WatchdogClock
from mirrorlib.core.status import FlowState, WorkerStatus
from mirrorlib.core.syncs import EmittedSync, OffsetSyncEmitter
from mirrorlib.core.worker_reports import SlotInfo, WorkerState
from mirrorlib.core.workerproto import (
    EXIT_FAILED,
    EXIT_FENCED,
    EXIT_PARENT_SILENT,
    REPORT_INTERVAL_S,
    Applied,
    Assign,
    Exit,
    Keepalive,
    Report,
    ReportMerger,
    Start,
    Stop,
    Syncs,
    SyncsFailed,
    Topics,
    parent_silence_limit,
)
from mirrorlib.errors import MirrorError
from mirrorlib.kafka.fencing import FENCE_TIMEOUT_S, fence_transactional_id
from mirrorlib.kafka.membership import GroupShare
from mirrorlib.kafka.offset_syncs import OffsetSyncWriter
from mirrorlib.runtime.workers.frames import read_frame, write_frame
from mirrorlib.runtime.workers.status import WorkerReporter

__all__ = ["DOWN_GRACE_S", "REBALANCE_S", "UNRESPONSIVE_S", "Supervisor", "WorkerPlane"]

log = logging.getLogger(__name__)

Key = tuple[str, int]

#: seconds without a report after which a worker is replaced (its first report may take longer:
#: :data:`STARTUP_S`)
UNRESPONSIVE_S = 6.0
STARTUP_S = 60.0
#: a round of the supervisor's loop this much later than the previous one means the parent was
#: not running (stopped, starved): the workers' silence counts anew from then (their reports
#: waited in the pipes)
PARENT_PAUSE_S = 1.0
#: back-off (seconds) of a slot's restarts; reset once a process ran :data:`HEALTHY_S`
RESTART_BASE_S, RESTART_CAP_S, HEALTHY_S = 0.5, 30.0, 60.0
#: seconds a slot whose process died keeps its partitions, waiting for its next process
DOWN_GRACE_S = 10.0
#: seconds between two moves of partitions between live workers
REBALANCE_S = 30.0
#: seconds a revocation (another process takes partitions) waits for the workers' release
RELEASE_TIMEOUT_S = 30.0
#: seconds the workers get to commit and exit when the flow stops
STOP_TIMEOUT_S = 20.0
#: back-off (seconds) of the supervisor's loop after it failed (its workers run on meanwhile)
LOOP_RETRY_BASE_S, LOOP_RETRY_CAP_S = 0.5, 10.0


_CLOSE = object()  # ends a process's sender thread
#: seconds a process's reader (sender) thread gets to finish once the process exited
PIPE_JOIN_S = 5.0


class _Process:
    """One OS process of a slot, and what the parent knows of it.

    Messages to the process go through its own sender thread (:meth:`send` never blocks: a
    stopped or stuck worker whose stdin pipe is full blocks only that thread, and the
    supervisor still replaces it); its frames come through its reader thread (:meth:`read`)."""

    def __init__(self, writer: Writer, popen: subprocess.Popen[bytes]) -> None:
        self.writer = writer  # what it may be writing (the supervisor's HandoverLedger)
        self.slot = writer.slot
        self.popen = popen
        self.pid = popen.pid
        self.started = time.monotonic()
        self.last_seen: float | None = None  # monotonic time of the last message
        self.merger = ReportMerger()
        self.records = 0  # records reported (for the rate)
        self.rate = (time.monotonic(), 0, 0.0)  # (time, records, records/s)
        self.exit_clean = False  # it said it ended cleanly (Exit.clean)
        self._outbox: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []

    @property
    def sent(self) -> frozenset[Key]:
        """The partitions of the last assignment sent to it."""
        return self.writer.sent

    @property
    def stale(self) -> bool:
        """Replaced: nothing it says counts any more."""
        return self.writer.stale

    def may_hold(self) -> frozenset[Key]:
        """The partitions this process may be writing."""
        return self.writer.may_hold()

    def send_first(self, message: object) -> bool:
        """Write ``message`` at once (before the threads run); whether it was written."""
        stdin = self.popen.stdin
        if stdin is None:
            return False
        try:
            write_frame(stdin, message)
        except (OSError, ValueError):
            return False
        return True

    def run_threads(self, name: str, events: queue.Queue[tuple[_Process, Any]]) -> None:
        """Start the sender and reader threads of the process."""
        self._threads = [
            threading.Thread(target=self._write, name=f"{name} sender", daemon=True),
            threading.Thread(target=self.read, args=(events,), name=f"{name} reader", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def send(self, message: object) -> None:
        """Queue ``message`` for the process (never blocks; lost if the process is gone)."""
        self._outbox.put(message)

    def _write(self) -> None:
        stdin = self.popen.stdin
        assert stdin is not None
        while (message := self._outbox.get()) is not _CLOSE:
            try:
                write_frame(stdin, message)
            except (OSError, ValueError):
                return  # the process is gone: its reader reports the end

    def read(self, events: queue.Queue[tuple[_Process, Any]]) -> None:
        """Forward every frame of the process to the supervisor (``None`` at its end)."""
        stdout = self.popen.stdout
        assert stdout is not None
        while True:
            try:
                message = read_frame(stdout)
            except Exception as exc:
                log.warning("worker %d (pid %d): unreadable frame: %s", self.slot, self.pid, exc)
                message = None
            events.put((self, message))
            if message is None:
                return

    def close_pipes(self) -> None:
        """Once the process exited: let its threads finish (the reader forwards its last
        frames), then close its pipes."""
        self._outbox.put(_CLOSE)
        deadline = time.monotonic() + PIPE_JOIN_S
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(max(deadline - time.monotonic(), 0.0))
        for stream in (self.popen.stdin, self.popen.stdout):
            if stream is not None:
                with contextlib.suppress(OSError, ValueError):
                    stream.close()


class _Slot:
    def __init__(self, index: int) -> None:
        self.index = index
        self.process: _Process | None = None
        self.placed: frozenset[Key] = frozenset()  # the planner's partitions for the slot
        self.restarts = 0
        self.last_error: str | None = None
        self.backoff = Backoff(base=RESTART_BASE_S, cap=RESTART_CAP_S)
        self.next_start = 0.0  # monotonic time its next process may start
        self.down_since: float | None = None  # when its process died (None: never ran, or up)
        self.replaced = False  # its process replaced one that stopped answering, not heard yet
        self.fenced = False  # its transactional id was fenced since its last process ended
        self.fence: threading.Thread | None = None  # the fence of its id, while it runs

    @property
    def fencing(self) -> bool:
        """Its transactional id is being fenced: no process of it may start meanwhile (the
        fence would fence the new process)."""
        return self.fence is not None and self.fence.is_alive()

    @property
    def failed(self) -> bool:
        """The slot failed for the flow (e.g. data loss): no process of it starts again."""
        return self.process is None and self.next_start == float("inf")

    def in_grace(self, now: float) -> bool:
        """Its process died less than :data:`DOWN_GRACE_S` ago: it keeps its partitions."""
        return self.down_since is not None and now - self.down_since < DOWN_GRACE_S

    def gone(self, now: float) -> bool:
        """No process, not failed for the flow, and down past the grace: its partitions move."""
        return (
            self.process is None
            and not self.failed
            and self.down_since is not None
            and not self.in_grace(now)
        )


def _slot_info(slot: _Slot, handover: HandoverLedger, now: float, stopped: bool) -> SlotInfo:
    proc = slot.process
    retry_in = None
    if stopped and handover.dirty(slot.index):  # the supervisor stopped; its id not fenced
        return SlotInfo(
            slot=slot.index, pid=None, state=WorkerState.ABANDONED,
            partitions=handover.held(slot.index),
            restarts=slot.restarts, last_error=slot.last_error,
        )  # fmt: skip
    if stopped and not slot.failed:
        state = WorkerState.STOPPED
    elif proc is not None:
        state = WorkerState.STARTING if proc.last_seen is None else WorkerState.RUNNING
        if slot.replaced:
            state = WorkerState.REPLACED
    elif slot.failed:
        state = WorkerState.FAILED
    else:
        state = WorkerState.RESTARTING if slot.restarts else WorkerState.STARTING
        retry_in = max(slot.next_start - now, 0.0)
    if stopped:
        retry_in = None
    return SlotInfo(
        slot=slot.index, pid=None if proc is None else proc.pid, state=state,
        partitions=frozenset() if proc is None else proc.sent, restarts=slot.restarts,
        last_error=slot.last_error, retry_in_s=retry_in,
    )  # fmt: skip


def _also(error: str | None, more: str) -> str:
    return more if not error else f"{error}; {more}"


def _worker_command() -> list[str]:
    return [sys.executable, "-m", "mirrorlib.runtime.workers.child"]


class Supervisor:
    """Runs, watches and assigns a flow's worker processes (see the module).

    ``owned()`` answers the partitions this process is to copy now (its share of the group);
    ``offsets_topic_partitions``: the offsets topic's partition count. Run :meth:`run` in a
    thread of the flow; all state changes happen in that thread except :meth:`holding`.
    """

    def __init__(
        self,
        settings: FlowSettings,
        flow_stats: StatsRegistry,
        catalog: TopicCatalog,
        owned: Callable[[], frozenset[Key]],
        *,
        offsets_topic_partitions: int,
        unresponsive_after: float = UNRESPONSIVE_S,
        command: Callable[[], list[str]] = _worker_command,
        recheck: Callable[[], Callable[[], bool]] | None = None,
        fence: Callable[[str], None] | None = None,
    ) -> None:
        self.s = settings
        self.stats = flow_stats
        self.catalog = catalog
        self.owned = owned
        self.offsets_topic_partitions = offsets_topic_partitions
        self.unresponsive_after = unresponsive_after
        self.command = command
        #: fences a transactional id (raises MirrorError when it cannot): the target's
        #: coordinator aborts its open transaction
        self.fence_id = fence or self._fence_on_target
        self.slots = [_Slot(i) for i in range(settings.tasks_max)]
        self.events: queue.Queue[tuple[_Process, Any]] = queue.Queue()
        self._lock = threading.Lock()  # guards what holding() reads
        self._catalog_version = -1
        self._last_rebalance = time.monotonic()
        self._replan = True
        self._owned: frozenset[Key] = frozenset()
        self._syncs: OffsetSyncWriter | None = None
        self._stale: list[_Process] = []  # replaced processes, killed, to reap (under _lock)
        #: who may be writing what (under _lock): the one-writer-per-partition rule
        self.handover = HandoverLedger(settings.tasks_max)
        #: set once the flow stopped and no worker process is left (they committed, or were
        #: killed and their transactional ids fenced): only then may this node leave the
        #: flow's group (:class:`GroupShare`)
        self.stopped = threading.Event()
        #: once :attr:`stopped`: no slot's transactional id may hold an open transaction (every
        #: worker ended cleanly or was fenced); False: some could not be fenced
        self.clean = False
        self._stopped_all = False  # (under _lock) the slots are reported stopped
        self._lost: frozenset[Key] = frozenset()  # lost partitions being released (under _lock)
        self._loop_backoff = Backoff(base=LOOP_RETRY_BASE_S, cap=LOOP_RETRY_CAP_S)
        self._loop_failed = False  # the last round of the loop raised
        self._clock = WatchdogClock(PARENT_PAUSE_S)
        self._silence = SilenceGauge()  # the keepalive thread's gaps
        self.recheck = recheck
        #: while set: this process's share awaits the group coordinator's word (the predicate
        #: turns true once it came), and no worker gets a partition it does not hold
        self._unconfirmed: Callable[[], bool] | None = None
        self._last_round: float | None = None

    # -- what others ask ----------------------------------------------------------------------

    def holding(self, keys: frozenset[Key]) -> frozenset[Key]:
        """Which of ``keys`` a worker may still be writing, or may have left in an open
        transaction not fenced yet (while the flow stops) (thread-safe)."""
        with self._lock:
            return self.handover.holding(keys)

    def slot_infos(self) -> tuple[SlotInfo, ...]:
        """Each slot now: its process, state and assigned partitions; once the supervisor
        stopped, ``stopped``, or ``abandoned`` (with the partitions it may have written) for a
        slot whose transactional id may hold an open transaction (thread-safe)."""
        now = time.monotonic()
        with self._lock:
            return tuple(
                _slot_info(slot, self.handover, now, self._stopped_all) for slot in self.slots
            )

    def lose(self, keys: frozenset[Key]) -> None:
        """``keys`` were lost to another node (this process's group session ended), and are
        about to be released (:meth:`await_release`): the workers holding them drop them
        without committing, their open transactions aborted (thread-safe)."""
        with self._lock:
            self._lost = self._lost | keys

    def await_release(self, keys: frozenset[Key], stop: threading.Event) -> None:
        """Block until no worker may write any of ``keys`` any more (they were revoked from
        this process: the workers commit and drop them, or, lost ones, drop them without
        committing), at most :data:`RELEASE_TIMEOUT_S` or until ``stop``."""
        try:
            self._await_release(keys, stop)
        finally:
            with self._lock:
                self._lost = self._lost - keys

    def _await_release(self, keys: frozenset[Key], stop: threading.Event) -> None:
        self._replan = True
        deadline = time.monotonic() + RELEASE_TIMEOUT_S
        while self.holding(keys) and time.monotonic() < deadline:
            if stop.wait(0.05):
                # stopping: the workers commit and stop, or are killed and their ids fenced;
                # the partitions are handed over only then (another node copying them while a
                # worker still commits would write them twice)
                self._await_stopped(keys)
                return
        left = self.holding(keys)
        if not left:
            return
        # not released in time: the workers holding them are killed (a dead producer writes
        # nothing more) before the revocation completes
        with self._lock:
            holders = [
                proc
                for w in self.handover.holders(left)
                if (proc := self.slots[w.slot].process) is not None
            ]
        log.warning(
            "flow %s: %d revoked partition(s) not released by the workers in %.0fs: killing "
            "worker(s) %s",
            self.s.name,
            len(left),
            RELEASE_TIMEOUT_S,
            ", ".join(f"{p.slot} (pid {p.pid})" for p in holders),
        )
        for proc in holders:
            with contextlib.suppress(OSError):
                os.kill(proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + RELEASE_TIMEOUT_S
        while self.holding(keys) and time.monotonic() < deadline and not stop.wait(0.05):
            pass

    def _await_stopped(self, keys: frozenset[Key]) -> None:
        deadline = time.monotonic() + STOP_TIMEOUT_S + FENCE_TIMEOUT_S + PIPE_JOIN_S
        while self.holding(keys) and not self.stopped.is_set():
            if time.monotonic() >= deadline:
                log.warning(
                    "flow %s: the workers holding %d revoked partition(s) did not stop within "
                    "%.0fs: handing them over", self.s.name, len(keys),
                    STOP_TIMEOUT_S + FENCE_TIMEOUT_S + PIPE_JOIN_S,
                )  # fmt: skip
                return
            self.stopped.wait(0.05)

    # -- the loop -------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Supervise until ``stop``, then stop the workers. A round of the loop that raises is
        logged, shown as the flow's ``workers`` error and retried with back-off; the workers
        run on meanwhile."""
        if self.s.emit_offset_syncs_enabled:
            self._syncs = OffsetSyncWriter(
                self.s.offset_syncs_producer,
                self.s.offset_syncs_topic,
                OffsetSyncEmitter(),  # unused: the workers' emitters number the syncs (and
                # hear of the failed ones: _sync_failed)
                flow=self.s.name,
                on_written=self._sync_written,
            )
        threading.Thread(
            target=self._keep_alive, args=(stop,), name=f"mirrorlib {self.s.name} keepalive",
            daemon=True,
        ).start()  # fmt: skip
        try:
            while not stop.is_set():
                try:
                    self._loop(stop)
                except Exception as exc:
                    self._loop_failed = True
                    delay = self._loop_backoff.next_delay()
                    self.stats.set_error("workers", f"supervisor: {type(exc).__name__}: {exc}")
                    log.exception(
                        "flow %s: the worker supervisor failed; retrying in %.1fs",
                        self.s.name,
                        delay,
                    )
                    self._loop_backoff.wait(stop)
        finally:
            try:
                self._shutdown()
            finally:
                self.stopped.set()

    def _loop(self, stop: threading.Event) -> None:
        last_plan = 0.0
        while not stop.is_set():
            self._handle_events(timeout=0.1)
            now = time.monotonic()
            self._clock.tick(now)
            if self._last_round is not None and now - self._last_round > parent_silence_limit(
                self.s
            ):
                self._doubt_share(f"this process did not run for {now - self._last_round:.0f}s")
            self._last_round = now
            if self._unconfirmed is not None and self._unconfirmed():
                self._unconfirmed = None
                self._replan = True
                log.info("flow %s: the workers get their partitions again", self.s.name)
            self._watch(now)
            self._start_due(now)
            self._forward_topics()
            owned = self.owned()
            if owned != self._owned:
                self._owned = owned
                self._replan = True
            if self._replan or now - last_plan >= 1.0:
                self._plan(now)
                last_plan = now
            if self._syncs is not None:
                self._syncs.poll()
            self._publish_rows(now)
            if self._loop_failed:  # a full round again
                self._loop_failed = False
                self._loop_backoff.reset()
                self.stats.set_error("workers", None)

    def _handle_events(self, timeout: float) -> None:
        try:
            proc, message = self.events.get(timeout=timeout)
        except queue.Empty:
            return
        while True:
            self._handle(proc, message)
            try:
                proc, message = self.events.get_nowait()
            except queue.Empty:
                return

    def _handle(self, proc: _Process, message: Any) -> None:
        if proc.stale:
            return  # replaced: nothing it says counts (it may not even know yet)
        proc.last_seen = time.monotonic()
        slot = self.slots[proc.slot]
        slot.replaced = False
        if isinstance(message, Report):
            self._merge(slot, proc, message)
        elif isinstance(message, Applied):
            with self._lock:  # its producer is initialised: it may write from now on
                released = self.handover.applied(proc.writer, message.version)
            # confirmed: the process reports them no more (one given back before it confirmed
            # the release may never have left it: kept; one that left and came back is a new
            # holding in its reports, counted anew by the merger)
            for key in released:
                proc.merger.forget(key)
            self._replan = True
        elif isinstance(message, Syncs):
            if self._syncs is not None:
                failed = functools.partial(self._sync_failed, proc)
                for emitted in message.syncs:
                    self._syncs.write(emitted, failed)
        elif isinstance(message, Exit):
            proc.exit_clean = message.clean
            slot.last_error = None if not (message.fenced or message.failed) else message.reason
            if not (message.clean or message.fenced or message.failed):
                slot.last_error = message.reason  # (e.g. its last commit failed)
            if message.failed:
                self.stats.set_error("copier", message.reason)
                self.stats.state = FlowState.FAILED
                log.error("flow %s stopped: %s", self.s.name, message.reason)
        elif message is None:
            self._died(slot, proc)

    def _merge(self, slot: _Slot, proc: _Process, report: Report) -> None:
        held = proc.may_hold()
        records = 0
        for part in report.partitions:
            key = (part.topic, part.partition)
            records += part.record_count
            if key not in held or key not in self._owned:
                continue
            stats = self.stats.partition(part.topic, part.partition, part.remote_topic)
            proc.merger.apply(part, stats)
            stats.worker = slot.index
        proc.records = records
        for event in proc.merger.new_incarnations(report):  # (mirrorlib.core.incarnations)
            self.stats.new_incarnation(event)
        self.stats.set_error(f"worker {slot.index}", "; ".join(report.errors) or None)
        self.stats.set_stall(f"worker {slot.index}", report.stalled)

    # -- process life ---------------------------------------------------------------------------

    def _start_due(self, now: float) -> None:
        for slot in self.slots:
            if slot.process is None and now >= slot.next_start and not slot.fencing:
                self._start(slot)

    def _start(self, slot: _Slot) -> None:
        try:
            popen = subprocess.Popen(
                self.command(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                close_fds=True,
                # a session of its own: a terminal's Ctrl-C (SIGINT to its foreground process
                # group) reaches this process only, which stops the workers (see the module)
                start_new_session=True,
            )
        except OSError as exc:
            self._failed_start(slot, f"cannot start a worker process: {exc}")
            return
        with self._lock:
            writer = self.handover.start(slot.index)
        proc = _Process(writer, popen)
        start = Start(
            settings=self.s,
            slot=slot.index,
            transactional_id=self._transactional_id(slot.index),
            offsets_topic_partitions=self.offsets_topic_partitions,
            parent_pid=os.getpid(),
            log_level=logging.getLogger().getEffectiveLevel(),
        )
        if not proc.send_first(start):
            popen.kill()
            popen.wait()
            proc.close_pipes()
            with self._lock:
                self.handover.ended(writer, clean=True)  # (it never initialised its producer)
            self._failed_start(slot, "the worker process ended at once")
            return
        with self._lock:
            slot.process = proc
        slot.down_since = None
        slot.fenced = False
        proc.run_threads(f"mirrorlib {self.s.name} worker {slot.index}", self.events)
        _, topics = self.catalog.snapshot()
        proc.send(Topics(topics))
        self._assign(proc, frozenset())  # answered once its producer is initialised
        log.info(
            "flow %s: worker %d started (pid %d, transactional id %s)",
            self.s.name,
            slot.index,
            proc.pid,
            start.transactional_id,
        )
        self._replan = True

    def _failed_start(self, slot: _Slot, why: str) -> None:
        delay = slot.backoff.next_delay()
        slot.next_start = time.monotonic() + delay
        slot.last_error = why
        log.error("flow %s: worker %d: %s; retrying in %.0fs", self.s.name, slot.index, why, delay)

    def _died(self, slot: _Slot, proc: _Process) -> None:
        """The process's stdout ended: it exited (or is about to); reap it."""
        try:
            code = proc.popen.wait(5.0)
        except subprocess.TimeoutExpired:
            proc.popen.kill()
            code = proc.popen.wait()
        proc.close_pipes()
        with self._lock:
            if slot.process is proc:
                slot.process = None
                self.stats.set_stall(f"worker {slot.index}", None)  # (blocked no more)
        for key in proc.may_hold():
            proc.merger.forget(key)
        if slot.process is not None:
            return  # already replaced
        self._ended(proc, code)
        now = time.monotonic()
        slot.down_since = now
        if now - proc.started >= HEALTHY_S:
            slot.backoff.reset()
        if code == EXIT_PARENT_SILENT:  # this process was stopped or hung: the worker left
            slot.last_error = (
                f"exited: this process sent it nothing for {self._silence.longest(now):.0f}s "
                f"(stopped or starved; a worker leaves after {parent_silence_limit(self.s):.0f}s)"
            )
        if code in (EXIT_PARENT_SILENT, EXIT_FENCED):  # (see _doubt_share)
            self._doubt_share(
                f"worker {slot.index} {'left' if code == EXIT_PARENT_SILENT else 'was fenced'}"
            )
        elif slot.last_error is None and code != 0:
            slot.last_error = f"exited with status {code}"
        if code == EXIT_FAILED:  # the flow fails: no restart
            slot.next_start = float("inf")
            self._replan = True
            return
        slot.restarts += 1
        delay = slot.backoff.next_delay()
        slot.next_start = now + delay
        log.warning(
            "flow %s: worker %d (pid %d) ended (%s); restarting it in %.0fs",
            self.s.name,
            slot.index,
            proc.pid,
            slot.last_error or f"exit status {code}",
            delay,
        )
        self._replan = True

    def _ended(self, proc: _Process, code: int) -> None:
        """``proc``, the slot's process, exited with ``code``: whether its transactional id may
        hold an open transaction now (:meth:`~mirrorlib.core.handover.HandoverLedger.dirty`):
        one that said it ended cleanly, with status 0, left nothing open."""
        with self._lock:
            self.handover.ended(proc.writer, clean=proc.exit_clean and code == 0)

    def _doubt_share(self, why: str) -> None:
        """This process may no longer hold its share of the group: it did not run for longer
        than its workers wait for it (stopped, hung), a worker left because of that, or another
        node fenced a worker (it took the worker's partitions). Its group membership may have
        ended meanwhile without its consumer knowing yet, and a new worker process would
        initialise the slot's transactional id again, undoing that node's fence: until the
        group coordinator confirms the share (:meth:`~mirrorlib.kafka.membership.GroupShare.recheck`),
        no worker gets a partition it does not hold."""
        if self.recheck is None:
            return
        if self._unconfirmed is None:
            log.warning(
                "flow %s: %s: no worker gets new partitions until the group coordinator of %s "
                "confirms this process's share (its group session may have ended)",
                self.s.name, why, self.s.source,
            )  # fmt: skip
        self._unconfirmed = self.recheck()
        self._replan = True

    def _watch(self, now: float) -> None:
        """Replace processes that stopped reporting; reap the replaced ones."""
        for slot in self.slots:
            proc = slot.process
            if proc is None:
                continue
            seen = proc.last_seen
            silent = self._clock.silent(seen if seen is not None else proc.started, now)
            limit = self.unresponsive_after if seen is not None else STARTUP_S
            if silent > limit:
                self._replace(slot, proc, silent)
        for proc in list(self._stale):
            if proc.popen.poll() is not None:
                proc.close_pipes()
                with self._lock:
                    self._stale.remove(proc)
                    self.handover.reaped(proc.writer)

    def _keep_alive(self, stop: threading.Event) -> None:
        """Tell every process, twice a second, that this process runs (a worker that hears
        nothing for a while exits: :func:`~mirrorlib.core.workerproto.parent_silence_limit`).
        A thread of its own: a round of the loop that fails and backs off does not make the
        workers leave."""
        while not stop.wait(REPORT_INTERVAL_S):
            self._silence.tick(time.monotonic())
            for slot in self.slots:
                if (proc := slot.process) is not None:
                    proc.send(Keepalive())

    def _replace(self, slot: _Slot, proc: _Process, silent: float) -> None:
        """``proc`` stopped reporting: a new process of the slot takes over with the same
        transactional id (fencing ``proc``), and ``proc`` is killed."""
        with self._lock:  # holding() sees it as a replaced process until it is reaped
            self.handover.replace(proc.writer)
            slot.process = None
            self._stale.append(proc)
        self.stats.set_stall(f"worker {slot.index}", None)  # its replacement reports anew
        slot.restarts += 1
        slot.last_error = f"pid {proc.pid} unresponsive for {silent:.0f}s: replaced"
        log.error(
            "flow %s: worker %d (pid %d) sent nothing for %.0fs: starting a new process for the "
            "slot (same transactional id: the old one is fenced) and killing it",
            self.s.name,
            slot.index,
            proc.pid,
            silent,
        )
        placed = proc.sent
        self._start(slot)
        slot.replaced = True
        new = slot.process
        if new is not None:  # the new process gets the partitions once its init fenced `proc`
            self._assign(new, placed)
        else:  # no new process: the slot keeps its partitions for DOWN_GRACE_S, as if it died
            slot.down_since = time.monotonic()
        with contextlib.suppress(OSError):
            os.kill(proc.pid, signal.SIGKILL)

    # -- placement ------------------------------------------------------------------------------

    def _loads(self) -> dict[Key, float]:
        counters = self.stats.partitions()
        now = time.monotonic()
        loads = {}
        for key in self._owned:
            st = counters.get(key)
            if st is None or st.position is None or st.end_offset is None:
                loads[key] = load_of(None, None)
                continue
            size = st.byte_count / st.record_count if st.record_count else 1.0
            pending = max(st.end_offset - st.position, 0) * size
            loads[key] = load_of(pending, st.rates(now)[1])
        return loads

    def _fence_down_slots(self, now: float) -> None:
        """Fence the transactional id of each slot down for :data:`DOWN_GRACE_S`, in a thread of
        its own, while its partitions move (its process is dead: it writes nothing more). The
        transaction the dead process left open is aborted then; otherwise it holds the last
        stable offset of the partitions it wrote until the broker aborts it
        (``transaction.timeout.ms``, 60 s, and a check every 10 s by default): ``read_committed``
        readers of the target see nothing the next worker copies to them meanwhile, and that
        worker's read of their positions waits if the transaction had written some. If the
        target does not answer within :data:`FENCE_TIMEOUT_S`, nothing more is done (as without
        fencing); the supervisor's loop goes on meanwhile."""
        for slot in self.slots:
            if not slot.gone(now) or slot.fenced or not slot.placed:
                continue
            slot.fenced = True  # once per time down: the coordinator may not answer
            slot.fence = threading.Thread(
                target=self._fence,
                args=(slot.index,),
                name=f"mirrorlib {self.s.name} fence {slot.index}",
                daemon=True,
            )
            slot.fence.start()

    def _transactional_id(self, slot: int) -> str:
        tid = self.s.slot_transactional_id(slot)
        assert tid is not None  # (a worker always writes in transactions)
        return tid

    def _fence_on_target(self, transactional_id: str) -> None:
        fence_transactional_id(
            self.s.target_producer, transactional_id, cluster=self.s.target,
            timeout=min(self.s.admin_timeout, FENCE_TIMEOUT_S),
        )  # fmt: skip

    def _fence(self, index: int) -> None:
        tid = self._transactional_id(index)
        try:
            self.fence_id(tid)
        except MirrorError as exc:
            log.warning(
                "flow %s: worker %d is down; could not fence its transactional id (%s): "
                "read_committed readers of its partitions' remote partitions wait for its open "
                "transaction to time out",
                self.s.name,
                index,
                exc,
            )
        else:
            with self._lock:  # (no process of the slot starts while the fence runs)
                self.handover.fenced(index)
            log.info(
                "flow %s: worker %d is down for over %.0fs: its partitions moved, and its "
                "transactional id %s is fenced (its open transaction aborted)",
                self.s.name,
                index,
                DOWN_GRACE_S,
                tid,
            )

    def _plan(self, now: float) -> None:
        self._replan = False
        self._fence_down_slots(now)
        # a slot failed for the flow (data loss) keeps its partitions: no other worker copies
        # them (they would fail the same way), as one copier stops for the flow's partitions
        failed = [s for s in self.slots if s.failed]
        pinned = frozenset().union(*(s.placed for s in failed)) & self._owned
        eligible = [
            s.index
            for s in self.slots
            if s.process is not None or (s.in_grace(now) and not s.failed)
        ]
        current = {k: s.index for s in self.slots if s.index in eligible for k in s.placed}
        rebalance = now - self._last_rebalance >= REBALANCE_S
        loads = {k: v for k, v in self._loads().items() if k not in pinned}
        placement = place(loads, current, eligible, imbalance=2.0 if rebalance else float("inf"))
        if placement.moved:
            self._last_rebalance = now
            log.info(
                "flow %s: moving %d partition(s) between workers for balance: %s",
                self.s.name,
                len(placement.moved),
                ", ".join(f"{t}-{p} {a}->{b}" for (t, p), a, b in placement.moved),
            )
        elif rebalance:
            self._last_rebalance = now
        for slot in self.slots:
            slot.placed = slot.placed & pinned if slot in failed else placement.of(slot.index)
        for slot in self.slots:
            proc = slot.process
            if proc is None or proc.stale:
                continue
            with self._lock:  # (see _doubt_share for the confirmation)
                wanted = self.handover.grantable(
                    slot.index, slot.placed, confirmed=self._unconfirmed is None
                )
            if wanted != proc.sent:
                self._assign(proc, wanted)
        self._drop_unowned()

    def _assign(self, proc: _Process, partitions: frozenset[Key]) -> None:
        with self._lock:
            assignment = self.handover.assign(proc.writer, partitions, self._lost)
        proc.send(Assign(assignment.version, assignment.partitions, assignment.lost))

    def _drop_unowned(self) -> None:
        """Counters of partitions this process no longer copies leave the status."""
        for key in self.stats.partitions():
            if key not in self._owned:
                self.stats.drop_partition(*key)

    def _forward_topics(self) -> None:
        version, topics = self.catalog.snapshot()
        if version == self._catalog_version:
            return
        self._catalog_version = version
        for slot in self.slots:
            if slot.process is not None:
                slot.process.send(Topics(topics))

    # -- status ---------------------------------------------------------------------------------

    def _publish_rows(self, now: float) -> None:
        rows = []
        for slot in self.slots:
            proc = slot.process
            rate = 0.0
            if proc is not None:
                t0, r0, rate = proc.rate
                if now - t0 >= 5.0:
                    rate = max(proc.records - r0, 0) / (now - t0)
                    proc.rate = (now, proc.records, rate)
            rows.append(
                WorkerStatus(
                    slot=slot.index,
                    pid=None if proc is None else proc.pid,
                    partitions=0 if proc is None else len(proc.sent),
                    records_per_second=rate,
                    restarts=slot.restarts,
                    last_error=slot.last_error,
                )
            )
        self.stats.workers = tuple(rows)

    def _sync_written(self) -> None:
        self.stats.offset_syncs_emitted += 1

    @staticmethod
    def _sync_failed(proc: _Process, emitted: EmittedSync) -> None:
        """Tell the worker that took ``emitted`` that it was not written: its emitter queues
        the partition's newest sync again (a process replaced since ignores it, and so does a
        worker's newer emitter: another writer id)."""
        if not proc.stale:
            proc.send(SyncsFailed((emitted,)))

    # -- stop -------------------------------------------------------------------------------------

    def _shutdown(self) -> None:
        """Tell every worker to commit and stop; kill those that do not within the timeout;
        fence the transactional id of every slot whose process did not end cleanly (killed,
        crashed, its last commit failed), so that no transaction stays open on the target. A
        slot whose id cannot be fenced is reported ``abandoned`` (:meth:`slot_infos`): the
        node given its partitions next fences it (:mod:`mirrorlib.kafka.fencing`)."""
        with self._lock:
            self.handover.stopping = True
        procs = [s.process for s in self.slots if s.process is not None]
        self._stop_processes(procs)
        for slot in self.slots:  # a fence's producer is dropped before the process exits
            if slot.fence is not None:
                slot.fence.join(FENCE_TIMEOUT_S)  # a fence ends within its own timeout
        # syncs of what the workers committed last, and how they ended (their readers forwarded
        # every last frame)
        while True:
            try:
                proc, message = self.events.get_nowait()
            except queue.Empty:
                break
            if message is not None:
                self._handle(proc, message)
        for proc in procs:
            slot = self.slots[proc.slot]
            code = proc.popen.returncode
            self._ended(proc, code)
            if self.handover.dirty(slot.index) and not (proc.exit_clean and code == 0):
                how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
                slot.last_error = f"pid {proc.pid} did not end cleanly ({how})" + (
                    f": {slot.last_error}" if slot.last_error else ""
                )
        with self._lock:
            for slot in self.slots:
                slot.process = None
            for proc in self._stale:
                self.handover.reaped(proc.writer)
            self._stale.clear()
        self._fence_dirty_slots()
        self.clean = not any(self.handover.dirty(slot.index) for slot in self.slots)
        with self._lock:
            self._stopped_all = True
        if self._syncs is not None:
            self._syncs.flush(5.0)

    def _stop_processes(self, procs: list[_Process]) -> None:
        """Send every process Stop; kill those still running after :data:`STOP_TIMEOUT_S`, and
        the replaced ones; close their pipes once their reader threads forwarded every frame."""
        for proc in procs:
            proc.send(Stop())
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for proc in procs:
            try:
                proc.popen.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                log.warning(
                    "flow %s: worker %d (pid %d) did not stop in %.0fs: killed",
                    self.s.name,
                    proc.slot,
                    proc.pid,
                    STOP_TIMEOUT_S,
                )
                proc.popen.kill()
                proc.popen.wait()
        for proc in [*procs, *self._stale]:
            if proc.popen.poll() is None:
                proc.popen.kill()
                proc.popen.wait()
            proc.close_pipes()

    def _fence_dirty_slots(self) -> None:
        """Fence the id of every slot that may hold an open transaction, all at once."""
        dirty = [slot for slot in self.slots if self.handover.dirty(slot.index)]
        if not dirty:
            return
        outcome: dict[int, MirrorError | None] = {}

        def fence(slot: _Slot) -> None:
            try:
                self.fence_id(self._transactional_id(slot.index))
            except MirrorError as exc:
                outcome[slot.index] = exc
            else:
                outcome[slot.index] = None

        threads = [
            threading.Thread(target=fence, args=(slot,), daemon=True,
                             name=f"mirrorlib {self.s.name} fence {slot.index}")
            for slot in dirty
        ]  # fmt: skip
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + FENCE_TIMEOUT_S + 1.0
        for thread in threads:
            thread.join(max(deadline - time.monotonic(), 0.1))
        for slot in dirty:
            tid = self._transactional_id(slot.index)
            failed = outcome.get(slot.index, MirrorError(f"no answer in {FENCE_TIMEOUT_S:.0f}s"))
            if failed is None:
                with self._lock:
                    self.handover.fenced(slot.index)
                slot.last_error = _also(slot.last_error, f"its transactional id {tid} was fenced")
                log.info(
                    "flow %s: worker %d did not end cleanly: its transactional id %s is fenced "
                    "(its open transaction aborted)", self.s.name, slot.index, tid,
                )  # fmt: skip
            else:
                slot.last_error = _also(slot.last_error, f"fencing {tid} failed: {failed}")
                log.warning(
                    "flow %s: worker %d did not end cleanly, and its transactional id %s could "
                    "not be fenced (%s): reported abandoned, with its partitions %s; the node "
                    "that copies them next fences it (until then, or until the broker aborts its "
                    "open transaction after transaction.timeout.ms, read_committed readers of "
                    "their remote partitions wait)",
                    self.s.name, slot.index, tid, failed,
                    ", ".join(f"{t}-{p}" for t, p in sorted(self.handover.held(slot.index)))
                    or "none",
                )  # fmt: skip


class WorkerPlane:
    """The data plane of a flow with ``tasks.max`` > 1 (see the module): a :class:`Supervisor`
    thread (``supervisor``) with its worker processes, the group membership thread, and a
    thread publishing the workers for ``mirrorlib status``
    (:class:`~mirrorlib.runtime.workers.status.WorkerReporter`).

    ``unresponsive_after``: seconds without a report after which a worker is replaced."""

    def __init__(self, *, unresponsive_after: float = UNRESPONSIVE_S) -> None:
        self.unresponsive_after = unresponsive_after
        self.supervisor: Supervisor | None = None
        """The running supervisor (``None`` until the flow started)."""

    def prepare(self, flow: Any) -> None:
        """Nothing to do: the workers wait for the metadata thread's first topic refresh."""

    def start(self, flow: Any) -> None:
        share = GroupShare(flow.settings, flow.catalog)
        supervisor = self.supervisor = Supervisor(
            flow.settings,
            flow.stats,
            flow.catalog,
            share.owned,
            offsets_topic_partitions=flow.metadata.offsets_topic_partitions,
            unresponsive_after=self.unresponsive_after,
            recheck=lambda: functools.partial(share.confirmed, share.recheck()),
        )
        share.await_release = supervisor.await_release
        share.lose = supervisor.lose
        share.workers_stopped = supervisor.stopped
        share.workers_clean = lambda: supervisor.clean

        def fenced(reason: str) -> None:  # this node owns nothing now: the workers drop all
            flow.stats.set_error("membership", reason)
            flow.stats.state = FlowState.FAILED

        share.on_fenced = fenced
        flow.spawn("workers", supervisor.run)
        flow.spawn("membership", share.run)
        reporter = WorkerReporter(
            flow.settings, flow.stats, supervisor.slot_infos, done=supervisor.stopped,
            done_within=STOP_TIMEOUT_S + FENCE_TIMEOUT_S + PIPE_JOIN_S + 5.0,
        )  # fmt: skip
        flow.spawn("worker status", reporter.run)

    def stop(self) -> None:
        """Nothing to do: the supervisor watches the flow's stop event and stops its workers."""


# the worker's report interval is the supervisor's heartbeat: keep the timeout well above it
assert UNRESPONSIVE_S > 4 * REPORT_INTERVAL_S
