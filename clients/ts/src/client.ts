/**
 * MusterClient: one broker, one token. Safe to share; it holds no state
 * besides its configuration, the last epoch it saw, the broker it follows
 * to, and its live sessions (for prompt loss: loss.ts).
 */
import createClient, { type Client } from "openapi-fetch";
import type { paths } from "./api/schema.js";
import { MusterError, problemError } from "./errors.js";
import { Fleet } from "./fleet.js";
import { Losses, hostOf } from "./loss.js";
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
  /**
   * Turns off following wrong_broker answers: a request for a family that
   * another broker serves then fails with a MusterError wrong_broker whose
   * `owner` names that broker. Default false: the client follows.
   */
  withoutFollow?: boolean;
}

/** The brokers one request is sent to after the first, at most. */
export const maxFollows = 2;

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
  readonly #follow: boolean;
  /** Where requests go (docs/placement.md): the owner a 421 named, undefined for baseUrl. */
  #owner: URL | undefined;
  /** @internal conformance tests only: never forget an owner that stopped answering. */
  stickyOwner = false;
  /** @internal conformance tests only: a lease's loss is never reported (`lost` never aborts). */
  neverLost = false;
  /**
   * @internal conformance tests only: a grant's local deadline is send + TTL
   * (the old rule), ignoring the answer's expires_after_request_ms.
   */
  sendPlusTtl = false;
  /**
   * @internal conformance tests only: a session is lost at its keepalive
   * only; another epoch, family_unavailable or session_not_found from its
   * broker end nothing at once (loss.ts).
   */
  lateLoss = false;
  #epoch = "";
  /** @internal the live sessions of this client, for prompt loss (loss.ts). */
  readonly losses = new Losses(() => this.lateLoss);
  /** The host (host:port) that answered each response fetch returned. */
  readonly #hosts = new WeakMap<Response, string>();

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
    this.#follow = options.withoutFollow !== true;
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
   * @internal fetch with the configured implementation; authorizes a Request,
   * records the epoch of the answer and which host gave it (answeredBy), and
   * ends the sessions that host's answer shows gone (prompt loss: loss.ts)
   * before it returns the answer. In a multi-broker deployment
   * (docs/placement.md) a 421 wrong_broker answer names the broker that
   * serves the caller's family: the request is sent there instead (at most
   * maxFollows times), and every later request goes there directly until
   * that broker stops answering. A 421 means the broker did nothing, so
   * resending is safe for every operation.
   */
  async fetch(input: Request | string, init?: RequestInit): Promise<Response> {
    if (input instanceof Request) this.authorize(input.headers);
    const f = this.#fetch ?? globalThis.fetch;
    if (!this.#follow) {
      const url = input instanceof Request ? input.url : input;
      return this.#record(await f(input, init), hostOf(url));
    }
    // A body is read once, so that every hop can send it again.
    const body = input instanceof Request && input.body !== null ? await input.arrayBuffer() : undefined;
    for (let hop = 0; ; hop++) {
      const owner = this.#owner;
      const url = input instanceof Request ? input.url : input;
      const to = owner === undefined ? url : rebase(url, owner);
      const req =
        input instanceof Request ? new Request(to, { method: input.method, headers: input.headers, body, signal: input.signal }) : to;
      let resp: Response;
      try {
        resp = await this.#record(await f(req, input instanceof Request ? undefined : init), hostOf(to));
      } catch (err) {
        // The owner we were sent to is gone (a failover): the next request
        // asks the configured broker again.
        if (owner !== undefined && this.#owner === owner && !this.stickyOwner) this.#owner = undefined;
        throw err;
      }
      if (resp.status !== 421 || hop >= maxFollows) return resp;
      const next = await misdirectedTo(resp);
      if (next === undefined) return resp;
      this.#owner = next;
    }
  }

  async #record(resp: Response, host: string): Promise<Response> {
    const e = resp.headers.get("Muster-Epoch");
    if (e) this.#epoch = e;
    this.#hosts.set(resp, host);
    await this.losses.answered(host, resp);
    return resp;
  }

  /**
   * @internal the host (host:port) that answered resp, a response of fetch:
   * the owner a wrong_broker answer was followed to, or the base URL's; ""
   * for a response fetch did not return.
   */
  answeredBy(resp: Response): string {
    return this.#hosts.get(resp) ?? "";
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

/** url with the scheme and host of owner. */
function rebase(url: string, owner: URL): string {
  const u = new URL(url);
  u.protocol = owner.protocol;
  u.host = owner.host;
  return u.toString();
}

/**
 * The owner a 421 answer names, when it is a wrong_broker problem with an
 * http(s) URL; undefined otherwise. The answer's body stays readable.
 */
export async function misdirectedTo(resp: Response): Promise<URL | undefined> {
  const mt = (resp.headers.get("Content-Type") ?? "").split(";")[0]!.trim().toLowerCase();
  if (mt !== "application/problem+json") return undefined;
  let p: unknown;
  try {
    p = JSON.parse(await resp.clone().text());
  } catch {
    return undefined;
  }
  const q = p as { code?: unknown; owner?: unknown } | null;
  if (q === null || typeof q !== "object" || q.code !== "wrong_broker" || typeof q.owner !== "string") return undefined;
  let u: URL;
  try {
    u = new URL(q.owner);
  } catch {
    return undefined;
  }
  return (u.protocol === "http:" || u.protocol === "https:") && u.host !== "" ? u : undefined;
}
