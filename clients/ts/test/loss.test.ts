// Prompt loss (docs/client-operations.md, "Prompt loss"): a session, and
// every lease it holds, is lost the moment an answer shows it is gone, not at
// its next keepalive. First against a fake broker (a fetch whose answers the
// test chooses, with two hosts), then against the real broker restarted.
import assert from "node:assert/strict";
import { afterEach, describe, test } from "node:test";
import { LeaseLostError, MusterClient, SessionLostError, isCode, type Lease, type Session } from "../src/index.js";
import { startBroker, tokens } from "./broker.js";
import { Broken, breakClient } from "../src/internal/faults.js";

const sessionBody = {
  session_id: "0123456789abcdef0123456789abcdef",
  holder_incarnation: "h",
  owner_id: "w",
  ttl_ms: 60_000,
  expires_at: "2030-01-01T00:00:00Z",
  epoch: "e1",
};

function leaseBody(route: string): Record<string, unknown> {
  return {
    route,
    fencing_token: 7,
    acquired_at: new Date().toISOString(),
    expires_at: new Date(Date.now() + 60_000).toISOString(),
    renewals: 0,
    outcome: "acquired",
    expires_after_request_ms: 60_000,
  };
}

const json = (body: unknown, status: number, epoch: string): Response =>
  new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json", "Muster-Epoch": epoch } });

const problem = (code: string, status: number, epoch: string): Response =>
  new Response(JSON.stringify({ type: "about:blank", title: code, status, code, detail: `the broker says ${code}` }), {
    status,
    headers: { "Content-Type": "application/problem+json", "Muster-Epoch": epoch },
  });

/** What the next answers of the fake broker are: null answers normally. */
type Override = (path: string, host: string) => Response | Error | null;

interface Fake {
  c: MusterClient;
  /** The epoch every normal answer carries. */
  epoch: string;
  /** Consulted first for every request but the session's creation. */
  override: Override | null;
  keepalives: number;
}

/**
 * A fake broker at http://fake:1. Normal answers: sessions (epoch e1),
 * keepalives, closes, acquisitions and extensions (held for a minute),
 * releases, one-page LISTs and watch streams (a marker and nothing more).
 */
function fakeBroker(sessionTtlMs = 60_000): Fake {
  const st: Fake = { c: undefined as unknown as MusterClient, epoch: "e1", override: null, keepalives: 0 };
  const f = async (input: Request | string | URL, init?: RequestInit): Promise<Response> => {
    const req = input instanceof Request ? input : new Request(input, init);
    const u = new URL(req.url);
    const path = u.pathname;
    await Promise.resolve();
    if (path === "/v1/sessions" && req.method === "POST") return json({ ...sessionBody, ttl_ms: sessionTtlMs }, 201, st.epoch);
    const o = st.override?.(path, u.host) ?? null;
    if (o instanceof Error) throw o;
    if (o !== null) return o;
    if (path.endsWith("/keepalive")) {
      st.keepalives++;
      return json(sessionBody, 200, st.epoch);
    }
    if (req.method === "DELETE" || path.endsWith("/release")) return new Response(null, { status: 204, headers: { "Muster-Epoch": st.epoch } });
    if (path.endsWith("/acquire") || path.endsWith("/extend")) {
      const seg = path.split("/");
      return json(leaseBody(`lease://${seg[3]}/${seg[4]}/${seg[5]}`), 200, st.epoch);
    }
    if (path === "/v1/leases/batch") return json({ results: [], revision: 9 }, 200, st.epoch);
    if (path === "/v1/leases/watch") {
      const marker = JSON.stringify({ epoch: st.epoch, revision: 9, subscriptions: [{ id: "s1", selector: "lease://acme/**", items: [] }] });
      return new Response(`event: snapshot\ndata: ${marker}\n\n`, { status: 200, headers: { "Content-Type": "text/event-stream", "Muster-Epoch": st.epoch } });
    }
    if (path === "/v1/leases") return json({ items: [], snapshot: { epoch: st.epoch, revision: 9 } }, 200, st.epoch);
    return problem("not_found", 404, st.epoch);
  };
  st.c = new MusterClient("http://fake:1", { fetch: f as typeof globalThis.fetch });
  return st;
}

