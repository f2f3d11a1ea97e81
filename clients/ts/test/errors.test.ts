// Error mapping and retry advice: the same table as the Go SDK (read from
// clients/go/errors.go), an unknown code kept as a string, option validation.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import {
  ClosedError,
  Codes,
  LeaseLostError,
  MusterClient,
  MusterError,
  ReleasedError,
  SessionLostError,
  StreamEndError,
  StreamEndedError,
  advice,
  codes,
  isCode,
  reconcileInterval,
} from "../src/index.js";
import { problemError } from "../src/errors.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "..");

test("the code table and its advice equal the Go SDK's", () => {
  const go = readFileSync(join(root, "clients", "go", "errors.go"), "utf8");
  const sentinel = new Map<string, string>();
  for (const m of go.matchAll(/(Err\w+)\s*=\s*&Error\{Code: "(\w+)"\}/g)) sentinel.set(m[1]!, m[2]!);
  const goAdvice = new Map<string, string>();
  for (const m of go.matchAll(/\{(Err\w+), Retry(\w+)\}/g)) {
    goAdvice.set(sentinel.get(m[1]!)!, { No: "retry-no", Backoff: "retry-backoff", Restart: "retry-restart" }[m[2]!]!);
  }
  assert.ok(goAdvice.size >= 27, `read ${goAdvice.size} codes from errors.go`);
  assert.deepEqual([...codes], [...goAdvice.keys()], "the same codes in the same order");
  for (const [code, want] of goAdvice) assert.equal(advice(new MusterError(code, "", 409)), want, code);
  assert.equal(Object.keys(Codes).length, codes.length);
});

test("every code of openapi.yaml is known", () => {
  const spec = readFileSync(join(root, "openapi.yaml"), "utf8");
  // ErrorCode is an open string; its known codes are its x-extensible-enum.
  const block = /\n {4}ErrorCode:\n(?: {6}.*\n)*? {6}x-extensible-enum:\n((?: {8}- \w+\n)+)/.exec(spec);
  assert.ok(block, "ErrorCode x-extensible-enum in openapi.yaml");
  const listed = [...block[1]!.matchAll(/- (\w+)/g)].map((m) => m[1]!);
  assert.ok(listed.length >= 28, `read ${listed.length} codes from openapi.yaml`);
  assert.deepEqual([...codes], listed);
});

test("problem bodies map to MusterError; an unknown code is kept, never a crash", () => {
  const e = problemError(409, "Conflict", "application/problem+json", JSON.stringify({ type: "about:blank", title: "Conflict", status: 409, code: "fenced", detail: "old token" }));
  assert.ok(e instanceof MusterError);
  assert.equal(e.code, Codes.Fenced);
  assert.equal(e.detail, "old token");
  assert.equal(e.advice, "retry-restart");
  assert.ok(isCode(e, "fenced"));

  assert.equal(e.scope, "", "no scope outside a limit");
  const limit = problemError(429, "Too Many Requests", "application/problem+json", { code: "spec_limit", detail: "the root holds its quota of 2 specs", scope: "root" });
  assert.equal(limit.code, Codes.SpecLimit);
  assert.equal(limit.scope, "root");
  assert.equal(limit.advice, "retry-no");
  assert.equal(problemError(429, "", "application/problem+json", { code: "session_limit", scope: "galaxy" }).scope, "galaxy", "a newer scope is kept");
  assert.equal(problemError(429, "", "application/problem+json", { code: "session_limit", scope: 7 }).scope, "", "a scope that is not a string is dropped");

  const future = problemError(409, "Conflict", "application/problem+json", { code: "brand_new_code", title: "Conflict" });
  assert.equal(future.code, "brand_new_code");
  assert.equal(advice(future), "retry-no");
  assert.equal(advice(problemError(503, "", "application/problem+json", { code: "another_new" })), "retry-backoff");
  assert.equal(advice(problemError(429, "", "application/problem+json", { code: "another_new" })), "retry-backoff");

  // No problem body: the status decides.
  assert.equal(problemError(502, "Bad Gateway", "text/html", "<html>").code, "unavailable");
  assert.equal(problemError(404, "", null, "").code, "not_found");
  assert.equal(problemError(401, "", "text/plain", "no").code, "unauthenticated");
  assert.equal(problemError(403, "", "text/plain", "no").code, "forbidden");
  assert.equal(problemError(413, "", "text/plain", "no").code, "payload_too_large");
  assert.equal(problemError(500, "", "application/json", "{not json").code, "internal");
  assert.equal(problemError(418, "", "application/json", JSON.stringify({ code: 7 })).code, "internal");
});

