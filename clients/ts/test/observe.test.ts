// The observer against the real broker: bootstrap over many pages, live
// changes, a broker restart, close while a request hangs, and that Node
// exits once everything is closed.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createServer, type Socket } from "node:net";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { ClosedError, MusterClient, isCode, type View } from "../src/index.js";
import { eventually, startBroker, tokens, type Broker } from "./broker.js";

describe("observer", () => {
  let b: Broker;
  let c: MusterClient;
  before(async () => {
    b = await startBroker();
    c = new MusterClient(b.url, { token: tokens.a.secret });
  });
  after(async () => {
    await b.kill();
  });

  test("bootstraps over many pages, follows changes, recovers from a broker restart", async () => {
    const s = await c.session("obs", 10_000);
    await Promise.all(Array.from({ length: 600 }, (_, i) => s.acquire(`lease://obs/r/doc-${i}`, 30_000)));
    const o = c.observe("lease://obs/r/*", { pageSize: 50 });
    assert.equal(o.isReady, false);
    const views: View[] = [];
    const off = o.onChange((v) => views.push(v));
    await o.ready;
    let v = o.view();
    assert.equal(v.items.length, 600);
    assert.equal(v.epoch, s.epoch);
    assert.deepEqual(v.items.map((i) => i.route), [...v.items.map((i) => i.route)].sort());
    assert.equal(o.stats.bootstraps, 1);

    const l = await s.acquire("lease://obs/r/new", 30_000);
    await eventually(() => o.view().items.some((i) => i.route === "lease://obs/r/new"), 5_000, "the new lease in the view");
    await l.release();
    await eventually(() => !o.view().items.some((i) => i.route === "lease://obs/r/new"), 5_000, "the release in the view");
    assert.ok(views.length >= 3, `${views.length} change notifications`);
    off();

    const epoch = o.view().epoch;
    await b.restart();
    await eventually(() => o.isReady && o.view().epoch !== epoch, 10_000, "a fresh view of the new epoch");
    assert.equal(o.error, null);
    v = o.view();
    assert.equal(v.items.length, 0, "a restart empties the lease universe");
    assert.ok(o.stats.recoveries >= 1);
    await s.close().catch(() => undefined);

    await o.close();
    assert.ok((o.error as unknown) instanceof ClosedError);
    assert.ok(!o.isReady);
    await assert.rejects(o.ready, ClosedError);
  });

  test("a fatal error stops the observer", async () => {
    const narrow = new MusterClient(b.url, { token: tokens.narrow.secret });
    const o = narrow.observe("lease://obs/**");
    await assert.rejects(o.ready, (e: unknown) => isCode(e, "forbidden"));
    assert.ok(o.stopped && isCode(o.error, "forbidden"));
    await o.close();
  });

  test("the caller's signal ends the observer", async () => {
    const ac = new AbortController();
    const o = c.observe("lease://obs/**", { signal: ac.signal });
    await o.ready;
    ac.abort();
    await eventually(() => o.stopped, 2_000, "stopped");
    await o.close();
  });

  test("close is prompt while the broker hangs, and retries back off meanwhile", async () => {
    const socks = new Set<Socket>();
    const hang = createServer((sock) => socks.add(sock)).listen(0, "127.0.0.1");
    await new Promise((r) => hang.once("listening", r));
    const port = (hang.address() as { port: number }).port;
    try {
      const o = new MusterClient(`http://127.0.0.1:${port}`).observe("lease://a/b/*");
      await eventually(() => socks.size >= 1, 2_000, "the watch request");
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(o.isReady, false);
      const t0 = Date.now();
      await o.close();
      assert.ok(Date.now() - t0 < 200, `close took ${Date.now() - t0} ms`);
      assert.equal(o.stats.attempts, 1, "one bootstrap at a time");
    } finally {
      for (const s of socks) s.destroy();
      hang.close();
    }
  });

  test("Node exits on its own once every object is closed", async () => {
    const child = join(dirname(fileURLToPath(import.meta.url)), "exit-child.js");
    const p = spawn(process.execPath, [child, b.url, tokens.a.secret], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    p.stdout.on("data", (d: Buffer) => (out += d.toString()));
    const code = await new Promise<number | null>((resolve) => {
      const t = setTimeout(() => {
        p.kill("SIGKILL");
        resolve(-1);
      }, 5_000);
      p.once("exit", (c) => {
        clearTimeout(t);
        resolve(c);
      });
    });
    assert.notEqual(code, -1, `the child did not exit within 5 s after its closes: something survived close (${out})`);
    assert.equal(code, 0);
    const r = JSON.parse(out) as { closeMs: number; done: number };
    assert.ok(r.closeMs < 200, `close of a hanging observer took ${r.closeMs} ms`);
    assert.ok(Date.now() - r.done < 4_000);
  });
});
