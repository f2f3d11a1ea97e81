/** LIST: held leases by selector, page by page from one snapshot. */
import type { components } from "./api/schema.js";
import type { RequestOptions, Transport } from "./transport.js";
import { MusterError } from "./errors.js";
import { signalOf } from "./internal/signal.js";

type LeaseItem = components["schemas"]["LeaseItem"];

/**
 * One held lease as observed through LIST, a watch marker or a change event:
 * a plain, read-only value. It carries no fencing token and no session id,
 * and nothing in this package turns an Item into a Lease; only
 * Session.acquire grants one.
 */
export interface Item {
  /** The concrete route, lease://realm/area/resource. */
  readonly route: string;
  /** The holder session's logical owner. */
  readonly ownerId: string;
  /** Opaque id of the holder session (new after reconnect or restart). */
  readonly holderIncarnation: string;
  readonly acquiredAt: Date;
  readonly expiresAt: Date;
  /** Remaining TTL in ms when the broker produced the item. */
  readonly remainingMs: number;
  readonly renewals: number;
}

/** @internal */
export function itemFrom(i: LeaseItem): Item {
  return Object.freeze({
    route: i.route,
    ownerId: i.owner_id,
    holderIncarnation: i.holder_incarnation,
    acquiredAt: new Date(i.acquired_at),
    expiresAt: new Date(i.expires_at),
    remainingMs: i.remaining_ms,
    renewals: i.renewals,
  });
}

/** Options of list, listPages and listPage. */
export interface ListOptions extends RequestOptions {
  /** The page size, 1..500; 0 or absent means the broker's default (100). */
  limit?: number | undefined;
  /**
   * Continues a snapshot: a Page's nextCursor, or the nextCursor of a watch
   * marker. It is bound to the selector (and family, epoch and snapshot).
   */
  cursor?: string | undefined;
}

/** One page of held leases, read from the snapshot of broker lifetime epoch at revision. */
export interface Page {
  readonly items: readonly Item[];
  /** "" on the last page. */
  readonly nextCursor: string;
  readonly epoch: string;
  readonly revision: number;
}

/** @internal */
export async function listPage(c: Transport, selector: string, o: ListOptions): Promise<Page> {
  const query: { selector: string; limit?: number; cursor?: string } = { selector };
  if (o.limit) query.limit = o.limit;
  if (o.cursor) query.cursor = o.cursor;
  const p = await c.call(c.raw.GET("/v1/leases", { params: { query }, ...signalOf(o.signal) }), 200);
  return {
    items: p.items.map(itemFrom),
    nextCursor: p.next_cursor ?? "",
    epoch: p.snapshot.epoch,
    revision: p.snapshot.revision,
  };
}

/** @internal */
export async function* listPages(c: Transport, selector: string, o: ListOptions): AsyncGenerator<Page, void, undefined> {
  let cursor = o.cursor ?? "";
  for (;;) {
    const p = await listPage(c, selector, { ...o, cursor });
    yield p;
    if (p.nextCursor === "") return;
    cursor = p.nextCursor;
  }
}

/** @internal */
export async function* listItems(c: Transport, selector: string, o: ListOptions): AsyncGenerator<Item, void, undefined> {
  for await (const p of listPages(c, selector, o)) yield* p.items;
}

/** A parsed exact route. */
export interface Route {
  readonly realm: string;
  readonly area: string;
  readonly resource: string;
}

/**
 * Splits lease://realm/area/resource. It checks only the shape needed to
 * build a path; the broker checks the rest (a wildcard segment is its
 * invalid_route).
 */
export function parseRoute(s: string): Route {
  const parts = s.startsWith("lease://") ? s.slice("lease://".length).split("/") : [];
  if (parts.length !== 3 || parts.some((p) => p === "")) {
    throw new MusterError("invalid_route", "a route is lease://{realm}/{area}/{resource}");
  }
  return { realm: parts[0]!, area: parts[1]!, resource: parts[2]! };
}

/** The state of one route as answered by get: read-only, with the number of waiters. */
export interface LeaseStatus {
  readonly route: string;
  readonly held: boolean;
  /** The holder, when held. */
  readonly item: Item | null;
  readonly waiters: number;
}

/** @internal */
export async function getLease(c: Transport, route: string, o: RequestOptions): Promise<LeaseStatus> {
  const r = parseRoute(route);
  const s = await c.call(c.raw.GET("/v1/leases/{realm}/{area}/{resource}", { params: { path: r }, ...signalOf(o.signal) }), 200);
  let item: Item | null = null;
  if (s.held) {
    item = Object.freeze({
      route: s.route,
      ownerId: s.owner_id ?? "",
      holderIncarnation: s.holder_incarnation ?? "",
      acquiredAt: new Date(s.acquired_at ?? 0),
      expiresAt: new Date(s.expires_at ?? 0),
      remainingMs: s.remaining_ms ?? 0,
      renewals: s.renewals ?? 0,
    });
  }
  return { route: s.route, held: s.held, item, waiters: s.waiters };
}
