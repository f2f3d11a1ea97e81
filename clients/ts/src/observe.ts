/**
 * The observer: an advisory view of the held leases matching one selector,
 * built by the design §9 algorithm (the same as the Go SDK's observe.go).
 */
import type { Transport } from "./transport.js";
import { Backoff, defaultReconcileJitter, jittered, reconcileInterval } from "./backoff.js";
import { ClosedError, MusterError, isCode } from "./errors.js";
import { asyncDispose } from "./internal/dispose.js";
import { Broken, brokenModes } from "./internal/faults.js";
import { listPage, type Item } from "./list.js";
import { viewsOf, type View } from "./views.js";
import { openWatch, type Change, type Marker, type Subscription } from "./watch.js";

/** Recovery backoff of the observer: 50 ms doubling to 2 s, jittered. */
const recoverMinMs = 50;
const recoverMaxMs = 2_000;
/** Bounds the changes buffered while paging a snapshot; beyond it the bootstrap starts over. */
const maxBuffered = 100_000;

/** Options of observe. Invalid values make observe throw invalid_request naming the option. */
export interface ObserveOptions {
  /**
   * The shortest lease TTL (ms) the observed fleet uses; the default
   * reconciliation interval is derived from it (reconcileInterval). Must not
   * be negative; 0 (the default) means unknown.
   */
  shortestTtlMs?: number | undefined;
  /** The periodic reconciliation interval (ms) instead of the default formula. At least 10 ms. */
  reconcileIntervalMs?: number | undefined;
  /**
   * The jitter of the reconciliation interval as a fraction: each period is
   * drawn uniformly from interval·[1-j, 1+j]. In [0, 1); default 0.2. 0 makes
   * every period exact (tests); a fleet should keep some jitter so that its
   * observers do not relist in lockstep.
   */
  reconcileJitter?: number | undefined;
  /** The LIST page size used to read the rest of a snapshot, 1..500 (default 500). */
  pageSize?: number | undefined;
  /** Bounds the observer's life like close(). */
  signal?: AbortSignal | undefined;
}

export type { View };

/** What an observer did. */
export interface ObserverStats {
  /** Bootstraps started. */
  attempts: number;
  /** Bootstraps that completed and installed a view. */
  bootstraps: number;
  /** Times the view became not ready. */
  recoveries: number;
  /** Periodic reconciliations started. */
  reconciliations: number;
}

/** The outcome of one successful bootstrap. */
interface Booted {
  sub: Subscription;
  /** The subscription's read in flight, started while buffering. */
  next: Promise<Change | null>;
  items: Map<string, Item>;
  epoch: string;
  revision: number;
}

/** Errors that no retry fixes: they stop the observer. */
const fatalCodes = ["invalid_selector", "invalid_request", "unauthenticated", "forbidden", "not_found", "method_not_allowed", "not_implemented"];

/**
 * Keeps an advisory view of the held leases matching one selector. It owns
 * the bootstrap (open a watch stream and read its marker, buffer the
 * changes, page the rest of the marker's snapshot, install it, apply the
 * buffered changes newer than the marker, then report ready) and every
 * recovery.
 *
 * The view can be stale at any moment and never grants anything (its items
 * are plain values; only Session.acquire makes a Lease). It becomes not
 * ready, and a fresh bootstrap starts at once, when the stream ends for any
 * reason: overflow, supersede, a dropped connection, a broker restart (a new
 * epoch: the new view replaces the old one entirely). Failed bootstraps are
 * retried with backoff from 50 ms doubling to 2 s, jittered; only one
 * bootstrap runs at a time. While ready, it also re-bootstraps in the
 * background every reconciliation interval (docs/client-operations.md),
 * replacing the view when the new one is installed.
 *
 * An error no retry can fix (invalid_selector, forbidden, unauthenticated,
 * not_found, not_implemented, …) stops the observer; `error` then says why.
 * close() stops it promptly even while a request hangs, and leaves no timer
 * and no socket behind.
 */
