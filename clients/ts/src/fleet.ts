/**
 * Fleets: the desired set of one fleet root, the durable specs of the work
 * that should run. Nothing a worker does to its leases (or its death) edits
 * the desired set; forget is the one way out.
 */
import type { RequestOptions, Transport } from "./transport.js";
import { signalOf } from "./internal/signal.js";

/** One entry of the desired set: its minted name and the spec exactly as registered. */
export interface Spec {
  readonly name: string;
  readonly spec: unknown;
}

/** A spec that passed a sweep, as returned by the caller's validator. */
export interface Kept<T> {
  readonly name: string;
  readonly spec: T;
}

/** What a sweep kept and the names it dropped. */
export interface SweepResult<T> {
  readonly kept: Kept<T>[];
  readonly dropped: string[];
}

/** The difference between a desired and a live set of names. */
export interface Plan {
  /** Desired and not live: work nobody holds. */
  readonly missing: string[];
  /** Live and not desired: leases of forgotten work. */
  readonly orphans: string[];
  /** For gap: the inventory revision the live set was read at (0 for plan). */
  readonly revision: number;
}

/**
 * The caller's validator: returns the decoded spec, or throws (or rejects)
 * when the spec is invalid and must be dropped.
 */
export type Validator<T> = (spec: unknown) => T | Promise<T>;

/** The fleet at one root. */
export class Fleet {
  /** One or more legal segments (lowercase letters, digits, '-' and '_') joined by '/'. */
  readonly root: string;
  readonly #c: Transport;

  /** @internal use MusterClient.fleet. */
  constructor(c: Transport, root: string) {
    this.#c = c;
    this.root = root;
  }

  /** Stores spec (any JSON value) under a new name `<kind>-<n>` and returns it. Names are never reused. */
  async register(kind: string, spec: unknown, options: RequestOptions = {}): Promise<Spec> {
    const c = this.#c;
    const row = await c.call(
      c.raw.POST("/v1/fleets/{root}/specs", { params: { path: { root: this.root } }, body: { kind, spec }, ...signalOf(options.signal) }),
      201,
    );
    return { name: row.name, spec: row.spec };
  }

  /** Reads one spec; spec_not_found when the name is not in the set. */
  async get(name: string, options: RequestOptions = {}): Promise<Spec> {
    const c = this.#c;
    const row = await c.call(
      c.raw.GET("/v1/fleets/{root}/specs/{name}", { params: { path: { root: this.root, name } }, ...signalOf(options.signal) }),
      200,
    );
    return { name: row.name, spec: row.spec };
  }

  /**
   * Removes one spec from the desired set; forgetting an absent name
   * succeeds. An illegal name (such as "Repo-1") is refused with
   * invalid_name and nothing is removed.
   */
  async forget(name: string, options: RequestOptions = {}): Promise<void> {
    const c = this.#c;
    await c.call(c.raw.DELETE("/v1/fleets/{root}/specs/{name}", { params: { path: { root: this.root, name } }, ...signalOf(options.signal) }), 204);
  }

  /** Iterates over the desired set in name order, one request per page (of up to 1,000), lazily. */
  async *desired(options: RequestOptions = {}): AsyncGenerator<Spec, void, undefined> {
    const c = this.#c;
    let cursor: string | undefined;
    for (;;) {
      const query: { limit: number; cursor?: string } = { limit: 1000 };
      if (cursor !== undefined) query.cursor = cursor;
      const page = await c.call(
        c.raw.GET("/v1/fleets/{root}/specs", { params: { path: { root: this.root }, query }, ...signalOf(options.signal) }),
        200,
      );
      for (const row of page.items) yield { name: row.name, spec: row.spec };
      if (!page.next_cursor) return;
      cursor = page.next_cursor;
    }
  }

  /**
   * Validates every spec of the desired set with the caller's own validator
   * and forgets each one it rejects: validate-or-drop. Returns the specs it
   * kept (as the validator returned them) and the names it dropped. A spec
   * registered while the sweep runs is either validated or left alone, never
   * dropped without validation (names are never reused). On an error the
   * sweep stops (rejects); what it dropped until then stays dropped.
   */
  async sweep<T>(validate: Validator<T>, options: RequestOptions = {}): Promise<SweepResult<T>> {
    const out: SweepResult<T> = { kept: [], dropped: [] };
    for await (const s of this.desired(options)) {
      let v: T;
      try {
        v = await validate(s.spec);
      } catch {
        await this.forget(s.name, options);
        out.dropped.push(s.name);
        continue;
      }
      out.kept.push({ name: s.name, spec: v });
    }
    return out;
  }

  /** Asks the broker for the pure difference of desired and live (both sorted in the answer). It changes nothing. */
  async plan(desired: readonly string[], live: readonly string[], options: RequestOptions = {}): Promise<Plan> {
    const c = this.#c;
    const p = await c.call(c.raw.POST("/v1/fleets/plan", { body: { desired: [...desired], live: [...live] }, ...signalOf(options.signal) }), 200);
    return { missing: p.missing, orphans: p.orphans, revision: 0 };
  }

  /**
   * Plans this fleet's desired set against the live lease inventory: the
   * resource segment of every held lease matching liveSelector, read from one
   * snapshot at `revision`. The broker answers a large gap in pages (10,000
   * names of each side at most); gap reads them all, one request per page,
   * and returns them joined. cursor_expired midway means the snapshot was
   * evicted: call gap again.
   */
  async gap(liveSelector: string, options: RequestOptions = {}): Promise<Plan> {
    const c = this.#c;
    const missing: string[] = [];
    const orphans: string[] = [];
    let revision = 0;
    let cursor: string | undefined;
    for (;;) {
      const query: { live: string; cursor?: string } = { live: liveSelector };
      if (cursor !== undefined) query.cursor = cursor;
      const g = await c.call(c.raw.GET("/v1/fleets/{root}/gap", { params: { path: { root: this.root }, query }, ...signalOf(options.signal) }), 200);
      for (const n of g.missing) missing.push(n);
      for (const n of g.orphans) orphans.push(n);
      revision = g.revision;
      if (g.next_cursor === undefined || g.next_cursor === null) return { missing, orphans, revision };
      cursor = g.next_cursor;
    }
  }
}
