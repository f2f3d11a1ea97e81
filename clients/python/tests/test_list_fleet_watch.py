"""LIST, fleet helpers and watch streams against the real broker."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

import muster

from .conftest import TOKENS, Broker

pytestmark = pytest.mark.anyio


async def test_list_pages_one_snapshot(client: muster.Client) -> None:
    async with await client.new_session("w1", 10) as s:
        for i in range(7):
            await s.acquire(f"lease://acme/renderers/doc-{i}", 30)
        await s.acquire("lease://acme/other/x", 30)
        first = await client.list_page("lease://acme/renderers/*", limit=3)
        assert len(first.items) == 3 and first.next_cursor and first.epoch == s.epoch
        await s.acquire("lease://acme/renderers/late", 30)  # after the snapshot
        rest = [it async for it in client.list("lease://acme/renderers/*", limit=3, cursor=first.next_cursor)]
        routes = [it.route for it in first.items + rest]
        assert routes == sorted(f"lease://acme/renderers/doc-{i}" for i in range(7))
        assert all(it.owner_id == "w1" and it.holder_incarnation == s.holder_incarnation for it in rest)
        everything = [it.route async for it in client.list("lease://acme/**", limit=2)]
        assert len(everything) == 9
        exact = await client.list_page("lease://acme/other/x")
        assert [it.route for it in exact.items] == ["lease://acme/other/x"] and exact.next_cursor == ""
        with pytest.raises(muster.InvalidCursorError):
            await client.list_page("lease://acme/other/*", cursor=first.next_cursor)
        with pytest.raises(muster.InvalidSelectorError):
            await client.list_page("lease://acme")


async def test_stopping_a_list_early_sends_nothing_more(client: muster.Client) -> None:
    async with await client.new_session("w1", 10) as s:
        for i in range(5):
            await s.acquire(f"lease://acme/r/doc-{i}", 30)
        sent = 0

        async def count(_: Any) -> None:
            nonlocal sent
            sent += 1

        client.http.event_hooks["request"].append(count)
        async for _ in client.list("lease://acme/r/*", limit=2):
            break
        assert sent == 1


@dataclass
class Repo:
    url: str

    @classmethod
    def validate(cls, spec: Any) -> Repo:
        if not isinstance(spec, dict) or not isinstance(spec.get("url"), str):
            raise ValueError("not a repo")
        return cls(url=spec["url"])


async def test_fleet(client: muster.Client) -> None:
    f = client.fleet("monitors")
    a = await f.register("repo", {"url": "https://a"})
    b = await f.register("repo", {"nope": 1})
    c = await f.register("repo", {"url": "https://c"})
    assert (a.name, b.name, c.name) == ("repo-1", "repo-2", "repo-3")
    assert (await f.get("repo-3")).spec == {"url": "https://c"}
    assert [s.name async for s in f.desired()] == ["repo-1", "repo-2", "repo-3"]
    swept = await f.sweep(Repo.validate)
    assert [(k.name, k.spec) for k in swept.kept] == [("repo-1", Repo("https://a")), ("repo-3", Repo("https://c"))]
    assert swept.dropped == ["repo-2"]
    with pytest.raises(muster.SpecNotFoundError):
        await f.get("repo-2")
    await f.forget("repo-2")  # absent: succeeds
    with pytest.raises(muster.InvalidNameError):
        await f.forget("Repo-1")
    assert [s.name async for s in f.desired()] == ["repo-1", "repo-3"]
    plan = await f.plan(["repo-1", "repo-3"], ["repo-3", "gone"])
    assert (plan.missing, plan.orphans) == (["repo-1"], ["gone"])
    async with await client.new_session("w", 10) as s:
        await s.acquire("lease://monitors/repos/repo-3", 30)
        await s.acquire("lease://monitors/repos/old-9", 30)
        gap = await f.gap("lease://monitors/repos/*")
        assert (gap.missing, gap.orphans) == (["repo-1"], ["old-9"]) and gap.revision > 0
    nested = client.fleet("teams/alpha")
    assert (await nested.register("job", [1, 2])).name == "job-1"
    assert [s.spec async for s in nested.desired()] == [[1, 2]]
    with pytest.raises(muster.InvalidRequestError, match="root must be"):
        await client.fleet("Bad Root").register("job", 1)


async def test_watch(client: muster.Client) -> None:
    async with await client.new_session("w1", 10) as s:
        await s.acquire("lease://acme/renderers/a", 30)
        async with await client.watch("lease://acme/renderers/*") as sub:
            (page,) = sub.marker.selectors
            assert [i.route for i in page.items] == ["lease://acme/renderers/a"] and sub.marker.epoch == s.epoch
            b = await s.acquire("lease://acme/renderers/b", 30)
            await b.release()
            async with asyncio.timeout(5):
                ch1 = await sub.get()
                ch2 = await sub.get()
            assert ch1 is not None and ch2 is not None
            assert (ch1.kind, ch1.route, ch1.selector) == ("acquired", b.route, "lease://acme/renderers/*")
            assert ch1.item is not None and ch1.item.owner_id == "w1"
            assert ch2.kind == muster.ChangeKind.RELEASED and ch2.revision > ch1.revision > sub.marker.revision
        assert isinstance(sub.error, muster.ClosedError)
        with pytest.raises(muster.InvalidSelectorError):
            await client.watch("lease://nope")
        with pytest.raises(muster.InvalidSelectorError):
            await client.watch()


async def test_session_watch_unsubscribe(client: muster.Client) -> None:
    async with await client.new_session("w1", 10) as s:
        sub = await s.watch("lease://acme/renderers/*")
        await sub.unsubscribe("lease://acme/renderers/*")
        async with asyncio.timeout(5):
            assert [c async for c in sub] == []
        assert isinstance(sub.error, muster.StreamEndError) and sub.error.reason == "unsubscribed"
        assert muster.advice(sub.error) is muster.Retry.RESTART
        await sub.aclose()
        lone = await client.watch("lease://acme/renderers/*")
        with pytest.raises(muster.InvalidRequestError):
            await lone.unsubscribe("lease://acme/renderers/*")
        await lone.aclose()


async def test_forbidden_and_unauthenticated(broker: Broker) -> None:
    async with muster.Client(broker.url, token=TOKENS["narrow"][0]) as narrow:
        with pytest.raises(muster.ForbiddenError):
            await narrow.list_page("lease://acme/**")
        assert (await narrow.list_page("lease://acme/renderers/*")).items == []
    async with muster.Client(broker.url, token="wrong") as nobody:
        with pytest.raises(muster.UnauthenticatedError):
            await nobody.list_page("lease://acme/renderers/*")


def test_base_url_checked() -> None:
    for bad in ("127.0.0.1:7420", "ftp://x", "http://"):
        with pytest.raises(ValueError, match="want http"):
            muster.Client(bad)
