"""The synchronous facade against the real broker, from plain (non-async) code."""

from __future__ import annotations

import threading
import time

import pytest

import muster
import muster.sync

from .conftest import TOKENS, Broker


def test_sync_script(broker: Broker) -> None:
    before = threading.active_count()
    with muster.sync.Client(broker.url, token=TOKENS["a"][0]) as c:
        with c.new_session("script", ttl=2) as s, c.new_session("other", ttl=5) as other:
            lease = s.acquire("lease://acme/renderers/doc-1", ttl=5)
            assert lease.fencing_token >= 1 and not lease.lost.is_set()
            with pytest.raises(muster.LeaseHeldError):
                other.acquire("lease://acme/renderers/doc-1", ttl=5)
            time.sleep(2.5)  # longer than the session TTL: the keepalive runs in the background
            assert s.error is None
            lease.extend(5)
            assert lease.renewals == 1
            for i in range(5):
                s.acquire(f"lease://acme/renderers/x-{i}", ttl=30)
            routes = [it.route for it in c.list("lease://acme/renderers/*", limit=2)]
            assert len(routes) == 6
            first = next(iter(c.list("lease://acme/renderers/*", limit=2)))  # closed early
            assert first.route == routes[0]
            assert c.get("lease://acme/renderers/doc-1").held
            lease.release()
            assert lease.lost.is_set() and isinstance(lease.error, muster.ReleasedError)

            def work(lz: muster.sync.Lease) -> int:
                time.sleep(1.5)  # longer than the lease TTL: extended in the background
                assert not lz.lost.is_set()
                return lz.fencing_token

            assert s.with_lease("lease://acme/renderers/w", 1.0, work) >= 1
            assert not c.get("lease://acme/renderers/w").held

            f = c.fleet("monitors")
            f.register("repo", {"url": "u"})
            f.register("repo", "junk")
            swept = f.sweep(lambda spec: spec["url"])
            assert [k.spec for k in swept.kept] == ["u"] and swept.dropped == ["repo-2"]
            assert [x.name for x in f.desired()] == ["repo-1"]
            assert f.plan(["a"], ["b"]).missing == ["a"]
        assert s.done.is_set() and isinstance(s.error, muster.ClosedError)
    assert threading.active_count() == before


def test_sync_session_lost(broker: Broker) -> None:
    with muster.sync.Client(broker.url, token=TOKENS["a"][0]) as c:
        s = c.new_session("script", ttl=1)
        lease = s.acquire("lease://acme/renderers/doc-1", ttl=5)
        broker.restart()
        assert s.done.wait(5) and lease.lost.wait(1)
        assert isinstance(s.error, muster.SessionLostError)
        assert isinstance(lease.error, muster.LeaseLostError)
        s.close()


def test_sync_close_with_a_session_left_open(broker: Broker) -> None:
    before = threading.active_count()
    c = muster.sync.Client(broker.url, token=TOKENS["a"][0])
    s = c.new_session("forgotten", ttl=5)
    s.acquire("lease://acme/renderers/doc-1", ttl=5)
    pages = c.list("lease://acme/**", limit=1)
    assert next(pages).route == "lease://acme/renderers/doc-1"
    c.close()  # the keepalive is cancelled with the loop; the broker ends the session at its TTL
    assert threading.active_count() == before
    del pages  # an iterator outliving its client closes without hanging
    with pytest.raises(RuntimeError, match="closed"):
        s.acquire("lease://acme/renderers/doc-2", ttl=5)


def test_sync_batch(broker: Broker) -> None:
    with (
        muster.sync.Client(broker.url, token=TOKENS["a"][0]) as c,
        c.new_session("batcher", ttl=5) as s,
        c.new_session("other", ttl=5) as other,
    ):
        taken = other.acquire("lease://acme/renderers/b-held", ttl=5)
        res = s.batch().acquire("lease://acme/renderers/b-0", 5).acquire("lease://acme/renderers/b-held", 5).do()
        assert [r.op for r in res] == ["acquire", "acquire"]
        got = res[0].lease
        assert got is not None and res[0].error is None and got.fencing_token >= 1
        assert res[1].lease is None and isinstance(res[1].error, muster.LeaseHeldError)
        res = s.batch().extend(got, 10).do()
        assert res[0].error is None and res[0].lease is got and got.renewals == 1
        res = s.batch().release(got).do()
        assert res[0].error is None and got.lost.is_set() and isinstance(got.error, muster.ReleasedError)
        assert c.get("lease://acme/renderers/b-held").held and not taken.lost.is_set()
        with pytest.raises(muster.InvalidRequestError):
            s.batch().do()  # no operation: refused whole
