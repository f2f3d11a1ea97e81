"""The Python idioms of the SDK: every failure is a MusterException (transport
failures as TransportError with the httpx exception as __cause__), default
timeouts that never cut a stream, lease scopes, the sync facade's observer and
watch, reprs without secrets, and ResourceWarnings for what was left open."""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
import time
import warnings

import httpx
import pytest

import muster
import muster.sync

from .conftest import TOKENS, Broker
from .fakebroker import FakeBroker, Request, marker

pytestmark = pytest.mark.anyio

SESSION = {
    "session_id": "0123456789abcdef0123456789abcdef",
    "holder_incarnation": "h",
    "owner_id": "w",
    "ttl_ms": 10000,
    "expires_at": "2030-01-01T00:00:00Z",
    "epoch": "e",
}
GRANT = {
    "route": "lease://acme/r/x",
    "fencing_token": 7,
    "acquired_at": "2030-01-01T00:00:00Z",
    "expires_at": "2030-01-01T00:00:15Z",
    "renewals": 0,
    "outcome": "acquired",
}

# ---- transport failures are MusterExceptions ------------------------------------


async def test_a_transport_failure_is_a_muster_exception_caused_by_httpx() -> None:
    def refuse(req: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=req)

    async with muster.Client("http://a:1", http_client=httpx.AsyncClient(transport=httpx.MockTransport(refuse))) as c:
        try:
            await c.get("lease://acme/r/x")
        except muster.MusterException as e:  # the one base class catches it
            caught: BaseException = e
        assert isinstance(caught, muster.TransportError)
        assert isinstance(caught.__cause__, httpx.ConnectError) and caught.cause is caught.__cause__
        assert caught.request.url.host == "a"
        assert muster.advice(caught) is muster.Retry.BACKOFF and muster.is_retryable(caught)
        assert isinstance(caught, httpx.TransportError)  # the old surface still catches it
        assert "ConnectError" in str(caught)


async def test_a_body_cut_midway_is_a_transport_error() -> None:
    async def handler(req: Request) -> None:
        req.writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
        await req.writer.drain()  # then the connection closes, 99 bytes short

    fb = FakeBroker(handler)
    try:
        async with muster.Client(fb.url) as c:
            with pytest.raises(muster.TransportError) as info:
                await c.get("lease://acme/r/x")
            assert isinstance(info.value.__cause__, httpx.RemoteProtocolError)
    finally:
        fb.close()


# ---- timeouts ----------------------------------------------------------------------


def test_default_timeout_is_the_go_clis() -> None:
    assert muster.DEFAULT_TIMEOUT == 60.0
    c = muster.Client("http://a:1", http_client=httpx.AsyncClient())
    assert c.timeout == 60.0
    assert muster.Client("http://a:1", http_client=httpx.AsyncClient(), timeout=None).timeout is None
    with pytest.raises(ValueError, match="timeout"):
        muster.Client("http://a:1", timeout=0)


async def test_timeouts_per_kind_of_call() -> None:
    seen: dict[str, dict[str, float | None]] = {}

    def handle(req: httpx.Request) -> httpx.Response:
        seen[req.url.path] = req.extensions["timeout"]
        if req.url.path == "/v1/sessions":
            return httpx.Response(201, json=SESSION)
        if req.url.path.endswith("/acquire"):
            return httpx.Response(200, json=GRANT)
        if req.url.path == "/v1/leases/watch":
            body = f"event: snapshot\ndata: {json.dumps(marker('e', 1, None))}\n\n"
            return httpx.Response(200, content=body.encode(), headers={"Content-Type": "text/event-stream"})
        return httpx.Response(204)

    async with muster.Client("http://a:1", http_client=httpx.AsyncClient(transport=httpx.MockTransport(handle))) as c:
        s = await c.new_session("w", 10)
        await s.acquire("lease://acme/r/x", 15, wait=20)
        sub = await c.watch("lease://acme/r/*")
        await sub.aclose()
        await s.close()
    # a request/response call: 60 s for every phase
    assert seen["/v1/sessions"] == {"connect": 60.0, "read": 60.0, "write": 60.0, "pool": 60.0}
    # a long poll reads for its wait plus the timeout
    assert seen["/v1/leases/acme/r/x/acquire"]["read"] == 80.0
    # a stream is never cut: only its connection is bounded
    assert seen["/v1/leases/watch"] == {"connect": 60.0, "read": None, "write": 60.0, "pool": 60.0}


