/**
 * @muster/client: the TypeScript client of the Muster lease broker, for
 * Node ≥ 20 and browsers. See README.md.
 */
export { MusterClient } from "./client.js";
export type { ClientOptions, RequestOptions } from "./transport.js";
export {
  Codes,
  codes,
  advice,
  isCode,
  isAbort,
  MusterError,
  ClosedError,
  LeaseLostError,
  ReleasedError,
  SessionLostError,
  StreamEndedError,
  StreamEndError,
  type Code,
  type KnownCode,
  type Retry,
  type StreamEndReason,
} from "./errors.js";
export { Session, type SessionOptions } from "./session.js";
export { Lease, type AcquireOptions } from "./lease.js";
export { Batch, maxBatchOps, type BatchResult, type BatchOpKind } from "./batch.js";
export { parseRoute, type Item, type Page, type ListOptions, type LeaseStatus, type Route } from "./list.js";
export { Subscription, type Change, type ChangeKind, type Marker, type MarkerPage, type WatchOptions } from "./watch.js";
export { Observer, type ObserveOptions, type View, type ObserverStats } from "./observe.js";
export { Fleet, type Spec, type Kept, type SweepResult, type Plan, type Validator } from "./fleet.js";
export { reconcileInterval, minReconcileMs, maxReconcileMs, defaultReconcileJitter } from "./backoff.js";
export { SSEParser, EventTooLargeError, type SSEEvent } from "./sse.js";
export type { paths, components } from "./api/schema.js";
