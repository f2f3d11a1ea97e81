// Sessions, leases, LIST, watch and fleets against the real broker binary.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ClosedError, LeaseLostError, MusterClient, MusterError, ReleasedError, SessionLostError, isCode, type Change, type Page } from "../src/index.js";
import { eventually, startBroker, tokens, type Broker } from "./broker.js";

/** Reads err without letting an assertion narrow the property for later reads. */
const errOf = (x: { err: Error | null }): Error | null => x.err;

describe("against the real broker", () => {
  let b: Broker;
  let c: MusterClient;
  before(async () => {
    b = await startBroker();
    c = new MusterClient(b.url, { token: tokens.a.secret });
  });
  after(async () => {
    await b.kill();
  });

  test("unauthenticated and forbidden are typed errors", async () => {
    const anon = new MusterClient(b.url);
    await assert.rejects(anon.session("w", 5_000), (e: unknown) => isCode(e, "unauthenticated") && (e as MusterError).status === 401);
    const narrow = new MusterClient(b.url, { token: tokens.narrow.secret });
    await assert.rejects(narrow.listPage("lease://**"), (e: unknown) => isCode(e, "forbidden"));
    await assert.rejects(c.listPage("lease://a/**/**"), (e: unknown) => isCode(e, "invalid_selector"));
    await assert.rejects(c.get("lease://a/b"), (e: unknown) => isCode(e, "invalid_route") && (e as MusterError).status === 0);
  });

  test("session, acquire, extend, release, fencing tokens", async () => {
    const s = await c.session("worker-1", 5_000);
    const s2 = await c.session("worker-2", 5_000);
    try {
      assert.equal(s.ownerId, "worker-1");
      assert.notEqual(s.holderIncarnation, s2.holderIncarnation);
      assert.equal(c.epoch, s.epoch);
      const l = await s.acquire("lease://acme/renderers/doc-1", 2_000);
      assert.equal(errOf(l), null);
      assert.ok(l.fencingToken > 0);
      assert.strictEqual(await s.acquire("lease://acme/renderers/doc-1", 2_000), l, "already held: the same handle");
      await assert.rejects(s2.acquire("lease://acme/renderers/doc-1", 2_000), (e: unknown) => isCode(e, "lease_held") && (e as MusterError).advice === "retry-backoff");
      await l.extend(3_000);
      assert.equal(l.renewals, 1);
      const st = await c.get("lease://acme/renderers/doc-1");
      assert.ok(st.held);
      assert.equal(st.item?.holderIncarnation, s.holderIncarnation);
      // A waiter is granted at the release, with a higher fencing token.
      const waiting = s2.acquire("lease://acme/renderers/doc-1", 2_000, { waitMs: 3_000 });
      await eventually(async () => (await c.get("lease://acme/renderers/doc-1")).waiters === 1, 3_000, "a waiter");
      await l.release();
      assert.ok(l.err instanceof ReleasedError);
      assert.ok(l.lost.aborted);
      await l.release(); // idempotent
      const l2 = await waiting;
      assert.ok(l2.fencingToken > l.fencingToken);
      await assert.rejects(l.extend(1_000), ReleasedError);
      // Closing the session loses its leases.
      await s2.close();
      assert.ok(l2.err instanceof LeaseLostError && l2.err.cause instanceof ClosedError);
      assert.ok(s2.signal.aborted && s2.err instanceof ClosedError);
      await assert.rejects(s2.acquire("lease://acme/renderers/doc-2", 1_000), ClosedError);
    } finally {
      await s.close();
      await s2.close();
    }
  });

  test("a grant after a wait close to the TTL is held for its TTL, then lost locally without extension", async () => {
    const s = await c.session("holder", 5_000);
    const s2 = await c.session("waiter", 5_000);
    try {
      const route = "lease://acme/wait/one";
      const l = await s.acquire(route, 10_000);
      const sent = performance.now();
      const waiting = s2.acquire(route, 1_500, { waitMs: 5_000 });
      await new Promise((r) => setTimeout(r, 1_300));
      await l.release();
      const l2 = await waiting;
      const granted = performance.now();
      assert.ok(granted - sent >= 1_300);
      // send + TTL has passed or nearly: the deadline is the grant's TTL on.
      await new Promise((r) => setTimeout(r, 1_100));
      assert.equal(errOf(l2), null, `lost within ${Math.round(performance.now() - granted)} ms of the grant`);
      await eventually(() => errOf(l2) !== null, 1_500, "the local deadline");
      assert.ok(l2.err instanceof LeaseLostError && isCode(l2.err.cause, "lease_expired"), String(l2.err));
      assert.ok(performance.now() - granted < 2_200, `lost ${Math.round(performance.now() - granted)} ms after the grant`);
    } finally {
      await s.close();
      await s2.close();
    }
  });

  test("the keepalive keeps a session beyond its TTL; a lease without extension is lost locally", async () => {
    const s = await c.session("keeper", 1_000);
    try {
      const l = await s.acquire("lease://acme/keep/one", 300);
      await new Promise((r) => setTimeout(r, 1_600));
      assert.equal(s.err, null, "the session lives on its keepalives");
      assert.ok(l.err instanceof LeaseLostError && isCode(l.err.cause, "lease_expired"), String(l.err));
      const l2 = await s.acquire("lease://acme/keep/one", 5_000);
      assert.equal(l2.err, null);
    } finally {
      await s.close();
    }
  });

  test("withLease extends while fn runs, releases after, and reports a loss", async () => {
    const s = await c.session("wl", 5_000);
    try {
      const got = await s.withLease("lease://acme/wl/a", 300, async (l, signal) => {
        await new Promise((r) => setTimeout(r, 700));
        assert.equal(signal.aborted, false);
        assert.ok(l.renewals >= 1, `renewals ${l.renewals}`);
        return 42;
      });
      assert.equal(got, 42);
      assert.equal((await c.get("lease://acme/wl/a")).held, false);
      // A lease taken away (its session ended elsewhere) aborts fn's signal.
      const other = await c.session("wl2", 5_000);
      await assert.rejects(
        other.withLease("lease://acme/wl/b", 5_000, async (_l, signal) => {
          void other.close();
          await new Promise((r) => signal.addEventListener("abort", r, { once: true }));
          return "done";
        }),
        LeaseLostError,
      );
    } finally {
      await s.close();
    }
  });

  test("list pages one snapshot lazily", async () => {
    const s = await c.session("lister", 10_000);
    try {
      await Promise.all(Array.from({ length: 250 }, (_, i) => s.acquire(`lease://list/r/doc-${i}`, 10_000)));
      const pages: Page[] = [];
      for await (const p of c.listPages("lease://list/r/*", { limit: 100 })) pages.push(p);
      assert.deepEqual(pages.map((p) => p.items.length), [100, 100, 50]);
      assert.ok(pages.every((p) => p.revision === pages[0]!.revision && p.epoch === c.epoch));
      const routes = new Set<string>();
      for await (const it of c.list("lease://list/r/*", { limit: 30 })) {
        assert.equal(it.ownerId, "lister");
        assert.ok(it.expiresAt instanceof Date && !Number.isNaN(it.expiresAt.getTime()));
        routes.add(it.route);
      }
      assert.equal(routes.size, 250);
      let n = 0;
      for await (const _ of c.list("lease://list/r/*", { limit: 10 })) if (++n === 5) break;
      assert.equal(n, 5);
      await assert.rejects(c.listPage("lease://list/r/*", { cursor: "forged" }), (e: unknown) => isCode(e, "invalid_cursor"));
    } finally {
      await s.close();
    }
  });

  test("watch: marker, changes in revision order, terminal events, close", async () => {
    const s = await c.session("watcher", 10_000);
    try {
      await s.acquire("lease://w/r/a", 10_000);
      const sub = await c.watch(["lease://w/r/*", "lease://w/x/*"]);
      assert.equal(sub.marker.selectors.length, 2);
      assert.deepEqual(sub.marker.selectors[0]!.items.map((i) => i.route), ["lease://w/r/a"]);
      const l = await s.acquire("lease://w/r/b", 10_000);
      await l.release();
      const got: Change[] = [];
      for await (const ch of sub) {
        got.push(ch);
        if (got.length === 2) break; // leaving the loop closes the stream
      }
      assert.deepEqual(got.map((g) => [g.kind, g.route, g.selector]), [["acquired", "lease://w/r/b", "lease://w/r/*"], ["released", "lease://w/r/b", "lease://w/r/*"]]);
      assert.ok(got[0]!.revision > sub.marker.revision && got[1]!.revision > got[0]!.revision);
      assert.equal(got[0]!.item?.ownerId, "watcher");
      assert.ok(sub.err instanceof ClosedError);

      // A session stream is superseded by a newer one of the same selector; unsubscribe ends the last.
      const w1 = await s.watch("lease://w/r/*");
      const w2 = await s.watch("lease://w/r/*");
      assert.equal(await w1.next(), null);
      assert.equal((w1.err as { reason?: string } | null)?.reason, "superseded");
      await w2.unsubscribe("lease://w/r/*");
      assert.equal(await w2.next(), null);
      assert.equal((w2.err as { reason?: string } | null)?.reason, "unsubscribed");
      await assert.rejects(sub.unsubscribe("lease://w/r/*"), (e: unknown) => isCode(e, "invalid_request"));
      await assert.rejects(c.watch([]), (e: unknown) => isCode(e, "invalid_selector"));
      await assert.rejects(c.watch("lease://w/**/**"), (e: unknown) => isCode(e, "invalid_selector"));
      const ac = new AbortController();
      const w3 = await c.watch("lease://w/r/*", { signal: ac.signal });
      const pending = w3.next();
      ac.abort();
      assert.equal(await pending, null);
      assert.ok(w3.err instanceof ClosedError);
    } finally {
      await s.close();
    }
  });

  test("fleet: register, desired, sweep with the caller's validator, plan, gap, forget", async () => {
    const f = c.fleet("farm/east");
    const a = await f.register("render", { frames: 10 });
    const bad = await f.register("render", { frames: "many" });
    const d = await f.register("encode", { frames: 3 });
    assert.match(a.name, /^render-\d+$/);
    assert.deepEqual((await f.get(a.name)).spec, { frames: 10 });
    const names: string[] = [];
    for await (const sp of f.desired()) names.push(sp.name);
    assert.deepEqual(names.sort(), [a.name, bad.name, d.name].sort());
    const swept = await f.sweep((spec) => {
      const frames = (spec as { frames?: unknown }).frames;
      if (typeof frames !== "number") throw new Error("frames must be a number");
      return { frames };
    });
    assert.deepEqual(swept.dropped, [bad.name]);
    assert.deepEqual(swept.kept.map((k) => k.spec.frames).sort(), [10, 3]);
    await assert.rejects(f.get(bad.name), (e: unknown) => isCode(e, "spec_not_found"));
    const plan = await f.plan([a.name, d.name], [d.name, "zombie"]);
    assert.deepEqual(plan, { missing: [a.name], orphans: ["zombie"], revision: 0 });
    const s = await c.session("farm", 10_000);
    try {
      await s.acquire(`lease://farm/east/${d.name}`, 10_000);
      const gap = await f.gap("lease://farm/east/*");
      assert.deepEqual(gap.missing, [a.name]);
      assert.deepEqual(gap.orphans, []);
      assert.ok(gap.revision > 0);
    } finally {
      await s.close();
    }
    await assert.rejects(f.forget("Repo-1"), (e: unknown) => isCode(e, "invalid_name"));
    await f.forget(a.name);
    await f.forget(a.name);
    // The contract validates the root pattern first: invalid_request.
    await assert.rejects(c.fleet("Bad Root").register("x", {}), (e: unknown) => isCode(e, "invalid_request"));
  });

  test("aborting a waiting acquire leaves the queue; a lease of an ended session is lost at its extension", async () => {
    const s = await c.session("holder", 5_000);
    const s2 = await c.session("waiter", 5_000);
    try {
      const l = await s.acquire("lease://acme/q/one", 5_000);
      const ac = new AbortController();
      const waiting = s2.acquire("lease://acme/q/one", 5_000, { waitMs: 3_000, signal: ac.signal });
      await eventually(async () => (await c.get("lease://acme/q/one")).waiters === 1, 3_000, "a waiter");
      ac.abort();
      await assert.rejects(waiting, (e: unknown) => e instanceof Error && e.name === "AbortError");
      await eventually(async () => (await c.get("lease://acme/q/one")).waiters === 0, 3_000, "the waiter gone");
      await l.release();
      // A session ended behind the SDK's back: its lease is lost at the next
      // extension, and the session with it (prompt loss: session_not_found).
      const victim = await c.session("victim", 5_000);
      const gone = await victim.acquire("lease://acme/q/two", 5_000);
      await c.raw.DELETE("/v1/sessions/{session_id}", { params: { path: { session_id: victim.id } } });
      const taken = await s2.acquire("lease://acme/q/two", 5_000);
      assert.ok(taken.fencingToken > gone.fencingToken);
      await assert.rejects(
        gone.extend(1_000),
        (e: unknown) => e instanceof LeaseLostError && e.cause instanceof SessionLostError && isCode(e.cause.cause, "session_not_found"),
      );
      assert.ok(gone.lost.aborted);
      assert.ok(errOf(victim) instanceof SessionLostError, String(victim.err));
      await gone.release(); // known not held: resolves
      await victim.close();
    } finally {
      await s.close();
      await s2.close();
    }
  });

  test("a broker restart loses the session at its next answer (another epoch → SessionLostError)", async () => {
    const s = await c.session("restart", 1_500);
    const l = await s.acquire("lease://r/r/r", 10_000);
    await b.restart();
    await eventually(() => s.err !== null, 5_000, "the session lost");
    assert.ok(s.err instanceof SessionLostError, String(s.err));
    assert.match(s.err.message, /answered for another lifetime/);
    assert.ok(l.err instanceof LeaseLostError && l.err.cause === s.err);
    await s.close();
  });
});

describe("a broker that went away", () => {
  test("the session is lost when no keepalive gets through within its TTL", async () => {
    const b = await startBroker();
    try {
      const c = new MusterClient(b.url, { token: tokens.a.secret });
      const s = await c.session("orphan", 1_000);
      const l = await s.acquire("lease://gone/r/r", 5_000);
      await b.kill();
      await eventually(() => s.err !== null, 3_000, "the session lost");
      assert.ok(s.err instanceof SessionLostError, String(s.err));
      assert.match(s.err.message, /no keepalive got through within the TTL/);
      assert.ok(l.err instanceof LeaseLostError);
      await s.close(); // only stops the keepalive: nothing to reach
    } finally {
      await b.kill();
    }
  });
});
