/** Backoff and the reconciliation interval, as in the Go SDK. */

/** Doubles from lo to hi (ms); each delay is jittered into [d/2, d]. */
export class Backoff {
  readonly #lo: number;
  readonly #hi: number;
  #cur: number;
  constructor(lo: number, hi: number) {
    this.#lo = lo;
    this.#hi = hi;
    this.#cur = lo;
  }
  next(): number {
    const d = this.#cur;
    this.#cur = Math.min(this.#cur * 2, this.#hi);
    return d / 2 + Math.random() * (d / 2);
  }
  reset(): void {
    this.#cur = this.#lo;
  }
}

/**
 * The periodic reconciliation default: clamp(shortest expected lease TTL / 2,
 * minReconcileMs, maxReconcileMs), maxReconcileMs when the TTL is unknown,
 * with ±defaultReconcileJitter. docs/client-operations.md gives the formula
 * and the evidence for the bounds.
 */
export const minReconcileMs = 5_000;
export const maxReconcileMs = 60_000;
export const defaultReconcileJitter = 0.2;

/** The recommended reconciliation interval (ms) for a fleet whose shortest lease TTL is shortestTtlMs (0: unknown). */
export function reconcileInterval(shortestTtlMs: number): number {
  if (!(shortestTtlMs > 0)) return maxReconcileMs;
  return Math.min(Math.max(shortestTtlMs / 2, minReconcileMs), maxReconcileMs);
}

/** Spreads d uniformly over d·[1-j, 1+j]. */
export function jittered(d: number, j: number): number {
  if (j === 0) return d;
  return d * (1 + j * (2 * Math.random() - 1));
}

/**
 * Marks a timer as one that does not keep Node running by itself (a
 * background duty: a session's keepalive, a lease's local deadline): the
 * process may exit when nothing else is left to do, and while
 * anything else keeps it running the timer fires as scheduled. A no-op where
 * timers have no unref (browsers, which never "exit").
 */
export function unref<T>(t: T): T {
  const u = t as unknown as { unref?: unknown } | null;
  if (typeof u === "object" && u !== null && typeof u.unref === "function") (u as { unref(): unknown }).unref();
  return t;
}

/**
 * Resolves after ms, or rejects with the signal's reason when it aborts
 * first; leaves no timer behind. With background, its timer does not keep
 * Node running (unref).
 */
export function sleep(ms: number, signal?: AbortSignal, background = false): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason as Error);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(t);
      reject(signal!.reason as Error);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    if (background) unref(t);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
