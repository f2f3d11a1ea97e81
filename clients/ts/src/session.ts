/** Sessions: a worker's liveness, kept alive in the background. */
import type { RequestOptions, Transport } from "./transport.js";
import { Backoff, sleep, unref } from "./backoff.js";
import { Batch } from "./batch.js";
import { ClosedError, LeaseLostError, SessionLostError, isAbort, isCode } from "./errors.js";
import { Lease, acquire, withLease, type AcquireOptions, type Holder } from "./lease.js";
import { openWatch, type Subscription, type WatchOptions } from "./watch.js";
import { asyncDispose } from "./internal/dispose.js";
import { Broken, isBroken } from "./internal/faults.js";
import { signalOf } from "./internal/signal.js";

/** Options of MusterClient.session: the signal bounds the creating request only. */
export type SessionOptions = RequestOptions;

/**
 * A worker's liveness on one broker: it keeps itself alive in the
 * background (a keepalive every TTL/3) until close(), or until it is lost.
 * Every lease is acquired through a session and is lost with it.
 *
 * `signal` is aborted when the session ends, with `err` as its reason:
 * ClosedError after close(), a SessionLostError otherwise. A session is lost
 * the moment the client learns that it ended (prompt loss, loss.ts): its
 * broker (the host that last answered one of its requests with success: its
 * creator, or the broker a planned move took its family to) answers any
 * request or stream of this client with another epoch than that success, or
 * answers family_unavailable; or the
 * broker answers session_not_found to one of the session's requests. It is
 * also lost when no keepalive got through within the TTL (a connection error
 * alone changes nothing before then). A lost session is never revived:
 * create a new one and acquire again.
 */
export class Session implements Holder {
  /** The session id. A secret: whoever has it can release this session's leases. */
  readonly id: string;
  /** The logical owner the session was created for. */
  readonly ownerId: string;
  /** The public, opaque id of this session, as shown in inventory items of its leases. */
  readonly holderIncarnation: string;
  readonly ttlMs: number;
  #host: string;
  #epoch: string;
  readonly #c: Transport;
  readonly #ended = new AbortController();
  readonly #stopLoop = new AbortController();
  #loop: Promise<void> = Promise.resolve();
  #leases = new Map<string, Lease>();

  private constructor(
    c: Transport,
    s: { session_id: string; owner_id: string; holder_incarnation: string; epoch: string; ttl_ms: number },
    host: string,
  ) {
    this.#c = c;
    this.#host = host;
    this.id = s.session_id;
    this.ownerId = s.owner_id;
    this.holderIncarnation = s.holder_incarnation;
    this.#epoch = s.epoch;
    this.ttlMs = s.ttl_ms;
  }

  /** @internal use MusterClient.session. */
  static async create(c: Transport, ownerId: string, ttlMs: number, o: SessionOptions): Promise<Session> {
    const t0 = performance.now();
    const answer = c.raw.POST("/v1/sessions", { body: { owner_id: ownerId, ttl_ms: ttlMs }, ...signalOf(o.signal) });
    const out = await c.call(answer, 201);
    const s = new Session(c, out, c.answeredBy((await answer).response));
    c.losses.track(s);
    c.opened(s);
    s.#loop = s.#keepalive(t0 + s.ttlMs);
    return s;
  }

  /**
   * The lifetime (Muster-Epoch) of the broker that holds the session: the one
   * that created it, or the one a planned move took its family to.
   */
  get epoch(): string {
    return this.#epoch;
  }

  /**
   * @internal the host (host:port) of the broker that holds the session: the
   * one that last answered one of its requests with success.
   */
  get host(): string {
    return this.#host;
  }

