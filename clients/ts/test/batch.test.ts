// Batches against the real broker binary: the results and handles are those
// of the single operations (see the Go SDK's batch_test.go).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { LeaseLostError, MusterClient, MusterError, ReleasedError, SessionLostError, isCode, maxBatchOps, type Lease } from "../src/index.js";
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

  test("take, renew and return many leases, one request each", async () => {
    const s = await c.session("worker-1", 10_000);
    const other = await c.session("worker-2", 10_000);
    try {
      const taken = await other.acquire("lease://acme/r/taken", 5_000);
      const held = await s.acquire("lease://acme/r/held", 5_000);
      const bt = s.batch();
      for (let i = 0; i < 5; i++) bt.acquire(`lease://acme/r/d${i}`, 5_000);
      bt.acquire("lease://acme/r/taken", 5_000).acquire("lease://acme/r/held", 5_000);
      assert.equal(bt.length, 7);
      const res = await bt.send();
      assert.equal(res.length, 7);
      const mine: Lease[] = [];
      res.slice(0, 5).forEach((r, i) => {
        assert.equal(r.err, null);
        assert.equal(r.op, "acquire");
        assert.equal(r.route, `lease://acme/r/d${i}`);
        assert.ok(r.lease !== null && r.lease.fencingToken > 0);
        mine.push(r.lease);
      });
      assert.ok(isCode(res[5]!.err, "lease_held"));
      assert.equal((res[5]!.err as MusterError).status, 409);
      assert.equal((res[5]!.err as MusterError).advice, "retry-backoff");
      assert.equal(res[5]!.lease, null);
      assert.strictEqual(res[6]!.lease, held, "already held: the same handle");
      const st = await c.get("lease://acme/r/d3");
      assert.ok(st.held);

      const ext = s.batch();
      for (const l of mine) ext.extend(l, 8_000);
      for (const r of await ext.send()) assert.equal(r.err, null);
      for (const l of mine) assert.equal(l.renewals, 1);

      const rel = s.batch();
      for (const l of mine) rel.release(l);
      rel.release(mine[0]!); // twice: settled locally
      for (const r of await rel.send()) assert.equal(r.err, null);
      for (const l of mine) assert.ok(l.err instanceof ReleasedError);
      assert.equal((await c.get("lease://acme/r/d0")).held, false);
      assert.equal(taken.err, null);
    } finally {
      await s.close();
      await other.close();
    }
  });

  test("refused batches send nothing; an ended session loses the leases", async () => {
    const s = await c.session("worker-1", 10_000);
    const other = await c.session("worker-2", 10_000);
    try {
      const theirs = await other.acquire("lease://acme/r/theirs", 5_000);
      const tooMany = s.batch();
      for (let i = 0; i <= maxBatchOps; i++) tooMany.acquire(`lease://acme/r/x${i}`, 1_000);
      const cases: [string, () => Promise<unknown>, string][] = [
        ["empty", () => s.batch().send(), "invalid_request"],
        ["too many", () => tooMany.send(), "invalid_request"],
        ["bad route", () => s.batch().acquire("lease://acme/r/x", 1_000).acquire("lease://acme/x", 1_000).send(), "invalid_route"],
        ["another session's lease", () => s.batch().release(theirs).send(), "invalid_request"],
        ["ttl out of range", () => s.batch().acquire("lease://acme/r/x", 3_600_000).send(), "invalid_request"],
      ];
      for (const [name, run, code] of cases) {
        await assert.rejects(run(), (e: unknown) => isCode(e, code), name);
      }
      assert.equal((await c.get("lease://acme/r/x")).held, false);
      const l = await s.acquire("lease://acme/r/mine", 5_000);
      const resp = await c.raw.DELETE("/v1/sessions/{session_id}", { params: { path: { session_id: s.id } } });
      assert.equal(resp.response.status, 204);
      await assert.rejects(s.batch().extend(l, 1_000).send(), (e: unknown) => isCode(e, "session_not_found") || e instanceof SessionLostError);
      await new Promise((resolve) => (l.lost.aborted ? resolve(null) : l.lost.addEventListener("abort", resolve)));
      assert.ok(l.err instanceof LeaseLostError);
    } finally {
      await s.close().catch(() => undefined);
      await other.close();
    }
  });

  test("authorization is per operation", async () => {
    const narrow = new MusterClient(b.url, { token: tokens.narrow.secret });
    const s = await narrow.session("reader", 10_000);
    try {
      const res = await s.batch().acquire("lease://acme/renderers/a", 1_000).acquire("lease://acme/other/a", 1_000).send();
      for (const r of res) {
        assert.ok(isCode(r.err, "forbidden"));
        assert.equal((r.err as MusterError).advice, "retry-no");
      }
    } finally {
      await s.close();
    }
  });
});
