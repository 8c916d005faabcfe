"""When to say that a flow is stalled, is still stalled, or moves again.

A stalled flow (records waiting and nothing moving, or a target producer that cannot write; see
:mod:`mirrorlib.core.status`) must be visible in the log *while* it lasts, not only at shutdown:
:class:`StallWatch` turns the flow's stall reason, sampled periodically, into the lines to log —
one when the stall begins, a reminder every ``repeat`` seconds while it lasts, one when the flow
moves again. Pure: the caller samples and logs (``mirrorlib.runtime.flow``).
"""

from __future__ import annotations

import attrs

__all__ = ["StallNotice", "StallWatch"]


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
