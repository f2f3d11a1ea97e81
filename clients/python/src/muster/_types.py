"""The plain, read-only values of the public API (the Go SDK's Item, Page,
LeaseStatus, Spec, Plan, Change, Marker, View...). Durations are seconds as
floats; times are timezone-aware datetimes."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from . import _models as m

T = TypeVar("T")


@dataclass(frozen=True)
class Item:
    """One held lease as observed through LIST, a watch marker or a change
    event. It carries no fencing token and no session id, and nothing in this
    package turns an Item into a Lease: only ``Session.acquire`` grants one."""

    route: str  # the concrete route, lease://realm/area/resource
    owner_id: str  # the holder session's logical owner
    holder_incarnation: str  # opaque id of the holder session (new after reconnect or restart)
    acquired_at: datetime
    expires_at: datetime
    remaining: float  # remaining TTL in seconds when the broker produced the item
    renewals: int

    @classmethod
    def from_wire(cls, i: m.LeaseItem) -> Item:
        return cls(
            route=i.route,
            owner_id=i.owner_id,
            holder_incarnation=i.holder_incarnation,
            acquired_at=i.acquired_at,
            expires_at=i.expires_at,
            remaining=i.remaining_ms / 1000,
            renewals=i.renewals,
        )


@dataclass(frozen=True)
class Page:
    """One page of held leases, read from the snapshot of the broker lifetime
    ``epoch`` at ``revision``. ``next_cursor`` is "" on the last page."""

    items: list[Item]
    next_cursor: str
    epoch: str
    revision: int


@dataclass(frozen=True)
class LeaseStatus:
    """The state of one route as answered by ``Client.get``."""

    route: str
    held: bool
    item: Item | None  # the holder, when held
    waiters: int


@dataclass(frozen=True)
class Spec:
    """One entry of a fleet's desired set: its minted name and the spec
    exactly as registered (parsed JSON)."""

    name: str
    spec: Any


@dataclass(frozen=True)
class Kept(Generic[T]):
    """A spec that passed a sweep, as returned by the caller's validator."""

    name: str
    spec: T


@dataclass
class SweepResult(Generic[T]):
    """What a sweep kept and the names it dropped."""

    kept: list[Kept[T]] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Plan:
    """The difference between a desired and a live set of names."""

    missing: list[str]  # desired and not live: work nobody holds
    orphans: list[str]  # live and not desired: leases of forgotten work
    revision: int = 0  # for gap: the inventory revision the live set was read at


class ChangeKind(enum.StrEnum):
    """How the held set changed for a route: ACQUIRED adds (or replaces) the
    holder; every other kind removes it."""

    ACQUIRED = "acquired"
    RELEASED = "released"
    EXPIRED = "expired"
    SESSION_CLOSED = "session_closed"
    ROLLED_BACK = "rolled_back"


@dataclass(frozen=True)
class Change:
    """One change of the held set, for one selector of a stream: a hint, not
    a command (it grants nothing). ``kind`` is the contract's string (compare
    with :class:`ChangeKind`; a kind newer than this SDK is kept as is)."""

    selector: str  # the selector (as given to watch) whose registration matched
    route: str
    kind: str
    revision: int
    item: Item | None  # the new holder when kind is acquired


@dataclass(frozen=True)
class MarkerPage:
    """The first snapshot page of one selector; when ``next_cursor`` is not
    "", ``list(selector, cursor=next_cursor)`` pages the rest of it."""

    selector: str
    items: list[Item]
    next_cursor: str


@dataclass(frozen=True)
class Marker:
    """The first event of a stream: the broker lifetime and revision at which
    the registrations were made, and per selector the first page of its
    snapshot at that revision. Every change after it has a higher revision."""

    epoch: str
    revision: int
    selectors: list[MarkerPage]


@dataclass(frozen=True)
class View:
    """A copy of an observer's view. ``ready`` is true once a bootstrap
    completed, until the next event that may have made the view stale (then
    ``items`` is the last known state)."""

    ready: bool
    epoch: str
    revision: int
    items: list[Item]  # sorted by route


@dataclass(frozen=True)
class ObserverStats:
    attempts: int = 0  # bootstraps started
    bootstraps: int = 0  # bootstraps that completed and installed a view
    recoveries: int = 0  # times the view became not ready
    reconciliations: int = 0  # periodic reconciliations started
