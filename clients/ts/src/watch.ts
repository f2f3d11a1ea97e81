/**
 * Watch streams: fetch streaming with the bearer token in a header, read by
 * this package's SSE parser. A stream is never resumed: after an end, open a
 * new one and rebuild from its marker (or use observe, which does all of this).
 */
import type { components } from "./api/schema.js";
import type { RequestOptions, Transport } from "./transport.js";
import { ClosedError, MusterError, StreamEndedError, StreamEndError, problemError, type StreamEndReason } from "./errors.js";
import { itemFrom, type Item } from "./list.js";
import { SSEParser, type SSEEvent } from "./sse.js";
import { asyncDispose } from "./internal/dispose.js";
import { signalOf } from "./internal/signal.js";

/** How the held set changed for a route: acquired adds (or replaces) the holder; every other kind removes it. */
export type ChangeKind = components["schemas"]["ChangeKind"];

/** One change of the held set for one selector of the stream: a hint, not a command; it grants nothing. */
export interface Change {
  /** The selector (as given to watch) whose registration matched. */
  readonly selector: string;
  /** The concrete route that changed. */
  readonly route: string;
  readonly kind: ChangeKind;
  /** The broker revision of the change. */
  readonly revision: number;
  /** The new holder when kind is "acquired", else null. */
  readonly item: Item | null;
}

/** The first snapshot page of one selector; nextCursor (when not "") pages the rest through listPage. */
export interface MarkerPage {
  readonly selector: string;
  readonly items: readonly Item[];
  readonly nextCursor: string;
}

/**
 * The first event of a stream: the broker lifetime and revision at which the
 * registrations were made, and per selector (in the order given) the first
 * page of its snapshot at that revision. Every change after it has a higher
 * revision.
 */
export interface Marker {
  readonly epoch: string;
  readonly revision: number;
  readonly selectors: readonly MarkerPage[];
}

/** Options of watch. */
export type WatchOptions = RequestOptions;

/** The terminal events of the contract. */
const endReasons: ReadonlySet<string> = new Set<StreamEndReason>(["overflow", "superseded", "unsubscribed", "session_closed", "shutdown", "moved"]);

/** Decodes a terminal event, null for any other event. */
function streamEnd(ev: SSEEvent): StreamEndError | null {
  if (!endReasons.has(ev.name)) return null;
  let revision = 0;
  try {
    const e = JSON.parse(ev.data) as { revision?: unknown };
    if (typeof e.revision === "number") revision = e.revision;
  } catch {
    // the reason is in the event name; the body is optional
  }
  return new StreamEndError(ev.name as StreamEndReason, revision);
}

/** Anything with a session id that can own registrations. */
export interface SessionRef {
  readonly id: string;
}

/**
 * One open watch stream, an async iterable of its changes in revision order.
 * The iteration ends when the stream ends; `err` then says why: a
 * StreamEndError (overflow, superseded, …), a StreamEndedError wrapping a
 * transport error, or a ClosedError after close() or the caller's signal.
 *
 * A consumer that stops reading makes the broker end the stream with
 * overflow once its queue fills; nothing is skipped silently. Read it from
 * one consumer at a time.
 */
export class Subscription implements AsyncIterable<Change> {
  /** The stream's first event. */
  readonly marker: Marker;
  readonly #c: Transport;
  readonly #session: SessionRef | null;
  readonly #ac: AbortController;
  readonly #unlink: () => void;
  readonly #reader: ReadableStreamDefaultReader<Uint8Array>;
  readonly #decoder: TextDecoder;
  readonly #parser: SSEParser;
  readonly #bySub = new Map<string, string>();
  #queue: SSEEvent[];
  #err: Error | null = null;
  #reading: Promise<unknown> | null = null;