test("advice of the SDK's own errors", () => {
  assert.equal(advice(null), "retry-no");
  assert.equal(advice(new ClosedError()), "retry-no");
  assert.equal(advice(new ReleasedError()), "retry-no");
  assert.equal(advice(new SessionLostError("no keepalive got through within the TTL")), "retry-restart");
  assert.equal(advice(new LeaseLostError(new MusterError("fenced"))), "retry-restart");
  assert.equal(advice(new StreamEndError("overflow", 9)), "retry-restart");
  assert.equal(advice(new StreamEndedError()), "retry-restart");
  assert.equal(advice(new DOMException("x", "AbortError")), "retry-no");
  assert.equal(advice(new TypeError("fetch failed")), "retry-backoff");
});

test("observe validates its options like the Go SDK", () => {
  const c = new MusterClient("http://127.0.0.1:1");
  const bad: [object, string][] = [
    [{ shortestTtlMs: -1 }, "Observe: the shortest TTL must not be negative"],
    [{ reconcileIntervalMs: 9 }, "Observe: the reconciliation interval must be at least 10ms"],
    [{ reconcileJitter: 1 }, "Observe: the reconciliation jitter must be in [0, 1)"],
    [{ reconcileJitter: -0.1 }, "Observe: the reconciliation jitter must be in [0, 1)"],
    [{ reconcileJitter: Number.NaN }, "Observe: the reconciliation jitter must be in [0, 1)"],
    [{ pageSize: 0 }, "Observe: the page size must be in 1..500"],
    [{ pageSize: 501 }, "Observe: the page size must be in 1..500"],
    [
      { pageSize: 0, reconcileIntervalMs: 1 },
      "Observe: the reconciliation interval must be at least 10ms; the page size must be in 1..500",
    ],
  ];
  for (const [opts, detail] of bad) {
    assert.throws(
      () => c.observe("lease://acme/*/*", opts),
      (e: unknown) => e instanceof MusterError && e.code === "invalid_request" && e.detail === detail,
      JSON.stringify(opts),
    );
  }
  const o = c.observe("lease://acme/*/*", { shortestTtlMs: 30_000, signal: AbortSignal.abort() });
  assert.equal(o.reconcileEveryMs, 15_000);
  assert.equal(reconcileInterval(0), 60_000);
  assert.equal(reconcileInterval(2_000), 5_000);
  assert.equal(reconcileInterval(600_000), 60_000);
});

test("the base URL is checked", () => {
  for (const bad of ["", "127.0.0.1:7420", "ftp://x", "http://"]) {
    assert.throws(() => new MusterClient(bad), (e: unknown) => isCode(e, "invalid_request"), bad);
  }
  assert.equal(new MusterClient("http://h:1/").baseUrl, "http://h:1");
});

test("backoff doubles 50 ms → 2 s jittered into [d/2, d]; reconciliation jitter stays within ±j", async () => {
  const { Backoff, jittered } = await import("../src/backoff.js");
  const bo = new Backoff(50, 2_000);
  const want = [50, 100, 200, 400, 800, 1_600, 2_000, 2_000];
  for (const d of want) {
    const got = bo.next();
    assert.ok(got >= d / 2 && got <= d, `${got} not in [${d / 2}, ${d}]`);
  }
  bo.reset();
  assert.ok(bo.next() <= 50);
  let lo = Infinity;
  let hi = -Infinity;
  for (let i = 0; i < 10_000; i++) {
    const v = jittered(60_000, 0.2);
    lo = Math.min(lo, v);
    hi = Math.max(hi, v);
  }
  assert.ok(lo >= 48_000 && hi <= 72_000, `[${lo}, ${hi}]`);
  assert.ok(lo < 49_000 && hi > 71_000, "the jitter spreads over the whole range");
  assert.equal(jittered(500, 0), 500);
});
