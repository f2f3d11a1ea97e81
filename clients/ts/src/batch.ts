/** Batches: many lease operations of one session in one request. */
import type { RequestOptions } from "./client.js";
import { LeaseLostError, MusterError, ReleasedError } from "./errors.js";
import { Lease, adopt, ownershipGone } from "./lease.js";
import { parseRoute, type Route } from "./list.js";
import type { Session } from "./session.js";

/** The most operations one batch may carry (the contract's ops maxItems). */
export const maxBatchOps = 256;

/** The kind of one batch operation. */
export type BatchOp = "acquire" | "extend" | "release";

/**
 * The outcome of one operation of a batch, in the order of the batch. err
 * is null on success; otherwise it is what the operation on its own
 * (Session.acquire, Lease.extend, Lease.release) would have rejected with:
 * a MusterError with the broker's code for that operation, or the lease's
 * loss.
 */
export interface BatchResult {
  readonly op: BatchOp;
  readonly route: string;
  /**
   * After a successful acquire the new handle (or the same one, when this
   * session already held the route); for an extend or a release the lease
   * it was given; null after a failed acquire.
   */
  readonly lease: Lease | null;
  readonly err: Error | null;
}

interface Entry {
  op: BatchOp;
  route: Route;
  text: string;
  ttlMs: number;
  lease: Lease | null;
}

/**
 * Lease operations of one session — acquisitions (which never wait),
 * extensions and releases — applied by the broker in one request and one
 * step, in the order they were added. Build it with Session.batch(), send it
 * with send(). See the Go SDK's Batch for the reference behaviour.
 */
export class Batch {
  readonly #s: Session;
  readonly #ops: Entry[] = [];
  #err: Error | null = null;

  /** @internal use Session.batch. */
  constructor(s: Session) {
    this.#s = s;
  }

  /** The number of operations added so far. */
  get length(): number {
    return this.#ops.length;
  }

  /** Adds an acquisition of the exact route for ttlMs; it never waits (lease_held). */
  acquire(route: string, ttlMs: number): this {
    let r: Route = { realm: "", area: "", resource: "" };
    try {
      r = parseRoute(route);
    } catch (e) {
      this.#refuse(e as Error);
    }
    return this.#add({ op: "acquire", route: r, text: route, ttlMs, lease: null });
  }

  /** Adds an extension of lease to now + ttlMs, as Lease.extend. */
  extend(lease: Lease, ttlMs: number): this {
    if (this.#own(lease)) this.#add({ op: "extend", route: lease.parsedRoute, text: lease.route, ttlMs, lease });
    return this;
  }

  /** Adds a release of lease, as Lease.release. */
  release(lease: Lease): this {
    if (this.#own(lease)) this.#add({ op: "release", route: lease.parsedRoute, text: lease.route, ttlMs: 0, lease });
    return this;
  }

  #add(e: Entry): this {
    if (this.#ops.length === maxBatchOps) {
      this.#refuse(new MusterError("invalid_request", `a batch has at most ${maxBatchOps} operations`));
    }
    this.#ops.push(e);
    return this;
  }

  #own(l: Lease): boolean {
    if (l.session !== this.#s) {
      this.#refuse(new MusterError("invalid_request", "a batch takes only leases of its own session"));
      return false;
    }
    return true;
  }

  #refuse(e: Error): void {
    this.#err ??= e;
  }

  /**
   * Sends the batch and resolves with one result per operation, in order.
   *
   * It rejects as a whole, and nothing was applied, when the batch was
   * refused locally (no operation, more than maxBatchOps, a malformed route,
   * a lease of another session) or by the broker (session_not_found: the
   * session's leases are then lost, as with Lease.extend). On a transport
   * error or an abort nothing is known: the leases stay as they were.
   * Operations on leases already known to be lost are not sent.
   */
  async send(options: RequestOptions = {}): Promise<BatchResult[]> {
    if (this.#err !== null) throw this.#err;
    if (this.#ops.length === 0) throw new MusterError("invalid_request", "a batch has at least one operation");
    const s = this.#s;
    if (s.err !== null) throw s.err;
    const out: BatchResult[] = this.#ops.map((e) => ({ op: e.op, route: e.text, lease: e.lease, err: null }));
    const ops: { op: BatchOp; route: string; ttl_ms?: number; fencing_token?: number }[] = [];
    const sent: number[] = [];
    this.#ops.forEach((e, i) => {
      const local = settledLocally(e);
      if (local !== undefined) {
        out[i] = { ...out[i]!, err: local };
        return;
      }
      const op: (typeof ops)[number] = { op: e.op, route: e.text };
      if (e.op !== "release") op.ttl_ms = e.ttlMs;
      if (e.lease !== null) op.fencing_token = e.lease.fencingToken;
      ops.push(op);
      sent.push(i);
    });
    if (sent.length === 0) return out;
    const t0 = Date.now();
    const c = s.client;
    let answer;
    try {
      answer = await c.call(c.raw.POST("/v1/leases/batch", { body: { session_id: s.id, ops }, signal: options.signal }), 200);
    } catch (e) {
      if (e instanceof MusterError && e.code === "session_not_found") {
        for (const i of sent) this.#ops[i]!.lease?.end(new LeaseLostError(e));
      }
      throw e;
    }
    if (answer.results.length !== sent.length) {
      throw new Error(`muster: the broker answered ${answer.results.length} results for ${sent.length} operations`);
    }
    sent.forEach((i, k) => {
      out[i] = settle(s, this.#ops[i]!, answer.results[k]!, t0, out[i]!);
    });
    return out;
  }
}

/** The outcome of an operation known without asking the broker, if any. */
function settledLocally(e: Entry): Error | null | undefined {
  const l = e.lease;
  if (l === null) return undefined;
  if (e.op === "extend" && l.err !== null) return l.err;
  if (e.op === "release" && l.err !== null) return null;
  if (e.op === "release" && l.session.err !== null) {
    l.end(new LeaseLostError(l.session.err)); // the broker released it when the session ended
    return null;
  }
  return undefined;
}

type Answer = {
  ok: boolean;
  code?: string;
  status?: number;
  detail?: string;
  lease?: { fencing_token: number; acquired_at: string; expires_at: string; renewals: number; outcome?: "acquired" | "already_held" };
};

/** Applies one broker result to the SDK's handles, as the single operation would. */
function settle(s: Session, e: Entry, r: Answer, t0: number, out: BatchResult): BatchResult {
  const err = r.ok ? null : new MusterError(r.code ?? "internal", r.detail ?? "", r.status ?? 0, r.status !== undefined ? statusText(r.status) : "");
  const l = e.lease;
  switch (e.op) {
    case "acquire":
      return { ...out, lease: err === null && r.lease !== undefined ? adopt(s, e.route, r.lease, t0, e.ttlMs) : null, err };
    case "extend":
      if (err === null && r.lease !== undefined) {
        try {
          l!.extended(r.lease, t0, e.ttlMs);
          return out;
        } catch (x) {
          return { ...out, err: x as Error };
        }
      }
      if (ownershipGone(err)) {
        l!.end(new LeaseLostError(err));
        return { ...out, err: l!.err };
      }
      return { ...out, err };
    case "release":
      if (err === null) l!.end(new ReleasedError());
      else if (ownershipGone(err)) l!.end(new LeaseLostError(err));
      else return { ...out, err };
      return out;
  }
}

function statusText(status: number): string {
  return ({ 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 409: "Conflict", 429: "Too Many Requests" } as Record<number, string>)[status] ?? "";
}
