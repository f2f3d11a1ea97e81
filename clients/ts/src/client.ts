/**
 * MusterClient: one broker or several, one token. Safe to share; it holds no
 * state besides its configuration, the last epoch it saw, the broker it
 * sends to (the owner it follows, or the current base URL), and its live
 * sessions (for prompt loss: loss.ts). The wire is transport.ts; this file
 * adds the verbs that make sessions, LIST iterators, watch streams,
 * observers and fleets, and close().
 */
import { Fleet } from "./fleet.js";
import { asyncDispose } from "./internal/dispose.js";
import { getLease, listPage, listItems, listPages, type Item, type LeaseStatus, type ListOptions, type Page } from "./list.js";
import { Observer, type ObserveOptions } from "./observe.js";
import { Session, type SessionOptions } from "./session.js";
import { Transport, type ClientOptions, type RequestOptions } from "./transport.js";
import { openWatch, type Subscription, type WatchOptions } from "./watch.js";

/**
 * A client of a Muster broker, or of a deployment of several brokers. It
 * picks the broker of every request, observer and watch stream by the rule
 * of docs/client-operations.md, "Several brokers" (see Transport.fetch).
 */
export class MusterClient extends Transport {
  /**
   * baseUrls: the broker's base URL, or the base URLs of several brokers in
   * order of preference, as a list or as one string separated by commas
   * (docs/client-operations.md, "Several brokers").
   */
  constructor(baseUrls: string | readonly string[], options: ClientOptions = {}) {
    super(baseUrls, options);
  }

  /**
   * Creates a session for ownerId (the application's logical owner, shown in
   * inventory items) with a TTL of ttlMs (1 s .. 10 min). It keeps itself
   * alive in the background until close() or until it is lost.
   */
  session(ownerId: string, ttlMs: number, options: SessionOptions = {}): Promise<Session> {
    return Session.create(this, ownerId, ttlMs, options);
  }

  /** Reads the current state of one exact route. */
  get(route: string, options: RequestOptions = {}): Promise<LeaseStatus> {
    return getLease(this, route, options);
  }

  /** Reads one page of the held leases matching selector. */
  listPage(selector: string, options: ListOptions = {}): Promise<Page> {
    return listPage(this, selector, options);
  }

  /**
   * Iterates over the held leases matching selector, one request per page,
   * lazily: leaving the loop early sends no further request. Every item
   * comes from one snapshot. cursor_expired and epoch_changed mean "list
   * again from the start".
   */
  list(selector: string, options: ListOptions = {}): AsyncGenerator<Item, void, undefined> {
    return listItems(this, selector, options);
  }

  /** Like list, page by page. */
  listPages(selector: string, options: ListOptions = {}): AsyncGenerator<Page, void, undefined> {
    return listPages(this, selector, options);
  }

  /**
   * Opens a watch stream over selectors (at most 32) as its own read-only
   * session and resolves once its snapshot marker has arrived.
   */
  watch(selectors: string | readonly string[], options: WatchOptions = {}): Promise<Subscription> {
    return openWatch(this, null, typeof selectors === "string" ? [selectors] : selectors, options);
  }

  /**
   * Starts an observer of selector and returns at once: see {@link Observer}.
   * Invalid options throw a MusterError invalid_request naming the option.
   */
  observe(selector: string, options: ObserveOptions = {}): Observer {
    return new Observer(this, selector, options);
  }

  /** The fleet at root: one or more legal segments joined by "/". */
  fleet(root: string): Fleet {
    return new Fleet(this, root);
  }

  /**
   * Closes everything this client opened that is still open: its observers
   * and watch streams first, then its sessions (which releases their leases
   * at the broker), then the Agent of ClientOptions.ca with its pooled
   * connections. The client stays usable (a later request makes a new Agent).
   * Every close is tried; it then rejects with the failure, or an
   * AggregateError when several failed. `await using c = new
   * MusterClient(...)` calls it at the end of the scope.
   */
  async close(): Promise<void> {
    const open = this.openNow();
    const streams = open.filter((r) => !(r instanceof Session));
    const sessions = open.filter((r) => r instanceof Session);
    const errs: unknown[] = [];
    for (const group of [streams, sessions]) {
      for (const r of await Promise.allSettled(group.map((x) => x.close()))) {
        if (r.status === "rejected") errs.push(r.reason);
      }
    }
    await this.closeAgent();
    if (errs.length === 1) throw errs[0];
    if (errs.length > 1) throw new AggregateError(errs, "muster: closing the client's sessions, observers and streams");
  }

  /** close(): `await using c = new MusterClient(...)`. */
  [asyncDispose](): Promise<void> {
    return this.close();
  }
}
