"""The connection under a Client: one broker or several, the httpx client,
following wrong_broker, the epoch, the request/response calls, LIST and GET.
Sessions, leases, watch streams, observers and fleets are built on it;
``Client`` (_client.py) is a Conn that also makes them."""

from __future__ import annotations

import json
import ssl
import warnings
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Self, TypeVar
from urllib.parse import urlsplit
from weakref import WeakSet

import httpx

from . import _models as m
from ._errors import FamilyUnavailableError, MusterError, TransportError
from ._http import (
    MAX_BODY,
    Route,
    buffered,
    is_problem_type,
    misdirected_to,
    not_sent,
    parse_bases,
    parse_route,
    problem_code,
    problem_error,
    read_body,
    ssl_failure,
)
from ._loss import answered_by, broker_gone, held_by
from ._tls import StrPath, ssl_context
from ._types import Item, LeaseStatus, Page

if TYPE_CHECKING:
    from ._loss import Held

T = TypeVar("T")

#: The default ``timeout`` of a Client, seconds: the Go CLI's (``muster``'s
#: http.Client timeout). See :class:`muster.Client`.
DEFAULT_TIMEOUT = 60.0

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_BODY",
    "MAX_FOLLOWS",
    "Conn",
    "Route",
    "misdirected_to",
    "parse_bases",
    "parse_route",
    "problem_code",
    "problem_error",
]

#: Bounds the brokers one request is sent to after the first (following
#: ``wrong_broker``).
MAX_FOLLOWS = 2


