"""The merged contract's additions against the real broker: the scope of a
429 limit (session_limit, spec_limit) and the paged fleet gap."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import muster

from .conftest import TOKENS, Broker

pytestmark = pytest.mark.anyio


@pytest.fixture
def small_broker(broker_bin: Path) -> Iterator[Broker]:
    """A broker where family fam-a (token "a") may hold one session and two
    specs per fleet root; fam-b keeps the default quotas."""
    b = Broker(
        broker_bin,
        extra_config="limits:\n  families:\n    fam-a: {sessions: 1, fleet_specs_per_root: 2}\n",
    )
    yield b
    b.close()


async def test_limits_carry_their_scope(small_broker: Broker) -> None:
    async with (
        muster.Client(small_broker.url, token=TOKENS["a"][0]) as a,
        muster.Client(small_broker.url, token=TOKENS["b"][0]) as b,
    ):
        async with await a.new_session("w1", 10):
            with pytest.raises(muster.SessionLimitError) as ei:
                await a.new_session("w2", 10)
            assert (ei.value.status, ei.value.scope) == (429, "family")
            assert ei.value.advice is muster.Retry.BACKOFF
            async with await b.new_session("w3", 10):  # another family is unaffected
                pass
        f = a.fleet("monitors")
        assert [(await f.register("repo", i)).name for i in (1, 2)] == ["repo-1", "repo-2"]
        with pytest.raises(muster.SpecLimitError) as si:
            await f.register("repo", 3)
        assert (si.value.status, si.value.scope) == (429, "root")
        assert si.value.advice is muster.Retry.NO
        assert [s.name async for s in f.desired()] == ["repo-1", "repo-2"]  # nothing left behind
        await f.forget("repo-1")
        assert (await f.register("repo", 3)).name == "repo-3"


async def test_gap_reads_every_page(broker: Broker) -> None:
    """The broker pages a gap at 10,000 names of each side by default; a hook
    of the test's own httpx client asks for pages of 2 names so a small fleet
    spans several pages of the real broker."""
    gap_requests: list[httpx.URL] = []

    async def small_pages(req: httpx.Request) -> None:
        if req.url.path.endswith("/gap"):
            req.url = req.url.copy_add_param("limit", "2")
            gap_requests.append(req.url)

    token = TOKENS["a"][0]
    async with (
        httpx.AsyncClient(timeout=None, event_hooks={"request": [small_pages]}) as http,
        muster.Client(broker.url, token=token, http_client=http) as paged,
        muster.Client(broker.url, token=token) as whole,
    ):
        f = whole.fleet("monitors")
        for _ in range(5):
            await f.register("repo", {})
        async with await whole.new_session("w", 10) as s:
            for name in ("repo-4", "repo-5", "old-1", "old-2", "old-3"):
                await s.acquire("lease://monitors/repos/" + name, 30)
            want = await f.gap("lease://monitors/repos/*")
            assert (want.missing, want.orphans) == (["repo-1", "repo-2", "repo-3"], ["old-1", "old-2", "old-3"])
            got = await paged.fleet("monitors").gap("lease://monitors/repos/*")
            assert (got.missing, got.orphans, got.revision) == (want.missing, want.orphans, want.revision)
            assert len(gap_requests) >= 3 and "cursor" not in gap_requests[0].params
            assert all("cursor" in u.params for u in gap_requests[1:])
