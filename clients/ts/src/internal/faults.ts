/**
 * Deliberately wrong client and observer behaviour, for the conformance
 * tests only: a scenario that passes with a broken client proves nothing.
 *
 * Not part of the published API: this module is neither re-exported from the
 * package's entry point nor listed in package.json's "exports" (so
 * `@muster/client/...` cannot reach it), and nothing of it appears in the
 * public types: the modes of a client live in a WeakMap here, not on the
 * client. Zero for every client the tests did not break. The modes are the
 * Go SDK's (clients/go/observe_broken.go).
 */
export const Broken = {
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
  CreatorLoss: 1 << 17,
} as const;

const modes = new WeakMap<object, number>();

/**
 * Breaks client (a MusterClient) with the given modes (a bitwise or of
 * Broken), for the conformance tests: its requests, its sessions' leases and
 * its observers then misbehave that way. 0 repairs it.
 */
export function breakClient(client: object, m: number): void {
  if (m === 0) modes.delete(client);
  else modes.set(client, m);
}

/** The broken modes of client, 0 for every client breakClient was not given. */
export function brokenModes(client: object): number {
  return modes.get(client) ?? 0;
}

/** Whether client is broken with mode (one Broken flag). */
export function isBroken(client: object, mode: number): boolean {
  return (brokenModes(client) & mode) !== 0;
}
