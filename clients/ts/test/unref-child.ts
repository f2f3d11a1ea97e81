// Run by idioms.test.ts as a child process: a script that never closes its
// session. While its own work (a plain timer) keeps Node running, the
// session's keepalives and withLease's renewals go on (TTLs much shorter
// than the work); then it returns without closing anything, and Node must
// exit on its own: the SDK's background timers are unref'd.
import { MusterClient, type Lease } from "../src/index.js";

const [url, token] = process.argv.slice(2) as [string, string];
const c = new MusterClient(url, { token });
const s = await c.session("unref-child", 1_000);
const l: Lease = await s.acquire("lease://unref/child/one", 60_000);
const work = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms)); // the user's own work
const inside = await s.withLease("lease://unref/child/two", 600, async (l2) => {
  await work(2_000); // > 3 TTLs of the lease and 2 of the session
  return { lost: l2.err === null ? null : String(l2.err), renewals: l2.renewals };
});
await work(1_000);
const held = (await c.get(l.route)).held;
process.stdout.write(
  JSON.stringify({ session: s.err === null ? null : String(s.err), lease: l.err === null ? null : String(l.err), held, inside, done: Date.now() }) + "\n",
);
// No close: the session, its lease and the client are simply dropped.
