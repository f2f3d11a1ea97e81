// Following wrong_broker (docs/placement.md) against fake brokers: a fetch
// that answers per host.
import assert from "node:assert/strict";
import { test } from "node:test";
import { MusterClient, MusterError } from "../src/index.js";
import { maxFollows, misdirectedTo } from "../src/client.js";

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
