/**
 * The wire under MusterClient: the base URLs, the token and the fetch of one
 * client, the broker each request goes to (the owner it follows, or the
 * current base URL), the last epoch seen, the Agent of ClientOptions.ca,
 * and what the client opened that is still open. Every module that talks
 * to the broker (list, watch, lease, session, batch, fleet, observe) takes a
 * Transport; MusterClient, which extends it, only adds the verbs that make
 * those objects, so nothing below it imports it.
 */
import createClient, { type Client } from "openapi-fetch";
import type { paths } from "./api/schema.js";
import { MusterError, problemError } from "./errors.js";
import { Broken, isBroken } from "./internal/faults.js";
import { checkCA, loadTLS, type CA, type TLS } from "./internal/tls.js";
import { Losses, type Held } from "./loss.js";

/** Options of a MusterClient. */
export interface ClientOptions {
  /** Sent as the bearer token of every request (a dev-mode broker needs none). */
  token?: string | undefined;
  /** The fetch implementation (default: globalThis.fetch at call time). */
  fetch?: typeof globalThis.fetch | undefined;
  /**
   * Turns off following wrong_broker answers: a request for a family that
   * another broker serves then fails with a MusterError wrong_broker whose
   * `owner` names that broker. Default false: the client follows.
   */
  withoutFollow?: boolean | undefined;
  /**
   * Node only: the certificate authorities to trust for an https:// broker
   * whose certificate a private CA signed, instead of Node's bundled roots,
   * as PEM text (a string or a Buffer, e.g. `readFileSync(caFile)`) or a
   * list of them: Node's `tls` `ca` option. Every request, watch stream and
   * observer of the client goes through an undici Agent that trusts them
   * (with undici's fetch; a `fetch` of your own gets the Agent as
   * `init.dispatcher`). The constructor throws a MusterError invalid_request
   * when an entry holds no PEM certificate, and in a browser, which trusts
   * its system's store only. See docs/operations.md, "TLS".
   */
  ca?: string | Uint8Array | readonly (string | Uint8Array)[] | undefined;
}

/** The wrong_broker answers one request follows, at most. */
export const maxFollows = 2;

/** Options every request accepts. */
export interface RequestOptions {
  /** Cancels the request. */
  signal?: AbortSignal | undefined;
}

/** Something a client opened that close() closes: a session, an observer, a watch stream. */
export interface Closable {
  close(): Promise<void>;
}

/** The answer openapi-fetch gives for one operation. */
interface FetchAnswer<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

/**
 * The base URLs a MusterClient is given: one URL, several separated by
 * commas (the form MUSTER_ADDR takes), or a list, in order of preference;
 * each without its trailing slashes. Throws a MusterError invalid_request
 * naming the first one that is not http(s)://host[:port].
 */
export function parseBaseUrls(baseUrls: string | readonly string[]): string[] {
  const list = typeof baseUrls === "string" ? baseUrls.split(",") : [...baseUrls];
  if (list.length === 0) throw new MusterError("invalid_request", "no base URL: want http(s)://host[:port], or several");
  return list.map((raw) => {
    const s = String(raw).trim().replace(/\/+$/, "");
    let u: URL | undefined;
    try {
      u = new URL(s);
    } catch {
      u = undefined;
    }
    if (u === undefined || (u.protocol !== "http:" && u.protocol !== "https:") || u.host === "") {
      throw new MusterError("invalid_request", `base URL ${JSON.stringify(s)}: want http(s)://host[:port], or several separated by commas`);
    }
    return s;
  });
}

/**
 * The connection to a Muster broker, or to a deployment of several brokers,
 * that MusterClient extends. It picks the broker of every request, observer
 * and watch stream by the rule of docs/client-operations.md, "Several
 * brokers" (see fetch).
 */
export class Transport {
  /**
   * The first (preferred) base URL without a trailing slash, e.g.
   * "http://127.0.0.1:7420": the one request URLs are built on before the
   * client picks their broker.
   */
  readonly baseUrl: string;
  /** Every base URL the client was given, in order of preference, without trailing slashes. */
  readonly baseUrls: readonly string[];
  /**
   * The generated low-level client (openapi-fetch over openapi.yaml's
   * paths), configured with this client's base URL, token and fetch. Its
   * answers are not checked.
   */
  readonly raw: Client<paths>;
  readonly #token: string;
  readonly #fetch: typeof globalThis.fetch | undefined;
  readonly #follow: boolean;
  /** ClientOptions.ca as PEM strings; undefined without one. */
  readonly #ca: string[] | undefined;
  /** undici's fetch and the Agent trusting #ca, made on the first request. */
  #tls: Promise<TLS> | undefined;
  readonly #bases: readonly URL[];
  /** The current base URL: an index into #bases. */
  #cur = 0;
  /** The owner a 421 wrong_broker named (docs/placement.md); undefined for none. */
  #owner: URL | undefined;
  #epoch = "";
  /** @internal the live sessions of this client, for prompt loss (loss.ts). */
  readonly losses = new Losses(() => isBroken(this, Broken.LateLoss));
  /** The host (host:port) that answered each response fetch returned. */
  readonly #hosts = new WeakMap<Response, string>();
  /** What this client opened that is still open (close). */
  readonly #open = new Set<Closable>();

