// Following wrong_broker (docs/placement.md) against fake brokers: a fetch
// that answers per host.
import assert from "node:assert/strict";
import { test } from "node:test";
import { MusterClient, MusterError } from "../src/index.js";
import { maxFollows, misdirectedTo, notSent } from "../src/transport.js";

const misdirect = (owner: string): Response =>
  new Response(JSON.stringify({ type: "about:blank", title: "Misdirected Request", status: 421, code: "wrong_broker", owner }), {
    status: 421,
    headers: { "Content-Type": "application/problem+json" },
  });

const session = {
  session_id: "0123456789abcdef0123456789abcdef",
  holder_incarnation: "h",
  owner_id: "w",
  ttl_ms: 10000,
  expires_at: "2030-01-01T00:00:00Z",
  epoch: "e",
};

/** A fetch whose answer depends on the request's host; it records every request. */
function fakeBrokers(answer: (host: string, body: string) => Response | Error) {
  const seen: { host: string; method: string; body: string; auth: string | null }[] = [];
  const f = async (input: Request | string | URL, init?: RequestInit): Promise<Response> => {
    const req = input instanceof Request ? input : new Request(input, init);
    const body = await req.text();
    const host = new URL(req.url).host;
    seen.push({ host, method: req.method, body, auth: req.headers.get("Authorization") });
    const a = answer(host, body);
    if (a instanceof Error) throw a;
    return a;
  };
  return { f: f as typeof globalThis.fetch, seen };
}

test("a 421 wrong_broker is followed with the body and token, and later requests go to the owner", async () => {
  const { f, seen } = fakeBrokers((host) =>
    host === "owner:2"
      ? new Response(JSON.stringify(session), { status: 201, headers: { "Content-Type": "application/json" } })
      : misdirect("http://owner:2"),
  );
  const c = new MusterClient("http://first:1", { token: "t", fetch: f });
  const s = await c.session("w", 10_000);
  assert.equal(s.id, session.session_id);
  assert.deepEqual(
    seen.map((r) => r.host),
    ["first:1", "owner:2"],
  );
  assert.equal(seen[1]!.method, "POST");
  assert.equal(seen[1]!.body, seen[0]!.body);
  assert.ok(seen[1]!.body.includes('"owner_id":"w"'));
  assert.equal(seen[1]!.auth, "Bearer t");
  await s.close().catch(() => undefined);
  assert.ok(seen.slice(2).every((r) => r.host === "owner:2"), "later requests go to the owner");
});

test("following stops after maxFollows hops; withoutFollow does not follow; both surface owner", async () => {
  const { f, seen } = fakeBrokers((host) => misdirect(host === "a:1" ? "http://b:2" : "http://a:1"));
  const c = new MusterClient("http://a:1", { fetch: f });
  const err = await c.session("w", 10_000).then(
    () => null,
    (e: unknown) => e,
  );
  assert.ok(err instanceof MusterError && err.code === "wrong_broker" && err.owner !== "", String(err));
  assert.equal(seen.length, 1 + maxFollows);

  const { f: g, seen: seen2 } = fakeBrokers(() => misdirect("http://b:2"));
  const c2 = new MusterClient("http://a:1", { fetch: g, withoutFollow: true });
  const err2 = await c2.session("w", 10_000).then(
    () => null,
    (e: unknown) => e,
  );
  assert.ok(err2 instanceof MusterError && err2.code === "wrong_broker" && err2.owner === "http://b:2", String(err2));
  assert.equal(seen2.length, 1);
});

test("an owner that stops answering is forgotten: the next request asks the configured broker", async () => {
  let ownerUp = true;
  const { f, seen } = fakeBrokers((host) => {
    if (host === "owner:2") {
      return ownerUp ? new Response(JSON.stringify({ items: [], snapshot: { epoch: "e", revision: 1 } }), { status: 200, headers: { "Content-Type": "application/json" } }) : new TypeError("fetch failed");
    }
    return misdirect("http://owner:2");
  });
  const c = new MusterClient("http://first:1", { fetch: f });
  await c.listPage("lease://a/b/*");
  ownerUp = false;
  await assert.rejects(c.listPage("lease://a/b/*"), TypeError);
  await assert.rejects(c.listPage("lease://a/b/*"), TypeError);
  assert.deepEqual(
    seen.map((r) => r.host),
    ["first:1", "owner:2", "owner:2", "first:1", "owner:2"],
  );
});

