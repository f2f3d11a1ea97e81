/** Leases: the only ownership handle of this package. */
import type { components } from "./api/schema.js";
import { unref } from "./backoff.js";
import { LeaseLostError, MusterError, ReleasedError, isCode } from "./errors.js";
import { asyncDispose } from "./internal/dispose.js";
import { Broken, isBroken } from "./internal/faults.js";
import { parseRoute, type Route } from "./list.js";
import type { Held } from "./loss.js";
import type { RequestOptions, Transport } from "./transport.js";
import { signalOf } from "./internal/signal.js";

/** Options of acquire and withLease. */
export interface AcquireOptions extends RequestOptions {
  /**
   * Waits up to waitMs (at most 30 s) in the route's FIFO queue when another
   * session holds the lease, instead of failing at once with lease_held. When
   * the wait ends without a grant the acquisition fails with wait_timeout.
   * Aborting the signal leaves the queue.
   */
  waitMs?: number | undefined;
}

/**
 * @internal what a lease, and a batch, needs of the session holding it:
 * Session is the one implementation (this module is below session.ts, which
 * makes leases).
 */
export interface Holder extends Held {
  /** The session id. */
  readonly id: string;
  /** The client the session belongs to. */
  readonly client: Transport;
  /** Registers l; false when the session has ended. */
  track(l: Lease): boolean;
  /** Forgets l, which ended. */
  untrack(l: Lease): void;
  /** The tracked handle of route. */
  handle(route: string): Lease | undefined;
}

/**
 * A lease held by a Session; only Session.acquire makes one.
 *
 * `lost` is aborted when the lease is no longer held, with `err` as its
 * reason: a ReleasedError after its own release; otherwise a LeaseLostError
 * whose cause is a MusterError not_owner, fenced or lease_expired from the
 * broker, a local lease_expired when the local deadline passed without a
 * successful extension, or the session's end (a ClosedError, or a
 * SessionLostError the moment the client learns the session is gone: see
 * Session).
 *
 * The local deadline is a lower bound of the broker's expiry, kept on the
 * monotonic clock (performance.now, never the wall clock): for an acquisition
 * sent at `send`, send + the answer's expires_after_request_ms (the TTL, plus
 * the time the request waited in the queue for a grant after a wait; what is
 * left for already_held); for an extension sent at `send`, send + its TTL.
 */
export class Lease {
  /** The exact route. */
  readonly route: string;
  /**
   * The broker revision at which the lease was granted: strictly increasing
   * per route, stable across renewals. Pass it to the resource the lease
   * guards, which must refuse a token lower than the highest it has seen. It
   * means nothing across routes or broker lifetimes.
   */
  readonly fencingToken: number;
  readonly #s: Holder;
  readonly #r: Route;
  readonly #lost = new AbortController();
  #acquiredAt: Date;
  #expiresAt: Date;
  #renewals: number;
  #timer: ReturnType<typeof setTimeout> | undefined;

  /** @internal use Session.acquire. */
  constructor(s: Holder, r: Route, out: { fencing_token: number; acquired_at: string; expires_at: string; renewals: number }) {
    this.#s = s;
    this.#r = r;
    this.route = `lease://${r.realm}/${r.area}/${r.resource}`;
    this.fencingToken = out.fencing_token;
    this.#acquiredAt = new Date(out.acquired_at);
    this.#expiresAt = new Date(out.expires_at);
    this.#renewals = out.renewals;
  }

  /** Aborted when the lease is no longer held (or released); its reason is `err`. */
  get lost(): AbortSignal {
    return this.#lost.signal;
  }

  /** null while the lease is held, then why it is not. */
  get err(): Error | null {
    return this.#lost.signal.aborted ? (this.#lost.signal.reason as Error) : null;
  }

  get acquiredAt(): Date {
    return this.#acquiredAt;
  }

  /** The broker's expiry as of the last grant or extension. */
  get expiresAt(): Date {
    return this.#expiresAt;
  }

  /** The successful extensions, as the broker reports them. */
  get renewals(): number {
    return this.#renewals;
  }

