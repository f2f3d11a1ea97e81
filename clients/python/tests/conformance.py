"""The Python runner of the language-neutral scenarios in clients/conformance
(its README describes the format and the harness's control API). The shared
harness runs the broker, the gating proxy and the actors; this runner
implements only the observer ops with this package's Observer and forwards
every other op verbatim to the harness's POST /step."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

import muster
from muster import _broken as ob
from muster._backoff import DEFAULT_RECONCILE_JITTER
from muster._observe import Observer

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = sorted((ROOT / "clients/conformance").glob("*.json"))
OBSERVER_OPS = {
    "observe",
    "wait_ready",
    "expect_not_ready",
    "expect_view",
    "mark_epoch",
    "expect_same_view",
    "expect_stopped",
    "close_observer",
    "worker_acquire",
    "worker_extend",
    "worker_lost",
    "worker_holds",
}


class StepFailed(AssertionError):
    """A step of a scenario failed."""


class ScenarioSkipped(Exception):
    """The harness's refusal to run a scenario it cannot run here (409
    scenario_skipped: a placed scenario with MUSTER_TEST_PG=off); the test
    skips it, saying why."""


class Harness:
    """clients/conformance/run-harness.sh as a child process: started here,
    stopped by closing its stdin."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [str(ROOT / "clients/conformance/run-harness.sh")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            raise RuntimeError("the harness exited before printing its addresses")
        addrs = json.loads(line)
        self.control: str = addrs["control"]
        self.proxy: str = addrs["proxy"]
        self.secrets: dict[str, str] = httpx.get(self.control + "/tokens").json()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            self.proc.wait()


def timeout_of(st: dict[str, Any]) -> float:
    return float(st.get("timeout_ms", 5000)) / 1000


def match_selector(sel: str, route: str) -> bool:
    """The selector grammar's matching (`*` one segment, `**` zero or more), for the runner only."""
    s = sel.removeprefix("lease://").split("/")
    r = route.removeprefix("lease://").split("/")

    def match(i: int, j: int) -> bool:
        if i == len(s):
            return j == len(r)
        if s[i] == "**":
            return any(match(i + 1, k) for k in range(j, len(r) + 1))
        return j < len(r) and s[i] in ("*", r[j]) and match(i + 1, j + 1)

    return match(0, 0)


@dataclass
class _Obs:
    observer: Observer
    client: muster.Client
    token: str


@dataclass
class _Worker:
    """A worker of the scenario: one client for the whole scenario (it keeps
    the following state), its current session and every session it made."""

    client: muster.Client
    session: muster.Session | None = None
    sessions: list[muster.Session] = field(default_factory=list)
    leases: dict[str, muster.Lease] = field(default_factory=dict)  # by route: the last worker_acquire's


