"""Batches against the real broker: the results and handles are those of
the single operations (as clients/go/batch_test.go checks)."""

from __future__ import annotations

import pytest

import muster

from .conftest import TOKENS, Broker

pytestmark = pytest.mark.anyio


async def test_batch_lifecycle(client: muster.Client) -> None:
    async with await client.new_session("w1", 10) as s, await client.new_session("w2", 10) as other:
        taken = await other.acquire("lease://acme/r/taken", 5)
        held = await s.acquire("lease://acme/r/held", 5)
        b = s.batch()
        for i in range(5):
            b.acquire(f"lease://acme/r/d{i}", 5)
        b.acquire("lease://acme/r/taken", 5).acquire("lease://acme/r/held", 5)
        assert len(b) == 7
        res = await b.send()
        assert len(res) == 7
        mine = []
        for i, r in enumerate(res[:5]):
            assert r.error is None and r.op == "acquire" and r.route == f"lease://acme/r/d{i}"
            assert r.lease is not None and r.lease.fencing_token > 0
            mine.append(r.lease)
        assert isinstance(res[5].error, muster.LeaseHeldError) and res[5].lease is None
        assert res[5].error.status == 409 and res[5].error.advice is muster.Retry.BACKOFF
        assert res[6].error is None and res[6].lease is held  # already held: the same handle
        assert (await client.get("lease://acme/r/d3")).held

        ext = s.batch()
        for lease in mine:
            ext.extend(lease, 8)
        assert all(r.error is None for r in await ext.send())
        assert all(lease.renewals == 1 for lease in mine)

        rel = s.batch()
        for lease in mine:
            rel.release(lease)
        rel.release(mine[0])  # twice: settled locally
        assert all(r.error is None for r in await rel.send())
        assert all(isinstance(lease.error, muster.ReleasedError) for lease in mine)
        assert not (await client.get("lease://acme/r/d0")).held
        assert taken.error is None


async def test_batch_refused(client: muster.Client) -> None:
    async with await client.new_session("w1", 10) as s, await client.new_session("w2", 10) as other:
        theirs = await other.acquire("lease://acme/r/theirs", 5)
        too_many = s.batch()
        for i in range(muster.MAX_BATCH_OPS + 1):
            too_many.acquire(f"lease://acme/r/x{i}", 1)
        cases = [
            (s.batch(), muster.InvalidRequestError),
            (too_many, muster.InvalidRequestError),
            (s.batch().acquire("lease://acme/r/x", 1).acquire("lease://acme/x", 1), muster.InvalidRouteError),
            (s.batch().release(theirs), muster.InvalidRequestError),
            (s.batch().acquire("lease://acme/r/x", 3600), muster.InvalidRequestError),
        ]
        for b, want in cases:
            with pytest.raises(want):
                await b.send()
        assert not (await client.get("lease://acme/r/x")).held


async def test_batch_forbidden_per_operation(broker: Broker) -> None:
    async with muster.Client(broker.url, token=TOKENS["narrow"][0]) as c, await c.new_session("reader", 10) as s:
        res = await s.batch().acquire("lease://acme/renderers/a", 1).acquire("lease://acme/other/a", 1).send()
        for r in res:
            assert isinstance(r.error, muster.ForbiddenError) and r.error.advice is muster.Retry.NO
