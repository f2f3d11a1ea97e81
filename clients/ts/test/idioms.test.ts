// The TypeScript idioms of the SDK: type guards and exactOptionalPropertyTypes
// (checked by tsc --strict with exactOptionalPropertyTypes on: this file does
// not compile without them), `await using` on client, session, lease, watch
// and observer, `for await` over an observer's views, the test hooks kept
// out of the public surface, and a script that does not close its session
// still exiting (unref'd timers) while keepalives go on during its own work.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import * as sdk from "../src/index.js";
import {
  ClosedError,
  MusterClient,
  MusterError,
  ReleasedError,
  isCode,
  type AcquireOptions,
  type ClientOptions,
  type ListOptions,
  type ObserveOptions,
  type View,
} from "../src/index.js";
import { eventually, startBroker, tokens, type Broker } from "./broker.js";

const here = dirname(fileURLToPath(import.meta.url));
const pkg = join(here, "..", "..");

test("isCode is a type guard: a caught unknown narrows to MusterError with the literal code", () => {
  const e: unknown = new MusterError("lease_held", "held", 409, "Conflict");
  if (!isCode(e, "lease_held")) return assert.fail("isCode");
  const code: "lease_held" = e.code; // a type error when isCode returns boolean
  assert.equal(code, "lease_held");
  assert.equal(e.status, 409);
  assert.equal(e.advice, "retry-backoff");
  assert.equal(isCode(new Error("x"), "lease_held"), false);
});

test("options take undefined under exactOptionalPropertyTypes (process.env values, optional signals)", () => {
  const env: Record<string, string | undefined> = {};
  const signal: AbortSignal | undefined = undefined;
  const copts: ClientOptions = { token: env["MUSTER_TOKEN"], fetch: undefined, withoutFollow: undefined };
  const c = new MusterClient("http://127.0.0.1:1", { token: env["MUSTER_TOKEN"] });
  const a: AcquireOptions = { waitMs: undefined, signal };
  const l: ListOptions = { limit: undefined, cursor: undefined, signal };
  const o: ObserveOptions = { shortestTtlMs: undefined, reconcileIntervalMs: undefined, reconcileJitter: undefined, pageSize: undefined, signal };
  assert.ok(copts && c && a && l && o);
  const ob = c.observe("lease://a/b/*", { ...o, signal: AbortSignal.abort() }); // undefined options mean the defaults
  assert.equal(ob.reconcileEveryMs, sdk.maxReconcileMs);
  assert.equal(ob.stopped || !ob.isReady, true);
});

test("the conformance tests' hooks are not in the public surface", () => {
  const c = new MusterClient("http://127.0.0.1:1");
  for (const k of ["stickyOwner", "singleBroker", "stayOnUnavailable", "neverLost", "sendPlusTtl", "lateLoss"]) {
    assert.equal(k in c, false, `MusterClient.${k}`);
  }
  assert.equal(Object.getOwnPropertySymbols(c).length, 0);
  for (const k of ["Broken", "brokenKey", "breakClient"]) assert.equal(k in sdk, false, `export ${k}`);
  const dts = ["index.d.ts", "client.d.ts", "observe.d.ts", "lease.d.ts", "cjs/index.d.ts", "cjs/client.d.ts"]
    .map((f) => readFileSync(join(pkg, "dist", f), "utf8"))
    .join("\n");
  assert.doesNotMatch(dts, /stickyOwner|singleBroker|stayOnUnavailable|neverLost|sendPlusTtl|lateLoss|brokenKey|broken\.js|faults/);
  const exportsMap = (JSON.parse(readFileSync(join(pkg, "package.json"), "utf8")) as { exports: Record<string, unknown> }).exports;
  assert.deepEqual(Object.keys(exportsMap).sort(), [".", "./browser", "./package.json"]);
});

