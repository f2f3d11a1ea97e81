"""Sessions and leases against the real broker."""

from __future__ import annotations

import asyncio
import math

import pytest

import muster

from .conftest import TOKENS, Broker

pytestmark = pytest.mark.anyio

R = "lease://acme/renderers/doc-1"


async def test_lease_lifecycle(client: muster.Client) -> None:
    async with await client.new_session("w1", 10) as s1, await client.new_session("w2", 10) as s2:
        assert len(s1.id) == 32 and s1.owner_id == "w1" and s1.ttl == 10 and s1.epoch == client.epoch
        lease = await s1.acquire(R, 5)
        assert lease.fencing_token >= 1 and lease.route == R and lease.error is None
        assert await s1.acquire(R, 5) is lease  # already held: the same handle
        with pytest.raises(muster.LeaseHeldError) as held:
            await s2.acquire(R, 5)
        assert held.value.status == 409 and held.value.advice is muster.Retry.BACKOFF
        with pytest.raises(muster.WaitTimeoutError):
            await s2.acquire(R, 5, wait=0.2)
        before = lease.expires_at
        await lease.extend(8)
        assert lease.renewals == 1 and lease.expires_at > before
        status = await client.get(R)
        assert status.held and status.item is not None and status.item.holder_incarnation == s1.holder_incarnation
        waiter = asyncio.create_task(s2.acquire(R, 5, wait=5))
        await asyncio.sleep(0.2)
        await lease.release()
        assert lease.lost.is_set() and isinstance(lease.error, muster.ReleasedError)
        await lease.release()  # again: nothing to do
        taken = await waiter  # the FIFO waiter is granted
        assert taken.fencing_token > lease.fencing_token
        with pytest.raises(muster.ReleasedError):
            await lease.extend(5)


async def test_foreign_token_is_fenced_and_loses_the_lease(client: muster.Client) -> None:
    async with await client.new_session("w1", 10) as s:
        lease = await s.acquire(R, 5)
        await lease.release()
        again = await s.acquire(R, 5)
        stale = await s.acquire("lease://acme/renderers/doc-2", 5)
        stale.fencing_token = again.fencing_token - 1  # an old token of the same session
        stale._r = again._r
        with pytest.raises(muster.LeaseLostError) as lost:
            await stale.extend(5)
        assert isinstance(lost.value.cause, muster.FencedError | muster.NotOwnerError)
        assert muster.advice(lost.value) is muster.Retry.RESTART


async def test_local_refusals_send_nothing(client: muster.Client) -> None:
    async with await client.new_session("w1", 10) as s:
        for bad in ("lease://acme/renderers", "acme/renderers/x", "lease://acme//x", "lease://a/b/c/d"):
            with pytest.raises(muster.InvalidRouteError) as e:
                await s.acquire(bad, 1)
            assert e.value.status == 0
        with pytest.raises(muster.InvalidRouteError) as e:
            await s.acquire("lease://acme/*/x", 1)
        assert e.value.status == 400
        with pytest.raises(muster.InvalidRequestError):
            await s.acquire(R, 0.01)  # below 100 ms
        for bad_ttl in (math.nan, math.inf):
            with pytest.raises(muster.InvalidRequestError) as refused:
                await s.acquire(R, bad_ttl)
            assert refused.value.status == 0
        assert not (await client.get(R)).held


async def test_session_block(client: muster.Client) -> None:
    async with client.session("w1", 10) as s:
        lease = await s.acquire(R, 5)
        assert (await client.get(R)).held
    assert isinstance(s.error, muster.ClosedError) and isinstance(lease.error, muster.LeaseLostError)
    assert not (await client.get(R)).held


async def test_session_close_loses_leases(client: muster.Client) -> None:
    s = await client.new_session("w1", 10)
    lease = await s.acquire(R, 5)
    await s.close()
    assert s.done.is_set() and isinstance(s.error, muster.ClosedError)
    assert isinstance(lease.error, muster.LeaseLostError) and isinstance(lease.error.cause, muster.ClosedError)
    with pytest.raises(muster.ClosedError):
        await s.acquire(R, 5)
    assert not (await client.get(R)).held
    await s.close()  # twice: nothing more


async def test_lease_local_deadline(client: muster.Client) -> None:
    async with await client.new_session("w1", 10) as s:
        lease = await s.acquire(R, 0.3)
        async with asyncio.timeout(2):
            await lease.lost.wait()
        assert isinstance(lease.error, muster.LeaseLostError)
        assert isinstance(lease.error.cause, muster.LeaseExpiredError)


async def test_with_lease(client: muster.Client) -> None:
    async with await client.new_session("w1", 10) as s:

        async def work(lease: muster.Lease) -> int:
            await asyncio.sleep(1.5)  # longer than ttl: extended in the background
            assert lease.error is None
            return lease.fencing_token

        token = await s.with_lease(R, 1.0, work)
        assert token >= 1 and not (await client.get(R)).held

        async def boom(lease: muster.Lease) -> None:
            raise ValueError("boom")

        with pytest.raises(ValueError, match="boom"):
            await s.with_lease(R, 1, boom)
        assert not (await client.get(R)).held

    s2 = await client.new_session("w2", 10)
    cancelled = asyncio.Event()

    async def lost_midway(lease: muster.Lease) -> None:
        asyncio.get_running_loop().call_later(0.1, lambda: asyncio.ensure_future(s2.close()))
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(muster.LeaseLostError):
        await s2.with_lease(R, 1, lost_midway)
    assert cancelled.is_set()


async def test_session_lost_when_the_broker_restarts(broker: Broker) -> None:
    async with muster.Client(broker.url, token=TOKENS["a"][0]) as c:
        s = await c.new_session("w1", 1)
        lease = await s.acquire(R, 5)
        await asyncio.to_thread(broker.restart)
        async with asyncio.timeout(5):
            await s.done.wait()
        assert isinstance(s.error, muster.SessionLostError)
        assert muster.advice(s.error) is muster.Retry.RESTART
        assert isinstance(lease.error, muster.LeaseLostError)
        await s.close()
        assert isinstance(s.error, muster.SessionLostError)


async def test_session_lost_when_keepalives_fail(broker: Broker) -> None:
    async with muster.Client(broker.url, token=TOKENS["a"][0]) as c:
        s = await c.new_session("w1", 1)
        await asyncio.to_thread(broker.kill)
        async with asyncio.timeout(5):
            await s.done.wait()
        assert isinstance(s.error, muster.SessionLostError) and "within the TTL" in str(s.error)
        await s.close()
