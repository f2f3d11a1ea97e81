/**
 * The page's pure parts, in Node (node:test): the diff of two views that the
 * event log shows, and the words of the state badge. The DOM parts are
 * tested in headless Chromium (tests/browser).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { MusterError, StreamEndError, StreamEndedError, type Item } from "@muster/client";
import { describe } from "../src/describe.js";
import { diff } from "../src/leases.js";
import { reasonOf } from "../src/reason.js";

function item(route: string, over: Partial<Item> = {}): Item {
  return {
    route, ownerId: "w1", holderIncarnation: "inc-1", acquiredAt: new Date(1000), expiresAt: new Date(16000),
    remainingMs: 15000, renewals: 0, ...over,
  };
}

test("diff: acquired, changed and left, in route order; the same holding read again is no change", () => {
  const prev = new Map([
    ["lease://a/r/1", item("lease://a/r/1")],
    ["lease://a/r/2", item("lease://a/r/2")],
    ["lease://a/r/3", item("lease://a/r/3")],
  ]);
  const next = [
    item("lease://a/r/0"),
    item("lease://a/r/1", { remainingMs: 900 }), // re-read (a reconciliation): same holding
    item("lease://a/r/2", { renewals: 1 }),
  ];
  const got = diff(prev, next).map((d) => `${d.kind} ${d.route}`);
  assert.deepEqual(got, ["acquired lease://a/r/0", "changed lease://a/r/2", "left lease://a/r/3"]);
  assert.deepEqual(diff(prev, [...prev.values()]), []);
  assert.deepEqual(
    diff(new Map([["lease://a/r/1", item("lease://a/r/1")]]), [item("lease://a/r/1", { holderIncarnation: "inc-2" })]).map((d) => d.kind),
    ["changed"],
  );
});

test("reasonOf names overflow, a restart and the network", () => {
  const cases: [Error | null, RegExp][] = [
    [null, /^$/],
    [new StreamEndError("overflow", 7), /^overflow: /],
    [new StreamEndError("shutdown"), /^broker restart: /],
    [new StreamEndError("superseded"), /superseded/],
    [new MusterError("epoch_changed", "the broker restarted during the bootstrap", 409), /^broker restart: new epoch/],
    [new StreamEndedError(), /^network: /],
    [new TypeError("Failed to fetch"), /^network: Failed to fetch$/],
    [new MusterError("unavailable", "the fleet store is unreachable", 503), /^unavailable: the fleet store/],
  ];
  for (const [err, want] of cases) assert.match(reasonOf(err), want, String(err));
});

test("describe puts the code first and the detail once", () => {
  assert.equal(describe(new MusterError("forbidden", "no grant covers this request", 403)), "forbidden: no grant covers this request");
  assert.equal(describe(new MusterError("forbidden")), "forbidden");
  assert.equal(describe(new Error("boom")), "boom");
  assert.equal(describe("text"), "text");
});
