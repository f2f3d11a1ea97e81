// Run by observe.test.ts as a child process: uses every long-lived object of
// the SDK, closes them, and then simply returns. Node exits only when no
// timer and no socket survived the closes; the parent measures that.
import { createServer } from "node:net";
import { MusterClient } from "../src/index.js";

const [url, token] = process.argv.slice(2) as [string, string];
const c = new MusterClient(url, { token });
const s = await c.session("exit-child", 3_000);
const l = await s.acquire("lease://exit/child/one", 3_000);
const sub = await s.watch("lease://exit/child/*");
const o = c.observe("lease://exit/**", { reconcileIntervalMs: 100, reconcileJitter: 0 });
await o.ready;
await s.withLease("lease://exit/child/two", 300, () => new Promise((r) => setTimeout(r, 150)));
// An observer of a server that never answers: its request hangs until close.
const hang = createServer(() => undefined).listen(0, "127.0.0.1");
await new Promise((r) => hang.once("listening", r));
const addr = hang.address() as { port: number };
const stuck = new MusterClient(`http://127.0.0.1:${addr.port}`).observe("lease://a/b/*");
await new Promise((r) => setTimeout(r, 100));
const t0 = Date.now();
await stuck.close();
const closeMs = Date.now() - t0;
hang.close();
hang.unref();
await o.close();
await sub.close();
await l.release();
await s.close();
process.stdout.write(JSON.stringify({ closeMs, done: Date.now() }) + "\n");
