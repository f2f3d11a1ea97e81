"""Following wrong_broker (docs/placement.md) against fake brokers: an
httpx.MockTransport that answers per host."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

import muster
from muster._client import MAX_FOLLOWS, misdirected_to

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
    up = False
    for _ in range(2):
        with pytest.raises(httpx.ConnectError):
            await c.list_page("lease://a/b/*")
    assert [r.url.netloc.decode() for r in seen] == ["first:1", "owner:2", "owner:2", "first:1", "owner:2"]


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
