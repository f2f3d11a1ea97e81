"""Backoff and the periodic reconciliation default, as in clients/go/backoff.go."""

from __future__ import annotations

import math
import random

#: The periodic reconciliation default: clamp(shortest expected lease TTL / 2,
#: MIN_RECONCILE, MAX_RECONCILE), MAX_RECONCILE when the TTL is unknown, with
#: ±DEFAULT_RECONCILE_JITTER. Seconds. docs/client-operations.md gives the evidence.
MIN_RECONCILE = 5.0
MAX_RECONCILE = 60.0
DEFAULT_RECONCILE_JITTER = 0.2


class Backoff:
    """Doubles from ``lo`` to ``hi`` seconds; each delay is jittered into [d/2, d]."""

    def __init__(self, lo: float, hi: float) -> None:
        self.lo, self.hi, self.cur = lo, hi, lo

    def next(self) -> float:
        d = self.cur
        self.cur = min(self.cur * 2, self.hi)
        return d / 2 + random.uniform(0, d / 2)

    def reset(self) -> None:
        self.cur = self.lo


def reconcile_interval(shortest_ttl: float) -> float:
    """The recommended reconciliation interval in seconds for a fleet whose
    shortest lease TTL is ``shortest_ttl`` seconds (0: unknown)."""
    if shortest_ttl <= 0:
        return MAX_RECONCILE
    return min(max(shortest_ttl / 2, MIN_RECONCILE), MAX_RECONCILE)


def jittered(d: float, j: float) -> float:
    """Spreads ``d`` uniformly over d·[1-j, 1+j]."""
    if j == 0:
        return d
    return d * (1 + j * (2 * random.random() - 1))


def ms(seconds: float) -> int:
    """Seconds as the contract's whole milliseconds; a duration that is not a
    finite number is refused locally (the broker checks the range)."""
    if not math.isfinite(seconds):
        from ._errors import InvalidRequestError

        raise InvalidRequestError(detail=f"a duration must be a finite number of seconds, not {seconds!r}")
    return round(seconds * 1000)