async def test_a_broker_that_never_answers_times_out() -> None:
    async def hang(req: Request) -> None:
        await req.hang()

    fb = FakeBroker(hang)
    try:
        async with muster.Client(fb.url, timeout=0.3) as c:
            t0 = time.monotonic()
            with pytest.raises(muster.TransportError) as info:
                await c.list_page("lease://acme/r/*")
            assert isinstance(info.value.__cause__, httpx.ReadTimeout)
            assert time.monotonic() - t0 < 5
            assert muster.advice(info.value) is muster.Retry.BACKOFF
    finally:
        fb.close()


async def test_a_quiet_stream_outlives_the_timeout() -> None:
    async def quiet(req: Request) -> None:
        await req.start_stream()
        await req.event("snapshot", marker("e1", 1, None))
        await req.hang()  # no change for longer than the timeout

    fb = FakeBroker(quiet)
    try:
        async with muster.Client(fb.url, timeout=0.2) as c:
            sub = await c.watch("lease://acme/r/*")
            await asyncio.sleep(0.6)
            assert sub.error is None and not sub.done.is_set()
            await sub.aclose()
    finally:
        fb.close()


# ---- the lease scope ------------------------------------------------------------------

R = "lease://acme/renderers/scope"


async def test_lease_scope_holds_extends_and_releases(client: muster.Client) -> None:
    async with client.session("w", ttl=5) as s:
        async with s.lease(R, ttl=1.0) as lease:
            assert isinstance(lease, muster.Lease) and lease.fencing_token >= 1
            await asyncio.sleep(1.5)  # longer than the TTL: extended in the background
            assert lease.error is None and lease.renewals >= 1
        assert isinstance(lease.error, muster.ReleasedError)
        assert not (await client.get(R)).held
        with pytest.raises(KeyError):  # the block's own exception, and the lease released
            async with s.lease(R, ttl=5) as lease:
                raise KeyError("boom")
        assert isinstance(lease.error, muster.ReleasedError) and not (await client.get(R)).held


async def test_lease_scope_cancels_the_block_on_loss(client: muster.Client) -> None:
    async with client.session("w", ttl=5) as s:
        t0 = time.monotonic()
        with pytest.raises(muster.LeaseLostError) as info:
            async with s.lease(R, ttl=5) as lease:
                asyncio.get_running_loop().call_later(0.1, lease._expired)  # the local deadline passes
                await asyncio.sleep(30)
        assert time.monotonic() - t0 < 5
        assert isinstance(info.value.cause, muster.LeaseExpiredError)
        task = asyncio.current_task()
        assert task is not None and task.cancelling() == 0  # the scope's cancellation was absorbed
        await asyncio.sleep(0)  # and nothing is left to cancel this task later

        # a cancellation from outside stays a cancellation
        async def block() -> None:
            async with s.lease(R, ttl=5):
                await asyncio.sleep(30)

        t = asyncio.create_task(block())
        await asyncio.sleep(0.2)
        t.cancel()
        with pytest.raises(asyncio.CancelledError):
            await t
        assert not (await client.get(R)).held


async def test_lease_scope_raises_a_loss_the_block_outlived(client: muster.Client) -> None:
    async with client.session("w", ttl=5) as s:
        with pytest.raises(muster.LeaseLostError):
            async with s.lease(R, ttl=5) as lease:
                lease._expired()  # lost while the block's own task runs: no cancellation
                assert lease.lost.is_set()
        task = asyncio.current_task()
        assert task is not None and task.cancelling() == 0


def test_sync_lease_scope(broker: Broker) -> None:
    with muster.sync.Client(broker.url, token=TOKENS["a"][0]) as c, c.new_session("w", ttl=5) as s:
        with s.lease(R, ttl=1.0) as lease:
            time.sleep(1.5)  # extended in the background
            assert not lease.lost.is_set()
        assert isinstance(lease.error, muster.ReleasedError) and not c.get(R).held
        with pytest.raises(muster.LeaseLostError), s.lease(R, ttl=5) as lease:
            c._loop.loop.call_soon_threadsafe(lease._l._expired)
            assert lease.lost.wait(5)
        assert s.with_lease(R, 5, lambda lz: lz.fencing_token) >= 1


# ---- the sync facade's watch and observer --------------------------------------------


