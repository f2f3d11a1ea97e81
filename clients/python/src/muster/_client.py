"""The asyncio client of one broker: request/response calls, LIST and GET."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote, urlsplit

import httpx

from . import _models as m
from ._errors import FamilyUnavailableError, InvalidRouteError, MusterError, error_for
from ._loss import answered_by, broker_gone
from ._types import Item, LeaseStatus, Page

if TYPE_CHECKING:
    from ._fleet import Fleet
    from ._observe import Observer
    from ._session import Session
    from ._watch import Subscription

T = TypeVar("T")

#: Bounds the bytes read from one non-streaming response.
MAX_BODY = 32 << 20

#: Bounds the brokers one request is sent to after the first (following
#: ``wrong_broker``).
MAX_FOLLOWS = 2


class Client:
    """An asyncio client of the broker at ``base_url`` (e.g.
    ``"http://127.0.0.1:7420"``). ``token`` is sent as the bearer token of
    every request (a broker in dev mode accepts requests without one).

    ``http_client`` replaces the default ``httpx.AsyncClient``, which has no
    timeout, like the Go SDK's default: a long-polling acquire waits up to
    30 s, and streams end by ``aclose`` or cancellation. The client owns only
    the ``httpx.AsyncClient`` it created; ``aclose`` closes that one.

    In a multi-broker deployment (docs/placement.md) a broker answers a
    request for a family it does not serve with ``421 wrong_broker`` naming
    the owner: the client sends the request there (at most ``MAX_FOLLOWS``
    hops), sends every later request straight to the owner, and goes back to
    ``base_url`` when the owner stops answering. A 421 means the broker did
    nothing, so resending is safe for every operation. ``without_follow=True``
    turns this off: the request then fails with ``WrongBrokerError``, whose
    ``owner`` names the broker.
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: str = "",
        http_client: httpx.AsyncClient | None = None,
        without_follow: bool = False,
    ) -> None:
        u = urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.netloc:
            raise ValueError(f"muster: base URL {base_url!r}: want http(s)://host[:port]")
        self._base = base_url.rstrip("/")
        self._token = token
        self._own = http_client is None
        self._http = http_client if http_client is not None else httpx.AsyncClient(timeout=None)
        self._epoch = ""
        self._follow = not without_follow
        self._owner: str | None = None  # the base URL requests go to; None: base_url
        self._sticky_owner = False  # conformance tests only: never forget the owner
        self._never_lost = False  # conformance tests only: a lease's loss is never reported
        self._send_plus_ttl = False  # conformance tests only: a grant's local deadline is send + TTL
        self._late_loss = False  # conformance tests only: sessions are lost at their keepalive only (_loss)
        self._sessions: set[Session] = set()  # live sessions, for prompt loss (_loss)

    @property
    def base_url(self) -> str:
        return self._base

    @property
    def epoch(self) -> str:
        """The broker lifetime (the Muster-Epoch header) of the last response,
        "" before the first one."""
        return self._epoch

    @property
    def http(self) -> httpx.AsyncClient:
        """The underlying ``httpx.AsyncClient``."""
        return self._http

    async def aclose(self) -> None:
        """Closes the ``httpx.AsyncClient`` this client created."""
        if self._own:
            await self._http.aclose()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        h = {"Accept": "application/json"}
        if self._token:
            h["Authorization"] = "Bearer " + self._token
        if extra:
            h.update(extra)
        return h

    def _saw_epoch(self, resp: httpx.Response) -> None:
        """Records the epoch of an answer or a stream; the sessions of the
        broker that answered are lost when it is another one (_loss)."""
        e = resp.headers.get("Muster-Epoch")
        if e:
            self._epoch = e
            broker_gone(self, answered_by(resp), e)

    def _problem(self, resp: httpx.Response, body: bytes) -> MusterError:
        """problem_error for an answer of this client's broker: a
        family_unavailable loses the sessions of the broker that answered
        (_loss)."""
        err = problem_error(resp, body)
        if isinstance(err, FamilyUnavailableError):
            broker_gone(self, answered_by(resp), "")
        return err

    async def _send(
        self, method: str, path: str, *, content: bytes | None = None, params: Any = None, headers: dict[str, str]
    ) -> httpx.Response:
        """Sends one request (streaming: the caller reads and closes the
        answer), following ``wrong_broker`` unless ``without_follow``."""
        hop = 0
        while True:
            owner = self._owner
            req = self._http.build_request(
                method, (owner or self._base) + path, content=content, params=params, headers=headers
            )
            try:
                resp = await self._http.send(req, stream=True)
            except httpx.TransportError:
                # The owner we were sent to is gone (a failover): the next
                # request asks the configured broker again.
                if owner is not None and self._owner == owner and not self._sticky_owner:
                    self._owner = None
                raise
            self._saw_epoch(resp)
            if not self._follow or resp.status_code != HTTPStatus.MISDIRECTED_REQUEST or hop >= MAX_FOLLOWS:
                return resp
            try:
                body = await _read(resp)
            finally:
                await resp.aclose()
            to = misdirected_to(resp.headers.get("Content-Type", ""), body)
            if to is None:
                return httpx.Response(resp.status_code, headers=resp.headers, content=body, request=req)
            self._owner = to + urlsplit(self._base).path
            hop += 1

    async def _call(
        self,
        method: str,
        path: str,
        want: int,
        *,
        body: object = None,
        params: Any = None,
    ) -> Any:
        """Runs one request/response operation: a status other than ``want``
        raises a MusterError; the JSON body of the answer is returned."""
        return (await self._call_at(method, path, want, body=body, params=params))[0]

    async def _call_at(
        self,
        method: str,
        path: str,
        want: int,
        *,
        body: object = None,
        params: Any = None,
    ) -> tuple[Any, str]:
        """_call, also returning the host (host:port) that answered."""
        content = None
        headers = self._headers()
        if body is not None:
            content = json.dumps(m.encode(body) if not isinstance(body, dict) else body).encode()
            headers["Content-Type"] = "application/json"
        resp = await self._send(method, path, content=content, params=params, headers=headers)
        try:
            raw = await _read(resp)
        finally:
            await resp.aclose()
        if resp.status_code != want:
            raise self._problem(resp, raw)
        if not raw:
            return None, answered_by(resp)
        try:
            return json.loads(raw), answered_by(resp)
        except ValueError as e:
            raise m.DecodeError(f"muster: decoding a {resp.status_code} answer: {e}") from None

    async def _decode_call(self, cls: type[T], method: str, path: str, want: int, **kw: Any) -> T:
        return m.decode(cls, await self._call(method, path, want, **kw))

    # ---- LIST and GET ---------------------------------------------------

    async def list_page(self, selector: str, *, limit: int = 0, cursor: str = "") -> Page:
        """Reads one page of the held leases matching ``selector``. ``limit``
        is the page size, 1..500 (0: the broker's default, 100); ``cursor``
        continues a snapshot (a Page's or a marker's ``next_cursor``)."""
        params: dict[str, str | int] = {"selector": selector}
        if limit:
            params["limit"] = limit
        if cursor:
            params["cursor"] = cursor
        p = await self._decode_call(m.LeasePage, "GET", "/v1/leases", 200, params=params)
        return Page(
            items=[Item.from_wire(i) for i in p.items],
            next_cursor=p.next_cursor or "",
            epoch=p.snapshot.epoch,
            revision=p.snapshot.revision,
        )

    async def list(self, selector: str, *, limit: int = 0, cursor: str = "") -> AsyncIterator[Item]:
        """Iterates over the held leases matching ``selector``, one request
        per page, lazily: stopping early sends no further request. Every item
        comes from one snapshot. An error is raised from the iteration;
        CursorExpiredError and EpochChangedError mean "list again from the
        start"."""
        while True:
            p = await self.list_page(selector, limit=limit, cursor=cursor)
            for it in p.items:
                yield it
            if not p.next_cursor:
                return
            cursor = p.next_cursor

    async def get(self, route: str) -> LeaseStatus:
        """Reads the current state of one exact route."""
        r = parse_route(route)
        s = await self._decode_call(m.LeaseStatus, "GET", "/v1/leases/" + r.path, 200)
        item = None
        if s.held:
            item = Item(
                route=s.route,
                owner_id=s.owner_id or "",
                holder_incarnation=s.holder_incarnation or "",
                acquired_at=s.acquired_at or _ZERO_TIME,
                expires_at=s.expires_at or _ZERO_TIME,
                remaining=(s.remaining_ms or 0) / 1000,
                renewals=s.renewals or 0,
            )
        return LeaseStatus(route=s.route, held=s.held, item=item, waiters=s.waiters)

    # ---- the other surfaces (defined in their own modules) ---------------

    async def new_session(self, owner_id: str, ttl: float) -> Session:
        """Creates a session for ``owner_id`` with ``ttl`` seconds (1 s ..
        10 min) and starts its background keepalive. Use it as ``async with``
        to close it at the end."""
        from ._session import Session

        return await Session._create(self, owner_id, ttl)

    def session(self, owner_id: str, ttl: float) -> AbstractAsyncContextManager[Session]:
        """``async with client.session(owner_id, ttl) as s:`` creates a session
        (see :meth:`new_session`) and closes it at the end of the block."""
        return _SessionBlock(self, owner_id, ttl)

    async def watch(self, *selectors: str) -> Subscription:
        """Opens a watch stream over ``selectors`` (at most 32), as its own
        read-only session, and returns once the marker has arrived."""
        from ._watch import open_watch

        return await open_watch(self, None, list(selectors))

    def fleet(self, root: str) -> Fleet:
        """The fleet at ``root``: legal segments (lowercase letters, digits,
        '-' and '_') joined by '/'."""
        from ._fleet import Fleet

        return Fleet(self, root)

    def observe(
        self,
        selector: str,
        *,
        shortest_ttl: float = 0.0,
        reconcile_interval: float | None = None,
        reconcile_jitter: float = 0.2,
        page_size: int = 500,
    ) -> Observer:
        """Starts an observer of ``selector`` (see :class:`muster.Observer`)
        in the running event loop and returns at once."""
        from ._observe import Observer

        return Observer._start(
            self,
            selector,
            shortest_ttl=shortest_ttl,
            reconcile_interval=reconcile_interval,
            reconcile_jitter=reconcile_jitter,
            page_size=page_size,
        )