describe("idioms against the broker", () => {
  let b: Broker;
  let c: MusterClient;
  before(async () => {
    b = await startBroker();
    c = new MusterClient(b.url, { token: tokens.a.secret });
  });
  after(async () => {
    await b.kill();
  });

  test("await using releases the lease, then closes the session, the watch and the observer", async () => {
    const route = "lease://idioms/using/one";
    let lease: sdk.Lease | undefined;
    let session: sdk.Session | undefined;
    let sub: sdk.Subscription | undefined;
    let obs: sdk.Observer | undefined;
    {
      await using s = await c.session("using", 10_000);
      await using l = await s.acquire(route, 10_000);
      await using w = await s.watch("lease://idioms/using/*");
      await using o = c.observe("lease://idioms/using/*");
      await o.ready;
      assert.equal((await c.get(route)).held, true);
      [lease, session, sub, obs] = [l, s, w, o];
    }
    assert.ok(lease?.err instanceof ReleasedError, String(lease?.err)); // released before the session closed
    assert.ok(session?.err instanceof ClosedError);
    assert.ok(sub?.err instanceof ClosedError);
    assert.equal(obs?.stopped, true);
    assert.equal((await c.get(route)).held, false);
  });

  test("await using a client closes every session, observer and watch it opened", async () => {
    let s: sdk.Session | undefined;
    let o: sdk.Observer | undefined;
    let w: sdk.Subscription | undefined;
    let l: sdk.Lease | undefined;
    {
      await using c2 = new MusterClient(b.url, { token: tokens.a.secret });
      s = await c2.session("client-using", 10_000);
      l = await s.acquire("lease://idioms/client/one", 10_000);
      o = c2.observe("lease://idioms/client/*");
      w = await c2.watch("lease://idioms/client/*");
      await o.ready;
    }
    assert.ok(s.err instanceof ClosedError);
    assert.ok(l.err !== null);
    assert.equal(o.stopped, true);
    assert.ok(w.err instanceof ClosedError);
    assert.equal((await c.get("lease://idioms/client/one")).held, false);
  });

  test("for await over an observer yields its views, coalesced; break detaches, close ends the loop quietly", async () => {
    const s = await c.session("views", 10_000);
    const o = c.observe("lease://idioms/views/*");
    const seen: View[] = [];
    for await (const v of o) {
      seen.push(v);
      if (v.ready && v.items.length === 0) void s.acquire("lease://idioms/views/a", 10_000);
      if (v.items.some((i) => i.route === "lease://idioms/views/a")) break;
    }
    assert.equal(seen[0]!.ready, false); // the current view comes first
    assert.equal(o.stopped, false); // break only detached the loop
    const ended = (async () => {
      const vs: View[] = [];
      for await (const v of o) vs.push(v);
      return vs;
    })();
    await eventually(() => o.isReady, 5_000, "ready");
    await o.close();
    const last = await ended; // close ends the loop without an error
    assert.equal(last.at(-1)!.ready, false);
    await s.close();
  });

  test("for await over an observer that stops on an error throws it", async () => {
    const narrow = new MusterClient(b.url, { token: tokens.narrow.secret });
    const o = narrow.observe("lease://elsewhere/**");
    await assert.rejects(
      (async () => {
        for await (const _ of o) {
          // views until it stops
        }
      })(),
      (e: unknown) => isCode(e, "forbidden"),
    );
  });

  test("a script that never closes its session exits on its own, keepalives and renewals going on while its work runs", async () => {
    const child = join(here, "unref-child.js");
    const p = spawn(process.execPath, [child, b.url, tokens.a.secret], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    p.stdout.on("data", (d: Buffer) => (out += d.toString()));
    const code = await new Promise<number | null>((resolve) => {
      const t = setTimeout(() => {
        p.kill("SIGKILL");
        resolve(-1);
      }, 12_000);
      p.once("exit", (x) => {
        clearTimeout(t);
        resolve(x);
      });
    });
    assert.notEqual(code, -1, `the child did not exit on its own: a timer of the SDK keeps Node running (${out})`);
    assert.equal(code, 0);
    const r = JSON.parse(out) as { session: string | null; lease: string | null; held: boolean; inside: { lost: string | null; renewals: number }; done: number };
    assert.equal(r.session, null, "the session was kept alive during the work");
    assert.equal(r.lease, null);
    assert.equal(r.held, true);
    assert.equal(r.inside.lost, null, "withLease renewed its lease during the work");
    assert.ok(r.inside.renewals >= 2, `renewals ${r.inside.renewals}`);
    assert.ok(Date.now() - r.done < 3_000, "exited promptly after its work");
  });
});
