// Session.batch against the real broker binary: one result per operation,
// partial success, per-operation authorization and whole-batch refusals.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Batch, Lease, LeaseLostError, MusterClient, MusterError, ReleasedError, advice, isCode, maxBatchOps, parseRoute } from "../src/index.js";
import { startBroker, tokens, type Broker } from "./broker.js";

describe("batches against the real broker", () => {
  let b: Broker;
  let c: MusterClient;
  before(async () => {
    b = await startBroker();
    c = new MusterClient(b.url, { token: tokens.a.secret });
  });
  after(async () => {
    await b.kill();
  });

  test("acquire, extend and release many leases, each result as the single call's", async () => {
    const s = await c.session("worker-1", 10_000);
    const other = await c.session("worker-2", 10_000);
    try {
      const taken = await other.acquire("lease://acme/r/taken", 5_000);
      const held = await s.acquire("lease://acme/r/held", 5_000);

      const bt = s.batch();
      for (let i = 0; i < 5; i++) bt.acquire(`lease://acme/r/d${i}`, 5_000);
      bt.acquire("lease://acme/r/taken", 5_000).acquire("lease://acme/r/held", 5_000);
      assert.equal(bt.length, 7);
      const res = await bt.do();
      assert.equal(res.length, 7);
      const mine: Lease[] = [];
      for (const [i, r] of res.slice(0, 5).entries()) {
        assert.equal(r.err, null, `result ${i}`);
        assert.equal(r.op, "acquire");
        assert.equal(r.route, `lease://acme/r/d${i}`);
        assert.ok(r.lease instanceof Lease && r.lease.fencingToken > 0);
        mine.push(r.lease);
      }
      const t = res[5]!;
      assert.ok(isCode(t.err, "lease_held") && advice(t.err) === "retry-backoff", String(t.err));
      assert.equal((t.err as MusterError).status, 409);
      assert.notEqual((t.err as MusterError).detail, "");
      assert.equal(t.lease, null);
      assert.equal(res[6]!.err, null);
      assert.strictEqual(res[6]!.lease, held, "already held: the same handle");
      const st = await c.get("lease://acme/r/d3");
      assert.ok(st.held && st.item?.ownerId === "worker-1");

      // Extend them all in one request.
      const ext = s.batch();
      for (const l of mine) ext.extend(l, 8_000);
      for (const [i, r] of (await ext.do()).entries()) {
        assert.equal(r.err, null);
        assert.strictEqual(r.lease, mine[i]);
        assert.equal(mine[i]!.renewals, 1);
      }

      // A handle of the same route whose token is not the current one is fenced and lost; the current one extends.
      const stale = new Lease(s, parseRoute(held.route), {
        fencing_token: held.fencingToken + 1000,
        acquired_at: held.acquiredAt.toISOString(),
        expires_at: held.expiresAt.toISOString(),
        renewals: 0,
      });
      const fenced = await s.batch().extend(stale, 1_000).extend(held, 5_000).do();
      assert.ok(fenced[0]!.err instanceof LeaseLostError && isCode(fenced[0]!.err.cause, "fenced"), String(fenced[0]!.err));
      assert.ok(stale.lost.aborted);
      assert.equal(fenced[1]!.err, null);
      assert.equal(held.err, null);

      // The other session releases its own.
      const rel = await other.batch().release(taken).do();
      assert.equal(rel[0]!.err, null);
      assert.ok(taken.err instanceof ReleasedError);

      // Release them all; the second release of mine[0] is settled locally.
      const rb = s.batch();
      for (const l of mine) rb.release(l);
      rb.release(mine[0]!);
      for (const r of await rb.do()) {
        assert.equal(r.err, null);
        assert.equal(r.op, "release");
      }
      for (const l of mine) assert.ok(l.err instanceof ReleasedError, String(l.err));
      assert.equal((await c.get("lease://acme/r/d0")).held, false);
    } finally {
      await s.close();
      await other.close();
    }
  });

  test("bad batches are refused whole with the broker's codes, applying nothing", async () => {
    const s = await c.session("worker-1", 10_000);
    const other = await c.session("worker-2", 10_000);
    try {
      const theirs = await other.acquire("lease://acme/r/theirs", 5_000);
      const tooMany = s.batch();
      for (let i = 0; i <= maxBatchOps; i++) tooMany.acquire(`lease://acme/r/x${i}`, 1_000);
      const cases: [string, Batch, string][] = [
        ["empty", s.batch(), "invalid_request"],
        ["too many", tooMany, "invalid_request"],
        ["bad route", s.batch().acquire("lease://acme/r/x", 1_000).acquire("lease://acme/*/x", 1_000), "invalid_route"],
        ["another session's lease", s.batch().release(theirs), "invalid_request"],
        ["TTL out of range", s.batch().acquire("lease://acme/r/x", 3_600_000), "invalid_request"],
      ];
      for (const [name, bt, code] of cases) {
        await assert.rejects(bt.do(), (e: unknown) => isCode(e, code), name);
      }
      assert.equal((await c.get("lease://acme/r/x")).held, false, "a refused batch acquired");
      assert.equal(theirs.err, null);

      // A lease of a session that ended at the broker is lost, as with extend.
      const l = await s.acquire("lease://acme/r/mine", 5_000);
      const del = await c.raw.DELETE("/v1/sessions/{session_id}", { params: { path: { session_id: s.id } } });
      assert.equal(del.response.status, 204);
      await assert.rejects(s.batch().extend(l, 1_000).do(), (e: unknown) => isCode(e, "session_not_found"));
      assert.ok(l.err instanceof LeaseLostError, String(l.err));

      // Families are separate universes: the route held in fam-a is free in fam-b.
      const sb = await new MusterClient(b.url, { token: tokens.b.secret }).session("worker-b", 10_000);
      try {
        const res = await sb.batch().acquire("lease://acme/r/theirs", 1_000).do();
        assert.equal(res[0]!.err, null);
      } finally {
        await sb.close();
      }
    } finally {
      await s.close();
      await other.close();
    }
  });

  test("authorization is per operation: a route outside the grants fails alone with forbidden", async () => {
    const narrow = new MusterClient(b.url, { token: tokens.narrow.secret }); // read-only on lease://acme/renderers/*
    const s = await narrow.session("reader", 10_000);
    const w = await new MusterClient(b.url, { token: tokens.renderers.secret }).session("writer", 10_000);
    try {
      const res = await s.batch().acquire("lease://acme/renderers/a", 1_000).acquire("lease://acme/other/a", 1_000).do();
      assert.equal(res.length, 2);
      for (const r of res) {
        assert.ok(isCode(r.err, "forbidden") && advice(r.err) === "retry-no" && (r.err as MusterError).status === 403, String(r.err));
        assert.equal(r.lease, null);
      }
      // A session whose grants cover some routes: those apply, the others fail alone.
      const mixed = await w.batch().acquire("lease://acme/renderers/a", 1_000).acquire("lease://acme/other/a", 1_000).acquire("lease://acme/renderers/b", 1_000).do();
      assert.ok(mixed[0]!.err === null && mixed[0]!.lease !== null, String(mixed[0]!.err));
      assert.ok(isCode(mixed[1]!.err, "forbidden") && mixed[1]!.lease === null, String(mixed[1]!.err));
      assert.ok(mixed[2]!.err === null && mixed[2]!.lease !== null, String(mixed[2]!.err));
      assert.equal((await c.get("lease://acme/other/a")).held, false);
    } finally {
      await s.close();
      await w.close();
    }
  });
});
