"""A lease's local deadline (docs/client-operations.md, "The local deadline"),
against a fake broker that answers after a delay: send + expires_after_request_ms
when the answer has it (a grant after a wait, a batch acquire, already_held,
whatever the broker's wall clock says), send + ttl without it (an older
broker) and after an extension. All times are the event loop's (monotonic)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

import muster

pytestmark = pytest.mark.anyio

R = "lease://acme/jobs/nightly"

SESSION = {
    "session_id": "0123456789abcdef0123456789abcdef",
    "holder_incarnation": "h",
    "owner_id": "w",
    "ttl_ms": 10000,
    "expires_at": "2030-01-01T00:00:00Z",
    "epoch": "e",
}

#: How late past its deadline a loss may be reported on a busy machine.
SLACK = 1.0


def wire_lease(
    ttl_ms: int,
    *,
    outcome: str | None = "acquired",
    expires_after_request_ms: int | None = None,
    expires_at: datetime | None = None,
) -> dict[str, Any]:
    now = datetime.now(UTC)
    out: dict[str, Any] = {
        "route": R,
        "fencing_token": 7,
        "acquired_at": now.isoformat(),
        "expires_at": (expires_at or now + timedelta(milliseconds=ttl_ms)).isoformat(),
        "renewals": 0,
    }
    if outcome is not None:
        out["outcome"] = outcome
    if expires_after_request_ms is not None:
        out["expires_after_request_ms"] = expires_after_request_ms
    return out


def fake(answers: dict[str, tuple[float, dict[str, Any]]]) -> muster.Client:
    """A client of a broker that creates sessions, answers keepalives and
    DELETE at once, and answers a request whose path ends with a key of
    ``answers`` with its JSON after its delay (a wait in the queue)."""

    async def handle(req: httpx.Request) -> httpx.Response:
        await req.aread()
        path = req.url.path
        if req.method == "DELETE":
            return httpx.Response(204)
        if path == "/v1/sessions":
            return httpx.Response(201, json=SESSION)
        if path.endswith("/keepalive"):
            return httpx.Response(200, json={"expires_at": SESSION["expires_at"], "ttl_ms": 10000})
        for suffix, (delay, body) in answers.items():
            if path.endswith(suffix):
                await asyncio.sleep(delay)
                return httpx.Response(200, json=body)
        return httpx.Response(404, json={"type": "about:blank", "title": "Not Found", "status": 404, "code": "x"})

    hc = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    return muster.Client("http://fake:1", token="t", http_client=hc)


async def lost_at(lease: muster.Lease, held_until: float) -> float:
    """Checks that lease is not lost before loop time held_until, then
    waits for its loss (a local expiry) and returns when it came."""
    loop = asyncio.get_running_loop()
    await asyncio.sleep(max(0.0, held_until - loop.time()))
    assert lease.error is None, f"lost before its deadline: {lease.error!r}"
    async with asyncio.timeout(held_until - loop.time() + 5):
        await lease.lost.wait()
    at = loop.time()
    assert isinstance(lease.error, muster.LeaseLostError) and isinstance(lease.error.cause, muster.LeaseExpiredError)
    return at


async def test_grant_after_a_wait_keeps_the_wait_plus_the_ttl() -> None:
    """A grant after a wait of 0.6 s with a TTL of 0.5 s: the broker's expiry
    is 1.1 s after it took the request up. Send + TTL would have lost the
    lease before its answer arrived."""
    c = fake({"/acquire": (0.6, wire_lease(500, expires_after_request_ms=1100))})
    async with c, await c.new_session("w", 10) as s:
        loop = asyncio.get_running_loop()
        send = loop.time()
        lease = await s.acquire(R, 0.5, wait=5)
        at = await lost_at(lease, send + 1.1 - 0.1)
        assert send + 1.1 - 0.005 <= at < send + 1.1 + SLACK


async def test_batch_acquire_follows_the_same_rule() -> None:
    body = {
        "results": [{"op": "acquire", "route": R, "ok": True, "lease": wire_lease(500, expires_after_request_ms=1100)}]
    }
    c = fake({"/v1/leases/batch": (0.6, {**body, "revision": 7})})
    async with c, await c.new_session("w", 10) as s:
        loop = asyncio.get_running_loop()
        send = loop.time()
        (res,) = await s.batch().acquire(R, 0.5).do()
        assert res.error is None and res.lease is not None
        at = await lost_at(res.lease, send + 1.1 - 0.1)
        assert send + 1.1 - 0.005 <= at < send + 1.1 + SLACK


async def test_already_held_ignores_the_wall_clocks() -> None:
    """already_held: what is left of the grant, as the broker measured it;
    an expires_at that the local wall clock reads as long past (clocks
    apart) changes nothing."""
    past = datetime(2000, 1, 1, tzinfo=UTC)
    answer = wire_lease(5000, outcome="already_held", expires_after_request_ms=800, expires_at=past)
    c = fake({"/acquire": (0.0, answer)})
    async with c, await c.new_session("w", 10) as s:
        loop = asyncio.get_running_loop()
        send = loop.time()
        lease = await s.acquire(R, 5)
        at = await lost_at(lease, send + 0.8 - 0.1)
        assert send + 0.8 - 0.005 <= at < send + 0.8 + SLACK


async def test_older_broker_send_plus_ttl() -> None:
    """Without the member: send + TTL for a grant (a wait as long as the TTL
    loses it at once), and for already_held never more than what expires_at
    leaves."""
    c = fake({"/acquire": (0.6, wire_lease(500))})
    async with c, await c.new_session("w", 10) as s:
        lease = await s.acquire(R, 0.5, wait=5)
        async with asyncio.timeout(SLACK):
            await lease.lost.wait()
    soon = datetime.now(UTC) + timedelta(milliseconds=600)
    c = fake({"/acquire": (0.0, wire_lease(5000, outcome="already_held", expires_at=soon))})
    async with c, await c.new_session("w", 10) as s:
        loop = asyncio.get_running_loop()
        send = loop.time()
        lease = await s.acquire(R, 5)
        at = await lost_at(lease, send + 0.6 - 0.3)
        assert at < send + 0.6 + SLACK


async def test_extension_moves_the_deadline_to_send_plus_ttl() -> None:
    c = fake(
        {
            "/acquire": (0.0, wire_lease(5000, expires_after_request_ms=5000)),
            "/extend": (0.2, wire_lease(500, outcome=None)),
        }
    )
    async with c, await c.new_session("w", 10) as s:
        lease = await s.acquire(R, 5)
        loop = asyncio.get_running_loop()
        send = loop.time()
        await lease.extend(0.5)
        at = await lost_at(lease, send + 0.5 - 0.1)
        assert send + 0.5 - 0.005 <= at < send + 0.5 + SLACK


def test_the_member_is_decoded() -> None:
    raw = json.loads(json.dumps(wire_lease(500, expires_after_request_ms=1234)))
    assert muster._models.decode(muster._models.Lease, raw).expires_after_request_ms == 1234