  /** @internal use MusterClient.watch or Session.watch. */
  constructor(
    c: Transport,
    session: SessionRef | null,
    ac: AbortController,
    unlink: () => void,
    stream: StreamReader,
    marker: Marker,
  ) {
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
  get err(): Error | null {
    return this.#err;
  }

  /**
   * The next change, or null once the stream has ended (then `err` is set).
   * Never rejects. Not to be called again before the previous call settled.
   */
  async next(): Promise<Change | null> {
    for (;;) {
      const ev = await this.#nextEvent();
      if (ev === null) return null;
      if (ev.name !== "change") {
        const end = streamEnd(ev);
        if (end !== null) {
          this.#end(end);
          return null;
        }
        continue; // an event this SDK does not know: ignore, for compatibility
      }
      let ch: Change;
      try {
        const c = JSON.parse(ev.data) as components["schemas"]["ChangeEvent"];
        if (typeof c.route !== "string" || typeof c.kind !== "string" || typeof c.revision !== "number") {
          throw new Error("route, kind or revision missing");
        }
        ch = {
          selector: this.#bySub.get(c.subscription_id) ?? "",
          route: c.route,
          kind: c.kind,
          revision: c.revision,
          item: c.item ? itemFrom(c.item) : null,
        };
      } catch (e) {
        this.#end(new StreamEndedError(`muster: watch stream ended: undecodable change: ${String(e)}`, e));
        return null;
      }
      return ch;
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Change, void, undefined> {
    try {
      for (;;) {
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
  async close(): Promise<void> {
    this.#end(new ClosedError());
    if (this.#reading !== null) await this.#reading.catch(() => undefined);
  }

  /** close(): `await using sub = await client.watch(...)` ends the stream at the end of the scope. */
  [asyncDispose](): Promise<void> {
    return this.close();
  }

  /**
   * Removes the registration of selector (the original string given to
   * watch) from the session; the broker ends the stream with unsubscribed
   * when it was the last one. Only a session stream has registrations to
   * remove; a session-less stream answers invalid_request: close it instead.
   */
  async unsubscribe(selector: string, options: RequestOptions = {}): Promise<void> {
    if (this.#session === null) {
      throw new MusterError("invalid_request", "a session-less stream has no registration to remove: Close it");
    }
    await this.#c.call(
      this.#c.raw.DELETE("/v1/sessions/{session_id}/subscriptions", {
        params: { path: { session_id: this.#session.id }, query: { selector } },
        ...signalOf(options.signal),
      }),
      204,
    );
  }

  /** @internal records the subscription ids of the marker. */
  bind(id: string, selector: string): void {
    this.#bySub.set(id, selector);
  }

  /** @internal the next event of any kind, null at the end. */
  async #nextEvent(): Promise<SSEEvent | null> {
    for (;;) {
      if (this.#err !== null) return null;
      const ev = this.#queue.shift();
      if (ev !== undefined) return ev;
      let chunk: ReadableStreamReadResult<Uint8Array>;
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

  #end(err: Error): void {
    if (this.#err === null) this.#err = err;
    this.#queue = [];
    this.#unlink();
    this.#ac.abort();
    this.#c.ended(this);
  }
}

/** The reading state of one event stream, handed from openWatch to its Subscription. */
interface StreamReader {
  reader: ReadableStreamDefaultReader<Uint8Array>;
  decoder: TextDecoder;
  parser: SSEParser;
  /** Events parsed and not yet consumed. */
  queue: SSEEvent[];
}

/** Reads the next event of s, null at the end of the stream. */
async function readEvent(s: StreamReader): Promise<SSEEvent | null> {
  for (;;) {
    const ev = s.queue.shift();
    if (ev !== undefined) return ev;
    const chunk = await s.reader.read();
    if (chunk.done) return null;
    s.queue = s.parser.feed(s.decoder.decode(chunk.value, { stream: true }));
  }
}

/**
 * @internal opens a stream over selectors (of session, when not null) and
 * resolves once its marker arrived.
 */
export async function openWatch(c: Transport, session: SessionRef | null, selectors: readonly string[], o: WatchOptions): Promise<Subscription> {
  if (selectors.length === 0) {
    throw new MusterError("invalid_selector", "Watch needs at least one selector");
  }
  o.signal?.throwIfAborted();
  const ac = new AbortController();
  const onAbort = (): void => ac.abort();
  o.signal?.addEventListener("abort", onAbort, { once: true });
  const unlink = (): void => o.signal?.removeEventListener("abort", onAbort);
  try {
    const q = new URLSearchParams();
    for (const s of selectors) q.append("selector", s);
    const headers = new Headers({ Accept: "text/event-stream" });
    c.authorize(headers);
    if (session !== null) headers.set("Muster-Session", session.id);
    const resp = await c.fetch(`${c.baseUrl}/v1/leases/watch?${q.toString()}`, { headers, signal: ac.signal });
    const mt = (resp.headers.get("Content-Type") ?? "").split(";")[0]!.trim();
    if (resp.status !== 200 || mt !== "text/event-stream" || resp.body === null) {
      const body = await resp.text();
      if (resp.status === 200) throw new Error(`muster: watch answered ${JSON.stringify(mt)}, not an event stream`);
      throw problemError(resp.status, resp.statusText, resp.headers.get("Content-Type"), body);
    }
    const stream: StreamReader = { reader: resp.body.getReader(), decoder: new TextDecoder(), parser: new SSEParser(), queue: [] };
    let ev: SSEEvent | null;
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
    let m: components["schemas"]["SnapshotEvent"];
    try {
      m = JSON.parse(ev.data) as components["schemas"]["SnapshotEvent"];
    } catch (e) {
      throw new Error(`muster: decoding the snapshot marker: ${String(e)}`, { cause: e });
    }
    const marker: Marker = {
      epoch: m.epoch,
      revision: m.revision,
      selectors: m.subscriptions.map((s) => ({ selector: s.selector, items: s.items.map(itemFrom), nextCursor: s.next_cursor ?? "" })),
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
