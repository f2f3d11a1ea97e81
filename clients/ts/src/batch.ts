/** Batches: many lease operations of one session in one request. */
import type { components } from "./api/schema.js";
import type { RequestOptions } from "./transport.js";
import { LeaseLostError, MusterError, ReleasedError, isCode } from "./errors.js";
import { Lease, adopt, ownershipGone, type Holder } from "./lease.js";
import { parseRoute, type Route } from "./list.js";
import { signalOf } from "./internal/signal.js";

/** The most operations one batch may carry (the contract's BatchRequest.ops maxItems). */
export const maxBatchOps = 256;

/** The kind of a batch operation. */
export type BatchOpKind = components["schemas"]["BatchOpKind"];

/**
 * The outcome of one operation of a batch, in the order of the batch. `err`
 * is null on success; otherwise it is what the operation on its own
 * (Session.acquire, Lease.extend, Lease.release) would have rejected with: a
 * MusterError with the broker's code for that operation (isCode(r.err,
 * "lease_held"), advice(r.err)), or the lease's loss (a LeaseLostError).
 */
export interface BatchResult {
  readonly op: BatchOpKind;
  readonly route: string;
  /**
   * The handle: after a successful acquire the new handle (or the same one,
   * when this session already held the route); for an extend or a release
   * the lease it was given. null after a failed acquire.
   */
  readonly lease: Lease | null;
  readonly err: Error | null;
}

interface Entry {
  op: BatchOpKind;
  route: Route;
  key: string;
  ttlMs: number;
  lease: Lease | null; // extend and release
}

/**
 * Lease operations of one session — acquisitions (which never wait),
 * extensions and releases — applied by the broker in one request and one
 * step, in the order they were added. Build it with Session.batch(), send it
 * with do(). Adding never throws: the first local refusal is what do()
 * rejects with.
 */
export class Batch {
  readonly #s: Holder;
  readonly #ops: Entry[] = [];
  #err: Error | null = null;

  /** @internal use Session.batch. */
  constructor(s: Holder) {
    this.#s = s;
  }

  /** The number of operations added so far. */
  get length(): number {
    return this.#ops.length;
  }

  /**
   * Adds an acquisition of the exact route for ttlMs (100 ms .. 10 min). It
   * never waits: when another session holds the route, its result is lease_held.
   */
  acquire(route: string, ttlMs: number): this {
    let r: Route = { realm: "", area: "", resource: "" };
    try {
      r = parseRoute(route);
    } catch (e) {
      this.#refuse(e as Error);
    }
    return this.#add({ op: "acquire", route: r, key: route, ttlMs, lease: null });
  }

