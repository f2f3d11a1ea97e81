"""Session.batch against the real broker: one result per operation, partial
success, per-operation authorization and whole-batch refusals."""

from __future__ import annotations

import pytest

import muster
from muster._http import parse_route

from .conftest import TOKENS, Broker

pytestmark = pytest.mark.anyio


async def test_batch_lifecycle(client: muster.Client) -> None:
    async with await client.new_session("worker-1", 10) as s, await client.new_session("worker-2", 10) as other:
        taken = await other.acquire("lease://acme/r/taken", 5)
        held = await s.acquire("lease://acme/r/held", 5)

        bt = s.batch()
        for i in range(5):
            bt.acquire(f"lease://acme/r/d{i}", 5)
        bt.acquire("lease://acme/r/taken", 5).acquire("lease://acme/r/held", 5)
        assert len(bt) == 7
        res = await bt.do()
        assert len(res) == 7
        mine: list[muster.Lease] = []
        for i, r in enumerate(res[:5]):
            assert r.error is None and r.op == "acquire" and r.route == f"lease://acme/r/d{i}", r
            assert r.lease is not None and r.lease.fencing_token > 0
            mine.append(r.lease)
        t = res[5]
        assert isinstance(t.error, muster.LeaseHeldError) and muster.advice(t.error) is muster.Retry.BACKOFF
        assert t.error.status == 409 and t.error.detail != "" and t.lease is None
        assert res[6].error is None and res[6].lease is held  # already held: the same handle
        st = await client.get("lease://acme/r/d3")
        assert st.held and st.item is not None and st.item.owner_id == "worker-1"

        ext = s.batch()
        for lease in mine:
            ext.extend(lease, 8)
        for i, r in enumerate(await ext.do()):
            assert r.error is None and r.lease is mine[i] and mine[i].renewals == 1

        # A handle of the same route whose token is not the current one is fenced and lost.
        stale = muster.Lease(
            s,
            parse_route(held.route),
            muster._models.Lease(
                route=held.route,
                fencing_token=held.fencing_token + 1000,
                acquired_at=held.acquired_at,
                expires_at=held.expires_at,
                renewals=0,
            ),
        )
        fenced = await s.batch().extend(stale, 1).extend(held, 5).do()
        assert isinstance(fenced[0].error, muster.LeaseLostError), fenced[0]
        assert isinstance(fenced[0].error.cause, muster.FencedError)
        assert stale.lost.is_set()
        assert fenced[1].error is None and held.error is None

        rel = await other.batch().release(taken).do()
        assert rel[0].error is None and isinstance(taken.error, muster.ReleasedError)

        rb = s.batch()
        for lease in mine:
            rb.release(lease)
        rb.release(mine[0])  # twice: the second is settled locally
        for r in await rb.do():
            assert r.error is None and r.op == "release"
        assert all(isinstance(lease.error, muster.ReleasedError) for lease in mine)
        assert not (await client.get("lease://acme/r/d0")).held


async def test_batch_refused_whole(client: muster.Client, broker: Broker) -> None:
    async with await client.new_session("worker-1", 10) as s, await client.new_session("worker-2", 10) as other:
        theirs = await other.acquire("lease://acme/r/theirs", 5)
        too_many = s.batch()
        for i in range(muster.MAX_BATCH_OPS + 1):
            too_many.acquire(f"lease://acme/r/x{i}", 1)
        cases: list[tuple[str, muster.Batch, type[muster.MusterError]]] = [
            ("empty", s.batch(), muster.InvalidRequestError),
            ("too many", too_many, muster.InvalidRequestError),
            (
                "bad route",
                s.batch().acquire("lease://acme/r/x", 1).acquire("lease://acme/*/x", 1),
                muster.InvalidRouteError,
            ),
            ("another session's lease", s.batch().release(theirs), muster.InvalidRequestError),
            ("TTL out of range", s.batch().acquire("lease://acme/r/x", 3600), muster.InvalidRequestError),
        ]
        for _name, bt, want in cases:
            with pytest.raises(want):
                await bt.do()
        assert not (await client.get("lease://acme/r/x")).held, "a refused batch acquired"
        assert theirs.error is None

        # A lease of a session that ended at the broker is lost, as with extend.
        lease = await s.acquire("lease://acme/r/mine", 5)
        await client._call("DELETE", f"/v1/sessions/{s.id}", 204)
        with pytest.raises(muster.SessionNotFoundError):
            await s.batch().extend(lease, 1).do()
        assert isinstance(lease.error, muster.LeaseLostError)

    # Families are separate universes: the route held in fam-a is free in fam-b.
    async with muster.Client(broker.url, token=TOKENS["b"][0]) as cb, await cb.new_session("worker-b", 10) as sb:
        res = await sb.batch().acquire("lease://acme/r/theirs", 1).do()
        assert res[0].error is None


async def test_batch_forbidden_per_operation(broker: Broker) -> None:
    async with (
        muster.Client(broker.url, token=TOKENS["narrow"][0]) as narrow,
        muster.Client(broker.url, token=TOKENS["renderers"][0]) as writer,
        await narrow.new_session("reader", 10) as s,
        await writer.new_session("writer", 10) as w,
    ):
        res = await s.batch().acquire("lease://acme/renderers/a", 1).acquire("lease://acme/other/a", 1).do()
        assert len(res) == 2
        for r in res:
            assert isinstance(r.error, muster.ForbiddenError) and r.error.status == 403, r
            assert muster.advice(r.error) is muster.Retry.NO and r.lease is None
        # Grants covering some routes: those apply, the others fail alone.
        mixed = await (
            w.batch()
            .acquire("lease://acme/renderers/a", 1)
            .acquire("lease://acme/other/a", 1)
            .acquire("lease://acme/renderers/b", 1)
            .do()
        )
        assert mixed[0].error is None and mixed[0].lease is not None
        assert isinstance(mixed[1].error, muster.ForbiddenError) and mixed[1].lease is None
        assert mixed[2].error is None and mixed[2].lease is not None
