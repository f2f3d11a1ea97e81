/**
 * The table of held leases: one row per route, kept in step with the
 * observer's view (rows appear, change and leave), and the diff of two views
 * as the events the log shows.
 */
import type { Item } from "@muster/client";
import { clock, el } from "./dom.js";

/** One difference between two views. */
export interface Diff {
  kind: "acquired" | "changed" | "left";
  route: string;
  item: Item | null;
}

/** What changed from prev to next (routes in order). */
export function diff(prev: ReadonlyMap<string, Item>, next: readonly Item[]): Diff[] {
  const out: Diff[] = [];
  const seen = new Set<string>();
  for (const it of next) {
    seen.add(it.route);
    const old = prev.get(it.route);
    if (old === undefined) out.push({ kind: "acquired", route: it.route, item: it });
    else if (!same(old, it)) {
      out.push({ kind: "changed", route: it.route, item: it });
    }
  }
  for (const route of prev.keys()) if (!seen.has(route)) out.push({ kind: "left", route, item: null });
  return out.sort((a, b) => (a.route < b.route ? -1 : a.route > b.route ? 1 : 0));
}

/** Whether a and b describe the same holding at the same renewal count. */
function same(a: Item, b: Item): boolean {
  return a.holderIncarnation === b.holderIncarnation && a.ownerId === b.ownerId && a.renewals === b.renewals && +a.acquiredAt === +b.acquiredAt;
}

interface Row {
  tr: HTMLTableRowElement;
  item: Item;
  expires: HTMLTableCellElement;
  /** performance.now() at which the lease expires unless renewed: the broker's remaining_ms from when the row was seen. */
  deadline: number;
}

/** The rows of the table body. */
export class LeaseTable {
  readonly #body: HTMLElement;
  readonly #rows = new Map<string, Row>();

  constructor(body: HTMLElement) {
    this.#body = body;
  }

  /** The items shown, by route. */
  get items(): Map<string, Item> {
    return new Map([...this.#rows].map(([k, r]) => [k, r.item]));
  }

  /** Makes the rows those of items (sorted by route): new rows are highlighted, gone ones removed. */
  show(items: readonly Item[]): void {
    const keep = new Set<string>();
    let before: Element | null = this.#body.firstElementChild;
    for (const it of items) {
      keep.add(it.route);
      let r = this.#rows.get(it.route);
      if (r !== undefined && r.item !== it && same(r.item, it)) {
        // The same holding read again (a reconciliation): refresh the expiry only.
        r.item = it;
        r.deadline = performance.now() + it.remainingMs;
      } else if (r === undefined || r.item !== it) {
        const fresh = this.#row(it);
        if (r !== undefined) r.tr.replaceWith(fresh.tr);
        r = fresh;
        this.#rows.set(it.route, r);
      }
      if (r.tr !== before) this.#body.insertBefore(r.tr, before);
      before = r.tr.nextElementSibling;
    }
    for (const [route, r] of this.#rows) {
      if (!keep.has(route)) {
        r.tr.remove();
        this.#rows.delete(route);
      }
    }
    this.tick();
  }

  /** Updates every "expires in" cell. */
  tick(): void {
    const now = performance.now();
    for (const r of this.#rows.values()) {
      const ms = r.deadline - now;
      if (ms > 0) {
        r.expires.textContent = `${(ms / 1000).toFixed(1)} s`;
        r.expires.classList.remove("late");
      } else {
        // The lease was renewed (extends send no event) or its expiry event is on the way.
        r.expires.textContent = "renewed?";
        r.expires.title = "past the expiry seen last; extends send no event, the next reconciliation refreshes the row";
        r.expires.classList.add("late");
      }
    }
  }

  #row(it: Item): Row {
    const tr = el("tr", "fresh");
    tr.dataset["route"] = it.route;
    const td = (cls: string, text: string): HTMLTableCellElement => {
      const c = el("td", cls, text);
      tr.append(c);
      return c;
    };
    td("route", it.route);
    td("owner", it.ownerId);
    td("inc opt", it.holderIncarnation).title = it.holderIncarnation;
    td("opt", clock(it.acquiredAt)).title = it.acquiredAt.toISOString();
    const expires = td("num expires", "");
    td("num renewals", String(it.renewals));
    return { tr, item: it, expires, deadline: performance.now() + it.remainingMs };
  }
}
