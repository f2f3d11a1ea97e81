"""The broker of each request (docs/client-operations.md, "Several
brokers"): following wrong_broker, moving on from a broker that is
unreachable or answers family_unavailable, resending what no broker acted
on. Against fake brokers (an httpx.MockTransport that answers per host),
and the sync facade against the real broker behind a dead base URL."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Awaitable, Callable

import httpx
import pytest

import muster
import muster.sync
from muster._conn import MAX_FOLLOWS
from muster._http import misdirected_to, parse_bases

from .conftest import TOKENS, Broker, raises_transport

pytestmark = pytest.mark.anyio

SESSION = {
    "session_id": "0123456789abcdef0123456789abcdef",
    "holder_incarnation": "h",
    "owner_id": "w",
    "ttl_ms": 10000,
    "expires_at": "2030-01-01T00:00:00Z",
    "epoch": "e",
}


def misdirect(owner: str) -> httpx.Response:
    body = {
        "type": "about:blank",
        "title": "Misdirected Request",
        "status": 421,
        "code": "wrong_broker",
        "owner": owner,
    }
    return httpx.Response(421, json=body, headers={"Content-Type": "application/problem+json"})


def brokers(answer: Callable[[str], httpx.Response]) -> tuple[httpx.AsyncClient, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def handle(req: httpx.Request) -> httpx.Response:
        req.read()
        seen.append(req)
        if req.method == "DELETE":  # a session's close
            return httpx.Response(204)
        return answer(req.url.netloc.decode())

    return httpx.AsyncClient(transport=httpx.MockTransport(handle)), seen


async def test_follows_with_body_and_token_then_goes_straight_to_the_owner() -> None:
    def answer(host: str) -> httpx.Response:
        if host == "owner:2":
            return httpx.Response(201, json=SESSION)
        return misdirect("http://owner:2")

    hc, seen = brokers(answer)
    c = muster.Client("http://first:1", token="t", http_client=hc)
    s = await c.new_session("w", 10)
    assert s.id == SESSION["session_id"]
    assert [r.url.netloc.decode() for r in seen] == ["first:1", "owner:2"]
    assert seen[1].method == "POST" and seen[1].content == seen[0].content
    assert json.loads(seen[1].content)["owner_id"] == "w"
    assert seen[1].headers["Authorization"] == "Bearer t"
    await s.close()
    assert all(r.url.netloc.decode() == "owner:2" for r in seen[2:])


async def test_gives_up_after_max_follows_and_without_follow_does_not_follow() -> None:
    hc, seen = brokers(lambda host: misdirect("http://b:2" if host == "a:1" else "http://a:1"))
    c = muster.Client("http://a:1", http_client=hc)
    with pytest.raises(muster.WrongBrokerError) as e:
        await c.new_session("w", 10)
    assert e.value.owner
    assert len(seen) == 1 + MAX_FOLLOWS

    hc2, seen2 = brokers(lambda host: misdirect("http://b:2"))
    c2 = muster.Client("http://a:1", http_client=hc2, without_follow=True)
    with pytest.raises(muster.WrongBrokerError) as e2:
        await c2.new_session("w", 10)
    assert e2.value.owner == "http://b:2"
    assert len(seen2) == 1


async def test_an_owner_that_stops_answering_is_forgotten() -> None:
    """A refused connection to the owner forgets it and sends the request
    to the base URL at once; the base URL names the owner again, which is
    followed: at most 1 base URL + MAX_FOLLOWS failures, then the error."""
    up = True

    def answer(host: str) -> httpx.Response:
        if host == "owner:2":
            if not up:
                raise httpx.ConnectError("refused")
            return httpx.Response(200, json={"items": [], "snapshot": {"epoch": "e", "revision": 1}})
        return misdirect("http://owner:2")

    hc, seen = brokers(answer)
    c = muster.Client("http://first:1", http_client=hc)
    await c.list_page("lease://a/b/*")
    assert hosts(seen) == ["first:1", "owner:2"]
    up = False
    with raises_transport(httpx.ConnectError):
        await c.list_page("lease://a/b/*")
    assert hosts(seen[2:]) == ["owner:2", "first:1", "owner:2", "first:1", "owner:2"]
    assert c._owner is None  # forgotten: the next request asks first:1
    up = True
    await c.list_page("lease://a/b/*")
    assert hosts(seen[7:]) == ["first:1", "owner:2"]


PAGE = {"items": [], "snapshot": {"epoch": "e", "revision": 1}}


def hosts(seen: list[httpx.Request]) -> list[str]:
    return [r.url.netloc.decode() for r in seen]


def unavailable() -> httpx.Response:
    body = {"type": "about:blank", "title": "Service Unavailable", "status": 503, "code": "family_unavailable"}
    return httpx.Response(503, json=body, headers={"Content-Type": "application/problem+json"})


async def test_a_refused_first_base_url_reaches_the_second() -> None:
    def answer(host: str) -> httpx.Response:
        if host == "dead:1":
            raise httpx.ConnectError("refused")
        return httpx.Response(201, json=SESSION)

    hc, seen = brokers(answer)
    c = muster.Client(["http://dead:1", "http://b:2"], token="t", http_client=hc)
    s = await c.new_session("w", 10)
    assert hosts(seen) == ["dead:1", "b:2"]
    assert seen[1].content == seen[0].content and seen[1].headers["Authorization"] == "Bearer t"
    assert s._host == "b:2"
    await s.close()  # the current base URL is b:2 now: dead:1 is not asked again
    assert hosts(seen[2:]) == ["b:2"]


async def test_family_unavailable_moves_on_resends_and_loses_the_brokers_sessions() -> None:
    """b1 stops serving the family: the request that hears it is sent on to
    b2 and succeeds there, and the session b1 held is lost at once all the
    same (prompt loss)."""
    cut = False

    def answer(host: str) -> httpx.Response:
        if host == "b1:1" and cut:
            return unavailable()
        if host == "b1:1":
            return httpx.Response(201, json=SESSION)
        return httpx.Response(200, json=PAGE)

    hc, seen = brokers(answer)
    c = muster.Client("http://b1:1, http://b2:2/", http_client=hc)
    s = await c.new_session("w", 600)
    cut = True
    await c.list_page("lease://a/b/*")
    assert hosts(seen) == ["b1:1", "b1:1", "b2:2"]
    assert isinstance(s.error, muster.SessionLostError) and "family_unavailable" in str(s.error)
    await c.list_page("lease://a/b/*")
    assert hosts(seen[3:]) == ["b2:2"]


async def test_one_base_url_forgets_an_unavailable_owner_but_does_not_ask_itself_twice() -> None:
    moved = False

    def answer(host: str) -> httpx.Response:
        if host == "owner:2":
            return unavailable() if moved else httpx.Response(200, json=PAGE)
        return httpx.Response(200, json=PAGE) if moved else misdirect("http://owner:2")

    hc, seen = brokers(answer)
    c = muster.Client("http://first:1", http_client=hc)
    await c.list_page("lease://a/b/*")
    moved = True  # the family went to first:1
    await c.list_page("lease://a/b/*")
    assert hosts(seen) == ["first:1", "owner:2", "owner:2", "first:1"]

    hc2, seen2 = brokers(lambda host: unavailable())
    c2 = muster.Client("http://only:1", http_client=hc2)
    with pytest.raises(muster.FamilyUnavailableError):
        await c2.list_page("lease://a/b/*")
    assert hosts(seen2) == ["only:1"]  # returned: the caller's retry, with backoff, asks again


async def test_a_failure_after_sending_moves_on_without_resending() -> None:
    def answer(host: str) -> httpx.Response:
        if host == "a:1":
            raise httpx.RemoteProtocolError("reset")  # the broker may have acted
        return httpx.Response(200, json=PAGE)

    hc, seen = brokers(answer)
    c = muster.Client(["http://a:1", "http://b:2"], http_client=hc)
    with raises_transport(httpx.RemoteProtocolError):
        await c.list_page("lease://a/b/*")
    await c.list_page("lease://a/b/*")  # the caller's retry goes to the next broker
    assert hosts(seen) == ["a:1", "b:2"]


async def test_resending_is_bounded_by_every_base_url_once_plus_max_follows() -> None:
    def refuse(host: str) -> httpx.Response:
        raise httpx.ConnectError("refused")

    hc, seen = brokers(refuse)
    c = muster.Client("http://a:1,http://b:2,http://c:3", http_client=hc)
    with raises_transport(httpx.ConnectError):
        await c.list_page("lease://a/b/*")
    assert len(seen) == 3 + MAX_FOLLOWS
    assert hosts(seen) == ["a:1", "b:2", "c:3", "a:1", "b:2"]


def gated(answer: Callable[[str], Awaitable[httpx.Response]]) -> tuple[httpx.AsyncClient, list[str]]:
    seen: list[str] = []

    async def handle(req: httpx.Request) -> httpx.Response:
        seen.append(req.url.netloc.decode())
        return await answer(req.url.netloc.decode())

    return httpx.AsyncClient(transport=httpx.MockTransport(handle)), seen


async def test_concurrent_failures_at_one_broker_move_the_client_once() -> None:
    both = asyncio.Event()
    at_a = 0

    async def answer(host: str) -> httpx.Response:
        nonlocal at_a
        if host == "a:1":
            at_a += 1
            if at_a == 2:
                both.set()
            await both.wait()
            raise httpx.ConnectError("refused")
        return httpx.Response(200, json=PAGE)

    hc, seen = gated(answer)
    c = muster.Client(["http://a:1", "http://b:2", "http://c:3"], http_client=hc)
    await asyncio.gather(c.list_page("lease://a/b/*"), c.list_page("lease://a/b/*"))
    assert seen == ["a:1", "a:1", "b:2", "b:2"]  # not c:3: the client moved once
    assert c._target().url == "http://b:2"


async def test_the_callers_cancellation_moves_nothing() -> None:
    async def answer(host: str) -> httpx.Response:
        await asyncio.sleep(3600)
        raise AssertionError("not reached")

    hc, seen = gated(answer)
    c = muster.Client(["http://a:1", "http://b:2"], http_client=hc)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await c.list_page("lease://a/b/*")
    assert seen == ["a:1"] and c._target().url == "http://a:1"


def test_base_urls_parsed() -> None:
    assert parse_bases("http://a:1") == ["http://a:1"]
    assert parse_bases(" http://a:1/ ,https://b:2") == ["http://a:1", "https://b:2"]
    assert parse_bases(["http://a:1", "http://b:2/"]) == ["http://a:1", "http://b:2"]
    c = muster.Client(("http://a:1", "http://b:2"))
    assert c.base_url == "http://a:1" and c.base_urls == ["http://a:1", "http://b:2"]
    for bad in ("http://a:1,", "http://a:1,ftp://b", "http://a:1,b:2", ",", [], ["http://a:1", "http://"]):
        with pytest.raises(ValueError, match="want http"):
            muster.Client(bad)


def test_the_sync_facade_takes_a_list_and_leaves_a_dead_first_broker(broker: Broker) -> None:
    with socket.socket() as sk:  # a loopback port nobody listens on: connections refused
        sk.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sk.getsockname()[1]}"
    with (
        muster.sync.Client([dead, broker.url], token=TOKENS["a"][0]) as c,
        c.new_session("script", ttl=30) as s,
    ):
        lease = s.acquire("lease://acme/renderers/multi", ttl=15)
        assert lease.fencing_token > 0
        lease.release()


@pytest.mark.parametrize(
    ("body", "ctype", "want"),
    [
        ('{"code":"wrong_broker","owner":"http://10.0.0.2:7420"}', "application/problem+json", "http://10.0.0.2:7420"),
        ('{"code":"wrong_broker","owner":"javascript:alert(1)"}', "application/problem+json", None),
        ('{"code":"wrong_broker"}', "application/problem+json", None),
        ('{"code":"not_owner","owner":"http://x"}', "application/problem+json", None),
        ("not json", "text/plain", None),
    ],
)
def test_misdirected_to(body: str, ctype: str, want: str | None) -> None:
    assert misdirected_to(ctype, body.encode()) == want
