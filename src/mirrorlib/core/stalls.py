"""When to say that a flow is stalled, is still stalled, or moves again.

A stalled flow (records waiting and nothing moving, or a target producer that cannot write; see
:mod:`mirrorlib.core.status`) must be visible in the log *while* it lasts, not only at shutdown:
:class:`StallWatch` turns the flow's stall reason, sampled periodically, into the lines to log —
one when the stall begins, a reminder every ``repeat`` seconds while it lasts, one when the flow
moves again. Pure: the caller samples and logs (``mirrorlib.runtime.flow``).

A target producer cannot write while it has no producer id (idempotence) or its coordinator is
loading or gone; it says so only in librdkafka's error and log lines: :func:`stall_reason` tells
those lines from the others (the flow's counters, :mod:`mirrorlib.core.counters`, hold the flow
stalled on them until a partition makes progress).

A producer that cannot write *may never recover by itself*: librdkafka retries acquiring an
idempotent producer id forever (a retriable error is never given up on) and, its connections
being sparse, from the same broker each time: a broker that keeps failing that request keeps the
producer stuck however healthy the others are (confluentinc/librdkafka#3848, open). :class:`StuckProducer` says when its owner should recreate it (a
new client picks its broker afresh): after :data:`STUCK_PRODUCER_S` with records waiting for it,
a reported problem, and no acknowledgement since.

A watchdog that declares a peer dead after some seconds of silence may itself be paused (SIGSTOP
of its process tree, a suspended VM, a starved machine): the peer's messages wait in a pipe
meanwhile, and the time the watchdog did not run proves nothing about the peer.
:class:`WatchdogClock` counts silence from the watchdog's own last pause. The other side of it:
:class:`SilenceGauge` measures how long a process sending keepalives went without sending, so
it can say why a peer that heard nothing left.
"""

from __future__ import annotations

import attrs

__all__ = [
    "STUCK_PRODUCER_S",
    "SilenceGauge",
    "StallNotice",
    "StallWatch",
    "StuckProducer",
    "WatchdogClock",
    "stall_reason",
]

#: Seconds a producer may go on reporting that it cannot write (no producer id, coordinator
#: loading or gone: :func:`stall_reason`) with records waiting for it and none acknowledged,
#: before it is recreated. Longer than a coordinator's usual load on a freshly started cluster
#: (~30 s): a producer that would recover by itself is left alone.
STUCK_PRODUCER_S = 60.0


# librdkafka messages (lower case) meaning the producer cannot write at all for now
_STALL_MARKERS = (
    "failed to acquire",  # "Failed to acquire idempotence PID from broker ...: retrying"
    "coordinator load in progress",
    "coordinator_load_in_progress",
    "coordinator not available",
    "coordinator_not_available",
    "not coordinator",
    "not_coordinator",
    "idempotent producer",  # "Fatal idempotent producer error ..."
)


def stall_reason(message: str) -> str | None:
    """``message`` (a librdkafka error or log line) if it says the producer cannot write: it
    cannot get a producer id (idempotence) or its coordinator is loading or gone."""
    text = message.lower()
    return message if any(m in text for m in _STALL_MARKERS) else None


@attrs.frozen
class StallNotice:
    """A line to log: ``stalled`` is True for the start of a stall and its reminders (log them as
    warnings), False when the flow moves again."""

    stalled: bool
    message: str


class StallWatch:
    """Follows one flow's stall reason over time (``repeat``: seconds between reminders)."""

    def __init__(self, flow: str, repeat: float = 60.0) -> None:
        if repeat <= 0:
            raise ValueError("repeat must be positive")
        self.flow = flow
        self.repeat = repeat
        self._since: float | None = None  # when the current stall began
        self._told: float = 0.0  # when it was last reported

    @property
    def stalled_since(self) -> float | None:
        """When the current stall began (the caller's clock), ``None`` when not stalled."""
        return self._since

    def observe(self, reason: str | None, now: float) -> StallNotice | None:
        """The flow's stall reason at ``now`` (``None``: not stalled); the line to log, if any."""
        if reason is None:
            if self._since is None:
                return None
            lasted = now - self._since
            self._since = None
            return StallNotice(False, f"flow {self.flow}: moving again after {lasted:.0f}s stalled")
        if self._since is None:
            self._since = self._told = now
            return StallNotice(True, f"flow {self.flow} stalled: {reason}")
        if now - self._told >= self.repeat:
            self._told = now
            return StallNotice(
                True, f"flow {self.flow} still stalled after {now - self._since:.0f}s: {reason}"
            )
        return None


