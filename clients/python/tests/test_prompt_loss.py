"""Prompt loss (docs/client-operations.md, "Prompt loss"): a session, and
every lease it holds, is lost at once, not at its next keepalive, when the
broker that holds it (the host that last answered one of its requests with
success: its creator, or where a planned move took it) answers with
another Muster-Epoch, answers family_unavailable, or answers
session_not_found to one of the session's requests. A connection error alone
changes nothing. Against fake brokers (an httpx.MockTransport that answers per
host) where the broker must answer on cue, and against the real one for a
restart."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

import muster
import muster.sync

from .conftest import TOKENS, Broker, raises_transport

pytestmark = pytest.mark.anyio

R = "lease://acme/jobs/a"
R2 = "lease://acme/jobs/b"

SESSION = {
    "session_id": "0123456789abcdef0123456789abcdef",
    "holder_incarnation": "h",
    "owner_id": "w",
    "ttl_ms": 600000,  # keepalives 200 s apart: only prompt loss ends the session within a test
    "expires_at": "2030-01-01T00:00:00Z",
    "epoch": "e1",
}


def problem(status: int, code: str, epoch: str = "e1") -> httpx.Response:
    body = {"type": "about:blank", "title": "x", "status": status, "code": code}
    return httpx.Response(
        status, json=body, headers={"Content-Type": "application/problem+json", "Muster-Epoch": epoch}
    )


def wire_lease(route: str, token: int) -> dict[str, Any]:
    now = datetime.now(UTC)
    return {
        "route": route,
        "fencing_token": token,
        "acquired_at": now.isoformat(),
        "expires_at": (now + timedelta(minutes=10)).isoformat(),
        "renewals": 0,
        "outcome": "acquired",
        "expires_after_request_ms": 600000,
    }


def ok(body: Any, status: int = 200, epoch: str = "e1") -> httpx.Response:
    return httpx.Response(status, json=body, headers={"Muster-Epoch": epoch})


Answer = Callable[[httpx.Request], httpx.Response | None]


class Brokers:
    """Fake brokers by host: they create sessions and grant every acquire
    (epoch e1) until ``answer`` returns something else for a request."""

    def __init__(self) -> None:
        self.answer: Answer = lambda req: None
        self.seen: list[str] = []
        self.token = 0

    def handle(self, req: httpx.Request) -> httpx.Response:
        req.read()
        host, path = req.url.netloc.decode(), req.url.path
        self.seen.append(f"{req.method} {host}{path}")
        got = self.answer(req)
        if got is not None:
            return got
        if req.method == "DELETE":
            return httpx.Response(204, headers={"Muster-Epoch": "e1"})
        if path == "/v1/sessions":
            return ok(SESSION, 201)
        if path.endswith("/acquire"):
            self.token += 1
            route = "lease://" + path.removeprefix("/v1/leases/").removesuffix("/acquire")
            return ok(wire_lease(route, self.token))
        if path.endswith("/extend"):
            return ok({**wire_lease(R, self.token), "outcome": None})
        return ok({"route": R2, "held": False, "waiters": 0})  # GET of a route

    def client(self, base: str = "http://b:1") -> muster.Client:
        return muster.Client(base, token="t", http_client=httpx.AsyncClient(transport=httpx.MockTransport(self.handle)))


async def session_with_leases(c: muster.Client) -> tuple[muster.Session, muster.Lease, muster.Lease]:
    s = await c.new_session("w", 600)
    return s, await s.acquire(R, 600), await s.acquire(R2, 600)


def assert_lost(s: muster.Session, leases: list[muster.Lease], why: str) -> None:
    """The session is lost now (no wait), with a SessionLostError saying why,
    and every lease with it, caused by the session's loss."""
    assert s.done.is_set(), "the session is not lost"
    assert isinstance(s.error, muster.SessionLostError), repr(s.error)
    assert why in str(s.error), str(s.error)
    for lease in leases:
        assert lease.lost.is_set(), f"{lease.route} not lost"
        assert isinstance(lease.error, muster.LeaseLostError) and lease.error.cause is s.error


async def assert_keepalive_stopped(s: muster.Session) -> None:
    await asyncio.sleep(0)  # the cancellation is delivered at the task's next step
    assert s._task is not None and s._task.done()


async def test_another_epoch_from_the_sessions_broker_loses_it_at_once() -> None:
    b = Brokers()
    async with b.client() as c:
        s, a, a2 = await session_with_leases(c)
        other = await c.new_session("w2", 600)
        b.answer = lambda req: ok({"route": R2, "held": False, "waiters": 0}, epoch="e2")
        await c.get(R2)  # any answer of the session's broker: here a read of no lease of it
        assert_lost(s, [a, a2], "another lifetime (epoch e2, the session's e1)")
        assert_lost(other, [], "another lifetime")
        assert muster.advice(s.error) is muster.Retry.RESTART
        await assert_keepalive_stopped(s)
        with pytest.raises(muster.SessionLostError):
            await s.acquire(R, 1)
        await s.close()
        assert isinstance(s.error, muster.SessionLostError)
        await other.close()