test("misdirectedTo follows only a wrong_broker problem naming an http(s) URL, and leaves the body readable", async () => {
  for (const [body, ctype, ok] of [
    ['{"code":"wrong_broker","owner":"http://10.0.0.2:7420"}', "application/problem+json", true],
    ['{"code":"wrong_broker","owner":"javascript:alert(1)"}', "application/problem+json", false],
    ['{"code":"wrong_broker"}', "application/problem+json", false],
    ['{"code":"not_owner","owner":"http://x"}', "application/problem+json", false],
    ["not json", "text/plain", false],
  ] as const) {
    const resp = new Response(body, { status: 421, headers: { "Content-Type": ctype } });
    assert.equal((await misdirectedTo(resp)) !== undefined, ok, body);
    assert.equal(await resp.text(), body);
  }
});

// Several brokers (docs/client-operations.md, "Several brokers").

/** A connection that could not be made, as Node's fetch reports it. */
const refused = (host: string): Error => {
  const cause = Object.assign(new Error(`connect ECONNREFUSED ${host}`), { code: "ECONNREFUSED", syscall: "connect" });
  return new TypeError("fetch failed", { cause });
};

const unavailable = (): Response =>
  new Response(JSON.stringify({ type: "about:blank", title: "Service Unavailable", status: 503, code: "family_unavailable" }), {
    status: 503,
    headers: { "Content-Type": "application/problem+json" },
  });

const page = (): Response => new Response(JSON.stringify({ items: [], snapshot: { epoch: "e", revision: 1 } }), { status: 200, headers: { "Content-Type": "application/json" } });

test("base URLs: a list or one string separated by commas, each checked; order is kept", () => {
  assert.deepEqual(new MusterClient("http://a:1/, http://b:2").baseUrls, ["http://a:1", "http://b:2"]);
  assert.deepEqual(new MusterClient(["http://a:1", "https://b:2/"]).baseUrls, ["http://a:1", "https://b:2"]);
  assert.equal(new MusterClient("http://a:1,http://b:2").baseUrl, "http://a:1");
  assert.deepEqual(new MusterClient("http://a:1").baseUrls, ["http://a:1"]);
  for (const bad of ["http://a:1,", "http://a:1,b:2", ",http://a:1", "http://a:1,ftp://b"]) {
    assert.throws(() => new MusterClient(bad), (e: unknown) => e instanceof MusterError && e.code === "invalid_request", bad);
  }
  for (const bad of [[], ["http://a:1", ""], ["http://a:1,http://b:2"]]) {
    assert.throws(() => new MusterClient(bad), (e: unknown) => e instanceof MusterError && e.code === "invalid_request", JSON.stringify(bad));
  }
});

test("a refused first base URL: the request is resent to the next one at once, and later requests start there", async () => {
  const { f, seen } = fakeBrokers((host, body) => {
    if (host === "dead:1") return refused(host);
    return host === "b:2" && body.includes("owner_id")
      ? new Response(JSON.stringify(session), { status: 201, headers: { "Content-Type": "application/json" } })
      : page();
  });
  const c = new MusterClient(["http://dead:1", "http://b:2"], { token: "t", fetch: f });
  const s = await c.session("w", 10_000);
  assert.equal(s.id, session.session_id);
  assert.equal(s.host, "b:2", "the session lives where it was created");
  assert.deepEqual(
    seen.map((r) => r.host),
    ["dead:1", "b:2"],
  );
  assert.equal(seen[1]!.body, seen[0]!.body);
  assert.equal(seen[1]!.auth, "Bearer t");
  await c.listPage("lease://a/b/*");
  assert.equal(seen.at(-1)!.host, "b:2");
  await s.close().catch(() => undefined);
});

