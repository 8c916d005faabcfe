"""A copier worker process of one flow (``tasks.max`` > 1): ``python -m mirrorlib.runtime.workers.child``.

Started by its parent's supervisor (:mod:`mirrorlib.runtime.workers.supervisor`), which talks to it over
stdin and stdout in the frames of :mod:`mirrorlib.core.workerproto` (the worker's own output
goes to stderr, the parent's log). It runs one :class:`~mirrorlib.kafka.copier.loop.Copier` in
worker mode: the partitions its parent assigns, a transactional producer with its slot's id,
offset syncs handed to the parent. It ends:

* on :class:`~mirrorlib.core.workerproto.Stop` (committing first), exit status 0;
* on SIGTERM or SIGINT, as on ``Stop`` (systemd sends SIGTERM to every process of a service's
  control group at once; an operator may signal a worker): the open transaction is committed
  (or aborted), the producer closed, status 0, and the parent starts a new worker if it is not
  stopping itself. A worker runs in a session of its own (its parent starts it so), so a
  terminal's Ctrl-C, which signals the terminal's foreground process group, reaches only the
  parent, which stops its workers;
* when its parent is gone (stdin closed, or its parent process id changed): it commits within
  :data:`ORPHAN_DEADLINE_S` or exits without, so a kill -9 of the parent leaves no worker
  behind; status 0;
* when its parent sent nothing (not even a :class:`~mirrorlib.core.workerproto.Keepalive`)
  for :func:`~mirrorlib.core.workerproto.parent_silence_limit` (the parent is stopped or
  hung; its group membership is about to end and its partitions to move): at once, without
  committing, status :data:`~mirrorlib.core.workerproto.EXIT_PARENT_SILENT` (its open transaction is aborted by the fence
  of the node given the partitions, or by the broker);
* when its producer dies or is fenced (a newer process of its slot took over): at once, writing
  nothing more, status :data:`~mirrorlib.core.workerproto.EXIT_FENCED`;
* on data loss with ``data.loss.action=fail``: status :data:`~mirrorlib.core.workerproto.EXIT_FAILED` (the flow fails).

Its last message, :class:`~mirrorlib.core.workerproto.Exit`, says whether it ended *cleanly*
(stopped, its last transaction committed or aborted): the parent fences the transactional id
of a slot whose process did not (killed, crashed, its last commit failed), see
:mod:`mirrorlib.runtime.workers.supervisor`.

**Its end.** The worker reads its parent's frames from the stdin pipe's file descriptor,
unbuffered, in a daemon thread, and ends with ``os._exit`` once its frames and its log are
flushed: Python's own shutdown would finalise ``sys.stdin`` while that thread may be inside a
buffered read of it, holding the buffer's lock ("Fatal Python error: _enter_buffered_busy:
could not acquire lock for <stdin> at interpreter shutdown", an abort instead of the worker's
exit status), and would wait for nothing a worker still needs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Iterable
from typing import IO, NoReturn

import attrs

from mirrorlib.core.catalog import TopicCatalog
from mirrorlib.core.counters import PartitionStats, StatsRegistry
from mirrorlib.core.stalls import WatchdogClock
from mirrorlib.core.syncs import EmittedSync, FailedSyncs, OffsetSyncEmitter
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
    Start,
    Stop,
    Syncs,
    SyncsFailed,
    Topics,
    parent_silence_limit,
    report_of,
)
from mirrorlib.kafka.copier.loop import Copier, DirectAssignment
from mirrorlib.kafka.positions import PositionStore
from mirrorlib.runtime.process import tune_gc
from mirrorlib.runtime.signals import stop_on_signals
from mirrorlib.runtime.workers.frames import read_frame, write_frame

__all__ = ["ORPHAN_DEADLINE_S", "main"]

log = logging.getLogger(__name__)

#: seconds an orphaned worker (its parent died) has to commit before it exits regardless
ORPHAN_DEADLINE_S = 10.0
#: a round of the parent watch later than this after the previous one: the worker itself was
#: not running (stopped, the machine paused), and its parent's silence counts anew
_WATCH_PAUSE_S = 2.0


class _Channel:
    """The frames to the parent (from several threads); a closed pipe stops the worker."""

    def __init__(self, stream: IO[bytes], stop: threading.Event) -> None:
        self._stream = stream
        self._stop = stop
        self._lock = threading.Lock()

    def send(self, message: object) -> None:
        with self._lock:
            try:
                write_frame(self._stream, message)
            except (OSError, ValueError):
                self._stop.set()  # the parent is gone


class _ParentSyncs:
    """The copier's sync sink: due offset syncs go to the parent, which writes them; those it
    could not write come back (:meth:`failed`) and are reported to the emitter in the copier's
    thread a second later (:class:`~mirrorlib.core.syncs.FailedSyncs`), which queues the
    partition's newest sync again."""

    def __init__(self, emitter: OffsetSyncEmitter, channel: _Channel) -> None:
        self.emitter = emitter
        self.channel = channel
        self._failed = FailedSyncs()

    def failed(self, syncs: Iterable[EmittedSync]) -> None:
        """Syncs the parent could not write (from the thread reading the parent's frames)."""
        now = time.monotonic()
        for emitted in syncs:
            self._failed.add(emitted, now)

    def send(self) -> None:
        if self._failed:
            self._failed.report(self.emitter, time.monotonic())
        taken = self.emitter.take_pending()
        if taken:
            self.channel.send(Syncs(tuple(taken)))

    def poll(self) -> None:
        """Nothing to serve: the parent writes the syncs."""

    def flush(self, timeout: float) -> int:
        del timeout
        return 0