class Runner:
    """Runs scenarios through the harness; ``broken`` is given to every
    observer (the test-only flaws of muster._observe)."""

    def __init__(self, h: Harness, broken: frozenset[str] = frozenset()) -> None:
        self.h = h
        self.broken = broken
        self.obs: dict[str, _Obs] = {}
        self.marks: dict[str, str] = {}
        self.workers: dict[str, _Worker] = {}
        self.highest: dict[str, int] = {}  # route -> the highest fencing token a worker got
        self.http = httpx.AsyncClient(timeout=None)

    async def aclose(self) -> None:
        await self.http.aclose()

    async def post(self, path: str, body: bytes | None = None) -> httpx.Response:
        return await self.http.post(self.h.control + path, content=body or b"")

    async def run(self, path: Path) -> None:
        """Runs one scenario file; raises StepFailed at the first failed step."""
        raw = path.read_bytes()  # noqa: ASYNC240 - a small local file
        sc = json.loads(raw)
        r = await self.post("/scenario", raw)
        if r.status_code == 409 and r.json().get("code") == "scenario_skipped":
            raise ScenarioSkipped(r.json().get("detail", r.text))
        if r.status_code != 204:
            raise StepFailed(f"loading the scenario: {r.status_code} {r.text}")
        self.obs, self.marks, self.workers, self.highest = {}, {}, {}, {}
        try:
            for i, st in enumerate(sc["steps"], 1):
                try:
                    await self.step(st)
                except StepFailed as e:
                    raise StepFailed(f"step {i} ({st['op']}): {e}") from None
        finally:
            await self.close_all()

    async def close_all(self) -> None:
        closing = asyncio.ensure_future(asyncio.gather(*(o.observer.aclose() for o in self.obs.values())))
        done, _ = await asyncio.wait({closing}, timeout=2)
        if not done:  # a broken close: the reset frees whatever it waits for
            await self.post("/reset")
            await closing
        for o in self.obs.values():
            await o.client.aclose()
        for w in self.workers.values():  # a session's broker may be dead: bounded
            for s in w.sessions:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(1):
                        await s.close()
            await w.client.aclose()
        if not self.broken:  # broken runs share the loop with each other
            left = [t.get_name() for t in asyncio.all_tasks() if t.get_name().startswith("muster")]
            if left:
                raise StepFailed(f"tasks left after closing every observer: {left}")

    def observer(self, name: str) -> _Obs:
        o = self.obs.get(name)
        if o is None:
            raise StepFailed(f"no observer {name!r}")
        return o

    async def step(self, st: dict[str, Any]) -> None:
        op = st["op"]
        if op not in OBSERVER_OPS:
            r = await self.post("/step", json.dumps(st).encode())
            if r.status_code != 200:
                try:
                    detail = r.json().get("detail", r.text)
                except ValueError:
                    detail = r.text
                raise StepFailed(f"{r.status_code}: {detail}")
            return
        await getattr(self, "op_" + op)(st)

    async def client(self, token: str, brokers: list[str] | None = None) -> muster.Client:
        """A client of the proxy (or of the named brokers, in that order,
        their URLs from GET /brokers) with token's secret, broken as the
        variant asks."""
        base: str | list[str] = self.h.proxy
        if brokers:
            r = await self.http.get(self.h.control + "/brokers")
            if r.status_code != 200:
                raise StepFailed(f"GET /brokers: {r.status_code} {r.text}")
            urls = r.json()
            unknown = [b for b in brokers if not urls.get(b)]
            if unknown:
                raise StepFailed(f"no broker {unknown[0]!r} in GET /brokers")
            base = [urls[b] for b in brokers]
        c = muster.Client(base, token=self.h.secrets[token], without_follow=ob.BROKEN_NO_FOLLOW in self.broken)
        c._sticky_owner = ob.BROKEN_STICKY_OWNER in self.broken
        c._single_broker = ob.BROKEN_SINGLE_BROKER in self.broken
        c._stay_on_unavailable = ob.BROKEN_STAY_ON_UNAVAILABLE in self.broken
        c._never_lost = ob.BROKEN_NEVER_LOST in self.broken
        c._send_plus_ttl = ob.BROKEN_SEND_PLUS_TTL in self.broken
        c._late_loss = ob.BROKEN_LATE_LOSS in self.broken
        c._creator_loss = ob.BROKEN_CREATOR_LOSS in self.broken
        return c

    async def op_worker_acquire(self, st: dict[str, Any]) -> None:
        """The worker (its client built on first use, on the proxy or on the
        brokers of its first step) creates a session (TTL
        session_ttl_ms, default 10 s) when it has none or new_session asks,
        and acquires route (waiting up to
        wait_ms in its queue when given). An error advised
        backoff (a transport error, a failover in progress) is retried until
        timeout_ms; the fencing token must be at least min_token and above
        every token of the route seen before."""
        name, route = st["worker"], st["route"]
        w = self.workers.get(name)
        if w is None:
            w = self.workers[name] = _Worker(await self.client(st["token"], st.get("brokers")))
        if st.get("new_session"):
            w.session = None
        deadline = time.monotonic() + timeout_of(st)
        while True:
            try:
                if w.session is None:
                    w.session = await w.client.new_session(name, st.get("session_ttl_ms", 10000) / 1000)
                    w.sessions.append(w.session)
                lease = await w.session.acquire(route, st["ttl_ms"] / 1000, wait=st.get("wait_ms", 0) / 1000)
                break
            except (muster.MusterError, muster.TransportError) as e:
                if muster.advice(e) is not muster.Retry.BACKOFF or time.monotonic() >= deadline:
                    raise StepFailed(f"acquire {route}: {e!r}") from None
                await asyncio.sleep(0.1)
        low, high = st.get("min_token", 0), self.highest.get(route, 0)
        if lease.fencing_token < low or lease.fencing_token <= high:
            raise StepFailed(f"fencing token {lease.fencing_token}, want at least {low} and above {high}")
        self.highest[route] = lease.fencing_token
        w.leases[route] = lease

    def worker_lease(self, st: dict[str, Any]) -> muster.Lease:
        """The lease of route that the worker's last worker_acquire got."""
        w = self.workers.get(st["worker"])
        lease = w.leases.get(st["route"]) if w is not None else None
        if lease is None:
            raise StepFailed(f"worker {st['worker']!r} acquired no lease of {st['route']}")
        return lease

    async def op_worker_extend(self, st: dict[str, Any]) -> None:
        """The lease of route that the worker's last worker_acquire got is
        extended by ttl_ms (Lease.extend, its fencing token); an error advised
        backoff is retried until timeout_ms."""
        lease = self.worker_lease(st)
        deadline = time.monotonic() + timeout_of(st)
        while True:
            try:
                await lease.extend(st["ttl_ms"] / 1000)
                return
            except muster.MusterException as e:  # a broker's error, a transport failure, the lease's loss
                if muster.advice(e) is not muster.Retry.BACKOFF or time.monotonic() >= deadline:
                    raise StepFailed(f"extend {st['route']}: {e!r}") from None
                await asyncio.sleep(0.1)

    async def op_worker_lost(self, st: dict[str, Any]) -> None:
        """The lease of route that the worker's last worker_acquire got reports
        its loss (``lost`` set, ``error`` a LeaseLostError) within timeout_ms."""
        route = st["route"]
        lease = self.worker_lease(st)
        try:
            async with asyncio.timeout(timeout_of(st)):
                await lease.lost.wait()
        except TimeoutError:
            raise StepFailed(f"the lease of {route} reported no loss within {timeout_of(st)}s") from None
        if not isinstance(lease.error, muster.LeaseLostError):
            raise StepFailed(f"the lease of {route} ended with {lease.error!r}, want a LeaseLostError")

    async def op_worker_holds(self, st: dict[str, Any]) -> None:
        """The lease of route that the worker's last worker_acquire got reports
        no loss (``lost`` stays unset) for for_ms."""
        lease = self.worker_lease(st)
        try:
            async with asyncio.timeout(st["for_ms"] / 1000):
                await lease.lost.wait()
        except TimeoutError:
            return
        raise StepFailed(f"the lease of {st['route']} was lost: {lease.error!r}")

    async def op_observe(self, st: dict[str, Any]) -> None:
        c = await self.client(st["token"], st.get("brokers"))
        try:
            o = Observer._start(
                c,
                st["selector"],
                shortest_ttl=st.get("shortest_ttl_ms", 0) / 1000,
                reconcile_interval=st["reconcile_ms"] / 1000 if st.get("reconcile_ms") else None,
                reconcile_jitter=st.get("jitter", DEFAULT_RECONCILE_JITTER),
                page_size=st.get("page_size", 500),
                broken=self.broken,
            )
        except muster.MusterError as e:
            await c.aclose()
            raise StepFailed(str(e)) from None
        self.obs[st["observer"]] = _Obs(o, c, st["token"])

    async def op_wait_ready(self, st: dict[str, Any]) -> None:
        o = self.observer(st["observer"]).observer
        try:
            async with asyncio.timeout(timeout_of(st)):
                await o.ready()
        except TimeoutError:
            raise StepFailed(f"not ready within {timeout_of(st)}s ({o.error})") from None
        except muster.MusterException as e:
            raise StepFailed(f"stopped: {e}") from None

    async def op_expect_not_ready(self, st: dict[str, Any]) -> None:
        if self.observer(st["observer"]).observer.is_ready:
            raise StepFailed("the observer is ready")

    async def op_mark_epoch(self, st: dict[str, Any]) -> None:
        self.marks[st["observer"]] = self.observer(st["observer"]).observer.view().epoch

    async def view_problem(self, st: dict[str, Any], o: _Obs, v: muster.View) -> str:
        """Why v does not satisfy st, "" when it does."""
        if not v.ready:
            return f"not ready ({o.observer.error})"
        by_route = {it.route: it for it in v.items}
        if "count" in st and len(v.items) != st["count"]:
            return f"{len(v.items)} items, want {st['count']}"
        for c in st.get("contains", []):
            it = by_route.get(c["route"])
            if it is None:
                return f"missing {c['route']}"
            if c.get("owner_id") and it.owner_id != c["owner_id"]:
                return f"{c['route']} held by {it.owner_id}, want {c['owner_id']}"
            if c.get("holder"):
                r = await self.http.get(f"{self.h.control}/holder/{c['holder']}")
                if r.status_code != 200:
                    return f"holder {c['holder']}: {r.text}"
                if it.holder_incarnation != r.json()["holder_incarnation"]:
                    return f"{c['route']} not held by {c['holder']}'s current session"
        for route in st.get("excludes", []):
            if route in by_route:
                return f"still has {route}"
        if st.get("epoch_not_mark") and v.epoch == self.marks.get(st["observer"]):
            return "still in the marked epoch " + v.epoch
        if st.get("matches_list"):
            r = await self.http.get(
                self.h.control + "/list", params={"selector": o.observer.selector, "token": o.token}
            )
            if r.status_code != 200:
                return "list: " + r.text
            if r.json()["epoch"] != v.epoch:
                return f"view of epoch {v.epoch}, LIST answered in epoch {r.json()['epoch']}"
            listed = sorted(f"{i['route']}@{i['holder_incarnation']}" for i in r.json()["items"])
            viewed = sorted(f"{i.route}@{i.holder_incarnation}" for i in v.items)
            if listed != viewed:
                return f"view ({len(viewed)} items) differs from LIST ({len(listed)} items)"
        return ""

    async def op_expect_view(self, st: dict[str, Any]) -> None:
        o = self.observer(st["observer"])
        deadline = time.monotonic() + timeout_of(st)
        while True:
            changed = asyncio.ensure_future(o.observer.changed())
            try:
                problem = await self.view_problem(st, o, o.observer.view())
                if not problem:
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StepFailed(problem)
                await asyncio.wait({changed}, timeout=min(0.05, left))  # LIST may lag the view
            finally:
                changed.cancel()

    async def op_expect_same_view(self, st: dict[str, Any]) -> None:
        names = st.get("observers", [])
        if len(names) != 2:
            raise StepFailed("expect_same_view compares two observers")
        deadline = time.monotonic() + timeout_of(st)
        views: list[list[str]] = [[], []]
        while True:
            ok = True
            for i, name in enumerate(names):
                v = self.observer(name).observer.view()
                ok = ok and v.ready
                views[i] = [
                    f"{it.route}@{it.holder_incarnation}" for it in v.items if match_selector(st["within"], it.route)
                ]
            if ok and views[0] == views[1]:
                return
            if time.monotonic() > deadline:
                raise StepFailed(f"views differ:\n{views[0]}\n{views[1]}")
            await asyncio.sleep(0.05)

    async def op_expect_stopped(self, st: dict[str, Any]) -> None:
        o = self.observer(st["observer"]).observer
        try:
            async with asyncio.timeout(timeout_of(st)):
                await o.done.wait()
        except TimeoutError:
            raise StepFailed(f"the observer did not stop within {timeout_of(st)}s (error {o.error})") from None
        want = st.get("expect_error", "")
        if want and not (isinstance(o.error, muster.MusterError) and o.error.code == want):
            raise StepFailed(f"got {o.error!r}, want error {want}")

    async def op_close_observer(self, st: dict[str, Any]) -> None:
        o = self.observer(st["observer"]).observer
        max_s = st.get("max_ms", 1000) / 1000
        start = time.monotonic()
        closing = asyncio.ensure_future(o.aclose())
        done, _ = await asyncio.wait({closing}, timeout=max_s)
        if not done:
            with contextlib.suppress(BaseException):
                await self.post("/reset")
                await closing
            raise StepFailed(f"aclose took more than {max_s}s")
        closing.result()
        if not isinstance(o.error, muster.ClosedError):
            raise StepFailed(f"error after aclose: {o.error!r} ({time.monotonic() - start:.3f}s)")