export class Observer implements AsyncIterable<View> {
  /** The observed selector. */
  readonly selector: string;
  /** The (unjittered) periodic reconciliation interval in ms. */
  readonly reconcileEveryMs: number;
  readonly #c: Transport;
  readonly #jitter: number;
  readonly #pageSize: number;
  readonly #broken: number;
  readonly #ac = new AbortController();
  readonly #unlink: () => void;
  readonly #bo = new Backoff(recoverMinMs, recoverMaxMs);
  readonly #listeners = new Set<(v: View) => void>();
  #waiters: { resolve: () => void; reject: (e: unknown) => void }[] = [];
  #items = new Map<string, Item>();
  #ready = false;
  #epoch = "";
  #revision = 0;
  #err: Error | null = null;
  #stopErr: Error | null = null;
  #stopped = false;
  #stats: ObserverStats = { attempts: 0, bootstraps: 0, recoveries: 0, reconciliations: 0 };
  #cur: Subscription | null = null;
  #pending: Promise<void> | null = null;
  #retry: ReturnType<typeof setTimeout> | undefined;
  #reconcile: ReturnType<typeof setTimeout> | undefined;
  #readyAt = 0; // when the view last became ready, on the monotonic clock (performance.now)
  #done: Promise<void>;
  #resolveDone!: () => void;

  /** @internal use MusterClient.observe. */
  constructor(c: Transport, selector: string, o: ObserveOptions) {
    const errs: string[] = [];
    const shortest = o.shortestTtlMs ?? 0;
    if (!(shortest >= 0)) errs.push("the shortest TTL must not be negative");
    if (o.reconcileIntervalMs !== undefined && !(o.reconcileIntervalMs >= 10)) {
      errs.push("the reconciliation interval must be at least 10ms");
    }
    const jitter = o.reconcileJitter ?? defaultReconcileJitter;
    if (!(jitter >= 0 && jitter < 1)) errs.push("the reconciliation jitter must be in [0, 1)");
    const pageSize = o.pageSize ?? 500;
    if (!(Number.isInteger(pageSize) && pageSize >= 1 && pageSize <= 500)) errs.push("the page size must be in 1..500");
    if (errs.length > 0) throw new MusterError("invalid_request", `Observe: ${errs.join("; ")}`);
    this.#c = c;
    this.selector = selector;
    this.reconcileEveryMs = o.reconcileIntervalMs ?? reconcileInterval(shortest);
    this.#jitter = jitter;
    this.#pageSize = pageSize;
    this.#broken = brokenModes(c); // 0 unless the conformance tests broke the client
    this.#done = new Promise((resolve) => (this.#resolveDone = resolve));
    const outer = o.signal;
    const onAbort = (): void => void this.#shutdown(outer?.reason instanceof Error ? outer.reason : new ClosedError());
    outer?.addEventListener("abort", onAbort, { once: true });
    this.#unlink = () => outer?.removeEventListener("abort", onAbort);
    if (outer?.aborted) {
      onAbort();
      return;
    }
    c.opened(this); // MusterClient.close closes it
    this.#start(); // the first bootstrap starts at once
  }

  /** Whether the view is bootstrapped and followed live. */
  get isReady(): boolean {
    return this.#ready;
  }