class _SessionBlock:
    def __init__(self, c: Client, owner_id: str, ttl: float) -> None:
        self._c, self._owner_id, self._ttl = c, owner_id, ttl
        self._s: Session | None = None

    async def __aenter__(self) -> Session:
        self._s = await self._c.new_session(self._owner_id, self._ttl)
        return self._s

    async def __aexit__(self, *exc: object) -> None:
        if self._s is not None:
            await self._s.close()


_ZERO_TIME = datetime.min.replace(tzinfo=UTC)


class Route:
    """A parsed exact route."""

    __slots__ = ("area", "realm", "resource")

    def __init__(self, realm: str, area: str, resource: str) -> None:
        self.realm, self.area, self.resource = realm, area, resource

    def __str__(self) -> str:
        return f"lease://{self.realm}/{self.area}/{self.resource}"

    @property
    def path(self) -> str:
        return "/".join(quote(s, safe="") for s in (self.realm, self.area, self.resource))


def parse_route(s: str) -> Route:
    """Splits lease://realm/area/resource. It checks only the shape needed to
    build a path; the broker checks the rest (a wildcard is its invalid_route)."""
    rest = s.removeprefix("lease://")
    parts = rest.split("/")
    if rest == s or len(parts) != 3 or not all(parts):
        raise InvalidRouteError(detail="a route is lease://{realm}/{area}/{resource}")
    return Route(parts[0], parts[1], parts[2])


