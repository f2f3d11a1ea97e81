"""The asyncio client: a Conn (_conn.py) that also makes sessions, watch
streams, observers and fleets."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from ._conn import DEFAULT_TIMEOUT, Conn
from ._fleet import Fleet
from ._observe import Observer
from ._session import Session
from ._watch import Subscription, open_watch

__all__ = ["DEFAULT_TIMEOUT", "Client"]


class Client(Conn):
    """An asyncio client of the broker at ``base_url`` (e.g.
    ``"http://127.0.0.1:7420"``), or of a deployment of several brokers:
    ``base_url`` may be a list of base URLs, or one string with them
    separated by commas (as ``MUSTER_ADDR`` may hold them), in order of
    preference. ``token`` is sent as the bearer token of every request (a
    broker in dev mode accepts requests without one).

    ``timeout`` (seconds, default ``DEFAULT_TIMEOUT``, 60 s like the Go
    CLI's) bounds each phase (connect, send, each read) of every
    request/response call, and it replaces the ``http_client``'s own
    timeouts; a call that exceeds it raises :class:`TransportError` (retry
    advice: backoff). A long-polling acquire reads for its ``wait`` plus
    ``timeout``; a watch stream (and so an observer) is never cut by it: only
    its connection is bounded, and it ends by ``aclose`` or cancellation.
    ``timeout=None`` waits forever. The keepalive of a session is bounded by
    the session's local deadline anyway.

    ``ca_file`` (a path) is a PEM bundle of the certificate authorities to
    trust for an ``https://`` broker whose certificate a private CA signed:
    those CAs only, instead of the default ones (certifi's); the hostname is
    checked as usual. ``client_cert`` is a ``(certificate, private key)``
    pair of PEM paths presented for mutual TLS. Both are read here (a file
    that cannot be read raises its OSError, one without a certificate
    ``ValueError``) and apply to every request, watch stream and observer of
    the client, which all go through its one ``httpx.AsyncClient``
    (docs/operations.md, "TLS"). A verification failure is a
    :class:`TransportError` caused by ``httpx.ConnectError`` (its own cause:
    ``ssl.SSLCertVerificationError``).

    ``http_client`` replaces the default ``httpx.AsyncClient``; it cannot be
    combined with ``ca_file`` or ``client_cert`` (``ValueError``): give it
    ``verify=ssl_context`` yourself. The client owns only the
    ``httpx.AsyncClient`` it created; ``aclose`` (or the end of ``async
    with``) closes that one. A client that owns one and is dropped
    unclosed warns with a ``ResourceWarning``, as the standard library's
    resources do.

    Every failure of the transport (a connection refused or reset, a
    timeout) is raised as :class:`TransportError`, whose ``__cause__`` is the
    ``httpx`` exception: ``except muster.MusterException`` catches everything
    the SDK raises.

    Every request, observer and watch stream picks its broker by the rule of
    docs/client-operations.md, "Several brokers": it goes to the owner a
    ``421 wrong_broker`` answer named (followed at once, at most
    ``MAX_FOLLOWS`` hops), else to the current base URL; a connection error
    or ``family_unavailable`` moves the client on (the owner is forgotten,
    or the next base URL becomes the current one), and a request the broker
    certainly did not act on (connection refused, 421, family_unavailable)
    is sent again at once to the new target. ``without_follow=True`` turns
    off following 421s only: the request then fails with
    ``WrongBrokerError``, whose ``owner`` names the broker.
    """

    async def new_session(self, owner_id: str, ttl: float) -> Session:
        """Creates a session for ``owner_id`` with ``ttl`` seconds (1 s ..
        10 min) and starts its background keepalive. Use it as ``async with``
        to close it at the end."""
        return await Session._create(self, owner_id, ttl)

    def session(self, owner_id: str, ttl: float) -> AbstractAsyncContextManager[Session]:
        """``async with client.session(owner_id, ttl) as s:`` creates a session
        (see :meth:`new_session`) and closes it at the end of the block."""
        return _SessionBlock(self, owner_id, ttl)

    async def watch(self, *selectors: str) -> Subscription:
        """Opens a watch stream over ``selectors`` (at most 32), as its own
        read-only session, and returns once the marker has arrived."""
        return await open_watch(self, None, list(selectors))

    def fleet(self, root: str) -> Fleet:
        """The fleet at ``root``: legal segments (lowercase letters, digits,
        '-' and '_') joined by '/'."""
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
