var __create = Object.create;
var __defProp = Object.defineProperty;
var __getOwnPropDesc = Object.getOwnPropertyDescriptor;
var __getOwnPropNames = Object.getOwnPropertyNames;
var __getProtoOf = Object.getPrototypeOf;
var __hasOwnProp = Object.prototype.hasOwnProperty;
var __commonJS = (cb, mod) => function __require() {
  return mod || (0, cb[__getOwnPropNames(cb)[0]])((mod = { exports: {} }).exports, mod), mod.exports;
};
var __copyProps = (to, from, except, desc) => {
  if (from && typeof from === "object" || typeof from === "function") {
    for (let key of __getOwnPropNames(from))
      if (!__hasOwnProp.call(to, key) && key !== except)
        __defProp(to, key, { get: () => from[key], enumerable: !(desc = __getOwnPropDesc(from, key)) || desc.enumerable });
  }
  return to;
};
var __toESM = (mod, isNodeMode, target) => (target = mod != null ? __create(__getProtoOf(mod)) : {}, __copyProps(
  // If the importer is in node compatibility mode or this is not an ESM
  // file that has been converted to a CommonJS file using a Babel-
  // compatible transform (i.e. "__esModule" has not been set), then set
  // "default" to the CommonJS "module.exports" for node compatibility.
  isNodeMode || !mod || !mod.__esModule ? __defProp(target, "default", { value: mod, enumerable: true }) : target,
  mod
));

// (disabled):node_modules/undici/index.js
var require_undici = __commonJS({
  "(disabled):node_modules/undici/index.js"() {
  }
});

// src/internal/signal.ts
function signalOf(signal) {
  return signal === void 0 ? {} : { signal };
}