def test_sync_watch_and_observe(broker: Broker) -> None:
    with muster.sync.Client(broker.url, token=TOKENS["a"][0]) as c, c.new_session("w", ttl=5) as s:
        with c.observe("lease://acme/renderers/*", shortest_ttl=5) as o:
            o.ready(timeout=10)
            assert o.is_ready and o.view().items == []
            seen: list[bool] = []
            remove = o.on_change(lambda ob: seen.append(ob.view().ready))
            views = iter(o)
            assert next(views).items == []
            lease = s.acquire(R, ttl=5)
            for v in views:
                if [it.route for it in v.items] == [R]:
                    break
            remove()
            assert seen and all(seen)
            assert o.changed(timeout=0.05) is False  # nothing changed since
        assert o.done.wait(5) and isinstance(o.error, muster.ClosedError)

        with s.watch("lease://acme/renderers/*") as sub:
            assert sub.marker.selectors[0].items[0].route == R
            with pytest.raises(TimeoutError):
                sub.get(timeout=0.05)
            lease.release()
            ch = sub.get(timeout=5)
            assert ch is not None and ch.kind == muster.ChangeKind.RELEASED and ch.route == R
            sub.unsubscribe("lease://acme/renderers/*")  # the last registration: the stream ends
            assert list(sub) == []
            assert isinstance(sub.error, muster.StreamEndError) and sub.error.reason == "unsubscribed"
        assert sub.done.wait(5)


# ---- reprs without secrets ----------------------------------------------------------------


async def test_reprs_never_show_the_session_id(client: muster.Client) -> None:
    async with client.session("w", ttl=5) as s:
        lease = await s.acquire(R, ttl=5)
        text = repr(lease)
        assert s.id not in text and R in text and f"fencing_token={lease.fencing_token}" in text and "held" in text
        assert s.id not in repr(s) and "owner_id='w'" in repr(s) and "live" in repr(s)
        await lease.release()
        assert "released" in repr(lease)
        lost = await s.acquire(R, ttl=5)
        lost._expired()
        assert "lost (LeaseExpiredError)" in repr(lost)
    assert "closed" in repr(s)


def test_sync_reprs_never_show_the_session_id(broker: Broker) -> None:
    with muster.sync.Client(broker.url, token=TOKENS["a"][0]) as c, c.new_session("w", ttl=5) as s:
        lease = s.acquire(R, ttl=5)
        assert s.id not in repr(lease) and R in repr(lease) and "muster.sync.Lease" in repr(lease)
        assert s.id not in repr(s)
        assert broker.url in repr(c)


# ---- ResourceWarning for what was left open ------------------------------------------------


def test_an_unclosed_client_warns() -> None:
    c = muster.Client("http://a:1")
    with pytest.warns(ResourceWarning, match=r"unclosed <muster.Client http://a:1>"):
        del c
        gc.collect()
    closed = muster.Client("http://a:1")
    asyncio.run(closed.aclose())
    given = muster.Client("http://a:1", http_client=httpx.AsyncClient())  # not its own: the caller closes it
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        del closed, given
        gc.collect()


SCRIPT_LEFT_OPEN = """
import asyncio, sys
import muster

async def main() -> None:
    c = muster.Client(sys.argv[1], token=sys.argv[2])
    s = await c.new_session("forgotten", ttl=5)
    await s.acquire("lease://acme/renderers/left", ttl=5)

asyncio.run(main())
print("done")
"""

SCRIPT_CLOSED = """
import asyncio, sys
import muster

async def main() -> None:
    async with muster.Client(sys.argv[1], token=sys.argv[2]) as c, c.session("tidy", ttl=5) as s:
        async with s.lease("lease://acme/renderers/tidy", ttl=5):
            pass

asyncio.run(main())
print("done")
"""


def test_a_script_that_exits_without_closing_warns(broker: Broker) -> None:
    def run(script: str) -> str:
        out = subprocess.run(
            [sys.executable, "-W", "always::ResourceWarning", "-c", script, broker.url, TOKENS["a"][0]],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert out.stdout.strip() == "done"
        return out.stderr

    err = run(SCRIPT_LEFT_OPEN)
    assert "ResourceWarning: unclosed <muster.Session owner_id='forgotten'" in err, err
    assert "ResourceWarning: unclosed <muster.Client" in err, err
    assert "ResourceWarning" not in run(SCRIPT_CLOSED)


def test_sync_unclosed_client_and_session_warn(broker: Broker) -> None:
    c = muster.sync.Client(broker.url, token=TOKENS["a"][0])
    loop = c._loop
    s = c.new_session("forgotten", ttl=5)
    try:
        with pytest.warns(ResourceWarning, match="unclosed <muster.Session owner_id='forgotten'"):
            del s
            gc.collect()
        with pytest.warns(ResourceWarning, match="unclosed <muster.sync.Client"):
            del c
            gc.collect()
    finally:
        loop.stop()
