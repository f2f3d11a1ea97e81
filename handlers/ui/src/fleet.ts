/**
 * The fleet panel: a root's desired set and its live gap (missing: desired
 * and not held; orphans: held and not desired), read again whenever the
 * observed leases change (at most every second) and every 10 s.
 */
import { isCode, MusterError, type MusterClient } from "@muster/client";

export { describe };
import { describe } from "./describe.js";
import { byId, fillList, setAlert } from "./dom.js";

const minGapMs = 1_000;
const everyMs = 10_000;

export class FleetPanel {
  #client: MusterClient | null = null;
  #root = "";
  #live = "";
  #busy = false;
  #again = false;
  #last = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #ac = new AbortController();

  /** Shows the fleet at root against the leases held under live ("" hides the panel). */
  show(client: MusterClient, root: string, live: string): void {
    this.stop();
    this.#client = client;
    this.#root = root;
    this.#live = live;
    this.#ac = new AbortController();
    if (root !== "" && live !== "") this.changed();
  }

  /** Stops refreshing. */
  stop(): void {
    this.#ac.abort();
    clearTimeout(this.#timer);
    this.#client = null;
  }

  /** The observed leases changed: refresh soon. */
  changed(): void {
    if (this.#client === null || this.#root === "") return;
    if (this.#busy) {
      this.#again = true;
      return;
    }
    clearTimeout(this.#timer);
    const wait = Math.max(0, this.#last + minGapMs - Date.now());
    this.#timer = setTimeout(() => void this.#refresh(), wait);
  }

  async #refresh(): Promise<void> {
    const c = this.#client;
    if (c === null) return;
    const signal = this.#ac.signal;
    this.#busy = true;
    this.#last = Date.now();
    try {
      const f = c.fleet(this.#root);
      const desired: string[] = [];
      for await (const s of f.desired({ signal })) desired.push(s.name);
      const gap = await f.gap(this.#live, { signal });
      if (signal.aborted) return;
      fillList(byId("desired"), desired);
      fillList(byId("missing"), gap.missing);
      fillList(byId("orphans"), gap.orphans);
      byId("desired-n").textContent = `(${desired.length})`;
      byId("missing-n").textContent = `(${gap.missing.length})`;
      byId("orphans-n").textContent = `(${gap.orphans.length})`;
      byId("fleet-at").textContent = `fleet://${this.#root} against ${this.#live} at revision ${gap.revision}, read ${new Date().toLocaleTimeString([], { hour12: false })}`;
      byId("fleet").hidden = false;
      setAlert(byId("fleet-error"), "");
    } catch (e) {
      if (signal.aborted) return;
      byId("fleet").hidden = true;
      setAlert(byId("fleet-error"), describe(e));
      if (e instanceof MusterError && (isCode(e, "forbidden") || isCode(e, "unauthenticated") || e.advice === "retry-no")) return; // no point asking again
    } finally {
      this.#busy = false;
    }
    if (signal.aborted) return;
    if (this.#again) {
      this.#again = false;
      this.changed();
    } else {
      this.#timer = setTimeout(() => void this.#refresh(), everyMs);
    }
  }
}