  /**
   * Resolves when the view is ready (at once if it is now); rejects with
   * `error` if the observer stops first. A fresh promise on every read.
   */
  get ready(): Promise<void> {
    if (this.#ready) return Promise.resolve();
    if (this.#stopped) return Promise.reject(this.#err ?? new ClosedError());
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }

  /**
   * null while the view is ready. Otherwise why it is not ready: the end of
   * the stream, or the last failed bootstrap; once the observer stopped, why
   * it stopped (a ClosedError after close()).
   */
  get error(): Error | null {
    return this.#err;
  }

  /** Whether the observer has stopped for good. */
  get stopped(): boolean {
    return this.#stopped;
  }

  /** Counts of bootstraps, recoveries and reconciliations. */
  get stats(): ObserverStats {
    return { ...this.#stats };
  }

  /** A copy of the current view. */
  view(): View {
    const items = [...this.#items.values()].sort((a, b) => (a.route < b.route ? -1 : a.route > b.route ? 1 : 0));
    return { ready: this.#ready, epoch: this.#epoch, revision: this.#revision, items };
  }

  /**
   * Calls listener (synchronously, with the new view) at every change of the
   * view, of its readiness or of `error`. Returns the unsubscribe function.
   */
  onChange(listener: (view: View) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Stops the observer: its stream is closed and any request in flight is
   * aborted, so it resolves promptly even while the broker hangs; no timer
   * or socket outlives it. `error` is a ClosedError afterwards.
   */
  close(): Promise<void> {
    return this.#shutdown(new ClosedError());
  }

  /** close(): `await using o = client.observe(...)` stops the observer at the end of the scope. */
  [asyncDispose](): Promise<void> {
    return this.close();
  }

  /**
   * `for await (const view of observer)`: the current view at once, then the
   * newest view after each change, coalesced (a slow loop body skips
   * intermediate views, nothing queues up). The loop ends when the observer
   * stops: quietly after close(), otherwise it throws `error` (forbidden, …).
   * Breaking out of the loop does not close the observer.
   */
  [Symbol.asyncIterator](): AsyncGenerator<View, void, undefined> {
    return viewsOf(this);
  }

  async #shutdown(cause: Error): Promise<void> {
    this.#stopErr ??= cause;
    if (!this.#ac.signal.aborted) {
      this.#ac.abort(this.#stopErr);
      this.#unlink();
      clearTimeout(this.#retry);
      clearTimeout(this.#reconcile);
      const cur = this.#cur;
      this.#cur = null;
      const pending = this.#pending;
      void (async () => {
        await cur?.close();
        await pending; // its subscription, if any, is closed when it settles
        this.#stop();
        this.#resolveDone();
      })();
    }
    return this.#done;
  }

  #stop(): void {
    this.#c.ended(this);
    this.#err = this.#stopErr;
    this.#ready = false;
    this.#stopped = true;
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w.reject(this.#err);
    this.#notify();
  }

  #notify(): void {
    if (this.#ready) {
      const waiters = this.#waiters;
      this.#waiters = [];
      for (const w of waiters) w.resolve();
    }
    if (this.#listeners.size === 0) return;
    const v = this.view();
    for (const l of [...this.#listeners]) {
      try {
        l(v);
      } catch {
        // a listener's failure is its own
      }
    }
  }

  /** Starts a bootstrap unless one runs. */
  #start(): void {
    if (this.#pending !== null || this.#ac.signal.aborted) return;
    this.#stats.attempts++;
    const p: Promise<void> = this.#bootstrap(this.#ac.signal).then(
      (b) => this.#booted(p, b, null),
      (e: unknown) => this.#booted(p, null, e instanceof Error ? e : new Error(String(e))),
    );
    this.#pending = p;
  }

  #booted(p: Promise<void>, b: Booted | null, err: Error | null): void {
    if (this.#pending === p) this.#pending = null;
    if (this.#ac.signal.aborted) {
      void b?.sub.close();
      return;
    }
    if (b === null) {
      if (fatalCodes.some((c) => isCode(err, c)) && !(this.#broken & Broken.RetryFatal)) {
        void this.#shutdown(err!);
        return;
      }
      if (this.#cur === null) this.#notReady(err!);
      this.#schedule(this.#bo.next());
      return;
    }
    const old = this.#cur;
    this.#cur = b.sub;
    void old?.close();
    if (this.#broken & Broken.MergeViews) {
      for (const [k, v] of b.items) this.#items.set(k, v);
    } else {
      this.#items = b.items;
    }
    this.#epoch = b.epoch;
    this.#revision = b.revision;
    this.#ready = true;
    this.#err = null;
    this.#stats.bootstraps++;
    this.#notify();
    this.#readyAt = performance.now();
    clearTimeout(this.#reconcile);
    if (!(this.#broken & Broken.NoReconcile)) {
      this.#reconcile = setTimeout(() => {
        if (this.#pending === null) {
          this.#stats.reconciliations++;
          this.#start();
        }
      }, jittered(this.reconcileEveryMs, this.#jitter));
    }
    void this.#follow(b.sub, b.next);
  }

  /** Applies the changes of sub while it is the current stream; recovers when it ends. */
  async #follow(sub: Subscription, first: Promise<Change | null>): Promise<void> {
    let next = first;
    for (;;) {
      const ch = await next;
      if (sub !== this.#cur) return; // replaced by a reconciliation, or closed
      if (ch === null) break;
      if (ch.revision > this.#revision && !(this.#broken & Broken.IgnoreLive)) {
        this.#applyTo(this.#items, ch);
        this.#revision = ch.revision;
        this.#notify();
      }
      next = sub.next();
    }
    this.#cur = null;
    if (this.#broken & Broken.StayReady) return;
    clearTimeout(this.#reconcile);
    this.#notReady(sub.err ?? new Error("muster: watch stream ended"));
    if (this.#pending === null) {
      if (performance.now() - this.#readyAt >= recoverMaxMs) {
        this.#bo.reset(); // it was stable: recover at once
        this.#schedule(0);
      } else {
        this.#schedule(this.#bo.next());
      }
    }
  }

  #schedule(ms: number): void {
    clearTimeout(this.#retry);
    this.#retry = setTimeout(() => this.#start(), ms);
  }

  #notReady(err: Error): void {
    if (this.#ready) this.#stats.recoveries++;
    this.#ready = false;
    this.#err = err;
    this.#notify();
  }

  /**
   * Opens a stream, pages the rest of its marker's snapshot while buffering
   * the stream's changes, and builds the view. On success the stream stays
   * open for the caller, with its next read in flight.
   */
  async #bootstrap(signal: AbortSignal): Promise<Booted> {
    const sub = await openWatch(this.#c, null, [this.selector], { signal });
    try {
      const m = sub.marker;
      if (m.selectors.length !== 1) {
        throw new Error(`muster: the marker has ${m.selectors.length} subscriptions, want 1`);
      }
      const items = new Map<string, Item>();
      for (const it of m.selectors[0]!.items) items.set(it.route, it);
      const pager = new AbortController();
      const onAbort = (): void => pager.abort();
      signal.addEventListener("abort", onAbort, { once: true });
      const pages = this.#pageRest(pager.signal, m, items).then(
        () => ({ kind: "pages" as const, err: null }),
        (e: unknown) => ({ kind: "pages" as const, err: e }),
      );
      const buf: Change[] = [];
      let next = sub.next();
      try {
        for (;;) {
          const r = await Promise.race([next.then((ch) => ({ kind: "change" as const, ch })), pages]);
          if (r.kind === "change") {
            if (r.ch === null) throw sub.err ?? new Error("muster: watch stream ended");
            buf.push(r.ch);
            if (buf.length > maxBuffered) throw new Error(`muster: more than ${maxBuffered} changes while paging a snapshot`);
            next = sub.next();
            continue;
          }
          if (r.err !== null) throw r.err;
          if (this.#broken & Broken.IgnoreSnapshot) items.clear();
          if (this.#broken & Broken.DropBuffered) buf.length = 0;
          let rev = m.revision;
          for (const ch of buf) {
            if (ch.revision > m.revision) {
              this.#applyTo(items, ch);
              rev = Math.max(rev, ch.revision);
            }
          }
          return { sub, next, items, epoch: m.epoch, revision: rev };
        }
      } finally {
        pager.abort();
        signal.removeEventListener("abort", onAbort);
        await pages;
      }
    } catch (e) {
      await sub.close();
      throw e;
    }
  }

  /** Reads the rest of the marker's snapshot into items. */
  async #pageRest(signal: AbortSignal, m: Marker, items: Map<string, Item>): Promise<void> {
    let cursor = m.selectors[0]!.nextCursor;
    const pageSignal = this.#broken & Broken.UncancellablePages ? undefined : signal;
    while (cursor !== "") {
      const p = await listPage(this.#c, this.selector, { limit: this.#pageSize, cursor, signal: pageSignal });
      if (p.epoch !== m.epoch) throw new MusterError("epoch_changed", "the broker restarted during the bootstrap");
      for (const it of p.items) items.set(it.route, it);
      cursor = p.nextCursor;
    }
  }

  /** Applies one change to items. */
  #applyTo(items: Map<string, Item>, ch: Change): void {
    if ((ch.kind === "expired" && this.#broken & Broken.IgnoreExpired) || (ch.kind === "session_closed" && this.#broken & Broken.IgnoreSessionClosed)) {
      return;
    }
    applyChange(items, ch);
  }
}

function applyChange(items: Map<string, Item>, ch: Change): void {
  if (ch.kind === "acquired" && ch.item !== null) items.set(ch.route, ch.item);
  else items.delete(ch.route);
}