class _Worker:
    def __init__(self, start: Start, channel: _Channel, stop: threading.Event) -> None:
        s = attrs.evolve(start.settings, group_instance_id=None)  # no group: direct assignment
        self.start = start
        self.channel = channel
        self.stop = stop
        self.heard = time.monotonic()  # the parent's last frame
        self.catalog = TopicCatalog()
        self.stats = StatsRegistry(s.source, s.target, internal=s.policy.is_heartbeats_topic)
        self.assignment = DirectAssignment(lambda version: channel.send(Applied(version)))
        positions = PositionStore(
            s.target_consumer,
            s.offset_storage_topic,
            source_alias=s.source,
            target_alias=s.target,
            partitions=start.offsets_topic_partitions,
            read_committed=True,  # worker positions are always written in transactions
        )
        self.copier = Copier(
            s,
            self.catalog,
            self.stats,
            positions,
            assignment=self.assignment,
            transactional_id=start.transactional_id,
            sync_sink=self._sync_sink,
        )
        self.sink: _ParentSyncs | None = None  # the copier's newest

    def _sync_sink(self, emitter: OffsetSyncEmitter) -> _ParentSyncs:
        self.sink = _ParentSyncs(emitter, self.channel)
        return self.sink

    def read_parent(self, stream: IO[bytes]) -> None:
        """Apply the parent's messages; the end of stdin means the parent is gone."""
        while True:
            try:
                message = read_frame(stream)
            except Exception:
                log.exception("worker %d: unreadable message from the parent", self.start.slot)
                message = None
            self.heard = time.monotonic()
            if message is None or isinstance(message, Stop):
                if message is None:
                    self._orphaned("its parent closed the pipe")
                self.stop.set()
                return
            if isinstance(message, Topics):
                self.catalog.publish(message.topics)
            elif isinstance(message, Assign):
                self.assignment.set(message.version, message.partitions, message.lost)
            elif isinstance(message, SyncsFailed):
                if self.sink is not None:  # (an older emitter's syncs: ignored by the newest)
                    self.sink.failed(message.syncs)
            elif not isinstance(message, Keepalive):
                log.warning("worker %d: unexpected message %r", self.start.slot, message)

    def watch_parent(self) -> None:
        """Every :data:`REPORT_INTERVAL_S`: stop (committing within :data:`ORPHAN_DEADLINE_S`)
        when the parent process is gone; exit at once, committing nothing, when it has sent
        nothing for :func:`parent_silence_limit` (see the module)."""
        limit = parent_silence_limit(self.start.settings)
        clock = WatchdogClock(_WATCH_PAUSE_S)
        while not self.stop.wait(REPORT_INTERVAL_S):
            if os.getppid() != self.start.parent_pid:
                self._orphaned("its parent process is gone")
                self.stop.set()
                return
            now = time.monotonic()
            clock.tick(now)
            silent = clock.silent(self.heard, now)
            if silent > limit:
                log.error(
                    "worker %d (pid %d) of flow %s: its parent (pid %d) has sent nothing for "
                    "%.0fs (stopped or hung; its group membership ends after the session "
                    "timeout): exiting without committing, writing nothing more",
                    self.start.slot, os.getpid(), self.start.settings.name,
                    self.start.parent_pid, silent,
                )  # fmt: skip
                os._exit(EXIT_PARENT_SILENT)

    def _orphaned(self, why: str) -> None:
        log.warning(
            "worker %d (pid %d) of flow %s: %s; stopping",
            self.start.slot,
            os.getpid(),
            self.start.settings.name,
            why,
        )

        def deadline() -> None:
            time.sleep(ORPHAN_DEADLINE_S)
            os._exit(0)

        threading.Thread(target=deadline, daemon=True).start()

    def report(self) -> None:
        """Send a report every :data:`REPORT_INTERVAL_S` (the heartbeat)."""
        seen: dict[tuple[str, int], tuple[int, int]] = {}  # age/latency sample counts
        # partition -> (its counters, which holding): dropped and given back, a partition has
        # new counters (from 0) and the parent must count them anew
        holdings: dict[tuple[str, int], tuple[PartitionStats, int]] = {}
        held = 0
        while not self.stop.wait(REPORT_INTERVAL_S):
            parts = []
            current = self.stats.partitions()
            for key in holdings.keys() - current.keys():
                del holdings[key]
            for key, st in sorted(current.items()):
                known = holdings.get(key)
                if known is None or known[0] is not st:
                    held += 1
                    holdings[key] = known = (st, held)
                    seen.pop(key, None)
                ages, latencies = seen.get(key, (0, 0))
                parts.append(
                    report_of(
                        key[0],
                        key[1],
                        st,
                        ages=(st.age.last,) if st.age.count > ages and st.age.last else (),
                        latencies=(
                            (st.latency.last,)
                            if st.latency.count > latencies and st.latency.last
                            else ()
                        ),
                        holding=known[1],
                    )
                )
                seen[key] = (st.age.count, st.latency.count)
            incarnations = self.stats.incarnations()  # (mirrorlib.core.incarnations)
            # the blocked loop as a stall (the parent shows the flow stalled with it: this
            # process's partitions' end offsets are not refreshed meanwhile)
            self.channel.send(
                Report(
                    os.getpid(),
                    tuple(parts),
                    self.stats.errors(),
                    *incarnations,
                    stalled=self.stats.loop_stall(),
                )
            )

    def run(self, stream: IO[bytes]) -> int:
        threading.Thread(target=self.read_parent, args=(stream,), daemon=True).start()
        threading.Thread(target=self.report, daemon=True).start()
        threading.Thread(target=self.watch_parent, daemon=True).start()
        self.copier.run(self.stop)
        if self.copier.failed is not None:
            self.channel.send(Exit(self.copier.failed, failed=True))
            return EXIT_FAILED
        if self.copier.fenced is not None:
            self.channel.send(Exit(self.copier.fenced, fenced=True))
            return EXIT_FENCED
        if self.copier.final_flush_failed is not None:
            self.channel.send(Exit(f"its last commit failed: {self.copier.final_flush_failed}"))
            return 0
        self.channel.send(Exit("stopped", clean=True))
        return 0