  /**
   * baseUrls: the broker's base URL, or the base URLs of several brokers in
   * order of preference, as a list or as one string separated by commas
   * (docs/client-operations.md, "Several brokers").
   */
  constructor(baseUrls: string | readonly string[], options: ClientOptions = {}) {
    this.baseUrls = Object.freeze(parseBaseUrls(baseUrls));
    this.baseUrl = this.baseUrls[0]!;
    this.#bases = this.baseUrls.map((s) => new URL(s));
    this.#token = options.token ?? "";
    this.#fetch = options.fetch;
    this.#follow = options.withoutFollow !== true;
    this.#ca = options.ca === undefined ? undefined : checkCA(options.ca as CA);
    this.raw = createClient<paths>({
      baseUrl: this.baseUrl,
      fetch: (req: Request) => this.fetch(req),
    });
  }

  /** The broker lifetime (Muster-Epoch header) of the last answer, "" before the first. */
  get epoch(): string {
    return this.#epoch;
  }

  /** The owner a wrong_broker answer sent the client to, "" when none is remembered. */
  get owner(): string {
    return this.#owner === undefined ? "" : this.#owner.href.replace(/\/+$/, "");
  }

  /** The number of base URLs the client uses. */
  get #n(): number {
    return isBroken(this, Broken.SingleBroker) ? 1 : this.#bases.length;
  }

  /** Where the next request goes: the remembered owner, else the current base URL. */
  #target(): URL {
    return this.#owner ?? this.#bases[this.#cur % this.#n]!;
  }

  /**
   * Leaves t, which failed: the owner is forgotten, or the current base URL
   * becomes the next one, unless another request moved on from t already.
   */
  #moveOn(t: URL): void {
    if (t === this.#owner) {
      if (!isBroken(this, Broken.StickyOwner)) this.#owner = undefined;
    } else if (this.#owner === undefined && t === this.#bases[this.#cur % this.#n]) {
      this.#cur = (this.#cur + 1) % this.#n;
    }
  }

  /**
   * @internal fetch with the configured implementation; authorizes a
   * Request, picks its broker, records the epoch of every answer and which
   * host gave it (answeredBy), and ends the sessions that host's answer
   * shows gone (prompt loss: loss.ts), also for answers it does not return.
   *
   * The broker (docs/client-operations.md, "Several brokers"): the owner a
   * 421 wrong_broker answer named, else the current base URL. A 421 is
   * followed (at most maxFollows times per request, unless withoutFollow). A
   * connection error (not the caller's own abort) or a family_unavailable
   * answer moves the client on: the owner is forgotten, or the current base
   * URL becomes the next one. A request the broker certainly did not act on
   * (the connection could not be made, 421, family_unavailable) is sent
   * again at once to the new target, each request reaching at most every
   * base URL once plus maxFollows owners; any other failure is returned, and
   * the caller's next attempt goes to the new target.
   */
  fetch(input: Request | string, init?: RequestInit): Promise<Response> {
    return this.#send(input, init, undefined);
  }

  /**
   * @internal the per-request fetch option of one of session's own requests
   * (keepalive, acquire, extend, release, batch, delete): a success answer
   * first moves the session to the broker that gave it (Held.answeredBy),
   * then prompt loss judges that answer (loss.ts).
   */
  sessionFetch(session: Held): { fetch: (req: Request) => Promise<Response> } {
    return { fetch: (req: Request) => this.#send(req, undefined, session) };
  }

  async #send(input: Request | string, init: RequestInit | undefined, session: Held | undefined): Promise<Response> {
    if (input instanceof Request) this.authorize(input.headers);
    let f = this.#fetch ?? globalThis.fetch;
    let dispatcher: unknown;
    if (this.#ca !== undefined) {
      const tls = await (this.#tls ??= loadTLS(this.#ca));
      f = this.#fetch ?? tls.fetch;
      dispatcher = tls.dispatcher;
    }
    const url = input instanceof Request ? input.url : input;
    const signal = input instanceof Request ? input.signal : (init?.signal ?? undefined);
    // A body is read once, so that every attempt can send it again.
    const body = input instanceof Request && input.body !== null ? await input.arrayBuffer() : undefined;
    let follows = 0;
    let fails = 0;
    for (;;) {
      const t = this.#target();
      const to = rebase(url, t);
      let resp: Response;
      try {
        if (dispatcher !== undefined) {
          // undici's fetch takes no Request of another fetch: the URL and an init.
          const i = input instanceof Request ? { method: input.method, headers: input.headers, body: body ?? null, signal: input.signal } : { ...init };
          resp = await f(to, { ...i, dispatcher } as RequestInit);
        } else {
          const req =
            input instanceof Request ? new Request(to, { method: input.method, headers: input.headers, body: body ?? null, signal: input.signal }) : to;
          resp = await f(req, input instanceof Request ? undefined : init);
        }
      } catch (err) {
        // The caller gave up (its own abort, not a timeout): no broker failed.
        if (signal?.aborted === true && !isTimeout(signal.reason)) throw err;
        this.#moveOn(t);
        fails++;
        if (!signal?.aborted && notSent(err) && fails < this.#n + maxFollows) continue;
        throw err;
      }
      resp = await this.#record(resp, t.host, session);
      if (resp.status === 503 && (await isProblem(resp, "family_unavailable"))) {
        if (isBroken(this, Broken.StayOnUnavailable)) return resp;
        this.#moveOn(t);
        fails++;
        if (fails < this.#n + maxFollows && (this.#n > 1 || t !== this.#bases[0])) {
          await discard(resp);
          continue;
        }
        return resp;
      }
      if (resp.status === 421 && this.#follow && follows < maxFollows) {
        const next = await misdirectedTo(resp);
        if (next === undefined) return resp;
        follows++;
        this.#owner = next;
        await discard(resp);
        continue;
      }
      return resp;
    }
  }

  async #record(resp: Response, host: string, session: Held | undefined): Promise<Response> {
    const e = resp.headers.get("Muster-Epoch");
    if (e) this.#epoch = e;
    this.#hosts.set(resp, host);
    if (e && session !== undefined && resp.ok) session.answeredBy(host, e);
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

  /** @internal registers r, which this client opened, for close(). */
  opened(r: Closable): void {
    this.#open.add(r);
  }

  /** @internal forgets r, which ended. */
  ended(r: Closable): void {
    this.#open.delete(r);
  }

  /** @internal what this client opened that is still open, in the order it was opened. */
  openNow(): Closable[] {
    return [...this.#open];
  }

  /**
   * @internal closes the Agent of ClientOptions.ca and its pooled
   * connections; a later request makes a new one.
   */
  async closeAgent(): Promise<void> {
    const tls = this.#tls;
    this.#tls = undefined;
    if (tls !== undefined) {
      try {
        await (await tls).dispatcher.close();
      } catch {
        // undici did not load (that request failed already), or the Agent was closed
      }
    }
  }
}

/** url with the scheme and host of to. */
function rebase(url: string, to: URL): string {
  const u = new URL(url);
  if (u.protocol === to.protocol && u.host === to.host) return url;
  u.protocol = to.protocol;
  u.host = to.host;
  return u.toString();
}

/** Drops an answer's body that nobody will read. */
async function discard(resp: Response): Promise<void> {
  try {
    await resp.body?.cancel();
  } catch {
    // nothing to free
  }
}

/** Whether an abort reason is a timeout (AbortSignal.timeout), not the caller giving up. */
function isTimeout(reason: unknown): boolean {
  return reason instanceof Error && reason.name === "TimeoutError";
}

/** Error codes of a connection that could not be made (Node's fetch puts them on err.cause). */
const connectCodes = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL", "UND_ERR_CONNECT_TIMEOUT"]);

/**
 * Whether err, a fetch failure, proves the request never reached a broker:
 * the connection could not be made (refused, no route, no such host, connect
 * timeout). Node's fetch says so in err.cause (an AggregateError when several
 * addresses were tried); a browser's fetch does not say, so there it is never
 * proven and the request is not resent.
 */
export function notSent(err: unknown): boolean {
  const seen = new Set<unknown>();
  const walk = (e: unknown): boolean => {
    if (e === null || typeof e !== "object" || seen.has(e)) return false;
    seen.add(e);
    const x = e as { code?: unknown; syscall?: unknown; cause?: unknown; errors?: unknown };
    if (typeof x.code === "string" && connectCodes.has(x.code)) return true;
    if (x.syscall === "connect" && x.code !== "ECONNRESET") return true;
    if (Array.isArray(x.errors) && x.errors.length > 0 && x.errors.every(walk)) return true;
    return walk(x.cause);
  };
  return walk(err);
}

/** Whether resp is a problem answer of code; its body stays readable. */
async function isProblem(resp: Response, code: string): Promise<boolean> {
  const mt = (resp.headers.get("Content-Type") ?? "").split(";")[0]!.trim().toLowerCase();
  if (mt !== "application/problem+json") return false;
  try {
    const p = JSON.parse(await resp.clone().text()) as { code?: unknown } | null;
    return p !== null && typeof p === "object" && p.code === code;
  } catch {
    return false;
  }
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
