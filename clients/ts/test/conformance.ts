/**
 * The TypeScript runner of the language-neutral scenarios in
 * clients/conformance (their README describes the format and the harness's
 * control API). The shared harness runs the broker, the gating proxy and the
 * actors; this runner implements only the observer ops with this package's
 * Observer and forwards every other op to the harness's POST /step.
 */
import type { Harness, Scenario } from "./harness.js";
import { MusterClient, MusterError, ClosedError, LeaseLostError, advice, type Lease, type ObserveOptions, type Session } from "../src/index.js";
import { Broken, breakClient } from "../src/internal/faults.js";

/** What the runner reads of an observer, wherever it runs (this process, or a browser page). */
export interface ObserverState {
  ready: boolean;
  epoch: string;
  items: { route: string; ownerId: string; holderIncarnation: string }[];
  stopped: boolean;
  /** The contract code of the error, or its message for another error; null without one. */
  error: string | null;
  /** Whether the error is a ClosedError. */
  closed: boolean;
}

/** One observer under test. */
export interface ObserverHandle {
  state(): Promise<ObserverState>;
  /** Resolves when ready; rejects after ms, or when the observer stops first. */
  waitReady(ms: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * Starts observers: the runner's only dependency on where the SDK runs.
 * bases: the harness's proxy URL, or the base URLs of a step's brokers.
 */
export type ObserverFactory = (
  bases: readonly string[],
  secret: string,
  selector: string,
  opts: ObserveOptions,
  /** The scenario's broken variant (a bitwise or of Broken), 0 for none. */
  broken: number,
) => Promise<ObserverHandle>;

/** A client of the given base URLs (the proxy, or a step's brokers), broken as the scenario's variant asks. */
function runnerClient(bases: readonly string[], secret: string, broken: number): MusterClient {
  const c = new MusterClient(bases, { token: secret, withoutFollow: (broken & Broken.NoFollow) !== 0 });
  breakClient(c, broken);
  return c;
}

/** The factory of this process: the SDK's Observer, through the harness's proxy. */
export const nodeObservers: ObserverFactory = (bases, secret, selector, opts, broken) => {
  const o = runnerClient(bases, secret, broken).observe(selector, opts);
  return Promise.resolve({
    state: () => {
      const v = o.view();
      const e = o.error;
      return Promise.resolve({
        ready: v.ready,
        epoch: v.epoch,
        items: v.items.map((i) => ({ route: i.route, ownerId: i.ownerId, holderIncarnation: i.holderIncarnation })),
        stopped: o.stopped,
        error: e === null ? null : e instanceof MusterError ? e.code : e.message,
        closed: e instanceof ClosedError,
      });
    },
    waitReady: async (ms) => {
      let t: ReturnType<typeof setTimeout> | undefined;
      try {
        await Promise.race([o.ready, new Promise((_, reject) => (t = setTimeout(() => reject(new Error(`not ready after ${ms} ms: ${String(o.error)}`)), ms)))]);
      } finally {
        clearTimeout(t);
      }
    },
    close: () => o.close(),
  });
};

/** The twelve ops this runner runs itself; every other op goes to the harness. */
const observerOps = new Set([
  "observe",
  "wait_ready",
  "expect_not_ready",
  "expect_view",
  "mark_epoch",
  "expect_same_view",
  "expect_stopped",
  "close_observer",
  "worker_acquire",
  "worker_extend",
  "worker_lost",
  "worker_holds",
]);

/** A worker of the scenario: one client for the whole scenario, its sessions, and per route the last lease worker_acquire got. */
interface Worker {
  c: MusterClient;
  session: Session | null;
  sessions: Session[];
  leases: Map<string, Lease>;
}

/** A scenario's workers, and per route the highest fencing token they got. */
interface Workers {
  byName: Map<string, Worker>;
  highest: Map<string, number>;
}

/**
 * worker_acquire: the worker (its client built on first use) creates a
 * session (of session_ttl_ms, default 10 s) when it has none or new_session
 * asks, and acquires route (waiting
 * up to wait_ms in the route's queue when given: AcquireOptions.waitMs). An error
 * advised backoff (a transport error, a failover in progress) is retried
 * until timeout_ms; the fencing token must be at least min_token and above
 * every token of the route seen before.
 */
async function workerAcquire(h: Harness, s: Record<string, unknown>, ws: Workers, broken: number): Promise<void> {
  const name = s["worker"] as string;
  const route = s["route"] as string;
  const ttl = s["ttl_ms"] as number;
  const timeout = typeof s["timeout_ms"] === "number" ? s["timeout_ms"] : 5_000;
  const waitMs = typeof s["wait_ms"] === "number" ? s["wait_ms"] : 0;
  const sessionTtl = typeof s["session_ttl_ms"] === "number" && s["session_ttl_ms"] > 0 ? s["session_ttl_ms"] : 10_000;
  let w = ws.byName.get(name);
  if (w === undefined) {
    const token = s["token"] as string;
    w = { c: runnerClient(await h.bases(s["brokers"]), need(h.tokens[token], `token ${token}`), broken), session: null, sessions: [], leases: new Map() };
    ws.byName.set(name, w);
  }
  if (s["new_session"] === true) w.session = null;
  const deadline = Date.now() + timeout;
  for (;;) {
    try {
      if (w.session === null) {
        w.session = await w.c.session(name, sessionTtl);
        w.sessions.push(w.session);
      }
      const l = await w.session.acquire(route, ttl, waitMs > 0 ? { waitMs } : {});
      const min = typeof s["min_token"] === "number" ? s["min_token"] : 0;
      const high = ws.highest.get(route) ?? 0;
      if (l.fencingToken < min || l.fencingToken <= high) throw new Error(`fencing token ${l.fencingToken}, want at least ${min} and above ${high}`);
      ws.highest.set(route, l.fencingToken);
      w.leases.set(route, l);
      return;
    } catch (e) {
      if (advice(e) !== "retry-backoff" || Date.now() >= deadline) throw e;
      await sleep(100);
    }
  }
}

/**
 * worker_extend: the lease of route that the worker's last worker_acquire
 * got is extended by ttl_ms (Lease.extend, its fencing token); an error
 * advised backoff is retried until timeout_ms.
 */
async function workerExtend(s: Record<string, unknown>, ws: Workers): Promise<void> {
  const route = s["route"] as string;
  const timeout = typeof s["timeout_ms"] === "number" ? s["timeout_ms"] : 5_000;
  const l = need(ws.byName.get(s["worker"] as string)?.leases.get(route), `lease of ${route} acquired by worker ${String(s["worker"])}`);
  const deadline = Date.now() + timeout;
  for (;;) {
    try {
      await l.extend(s["ttl_ms"] as number);
      return;
    } catch (e) {
      if (advice(e) !== "retry-backoff" || Date.now() >= deadline) throw e;
      await sleep(100);
    }
  }
}

/**
 * worker_lost: the lease of route that the worker's last worker_acquire got
 * reports its loss (`lost` aborted, `err` a LeaseLostError) within timeout_ms.
 */
async function workerLost(s: Record<string, unknown>, ws: Workers): Promise<void> {
  const route = s["route"] as string;
  const timeout = typeof s["timeout_ms"] === "number" ? s["timeout_ms"] : 5_000;
  const l = need(ws.byName.get(s["worker"] as string)?.leases.get(route), `lease of ${route} acquired by worker ${String(s["worker"])}`);
  if (!l.lost.aborted) {
    let t: ReturnType<typeof setTimeout> | undefined;
    let onLost = (): void => undefined;
    const lost = await Promise.race([
      new Promise<boolean>((r) => {
        onLost = () => r(true);
        l.lost.addEventListener("abort", onLost, { once: true });
      }),
      new Promise<boolean>((r) => (t = setTimeout(() => r(false), timeout))),
    ]);
    clearTimeout(t);
    l.lost.removeEventListener("abort", onLost);
    if (!lost) throw new Error(`the lease of ${route} reported no loss within ${timeout} ms`);
  }
  if (!(l.err instanceof LeaseLostError)) throw new Error(`the lease of ${route} ended with ${String(l.err)}, want a LeaseLostError`);
}

/**
 * worker_holds: the lease of route that the worker's last worker_acquire got
 * reports no loss (`lost` stays unaborted, the signal worker_lost checks) for
 * for_ms.
 */
async function workerHolds(s: Record<string, unknown>, ws: Workers): Promise<void> {
  const route = s["route"] as string;
  const forMs = typeof s["for_ms"] === "number" ? s["for_ms"] : 0;
  const l = need(ws.byName.get(s["worker"] as string)?.leases.get(route), `lease of ${route} acquired by worker ${String(s["worker"])}`);
  if (!l.lost.aborted) {
    let t: ReturnType<typeof setTimeout> | undefined;
    let onLost = (): void => undefined;
    await Promise.race([
      new Promise<void>((r) => {
        onLost = () => r();
        l.lost.addEventListener("abort", onLost, { once: true });
      }),
      new Promise<void>((r) => (t = setTimeout(r, forMs))),
    ]);
    clearTimeout(t);
    l.lost.removeEventListener("abort", onLost);
  }
  if (l.lost.aborted) throw new Error(`the lease of ${route} was lost within ${forMs} ms: ${String(l.err)}`);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Whether route matches selector: `*` is exactly one segment, `**` zero or more. */
export function selectorMatches(selector: string, route: string): boolean {
  const pre = "lease://";
  if (!selector.startsWith(pre) || !route.startsWith(pre)) return false;
  const pat = selector.slice(pre.length).split("/");
  const seg = route.slice(pre.length).split("/");
  const m = (i: number, j: number): boolean => {
    if (i === pat.length) return j === seg.length;
    if (pat[i] === "**") {
      for (let k = j; k <= seg.length; k++) if (m(i + 1, k)) return true;
      return false;
    }
    return j < seg.length && (pat[i] === "*" || pat[i] === seg[j]) && m(i + 1, j + 1);
  };
  return m(0, 0);
}

/** Runs one scenario's steps; rejects with the first failed step. */
export async function runScenario(h: Harness, sc: Scenario, broken = 0, factory: ObserverFactory = nodeObservers): Promise<void> {
  await h.load(sc.raw);
  const observers = new Map<string, Obs>();
  const marks = new Map<string, string>();
  const workers: Workers = { byName: new Map(), highest: new Map() };
  try {
    for (const [i, step] of sc.steps.entries()) {
      const op = step["op"] as string;
      try {
        if (op === "worker_acquire") await workerAcquire(h, step, workers, broken);
        else if (op === "worker_extend") await workerExtend(step, workers);
        else if (op === "worker_lost") await workerLost(step, workers);
        else if (op === "worker_holds") await workerHolds(step, workers);
        else if (observerOps.has(op)) await runObserverOp(h, step, observers, marks, broken, factory);
        else await h.step(step);
      } catch (e) {
        throw new Error(`step ${i} (${op}): ${e instanceof Error ? e.message : String(e)}`, { cause: e });
      }
    }
  } finally {
    // Close every observer and worker session; a broken observer may hang,
    // a session's broker may be dead, so never wait long.
    const sessions = [...workers.byName.values()].flatMap((w) => w.sessions);
    await Promise.race([
      Promise.all([...observers.values()].map((x) => x.o.close()).concat(sessions.map((ss) => ss.close({ signal: AbortSignal.timeout(1_000) }).catch(() => undefined)))),
      sleep(2_000),
    ]);
  }
}

interface Obs {
  o: ObserverHandle;
  token: string;
  selector: string;
}

function need<T>(v: T | undefined, what: string): T {
  if (v === undefined) throw new Error(`no ${what}`);
  return v;
}

async function runObserverOp(
  h: Harness,
  s: Record<string, unknown>,
  observers: Map<string, Obs>,
  marks: Map<string, string>,
  broken: number,
  factory: ObserverFactory,
): Promise<void> {
  const op = s["op"] as string;
  const name = s["observer"] as string;
  const timeout = typeof s["timeout_ms"] === "number" ? s["timeout_ms"] : 5_000;
  const get = (n: string): Obs => need(observers.get(n), `observer ${n}`);
  switch (op) {
    case "observe": {
      const token = s["token"] as string;
      const selector = s["selector"] as string;
      const opts: ObserveOptions = {};
      if (typeof s["page_size"] === "number") opts.pageSize = s["page_size"];
      if (typeof s["reconcile_ms"] === "number") opts.reconcileIntervalMs = s["reconcile_ms"];
      if (typeof s["jitter"] === "number") opts.reconcileJitter = s["jitter"];
      if (typeof s["shortest_ttl_ms"] === "number") opts.shortestTtlMs = s["shortest_ttl_ms"];
      observers.set(name, { o: await factory(await h.bases(s["brokers"]), need(h.tokens[token], `token ${token}`), selector, opts, broken), token, selector });
      return;
    }
    case "wait_ready":
      return get(name).o.waitReady(timeout);
    case "expect_not_ready":
      if ((await get(name).o.state()).ready) throw new Error("the observer is ready");
      return;
    case "mark_epoch":
      marks.set(name, (await get(name).o.state()).epoch);
      return;
    case "expect_view":
      return poll(timeout, () => checkView(h, s, get(name), marks.get(name)));
    case "expect_same_view": {
      const [a, b] = s["observers"] as [string, string];
      const within = s["within"] as string;
      return poll(timeout, async () => {
        const va = await get(a).o.state();
        const vb = await get(b).o.state();
        if (!va.ready || !vb.ready) return `not both ready (${va.ready}, ${vb.ready})`;
        const key = (v: typeof va): string =>
          v.items
            .filter((it) => selectorMatches(within, it.route))
            .map((it) => `${it.route}@${it.holderIncarnation}`)
            .join(",");
        const ka = key(va);
        const kb = key(vb);
        return ka === kb ? null : `views differ within ${within}: ${ka.length} vs ${kb.length} chars`;
      });
    }
    case "expect_stopped": {
      const { o } = get(name);
      const want = s["expect_error"] as string;
      return poll(timeout, async () => {
        const st = await o.state();
        if (!st.stopped) return `not stopped (error: ${st.error})`;
        return st.error === want ? null : `stopped with ${st.error}, want ${want}`;
      });
    }
    case "close_observer": {
      const { o } = get(name);
      const max = typeof s["max_ms"] === "number" ? s["max_ms"] : 1_000;
      const t0 = Date.now();
      let t: ReturnType<typeof setTimeout> | undefined;
      const closed = await Promise.race([o.close().then(() => true), new Promise<boolean>((r) => (t = setTimeout(() => r(false), max)))]);
      clearTimeout(t);
      if (!closed) throw new Error(`close did not return within ${max} ms`);
      const st = await o.state();
      if (!st.closed) throw new Error(`after close the error is ${st.error}, not closed (${Date.now() - t0} ms)`);
      return;
    }
  }
}

/** Re-checks until check answers null (success) or ms pass; ms 0 checks once. */
async function poll(ms: number, check: () => Promise<string | null>): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    const why = await check();
    if (why === null) return;
    if (Date.now() >= deadline) throw new Error(why);
    await sleep(50);
  }
}

async function checkView(
  h: Harness,
  s: Record<string, unknown>,
  x: Obs,
  mark: string | undefined,
): Promise<string | null> {
  const v = await x.o.state();
  if (!v.ready) return `not ready (error: ${v.error})`;
  const byRoute = new Map(v.items.map((it) => [it.route, it]));
  if (typeof s["count"] === "number" && v.items.length !== s["count"]) return `count ${v.items.length}, want ${s["count"]}`;
  for (const c of (s["contains"] as { route: string; owner_id?: string; holder?: string }[] | undefined) ?? []) {
    const it = byRoute.get(c.route);
    if (it === undefined) return `${c.route} is not in the view`;
    if (c.owner_id !== undefined && it.ownerId !== c.owner_id) return `${c.route} owner ${it.ownerId}, want ${c.owner_id}`;
    if (c.holder !== undefined) {
      const want = await h.holder(c.holder);
      if (it.holderIncarnation !== want) return `${c.route} holder ${it.holderIncarnation}, want ${c.holder}'s ${want}`;
    }
  }
  for (const r of (s["excludes"] as string[] | undefined) ?? []) {
    if (byRoute.has(r)) return `${r} is in the view`;
  }
  if (s["epoch_not_mark"] === true && v.epoch === mark) return `the epoch is still the marked ${mark}`;
  if (s["matches_list"] === true) {
    const l = await h.list(x.selector, x.token);
    if (l.epoch !== v.epoch) return `view of epoch ${v.epoch}, LIST answered in epoch ${l.epoch}`;
    const want = l.items.map((it) => `${it.route}@${it.holder_incarnation}`).sort();
    const got = v.items.map((it) => `${it.route}@${it.holderIncarnation}`).sort();
    if (want.join(",") !== got.join(",")) {
      const missing = want.filter((k) => !got.includes(k));
      const extra = got.filter((k) => !want.includes(k));
      return `the view differs from LIST: missing ${missing.slice(0, 3).join(" ")} (${missing.length}), extra ${extra.slice(0, 3).join(" ")} (${extra.length})`;
    }
  }
  return null;
}
