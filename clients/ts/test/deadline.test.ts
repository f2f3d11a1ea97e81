// The local deadline of a lease (docs/client-operations.md, "The local
// deadline") against a fake broker: a fetch that answers each request after a
// chosen delay with a chosen body, so the rule's arithmetic is checked on its
// own. The real broker's side is in sdk.test.ts.
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { LeaseLostError, MusterClient, isCode, type Lease } from "../src/index.js";

// These tests wait for nothing but a lease's loss against a fake broker (no
// socket): the SDK's deadline and keepalive timers are unref'd (README,
// "Process exit"), so the file keeps Node running itself, as such a program must.
const keepRunning = setInterval(() => undefined, 60_000);
after(() => clearInterval(keepRunning));

const session = {
  session_id: "0123456789abcdef0123456789abcdef",
  holder_incarnation: "h",
  owner_id: "w",
  ttl_ms: 60_000,
  expires_at: "2030-01-01T00:00:00Z",
  epoch: "e",
};

const json = (body: unknown, status = 200): Response => new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });

/** A lease answer: expiresAt defaults to one minute after the wall clock's now. */
function leaseBody(o: { outcome?: string; expiresAfterRequestMs?: number; expiresAt?: number }): Record<string, unknown> {
  const b: Record<string, unknown> = {
    route: "lease://acme/jobs/one",
    fencing_token: 7,
    acquired_at: new Date().toISOString(),
    expires_at: new Date(o.expiresAt ?? Date.now() + 60_000).toISOString(),
    renewals: 0,
  };
  if (o.outcome !== undefined) b["outcome"] = o.outcome;
  if (o.expiresAfterRequestMs !== undefined) b["expires_after_request_ms"] = o.expiresAfterRequestMs;
  return b;
}

/**
 * A fake broker: sessions, keepalives and closes answer at once; the lease
 * operations answer with leaseOp's delay and body (the path's last segment:
 * acquire, extend, batch).
 */
