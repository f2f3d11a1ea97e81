"""The observer: option validation, the bootstrap against the real broker,
recovery, fatal errors, reconciliation, epoch change, and a prompt aclose
that leaves no task behind."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator

import pytest

import muster

from .conftest import TOKENS, Broker
from .fakebroker import FakeBroker, Request, marker, wire_item

pytestmark = pytest.mark.anyio

SEL = "lease://acme/renderers/*"


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"shortest_ttl": -1}, "the shortest TTL must not be negative"),
        ({"shortest_ttl": math.nan}, "the shortest TTL must not be negative"),
        ({"reconcile_interval": 0}, "the reconciliation interval must be at least 10ms"),
        ({"reconcile_interval": 0.001}, "the reconciliation interval must be at least 10ms"),
        ({"reconcile_jitter": -0.1}, "the reconciliation jitter must be in [0, 1)"),
        ({"reconcile_jitter": 1}, "the reconciliation jitter must be in [0, 1)"),
        ({"reconcile_jitter": math.nan}, "the reconciliation jitter must be in [0, 1)"),
        ({"page_size": 0}, "the page size must be in 1..500"),
        ({"page_size": 501}, "the page size must be in 1..500"),
    ],
)
async def test_options_refused(kw: dict[str, float], message: str) -> None:
    before = asyncio.all_tasks()
    async with muster.Client("http://127.0.0.1:1") as c:
        with pytest.raises(muster.InvalidRequestError) as e:
            c.observe(SEL, **kw)  # type: ignore[arg-type]
        assert e.value.detail == "Observe: " + message
    assert asyncio.all_tasks() == before


def test_reconcile_interval() -> None:
    assert muster.reconcile_interval(0) == 60
    assert muster.reconcile_interval(2) == 5
    assert muster.reconcile_interval(30) == 15
    assert muster.reconcile_interval(600) == 60


async def test_defaults(client: muster.Client) -> None:
    o = client.observe(SEL)
    assert o.reconcile_every == 60
    await o.aclose()
    o = client.observe(SEL, shortest_ttl=30)
    assert o.reconcile_every == 15
    await o.aclose()
    o = client.observe(SEL, shortest_ttl=30, reconcile_interval=0.5)
    assert o.reconcile_every == 0.5
    await o.aclose()


async def test_observer_follows_the_broker(client: muster.Client) -> None:
    before = asyncio.all_tasks()
    async with await client.new_session("w1", 10) as s:
        for i in range(12):
            await s.acquire(f"lease://acme/renderers/doc-{i}", 30)
        o = client.observe(SEL, page_size=5)
        seen: list[bool] = []
        remove = o.on_change(lambda obs: seen.append(obs.is_ready))
        assert not o.is_ready
        async with asyncio.timeout(5):
            await o.ready()
        v = o.view()
        assert v.ready and len(v.items) == 12 and v.epoch == s.epoch and seen and seen[-1]
        assert [i.route for i in v.items] == sorted(i.route for i in v.items)
        views = aiter(o)
        assert len((await anext(views)).items) == 12
        lease = await s.acquire("lease://acme/renderers/new", 30)
        async with asyncio.timeout(5):
            while len((await anext(views)).items) != 13:
                pass
        await lease.release()
        async with asyncio.timeout(5):
            while "lease://acme/renderers/new" in [i.route for i in o.view().items]:
                await o.changed()
        remove()
        n = len(seen)
        await o.aclose()
        assert len(seen) == n
        assert isinstance(o.error, muster.ClosedError) and o.closed and not o.is_ready and o.done.is_set()
        with pytest.raises(muster.ClosedError):
            await o.ready()
        assert o.stats().bootstraps == 1 and o.stats().attempts == 1
    assert asyncio.all_tasks() == before


async def test_observer_stops_on_a_fatal_error(broker: Broker) -> None:
    async with muster.Client(broker.url, token=TOKENS["narrow"][0]) as c:
        o = c.observe("lease://acme/**")
        async with asyncio.timeout(5):
            await o.done.wait()
        assert isinstance(o.error, muster.ForbiddenError)
        with pytest.raises(muster.ForbiddenError):
            await o.ready()
        await o.aclose()
        assert isinstance(o.error, muster.ForbiddenError)


async def test_reconciliation_and_epoch_change(broker: Broker) -> None:
    async with muster.Client(broker.url, token=TOKENS["a"][0]) as c:
        s = await c.new_session("w1", 10)
        await s.acquire("lease://acme/renderers/a", 30)
        o = c.observe(SEL, reconcile_interval=0.2, reconcile_jitter=0)
        async with asyncio.timeout(5):
            await o.ready()
        epoch = o.view().epoch
        await asyncio.sleep(1.0)
        assert o.stats().reconciliations >= 2 and o.stats().bootstraps >= 3 and o.is_ready
        await asyncio.to_thread(broker.restart)
        s2 = await c.new_session("w2", 10)
        await s2.acquire("lease://acme/renderers/b", 30)
        async with asyncio.timeout(5):
            while not (o.is_ready and o.view().epoch != epoch and len(o.view().items) == 1):
                await o.changed()
        assert [i.route for i in o.view().items] == ["lease://acme/renderers/b"]
        assert o.stats().recoveries >= 1
        await o.aclose()
        await s2.close()
        await s.close()


@pytest.fixture
def hanging() -> Iterator[FakeBroker]:
    """A broker whose LIST pages hang; its watch sends a marker with a cursor."""

    async def handle(req: Request) -> None:
        if req.path == "/v1/leases/watch":
            await req.start_stream()
            await req.event("snapshot", marker("e1", 1, "cur"))
        await req.hang()

    f = FakeBroker(handle)
    yield f
    f.close()


@pytest.fixture
def hanging_marker() -> Iterator[FakeBroker]:
    """A broker whose watch answers its headers, then nothing."""

    async def handle(req: Request) -> None:
        await req.start_stream()
        await req.hang()

    f = FakeBroker(handle)
    yield f
    f.close()


@pytest.mark.parametrize("where", ["hanging", "hanging_marker"])
async def test_aclose_is_prompt_and_leaves_no_task(where: str, request: pytest.FixtureRequest) -> None:
    fake: FakeBroker = request.getfixturevalue(where)
    before = asyncio.all_tasks()
    async with muster.Client(fake.url) as c:
        o = c.observe("lease://acme/r/*")
        await asyncio.sleep(0.3)  # the request now hangs
        assert not o.is_ready and fake.watches == 1
        start = time.monotonic()
        async with asyncio.timeout(2):  # a hanging aclose fails here instead of hanging the suite
            await o.aclose()
        assert time.monotonic() - start < 0.5
        assert isinstance(o.error, muster.ClosedError)
        assert asyncio.all_tasks() == before


async def test_recovery_backs_off_one_bootstrap_at_a_time() -> None:
    async def handle(req: Request) -> None:
        await req.start_stream()
        await req.event("snapshot", marker("e1", 1, None, wire_item("lease://acme/r/a", "w1")))
        await req.event("overflow", {"reason": "overflow"})

    fake = FakeBroker(handle)
    try:
        async with muster.Client(fake.url) as c:
            o = c.observe("lease://acme/r/*")
            await asyncio.sleep(1.5)
            await o.aclose()
        # 50+100+200+400+800 ms of backoff (jittered down to half) fit about
        # 6..10 attempts in 1.5 s (fewer on a loaded machine); without
        # backoff it would be hundreds.
        assert 3 <= fake.watches <= 12
        assert fake.max_open <= 1
        st = o.stats()
        assert st.attempts == fake.watches and st.bootstraps >= 1
        assert st.bootstraps - 1 <= st.recoveries <= st.bootstraps
        assert isinstance(o.error, muster.ClosedError)
    finally:
        fake.close()