def main() -> int:
    """Run one worker: read :class:`Start` from stdin, copy until told to stop (by the parent,
    SIGTERM or SIGINT)."""
    # frames own the real stdout; anything printed goes to stderr instead
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # the parent's frames: the pipe itself, unbuffered (see the module: no buffer lock held by
    # the reading thread at the end; and no read-ahead taking frames beyond the one asked for)
    stream = open(sys.stdin.fileno(), "rb", buffering=0, closefd=False)  # noqa: SIM115
    stop = threading.Event()
    with stop_on_signals(stop) as signals:  # from the start: a signal never kills a worker
        start = read_frame(stream)
        if not isinstance(start, Start):
            print("mirrorlib worker: expected a Start message on stdin", file=sys.stderr)
            return 2
        logging.basicConfig(
            level=start.log_level,
            stream=sys.stderr,
            format=(
                f"%(asctime)s %(levelname)s [{start.settings.name} worker {start.slot} "
                f"pid {os.getpid()}] %(name)s: %(message)s"
            ),
        )
        tune_gc()
        worker = _Worker(start, _Channel(out, stop), stop)
        code = worker.run(stream)
    if (received := signals.describe()) is not None:
        log.info("worker %d: %s; exit status %d", start.slot, received, code)
    return code


def _run_main() -> NoReturn:  # pragma: no cover - the process entry point
    """Run :func:`main` and end the process with its status, without Python's shutdown (see
    the module), once stderr and the log are flushed (the frames are flushed as written)."""
    try:
        code = main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 1
    logging.shutdown()
    for stream in (sys.stderr, sys.__stderr__):
        if stream is not None:
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    _run_main()