async def test_a_watch_stream_of_another_epoch_loses_it_too() -> None:
    b = Brokers()
    marker = b'event: snapshot\ndata: {"epoch":"e2","revision":1,"subscriptions":[]}\n\n'

    def answer(req: httpx.Request) -> httpx.Response | None:
        if req.url.path == "/v1/leases/watch":
            return httpx.Response(
                200, content=marker, headers={"Content-Type": "text/event-stream", "Muster-Epoch": "e2"}
            )
        return None

    async with b.client() as c:
        s, a, _ = await session_with_leases(c)
        b.answer = answer
        sub = await c.watch("lease://acme/jobs/*")
        assert_lost(s, [a], "another lifetime")
        await sub.aclose()
        await s.close()


def misdirected(owner: str, epoch: str) -> httpx.Response:
    return httpx.Response(
        421,
        json={"type": "about:blank", "status": 421, "code": "wrong_broker", "owner": f"http://{owner}"},
        headers={"Content-Type": "application/problem+json", "Muster-Epoch": epoch},
    )


@pytest.mark.parametrize("broken", [False, True], ids=["rule", "creator-loss"])
async def test_a_planned_move_makes_the_answering_broker_the_sessions(broken: bool) -> None:
    """The session's broker is the one that last answered one of its own
    requests with success, with that answer's epoch (docs/client-operations.md,
    "Planned moves"): created at b:1 (e1), moved to o:2 (x1); b:1 restarts
    (e2) and gets the family back: its success under e2 keeps the session; a
    later answer of b:1 under e3 ends it. With the old rule (broken: judged
    against the creator) the success under e2 ends it."""
    b = Brokers()
    owner, epochs = "o:2", {"b:1": "e1", "o:2": "x1"}

    def answer(req: httpx.Request) -> httpx.Response | None:
        host = req.url.netloc.decode()
        if req.url.path == "/v1/sessions" or req.url.path.endswith("/acquire"):
            return None  # created and granted at b:1, under e1
        if host != owner:
            return misdirected(owner, epochs[host])
        if req.url.path.endswith("/extend"):
            return ok({**wire_lease(R, b.token), "outcome": None}, epoch=epochs[host])
        return ok({"route": R2, "held": False, "waiters": 0}, epoch=epochs[host])

    b.answer = answer
    async with b.client() as c:
        c._creator_loss = broken
        owner = "b:1"
        s, a, _ = await session_with_leases(c)
        owner = "o:2"
        await a.extend(600)  # b:1 names o:2, which answers: the session moved there
        assert s.error is None
        assert (s._host, s.epoch) == (("b:1", "e1") if broken else ("o:2", "x1"))
        owner, epochs["b:1"] = "b:1", "e2"  # b:1 restarted and has the family back
        if broken:
            with pytest.raises(muster.LeaseLostError):
                await a.extend(600)
            assert_lost(s, [a], "b:1 answered for another lifetime (epoch e2, the session's e1)")
            return
        await a.extend(600)  # o:2 names b:1, which answers under e2
        assert s.error is None and a.error is None
        assert (s._host, s.epoch) == ("b:1", "e2")
        epochs["b:1"] = "e3"
        await c.get(R2)
        assert_lost(s, [a], "b:1 answered for another lifetime (epoch e3, the session's e2)")


async def test_a_success_of_the_session_is_recorded_before_it_is_judged() -> None:
    """The creator answers one of the session's requests with success under a
    new epoch (the family moved away and back while the session sent
    nothing): the session lives on. A failure under yet another epoch is no
    success of the session: it ends it."""
    b = Brokers()
    async with b.client() as c:
        s, a, _ = await session_with_leases(c)
        b.answer = lambda req: ok({**wire_lease(R, b.token), "outcome": None}, epoch="e2")
        await a.extend(600)
        assert s.error is None and s.epoch == "e2"
        b.answer = lambda req: problem(503, "unavailable", epoch="e3")
        with pytest.raises(muster.UnavailableError):
            await a.extend(600)
        assert_lost(s, [a], "another lifetime (epoch e3, the session's e2)")