test("a failure after the connection was made moves on but is returned; every base URL is tried once per request", async () => {
  const reset = new TypeError("fetch failed", { cause: Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" }) });
  const { f, seen } = fakeBrokers((host) => (host === "a:1" ? reset : page()));
  const c = new MusterClient("http://a:1,http://b:2", { fetch: f });
  await assert.rejects(c.listPage("lease://a/b/*"), TypeError);
  await c.listPage("lease://a/b/*");
  assert.deepEqual(
    seen.map((r) => r.host),
    ["a:1", "b:2"],
  );

  const { f: g, seen: seen2 } = fakeBrokers((host) => refused(host));
  const c2 = new MusterClient("http://a:1,http://b:2,http://c:3", { fetch: g });
  await assert.rejects(c2.listPage("lease://a/b/*"), TypeError);
  assert.ok(seen2.length <= 3 + maxFollows, `${seen2.length} attempts`);
  assert.deepEqual(
    seen2.slice(0, 3).map((r) => r.host),
    ["a:1", "b:2", "c:3"],
  );
});

test("family_unavailable moves on and is resent; the sessions of the broker that answered it are lost at once", async () => {
  let aServes = true;
  const { f, seen } = fakeBrokers((host, body) => {
    if (host === "a:1" && !aServes) return unavailable();
    if (body.includes("owner_id")) return new Response(JSON.stringify(session), { status: 201, headers: { "Content-Type": "application/json" } });
    return page();
  });
  const c = new MusterClient(["http://a:1", "http://b:2"], { fetch: f });
  const s = await c.session("w", 10_000);
  assert.equal(s.host, "a:1");
  aServes = false;
  const p = await c.listPage("lease://a/b/*");
  assert.equal(p.items.length, 0, "the answer of b:2");
  assert.deepEqual(
    seen.map((r) => r.host),
    ["a:1", "a:1", "b:2"],
  );
  assert.ok(s.err !== null, "the session of a:1 ended at once, though the request moved on");
  assert.match(String(s.err), /family_unavailable/);
  await c.listPage("lease://a/b/*");
  assert.equal(seen.at(-1)!.host, "b:2");
});

test("an owner answering family_unavailable is forgotten: one base URL is asked again, and its own family_unavailable is returned", async () => {
  let ownerServes = true;
  let firstServes = true;
  const { f, seen } = fakeBrokers((host) => {
    if (host === "owner:2") return ownerServes ? page() : unavailable();
    return firstServes ? misdirect("http://owner:2") : unavailable();
  });
  const c = new MusterClient("http://first:1", { fetch: f });
  await c.listPage("lease://a/b/*");
  assert.equal(c.owner, "http://owner:2");
  ownerServes = false;
  firstServes = false;
  await assert.rejects(c.listPage("lease://a/b/*"), (e: unknown) => e instanceof MusterError && e.code === "family_unavailable");
  assert.equal(c.owner, "");
  assert.deepEqual(
    seen.map((r) => r.host),
    ["first:1", "owner:2", "owner:2", "first:1"],
  );
});

test("concurrent requests failing at the same broker move the client once", async () => {
  let release: () => void = () => undefined;
  const gate = new Promise<void>((r) => (release = r));
  let waiting = 0;
  const { f, seen } = fakeBrokers(() => page());
  const slow = (async (input: Request | string | URL, init?: RequestInit): Promise<Response> => {
    const host = new URL(input instanceof Request ? input.url : String(input)).host;
    if (host === "a:1") {
      waiting++;
      await gate;
      throw new TypeError("fetch failed", { cause: Object.assign(new Error("socket hang up"), { code: "ECONNRESET" }) });
    }
    return f(input, init);
  }) as typeof globalThis.fetch;
  const c = new MusterClient("http://a:1,http://b:2,http://c:3", { fetch: slow });
  const all = Promise.allSettled([c.listPage("lease://a/b/*"), c.listPage("lease://a/b/*"), c.listPage("lease://a/b/*")]);
  while (waiting < 3) await new Promise((r) => setTimeout(r, 1));
  release();
  assert.ok((await all).every((r) => r.status === "rejected"));
  await c.listPage("lease://a/b/*");
  assert.deepEqual(
    seen.map((r) => r.host),
    ["b:2"],
    "moved once: to b:2, not past it",
  );
});

test("the caller's own abort moves nothing", async () => {
  const { f, seen } = fakeBrokers(() => page());
  const ac = new AbortController();
  const slow = (async (input: Request | string | URL, init?: RequestInit): Promise<Response> => {
    const host = new URL(input instanceof Request ? input.url : String(input)).host;
    if (host === "a:1" && !ac.signal.aborted) {
      ac.abort();
      throw new DOMException("aborted", "AbortError");
    }
    return f(input, init);
  }) as typeof globalThis.fetch;
  const c = new MusterClient("http://a:1,http://b:2", { fetch: slow });
  await assert.rejects(c.listPage("lease://a/b/*", { signal: ac.signal }));
  await c.listPage("lease://a/b/*");
  assert.deepEqual(
    seen.map((r) => r.host),
    ["a:1"],
  );
});

test("notSent: only a connection that could not be made", () => {
  assert.ok(notSent(refused("x")));
  const agg = Object.assign(new AggregateError([refused("a"), refused("b")]), { code: "ECONNREFUSED" });
  assert.ok(notSent(new TypeError("fetch failed", { cause: agg })));
  assert.ok(notSent(new TypeError("fetch failed", { cause: Object.assign(new Error("t"), { code: "UND_ERR_CONNECT_TIMEOUT" }) })));
  assert.ok(!notSent(new TypeError("fetch failed")), "a browser's fetch says nothing");
  assert.ok(!notSent(new TypeError("fetch failed", { cause: Object.assign(new Error("reset"), { code: "ECONNRESET", syscall: "read" }) })));
  assert.ok(!notSent(new TypeError("fetch failed", { cause: Object.assign(new Error("closed"), { code: "UND_ERR_SOCKET" }) })));
});