class StuckProducer:
    """Whether a producer is stuck: it reported a problem that keeps it from writing (see
    :func:`stall_reason`) and, for ``after`` seconds since, records were waiting for it and none
    was acknowledged. The caller's clock; one thread."""

    def __init__(self, after: float = STUCK_PRODUCER_S) -> None:
        if after <= 0:
            raise ValueError("after must be positive")
        self.after = after
        self._since: float | None = None  # first problem not followed by progress

    def problem(self, now: float) -> None:
        """The producer reported at ``now`` that it cannot write."""
        if self._since is None:
            self._since = now

    def moved(self) -> None:
        """A record was acknowledged (or the producer is new): it writes."""
        self._since = None

    def stuck(self, now: float, *, waiting: bool) -> bool:
        """Whether the producer should be recreated at ``now``; ``waiting``: records are in
        flight. With nothing waiting the producer is not stuck and its problems are forgotten
        (an idle producer acknowledges nothing, which proves nothing)."""
        if not waiting:
            self._since = None
            return False
        return self._since is not None and now - self._since >= self.after


class WatchdogClock:
    """Silence as a watchdog may hold it against a peer: time during which the watchdog itself
    did not run does not count. The watchdog calls :meth:`tick` on each of its rounds; a round
    that comes more than ``pause`` seconds after the previous one means the watchdog was not
    running (its messages may be waiting unread), so every peer's silence counts anew from it.
    The caller's clock; one thread."""

    def __init__(self, pause: float) -> None:
        if pause <= 0:
            raise ValueError("pause must be positive")
        self.pause = pause
        self._last: float | None = None  # the previous round
        self._awake_since: float | None = None  # the end of the watchdog's last pause

    def tick(self, now: float) -> None:
        """A round of the watchdog at ``now``."""
        if self._last is not None and now - self._last > self.pause:
            self._awake_since = now
        self._last = now

    def silent(self, since: float, now: float) -> float:
        """Seconds a peer last heard from (or started) at ``since`` has been silent at ``now``,
        counted from the watchdog's last pause when that ended later."""
        if self._awake_since is not None and self._awake_since > since:
            since = self._awake_since
        return max(now - since, 0.0)


class SilenceGauge:
    """How long a sender of keepalives went without sending: the sender calls :meth:`tick`
    each time it sends; :meth:`longest` is its longest silence of the last ``window`` seconds,
    the one going on included (a process that was stopped learns, once it runs again, how long
    its peers heard nothing from it). It keeps one past gap, the longest that ended within the
    window (an older one gives way to the next gap). The caller's clock; one thread ticks, any
    may read."""

    def __init__(self, window: float = 60.0) -> None:
        if window <= 0:
            raise ValueError("window must be positive")
        self.window = window
        self._last: float | None = None  # the last send
        self._gap = 0.0  # the longest gap between two sends ...
        self._gap_end: float | None = None  # ... and when it ended

    def tick(self, now: float) -> None:
        """A send at ``now``."""
        if self._last is not None:
            gap = now - self._last
            stale = self._gap_end is None or now - self._gap_end > self.window
            if gap >= self._gap or stale:
                self._gap, self._gap_end = gap, now
        self._last = now

    def longest(self, now: float) -> float:
        """The longest silence (seconds) within ``window`` before ``now``, the current one
        (since the last send) included; 0 before the first send."""
        last, gap, gap_end = self._last, self._gap, self._gap_end
        current = now - last if last is not None else 0.0
        recent = gap if gap_end is not None and now - gap_end <= self.window else 0.0
        return max(current, recent, 0.0)
