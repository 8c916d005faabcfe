"""Back-off between retries: exponential, capped, jittered, resettable, and stop-aware.

The one retry rule of every component that tries again after a failure (the copier's restarts and
its parked partitions, the checkpoint task, the creation of the internal topics). A
:class:`Backoff` uses *decorrelated jitter* (Marc Brooker, "Exponential Backoff And Jitter",
AWS Architecture Blog, 2015)::

    delay = min(cap, uniform(base, 3 * previous delay))      # the first previous delay is base

so every delay lies in ``[base, cap]`` (a retry never comes sooner than ``base``), its upper bound
triples with each failure until ``cap``, and components that failed together (the partitions of a
topic the target refuses, the flows of a cluster that went away) spread their retries out instead
of retrying in lockstep. :meth:`Backoff.reset` starts over after a success.

Waiting is the caller's: :meth:`Backoff.wait` waits the current delay on a stop event and returns
as soon as the event is set; a loop that must not block (the copier parks a partition *until* a
time) adds :meth:`Backoff.next_delay` to its clock instead.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Protocol

import attrs

__all__ = ["Backoff", "StopEvent"]


class StopEvent(Protocol):
    """What :meth:`Backoff.wait` needs of a stop signal (:class:`threading.Event` has it)."""

    def wait(self, timeout: float | None = None) -> bool: ...


def _check_base(instance: Backoff, attribute: attrs.Attribute[float], value: float) -> None:
    if not value > 0:
        raise ValueError(f"back-off base must be positive, not {value!r}")


def _check_cap(instance: Backoff, attribute: attrs.Attribute[float], value: float) -> None:
    if not value >= instance.base:
        raise ValueError(f"back-off cap {value!r} is less than its base {instance.base!r}")


@attrs.define
class Backoff:
    """Delays between the attempts of one retried thing, in seconds (see the module docstring).

    ``uniform(a, b)`` draws the jitter (default :func:`random.uniform`; tests pass their own).
    """

    base: float = attrs.field(validator=_check_base)
    cap: float = attrs.field(validator=_check_cap)
    uniform: Callable[[float, float], float] = attrs.field(
        default=random.uniform, repr=False, eq=False
    )
    #: the delay :meth:`next_delay` returned last; ``0.0`` before a failure or after a reset
    delay: float = attrs.field(default=0.0, init=False)
    #: failures since the start or the last :meth:`reset`
    failures: int = attrs.field(default=0, init=False)

    def next_delay(self) -> float:
        """Count a failure and return how long to wait before the next attempt."""
        previous = self.delay or self.base
        self.delay = min(self.cap, max(self.base, self.uniform(self.base, 3.0 * previous)))
        self.failures += 1
        return self.delay

    def reset(self) -> None:
        """Start over (after a success): the next delay is drawn from ``[base, 3 * base]``."""
        self.delay = 0.0
        self.failures = 0

    def wait(self, stop: StopEvent) -> bool:
        """Wait the current :attr:`delay`, or less if ``stop`` is set meanwhile (at once if it
        already is). Returns whether ``stop`` is set."""
        return stop.wait(self.delay)
