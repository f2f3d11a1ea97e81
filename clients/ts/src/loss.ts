/**
 * Prompt loss. A session is lost the moment the client learns that it ended,
 * not at its next keepalive (docs/client-operations.md, "Prompt loss"):
 *
 * - any answer or stream from the broker that holds the session (the host,
 *   host:port, that last answered one of the session's own requests with
 *   success, after following wrong_broker: its creator, or the broker a
 *   planned move took the family to) carries another epoch (Muster-Epoch)
 *   than that success: that broker restarted, or the family came back to it
 *   as a new lifetime, and its sessions are gone;
 * - that broker answers family_unavailable: it stopped serving the family,
 *   and its sessions with it;
 * - the broker answers session_not_found to a request of the session
 *   (acquire, extend, release, batch; the keepalive already did).
 *
 * A connection error alone proves nothing: the session's local deadline
 * decides then. The rule lives here; MusterClient.fetch reports every answer
 * (answered), after a success of one of a session's own requests has moved
 * the session to the broker that gave it (Held.answeredBy: before that same
 * answer is judged, so a success from the creator under a new epoch, the
 * family moved back to it, ends nothing); the lease operations report their
 * session_not_found (notFound). The Go SDK's clients/go/loss.go and
 * Session.call are the reference.
 */
import { SessionLostError, isCode, problemError } from "./errors.js";

/** What the rule needs of a session: where it lives, its lifetime, and how to end it. */
export interface Held {
  /** The host (host:port) that last answered one of the session's requests with success: it holds the session. */
  readonly host: string;
  /** The lifetime (Muster-Epoch) of that broker when it answered. */
  readonly epoch: string;
  /**
   * Records host, answering one of the session's own requests with success
   * under epoch, as the broker that holds the session (docs/client-operations.md,
   * "Planned moves").
   */
  answeredBy(host: string, epoch: string): void;
  /** Null while the session lives. */
  readonly err: Error | null;
  /** Ends the session (and its leases) with cause, once; stops its keepalive. */
  end(cause: Error): void;
}

/** The live sessions of one client, for prompt loss. */
export class Losses {
  readonly #live = new Set<Held>();
  readonly #late: () => boolean;

  /**
   * late: conformance tests only (Broken.LateLoss): when it answers true,
   * nothing is lost promptly, only at the keepalive.
   */
  constructor(late: () => boolean) {
    this.#late = late;
  }

  /** Registers a session created by this client. */
  track(s: Held): void {
    if (s.err === null) this.#live.add(s);
  }

  /** Forgets a session that ended. */
  untrack(s: Held): void {
    this.#live.delete(s);
  }

  /**
   * An answer (or a stream's opening answer) from host: ends at once every
   * session held by host whose epoch differs from the answer's Muster-Epoch,
   * and every session held by host when the answer is a family_unavailable
   * problem. Called before the caller sees the answer.
   */
  async answered(host: string, resp: Response): Promise<void> {
    if (host === "" || this.#live.size === 0 || this.#late()) return;
    const epoch = resp.headers.get("Muster-Epoch") ?? "";
    if (epoch !== "") {
      for (const s of this.#held(host)) {
        if (s.epoch !== epoch) s.end(new SessionLostError(`its broker ${host} answered for another lifetime (epoch ${epoch}, the session's ${s.epoch})`));
      }
    }
    // family_unavailable is a 503 (the contract's status); other answers
    // are not read here.
    if (resp.status !== 503 || this.#live.size === 0) return;
    const mt = (resp.headers.get("Content-Type") ?? "").split(";")[0]!.trim().toLowerCase();
    if (mt !== "application/problem+json") return;
    let body: string;
    try {
      body = await resp.clone().text();
    } catch {
      return; // the body did not arrive: the caller sees why
    }
    const perr = problemError(resp.status, resp.statusText, resp.headers.get("Content-Type"), body);
    if (perr.code !== "family_unavailable") return;
    for (const s of this.#held(host)) {
      s.end(new SessionLostError(`its broker ${host} no longer serves the family (family_unavailable)`, perr));
    }
  }

  /** The live sessions held by host, copied: ending one changes the set. */
  #held(host: string): Held[] {
    return [...this.#live].filter((s) => s.host === host);
  }

  /**
   * Ends s at once when err is the broker's session_not_found to one of its
   * own requests (acquire, extend, release, batch).
   */
  notFound(s: Held, err: unknown): void {
    if (this.#late() || !isCode(err, "session_not_found")) return;
    s.end(new SessionLostError((err as Error).message, err));
  }
}