async def _read(resp: httpx.Response) -> bytes:
    """The body of a streaming answer, at most MAX_BODY bytes."""
    data = bytearray()
    async for chunk in resp.aiter_bytes():
        data += chunk
        if len(data) > MAX_BODY:
            break
    return bytes(data[:MAX_BODY])


def misdirected_to(content_type: str, body: bytes) -> str | None:
    """The owner a 421 answer names (scheme://host[:port]), when it is a
    ``wrong_broker`` problem with an http(s) URL; None otherwise."""
    if content_type.split(";")[0].strip().lower() != "application/problem+json":
        return None
    try:
        p = json.loads(body)
    except ValueError:
        return None
    if not isinstance(p, dict) or p.get("code") != "wrong_broker" or not isinstance(p.get("owner"), str):
        return None
    try:
        u = urlsplit(p["owner"])
    except ValueError:
        return None
    if u.scheme not in ("http", "https") or not u.netloc:
        return None
    return f"{u.scheme}://{u.netloc}"


def problem_error(resp: httpx.Response, body: bytes) -> MusterError:
    """A non-success answer as a MusterError: the problem body's code when
    there is one; otherwise a code derived from the status, so a gateway's
    502 is still advised as retryable."""
    status = resp.status_code
    try:
        title = HTTPStatus(status).phrase
    except ValueError:
        title = ""
    mt = resp.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if mt in ("application/problem+json", "application/json"):
        try:
            p = json.loads(body)
        except ValueError:
            p = None
        if isinstance(p, dict) and isinstance(p.get("code"), str) and p["code"]:
            t = p.get("title")
            d = p.get("detail")
            sc = p.get("scope")
            ow = p.get("owner")
            return error_for(
                p["code"],
                d if isinstance(d, str) else "",
                status=status,
                title=t if isinstance(t, str) and t else title,
                scope=sc if isinstance(sc, str) else "",
                owner=ow if isinstance(ow, str) else "",
            )
    code = {502: "unavailable", 503: "unavailable", 504: "unavailable", 404: "not_found"}.get(status)
    code = code or {401: "unauthenticated", 403: "forbidden", 413: "payload_too_large"}.get(status, "internal")
    text = body[:200].decode("utf-8", errors="replace").strip()
    return error_for(code, f"HTTP {status} without a problem body: {text}", status=status, title=title)
