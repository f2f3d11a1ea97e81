/**
 * Errors of the Muster contract and of this SDK.
 *
 * Every error the broker answers is a {@link MusterError} carrying the
 * contract's `code` string. Codes are append-only and never renamed: a broker
 * newer than this SDK may answer a code this file does not list, which still
 * reaches the caller as a `MusterError` keeping that string (never a crash).
 */
import type { components } from "./api/schema.js";

/**
 * A code this SDK knows (openapi.yaml's `ErrorCode`, listed under its
 * `x-extensible-enum`), or a newer code kept as a string: the contract's set
 * of codes is open.
 */
export type Code = KnownCode | (string & {});

/** A code listed in openapi.yaml's `ErrorCode` `x-extensible-enum` when this SDK was built. */
export type KnownCode = keyof typeof table;

/** Retry advice for an error: see {@link advice}. */
export type Retry =
  /** The same request fails again: fix the input, the configuration or the grants. */
  | "retry-no"
  /** The same request may succeed later: retry with exponential backoff and jitter. */
  | "retry-backoff"
  /** The state the request relied on is gone: start over from fresh state. */
  | "retry-restart";

/**
 * The code table of openapi.yaml's ErrorCode (its `x-extensible-enum`), each
 * with its retry advice, in the contract's order: the same table as the Go
 * SDK's errors.go. ErrorCode is an open string in the contract, so the
 * generated schema cannot list the codes; test/errors.test.ts checks this
 * table against the contract and against the Go SDK.
 */
const table = {
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
  family_unavailable: "retry-backoff",
} as const satisfies Record<string, Retry>;

/** Every code this SDK knows, in the contract's order. */
export const codes: readonly KnownCode[] = Object.keys(table) as KnownCode[];

/** The known codes as constants: `err.code === Codes.Fenced`. */
export const Codes = {
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
  FamilyUnavailable: "family_unavailable",
} as const satisfies Record<string, KnownCode>;

/**
 * An error answered by the broker (an RFC 9457 problem body), or a request
 * the SDK refused locally with the code the broker would have used (`status`
 * is then 0). Compare with {@link isCode} or `err.code === Codes.Fenced`.
 */
export class MusterError extends Error {
  override name = "MusterError";
  /** The contract's code; an unknown (newer) code is kept as given. */
  readonly code: Code;
  /** The HTTP status, 0 for a local refusal. */
  readonly status: number;
  /** The problem's title, e.g. "Conflict". */
  readonly title: string;
  /** A human-readable explanation; never contains a secret. */
  readonly detail: string;
  /**
   * On a limit (429), the bound that was hit: "broker" (a cap shared by every
   * family), "family" (the caller's family's quota), "session", "route" or
   * "root"; a newer value is kept as given. Empty otherwise.
   */
  readonly scope: string;
  /**
   * On wrong_broker (421), the base URL of the broker that serves the
   * caller's family. The client follows it by itself (see the
   * `withoutFollow` client option); it is set on the error only when
   * following failed. Empty otherwise.
   */
  readonly owner: string;

  constructor(code: Code, detail = "", status = 0, title = "", scope = "", owner = "") {
    super(detail === "" ? `muster: ${code}` : `muster: ${code}: ${detail}`);
    this.code = code;
    this.status = status;
    this.title = title;
    this.detail = detail;
    this.scope = scope;
    this.owner = owner;
  }

  /** The retry advice for this error: {@link advice}. */
  get advice(): Retry {
    return advice(this);
  }
}

/** Errors of the SDK itself, never sent by the broker. */

/** The Session, Subscription or Observer was closed by its owner. */
export class ClosedError extends Error {
  override name = "ClosedError";
  constructor() {
    super("muster: closed");
  }
}

/**
 * Every reason a Lease stopped being held other than its own release; `cause`
 * is the reason (a MusterError not_owner, fenced, lease_expired,
 * session_not_found, or the session's end).
 */
export class LeaseLostError extends Error {
  override name = "LeaseLostError";
  constructor(cause: unknown) {
    super(`muster: lease lost: ${messageOf(cause)}`, { cause });
  }
}

/** A Lease's `err` after its own successful release. */
export class ReleasedError extends Error {
  override name = "ReleasedError";
  constructor() {
    super("muster: lease released");
  }
}