/** Every session a test made, closed after it (a failed test must not leave a keepalive running). */
const made: Session[] = [];

async function session(c: MusterClient, ttlMs = 60_000): Promise<Session> {
  const s = await c.session("w", ttlMs);
  made.push(s);
  return s;
}

afterEach(async () => {
  const all = made.splice(0);
  await Promise.all(all.map((s) => s.close({ signal: AbortSignal.timeout(1_000) }).catch(() => undefined)));
});

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Checks that s and l were lost (the session's loss the lease's cause), with a message matching why. */
function assertLost(s: Session, leases: Lease[], why: RegExp): void {
  assert.ok(s.err instanceof SessionLostError, `the session: ${String(s.err)}`);
  assert.match(s.err.message, why);
  assert.ok(s.signal.aborted);
  for (const l of leases) {
    assert.ok(l.lost.aborted, `${l.route} not lost`);
    assert.ok(l.err instanceof LeaseLostError, `${l.route}: ${String(l.err)}`);
    assert.strictEqual(l.err.cause, s.err, `${l.route}: the cause is the session's loss`);
  }
}

function assertHeld(s: Session, leases: Lease[]): void {
  assert.equal(s.err, null, `the session: ${String(s.err)}`);
  for (const l of leases) assert.equal(l.err, null, `${l.route}: ${String(l.err)}`);
}