async def test_the_same_epoch_and_other_brokers_change_nothing() -> None:
    """The session lives at owner:2 (followed from first:1): answers of
    first:1 with its own epoch, a connection error of owner:2, and answers
    with the session's epoch leave it alone."""
    b = Brokers()
    down = False

    def answer(req: httpx.Request) -> httpx.Response | None:
        host = req.url.netloc.decode()
        if down:
            raise httpx.ConnectError("refused")
        if host == "first:1" and req.url.path == "/v1/sessions":
            return httpx.Response(
                421,
                json={"type": "about:blank", "status": 421, "code": "wrong_broker", "owner": "http://owner:2"},
                headers={"Content-Type": "application/problem+json", "Muster-Epoch": "f1"},
            )
        if host == "first:1":
            return ok({"route": R2, "held": False, "waiters": 0}, epoch="f2")
        return None

    b.answer = answer
    async with b.client("http://first:1") as c:
        s, a, a2 = await session_with_leases(c)
        assert b.seen[:2] == ["POST first:1/v1/sessions", "POST owner:2/v1/sessions"]
        await c.get(R2)  # the session's broker, the session's epoch
        down = True
        with raises_transport(httpx.ConnectError):
            await c.get(R2)  # a connection error: the client goes back to first:1
        with raises_transport(httpx.ConnectError):
            await a.extend(600)  # ... which does not answer either
        down = False
        await c.get(R2)  # first:1 answers, in its own lifetime
        assert b.seen[-1] == "GET first:1/v1/leases/acme/jobs/b"
        b.answer = lambda req: problem(503, "family_unavailable", epoch="f3")
        with pytest.raises(muster.FamilyUnavailableError):
            await c.get(R2)  # another broker stopped serving the family: not the session's
        assert s.error is None and a.error is None and a2.error is None
        assert s._task is not None and not s._task.done()
        b.answer = lambda req: None
        await s.close()


async def test_family_unavailable_from_the_sessions_broker_loses_it() -> None:
    b = Brokers()
    async with b.client() as c:
        s, a, a2 = await session_with_leases(c)
        b.answer = lambda req: problem(503, "family_unavailable")
        with pytest.raises(muster.FamilyUnavailableError):
            await c.list_page("lease://acme/**")
        assert_lost(s, [a, a2], "no longer serves the family")
        await assert_keepalive_stopped(s)
        await s.close()


def not_found_for(path_end: str) -> Answer:
    def answer(req: httpx.Request) -> httpx.Response | None:
        if req.url.path.endswith(path_end):
            return problem(404, "session_not_found")
        return None

    return answer


@pytest.mark.parametrize("op", ["acquire", "extend", "release", "batch"])
async def test_session_not_found_to_one_of_its_requests_loses_it(op: str) -> None:
    b = Brokers()
    async with b.client() as c:
        s, a, a2 = await session_with_leases(c)
        b.answer = not_found_for("/" + op)
        if op == "acquire":
            with pytest.raises(muster.SessionNotFoundError) as nf:
                await s.acquire("lease://acme/jobs/c", 600)
            assert isinstance(s.error, muster.SessionLostError) and s.error.cause is nf.value
        elif op == "extend":
            with pytest.raises(muster.LeaseLostError) as lost:
                await a.extend(600)
            assert lost.value is a.error
        elif op == "release":
            await a.release()  # returns: the lease is known not to be held
        else:
            with pytest.raises(muster.SessionNotFoundError):
                await s.batch().extend(a, 600).do()
        assert_lost(s, [a, a2], "session_not_found")
        await assert_keepalive_stopped(s)
        await s.close()


async def test_a_connection_error_changes_nothing() -> None:
    b = Brokers()

    def refuse(req: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    async with b.client() as c:
        s, a, _ = await session_with_leases(c)
        b.answer = refuse
        for call in (lambda: s.acquire("lease://acme/jobs/c", 600), lambda: a.extend(600), lambda: c.get(R)):
            with raises_transport(httpx.ConnectError):
                await call()
        with raises_transport(httpx.ConnectError):
            await s.batch().extend(a, 600).do()
        assert s.error is None and a.error is None
        b.answer = lambda req: None
        await s.close()


async def test_the_real_broker_restarting(broker: Broker) -> None:
    """The first answer of the restarted broker loses the session and its
    lease, whatever the request: the keepalive is 200 s away."""
    async with muster.Client(broker.url, token=TOKENS["a"][0]) as c:
        s = await c.new_session("w1", 600)
        lease = await s.acquire(R, 600)
        await asyncio.to_thread(broker.restart)
        assert not s.done.is_set()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        status = await c.get(R)
        assert s.done.is_set() and loop.time() - t0 < 5
        assert not status.held  # the broker restarted without it
        assert_lost(s, [lease], "another lifetime")
        s2 = await c.new_session("w1", 600)  # a new session of the new lifetime lives
        lease2 = await s2.acquire(R, 600)
        assert s2.error is None and lease2.error is None and (await c.get(R)).held
        await s2.close()
        await s.close()


def test_the_sync_facade_follows(broker: Broker) -> None:
    with muster.sync.Client(broker.url, token=TOKENS["a"][0]) as c, c.new_session("script", ttl=600) as s:
        lease = s.acquire(R, ttl=600)
        broker.restart()
        assert not s.done.is_set() and not lease.lost.is_set()
        assert not c.get(R).held
        assert s.done.is_set() and lease.lost.is_set()
        assert isinstance(s.error, muster.SessionLostError) and isinstance(lease.error, muster.LeaseLostError)
