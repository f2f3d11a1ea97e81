/**
 * MusterClient: one broker, one token. Safe to share; it holds no state
 * besides its configuration and the last epoch it saw.
 */
import createClient, { type Client } from "openapi-fetch";
import type { paths } from "./api/schema.js";
import { MusterError, problemError } from "./errors.js";
import { Fleet } from "./fleet.js";
import { getLease, listPage, listItems, listPages, type Item, type LeaseStatus, type ListOptions, type Page } from "./list.js";
import { Observer, type ObserveOptions } from "./observe.js";
import { Session, type SessionOptions } from "./session.js";
import { openWatch, type Subscription, type WatchOptions } from "./watch.js";

/** Options of a MusterClient. */
export interface ClientOptions {
  /** Sent as the bearer token of every request (a dev-mode broker needs none). */
  token?: string;
  /** The fetch implementation (default: globalThis.fetch at call time). */
  fetch?: typeof globalThis.fetch;
}

/** Options every request accepts. */
export interface RequestOptions {
  /** Cancels the request. */
  signal?: AbortSignal;
}

/** The answer openapi-fetch gives for one operation. */
interface FetchAnswer<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

/** A client of one Muster broker. */
export class MusterClient {
  /** The broker's base URL without a trailing slash, e.g. "http://127.0.0.1:7420". */
  readonly baseUrl: string;
  /**
   * The generated low-level client (openapi-fetch over openapi.yaml's
   * paths), configured with this client's base URL, token and fetch. Its
   * answers are not checked.
   */
  readonly raw: Client<paths>;
  readonly #token: string;
  readonly #fetch: typeof globalThis.fetch | undefined;
  #epoch = "";

  constructor(baseUrl: string, options: ClientOptions = {}) {
    let u: URL | undefined;
    try {
      u = new URL(baseUrl);
    } catch {
      u = undefined;
    }
    if (u === undefined || (u.protocol !== "http:" && u.protocol !== "https:") || u.host === "") {
      throw new MusterError("invalid_request", `base URL ${JSON.stringify(baseUrl)}: want http(s)://host[:port]`);
    }
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.#token = options.token ?? "";
    this.#fetch = options.fetch;
    this.raw = createClient<paths>({
      baseUrl: this.baseUrl,
      fetch: (req: Request) => this.fetch(req),
    });
  }

  /** The broker lifetime (Muster-Epoch header) of the last answer, "" before the first. */
  get epoch(): string {
    return this.#epoch;
  }

  /**
   * @internal fetch with the configured implementation; authorizes a Request
   * and records the epoch of the answer.
   */
  async fetch(input: Request | string, init?: RequestInit): Promise<Response> {
    if (input instanceof Request) this.authorize(input.headers);
    const f = this.#fetch ?? globalThis.fetch;
    const resp = await f(input, init);
    const e = resp.headers.get("Muster-Epoch");
    if (e) this.#epoch = e;
    return resp;
  }

  /** @internal sets the Authorization header. */
  authorize(h: Headers): void {
    if (this.#token !== "") h.set("Authorization", `Bearer ${this.#token}`);
  }

  /** @internal checks an openapi-fetch answer: a status other than want becomes a MusterError. */
  async call<T>(answer: Promise<FetchAnswer<T>>, want: number): Promise<T> {
    const r = await answer;
    if (r.response.status !== want) {
      throw problemError(r.response.status, r.response.statusText, r.response.headers.get("Content-Type"), r.error ?? r.data);
    }
    return r.data as T;
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
}