function fakeBroker(leaseOp: (op: string) => { delayMs: number; body: () => unknown }): MusterClient {
  const f = async (input: Request | string | URL, init?: RequestInit): Promise<Response> => {
    const req = input instanceof Request ? input : new Request(input, init);
    const path = new URL(req.url).pathname;
    if (path === "/v1/sessions") return json(session, 201);
    if (path.endsWith("/keepalive")) return json(session);
    if (req.method === "DELETE") return new Response(null, { status: 204 });
    const op = path.slice(path.lastIndexOf("/") + 1);
    const a = leaseOp(op);
    await sleep(a.delayMs);
    return json(a.body());
  };
  return new MusterClient("http://fake:1", { fetch: f as typeof globalThis.fetch });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Resolves with the monotonic time at which l reports its loss. */
function lostAt(l: Lease): Promise<number> {
  if (l.lost.aborted) return Promise.resolve(performance.now());
  return new Promise((r) => l.lost.addEventListener("abort", () => r(performance.now()), { once: true }));
}

/**
 * Checks that l, whose request was sent after `sent` (performance.now), is
 * lost as a local lease_expired at sent + wantMs: not before (a timer may fire
 * a millisecond early), and not much later.
 */
async function lostAround(l: Lease, sent: number, wantMs: number): Promise<void> {
  const at = (await lostAt(l)) - sent;
  assert.ok(l.err instanceof LeaseLostError && isCode(l.err.cause, "lease_expired"), String(l.err));
  assert.ok(at >= wantMs - 2, `lost ${Math.round(at)} ms after the send, want not before ${wantMs}`);
  assert.ok(at < wantMs + 400, `lost ${Math.round(at)} ms after the send, want about ${wantMs}`);
}

test("a grant after a wait close to the TTL is held until send + expires_after_request_ms", async () => {
  // The broker waited 1500 ms in the queue, then granted 1000 ms: send + TTL
  // lies before the answer even arrives.
  const c = fakeBroker(() => ({ delayMs: 1_500, body: () => leaseBody({ outcome: "acquired", expiresAfterRequestMs: 2_500 }) }));
  const s = await c.session("w", 60_000);
  try {
    const sent = performance.now();
    const l = await s.acquire("lease://acme/jobs/one", 1_000, { waitMs: 10_000 });
    assert.equal(l.err, null, "not lost on arrival");
    await sleep(Math.max(0, sent + 2_300 - performance.now()));
    assert.equal(l.err, null, "still held 200 ms before send + expires_after_request_ms");
    await lostAround(l, sent, 2_500);
  } finally {
    await s.close();
  }
});

test("without expires_after_request_ms (an older broker) the deadline is send + TTL", async () => {
  const c = fakeBroker(() => ({ delayMs: 200, body: () => leaseBody({ outcome: "acquired" }) }));
  const s = await c.session("w", 60_000);
  try {
    const sent = performance.now();
    const l = await s.acquire("lease://acme/jobs/one", 800);
    await lostAround(l, sent, 800);
  } finally {
    await s.close();
  }
});

test("already_held: expires_after_request_ms, or without it what expires_at leaves of the TTL", async () => {
  // The broker's answer says 300 ms are left; its wall clock (expires_at) is
  // an hour ahead, which the member makes irrelevant.
  let c = fakeBroker(() => ({ delayMs: 0, body: () => leaseBody({ outcome: "already_held", expiresAfterRequestMs: 300, expiresAt: Date.now() + 3_600_000 }) }));
  let s = await c.session("w", 60_000);
  try {
    const sent = performance.now();
    await lostAround(await s.acquire("lease://acme/jobs/one", 5_000), sent, 300);
  } finally {
    await s.close();
  }
  // An older broker: what expires_at leaves, on the wall clock.
  c = fakeBroker(() => ({ delayMs: 0, body: () => leaseBody({ outcome: "already_held", expiresAt: Date.now() + 300 }) }));
  s = await c.session("w", 60_000);
  try {
    const sent = performance.now();
    await lostAround(await s.acquire("lease://acme/jobs/one", 5_000), sent, 300);
  } finally {
    await s.close();
  }
});

test("an extension sent at send moves the deadline to send + TTL", async () => {
  const c = fakeBroker((op) =>
    op === "acquire"
      ? { delayMs: 0, body: () => leaseBody({ outcome: "acquired", expiresAfterRequestMs: 300 }) }
      : { delayMs: 200, body: () => ({ ...leaseBody({}), renewals: 1 }) },
  );
  const s = await c.session("w", 60_000);
  try {
    const l = await s.acquire("lease://acme/jobs/one", 300);
    const sent = performance.now();
    await l.extend(700);
    assert.equal(l.renewals, 1);
    await lostAround(l, sent, 700);
  } finally {
    await s.close();
  }
});

test("a batch acquisition's deadline is the batch's send + expires_after_request_ms", async () => {
  const c = fakeBroker(() => ({
    delayMs: 100,
    body: () => ({ results: [{ op: "acquire", route: "lease://acme/jobs/one", ok: true, lease: leaseBody({ outcome: "already_held", expiresAfterRequestMs: 400 }) }], revision: 9 }),
  }));
  const s = await c.session("w", 60_000);
  try {
    const sent = performance.now();
    const [r] = await s.batch().acquire("lease://acme/jobs/one", 5_000).do();
    assert.equal(r!.err, null);
    await lostAround(r!.lease!, sent, 400);
  } finally {
    await s.close();
  }
});

test("the deadline is on the monotonic clock: a wall clock step changes nothing", async () => {
  const realNow = Date.now;
  // The wall clock steps an hour ahead while the acquisition is in flight
  // (and back while the lease is held): a deadline read on it would pass at
  // once.
  const c = fakeBroker(() => ({
    delayMs: 100,
    body: () => {
      Date.now = () => realNow() + 3_600_000;
      return leaseBody({ outcome: "acquired", expiresAfterRequestMs: 600 });
    },
  }));
  const s = await c.session("w", 60_000);
  try {
    const sent = performance.now();
    const l = await s.acquire("lease://acme/jobs/one", 500);
    assert.equal(l.err, null, "not lost when the wall clock stepped ahead");
    Date.now = () => realNow() - 3_600_000;
    await lostAround(l, sent, 600);
  } finally {
    Date.now = realNow;
    await s.close();
  }
});

test("the session's keepalive deadline is on the monotonic clock too", async () => {
  const realNow = Date.now;
  // The first keepalive fails while the wall clock steps an hour ahead; the
  // retry gets through. A deadline read on the wall clock would have lost
  // the session at the failure.
  let keepalives = 0;
  const f = async (input: Request | string | URL, init?: RequestInit): Promise<Response> => {
    const req = input instanceof Request ? input : new Request(input, init);
    const path = new URL(req.url).pathname;
    await Promise.resolve();
    if (path === "/v1/sessions") return json({ ...session, ttl_ms: 1_000 }, 201);
    if (path.endsWith("/keepalive")) {
      if (++keepalives === 1) {
        Date.now = () => realNow() + 3_600_000;
        throw new TypeError("fetch failed");
      }
      return json(session);
    }
    return new Response(null, { status: 204 });
  };
  const c = new MusterClient("http://fake:1", { fetch: f as typeof globalThis.fetch });
  const s = await c.session("w", 1_000);
  try {
    await sleep(900);
    assert.ok(keepalives >= 2, `${keepalives} keepalives`);
    assert.equal(s.err, null, "the session lives on its retried keepalive");
  } finally {
    Date.now = realNow;
    await s.close();
  }
});