/** Every reason a Session ended other than its own close; `cause` says why. */
export class SessionLostError extends Error {
  override name = "SessionLostError";
  constructor(detail: string, cause?: unknown) {
    super(`muster: session lost: ${detail}`, { cause });
  }
}

/**
 * A watch stream ended without a terminal event (the connection dropped, the
 * broker went away), or, as the base class of {@link StreamEndError}, with one.
 */
export class StreamEndedError extends Error {
  override name = "StreamEndedError";
  constructor(message = "muster: watch stream ended", cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
  }
}

/** The reasons of a stream's terminal event. */
export type StreamEndReason = components["schemas"]["StreamEndReason"];

/**
 * A terminal event of a watch stream: overflow (this client read too slowly:
 * changes were lost, rebuild the view), superseded, unsubscribed,
 * session_closed or shutdown.
 */
export class StreamEndError extends StreamEndedError {
  override name = "StreamEndError";
  readonly reason: StreamEndReason;
  /** The revision at which the stream ended, 0 when the broker sent none. */
  readonly revision: number;
  constructor(reason: StreamEndReason, revision = 0) {
    super(`muster: watch stream ended: ${reason}`);
    this.reason = reason;
    this.revision = revision;
  }
}

/**
 * Reports whether err is a MusterError with the given code; a type guard, so
 * that `if (isCode(e, "lease_held")) e.status` type-checks in a `catch (e)`
 * (where e is `unknown`), and `e.code` is then narrowed to the literal.
 */
export function isCode<C extends Code>(err: unknown, code: C): err is MusterError & { readonly code: C } {
  return err instanceof MusterError && err.code === code;
}

/** Reports whether err is an abort of an AbortSignal (the caller cancelled). */
export function isAbort(err: unknown): boolean {
  return err instanceof Error && (err.name === "AbortError" || err.name === "TimeoutError");
}

/**
 * What to do after err. A MusterError is advised by its code (an unknown code
 * by its status: 5xx and 429 back off, anything else does not retry).
 * LeaseLostError, SessionLostError and stream ends advise a restart; a
 * ClosedError or an abort advises no retry; any other error (a transport
 * failure) advises backoff.
 */
export function advice(err: unknown): Retry {
  if (err === undefined || err === null) return "retry-no";
  if (err instanceof MusterError) {
    const known = (table as Record<string, Retry>)[err.code];
    if (known !== undefined) return known;
    return err.status >= 500 || err.status === 429 ? "retry-backoff" : "retry-no";
  }
  if (err instanceof LeaseLostError || err instanceof SessionLostError || err instanceof StreamEndedError) {
    return "retry-restart";
  }
  if (err instanceof ClosedError || err instanceof ReleasedError || isAbort(err)) return "retry-no";
  return "retry-backoff";
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * problemError turns a non-success answer into a MusterError: the problem
 * body's code when there is one; otherwise a code derived from the status, so
 * a gateway's 502 is still advised as retryable. body is the answer's text, or
 * its JSON value when already parsed.
 */
export function problemError(status: number, statusText: string, contentType: string | null, body: unknown): MusterError {
  const mt = (contentType ?? "").split(";")[0]!.trim().toLowerCase();
  let value = body;
  if (typeof body === "string" && (mt === "application/problem+json" || mt === "application/json")) {
    try {
      value = JSON.parse(body);
    } catch {
      // not JSON: fall through to the status
    }
  }
  if ((mt === "application/problem+json" || mt === "application/json") && typeof value === "object" && value !== null) {
    const q = value as { code?: unknown; title?: unknown; detail?: unknown; scope?: unknown; owner?: unknown };
    if (typeof q.code === "string" && q.code !== "") {
      return new MusterError(
        q.code,
        typeof q.detail === "string" ? q.detail : "",
        status,
        typeof q.title === "string" && q.title !== "" ? q.title : statusText,
        typeof q.scope === "string" ? q.scope : "",
        typeof q.owner === "string" ? q.owner : "",
      );
    }
  }
  let code: string;
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
  const text = typeof body === "string" ? body : body === undefined ? "" : JSON.stringify(body);
  return new MusterError(code, `HTTP ${status} without a problem body: ${text.slice(0, 200).trim()}`, status, statusText);
}
