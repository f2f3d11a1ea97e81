/**
 * Iterating an observer's views (`for await (const view of observer)`): the
 * latest view, coalesced. onChange listeners are called synchronously for
 * every change; an iterator whose body is slower than the changes must not
 * queue stale views, so it keeps only the newest one not yet taken, exactly
 * like reading view() when the body is ready for more.
 */
import { ClosedError } from "./errors.js";
import type { Item } from "./list.js";

/** A copy of an observer's view. */
export interface View {
  /**
   * True once a bootstrap completed, until the next event that may have made
   * the view stale (then items is the last known state).
   */
  readonly ready: boolean;
  /** The broker lifetime the items belong to. */
  readonly epoch: string;
  /** The broker revision the items are at. */
  readonly revision: number;
  /** Sorted by route. */
  readonly items: readonly Item[];
}

/** What viewsOf needs of an observer. */
export interface ViewSource {
  view(): View;
  onChange(listener: (view: View) => void): () => void;
  readonly stopped: boolean;
  readonly error: Error | null;
}

/**
 * Yields o's current view at once, then the newest view after each change
 * (intermediate views a slow body missed are skipped, never queued). Ends
 * after the observer stopped (its last view, not ready, is yielded first):
 * quietly after close(), otherwise by throwing why it stopped (a fatal
 * broker error such as forbidden, or the reason of its aborted signal).
 * Leaving the loop early only detaches the iterator: the observer keeps
 * running until close().
 */
export async function* viewsOf(o: ViewSource): AsyncGenerator<View, void, undefined> {
  let latest: View | null = o.view();
  let wake: (() => void) | null = null;
  const off = o.onChange((v) => {
    latest = v;
    const w = wake;
    wake = null;
    w?.();
  });
  try {
    for (;;) {
      if (latest !== null) {
        const v: View = latest;
        latest = null;
        yield v;
        continue;
      }
      if (o.stopped) break;
      await new Promise<void>((resolve) => (wake = resolve));
    }
  } finally {
    off();
  }
  const err = o.error;
  if (err !== null && !(err instanceof ClosedError)) throw err;
}