// src/fleet.ts
var Fleet = class {
  /** One or more legal segments (lowercase letters, digits, '-' and '_') joined by '/'. */
  root;
  #c;
  /** @internal use MusterClient.fleet. */
  constructor(c, root) {
    this.#c = c;
    this.root = root;
  }
  /** Stores spec (any JSON value) under a new name `<kind>-<n>` and returns it. Names are never reused. */
  async register(kind, spec, options = {}) {
    const c = this.#c;
    const row = await c.call(
      c.raw.POST("/v1/fleets/{root}/specs", { params: { path: { root: this.root } }, body: { kind, spec }, ...signalOf(options.signal) }),
      201
    );
    return { name: row.name, spec: row.spec };
  }
  /** Reads one spec; spec_not_found when the name is not in the set. */
  async get(name, options = {}) {
    const c = this.#c;
    const row = await c.call(
      c.raw.GET("/v1/fleets/{root}/specs/{name}", { params: { path: { root: this.root, name } }, ...signalOf(options.signal) }),
      200
    );
    return { name: row.name, spec: row.spec };
  }
  /**
   * Removes one spec from the desired set; forgetting an absent name
   * succeeds. An illegal name (such as "Repo-1") is refused with
   * invalid_name and nothing is removed.
   */
  async forget(name, options = {}) {
    const c = this.#c;
    await c.call(c.raw.DELETE("/v1/fleets/{root}/specs/{name}", { params: { path: { root: this.root, name } }, ...signalOf(options.signal) }), 204);
  }
  /** Iterates over the desired set in name order, one request per page (of up to 1,000), lazily. */
  async *desired(options = {}) {
    const c = this.#c;
    let cursor;
    for (; ; ) {
      const query = { limit: 1e3 };
      if (cursor !== void 0) query.cursor = cursor;
      const page = await c.call(
        c.raw.GET("/v1/fleets/{root}/specs", { params: { path: { root: this.root }, query }, ...signalOf(options.signal) }),
        200
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
  async sweep(validate, options = {}) {
    const out = { kept: [], dropped: [] };
    for await (const s of this.desired(options)) {
      let v;
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
  async plan(desired, live, options = {}) {
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
  async gap(liveSelector, options = {}) {
    const c = this.#c;
    const missing = [];
    const orphans = [];
    let revision = 0;
    let cursor;
    for (; ; ) {
      const query = { live: liveSelector };
      if (cursor !== void 0) query.cursor = cursor;
      const g = await c.call(c.raw.GET("/v1/fleets/{root}/gap", { params: { path: { root: this.root }, query }, ...signalOf(options.signal) }), 200);
      for (const n of g.missing) missing.push(n);
      for (const n of g.orphans) orphans.push(n);
      revision = g.revision;
      if (g.next_cursor === void 0 || g.next_cursor === null) return { missing, orphans, revision };
      cursor = g.next_cursor;
    }
  }
};

// src/internal/dispose.ts
var asyncDispose = Symbol.asyncDispose ?? /* @__PURE__ */ Symbol.for("Symbol.asyncDispose");

// src/errors.ts
var table = {
  invalid_route: "retry-no",
  invalid_selector: "retry-no",
  invalid_request: "retry-no",
  unauthenticated: "retry-no",
  forbidden: "retry-no",
  session_not_found: "retry-restart",
  lease_held: "retry-backoff",
  already_queued: "retry-no",
  wait_timeout: "retry-backoff",
  queue_full: "retry-backoff",
  not_owner: "retry-restart",
  fenced: "retry-restart",
  lease_expired: "retry-restart",
  invalid_cursor: "retry-no",
  cursor_expired: "retry-restart",
  epoch_changed: "retry-restart",
  subscription_limit: "retry-no",
  inventory_unavailable: "retry-backoff",
  invalid_name: "retry-no",
  spec_not_found: "retry-no",
  payload_too_large: "retry-no",
  internal: "retry-backoff",
  not_found: "retry-no",
  method_not_allowed: "retry-no",
  not_implemented: "retry-no",
  unavailable: "retry-backoff",
  session_limit: "retry-backoff",
  spec_limit: "retry-no",
  wrong_broker: "retry-restart",
  family_unavailable: "retry-backoff"
};
var codes = Object.keys(table);
var Codes = {
  InvalidRoute: "invalid_route",
  InvalidSelector: "invalid_selector",
  InvalidRequest: "invalid_request",
  Unauthenticated: "unauthenticated",
  Forbidden: "forbidden",
  SessionNotFound: "session_not_found",
  LeaseHeld: "lease_held",
  AlreadyQueued: "already_queued",
  WaitTimeout: "wait_timeout",
  QueueFull: "queue_full",
  NotOwner: "not_owner",
  Fenced: "fenced",
  LeaseExpired: "lease_expired",
  InvalidCursor: "invalid_cursor",
  CursorExpired: "cursor_expired",
  EpochChanged: "epoch_changed",
  SubscriptionLimit: "subscription_limit",
  InventoryUnavailable: "inventory_unavailable",
  InvalidName: "invalid_name",
  SpecNotFound: "spec_not_found",
  PayloadTooLarge: "payload_too_large",
  Internal: "internal",
  NotFound: "not_found",
  MethodNotAllowed: "method_not_allowed",
  NotImplemented: "not_implemented",
  Unavailable: "unavailable",
  SessionLimit: "session_limit",
  SpecLimit: "spec_limit",
  WrongBroker: "wrong_broker",
  FamilyUnavailable: "family_unavailable"
};
var MusterError = class extends Error {
  name = "MusterError";
  /** The contract's code; an unknown (newer) code is kept as given. */
  code;
  /** The HTTP status, 0 for a local refusal. */
  status;
  /** The problem's title, e.g. "Conflict". */
  title;
  /** A human-readable explanation; never contains a secret. */
  detail;
  /**
   * On a limit (429), the bound that was hit: "broker" (a cap shared by every
   * family), "family" (the caller's family's quota), "session", "route" or
   * "root"; a newer value is kept as given. Empty otherwise.
   */
  scope;
  /**
   * On wrong_broker (421), the base URL of the broker that serves the
   * caller's family. The client follows it by itself (see the
   * `withoutFollow` client option); it is set on the error only when
   * following failed. Empty otherwise.
   */
  owner;
  constructor(code, detail = "", status = 0, title = "", scope = "", owner = "") {
    super(detail === "" ? `muster: ${code}` : `muster: ${code}: ${detail}`);
    this.code = code;
    this.status = status;
    this.title = title;
    this.detail = detail;
    this.scope = scope;
    this.owner = owner;
  }
  /** The retry advice for this error: {@link advice}. */
  get advice() {
    return advice(this);
  }
};
var ClosedError = class extends Error {
  name = "ClosedError";
  constructor() {
    super("muster: closed");
  }
};
var LeaseLostError = class extends Error {
  name = "LeaseLostError";
  constructor(cause) {
    super(`muster: lease lost: ${messageOf(cause)}`, { cause });
  }
};
var ReleasedError = class extends Error {
  name = "ReleasedError";
  constructor() {
    super("muster: lease released");
  }
};
var SessionLostError = class extends Error {
  name = "SessionLostError";
  constructor(detail, cause) {
    super(`muster: session lost: ${detail}`, { cause });
  }
};
var StreamEndedError = class extends Error {
  name = "StreamEndedError";
  constructor(message = "muster: watch stream ended", cause) {
    super(message, cause === void 0 ? void 0 : { cause });
  }
};
var StreamEndError = class extends StreamEndedError {
  name = "StreamEndError";
  reason;
  /** The revision at which the stream ended, 0 when the broker sent none. */
  revision;
  constructor(reason, revision = 0) {
    super(`muster: watch stream ended: ${reason}`);
    this.reason = reason;
    this.revision = revision;
  }
};
function isCode(err, code) {
  return err instanceof MusterError && err.code === code;
}
function isAbort(err) {
  return err instanceof Error && (err.name === "AbortError" || err.name === "TimeoutError");
}
function advice(err) {
  if (err === void 0 || err === null) return "retry-no";
  if (err instanceof MusterError) {
    const known = table[err.code];
    if (known !== void 0) return known;
    return err.status >= 500 || err.status === 429 ? "retry-backoff" : "retry-no";
  }
  if (err instanceof LeaseLostError || err instanceof SessionLostError || err instanceof StreamEndedError) {
    return "retry-restart";
  }
  if (err instanceof ClosedError || err instanceof ReleasedError || isAbort(err)) return "retry-no";
  return "retry-backoff";
}
function messageOf(e) {
  return e instanceof Error ? e.message : String(e);
}
function problemError(status, statusText2, contentType, body) {
  const mt = (contentType ?? "").split(";")[0].trim().toLowerCase();
  let value = body;
  if (typeof body === "string" && (mt === "application/problem+json" || mt === "application/json")) {
    try {
      value = JSON.parse(body);
    } catch {
    }
  }
  if ((mt === "application/problem+json" || mt === "application/json") && typeof value === "object" && value !== null) {
    const q = value;
    if (typeof q.code === "string" && q.code !== "") {
      return new MusterError(
        q.code,
        typeof q.detail === "string" ? q.detail : "",
        status,
        typeof q.title === "string" && q.title !== "" ? q.title : statusText2,
        typeof q.scope === "string" ? q.scope : "",
        typeof q.owner === "string" ? q.owner : ""
      );
    }
  }
  let code;
  switch (status) {
    case 502:
    case 503:
    case 504:
      code = "unavailable";
      break;
    case 404:
      code = "not_found";
      break;
    case 401:
      code = "unauthenticated";
      break;
    case 403:
      code = "forbidden";
      break;
    case 413:
      code = "payload_too_large";
      break;
    default:
      code = "internal";
  }
  const text = typeof body === "string" ? body : body === void 0 ? "" : JSON.stringify(body);
  return new MusterError(code, `HTTP ${status} without a problem body: ${text.slice(0, 200).trim()}`, status, statusText2);
}

// src/list.ts
function itemFrom(i) {
  return Object.freeze({
    route: i.route,
    ownerId: i.owner_id,
    holderIncarnation: i.holder_incarnation,
    acquiredAt: new Date(i.acquired_at),
    expiresAt: new Date(i.expires_at),
    remainingMs: i.remaining_ms,
    renewals: i.renewals
  });
}
async function listPage(c, selector, o) {
  const query = { selector };
  if (o.limit) query.limit = o.limit;
  if (o.cursor) query.cursor = o.cursor;
  const p = await c.call(c.raw.GET("/v1/leases", { params: { query }, ...signalOf(o.signal) }), 200);
  return {
    items: p.items.map(itemFrom),
    nextCursor: p.next_cursor ?? "",
    epoch: p.snapshot.epoch,
    revision: p.snapshot.revision
  };
}
async function* listPages(c, selector, o) {
  let cursor = o.cursor ?? "";
  for (; ; ) {
    const p = await listPage(c, selector, { ...o, cursor });
    yield p;
    if (p.nextCursor === "") return;
    cursor = p.nextCursor;
  }
}
async function* listItems(c, selector, o) {
  for await (const p of listPages(c, selector, o)) yield* p.items;
}
function parseRoute(s) {
  const parts = s.startsWith("lease://") ? s.slice("lease://".length).split("/") : [];
  if (parts.length !== 3 || parts.some((p) => p === "")) {
    throw new MusterError("invalid_route", "a route is lease://{realm}/{area}/{resource}");
  }
  return { realm: parts[0], area: parts[1], resource: parts[2] };
}
async function getLease(c, route, o) {
  const r = parseRoute(route);
  const s = await c.call(c.raw.GET("/v1/leases/{realm}/{area}/{resource}", { params: { path: r }, ...signalOf(o.signal) }), 200);
  let item = null;
  if (s.held) {
    item = Object.freeze({
      route: s.route,
      ownerId: s.owner_id ?? "",
      holderIncarnation: s.holder_incarnation ?? "",
      acquiredAt: new Date(s.acquired_at ?? 0),
      expiresAt: new Date(s.expires_at ?? 0),
      remainingMs: s.remaining_ms ?? 0,
      renewals: s.renewals ?? 0
    });
  }
  return { route: s.route, held: s.held, item, waiters: s.waiters };
}

// src/backoff.ts
var Backoff = class {
  #lo;
  #hi;
  #cur;
  constructor(lo, hi) {
    this.#lo = lo;
    this.#hi = hi;
    this.#cur = lo;
  }
  next() {
    const d = this.#cur;
    this.#cur = Math.min(this.#cur * 2, this.#hi);
    return d / 2 + Math.random() * (d / 2);
  }
  reset() {
    this.#cur = this.#lo;
  }
};
var minReconcileMs = 5e3;
var maxReconcileMs = 6e4;
var defaultReconcileJitter = 0.2;
function reconcileInterval(shortestTtlMs) {
  if (!(shortestTtlMs > 0)) return maxReconcileMs;
  return Math.min(Math.max(shortestTtlMs / 2, minReconcileMs), maxReconcileMs);
}
function jittered(d, j) {
  if (j === 0) return d;
  return d * (1 + j * (2 * Math.random() - 1));
}
function unref(t) {
  const u = t;
  if (typeof u === "object" && u !== null && typeof u.unref === "function") u.unref();
  return t;
}
function sleep(ms, signal, background = false) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(t);
      reject(signal.reason);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    if (background) unref(t);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

// src/internal/faults.ts
var Broken = {
  /** Installs an empty snapshot: the marker's page and the LIST pages are read but dropped. */
  IgnoreSnapshot: 1 << 0,
  /** Installs the snapshot without applying the changes buffered while paging it. */
  DropBuffered: 1 << 1,
  /** Applies no change once the view is ready. */
  IgnoreLive: 1 << 2,
  /** Keeps the view ready when its stream ends and starts no bootstrap. */
  StayReady: 1 << 3,
  /** Merges a new bootstrap into the old view instead of replacing it. */
  MergeViews: 1 << 4,
  /** Drops changes of kind expired. */
  IgnoreExpired: 1 << 5,
  /** Drops changes of kind session_closed. */
  IgnoreSessionClosed: 1 << 6,
  /** Never starts a periodic reconciliation. */
  NoReconcile: 1 << 7,
  /** Pages the snapshot with requests that close does not cancel. */
  UncancellablePages: 1 << 8,
  /** Retries errors no retry fixes (forbidden, …) instead of stopping. */
  RetryFatal: 1 << 9,
  /** The runner builds its clients with withoutFollow: wrong_broker is an error, not a redirect. */
  NoFollow: 1 << 10,
  /** The runner's clients follow wrong_broker but keep an owner that stopped answering. */
  StickyOwner: 1 << 11,
  /** The runner's clients never report a lease's loss (`lost` never aborts). */
  NeverLost: 1 << 12,
  /**
   * The runner's clients set a grant's local deadline to send + TTL, the old
   * rule, which a wait in the queue makes early: the lease is lost right
   * after it was granted.
   */
  SendPlusTtl: 1 << 13,
  /**
   * The runner's clients lose a session at its keepalive only: another epoch
   * from its broker, family_unavailable or session_not_found to another
   * request end nothing at once (no prompt loss).
   */
  LateLoss: 1 << 14,
  /** The runner's clients use only the first of their base URLs: a dead first broker is never left. */
  SingleBroker: 1 << 15,
  /**
   * The runner's clients keep sending to a broker that answers
   * family_unavailable instead of moving on (its sessions are still lost
   * promptly).
   */
  StayOnUnavailable: 1 << 16,
  /**
   * The runner's clients judge prompt loss against the broker that created a
   * session, never against the one that last answered it (a planned move):
   * the creator answering under a new epoch ends the session.
   */
  CreatorLoss: 1 << 17
};
var modes = /* @__PURE__ */ new WeakMap();
function brokenModes(client) {
  return modes.get(client) ?? 0;
}
function isBroken(client, mode) {
  return (brokenModes(client) & mode) !== 0;
}

// src/views.ts
async function* viewsOf(o) {
  let latest = o.view();
  let wake = null;
  const off = o.onChange((v) => {
    latest = v;
    const w = wake;
    wake = null;
    w?.();
  });
  try {
    for (; ; ) {
      if (latest !== null) {
        const v = latest;
        latest = null;
        yield v;
        continue;
      }
      if (o.stopped) break;
      await new Promise((resolve) => wake = resolve);
    }
  } finally {
    off();
  }
  const err = o.error;
  if (err !== null && !(err instanceof ClosedError)) throw err;
}

// src/sse.ts
var EventTooLargeError = class extends Error {
  name = "EventTooLargeError";
  constructor() {
    super("muster: event-stream event too large");
  }
};
var maxEventSize = 8 << 20;
var SSEParser = class {
  /** The last valid `retry` value in ms, null when none was sent. */
  retry = null;
  #max;
  #line = "";
  #started = false;
  #skipLF = false;
  #data = "";
  #hasData = false;
  #name = "";
  #lastId = "";
  #failed = false;
  constructor(max = maxEventSize) {
    this.#max = max;
  }
  /**
   * Feeds the next chunk of text and returns the events it completed. After
   * an EventTooLargeError every call throws again.
   */
  feed(chunk) {
    if (this.#failed) throw new EventTooLargeError();
    const out = [];
    let i = 0;
    if (chunk.length > 0 && this.#skipLF) {
      this.#skipLF = false;
      if (chunk.charCodeAt(0) === 10) i = 1;
    }
    while (i < chunk.length) {
      let j = i;
      while (j < chunk.length) {
        const c = chunk.charCodeAt(j);
        if (c === 10 || c === 13) break;
        j++;
      }
      if (this.#line.length + (j - i) > this.#max) return this.#fail();
      this.#line += chunk.slice(i, j);
      if (j === chunk.length) break;
      if (chunk.charCodeAt(j) === 13) {
        if (j + 1 === chunk.length) this.#skipLF = true;
        else if (chunk.charCodeAt(j + 1) === 10) j++;
      }
      i = j + 1;
      const line = this.#takeLine();
      if (line === "") {
        const ev = this.#dispatch();
        if (ev !== null) out.push(ev);
      } else if (!this.#field(line)) {
        return this.#fail();
      }
    }
    return out;
  }
  #fail() {
    this.#failed = true;
    throw new EventTooLargeError();
  }
  #takeLine() {
    let line = this.#line;
    this.#line = "";
    if (!this.#started) {
      this.#started = true;
      if (line.charCodeAt(0) === 65279) line = line.slice(1);
    }
    return line;
  }
  /** Applies one field line; false when the event grew past the limit. */
  #field(line) {
    if (line.charCodeAt(0) === 58) return true;
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    switch (name) {
      case "data":
        if (this.#data.length + value.length + 1 > this.#max) return false;
        this.#data += value + "\n";
        this.#hasData = true;
        break;
      case "event":
        this.#name = value;
        break;
      case "id":
        if (!value.includes("\0")) this.#lastId = value;
        break;
      case "retry":
        if (/^[0-9]+$/.test(value)) this.retry = Number(value);
        break;
    }
    return true;
  }
  #dispatch() {
    const ev = this.#hasData ? { name: this.#name === "" ? "message" : this.#name, id: this.#lastId, data: this.#data.slice(0, -1) } : null;
    this.#data = "";
    this.#hasData = false;
    this.#name = "";
    return ev;
  }
};

// src/watch.ts
var endReasons = /* @__PURE__ */ new Set(["overflow", "superseded", "unsubscribed", "session_closed", "shutdown", "moved"]);
function streamEnd(ev) {
  if (!endReasons.has(ev.name)) return null;
  let revision = 0;
  try {
    const e = JSON.parse(ev.data);
    if (typeof e.revision === "number") revision = e.revision;
  } catch {
  }
  return new StreamEndError(ev.name, revision);
}
var Subscription = class {
  /** The stream's first event. */
  marker;
  #c;
  #session;
  #ac;
  #unlink;
  #reader;
  #decoder;
  #parser;
  #bySub = /* @__PURE__ */ new Map();
  #queue;
  #err = null;
  #reading = null;
  /** @internal use MusterClient.watch or Session.watch. */
  constructor(c, session, ac, unlink, stream, marker) {
    this.#c = c;
    this.#session = session;
    this.#ac = ac;
    this.#unlink = unlink;
    this.#reader = stream.reader;
    this.#decoder = stream.decoder;
    this.#parser = stream.parser;
    this.#queue = stream.queue;
    this.marker = marker;
    c.opened(this);
  }
  /** null while the stream is open, then why it ended. */
  get err() {
    return this.#err;
  }
  /**
   * The next change, or null once the stream has ended (then `err` is set).
   * Never rejects. Not to be called again before the previous call settled.
   */
  async next() {
    for (; ; ) {
      const ev = await this.#nextEvent();
      if (ev === null) return null;
      if (ev.name !== "change") {
        const end = streamEnd(ev);
        if (end !== null) {
          this.#end(end);
          return null;
        }
        continue;
      }
      let ch;
      try {
        const c = JSON.parse(ev.data);
        if (typeof c.route !== "string" || typeof c.kind !== "string" || typeof c.revision !== "number") {
          throw new Error("route, kind or revision missing");
        }
        ch = {
          selector: this.#bySub.get(c.subscription_id) ?? "",
          route: c.route,
          kind: c.kind,
          revision: c.revision,
          item: c.item ? itemFrom(c.item) : null
        };
      } catch (e) {
        this.#end(new StreamEndedError(`muster: watch stream ended: undecodable change: ${String(e)}`, e));
        return null;
      }
      return ch;
    }
  }
  async *[Symbol.asyncIterator]() {
    try {
      for (; ; ) {
        const c = await this.next();
        if (c === null) return;
        yield c;
      }
    } finally {
      if (this.#err === null) await this.close();
    }
  }
  /**
   * Ends the stream and waits until its reader stopped. The registrations of
   * a session-less stream end with it; those of a session stream are removed
   * by the broker when it notices the stream is gone.
   */
  async close() {
    this.#end(new ClosedError());
    if (this.#reading !== null) await this.#reading.catch(() => void 0);
  }
  /** close(): `await using sub = await client.watch(...)` ends the stream at the end of the scope. */
  [asyncDispose]() {
    return this.close();
  }
  /**
   * Removes the registration of selector (the original string given to
   * watch) from the session; the broker ends the stream with unsubscribed
   * when it was the last one. Only a session stream has registrations to
   * remove; a session-less stream answers invalid_request: close it instead.
   */
  async unsubscribe(selector, options = {}) {
    if (this.#session === null) {
      throw new MusterError("invalid_request", "a session-less stream has no registration to remove: Close it");
    }
    await this.#c.call(
      this.#c.raw.DELETE("/v1/sessions/{session_id}/subscriptions", {
        params: { path: { session_id: this.#session.id }, query: { selector } },
        ...signalOf(options.signal)
      }),
      204
    );
  }
  /** @internal records the subscription ids of the marker. */
  bind(id, selector) {
    this.#bySub.set(id, selector);
  }
  /** @internal the next event of any kind, null at the end. */
  async #nextEvent() {
    for (; ; ) {
      if (this.#err !== null) return null;
      const ev = this.#queue.shift();
      if (ev !== void 0) return ev;
      let chunk;
      try {
        const p = this.#reader.read();
        this.#reading = p;
        chunk = await p;
      } catch (e) {
        this.#end(this.#ac.signal.aborted ? new ClosedError() : new StreamEndedError(`muster: watch stream ended: ${String(e)}`, e));
        return null;
      } finally {
        this.#reading = null;
      }
      if (chunk.done) {
        this.#end(new StreamEndedError("muster: watch stream ended: the connection closed"));
        return null;
      }
      try {
        this.#queue = this.#parser.feed(this.#decoder.decode(chunk.value, { stream: true }));
      } catch (e) {
        this.#end(new StreamEndedError(`muster: watch stream ended: ${String(e)}`, e));
        return null;
      }
    }
  }
  #end(err) {
    if (this.#err === null) this.#err = err;
    this.#queue = [];
    this.#unlink();
    this.#ac.abort();
    this.#c.ended(this);
  }
};
async function readEvent(s) {
  for (; ; ) {
    const ev = s.queue.shift();
    if (ev !== void 0) return ev;
    const chunk = await s.reader.read();
    if (chunk.done) return null;
    s.queue = s.parser.feed(s.decoder.decode(chunk.value, { stream: true }));
  }
}
async function openWatch(c, session, selectors, o) {
  if (selectors.length === 0) {
    throw new MusterError("invalid_selector", "Watch needs at least one selector");
  }
  o.signal?.throwIfAborted();
  const ac = new AbortController();
  const onAbort = () => ac.abort();
  o.signal?.addEventListener("abort", onAbort, { once: true });
  const unlink = () => o.signal?.removeEventListener("abort", onAbort);
  try {
    const q = new URLSearchParams();
    for (const s of selectors) q.append("selector", s);
    const headers = new Headers({ Accept: "text/event-stream" });
    c.authorize(headers);
    if (session !== null) headers.set("Muster-Session", session.id);
    const resp = await c.fetch(`${c.baseUrl}/v1/leases/watch?${q.toString()}`, { headers, signal: ac.signal });
    const mt = (resp.headers.get("Content-Type") ?? "").split(";")[0].trim();
    if (resp.status !== 200 || mt !== "text/event-stream" || resp.body === null) {
      const body = await resp.text();
      if (resp.status === 200) throw new Error(`muster: watch answered ${JSON.stringify(mt)}, not an event stream`);
      throw problemError(resp.status, resp.statusText, resp.headers.get("Content-Type"), body);
    }
    const stream = { reader: resp.body.getReader(), decoder: new TextDecoder(), parser: new SSEParser(), queue: [] };
    let ev;
    try {
      ev = await readEvent(stream);
    } catch (e) {
      if (ac.signal.aborted) throw e;
      throw new StreamEndedError(`muster: watch stream ended before its marker: ${String(e)}`, e);
    }
    if (ev === null) throw new StreamEndedError("muster: watch stream ended before its marker");
    if (ev.name !== "snapshot") {
      throw streamEnd(ev) ?? new Error(`muster: the first event of a watch stream is ${JSON.stringify(ev.name)}, not snapshot`);
    }
    let m;
    try {
      m = JSON.parse(ev.data);
    } catch (e) {
      throw new Error(`muster: decoding the snapshot marker: ${String(e)}`, { cause: e });
    }
    const marker = {
      epoch: m.epoch,
      revision: m.revision,
      selectors: m.subscriptions.map((s) => ({ selector: s.selector, items: s.items.map(itemFrom), nextCursor: s.next_cursor ?? "" }))
    };
    const sub = new Subscription(c, session, ac, unlink, stream, marker);
    for (const s of m.subscriptions) sub.bind(s.id, s.selector);
    return sub;
  } catch (e) {
    unlink();
    ac.abort();
    throw e;
  }
}

// src/observe.ts
var recoverMinMs = 50;
var recoverMaxMs = 2e3;
var maxBuffered = 1e5;
var fatalCodes = ["invalid_selector", "invalid_request", "unauthenticated", "forbidden", "not_found", "method_not_allowed", "not_implemented"];
var Observer = class {
  /** The observed selector. */
  selector;
  /** The (unjittered) periodic reconciliation interval in ms. */
  reconcileEveryMs;
  #c;
  #jitter;
  #pageSize;
  #broken;
  #ac = new AbortController();
  #unlink;
  #bo = new Backoff(recoverMinMs, recoverMaxMs);
  #listeners = /* @__PURE__ */ new Set();
  #waiters = [];
  #items = /* @__PURE__ */ new Map();
  #ready = false;
  #epoch = "";
  #revision = 0;
  #err = null;
  #stopErr = null;
  #stopped = false;
  #stats = { attempts: 0, bootstraps: 0, recoveries: 0, reconciliations: 0 };
  #cur = null;
  #pending = null;
  #retry;
  #reconcile;
  #readyAt = 0;
  // when the view last became ready, on the monotonic clock (performance.now)
  #done;
  #resolveDone;
  /** @internal use MusterClient.observe. */
  constructor(c, selector, o) {
    const errs = [];
    const shortest = o.shortestTtlMs ?? 0;
    if (!(shortest >= 0)) errs.push("the shortest TTL must not be negative");
    if (o.reconcileIntervalMs !== void 0 && !(o.reconcileIntervalMs >= 10)) {
      errs.push("the reconciliation interval must be at least 10ms");
    }
    const jitter = o.reconcileJitter ?? defaultReconcileJitter;
    if (!(jitter >= 0 && jitter < 1)) errs.push("the reconciliation jitter must be in [0, 1)");
    const pageSize = o.pageSize ?? 500;
    if (!(Number.isInteger(pageSize) && pageSize >= 1 && pageSize <= 500)) errs.push("the page size must be in 1..500");
    if (errs.length > 0) throw new MusterError("invalid_request", `Observe: ${errs.join("; ")}`);
    this.#c = c;
    this.selector = selector;
    this.reconcileEveryMs = o.reconcileIntervalMs ?? reconcileInterval(shortest);
    this.#jitter = jitter;
    this.#pageSize = pageSize;
    this.#broken = brokenModes(c);
    this.#done = new Promise((resolve) => this.#resolveDone = resolve);
    const outer = o.signal;
    const onAbort = () => void this.#shutdown(outer?.reason instanceof Error ? outer.reason : new ClosedError());
    outer?.addEventListener("abort", onAbort, { once: true });
    this.#unlink = () => outer?.removeEventListener("abort", onAbort);
    if (outer?.aborted) {
      onAbort();
      return;
    }
    c.opened(this);
    this.#start();
  }
  /** Whether the view is bootstrapped and followed live. */
  get isReady() {
    return this.#ready;
  }
  /**
   * Resolves when the view is ready (at once if it is now); rejects with
   * `error` if the observer stops first. A fresh promise on every read.
   */
  get ready() {
    if (this.#ready) return Promise.resolve();
    if (this.#stopped) return Promise.reject(this.#err ?? new ClosedError());
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }
  /**
   * null while the view is ready. Otherwise why it is not ready: the end of
   * the stream, or the last failed bootstrap; once the observer stopped, why
   * it stopped (a ClosedError after close()).
   */
  get error() {
    return this.#err;
  }
  /** Whether the observer has stopped for good. */
  get stopped() {
    return this.#stopped;
  }
  /** Counts of bootstraps, recoveries and reconciliations. */
  get stats() {
    return { ...this.#stats };
  }
  /** A copy of the current view. */
  view() {
    const items = [...this.#items.values()].sort((a, b) => a.route < b.route ? -1 : a.route > b.route ? 1 : 0);
    return { ready: this.#ready, epoch: this.#epoch, revision: this.#revision, items };
  }
  /**
   * Calls listener (synchronously, with the new view) at every change of the
   * view, of its readiness or of `error`. Returns the unsubscribe function.
   */
  onChange(listener) {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
  /**
   * Stops the observer: its stream is closed and any request in flight is
   * aborted, so it resolves promptly even while the broker hangs; no timer
   * or socket outlives it. `error` is a ClosedError afterwards.
   */
  close() {
    return this.#shutdown(new ClosedError());
  }
  /** close(): `await using o = client.observe(...)` stops the observer at the end of the scope. */
  [asyncDispose]() {
    return this.close();
  }
  /**
   * `for await (const view of observer)`: the current view at once, then the
   * newest view after each change, coalesced (a slow loop body skips
   * intermediate views, nothing queues up). The loop ends when the observer
   * stops: quietly after close(), otherwise it throws `error` (forbidden, …).
   * Breaking out of the loop does not close the observer.
   */
  [Symbol.asyncIterator]() {
    return viewsOf(this);
  }
  async #shutdown(cause) {
    this.#stopErr ??= cause;
    if (!this.#ac.signal.aborted) {
      this.#ac.abort(this.#stopErr);
      this.#unlink();
      clearTimeout(this.#retry);
      clearTimeout(this.#reconcile);
      const cur = this.#cur;
      this.#cur = null;
      const pending = this.#pending;
      void (async () => {
        await cur?.close();
        await pending;
        this.#stop();
        this.#resolveDone();
      })();
    }
    return this.#done;
  }
  #stop() {
    this.#c.ended(this);
    this.#err = this.#stopErr;
    this.#ready = false;
    this.#stopped = true;
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w.reject(this.#err);
    this.#notify();
  }
  #notify() {
    if (this.#ready) {
      const waiters = this.#waiters;
      this.#waiters = [];
      for (const w of waiters) w.resolve();
    }
    if (this.#listeners.size === 0) return;
    const v = this.view();
    for (const l of [...this.#listeners]) {
      try {
        l(v);
      } catch {
      }
    }
  }
  /** Starts a bootstrap unless one runs. */
  #start() {
    if (this.#pending !== null || this.#ac.signal.aborted) return;
    this.#stats.attempts++;
    const p = this.#bootstrap(this.#ac.signal).then(
      (b) => this.#booted(p, b, null),
      (e) => this.#booted(p, null, e instanceof Error ? e : new Error(String(e)))
    );
    this.#pending = p;
  }
  #booted(p, b, err) {
    if (this.#pending === p) this.#pending = null;
    if (this.#ac.signal.aborted) {
      void b?.sub.close();
      return;
    }
    if (b === null) {
      if (fatalCodes.some((c) => isCode(err, c)) && !(this.#broken & Broken.RetryFatal)) {
        void this.#shutdown(err);
        return;
      }
      if (this.#cur === null) this.#notReady(err);
      this.#schedule(this.#bo.next());
      return;
    }
    const old = this.#cur;
    this.#cur = b.sub;
    void old?.close();
    if (this.#broken & Broken.MergeViews) {
      for (const [k, v] of b.items) this.#items.set(k, v);
    } else {
      this.#items = b.items;
    }
    this.#epoch = b.epoch;
    this.#revision = b.revision;
    this.#ready = true;
    this.#err = null;
    this.#stats.bootstraps++;
    this.#notify();
    this.#readyAt = performance.now();
    clearTimeout(this.#reconcile);
    if (!(this.#broken & Broken.NoReconcile)) {
      this.#reconcile = setTimeout(() => {
        if (this.#pending === null) {
          this.#stats.reconciliations++;
          this.#start();
        }
      }, jittered(this.reconcileEveryMs, this.#jitter));
    }
    void this.#follow(b.sub, b.next);
  }
  /** Applies the changes of sub while it is the current stream; recovers when it ends. */
  async #follow(sub, first) {
    let next = first;
    for (; ; ) {
      const ch = await next;
      if (sub !== this.#cur) return;
      if (ch === null) break;
      if (ch.revision > this.#revision && !(this.#broken & Broken.IgnoreLive)) {
        this.#applyTo(this.#items, ch);
        this.#revision = ch.revision;
        this.#notify();
      }
      next = sub.next();
    }
    this.#cur = null;
    if (this.#broken & Broken.StayReady) return;
    clearTimeout(this.#reconcile);
    this.#notReady(sub.err ?? new Error("muster: watch stream ended"));
    if (this.#pending === null) {
      if (performance.now() - this.#readyAt >= recoverMaxMs) {
        this.#bo.reset();
        this.#schedule(0);
      } else {
        this.#schedule(this.#bo.next());
      }
    }
  }
  #schedule(ms) {
    clearTimeout(this.#retry);
    this.#retry = setTimeout(() => this.#start(), ms);
  }
  #notReady(err) {
    if (this.#ready) this.#stats.recoveries++;
    this.#ready = false;
    this.#err = err;
    this.#notify();
  }
  /**
   * Opens a stream, pages the rest of its marker's snapshot while buffering
   * the stream's changes, and builds the view. On success the stream stays
   * open for the caller, with its next read in flight.
   */
  async #bootstrap(signal) {
    const sub = await openWatch(this.#c, null, [this.selector], { signal });
    try {
      const m = sub.marker;
      if (m.selectors.length !== 1) {
        throw new Error(`muster: the marker has ${m.selectors.length} subscriptions, want 1`);
      }
      const items = /* @__PURE__ */ new Map();
      for (const it of m.selectors[0].items) items.set(it.route, it);
      const pager = new AbortController();
      const onAbort = () => pager.abort();
      signal.addEventListener("abort", onAbort, { once: true });
      const pages = this.#pageRest(pager.signal, m, items).then(
        () => ({ kind: "pages", err: null }),
        (e) => ({ kind: "pages", err: e })
      );
      const buf = [];
      let next = sub.next();
      try {
        for (; ; ) {
          const r = await Promise.race([next.then((ch) => ({ kind: "change", ch })), pages]);
          if (r.kind === "change") {
            if (r.ch === null) throw sub.err ?? new Error("muster: watch stream ended");
            buf.push(r.ch);
            if (buf.length > maxBuffered) throw new Error(`muster: more than ${maxBuffered} changes while paging a snapshot`);
            next = sub.next();
            continue;
          }
          if (r.err !== null) throw r.err;
          if (this.#broken & Broken.IgnoreSnapshot) items.clear();
          if (this.#broken & Broken.DropBuffered) buf.length = 0;
          let rev = m.revision;
          for (const ch of buf) {
            if (ch.revision > m.revision) {
              this.#applyTo(items, ch);
              rev = Math.max(rev, ch.revision);
            }
          }
          return { sub, next, items, epoch: m.epoch, revision: rev };
        }
      } finally {
        pager.abort();
        signal.removeEventListener("abort", onAbort);
        await pages;
      }
    } catch (e) {
      await sub.close();
      throw e;
    }
  }
  /** Reads the rest of the marker's snapshot into items. */
  async #pageRest(signal, m, items) {
    let cursor = m.selectors[0].nextCursor;
    const pageSignal = this.#broken & Broken.UncancellablePages ? void 0 : signal;
    while (cursor !== "") {
      const p = await listPage(this.#c, this.selector, { limit: this.#pageSize, cursor, signal: pageSignal });
      if (p.epoch !== m.epoch) throw new MusterError("epoch_changed", "the broker restarted during the bootstrap");
      for (const it of p.items) items.set(it.route, it);
      cursor = p.nextCursor;
    }
  }
  /** Applies one change to items. */
  #applyTo(items, ch) {
    if (ch.kind === "expired" && this.#broken & Broken.IgnoreExpired || ch.kind === "session_closed" && this.#broken & Broken.IgnoreSessionClosed) {
      return;
    }
    applyChange(items, ch);
  }
};
function applyChange(items, ch) {
  if (ch.kind === "acquired" && ch.item !== null) items.set(ch.route, ch.item);
  else items.delete(ch.route);
}

// src/lease.ts
var Lease = class {
  /** The exact route. */
  route;
  /**
   * The broker revision at which the lease was granted: strictly increasing
   * per route, stable across renewals. Pass it to the resource the lease
   * guards, which must refuse a token lower than the highest it has seen. It
   * means nothing across routes or broker lifetimes.
   */
  fencingToken;
  #s;
  #r;
  #lost = new AbortController();
  #acquiredAt;
  #expiresAt;
  #renewals;
  #timer;
  /** @internal use Session.acquire. */
  constructor(s, r, out) {
    this.#s = s;
    this.#r = r;
    this.route = `lease://${r.realm}/${r.area}/${r.resource}`;
    this.fencingToken = out.fencing_token;
    this.#acquiredAt = new Date(out.acquired_at);
    this.#expiresAt = new Date(out.expires_at);
    this.#renewals = out.renewals;
  }
  /** Aborted when the lease is no longer held (or released); its reason is `err`. */
  get lost() {
    return this.#lost.signal;
  }
  /** null while the lease is held, then why it is not. */
  get err() {
    return this.#lost.signal.aborted ? this.#lost.signal.reason : null;
  }
  get acquiredAt() {
    return this.#acquiredAt;
  }
  /** The broker's expiry as of the last grant or extension. */
  get expiresAt() {
    return this.#expiresAt;
  }
  /** The successful extensions, as the broker reports them. */
  get renewals() {
    return this.#renewals;
  }
  /**
   * Extends the lease to now + ttlMs. When the broker answers that the lease
   * is no longer this session's (not_owner, fenced, lease_expired,
   * session_not_found: then the whole session is lost) the lease is lost and
   * extend rejects with `err`. Any
   * other failure (a transport error, unavailable) leaves the lease as it
   * was: retry before the deadline.
   */
  async extend(ttlMs, options = {}) {
    if (this.err !== null) throw this.err;
    const t0 = performance.now();
    const c = this.#s.client;
    let out;
    try {
      out = await c.call(
        c.raw.POST("/v1/leases/{realm}/{area}/{resource}/extend", {
          params: { path: this.#r },
          body: { session_id: this.#s.id, fencing_token: this.fencingToken, ttl_ms: ttlMs },
          ...signalOf(options.signal),
          ...c.sessionFetch(this.#s)
        }),
        200
      );
    } catch (e) {
      c.losses.notFound(this.#s, e);
      if (ownershipGone(e)) {
        this.end(new LeaseLostError(e));
        throw this.err;
      }
      throw e;
    }
    this.extended(out, t0, ttlMs);
  }
  /**
   * @internal records a successful extension sent at t0 (performance.now)
   * for ttlMs; throws err when the lease was lost meanwhile.
   */
  extended(out, t0, ttlMs) {
    if (this.err !== null) throw this.err;
    this.#expiresAt = new Date(out.expires_at);
    this.#renewals = out.renewals;
    this.arm(t0 + ttlMs);
  }
  /** @internal the session holding this lease. */
  get session() {
    return this.#s;
  }
  /**
   * Releases the lease; the next FIFO waiter (if any) is granted. It resolves
   * once the lease is known not to be held by this session any more,
   * including when it was already lost; it rejects only when that is unknown
   * (a transport failure): the lease then ends at its TTL at the latest.
   */
  async release(options = {}) {
    if (this.err instanceof ReleasedError) return;
    const serr = this.#s.err;
    if (serr !== null) {
      this.end(new LeaseLostError(serr));
      return;
    }
    const c = this.#s.client;
    try {
      await c.call(
        c.raw.POST("/v1/leases/{realm}/{area}/{resource}/release", {
          params: { path: this.#r },
          body: { session_id: this.#s.id, fencing_token: this.fencingToken },
          ...signalOf(options.signal),
          ...c.sessionFetch(this.#s)
        }),
        204
      );
      this.end(new ReleasedError());
    } catch (e) {
      c.losses.notFound(this.#s, e);
      if (!ownershipGone(e)) throw e;
      this.end(new LeaseLostError(e));
    }
  }
  /**
   * release(): `await using lease = await session.acquire(...)` releases the
   * lease at the end of the scope (at once when it was lost already).
   */
  [asyncDispose]() {
    return this.release();
  }
  /** @internal (re)arms the local deadline, a time on the monotonic clock (performance.now). */
  arm(deadline) {
    clearTimeout(this.#timer);
    this.#timer = unref(
      setTimeout(() => {
        this.end(new LeaseLostError(new MusterError("lease_expired", "the local deadline passed without a successful extension")));
      }, Math.max(0, deadline - performance.now()))
    );
  }
  /** @internal records why the lease is not held, once. */
  end(cause) {
    if (this.#lost.signal.aborted || isBroken(this.#s.client, Broken.NeverLost) && !(cause instanceof ReleasedError)) return;
    clearTimeout(this.#timer);
    this.#timer = void 0;
    this.#lost.abort(cause);
    this.#s.untrack(this);
  }
};
function ownershipGone(e) {
  return isCode(e, "not_owner") || isCode(e, "fenced") || isCode(e, "lease_expired") || isCode(e, "session_not_found");
}
async function acquire(s, route, ttlMs, o) {
  const r = parseRoute(route);
  if (s.err !== null) throw s.err;
  const body = { session_id: s.id, ttl_ms: ttlMs, wait_ms: 0 };
  if (o.waitMs !== void 0 && o.waitMs > 0) body.wait_ms = o.waitMs;
  const t0 = performance.now();
  const c = s.client;
  let out;
  try {
    out = await c.call(c.raw.POST("/v1/leases/{realm}/{area}/{resource}/acquire", { params: { path: r }, body, ...signalOf(o.signal), ...c.sessionFetch(s) }), 200);
  } catch (e) {
    c.losses.notFound(s, e);
    throw e;
  }
  return adopt(s, r, out, t0, ttlMs);
}
function adopt(s, r, out, t0, ttlMs) {
  const key = `lease://${r.realm}/${r.area}/${r.resource}`;
  if (out.outcome === "already_held") {
    const l2 = s.handle(key);
    if (l2 !== void 0 && l2.fencingToken === out.fencing_token) return l2;
  }
  const l = new Lease(s, r, out);
  l.arm(isBroken(s.client, Broken.SendPlusTtl) ? t0 + ttlMs : localDeadline(out, t0, ttlMs));
  if (!s.track(l)) l.end(new LeaseLostError(s.err));
  return l;
}
function localDeadline(out, t0, ttlMs) {
  if (typeof out.expires_after_request_ms === "number") return t0 + out.expires_after_request_ms;
  let deadline = t0 + ttlMs;
  if (out.outcome === "already_held") {
    const rem = new Date(out.expires_at).getTime() - Date.now();
    if (rem < ttlMs) deadline = performance.now() + rem;
  }
  return deadline;
}
async function withLease(s, route, ttlMs, fn, o) {
  const l = await acquire(s, route, ttlMs, o);
  const work = new AbortController();
  const onCaller = () => work.abort(o.signal?.reason);
  const onLost = () => work.abort(l.err);
  o.signal?.addEventListener("abort", onCaller, { once: true });
  l.lost.addEventListener("abort", onLost, { once: true });
  if (l.err !== null) onLost();
  const interval = ttlMs / 3;
  const renew = setInterval(() => {
    if (work.signal.aborted) return;
    const t = AbortSignal.timeout(interval);
    l.extend(ttlMs, { signal: t }).catch(() => void 0);
  }, interval);
  let result;
  let failed = false;
  let ferr;
  try {
    result = await fn(l, work.signal);
  } catch (e) {
    failed = true;
    ferr = e;
  }
  const lost = l.err;
  clearInterval(renew);
  o.signal?.removeEventListener("abort", onCaller);
  l.lost.removeEventListener("abort", onLost);
  await l.release({ signal: AbortSignal.timeout(5e3) }).catch(() => void 0);
  if (failed) throw ferr;
  if (lost !== null) throw lost;
  return result;
}

// src/batch.ts
var maxBatchOps = 256;
var Batch = class {
  #s;
  #ops = [];
  #err = null;
  /** @internal use Session.batch. */
  constructor(s) {
    this.#s = s;
  }
  /** The number of operations added so far. */
  get length() {
    return this.#ops.length;
  }
  /**
   * Adds an acquisition of the exact route for ttlMs (100 ms .. 10 min). It
   * never waits: when another session holds the route, its result is lease_held.
   */
  acquire(route, ttlMs) {
    let r = { realm: "", area: "", resource: "" };
    try {
      r = parseRoute(route);
    } catch (e) {
      this.#refuse(e);
    }
    return this.#add({ op: "acquire", route: r, key: route, ttlMs, lease: null });
  }
  /** Adds an extension of lease to now + ttlMs, as Lease.extend. */
  extend(lease, ttlMs) {
    if (this.#own(lease)) this.#add({ op: "extend", route: parseRoute(lease.route), key: lease.route, ttlMs, lease });
    return this;
  }
  /** Adds a release of lease, as Lease.release. */
  release(lease) {
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
  async do(options = {}) {
    if (this.#err !== null) throw this.#err;
    if (this.#ops.length === 0) throw new MusterError("invalid_request", "a batch has at least one operation");
    const s = this.#s;
    if (s.err !== null) throw s.err;
    const out = [];
    const ops = [];
    const sent = [];
    for (const [i, e] of this.#ops.entries()) {
      const local = settledLocally(e);
      out.push({ op: e.op, route: e.key, lease: e.lease, err: local.done ? local.err : null });
      if (local.done) continue;
      const op = { op: e.op, route: e.key };
      if (e.op !== "release") op.ttl_ms = e.ttlMs;
      if (e.lease !== null) op.fencing_token = e.lease.fencingToken;
      ops.push(op);
      sent.push(i);
    }
    if (sent.length === 0) return out;
    const t0 = performance.now();
    const c = s.client;
    let resp;
    try {
      resp = await c.call(c.raw.POST("/v1/leases/batch", { body: { session_id: s.id, ops }, ...signalOf(options.signal), ...c.sessionFetch(s) }), 200);
    } catch (e) {
      c.losses.notFound(s, e);
      if (isCode(e, "session_not_found")) {
        for (const i of sent) this.#ops[i].lease?.end(new LeaseLostError(e));
      }
      throw e;
    }
    if (resp.results.length !== sent.length) {
      throw new MusterError("internal", `the broker answered ${resp.results.length} results for ${sent.length} operations`);
    }
    for (const [k, i] of sent.entries()) out[i] = settle(s, this.#ops[i], resp.results[k], t0, out[i]);
    return out;
  }
  #add(e) {
    if (this.#ops.length === maxBatchOps) this.#refuse(new MusterError("invalid_request", `a batch has at most ${maxBatchOps} operations`));
    this.#ops.push(e);
    return this;
  }
  /** Checks that lease is a lease of the batch's session. */
  #own(lease) {
    if (!(lease instanceof Lease) || lease.session !== this.#s) {
      this.#refuse(new MusterError("invalid_request", "a batch takes only leases of its own session"));
      return false;
    }
    return true;
  }
  #refuse(err) {
    if (this.#err === null) this.#err = err;
  }
};
function settledLocally(e) {
  const l = e.lease;
  if (l === null) return { done: false, err: null };
  if (e.op === "extend" && l.err !== null) return { done: true, err: l.err };
  if (e.op === "release" && l.err !== null) return { done: true, err: null };
  const serr = l.session.err;
  if (e.op === "release" && serr !== null) {
    l.end(new LeaseLostError(serr));
    return { done: true, err: null };
  }
  return { done: false, err: null };
}
function settle(s, e, r, t0, out) {
  const err = r.ok ? null : resultError(r);
  switch (e.op) {
    case "acquire":
      if (err === null && r.lease !== void 0) return { ...out, lease: adopt(s, e.route, r.lease, t0, e.ttlMs) };
      return { ...out, err };
    case "extend": {
      const l = e.lease;
      if (err === null && r.lease !== void 0) {
        try {
          l.extended(r.lease, t0, e.ttlMs);
          return out;
        } catch (lost) {
          return { ...out, err: lost };
        }
      }
      if (ownershipGone(err)) {
        l.end(new LeaseLostError(err));
        return { ...out, err: l.err };
      }
      return { ...out, err };
    }
    case "release": {
      const l = e.lease;
      if (err === null) l.end(new ReleasedError());
      else if (ownershipGone(err)) l.end(new LeaseLostError(err));
      else return { ...out, err };
      return out;
    }
  }
}
function resultError(r) {
  return new MusterError(r.code ?? "internal", r.detail ?? "", r.status ?? 0, r.status === void 0 ? "" : statusText(r.status));
}
var texts = { 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 409: "Conflict", 429: "Too Many Requests", 500: "Internal Server Error" };
function statusText(status) {
  return texts[status] ?? "";
}

// src/session.ts
var Session = class _Session {
  /** The session id. A secret: whoever has it can release this session's leases. */
  id;
  /** The logical owner the session was created for. */
  ownerId;
  /** The public, opaque id of this session, as shown in inventory items of its leases. */
  holderIncarnation;
  ttlMs;
  #host;
  #epoch;
  #c;
  #ended = new AbortController();
  #stopLoop = new AbortController();
  #loop = Promise.resolve();
  #leases = /* @__PURE__ */ new Map();
  constructor(c, s, host) {
    this.#c = c;
    this.#host = host;
    this.id = s.session_id;
    this.ownerId = s.owner_id;
    this.holderIncarnation = s.holder_incarnation;
    this.#epoch = s.epoch;
    this.ttlMs = s.ttl_ms;
  }
  /** @internal use MusterClient.session. */
  static async create(c, ownerId, ttlMs, o) {
    const t0 = performance.now();
    const answer = c.raw.POST("/v1/sessions", { body: { owner_id: ownerId, ttl_ms: ttlMs }, ...signalOf(o.signal) });
    const out = await c.call(answer, 201);
    const s = new _Session(c, out, c.answeredBy((await answer).response));
    c.losses.track(s);
    c.opened(s);
    s.#loop = s.#keepalive(t0 + s.ttlMs);
    return s;
  }
  /**
   * The lifetime (Muster-Epoch) of the broker that holds the session: the one
   * that created it, or the one a planned move took its family to.
   */
  get epoch() {
    return this.#epoch;
  }
  /**
   * @internal the host (host:port) of the broker that holds the session: the
   * one that last answered one of its requests with success.
   */
  get host() {
    return this.#host;
  }
  /**
   * @internal records the broker that answered one of the session's own
   * requests with success, and its epoch: it holds the session now (a
   * planned move takes a family's sessions to another broker;
   * docs/client-operations.md, "Planned moves"), and prompt loss judges
   * later answers against it.
   */
  answeredBy(host, epoch) {
    if (isBroken(this.#c, Broken.CreatorLoss)) return;
    this.#host = host;
    this.#epoch = epoch;
  }
  /** @internal the client this session belongs to. */
  get client() {
    return this.#c;
  }
  /** Aborted when the session has ended; its reason is `err`. */
  get signal() {
    return this.#ended.signal;
  }
  /** null while the session lives, then why it ended. */
  get err() {
    return this.#ended.signal.aborted ? this.#ended.signal.reason : null;
  }
  /**
   * Acquires the exact route for ttlMs (100 ms .. 10 min). When this session
   * already holds it, it returns the same Lease (a second handle if the first
   * was dropped) without resetting its TTL.
   */
  acquire(route, ttlMs, options = {}) {
    return acquire(this, route, ttlMs, options);
  }
  /**
   * Starts an empty batch of this session's lease operations: up to
   * maxBatchOps acquisitions (never waiting), extensions and releases sent in
   * one request by Batch.do, one BatchResult per operation.
   */
  batch() {
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
  withLease(route, ttlMs, fn, options = {}) {
    return withLease(this, route, ttlMs, fn, options);
  }
  /**
   * Opens a watch stream whose registrations belong to this session: they end
   * with it, a duplicate open of the same selector supersedes the older
   * stream, and Subscription.unsubscribe can remove one of them.
   */
  watch(selectors, options = {}) {
    return openWatch(this.#c, this, typeof selectors === "string" ? [selectors] : selectors, options);
  }
  /**
   * Ends the session at the broker (its leases are released there, each with
   * a session_closed change) and locally (every Lease is lost with a
   * ClosedError). Closing a session that already ended only stops its
   * keepalive.
   */
  async close(options = {}) {
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
  [asyncDispose]() {
    return this.close();
  }
  /**
   * @internal records why the session ended, once, stops its keepalive,
   * forgets it for prompt loss and loses its leases.
   */
  end(cause) {
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
  async #keepalive(deadline) {
    const stop = this.#stopLoop.signal;
    const interval = this.ttlMs / 3;
    const bo = new Backoff(100, interval);
    let wait = interval;
    let lastErr = null;
    for (; ; ) {
      try {
        await sleep(wait, stop, true);
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
      const onStop = () => rac.abort();
      stop.addEventListener("abort", onStop, { once: true });
      const t = unref(setTimeout(() => rac.abort(), Math.max(0, deadline - t0)));
      try {
        await this.#c.call(
          this.#c.raw.POST("/v1/sessions/{session_id}/keepalive", { params: { path: { session_id: this.id } }, signal: rac.signal, ...this.#c.sessionFetch(this) }),
          200
        );
        deadline = t0 + this.ttlMs;
        lastErr = null;
        bo.reset();
        wait = interval;
      } catch (e) {
        if (stop.aborted) return;
        if (isCode(e, "session_not_found")) {
          this.end(new SessionLostError(String(e.message), e));
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
  track(l) {
    if (this.err !== null) return false;
    this.#leases.set(l.route, l);
    return true;
  }
  /** @internal */
  untrack(l) {
    if (this.#leases.get(l.route) === l) this.#leases.delete(l.route);
  }
  /** @internal the tracked handle of route. */
  handle(route) {
    return this.#leases.get(route);
  }
};

// node_modules/openapi-fetch/dist/index.mjs
var PATH_PARAM_RE = /\{[^{}]+\}/g;
var supportsRequestInitExt = () => {
  return typeof process === "object" && Number.parseInt(process?.versions?.node?.substring(0, 2)) >= 18 && process.versions.undici;
};
function randomID() {
  return Math.random().toString(36).slice(2, 11);
}
function createClient(clientOptions) {
  let {
    baseUrl = "",
    Request: CustomRequest = globalThis.Request,
    fetch: baseFetch = globalThis.fetch,
    querySerializer: globalQuerySerializer,
    bodySerializer: globalBodySerializer,
    pathSerializer: globalPathSerializer,
    headers: baseHeaders,
    requestInitExt = void 0,
    ...baseOptions
  } = { ...clientOptions };
  requestInitExt = supportsRequestInitExt() ? requestInitExt : void 0;
  baseUrl = removeTrailingSlash(baseUrl);
  const globalMiddlewares = [];
  async function coreFetch(schemaPath, fetchOptions) {
    const {
      baseUrl: localBaseUrl,
      fetch = baseFetch,
      Request: Request2 = CustomRequest,
      headers,
      params = {},
      parseAs = "json",
      querySerializer: requestQuerySerializer,
      bodySerializer = globalBodySerializer ?? defaultBodySerializer,
      pathSerializer: requestPathSerializer,
      body,
      middleware: requestMiddlewares = [],
      ...init
    } = fetchOptions || {};
    let finalBaseUrl = baseUrl;
    if (localBaseUrl) {
      finalBaseUrl = removeTrailingSlash(localBaseUrl) ?? baseUrl;
    }
    let querySerializer = typeof globalQuerySerializer === "function" ? globalQuerySerializer : createQuerySerializer(globalQuerySerializer);
    if (requestQuerySerializer) {
      querySerializer = typeof requestQuerySerializer === "function" ? requestQuerySerializer : createQuerySerializer({
        ...typeof globalQuerySerializer === "object" ? globalQuerySerializer : {},
        ...requestQuerySerializer
      });
    }
    const pathSerializer = requestPathSerializer || globalPathSerializer || defaultPathSerializer;
    const serializedBody = body === void 0 ? void 0 : bodySerializer(
      body,
      // Note: we declare mergeHeaders() both here and below because it’s a bit of a chicken-or-egg situation:
      // bodySerializer() needs all headers so we aren’t dropping ones set by the user, however,
      // the result of this ALSO sets the lowest-priority content-type header. So we re-merge below,
      // setting the content-type at the very beginning to be overwritten.
      // Lastly, based on the way headers work, it’s not a simple “present-or-not” check becauase null intentionally un-sets headers.
      mergeHeaders(baseHeaders, headers, params.header)
    );
    const finalHeaders = mergeHeaders(
      // with no body, we should not to set Content-Type
      serializedBody === void 0 || // if serialized body is FormData; browser will correctly set Content-Type & boundary expression
      serializedBody instanceof FormData ? {} : {
        "Content-Type": "application/json"
      },
      baseHeaders,
      headers,
      params.header
    );
    const finalMiddlewares = [...globalMiddlewares, ...requestMiddlewares];
    const requestInit = {
      redirect: "follow",
      ...baseOptions,
      ...init,
      body: serializedBody,
      headers: finalHeaders
    };
    let id;
    let options;
    let request = new Request2(
      createFinalURL(schemaPath, { baseUrl: finalBaseUrl, params, querySerializer, pathSerializer }),
      requestInit
    );
    let response;
    for (const key in init) {
      if (!(key in request)) {
        request[key] = init[key];
      }
    }
    if (finalMiddlewares.length) {
      id = randomID();
      options = Object.freeze({
        baseUrl: finalBaseUrl,
        fetch,
        parseAs,
        querySerializer,
        bodySerializer,
        pathSerializer
      });
      for (const m of finalMiddlewares) {
        if (m && typeof m === "object" && typeof m.onRequest === "function") {
          const result = await m.onRequest({
            request,
            schemaPath,
            params,
            options,
            id
          });
          if (result) {
            if (result instanceof Request2) {
              request = result;
            } else if (result instanceof Response) {
              response = result;
              break;
            } else {
              throw new Error("onRequest: must return new Request() or Response() when modifying the request");
            }
          }
        }
      }
    }
    if (!response) {
      try {
        response = await fetch(request, requestInitExt);
      } catch (error2) {
        let errorAfterMiddleware = error2;
        if (finalMiddlewares.length) {
          for (let i = finalMiddlewares.length - 1; i >= 0; i--) {
            const m = finalMiddlewares[i];
            if (m && typeof m === "object" && typeof m.onError === "function") {
              const result = await m.onError({
                request,
                error: errorAfterMiddleware,
                schemaPath,
                params,
                options,
                id
              });
              if (result) {
                if (result instanceof Response) {
                  errorAfterMiddleware = void 0;
                  response = result;
                  break;
                }
                if (result instanceof Error) {
                  errorAfterMiddleware = result;
                  continue;
                }
                throw new Error("onError: must return new Response() or instance of Error");
              }
            }
          }
        }
        if (errorAfterMiddleware) {
          throw errorAfterMiddleware;
        }
      }
      if (finalMiddlewares.length) {
        for (let i = finalMiddlewares.length - 1; i >= 0; i--) {
          const m = finalMiddlewares[i];
          if (m && typeof m === "object" && typeof m.onResponse === "function") {
            const result = await m.onResponse({
              request,
              response,
              schemaPath,
              params,
              options,
              id
            });
            if (result) {
              if (!(result instanceof Response)) {
                throw new Error("onResponse: must return new Response() when modifying the response");
              }
              response = result;
            }
          }
        }
      }
    }
    const contentLength = response.headers.get("Content-Length");
    if (response.status === 204 || request.method === "HEAD" || contentLength === "0" && !response.headers.get("Transfer-Encoding")?.includes("chunked")) {
      return response.ok ? { data: void 0, response } : { error: void 0, response };
    }
    if (response.ok) {
      const getResponseData = async () => {
        if (parseAs === "stream") {
          return response.body;
        }
        if (parseAs === "json" && !contentLength) {
          const raw = await response.text();
          return raw ? JSON.parse(raw) : void 0;
        }
        return await response[parseAs]();
      };
      return { data: await getResponseData(), response };
    }
    let error = await response.text();
    try {
      error = JSON.parse(error);
    } catch {
    }
    return { error, response };
  }
  return {
    request(method, url, init) {
      return coreFetch(url, { ...init, method: method.toUpperCase() });
    },
    /** Call a GET endpoint */
    GET(url, init) {
      return coreFetch(url, { ...init, method: "GET" });
    },
    /** Call a PUT endpoint */
    PUT(url, init) {
      return coreFetch(url, { ...init, method: "PUT" });
    },
    /** Call a POST endpoint */
    POST(url, init) {
      return coreFetch(url, { ...init, method: "POST" });
    },
    /** Call a DELETE endpoint */
    DELETE(url, init) {
      return coreFetch(url, { ...init, method: "DELETE" });
    },
    /** Call a OPTIONS endpoint */
    OPTIONS(url, init) {
      return coreFetch(url, { ...init, method: "OPTIONS" });
    },
    /** Call a HEAD endpoint */
    HEAD(url, init) {
      return coreFetch(url, { ...init, method: "HEAD" });
    },
    /** Call a PATCH endpoint */
    PATCH(url, init) {
      return coreFetch(url, { ...init, method: "PATCH" });
    },
    /** Call a TRACE endpoint */
    TRACE(url, init) {
      return coreFetch(url, { ...init, method: "TRACE" });
    },
    /** Register middleware */
    use(...middleware) {
      for (const m of middleware) {
        if (!m) {
          continue;
        }
        if (typeof m !== "object" || !("onRequest" in m || "onResponse" in m || "onError" in m)) {
          throw new Error("Middleware must be an object with one of `onRequest()`, `onResponse() or `onError()`");
        }
        globalMiddlewares.push(m);
      }
    },
    /** Unregister middleware */
    eject(...middleware) {
      for (const m of middleware) {
        const i = globalMiddlewares.indexOf(m);
        if (i !== -1) {
          globalMiddlewares.splice(i, 1);
        }
      }
    }
  };
}
function serializePrimitiveParam(name, value, options) {
  if (value === void 0 || value === null) {
    return "";
  }
  if (typeof value === "object") {
    throw new Error(
      "Deeply-nested arrays/objects aren\u2019t supported. Provide your own `querySerializer()` to handle these."
    );
  }
  return `${name}=${options?.allowReserved === true ? value : encodeURIComponent(value)}`;
}
function serializeObjectParam(name, value, options) {
  if (!value || typeof value !== "object") {
    return "";
  }
  const values = [];
  const joiner = {
    simple: ",",
    label: ".",
    matrix: ";"
  }[options.style] || "&";
  if (options.style !== "deepObject" && options.explode === false) {
    for (const k in value) {
      values.push(k, options.allowReserved === true ? value[k] : encodeURIComponent(value[k]));
    }
    const final2 = values.join(",");
    switch (options.style) {
      case "form": {
        return `${name}=${final2}`;
      }
      case "label": {
        return `.${final2}`;
      }
      case "matrix": {
        return `;${name}=${final2}`;
      }
      default: {
        return final2;
      }
    }
  }
  for (const k in value) {
    const finalName = options.style === "deepObject" ? `${name}[${k}]` : k;
    values.push(serializePrimitiveParam(finalName, value[k], options));
  }
  const final = values.join(joiner);
  return options.style === "label" || options.style === "matrix" ? `${joiner}${final}` : final;
}
function serializeArrayParam(name, value, options) {
  if (!Array.isArray(value)) {
    return "";
  }
  if (options.explode === false) {
    const joiner2 = { form: ",", spaceDelimited: "%20", pipeDelimited: "|" }[options.style] || ",";
    const final = (options.allowReserved === true ? value : value.map((v) => encodeURIComponent(v))).join(joiner2);
    switch (options.style) {
      case "simple": {
        return final;
      }
      case "label": {
        return `.${final}`;
      }
      case "matrix": {
        return `;${name}=${final}`;
      }
      // case "spaceDelimited":
      // case "pipeDelimited":
      default: {
        return `${name}=${final}`;
      }
    }
  }
  const joiner = { simple: ",", label: ".", matrix: ";" }[options.style] || "&";
  const values = [];
  for (const v of value) {
    if (options.style === "simple" || options.style === "label") {
      values.push(options.allowReserved === true ? v : encodeURIComponent(v));
    } else {
      values.push(serializePrimitiveParam(name, v, options));
    }
  }
  return options.style === "label" || options.style === "matrix" ? `${joiner}${values.join(joiner)}` : values.join(joiner);
}
function createQuerySerializer(options) {
  return function querySerializer(queryParams) {
    const search = [];
    if (queryParams && typeof queryParams === "object") {
      for (const name in queryParams) {
        const value = queryParams[name];
        if (value === void 0 || value === null) {
          continue;
        }
        if (Array.isArray(value)) {
          if (value.length === 0) {
            continue;
          }
          search.push(
            serializeArrayParam(name, value, {
              style: "form",
              explode: true,
              ...options?.array,
              allowReserved: options?.allowReserved || false
            })
          );
          continue;
        }
        if (typeof value === "object") {
          search.push(
            serializeObjectParam(name, value, {
              style: "deepObject",
              explode: true,
              ...options?.object,
              allowReserved: options?.allowReserved || false
            })
          );
          continue;
        }
        search.push(serializePrimitiveParam(name, value, options));
      }
    }
    return search.join("&");
  };
}
function defaultPathSerializer(pathname, pathParams) {
  let nextURL = pathname;
  for (const match of pathname.match(PATH_PARAM_RE) ?? []) {
    let name = match.substring(1, match.length - 1);
    let explode = false;
    let style = "simple";
    if (name.endsWith("*")) {
      explode = true;
      name = name.substring(0, name.length - 1);
    }
    if (name.startsWith(".")) {
      style = "label";
      name = name.substring(1);
    } else if (name.startsWith(";")) {
      style = "matrix";
      name = name.substring(1);
    }
    if (!pathParams || pathParams[name] === void 0 || pathParams[name] === null) {
      continue;
    }
    const value = pathParams[name];
    if (Array.isArray(value)) {
      nextURL = nextURL.replace(match, serializeArrayParam(name, value, { style, explode }));
      continue;
    }
    if (typeof value === "object") {
      nextURL = nextURL.replace(match, serializeObjectParam(name, value, { style, explode }));
      continue;
    }
    if (style === "matrix") {
      nextURL = nextURL.replace(match, `;${serializePrimitiveParam(name, value)}`);
      continue;
    }
    nextURL = nextURL.replace(match, style === "label" ? `.${encodeURIComponent(value)}` : encodeURIComponent(value));
  }
  return nextURL;
}
function defaultBodySerializer(body, headers) {
  if (body instanceof FormData) {
    return body;
  }
  if (headers) {
    const contentType = headers.get instanceof Function ? headers.get("Content-Type") ?? headers.get("content-type") : headers["Content-Type"] ?? headers["content-type"];
    if (contentType === "application/x-www-form-urlencoded") {
      return new URLSearchParams(body).toString();
    }
  }
  return JSON.stringify(body);
}
function createFinalURL(pathname, options) {
  let finalURL = `${options.baseUrl}${pathname}`;
  if (options.params?.path) {
    finalURL = options.pathSerializer(finalURL, options.params.path);
  }
  let search = options.querySerializer(options.params.query ?? {});
  if (search.startsWith("?")) {
    search = search.substring(1);
  }
  if (search) {
    finalURL += `?${search}`;
  }
  return finalURL;
}
function mergeHeaders(...allHeaders) {
  const finalHeaders = new Headers();
  for (const h of allHeaders) {
    if (!h || typeof h !== "object") {
      continue;
    }
    const iterator = h instanceof Headers ? h.entries() : Object.entries(h);
    for (const [k, v] of iterator) {
      if (v === null) {
        finalHeaders.delete(k);
      } else if (Array.isArray(v)) {
        for (const v2 of v) {
          finalHeaders.append(k, v2);
        }
      } else if (v !== void 0) {
        finalHeaders.set(k, v);
      }
    }
  }
  return finalHeaders;
}
function removeTrailingSlash(url) {
  if (url.endsWith("/")) {
    return url.substring(0, url.length - 1);
  }
  return url;
}

// src/internal/tls.ts
var pemCert = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/;
function checkCA(ca) {
  const node = globalThis.process?.versions?.node;
  if (typeof node !== "string") {
    throw new MusterError("invalid_request", "ca: only Node takes a CA of its own; a browser trusts the certificates of the system's store");
  }
  const list = typeof ca === "string" || ca instanceof Uint8Array ? [ca] : [...ca];
  if (list.length === 0) throw new MusterError("invalid_request", "ca: no certificate: want PEM text (e.g. readFileSync of the CA file)");
  return list.map((x, i) => {
    const s = typeof x === "string" ? x : x instanceof Uint8Array ? new TextDecoder().decode(x) : "";
    if (!pemCert.test(s)) {
      const which = list.length > 1 ? ` entry ${i}` : "";
      throw new MusterError("invalid_request", `ca${which}: no PEM certificate in it: want the PEM text (e.g. readFileSync of the CA file), not a path`);
    }
    return s;
  });
}
async function loadTLS(pems) {
  const undici = await Promise.resolve().then(() => __toESM(require_undici(), 1));
  const dispatcher = new undici.Agent({ connect: { ca: pems } });
  return { fetch: undici.fetch, dispatcher };
}

// src/loss.ts
var Losses = class {
  #live = /* @__PURE__ */ new Set();
  #late;
  /**
   * late: conformance tests only (Broken.LateLoss): when it answers true,
   * nothing is lost promptly, only at the keepalive.
   */
  constructor(late) {
    this.#late = late;
  }
  /** Registers a session created by this client. */
  track(s) {
    if (s.err === null) this.#live.add(s);
  }
  /** Forgets a session that ended. */
  untrack(s) {
    this.#live.delete(s);
  }
  /**
   * An answer (or a stream's opening answer) from host: ends at once every
   * session held by host whose epoch differs from the answer's Muster-Epoch,
   * and every session held by host when the answer is a family_unavailable
   * problem. Called before the caller sees the answer.
   */
  async answered(host, resp) {
    if (host === "" || this.#live.size === 0 || this.#late()) return;
    const epoch = resp.headers.get("Muster-Epoch") ?? "";
    if (epoch !== "") {
      for (const s of this.#held(host)) {
        if (s.epoch !== epoch) s.end(new SessionLostError(`its broker ${host} answered for another lifetime (epoch ${epoch}, the session's ${s.epoch})`));
      }
    }
    if (resp.status !== 503 || this.#live.size === 0) return;
    const mt = (resp.headers.get("Content-Type") ?? "").split(";")[0].trim().toLowerCase();
    if (mt !== "application/problem+json") return;
    let body;
    try {
      body = await resp.clone().text();
    } catch {
      return;
    }
    const perr = problemError(resp.status, resp.statusText, resp.headers.get("Content-Type"), body);
    if (perr.code !== "family_unavailable") return;
    for (const s of this.#held(host)) {
      s.end(new SessionLostError(`its broker ${host} no longer serves the family (family_unavailable)`, perr));
    }
  }
  /** The live sessions held by host, copied: ending one changes the set. */
  #held(host) {
    return [...this.#live].filter((s) => s.host === host);
  }
  /**
   * Ends s at once when err is the broker's session_not_found to one of its
   * own requests (acquire, extend, release, batch).
   */
  notFound(s, err) {
    if (this.#late() || !isCode(err, "session_not_found")) return;
    s.end(new SessionLostError(err.message, err));
  }
};

// src/transport.ts
var maxFollows = 2;
function parseBaseUrls(baseUrls) {
  const list = typeof baseUrls === "string" ? baseUrls.split(",") : [...baseUrls];
  if (list.length === 0) throw new MusterError("invalid_request", "no base URL: want http(s)://host[:port], or several");
  return list.map((raw) => {
    const s = String(raw).trim().replace(/\/+$/, "");
    let u;
    try {
      u = new URL(s);
    } catch {
      u = void 0;
    }
    if (u === void 0 || u.protocol !== "http:" && u.protocol !== "https:" || u.host === "") {
      throw new MusterError("invalid_request", `base URL ${JSON.stringify(s)}: want http(s)://host[:port], or several separated by commas`);
    }
    return s;
  });
}
var Transport = class {
  /**
   * The first (preferred) base URL without a trailing slash, e.g.
   * "http://127.0.0.1:7420": the one request URLs are built on before the
   * client picks their broker.
   */
  baseUrl;
  /** Every base URL the client was given, in order of preference, without trailing slashes. */
  baseUrls;
  /**
   * The generated low-level client (openapi-fetch over openapi.yaml's
   * paths), configured with this client's base URL, token and fetch. Its
   * answers are not checked.
   */
  raw;
  #token;
  #fetch;
  #follow;
  /** ClientOptions.ca as PEM strings; undefined without one. */
  #ca;
  /** undici's fetch and the Agent trusting #ca, made on the first request. */
  #tls;
  #bases;
  /** The current base URL: an index into #bases. */
  #cur = 0;
  /** The owner a 421 wrong_broker named (docs/placement.md); undefined for none. */
  #owner;
  #epoch = "";
  /** @internal the live sessions of this client, for prompt loss (loss.ts). */
  losses = new Losses(() => isBroken(this, Broken.LateLoss));
  /** The host (host:port) that answered each response fetch returned. */
  #hosts = /* @__PURE__ */ new WeakMap();
  /** What this client opened that is still open (close). */
  #open = /* @__PURE__ */ new Set();
  /**
   * baseUrls: the broker's base URL, or the base URLs of several brokers in
   * order of preference, as a list or as one string separated by commas
   * (docs/client-operations.md, "Several brokers").
   */
  constructor(baseUrls, options = {}) {
    this.baseUrls = Object.freeze(parseBaseUrls(baseUrls));
    this.baseUrl = this.baseUrls[0];
    this.#bases = this.baseUrls.map((s) => new URL(s));
    this.#token = options.token ?? "";
    this.#fetch = options.fetch;
    this.#follow = options.withoutFollow !== true;
    this.#ca = options.ca === void 0 ? void 0 : checkCA(options.ca);
    this.raw = createClient({
      baseUrl: this.baseUrl,
      fetch: (req) => this.fetch(req)
    });
  }
  /** The broker lifetime (Muster-Epoch header) of the last answer, "" before the first. */
  get epoch() {
    return this.#epoch;
  }
  /** The owner a wrong_broker answer sent the client to, "" when none is remembered. */
  get owner() {
    return this.#owner === void 0 ? "" : this.#owner.href.replace(/\/+$/, "");
  }
  /** The number of base URLs the client uses. */
  get #n() {
    return isBroken(this, Broken.SingleBroker) ? 1 : this.#bases.length;
  }
  /** Where the next request goes: the remembered owner, else the current base URL. */
  #target() {
    return this.#owner ?? this.#bases[this.#cur % this.#n];
  }
  /**
   * Leaves t, which failed: the owner is forgotten, or the current base URL
   * becomes the next one, unless another request moved on from t already.
   */
  #moveOn(t) {
    if (t === this.#owner) {
      if (!isBroken(this, Broken.StickyOwner)) this.#owner = void 0;
    } else if (this.#owner === void 0 && t === this.#bases[this.#cur % this.#n]) {
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
  fetch(input, init) {
    return this.#send(input, init, void 0);
  }
  /**
   * @internal the per-request fetch option of one of session's own requests
   * (keepalive, acquire, extend, release, batch, delete): a success answer
   * first moves the session to the broker that gave it (Held.answeredBy),
   * then prompt loss judges that answer (loss.ts).
   */
  sessionFetch(session) {
    return { fetch: (req) => this.#send(req, void 0, session) };
  }
  async #send(input, init, session) {
    if (input instanceof Request) this.authorize(input.headers);
    let f = this.#fetch ?? globalThis.fetch;
    let dispatcher;
    if (this.#ca !== void 0) {
      const tls = await (this.#tls ??= loadTLS(this.#ca));
      f = this.#fetch ?? tls.fetch;
      dispatcher = tls.dispatcher;
    }
    const url = input instanceof Request ? input.url : input;
    const signal = input instanceof Request ? input.signal : init?.signal ?? void 0;
    const body = input instanceof Request && input.body !== null ? await input.arrayBuffer() : void 0;
    let follows = 0;
    let fails = 0;
    for (; ; ) {
      const t = this.#target();
      const to = rebase(url, t);
      let resp;
      try {
        if (dispatcher !== void 0) {
          const i = input instanceof Request ? { method: input.method, headers: input.headers, body: body ?? null, signal: input.signal } : { ...init };
          resp = await f(to, { ...i, dispatcher });
        } else {
          const req = input instanceof Request ? new Request(to, { method: input.method, headers: input.headers, body: body ?? null, signal: input.signal }) : to;
          resp = await f(req, input instanceof Request ? void 0 : init);
        }
      } catch (err) {
        if (signal?.aborted === true && !isTimeout(signal.reason)) throw err;
        this.#moveOn(t);
        fails++;
        if (!signal?.aborted && notSent(err) && fails < this.#n + maxFollows) continue;
        throw err;
      }
      resp = await this.#record(resp, t.host, session);
      if (resp.status === 503 && await isProblem(resp, "family_unavailable")) {
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
        if (next === void 0) return resp;
        follows++;
        this.#owner = next;
        await discard(resp);
        continue;
      }
      return resp;
    }
  }
  async #record(resp, host, session) {
    const e = resp.headers.get("Muster-Epoch");
    if (e) this.#epoch = e;
    this.#hosts.set(resp, host);
    if (e && session !== void 0 && resp.ok) session.answeredBy(host, e);
    await this.losses.answered(host, resp);
    return resp;
  }
  /**
   * @internal the host (host:port) that answered resp, a response of fetch:
   * the owner a wrong_broker answer was followed to, or the base URL's; ""
   * for a response fetch did not return.
   */
  answeredBy(resp) {
    return this.#hosts.get(resp) ?? "";
  }
  /** @internal sets the Authorization header. */
  authorize(h) {
    if (this.#token !== "") h.set("Authorization", `Bearer ${this.#token}`);
  }
  /** @internal checks an openapi-fetch answer: a status other than want becomes a MusterError. */
  async call(answer, want) {
    const r = await answer;
    if (r.response.status !== want) {
      throw problemError(r.response.status, r.response.statusText, r.response.headers.get("Content-Type"), r.error ?? r.data);
    }
    return r.data;
  }
  /** @internal registers r, which this client opened, for close(). */
  opened(r) {
    this.#open.add(r);
  }
  /** @internal forgets r, which ended. */
  ended(r) {
    this.#open.delete(r);
  }
  /** @internal what this client opened that is still open, in the order it was opened. */
  openNow() {
    return [...this.#open];
  }
  /**
   * @internal closes the Agent of ClientOptions.ca and its pooled
   * connections; a later request makes a new one.
   */
  async closeAgent() {
    const tls = this.#tls;
    this.#tls = void 0;
    if (tls !== void 0) {
      try {
        await (await tls).dispatcher.close();
      } catch {
      }
    }
  }
};
function rebase(url, to) {
  const u = new URL(url);
  if (u.protocol === to.protocol && u.host === to.host) return url;
  u.protocol = to.protocol;
  u.host = to.host;
  return u.toString();
}
async function discard(resp) {
  try {
    await resp.body?.cancel();
  } catch {
  }
}
function isTimeout(reason) {
  return reason instanceof Error && reason.name === "TimeoutError";
}
var connectCodes = /* @__PURE__ */ new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL", "UND_ERR_CONNECT_TIMEOUT"]);
function notSent(err) {
  const seen = /* @__PURE__ */ new Set();
  const walk = (e) => {
    if (e === null || typeof e !== "object" || seen.has(e)) return false;
    seen.add(e);
    const x = e;
    if (typeof x.code === "string" && connectCodes.has(x.code)) return true;
    if (x.syscall === "connect" && x.code !== "ECONNRESET") return true;
    if (Array.isArray(x.errors) && x.errors.length > 0 && x.errors.every(walk)) return true;
    return walk(x.cause);
  };
  return walk(err);
}
async function isProblem(resp, code) {
  const mt = (resp.headers.get("Content-Type") ?? "").split(";")[0].trim().toLowerCase();
  if (mt !== "application/problem+json") return false;
  try {
    const p = JSON.parse(await resp.clone().text());
    return p !== null && typeof p === "object" && p.code === code;
  } catch {
    return false;
  }
}
async function misdirectedTo(resp) {
  const mt = (resp.headers.get("Content-Type") ?? "").split(";")[0].trim().toLowerCase();
  if (mt !== "application/problem+json") return void 0;
  let p;
  try {
    p = JSON.parse(await resp.clone().text());
  } catch {
    return void 0;
  }
  const q = p;
  if (q === null || typeof q !== "object" || q.code !== "wrong_broker" || typeof q.owner !== "string") return void 0;
  let u;
  try {
    u = new URL(q.owner);
  } catch {
    return void 0;
  }
  return (u.protocol === "http:" || u.protocol === "https:") && u.host !== "" ? u : void 0;
}

// src/client.ts
var MusterClient = class extends Transport {
  /**
   * baseUrls: the broker's base URL, or the base URLs of several brokers in
   * order of preference, as a list or as one string separated by commas
   * (docs/client-operations.md, "Several brokers").
   */
  constructor(baseUrls, options = {}) {
    super(baseUrls, options);
  }
  /**
   * Creates a session for ownerId (the application's logical owner, shown in
   * inventory items) with a TTL of ttlMs (1 s .. 10 min). It keeps itself
   * alive in the background until close() or until it is lost.
   */
  session(ownerId, ttlMs, options = {}) {
    return Session.create(this, ownerId, ttlMs, options);
  }
  /** Reads the current state of one exact route. */
  get(route, options = {}) {
    return getLease(this, route, options);
  }
  /** Reads one page of the held leases matching selector. */
  listPage(selector, options = {}) {
    return listPage(this, selector, options);
  }
  /**
   * Iterates over the held leases matching selector, one request per page,
   * lazily: leaving the loop early sends no further request. Every item
   * comes from one snapshot. cursor_expired and epoch_changed mean "list
   * again from the start".
   */
  list(selector, options = {}) {
    return listItems(this, selector, options);
  }
  /** Like list, page by page. */
  listPages(selector, options = {}) {
    return listPages(this, selector, options);
  }
  /**
   * Opens a watch stream over selectors (at most 32) as its own read-only
   * session and resolves once its snapshot marker has arrived.
   */
  watch(selectors, options = {}) {
    return openWatch(this, null, typeof selectors === "string" ? [selectors] : selectors, options);
  }
  /**
   * Starts an observer of selector and returns at once: see {@link Observer}.
   * Invalid options throw a MusterError invalid_request naming the option.
   */
  observe(selector, options = {}) {
    return new Observer(this, selector, options);
  }
  /** The fleet at root: one or more legal segments joined by "/". */
  fleet(root) {
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
  async close() {
    const open = this.openNow();
    const streams = open.filter((r) => !(r instanceof Session));
    const sessions = open.filter((r) => r instanceof Session);
    const errs = [];
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
  [asyncDispose]() {
    return this.close();
  }
};
export {
  Batch,
  ClosedError,
  Codes,
  EventTooLargeError,
  Fleet,
  Lease,
  LeaseLostError,
  MusterClient,
  MusterError,
  Observer,
  ReleasedError,
  SSEParser,
  Session,
  SessionLostError,
  StreamEndError,
  StreamEndedError,
  Subscription,
  advice,
  codes,
  defaultReconcileJitter,
  isAbort,
  isCode,
  maxBatchOps,
  maxReconcileMs,
  minReconcileMs,
  parseRoute,
  reconcileInterval
};