  /**
   * Extends the lease to now + ttlMs. When the broker answers that the lease
   * is no longer this session's (not_owner, fenced, lease_expired,
   * session_not_found: then the whole session is lost) the lease is lost and
   * extend rejects with `err`. Any
   * other failure (a transport error, unavailable) leaves the lease as it
   * was: retry before the deadline.
   */
  async extend(ttlMs: number, options: RequestOptions = {}): Promise<void> {
    if (this.err !== null) throw this.err;
    const t0 = performance.now();
    const c = this.#s.client;
    let out;
    try {
      out = await c.call(
        c.raw.POST("/v1/leases/{realm}/{area}/{resource}/extend", {
          params: { path: this.#r },
          body: { session_id: this.#s.id, fencing_token: this.fencingToken, ttl_ms: ttlMs },
          ...signalOf(options.signal),
          ...c.sessionFetch(this.#s),
        }),
        200,
      );
    } catch (e) {
      c.losses.notFound(this.#s, e); // the session is gone: the lease's cause is its loss
      if (ownershipGone(e)) {
        this.end(new LeaseLostError(e));
        throw this.err!;
      }
      throw e;
    }
    this.extended(out, t0, ttlMs);
  }

  /**
   * @internal records a successful extension sent at t0 (performance.now)
   * for ttlMs; throws err when the lease was lost meanwhile.
   */
  extended(out: { expires_at: string; renewals: number }, t0: number, ttlMs: number): void {
    if (this.err !== null) throw this.err;
    this.#expiresAt = new Date(out.expires_at);
    this.#renewals = out.renewals;
    this.arm(t0 + ttlMs);
  }

  /** @internal the session holding this lease. */
  get session(): Holder {
    return this.#s;
  }

  /**
   * Releases the lease; the next FIFO waiter (if any) is granted. It resolves
   * once the lease is known not to be held by this session any more,
   * including when it was already lost; it rejects only when that is unknown
   * (a transport failure): the lease then ends at its TTL at the latest.
   */
  async release(options: RequestOptions = {}): Promise<void> {
    if (this.err instanceof ReleasedError) return;
    const serr = this.#s.err;
    if (serr !== null) {
      this.end(new LeaseLostError(serr)); // the broker released it when the session ended
      return;
    }
    const c = this.#s.client;
    try {
      await c.call(
        c.raw.POST("/v1/leases/{realm}/{area}/{resource}/release", {
          params: { path: this.#r },
          body: { session_id: this.#s.id, fencing_token: this.fencingToken },
          ...signalOf(options.signal),
          ...c.sessionFetch(this.#s),
        }),
        204,
      );
      this.end(new ReleasedError());
    } catch (e) {
      c.losses.notFound(this.#s, e);
      if (!ownershipGone(e)) throw e;
      this.end(new LeaseLostError(e));
    }
  }

  /**
   * release(): `await using lease = await session.acquire(...)` releases the
   * lease at the end of the scope (at once when it was lost already).
   */
  [asyncDispose](): Promise<void> {
    return this.release();
  }

  /** @internal (re)arms the local deadline, a time on the monotonic clock (performance.now). */
  arm(deadline: number): void {
    clearTimeout(this.#timer);
    // unref'd: a deadline is a bound, not work; it keeps no process running.
    this.#timer = unref(
      setTimeout(() => {
        this.end(new LeaseLostError(new MusterError("lease_expired", "the local deadline passed without a successful extension")));
      }, Math.max(0, deadline - performance.now())),
    );
  }

  /** @internal records why the lease is not held, once. */
  end(cause: Error): void {
    if (this.#lost.signal.aborted || (isBroken(this.#s.client, Broken.NeverLost) && !(cause instanceof ReleasedError))) return;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#lost.abort(cause);
    this.#s.untrack(this);
  }
}

/** @internal answers that mean the lease is not this session's. */
export function ownershipGone(e: unknown): boolean {
  return isCode(e, "not_owner") || isCode(e, "fenced") || isCode(e, "lease_expired") || isCode(e, "session_not_found");
}

/** @internal Session.acquire. */
export async function acquire(s: Holder, route: string, ttlMs: number, o: AcquireOptions): Promise<Lease> {
  const r = parseRoute(route);
  if (s.err !== null) throw s.err;
  const body: { session_id: string; ttl_ms: number; wait_ms: number } = { session_id: s.id, ttl_ms: ttlMs, wait_ms: 0 };
  if (o.waitMs !== undefined && o.waitMs > 0) body.wait_ms = o.waitMs;
  const t0 = performance.now();
  const c = s.client;
  let out;
  try {
    out = await c.call(c.raw.POST("/v1/leases/{realm}/{area}/{resource}/acquire", { params: { path: r }, body, ...signalOf(o.signal), ...c.sessionFetch(s) }), 200);
  } catch (e) {
    c.losses.notFound(s, e);
    throw e;
  }
  return adopt(s, r, out, t0, ttlMs);
}

/** The lease answer of an acquisition, single or in a batch. */
type AcquireAnswer = components["schemas"]["Lease"];

/**
 * @internal the handle of a lease the broker granted (or answered
 * already_held for) to a request sent at t0 (performance.now) for ttlMs: the
 * tracked handle when it is the same grant, otherwise a new one whose local
 * deadline is localDeadline's.
 */
export function adopt(s: Holder, r: Route, out: AcquireAnswer, t0: number, ttlMs: number): Lease {
  const key = `lease://${r.realm}/${r.area}/${r.resource}`;
  if (out.outcome === "already_held") {
    const l = s.handle(key);
    if (l !== undefined && l.fencingToken === out.fencing_token) return l;
  }
  const l = new Lease(s, r, out);
  l.arm(isBroken(s.client, Broken.SendPlusTtl) ? t0 + ttlMs : localDeadline(out, t0, ttlMs));
  if (!s.track(l)) l.end(new LeaseLostError(s.err));
  return l;
}

/**
 * @internal the local deadline, on the monotonic clock, of a lease an
 * acquisition sent at t0 (performance.now) for ttlMs was answered with: t0 +
 * expires_after_request_ms, the broker's expiry counted from the moment it
 * took the request up, which came after t0. So the deadline is never later
 * than the broker's expiry, and after a wait in the queue it stays as close to
 * it as the network allows (t0 + ttlMs would be the whole wait early). A
 * broker that does not send the member gets t0 + ttlMs: a lower bound for a
 * grant, and for already_held (whose TTL was not reset) at most what the
 * broker's expires_at leaves, read on the wall clock as the best it says.
 */
export function localDeadline(out: AcquireAnswer, t0: number, ttlMs: number): number {
  if (typeof out.expires_after_request_ms === "number") return t0 + out.expires_after_request_ms;
  let deadline = t0 + ttlMs;
  if (out.outcome === "already_held") {
    const rem = new Date(out.expires_at).getTime() - Date.now();
    if (rem < ttlMs) deadline = performance.now() + rem;
  }
  return deadline;
}

/** @internal Session.withLease. */
export async function withLease<T>(
  s: Holder,
  route: string,
  ttlMs: number,
  fn: (lease: Lease, signal: AbortSignal) => Promise<T>,
  o: AcquireOptions,
): Promise<T> {
  const l = await acquire(s, route, ttlMs, o);
  const work = new AbortController();
  const onCaller = (): void => work.abort(o.signal?.reason);
  const onLost = (): void => work.abort(l.err);
  o.signal?.addEventListener("abort", onCaller, { once: true });
  l.lost.addEventListener("abort", onLost, { once: true });
  if (l.err !== null) onLost();
  const interval = ttlMs / 3;
  // Not unref'd, unlike the session's keepalive and the local deadline: fn is
  // the caller's work in progress, awaited through withLease, so the process
  // runs until it settles, even when fn waits for nothing but the loss
  // (see "Process exit" in the README).
  const renew = setInterval(() => {
    if (work.signal.aborted) return;
    const t = AbortSignal.timeout(interval);
    l.extend(ttlMs, { signal: t }).catch(() => undefined); // the local deadline decides when the lease is lost
  }, interval);
  let result: T | undefined;
  let failed = false;
  let ferr: unknown;
  try {
    result = await fn(l, work.signal);
  } catch (e) {
    failed = true;
    ferr = e;
  }
  const lost = l.err;
  clearInterval(renew);
  o.signal?.removeEventListener("abort", onCaller);
  l.lost.removeEventListener("abort", onLost);
  await l.release({ signal: AbortSignal.timeout(5_000) }).catch(() => undefined);
  if (failed) throw ferr;
  if (lost !== null) throw lost;
  return result as T;
}