describe("prompt loss, against a fake broker", () => {
  test("another epoch from the session's broker ends the session and its leases at once, and its keepalive", async () => {
    const b = fakeBroker(600); // a keepalive every 200 ms
    const s = await session(b.c, 600);
    const l1 = await s.acquire("lease://acme/jobs/one", 60_000);
    const l2 = await s.acquire("lease://acme/jobs/two", 60_000);
    await sleep(250);
    assert.ok(b.keepalives >= 1, `${b.keepalives} keepalives`);
    await b.c.listPage("lease://acme/**"); // the same epoch: nothing happens
    assertHeld(s, [l1, l2]);
    b.epoch = "e2"; // the broker restarted
    const p = await b.c.listPage("lease://acme/**");
    assert.equal(p.epoch, "e2");
    // At once: before anything else runs after the answer that showed it.
    assertLost(s, [l1, l2], /fake:1 answered for another lifetime \(epoch e2, the session's e1\)/);
    const n = b.keepalives;
    await sleep(500);
    assert.equal(b.keepalives, n, "the keepalive stopped");
    await assert.rejects(s.acquire("lease://acme/jobs/three", 1_000), SessionLostError);
    await s.close(); // sends nothing: the session is gone
  });

  test("a watch stream's answer with another epoch ends the session", async () => {
    const b = fakeBroker();
    const s = await session(b.c, 60_000);
    const l = await s.acquire("lease://acme/jobs/one", 60_000);
    b.epoch = "e2";
    const sub = await b.c.watch("lease://acme/**");
    assert.equal(sub.marker.epoch, "e2");
    assertLost(s, [l], /another lifetime/);
    await sub.close();
  });

  test("another epoch from another host (a broker the client follows to) does not end the session", async () => {
    const b = fakeBroker();
    const s = await session(b.c, 60_000);
    const l = await s.acquire("lease://acme/jobs/one", 60_000);
    // fake:1 sends LISTs to other:2, which answers for its own lifetime.
    b.override = (path, host) => {
      if (path !== "/v1/leases") return null;
      if (host === "fake:1") {
        return new Response(JSON.stringify({ code: "wrong_broker", status: 421, owner: "http://other:2" }), {
          status: 421,
          headers: { "Content-Type": "application/problem+json", "Muster-Epoch": "e1" },
        });
      }
      return json({ items: [], snapshot: { epoch: "x9", revision: 1 } }, 200, "x9");
    };
    const p = await b.c.listPage("lease://acme/**");
    assert.equal(p.epoch, "x9");
    assert.equal(b.c.epoch, "x9");
    assertHeld(s, [l]);
    // family_unavailable from that other host ends nothing either (the
    // owner is forgotten and the request resent to fake:1, which answers).
    b.override = (path, host) => (host === "other:2" && path === "/v1/leases" ? problem("family_unavailable", 503, "x9") : null);
    const q = await b.c.listPage("lease://acme/**");
    assert.equal(q.epoch, "e1", "answered by fake:1");
    assertHeld(s, [l]);
    b.override = null;
    await s.close();
  });

  test("a planned move: the session's broker is the one that last answered one of its requests with success", async () => {
    for (const broken of [false, true]) {
      const b = fakeBroker();
      if (broken) breakClient(b.c, Broken.CreatorLoss);
      const s = await session(b.c, 60_000);
      const l = await s.acquire("lease://acme/jobs/one", 60_000);
      // owner answers the session's requests; the other host names it (421).
      let owner = "other:2";
      let ownerEpoch = "x1";
      b.override = (path, host) => {
        if (host !== owner) {
          return new Response(JSON.stringify({ code: "wrong_broker", status: 421, owner: `http://${owner}` }), {
            status: 421,
            headers: { "Content-Type": "application/problem+json", "Muster-Epoch": host === "fake:1" ? b.epoch : "x1" },
          });
        }
        if (path.endsWith("/extend")) return json(leaseBody("lease://acme/jobs/one"), 200, ownerEpoch);
        if (path === "/v1/leases") return json({ items: [], snapshot: { epoch: ownerEpoch, revision: 1 } }, 200, ownerEpoch);
        return null;
      };
      await l.extend(60_000); // fake:1 names other:2, which answers: the session moved there
      assertHeld(s, [l]);
      assert.equal(s.host, broken ? "fake:1" : "other:2");
      assert.equal(s.epoch, broken ? "e1" : "x1");
      b.epoch = "e2"; // fake:1, the creator, restarted: its 421 carries e2
      owner = "fake:1"; // and the family moved back to it
      ownerEpoch = "e2";
      if (broken) {
        // The old rule: the creator's success under e2 ends the session.
        await assert.rejects(l.extend(60_000), LeaseLostError);
        assertLost(s, [l], /fake:1 answered for another lifetime \(epoch e2, the session's e1\)/);
        continue;
      }
      await l.extend(60_000); // other:2 names fake:1, which answers under e2
      assertHeld(s, [l]);
      assert.equal(s.host, "fake:1");
      assert.equal(s.epoch, "e2");
      ownerEpoch = "e3"; // fake:1 restarts again: any answer of it now ends the session
      await b.c.listPage("lease://acme/**");
      assertLost(s, [l], /fake:1 answered for another lifetime \(epoch e3, the session's e2\)/);
    }
  });

  test("a success of the session's own request is recorded before that same answer is judged", async () => {
    // The creator restarted and has the family back (moved away and back
    // while the session sent nothing): its success under the new epoch is
    // the session's, not a sign of its loss.
    const b = fakeBroker();
    const s = await session(b.c, 60_000);
    const l = await s.acquire("lease://acme/jobs/one", 60_000);
    b.epoch = "e2";
    await l.extend(60_000);
    assertHeld(s, [l]);
    assert.equal(s.epoch, "e2");
    // A failure answered under e3 is not a success of the session: it judges.
    b.epoch = "e3";
    b.override = (path) => (path.endsWith("/extend") ? problem("unavailable", 503, "e3") : null);
    await assert.rejects(l.extend(60_000), (e: unknown) => isCode(e, "unavailable"));
    assertLost(s, [l], /another lifetime \(epoch e3, the session's e2\)/);
  });

  test("family_unavailable from the session's broker ends the session at once", async () => {
    const b = fakeBroker();
    const s = await session(b.c, 60_000);
    const l = await s.acquire("lease://acme/jobs/one", 60_000);
    // Another problem changes nothing.
    b.override = (path) => (path === "/v1/leases" ? problem("unavailable", 503, "e1") : null);
    await assert.rejects(b.c.listPage("lease://acme/**"), (e: unknown) => isCode(e, "unavailable"));
    assertHeld(s, [l]);
    b.override = (path) => (path === "/v1/leases" ? problem("family_unavailable", 503, "e1") : null);
    await assert.rejects(b.c.listPage("lease://acme/**"), (e: unknown) => isCode(e, "family_unavailable"));
    assertLost(s, [l], /fake:1 no longer serves the family \(family_unavailable\)/);
    assert.ok(isCode(s.err!.cause, "family_unavailable"), String(s.err!.cause));
  });

  test("session_not_found to an acquisition ends the session and every lease it holds", async () => {
    const b = fakeBroker();
    const s = await session(b.c, 60_000);
    const l = await s.acquire("lease://acme/jobs/one", 60_000);
    b.override = (path) => (path.endsWith("/acquire") ? problem("session_not_found", 404, "e1") : null);
    await assert.rejects(s.acquire("lease://acme/jobs/two", 60_000), (e: unknown) => isCode(e, "session_not_found"));
    assertLost(s, [l], /session_not_found/);
    assert.ok(isCode(s.err!.cause, "session_not_found"));
  });

  test("session_not_found to an extension ends the session; the lease's cause is the session's loss", async () => {
    const b = fakeBroker();
    const s = await session(b.c, 60_000);
    const l1 = await s.acquire("lease://acme/jobs/one", 60_000);
    const l2 = await s.acquire("lease://acme/jobs/two", 60_000);
    b.override = (path) => (path.endsWith("/extend") ? problem("session_not_found", 404, "e1") : null);
    await assert.rejects(l1.extend(60_000), LeaseLostError);
    assertLost(s, [l1, l2], /session_not_found/);
  });

  test("session_not_found to a release or a batch ends the session", async () => {
    let b = fakeBroker();
    let s = await session(b.c, 60_000);
    const l1 = await s.acquire("lease://acme/jobs/one", 60_000);
    const l2 = await s.acquire("lease://acme/jobs/two", 60_000);
    b.override = (path) => (path.endsWith("/release") ? problem("session_not_found", 404, "e1") : null);
    await l1.release(); // it is not held: release resolves
    assertLost(s, [l1, l2], /session_not_found/);

    b = fakeBroker();
    s = await session(b.c, 60_000);
    const l3 = await s.acquire("lease://acme/jobs/three", 60_000);
    b.override = (path) => (path === "/v1/leases/batch" ? problem("session_not_found", 404, "e1") : null);
    await assert.rejects(s.batch().acquire("lease://acme/jobs/four", 60_000).do(), (e: unknown) => isCode(e, "session_not_found"));
    assertLost(s, [l3], /session_not_found/);
  });

  test("a connection error changes nothing: the local deadline decides", async () => {
    const b = fakeBroker();
    const s = await session(b.c, 60_000);
    const l = await s.acquire("lease://acme/jobs/one", 60_000);
    b.override = () => new TypeError("fetch failed");
    await assert.rejects(b.c.listPage("lease://acme/**"), TypeError);
    await assert.rejects(l.extend(60_000), TypeError);
    await assert.rejects(s.acquire("lease://acme/jobs/two", 60_000), TypeError);
    assertHeld(s, [l]);
    b.override = null;
    await s.close();
  });

  test("late loss (the conformance tests' broken client) ends nothing at once", async () => {
    const b = fakeBroker();
    breakClient(b.c, Broken.LateLoss);
    const s = await session(b.c, 60_000);
    const l = await s.acquire("lease://acme/jobs/one", 60_000);
    b.epoch = "e2";
    await b.c.listPage("lease://acme/**");
    b.override = (path) => (path.endsWith("/acquire") ? problem("session_not_found", 404, "e2") : null);
    await assert.rejects(s.acquire("lease://acme/jobs/two", 60_000), (e: unknown) => isCode(e, "session_not_found"));
    assertHeld(s, [l]);
    b.override = null;
    await s.close();
  });
});

describe("prompt loss, against the real broker", () => {
  test("after a restart, the first answer of the new lifetime loses the old session and its lease", async () => {
    const b = await startBroker();
    try {
      const c = new MusterClient(b.url, { token: tokens.a.secret });
      const s = await session(c, 600_000); // its next keepalive is 200 s away
      const l = await s.acquire("lease://acme/jobs/one", 600_000);
      await b.restart();
      assertHeld(s, [l]);
      const st = await c.get("lease://acme/jobs/one"); // any answer of the same client
      assert.equal(st.held, false);
      assert.notEqual(c.epoch, s.epoch);
      assertLost(s, [l], /answered for another lifetime/);
      await s.close();
    } finally {
      await b.kill();
    }
  });
});