  /**
   * @internal records the broker that answered one of the session's own
   * requests with success, and its epoch: it holds the session now (a
   * planned move takes a family's sessions to another broker;
   * docs/client-operations.md, "Planned moves"), and prompt loss judges
   * later answers against it.
   */
  answeredBy(host: string, epoch: string): void {
    if (isBroken(this.#c, Broken.CreatorLoss)) return;
    this.#host = host;
    this.#epoch = epoch;
  }

  /** @internal the client this session belongs to. */
  get client(): Transport {
    return this.#c;
  }

  /** Aborted when the session has ended; its reason is `err`. */
  get signal(): AbortSignal {
    return this.#ended.signal;
  }

  /** null while the session lives, then why it ended. */
  get err(): Error | null {
    return this.#ended.signal.aborted ? (this.#ended.signal.reason as Error) : null;
  }

  /**
   * Acquires the exact route for ttlMs (100 ms .. 10 min). When this session
   * already holds it, it returns the same Lease (a second handle if the first
   * was dropped) without resetting its TTL.
   */
  acquire(route: string, ttlMs: number, options: AcquireOptions = {}): Promise<Lease> {
    return acquire(this, route, ttlMs, options);
  }

  /**
   * Starts an empty batch of this session's lease operations: up to
   * maxBatchOps acquisitions (never waiting), extensions and releases sent in
   * one request by Batch.do, one BatchResult per operation.
   */
  batch(): Batch {
    return new Batch(this);
  }

  /**
   * Acquires route for ttlMs, runs fn while holding it (extending every
   * ttl/3) and releases it when fn settles. When the lease is lost, fn's
   * signal is aborted with the loss as its reason. It resolves with fn's
   * result; when fn resolved but the lease was lost while it ran, it rejects
   * with the loss (a LeaseLostError): work done without the lease must not be
   * taken as done.
   */
  withLease<T>(route: string, ttlMs: number, fn: (lease: Lease, signal: AbortSignal) => Promise<T>, options: AcquireOptions = {}): Promise<T> {
    return withLease(this, route, ttlMs, fn, options);
  }

  /**
   * Opens a watch stream whose registrations belong to this session: they end
   * with it, a duplicate open of the same selector supersedes the older
   * stream, and Subscription.unsubscribe can remove one of them.
   */
  watch(selectors: string | readonly string[], options: WatchOptions = {}): Promise<Subscription> {
    return openWatch(this.#c, this, typeof selectors === "string" ? [selectors] : selectors, options);
  }

  /**
   * Ends the session at the broker (its leases are released there, each with
   * a session_closed change) and locally (every Lease is lost with a
   * ClosedError). Closing a session that already ended only stops its
   * keepalive.
   */
  async close(options: RequestOptions = {}): Promise<void> {
    this.#stopLoop.abort();
    await this.#loop;
    if (this.err !== null) {
      this.end(new ClosedError());
      return;
    }
    this.end(new ClosedError());
    try {
      await this.#c.call(this.#c.raw.DELETE("/v1/sessions/{session_id}", { params: { path: { session_id: this.id } }, ...signalOf(options.signal), ...this.#c.sessionFetch(this) }), 204);
    } catch (e) {
      if (!isCode(e, "session_not_found")) throw e;
    }
  }

  /** close(): `await using s = await client.session(...)` closes the session at the end of the scope. */
  [asyncDispose](): Promise<void> {
    return this.close();
  }

  /**
   * @internal records why the session ended, once, stops its keepalive,
   * forgets it for prompt loss and loses its leases.
   */
  end(cause: Error): void {
    if (this.#ended.signal.aborted) return;
    this.#ended.abort(cause);
    this.#stopLoop.abort();
    this.#c.losses.untrack(this);
    this.#c.ended(this);
    const leases = [...this.#leases.values()];
    this.#leases.clear();
    for (const l of leases) l.end(new LeaseLostError(cause));
  }

  /**
   * Keeps the session alive every TTL/3 until stopped. A failed keepalive is
   * retried with backoff; when none got through by the local deadline (a
   * lower bound of the broker's: the send time of the last keepalive that got
   * through, or of the creation, plus the TTL, on the monotonic clock), the
   * session is lost.
   */
  async #keepalive(deadline: number): Promise<void> {
    const stop = this.#stopLoop.signal;
    const interval = this.ttlMs / 3;
    const bo = new Backoff(100, interval);
    let wait = interval;
    let lastErr: unknown = null;
    for (;;) {
      try {
        await sleep(wait, stop, true); // unref'd: see "Process exit" in the README
      } catch {
        return;
      }
      if (this.err !== null) return;
      if (lastErr !== null && performance.now() >= deadline) {
        this.end(new SessionLostError("no keepalive got through within the TTL", lastErr));
        return;
      }
      const t0 = performance.now();
      const rac = new AbortController();
      const onStop = (): void => rac.abort();
      stop.addEventListener("abort", onStop, { once: true });
      const t = unref(setTimeout(() => rac.abort(), Math.max(0, deadline - t0)));
      try {
        await this.#c.call(
          this.#c.raw.POST("/v1/sessions/{session_id}/keepalive", { params: { path: { session_id: this.id } }, signal: rac.signal, ...this.#c.sessionFetch(this) }),
          200,
        );
        deadline = t0 + this.ttlMs;
        lastErr = null;
        bo.reset();
        wait = interval;
      } catch (e) {
        if (stop.aborted) return;
        if (isCode(e, "session_not_found")) {
          this.end(new SessionLostError(String((e as Error).message), e));
          return;
        }
        if (lastErr === null || !isAbort(e)) lastErr = e;
        wait = Math.max(0, Math.min(bo.next(), deadline - performance.now()));
      } finally {
        clearTimeout(t);
        stop.removeEventListener("abort", onStop);
      }
    }
  }

  /** @internal registers l; false when the session has ended. */
  track(l: Lease): boolean {
    if (this.err !== null) return false;
    this.#leases.set(l.route, l);
    return true;
  }

  /** @internal */
  untrack(l: Lease): void {
    if (this.#leases.get(l.route) === l) this.#leases.delete(l.route);
  }

  /** @internal the tracked handle of route. */
  handle(route: string): Lease | undefined {
    return this.#leases.get(route);
  }
}