  /** Adds an extension of lease to now + ttlMs, as Lease.extend. */
  extend(lease: Lease, ttlMs: number): this {
    if (this.#own(lease)) this.#add({ op: "extend", route: parseRoute(lease.route), key: lease.route, ttlMs, lease });
    return this;
  }

  /** Adds a release of lease, as Lease.release. */
  release(lease: Lease): this {
    if (this.#own(lease)) this.#add({ op: "release", route: parseRoute(lease.route), key: lease.route, ttlMs: 0, lease });
    return this;
  }

  /**
   * Sends the batch and resolves with one result per operation, in order.
   *
   * It rejects as a whole, and nothing was applied, when the batch was
   * refused locally (no operation, more than maxBatchOps, a malformed route,
   * a lease of another session: invalid_request or invalid_route) or by the
   * broker (session_not_found: the session is then lost at once, and every
   * lease with it). On a transport error or an aborted signal nothing is
   * known: the leases stay as they were (retry before their deadline), and
   * grants the broker made for a request that left are rolled back by the
   * broker.
   *
   * Operations on leases already known to be lost are not sent: their
   * results are what extend and release would give (err, and null for a
   * release).
   */
  async do(options: RequestOptions = {}): Promise<BatchResult[]> {
    if (this.#err !== null) throw this.#err;
    if (this.#ops.length === 0) throw new MusterError("invalid_request", "a batch has at least one operation");
    const s = this.#s;
    if (s.err !== null) throw s.err;
    const out: BatchResult[] = [];
    const ops: components["schemas"]["BatchOp"][] = [];
    const sent: number[] = [];
    for (const [i, e] of this.#ops.entries()) {
      const local = settledLocally(e);
      out.push({ op: e.op, route: e.key, lease: e.lease, err: local.done ? local.err : null });
      if (local.done) continue;
      const op: components["schemas"]["BatchOp"] = { op: e.op, route: e.key };
      if (e.op !== "release") op.ttl_ms = e.ttlMs;
      if (e.lease !== null) op.fencing_token = e.lease.fencingToken;
      ops.push(op);
      sent.push(i);
    }
    if (sent.length === 0) return out;
    const t0 = performance.now(); // the local deadlines' send time, on the monotonic clock
    const c = s.client;
    let resp;
    try {
      resp = await c.call(c.raw.POST("/v1/leases/batch", { body: { session_id: s.id, ops }, ...signalOf(options.signal), ...c.sessionFetch(s) }), 200);
    } catch (e) {
      c.losses.notFound(s, e); // every lease of the session is lost with it
      if (isCode(e, "session_not_found")) {
        for (const i of sent) this.#ops[i]!.lease?.end(new LeaseLostError(e));
      }
      throw e;
    }
    if (resp.results.length !== sent.length) {
      throw new MusterError("internal", `the broker answered ${resp.results.length} results for ${sent.length} operations`);
    }
    for (const [k, i] of sent.entries()) out[i] = settle(s, this.#ops[i]!, resp.results[k]!, t0, out[i]!);
    return out;
  }

  #add(e: Entry): this {
    if (this.#ops.length === maxBatchOps) this.#refuse(new MusterError("invalid_request", `a batch has at most ${maxBatchOps} operations`));
    this.#ops.push(e);
    return this;
  }

  /** Checks that lease is a lease of the batch's session. */
  #own(lease: Lease): boolean {
    if (!(lease instanceof Lease) || lease.session !== this.#s) {
      this.#refuse(new MusterError("invalid_request", "a batch takes only leases of its own session"));
      return false;
    }
    return true;
  }

  #refuse(err: Error): void {
    if (this.#err === null) this.#err = err;
  }
}

/** Whether the operation's outcome is already known without asking the broker, as extend and release know it. */
function settledLocally(e: Entry): { done: boolean; err: Error | null } {
  const l = e.lease;
  if (l === null) return { done: false, err: null };
  if (e.op === "extend" && l.err !== null) return { done: true, err: l.err };
  if (e.op === "release" && l.err !== null) return { done: true, err: null };
  const serr = l.session.err;
  if (e.op === "release" && serr !== null) {
    l.end(new LeaseLostError(serr)); // the broker released it when the session ended
    return { done: true, err: null };
  }
  return { done: false, err: null };
}

/** Applies one broker result to the SDK's handles, as the single operation would. */
function settle(s: Holder, e: Entry, r: components["schemas"]["BatchResult"], t0: number, out: BatchResult): BatchResult {
  const err = r.ok ? null : resultError(r);
  switch (e.op) {
    case "acquire":
      if (err === null && r.lease !== undefined) return { ...out, lease: adopt(s, e.route, r.lease, t0, e.ttlMs) };
      return { ...out, err };
    case "extend": {
      const l = e.lease!;
      if (err === null && r.lease !== undefined) {
        try {
          l.extended(r.lease, t0, e.ttlMs);
          return out;
        } catch (lost) {
          return { ...out, err: lost as Error };
        }
      }
      if (ownershipGone(err)) {
        l.end(new LeaseLostError(err));
        return { ...out, err: l.err };
      }
      return { ...out, err };
    }
    case "release": {
      const l = e.lease!;
      if (err === null) l.end(new ReleasedError());
      else if (ownershipGone(err)) l.end(new LeaseLostError(err));
      else return { ...out, err };
      return out;
    }
  }
}

/** The MusterError of a failed result, as a problem body with the same code would make it. */
function resultError(r: components["schemas"]["BatchResult"]): MusterError {
  return new MusterError(r.code ?? "internal", r.detail ?? "", r.status ?? 0, r.status === undefined ? "" : statusText(r.status));
}

const texts: Record<number, string> = { 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 409: "Conflict", 429: "Too Many Requests", 500: "Internal Server Error" };

function statusText(status: number): string {
  return texts[status] ?? "";
}