class Conn:
    """The broker connection of a :class:`muster.Client` (which is one): see
    that class for the arguments. It sends every request, watch stream and
    observer page by the rule of "Several brokers", records the epoch, and
    tells the loss rule (_loss) what the answers prove."""

    def __init__(
        self,
        base_url: str | Sequence[str],
        *,
        token: str = "",
        http_client: httpx.AsyncClient | None = None,
        without_follow: bool = False,
        timeout: float | None = DEFAULT_TIMEOUT,
        ca_file: StrPath | None = None,
        client_cert: tuple[StrPath, StrPath] | None = None,
    ) -> None:
        if timeout is not None and not timeout > 0:
            raise ValueError(f"muster: timeout {timeout!r}: want a positive number of seconds, or None")
        if http_client is not None and (ca_file is not None or client_cert is not None):
            raise ValueError(
                "muster: ca_file and client_cert configure the client's own httpx.AsyncClient, "
                "and http_client replaces it: give your http_client verify=ssl.SSLContext instead"
            )
        self._closed = False
        self._bases = parse_bases(base_url)
        ctx = ssl_context(ca_file, client_cert)
        self._base = self._bases[0]
        self._token = token
        self._own = http_client is None
        if http_client is not None:
            self._http = http_client
        elif ctx is not None:
            self._http = httpx.AsyncClient(timeout=None, verify=ctx)
        else:
            self._http = httpx.AsyncClient(timeout=None)
        self._timeout = timeout
        self._epoch = ""
        self._follow = not without_follow
        self._owner: str | None = None  # the owner a wrong_broker answer named; None: the current base URL
        self._cur = 0  # the current base URL, an index of _bases
        self._sticky_owner = False  # conformance tests only: never forget the owner
        self._single_broker = False  # conformance tests only: every base URL but the first is ignored
        self._stay_on_unavailable = False  # conformance tests only: family_unavailable moves nothing
        self._never_lost = False  # conformance tests only: a lease's loss is never reported
        self._send_plus_ttl = False  # conformance tests only: a grant's local deadline is send + TTL
        self._late_loss = False  # conformance tests only: sessions are lost at their keepalive only (_loss)
        self._creator_loss = False  # conformance tests only: a session's broker stays its creator (_loss)
        # Live sessions, for prompt loss (_loss); weak: a session nobody
        # holds (its keepalive stopped) is not kept alive by its client.
        self._sessions: WeakSet[Held] = WeakSet()

    @property
    def base_url(self) -> str:
        """The first base URL (the preferred broker)."""
        return self._base

    @property
    def base_urls(self) -> list[str]:
        """Every base URL, in order of preference."""
        return list(self._bases)

    @property
    def epoch(self) -> str:
        """The broker lifetime (the Muster-Epoch header) of the last response,
        "" before the first one."""
        return self._epoch

    @property
    def http(self) -> httpx.AsyncClient:
        """The underlying ``httpx.AsyncClient``."""
        return self._http

    @property
    def timeout(self) -> float | None:
        """The bound of each phase of a request/response call, seconds (None: none)."""
        return self._timeout

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return f"<muster.Client {','.join(self._bases)}{state}>"

    def __del__(self) -> None:
        if getattr(self, "_own", False) and not getattr(self, "_closed", True):
            warnings.warn(
                f"unclosed {self!r}: use `async with` or aclose()", ResourceWarning, stacklevel=2, source=self
            )

    async def aclose(self) -> None:
        """Closes the ``httpx.AsyncClient`` this client created."""
        self._closed = True
        if self._own:
            await self._http.aclose()

    def _timeouts(self, *, wait: float = 0.0, stream: bool = False) -> httpx.Timeout:
        """The httpx timeouts of one request: ``timeout`` for each phase; a
        long poll reads for its wait more; a stream's reads are unbounded."""
        t = self._timeout
        if t is None:
            return httpx.Timeout(None)
        return httpx.Timeout(t, read=None if stream else t + max(wait, 0.0))

    async def __aenter__(self) -> Self:
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
            broker_gone(self._sessions, answered_by(resp), e)

    def _problem(self, resp: httpx.Response, body: bytes) -> MusterError:
        """problem_error for an answer of this client's broker: a
        family_unavailable loses the sessions of the broker that answered
        (_loss)."""
        err = problem_error(resp, body)
        if isinstance(err, FamilyUnavailableError):
            broker_gone(self._sessions, answered_by(resp), "")
        return err

    def _brokers(self) -> list[str]:
        return self._bases[:1] if self._single_broker else self._bases

    def _target(self) -> _Target:
        """Where the next request goes: the owner when one is known, else the
        current base URL."""
        if self._owner is not None:
            return _Target(self._owner, owner=True, index=-1)
        i = self._cur % len(self._brokers())
        return _Target(self._brokers()[i], owner=False, index=i)

    def _move_on(self, t: _Target) -> None:
        """Leaves t, which failed: the owner is forgotten, or the current base
        URL becomes the next one, unless another request moved on already
        (concurrent failures at one broker move the client once)."""
        if t.owner:
            if self._owner == t.url and not self._sticky_owner:
                self._owner = None
        elif self._owner is None and self._cur % len(self._brokers()) == t.index:
            self._cur = (t.index + 1) % len(self._brokers())

    async def _send(
        self,
        method: str,
        path: str,
        *,
        content: bytes | None = None,
        params: Any = None,
        headers: dict[str, str],
        timeouts: httpx.Timeout | None = None,
        session: Held | None = None,
    ) -> httpx.Response:
        """Sends one request (streaming: the caller reads and closes the
        answer) to the broker the rule of "Several brokers" picks
        (docs/client-operations.md): following ``wrong_broker`` unless
        ``without_follow``, moving on from a broker that is unreachable or
        answers ``family_unavailable``, and sending again at once when that
        broker certainly did not act on the request. A transport failure is
        raised as TransportError. ``session``: the request is one of that
        session's own; a success records its broker (_loss.held_by) before
        prompt loss judges the answer."""
        if timeouts is None:
            timeouts = self._timeouts()
        follows = fails = 0
        while True:
            t = self._target()
            req = self._http.build_request(
                method, t.url + path, content=content, params=params, headers=headers, timeout=timeouts
            )
            try:
                try:
                    resp = await self._http.send(req, stream=True)
                except ssl.SSLError as raw:  # a TLS alert httpx let through: a transport failure too
                    raise ssl_failure(raw, req) from raw
            except httpx.TransportError as e:
                # A connection error (the caller's own cancellation is a
                # CancelledError, not one): the client moves on.
                self._move_on(t)
                fails += 1
                if not_sent(e) and fails < len(self._brokers()) + MAX_FOLLOWS:
                    continue
                raise TransportError(e) from e
            if session is not None and resp.is_success:
                held_by(session, answered_by(resp), resp.headers.get("Muster-Epoch", ""))
            self._saw_epoch(resp)
            if resp.status_code == HTTPStatus.SERVICE_UNAVAILABLE and is_problem_type(resp):
                resp, body = await buffered(resp, req)
                if problem_code(resp.headers.get("Content-Type", ""), body) == FamilyUnavailableError.CODE:
                    # The sessions of the broker that answered are lost, also
                    # when the request goes on to another broker (_loss).
                    broker_gone(self._sessions, answered_by(resp), "")
                    if self._stay_on_unavailable:
                        return resp
                    self._move_on(t)
                    fails += 1
                    # With one base URL, only a forgotten owner is worth a
                    # resend: the base URL itself just answered.
                    if fails < len(self._brokers()) + MAX_FOLLOWS and (len(self._brokers()) > 1 or t.owner):
                        continue
                return resp
            if not self._follow or resp.status_code != HTTPStatus.MISDIRECTED_REQUEST or follows >= MAX_FOLLOWS:
                return resp
            resp, body = await buffered(resp, req)
            to = misdirected_to(resp.headers.get("Content-Type", ""), body)
            if to is None:
                return resp
            self._owner = to + urlsplit(t.url).path
            follows += 1

    async def _call(
        self,
        method: str,
        path: str,
        want: int,
        *,
        body: object = None,
        params: Any = None,
        wait: float = 0.0,
        session: Held | None = None,
    ) -> Any:
        """Runs one request/response operation: a status other than ``want``
        raises a MusterError; the JSON body of the answer is returned.
        ``wait`` is how long the broker may hold the request (a long poll);
        ``session`` the session whose own request it is (_send)."""
        return (await self._call_at(method, path, want, body=body, params=params, wait=wait, session=session))[0]

    async def _call_at(
        self,
        method: str,
        path: str,
        want: int,
        *,
        body: object = None,
        params: Any = None,
        wait: float = 0.0,
        session: Held | None = None,
    ) -> tuple[Any, str]:
        """_call, also returning the host (host:port) that answered."""
        content = None
        headers = self._headers()
        if body is not None:
            content = json.dumps(m.encode(body) if not isinstance(body, dict) else body).encode()
            headers["Content-Type"] = "application/json"
        resp = await self._send(
            method,
            path,
            content=content,
            params=params,
            headers=headers,
            timeouts=self._timeouts(wait=wait),
            session=session,
        )
        try:
            raw = await read_body(resp)
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


_ZERO_TIME = datetime.min.replace(tzinfo=UTC)


class _Target:
    """The broker one sending of a request went to: the owner, or the base
    URL at ``index``."""

    __slots__ = ("index", "owner", "url")

    def __init__(self, url: str, *, owner: bool, index: int) -> None:
        self.url, self.owner, self.index = url, owner, index
