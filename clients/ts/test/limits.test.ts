// The merged contract's limits against the real broker: a family at its
// quota (429 session_limit, scope family) beside an untouched family, a fleet
// root at its spec quota (429 spec_limit, scope root), and the paged fleet gap
// read whole by Fleet.gap.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Codes, MusterClient, MusterError, type Session } from "../src/index.js";
import { startBroker, tokens, type Broker } from "./broker.js";

describe("limits of the real broker", () => {
  let b: Broker;
  before(async () => {
    b = await startBroker("limits:\n  families:\n    fam-b: {sessions: 2, fleet_specs_per_root: 2}\n");
  });
  after(async () => {
    await b.kill();
  });

  test("a family at its session quota gets session_limit with scope family; another family does not", async () => {
    const cb = new MusterClient(b.url, { token: tokens.b.secret });
    const held: Session[] = [await cb.session("w", 30_000), await cb.session("w", 30_000)];
    try {
      await assert.rejects(cb.session("w", 30_000), (e: unknown) => {
        assert.ok(e instanceof MusterError, String(e));
        assert.equal(e.code, Codes.SessionLimit);
        assert.equal(e.status, 429);
        assert.equal(e.scope, "family");
        assert.equal(e.advice, "retry-backoff");
        return true;
      });
      const other = await new MusterClient(b.url, { token: tokens.a.secret }).session("w", 30_000);
      await other.close();
    } finally {
      for (const s of held) await s.close();
    }
    // The quota counts live sessions: one closed, one more is granted.
    await (await cb.session("w", 30_000)).close();
  });

  test("a fleet root at its spec quota gets spec_limit with scope root, and stores nothing", async () => {
    const f = new MusterClient(b.url, { token: tokens.b.secret }).fleet("quota");
    const first = await f.register("job", { n: 1 });
    await f.register("job", { n: 2 });
    await assert.rejects(f.register("job", { n: 3 }), (e: unknown) => {
      assert.ok(e instanceof MusterError, String(e));
      assert.equal(e.code, Codes.SpecLimit);
      assert.equal(e.status, 429);
      assert.equal(e.scope, "root");
      assert.equal(e.advice, "retry-no");
      return true;
    });
    let n = 0;
    for await (const _ of f.desired()) n++;
    assert.equal(n, 2, "the refused spec was not stored");
    // Another root of the same family has its own quota; forgetting frees one.
    await new MusterClient(b.url, { token: tokens.b.secret }).fleet("quota-2").register("job", {});
    await f.forget(first.name);
    await f.register("job", { n: 4 });
  });

  test("gap reads every page of a paged answer", async () => {
    // The broker's page is 10,000 names a side; this client's fetch asks for
    // pages of 2 so that a small fleet spans several real pages.
    let pages = 0;
    const paging: typeof fetch = (input, init) => {
      const req = new Request(input, init);
      const u = new URL(req.url);
      if (u.pathname.endsWith("/gap")) {
        pages++;
        u.searchParams.set("limit", "2");
        return fetch(new Request(u, req));
      }
      return fetch(req);
    };
    const c = new MusterClient(b.url, { token: tokens.a.secret });
    const f = c.fleet("paged");
    const desired: string[] = [];
    for (let i = 0; i < 7; i++) desired.push((await f.register("job", { i })).name);
    const s = await c.session("gap", 30_000);
    try {
      // Live: three desired names and three orphans, interleaved in name order.
      const live = [desired[1]!, desired[4]!, desired[6]!, "job-0", "job-55", "zz-orphan"];
      for (const r of live) await s.acquire(`lease://paged/area/${r}`, 30_000);
      const whole = await c.fleet("paged").gap("lease://paged/area/*");
      const paged = await new MusterClient(b.url, { token: tokens.a.secret, fetch: paging }).fleet("paged").gap("lease://paged/area/*");
      assert.ok(pages >= 4, `${pages} pages`);
      const missing = desired.filter((n) => !live.includes(n)).sort();
      assert.deepEqual(whole.missing, missing);
      assert.deepEqual(whole.orphans, ["job-0", "job-55", "zz-orphan"]);
      assert.deepEqual(paged.missing, whole.missing);
      assert.deepEqual(paged.orphans, whole.orphans);
      assert.ok(paged.revision > 0);
    } finally {
      await s.close();
    }
  });
});
