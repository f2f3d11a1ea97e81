"""Fleet helpers: the durable desired set of a fleet root, as in clients/go/fleet.go."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

from . import _models as m
from ._types import Kept, Plan, Spec, SweepResult

if TYPE_CHECKING:
    from ._conn import Conn

T = TypeVar("T")


class Fleet:
    """The desired set of one fleet root: the durable specs of the work that
    should run. Nothing a worker does to its leases (or its death) edits the
    desired set; ``forget`` is the one way out."""

    def __init__(self, c: Conn, root: str) -> None:
        self._c = c
        self.root = root

    def _path(self, *rest: str) -> str:
        return "/v1/fleets/" + quote(self.root, safe="") + "".join("/" + r for r in rest)

    async def register(self, kind: str, spec: Any) -> Spec:
        """Stores ``spec`` (any JSON-encodable value) under a new name
        ``<kind>-<n>`` and returns it. Names are never reused."""
        row = await self._c._decode_call(
            m.SpecRow, "POST", self._path("specs"), 201, body=m.RegisterRequest(kind=kind, spec=spec)
        )
        return Spec(name=row.name, spec=row.spec)

    async def get(self, name: str) -> Spec:
        """Reads one spec; SpecNotFoundError when the name is not in the set."""
        row = await self._c._decode_call(m.SpecRow, "GET", self._path("specs", quote(name, safe="")), 200)
        return Spec(name=row.name, spec=row.spec)

    async def forget(self, name: str) -> None:
        """Removes one spec from the desired set; forgetting an absent name
        succeeds. An illegal name (such as "Repo-1") is refused with
        InvalidNameError and nothing is removed."""
        await self._c._call("DELETE", self._path("specs", quote(name, safe="")), 204)

    async def desired(self) -> AsyncIterator[Spec]:
        """Iterates over the desired set in name order, one request per page
        (of up to 1,000), lazily. An error is raised from the iteration."""
        params: dict[str, str | int] = {"limit": 1000}
        while True:
            page = await self._c._decode_call(m.SpecPage, "GET", self._path("specs"), 200, params=params)
            for row in page.items:
                yield Spec(name=row.name, spec=row.spec)
            if not page.next_cursor:
                return
            params["cursor"] = page.next_cursor

    async def sweep(self, validate: Callable[[Any], T]) -> SweepResult[T]:
        """Validates every spec of the desired set with the caller's own
        ``validate`` (any callable taking the parsed spec: a pydantic model's
        ``model_validate``, a dataclass constructor, a function) and forgets
        each one it rejects by raising: validate-or-drop. Returns what
        ``validate`` returned for the kept specs and the names it dropped. A
        spec registered while the sweep runs is either validated or left
        alone, never dropped without validation. On an error of the broker the
        sweep stops and raises; what it dropped until then stays dropped."""
        out: SweepResult[T] = SweepResult()
        async for s in self.desired():
            try:
                v = validate(s.spec)
            except Exception:  # the validator rejected it
                await self.forget(s.name)
                out.dropped.append(s.name)
                continue
            out.kept.append(Kept(name=s.name, spec=v))
        return out

    async def plan(self, desired: Sequence[str], live: Sequence[str]) -> Plan:
        """Asks the broker for the pure difference of desired and live (both
        sorted in the answer). It changes nothing."""
        p = await self._c._decode_call(
            m.Plan, "POST", "/v1/fleets/plan", 200, body=m.PlanRequest(desired=list(desired), live=list(live))
        )
        return Plan(missing=p.missing, orphans=p.orphans)

    async def gap(self, live_selector: str) -> Plan:
        """Plans this fleet's desired set against the live lease inventory:
        the resource segment of every held lease matching ``live_selector``,
        read from one snapshot at ``revision``. The broker answers a large gap
        in pages (10,000 names of each side at most); ``gap`` reads them all.
        CursorExpiredError midway means the snapshot was evicted: call ``gap``
        again."""
        missing: list[str] = []
        orphans: list[str] = []
        params: dict[str, str] = {"live": live_selector}
        while True:
            g = await self._c._decode_call(m.Gap, "GET", self._path("gap"), 200, params=params)
            missing.extend(g.missing)
            orphans.extend(g.orphans)
            if not g.next_cursor:
                return Plan(missing=missing, orphans=orphans, revision=g.revision)
            params["cursor"] = g.next_cursor
